//! The ClusterRole aggregation controller: constants, the controller and its construction, `Run`, the ClusterRole event handlers and the worker wiring (upstream `clusterroleaggregation_controller.go` up to `processNextWorkItem`).

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::ClusterRole;
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_workers};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::lister::Lister;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedInformerFactory, wait_for_synced,
};
use kcm_machinery::labels::Selector;
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::Error;
use super::client::{AggregationClient, ApiAggregationClient};

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "clusterrole-aggregation-controller";

/// The work queue's name in the `workqueue_*` metrics, upstream's.
pub const QUEUE_NAME: &str = "ClusterRoleAggregator";

/// The workers kube-controller-manager starts (a constant upstream, no flag).
pub const WORKERS: usize = 5;

/// As upstream's `handleErr`: every error requeued rate-limited.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("error aggregating ClusterRole");

/// Keeps aggregated ClusterRoles' rules the union of the roles they select, as upstream's
/// `ClusterRoleAggregationController`.
pub struct ClusterRoleAggregationController {
    /// The apply. Test seam: [`super::FakeAggregationClient`].
    pub(super) client: Arc<dyn AggregationClient>,
    /// The ClusterRole cache (read only).
    pub(super) lister: Lister<ClusterRole>,
    /// Whether the ClusterRole informer has synced; empty (nothing to wait for) over a bare
    /// cache.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Names of aggregated ClusterRoles to bring up to date.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: AggregationEventHandlers,
}

impl std::fmt::Debug for ClusterRoleAggregationController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterRoleAggregationController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl ClusterRoleAggregationController {
    /// The controller kube-controller-manager runs, over the factory's ClusterRole informer.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let informer = factory.informer_for::<ClusterRole>();
        let mut controller = Self::with_cache(
            informer.indexer().clone(),
            Arc::new(ApiAggregationClient::new(client)),
            metrics,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(&informer, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over a bare cache (unit tests fill it and call the handlers and
    /// [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_cache(
        cache: Indexer<ClusterRole>,
        client: Arc<dyn AggregationClient>,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics,
            },
        );
        let lister = Lister::new(cache);
        Self {
            client,
            handlers: AggregationEventHandlers {
                queue: queue.clone(),
                lister: lister.clone(),
            },
            lister,
            caches_synced: Vec::new(),
            queue,
        }
    }

    /// The handlers to register with the ClusterRole informer.
    pub fn event_handlers(&self) -> &AggregationEventHandlers {
        &self.handlers
    }

    /// The work queue of ClusterRole names.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the ClusterRole cache, then aggregates with `workers` workers until
    /// `cancel` fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tracing::info!(
            controller = CONTROLLER_NAME,
            "Starting ClusterRoleAggregator controller"
        );
        let synced = wait_for_synced(CONTROLLER_NAME, &cancel, &self.caches_synced).await;
        if synced {
            let this = Arc::clone(&self);
            let sync = move |key: String| {
                let this = Arc::clone(&this);
                async move { this.sync(&key).await }
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
        tracing::info!(
            controller = CONTROLLER_NAME,
            "Shutting down ClusterRoleAggregator controller"
        );
    }

    /// Takes one key and syncs it through the shared worker, as upstream's
    /// `processNextWorkItem`. False once the queue has shut down.
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

/// The ClusterRole event handlers: any change enqueues every aggregated ClusterRole, as
/// upstream's `enqueue` (which role selects which is not tracked).
#[derive(Clone)]
pub struct AggregationEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
    /// The ClusterRole cache.
    lister: Lister<ClusterRole>,
}

impl std::fmt::Debug for AggregationEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregationEventHandlers")
            .finish_non_exhaustive()
    }
}

impl AggregationEventHandlers {
    /// Enqueues every ClusterRole with an `aggregationRule`.
    pub fn enqueue(&self) {
        for role in self.lister.list_all(&Selector::everything()) {
            if role.aggregation_rule.is_none() {
                continue;
            }
            if let Some(name) = &role.metadata.name {
                self.queue.add(name.clone());
            }
        }
    }
}

impl ResourceEventHandler<ClusterRole> for AggregationEventHandlers {
    fn on_add(&self, _role: Arc<ClusterRole>, _is_in_initial_list: bool) {
        self.enqueue();
    }

    fn on_update(&self, _old: Arc<ClusterRole>, _new: Arc<ClusterRole>) {
        self.enqueue();
    }

    fn on_delete(&self, _obj: DeletedObject<ClusterRole>) {
        self.enqueue();
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
