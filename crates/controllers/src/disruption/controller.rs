//! The disruption controller: constants, the controller and its construction, `Run`, the budget and pod event handlers and the worker wiring (upstream `disruption.go` up to `processNextWorkItem`).

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::index::NAMESPACE_INDEX;
use kcm_machinery::informer::keys::meta_namespace_key;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::labels::Selector;
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::Resource;
use tokio_util::sync::CancellationToken;

use super::client::{ApiDisruptionClient, DisruptionClient};

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "disruption-controller";

/// The work queue's name in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "disruption";

/// How long after an eviction a pod is expected to be gone; until then it is listed in
/// `disruptedPods` and not counted healthy (upstream's `DeletionTimeout`).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(2 * 60);

/// Upstream runs one worker.
const WORKERS: usize = 1;

/// How the worker treats a failed sync: requeued rate-limited (upstream's
/// `processNextWorkItem`).
const ERROR_POLICY: ErrorPolicy<String, super::Error> =
    ErrorPolicy::new("Error syncing PodDisruptionBudget, requeuing");

/// The wall clock (upstream's `clock.Clock`); injectable so tests are deterministic.
pub use kcm_machinery::controller::clock::Clock;

/// Wiring of a [`DisruptionController`].
#[derive(Clone, Default)]
pub struct DisruptionControllerOptions {
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl std::fmt::Debug for DisruptionControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DisruptionControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

/// The caches the controller reads (read only).
#[derive(Clone)]
pub struct DisruptionCaches {
    /// The budgets.
    pub pdbs: Indexer<PodDisruptionBudget>,
    /// Pods.
    pub pods: Indexer<Pod>,
    /// ReplicationControllers (a pod owner's scale).
    pub rcs: Indexer<ReplicationController>,
    /// ReplicaSets.
    pub rss: Indexer<ReplicaSet>,
    /// Deployments.
    pub deployments: Indexer<Deployment>,
    /// StatefulSets.
    pub stateful_sets: Indexer<StatefulSet>,
}

/// Keeps PodDisruptionBudget statuses current, as upstream's `DisruptionController`.
pub struct DisruptionController {
    /// The status write and scale reads. Test seam: [`super::FakeDisruptionClient`].
    pub(super) client: Arc<dyn DisruptionClient>,
    /// The informer caches.
    pub(super) caches: DisruptionCaches,
    /// Whether every informer has synced.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Budget keys to sync (and, delayed, to recheck when a disrupted pod's time is up).
    pub(super) queue: RateLimitingQueue<String>,
    /// The event handlers.
    pub(super) handlers: DisruptionEventHandlers,
    /// Events about budgets and pods.
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// Wall-clock time (test seam).
    pub(super) clock: Clock,
}

impl std::fmt::Debug for DisruptionController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DisruptionController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl DisruptionController {
    /// The controller kube-controller-manager runs, over the factory's informers, as
    /// upstream's `NewDisruptionController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: DisruptionControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.informer_for::<PodDisruptionBudget>(),
            &factory.pods(),
            &factory.informer_for::<ReplicationController>(),
            &factory.replica_sets(),
            &factory.deployments(),
            &factory.stateful_sets(),
            Arc::new(ApiDisruptionClient::new(client)),
            recorder,
            options,
        )
    }

    /// A controller over these informers, registering its handlers and waiting for them.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    #[allow(clippy::too_many_arguments)] // one informer per cache upstream reads
    pub fn with_informers(
        pdbs: &SharedIndexInformer<PodDisruptionBudget>,
        pods: &SharedIndexInformer<Pod>,
        rcs: &SharedIndexInformer<ReplicationController>,
        rss: &SharedIndexInformer<ReplicaSet>,
        deployments: &SharedIndexInformer<Deployment>,
        stateful_sets: &SharedIndexInformer<StatefulSet>,
        client: Arc<dyn DisruptionClient>,
        recorder: Arc<dyn EventRecorder>,
        options: DisruptionControllerOptions,
    ) -> Self {
        let caches = DisruptionCaches {
            pdbs: pdbs.indexer().clone(),
            pods: pods.indexer().clone(),
            rcs: rcs.indexer().clone(),
            rss: rss.indexer().clone(),
            deployments: deployments.indexer().clone(),
            stateful_sets: stateful_sets.indexer().clone(),
        };
        let mut controller = Self::with_caches(caches, client, recorder, options);
        // Budgets and pods are handled; the owners are only read through their listers.
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(pdbs, controller.handlers.clone())
            .register(pods, controller.handlers.clone())
            .wait_for(rcs)
            .wait_for(rss)
            .wait_for(deployments)
            .wait_for(stateful_sets)
            .finish();
        controller
    }

    /// A controller over bare caches (unit tests fill them and call [`Self::sync`]).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        caches: DisruptionCaches,
        client: Arc<dyn DisruptionClient>,
        recorder: Arc<dyn EventRecorder>,
        options: DisruptionControllerOptions,
    ) -> Self {
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics: options.metrics,
            },
        );
        Self {
            client,
            handlers: DisruptionEventHandlers {
                pdbs: caches.pdbs.clone(),
                queue: queue.clone(),
                recorder: Arc::clone(&recorder),
            },
            caches,
            caches_synced: Vec::new(),
            queue,
            recorder,
            clock: Arc::new(Timestamp::now),
        }
    }

    /// Replaces the wall clock (test seam).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The event handlers.
    pub fn event_handlers(&self) -> &DisruptionEventHandlers {
        &self.handlers
    }

    /// The work queue of budget keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the caches, then syncs budgets with upstream's one worker until `cancel`
    /// fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        run_controller(
            CONTROLLER_NAME,
            "disruption controller",
            &self.queue,
            ERROR_POLICY,
            WORKERS,
            &cancel,
            synced,
            sync,
        )
        .await;
    }

    /// Takes one key and syncs it through the shared worker. False once the queue has shut
    /// down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.queue,
            &ERROR_POLICY,
            |key| async move { self.sync(&key).await },
        )
        .await
    }
}

/// The budget and pod event handlers (upstream's `addDB`/`updateDB`/`removeDB` and
/// `addPod`/`updatePod`/`deletePod`).
#[derive(Clone)]
pub struct DisruptionEventHandlers {
    /// The budget cache, to find a pod's budget.
    pdbs: Indexer<PodDisruptionBudget>,
    /// The work queue.
    queue: RateLimitingQueue<String>,
    /// For the `MultiplePodDisruptionBudgets` warning.
    recorder: Arc<dyn EventRecorder>,
}

impl std::fmt::Debug for DisruptionEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DisruptionEventHandlers")
            .finish_non_exhaustive()
    }
}

/// The pods a budget's selector selects: a nil selector none, an empty one all (upstream's
/// `LabelSelectorAsSelector`). `None` when it does not parse.
pub(super) fn pdb_selector(pdb: &PodDisruptionBudget) -> Option<Option<Selector>> {
    match pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        None => Some(None),
        Some(ls) => Selector::from_label_selector(ls).ok().map(Some),
    }
}

impl DisruptionEventHandlers {
    fn enqueue(&self, pdb: &PodDisruptionBudget) {
        if let Ok(key) = meta_namespace_key(pdb) {
            self.queue.add(key);
        }
    }

    /// The budget of `pod` (upstream's `getPdbForPod`): the first of those selecting it,
    /// with a warning on the pod when several do.
    pub fn pdb_for_pod(&self, pod: &Pod) -> Option<Arc<PodDisruptionBudget>> {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        if labels.is_empty() {
            return None;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut pdbs: Vec<Arc<PodDisruptionBudget>> = self
            .pdbs
            .by_index(NAMESPACE_INDEX, namespace)
            .unwrap_or_default()
            .into_iter()
            .filter(|pdb| matches!(pdb_selector(pdb), Some(Some(sel)) if sel.matches(&labels)))
            .collect();
        pdbs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        if pdbs.len() > 1 {
            self.recorder.event(
                &pod.object_ref(&()),
                EventType::Warning,
                "MultiplePodDisruptionBudgets",
                format!(
                    "Pod {:?}/{:?} matches multiple PodDisruptionBudgets.  Chose {:?} arbitrarily.",
                    namespace,
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    pdbs[0].metadata.name.as_deref().unwrap_or_default()
                ),
            );
        }
        pdbs.into_iter().next()
    }

    fn enqueue_for_pod(&self, pod: &Pod) {
        if let Some(pdb) = self.pdb_for_pod(pod) {
            self.enqueue(&pdb);
        }
    }
}

impl ResourceEventHandler<PodDisruptionBudget> for DisruptionEventHandlers {
    fn on_add(&self, pdb: Arc<PodDisruptionBudget>, _is_in_initial_list: bool) {
        self.enqueue(&pdb);
    }

    fn on_update(&self, _old: Arc<PodDisruptionBudget>, new: Arc<PodDisruptionBudget>) {
        self.enqueue(&new);
    }

    fn on_delete(&self, obj: DeletedObject<PodDisruptionBudget>) {
        if let Ok(key) = obj.key() {
            self.queue.add(key);
        }
    }
}

impl ResourceEventHandler<Pod> for DisruptionEventHandlers {
    fn on_add(&self, pod: Arc<Pod>, _is_in_initial_list: bool) {
        self.enqueue_for_pod(&pod);
    }

    fn on_update(&self, _old: Arc<Pod>, new: Arc<Pod>) {
        self.enqueue_for_pod(&new);
    }

    fn on_delete(&self, obj: DeletedObject<Pod>) {
        self.enqueue_for_pod(obj.object());
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
