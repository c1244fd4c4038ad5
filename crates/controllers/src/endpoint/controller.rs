//! The endpoints controller: constants, the controller and its construction, `Run`, the event handlers and the worker wiring (upstream `endpoints_controller.go` up to `processNextWorkItem`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::events::EventRecorder;
use kcm_machinery::informer::keys::meta_namespace_key;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    DeletedObject, InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::client::{ApiEndpointsClient, EndpointsClient};
use super::tracker::StaleEndpointsTracker;
use super::{Error, Result};
use crate::endpointsliceutil::{
    LEADER_ELECTION_RECORD_ANNOTATION, TriggerTimeTracker, pod_update_projection_key,
    services_to_update,
};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// kube-controller-manager's name of this controller.
pub const CONTROLLER_NAME: &str = "endpoints-controller";

/// The older name `--controllers` also accepts.
pub const CONTROLLER_ALIAS: &str = "endpoint";

/// The source component of this controller's events (upstream's recorder).
pub const EVENT_COMPONENT: &str = "endpoint-controller";

/// The work queue's name: the `name` label of its `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "endpoint";

/// `--concurrent-endpoint-syncs`' default.
pub const DEFAULT_CONCURRENT_ENDPOINT_SYNCS: u32 = 5;

/// Rate-limited retries of one Service before it is dropped from the queue, as upstream's
/// `maxRetries` (5ms doubling to about 82s).
pub const MAX_RETRIES: usize = 15;

/// How the workers treat a failed sync, as upstream's `handleErr`.
const ERROR_POLICY: ErrorPolicy<String, Error> =
    ErrorPolicy::new("Error syncing endpoints, retrying")
        .with_requeue_level(tracing::Level::INFO)
        .with_max_retries(MAX_RETRIES, "Dropping service out of the queue");

/// Wiring and tuning of an [`EndpointController`].
#[derive(Clone, Default)]
pub struct EndpointControllerOptions {
    /// `--endpoint-updates-batch-period`: how long pod changes wait before the sync they
    /// trigger, so several changes make one write (zero: at once).
    pub endpoint_updates_batch_period: Duration,
    /// Where the queue records its `workqueue_*{name="endpoint"}` metrics.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl std::fmt::Debug for EndpointControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointControllerOptions")
            .field(
                "endpoint_updates_batch_period",
                &self.endpoint_updates_batch_period,
            )
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Manages the Endpoints of selector-based Services, as kube-controller-manager's endpoint
/// `Controller`.
pub struct EndpointController {
    /// Endpoints writes. Test seam: [`super::FakeEndpointsClient`].
    pub(super) client: Arc<dyn EndpointsClient>,
    /// Failed writes become `FailedToCreateEndpoint` / `FailedToUpdateEndpoint` events.
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// The Service informer's cache (read only).
    pub(super) services: Indexer<Service>,
    /// The pod informer's cache (read only).
    pub(super) pods: Indexer<Pod>,
    /// The Endpoints informer's cache (read only).
    pub(super) endpoints: Indexer<Endpoints>,
    /// The informers `run` waits for; empty for bare caches.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Service keys (`namespace/name`) to sync. Shared with the handlers.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: EndpointEventHandlers,
    /// Endpoints versions this controller replaced and the cache may still show.
    pub(super) stale_endpoints: StaleEndpointsTracker,
    /// The `last-change-trigger-time` bookkeeping per Service.
    pub(super) trigger_times: TriggerTimeTracker,
}

impl std::fmt::Debug for EndpointController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Constructor
// ---------------------------------------------------------------------------------------------

impl EndpointController {
    /// The controller kube-controller-manager runs, over the factory's pod, Service and
    /// Endpoints informers, as upstream's `NewEndpointController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: EndpointControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.pods(),
            &factory.services(),
            &factory.informer_for::<Endpoints>(),
            Arc::new(ApiEndpointsClient::new(client)),
            recorder,
            options,
        )
    }

    /// A controller over the given informers, writing through `client`: registers the
    /// handlers and waits for the three informers in [`Self::run`].
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informers(
        pods: &SharedIndexInformer<Pod>,
        services: &SharedIndexInformer<Service>,
        endpoints: &SharedIndexInformer<Endpoints>,
        client: Arc<dyn EndpointsClient>,
        recorder: Arc<dyn EventRecorder>,
        options: EndpointControllerOptions,
    ) -> Self {
        let mut controller = Self::with_caches(
            pods.indexer().clone(),
            services.indexer().clone(),
            endpoints.indexer().clone(),
            client,
            recorder,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(services, controller.handlers.clone())
            .register(pods, controller.handlers.clone())
            .register(endpoints, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over bare caches (unit tests fill them and call the handlers and
    /// [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        pods: Indexer<Pod>,
        services: Indexer<Service>,
        endpoints: Indexer<Endpoints>,
        client: Arc<dyn EndpointsClient>,
        recorder: Arc<dyn EventRecorder>,
        options: EndpointControllerOptions,
    ) -> Self {
        let config = QueueConfig {
            name: QUEUE_NAME.to_owned(),
            metrics: options.metrics,
        };
        let queue = RateLimitingQueue::with_config(default_controller_rate_limiter(), config);
        let handlers = EndpointEventHandlers {
            queue: queue.clone(),
            services: services.clone(),
            batch_period: options.endpoint_updates_batch_period,
        };
        Self {
            client,
            recorder,
            services,
            pods,
            endpoints,
            caches_synced: Vec::new(),
            queue,
            handlers,
            stale_endpoints: StaleEndpointsTracker::new(),
            trigger_times: TriggerTimeTracker::new(),
        }
    }

    /// The handlers registered with the three informers.
    pub fn event_handlers(&self) -> &EndpointEventHandlers {
        &self.handlers
    }

    /// The work queue of Service keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Waits for the caches, queues every cached Endpoints once (so the Endpoints of Services
    /// deleted while no controller ran are cleaned up), then runs `workers` workers until
    /// `cancel` fires, as upstream's `Run` and `checkLeftoverEndpoints`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        run_controller(
            CONTROLLER_NAME,
            "endpoint controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            synced,
            sync,
        )
        .await;
    }

    /// Queues the key of every cached Endpoints but leader-election locks, as upstream's
    /// `checkLeftoverEndpoints`: an Endpoints whose Service is gone is deleted by its sync.
    pub fn check_leftover_endpoints(&self) {
        for endpoints in self.endpoints.list() {
            let is_lock = endpoints
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(LEADER_ELECTION_RECORD_ANNOTATION));
            if is_lock {
                continue;
            }
            match meta_namespace_key(endpoints.as_ref()) {
                Ok(key) => self.queue.add(key),
                Err(err) => tracing::error!(%err, "Unable to get key for endpoint"),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// The Service, pod and Endpoints handlers, as upstream's `onServiceUpdate`,
/// `onServiceDelete`, `addPod`/`updatePod`/`deletePod` and `onEndpointsDelete`. Cheap to clone.
#[derive(Clone)]
pub struct EndpointEventHandlers {
    /// The controller's queue.
    queue: RateLimitingQueue<String>,
    /// The Service cache, to find the Services selecting a pod.
    services: Indexer<Service>,
    /// The delay of syncs triggered by pods.
    batch_period: Duration,
}

impl std::fmt::Debug for EndpointEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointEventHandlers")
            .finish_non_exhaustive()
    }
}

impl EndpointEventHandlers {
    fn enqueue_key(&self, key: Result<String, kcm_machinery::informer::keys::Error>) {
        match key {
            Ok(key) => self.queue.add(key),
            Err(err) => tracing::error!(%err, "Couldn't get key for object"),
        }
    }

    /// Queues the Services a pod event concerns, after the batch period.
    fn pod_event(&self, old: Option<&Pod>, new: Option<&Pod>) {
        let Some(key) = pod_update_projection_key(old, new) else {
            return;
        };
        for service in services_to_update(&self.services, &key) {
            self.queue.add_after(service, self.batch_period);
        }
    }
}

impl ResourceEventHandler<Service> for EndpointEventHandlers {
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

impl ResourceEventHandler<Pod> for EndpointEventHandlers {
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

impl ResourceEventHandler<Endpoints> for EndpointEventHandlers {
    /// Upstream's `onEndpointsDelete`: an Endpoints deleted behind the controller's back is
    /// recreated by the sync.
    fn on_delete(&self, endpoints: DeletedObject<Endpoints>) {
        self.enqueue_key(endpoints.key());
    }
}

// ---------------------------------------------------------------------------------------------
// Worker wiring
// ---------------------------------------------------------------------------------------------

impl EndpointController {
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
