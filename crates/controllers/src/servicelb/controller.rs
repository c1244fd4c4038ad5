//! The service-lb controller: constants, construction, `Run`, the event handlers, `syncService` and the node sync (upstream `cloud-provider/controllers/service/controller.go`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};
use kcm_machinery::controller::{ApiStatus, ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::meta_namespace_key;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced, wait_for_synced,
};
use kcm_machinery::workqueue::{
    ItemExponentialFailureRateLimiter, QueueConfig, RateLimitingQueue, WorkqueueMetrics,
};
use kube::Resource;
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::client::{ApiServiceLbClient, ServiceLbClient};
use super::metrics::ServiceLbMetrics;
use super::predicates::{
    LOAD_BALANCER_CLEANUP_FINALIZER, has_lb_finalizer, is_backend, needs_cleanup, needs_update,
    should_sync_node, wants_load_balancer,
};
use super::{Error, Result};
use crate::cloud::{CloudError, LoadBalancer};

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "service-lb-controller";

/// The work queue's name in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "service";

/// The component of its events.
pub const EVENT_COMPONENT: &str = "service-controller";

/// How often the Service informer re-delivers every Service (upstream's `serviceSyncPeriod`).
pub const SERVICE_SYNC_PERIOD: Duration = Duration::from_secs(30);

/// How often the backends of every load balancer are checked (upstream's `nodeSyncPeriod`).
pub const NODE_SYNC_PERIOD: Duration = Duration::from_secs(100);

/// The first retry delay of a failed Service (upstream's `minRetryDelay`).
pub const MIN_RETRY_DELAY: Duration = Duration::from_secs(5);

/// The longest retry delay (upstream's `maxRetryDelay`).
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

/// Every failed sync is requeued rate-limited, as upstream's `processNextWorkItem`.
const ERROR_POLICY: ErrorPolicy<String, Error> =
    ErrorPolicy::new("error processing service (will retry)");

/// Wiring of a [`ServiceLbController`].
#[derive(Clone)]
pub struct ServiceLbControllerOptions {
    /// `--cluster-name`, passed to every cloud call.
    pub cluster_name: String,
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// Where the node sync records its `service_controller_*` latencies; `None` records
    /// nothing.
    pub controller_metrics: Option<Arc<ServiceLbMetrics>>,
}

impl Default for ServiceLbControllerOptions {
    fn default() -> Self {
        Self {
            cluster_name: "kubernetes".to_owned(),
            metrics: None,
            controller_metrics: None,
        }
    }
}

impl std::fmt::Debug for ServiceLbControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceLbControllerOptions")
            .field("cluster_name", &self.cluster_name)
            .field("metrics", &self.metrics.is_some())
            .field("controller_metrics", &self.controller_metrics.is_some())
            .finish()
    }
}

/// Which load-balancer call a sync made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// The load balancer was deleted (or was not there).
    Delete,
    /// The load balancer was created or updated.
    Ensure,
}

/// What the node sync remembers between passes.
#[derive(Debug, Default)]
struct NodeSyncState {
    /// The backend names of the last full sync (upstream's `knownHosts`).
    known_hosts: Option<BTreeSet<String>>,
    /// Services whose backend update failed, retried at the next pass.
    services_to_update: BTreeSet<String>,
}

/// Keeps the cloud's load balancers in step with `LoadBalancer` Services and the ready nodes,
/// as upstream's service `Controller`.
pub struct ServiceLbController {
    /// The Service status and finalizer patches.
    pub(super) client: Arc<dyn ServiceLbClient>,
    /// The cloud's load balancers.
    pub(super) balancer: Arc<dyn LoadBalancer>,
    /// `--cluster-name`.
    pub(super) cluster_name: String,
    /// Where events go.
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// The Service informer's cache.
    pub(super) services: Indexer<Service>,
    /// The Node informer's cache.
    pub(super) nodes: Indexer<Node>,
    /// Whether both informers have synced.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Keys of Services to sync.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: ServiceLbEventHandlers,
    /// The last state of each Service this controller handled (upstream's `serviceCache`):
    /// what a deletion without the finalizer cleans up after.
    cache: Mutex<HashMap<String, Arc<Service>>>,
    /// The node sync's memory.
    node_sync: Mutex<NodeSyncState>,
    /// The `service_controller_*` latency histograms.
    controller_metrics: Option<Arc<ServiceLbMetrics>>,
}

impl std::fmt::Debug for ServiceLbController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceLbController")
            .field("cluster_name", &self.cluster_name)
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl ServiceLbController {
    /// The controller kube-controller-manager runs, over the factory's Service and Node
    /// informers, as upstream's `New`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        balancer: Arc<dyn LoadBalancer>,
        recorder: Arc<dyn EventRecorder>,
        options: ServiceLbControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.informer_for::<Service>(),
            &factory.informer_for::<Node>(),
            Arc::new(ApiServiceLbClient::new(client)),
            balancer,
            recorder,
            options,
        )
    }

    /// A controller over these informers, registering its handlers and waiting for them.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informers(
        service_informer: &SharedIndexInformer<Service>,
        node_informer: &SharedIndexInformer<Node>,
        client: Arc<dyn ServiceLbClient>,
        balancer: Arc<dyn LoadBalancer>,
        recorder: Arc<dyn EventRecorder>,
        options: ServiceLbControllerOptions,
    ) -> Self {
        let mut controller = Self::with_cache(
            service_informer.indexer().clone(),
            node_informer.indexer().clone(),
            client,
            balancer,
            recorder,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register_with_resync(
                service_informer,
                controller.handlers.clone(),
                SERVICE_SYNC_PERIOD,
            )
            .register_with_resync(node_informer, controller.handlers.clone(), Duration::ZERO)
            .finish();
        controller
    }

    /// A controller over bare caches (unit tests fill them and call the handlers,
    /// [`Self::process_next_work_item`] and [`Self::node_sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_cache(
        services: Indexer<Service>,
        nodes: Indexer<Node>,
        client: Arc<dyn ServiceLbClient>,
        balancer: Arc<dyn LoadBalancer>,
        recorder: Arc<dyn EventRecorder>,
        options: ServiceLbControllerOptions,
    ) -> Self {
        let controller_metrics = options.controller_metrics;
        let queue = RateLimitingQueue::with_config(
            ItemExponentialFailureRateLimiter::new(MIN_RETRY_DELAY, MAX_RETRY_DELAY),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics: options.metrics,
            },
        );
        Self {
            client,
            balancer,
            cluster_name: options.cluster_name,
            handlers: ServiceLbEventHandlers {
                queue: queue.clone(),
                recorder: Arc::clone(&recorder),
                node_changed: Arc::new(Notify::new()),
            },
            recorder,
            services,
            nodes,
            caches_synced: Vec::new(),
            queue,
            cache: Mutex::new(HashMap::new()),
            node_sync: Mutex::new(NodeSyncState::default()),
            controller_metrics,
        }
    }

    /// The handlers to register with the Service and Node informers.
    pub fn event_handlers(&self) -> &ServiceLbEventHandlers {
        &self.handlers
    }

    /// The work queue of Service keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the caches, then syncs Services with `workers` workers and the backends of
    /// every load balancer on each node change and every [`NODE_SYNC_PERIOD`], until
    /// `cancel` fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        let node_loop = {
            let this = Arc::clone(&self);
            let cancel = cancel.clone();
            async move {
                if !wait_for_synced(CONTROLLER_NAME, &cancel, &this.caches_synced).await {
                    return;
                }
                this.node_sync_loop(&cancel).await;
            }
        };
        tokio::join!(
            run_controller(
                CONTROLLER_NAME,
                "service controller",
                &self.queue,
                ERROR_POLICY,
                workers,
                &cancel,
                || all_synced(&self.caches_synced),
                sync,
            ),
            node_loop,
        );
    }

    /// Runs [`Self::node_sync`] on each node change and every [`NODE_SYNC_PERIOD`].
    async fn node_sync_loop(&self, cancel: &CancellationToken) {
        let mut period = tokio::time::interval(NODE_SYNC_PERIOD);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = self.handlers.node_changed.notified() => {}
                _ = period.tick() => {}
            }
            self.node_sync().await;
        }
    }

    /// Takes one Service key and syncs it through the shared worker, as upstream's
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

    /// Syncs the Service with `key`, as upstream's `syncService`: a Service gone from the
    /// cache has its load balancer cleaned up; any other is created, updated or deleted as
    /// its spec says.
    pub async fn sync(&self, key: &str) -> Result<()> {
        match self.services.get_by_key(key) {
            None => self.process_service_deletion(key).await,
            Some(service) => self.process_service_create_or_update(service, key).await,
        }
    }

    /// Upstream's `processServiceCreateOrUpdate`.
    async fn process_service_create_or_update(
        &self,
        service: Arc<Service>,
        key: &str,
    ) -> Result<()> {
        let previous = self.cached(key);
        if let Some(previous) = previous.filter(|p| p.metadata.uid != service.metadata.uid) {
            // Deleted and created again while it had no finalizer.
            self.process_load_balancer_delete(&previous).await?;
        }
        self.lock_cache()
            .insert(key.to_owned(), Arc::clone(&service));
        match self.sync_load_balancer_if_needed(&service).await {
            Ok(Operation::Delete) => {
                self.lock_cache().remove(key);
                Ok(())
            }
            Ok(Operation::Ensure) => Ok(()),
            Err(err) => {
                self.event(
                    &service,
                    EventType::Warning,
                    "SyncLoadBalancerFailed",
                    format!("Error syncing load balancer: {err}"),
                );
                Err(err)
            }
        }
    }

    /// Creates or updates the load balancer of a Service that wants one, deletes that of a
    /// Service that no longer does, and writes the status (upstream's
    /// `syncLoadBalancerIfNeeded`).
    pub async fn sync_load_balancer_if_needed(&self, service: &Service) -> Result<Operation> {
        let previous = service
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.clone())
            .unwrap_or_default();
        let (op, new_status) = if !wants_load_balancer(service) || needs_cleanup(service) {
            let exists = self
                .balancer
                .get_load_balancer(&self.cluster_name, service)
                .await
                .map_err(|err| {
                    Error::Cloud(format!(
                        "failed to check if load balancer exists before cleanup: {err}"
                    ))
                })?
                .is_some();
            if exists {
                tracing::info!(service = %key_of(service), "Deleting existing load balancer");
                self.event(
                    service,
                    EventType::Normal,
                    "DeletingLoadBalancer",
                    "Deleting load balancer".to_owned(),
                );
                self.balancer
                    .ensure_load_balancer_deleted(&self.cluster_name, service)
                    .await
                    .map_err(|err| {
                        Error::Cloud(format!("failed to delete load balancer: {err}"))
                    })?;
            }
            self.remove_finalizer(service).await?;
            self.event(
                service,
                EventType::Normal,
                "DeletedLoadBalancer",
                "Deleted load balancer".to_owned(),
            );
            (Operation::Delete, LoadBalancerStatus::default())
        } else {
            tracing::info!(service = %key_of(service), "Ensuring load balancer");
            self.event(
                service,
                EventType::Normal,
                "EnsuringLoadBalancer",
                "Ensuring load balancer".to_owned(),
            );
            self.add_finalizer(service).await?;
            let nodes = self.backends();
            if nodes.is_empty() {
                self.event(
                    service,
                    EventType::Warning,
                    "UnAvailableLoadBalancer",
                    "There are no available nodes for LoadBalancer".to_owned(),
                );
            }
            match self
                .balancer
                .ensure_load_balancer(&self.cluster_name, service, &nodes)
                .await
            {
                Ok(status) => {
                    self.event(
                        service,
                        EventType::Normal,
                        "EnsuredLoadBalancer",
                        "Ensured load balancer".to_owned(),
                    );
                    (Operation::Ensure, status)
                }
                Err(CloudError::ImplementedElsewhere) => return Ok(Operation::Ensure),
                Err(err) => {
                    return Err(Error::Cloud(format!(
                        "failed to ensure load balancer: {err}"
                    )));
                }
            }
        };
        self.patch_status(service, &previous, &new_status).await?;
        Ok(op)
    }

    /// Upstream's `processServiceDeletion`: a Service gone from the cache without the
    /// finalizer; its last known state's load balancer is deleted.
    async fn process_service_deletion(&self, key: &str) -> Result<()> {
        let Some(cached) = self.cached(key) else {
            return Ok(());
        };
        tracing::info!(
            service = key,
            "Service has been deleted. Attempting to cleanup load balancer resources"
        );
        self.process_load_balancer_delete(&cached).await?;
        self.lock_cache().remove(key);
        Ok(())
    }

    /// Upstream's `processLoadBalancerDelete`.
    async fn process_load_balancer_delete(&self, service: &Service) -> Result<()> {
        if !wants_load_balancer(service) {
            return Ok(());
        }
        self.event(
            service,
            EventType::Normal,
            "DeletingLoadBalancer",
            "Deleting load balancer".to_owned(),
        );
        if let Err(err) = self
            .balancer
            .ensure_load_balancer_deleted(&self.cluster_name, service)
            .await
        {
            self.event(
                service,
                EventType::Warning,
                "DeleteLoadBalancerFailed",
                format!("Error deleting load balancer: {err}"),
            );
            return Err(Error::Cloud(err.to_string()));
        }
        self.event(
            service,
            EventType::Normal,
            "DeletedLoadBalancer",
            "Deleted load balancer".to_owned(),
        );
        Ok(())
    }

    /// Adds the cleanup finalizer, conditional on the cached resourceVersion.
    async fn add_finalizer(&self, service: &Service) -> Result<()> {
        if has_lb_finalizer(service) {
            return Ok(());
        }
        let mut finalizers = service.metadata.finalizers.clone().unwrap_or_default();
        finalizers.push(LOAD_BALANCER_CLEANUP_FINALIZER.to_owned());
        tracing::debug!(service = %key_of(service), "Adding finalizer to service");
        self.patch_finalizers(service, finalizers)
            .await
            .map_err(|err| Error::Patch {
                what: "failed to add load balancer cleanup finalizer",
                source: err,
            })
    }

    /// Removes the cleanup finalizer, conditional on the cached resourceVersion.
    async fn remove_finalizer(&self, service: &Service) -> Result<()> {
        if !has_lb_finalizer(service) {
            return Ok(());
        }
        let finalizers: Vec<String> = service
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != LOAD_BALANCER_CLEANUP_FINALIZER)
            .cloned()
            .collect();
        tracing::debug!(service = %key_of(service), "Removing finalizer from service");
        self.patch_finalizers(service, finalizers)
            .await
            .map_err(|err| Error::Patch {
                what: "failed to remove load balancer cleanup finalizer",
                source: err,
            })
    }

    async fn patch_finalizers(
        &self,
        service: &Service,
        finalizers: Vec<String>,
    ) -> std::result::Result<(), kube::Error> {
        let finalizers = if finalizers.is_empty() {
            serde_json::Value::Null
        } else {
            json!(finalizers)
        };
        let patch = json!({"metadata": {
            "resourceVersion": service.metadata.resource_version,
            "finalizers": finalizers,
        }});
        let (namespace, name) = names_of(service);
        self.client
            .patch_service_status(namespace, name, &patch)
            .await
    }

    /// Writes `new` as the Service's load-balancer status unless it equals `previous`; a
    /// Service already gone is not an error (it left once its finalizer was removed).
    async fn patch_status(
        &self,
        service: &Service,
        previous: &LoadBalancerStatus,
        new: &LoadBalancerStatus,
    ) -> Result<()> {
        if load_balancer_status_equal(previous, new) {
            return Ok(());
        }
        let ingress = match new.ingress.as_deref() {
            Some(ingress) if !ingress.is_empty() => json!(ingress),
            _ => serde_json::Value::Null,
        };
        let patch = json!({"status": {"loadBalancer": {"ingress": ingress}}});
        let (namespace, name) = names_of(service);
        tracing::debug!(service = %key_of(service), "Patching status for service");
        match self
            .client
            .patch_service_status(namespace, name, &patch)
            .await
        {
            Err(err) if !err.is_not_found() => Err(Error::Patch {
                what: "failed to update load balancer status",
                source: err,
            }),
            _ => Ok(()),
        }
    }

    /// The nodes a load balancer may send traffic to, by name.
    pub fn backends(&self) -> Vec<Arc<Node>> {
        let mut nodes: Vec<Arc<Node>> = self
            .nodes
            .list()
            .into_iter()
            .filter(|n| is_backend(n))
            .collect();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        nodes
    }

    /// Points every load balancer at the current backends when the backend set changed,
    /// and retries the Services whose update failed last time (upstream's
    /// `triggerNodeSync` + `nodeSyncInternal`).
    pub async fn node_sync(&self) {
        let started = tokio::time::Instant::now();
        self.node_sync_internal().await;
        let took = started.elapsed();
        tracing::debug!("It took {} seconds to finish syncNodes", took.as_secs_f64());
        if let Some(metrics) = &self.controller_metrics {
            metrics.observe_node_sync(took);
        }
    }

    /// One node sync pass (upstream's `nodeSyncInternal` without its latency).
    async fn node_sync_internal(&self) {
        let hosts = self.backends();
        let names: BTreeSet<String> = hosts
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let to_update: Vec<Arc<Service>> = {
            let mut state = self
                .node_sync
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let full = state.known_hosts.as_ref() != Some(&names);
            let retry = std::mem::take(&mut state.services_to_update);
            if full {
                tracing::debug!(
                    "Node changes detected, triggering a full node sync on all loadbalancer services"
                );
                state.known_hosts = Some(names);
            }
            let cache = self.lock_cache();
            if full {
                cache.values().cloned().collect()
            } else {
                retry.iter().filter_map(|k| cache.get(k).cloned()).collect()
            }
        };
        let mut failed = BTreeSet::new();
        for service in to_update {
            if self.node_sync_service(&service, &hosts).await {
                failed.insert(key_of(&service));
            }
        }
        self.node_sync
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .services_to_update
            .extend(failed);
    }

    /// Updates one load balancer's backends; true if it should be retried (upstream's
    /// `nodeSyncService` + `lockedUpdateLoadBalancerHosts`).
    async fn node_sync_service(&self, service: &Service, hosts: &[Arc<Node>]) -> bool {
        if !wants_load_balancer(service) {
            return false;
        }
        let started = tokio::time::Instant::now();
        if let Some(metrics) = &self.controller_metrics {
            metrics.count_update_hosts();
        }
        let retry = self.update_load_balancer_hosts(service, hosts).await;
        if let Some(metrics) = &self.controller_metrics {
            metrics.observe_update_hosts(started.elapsed());
            if retry {
                metrics.count_node_sync_error();
            }
        }
        retry
    }

    /// Points one load balancer at `hosts`; true if it should be retried (upstream's
    /// `lockedUpdateLoadBalancerHosts`, its latency recorded by the caller).
    async fn update_load_balancer_hosts(&self, service: &Service, hosts: &[Arc<Node>]) -> bool {
        match self
            .balancer
            .update_load_balancer(&self.cluster_name, service, hosts)
            .await
        {
            Ok(()) => {
                if hosts.is_empty() {
                    self.event(
                        service,
                        EventType::Warning,
                        "UnAvailableLoadBalancer",
                        "There are no available nodes for LoadBalancer".to_owned(),
                    );
                } else {
                    self.event(
                        service,
                        EventType::Normal,
                        "UpdatedLoadBalancer",
                        "Updated load balancer with new hosts".to_owned(),
                    );
                }
                false
            }
            Err(CloudError::ImplementedElsewhere) => false,
            Err(err) => {
                // Only an error while the load balancer still exists.
                if let Ok(None) = self
                    .balancer
                    .get_load_balancer(&self.cluster_name, service)
                    .await
                {
                    return false;
                }
                self.event(
                    service,
                    EventType::Warning,
                    "UpdateLoadBalancerFailed",
                    format!(
                        "Error updating load balancer with new hosts {}: {err}",
                        go_set(hosts)
                    ),
                );
                true
            }
        }
    }

    fn cached(&self, key: &str) -> Option<Arc<Service>> {
        self.lock_cache().get(key).cloned()
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Service>>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn event(&self, service: &Service, type_: EventType, reason: &str, message: String) {
        self.recorder
            .event(&service.object_ref(&()), type_, reason, message);
    }
}

/// `namespace/name`.
fn key_of(service: &Service) -> String {
    meta_namespace_key(service).unwrap_or_default()
}

fn names_of(service: &Service) -> (&str, &str) {
    (
        service.metadata.namespace.as_deref().unwrap_or_default(),
        service.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// Node names as Go prints a `sets.String`: `map[a:{} b:{}]`.
fn go_set(nodes: &[Arc<Node>]) -> String {
    let names: BTreeSet<&str> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let inner: Vec<String> = names.iter().map(|n| format!("{n}:{{}}")).collect();
    format!("map[{}]", inner.join(" "))
}

/// Upstream's `LoadBalancerStatusEqual`: the same ingress entries in the same order.
fn load_balancer_status_equal(a: &LoadBalancerStatus, b: &LoadBalancerStatus) -> bool {
    a.ingress.as_deref().unwrap_or_default() == b.ingress.as_deref().unwrap_or_default()
}

/// The Service and Node event handlers (upstream's handler funcs in `New`).
#[derive(Clone)]
pub struct ServiceLbEventHandlers {
    queue: RateLimitingQueue<String>,
    recorder: Arc<dyn EventRecorder>,
    /// Wakes the node sync loop.
    node_changed: Arc<Notify>,
}

impl std::fmt::Debug for ServiceLbEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceLbEventHandlers")
            .finish_non_exhaustive()
    }
}

impl ServiceLbEventHandlers {
    fn enqueue(&self, service: &Service) {
        match meta_namespace_key(service) {
            Ok(key) => self.queue.add(key),
            Err(err) => tracing::error!(%err, "couldn't get key for service"),
        }
    }

    /// A Service appeared: queued if it wants a load balancer or has one to clean up (after a
    /// restart, too).
    pub fn service_added(&self, service: &Service) {
        if wants_load_balancer(service) || needs_cleanup(service) {
            self.enqueue(service);
        }
    }

    /// A Service changed: queued if the change matters to its load balancer, with the event
    /// upstream records for the change.
    pub fn service_updated(&self, old: &Service, new: &Service) {
        let (update, event) = needs_update(old, new);
        if let Some((reason, message)) = event {
            self.recorder
                .event(&new.object_ref(&()), EventType::Normal, reason, message);
        }
        if update || needs_cleanup(new) {
            self.enqueue(new);
        }
    }

    /// A Service left the cache. Upstream relies on the finalizer; a Service deleted before
    /// it got one is queued too, so its cached load balancer is not leaked.
    pub fn service_deleted(&self, service: &Service) {
        if wants_load_balancer(service) {
            self.enqueue(service);
        }
    }

    /// A node change that may change the backend set wakes the node sync.
    pub fn node_changed(&self) {
        self.node_changed.notify_one();
    }
}

impl ResourceEventHandler<Service> for ServiceLbEventHandlers {
    fn on_add(&self, obj: Arc<Service>, _is_in_initial_list: bool) {
        self.service_added(&obj);
    }

    fn on_update(&self, old: Arc<Service>, new: Arc<Service>) {
        self.service_updated(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<Service>) {
        self.service_deleted(obj.object());
    }
}

impl ResourceEventHandler<Node> for ServiceLbEventHandlers {
    fn on_add(&self, _obj: Arc<Node>, _is_in_initial_list: bool) {
        self.node_changed();
    }

    fn on_update(&self, old: Arc<Node>, new: Arc<Node>) {
        if should_sync_node(&old, &new) {
            self.node_changed();
        }
    }

    fn on_delete(&self, _obj: DeletedObject<Node>) {
        self.node_changed();
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
