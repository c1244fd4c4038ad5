//! The ReplicaSet controller: constants, the controller and its construction, `Run`, the event handlers and the worker wiring (upstream `replica_set.go` up to `processNextWorkItem`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::controller::{
    ControllerExpectations, PodControl, RealPodControl, UidTrackingControllerExpectations,
    get_controller_of, is_pod_ready, pod_key,
};
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_workers};
use kcm_machinery::events::EventRecorder;
use kcm_machinery::informer::OwnWrites;
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::index::{IndexFunc, Indexers, NAMESPACE_INDEX};
use kcm_machinery::informer::keys::meta_namespace_key;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, wait_for_synced,
};
use kcm_machinery::labels::Selector;
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::Resource;
use kube::core::GroupVersionKind;
use tokio_util::sync::CancellationToken;

use super::client::{ApiReplicaSetClient, ReplicaSetClient};
use super::metrics::ReplicaSetMetrics;
use super::status::{desired_replicas, min_ready_seconds};
use super::{Error, Result};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// The most pods one sync pass creates or deletes for one ReplicaSet, as upstream's
/// `BurstReplicas`; the pass's expectations then hold the ReplicaSet until the informer has
/// observed them all.
pub const BURST_REPLICAS: usize = 500;

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

/// The kind this controller owns pods for by default; controller references of any other
/// kind are not ours.
pub(super) const KIND: &str = "ReplicaSet";

/// The longest a sync waits for the ReplicaSet cache to catch up with this controller's own
/// last status write to that ReplicaSet before going ahead with the stale copy.
pub const OWN_WRITE_WAIT: Duration = Duration::from_secs(2);

/// The wall clock used for condition transition times, pod availability and scale-down
/// ranking (upstream's `metav1.Now()`); injectable so tests are deterministic.
pub use kcm_machinery::controller::clock::Clock;

/// A replacement for [`ReplicaSetController::sync`] run by the workers, as upstream's
/// injectable `syncHandler` (tests only).
pub type SyncHandler = Arc<dyn Fn(String) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// The kind a controller built on the ReplicaSet logic manages, and its names: the
/// ReplicaSet itself, or (through `crate::replication`'s adapter) the ReplicationController,
/// as the `gvk`, `metricOwnerName`-free and `queueName` arguments of upstream's
/// `NewBaseController`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedKind {
    /// Written into controller references of created and adopted pods, and into the
    /// references events are recorded against.
    pub gvk: GroupVersionKind,
    /// The controller's name in logs (`replicaset-controller`).
    pub controller_name: &'static str,
    /// The work queue's name in the `workqueue_*` metrics (`replicaset`).
    pub queue_name: &'static str,
    /// Whether the kind's status counts `terminatingReplicas` (upstream's
    /// `ReplicaSetControllerFeatures.EnableStatusTerminatingReplicas`, with
    /// `DeploymentReplicaSetTerminatingReplicas` on, its default since v1.35): ReplicaSets do,
    /// ReplicationControllers have no such field.
    pub status_terminating_replicas: bool,
}

impl ManagedKind {
    /// apps/v1 ReplicaSet, `replicaset-controller`, queue `replicaset`.
    pub fn replica_set() -> Self {
        Self {
            gvk: GroupVersionKind::gvk("apps", "v1", KIND),
            controller_name: CONTROLLER_NAME,
            queue_name: QUEUE_NAME,
            status_terminating_replicas: true,
        }
    }
}

/// Tuning and wiring of a [`ReplicaSetController`].
#[derive(Clone)]
pub struct ReplicaSetControllerOptions {
    /// The kind managed (default: ReplicaSets).
    pub kind: ManagedKind,
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
            kind: ManagedKind::replica_set(),
            burst_replicas: BURST_REPLICAS,
            metrics: None,
            controller_metrics: None,
        }
    }
}

impl std::fmt::Debug for ReplicaSetControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaSetControllerOptions")
            .field("kind", &self.kind.gvk.kind)
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
    /// `apps/v1 ReplicaSet` (or `v1 ReplicationController`): written into the controller
    /// references of created and adopted pods.
    pub(super) gvk: GroupVersionKind,
    /// The controller's name in logs and worker metrics.
    pub(super) controller_name: &'static str,
    /// Whether `status.terminatingReplicas` is written (see [`ManagedKind`]).
    pub(super) status_terminating_replicas: bool,
    /// The direct ReplicaSet API calls (uncached GET before adopting, `/status` writes). Test
    /// seam: [`super::FakeReplicaSetClient`].
    pub(super) rs_client: Arc<dyn ReplicaSetClient>,
    /// Creates, deletes and patches pods, recording events. Test seam:
    /// `kcm_machinery::controller::FakePodControl`.
    pub(super) pod_control: Arc<dyn PodControl>,
    /// The most pods created or deleted per ReplicaSet per sync pass.
    pub(super) burst_replicas: usize,
    /// Per ReplicaSet key, the pod creations and deletions (by pod key) issued and not yet
    /// observed by the pod informer. A key with unfulfilled, unexpired expectations is not
    /// scaled: its cache is known to be behind its own writes.
    pub(super) expectations: Arc<UidTrackingControllerExpectations>,
    /// The ReplicaSet informer's cache (read only), indexed by namespace and by
    /// [`CONTROLLER_UID_INDEX`].
    pub(super) rs_cache: Indexer<ReplicaSet>,
    /// The pod informer's cache (read only), indexed by namespace.
    pub(super) pod_cache: Indexer<Pod>,
    /// Whether the informers feeding the two caches have synced; `run` waits for all.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// ReplicaSet keys (`namespace/name`) to sync. Shared with the event handlers.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers; they share `queue`, `expectations` and `rs_cache`.
    pub(super) handlers: ReplicaSetEventHandlers,
    /// Replaces [`Self::sync`] in the workers when set (test seam, upstream's `syncHandler`).
    pub(super) sync_handler: Option<SyncHandler>,
    /// Wall-clock time (test seam).
    pub(super) clock: Clock,
    /// The `replicaset_controller_*` metrics, if recorded.
    pub(super) metrics: Option<Arc<ReplicaSetMetrics>>,
    /// This controller's status writes (per ReplicaSet key) not yet seen in the ReplicaSet
    /// cache; `None` without an informer (unit tests over bare caches).
    pub(super) own_writes: Option<OwnWrites>,
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
        controller.caches_synced = InformerRegistrar::new(controller.controller_name)
            .register(rs_informer, controller.handlers.clone())
            .register(pod_informer, controller.handlers.clone())
            .finish();
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
            name: options.kind.queue_name.to_owned(),
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
            kind: options.kind.gvk.kind.clone(),
        };
        Self {
            gvk: options.kind.gvk,
            controller_name: options.kind.controller_name,
            status_terminating_replicas: options.kind.status_terminating_replicas,
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

    /// Makes each sync wait for the informer to have seen this controller's own last status
    /// write (what [`Self::with_informers`] sets up from the ReplicaSet informer).
    pub fn with_own_writes(mut self, own_writes: OwnWrites) -> Self {
        self.own_writes = Some(own_writes);
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
        tracing::info!(controller = self.controller_name, "Starting controller");
        if !wait_for_synced(self.controller_name, &cancel, &self.caches_synced).await {
            self.queue.shut_down();
            tracing::info!(
                controller = self.controller_name,
                "Shutting down controller"
            );
            return;
        }
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync_key(key).await }
        };
        run_workers(
            self.controller_name,
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            sync,
        )
        .await;
        tracing::info!(
            controller = self.controller_name,
            "Shutting down controller"
        );
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
    /// The kind controller references must name to be ours (`ReplicaSet`, or
    /// `ReplicationController` behind the adapter).
    kind: String,
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
        if controller_ref.kind != self.kind {
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
// Worker wiring
// ---------------------------------------------------------------------------------------------

impl ReplicaSetController {
    /// Takes one key and syncs it through the shared worker (forgotten on success, requeued
    /// rate-limited on failure or panic), as upstream's `processNextWorkItem`. False once the
    /// queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(self.controller_name, &self.queue, &ERROR_POLICY, |key| {
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
}

// ---------------------------------------------------------------------------------------------
// Free helpers
// ---------------------------------------------------------------------------------------------

/// The selector of `rs`, as upstream's `metav1.LabelSelectorAsSelector(rs.Spec.Selector)`;
/// a ReplicaSet without a spec selects nothing.
pub(super) fn replica_set_selector(rs: &ReplicaSet) -> kcm_machinery::labels::Result<Selector> {
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
pub(super) fn objects_in_namespace<K>(cache: &Indexer<K>, namespace: &str) -> Vec<Arc<K>>
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

pub(super) fn seconds(n: i64) -> Duration {
    Duration::from_secs(u64::try_from(n).unwrap_or(0))
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
