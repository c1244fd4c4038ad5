//! The ReplicaSet controller: event handlers, workers and the sync pass (upstream `replica_set.go`).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, join_all};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::controller::expectations::pod_keys;
use kcm_machinery::controller::ref_manager::recheck_owner;
use kcm_machinery::controller::{
    ApiStatus, ControllerExpectations, PodControl, PodControllerRefManager, RealPodControl,
    SLOW_START_INITIAL_BATCH_SIZE, UidTrackingControllerExpectations, filter_active_pods,
    get_controller_of, get_pods_to_delete, is_pod_ready, new_controller_ref, pod_key,
    slow_start_batch,
};
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_workers};
use kcm_machinery::events::EventRecorder;
use kcm_machinery::informer::OwnWrites;
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::index::{IndexFunc, Indexers, NAMESPACE_INDEX};
use kcm_machinery::informer::keys::{meta_namespace_key, split_meta_namespace_key};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::wait_until_synced;
use kcm_machinery::informer::{ResourceEventHandler, SharedIndexInformer, SharedInformerFactory};
use kcm_machinery::labels::Selector;
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::Resource;
use kube::core::GroupVersionKind;
use tokio_util::sync::CancellationToken;

use super::client::{ApiReplicaSetClient, ReplicaSetClient};
use super::metrics::ReplicaSetMetrics;
use super::status::{
    calculate_status, desired_replicas, min_ready_seconds, update_replica_set_status,
};
use super::{Error, Result};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// The most pods one sync pass creates or deletes for one ReplicaSet, as upstream's
/// `BurstReplicas`; the pass's expectations then hold the ReplicaSet until the informer has
/// observed them all.
pub const BURST_REPLICAS: usize = 500;

/// How many times a failed `/status` update is retried (after re-reading the ReplicaSet), as
/// upstream's `statusUpdateRetries`.
pub const STATUS_UPDATE_RETRIES: usize = 1;

/// The ReplicaSet cache's index by the UID of the ReplicaSet's controller (its Deployment),
/// as upstream's `controllerUIDIndex`.
pub const CONTROLLER_UID_INDEX: &str = "controllerUID";

/// The work queue's name: the `name` label of its `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "replicaset";

/// The controller's name in logs and `--controllers` (kube-controller-manager's
/// `replicaset-controller`).
pub const CONTROLLER_NAME: &str = "replicaset-controller";

/// How the workers treat a failed sync, as upstream's `processNextWorkItem`: every error
/// (and every panic) requeues the key rate-limited, forever.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("sync failed");

/// The kind this controller owns pods for; controller references of any other kind are not
/// ours.
const KIND: &str = "ReplicaSet";

/// The longest a sync waits for the ReplicaSet cache to catch up with this controller's own
/// last status write to that ReplicaSet before going ahead with the stale copy.
pub const OWN_WRITE_WAIT: Duration = Duration::from_secs(2);

/// Tells whether an informer's cache has synced its initial list, as client-go's
/// `InformerSynced`.
pub type InformerSynced = Arc<dyn Fn() -> bool + Send + Sync>;

/// The wall clock used for condition transition times, pod availability and scale-down
/// ranking (upstream's `metav1.Now()`); injectable so tests are deterministic.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// A replacement for [`ReplicaSetController::sync`] run by the workers, as upstream's
/// injectable `syncHandler` (tests only).
pub type SyncHandler = Arc<dyn Fn(String) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// Tuning and wiring of a [`ReplicaSetController`].
#[derive(Clone)]
pub struct ReplicaSetControllerOptions {
    /// The most pods created or deleted per ReplicaSet per sync (default [`BURST_REPLICAS`]).
    pub burst_replicas: usize,
    /// Where the queue records its `workqueue_*{name="replicaset"}` metrics; `None` records
    /// nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// Where the controller records its `replicaset_controller_*` metrics; `None` records
    /// nothing.
    pub controller_metrics: Option<Arc<ReplicaSetMetrics>>,
}

impl Default for ReplicaSetControllerOptions {
    fn default() -> Self {
        Self {
            burst_replicas: BURST_REPLICAS,
            metrics: None,
            controller_metrics: None,
        }
    }
}

impl std::fmt::Debug for ReplicaSetControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaSetControllerOptions")
            .field("burst_replicas", &self.burst_replicas)
            .field("metrics", &self.metrics.is_some())
            .field("controller_metrics", &self.controller_metrics.is_some())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Synchronizes ReplicaSets with the pods they own, as kube-controller-manager's
/// `ReplicaSetController`.
///
/// Build it, hand it to the informers (its [`ReplicaSetEventHandlers`]), then
/// [`run`](Self::run) it. A key is never synced by two workers at once (the queue's promise).
pub struct ReplicaSetController {
    /// `apps/v1 ReplicaSet`: written into the controller references of created and adopted pods.
    gvk: GroupVersionKind,
    /// The direct ReplicaSet API calls (uncached GET before adopting, `/status` writes). Test
    /// seam: [`super::FakeReplicaSetClient`].
    rs_client: Arc<dyn ReplicaSetClient>,
    /// Creates, deletes and patches pods, recording events. Test seam:
    /// `kcm_machinery::controller::FakePodControl`.
    pod_control: Arc<dyn PodControl>,
    /// The most pods created or deleted per ReplicaSet per sync pass.
    burst_replicas: usize,
    /// Per ReplicaSet key, the pod creations and deletions (by pod key) issued and not yet
    /// observed by the pod informer. A key with unfulfilled, unexpired expectations is not
    /// scaled: its cache is known to be behind its own writes.
    expectations: Arc<UidTrackingControllerExpectations>,
    /// The ReplicaSet informer's cache (read only), indexed by namespace and by
    /// [`CONTROLLER_UID_INDEX`].
    rs_cache: Indexer<ReplicaSet>,
    /// The pod informer's cache (read only), indexed by namespace.
    pod_cache: Indexer<Pod>,
    /// Whether the informers feeding the two caches have synced; `run` waits for all.
    caches_synced: Vec<InformerSynced>,
    /// ReplicaSet keys (`namespace/name`) to sync. Shared with the event handlers.
    queue: RateLimitingQueue<String>,
    /// The informer-facing handlers; they share `queue`, `expectations` and `rs_cache`.
    handlers: ReplicaSetEventHandlers,
    /// Replaces [`Self::sync`] in the workers when set (test seam, upstream's `syncHandler`).
    sync_handler: Option<SyncHandler>,
    /// Wall-clock time (test seam).
    clock: Clock,
    /// The `replicaset_controller_*` metrics, if recorded.
    metrics: Option<Arc<ReplicaSetMetrics>>,
    /// This controller's status writes (per ReplicaSet key) not yet seen in the ReplicaSet
    /// cache; `None` without an informer (unit tests over bare caches).
    own_writes: Option<OwnWrites>,
}

impl std::fmt::Debug for ReplicaSetController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaSetController")
            .field("burst_replicas", &self.burst_replicas)
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Constructor
// ---------------------------------------------------------------------------------------------

impl ReplicaSetController {
    /// The controller kube-controller-manager runs, over the factory's ReplicaSet and pod
    /// informers, creating and deleting pods through `client` with events recorded by
    /// `recorder`, as upstream's `NewReplicaSetController`. `burst_replicas` is usually
    /// [`BURST_REPLICAS`].
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        burst_replicas: usize,
    ) -> Self {
        Self::new_with_options(
            factory,
            client,
            recorder,
            ReplicaSetControllerOptions {
                burst_replicas,
                ..ReplicaSetControllerOptions::default()
            },
        )
    }

    /// As [`Self::new`], with every option (e.g. a metrics handle for the queue).
    pub fn new_with_options(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: ReplicaSetControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.replica_sets(),
            &factory.pods(),
            Arc::new(ApiReplicaSetClient::new(client.clone())),
            Arc::new(RealPodControl::new(client, recorder)),
            options,
        )
    }

    /// A controller over the given informers, writing through `rs_client` and `pod_control`
    /// (e.g. a fake pod control in tests): adds the [`CONTROLLER_UID_INDEX`], registers the
    /// [event handlers](ReplicaSetEventHandlers) with both informers and waits for both to
    /// sync in [`Self::run`].
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informers(
        rs_informer: &SharedIndexInformer<ReplicaSet>,
        pod_informer: &SharedIndexInformer<Pod>,
        rs_client: Arc<dyn ReplicaSetClient>,
        pod_control: Arc<dyn PodControl>,
        options: ReplicaSetControllerOptions,
    ) -> Self {
        let mut controller = Self::with_caches(
            rs_informer.indexer().clone(),
            pod_informer.indexer().clone(),
            rs_client,
            pod_control,
            options,
        );
        if let Err(err) = rs_informer.add_event_handler(controller.handlers.clone()) {
            tracing::error!(%err, "registering the ReplicaSet event handler");
        }
        if let Err(err) = pod_informer.add_event_handler(controller.handlers.clone()) {
            tracing::error!(%err, "registering the pod event handler");
        }
        let (rs_synced, pod_synced) = (rs_informer.clone(), pod_informer.clone());
        controller.caches_synced = vec![
            Arc::new(move || pod_synced.has_synced()),
            Arc::new(move || rs_synced.has_synced()),
        ];
        controller.own_writes = Some(OwnWrites::new(rs_informer.freshness()));
        controller
    }

    /// A controller over the given informer caches, writing through `rs_client` and
    /// `pod_control`, as upstream's `NewBaseController`.
    ///
    /// Adds the [`CONTROLLER_UID_INDEX`] to `rs_cache`. The event handlers
    /// ([`Self::event_handlers`]) must be registered with the informers that fill the caches,
    /// and their sync state given with [`Self::with_caches_synced`]; unit tests instead fill
    /// the caches directly and call the handlers and [`Self::sync`] themselves.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        rs_cache: Indexer<ReplicaSet>,
        pod_cache: Indexer<Pod>,
        rs_client: Arc<dyn ReplicaSetClient>,
        pod_control: Arc<dyn PodControl>,
        options: ReplicaSetControllerOptions,
    ) -> Self {
        let mut indexers: Indexers<ReplicaSet> = Indexers::new();
        let by_controller_uid: IndexFunc<ReplicaSet> = Arc::new(|rs: &ReplicaSet| {
            get_controller_of(&rs.metadata)
                .map(|r| vec![r.uid.clone()])
                .unwrap_or_default()
        });
        indexers.insert(CONTROLLER_UID_INDEX.to_owned(), by_controller_uid);
        // Upstream ignores this error too: the index exists when another controller
        // instance built on the same informer added it first.
        if let Err(err) = rs_cache.add_indexers(indexers) {
            tracing::warn!(%err, "not adding the ReplicaSet controller-UID index");
        }

        let config = QueueConfig {
            name: QUEUE_NAME.to_owned(),
            metrics: options.metrics,
        };
        let queue = RateLimitingQueue::with_config(default_controller_rate_limiter(), config);
        let expectations = Arc::new(UidTrackingControllerExpectations::new(
            ControllerExpectations::new(),
        ));
        let handlers = ReplicaSetEventHandlers {
            queue: queue.clone(),
            expectations: Arc::clone(&expectations),
            rs_cache: rs_cache.clone(),
        };
        Self {
            gvk: GroupVersionKind::gvk("apps", "v1", KIND),
            rs_client,
            pod_control,
            burst_replicas: options.burst_replicas,
            expectations,
            rs_cache,
            pod_cache,
            caches_synced: Vec::new(),
            queue,
            handlers,
            sync_handler: None,
            clock: Arc::new(Timestamp::now),
            metrics: options.controller_metrics,
            own_writes: None,
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

    /// The handlers to register with the ReplicaSet and pod informers.
    pub fn event_handlers(&self) -> &ReplicaSetEventHandlers {
        &self.handlers
    }

    /// The work queue of ReplicaSet keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// The pending pod creations and deletions per ReplicaSet key.
    pub fn expectations(&self) -> &UidTrackingControllerExpectations {
        &self.expectations
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Waits for the caches to sync, then syncs ReplicaSets with `workers` concurrent workers
    /// until `cancel` fires, as upstream's `Run`. On cancellation the queue shuts down, syncs
    /// in progress finish, and `run` returns once every worker has stopped.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tracing::info!(controller = CONTROLLER_NAME, "Starting controller");
        if !self.wait_for_caches_synced(&cancel).await {
            self.queue.shut_down();
            tracing::info!(controller = CONTROLLER_NAME, "Shutting down controller");
            return;
        }
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync_key(key).await }
        };
        run_workers(
            CONTROLLER_NAME,
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            sync,
        )
        .await;
        tracing::info!(controller = CONTROLLER_NAME, "Shutting down controller");
    }

    /// Polls the informers' sync state until all have synced (true) or `cancel` fires
    /// (false), as client-go's `WaitForNamedCacheSync`.
    async fn wait_for_caches_synced(&self, cancel: &CancellationToken) -> bool {
        wait_until_synced(CONTROLLER_NAME, cancel, || {
            self.caches_synced.iter().all(|synced| synced())
        })
        .await
    }

    // -----------------------------------------------------------------------------------------
    // Worker loop
    // -----------------------------------------------------------------------------------------

    /// Takes one key and syncs it through the shared worker (forgotten on success, requeued
    /// rate-limited on failure or panic), as upstream's `processNextWorkItem`. False once the
    /// queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(CONTROLLER_NAME, &self.queue, &ERROR_POLICY, |key| {
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

    /// Syncs the ReplicaSet with key `namespace/name`, as upstream's `syncReplicaSet`: claims
    /// its pods, creates or deletes pods when its expectations are satisfied and it is not
    /// being deleted, and writes its status. Never run concurrently for one key.
    ///
    /// A ReplicaSet gone from the cache drops its expectations; an unusable selector is
    /// logged and not retried. The error returned (claim, status write, or the pod
    /// creations/deletions) makes the worker requeue the key rate-limited.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = self.sync_replica_set(key).await;
        tracing::debug!(kind = KIND, key, duration = ?start.elapsed(), "Finished syncing");
        result
    }

    async fn sync_replica_set(&self, key: &str) -> Result<()> {
        split_meta_namespace_key(key).map_err(|source| Error::InvalidKey {
            key: key.to_owned(),
            source,
        })?;
        self.wait_for_own_write(key).await;
        let Some(rs) = self.rs_cache.get_by_key(key) else {
            tracing::debug!(kind = KIND, key, "deleted");
            self.expectations.delete_expectations(key);
            return Ok(());
        };

        // Checked before listing pods: a pod observed in between can only make the list
        // fresher than the expectations, never staler.
        let rs_needs_sync = self.expectations.satisfied_expectations(key);
        let selector = match replica_set_selector(&rs) {
            Ok(selector) => selector,
            Err(err) => {
                tracing::error!(replica_set = key, %err, "error converting pod selector to selector");
                return Ok(());
            }
        };

        // Every pod of the namespace, so owned pods that no longer match are released.
        let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
        let all_pods = self.pods_in_namespace(namespace);
        let filtered_pods = filter_active_pods(&all_pods);
        let filtered_pods = self.claim_pods(&rs, key, selector, filtered_pods).await?;

        let manage_replicas_err = if rs_needs_sync && rs.metadata.deletion_timestamp.is_none() {
            self.manage_replicas(&filtered_pods, &rs, key).await.err()
        } else {
            None
        };

        let now = (self.clock)();
        let message = manage_replicas_err.as_ref().map(Error::condition_message);
        let new_status = calculate_status(&rs, &filtered_pods, message.as_deref(), now);
        let updated = update_replica_set_status(self.rs_client.as_ref(), &rs, new_status).await?;
        if let Some(updated) = &updated {
            self.record_own_write(key, updated);
        }
        let current = updated.as_ref().unwrap_or(&rs);

        // A last line of defence against clock skew: look again once the ready pods should
        // have become available.
        let min_ready = min_ready_seconds(current);
        let desired = desired_replicas(current);
        let (ready, available) = current.status.as_ref().map_or((0, 0), |s| {
            (
                s.ready_replicas.unwrap_or(0),
                s.available_replicas.unwrap_or(0),
            )
        });
        if manage_replicas_err.is_none()
            && min_ready > 0
            && ready == desired
            && available != desired
        {
            self.queue
                .add_after(key.to_owned(), seconds(i64::from(min_ready)));
        }
        manage_replicas_err.map_or(Ok(()), Err)
    }

    /// Waits, at most [`OWN_WRITE_WAIT`], until the ReplicaSet cache holds this controller's
    /// last status write to `key`: a pass over an older copy would compute a status against
    /// stale numbers and rewrite it with a stale resourceVersion (a conflict, a re-read and a
    /// second write). Past the bound the pass goes ahead, as upstream always does.
    async fn wait_for_own_write(&self, key: &str) {
        if let Some(writes) = &self.own_writes {
            writes.wait(key, OWN_WRITE_WAIT).await;
        }
    }

    /// Remembers the resourceVersion of a status write to `key` (when there is a cache to
    /// compare it with).
    fn record_own_write(&self, key: &str, written: &ReplicaSet) {
        if let Some(writes) = &self.own_writes {
            writes.record(key, written.metadata.resource_version.as_deref());
        }
    }

    /// Adopts the orphans `rs` selects and releases the pods it owns but no longer selects,
    /// returning the pods it owns afterwards, as upstream's `claimPods`. Before the first
    /// adoption the ReplicaSet is re-read from the API server: a ReplicaSet that is being
    /// deleted (or was replaced by a namesake) adopts nothing.
    async fn claim_pods(
        &self,
        rs: &ReplicaSet,
        key: &str,
        selector: Selector,
        filtered_pods: Vec<Arc<Pod>>,
    ) -> Result<Vec<Arc<Pod>>> {
        let client = Arc::clone(&self.rs_client);
        let namespace = rs.metadata.namespace.clone().unwrap_or_default();
        let name = rs.metadata.name.clone().unwrap_or_default();
        let can_adopt = recheck_owner(
            rs,
            move || async move { client.get(&namespace, &name).await },
        );
        let manager = PodControllerRefManager::for_pods(
            Arc::clone(&self.pod_control),
            &rs.metadata,
            selector,
            self.gvk.clone(),
            Some(can_adopt),
        );
        manager
            .claim_pods(&filtered_pods, |_| true)
            .await
            .map_err(|source| Error::ClaimPods {
                replica_set: key.to_owned(),
                source,
            })
    }

    /// Creates or deletes pods so that `filtered_pods` moves toward `spec.replicas`, at most
    /// `burst_replicas` of them, as upstream's `manageReplicas`.
    ///
    /// Expectations are raised before acting. Creations go in slow-start batches; the ones
    /// never attempted after a failing batch are taken off the expectations, and a creation
    /// refused because the namespace is terminating counts as done (the namespace will
    /// never take it). Deletions pick victims by [`get_pods_to_delete`], run concurrently,
    /// and take each failed one off the expectations; NotFound is not an error.
    async fn manage_replicas(
        &self,
        filtered_pods: &[Arc<Pod>],
        rs: &ReplicaSet,
        key: &str,
    ) -> Result<()> {
        let desired = usize::try_from(desired_replicas(rs)).unwrap_or(0);
        let current = filtered_pods.len();
        let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
        let controller = rs.object_ref(&());

        if current < desired {
            let diff = (desired - current).min(self.burst_replicas);
            // Raised before the first request, or a fast watch could observe a pod before
            // the expectation exists.
            self.expectations.expect_creations(key, as_i64(diff));
            tracing::info!(
                replica_set = key,
                need = desired,
                creating = diff,
                "Too few replicas"
            );
            let default_template = PodTemplateSpec::default();
            let template = rs
                .spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .unwrap_or(&default_template);
            let controller_ref = new_controller_ref(&rs.metadata, &self.gvk);
            let (successes, err) = slow_start_batch(diff, SLOW_START_INITIAL_BATCH_SIZE, || {
                self.create_pod(namespace, template, &controller, &controller_ref)
            })
            .await;
            let skipped = diff - successes;
            if skipped > 0 {
                tracing::info!(
                    replica_set = key,
                    pods_skipped = skipped,
                    "Slow-start failure. Skipping creation of pods, decrementing expectations"
                );
                self.expectations
                    .lower_expectations(key, as_i64(skipped), 0);
            }
            return match err {
                Some(source) => Err(Error::CreatePods {
                    replica_set: key.to_owned(),
                    source,
                }),
                None => Ok(()),
            };
        }

        if current > desired {
            let diff = (current - desired).min(self.burst_replicas);
            tracing::info!(
                replica_set = key,
                need = desired,
                deleting = diff,
                "Too many replicas"
            );
            let related_pods = self.get_indirectly_related_pods(rs);
            let now = (self.clock)();
            let pods_to_delete =
                get_pods_to_delete(filtered_pods.to_vec(), &related_pods, diff, now);
            if diff < filtered_pods.len()
                && let Some(metrics) = &self.metrics
            {
                metrics.report_sorting_deletion_age_ratio(filtered_pods, &pods_to_delete, now);
            }
            // Keys, not a count: each deletion is observed exactly once, whether seen as a
            // deletionTimestamp update or as the delete itself.
            self.expectations
                .expect_deletions(key, pod_keys(pods_to_delete.iter().map(Arc::as_ref)));
            let deletions = pods_to_delete.iter().map(|pod| {
                let controller = &controller;
                async move {
                    let name = pod.metadata.name.as_deref().unwrap_or_default();
                    let err = self
                        .pod_control
                        .delete_pod(namespace, name, controller)
                        .await
                        .err()?;
                    // The informer will never see this deletion.
                    let pod_key = pod_key(pod);
                    self.expectations.deletion_observed(key, &pod_key);
                    if err.is_not_found() {
                        return None;
                    }
                    tracing::info!(
                        replica_set = key,
                        pod = %pod_key,
                        "Failed to delete pod, decremented expectations"
                    );
                    Some(err)
                }
            });
            let first_error = join_all(deletions).await.into_iter().flatten().next();
            if let Some(source) = first_error {
                return Err(Error::DeletePods {
                    replica_set: key.to_owned(),
                    source,
                });
            }
        }
        Ok(())
    }

    /// One creation of a slow-start batch: a refusal because the namespace is terminating
    /// counts as success, as upstream's closure passed to `slowStartBatch`.
    async fn create_pod(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        controller: &k8s_openapi::api::core::v1::ObjectReference,
        controller_ref: &OwnerReference,
    ) -> std::result::Result<(), kcm_machinery::controller::pod_control::Error> {
        match self
            .pod_control
            .create_pods(namespace, template, controller, controller_ref)
            .await
        {
            Err(err) if err.is_namespace_terminating() => Ok(()),
            other => other,
        }
    }

    // -----------------------------------------------------------------------------------------
    // Helpers
    // -----------------------------------------------------------------------------------------

    /// Every cached pod of `namespace`.
    fn pods_in_namespace(&self, namespace: &str) -> Vec<Arc<Pod>> {
        objects_in_namespace(&self.pod_cache, namespace)
    }

    /// The ReplicaSets with the same controller (Deployment) as `rs`, `rs` included, as
    /// upstream's `getReplicaSetsWithSameController`. Empty when `rs` has no controller.
    pub fn get_replica_sets_with_same_controller(&self, rs: &ReplicaSet) -> Vec<Arc<ReplicaSet>> {
        let Some(controller_ref) = get_controller_of(&rs.metadata) else {
            tracing::error!(
                replica_set = ?rs.metadata.name,
                "ReplicaSet has no controller"
            );
            return Vec::new();
        };
        match self
            .rs_cache
            .by_index(CONTROLLER_UID_INDEX, &controller_ref.uid)
        {
            Ok(related) => related,
            Err(err) => {
                tracing::error!(%err, "listing ReplicaSets by controller UID");
                Vec::new()
            }
        }
    }

    /// The pods selected by any ReplicaSet with the same controller as `rs` (each once), as
    /// upstream's `getIndirectlyRelatedPods`: the co-location context for scale-down ranking.
    pub fn get_indirectly_related_pods(&self, rs: &ReplicaSet) -> Vec<Arc<Pod>> {
        let mut seen: HashSet<String> = HashSet::new();
        let mut related = Vec::new();
        for related_rs in self.get_replica_sets_with_same_controller(rs) {
            // An invalid selector matches no pods.
            let Ok(selector) = replica_set_selector(&related_rs) else {
                continue;
            };
            let namespace = related_rs.metadata.namespace.as_deref().unwrap_or_default();
            for pod in self.pods_in_namespace(namespace) {
                if !selector.matches_opt(pod.metadata.labels.as_ref()) {
                    continue;
                }
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                if seen.insert(uid) {
                    related.push(pod);
                }
            }
        }
        related
    }
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// The ReplicaSet and pod event handlers, as upstream's `addRS`/`updateRS`/`deleteRS` and
/// `addPod`/`updatePod`/`deletePod`. Cheap to clone; every clone shares the controller's
/// queue, expectations and ReplicaSet cache. They only compute keys, touch expectations and
/// enqueue: they never block.
#[derive(Clone)]
pub struct ReplicaSetEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
    /// The controller's expectations: pod events observe creations and deletions.
    expectations: Arc<UidTrackingControllerExpectations>,
    /// The ReplicaSet cache, to resolve owners and find ReplicaSets selecting an orphan.
    rs_cache: Indexer<ReplicaSet>,
}

impl std::fmt::Debug for ReplicaSetEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaSetEventHandlers")
            .finish_non_exhaustive()
    }
}

impl ReplicaSetEventHandlers {
    /// A ReplicaSet appeared: sync it.
    pub fn add_rs(&self, rs: &ReplicaSet) {
        tracing::trace!(replica_set = ?rs.metadata.name, "Adding");
        self.enqueue_rs(rs);
    }

    /// A ReplicaSet changed: sync it (every update, so a resync retries stalled creations).
    /// A different UID means it was deleted and recreated between two observations: the old
    /// one is handled as deleted first.
    pub fn update_rs(&self, old: &ReplicaSet, cur: &ReplicaSet) {
        if cur.metadata.uid != old.metadata.uid {
            self.delete_rs_object(old);
        }
        let (old_replicas, cur_replicas) = (desired_replicas(old), desired_replicas(cur));
        if old_replicas != cur_replicas {
            tracing::debug!(
                replica_set = ?cur.metadata.name,
                old_replicas,
                new_replicas = cur_replicas,
                "replicaSet updated. Desired pod count change."
            );
        }
        self.enqueue_rs(cur);
    }

    /// A ReplicaSet was deleted (possibly seen only as a tombstone): drop its expectations so
    /// a namesake starts clean, and sync the key (which finds nothing and stops).
    pub fn delete_rs(&self, obj: &DeletedObject<ReplicaSet>) {
        match obj.key() {
            Ok(key) => self.delete_rs_key(key),
            Err(err) => tracing::error!(%err, "couldn't get key for ReplicaSet"),
        }
    }

    fn delete_rs_object(&self, rs: &ReplicaSet) {
        if let Some(key) = key_of(rs) {
            self.delete_rs_key(key);
        }
    }

    fn delete_rs_key(&self, key: String) {
        tracing::trace!(key = %key, "Deleting");
        self.expectations.delete_expectations(&key);
        self.queue.add(key);
    }

    /// A pod appeared. Already being deleted (seen after a restart): handled as a deletion.
    /// Owned by a ReplicaSet we know: one of its expected creations is observed and it is
    /// synced. An orphan: every ReplicaSet selecting it is synced (one may adopt it); no
    /// creation is observed, as nobody waits for an orphan.
    pub fn add_pod(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            self.delete_pod_object(pod);
            return;
        }
        if let Some(controller_ref) = get_controller_of(&pod.metadata) {
            let Some(rs) = self.resolve_controller_ref(pod_namespace(pod), controller_ref) else {
                return;
            };
            let Some(key) = key_of(&rs) else {
                return;
            };
            tracing::trace!(pod = %pod_key(pod), "Pod created");
            self.expectations.creation_observed(&key);
            self.queue.add(key);
            return;
        }
        let rss = self.get_pod_replica_sets(pod);
        if rss.is_empty() {
            return;
        }
        tracing::trace!(pod = %pod_key(pod), "Orphan Pod created");
        for rs in &rss {
            self.enqueue_rs(rs);
        }
    }

    /// A pod changed. Same resourceVersion (a resync): ignored. Now being deleted: handled
    /// as a deletion (for the old labels' owner too when labels changed), so a replacement
    /// is created without waiting for the kubelet. A changed controller reference syncs the
    /// old owner; the current owner is synced, and again `minReadySeconds + 1s` after the
    /// pod became ready (to count it available). An orphan whose labels or reference
    /// changed syncs every ReplicaSet selecting it.
    pub fn update_pod(&self, old: &Pod, cur: &Pod) {
        if cur.metadata.resource_version == old.metadata.resource_version {
            return;
        }
        let label_changed = labels_of(cur) != labels_of(old);
        if cur.metadata.deletion_timestamp.is_some() {
            self.delete_pod_object(cur);
            if label_changed {
                // A deletionTimestamp is never unset, so the old state needs no check.
                self.delete_pod_object(old);
            }
            return;
        }

        let cur_ref = get_controller_of(&cur.metadata);
        let old_ref = get_controller_of(&old.metadata);
        let controller_ref_changed = cur_ref != old_ref;
        if controller_ref_changed
            && let Some(old_ref) = old_ref
            && let Some(rs) = self.resolve_controller_ref(pod_namespace(old), old_ref)
        {
            self.enqueue_rs(&rs);
        }

        if let Some(cur_ref) = cur_ref {
            let Some(rs) = self.resolve_controller_ref(pod_namespace(cur), cur_ref) else {
                return;
            };
            tracing::trace!(pod = %pod_key(cur), "Pod objectMeta updated.");
            self.enqueue_rs(&rs);
            let min_ready = min_ready_seconds(&rs);
            if !is_pod_ready(old) && is_pod_ready(cur) && min_ready > 0 {
                tracing::debug!(
                    pod = %pod_key(cur),
                    min_ready_seconds = min_ready,
                    "pod will be enqueued after a while for availability check"
                );
                // The extra second absorbs sub-second skew in the delayed add.
                self.enqueue_rs_after(&rs, seconds(i64::from(min_ready) + 1));
            }
            return;
        }

        if label_changed || controller_ref_changed {
            let rss = self.get_pod_replica_sets(cur);
            if rss.is_empty() {
                return;
            }
            tracing::trace!(pod = %pod_key(cur), "Orphan Pod objectMeta updated.");
            for rs in &rss {
                self.enqueue_rs(rs);
            }
        }
    }

    /// A pod was deleted (possibly seen only as a tombstone, whose state may be stale): its
    /// owner observes the deletion of that pod key and is synced. Orphans concern nobody.
    pub fn delete_pod(&self, obj: &DeletedObject<Pod>) {
        self.delete_pod_object(obj.object());
    }

    fn delete_pod_object(&self, pod: &Pod) {
        let Some(controller_ref) = get_controller_of(&pod.metadata) else {
            return;
        };
        let Some(rs) = self.resolve_controller_ref(pod_namespace(pod), controller_ref) else {
            return;
        };
        let Some(key) = key_of(&rs) else {
            return;
        };
        let pod_key = pod_key(pod);
        tracing::trace!(
            pod = %pod_key,
            deletion_timestamp = ?pod.metadata.deletion_timestamp,
            "Pod deleted"
        );
        self.expectations.deletion_observed(&key, &pod_key);
        self.queue.add(key);
    }

    /// The cached ReplicaSet `controller_ref` points to in `namespace`: same kind, same name,
    /// same UID (a namesake is not it), as upstream's `resolveControllerRef`.
    pub fn resolve_controller_ref(
        &self,
        namespace: &str,
        controller_ref: &OwnerReference,
    ) -> Option<Arc<ReplicaSet>> {
        if controller_ref.kind != KIND {
            return None;
        }
        let key = kcm_machinery::informer::keys::object_key(namespace, &controller_ref.name);
        self.rs_cache
            .get_by_key(&key)
            .filter(|rs| rs.metadata.uid.as_deref() == Some(controller_ref.uid.as_str()))
    }

    /// The cached ReplicaSets of the pod's namespace whose selector matches the pod, as
    /// upstream's `GetPodReplicaSets`. A pod without labels, or a ReplicaSet with an empty or
    /// invalid selector, matches nothing. More than one is a user error (logged).
    pub fn get_pod_replica_sets(&self, pod: &Pod) -> Vec<Arc<ReplicaSet>> {
        if pod.metadata.labels.as_ref().is_none_or(BTreeMap::is_empty) {
            return Vec::new();
        }
        let mut rss = objects_in_namespace(&self.rs_cache, pod_namespace(pod));
        rss.retain(|rs| match replica_set_selector(rs) {
            Ok(selector) => {
                !selector.is_everything() && selector.matches_opt(pod.metadata.labels.as_ref())
            }
            Err(_) => false,
        });
        if rss.len() > 1 {
            tracing::error!(
                labels = ?pod.metadata.labels,
                "user error! more than one ReplicaSet is selecting pods with labels"
            );
        }
        rss
    }

    fn enqueue_rs(&self, rs: &ReplicaSet) {
        if let Some(key) = key_of(rs) {
            self.queue.add(key);
        }
    }

    fn enqueue_rs_after(&self, rs: &ReplicaSet, delay: Duration) {
        if let Some(key) = key_of(rs) {
            self.queue.add_after(key, delay);
        }
    }
}

/// The informer side: ReplicaSet notifications.
impl ResourceEventHandler<ReplicaSet> for ReplicaSetEventHandlers {
    fn on_add(&self, rs: Arc<ReplicaSet>, _is_in_initial_list: bool) {
        self.add_rs(&rs);
    }

    fn on_update(&self, old: Arc<ReplicaSet>, new: Arc<ReplicaSet>) {
        self.update_rs(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<ReplicaSet>) {
        self.delete_rs(&obj);
    }
}

/// The informer side: pod notifications.
impl ResourceEventHandler<Pod> for ReplicaSetEventHandlers {
    fn on_add(&self, pod: Arc<Pod>, _is_in_initial_list: bool) {
        self.add_pod(&pod);
    }

    fn on_update(&self, old: Arc<Pod>, new: Arc<Pod>) {
        self.update_pod(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<Pod>) {
        self.delete_pod(&obj);
    }
}

// ---------------------------------------------------------------------------------------------
// Free helpers
// ---------------------------------------------------------------------------------------------

/// The selector of `rs`, as upstream's `metav1.LabelSelectorAsSelector(rs.Spec.Selector)`;
/// a ReplicaSet without a spec selects nothing.
fn replica_set_selector(rs: &ReplicaSet) -> kcm_machinery::labels::Result<Selector> {
    match &rs.spec {
        Some(spec) => Selector::from_label_selector(&spec.selector),
        None => Ok(Selector::nothing()),
    }
}

/// The cache key of `rs`, logging (as upstream's `HandleError`) when it has none.
fn key_of(rs: &ReplicaSet) -> Option<String> {
    match meta_namespace_key(rs) {
        Ok(key) => Some(key),
        Err(err) => {
            tracing::error!(%err, "couldn't get key for ReplicaSet");
            None
        }
    }
}

fn pod_namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

/// A pod's labels, absent and empty being the same.
fn labels_of(pod: &Pod) -> Option<&BTreeMap<String, String>> {
    pod.metadata.labels.as_ref().filter(|l| !l.is_empty())
}

/// The objects of `namespace` in `cache`, through its namespace index.
fn objects_in_namespace<K>(cache: &Indexer<K>, namespace: &str) -> Vec<Arc<K>>
where
    K: Resource + Send + Sync + 'static,
{
    match cache.by_index(NAMESPACE_INDEX, namespace) {
        Ok(objects) => objects,
        // Without the namespace index, filter everything (as client-go's listers do).
        Err(_) => cache
            .list()
            .into_iter()
            .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
            .collect(),
    }
}

fn seconds(n: i64) -> Duration {
    Duration::from_secs(u64::try_from(n).unwrap_or(0))
}

fn as_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
