//! The running scheduler: informers feed a cache and a queue; workers decide and bind.
//!
//! As kube-scheduler with one profile: pods with `spec.schedulerName` `default-scheduler`
//! (or empty) that are not bound, not finished and not being deleted go to a work queue
//! keyed `namespace/name`. A worker takes a key, picks a node over the [`SchedulerCache`]
//! snapshot, assumes the pod there at once (under the cache's lock, so decisions are
//! serialised and never oversubscribe a node) and POSTs the binding, recording a `Scheduled`
//! event. A pod that fits nowhere gets a `FailedScheduling` Warning event and the condition
//! `PodScheduled=False` reason `Unschedulable` with the [`FitError`] message,
//! and is retried with a per-pod back-off (1 s doubling to 10 s, upstream's
//! `podInitialBackoff`/`podMaxBackoff`) — and at once when the cluster changes in a way that
//! may make it fit: a node added, a node's schedulability changed, a pod deleted or finished.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, PodCondition,
};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use tokio_util::sync::CancellationToken;

use kcm_machinery::controller::api_status::{ApiStatus, error_message};
use kcm_machinery::events::{EventRecorder, EventType, SystemClock, WallClock};
use kcm_machinery::informer::shared_informer;
use kcm_machinery::informer::{
    DeletedObject, HasSynced, ResourceEventHandler, SharedIndexInformer, SharedInformerFactory,
    meta_namespace_key, split_meta_namespace_key, wait_for_cache_sync,
};
use kcm_machinery::workqueue::{ItemExponentialFailureRateLimiter, RateLimitingQueue};

use super::cache::SchedulerCache;
use super::dynamic_resources::{
    DynamicResources, NodeClaims, PreFilter as DraPreFilter, uses_resource_claims,
};
use super::resources::occupies_node;
use super::volumes::{PodVolumes, PreFilter, VolumeBinding, uses_claims};
use super::{DEFAULT_SCHEDULER_NAME, ExtraFilter, FitError};
use crate::NO_RESYNC;
use crate::client::{ClusterClient, KubeClusterClient};
use crate::dra::KubeDraClient;
use crate::storage::client::KubeVolumeClient;

/// Event reason for a pod bound to a node.
pub const SCHEDULED_REASON: &str = "Scheduled";
/// Event reason for a pod that could not be scheduled or bound.
pub const FAILED_SCHEDULING_REASON: &str = "FailedScheduling";
/// `PodScheduled` condition reason when no node fits (core/v1 `PodReasonUnschedulable`).
pub const POD_REASON_UNSCHEDULABLE: &str = "Unschedulable";
/// `PodScheduled` condition reason for other failures, e.g. a rejected binding (core/v1
/// `PodReasonSchedulerError`).
pub const POD_REASON_SCHEDULER_ERROR: &str = "SchedulerError";
/// The first retry delay of an unschedulable pod (upstream's `podInitialBackoffDuration`).
pub const POD_INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// The longest retry delay of an unschedulable pod (upstream's `podMaxBackoffDuration`).
pub const POD_MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Event messages longer than this are truncated (apimachinery's `NoteLengthLimit`).
pub const NOTE_LENGTH_LIMIT: usize = 1024;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why the scheduler could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An informer refused the scheduler's event handler.
    #[error("scheduler: registering the {resource} event handler: {source}")]
    Handler {
        /// `pods`, `nodes`, or a storage resource.
        resource: &'static str,
        /// The informer's error.
        #[source]
        source: shared_informer::Error,
    },
}

/// How the scheduler behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Pods naming this scheduler (or none) are scheduled; others are left alone.
    pub scheduler_name: String,
    /// Workers scheduling and binding pods in parallel (decisions themselves are serialised).
    pub workers: usize,
    /// The first retry delay of a pod that could not be scheduled.
    pub initial_backoff: Duration,
    /// The longest retry delay.
    pub max_backoff: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            scheduler_name: DEFAULT_SCHEDULER_NAME.to_owned(),
            workers: 16,
            initial_backoff: POD_INITIAL_BACKOFF,
            max_backoff: POD_MAX_BACKOFF,
        }
    }
}

/// What the event handlers and the workers share.
struct Shared {
    config: SchedulerConfig,
    /// Nodes and bound or assumed pods. Never held across an `.await`.
    cache: Mutex<SchedulerCache>,
    /// Keys of pods to schedule.
    queue: RateLimitingQueue<String>,
    /// Keys of pods whose last attempt found no node: moved to the queue at once when the
    /// cluster changes. Never held across an `.await`.
    unschedulable: Mutex<HashSet<String>>,
    /// The volume binding, when the scheduler watches claims, volumes and classes.
    volumes: OnceLock<Arc<VolumeBinding>>,
    /// Dynamic resource allocation, when the scheduler watches ResourceClaims, ResourceSlices
    /// and DeviceClasses.
    dra: OnceLock<Arc<DynamicResources>>,
}

impl Shared {
    fn cache(&self) -> MutexGuard<'_, SchedulerCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn unschedulable(&self) -> MutexGuard<'_, HashSet<String>> {
        self.unschedulable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn responsible_for(&self, pod: &Pod) -> bool {
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or_default();
        name.is_empty() || name == self.config.scheduler_name
    }

    /// Whether the pod waits for this scheduler: ours, unbound, not finished, not being
    /// deleted, not gated.
    fn needs_scheduling(&self, pod: &Pod) -> bool {
        let Some(spec) = pod.spec.as_ref() else {
            return false;
        };
        spec.node_name.as_deref().is_none_or(str::is_empty)
            && spec.scheduling_gates.as_ref().is_none_or(Vec::is_empty)
            && pod.metadata.deletion_timestamp.is_none()
            && occupies_node(pod)
            && self.responsible_for(pod)
    }

    /// Moves every unschedulable pod to the queue now, as upstream's
    /// `MoveAllToActiveOrBackoffQueue` on a cluster event that may make them fit.
    fn move_all_unschedulable(&self) {
        let keys: Vec<String> = self.unschedulable().drain().collect();
        if !keys.is_empty() {
            tracing::debug!(
                pods = keys.len(),
                "cluster changed; retrying unschedulable pods"
            );
        }
        for key in keys {
            self.queue.add(key);
        }
    }
}

fn is_bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// Feeds pod events to the cache (bound pods) and the queue (pods to schedule).
struct PodHandler(Arc<Shared>);

impl ResourceEventHandler<Pod> for PodHandler {
    fn on_add(&self, pod: Arc<Pod>, _is_in_initial_list: bool) {
        let Ok(key) = meta_namespace_key(pod.as_ref()) else {
            return;
        };
        if is_bound(&pod) {
            self.0.cache().update_pod(&key, &pod);
        } else if self.0.needs_scheduling(&pod) {
            self.0.queue.add(key);
        }
    }

    fn on_update(&self, old: Arc<Pod>, new: Arc<Pod>) {
        let Ok(key) = meta_namespace_key(new.as_ref()) else {
            return;
        };
        if is_bound(&new) {
            let freed = self.0.cache().update_pod(&key, &new);
            self.0.unschedulable().remove(&key);
            if freed {
                self.0.move_all_unschedulable();
            }
            return;
        }
        if !self.0.needs_scheduling(&new) {
            self.0.unschedulable().remove(&key);
            return;
        }
        // An unschedulable pod is retried on its back-off or on a cluster change, not on
        // its own status updates (our condition patch among them); a change to what it asks
        // for is worth a try at once.
        let waiting = self.0.unschedulable().contains(&key);
        let claim_statuses = |p: &Pod| {
            p.status
                .as_ref()
                .and_then(|s| s.resource_claim_statuses.clone())
        };
        // The resourceclaim controller recording a claim's name may make the pod schedulable
        // (upstream's UpdatePodGeneratedResourceClaim event).
        let asks_differently = old.spec != new.spec
            || old.metadata.labels != new.metadata.labels
            || claim_statuses(&old) != claim_statuses(&new);
        if !waiting || asks_differently {
            tracing::trace!(pod = %key, waiting, asks_differently, "pod to schedule changed");
            self.0.unschedulable().remove(&key);
            self.0.queue.add(key);
        }
    }

    fn on_delete(&self, obj: DeletedObject<Pod>) {
        let pod = obj.object();
        let Ok(key) = meta_namespace_key(pod.as_ref()) else {
            return;
        };
        self.0.unschedulable().remove(&key);
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let freed = self.0.cache().remove_pod_with_uid(&key, uid);
        if freed {
            self.0.move_all_unschedulable();
        }
    }
}

/// Whether a node update may let an unschedulable pod fit (upstream's queueing hints for
/// Node/Update): schedulability, labels, taints, allocatable or readiness changed. Status
/// heartbeats alone do not count.
fn node_change_may_help(old: &Node, new: &Node) -> bool {
    let ready = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone())
    };
    let unschedulable = |n: &Node| n.spec.as_ref().and_then(|s| s.unschedulable);
    let taints = |n: &Node| n.spec.as_ref().and_then(|s| s.taints.clone());
    let allocatable = |n: &Node| n.status.as_ref().and_then(|s| s.allocatable.clone());
    unschedulable(old) != unschedulable(new)
        || old.metadata.labels != new.metadata.labels
        || taints(old) != taints(new)
        || allocatable(old) != allocatable(new)
        || ready(old) != ready(new)
}

/// Feeds node events to the cache.
struct NodeHandler(Arc<Shared>);

impl ResourceEventHandler<Node> for NodeHandler {
    fn on_add(&self, node: Arc<Node>, _is_in_initial_list: bool) {
        self.0.cache().set_node(node);
        self.0.move_all_unschedulable();
    }

    fn on_update(&self, old: Arc<Node>, new: Arc<Node>) {
        let may_help = node_change_may_help(&old, &new);
        self.0.cache().set_node(new);
        if may_help {
            self.0.move_all_unschedulable();
        }
    }

    fn on_delete(&self, obj: DeletedObject<Node>) {
        if let Some(name) = obj.object().metadata.name.as_deref() {
            self.0.cache().remove_node(name);
        }
    }
}

/// Claims, volumes and classes coming or changing may make a pod with claims fit (upstream's
/// queueing hints for PersistentVolumeClaim, PersistentVolume and StorageClass Add/Update).
struct StorageHandler(Arc<Shared>);

impl<K> ResourceEventHandler<K> for StorageHandler {
    fn on_add(&self, _obj: Arc<K>, is_in_initial_list: bool) {
        if !is_in_initial_list {
            self.0.move_all_unschedulable();
        }
    }

    fn on_update(&self, _old: Arc<K>, _new: Arc<K>) {
        self.0.move_all_unschedulable();
    }

    fn on_delete(&self, _obj: DeletedObject<K>) {}
}

/// The informers of the volume binding.
#[derive(Clone)]
struct StorageInformers {
    claims: SharedIndexInformer<PersistentVolumeClaim>,
    volumes: SharedIndexInformer<PersistentVolume>,
    classes: SharedIndexInformer<StorageClass>,
}

/// The informers of dynamic resource allocation.
#[derive(Clone)]
struct DraInformers {
    claims: SharedIndexInformer<ResourceClaim>,
    slices: SharedIndexInformer<ResourceSlice>,
    classes: SharedIndexInformer<DeviceClass>,
}

/// A scheduler for the pods of one cluster. Cheap to clone; clones are the same scheduler.
#[derive(Clone)]
pub struct Scheduler {
    shared: Arc<Shared>,
    client: Arc<dyn ClusterClient>,
    recorder: Arc<dyn EventRecorder>,
    clock: Arc<dyn WallClock>,
    pods: SharedIndexInformer<Pod>,
    nodes: SharedIndexInformer<Node>,
    storage: Option<StorageInformers>,
    dra: Option<DraInformers>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

/// A reference to `pod` for events.
pub fn pod_reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// `message` cut to [`NOTE_LENGTH_LIMIT`] bytes with a ` ...` suffix, as upstream's
/// `truncateMessage` (on a character boundary).
pub fn truncate_message(message: &str) -> String {
    if message.len() <= NOTE_LENGTH_LIMIT {
        return message.to_owned();
    }
    let suffix = " ...";
    let mut end = NOTE_LENGTH_LIMIT - suffix.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{suffix}", &message[..end])
}

impl Scheduler {
    /// A scheduler over `client`, sharing `factory`'s pod, node, claim, volume and class
    /// informers (start the factory after this, as with any controller), with the volume
    /// binding. Must be called inside a Tokio runtime.
    pub fn new(
        client: Client,
        factory: &SharedInformerFactory,
        recorder: Arc<dyn EventRecorder>,
    ) -> Result<Self> {
        let mut scheduler = Self::with_client(
            Arc::new(KubeClusterClient::new(client.clone())),
            factory.pods(),
            factory.nodes(),
            recorder,
            SchedulerConfig::default(),
            Arc::new(SystemClock),
        )?;
        let storage = StorageInformers {
            claims: factory.informer_for::<PersistentVolumeClaim>(),
            volumes: factory.informer_for::<PersistentVolume>(),
            classes: factory.informer_for::<StorageClass>(),
        };
        let binding = VolumeBinding::new(
            storage.claims.indexer().clone(),
            storage.volumes.indexer().clone(),
            storage.classes.indexer().clone(),
            Arc::new(KubeVolumeClient::new(client.clone())),
        );
        scheduler.enable_volume_binding(binding, storage)?;
        let dra = DraInformers {
            claims: factory.informer_for::<ResourceClaim>(),
            slices: factory.informer_for::<ResourceSlice>(),
            classes: factory.informer_for::<DeviceClass>(),
        };
        let plugin = DynamicResources::new(
            dra.claims.indexer().clone(),
            dra.slices.indexer().clone(),
            dra.classes.indexer().clone(),
            Arc::new(KubeDraClient::new(client)),
        );
        scheduler.enable_dynamic_resources(plugin, dra)?;
        Ok(scheduler)
    }

    /// Turns dynamic resource allocation on: pods with `spec.resourceClaims` wait for their
    /// claims, are filtered by the devices the nodes' ResourceSlices publish, and their claims
    /// are allocated and reserved before the pod is bound. A claim, slice or class added or
    /// changed retries the unschedulable pods.
    fn enable_dynamic_resources(
        &mut self,
        plugin: DynamicResources,
        informers: DraInformers,
    ) -> Result<()> {
        let handler = |resource| move |source| Error::Handler { resource, source };
        informers
            .claims
            .add_event_handler_with_resync_period(StorageHandler(self.shared.clone()), NO_RESYNC)
            .map_err(handler("resourceclaims"))?;
        informers
            .slices
            .add_event_handler_with_resync_period(StorageHandler(self.shared.clone()), NO_RESYNC)
            .map_err(handler("resourceslices"))?;
        informers
            .classes
            .add_event_handler_with_resync_period(StorageHandler(self.shared.clone()), NO_RESYNC)
            .map_err(handler("deviceclasses"))?;
        // Set once, here, before the scheduler runs.
        let _ = self.shared.dra.set(Arc::new(plugin));
        self.dra = Some(informers);
        Ok(())
    }

    /// Turns the volume binding on: pods with claims are filtered by it and their volumes
    /// bound before the pod.
    fn enable_volume_binding(
        &mut self,
        binding: VolumeBinding,
        storage: StorageInformers,
    ) -> Result<()> {
        let handler = |resource| move |source| Error::Handler { resource, source };
        storage
            .claims
            .add_event_handler_with_resync_period(StorageHandler(self.shared.clone()), NO_RESYNC)
            .map_err(handler("persistentvolumeclaims"))?;
        storage
            .volumes
            .add_event_handler_with_resync_period(StorageHandler(self.shared.clone()), NO_RESYNC)
            .map_err(handler("persistentvolumes"))?;
        storage
            .classes
            .add_event_handler_with_resync_period(StorageHandler(self.shared.clone()), NO_RESYNC)
            .map_err(handler("storageclasses"))?;
        // Set once, here, before the scheduler runs.
        let _ = self.shared.volumes.set(Arc::new(binding));
        self.storage = Some(storage);
        Ok(())
    }

    /// A scheduler with every dependency given: the API seam, the pod and node informers
    /// (started by the caller), the event recorder, the configuration and the wall clock
    /// condition timestamps are read from. Must be called inside a Tokio runtime.
    pub fn with_client(
        client: Arc<dyn ClusterClient>,
        pods: SharedIndexInformer<Pod>,
        nodes: SharedIndexInformer<Node>,
        recorder: Arc<dyn EventRecorder>,
        config: SchedulerConfig,
        clock: Arc<dyn WallClock>,
    ) -> Result<Self> {
        let limiter =
            ItemExponentialFailureRateLimiter::new(config.initial_backoff, config.max_backoff);
        let shared = Arc::new(Shared {
            config,
            cache: Mutex::new(SchedulerCache::new()),
            queue: RateLimitingQueue::new(limiter),
            unschedulable: Mutex::new(HashSet::new()),
            volumes: OnceLock::new(),
            dra: OnceLock::new(),
        });
        pods.add_event_handler_with_resync_period(PodHandler(shared.clone()), NO_RESYNC)
            .map_err(|source| Error::Handler {
                resource: "pods",
                source,
            })?;
        nodes
            .add_event_handler_with_resync_period(NodeHandler(shared.clone()), NO_RESYNC)
            .map_err(|source| Error::Handler {
                resource: "nodes",
                source,
            })?;
        Ok(Self {
            shared,
            client,
            recorder,
            clock,
            pods,
            nodes,
            storage: None,
            dra: None,
        })
    }

    /// Waits for the informers to sync, then schedules until `cancel` fires; returns once
    /// the workers have stopped.
    pub async fn run(&self, cancel: CancellationToken) {
        let mut synced: Vec<&dyn HasSynced> = vec![&self.pods, &self.nodes];
        if let Some(storage) = &self.storage {
            synced.extend([
                &storage.claims as &dyn HasSynced,
                &storage.volumes,
                &storage.classes,
            ]);
        }
        if let Some(dra) = &self.dra {
            synced.extend([&dra.claims as &dyn HasSynced, &dra.slices, &dra.classes]);
        }
        if !wait_for_cache_sync("scheduler", &cancel, &synced).await {
            self.shared.queue.shut_down();
            return;
        }
        tracing::info!(workers = self.shared.config.workers, "starting scheduler");
        let workers: Vec<_> = (0..self.shared.config.workers.max(1))
            .map(|_| {
                let this = self.clone();
                tokio::spawn(async move { this.worker().await })
            })
            .collect();
        cancel.cancelled().await;
        self.shared.queue.shut_down();
        for worker in workers {
            if let Err(err) = worker.await {
                tracing::error!(%err, "scheduler worker failed");
            }
        }
        tracing::info!("scheduler stopped");
    }

    async fn worker(&self) {
        while let Some(key) = self.shared.queue.get().await {
            self.schedule_one(&key).await;
            self.shared.queue.done(&key);
        }
    }

    /// How many pods the cache accounts (bound or assumed); for tests and metrics.
    pub fn cached_pods(&self) -> usize {
        self.shared.cache().pod_count()
    }

    /// Schedules the pod under `key` once, as kube-scheduler's `ScheduleOne`.
    pub async fn schedule_one(&self, key: &str) {
        let shared = &self.shared;
        let pod = match split_meta_namespace_key(key) {
            Ok((Some(ns), name)) => self.pods.lister().get(ns, name),
            _ => None,
        };
        let Some(pod) = pod.filter(|p| shared.needs_scheduling(p)) else {
            shared.queue.forget(&key.to_owned());
            shared.unschedulable().remove(key);
            return;
        };
        let binding = shared.volumes.get().filter(|_| uses_claims(&pod));
        let claims = match binding.map(|b| b.pre_filter(&pod)) {
            Some(PreFilter::Unresolvable(message)) => {
                let fit = FitError {
                    num_nodes: shared.cache().node_count(),
                    reasons: BTreeMap::new(),
                    pre_filter: Some(message),
                };
                tracing::debug!(pod = key, reason = %fit, "unable to schedule pod; volumes; waiting");
                shared.unschedulable().insert(key.to_owned());
                self.record_failure(&pod, POD_REASON_UNSCHEDULABLE, &fit.to_string())
                    .await;
                shared.queue.add_rate_limited(key.to_owned());
                return;
            }
            Some(PreFilter::Claims(claims)) => Some(claims),
            Some(PreFilter::NoClaims) | None => None,
        };
        let dra = shared.dra.get().filter(|_| uses_resource_claims(&pod));
        let decision = {
            let mut cache = shared.cache();
            if cache.is_assumed(key) {
                // Bound a moment ago (or binding its volumes); the informer has not shown it.
                return;
            }
            // Under the cache's lock, so the devices seen free are not being taken by a
            // decision in another worker.
            let dra_state = match dra.map(|d| d.pre_filter(&pod)) {
                Some(DraPreFilter::Unresolvable(message)) => Err(FitError {
                    num_nodes: cache.node_count(),
                    reasons: BTreeMap::new(),
                    pre_filter: Some(message),
                }),
                Some(DraPreFilter::Claims(state)) => Ok(Some(state)),
                Some(DraPreFilter::NoClaims) | None => Ok(None),
            };
            match dra_state {
                Err(fit) => Err(fit),
                Ok(dra_state) => {
                    let filter = |node: &Node| -> Vec<String> {
                        let mut reasons = match (binding, &claims) {
                            (Some(binding), Some(claims)) => binding
                                .find_pod_volumes(claims, node)
                                .err()
                                .unwrap_or_default(),
                            _ => Vec::new(),
                        };
                        if reasons.is_empty()
                            && let (Some(dra), Some(state)) = (dra, &dra_state)
                        {
                            reasons = dra.filter(state, node).err().unwrap_or_default();
                        }
                        reasons
                    };
                    let filtered = (binding.is_some() && claims.is_some()) || dra_state.is_some();
                    let extra = filtered.then_some(&filter as ExtraFilter<'_>);
                    match cache.select_with(&pod, extra) {
                        Ok(selection) => {
                            let node = cache.node(&selection.node);
                            let volumes = match (binding, &claims, &node) {
                                (Some(binding), Some(claims), Some(node)) => binding
                                    .find_pod_volumes(claims, node)
                                    .ok()
                                    .filter(|v| !v.all_bound()),
                                _ => None,
                            };
                            if let (Some(binding), Some(volumes)) = (binding, &volumes) {
                                binding.assume(volumes);
                            }
                            let resource_claims = match (dra, &dra_state, &node) {
                                (Some(dra), Some(state), Some(node)) => {
                                    dra.filter(state, node).ok()
                                }
                                _ => None,
                            };
                            if let (Some(dra), Some(resource_claims)) = (dra, &resource_claims) {
                                dra.reserve(resource_claims);
                            }
                            cache.assume(key, &pod, &selection.node);
                            Ok((selection.node, volumes, resource_claims))
                        }
                        Err(fit) => Err(fit),
                    }
                }
            }
        };
        match decision {
            Ok((node, Some(volumes), resource_claims)) => {
                // The binding cycle waits for the PV controller; run it beside the workers,
                // as kube-scheduler runs each binding cycle in its own goroutine.
                let this = self.clone();
                let key = key.to_owned();
                tokio::spawn(async move {
                    this.bind_volumes_then_pod(&key, &pod, &node, volumes, resource_claims)
                        .await
                });
            }
            Ok((node, None, resource_claims)) => {
                self.bind_claims_then_pod(key, &pod, &node, resource_claims)
                    .await
            }
            Err(fit) => {
                tracing::debug!(pod = key, reason = %fit, "unable to schedule pod; no fit; waiting");
                shared.unschedulable().insert(key.to_owned());
                self.record_failure(&pod, POD_REASON_UNSCHEDULABLE, &fit.to_string())
                    .await;
                shared.queue.add_rate_limited(key.to_owned());
            }
        }
    }

    /// The DynamicResources PreBind (claims allocated and reserved), then the binding; a
    /// failure retries the pod, as upstream's `handleBindingCycleError`.
    async fn bind_claims_then_pod(
        &self,
        key: &str,
        pod: &Pod,
        node: &str,
        resource_claims: Option<NodeClaims>,
    ) {
        let shared = &self.shared;
        if let (Some(dra), Some(resource_claims)) = (shared.dra.get(), &resource_claims)
            && let Err(err) = dra.pre_bind(pod, resource_claims).await
        {
            shared.cache().forget(key);
            shared.move_all_unschedulable();
            tracing::warn!(pod = key, node, error = %err, "allocating resource claims failed; retrying");
            let message = format!("running PreBind plugin \"DynamicResources\": {err}");
            self.record_failure(pod, POD_REASON_SCHEDULER_ERROR, &message)
                .await;
            shared.queue.add_rate_limited(key.to_owned());
            return;
        }
        self.bind(key, pod, node).await;
    }

    /// PreBind (the volume binding's writes and wait), then the binding; a failure undoes the
    /// reservation and retries the pod, as upstream's `handleBindingCycleError`.
    async fn bind_volumes_then_pod(
        &self,
        key: &str,
        pod: &Pod,
        node: &str,
        volumes: PodVolumes,
        resource_claims: Option<NodeClaims>,
    ) {
        let shared = &self.shared;
        let Some(binding) = shared.volumes.get() else {
            if let (Some(dra), Some(resource_claims)) = (shared.dra.get(), &resource_claims) {
                dra.unreserve(resource_claims);
            }
            return;
        };
        let result = binding.bind_pod_volumes(node, &volumes).await;
        binding.revert(&volumes);
        match result {
            Ok(()) => {
                self.bind_claims_then_pod(key, pod, node, resource_claims)
                    .await
            }
            Err(err) => {
                if let (Some(dra), Some(resource_claims)) = (shared.dra.get(), &resource_claims) {
                    dra.unreserve(resource_claims);
                }
                shared.cache().forget(key);
                shared.move_all_unschedulable();
                tracing::warn!(pod = key, node, error = %err, "binding volumes failed; retrying");
                let message = format!("running PreBind plugin \"VolumeBinding\": {err}");
                self.record_failure(pod, POD_REASON_SCHEDULER_ERROR, &message)
                    .await;
                shared.queue.add_rate_limited(key.to_owned());
            }
        }
    }

    async fn bind(&self, key: &str, pod: &Pod, node: &str) {
        let shared = &self.shared;
        match self.client.bind(pod, node).await {
            Ok(()) => {
                tracing::debug!(pod = key, node, "bound pod");
                self.recorder.event(
                    &pod_reference(pod),
                    EventType::Normal,
                    SCHEDULED_REASON,
                    format!("Successfully assigned {} to {node}", key),
                );
                shared.queue.forget(&key.to_owned());
                shared.unschedulable().remove(key);
            }
            Err(err) => {
                // Forgetting an assumed pod frees its resources, as a pod deletion would.
                shared.cache().forget(key);
                shared.move_all_unschedulable();
                if err.is_not_found() || err.is_conflict() {
                    // Gone, being deleted, recreated or bound by someone else: the informer
                    // will tell what to do next.
                    tracing::debug!(pod = key, node, error = %error_message(&err), "binding refused");
                    shared.queue.forget(&key.to_owned());
                    return;
                }
                tracing::warn!(pod = key, node, error = %error_message(&err), "binding failed; retrying");
                let message = format!("binding rejected: {}", error_message(&err));
                self.record_failure(pod, POD_REASON_SCHEDULER_ERROR, &message)
                    .await;
                shared.queue.add_rate_limited(key.to_owned());
            }
        }
    }

    /// Records a `FailedScheduling` event and sets `PodScheduled=False` with `reason` and
    /// `message` unless the pod already says so, as upstream's `handleSchedulingFailure`.
    async fn record_failure(&self, pod: &Pod, reason: &str, message: &str) {
        self.recorder.event(
            &pod_reference(pod),
            EventType::Warning,
            FAILED_SCHEDULING_REASON,
            truncate_message(message),
        );
        let existing = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
        if existing.is_some_and(|c| {
            c.status == "False"
                && c.reason.as_deref() == Some(reason)
                && c.message.as_deref() == Some(message)
        }) {
            return;
        }
        let transition = existing
            .filter(|c| c.status == "False")
            .and_then(|c| c.last_transition_time.clone())
            .unwrap_or(Time(self.clock.now()));
        let condition = PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            last_transition_time: Some(transition),
            last_probe_time: None,
            observed_generation: None,
        };
        if let Err(err) = self.client.patch_pod_condition(pod, &condition).await {
            tracing::warn!(
                pod = %pod_reference(pod).name.unwrap_or_default(),
                error = %error_message(&err),
                "updating the PodScheduled condition failed"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{Action, FakeCluster, Verb, spawn_informer};
    use crate::node::{NodeTemplate, build_node};
    use kcm_machinery::events::FakeRecorder;
    use kcm_testing::{PodSpecBuilder, container};

    struct Harness {
        fake: FakeCluster,
        recorder: FakeRecorder,
        /// The running scheduler's state, to look at what it keeps per pod.
        shared: Arc<Shared>,
        cancel: CancellationToken,
    }

    impl Drop for Harness {
        fn drop(&mut self) {
            self.cancel.cancel();
        }
    }

    impl Harness {
        async fn start() -> Self {
            let fake = FakeCluster::new();
            let recorder = FakeRecorder::new();
            let cancel = CancellationToken::new();
            let pods = fake.pod_informer();
            let nodes = fake.node_informer();
            let scheduler = Scheduler::with_client(
                Arc::new(fake.clone()),
                pods.clone(),
                nodes.clone(),
                Arc::new(recorder.clone()),
                SchedulerConfig::default(),
                fake.clock(),
            )
            .expect("scheduler");
            spawn_informer(pods.clone(), cancel.clone());
            spawn_informer(nodes.clone(), cancel.clone());
            let shared = Arc::clone(&scheduler.shared);
            tokio::spawn({
                let cancel = cancel.clone();
                async move { scheduler.run(cancel).await }
            });
            Self {
                fake,
                recorder,
                shared,
                cancel,
            }
        }

        async fn add_node(&self, index: usize, cpu: &str) {
            let template = NodeTemplate {
                cpu: cpu.into(),
                ..NodeTemplate::default()
            };
            let node = build_node(index, &template, self.fake.clock().now());
            self.fake.create_node(&node).await.expect("create node");
        }

        fn node_of(&self, name: &str) -> Option<String> {
            self.fake
                .pod("default", name)
                .and_then(|p| p.spec.and_then(|s| s.node_name))
        }

        fn events(&self, reason: &str) -> Vec<String> {
            self.recorder
                .events()
                .into_iter()
                .filter(|e| e.reason == reason)
                .map(|e| e.message)
                .collect()
        }

        fn binds(&self) -> usize {
            self.fake
                .actions()
                .iter()
                .filter(|a| matches!(a, Action::Bind { .. }))
                .count()
        }
    }

    fn pod(name: &str, cpu: &str) -> Pod {
        kcm_testing::pod(name)
            .container(container("app").request("cpu", cpu))
            .build()
    }

    async fn eventually(what: &str, f: impl Fn() -> bool) {
        for _ in 0..2000 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting for {what}");
    }

    fn scheduled_condition(p: &Pod) -> Option<PodCondition> {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
            .cloned()
    }

    #[tokio::test(start_paused = true)]
    async fn binds_pods_and_records_scheduled_events() {
        let h = Harness::start().await;
        h.add_node(0, "4").await;
        h.add_node(1, "4").await;
        h.fake.create_pod(pod("web", "100m"));
        eventually("web bound", || h.node_of("web").is_some()).await;
        let node = h.node_of("web").expect("bound");
        assert_eq!(
            h.events(SCHEDULED_REASON),
            vec![format!("Successfully assigned default/web to {node}")]
        );
        assert_eq!(h.binds(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn leaves_other_schedulers_pods_alone() {
        let h = Harness::start().await;
        h.add_node(0, "4").await;
        let mut other = pod("other", "100m");
        if let Some(spec) = other.spec.as_mut() {
            spec.scheduler_name = Some("my-scheduler".into());
        }
        h.fake.create_pod(other);
        h.fake.create_pod(pod("mine", "100m"));
        eventually("mine bound", || h.node_of("mine").is_some()).await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(h.node_of("other"), None);
        assert_eq!(h.binds(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn cordoned_node_gets_no_new_pods() {
        let h = Harness::start().await;
        h.add_node(0, "4").await;
        h.add_node(1, "4").await;
        h.fake.update_node("kcm-node-0", |n| {
            n.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
        });
        for i in 0..6 {
            h.fake.create_pod(pod(&format!("p{i}"), "100m"));
        }
        eventually("all bound", || {
            (0..6).all(|i| h.node_of(&format!("p{i}")).is_some())
        })
        .await;
        for i in 0..6 {
            assert_eq!(h.node_of(&format!("p{i}")).as_deref(), Some("kcm-node-1"));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn assumed_pods_keep_two_quick_pods_from_oversubscribing() {
        let h = Harness::start().await;
        h.add_node(0, "1").await;
        h.fake.create_pod(pod("a", "600m"));
        h.fake.create_pod(pod("b", "600m"));
        eventually("one bound and one refused", || {
            !h.events(FAILED_SCHEDULING_REASON).is_empty()
                && (h.node_of("a").is_some() || h.node_of("b").is_some())
        })
        .await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        let bound = [h.node_of("a"), h.node_of("b")]
            .iter()
            .filter(|n| n.is_some())
            .count();
        assert_eq!(bound, 1, "1 cpu holds one 600m pod");
        assert_eq!(h.binds(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn unschedulable_pod_gets_condition_event_and_backoff() {
        let h = Harness::start().await;
        h.add_node(0, "1").await;
        h.fake.create_pod(pod("big", "2"));
        eventually("condition", || {
            h.fake
                .pod("default", "big")
                .and_then(|p| scheduled_condition(&p))
                .is_some()
        })
        .await;
        let start = tokio::time::Instant::now();
        let p = h.fake.pod("default", "big").expect("pod");
        let c = scheduled_condition(&p).expect("condition");
        assert_eq!(c.status, "False");
        assert_eq!(c.reason.as_deref(), Some(POD_REASON_UNSCHEDULABLE));
        let message = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
        assert_eq!(c.message.as_deref(), Some(message));
        assert_eq!(
            h.events(FAILED_SCHEDULING_REASON),
            vec![message.to_string()]
        );
        let warning = h.recorder.events()[0].type_;
        assert_eq!(warning, EventType::Warning);

        // Retries at +1 s, +3 s, +7 s, +15 s (1 s doubling), then every 10 s: +25 s, +35 s.
        tokio::time::sleep_until(start + Duration::from_millis(20_500)).await;
        assert_eq!(h.events(FAILED_SCHEDULING_REASON).len(), 5);
        tokio::time::sleep_until(start + Duration::from_millis(34_500)).await;
        assert_eq!(h.events(FAILED_SCHEDULING_REASON).len(), 6);
        tokio::time::sleep_until(start + Duration::from_millis(35_500)).await;
        assert_eq!(h.events(FAILED_SCHEDULING_REASON).len(), 7);
        // The condition was patched once: later attempts found it already said so.
        let patches = h
            .fake
            .actions()
            .iter()
            .filter(|a| matches!(a, Action::PatchPodCondition { .. }))
            .count();
        assert_eq!(patches, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn unschedulable_pod_is_retried_at_once_when_a_node_arrives() {
        let h = Harness::start().await;
        h.add_node(0, "1").await;
        h.fake.create_pod(pod("big", "2"));
        eventually("refused", || h.events(FAILED_SCHEDULING_REASON).len() == 2).await;
        // Now backing off for 2 s; a new node must not wait for that.
        let added = tokio::time::Instant::now();
        h.add_node(1, "4").await;
        eventually("bound", || h.node_of("big").is_some()).await;
        assert!(added.elapsed() < Duration::from_millis(500));
        assert_eq!(h.node_of("big").as_deref(), Some("kcm-node-1"));
    }

    #[tokio::test(start_paused = true)]
    async fn deleting_a_pod_makes_room_at_once() {
        let h = Harness::start().await;
        h.add_node(0, "1").await;
        h.fake.create_pod(pod("first", "600m"));
        eventually("first bound", || h.node_of("first").is_some()).await;
        h.fake.create_pod(pod("second", "600m"));
        eventually("second refused twice", || {
            h.events(FAILED_SCHEDULING_REASON).len() == 2
        })
        .await;
        let deleted = tokio::time::Instant::now();
        h.fake.delete_pod_gracefully("default", "first", Some(0));
        eventually("second bound", || h.node_of("second").is_some()).await;
        assert!(deleted.elapsed() < Duration::from_millis(500));
    }

    /// A pod that never fitted and is then deleted leaves nothing behind: not in the
    /// unschedulable set, no failure count in the queue's rate limiter, not in the cache.
    #[tokio::test(start_paused = true)]
    async fn a_deleted_unschedulable_pod_leaves_no_state() {
        let h = Harness::start().await;
        h.add_node(0, "1").await;
        h.fake.create_pod(pod("big", "2"));
        eventually("refused twice", || {
            h.events(FAILED_SCHEDULING_REASON).len() == 2
        })
        .await;
        let key = "default/big".to_owned();
        assert!(h.shared.unschedulable().contains(&key));
        assert!(h.shared.queue.num_requeues(&key) > 0, "backing off");

        h.fake.delete_pod_gracefully("default", "big", Some(0));
        // Past the longest back-off: the pending retry finds the pod gone.
        tokio::time::sleep(POD_MAX_BACKOFF + Duration::from_secs(1)).await;
        assert!(h.shared.unschedulable().is_empty());
        assert_eq!(h.shared.queue.num_requeues(&key), 0, "forgotten");
        assert_eq!(h.shared.cache().pod_count(), 0);
        assert_eq!(h.events(FAILED_SCHEDULING_REASON).len(), 2, "not retried");
    }

    #[tokio::test(start_paused = true)]
    async fn failed_binding_is_reported_and_retried() {
        let h = Harness::start().await;
        h.add_node(0, "4").await;
        h.fake.fail_next(
            Verb::Bind,
            kcm_machinery::controller::api_status::internal_error("etcd is sad"),
        );
        h.fake.create_pod(pod("web", "100m"));
        eventually("bound", || h.node_of("web").is_some()).await;
        assert_eq!(h.binds(), 2);
        let failures = h.events(FAILED_SCHEDULING_REASON);
        assert_eq!(failures.len(), 1);
        assert!(
            failures[0].starts_with("binding rejected: "),
            "{failures:?}"
        );
        assert_eq!(h.events(SCHEDULED_REASON).len(), 1);
    }

    #[test]
    fn node_heartbeats_alone_do_not_wake_unschedulable_pods() {
        let now = jiff::Timestamp::UNIX_EPOCH;
        let old = build_node(0, &NodeTemplate::default(), now);
        let later = now + jiff::SignedDuration::from_secs(60);
        let mut beat = old.clone();
        if let Some(status) = beat.status.as_mut() {
            status.conditions = Some(crate::node::healthy_conditions(later, now));
        }
        assert!(!node_change_may_help(&old, &beat));
        let mut cordoned = old.clone();
        cordoned
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(false);
        assert!(node_change_may_help(&old, &cordoned));
        let mut relabelled = old.clone();
        relabelled
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("disk".into(), "ssd".into());
        assert!(node_change_may_help(&old, &relabelled));
    }

    #[test]
    fn long_messages_are_truncated_like_upstream() {
        let long = "x".repeat(2000);
        let cut = truncate_message(&long);
        assert_eq!(cut.len(), NOTE_LENGTH_LIMIT);
        assert!(cut.ends_with(" ..."));
        assert_eq!(truncate_message("short"), "short");
    }
}
