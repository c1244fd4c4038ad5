//! The HPA controller: constants, the controller and its construction, `Run`, the HPA event handlers and the worker wiring (upstream `horizontal.go` up to `processNextWorkItem`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_workers};
use kcm_machinery::events::EventRecorder;
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::meta_namespace_key;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, wait_for_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::client::{ApiHpaClient, HpaClient};
use super::metrics_client::{ApiMetricsClient, MetricsClient};
use super::normalize::History;
use super::replica_calculator::ReplicaCalculator;
use super::{Error, Result};

/// The controller's name in logs, events and `--controllers`.
pub const CONTROLLER_NAME: &str = "horizontal-pod-autoscaler-controller";

/// The work queue's name in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "horizontalpodautoscaler";

/// `--concurrent-horizontal-pod-autoscaler-syncs`' default.
pub const DEFAULT_CONCURRENT_HORIZONTAL_POD_AUTOSCALER_SYNCS: u32 = 5;

/// `--horizontal-pod-autoscaler-sync-period`' default.
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(15);

/// `--horizontal-pod-autoscaler-downscale-stabilization`' default.
pub const DEFAULT_DOWNSCALE_STABILIZATION: Duration = Duration::from_secs(300);

/// Every pass succeeds from the worker's point of view: a failure is logged and the HPA is
/// retried at the next period, as upstream's `processNextWorkItem` (which re-adds the key
/// whatever the outcome).
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("error syncing HPA");

/// The wall clock (upstream's `clock.Clock`); injectable so tests are deterministic.
pub use kcm_machinery::controller::clock::Clock;

/// The controller's flags and wiring.
#[derive(Clone)]
pub struct HorizontalControllerOptions {
    /// How often each HPA is reconciled.
    pub sync_period: Duration,
    /// The scale-down stabilization window (for HPAs whose behavior names none).
    pub downscale_stabilization: Duration,
    /// The tolerance, CPU initialization period and initial readiness delay.
    pub calculator: ReplicaCalculator,
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl Default for HorizontalControllerOptions {
    fn default() -> Self {
        Self {
            sync_period: DEFAULT_SYNC_PERIOD,
            downscale_stabilization: DEFAULT_DOWNSCALE_STABILIZATION,
            calculator: ReplicaCalculator::default(),
            metrics: None,
        }
    }
}

impl std::fmt::Debug for HorizontalControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HorizontalControllerOptions")
            .field("sync_period", &self.sync_period)
            .field("downscale_stabilization", &self.downscale_stabilization)
            .field("calculator", &self.calculator)
            .finish_non_exhaustive()
    }
}

/// Scales targets to what their pods' metrics call for, as upstream's `HorizontalController`.
pub struct HorizontalController {
    /// The scale subresource and the status write. Test seam: [`super::FakeHpaClient`].
    pub(super) client: Arc<dyn HpaClient>,
    /// The resource metrics API. Test seam: [`super::FakeMetricsClient`].
    pub(super) metrics: Arc<dyn MetricsClient>,
    /// The HPA informer's cache (read only).
    pub(super) hpa_cache: Indexer<HorizontalPodAutoscaler>,
    /// The pod informer's cache (read only; informer caches index by namespace).
    pub(super) pod_cache: Indexer<Pod>,
    /// Whether the informers have synced.
    caches_synced: Vec<InformerSynced>,
    /// HPA keys; each is re-added `sync_period` after its pass.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    handlers: HpaEventHandlers,
    /// Records `SuccessfulRescale` and the warnings.
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// Wall-clock time (test seam).
    pub(super) clock: Clock,
    /// Flags.
    pub(super) options: HorizontalControllerOptions,
    /// Recommendations and scale events per HPA key (upstream's `recommendations`,
    /// `scaleUpEvents`, `scaleDownEvents`). Held only for a pass's normalization, never
    /// across an await.
    pub(super) history: Arc<Mutex<HashMap<String, History>>>,
}

impl std::fmt::Debug for HorizontalController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HorizontalController")
            .field("queue_len", &self.queue.len())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl HorizontalController {
    /// The controller kube-controller-manager runs, over the factory's HPA and pod
    /// informers, as upstream's `NewHorizontalController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: HorizontalControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.informer_for::<HorizontalPodAutoscaler>(),
            &factory.pods(),
            Arc::new(ApiHpaClient::new(client.clone())),
            Arc::new(ApiMetricsClient::new(client)),
            recorder,
            options,
        )
    }

    /// A controller over the given informers, registering its handler and waiting for them.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informers(
        hpa_informer: &SharedIndexInformer<HorizontalPodAutoscaler>,
        pod_informer: &SharedIndexInformer<Pod>,
        client: Arc<dyn HpaClient>,
        metrics: Arc<dyn MetricsClient>,
        recorder: Arc<dyn EventRecorder>,
        options: HorizontalControllerOptions,
    ) -> Self {
        let mut controller = Self::with_caches(
            hpa_informer.indexer().clone(),
            pod_informer.indexer().clone(),
            client,
            metrics,
            recorder,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(hpa_informer, controller.handlers.clone())
            .wait_for(pod_informer)
            .finish();
        controller
    }

    /// A controller over bare caches (unit tests fill them and call [`Self::sync`]).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        hpa_cache: Indexer<HorizontalPodAutoscaler>,
        pod_cache: Indexer<Pod>,
        client: Arc<dyn HpaClient>,
        metrics: Arc<dyn MetricsClient>,
        recorder: Arc<dyn EventRecorder>,
        options: HorizontalControllerOptions,
    ) -> Self {
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics: options.metrics.clone(),
            },
        );
        let history = Arc::new(Mutex::new(HashMap::new()));
        Self {
            client,
            metrics,
            hpa_cache,
            pod_cache,
            caches_synced: Vec::new(),
            handlers: HpaEventHandlers {
                queue: queue.clone(),
                sync_period: options.sync_period,
                history: Arc::clone(&history),
            },
            queue,
            recorder,
            clock: Arc::new(Timestamp::now),
            options,
            history,
        }
    }

    /// Replaces the wall clock (test seam).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The handlers registered with the HPA informer.
    pub fn event_handlers(&self) -> &HpaEventHandlers {
        &self.handlers
    }

    /// The work queue of HPA keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the caches, then reconciles HPAs with `workers` workers until `cancel`
    /// fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tracing::info!(controller = CONTROLLER_NAME, "Starting HPA controller");
        let synced = wait_for_synced(CONTROLLER_NAME, &cancel, &self.caches_synced).await;
        if synced {
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
        } else {
            self.queue.shut_down();
        }
        tracing::info!(controller = CONTROLLER_NAME, "Shutting down HPA controller");
    }

    /// Takes one key and reconciles it, as upstream's `processNextWorkItem`. False once the
    /// queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(CONTROLLER_NAME, &self.queue, &ERROR_POLICY, |key| {
            self.sync_key(key)
        })
        .await
    }

    /// One pass: reconcile, log a failure, and come back after the sync period unless the
    /// HPA is gone.
    async fn sync_key(&self, key: String) -> Result<()> {
        let deleted = match self.sync(&key).await {
            Ok(deleted) => deleted,
            Err(err) => {
                tracing::warn!(hpa = key, %err, "HPA reconciliation failed");
                false
            }
        };
        if !deleted {
            self.queue.add_after(key, self.options.sync_period);
        }
        Ok(())
    }
}

/// The HPA event handlers, as upstream's `enqueueHPA`, `updateHPA` and `deleteHPA`: a new
/// or changed HPA is queued one sync period later (upstream's fixed-interval rate limiter);
/// a deleted one is forgotten.
#[derive(Clone)]
pub struct HpaEventHandlers {
    queue: RateLimitingQueue<String>,
    sync_period: Duration,
    history: Arc<Mutex<HashMap<String, History>>>,
}

impl std::fmt::Debug for HpaEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HpaEventHandlers").finish_non_exhaustive()
    }
}

impl HpaEventHandlers {
    fn enqueue(&self, hpa: &HorizontalPodAutoscaler) {
        match meta_namespace_key(hpa) {
            Ok(key) => self.queue.add_after(key, self.sync_period),
            Err(err) => tracing::error!(%err, "couldn't get key for HPA"),
        }
    }
}

impl ResourceEventHandler<HorizontalPodAutoscaler> for HpaEventHandlers {
    fn on_add(&self, hpa: Arc<HorizontalPodAutoscaler>, _is_in_initial_list: bool) {
        self.enqueue(&hpa);
    }

    fn on_update(&self, _old: Arc<HorizontalPodAutoscaler>, new: Arc<HorizontalPodAutoscaler>) {
        self.enqueue(&new);
    }

    fn on_delete(&self, obj: DeletedObject<HorizontalPodAutoscaler>) {
        if let Ok(key) = obj.key() {
            self.queue.forget(&key);
            if let Ok(mut history) = self.history.lock() {
                history.remove(&key);
            }
        }
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
