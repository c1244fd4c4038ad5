//! The StatefulSet controller: constants, the controller and its construction, `Run`, the event handlers and the worker wiring (upstream `stateful_set.go` up to `processNextWorkItem`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::controller::history::{ApiRevisionClient, History, RevisionClient};
use kcm_machinery::controller::{
    ErrorPolicy, PodControl, RealPodControl, get_controller_of, is_pod_ready,
    process_next_work_item, run_controller,
};
use kcm_machinery::events::EventRecorder;
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::index::NAMESPACE_INDEX;
use kcm_machinery::informer::keys::{meta_namespace_key, object_key};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::core::GroupVersionKind;
use tokio_util::sync::CancellationToken;

use super::client::{
    ApiObjectManager, ApiStatefulSetClient, StatefulPodObjectManager, StatefulSetClient,
};
use super::control::{Clock, StatefulSetControl};
use super::pod_control::StatefulPodControl;
use super::status_updater::StatusUpdater;
use super::utils::min_ready_seconds;
use super::{Error, Result};

/// The work queue's name: the `name` label of its `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "statefulset";

/// The controller's name in logs and `--controllers` (kube-controller-manager's
/// `statefulset-controller`).
pub const CONTROLLER_NAME: &str = "statefulset-controller";

/// Requeue every error rate-limited, forever, as upstream's `processNextWorkItem`.
const ERROR_POLICY: ErrorPolicy<String, Error> =
    ErrorPolicy::new("Error syncing StatefulSet, requeuing");

/// The kind this controller owns pods and revisions for.
pub(super) const KIND: &str = "StatefulSet";

/// A replacement for [`StatefulSetController::sync`] run by the workers (tests only).
pub type SyncHandler = Arc<dyn Fn(String) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// Wiring of a [`StatefulSetController`].
#[derive(Clone, Default)]
pub struct StatefulSetControllerOptions {
    /// Where the queue records its `workqueue_*{name="statefulset"}` metrics.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// The `MaxUnavailableStatefulSet` gate (beta, off by default in v1.36): rolling updates
    /// honour `maxUnavailable` instead of replacing one pod at a time.
    pub max_unavailable_stateful_set: bool,
}

impl std::fmt::Debug for StatefulSetControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatefulSetControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .field(
                "max_unavailable_stateful_set",
                &self.max_unavailable_stateful_set,
            )
            .finish()
    }
}

/// The caches a [`StatefulSetController`] reads.
#[derive(Clone, Default)]
pub struct StatefulSetCaches {
    /// StatefulSets, indexed by namespace.
    pub sets: Indexer<StatefulSet>,
    /// Pods, indexed by namespace.
    pub pods: Indexer<Pod>,
    /// PersistentVolumeClaims.
    pub claims: Indexer<PersistentVolumeClaim>,
    /// ControllerRevisions, indexed by namespace.
    pub revisions: Indexer<ControllerRevision>,
}

impl std::fmt::Debug for StatefulSetCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatefulSetCaches").finish_non_exhaustive()
    }
}

/// Synchronizes StatefulSets with their pods, claims and revisions, as kube-controller-
/// manager's `StatefulSetController`. A key is never synced by two workers at once.
pub struct StatefulSetController {
    /// `apps/v1 StatefulSet`: written into the controller references of adopted pods.
    pub(super) gvk: GroupVersionKind,
    /// The set's uncached GET (before adoption). Test seam: `FakeStatefulSetClient`.
    pub(super) set_client: Arc<dyn StatefulSetClient>,
    /// Patches pods to adopt or release them. Test seam: `FakePodControl`.
    pub(super) pod_control: Arc<dyn PodControl>,
    /// The update logic (pods, claims, revisions, status).
    pub(super) control: StatefulSetControl,
    /// The informer caches.
    pub(super) caches: StatefulSetCaches,
    /// Whether the informers have synced; `run` waits for all.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// StatefulSet keys to sync, shared with the handlers.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: StatefulSetEventHandlers,
    /// Replaces [`Self::sync`] in the workers when set (test seam).
    pub(super) sync_handler: Option<SyncHandler>,
}

impl std::fmt::Debug for StatefulSetController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatefulSetController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl StatefulSetController {
    /// The controller kube-controller-manager runs, over the factory's pod, StatefulSet, PVC
    /// and ControllerRevision informers, as upstream's `NewStatefulSetController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: StatefulSetControllerOptions,
    ) -> Self {
        let sets = factory.stateful_sets();
        let pods = factory.pods();
        let claims = factory.informer_for::<PersistentVolumeClaim>();
        let revisions = factory.informer_for::<ControllerRevision>();
        let object_mgr = Arc::new(ApiObjectManager::new(
            client.clone(),
            pods.indexer().clone(),
            claims.indexer().clone(),
        ));
        Self::with_informers(
            &sets,
            &pods,
            &claims,
            &revisions,
            Arc::new(ApiStatefulSetClient::new(client.clone())),
            object_mgr,
            Arc::new(ApiRevisionClient::new(client.clone())),
            Arc::new(RealPodControl::new(client, Arc::clone(&recorder))),
            recorder,
            options,
        )
    }

    /// A controller over the given informers and seams: registers the handlers and waits
    /// for every informer in [`Self::run`].
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    #[allow(clippy::too_many_arguments)]
    pub fn with_informers(
        sets: &SharedIndexInformer<StatefulSet>,
        pods: &SharedIndexInformer<Pod>,
        claims: &SharedIndexInformer<PersistentVolumeClaim>,
        revisions: &SharedIndexInformer<ControllerRevision>,
        set_client: Arc<dyn StatefulSetClient>,
        object_mgr: Arc<dyn StatefulPodObjectManager>,
        revision_client: Arc<dyn RevisionClient>,
        pod_control: Arc<dyn PodControl>,
        recorder: Arc<dyn EventRecorder>,
        options: StatefulSetControllerOptions,
    ) -> Self {
        let caches = StatefulSetCaches {
            sets: sets.indexer().clone(),
            pods: pods.indexer().clone(),
            claims: claims.indexer().clone(),
            revisions: revisions.indexer().clone(),
        };
        let mut controller = Self::with_caches(
            caches,
            set_client,
            object_mgr,
            revision_client,
            pod_control,
            recorder,
            Arc::new(Timestamp::now),
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(pods, controller.handlers.clone())
            .register(sets, controller.handlers.clone())
            .wait_for(claims)
            .wait_for(revisions)
            .finish();
        controller
    }

    /// A controller over bare caches (unit tests fill them and call the handlers and
    /// [`Self::sync`]); `clock` is the wall clock for availability.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    #[allow(clippy::too_many_arguments)]
    pub fn with_caches(
        caches: StatefulSetCaches,
        set_client: Arc<dyn StatefulSetClient>,
        object_mgr: Arc<dyn StatefulPodObjectManager>,
        revision_client: Arc<dyn RevisionClient>,
        pod_control: Arc<dyn PodControl>,
        recorder: Arc<dyn EventRecorder>,
        clock: Clock,
        options: StatefulSetControllerOptions,
    ) -> Self {
        let max_unavailable = options.max_unavailable_stateful_set;
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics: options.metrics,
            },
        );
        let control = StatefulSetControl::new(
            StatefulPodControl::new(object_mgr, recorder),
            StatusUpdater::new(Arc::clone(&set_client), caches.sets.clone()),
            History::new(revision_client, caches.revisions.clone()),
            clock,
        )
        .with_max_unavailable(max_unavailable);
        let handlers = StatefulSetEventHandlers {
            queue: queue.clone(),
            sets: caches.sets.clone(),
        };
        Self {
            gvk: GroupVersionKind::gvk("apps", "v1", KIND),
            set_client,
            pod_control,
            control,
            caches,
            caches_synced: Vec::new(),
            queue,
            handlers,
            sync_handler: None,
        }
    }

    /// Replaces [`Self::sync`] in the workers (test seam).
    pub fn with_sync_handler(mut self, handler: SyncHandler) -> Self {
        self.sync_handler = Some(handler);
        self
    }

    /// The handlers to register with the pod and StatefulSet informers.
    pub fn event_handlers(&self) -> &StatefulSetEventHandlers {
        &self.handlers
    }

    /// The work queue.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// The update logic.
    pub fn control(&self) -> &StatefulSetControl {
        &self.control
    }

    /// Waits for the caches, then syncs with `workers` workers until `cancel` fires, as
    /// upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync_key(key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        run_controller(
            CONTROLLER_NAME,
            "stateful set controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            synced,
            sync,
        )
        .await;
    }
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// The pod and StatefulSet event handlers, as upstream's `addPod`/`updatePod`/`deletePod`
/// and the set handlers. Cheap to clone; they only compute keys and enqueue.
#[derive(Clone)]
pub struct StatefulSetEventHandlers {
    queue: RateLimitingQueue<String>,
    sets: Indexer<StatefulSet>,
}

impl std::fmt::Debug for StatefulSetEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatefulSetEventHandlers")
            .finish_non_exhaustive()
    }
}

impl StatefulSetEventHandlers {
    /// A set appeared, changed or went: sync it.
    pub fn enqueue_set(&self, set: &StatefulSet) {
        match meta_namespace_key(set) {
            Ok(key) => self.queue.add(key),
            Err(err) => tracing::error!(%err, "couldn't get key for StatefulSet"),
        }
    }

    fn enqueue_set_after(&self, set: &StatefulSet, delay: Duration) {
        if let Ok(key) = meta_namespace_key(set) {
            self.queue.add_after(key, delay);
        }
    }

    /// A pod appeared: its owner is synced (an orphan wakes every set selecting it); one
    /// being deleted is handled as deleted.
    pub fn add_pod(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            self.delete_pod_object(pod);
            return;
        }
        if let Some(controller_ref) = get_controller_of(&pod.metadata) {
            if let Some(set) = self.resolve_controller_ref(namespace_of(pod), controller_ref) {
                self.enqueue_set(&set);
            }
            return;
        }
        for set in self.sets_for_pod(pod) {
            self.enqueue_set(&set);
        }
    }

    /// A pod changed: the old and new owners are synced, the new one again
    /// `minReadySeconds + 1s` after the pod became ready; an orphan whose labels or reference
    /// changed wakes every set selecting it.
    pub fn update_pod(&self, old: &Pod, cur: &Pod) {
        if cur.metadata.resource_version == old.metadata.resource_version {
            return;
        }
        let label_changed = cur.metadata.labels != old.metadata.labels;
        let cur_ref = get_controller_of(&cur.metadata);
        let old_ref = get_controller_of(&old.metadata);
        let controller_ref_changed = cur_ref != old_ref;
        if controller_ref_changed
            && let Some(old_ref) = old_ref
            && let Some(set) = self.resolve_controller_ref(namespace_of(old), old_ref)
        {
            self.enqueue_set(&set);
        }
        if let Some(cur_ref) = cur_ref {
            let Some(set) = self.resolve_controller_ref(namespace_of(cur), cur_ref) else {
                return;
            };
            self.enqueue_set(&set);
            let min_ready = min_ready_seconds(&set);
            if !is_pod_ready(old) && is_pod_ready(cur) && min_ready > 0 {
                // The extra second absorbs sub-second skew in the delayed add.
                self.enqueue_set_after(
                    &set,
                    Duration::from_secs(u64::from(min_ready.unsigned_abs()) + 1),
                );
            }
            return;
        }
        if label_changed || controller_ref_changed {
            for set in self.sets_for_pod(cur) {
                self.enqueue_set(&set);
            }
        }
    }

    /// A pod was deleted: its owner is synced.
    pub fn delete_pod(&self, obj: &DeletedObject<Pod>) {
        self.delete_pod_object(obj.object());
    }

    fn delete_pod_object(&self, pod: &Pod) {
        let Some(controller_ref) = get_controller_of(&pod.metadata) else {
            return;
        };
        if let Some(set) = self.resolve_controller_ref(namespace_of(pod), controller_ref) {
            self.enqueue_set(&set);
        }
    }

    /// The cached set `controller_ref` points to (same kind, name and UID).
    pub fn resolve_controller_ref(
        &self,
        namespace: &str,
        controller_ref: &OwnerReference,
    ) -> Option<Arc<StatefulSet>> {
        if controller_ref.kind != KIND {
            return None;
        }
        self.sets
            .get_by_key(&object_key(namespace, &controller_ref.name))
            .filter(|s| s.metadata.uid.as_deref() == Some(controller_ref.uid.as_str()))
    }

    /// The sets of the pod's namespace whose non-empty selector matches it, as upstream's
    /// `GetPodStatefulSets` (more than one is a user error, logged).
    pub fn sets_for_pod(&self, pod: &Pod) -> Vec<Arc<StatefulSet>> {
        let Some(labels) = pod.metadata.labels.as_ref().filter(|l| !l.is_empty()) else {
            return Vec::new();
        };
        let namespace = namespace_of(pod);
        let mut sets = self
            .sets
            .by_index(NAMESPACE_INDEX, namespace)
            .unwrap_or_else(|_| {
                self.sets
                    .list()
                    .into_iter()
                    .filter(|s| s.metadata.namespace.as_deref() == Some(namespace))
                    .collect()
            });
        sets.retain(|s| {
            s.spec.as_ref().is_some_and(|spec| {
                kcm_machinery::labels::Selector::from_label_selector(&spec.selector)
                    .is_ok_and(|sel| !sel.is_everything() && sel.matches(labels))
            })
        });
        if sets.len() > 1 {
            tracing::error!(labels = ?labels as &BTreeMap<String, String>, "user error: more than one StatefulSet is selecting pods with labels");
        }
        sets
    }
}

fn namespace_of(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

impl ResourceEventHandler<StatefulSet> for StatefulSetEventHandlers {
    fn on_add(&self, set: Arc<StatefulSet>, _is_in_initial_list: bool) {
        self.enqueue_set(&set);
    }
    fn on_update(&self, old: Arc<StatefulSet>, new: Arc<StatefulSet>) {
        let replicas = |s: &StatefulSet| s.status.as_ref().map_or(0, |st| st.replicas);
        if replicas(&old) != replicas(&new) {
            tracing::debug!(statefulset = ?new.metadata.name, old = replicas(&old), new = replicas(&new), "Observed updated replica count for StatefulSet");
        }
        self.enqueue_set(&new);
    }
    fn on_delete(&self, obj: DeletedObject<StatefulSet>) {
        match obj.key() {
            Ok(key) => self.queue.add(key),
            Err(err) => tracing::error!(%err, "couldn't get key for StatefulSet"),
        }
    }
}

impl ResourceEventHandler<Pod> for StatefulSetEventHandlers {
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

impl StatefulSetController {
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

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
