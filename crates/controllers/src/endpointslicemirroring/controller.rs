//! The EndpointSlice mirroring controller: constants, the controller and its construction, `Run`, the event handlers and the worker wiring (upstream `endpointslicemirroring_controller.go`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::events::EventRecorder;
use kcm_machinery::informer::keys::meta_namespace_key;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    DeletedObject, InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{QueueConfig, RateLimitingQueue, WorkqueueMetrics};
use tokio_util::sync::CancellationToken;

use super::metrics::MirroringMetrics;
use super::reconciler::MirroringReconciler;
use super::utils::{MANAGED_BY, should_mirror};
use super::{Error, Result};
use crate::endpointsliceutil::slices::{service_name_index, slow_rate_limiter};
use crate::endpointsliceutil::{
    ApiEndpointSliceClient, EndpointSliceClient, EndpointSliceTracker, LABEL_SERVICE_NAME,
    managed_by, service_controller_key,
};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// kube-controller-manager's name of this controller.
pub const CONTROLLER_NAME: &str = "endpointslice-mirroring-controller";

/// The older name `--controllers` also accepts.
pub const CONTROLLER_ALIAS: &str = "endpointslicemirroring";

/// The source component of this controller's events.
pub const EVENT_COMPONENT: &str = "endpoint-slice-mirroring-controller";

/// The work queue's name.
pub const QUEUE_NAME: &str = "endpoint_slice_mirroring";

/// `--mirroring-concurrent-service-endpoint-syncs`' default.
pub const DEFAULT_MIRRORING_CONCURRENT_SERVICE_ENDPOINT_SYNCS: u32 = 5;

/// `--mirroring-max-endpoints-per-subset`' default.
pub const DEFAULT_MIRRORING_MAX_ENDPOINTS_PER_SUBSET: u32 = 1000;

/// Rate-limited retries before an Endpoints is dropped from the queue (1s doubling, capped
/// at 100s).
pub const MAX_RETRIES: usize = 15;

/// The longest retry delay.
const MAX_SYNC_BACKOFF: Duration = Duration::from_secs(100);

/// How the workers treat a failed sync, as upstream's `handleErr`.
const ERROR_POLICY: ErrorPolicy<String, Error> =
    ErrorPolicy::new("Error mirroring EndpointSlices for Endpoints, retrying")
        .with_requeue_level(tracing::Level::INFO)
        .with_max_retries(
            MAX_RETRIES,
            "Retry budget exceeded, dropping Endpoints out of the queue",
        );

/// Wiring and tuning of an [`EndpointSliceMirroringController`].
#[derive(Clone)]
pub struct EndpointSliceMirroringOptions {
    /// `--mirroring-max-endpoints-per-subset`.
    pub max_endpoints_per_subset: usize,
    /// `--mirroring-endpointslice-updates-batch-period`: the delay of syncs triggered by slice
    /// changes.
    pub endpoint_updates_batch_period: Duration,
    /// Where the queue records its `workqueue_*` metrics.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// The controller's own metrics (a private set when `None`).
    pub controller_metrics: Option<Arc<MirroringMetrics>>,
}

impl Default for EndpointSliceMirroringOptions {
    fn default() -> Self {
        Self {
            max_endpoints_per_subset: DEFAULT_MIRRORING_MAX_ENDPOINTS_PER_SUBSET as usize,
            endpoint_updates_batch_period: Duration::ZERO,
            metrics: None,
            controller_metrics: None,
        }
    }
}

impl std::fmt::Debug for EndpointSliceMirroringOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointSliceMirroringOptions")
            .field("max_endpoints_per_subset", &self.max_endpoints_per_subset)
            .field(
                "endpoint_updates_batch_period",
                &self.endpoint_updates_batch_period,
            )
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Mirrors custom Endpoints into EndpointSlices, as kube-controller-manager's
/// endpointslicemirroring `Controller`.
pub struct EndpointSliceMirroringController {
    /// The Endpoints informer's cache (read only).
    pub(super) endpoints: Indexer<Endpoints>,
    /// The Service informer's cache (read only).
    pub(super) services: Indexer<Service>,
    /// The EndpointSlice informer's cache (read only), indexed by Service name.
    pub(super) slices: Indexer<EndpointSlice>,
    /// The informers `run` waits for.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Endpoints keys to sync.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: MirroringEventHandlers,
    /// The generations this controller wrote, per Endpoints.
    pub(super) tracker: Arc<EndpointSliceTracker>,
    /// Computes and performs the writes.
    pub(super) reconciler: MirroringReconciler,
    /// The controller's metrics.
    pub(super) metrics: Arc<MirroringMetrics>,
}

impl std::fmt::Debug for EndpointSliceMirroringController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointSliceMirroringController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl EndpointSliceMirroringController {
    /// The controller kube-controller-manager runs, over the factory's Endpoints, Service and
    /// EndpointSlice informers, as upstream's `NewController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: EndpointSliceMirroringOptions,
    ) -> Self {
        Self::with_informers(
            &factory.informer_for::<Endpoints>(),
            &factory.services(),
            &factory.informer_for::<EndpointSlice>(),
            Arc::new(ApiEndpointSliceClient::new(client)),
            recorder,
            options,
        )
    }

    /// A controller over the given informers, writing through `client`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informers(
        endpoints: &SharedIndexInformer<Endpoints>,
        services: &SharedIndexInformer<Service>,
        slices: &SharedIndexInformer<EndpointSlice>,
        client: Arc<dyn EndpointSliceClient>,
        recorder: Arc<dyn EventRecorder>,
        options: EndpointSliceMirroringOptions,
    ) -> Self {
        let mut controller = Self::with_caches(
            endpoints.indexer().clone(),
            services.indexer().clone(),
            slices.indexer().clone(),
            client,
            recorder,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(endpoints, controller.handlers.clone())
            .register(slices, controller.handlers.clone())
            .register(services, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over bare caches (unit tests). Adds the service-name index to `slices`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        endpoints: Indexer<Endpoints>,
        services: Indexer<Service>,
        slices: Indexer<EndpointSlice>,
        client: Arc<dyn EndpointSliceClient>,
        recorder: Arc<dyn EventRecorder>,
        options: EndpointSliceMirroringOptions,
    ) -> Self {
        if let Err(err) = slices.add_indexers(service_name_index()) {
            tracing::debug!(%err, "not adding the EndpointSlice service-name index");
        }
        let config = QueueConfig {
            name: QUEUE_NAME.to_owned(),
            metrics: options.metrics,
        };
        let queue = RateLimitingQueue::with_config(slow_rate_limiter(MAX_SYNC_BACKOFF), config);
        let tracker = Arc::new(EndpointSliceTracker::new());
        let metrics = options.controller_metrics.unwrap_or_default();
        let handlers = MirroringEventHandlers {
            queue: queue.clone(),
            tracker: Arc::clone(&tracker),
            batch_period: options.endpoint_updates_batch_period,
        };
        let reconciler = MirroringReconciler::new(
            client,
            Arc::clone(&tracker),
            recorder,
            options.max_endpoints_per_subset,
            Arc::clone(&metrics),
        );
        Self {
            endpoints,
            services,
            slices,
            caches_synced: Vec::new(),
            queue,
            handlers,
            tracker,
            reconciler,
            metrics,
        }
    }

    /// The informer-facing handlers.
    pub fn event_handlers(&self) -> &MirroringEventHandlers {
        &self.handlers
    }

    /// The work queue of Endpoints keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// The controller's metrics.
    pub fn metrics(&self) -> &Arc<MirroringMetrics> {
        &self.metrics
    }

    /// Waits for the caches, then runs `workers` workers until `cancel` fires.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        run_controller(
            CONTROLLER_NAME,
            "EndpointSliceMirroring controller",
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

/// The Endpoints, Service and EndpointSlice handlers, as upstream's `onEndpoints*`,
/// `onService*` and `onEndpointSlice*`. Cheap to clone.
#[derive(Clone)]
pub struct MirroringEventHandlers {
    queue: RateLimitingQueue<String>,
    tracker: Arc<EndpointSliceTracker>,
    batch_period: Duration,
}

impl std::fmt::Debug for MirroringEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirroringEventHandlers")
            .finish_non_exhaustive()
    }
}

fn managed_by_us(slice: &EndpointSlice) -> bool {
    managed_by(slice) == MANAGED_BY
}

fn has_selector(service: &Service) -> bool {
    service.spec.as_ref().is_some_and(|s| s.selector.is_some())
}

impl MirroringEventHandlers {
    fn enqueue_key(&self, key: Result<String, kcm_machinery::informer::keys::Error>) {
        match key {
            Ok(key) => self.queue.add(key),
            Err(err) => tracing::error!(%err, "Couldn't get key for object"),
        }
    }

    /// Upstream's `queueEndpointsForEndpointSlice`.
    fn queue_endpoints_for_slice(&self, slice: &EndpointSlice) {
        match service_controller_key(slice) {
            Some(key) => self.queue.add_after(key, self.batch_period),
            None => {
                tracing::error!(slice = ?slice.metadata.name, "Couldn't get key for EndpointSlice: missing {LABEL_SERVICE_NAME} label")
            }
        }
    }
}

impl ResourceEventHandler<Endpoints> for MirroringEventHandlers {
    fn on_add(&self, endpoints: Arc<Endpoints>, _is_in_initial_list: bool) {
        if should_mirror(&endpoints) {
            self.enqueue_key(meta_namespace_key(endpoints.as_ref()));
        }
    }

    fn on_update(&self, old: Arc<Endpoints>, new: Arc<Endpoints>) {
        if should_mirror(&new) || should_mirror(&old) {
            self.enqueue_key(meta_namespace_key(new.as_ref()));
        }
    }

    fn on_delete(&self, endpoints: DeletedObject<Endpoints>) {
        if should_mirror(endpoints.object()) {
            self.enqueue_key(endpoints.key());
        }
    }
}

impl ResourceEventHandler<Service> for MirroringEventHandlers {
    fn on_add(&self, service: Arc<Service>, _is_in_initial_list: bool) {
        if !has_selector(&service) {
            self.enqueue_key(meta_namespace_key(service.as_ref()));
        }
    }

    fn on_update(&self, old: Arc<Service>, new: Arc<Service>) {
        if has_selector(&old) != has_selector(&new) {
            self.enqueue_key(meta_namespace_key(new.as_ref()));
        }
    }

    fn on_delete(&self, service: DeletedObject<Service>) {
        if !has_selector(service.object()) {
            self.enqueue_key(service.key());
        }
    }
}

impl ResourceEventHandler<EndpointSlice> for MirroringEventHandlers {
    fn on_add(&self, slice: Arc<EndpointSlice>, _is_in_initial_list: bool) {
        if managed_by_us(&slice) && self.tracker.should_sync(&slice) {
            self.queue_endpoints_for_slice(&slice);
        }
    }

    fn on_update(&self, old: Arc<EndpointSlice>, new: Arc<EndpointSlice>) {
        let name_of = |s: &EndpointSlice| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_SERVICE_NAME))
                .cloned()
        };
        if name_of(&old) != name_of(&new) {
            self.queue_endpoints_for_slice(&new);
            self.queue_endpoints_for_slice(&old);
            return;
        }
        if managed_by_us(&old) != managed_by_us(&new)
            || (managed_by_us(&new) && self.tracker.should_sync(&new))
        {
            self.queue_endpoints_for_slice(&new);
        }
    }

    fn on_delete(&self, slice: DeletedObject<EndpointSlice>) {
        let slice = slice.object();
        if managed_by_us(slice) && self.tracker.has(slice) && !self.tracker.handle_deletion(slice) {
            self.queue_endpoints_for_slice(slice);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Worker wiring
// ---------------------------------------------------------------------------------------------

impl EndpointSliceMirroringController {
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

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
