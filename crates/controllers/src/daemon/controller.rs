//! The DaemonSet controller: constants, the controller and its construction, `Run`, the event handlers and the worker wiring (upstream `daemon_controller.go` up to `processNextWorkItem`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::client::Backoff;
use kcm_machinery::controller::history::{ApiRevisionClient, RevisionClient};
use kcm_machinery::controller::{
    ControllerExpectations, ErrorPolicy, PodControl, RealPodControl, get_controller_of,
    is_pod_ready, pod_key, process_next_work_item, run_workers,
};
use kcm_machinery::events::EventRecorder;
use kcm_machinery::informer::OwnWrites;
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::index::NAMESPACE_INDEX;
use kcm_machinery::informer::keys::{meta_namespace_key, object_key};
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

use super::client::{ApiDaemonSetClient, DaemonSetClient};
use super::placement::DaemonPlacement;
use super::util::min_ready_seconds;
use super::{Error, Result};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// The most pods one sync pass creates or deletes for one DaemonSet, as upstream's
/// `BurstReplicas` (250: higher values can overload the registry).
pub const BURST_REPLICAS: usize = 250;

/// How often the failed-pods back-off forgets idle entries, as upstream's `BackoffGCInterval`.
pub const BACKOFF_GC_INTERVAL: Duration = Duration::from_secs(60);

/// The first delay before a failed daemon pod is deleted again on the same node
/// (kube-controller-manager's `flowcontrol.NewBackOff(1*time.Second, 15*time.Minute)`).
pub const FAILED_PODS_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// The longest such delay.
pub const FAILED_PODS_BACKOFF_MAX: Duration = Duration::from_secs(15 * 60);

/// Event reason when a DaemonSet selects every pod, as upstream's `SelectingAllReason`.
pub const SELECTING_ALL_REASON: &str = "SelectingAll";
/// Event reason when a pod cannot be placed on a node, as upstream's `FailedPlacementReason`.
pub const FAILED_PLACEMENT_REASON: &str = "FailedPlacement";
/// Event reason when a daemon pod failed, as upstream's `FailedDaemonPodReason`.
pub const FAILED_DAEMON_POD_REASON: &str = "FailedDaemonPod";
/// Event reason when a daemon pod succeeded, as upstream's `SucceededDaemonPodReason`.
pub const SUCCEEDED_DAEMON_POD_REASON: &str = "SucceededDaemonPod";

/// The work queue's name: the `name` label of its `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "daemonset";

/// The controller's name in logs and `--controllers` (kube-controller-manager's
/// `daemonset-controller`).
pub const CONTROLLER_NAME: &str = "daemonset-controller";

/// How the workers treat a failed sync, as upstream's `processNextWorkItem`: requeue
/// rate-limited, forever.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("failed with");

/// The kind this controller owns pods and revisions for.
pub(super) const KIND: &str = "DaemonSet";

/// The longest a sync waits for the DaemonSet cache to catch up with this controller's own
/// last status write to that DaemonSet before going ahead with the stale copy.
pub(super) const OWN_WRITE_WAIT: Duration = Duration::from_secs(2);

/// The wall clock used for pod availability (upstream's `failedPodsBackoff.Clock.Now()`);
/// injectable so tests are deterministic.
pub use kcm_machinery::controller::clock::Clock;

/// A replacement for [`DaemonSetsController::sync`] run by the workers (tests only).
pub type SyncHandler = Arc<dyn Fn(String) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// Tuning and wiring of a [`DaemonSetsController`].
#[derive(Clone)]
pub struct DaemonSetsControllerOptions {
    /// The most pods created or deleted per DaemonSet per sync (default [`BURST_REPLICAS`]).
    pub burst_replicas: usize,
    /// Where the queue records its `workqueue_*{name="daemonset"}` metrics.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl Default for DaemonSetsControllerOptions {
    fn default() -> Self {
        Self {
            burst_replicas: BURST_REPLICAS,
            metrics: None,
        }
    }
}

impl std::fmt::Debug for DaemonSetsControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonSetsControllerOptions")
            .field("burst_replicas", &self.burst_replicas)
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Synchronizes DaemonSets with the pods they run on nodes, as kube-controller-manager's
/// `DaemonSetsController`. A key is never synced by two workers at once.
pub struct DaemonSetsController {
    /// `apps/v1 DaemonSet`: written into the controller references of pods and revisions.
    pub(super) gvk: GroupVersionKind,
    /// The direct DaemonSet calls (uncached GET, `/status`). Test seam: [`super::FakeDaemonSetClient`].
    pub(super) ds_client: Arc<dyn DaemonSetClient>,
    /// Creates, updates, deletes and patches ControllerRevisions. Test seam:
    /// `FakeRevisionClient`.
    pub(super) revision_client: Arc<dyn RevisionClient>,
    /// Creates, deletes and patches pods, recording events. Test seam: `FakePodControl`.
    pub(super) pod_control: Arc<dyn PodControl>,
    /// Records the controller's own events (`SelectingAll`, `FailedDaemonPod`, ...).
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// The most pods created or deleted per DaemonSet per sync pass.
    pub(super) burst_replicas: usize,
    /// Per DaemonSet key, the pod creations and deletions issued and not yet observed. A key
    /// with unfulfilled, unexpired expectations only gets its status updated.
    pub(super) expectations: Arc<ControllerExpectations>,
    /// The DaemonSet informer's cache, indexed by namespace.
    pub(super) ds_cache: Indexer<DaemonSet>,
    /// The ControllerRevision informer's cache, indexed by namespace.
    pub(super) history_cache: Indexer<ControllerRevision>,
    /// The pod informer's cache, indexed by namespace.
    pub(super) pod_cache: Indexer<Pod>,
    /// The node informer's cache.
    pub(super) node_cache: Indexer<Node>,
    /// Whether the informers feeding the caches have synced; `run` waits for all.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// DaemonSet keys (`namespace/name`) to sync. Shared with the event handlers.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: DaemonSetEventHandlers,
    /// Per `uid/observedGeneration/node`, how long to wait before deleting the next failed
    /// daemon pod there, so the controller does not fight a kubelet that rejects pods.
    pub(super) failed_pods_backoff: Arc<Backoff>,
    /// Replaces [`Self::sync`] in the workers when set (test seam).
    pub(super) sync_handler: Option<SyncHandler>,
    /// Wall-clock time (test seam).
    pub(super) clock: Clock,
    /// This controller's status writes not yet seen in the DaemonSet cache.
    pub(super) own_writes: Option<OwnWrites>,
}

impl std::fmt::Debug for DaemonSetsController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonSetsController")
            .field("burst_replicas", &self.burst_replicas)
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Constructor
// ---------------------------------------------------------------------------------------------

impl DaemonSetsController {
    /// The controller kube-controller-manager runs, over the factory's DaemonSet,
    /// ControllerRevision, pod and node informers, as upstream's `NewDaemonSetsController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: DaemonSetsControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.daemon_sets(),
            &factory.informer_for::<ControllerRevision>(),
            &factory.pods(),
            &factory.nodes(),
            Arc::new(ApiDaemonSetClient::new(client.clone())),
            Arc::new(ApiRevisionClient::new(client.clone())),
            Arc::new(RealPodControl::new(client, Arc::clone(&recorder))),
            recorder,
            options,
        )
    }

    /// A controller over the given informers, writing through the given seams: registers
    /// the event handlers and waits for every informer in [`Self::run`].
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    #[allow(clippy::too_many_arguments)]
    pub fn with_informers(
        ds_informer: &SharedIndexInformer<DaemonSet>,
        history_informer: &SharedIndexInformer<ControllerRevision>,
        pod_informer: &SharedIndexInformer<Pod>,
        node_informer: &SharedIndexInformer<Node>,
        ds_client: Arc<dyn DaemonSetClient>,
        revision_client: Arc<dyn RevisionClient>,
        pod_control: Arc<dyn PodControl>,
        recorder: Arc<dyn EventRecorder>,
        options: DaemonSetsControllerOptions,
    ) -> Self {
        let mut controller = Self::with_caches(
            ds_informer.indexer().clone(),
            history_informer.indexer().clone(),
            pod_informer.indexer().clone(),
            node_informer.indexer().clone(),
            ds_client,
            revision_client,
            pod_control,
            recorder,
            options,
        );
        let handlers = &controller.handlers;
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(ds_informer, handlers.clone())
            .register(history_informer, handlers.clone())
            .register(pod_informer, handlers.clone())
            .register(node_informer, handlers.clone())
            .finish();
        controller.own_writes = Some(OwnWrites::new(ds_informer.freshness()));
        controller
    }

    /// A controller over bare caches (unit tests fill them and call the handlers and
    /// [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    #[allow(clippy::too_many_arguments)]
    pub fn with_caches(
        ds_cache: Indexer<DaemonSet>,
        history_cache: Indexer<ControllerRevision>,
        pod_cache: Indexer<Pod>,
        node_cache: Indexer<Node>,
        ds_client: Arc<dyn DaemonSetClient>,
        revision_client: Arc<dyn RevisionClient>,
        pod_control: Arc<dyn PodControl>,
        recorder: Arc<dyn EventRecorder>,
        options: DaemonSetsControllerOptions,
    ) -> Self {
        let config = QueueConfig {
            name: QUEUE_NAME.to_owned(),
            metrics: options.metrics,
        };
        let queue = RateLimitingQueue::with_config(default_controller_rate_limiter(), config);
        let expectations = Arc::new(ControllerExpectations::new());
        let handlers = DaemonSetEventHandlers {
            queue: queue.clone(),
            expectations: Arc::clone(&expectations),
            ds_cache: ds_cache.clone(),
        };
        Self {
            gvk: GroupVersionKind::gvk("apps", "v1", KIND),
            ds_client,
            revision_client,
            pod_control,
            recorder,
            burst_replicas: options.burst_replicas,
            expectations,
            ds_cache,
            history_cache,
            pod_cache,
            node_cache,
            caches_synced: Vec::new(),
            queue,
            handlers,
            failed_pods_backoff: Arc::new(Backoff::new(
                FAILED_PODS_BACKOFF_INITIAL,
                FAILED_PODS_BACKOFF_MAX,
            )),
            sync_handler: None,
            clock: Arc::new(Timestamp::now),
            own_writes: None,
        }
    }

    /// Makes [`Self::run`] wait for these informers to sync before starting workers.
    pub fn with_caches_synced(mut self, synced: Vec<InformerSynced>) -> Self {
        self.caches_synced = synced;
        self
    }

    /// Replaces [`Self::sync`] in the workers (test seam).
    pub fn with_sync_handler(mut self, handler: SyncHandler) -> Self {
        self.sync_handler = Some(handler);
        self
    }

    /// Replaces the wall clock (test seam).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Replaces the failed-pods back-off (test seam).
    pub fn with_failed_pods_backoff(mut self, backoff: Arc<Backoff>) -> Self {
        self.failed_pods_backoff = backoff;
        self
    }

    /// The handlers to register with the informers.
    pub fn event_handlers(&self) -> &DaemonSetEventHandlers {
        &self.handlers
    }

    /// The work queue of DaemonSet keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// The pending pod creations and deletions per DaemonSet key.
    pub fn expectations(&self) -> &ControllerExpectations {
        &self.expectations
    }

    /// The failed-pods back-off.
    pub fn failed_pods_backoff(&self) -> &Backoff {
        &self.failed_pods_backoff
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Waits for the caches to sync, then syncs DaemonSets with `workers` workers (and
    /// collects the failed-pods back-off every [`BACKOFF_GC_INTERVAL`]) until `cancel` fires,
    /// as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tracing::info!(
            controller = CONTROLLER_NAME,
            "Starting daemon sets controller"
        );
        if !wait_for_synced(CONTROLLER_NAME, &cancel, &self.caches_synced).await {
            self.queue.shut_down();
            tracing::info!(
                controller = CONTROLLER_NAME,
                "Shutting down daemon sets controller"
            );
            return;
        }
        let gc = tokio::spawn({
            let backoff = Arc::clone(&self.failed_pods_backoff);
            let cancel = cancel.clone();
            async move {
                let mut tick = tokio::time::interval(BACKOFF_GC_INTERVAL);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tick.tick() => backoff.gc(),
                    }
                }
            }
        });
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
        gc.abort();
        tracing::info!(
            controller = CONTROLLER_NAME,
            "Shutting down daemon sets controller"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// The DaemonSet, ControllerRevision, pod and node event handlers, as upstream's
/// `addDaemonset`/`updateDaemonset`/`deleteDaemonset`, `addHistory`/..., `addPod`/... and
/// `addNode`/`updateNode`. Cheap to clone; they only compute keys, touch expectations and
/// enqueue.
#[derive(Clone)]
pub struct DaemonSetEventHandlers {
    queue: RateLimitingQueue<String>,
    expectations: Arc<ControllerExpectations>,
    ds_cache: Indexer<DaemonSet>,
}

impl std::fmt::Debug for DaemonSetEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonSetEventHandlers")
            .finish_non_exhaustive()
    }
}

impl DaemonSetEventHandlers {
    /// A DaemonSet appeared: sync it.
    pub fn add_daemon_set(&self, ds: &DaemonSet) {
        tracing::trace!(daemonset = ?ds.metadata.name, "Adding daemon set");
        self.enqueue(ds);
    }

    /// A DaemonSet changed: sync it; a different UID is a deletion of the old one first.
    pub fn update_daemon_set(&self, old: &DaemonSet, cur: &DaemonSet) {
        if cur.metadata.uid != old.metadata.uid
            && let Some(key) = key_of(old)
        {
            self.delete_key(key);
        }
        tracing::trace!(daemonset = ?old.metadata.name, "Updating daemon set");
        self.enqueue(cur);
    }

    /// A DaemonSet was deleted: drop its expectations and sync the key (which finds nothing).
    pub fn delete_daemon_set(&self, obj: &DeletedObject<DaemonSet>) {
        match obj.key() {
            Ok(key) => self.delete_key(key),
            Err(err) => tracing::error!(%err, "couldn't get key for DaemonSet"),
        }
    }

    fn delete_key(&self, key: String) {
        tracing::trace!(key = %key, "Deleting daemon set");
        self.expectations.delete_expectations(&key);
        self.queue.add(key);
    }

    /// A ControllerRevision appeared: an orphan syncs the DaemonSets selecting it (one may
    /// adopt it); an owned one is only logged; one being deleted is handled as deleted.
    pub fn add_history(&self, history: &ControllerRevision) {
        if history.metadata.deletion_timestamp.is_some() {
            self.delete_history_object(history);
            return;
        }
        if let Some(controller_ref) = get_controller_of(&history.metadata) {
            if self
                .resolve_controller_ref(namespace_of(&history.metadata), controller_ref)
                .is_some()
            {
                tracing::trace!(revision = ?history.metadata.name, "Observed a ControllerRevision");
            }
            return;
        }
        for ds in self.daemon_sets_for_labels(
            namespace_of(&history.metadata),
            history.metadata.labels.as_ref(),
        ) {
            self.enqueue(&ds);
        }
    }

    /// A ControllerRevision changed: the old and new owners are synced; an orphan whose
    /// labels or reference changed syncs every DaemonSet selecting it.
    pub fn update_history(&self, old: &ControllerRevision, cur: &ControllerRevision) {
        if cur.metadata.resource_version == old.metadata.resource_version {
            return;
        }
        let cur_ref = get_controller_of(&cur.metadata);
        let old_ref = get_controller_of(&old.metadata);
        let controller_ref_changed = cur_ref != old_ref;
        if controller_ref_changed
            && let Some(old_ref) = old_ref
            && let Some(ds) = self.resolve_controller_ref(namespace_of(&old.metadata), old_ref)
        {
            self.enqueue(&ds);
        }
        if let Some(cur_ref) = cur_ref {
            if let Some(ds) = self.resolve_controller_ref(namespace_of(&cur.metadata), cur_ref) {
                self.enqueue(&ds);
            }
            return;
        }
        if cur.metadata.labels != old.metadata.labels || controller_ref_changed {
            for ds in self
                .daemon_sets_for_labels(namespace_of(&cur.metadata), cur.metadata.labels.as_ref())
            {
                self.enqueue(&ds);
            }
        }
    }

    /// A ControllerRevision was deleted: its owner is synced.
    pub fn delete_history(&self, obj: &DeletedObject<ControllerRevision>) {
        self.delete_history_object(obj.object());
    }

    fn delete_history_object(&self, history: &ControllerRevision) {
        let Some(controller_ref) = get_controller_of(&history.metadata) else {
            return;
        };
        if let Some(ds) =
            self.resolve_controller_ref(namespace_of(&history.metadata), controller_ref)
        {
            self.enqueue(&ds);
        }
    }

    /// A pod appeared: an owned one observes a creation of its DaemonSet and syncs it; an
    /// orphan syncs every DaemonSet selecting it; one being deleted is handled as deleted.
    pub fn add_pod(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            self.delete_pod_object(pod);
            return;
        }
        if let Some(controller_ref) = get_controller_of(&pod.metadata) {
            let Some(ds) = self.resolve_controller_ref(namespace_of(&pod.metadata), controller_ref)
            else {
                return;
            };
            let Some(key) = key_of(&ds) else {
                return;
            };
            tracing::trace!(pod = %pod_key(pod), "Pod added");
            self.expectations.creation_observed(&key);
            self.queue.add(key);
            return;
        }
        for ds in
            self.daemon_sets_for_labels(namespace_of(&pod.metadata), pod.metadata.labels.as_ref())
        {
            self.enqueue(&ds);
        }
    }

    /// A pod changed: the owners before and after are synced, and again `minReadySeconds + 1s`
    /// after the pod became ready; a pod now being deleted is handled as deleted.
    pub fn update_pod(&self, old: &Pod, cur: &Pod) {
        if cur.metadata.resource_version == old.metadata.resource_version {
            return;
        }
        if cur.metadata.deletion_timestamp.is_some() {
            self.delete_pod_object(cur);
            return;
        }
        let cur_ref = get_controller_of(&cur.metadata);
        let old_ref = get_controller_of(&old.metadata);
        let controller_ref_changed = cur_ref != old_ref;
        if controller_ref_changed
            && let Some(old_ref) = old_ref
            && let Some(ds) = self.resolve_controller_ref(namespace_of(&old.metadata), old_ref)
        {
            self.enqueue(&ds);
        }
        if let Some(cur_ref) = cur_ref {
            let Some(ds) = self.resolve_controller_ref(namespace_of(&cur.metadata), cur_ref) else {
                return;
            };
            self.enqueue(&ds);
            let min_ready = min_ready_seconds(&ds);
            if !is_pod_ready(old) && is_pod_ready(cur) && min_ready > 0 {
                // The extra second absorbs sub-second skew in the delayed add.
                self.enqueue_after(
                    &ds,
                    Duration::from_secs(u64::from(min_ready.unsigned_abs()) + 1),
                );
            }
            return;
        }
        let dss =
            self.daemon_sets_for_labels(namespace_of(&cur.metadata), cur.metadata.labels.as_ref());
        if cur.metadata.labels != old.metadata.labels || controller_ref_changed {
            for ds in dss {
                self.enqueue(&ds);
            }
        }
    }

    /// A pod was deleted: its owner observes the deletion and is synced.
    pub fn delete_pod(&self, obj: &DeletedObject<Pod>) {
        self.delete_pod_object(obj.object());
    }

    fn delete_pod_object(&self, pod: &Pod) {
        let Some(controller_ref) = get_controller_of(&pod.metadata) else {
            return;
        };
        let Some(ds) = self.resolve_controller_ref(namespace_of(&pod.metadata), controller_ref)
        else {
            return;
        };
        let Some(key) = key_of(&ds) else {
            return;
        };
        tracing::trace!(pod = %pod_key(pod), "Pod deleted");
        self.expectations.deletion_observed(&key);
        self.queue.add(key);
    }

    /// A node appeared: every DaemonSet that should run on it is synced.
    pub fn add_node(&self, node: &Node) {
        for ds in self.ds_cache.list() {
            if DaemonPlacement::of(&ds).should_run(node).should_run {
                self.enqueue(&ds);
            }
        }
    }

    /// A node changed in a way that matters (not just heartbeats): every DaemonSet whose
    /// verdict for it changed is synced.
    pub fn update_node(&self, old: &Node, cur: &Node) {
        if should_ignore_node_update(old, cur) {
            return;
        }
        for ds in self.ds_cache.list() {
            let placement = DaemonPlacement::of(&ds);
            if placement.should_run(old) != placement.should_run(cur) {
                self.enqueue(&ds);
            }
        }
    }

    /// The cached DaemonSet `controller_ref` points to (same kind, name and UID), as
    /// upstream's `resolveControllerRef`.
    pub fn resolve_controller_ref(
        &self,
        namespace: &str,
        controller_ref: &OwnerReference,
    ) -> Option<Arc<DaemonSet>> {
        if controller_ref.kind != KIND {
            return None;
        }
        self.ds_cache
            .get_by_key(&object_key(namespace, &controller_ref.name))
            .filter(|ds| ds.metadata.uid.as_deref() == Some(controller_ref.uid.as_str()))
    }

    /// The DaemonSets of `namespace` whose non-empty, valid selector matches `labels`, as
    /// upstream's `GetPodDaemonSets` / `GetHistoryDaemonSets`. Objects without labels match
    /// none; more than one is a user error (logged).
    pub fn daemon_sets_for_labels(
        &self,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
    ) -> Vec<Arc<DaemonSet>> {
        let Some(labels) = labels.filter(|l| !l.is_empty()) else {
            return Vec::new();
        };
        let mut sets = self
            .ds_cache
            .by_index(NAMESPACE_INDEX, namespace)
            .unwrap_or_else(|_| {
                self.ds_cache
                    .list()
                    .into_iter()
                    .filter(|ds| ds.metadata.namespace.as_deref() == Some(namespace))
                    .collect()
            });
        sets.retain(|ds| {
            daemon_set_selector(ds).is_ok_and(|s| !s.is_everything() && s.matches(labels))
        });
        if sets.len() > 1 {
            tracing::error!(
                ?labels,
                "user error! more than one daemon is selecting pods with labels"
            );
        }
        sets
    }

    fn enqueue(&self, ds: &DaemonSet) {
        if let Some(key) = key_of(ds) {
            self.queue.add(key);
        }
    }

    fn enqueue_after(&self, ds: &DaemonSet, delay: Duration) {
        if let Some(key) = key_of(ds) {
            self.queue.add_after(key, delay);
        }
    }
}

impl ResourceEventHandler<DaemonSet> for DaemonSetEventHandlers {
    fn on_add(&self, ds: Arc<DaemonSet>, _is_in_initial_list: bool) {
        self.add_daemon_set(&ds);
    }
    fn on_update(&self, old: Arc<DaemonSet>, new: Arc<DaemonSet>) {
        self.update_daemon_set(&old, &new);
    }
    fn on_delete(&self, obj: DeletedObject<DaemonSet>) {
        self.delete_daemon_set(&obj);
    }
}

impl ResourceEventHandler<ControllerRevision> for DaemonSetEventHandlers {
    fn on_add(&self, history: Arc<ControllerRevision>, _is_in_initial_list: bool) {
        self.add_history(&history);
    }
    fn on_update(&self, old: Arc<ControllerRevision>, new: Arc<ControllerRevision>) {
        self.update_history(&old, &new);
    }
    fn on_delete(&self, obj: DeletedObject<ControllerRevision>) {
        self.delete_history(&obj);
    }
}

impl ResourceEventHandler<Pod> for DaemonSetEventHandlers {
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

impl ResourceEventHandler<Node> for DaemonSetEventHandlers {
    fn on_add(&self, node: Arc<Node>, _is_in_initial_list: bool) {
        self.add_node(&node);
    }
    fn on_update(&self, old: Arc<Node>, new: Arc<Node>) {
        self.update_node(&old, &new);
    }
    // Upstream registers no delete handler: a deleted node's pods are the pod GC's.
    fn on_delete(&self, _obj: DeletedObject<Node>) {}
}

/// Whether the condition types whose status is `True` are the same in both lists, as
/// upstream's `nodeInSameCondition`.
pub(super) fn node_in_same_condition(old: &[NodeCondition], cur: &[NodeCondition]) -> bool {
    let trues = |cs: &[NodeCondition]| -> std::collections::BTreeSet<String> {
        cs.iter()
            .filter(|c| c.status == "True")
            .map(|c| c.type_.clone())
            .collect()
    };
    trues(old) == trues(cur)
}

/// Whether a node update changes nothing the controller decides on: the same true
/// conditions and, ignoring resourceVersion and conditions, the same node, as upstream's
/// `shouldIgnoreNodeUpdate`.
pub(super) fn should_ignore_node_update(old: &Node, cur: &Node) -> bool {
    let conditions = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
    };
    if !node_in_same_condition(&conditions(old), &conditions(cur)) {
        return false;
    }
    let mut old = old.clone();
    old.metadata.resource_version = cur.metadata.resource_version.clone();
    let cur_conditions = cur.status.as_ref().and_then(|s| s.conditions.clone());
    match (&mut old.status, cur_conditions) {
        (Some(status), conditions) => status.conditions = conditions,
        (None, None) => {}
        (None, Some(_)) => return false,
    }
    old == *cur
}

// ---------------------------------------------------------------------------------------------
// Worker wiring
// ---------------------------------------------------------------------------------------------

impl DaemonSetsController {
    /// Takes one key and syncs it through the shared worker, as upstream's
    /// `processNextWorkItem`. False once the queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(CONTROLLER_NAME, &self.queue, &ERROR_POLICY, |key| {
            self.sync_key(key)
        })
        .await
    }

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

/// The DaemonSet's selector, as `metav1.LabelSelectorAsSelector(ds.Spec.Selector)`; a
/// DaemonSet without a spec selects nothing.
pub(super) fn daemon_set_selector(ds: &DaemonSet) -> kcm_machinery::labels::Result<Selector> {
    match &ds.spec {
        Some(spec) => Selector::from_label_selector(&spec.selector),
        None => Ok(Selector::nothing()),
    }
}

/// The cache key of `ds`, logging when it has none.
pub(super) fn key_of(ds: &DaemonSet) -> Option<String> {
    match meta_namespace_key(ds) {
        Ok(key) => Some(key),
        Err(err) => {
            tracing::error!(%err, "couldn't get key for DaemonSet");
            None
        }
    }
}

pub(super) fn namespace_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> &str {
    meta.namespace.as_deref().unwrap_or_default()
}

/// The objects of `namespace` in `cache`, through its namespace index.
pub(super) fn objects_in_namespace<K>(cache: &Indexer<K>, namespace: &str) -> Vec<Arc<K>>
where
    K: Resource + Send + Sync + 'static,
{
    cache
        .by_index(NAMESPACE_INDEX, namespace)
        .unwrap_or_else(|_| {
            cache
                .list()
                .into_iter()
                .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
                .collect()
        })
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
