//! The EndpointSlice controller: constants, the controller and its construction, `Run`, the event handlers and the worker wiring (upstream `endpointslice_controller.go` up to `processNextServiceWorkItem`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
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

use super::metrics::EndpointSliceMetrics;
use super::reconciler::Reconciler;
use super::{Error, Result};
use crate::endpointsliceutil::{
    ApiEndpointSliceClient, EndpointSliceClient, EndpointSliceTracker, LABEL_SERVICE_NAME,
    TriggerTimeTracker, pod_update_projection_key, service_controller_key, services_to_update,
};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// kube-controller-manager's name of this controller.
pub const CONTROLLER_NAME: &str = "endpointslice-controller";

/// The older name `--controllers` also accepts.
pub const CONTROLLER_ALIAS: &str = "endpointslice";

/// The `endpointslice.kubernetes.io/managed-by` value of this controller's slices (upstream's
/// `controllerQualifiedName`).
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

/// The source component of this controller's events.
pub const EVENT_COMPONENT: &str = "endpoint-slice-controller";

/// The work queue's name: the `name` label of its `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "endpoint_slice";

/// `--concurrent-service-endpoint-syncs`' default.
pub const DEFAULT_CONCURRENT_SERVICE_ENDPOINT_SYNCS: u32 = 5;

/// `--max-endpoints-per-slice`' default.
pub const DEFAULT_MAX_ENDPOINTS_PER_SLICE: u32 = 100;

/// Rate-limited retries of one Service before it is dropped from the queue (1s doubling,
/// capped at 1000s).
pub const MAX_RETRIES: usize = 15;

/// The least delay between a slice event and the sync it triggers, so a burst of slice
/// changes makes one sync (upstream's `endpointSliceChangeMinSyncDelay`).
pub const ENDPOINT_SLICE_CHANGE_MIN_SYNC_DELAY: Duration = Duration::from_secs(1);

pub use crate::endpointsliceutil::slices::SERVICE_NAME_INDEX;
use crate::endpointsliceutil::slices::{service_name_index, slow_rate_limiter};

/// The longest retry delay.
const MAX_SYNC_BACKOFF: Duration = Duration::from_secs(1000);

/// How the workers treat a failed sync, as upstream's `handleErr`.
const ERROR_POLICY: ErrorPolicy<String, Error> =
    ErrorPolicy::new("Error syncing endpoint slices for service, retrying")
        .with_requeue_level(tracing::Level::INFO)
        .with_max_retries(
            MAX_RETRIES,
            "Retry budget exceeded, dropping service out of the queue",
        );

/// Wiring and tuning of an [`EndpointSliceController`].
#[derive(Clone)]
pub struct EndpointSliceControllerOptions {
    /// `--max-endpoints-per-slice`.
    pub max_endpoints_per_slice: usize,
    /// `--endpointslice-updates-batch-period`: how long pod changes wait before the sync they
    /// trigger.
    pub endpoint_updates_batch_period: Duration,
    /// Where the queue records its `workqueue_*{name="endpoint_slice"}` metrics.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// The `endpoint_slice_controller_*` metrics (a private set when `None`).
    pub controller_metrics: Option<Arc<EndpointSliceMetrics>>,
}

impl Default for EndpointSliceControllerOptions {
    fn default() -> Self {
        Self {
            max_endpoints_per_slice: DEFAULT_MAX_ENDPOINTS_PER_SLICE as usize,
            endpoint_updates_batch_period: Duration::ZERO,
            metrics: None,
            controller_metrics: None,
        }
    }
}

impl std::fmt::Debug for EndpointSliceControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointSliceControllerOptions")
            .field("max_endpoints_per_slice", &self.max_endpoints_per_slice)
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

/// Manages the EndpointSlices of selector-based Services, as kube-controller-manager's
/// endpointslice `Controller`.
pub struct EndpointSliceController {
    /// Records `FailedToUpdateEndpointSlices` on the Service.
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// The Service informer's cache (read only).
    pub(super) services: Indexer<Service>,
    /// The pod informer's cache (read only).
    pub(super) pods: Indexer<Pod>,
    /// The EndpointSlice informer's cache (read only), indexed by [`SERVICE_NAME_INDEX`].
    pub(super) slices: Indexer<EndpointSlice>,
    /// The informers `run` waits for; empty for bare caches.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Service keys to sync. Shared with the handlers.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: EndpointSliceEventHandlers,
    /// The generations this controller wrote, per Service.
    pub(super) tracker: Arc<EndpointSliceTracker>,
    /// The `last-change-trigger-time` bookkeeping.
    pub(super) trigger_times: TriggerTimeTracker,
    /// Computes and performs the slice writes.
    pub(super) reconciler: Reconciler,
    /// The controller's metrics.
    pub(super) metrics: Arc<EndpointSliceMetrics>,
}

impl std::fmt::Debug for EndpointSliceController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointSliceController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Constructor
// ---------------------------------------------------------------------------------------------

impl EndpointSliceController {
    /// The controller kube-controller-manager runs, over the factory's pod, Service, Node and
    /// EndpointSlice informers, as upstream's `NewController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: EndpointSliceControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.pods(),
            &factory.services(),
            &factory.nodes(),
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
        pods: &SharedIndexInformer<Pod>,
        services: &SharedIndexInformer<Service>,
        nodes: &SharedIndexInformer<Node>,
        slices: &SharedIndexInformer<EndpointSlice>,
        client: Arc<dyn EndpointSliceClient>,
        recorder: Arc<dyn EventRecorder>,
        options: EndpointSliceControllerOptions,
    ) -> Self {
        let mut controller = Self::with_caches(
            pods.indexer().clone(),
            services.indexer().clone(),
            nodes.indexer().clone(),
            slices.indexer().clone(),
            client,
            recorder,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(services, controller.handlers.clone())
            .register(pods, controller.handlers.clone())
            .register(slices, controller.handlers.clone())
            .wait_for(nodes)
            .finish();
        controller
    }

    /// A controller over bare caches (unit tests fill them and call the handlers and
    /// [`Self::sync`] themselves). Adds the [`SERVICE_NAME_INDEX`] to `slices`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        pods: Indexer<Pod>,
        services: Indexer<Service>,
        nodes: Indexer<Node>,
        slices: Indexer<EndpointSlice>,
        client: Arc<dyn EndpointSliceClient>,
        recorder: Arc<dyn EventRecorder>,
        options: EndpointSliceControllerOptions,
    ) -> Self {
        if let Err(err) = slices.add_indexers(service_name_index()) {
            // Another controller on the same informer added it first.
            tracing::debug!(%err, "not adding the EndpointSlice service-name index");
        }
        let config = QueueConfig {
            name: QUEUE_NAME.to_owned(),
            metrics: options.metrics,
        };
        let queue = RateLimitingQueue::with_config(slow_rate_limiter(MAX_SYNC_BACKOFF), config);
        let tracker = Arc::new(EndpointSliceTracker::new());
        let metrics = options.controller_metrics.unwrap_or_default();
        let handlers = EndpointSliceEventHandlers {
            queue: queue.clone(),
            services: services.clone(),
            tracker: Arc::clone(&tracker),
            batch_period: options.endpoint_updates_batch_period,
        };
        let reconciler = Reconciler::new(
            client,
            nodes,
            options.max_endpoints_per_slice,
            Arc::clone(&tracker),
            Arc::clone(&metrics),
            MANAGED_BY,
        );
        Self {
            recorder,
            services,
            pods,
            slices,
            caches_synced: Vec::new(),
            queue,
            handlers,
            tracker,
            trigger_times: TriggerTimeTracker::new(),
            reconciler,
            metrics,
        }
    }

    /// The handlers registered with the informers.
    pub fn event_handlers(&self) -> &EndpointSliceEventHandlers {
        &self.handlers
    }

    /// The work queue of Service keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// The controller's metrics.
    pub fn metrics(&self) -> &Arc<EndpointSliceMetrics> {
        &self.metrics
    }

    /// The slice generations this controller wrote.
    pub fn tracker(&self) -> &EndpointSliceTracker {
        &self.tracker
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Waits for the caches, then runs `workers` workers until `cancel` fires, as upstream's
    /// `Run` (without the topology worker: no topology hints).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        run_controller(
            CONTROLLER_NAME,
            "endpoint slice controller",
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

/// The Service, pod and EndpointSlice handlers, as upstream's `onServiceUpdate`,
/// `onServiceDelete`, `addPod`/`updatePod`/`deletePod` and `onEndpointSlice*`. Cheap to clone.
#[derive(Clone)]
pub struct EndpointSliceEventHandlers {
    /// The controller's queue.
    queue: RateLimitingQueue<String>,
    /// The Service cache, to find the Services selecting a pod.
    services: Indexer<Service>,
    /// The generations this controller wrote: its own slice writes coming back do not queue
    /// a sync.
    tracker: Arc<EndpointSliceTracker>,
    /// The delay of syncs triggered by pods.
    batch_period: Duration,
}

impl std::fmt::Debug for EndpointSliceEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointSliceEventHandlers")
            .finish_non_exhaustive()
    }
}

fn managed_by_us(slice: &EndpointSlice) -> bool {
    crate::endpointsliceutil::managed_by(slice) == MANAGED_BY
}

impl EndpointSliceEventHandlers {
    fn enqueue_key(&self, key: Result<String, kcm_machinery::informer::keys::Error>) {
        match key {
            Ok(key) => self.queue.add(key),
            Err(err) => tracing::error!(%err, "Couldn't get key for object"),
        }
    }

    fn pod_event(&self, old: Option<&Pod>, new: Option<&Pod>) {
        let Some(key) = pod_update_projection_key(old, new) else {
            return;
        };
        for service in services_to_update(&self.services, &key) {
            self.queue.add_after(service, self.batch_period);
        }
    }

    /// Queues the Service of `slice` after the larger of the batch period and
    /// [`ENDPOINT_SLICE_CHANGE_MIN_SYNC_DELAY`], as upstream's `queueServiceForEndpointSlice`.
    fn queue_service_for_slice(&self, slice: &EndpointSlice) {
        let Some(key) = service_controller_key(slice) else {
            tracing::error!(slice = ?slice.metadata.name, "Couldn't get key for EndpointSlice: missing {LABEL_SERVICE_NAME} label");
            return;
        };
        self.queue.add_after(
            key,
            self.batch_period.max(ENDPOINT_SLICE_CHANGE_MIN_SYNC_DELAY),
        );
    }
}

impl ResourceEventHandler<Service> for EndpointSliceEventHandlers {
    fn on_add(&self, service: Arc<Service>, _is_in_initial_list: bool) {
        self.enqueue_key(meta_namespace_key(service.as_ref()));
    }

    fn on_update(&self, _old: Arc<Service>, new: Arc<Service>) {
        self.enqueue_key(meta_namespace_key(new.as_ref()));
    }

    fn on_delete(&self, service: DeletedObject<Service>) {
        self.enqueue_key(service.key());
    }
}

impl ResourceEventHandler<Pod> for EndpointSliceEventHandlers {
    fn on_add(&self, pod: Arc<Pod>, _is_in_initial_list: bool) {
        self.pod_event(None, Some(&pod));
    }

    fn on_update(&self, old: Arc<Pod>, new: Arc<Pod>) {
        self.pod_event(Some(&old), Some(&new));
    }

    fn on_delete(&self, pod: DeletedObject<Pod>) {
        self.pod_event(Some(pod.object()), None);
    }
}

impl ResourceEventHandler<EndpointSlice> for EndpointSliceEventHandlers {
    /// Upstream's `onEndpointSliceAdd`: a managed slice this controller did not write (or
    /// newer than it wrote) queues its Service.
    fn on_add(&self, slice: Arc<EndpointSlice>, _is_in_initial_list: bool) {
        if managed_by_us(&slice) && self.tracker.should_sync(&slice) {
            self.queue_service_for_slice(&slice);
        }
    }

    /// Upstream's `onEndpointSliceUpdate`: a changed Service-name label queues both Services;
    /// a slice taken from or given to this controller, or changed by someone else, queues its
    /// Service.
    fn on_update(&self, old: Arc<EndpointSlice>, new: Arc<EndpointSlice>) {
        let name_of = |s: &EndpointSlice| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_SERVICE_NAME))
                .cloned()
        };
        if name_of(&old) != name_of(&new) {
            tracing::info!(slice = ?new.metadata.name, old = ?name_of(&old), new = ?name_of(&new), "label changed");
            self.queue_service_for_slice(&new);
            self.queue_service_for_slice(&old);
            return;
        }
        if managed_by_us(&old) != managed_by_us(&new)
            || (managed_by_us(&new) && self.tracker.should_sync(&new))
        {
            self.queue_service_for_slice(&new);
        }
    }

    /// Upstream's `onEndpointSliceDelete`: a managed slice deleted by someone else queues its
    /// Service (to recreate it); this controller's own deletions only clear the tracker.
    fn on_delete(&self, slice: DeletedObject<EndpointSlice>) {
        let slice = slice.object();
        if managed_by_us(slice) && self.tracker.has(slice) && !self.tracker.handle_deletion(slice) {
            self.queue_service_for_slice(slice);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Worker wiring
// ---------------------------------------------------------------------------------------------

impl EndpointSliceController {
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
