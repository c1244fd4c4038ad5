//! The ResourceQuota controller: constants, the controller and its construction, `Run`, the quota and replenishment event handlers and the worker wiring (upstream `resource_quota_controller.go` up to `worker`, and `resource_quota_monitor.go`'s handlers).

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota, Service};
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::index::NAMESPACE_INDEX;
use kcm_machinery::informer::keys::meta_namespace_key;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::quota::{Evaluator, counted_group_resource, pods};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::client::{ApiQuotaClient, QuotaClient};

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "resourcequota-controller";

/// The queue of quotas recalculated in turn, in the `workqueue_*` metrics.
pub const PRIMARY_QUEUE_NAME: &str = "resource_quota_primary";

/// The queue of quotas whose status lacks what they declare (served first).
pub const PRIORITY_QUEUE_NAME: &str = "resource_quota_priority";

/// `--concurrent-resource-quota-syncs`' default.
pub const DEFAULT_CONCURRENT_RESOURCE_QUOTA_SYNCS: u32 = 5;

/// `--resource-quota-sync-period`'s default: how often every quota is recalculated.
pub const DEFAULT_RESOURCE_QUOTA_SYNC_PERIOD: Duration = Duration::from_secs(5 * 60);

/// How the workers treat a failed sync, as upstream's `worker`: requeued rate-limited.
const ERROR_POLICY: ErrorPolicy<String, super::Error> = ErrorPolicy::new("Sync failed");

/// The wall clock (upstream's `clock.Clock`): decides whether a deleted pod still counts.
pub use kcm_machinery::controller::clock::Clock;

/// Wiring of a [`ResourceQuotaController`].
#[derive(Clone)]
pub struct ResourceQuotaControllerOptions {
    /// Where the queues record their `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// How often every quota is recalculated (`--resource-quota-sync-period`).
    pub resync_period: Duration,
}

impl Default for ResourceQuotaControllerOptions {
    fn default() -> Self {
        Self {
            metrics: None,
            resync_period: DEFAULT_RESOURCE_QUOTA_SYNC_PERIOD,
        }
    }
}

impl std::fmt::Debug for ResourceQuotaControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceQuotaControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .field("resync_period", &self.resync_period)
            .finish()
    }
}

/// The caches a quota's usage is measured over (read only).
#[derive(Clone)]
pub struct QuotaCaches {
    /// The quotas.
    pub quotas: Indexer<ResourceQuota>,
    /// Pods, measured by the pod evaluator.
    pub pods: Indexer<Pod>,
    /// Services, measured by the service evaluator.
    pub services: Indexer<Service>,
    /// Claims, measured by the claim evaluator.
    pub pvcs: Indexer<PersistentVolumeClaim>,
}

/// Keeps every ResourceQuota's status current, as upstream's resourcequota `Controller`.
pub struct ResourceQuotaController {
    /// The status write and the uncached counts. Test seam: [`super::FakeQuotaClient`].
    pub(super) client: Arc<dyn QuotaClient>,
    /// The informer caches.
    pub(super) caches: QuotaCaches,
    /// Whether every informer has synced.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Quotas to recalculate.
    pub(super) queue: RateLimitingQueue<String>,
    /// Quotas whose status lacks a declared limit or its usage (upstream's
    /// `missingUsageQueue`), served by their own workers so they are not stuck behind a
    /// full recalculation.
    pub(super) missing_usage_queue: RateLimitingQueue<String>,
    /// The quota handlers.
    pub(super) quota_handlers: QuotaEventHandlers,
    /// The pod, service and claim handlers.
    pub(super) replenishment: ReplenishmentHandlers,
    /// Wall-clock time (test seam).
    pub(super) clock: Clock,
    /// How often every quota is recalculated.
    pub(super) resync_period: Duration,
}

impl std::fmt::Debug for ResourceQuotaController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceQuotaController")
            .field("queue_len", &self.queue.len())
            .field("missing_usage_queue_len", &self.missing_usage_queue.len())
            .finish_non_exhaustive()
    }
}

impl ResourceQuotaController {
    /// The controller kube-controller-manager runs, over the factory's informers, as
    /// upstream's `NewController`.
    ///
    /// # Panics
    ///
    /// Builds the work queues, which spawn timer tasks: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        options: ResourceQuotaControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.informer_for::<ResourceQuota>(),
            &factory.pods(),
            &factory.services(),
            &factory.informer_for::<PersistentVolumeClaim>(),
            Arc::new(ApiQuotaClient::new(client)),
            options,
        )
    }

    /// A controller over these informers, registering its handlers and waiting for them.
    ///
    /// # Panics
    ///
    /// Builds the work queues, which spawn timer tasks: call inside a Tokio runtime.
    pub fn with_informers(
        quotas: &SharedIndexInformer<ResourceQuota>,
        pods: &SharedIndexInformer<Pod>,
        services: &SharedIndexInformer<Service>,
        pvcs: &SharedIndexInformer<PersistentVolumeClaim>,
        client: Arc<dyn QuotaClient>,
        options: ResourceQuotaControllerOptions,
    ) -> Self {
        let caches = QuotaCaches {
            quotas: quotas.indexer().clone(),
            pods: pods.indexer().clone(),
            services: services.indexer().clone(),
            pvcs: pvcs.indexer().clone(),
        };
        let mut controller = Self::with_caches(caches, client, options);
        // Quotas get the quota handlers; the counted kinds get the replenishment handler.
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(quotas, controller.quota_handlers.clone())
            .register(pods, controller.replenishment.clone())
            .register(services, controller.replenishment.clone())
            .register(pvcs, controller.replenishment.clone())
            .finish();
        controller
    }

    /// A controller over bare caches (unit tests fill them and call the handlers and
    /// [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queues, which spawn timer tasks: call inside a Tokio runtime.
    pub fn with_caches(
        caches: QuotaCaches,
        client: Arc<dyn QuotaClient>,
        options: ResourceQuotaControllerOptions,
    ) -> Self {
        let queue_named = |name: &str| {
            RateLimitingQueue::with_config(
                default_controller_rate_limiter(),
                QueueConfig {
                    name: name.to_owned(),
                    metrics: options.metrics.clone(),
                },
            )
        };
        let queue = queue_named(PRIMARY_QUEUE_NAME);
        let missing_usage_queue = queue_named(PRIORITY_QUEUE_NAME);
        let clock: Clock = Arc::new(Timestamp::now);
        Self {
            client,
            quota_handlers: QuotaEventHandlers {
                queue: queue.clone(),
                missing_usage_queue: missing_usage_queue.clone(),
            },
            replenishment: ReplenishmentHandlers {
                quotas: caches.quotas.clone(),
                queue: queue.clone(),
                clock: Arc::clone(&clock),
            },
            caches,
            caches_synced: Vec::new(),
            queue,
            missing_usage_queue,
            clock,
            resync_period: options.resync_period,
        }
    }

    /// Replaces the wall clock (test seam).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.replenishment.clock = Arc::clone(&clock);
        self.clock = clock;
        self
    }

    /// The quota handlers.
    pub fn quota_handlers(&self) -> &QuotaEventHandlers {
        &self.quota_handlers
    }

    /// The pod, service and claim handlers.
    pub fn replenishment_handlers(&self) -> &ReplenishmentHandlers {
        &self.replenishment
    }

    /// The primary queue.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// The priority queue of quotas missing usage.
    pub fn missing_usage_queue(&self) -> &RateLimitingQueue<String> {
        &self.missing_usage_queue
    }

    /// Waits for the caches, then syncs quotas with `workers` workers on each queue and
    /// recalculates every quota each resync period until `cancel` fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        let resync = {
            let this = Arc::clone(&self);
            let cancel = cancel.clone();
            async move {
                let mut ticks = tokio::time::interval(this.resync_period);
                ticks.tick().await;
                loop {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = ticks.tick() => this.enqueue_all(),
                    }
                }
            }
        };
        tokio::join!(
            run_controller(
                CONTROLLER_NAME,
                "resource quota controller",
                &self.queue,
                ERROR_POLICY,
                workers,
                &cancel,
                synced,
                sync.clone(),
            ),
            run_controller(
                CONTROLLER_NAME,
                "resource quota controller (missing usage)",
                &self.missing_usage_queue,
                ERROR_POLICY,
                workers,
                &cancel,
                synced,
                sync,
            ),
            resync,
        );
    }

    /// Takes one key of the primary queue and syncs it through the shared worker. False
    /// once the queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.queue,
            &ERROR_POLICY,
            |key| async move { self.sync(&key).await },
        )
        .await
    }

    /// Queues every quota for recalculation (upstream's `enqueueAll`).
    pub fn enqueue_all(&self) {
        for quota in self.caches.quotas.list() {
            if let Ok(key) = meta_namespace_key(quota.as_ref()) {
                self.queue.add_rate_limited(key);
            }
        }
    }
}

/// The quota event handlers (upstream's `addQuota`, the spec-only `UpdateFunc`, and
/// `enqueueResourceQuota` on delete).
#[derive(Clone)]
pub struct QuotaEventHandlers {
    /// The primary queue.
    queue: RateLimitingQueue<String>,
    /// The priority queue.
    missing_usage_queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for QuotaEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuotaEventHandlers").finish_non_exhaustive()
    }
}

impl QuotaEventHandlers {
    /// A quota appeared (or its limits changed): to the priority queue when its status lacks
    /// a declared limit, or usage for a limit some evaluator measures; else the primary one.
    pub fn add_quota(&self, quota: &ResourceQuota) {
        let Ok(key) = meta_namespace_key(quota) else {
            return;
        };
        let spec_hard = quota.spec.as_ref().and_then(|s| s.hard.as_ref());
        let status = quota.status.as_ref();
        let status_hard = status.and_then(|s| s.hard.as_ref());
        if spec_hard.filter(|h| !h.is_empty()) != status_hard.filter(|h| !h.is_empty()) {
            self.missing_usage_queue.add(key);
            return;
        }
        let used = status.and_then(|s| s.used.as_ref());
        for constraint in status_hard.into_iter().flat_map(|h| h.keys()) {
            if used.is_some_and(|u| u.contains_key(constraint)) {
                continue;
            }
            if measured(constraint) {
                self.missing_usage_queue.add(key);
                return;
            }
        }
        self.queue.add(key);
    }
}

/// Whether some evaluator measures `name` (pods, services, claims, object counts).
pub(super) fn measured(name: &str) -> bool {
    let one = [name.to_owned()];
    [Evaluator::Pods, Evaluator::Services, Evaluator::Pvcs]
        .iter()
        .any(|e| !e.matching_resources(&one).is_empty())
        || counted_group_resource(name).is_some()
}

impl ResourceEventHandler<ResourceQuota> for QuotaEventHandlers {
    fn on_add(&self, quota: Arc<ResourceQuota>, _is_in_initial_list: bool) {
        self.add_quota(&quota);
    }

    /// Only a change of `spec.hard` matters: status writes (ours and admission's) and
    /// resyncs are ignored; the periodic full recalculation covers drift.
    fn on_update(&self, old: Arc<ResourceQuota>, new: Arc<ResourceQuota>) {
        let hard = |q: &ResourceQuota| q.spec.as_ref().and_then(|s| s.hard.clone());
        if hard(&old) == hard(&new) {
            return;
        }
        self.add_quota(&new);
    }

    fn on_delete(&self, obj: DeletedObject<ResourceQuota>) {
        if let Ok(key) = obj.key() {
            self.queue.add(key);
        }
    }
}

/// Recalculates the quotas of a namespace when an object they measure stops counting or
/// goes (upstream's `QuotaMonitor` handlers and `replenishQuota`). Creates need nothing:
/// admission charged them.
#[derive(Clone)]
pub struct ReplenishmentHandlers {
    /// The quota cache, to find the namespace's quotas.
    quotas: Indexer<ResourceQuota>,
    /// The primary queue.
    queue: RateLimitingQueue<String>,
    /// Decides whether a deleted pod still counts.
    clock: Clock,
}

impl std::fmt::Debug for ReplenishmentHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplenishmentHandlers")
            .finish_non_exhaustive()
    }
}

impl ReplenishmentHandlers {
    /// Queues the namespace's quotas whose computed limits the evaluator measures.
    pub fn replenish(&self, evaluator: &Evaluator, namespace: &str) {
        let Ok(quotas) = self.quotas.by_index(NAMESPACE_INDEX, namespace) else {
            return;
        };
        for quota in quotas {
            let hard = quota.status.as_ref().and_then(|s| s.hard.as_ref());
            if evaluator
                .matching_resources(hard.into_iter().flat_map(|h| h.keys()))
                .is_empty()
            {
                continue;
            }
            if let Ok(key) = meta_namespace_key(quota.as_ref()) {
                self.queue.add(key);
            }
        }
    }
}

/// `core.GetQuotaServiceType`: the service types quota tells apart.
fn quota_service_type(svc: &Service) -> &str {
    let type_ = svc
        .spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or_default();
    if matches!(type_, "NodePort" | "LoadBalancer") {
        type_
    } else {
        ""
    }
}

/// `core.RequiresQuotaReplenish` for claims: the bound volume or the storage request changed.
fn pvc_requires_replenish(new: &PersistentVolumeClaim, old: &PersistentVolumeClaim) -> bool {
    let volume = |p: &PersistentVolumeClaim| p.spec.as_ref().and_then(|s| s.volume_name.clone());
    let storage = |p: &PersistentVolumeClaim| {
        p.spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage").cloned())
    };
    volume(new) != volume(old) || storage(new) != storage(old)
}

fn namespace_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or_default()
}

impl ResourceEventHandler<Pod> for ReplenishmentHandlers {
    /// A pod that stops counting (it finished, or its deletion grace ran out).
    fn on_update(&self, old: Arc<Pod>, new: Arc<Pod>) {
        let now = (self.clock)();
        if pods::counts_compute(&old, now) && !pods::counts_compute(&new, now) {
            self.replenish(&Evaluator::Pods, namespace_of(&new.metadata));
        }
    }

    fn on_delete(&self, obj: DeletedObject<Pod>) {
        self.replenish(&Evaluator::Pods, namespace_of(&obj.object().metadata));
    }
}

impl ResourceEventHandler<Service> for ReplenishmentHandlers {
    fn on_update(&self, old: Arc<Service>, new: Arc<Service>) {
        if quota_service_type(&old) != quota_service_type(&new) {
            self.replenish(&Evaluator::Services, namespace_of(&new.metadata));
        }
    }

    fn on_delete(&self, obj: DeletedObject<Service>) {
        self.replenish(&Evaluator::Services, namespace_of(&obj.object().metadata));
    }
}

impl ResourceEventHandler<PersistentVolumeClaim> for ReplenishmentHandlers {
    fn on_update(&self, old: Arc<PersistentVolumeClaim>, new: Arc<PersistentVolumeClaim>) {
        if pvc_requires_replenish(&new, &old) {
            self.replenish(&Evaluator::Pvcs, namespace_of(&new.metadata));
        }
    }

    fn on_delete(&self, obj: DeletedObject<PersistentVolumeClaim>) {
        self.replenish(&Evaluator::Pvcs, namespace_of(&obj.object().metadata));
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
