//! The Deployment controller: constants, construction, `Run`, the event handlers, the worker wiring and `syncDeployment` (upstream `deployment_controller.go`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::controller::ref_manager::{ControllerRefManager, recheck_owner};
use kcm_machinery::controller::{
    ApiStatus, ErrorPolicy, Retry, get_controller_of, process_next_work_item, run_workers,
};
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::{meta_namespace_key, split_meta_namespace_key};
use kcm_machinery::informer::lister::Lister;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, OwnWrites, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, wait_for_synced,
};
use kcm_machinery::labels::Selector;
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::Resource;
use kube::core::GroupVersionKind;
use tokio_util::sync::CancellationToken;

use super::client::{ApiDeploymentClient, ClientPatcher, DeploymentClient};
use super::util::accessors::{
    RECREATE_STRATEGY, ROLLING_UPDATE_STRATEGY, generation, is_paused, object_key, strategy_type,
};
use super::util::find::deployments_for_replica_set;
use super::util::new_replica_set::{DEPLOYMENT_API_VERSION, DEPLOYMENT_KIND};
use super::util::rollback_plan::rollback_to;
use super::{Error, Operation, Result};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// How many times a failing Deployment is requeued (rate limited) before it is dropped from
/// the queue until its next event, as upstream's `maxRetries` (5 ms doubling up to about 82 s).
pub const MAX_RETRIES: usize = 15;

/// How the workers treat a failed sync, as upstream's `handleErr`: an error saying the
/// namespace is being deleted is forgotten (retrying cannot help); any other error (or a panic)
/// requeues the key rate limited, at most [`MAX_RETRIES`] times in a row, then drops it until
/// its next event.
pub const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("Error syncing deployment")
    .with_requeue_level(tracing::Level::INFO)
    .with_max_retries(MAX_RETRIES, "Dropping deployment out of the queue")
    .with_classifier(|_key, err| {
        if err.is_namespace_terminating() {
            Retry::Forget
        } else {
            Retry::RateLimited
        }
    });

/// How many Deployments are synced at once unless configured otherwise
/// (kube-controller-manager's `--concurrent-deployment-syncs` default).
pub const DEFAULT_CONCURRENT_DEPLOYMENT_SYNCS: usize = 5;

/// The work queue's name: the `name` label of its `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "deployment";

/// The controller's name in logs and the source component of its events.
pub const CONTROLLER_NAME: &str = "deployment-controller";

/// The longest a sync waits for the informer caches to show this controller's own last writes
/// for that Deployment before going ahead with stale copies (see `own_writes`).
pub const OWN_WRITE_WAIT: Duration = Duration::from_secs(2);

/// The wall clock used for condition times and progress deadlines (upstream's `metav1.Now()`);
/// injectable so tests are deterministic.
pub use kcm_machinery::controller::clock::Clock;

/// A replacement for [`DeploymentController::sync`] run by the workers, as upstream's
/// injectable `syncHandler` (tests only).
pub type SyncHandler = Arc<dyn Fn(String) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// Wiring of a [`DeploymentController`] beyond its informers and client.
#[derive(Clone, Default)]
pub struct DeploymentControllerOptions {
    /// Where the queue records its `workqueue_*{name="deployment"}` metrics; `None` records
    /// nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl std::fmt::Debug for DeploymentControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Synchronizes Deployments with the ReplicaSets (and, through them, pods) they own, as
/// kube-controller-manager's `DeploymentController`.
///
/// Build it, then [`run`](Self::run) it. A key is never synced by two workers at once (the
/// queue's promise), so one sync pass owns its Deployment.
pub struct DeploymentController {
    /// `apps/v1 Deployment`: written into the controller references of adopted ReplicaSets.
    pub(super) gvk: GroupVersionKind,
    /// Every API call (uncached GET before adopting, writes). Test seam:
    /// [`super::FakeDeploymentClient`].
    pub(super) client: Arc<dyn DeploymentClient>,
    /// Records the controller's events on Deployments. Test seam:
    /// `kcm_machinery::events::FakeRecorder`.
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// The Deployment informer's cache (read only).
    pub(super) d_lister: Lister<Deployment>,
    /// The ReplicaSet informer's cache (read only).
    pub(super) rs_lister: Lister<ReplicaSet>,
    /// The pod informer's cache (read only).
    pub(super) pod_lister: Lister<Pod>,
    /// Whether the informers feeding the three caches have synced; `run` waits for all.
    caches_synced: Vec<InformerSynced>,
    /// Deployment keys (`namespace/name`) to sync. Shared with the event handlers.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers; they share `queue` and the listers.
    handlers: DeploymentEventHandlers,
    /// Replaces [`Self::sync`] in the workers when set (test seam, upstream's `syncHandler`).
    sync_handler: Option<SyncHandler>,
    /// Wall-clock time (test seam).
    pub(super) clock: Clock,
    /// This controller's Deployment writes not yet seen in the Deployment cache; `None`
    /// without an informer (unit tests over bare caches).
    pub(super) deployment_writes: Option<OwnWrites>,
    /// This controller's ReplicaSet writes (per Deployment key) not yet seen in the
    /// ReplicaSet cache; `None` without an informer.
    pub(super) replica_set_writes: Option<OwnWrites>,
}

impl std::fmt::Debug for DeploymentController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Constructor
// ---------------------------------------------------------------------------------------------

impl DeploymentController {
    /// The controller kube-controller-manager runs, over the factory's Deployment,
    /// ReplicaSet and pod informers, writing through `client` and recording events with
    /// `recorder`, as upstream's `NewDeploymentController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
    ) -> Self {
        Self::new_with_options(
            factory,
            client,
            recorder,
            DeploymentControllerOptions::default(),
        )
    }

    /// As [`Self::new`], with every option (e.g. a metrics handle for the queue).
    pub fn new_with_options(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: DeploymentControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.deployments(),
            &factory.replica_sets(),
            &factory.pods(),
            Arc::new(ApiDeploymentClient::new(client)),
            recorder,
            options,
        )
    }

    /// A controller over the given informers, writing through `client` (e.g. a fake in
    /// tests): registers the [event handlers](DeploymentEventHandlers) with the three informers
    /// and waits for them to sync in [`Self::run`].
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informers(
        d_informer: &SharedIndexInformer<Deployment>,
        rs_informer: &SharedIndexInformer<ReplicaSet>,
        pod_informer: &SharedIndexInformer<Pod>,
        client: Arc<dyn DeploymentClient>,
        recorder: Arc<dyn EventRecorder>,
        options: DeploymentControllerOptions,
    ) -> Self {
        let mut controller = Self::with_caches(
            d_informer.indexer().clone(),
            rs_informer.indexer().clone(),
            pod_informer.indexer().clone(),
            client,
            recorder,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(d_informer, controller.handlers.clone())
            .register(rs_informer, controller.handlers.clone())
            .register(pod_informer, controller.handlers.clone())
            .finish();
        controller.deployment_writes = Some(OwnWrites::new(d_informer.freshness()));
        controller.replica_set_writes = Some(OwnWrites::new(rs_informer.freshness()));
        controller
    }

    /// A controller over the given informer caches, writing through `client`. The
    /// [handlers](Self::event_handlers) must be registered with the informers that fill the
    /// caches and their sync state given with [`Self::with_caches_synced`]; unit tests instead
    /// fill the caches directly and call the handlers and [`Self::sync`] themselves.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        d_cache: Indexer<Deployment>,
        rs_cache: Indexer<ReplicaSet>,
        pod_cache: Indexer<Pod>,
        client: Arc<dyn DeploymentClient>,
        recorder: Arc<dyn EventRecorder>,
        options: DeploymentControllerOptions,
    ) -> Self {
        let config = QueueConfig {
            name: QUEUE_NAME.to_owned(),
            metrics: options.metrics,
        };
        let queue = RateLimitingQueue::with_config(default_controller_rate_limiter(), config);
        let d_lister = Lister::new(d_cache);
        let rs_lister = Lister::new(rs_cache);
        let pod_lister = Lister::new(pod_cache);
        let handlers = DeploymentEventHandlers::new(
            queue.clone(),
            d_lister.clone(),
            rs_lister.clone(),
            pod_lister.clone(),
        );
        Self {
            gvk: GroupVersionKind::gvk("apps", "v1", DEPLOYMENT_KIND),
            client,
            recorder,
            d_lister,
            rs_lister,
            pod_lister,
            caches_synced: Vec::new(),
            queue,
            handlers,
            sync_handler: None,
            clock: Arc::new(Timestamp::now),
            deployment_writes: None,
            replica_set_writes: None,
        }
    }

    /// Makes [`Self::run`] wait for these informers to sync before starting workers.
    pub fn with_caches_synced(mut self, synced: Vec<InformerSynced>) -> Self {
        self.caches_synced = synced;
        self
    }

    /// Replaces [`Self::sync`] in the workers (test seam, upstream's `syncHandler`).
    pub fn with_sync_handler(mut self, handler: SyncHandler) -> Self {
        self.sync_handler = Some(handler);
        self
    }

    /// Replaces the wall clock (test seam).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The handlers to register with the Deployment, ReplicaSet and pod informers.
    pub fn event_handlers(&self) -> &DeploymentEventHandlers {
        &self.handlers
    }

    /// The work queue of Deployment keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Waits for the caches to sync, then syncs Deployments with `workers` concurrent workers
    /// (kube-controller-manager's `--concurrent-deployment-syncs`, default
    /// [`DEFAULT_CONCURRENT_DEPLOYMENT_SYNCS`]) until `cancel`
    /// fires, as upstream's `Run`. On cancellation the queue shuts down, syncs in progress
    /// finish, and `run` returns once every worker has stopped.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tracing::info!(controller = QUEUE_NAME, "Starting controller");
        if !wait_for_synced(QUEUE_NAME, &cancel, &self.caches_synced).await {
            self.queue.shut_down();
            tracing::info!(controller = QUEUE_NAME, "Shutting down controller");
            return;
        }
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync_key(key).await }
        };
        run_workers(
            QUEUE_NAME,
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            sync,
        )
        .await;
        tracing::info!(controller = QUEUE_NAME, "Shutting down controller");
    }
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// The kind of the pods' controllers this controller cares about.
const REPLICA_SET_KIND: &str = "ReplicaSet";

/// The Deployment, ReplicaSet and pod event handlers. Cheap to clone; every clone shares the
/// controller's queue and listers. They only look at the caches and enqueue Deployment keys:
/// they never block.
#[derive(Clone)]
pub struct DeploymentEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
    /// The Deployment cache, to resolve owners and find the Deployments selecting an orphan.
    d_lister: Lister<Deployment>,
    /// The ReplicaSet cache, to find a deleted pod's ReplicaSet and a Deployment's ReplicaSets.
    rs_lister: Lister<ReplicaSet>,
    /// The pod cache, to tell whether a Recreate Deployment has pods left.
    pod_lister: Lister<Pod>,
}

impl std::fmt::Debug for DeploymentEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentEventHandlers")
            .finish_non_exhaustive()
    }
}

impl DeploymentEventHandlers {
    /// Handlers feeding `queue`, reading the three caches.
    pub(super) fn new(
        queue: RateLimitingQueue<String>,
        d_lister: Lister<Deployment>,
        rs_lister: Lister<ReplicaSet>,
        pod_lister: Lister<Pod>,
    ) -> Self {
        Self {
            queue,
            d_lister,
            rs_lister,
            pod_lister,
        }
    }

    /// A Deployment appeared: sync it.
    pub fn add_deployment(&self, d: &Deployment) {
        tracing::trace!(deployment = %object_key(&d.metadata), "Adding deployment");
        self.enqueue(d);
    }

    /// A Deployment changed (or was resynced): sync it.
    pub fn update_deployment(&self, _old: &Deployment, cur: &Deployment) {
        tracing::trace!(deployment = %object_key(&cur.metadata), "Updating deployment");
        self.enqueue(cur);
    }

    /// A Deployment was deleted (possibly seen only as a tombstone): sync the key, which finds
    /// nothing and stops.
    pub fn delete_deployment(&self, obj: &DeletedObject<Deployment>) {
        match obj.key() {
            Ok(key) => {
                tracing::trace!(deployment = %key, "Deleting deployment");
                self.queue.add(key);
            }
            Err(err) => tracing::error!(%err, "couldn't get key for Deployment"),
        }
    }

    /// A ReplicaSet appeared. Already being deleted (seen after a restart): handled as a
    /// deletion. Controlled by a Deployment we know: that one is synced. An orphan: every
    /// Deployment selecting it is synced, so one may adopt it.
    pub fn add_replica_set(&self, rs: &ReplicaSet) {
        if rs.metadata.deletion_timestamp.is_some() {
            self.delete_replica_set_object(rs);
            return;
        }
        if let Some(controller_ref) = get_controller_of(&rs.metadata) {
            let Some(d) = self.resolve_controller_ref(namespace_of(&rs.metadata), controller_ref)
            else {
                return;
            };
            tracing::trace!(replica_set = %object_key(&rs.metadata), "ReplicaSet added");
            self.enqueue(&d);
            return;
        }
        let ds = self.get_deployments_for_replica_set(rs);
        if ds.is_empty() {
            return;
        }
        tracing::trace!(replica_set = %object_key(&rs.metadata), "Orphan ReplicaSet added");
        for d in &ds {
            self.enqueue(d);
        }
    }

    /// A ReplicaSet changed. Same resourceVersion (a resync): ignored. A changed controller
    /// reference syncs the old owner; the current owner is synced; an orphan whose labels or
    /// reference changed syncs every Deployment selecting it.
    pub fn update_replica_set(&self, old: &ReplicaSet, cur: &ReplicaSet) {
        if cur.metadata.resource_version == old.metadata.resource_version {
            return;
        }
        let cur_ref = get_controller_of(&cur.metadata);
        let old_ref = get_controller_of(&old.metadata);
        let controller_ref_changed = cur_ref != old_ref;
        if controller_ref_changed
            && let Some(old_ref) = old_ref
            && let Some(d) = self.resolve_controller_ref(namespace_of(&old.metadata), old_ref)
        {
            self.enqueue(&d);
        }
        if let Some(cur_ref) = cur_ref {
            let Some(d) = self.resolve_controller_ref(namespace_of(&cur.metadata), cur_ref) else {
                return;
            };
            tracing::trace!(replica_set = %object_key(&cur.metadata), "ReplicaSet updated");
            self.enqueue(&d);
            return;
        }
        let labels_changed = cur.metadata.labels != old.metadata.labels;
        if labels_changed || controller_ref_changed {
            let ds = self.get_deployments_for_replica_set(cur);
            if ds.is_empty() {
                return;
            }
            tracing::trace!(replica_set = %object_key(&cur.metadata), "Orphan ReplicaSet updated");
            for d in &ds {
                self.enqueue(d);
            }
        }
    }

    /// A ReplicaSet was deleted (possibly seen only as a tombstone, whose state may be stale):
    /// its owner is synced. Nobody cares about an orphan's deletion.
    pub fn delete_replica_set(&self, obj: &DeletedObject<ReplicaSet>) {
        self.delete_replica_set_object(obj.object());
    }

    fn delete_replica_set_object(&self, rs: &ReplicaSet) {
        let Some(controller_ref) = get_controller_of(&rs.metadata) else {
            return;
        };
        let Some(d) = self.resolve_controller_ref(namespace_of(&rs.metadata), controller_ref)
        else {
            return;
        };
        tracing::trace!(replica_set = %object_key(&rs.metadata), "ReplicaSet deleted");
        self.enqueue(&d);
    }

    /// A pod was deleted: a Recreate Deployment waiting for its old pods to go is synced once
    /// it has no pod left, as upstream's `deletePod`. (Upstream lists the Deployment's
    /// ReplicaSets from the API server here; this reads the cache, so the handler never
    /// blocks.)
    pub fn delete_pod(&self, obj: &DeletedObject<Pod>) {
        let pod = obj.object();
        let Some(d) = self.get_deployment_for_pod(pod) else {
            return;
        };
        tracing::trace!(pod = %object_key(&pod.metadata), "Pod deleted");
        if strategy_type(&d) != RECREATE_STRATEGY {
            return;
        }
        let rs_list = self.owned_replica_sets(&d);
        let key = object_key(&d.metadata);
        let Ok(selector) = deployment_selector(&d, &key) else {
            return;
        };
        let pods = self.pod_lister.list(namespace_of(&d.metadata), &selector);
        let remaining: usize = pod_map(pods, &rs_list).values().map(Vec::len).sum();
        if remaining == 0 {
            self.enqueue(&d);
        }
    }

    /// The cached Deployment `controller_ref` points to in `namespace`: same kind, same name,
    /// same UID (a namesake is not it), as upstream's `resolveControllerRef`.
    pub fn resolve_controller_ref(
        &self,
        namespace: &str,
        controller_ref: &OwnerReference,
    ) -> Option<Arc<Deployment>> {
        if controller_ref.kind != DEPLOYMENT_KIND {
            return None;
        }
        self.d_lister
            .get(namespace, &controller_ref.name)
            .filter(|d| d.metadata.uid.as_deref() == Some(controller_ref.uid.as_str()))
    }

    /// The cached Deployments whose selector matches the ReplicaSet, as upstream's
    /// `getDeploymentsForReplicaSet`. More than one is a user error (logged).
    pub fn get_deployments_for_replica_set(&self, rs: &ReplicaSet) -> Vec<Arc<Deployment>> {
        let all = self
            .d_lister
            .list(namespace_of(&rs.metadata), &Selector::everything());
        let refs: Vec<&Deployment> = all.iter().map(Arc::as_ref).collect();
        let matching: Vec<Arc<Deployment>> = deployments_for_replica_set(&refs, rs)
            .into_iter()
            .filter_map(|d| all.iter().find(|a| std::ptr::eq(a.as_ref(), d)).cloned())
            .collect();
        if matching.len() > 1 {
            tracing::debug!(
                replica_set = %object_key(&rs.metadata),
                labels = ?rs.metadata.labels,
                "user error! more than one deployment is selecting replica set"
            );
        }
        matching
    }

    /// The Deployment controlling the ReplicaSet controlling `pod`, as upstream's
    /// `getDeploymentForPod`.
    pub fn get_deployment_for_pod(&self, pod: &Pod) -> Option<Arc<Deployment>> {
        let controller_ref = get_controller_of(&pod.metadata)?;
        if controller_ref.kind != REPLICA_SET_KIND {
            return None;
        }
        let rs = self
            .rs_lister
            .get(namespace_of(&pod.metadata), &controller_ref.name)
            .filter(|rs| rs.metadata.uid.as_deref() == Some(controller_ref.uid.as_str()))?;
        let rs_ref = get_controller_of(&rs.metadata)?;
        self.resolve_controller_ref(namespace_of(&rs.metadata), rs_ref)
    }

    /// The cached ReplicaSets the Deployment's selector matches and that it controls, as
    /// upstream's `ListReplicaSets`.
    fn owned_replica_sets(&self, d: &Deployment) -> Vec<Arc<ReplicaSet>> {
        let key = object_key(&d.metadata);
        let Ok(selector) = deployment_selector(d, &key) else {
            return Vec::new();
        };
        let uid = d.metadata.uid.as_deref();
        self.rs_lister
            .list(namespace_of(&d.metadata), &selector)
            .into_iter()
            .filter(|rs| {
                get_controller_of(&rs.metadata).is_some_and(|r| Some(r.uid.as_str()) == uid)
            })
            .collect()
    }

    fn enqueue(&self, d: &Deployment) {
        match meta_namespace_key(d) {
            Ok(key) => self.queue.add(key),
            Err(err) => tracing::error!(%err, "couldn't get key for Deployment"),
        }
    }
}

fn namespace_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or_default()
}

/// The informer side: Deployment notifications.
impl ResourceEventHandler<Deployment> for DeploymentEventHandlers {
    fn on_add(&self, d: Arc<Deployment>, _is_in_initial_list: bool) {
        self.add_deployment(&d);
    }

    fn on_update(&self, old: Arc<Deployment>, new: Arc<Deployment>) {
        self.update_deployment(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<Deployment>) {
        self.delete_deployment(&obj);
    }
}

/// The informer side: ReplicaSet notifications.
impl ResourceEventHandler<ReplicaSet> for DeploymentEventHandlers {
    fn on_add(&self, rs: Arc<ReplicaSet>, _is_in_initial_list: bool) {
        self.add_replica_set(&rs);
    }

    fn on_update(&self, old: Arc<ReplicaSet>, new: Arc<ReplicaSet>) {
        self.update_replica_set(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<ReplicaSet>) {
        self.delete_replica_set(&obj);
    }
}

/// The informer side: pod notifications (only deletions matter).
impl ResourceEventHandler<Pod> for DeploymentEventHandlers {
    fn on_delete(&self, obj: DeletedObject<Pod>) {
        self.delete_pod(&obj);
    }
}

// ---------------------------------------------------------------------------------------------
// Worker wiring
// ---------------------------------------------------------------------------------------------

impl DeploymentController {
    /// Takes one key and syncs it through the shared worker with [`ERROR_POLICY`] (forget,
    /// requeue rate limited, or drop after [`MAX_RETRIES`]), as upstream's
    /// `processNextWorkItem` + `handleErr`. False once the queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(QUEUE_NAME, &self.queue, &ERROR_POLICY, |key| {
            self.sync_key(key)
        })
        .await
    }

    /// What the workers run for a key: the injected sync handler if any, else [`Self::sync`].
    async fn sync_key(&self, key: String) -> Result<()> {
        match &self.sync_handler {
            Some(handler) => handler(key).await,
            None => self.sync(&key).await,
        }
    }

    // -----------------------------------------------------------------------------------------
    // Sync
    // -----------------------------------------------------------------------------------------

    /// Syncs the Deployment with key `namespace/name`, as upstream's `syncDeployment`. Never
    /// run concurrently for one key.
    ///
    /// A Deployment gone from the cache is done with. One selecting everything gets a
    /// `SelectingAll` warning and nothing else. Otherwise its ReplicaSets are claimed, and
    /// then, first match wins: being deleted → status only; paused → scale only; a rollback
    /// requested → roll back; a scaling event → scale; else one rollout step of its strategy.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        tracing::trace!(deployment = key, "Started syncing deployment");
        let result = self.sync_deployment(key).await;
        tracing::debug!(deployment = key, duration = ?start.elapsed(), "Finished syncing deployment");
        result
    }

    async fn sync_deployment(&self, key: &str) -> Result<()> {
        split_meta_namespace_key(key).map_err(|source| Error::InvalidKey {
            key: key.to_owned(),
            source,
        })?;
        self.wait_for_own_writes(key).await;
        let Some(cached) = self.d_lister.indexer().get_by_key(key) else {
            tracing::debug!(deployment = key, "Deployment has been deleted");
            return Ok(());
        };
        // The sync edits its own copy, never the cache's.
        let mut d = (*cached).clone();

        if selects_everything(&d) {
            self.event(
                &d,
                EventType::Warning,
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required."
                    .to_owned(),
            );
            let observed = d
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0);
            if observed < generation(&d.metadata) {
                d.status
                    .get_or_insert_with(Default::default)
                    .observed_generation = Some(generation(&d.metadata));
                // As upstream, the outcome of this write does not matter.
                if let Err(err) = self.update_status(key, &mut d).await {
                    tracing::debug!(deployment = key, %err, "recording observedGeneration");
                }
            }
            return Ok(());
        }

        let mut rs_list = self.get_replica_sets_for_deployment(&d, key).await?;
        let pod_map = self.get_pod_map_for_deployment(&d, &rs_list)?;

        if d.metadata.deletion_timestamp.is_some() {
            return self.sync_status_only(&mut d, key, &mut rs_list).await;
        }

        // Unknown conditions mark pausing and resuming, so time spent paused never counts
        // against the progress deadline.
        self.check_paused_conditions(&mut d, key).await?;

        if is_paused(&d) {
            return self.sync_scale(&mut d, key, &mut rs_list).await;
        }

        // Rollback is not re-entrant: nothing else happens until the request is cleared.
        if rollback_to(&d).is_some() {
            return self.rollback(&mut d, key, &mut rs_list).await;
        }

        if self.is_scaling_event(&mut d, key, &mut rs_list).await? {
            return self.sync_scale(&mut d, key, &mut rs_list).await;
        }

        match strategy_type(&d) {
            RECREATE_STRATEGY => {
                self.rollout_recreate(&mut d, key, &mut rs_list, &pod_map)
                    .await
            }
            ROLLING_UPDATE_STRATEGY => self.rollout_rolling(&mut d, key, &mut rs_list).await,
            other => Err(Error::UnexpectedStrategy {
                strategy: other.to_owned(),
            }),
        }
    }

    /// Waits (bounded) for the caches to show this controller's last writes for `key`.
    async fn wait_for_own_writes(&self, key: &str) {
        if let Some(writes) = &self.deployment_writes {
            writes.wait(key, OWN_WRITE_WAIT).await;
        }
        if let Some(writes) = &self.replica_set_writes {
            writes.wait(key, OWN_WRITE_WAIT).await;
        }
    }

    /// The ReplicaSets of the Deployment's namespace it owns after adopting the orphans its
    /// selector matches and releasing the owned ones it no longer matches, as upstream's
    /// `getReplicaSetsForDeployment`. Before the first adoption the Deployment is re-read from
    /// the API server: one being deleted (or replaced by a namesake) adopts nothing.
    async fn get_replica_sets_for_deployment(
        &self,
        d: &Deployment,
        key: &str,
    ) -> Result<Vec<Arc<ReplicaSet>>> {
        let namespace = d.metadata.namespace.clone().unwrap_or_default();
        // Every ReplicaSet of the namespace, so owned ones that no longer match are released.
        let rs_list = self.rs_lister.list(&namespace, &Selector::everything());
        let selector = deployment_selector(d, key)?;
        let client = Arc::clone(&self.client);
        let name = d.metadata.name.clone().unwrap_or_default();
        let can_adopt = recheck_owner(d, move || async move {
            client.get_deployment(&namespace, &name).await
        });
        let manager = ControllerRefManager::new(
            ClientPatcher(Arc::clone(&self.client)),
            &d.metadata,
            selector,
            self.gvk.clone(),
            Some(can_adopt),
        );
        manager
            .claim(&rs_list, |_| true)
            .await
            .map_err(|source| Error::ClaimReplicaSets {
                deployment: key.to_owned(),
                source: Box::new(source),
            })
    }

    /// The pods the Deployment selects, grouped by the UID of the claimed ReplicaSet that
    /// controls them (every claimed ReplicaSet has an entry), as upstream's
    /// `getPodMapForDeployment`. Inactive pods are kept: a Recreate rollout must see that no
    /// old pod still runs.
    pub(super) fn get_pod_map_for_deployment(
        &self,
        d: &Deployment,
        rs_list: &[Arc<ReplicaSet>],
    ) -> Result<HashMap<String, Vec<Arc<Pod>>>> {
        let key = object_key(&d.metadata);
        let selector = deployment_selector(d, &key)?;
        let namespace = d.metadata.namespace.as_deref().unwrap_or_default();
        Ok(pod_map(self.pod_lister.list(namespace, &selector), rs_list))
    }

    // -----------------------------------------------------------------------------------------
    // Writes and events
    // -----------------------------------------------------------------------------------------

    /// Writes `d`'s status (and annotations) through `/status`. On success `d` takes the new
    /// resourceVersion, so later writes of this pass do not conflict with this one, unless the
    /// spec changed meanwhile (then the next write conflicts and the key is retried, as
    /// upstream).
    pub(super) async fn update_status(&self, key: &str, d: &mut Deployment) -> Result<()> {
        let written = self
            .client
            .update_deployment_status(d)
            .await
            .map_err(|source| Error::Api {
                operation: Operation::UpdateDeploymentStatus,
                object: key.to_owned(),
                source,
            })?;
        self.adopt_written(key, d, &written);
        Ok(())
    }

    /// Replaces `d` (a rollback), as [`Self::update_status`] for the main resource.
    pub(super) async fn update_deployment(&self, key: &str, d: &mut Deployment) -> Result<()> {
        let written = self
            .client
            .update_deployment(d)
            .await
            .map_err(|source| Error::Api {
                operation: Operation::UpdateDeployment,
                object: key.to_owned(),
                source,
            })?;
        self.adopt_written(key, d, &written);
        Ok(())
    }

    fn adopt_written(&self, key: &str, d: &mut Deployment, written: &Deployment) {
        if let Some(writes) = &self.deployment_writes {
            writes.record(key, written.metadata.resource_version.as_deref());
        }
        if generation(&written.metadata) == generation(&d.metadata) {
            d.metadata.resource_version = written.metadata.resource_version.clone();
        }
    }

    /// Replaces a ReplicaSet on behalf of Deployment `key`; the stored object is returned.
    pub(super) async fn update_replica_set(
        &self,
        key: &str,
        rs: &ReplicaSet,
    ) -> Result<Arc<ReplicaSet>> {
        let written = self
            .client
            .update_replica_set(rs)
            .await
            .map_err(|source| Error::Api {
                operation: Operation::UpdateReplicaSet,
                object: object_key(&rs.metadata),
                source,
            })?;
        self.record_replica_set_write(key, &written);
        Ok(Arc::new(written))
    }

    /// Remembers a ReplicaSet written on behalf of Deployment `key`.
    pub(super) fn record_replica_set_write(&self, key: &str, written: &ReplicaSet) {
        if let Some(writes) = &self.replica_set_writes {
            writes.record(key, written.metadata.resource_version.as_deref());
        }
    }

    /// Records an event about the Deployment.
    pub(super) fn event(&self, d: &Deployment, type_: EventType, reason: &str, message: String) {
        let mut regarding = d.object_ref(&());
        regarding.api_version = Some(DEPLOYMENT_API_VERSION.to_owned());
        regarding.kind = Some(DEPLOYMENT_KIND.to_owned());
        self.recorder.event(&regarding, type_, reason, message);
    }
}

// ---------------------------------------------------------------------------------------------
// Free helpers
// ---------------------------------------------------------------------------------------------

/// Whether the Deployment's selector is `{}` (present and empty), which selects every pod of
/// the namespace; upstream refuses to act on it.
fn selects_everything(d: &Deployment) -> bool {
    d.spec.as_ref().is_some_and(|s| {
        s.selector
            .match_labels
            .as_ref()
            .is_none_or(|l| l.is_empty())
            && s.selector
                .match_expressions
                .as_ref()
                .is_none_or(|e| e.is_empty())
    })
}

/// The Deployment's selector; a Deployment without a spec selects nothing.
pub(super) fn deployment_selector(d: &Deployment, key: &str) -> Result<Selector> {
    match &d.spec {
        Some(spec) => {
            Selector::from_label_selector(&spec.selector).map_err(|source| Error::InvalidSelector {
                deployment: key.to_owned(),
                source,
            })
        }
        None => Ok(Selector::nothing()),
    }
}

/// Groups `pods` by the UID of their controller among `rs_list`; every ReplicaSet of the list
/// has an entry, pods of other controllers are left out.
pub(super) fn pod_map(
    pods: Vec<Arc<Pod>>,
    rs_list: &[Arc<ReplicaSet>],
) -> HashMap<String, Vec<Arc<Pod>>> {
    let mut map: HashMap<String, Vec<Arc<Pod>>> = rs_list
        .iter()
        .filter_map(|rs| rs.metadata.uid.clone())
        .map(|uid| (uid, Vec::new()))
        .collect();
    for pod in pods {
        let Some(controller_ref) = get_controller_of(&pod.metadata) else {
            continue;
        };
        if let Some(list) = map.get_mut(&controller_ref.uid) {
            list.push(pod);
        }
    }
    map
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
