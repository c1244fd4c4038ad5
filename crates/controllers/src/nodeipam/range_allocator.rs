//! The range allocator: pod CIDRs for Nodes from the cluster CIDRs, as upstream's `nodeipam/ipam/range_allocator.go` (the allocator kube-controller-manager runs without a cloud provider).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::keys::meta_namespace_key;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    DeletedObject, InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::cidr::Cidr;
use super::cidr_set::CidrSet;
use super::client::NodeCidrClient;
use super::config::NodeIpamConfig;
use super::{Error, Result};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// kube-controller-manager's name of the node IPAM controller.
pub const CONTROLLER_NAME: &str = "node-ipam-controller";

/// The older name `--controllers` also accepts.
pub const CONTROLLER_ALIAS: &str = "nodeipam";

/// The source component of the allocator's events (upstream's `cidrAllocator`).
pub const EVENT_COMPONENT: &str = "cidrAllocator";

/// The work queue's name.
pub const QUEUE_NAME: &str = "cidrallocator_node";

/// Workers patching Nodes, as upstream's `cidrUpdateWorkers`.
pub const CIDR_UPDATE_WORKERS: usize = 30;

/// Attempts at patching one Node's CIDRs before giving up, as upstream's
/// `cidrUpdateRetries`.
pub const CIDR_UPDATE_RETRIES: usize = 3;

/// How the workers treat a failed sync, as upstream's `processNextNodeWorkItem`: requeue
/// rate-limited, forever.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("error syncing node, requeuing");

// ---------------------------------------------------------------------------------------------
// The allocator
// ---------------------------------------------------------------------------------------------

/// What every handler and worker shares: the CIDR sets, and the patches the cache has not
/// shown yet.
#[derive(Debug)]
struct Shared {
    /// One set per cluster CIDR, by index (IPv4 and IPv6 for dual stack).
    sets: Mutex<Vec<CidrSet>>,
    /// Node name → the CIDRs this allocator patched onto it that the Node cache does not show
    /// yet: a sync on such a stale copy must not allocate a second time.
    patched: Mutex<HashMap<String, Vec<String>>>,
}

impl Shared {
    fn sets(&self) -> MutexGuard<'_, Vec<CidrSet>> {
        self.sets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn patched(&self) -> MutexGuard<'_, HashMap<String, Vec<String>>> {
        self.patched.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Frees the CIDRs `node` holds, as upstream's `ReleaseCIDR`.
    fn release(&self, node: &Node) -> Result<()> {
        let name = node.metadata.name.clone().unwrap_or_default();
        self.patched().remove(&name);
        let mut sets = self.sets();
        for (idx, cidr) in pod_cidrs(node).iter().enumerate() {
            let parsed: Cidr = cidr.parse().map_err(|_| Error::ParseNodeCidr {
                node: name.clone(),
                cidr: cidr.clone(),
            })?;
            let set = sets.get_mut(idx).ok_or_else(|| Error::CidrIndex {
                node: name.clone(),
                cidr: cidr.clone(),
                index: idx,
            })?;
            tracing::debug!(cidr = %cidr, node = %name, "Release CIDR for node");
            set.release(&parsed).map_err(|source| Error::Release {
                cidr: cidr.clone(),
                source,
            })?;
        }
        Ok(())
    }

    /// Marks the CIDRs `node` holds as used, as upstream's `occupyCIDRs`.
    fn occupy(&self, node: &Node) -> Result<()> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut sets = self.sets();
        for (idx, cidr) in pod_cidrs(node).iter().enumerate() {
            let parsed: Cidr = cidr.parse().map_err(|_| Error::ParseNodeCidr {
                node: name.clone(),
                cidr: cidr.clone(),
            })?;
            let set = sets.get_mut(idx).ok_or_else(|| Error::CidrIndex {
                node: name.clone(),
                cidr: cidr.clone(),
                index: idx,
            })?;
            set.occupy(&parsed).map_err(|source| Error::Occupy {
                node: name.clone(),
                cidr: cidr.clone(),
                index: idx,
                source,
            })?;
        }
        Ok(())
    }
}

/// Assigns pod CIDRs to Nodes from the cluster CIDRs, as upstream's `rangeAllocator`: Nodes
/// that already have CIDRs occupy them (at construction, from the listed Nodes, and on every
/// event), Nodes without get the next free block of each cluster CIDR patched in, deleted
/// Nodes give theirs back. Blocks overlapping the service range are never handed out.
pub struct RangeAllocator {
    /// Node patches. Test seam: [`super::FakeNodeCidrClient`].
    client: Arc<dyn NodeCidrClient>,
    /// `CIDRNotAvailable` / `CIDRAssignmentFailed` events about Nodes.
    recorder: Arc<dyn EventRecorder>,
    /// The Node informer's cache (read only).
    nodes: Indexer<Node>,
    /// The CIDR sets and pending patches, shared with the handlers.
    shared: Arc<Shared>,
    /// The informer `run` waits for.
    caches_synced: Vec<InformerSynced>,
    /// Node names to sync.
    queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    handlers: RangeAllocatorEventHandlers,
}

impl std::fmt::Debug for RangeAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeAllocator")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl RangeAllocator {
    /// An allocator over the Node informer, as upstream's `NewCIDRRangeAllocator`: one CIDR
    /// set per cluster CIDR, the service range filtered out, and the CIDRs of `existing`
    /// Nodes (listed from the server before starting) occupied. A Node holding a CIDR outside
    /// the configuration is an error: the controller must not start.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        nodes: &SharedIndexInformer<Node>,
        client: Arc<dyn NodeCidrClient>,
        recorder: Arc<dyn EventRecorder>,
        config: &NodeIpamConfig,
        existing: &[Node],
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Result<Self> {
        let mut allocator = Self::with_cache(
            nodes.indexer().clone(),
            client,
            recorder,
            config,
            existing,
            metrics,
        )?;
        allocator.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(nodes, allocator.handlers.clone())
            .finish();
        Ok(allocator)
    }

    /// An allocator over a bare Node cache (unit tests call the handlers and [`Self::sync`]).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_cache(
        nodes: Indexer<Node>,
        client: Arc<dyn NodeCidrClient>,
        recorder: Arc<dyn EventRecorder>,
        config: &NodeIpamConfig,
        existing: &[Node],
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Result<Self> {
        let mut sets = Vec::with_capacity(config.cluster_cidrs.len());
        for (cidr, size) in config.cluster_cidrs.iter().zip(&config.node_mask_sizes) {
            sets.push(CidrSet::new(*cidr, *size).map_err(|source| Error::CidrSet {
                cidr: cidr.to_string(),
                source,
            })?);
        }
        if let Some(service) = &config.service_cidr {
            filter_out_service_range(&mut sets, service);
        } else {
            tracing::info!("No Service CIDR provided. Skipping filtering out service addresses");
        }
        let shared = Arc::new(Shared {
            sets: Mutex::new(sets),
            patched: Mutex::new(HashMap::new()),
        });
        for node in existing {
            if pod_cidrs(node).is_empty() {
                continue;
            }
            // Garbage in podCIDRs, or a CIDR outside the (changed) configuration: starting
            // would hand out blocks in use.
            shared.occupy(node)?;
        }
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics,
            },
        );
        Ok(Self {
            client,
            recorder,
            nodes,
            handlers: RangeAllocatorEventHandlers {
                queue: queue.clone(),
                shared: Arc::clone(&shared),
            },
            shared,
            caches_synced: Vec::new(),
            queue,
        })
    }

    /// The handlers registered with the Node informer.
    pub fn event_handlers(&self) -> &RangeAllocatorEventHandlers {
        &self.handlers
    }

    /// The work queue of Node names.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// How many blocks are allocated in each cluster CIDR.
    pub fn allocated(&self) -> Vec<usize> {
        self.shared.sets().iter().map(CidrSet::allocated).collect()
    }

    /// Waits for the Node cache, then runs `workers` workers until `cancel` fires, as
    /// upstream's `Run` (kube-controller-manager runs [`CIDR_UPDATE_WORKERS`]).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        run_controller(
            CONTROLLER_NAME,
            "range CIDR allocator",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            synced,
            sync,
        )
        .await;
    }

    /// Takes one Node and syncs it through the shared worker. False once the queue has shut
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

    /// Syncs Node `name`, as upstream's `syncNode`: gone, nothing; being deleted, its CIDRs
    /// are released; otherwise they are occupied or allocated.
    pub async fn sync(&self, name: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = match self.nodes.get_by_key(name) {
            None => {
                tracing::debug!(node = name, "node has been deleted");
                Ok(())
            }
            Some(node) if node.metadata.deletion_timestamp.is_some() => {
                tracing::debug!(node = name, "node is being deleted");
                self.shared.release(&node)
            }
            Some(node) => self.allocate_or_occupy(&node).await,
        };
        tracing::debug!(node = name, elapsed = ?start.elapsed(), "Finished syncing Node request");
        result
    }

    /// Occupies the Node's CIDRs, or allocates one block per cluster CIDR and patches them
    /// in, as upstream's `AllocateOrOccupyCIDR`.
    async fn allocate_or_occupy(&self, node: &Node) -> Result<()> {
        let name = node.metadata.name.clone().unwrap_or_default();
        if !pod_cidrs(node).is_empty() {
            // The cache shows the Node's CIDRs: any patch of ours has landed.
            self.shared.patched().remove(&name);
            return self.shared.occupy(node);
        }
        if self.shared.patched().contains_key(&name) {
            // This copy predates our own patch; its update will come.
            tracing::debug!(node = %name, "Node cache is older than its CIDR patch, waiting");
            return Ok(());
        }
        let allocated = {
            let mut sets = self.shared.sets();
            let mut allocated: Vec<Cidr> = Vec::with_capacity(sets.len());
            for (idx, set) in sets.iter_mut().enumerate() {
                match set.allocate_next() {
                    Ok(cidr) => allocated.push(cidr),
                    Err(source) => {
                        // Give back what this attempt took from the other sets.
                        for (i, cidr) in allocated.iter().enumerate() {
                            if let Some(set) = sets.get_mut(i)
                                && let Err(err) = set.release(cidr)
                            {
                                tracing::error!(%err, cidr = %cidr, "Error when releasing CIDR");
                            }
                        }
                        drop(sets);
                        self.record_node_event(node, "CIDRNotAvailable");
                        return Err(Error::Allocate { index: idx, source });
                    }
                }
            }
            allocated
        };
        tracing::debug!(node = %name, cidrs = ?allocated, "Putting node with CIDR into the work queue");
        self.update_cidrs_allocation(&name, &allocated).await
    }

    /// Patches the allocated CIDRs onto the Node, as upstream's `updateCIDRsAllocation`: not
    /// when the Node already shows them (an earlier patch landed) or shows others (released
    /// again); up to [`CIDR_UPDATE_RETRIES`] attempts, then a `CIDRAssignmentFailed` event and
    /// the blocks released (unless the server timed out: the patch may have landed).
    async fn update_cidrs_allocation(&self, name: &str, allocated: &[Cidr]) -> Result<()> {
        let cidrs: Vec<String> = allocated.iter().map(ToString::to_string).collect();
        let Some(node) = self.nodes.get_by_key(name) else {
            // Gone meanwhile: the blocks are nobody's.
            self.release_blocks(allocated);
            return Err(Error::NodeNotFound {
                node: name.to_owned(),
            });
        };
        let current = pod_cidrs(&node);
        if current == cidrs {
            tracing::debug!(
                node = name,
                "Node already has allocated CIDR. It matches the proposed one"
            );
            return Ok(());
        }
        if !current.is_empty() {
            tracing::error!(node = name, pod_cidrs = ?current, "Node already has a CIDR allocated. Releasing the new one");
            self.release_blocks(allocated);
            return Ok(());
        }
        let mut last_error = None;
        for _ in 0..CIDR_UPDATE_RETRIES {
            match self.client.patch_node_cidrs(name, &cidrs).await {
                Ok(()) => {
                    tracing::info!(node = name, pod_cidrs = ?cidrs, "Set node PodCIDR");
                    self.shared.patched().insert(name.to_owned(), cidrs);
                    return Ok(());
                }
                Err(err) => last_error = Some(err),
            }
        }
        tracing::error!(node = name, pod_cidrs = ?cidrs, "Failed to update node PodCIDR after multiple attempts");
        self.record_node_event(&node, "CIDRAssignmentFailed");
        let timed_out = last_error
            .as_ref()
            .and_then(|e| match e {
                kube::Error::Api(status) => {
                    Some(status.reason == "ServerTimeout" || status.code == 504)
                }
                _ => None,
            })
            .unwrap_or(false);
        if !timed_out {
            // Releasing could hand out a block in use if the patch did land; a server timeout
            // leaves that open, so only then are the blocks kept (a restart reclaims them).
            self.release_blocks(allocated);
        }
        Err(Error::Patch {
            node: name.to_owned(),
            cidrs: cidrs.join(","),
            source: last_error.map(Box::new),
        })
    }

    /// Frees blocks allocated for one Node (by set index).
    fn release_blocks(&self, allocated: &[Cidr]) {
        let mut sets = self.shared.sets();
        for (idx, cidr) in allocated.iter().enumerate() {
            if let Some(set) = sets.get_mut(idx)
                && let Err(err) = set.release(cidr)
            {
                tracing::error!(%err, index = idx, cidr = %cidr, "Error when releasing CIDR");
            }
        }
    }

    /// A warning about `node`, as upstream's `RecordNodeStatusChange`.
    fn record_node_event(&self, node: &Node, status: &str) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let reference = ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(name.clone()),
            uid: node.metadata.uid.clone(),
            ..ObjectReference::default()
        };
        self.recorder.event(
            &reference,
            EventType::Warning,
            status,
            format!("Node {name} status is now: {status}"),
        );
    }
}

/// Marks the blocks overlapping the service range as used in every overlapping cluster CIDR,
/// as upstream's `filterOutServiceRange`.
fn filter_out_service_range(sets: &mut [CidrSet], service: &Cidr) {
    for set in sets.iter_mut() {
        let cluster = set.cluster();
        if cluster.is_ipv6() != service.is_ipv6() || !cluster.overlaps(service) {
            continue;
        }
        if let Err(err) = set.occupy(service) {
            tracing::error!(%err, cidr = %cluster, service_cidr = %service, "Error filtering out service cidr out cluster cidr");
        }
    }
}

/// The Node's `spec.podCIDRs`.
fn pod_cidrs(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.pod_cidrs.clone())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// The Node handlers, as upstream's: adds and updates queue the Node; a deletion releases its
/// CIDRs at once (Nodes have no finalizer, so no update with a deletion timestamp is seen)
/// and queues it. Cheap to clone.
#[derive(Clone)]
pub struct RangeAllocatorEventHandlers {
    queue: RateLimitingQueue<String>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RangeAllocatorEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeAllocatorEventHandlers")
            .finish_non_exhaustive()
    }
}

impl ResourceEventHandler<Node> for RangeAllocatorEventHandlers {
    fn on_add(&self, node: Arc<Node>, _is_in_initial_list: bool) {
        if let Ok(key) = meta_namespace_key(node.as_ref()) {
            self.queue.add(key);
        }
    }

    fn on_update(&self, _old: Arc<Node>, new: Arc<Node>) {
        if let Ok(key) = meta_namespace_key(new.as_ref()) {
            self.queue.add(key);
        }
    }

    fn on_delete(&self, node: DeletedObject<Node>) {
        if let Err(err) = self.shared.release(node.object()) {
            tracing::error!(%err, "error while processing CIDR Release");
        }
        if let Ok(key) = node.key() {
            self.queue.add(key);
        }
    }
}

#[cfg(test)]
#[path = "range_allocator_tests.rs"]
mod tests;
