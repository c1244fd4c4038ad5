//! The running simulator: N simulated nodes (kwok-style kubelets) and the pods bound to them.
//!
//! A [`Simulator`] registers its nodes (creating them, or adopting existing Nodes of the same
//! names, so a restart resumes), then keeps each one alive as a kubelet would: it renews the
//! node's Lease in `kube-node-lease` every [`DEFAULT_LEASE_RENEW_INTERVAL`] and posts the
//! node's conditions (fresh `lastHeartbeatTime`) through `nodes/status` every
//! [`SimulatorConfig::node_status_update_period`], at once when someone else changed them
//! (e.g. the node lifecycle controller marked the node `Unknown`). A Node annotated
//! `sim.kcm.io/heartbeat=stopped` is a kubelet gone silent: no Lease renewals, no status
//! posts, and its pods are left as they are, until the annotation is removed.
//!
//! Pods bound to a simulated node are driven by [`crate::kubelet::decide`]: status through
//! `pods/status`, a pod IP from the node's /24 ([`crate::ipam::PodIpAllocator`]; addresses
//! found in pod statuses are reserved on start and released when a pod finishes or goes), and
//! a final delete (grace period 0, uid precondition) for pods being deleted.
//! With the claim and volume informers ([`Simulator::watch_volumes`]) a pod also waits for its
//! attachable volumes, and a claim the resizer left `NodeResizePending` is expanded on the node
//! of a pod using it (`expand`).
//!
//! The node's /24 is the Node's `spec.podCIDR`, as a kubelet takes it: set by the node IPAM
//! controller (`--allocate-node-cidrs`); until the Node has one, its pods wait. On a cluster
//! without node IPAM, [`SimulatorConfig::assign_pod_cidrs`] makes each node register with
//! `10.244.<index>.0/24` itself.
//!
//! Scale: one informer per resource type, shared with the rest of the process; two work
//! queues (pods keyed `namespace/name`, nodes keyed by name) served by a fixed set of
//! workers; timers are the queues' delayed adds, so no task lives per pod or per node.

mod claims;
mod expand;
mod nodes;
mod pods;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::Client;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use kcm_machinery::events::{EventBroadcaster, EventRecorder, SystemClock, WallClock};
use kcm_machinery::informer::{
    DeletedObject, Lister, ResourceEventHandler, SharedIndexInformer, SharedInformerFactory,
    meta_namespace_key, shared_informer, split_meta_namespace_key, wait_for_cache_sync,
};
use kcm_machinery::labels::Selector;
use kcm_machinery::workqueue::{ItemExponentialFailureRateLimiter, RateLimitingQueue};

use crate::NO_RESYNC;
use crate::client::{ClusterClient, KubeClusterClient};
use crate::ipam::PodIpAllocator;
use crate::node::{
    NODE_LEASE_NAMESPACE, NodeTemplate, conditions_healthy, heartbeat_stopped, internal_ip,
    parse_cidr24, pod_cidr,
};
use crate::storage::CSI_DRIVER;

/// How often a node renews its Lease: a quarter of its 40 s duration, as the kubelet's
/// `renewInterval`.
pub const DEFAULT_LEASE_RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// How often a node posts its status when nothing changed. The kubelet reports every 5 min
/// (`nodeStatusReportFrequency`) once Leases carry the heartbeat; a minute keeps
/// `lastHeartbeatTime` in `kubectl describe node` recent at little cost.
pub const DEFAULT_NODE_STATUS_UPDATE_PERIOD: Duration = Duration::from_secs(60);
/// The `source.component` of the simulated kubelets' events, as the kubelet's.
pub const KUBELET_COMPONENT: &str = "kubelet";
/// How long a bound pod stays `Pending` before it runs, by default.
pub const DEFAULT_POD_READY_DELAY: Duration = Duration::from_secs(1);
/// How many registrations are in flight at once.
const REGISTRATION_CONCURRENCY: usize = 16;
/// How long `run` waits for the node informer to show the registered nodes before starting
/// anyway (the workers cope with a node the cache does not show yet).
const REGISTRATION_SYNC_TIMEOUT: Duration = Duration::from_secs(10);

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a simulator step failed. Steps are retried by the work queues; these errors are
/// logged.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An informer refused the simulator's event handler.
    #[error("simulator: registering the {resource} event handler: {source}")]
    Handler {
        /// `pods` or `nodes`.
        resource: &'static str,
        /// The informer's error.
        #[source]
        source: shared_informer::Error,
    },
    /// Creating or adopting a Node failed.
    #[error("registering node {node}: {source}")]
    RegisterNode {
        /// The node.
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Reading, creating or renewing a node's Lease failed.
    #[error("renewing lease {NODE_LEASE_NAMESPACE}/{node}: {source}")]
    Lease {
        /// The node (and Lease name).
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Posting a node's status failed.
    #[error("updating node {node} status: {source}")]
    NodeStatus {
        /// The node.
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Posting a pod's status failed.
    #[error("updating pod {pod} status: {source}")]
    PodStatus {
        /// The pod, `namespace/name`.
        pod: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The final delete of a pod failed.
    #[error("deleting pod {pod}: {source}")]
    DeletePod {
        /// The pod, `namespace/name`.
        pod: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Patching a claim's status after a node expansion failed.
    #[error("updating claim {claim} status after expanding its volume: {source}")]
    ClaimStatus {
        /// The claim, `namespace/name`.
        claim: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The node's pod CIDR has no free address.
    #[error("pod {pod}: no free pod IP on node {node}")]
    NoPodIp {
        /// The pod, `namespace/name`.
        pod: String,
        /// The node.
        node: String,
    },
}

/// How the simulator behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimulatorConfig {
    /// How many nodes to simulate: `<prefix>-0` to `<prefix>-<nodes-1>`.
    pub nodes: usize,
    /// Their shape (name prefix, capacity, kubelet version).
    pub template: NodeTemplate,
    /// How long a bound pod stays `Pending` before it runs.
    pub pod_ready_delay: Duration,
    /// How often each node renews its Lease.
    pub lease_renew_interval: Duration,
    /// How often each node posts its status when nothing changed.
    pub node_status_update_period: Duration,
    /// Workers driving pods.
    pub pod_workers: usize,
    /// Workers registering nodes and renewing their heartbeats.
    pub node_workers: usize,
    /// Register nodes with a pod CIDR of their own (`10.244.<index>.0/24`) instead of waiting
    /// for the node IPAM controller to set one: for clusters that do not allocate node CIDRs.
    pub assign_pod_cidrs: bool,
    /// Devices the simulated DRA driver `gpu.sim.kcm.io` publishes on each node (one
    /// ResourceSlice per node); 0 publishes no slices and creates no DeviceClass.
    pub dra_devices_per_node: usize,
}

impl Default for SimulatorConfig {
    fn default() -> Self {
        Self {
            nodes: 3,
            template: NodeTemplate::default(),
            pod_ready_delay: DEFAULT_POD_READY_DELAY,
            lease_renew_interval: DEFAULT_LEASE_RENEW_INTERVAL,
            node_status_update_period: DEFAULT_NODE_STATUS_UPDATE_PERIOD,
            pod_workers: 8,
            node_workers: 4,
            assign_pod_cidrs: false,
            dra_devices_per_node: crate::dra::DEFAULT_DEVICES_PER_NODE,
        }
    }
}

/// One simulated node's kubelet state.
#[derive(Debug)]
struct NodeSlot {
    /// The node's index: its name, pod CIDR and InternalIP derive from it.
    index: usize,
    /// Pod IPs from the node's pod CIDR; `None` until the Node shows one (its pods wait).
    /// Invariant: once set, replaced only while it hands out no address.
    ipam: Option<PodIpAllocator>,
    /// The node's InternalIP, reported as pods' hostIP.
    host_ip: Ipv4Addr,
    /// The Node exists (created or adopted by this simulator).
    registered: bool,
    /// The Lease as last written; `None` means read it again before the next renewal.
    lease: Option<Lease>,
    /// When the Lease was last renewed.
    last_renew: Option<Instant>,
    /// When the node's status was last posted.
    last_status: Option<Instant>,
}

/// What the event handlers and the workers share.
struct Shared {
    config: SimulatorConfig,
    clock: Arc<dyn WallClock>,
    /// The simulated nodes by name. The map never changes after construction; each slot
    /// has its own lock, never held across an `.await`.
    slots: HashMap<String, Mutex<NodeSlot>>,
    /// Each simulated node's kubelet event recorder (`source.component` `kubelet`,
    /// `source.host` the node), by node name; fixed after construction.
    recorders: HashMap<String, Arc<dyn EventRecorder>>,
    /// Pods to drive, keyed `namespace/name`.
    pod_queue: RateLimitingQueue<String>,
    /// Nodes to register or heartbeat, keyed by name.
    node_queue: RateLimitingQueue<String>,
    /// When each pod (by uid) was first seen bound, for pods whose PodScheduled condition
    /// carries no transition time. Never held across an `.await`.
    first_seen: Mutex<HashMap<String, jiff::Timestamp>>,
    pods: Lister<Pod>,
    nodes: Lister<Node>,
    /// The claims and volumes pods mount, once [`Simulator::watch_volumes`] gave them: without
    /// them no pod waits for an attach and nodes report no volumes in use.
    volumes: OnceLock<(Lister<PersistentVolumeClaim>, Lister<PersistentVolume>)>,
    /// Node name → keys (`namespace/name`) of the pods bound to it that mount claims, so a
    /// node's `volumesInUse` looks at those pods only. Never held across an `.await`.
    claim_pods: Mutex<HashMap<String, std::collections::BTreeSet<String>>>,
    /// Claim uid → the size its volume was last expanded to on a node (the kubelet's actual
    /// state of the world marking a volume resized), so a claim cache that has not caught up
    /// with the kubelet's own status patch does not expand it again. Never held across an
    /// `.await`.
    expanded: Mutex<HashMap<String, crate::quantity::Quantity>>,
    /// The ResourceClaims pods name, once [`Simulator::watch_resource_claims`] gave them:
    /// without them no pod waits for its claims.
    resource_claims: OnceLock<Lister<ResourceClaim>>,
    /// Pod uid → the last `FailedPrepareDynamicResources` message recorded, so a pod waiting
    /// for its claims gets one event per reason. Never held across an `.await`.
    prepare_failures: Mutex<HashMap<String, String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// The simulated node `pod` is bound to, if any.
    fn node_of<'a>(&self, pod: &'a Pod) -> Option<&'a str> {
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| self.slots.contains_key(*n))
    }

    /// Forgets a pod that finished or went: its IP returns to the node's pool.
    fn release(&self, node: &str, uid: &str) {
        if let Some(slot) = self.slots.get(node)
            && let Some(ipam) = lock(slot).ipam.as_mut()
        {
            ipam.release(uid);
        }
        lock(&self.first_seen).remove(uid);
        lock(&self.prepare_failures).remove(uid);
    }

    /// Takes the pod CIDR `node` shows as its slot's pod IP range, when the slot has none yet
    /// or has handed out nothing from another one. True when the range changed (the node's
    /// waiting pods can run).
    fn adopt_pod_cidr(&self, node: &Node) -> bool {
        let Some(slot) = node
            .metadata
            .name
            .as_deref()
            .and_then(|n| self.slots.get(n))
        else {
            return false;
        };
        let Some(base) = node
            .spec
            .as_ref()
            .and_then(|s| s.pod_cidr.as_deref())
            .and_then(parse_cidr24)
        else {
            return false;
        };
        let mut slot = lock(slot);
        let replace = match &slot.ipam {
            None => true,
            Some(ipam) => ipam.base() != base && ipam.in_use() == 0,
        };
        if replace {
            slot.ipam = Some(PodIpAllocator::new(base));
        }
        replace
    }

    /// The claims `pod` mounts, by name: its `persistentVolumeClaim` volumes' claims and
    /// `<pod>-<volume>` for each generic ephemeral volume.
    fn claim_names(pod: &Pod) -> Vec<String> {
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        pod.spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
                (Some(source), _) => Some(source.claim_name.clone()),
                (None, Some(_)) => Some(format!("{pod_name}-{}", v.name)),
                (None, None) => None,
            })
            .collect()
    }

    /// The unique names (`kubernetes.io/csi/<driver>^<handle>`) of the volumes of `pod` that the
    /// simulated CSI driver attaches: its claims' bound volumes with a CSI source of
    /// [`CSI_DRIVER`], as the kubelet's volume manager finds the attachable ones.
    fn attachable_volumes(&self, pod: &Pod) -> Vec<String> {
        let Some((claims, volumes)) = self.volumes.get() else {
            return Vec::new();
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        Self::claim_names(pod)
            .into_iter()
            .filter_map(|claim| claims.get(namespace, &claim))
            .filter_map(|claim| claim.spec.as_ref().and_then(|s| s.volume_name.clone()))
            .filter_map(|pv| volumes.get_cluster(&pv))
            .filter_map(|pv| pv.spec.as_ref().and_then(|s| s.csi.clone()))
            .filter(|csi| csi.driver == CSI_DRIVER)
            .map(|csi| format!("kubernetes.io/csi/{}^{}", csi.driver, csi.volume_handle))
            .collect()
    }

    /// What `node` reports in `status.volumesInUse`: the attachable volumes of the pods bound to
    /// it that have not finished, sorted (the kubelet's `GetVolumesInUse`).
    fn volumes_in_use(&self, node: &str) -> Vec<String> {
        if self.volumes.get().is_none() {
            return Vec::new();
        }
        let keys: Vec<String> = lock(&self.claim_pods)
            .get(node)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default();
        let mut in_use: Vec<String> = keys
            .iter()
            .filter_map(|key| match split_meta_namespace_key(key) {
                Ok((Some(namespace), name)) => self.pods.get(namespace, name),
                _ => None,
            })
            .filter(|p| self.node_of(p) == Some(node) && !pods::is_finished(p))
            .flat_map(|p| self.attachable_volumes(&p))
            .collect();
        in_use.sort_unstable();
        in_use.dedup();
        in_use
    }

    /// Queues the pods on simulated nodes that mount claim `namespace/name` (its volume waits
    /// for a node expansion).
    fn enqueue_pods_mounting(&self, namespace: &str, name: &str) {
        let keys: Vec<String> = lock(&self.claim_pods)
            .values()
            .flat_map(|keys| keys.iter().cloned())
            .collect();
        for key in keys {
            let pod = match split_meta_namespace_key(&key) {
                Ok((Some(ns), pod_name)) if ns == namespace => self.pods.get(ns, pod_name),
                _ => None,
            };
            if pod.is_some_and(|p| Self::claim_names(&p).iter().any(|c| c == name)) {
                self.pod_queue.add(key);
            }
        }
    }

    /// Queues every pod bound to `node` (a node coming back to life).
    fn enqueue_pods_of(&self, node: &str) {
        for pod in self.pods.list_all(&Selector::everything()) {
            if self.node_of(&pod) == Some(node)
                && let Ok(key) = meta_namespace_key(pod.as_ref())
            {
                self.pod_queue.add(key);
            }
        }
    }
}

/// Queues pods bound to simulated nodes; releases what deleted pods held.
struct PodHandler(Arc<Shared>);

impl PodHandler {
    fn enqueue(&self, pod: &Pod) {
        if self.0.node_of(pod).is_some()
            && let Ok(key) = meta_namespace_key(pod)
        {
            self.0.pod_queue.add(key);
        }
        self.volumes_changed(pod, false);
    }

    /// A pod with claims came, changed or went (`gone`): its node's `volumesInUse` may change.
    fn volumes_changed(&self, pod: &Pod, gone: bool) {
        let mounts_claims = pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some());
        if let Some(node) = self.0.node_of(pod)
            && mounts_claims
            && self.0.volumes.get().is_some()
            && let Ok(key) = meta_namespace_key(pod)
        {
            {
                let mut claim_pods = lock(&self.0.claim_pods);
                let keys = claim_pods.entry(node.to_owned()).or_default();
                if gone {
                    keys.remove(&key);
                } else {
                    keys.insert(key);
                }
            }
            self.0.node_queue.add(node.to_owned());
        }
    }
}

impl ResourceEventHandler<Pod> for PodHandler {
    fn on_add(&self, pod: Arc<Pod>, _is_in_initial_list: bool) {
        self.enqueue(&pod);
    }

    fn on_update(&self, _old: Arc<Pod>, new: Arc<Pod>) {
        self.enqueue(&new);
    }

    fn on_delete(&self, obj: DeletedObject<Pod>) {
        let pod = obj.object();
        if let Some(node) = self.0.node_of(pod) {
            self.0
                .release(node, pod.metadata.uid.as_deref().unwrap_or_default());
        }
        self.volumes_changed(pod, true);
    }
}

/// Wakes the pods of a claim whose volume waits for the node to expand it.
struct ClaimHandler(Arc<Shared>);

impl ClaimHandler {
    fn changed(&self, claim: &PersistentVolumeClaim) {
        let Some((_, volumes)) = self.0.volumes.get() else {
            return;
        };
        let volume = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .and_then(|v| volumes.get_cluster(v));
        if volume.is_some_and(|v| expand::needs_node_expansion(claim, &v)) {
            self.0.enqueue_pods_mounting(
                claim.metadata.namespace.as_deref().unwrap_or_default(),
                claim.metadata.name.as_deref().unwrap_or_default(),
            );
        }
    }
}

impl ResourceEventHandler<PersistentVolumeClaim> for ClaimHandler {
    fn on_add(&self, claim: Arc<PersistentVolumeClaim>, _is_in_initial_list: bool) {
        self.changed(&claim);
    }

    fn on_update(&self, _old: Arc<PersistentVolumeClaim>, new: Arc<PersistentVolumeClaim>) {
        self.changed(&new);
    }

    fn on_delete(&self, obj: DeletedObject<PersistentVolumeClaim>) {
        if let Some(uid) = obj.object().metadata.uid.as_deref() {
            lock(&self.0.expanded).remove(uid);
        }
    }
}

/// Wakes a node's heartbeat when it matters: the node appeared, its heartbeat annotation
/// changed, or someone changed the conditions it reports.
struct NodeHandler(Arc<Shared>);

impl ResourceEventHandler<Node> for NodeHandler {
    fn on_add(&self, node: Arc<Node>, _is_in_initial_list: bool) {
        if let Some(name) = node.metadata.name.as_deref()
            && self.0.slots.contains_key(name)
        {
            self.0.node_queue.add(name.to_owned());
            if self.0.adopt_pod_cidr(&node) {
                self.0.enqueue_pods_of(name);
            }
        }
    }

    fn on_update(&self, old: Arc<Node>, new: Arc<Node>) {
        let Some(name) = new.metadata.name.as_deref() else {
            return;
        };
        if !self.0.slots.contains_key(name) {
            return;
        }
        let resumed = heartbeat_stopped(&old) && !heartbeat_stopped(&new);
        if heartbeat_stopped(&old) != heartbeat_stopped(&new) || !conditions_healthy(&new) {
            self.0.node_queue.add(name.to_owned());
        }
        let attached = |n: &Node| n.status.as_ref().and_then(|s| s.volumes_attached.clone());
        if resumed {
            tracing::info!(node = name, "heartbeat resumed");
            self.0.enqueue_pods_of(name);
        } else if attached(&old) != attached(&new) {
            // Pods waiting for an attach may start.
            self.0.enqueue_pods_of(name);
        } else if self.0.adopt_pod_cidr(&new) {
            tracing::info!(node = name, pod_cidr = ?new.spec.as_ref().and_then(|s| s.pod_cidr.as_deref()), "node got its pod CIDR");
            self.0.enqueue_pods_of(name);
        }
    }
}

/// Simulated nodes and their pods. Cheap to clone; clones are the same simulator.
#[derive(Clone)]
pub struct Simulator {
    shared: Arc<Shared>,
    client: Arc<dyn ClusterClient>,
    pods: SharedIndexInformer<Pod>,
    nodes: SharedIndexInformer<Node>,
    /// The simulated DRA driver, when it publishes devices.
    driver: Option<crate::dra::Driver>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl Simulator {
    /// A simulator over `client`, sharing `factory`'s pod and node informers (start the
    /// factory after this, as with any controller), recording each node's kubelet events
    /// through `events`. Must be called inside a Tokio runtime.
    pub fn new(
        client: Client,
        factory: &SharedInformerFactory,
        events: &EventBroadcaster,
        config: SimulatorConfig,
    ) -> Result<Self> {
        let simulator = Self::with_client(
            Arc::new(KubeClusterClient::new(client.clone())),
            factory.pods(),
            factory.nodes(),
            &|node| events.recorder(KUBELET_COMPONENT, Some(node)),
            config,
            Arc::new(SystemClock),
        )?;
        simulator.watch_volumes(
            &factory.informer_for::<PersistentVolumeClaim>(),
            &factory.informer_for::<PersistentVolume>(),
        );
        simulator.watch_resource_claims(&factory.informer_for::<ResourceClaim>());
        let mut simulator = simulator;
        if simulator.shared.config.dra_devices_per_node > 0 {
            simulator.driver = Some(crate::dra::Driver::new(
                Arc::new(crate::dra::KubeDraClient::new(client)),
                &factory.nodes(),
                &factory.informer_for::<ResourceSlice>(),
                simulator.node_names(),
                simulator.shared.config.dra_devices_per_node,
            ));
        }
        Ok(simulator)
    }

    /// Gives the kubelets the claim and volume informers (started by the caller), so that a
    /// pod waits until its node lists its attachable volumes in `status.volumesAttached`
    /// before it starts, nodes report the volumes of their pods in `status.volumesInUse`, and
    /// a claim left `NodeResizePending` by the resizer is expanded on the node of a pod using
    /// it, as the kubelet's volume manager. A second call changes nothing.
    pub fn watch_volumes(
        &self,
        claims: &SharedIndexInformer<PersistentVolumeClaim>,
        volumes: &SharedIndexInformer<PersistentVolume>,
    ) {
        if self
            .shared
            .volumes
            .set((claims.lister(), volumes.lister()))
            .is_err()
        {
            return;
        }
        if let Err(err) = claims
            .add_event_handler_with_resync_period(ClaimHandler(self.shared.clone()), NO_RESYNC)
        {
            tracing::error!(%err, "registering the simulator's claim event handler");
        }
    }

    /// A simulator with every dependency given: the API seam, the pod and node informers
    /// (started by the caller), the event recorder of each node (by name), the configuration
    /// and the wall clock timestamps are read from. Must be called inside a Tokio runtime.
    pub fn with_client(
        client: Arc<dyn ClusterClient>,
        pods: SharedIndexInformer<Pod>,
        nodes: SharedIndexInformer<Node>,
        recorders: &dyn Fn(&str) -> Arc<dyn EventRecorder>,
        config: SimulatorConfig,
        clock: Arc<dyn WallClock>,
    ) -> Result<Self> {
        let recorders = (0..config.nodes)
            .map(|index| {
                let name = config.template.node_name(index);
                let recorder = recorders(&name);
                (name, recorder)
            })
            .collect();
        let slots = (0..config.nodes)
            .map(|index| {
                let name = config.template.node_name(index);
                let slot = NodeSlot {
                    index,
                    ipam: config
                        .assign_pod_cidrs
                        .then(|| PodIpAllocator::new(pod_cidr(index).0)),
                    host_ip: internal_ip(index),
                    registered: false,
                    lease: None,
                    last_renew: None,
                    last_status: None,
                };
                (name, Mutex::new(slot))
            })
            .collect();
        // Kubelet-like retries: 200 ms doubling to 7 s (the lease controller's backoff).
        let node_limiter = ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(200),
            Duration::from_secs(7),
        );
        let pod_limiter = ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(100),
            Duration::from_secs(10),
        );
        let shared = Arc::new(Shared {
            config,
            clock,
            slots,
            recorders,
            pod_queue: RateLimitingQueue::new(pod_limiter),
            node_queue: RateLimitingQueue::new(node_limiter),
            first_seen: Mutex::new(HashMap::new()),
            pods: pods.lister(),
            nodes: nodes.lister(),
            volumes: OnceLock::new(),
            claim_pods: Mutex::new(HashMap::new()),
            expanded: Mutex::new(HashMap::new()),
            resource_claims: OnceLock::new(),
            prepare_failures: Mutex::new(HashMap::new()),
        });
        pods.add_event_handler_with_resync_period(PodHandler(shared.clone()), NO_RESYNC)
            .map_err(|source| Error::Handler {
                resource: "pods",
                source,
            })?;
        nodes
            .add_event_handler_with_resync_period(NodeHandler(shared.clone()), NO_RESYNC)
            .map_err(|source| Error::Handler {
                resource: "nodes",
                source,
            })?;
        Ok(Self {
            shared,
            client,
            pods,
            nodes,
            driver: None,
        })
    }

    /// The names of the simulated nodes, in index order.
    pub fn node_names(&self) -> Vec<String> {
        (0..self.shared.config.nodes)
            .map(|i| self.shared.config.template.node_name(i))
            .collect()
    }

    /// Registers the nodes, waits for the informers, then keeps the nodes and their pods
    /// going until `cancel` fires; returns once the workers have stopped.
    pub async fn run(&self, cancel: CancellationToken) {
        let driver = self.driver.clone().map(|driver| {
            let cancel = cancel.clone();
            tokio::spawn(async move { driver.run(cancel).await })
        });
        self.run_nodes(cancel).await;
        if let Some(driver) = driver
            && let Err(err) = driver.await
        {
            tracing::error!(%err, "simulated DRA driver failed");
        }
    }

    async fn run_nodes(&self, cancel: CancellationToken) {
        let shared = &self.shared;
        if let Err(err) = self.client.ensure_namespace(NODE_LEASE_NAMESPACE).await {
            tracing::warn!(%err, namespace = NODE_LEASE_NAMESPACE, "ensuring the node lease namespace failed; will retry with the first lease");
        }
        let names = self.node_names();
        let registered = futures::stream::iter(names.clone())
            .map(|name| {
                let this = self.clone();
                async move { this.register(&name).await }
            })
            .buffer_unordered(REGISTRATION_CONCURRENCY)
            .collect::<Vec<_>>();
        let registered = tokio::select! {
            registered = registered => registered,
            _ = cancel.cancelled() => return self.shut_down(),
        };
        let mut newest: Option<u64> = None;
        for result in registered {
            match result {
                Ok(node) => {
                    let rv = node
                        .metadata
                        .resource_version
                        .as_deref()
                        .and_then(|rv| rv.parse::<u64>().ok());
                    newest = newest.max(rv);
                }
                Err(err) => tracing::warn!(%err, "node registration failed; retrying"),
            }
        }
        tracing::info!(nodes = names.len(), "simulated nodes registered");
        if !wait_for_cache_sync("simulator", &cancel, &[&self.pods, &self.nodes]).await {
            return self.shut_down();
        }
        if let Some(rv) = newest.map(|rv| rv.to_string()) {
            // Let the node cache catch up with the registrations, so the first heartbeat
            // reads the Nodes just written.
            tokio::select! {
                _ = self.nodes.wait_for_resource_version(&rv) => {}
                _ = tokio::time::sleep(REGISTRATION_SYNC_TIMEOUT) => {}
                _ = cancel.cancelled() => return self.shut_down(),
            }
        }
        self.reserve_existing_pod_ips();
        for name in &names {
            shared.node_queue.add(name.clone());
        }
        let mut workers = Vec::new();
        for _ in 0..shared.config.node_workers.max(1) {
            let this = self.clone();
            workers.push(tokio::spawn(async move { this.node_worker().await }));
        }
        for _ in 0..shared.config.pod_workers.max(1) {
            let this = self.clone();
            workers.push(tokio::spawn(async move { this.pod_worker().await }));
        }
        tracing::info!(
            nodes = names.len(),
            pod_workers = shared.config.pod_workers,
            "simulator running"
        );
        cancel.cancelled().await;
        self.shut_down();
        for worker in workers {
            if let Err(err) = worker.await {
                tracing::error!(%err, "simulator worker failed");
            }
        }
        tracing::info!("simulator stopped");
    }

    fn shut_down(&self) {
        self.shared.pod_queue.shut_down();
        self.shared.node_queue.shut_down();
    }

    /// Marks the IPs running pods already have as taken, so new pods never get them (after
    /// a restart the allocators start empty).
    fn reserve_existing_pod_ips(&self) {
        let shared = &self.shared;
        let mut reserved = 0usize;
        for pod in shared.pods.list_all(&Selector::everything()) {
            let Some(node) = shared.node_of(&pod) else {
                continue;
            };
            let status = pod.status.as_ref();
            let finished = matches!(
                status.and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            );
            let ip = status
                .and_then(|s| s.pod_ip.as_deref())
                .and_then(|ip| ip.parse::<Ipv4Addr>().ok());
            let (Some(ip), Some(uid), false) = (ip, pod.metadata.uid.as_deref(), finished) else {
                continue;
            };
            if let Some(slot) = shared.slots.get(node)
                && lock(slot)
                    .ipam
                    .as_mut()
                    .is_some_and(|ipam| ipam.reserve(uid, ip))
            {
                reserved += 1;
            }
        }
        if reserved > 0 {
            tracing::info!(reserved, "reserved the pod IPs of running pods");
        }
    }
}

#[cfg(test)]
mod tests;
