//! The ServiceCIDR controller: constants, construction, `Run`, the event handlers and `sync` (upstream `pkg/controller/servicecidrs/servicecidrs_controller.go`).

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::networking::v1::{IPAddress, ServiceCIDR};
use kcm_machinery::controller::{ApiStatus, ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::Resource;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::client::{ApiServiceCidrClient, ServiceCidrClient};
use super::prefix::Prefix;
use super::{Error, Result};

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "service-cidr-controller";

/// The work queue's name in the `workqueue_*` metrics (upstream's, `ipaddresses`).
pub const QUEUE_NAME: &str = "ipaddresses";

/// Upstream starts it with 5 workers; no flag sets them.
pub const WORKERS: usize = 5;

/// The finalizer that keeps a ServiceCIDR while addresses only it contains are allocated.
pub const SERVICE_CIDR_PROTECTION_FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";

/// How long after its deletion a ServiceCIDR keeps its finalizer, so that the API servers'
/// allocators have seen the deletion before it goes (upstream's `deletionGracePeriod`).
pub const DELETION_GRACE_PERIOD: Duration = Duration::from_secs(10);

/// The label naming who manages an IPAddress, and the allocator's value.
const MANAGED_BY_LABEL: &str = "ipaddress.kubernetes.io/managed-by";
const MANAGED_BY: &str = "ipallocator.k8s.io";

/// `Ready=False`'s message while addresses block a deletion.
pub const TERMINATING_MESSAGE: &str = "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR";

/// `Ready=True`'s message.
pub const READY_MESSAGE: &str = "Kubernetes Service CIDR is ready";

/// Upstream drops a key after 15 requeues in a row.
const ERROR_POLICY: ErrorPolicy<String, Error> =
    ErrorPolicy::new("Error syncing ServiceCIDR, retrying")
        .with_max_retries(15, "Dropping ServiceCIDR out of the queue");

/// The controller's notion of now.
pub use kcm_machinery::controller::clock::Clock;

/// Wiring of a [`ServiceCidrController`].
#[derive(Clone, Default)]
pub struct ServiceCidrControllerOptions {
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl std::fmt::Debug for ServiceCidrControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCidrControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

/// Keeps the protection finalizer and the `Ready` condition of ServiceCIDRs, and lets a
/// deleted one go only when no allocated address would be left outside every ServiceCIDR, as
/// upstream's servicecidrs `Controller`.
pub struct ServiceCidrController {
    pub(super) client: Arc<dyn ServiceCidrClient>,
    pub(super) recorder: Arc<dyn EventRecorder>,
    pub(super) cidrs: Indexer<ServiceCIDR>,
    pub(super) addresses: Indexer<IPAddress>,
    pub(super) caches_synced: Vec<InformerSynced>,
    pub(super) queue: RateLimitingQueue<String>,
    pub(super) handlers: ServiceCidrEventHandlers,
    pub(super) clock: Clock,
}

impl std::fmt::Debug for ServiceCidrController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCidrController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl ServiceCidrController {
    /// The controller kube-controller-manager runs, over the factory's ServiceCIDR and
    /// IPAddress informers, as upstream's `NewController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: ServiceCidrControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.informer_for::<ServiceCIDR>(),
            &factory.informer_for::<IPAddress>(),
            Arc::new(ApiServiceCidrClient::new(client)),
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
        cidr_informer: &SharedIndexInformer<ServiceCIDR>,
        address_informer: &SharedIndexInformer<IPAddress>,
        client: Arc<dyn ServiceCidrClient>,
        recorder: Arc<dyn EventRecorder>,
        options: ServiceCidrControllerOptions,
    ) -> Self {
        let mut controller = Self::with_cache(
            cidr_informer.indexer().clone(),
            address_informer.indexer().clone(),
            client,
            recorder,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(cidr_informer, controller.handlers.clone())
            .register(address_informer, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over bare caches (unit tests fill them and drive it).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_cache(
        cidrs: Indexer<ServiceCIDR>,
        addresses: Indexer<IPAddress>,
        client: Arc<dyn ServiceCidrClient>,
        recorder: Arc<dyn EventRecorder>,
        options: ServiceCidrControllerOptions,
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
            recorder,
            handlers: ServiceCidrEventHandlers {
                queue: queue.clone(),
                cidrs: cidrs.clone(),
            },
            cidrs,
            addresses,
            caches_synced: Vec::new(),
            queue,
            clock: Arc::new(Timestamp::now),
        }
    }

    /// Uses `clock` for the deletion grace period.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The handlers to register with the informers.
    pub fn event_handlers(&self) -> &ServiceCidrEventHandlers {
        &self.handlers
    }

    /// The work queue of ServiceCIDR names.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the caches, then syncs ServiceCIDRs with `workers` workers until `cancel`
    /// fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |name: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&name).await }
        };
        run_controller(
            CONTROLLER_NAME,
            "ServiceCIDR controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            || all_synced(&self.caches_synced),
            sync,
        )
        .await;
    }

    /// Takes one name and syncs it through the shared worker. False once the queue has shut
    /// down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.queue,
            &ERROR_POLICY,
            |name| async move { self.sync(&name).await },
        )
        .await
    }

    /// Syncs ServiceCIDR `name`, as upstream's `sync`: a live one gets the finalizer and
    /// `Ready=True`; a deleted one loses the finalizer once no allocated address depends on it
    /// alone and [`DELETION_GRACE_PERIOD`] has passed, and says `Ready=False` (`Terminating`)
    /// while addresses block it.
    pub async fn sync(&self, name: &str) -> Result<()> {
        let Some(cidr) = self.cidrs.get_by_key(name) else {
            return Ok(());
        };
        if let Some(deleted_at) = cidr.metadata.deletion_timestamp.as_ref() {
            if !self.can_delete(&cidr) {
                return self
                    .set_ready(&cidr, "False", "Terminating", TERMINATING_MESSAGE)
                    .await;
            }
            let elapsed = (self.clock)().duration_since(deleted_at.0);
            let grace = jiff::SignedDuration::try_from(DELETION_GRACE_PERIOD).unwrap_or_default();
            if elapsed < grace {
                let left = (grace - elapsed).unsigned_abs();
                self.queue.add_after(name.to_owned(), left);
                return Ok(());
            }
            return self.remove_finalizer(&cidr).await;
        }
        self.add_finalizer(&cidr).await?;
        if let Err(err) = self.set_ready(&cidr, "True", "", READY_MESSAGE).await {
            self.recorder.event(
                &cidr.object_ref(&()),
                EventType::Warning,
                "KubernetesServiceCIDRError",
                "The ServiceCIDR Status can not be set to Ready=True".to_owned(),
            );
            return Err(err);
        }
        Ok(())
    }

    /// Upstream's `canDeleteCIDR`: another ServiceCIDR contains each of its prefixes, or no
    /// allocator-managed address of its families lies in it alone.
    pub fn can_delete(&self, cidr: &ServiceCIDR) -> bool {
        let name = cidr.metadata.name.as_deref().unwrap_or_default();
        let prefixes: Vec<Prefix> = cidr_prefixes(cidr);
        let all = self.cidrs.list();
        let has_parent = prefixes.iter().all(|prefix| {
            all.iter().any(|other| {
                other.metadata.name.as_deref() != Some(name)
                    && cidr_prefixes(other)
                        .iter()
                        .any(|o| o.contains_prefix(prefix))
            })
        });
        if has_parent {
            return true;
        }
        for address in self.addresses.list() {
            if !is_managed(&address) {
                continue;
            }
            let Some(ip) = address_of(&address) else {
                continue;
            };
            if !prefixes.iter().any(|p| p.contains_address(ip)) {
                continue;
            }
            let containing: Vec<&str> = all
                .iter()
                .filter(|c| cidr_prefixes(c).iter().any(|p| p.contains_address(ip)))
                .filter_map(|c| c.metadata.name.as_deref())
                .collect();
            if containing == [name] {
                tracing::info!(ip = %ip, service_cidr = name, "Deleting ServiceCIDR blocked by IP address");
                return false;
            }
        }
        true
    }

    async fn add_finalizer(&self, cidr: &ServiceCIDR) -> Result<()> {
        let mut finalizers = cidr.metadata.finalizers.clone().unwrap_or_default();
        if finalizers
            .iter()
            .any(|f| f == SERVICE_CIDR_PROTECTION_FINALIZER)
        {
            return Ok(());
        }
        finalizers.push(SERVICE_CIDR_PROTECTION_FINALIZER.to_owned());
        self.patch_finalizers(cidr, finalizers, "adding").await
    }

    async fn remove_finalizer(&self, cidr: &ServiceCIDR) -> Result<()> {
        let finalizers = cidr.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers
            .iter()
            .any(|f| f == SERVICE_CIDR_PROTECTION_FINALIZER)
        {
            return Ok(());
        }
        let kept: Vec<String> = finalizers
            .into_iter()
            .filter(|f| f != SERVICE_CIDR_PROTECTION_FINALIZER)
            .collect();
        self.patch_finalizers(cidr, kept, "removing").await
    }

    async fn patch_finalizers(
        &self,
        cidr: &ServiceCIDR,
        finalizers: Vec<String>,
        action: &'static str,
    ) -> Result<()> {
        let name = cidr.metadata.name.clone().unwrap_or_default();
        let list = if finalizers.is_empty() {
            serde_json::Value::Null
        } else {
            json!(finalizers)
        };
        let patch = json!({"metadata": {
            "resourceVersion": cidr.metadata.resource_version,
            "finalizers": list,
        }});
        match self.client.patch(&name, false, &patch).await {
            Err(err) if !err.is_not_found() => Err(Error::Finalizer {
                action,
                name,
                source: err,
            }),
            _ => Ok(()),
        }
    }

    /// Writes the `Ready` condition unless it already says `status`, `reason`, `message`
    /// (upstream applies it on every sync; writing only changes keeps the transition time
    /// and spares a write per event).
    async fn set_ready(
        &self,
        cidr: &ServiceCIDR,
        status: &str,
        reason: &str,
        message: &str,
    ) -> Result<()> {
        let conditions = cidr
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let current = conditions.iter().find(|c| c.type_ == "Ready");
        if current.is_some_and(|c| c.status == status && c.reason == reason && c.message == message)
        {
            return Ok(());
        }
        let mut list: Vec<serde_json::Value> = conditions
            .iter()
            .filter(|c| c.type_ != "Ready")
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect();
        list.push(json!({
            "type": "Ready",
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": (self.clock)().to_string(),
        }));
        let name = cidr.metadata.name.clone().unwrap_or_default();
        self.client
            .patch(&name, true, &json!({"status": {"conditions": list}}))
            .await
            .map_err(|source| Error::Status { name, source })
    }
}

/// The prefixes of `cidr`'s `spec.cidrs` that parse.
fn cidr_prefixes(cidr: &ServiceCIDR) -> Vec<Prefix> {
    cidr.spec
        .as_ref()
        .and_then(|s| s.cidrs.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| Prefix::parse(c))
        .collect()
}

fn is_managed(address: &IPAddress) -> bool {
    address
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY)
}

fn address_of(address: &IPAddress) -> Option<IpAddr> {
    address.metadata.name.as_deref()?.parse().ok()
}

/// The ServiceCIDR and IPAddress event handlers.
#[derive(Clone)]
pub struct ServiceCidrEventHandlers {
    queue: RateLimitingQueue<String>,
    cidrs: Indexer<ServiceCIDR>,
}

impl std::fmt::Debug for ServiceCidrEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCidrEventHandlers")
            .finish_non_exhaustive()
    }
}

impl ServiceCidrEventHandlers {
    fn add(&self, name: Option<&str>) {
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            self.queue.add(name.to_owned());
        }
    }

    /// A ServiceCIDR appeared: it and every ServiceCIDR it overlaps are queued (its arrival
    /// may unblock their deletion).
    pub fn cidr_added(&self, cidr: &ServiceCIDR) {
        self.add(cidr.metadata.name.as_deref());
        let prefixes = cidr_prefixes(cidr);
        let mut overlapping = BTreeSet::new();
        for other in self.cidrs.list() {
            if cidr_prefixes(&other)
                .iter()
                .any(|o| prefixes.iter().any(|p| p.overlaps(o)))
                && let Some(name) = other.metadata.name.clone()
            {
                overlapping.insert(name);
            }
        }
        for name in overlapping {
            self.queue.add(name);
        }
    }

    /// An IPAddress the allocator manages appeared or went: the ServiceCIDRs containing it
    /// are queued.
    pub fn address_changed(&self, address: &IPAddress) {
        if !is_managed(address) {
            return;
        }
        let Some(ip) = address_of(address) else {
            return;
        };
        for cidr in self.cidrs.list() {
            if cidr_prefixes(&cidr).iter().any(|p| p.contains_address(ip)) {
                self.add(cidr.metadata.name.as_deref());
            }
        }
    }
}

impl ResourceEventHandler<ServiceCIDR> for ServiceCidrEventHandlers {
    fn on_add(&self, obj: Arc<ServiceCIDR>, _is_in_initial_list: bool) {
        self.cidr_added(&obj);
    }

    fn on_update(&self, _old: Arc<ServiceCIDR>, new: Arc<ServiceCIDR>) {
        self.add(new.metadata.name.as_deref());
    }

    fn on_delete(&self, obj: DeletedObject<ServiceCIDR>) {
        self.add(obj.object().metadata.name.as_deref());
    }
}

impl ResourceEventHandler<IPAddress> for ServiceCidrEventHandlers {
    fn on_add(&self, obj: Arc<IPAddress>, _is_in_initial_list: bool) {
        self.address_changed(&obj);
    }

    fn on_delete(&self, obj: DeletedObject<IPAddress>) {
        self.address_changed(obj.object());
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
