//! Service cluster IPs, node ports and health-check node ports: bitmaps kept in memory under one lock, snapshotted into the store, repaired from the stored Services on start, as kube-apiserver's Service REST allocation with its `RangeAllocation` and repair controllers.
//!
//! Every create, update and final removal of a Service goes through a
//! [`ServiceAllocationTxn`]: it holds the allocation lock from the first allocation until the
//! Service is stored (so two requests of this server never get the same IP or port), takes
//! the new items, and on [`commit`](ServiceAllocationTxn::commit) releases the items the
//! Service no longer holds and writes the snapshots. Dropped without a commit (validation or
//! store failure, dry run), it gives its new items back.
//!
//! Several API servers may share one store (etcd), so the stored snapshot, not this process's
//! bitmap, is the truth, as upstream's `ipallocator` on etcd: the bitmaps are refreshed from
//! the store when its snapshot changed, and new items are reserved by a compare-and-swap of
//! the snapshot *before* the Service is stored; a lost race refreshes and allocates again.
//!
//! Leaks: an item reserved in the snapshot whose Service is then not stored (the write failed,
//! a dry run, a lost update race) is given back in the store by
//! [`abort`](ServiceAllocationTxn::abort), as upstream's `txn.Revert`. When the outcome is
//! unknown (the store timed out, the request was cancelled) the item stays reserved, and the
//! repair loop ([`Registry::repair_service_allocations`], every
//! [`SERVICE_REPAIR_INTERVAL`]) frees it once it has seen it held by no Service in
//! [`REPAIRS_BEFORE_LEAK_CLEANUP`] runs in a row, as upstream's repair controllers: a single
//! sighting may be another server's reservation whose Service is about to be stored.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::MutexGuard;

use super::range_allocator::{BitmapRange, RangeError, ip_range_offset, port_range_offset};
use super::service_ip::ServiceIpRange;
use crate::error::{ApiError, Result};
use crate::object;
use crate::pointer::At;
use crate::registry::Registry;
use crate::registry::store_hooks::{Pending, StoreHooks};
use crate::resources::service as svc_resource;
use crate::storage::{self, ListOptions, Revision};
use crate::validation::{FieldError, FieldErrorKind};

/// The store key of the cluster IP snapshot (upstream's `/ranges/serviceips`).
pub const SERVICE_IPS_KEY: &str = "/registry/ranges/serviceips";
/// The store key of the node port snapshot (upstream's `/ranges/servicenodeports`).
pub const SERVICE_NODE_PORTS_KEY: &str = "/registry/ranges/servicenodeports";
/// How many times an allocation retries after another API server changed the snapshots.
/// Each lost race means another server's write landed, so retrying always makes progress
/// (upstream's `GuaranteedUpdate` retries without a bound); the bound only guards against a
/// store that keeps reporting conflicts. 16 was too few: one server creating 20 Services can
/// make the other lose 20 races in a row on a loaded machine.
const MAX_SNAPSHOT_RACES: usize = 1024;
/// How many repairs in a row must see an item held by no Service before it is freed
/// (upstream's `numRepairsBeforeLeakCleanup`).
pub const REPAIRS_BEFORE_LEAK_CLEANUP: u32 = 3;
/// How often the allocations are repaired from the stored Services (upstream's repair
/// controllers run every 3 minutes).
pub const SERVICE_REPAIR_INTERVAL: Duration = Duration::from_secs(3 * 60);
/// The first port of `--service-node-port-range` (kube-apiserver's default 30000-32767).
pub const NODE_PORT_BASE: u16 = 30000;
/// The last port of the node port range.
pub const NODE_PORT_LAST: u16 = 32767;
/// How many node ports the range has.
const NODE_PORT_RANGE_SIZE: u32 = (NODE_PORT_LAST - NODE_PORT_BASE) as u32 + 1;
/// The node port range as upstream prints it.
pub const NODE_PORT_RANGE: &str = "30000-32767";

/// The bitmap item of a node port, if in range.
fn port_item(port: i64) -> Option<u32> {
    (i64::from(NODE_PORT_BASE)..=i64::from(NODE_PORT_LAST))
        .contains(&port)
        .then(|| u32::try_from(port - i64::from(NODE_PORT_BASE)).unwrap_or(0))
}

/// The node port of a bitmap item.
fn item_port(item: u32) -> i64 {
    i64::from(NODE_PORT_BASE) + i64::from(item)
}

/// The allocators and their stored snapshots' revisions. Guarded by the registry's
/// allocation lock; never read without it.
#[derive(Debug)]
pub struct ServiceAllocators {
    /// Whether the bitmaps were loaded and repaired from the store.
    loaded: bool,
    /// Cluster IPs (item `i` is the range's network address `+ 1 + i`).
    ips: BitmapRange,
    /// Node ports and health-check node ports (item `i` is `30000 + i`).
    ports: BitmapRange,
    /// The revision of each stored snapshot (`None`: not stored yet).
    ips_rev: Option<Revision>,
    ports_rev: Option<Revision>,
    /// Items the snapshot holds but no stored Service does, each with how many more repairs
    /// may see it so before it is freed (upstream's repair `leaks` counters).
    ip_leaks: BTreeMap<u32, u32>,
    port_leaks: BTreeMap<u32, u32>,
}

impl ServiceAllocators {
    /// Empty bitmaps for cluster IPs of `range` and the node port range, not loaded yet.
    pub fn new(range: &ServiceIpRange) -> Self {
        let port_size = NODE_PORT_RANGE_SIZE;
        Self {
            loaded: false,
            ips: BitmapRange::new(range.size(), ip_range_offset(range.size())),
            ports: BitmapRange::new(port_size, port_range_offset(port_size)),
            ips_rev: None,
            ports_rev: None,
            ip_leaks: BTreeMap::new(),
            port_leaks: BTreeMap::new(),
        }
    }

    /// How many cluster IPs and node ports are allocated (tests, diagnostics).
    pub fn used(&self) -> (u32, u32) {
        (self.ips.used(), self.ports.used())
    }
}

/// What a Service holds: its cluster IP, node ports and health-check node port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Holdings {
    ips: BTreeSet<u32>,
    ports: BTreeSet<u32>,
}

/// The items `svc` (as stored) holds in the ranges.
fn holdings(range: &ServiceIpRange, svc: &Value) -> Holdings {
    let mut held = Holdings::default();
    let ips = svc.at("/spec/clusterIPs").and_then(Value::as_array);
    for ip in ips.into_iter().flatten().chain(svc.at("/spec/clusterIP")) {
        if let Some(item) = ip
            .as_str()
            .and_then(|s| s.parse().ok())
            .and_then(|ip| range.item(ip))
        {
            held.ips.insert(item);
        }
    }
    for port in svc
        .at("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(item) = port
            .get("nodePort")
            .and_then(Value::as_i64)
            .and_then(port_item)
        {
            held.ports.insert(item);
        }
    }
    if let Some(item) = svc
        .at("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .and_then(port_item)
    {
        held.ports.insert(item);
    }
    held
}

fn service_type(svc: &Value) -> &str {
    svc.at("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

/// Whether the Service gets node ports, as upstream's `needsNodePort`: NodePort, and
/// LoadBalancer unless `allocateLoadBalancerNodePorts` is false.
fn needs_node_ports(svc: &Value) -> bool {
    match service_type(svc) {
        "NodePort" => true,
        "LoadBalancer" => svc
            .at("/spec/allocateLoadBalancerNodePorts")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        _ => false,
    }
}

/// Whether the Service gets a health-check node port, as upstream's `needsHCNodePort`: a
/// LoadBalancer with `externalTrafficPolicy: Local`.
fn needs_health_check_port(svc: &Value) -> bool {
    service_type(svc) == "LoadBalancer"
        && svc
            .at("/spec/externalTrafficPolicy")
            .and_then(Value::as_str)
            == Some("Local")
}

fn invalid(svc: &Value, field: String, value: impl std::fmt::Display, detail: String) -> ApiError {
    ApiError::invalid(
        svc_resource::SERVICES.group_kind(),
        object::name(svc),
        &[FieldError {
            kind: FieldErrorKind::Invalid,
            field,
            value: value.to_string(),
            detail,
        }],
    )
}

/// The message of a node port allocation error, as upstream's port allocator.
fn port_error(err: RangeError) -> String {
    match err {
        RangeError::Allocated => "provided port is already allocated".to_owned(),
        RangeError::NotInRange => format!(
            "provided port is not in the valid range. The range of valid ports is {NODE_PORT_RANGE}"
        ),
        RangeError::Full => "range is full".to_owned(),
    }
}

/// How far [`Registry::try_persist_locked`] got: the two snapshots are separate keys, so a
/// race may be lost on the second after the first was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Persisted {
    /// Both snapshots were written.
    Both,
    /// The cluster IP snapshot was written; the node port one had changed.
    IpsOnly,
    /// Nothing was written: the cluster IP snapshot had changed.
    Neither,
}

/// An allocation in progress, holding the allocation lock. See the module doc.
pub struct ServiceAllocationTxn<'a> {
    guard: MutexGuard<'a, ServiceAllocators>,
    /// The cluster IP range (`--service-cluster-ip-range`).
    range: &'a ServiceIpRange,
    /// Items taken by this transaction (given back unless committed).
    taken: Holdings,
    /// Items the Service gives up once the write is done.
    to_release: Holdings,
    /// `taken` is stored in the snapshots (reserved), not only in this server's bitmaps.
    reserved: bool,
    /// Committed or aborted: nothing left to do on drop.
    committed: bool,
}

impl std::fmt::Debug for ServiceAllocationTxn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAllocationTxn")
            .field("taken", &self.taken)
            .field("to_release", &self.to_release)
            .field("reserved", &self.reserved)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl crate::registry::store_hooks::PendingWrite for ServiceAllocationTxn<'_> {
    async fn commit(self: Box<Self>, registry: &Registry) {
        ServiceAllocationTxn::commit(*self, registry).await;
    }

    async fn abort(self: Box<Self>, registry: &Registry) {
        ServiceAllocationTxn::abort(*self, registry).await;
    }
}

impl ServiceAllocationTxn<'_> {
    /// The Service was stored: frees what it gave up and writes the snapshots.
    pub async fn commit(mut self, registry: &Registry) {
        self.committed = true;
        // The items taken were stored when reserved; only the releases remain to be written.
        if self.to_release == Holdings::default() {
            return;
        }
        let releases = std::mem::take(&mut self.to_release);
        if let Err(err) = registry
            .persist_allocators_locked(&mut self.guard, &releases)
            .await
        {
            // The Services are the truth: the next start repairs the snapshot from them.
            tracing::error!(%err, "writing the service allocation snapshots");
        }
    }

    /// The Service was certainly not stored (the store refused the write, a dry run, a lost
    /// update race): gives back what this transaction took, in the snapshots too, as
    /// upstream's `txn.Revert`. Dropping the transaction instead leaves reserved items to the
    /// repair loop, which is right only when the write's outcome is unknown.
    pub async fn abort(mut self, registry: &Registry) {
        self.committed = true;
        let taken = std::mem::take(&mut self.taken);
        if !self.reserved {
            for item in &taken.ips {
                self.guard.ips.release(*item);
            }
            for item in &taken.ports {
                self.guard.ports.release(*item);
            }
            return;
        }
        if let Err(err) = registry
            .persist_allocators_locked(&mut self.guard, &taken)
            .await
        {
            // The repair loop frees them later.
            tracing::error!(%err, "giving back a failed Service write's cluster IP and ports");
        }
    }

    /// Gives back every item taken so far (before allocating again after a lost race).
    fn undo_taken(&mut self) {
        for item in std::mem::take(&mut self.taken.ips) {
            self.guard.ips.release(item);
        }
        for item in std::mem::take(&mut self.taken.ports) {
            self.guard.ports.release(item);
        }
    }

    fn take_ip(&mut self, item: u32) -> Result<(), RangeError> {
        self.guard.ips.allocate(item)?;
        self.taken.ips.insert(item);
        Ok(())
    }

    fn take_next_ip(&mut self) -> Result<u32, RangeError> {
        // The first address is the kubernetes Service's, never handed out dynamically.
        let reserved = self
            .range
            .item(self.range.kubernetes_ip())
            .filter(|i| !self.guard.ips.has(*i));
        if let Some(item) = reserved {
            let _ = self.guard.ips.allocate(item);
        }
        let got = self.guard.ips.allocate_next(&mut rand::rng());
        if let Some(item) = reserved {
            self.guard.ips.release(item);
        }
        let item = got?;
        self.taken.ips.insert(item);
        Ok(item)
    }

    fn take_port(&mut self, item: u32) -> Result<(), RangeError> {
        self.guard.ports.allocate(item)?;
        self.taken.ports.insert(item);
        Ok(())
    }

    fn take_next_port(&mut self) -> Result<u32, RangeError> {
        let item = self.guard.ports.allocate_next(&mut rand::rng())?;
        self.taken.ports.insert(item);
        Ok(item)
    }
}

impl Drop for ServiceAllocationTxn<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        if self.reserved {
            // The write's outcome is unknown (cancelled, or the store could not say): the
            // Service may hold these, so they stay taken until the repair loop knows better.
            tracing::debug!(taken = ?self.taken, "service allocations left to the repair loop");
            return;
        }
        for item in &self.taken.ips {
            self.guard.ips.release(*item);
        }
        for item in &self.taken.ports {
            self.guard.ports.release(*item);
        }
    }
}

impl Registry {
    /// Takes the allocation lock, loading and repairing the bitmaps on first use.
    async fn lock_allocators(&self) -> Result<MutexGuard<'_, ServiceAllocators>> {
        let mut guard = self.service_ips.lock().await;
        if guard.loaded {
            self.refresh_allocators_locked(&mut guard).await?;
        } else {
            self.repair_allocators_locked(&mut guard).await?;
        }
        Ok(guard)
    }

    /// Adopts the stored snapshots when another server wrote them since this one did.
    async fn refresh_allocators_locked(&self, alloc: &mut ServiceAllocators) -> Result<()> {
        if let Some((ips, rev)) = self.read_snapshot(SERVICE_IPS_KEY).await?
            && alloc.ips_rev != Some(rev)
        {
            alloc.ips = ips;
            alloc.ips_rev = Some(rev);
        }
        if let Some((ports, rev)) = self.read_snapshot(SERVICE_NODE_PORTS_KEY).await?
            && alloc.ports_rev != Some(rev)
        {
            alloc.ports = ports;
            alloc.ports_rev = Some(rev);
        }
        Ok(())
    }

    /// Stores the items `txn` took, by compare-and-swap on the snapshots; `false` when another
    /// server wrote a snapshot first (the caller refreshes and allocates again).
    async fn reserve_locked(&self, txn: &mut ServiceAllocationTxn<'_>) -> Result<bool> {
        if txn.taken == Holdings::default() {
            return Ok(true);
        }
        match self.try_persist_locked(&mut txn.guard).await? {
            Persisted::Both => {
                txn.reserved = true;
                Ok(true)
            }
            Persisted::Neither => Ok(false),
            Persisted::IpsOnly => {
                // The cluster IPs are in the stored snapshot but the node ports lost a race:
                // give the IPs back there, or they would leak when the caller allocates again.
                let ips = Holdings {
                    ips: txn.taken.ips.clone(),
                    ports: BTreeSet::new(),
                };
                txn.undo_taken();
                self.refresh_allocators_locked(&mut txn.guard).await?;
                self.persist_allocators_locked(&mut txn.guard, &ips).await?;
                Ok(false)
            }
        }
    }

    /// Loads and repairs the allocators now (the server does it before serving, as
    /// kube-apiserver runs its repair controllers before allocating).
    pub async fn repair_service_allocations(&self) -> Result<()> {
        let services = {
            let mut guard = self.service_ips.lock().await;
            self.repair_allocators_locked(&mut guard).await?
        };
        self.repair_service_ip_addresses(&services).await
    }

    /// Rebuilds the bitmaps from the stored Services, as upstream's IP and node port repair
    /// controllers: items held by Services are marked (a second holder is an error, logged),
    /// items only the snapshot holds are leaks, kept until [`REPAIRS_BEFORE_LEAK_CLEANUP`]
    /// repairs in a row have seen them (another server may be about to store their Service)
    /// and then freed; the snapshots are rewritten. Returns the stored Services it read.
    async fn repair_allocators_locked(&self, alloc: &mut ServiceAllocators) -> Result<Vec<Value>> {
        let stored_ips = self.read_snapshot(SERVICE_IPS_KEY).await?;
        let stored_ports = self.read_snapshot(SERVICE_NODE_PORTS_KEY).await?;
        let def = &svc_resource::SERVICES;
        let listed = self
            .storage()
            .list(ListOptions {
                prefix: def.storage_prefix(None),
                ..ListOptions::default()
            })
            .await
            .map_err(|e| ApiError::from_storage(e, def.group_resource(), ""))?;
        let range = self.service_ip_range();
        let fresh = ServiceAllocators::new(range);
        let (mut ips, mut ports) = (fresh.ips, fresh.ports);
        let mut services = Vec::with_capacity(listed.kvs.len());
        for kv in &listed.kvs {
            let Ok(svc) = serde_json::from_slice::<Value>(&kv.value) else {
                continue;
            };
            let held = holdings(range, &svc);
            if let Some(ip) = svc
                .at("/spec/clusterIP")
                .and_then(Value::as_str)
                .filter(|ip| !ip.is_empty() && *ip != "None")
                && held.ips.is_empty()
            {
                // The range changed since (upstream's repair says the same).
                tracing::warn!(service = %kv.key, ip, range = %range, "Cluster IP is not within the configured Service CIDR; please recreate service");
            }
            services.push(svc);
            for item in held.ips {
                if ips.allocate(item).is_err() {
                    tracing::error!(ip = %range.ip(item), service = %kv.key, "Cluster IP allocated to more than one Service");
                }
            }
            for item in held.ports {
                if ports.allocate(item).is_err() {
                    tracing::error!(port = item_port(item), service = %kv.key, "Node port allocated to more than one Service");
                }
            }
        }
        let stored = stored_ips.as_ref().map(|(r, _)| r);
        settle_leaks("serviceips", stored, &mut ips, &mut alloc.ip_leaks);
        let stored = stored_ports.as_ref().map(|(r, _)| r);
        settle_leaks(
            "servicenodeports",
            stored,
            &mut ports,
            &mut alloc.port_leaks,
        );
        alloc.ips = ips;
        alloc.ports = ports;
        alloc.ips_rev = stored_ips.map(|(_, rev)| rev);
        alloc.ports_rev = stored_ports.map(|(_, rev)| rev);
        alloc.loaded = true;
        self.persist_allocators_locked(alloc, &Holdings::default())
            .await?;
        Ok(services)
    }

    /// Reads a stored snapshot and its revision (`None` when absent or unreadable).
    async fn read_snapshot(&self, key: &str) -> Result<Option<(BitmapRange, Revision)>> {
        let kv = self
            .storage()
            .get(key)
            .await
            .map_err(|e| ApiError::internal(format!("reading {key}: {e}")))?;
        let Some(kv) = kv else {
            return Ok(None);
        };
        // The bitmap sizes, without building bitmaps to read them from.
        let (size, offset, configured) = if key == SERVICE_IPS_KEY {
            let size = self.service_ip_range().size();
            (
                size,
                ip_range_offset(size),
                self.service_ip_range().as_str(),
            )
        } else {
            let size = NODE_PORT_RANGE_SIZE;
            (size, port_range_offset(size), NODE_PORT_RANGE)
        };
        // A snapshot of another range (the flag changed since) says nothing about this one:
        // the repair rebuilds it from the stored Services.
        let range = serde_json::from_slice::<Value>(&kv.value)
            .ok()
            .filter(|v| v.get("range").and_then(Value::as_str) == Some(configured))
            .and_then(|v| v.get("data").and_then(Value::as_str).map(str::to_owned))
            .and_then(|data| BitmapRange::restore(size, offset, &data));
        Ok(Some((
            range.unwrap_or_else(|| BitmapRange::new(size, offset)),
            kv.mod_revision,
        )))
    }

    /// Writes both snapshots as `RangeAllocation` objects, by compare-and-swap on the
    /// revisions last seen; when another server wrote in between, adopts its snapshots,
    /// applies `releases` again and retries (bounded).
    async fn persist_allocators_locked(
        &self,
        alloc: &mut ServiceAllocators,
        releases: &Holdings,
    ) -> Result<()> {
        for _ in 0..MAX_SNAPSHOT_RACES {
            for item in &releases.ips {
                alloc.ips.release(*item);
            }
            for item in &releases.ports {
                alloc.ports.release(*item);
            }
            if self.try_persist_locked(alloc).await? == Persisted::Both {
                return Ok(());
            }
            self.refresh_allocators_locked(alloc).await?;
        }
        Err(ApiError::internal(
            "writing the service allocation snapshots: conflicting writers",
        ))
    }

    /// One compare-and-swap of each snapshot, the cluster IPs' first; stops at the first one
    /// written by someone else since this server last read or wrote it.
    async fn try_persist_locked(&self, alloc: &mut ServiceAllocators) -> Result<Persisted> {
        let ips = json!({
            "apiVersion": "v1",
            "kind": "RangeAllocation",
            "metadata": {"name": ""},
            "range": self.service_ip_range().as_str(),
            "data": alloc.ips.snapshot(),
        });
        let ports = json!({
            "apiVersion": "v1",
            "kind": "RangeAllocation",
            "metadata": {"name": ""},
            "range": NODE_PORT_RANGE,
            "data": alloc.ports.snapshot(),
        });
        match self
            .write_snapshot(SERVICE_IPS_KEY, alloc.ips_rev, &ips)
            .await?
        {
            Some(rev) => alloc.ips_rev = Some(rev),
            None => return Ok(Persisted::Neither),
        }
        match self
            .write_snapshot(SERVICE_NODE_PORTS_KEY, alloc.ports_rev, &ports)
            .await?
        {
            Some(rev) => alloc.ports_rev = Some(rev),
            None => return Ok(Persisted::IpsOnly),
        }
        Ok(Persisted::Both)
    }

    /// Writes one snapshot if it is still at `rev` (`None` rev: absent); `None` on a race.
    async fn write_snapshot(
        &self,
        key: &str,
        rev: Option<Revision>,
        value: &Value,
    ) -> Result<Option<Revision>> {
        let bytes = Bytes::from(serde_json::to_vec(value).map_err(ApiError::internal)?);
        let result = match rev {
            Some(r) => self.storage().update(key, r, bytes).await,
            None => self.storage().create(key, bytes).await,
        };
        match result {
            Ok(r) => Ok(Some(r)),
            Err(
                storage::Error::Conflict { .. }
                | storage::Error::AlreadyExists { .. }
                | storage::Error::NotFound { .. },
            ) => Ok(None),
            Err(e) => Err(ApiError::internal(format!("writing {key}: {e}"))),
        }
    }

    /// Allocates what a new Service needs, as upstream's Service REST `Create`
    /// (`allocClusterIPs`, `initNodePorts`, `allocHealthCheckNodePort`): the requested cluster
    /// IP (422 when out of range or taken) or a free one, requested or free node ports for
    /// NodePort and LoadBalancer Services, a health-check node port for LoadBalancers with
    /// `externalTrafficPolicy: Local`.
    pub(crate) async fn begin_service_create(
        &self,
        svc: &mut Value,
    ) -> Result<ServiceAllocationTxn<'_>> {
        let guard = self.lock_allocators().await?;
        let mut txn = ServiceAllocationTxn {
            guard,
            range: self.service_ip_range(),
            taken: Holdings::default(),
            to_release: Holdings::default(),
            reserved: false,
            committed: false,
        };
        let original = svc.clone();
        for _ in 0..MAX_SNAPSHOT_RACES {
            if service_type(svc) != "ExternalName" {
                allocate_cluster_ip(&mut txn, svc)?;
            }
            if needs_node_ports(svc) {
                allocate_node_ports(&mut txn, svc, &BTreeSet::new())?;
            }
            if needs_health_check_port(svc) {
                allocate_health_check_port(&mut txn, svc, None)?;
            }
            if self.reserve_locked(&mut txn).await? {
                return Ok(txn);
            }
            // Another API server allocated first: see what it took and try again.
            txn.undo_taken();
            self.refresh_allocators_locked(&mut txn.guard).await?;
            *svc = original.clone();
        }
        Err(ApiError::internal(
            "allocating the Service's cluster IP and ports: conflicting writers",
        ))
    }

    /// Allocates and releases what a Service update changes, as upstream's Service REST
    /// `Update` (`patchAllocatedValues`, `updateNodePorts`, `updateHealthCheckNodePort`):
    /// node ports omitted from the new spec keep their old values (by port name), new ones are
    /// allocated, those no longer used are released once the update is stored; a Service that
    /// leaves NodePort/LoadBalancer gives its node ports up, one becoming ExternalName its
    /// cluster IP; a final removal (deleting, no finalizers left) gives everything up.
    pub(crate) async fn begin_service_update(
        &self,
        new: &mut Value,
        old: &Value,
    ) -> Result<ServiceAllocationTxn<'_>> {
        let guard = self.lock_allocators().await?;
        let mut txn = ServiceAllocationTxn {
            guard,
            range: self.service_ip_range(),
            taken: Holdings::default(),
            to_release: Holdings::default(),
            reserved: false,
            committed: false,
        };
        let original = new.clone();
        for _ in 0..MAX_SNAPSHOT_RACES {
            update_allocations(&mut txn, new, old)?;
            if self.reserve_locked(&mut txn).await? {
                return Ok(txn);
            }
            // Another API server allocated first: see what it took and try again.
            txn.undo_taken();
            txn.to_release = Holdings::default();
            self.refresh_allocators_locked(&mut txn.guard).await?;
            *new = original.clone();
        }
        Err(ApiError::internal(
            "allocating the Service's cluster IP and ports: conflicting writers",
        ))
    }

    /// Gives back what a removed Service held (a delete's final removal).
    pub(crate) async fn release_service_allocations(&self, svc: &Value) {
        let mut guard = match self.lock_allocators().await {
            Ok(guard) => guard,
            Err(err) => {
                tracing::error!(%err, "loading the service allocations to release a deleted Service's");
                return;
            }
        };
        let held = holdings(self.service_ip_range(), svc);
        if held != Holdings::default()
            && let Err(err) = self.persist_allocators_locked(&mut guard, &held).await
        {
            tracing::error!(%err, "writing the service allocation snapshots");
        }
    }

    /// How many cluster IPs and node ports are allocated (tests, diagnostics).
    pub async fn service_allocations_used(&self) -> Result<(u32, u32)> {
        Ok(self.lock_allocators().await?.used())
    }
}

/// Compares a stored snapshot with `actual`, the items the stored Services hold, as
/// upstream's repair loops: an item only the snapshot holds is counted in `leaks` and kept in
/// `actual` until [`REPAIRS_BEFORE_LEAK_CLEANUP`] repairs have seen it, then left out (freed);
/// an item held by a Service is no leak.
fn settle_leaks(
    range: &str,
    snapshot: Option<&BitmapRange>,
    actual: &mut BitmapRange,
    leaks: &mut BTreeMap<u32, u32>,
) {
    let Some(snapshot) = snapshot else {
        leaks.clear();
        return;
    };
    let repaired = actual.items().filter(|i| !snapshot.has(*i)).count();
    let suspects: Vec<u32> = snapshot.items().filter(|i| !actual.has(*i)).collect();
    let mut still = BTreeMap::new();
    let (mut flagged, mut freed) = (0, 0);
    for item in suspects {
        // Repairs left before the item is freed, this one included.
        let left = leaks
            .get(&item)
            .copied()
            .unwrap_or(REPAIRS_BEFORE_LEAK_CLEANUP - 1);
        if left > 0 {
            // Pretend it is in use until the count runs out.
            let _ = actual.allocate(item);
            still.insert(item, left - 1);
            flagged += 1;
        } else {
            freed += 1;
        }
    }
    *leaks = still;
    if repaired + flagged + freed > 0 {
        tracing::warn!(
            range,
            repaired,
            possibly_leaked = flagged,
            freed,
            "repaired the service allocations from the stored Services"
        );
    }
}

/// One attempt at [`Registry::begin_service_update`]'s allocations and releases.
fn update_allocations(
    txn: &mut ServiceAllocationTxn<'_>,
    new: &mut Value,
    old: &Value,
) -> Result<()> {
    let old_held = holdings(txn.range, old);
    let removed = new
        .at("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
        && object::finalizers(new).is_empty();
    if removed {
        txn.to_release = old_held;
        return Ok(());
    }
    // Cluster IP: allocated when gaining one (from ExternalName), released when losing it.
    let had_ip = !old_held.ips.is_empty();
    let wants_ip = service_type(new) != "ExternalName";
    if wants_ip && !had_ip {
        allocate_cluster_ip(txn, new)?;
    } else if !wants_ip {
        txn.to_release.ips.extend(old_held.ips.iter().copied());
    }
    // Node ports.
    let old_ports = node_port_items(old);
    if needs_node_ports(new) {
        if needs_node_ports(old) {
            patch_omitted_node_ports(new, old);
        }
        allocate_node_ports(txn, new, &old_ports)?;
    } else {
        clear_node_ports(new, old);
    }
    let new_ports = node_port_items(new);
    txn.to_release
        .ports
        .extend(old_ports.difference(&new_ports).copied());
    // Health-check node port.
    let old_hc = old
        .at("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .and_then(port_item);
    if needs_health_check_port(new) {
        let requested = new
            .at("/spec/healthCheckNodePort")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if requested == 0
            && needs_health_check_port(old)
            && let Some(old_item) = old_hc
        {
            new["spec"]["healthCheckNodePort"] = json!(item_port(old_item));
        }
        allocate_health_check_port(txn, new, old_hc)?;
    } else if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut)
        && spec
            .get("healthCheckNodePort")
            .and_then(Value::as_i64)
            .and_then(port_item)
            == old_hc
    {
        spec.remove("healthCheckNodePort");
    }
    let new_hc = new
        .at("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .and_then(port_item);
    if let Some(item) = old_hc
        && new_hc != Some(item)
        && !new_ports.contains(&item)
    {
        txn.to_release.ports.insert(item);
    }
    Ok(())
}

/// The node port items of `svc`'s ports (not its health-check port).
fn node_port_items(svc: &Value) -> BTreeSet<u32> {
    svc.at("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            p.get("nodePort")
                .and_then(Value::as_i64)
                .and_then(port_item)
        })
        .collect()
}

/// Defaults a headless Service's `ipFamilyPolicy` and `ipFamilies` as upstream's
/// `initIPFamilyFields` on this single-stack IPv4 cluster: with a selector SingleStack and
/// IPv4; without one RequireDualStack and both families (its Endpoints come from its owner,
/// in any family). Values the user set are kept. The EndpointSlice controller reads
/// `ipFamilies` to choose the slices' address types.
fn default_headless_ip_families(svc: &mut Value) {
    let selectorless = svc
        .at("/spec/selector")
        .and_then(Value::as_object)
        .is_none_or(|s| s.is_empty());
    let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let unset = |v: Option<&Value>| v.is_none_or(|v| v.is_null() || v == "" || v == &json!([]));
    if unset(spec.get("ipFamilyPolicy")) {
        let policy = if selectorless {
            "RequireDualStack"
        } else {
            "SingleStack"
        };
        spec.insert("ipFamilyPolicy".to_owned(), json!(policy));
    }
    if unset(spec.get("ipFamilies")) {
        spec.insert("ipFamilies".to_owned(), json!(["IPv4"]));
    }
    let single = spec.get("ipFamilyPolicy").and_then(Value::as_str) == Some("SingleStack");
    if selectorless
        && !single
        && let Some(families) = spec.get_mut("ipFamilies").and_then(Value::as_array_mut)
        && families.len() == 1
    {
        let other = if families[0] == "IPv6" {
            "IPv4"
        } else {
            "IPv6"
        };
        families.push(json!(other));
    }
}

/// Allocates the requested (`clusterIP`, else `clusterIPs[0]`) or a free cluster IP and sets
/// `clusterIP`, `clusterIPs`, `ipFamilies` and `ipFamilyPolicy`; headless (`None`) Services
/// get no IP, only their families ([`default_headless_ip_families`]).
fn allocate_cluster_ip(txn: &mut ServiceAllocationTxn<'_>, svc: &mut Value) -> Result<()> {
    let range = txn.range;
    let requested = svc
        .at("/spec/clusterIP")
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty())
        .or_else(|| {
            svc.at("/spec/clusterIPs/0")
                .and_then(Value::as_str)
                .filter(|ip| !ip.is_empty())
        })
        .map(str::to_owned);
    if requested.as_deref() == Some("None") {
        default_headless_ip_families(svc);
        return Ok(());
    }
    let item = match &requested {
        Some(ip) => {
            let is_kubernetes =
                object::namespace(svc) == "default" && object::name(svc) == "kubernetes";
            let checked = ip
                .parse::<Ipv4Addr>()
                .ok()
                .and_then(|parsed| range.item(parsed).map(|item| (parsed, item)));
            let not_in_range = || super::service_ip::AllocError::NotInRange {
                ip: ip.clone(),
                range: range.to_string(),
            };
            let result = match checked {
                None => Err(not_in_range()),
                Some((parsed, _)) if parsed == range.kubernetes_ip() && !is_kubernetes => {
                    Err(super::service_ip::AllocError::Allocated)
                }
                Some((_, item)) => txn.take_ip(item).map(|()| item).map_err(|e| match e {
                    RangeError::Allocated => super::service_ip::AllocError::Allocated,
                    RangeError::Full => super::service_ip::AllocError::Full,
                    RangeError::NotInRange => not_in_range(),
                }),
            };
            result.map_err(|e| {
                // The value as upstream prints `spec.clusterIPs` (`%#v` of a Go slice).
                invalid(
                    svc,
                    "spec.clusterIPs".to_owned(),
                    format!("[]string{{{ip:?}}}"),
                    format!("failed to allocate IP {ip}: {e}"),
                )
            })?
        }
        None => txn
            .take_next_ip()
            .map_err(|e| ApiError::internal(format!("failed to allocate a serviceIP: {e}")))?,
    };
    let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let ip = range.ip(item).to_string();
    spec.insert("clusterIP".to_owned(), json!(ip));
    spec.insert("clusterIPs".to_owned(), json!([ip]));
    spec.insert("ipFamilies".to_owned(), json!(["IPv4"]));
    spec.insert("ipFamilyPolicy".to_owned(), json!("SingleStack"));
    Ok(())
}

/// Node ports for every port, as upstream's `initNodePorts`/`updateNodePorts`: a requested
/// port is allocated (unless the Service already held it), an omitted one gets a free port;
/// ports sharing a port number (TCP and UDP) share a node port.
fn allocate_node_ports(
    txn: &mut ServiceAllocationTxn<'_>,
    svc: &mut Value,
    already_held: &BTreeSet<u32>,
) -> Result<()> {
    let snapshot = svc.clone();
    let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    let mut by_port: BTreeMap<i64, i64> = BTreeMap::new();
    let mut claimed: BTreeSet<u32> = BTreeSet::new();
    for i in 0..ports.len() {
        let number = ports[i].get("port").and_then(Value::as_i64).unwrap_or(0);
        let requested = ports[i]
            .get("nodePort")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let shared = by_port.get(&number).copied();
        let node_port = match (requested, shared) {
            (0, Some(np)) => np,
            (0, None) => {
                // A later port with the same number may name the node port to use.
                let later = ports[i + 1..]
                    .iter()
                    .filter(|p| p.get("port").and_then(Value::as_i64) == Some(number))
                    .find_map(|p| {
                        p.get("nodePort")
                            .and_then(Value::as_i64)
                            .filter(|n| *n != 0)
                    });
                match later {
                    Some(np) => np,
                    None => {
                        let item = txn.take_next_port().map_err(|e| {
                            ApiError::internal(format!("failed to allocate a nodePort: {e}"))
                        })?;
                        claimed.insert(item);
                        item_port(item)
                    }
                }
            }
            (np, _) => np,
        };
        if let Some(item) = port_item(node_port)
            && (claimed.contains(&item) || already_held.contains(&item))
        {
            // Held already, by this Service.
        } else {
            let item = port_item(node_port)
                .ok_or(RangeError::NotInRange)
                .and_then(|item| txn.take_port(item).map(|()| item));
            match item {
                Ok(item) => {
                    claimed.insert(item);
                }
                Err(e) => {
                    return Err(invalid(
                        &snapshot,
                        format!("spec.ports[{i}].nodePort"),
                        node_port,
                        port_error(e),
                    ));
                }
            }
        }
        ports[i]["nodePort"] = json!(node_port);
        by_port.entry(number).or_insert(node_port);
    }
    Ok(())
}

/// Fills node ports the new spec omits with the old ones (matched by port name) when no
/// other port took them, as upstream's `patchAllocatedValues`.
fn patch_omitted_node_ports(new: &mut Value, old: &Value) {
    let old_by_name: BTreeMap<String, i64> = old
        .at("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let name = p
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            p.get("nodePort").and_then(Value::as_i64).map(|n| (name, n))
        })
        .collect();
    let used: BTreeSet<i64> = node_port_items(old)
        .intersection(&node_port_items(new))
        .map(|i| item_port(*i))
        .collect();
    for port in new
        .pointer_mut("/spec/ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
            continue;
        }
        let name = port
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if let Some(old_value) = old_by_name.get(&name)
            && !used.contains(old_value)
        {
            port["nodePort"] = json!(old_value);
        }
    }
}

/// Drops node ports from a Service that no longer has any (its old values only: a new value
/// is the user's mistake, left for validation), as upstream's `dropTypeDependentFields`.
fn clear_node_ports(new: &mut Value, old: &Value) {
    let old_values = node_port_items(old);
    for port in new
        .pointer_mut("/spec/ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let value = port.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        if (value == 0 || port_item(value).is_some_and(|i| old_values.contains(&i)))
            && let Some(map) = port.as_object_mut()
        {
            map.remove("nodePort");
        }
    }
}

/// The health-check node port: the requested one (unless already held as `held`), or a free
/// one.
fn allocate_health_check_port(
    txn: &mut ServiceAllocationTxn<'_>,
    svc: &mut Value,
    held: Option<u32>,
) -> Result<()> {
    let requested = svc
        .at("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let item = if requested == 0 {
        txn.take_next_port().map_err(|e| {
            ApiError::internal(format!("failed to allocate a health check node port: {e}"))
        })?
    } else {
        match port_item(requested) {
            Some(item) if Some(item) == held => item,
            Some(item) => txn.take_port(item).map(|()| item).map_err(|e| {
                invalid(
                    svc,
                    "spec.healthCheckNodePort".to_owned(),
                    requested,
                    port_error(e),
                )
            })?,
            None => {
                return Err(invalid(
                    svc,
                    "spec.healthCheckNodePort".to_owned(),
                    requested,
                    port_error(RangeError::NotInRange),
                ));
            }
        }
    };
    svc["spec"]["healthCheckNodePort"] = json!(item_port(item));
    Ok(())
}

#[cfg(test)]
#[path = "service_alloc_tests.rs"]
mod tests;

/// The Service storage's hooks (upstream's Service REST around its generic store): a create or
/// an update allocates cluster IPs and node ports under the allocation lock, held until the
/// write is stored (this file); every stored change brings the
/// Service's IPAddress objects along ([`crate::registry::service_ipaddress`]); a removal gives
/// its allocations back.
#[derive(Debug, Default)]
pub struct ServiceHooks;

#[async_trait::async_trait]
impl StoreHooks for ServiceHooks {
    async fn begin_create<'r>(
        &self,
        registry: &'r Registry,
        obj: &mut Value,
    ) -> Result<Option<Pending<'r>>> {
        let txn = registry.begin_service_create(obj).await?;
        Ok(Some(Box::new(txn)))
    }

    async fn after_create(&self, registry: &Registry, obj: &Value) {
        registry.sync_service_ip_addresses(None, Some(obj)).await;
    }

    async fn begin_update<'r>(
        &self,
        registry: &'r Registry,
        new: &mut Value,
        old: &Value,
    ) -> Result<Option<Pending<'r>>> {
        let txn = registry.begin_service_update(new, old).await?;
        Ok(Some(Box::new(txn)))
    }

    async fn after_update(
        &self,
        registry: &Registry,
        old: &Value,
        new: Option<&Value>,
        began: bool,
    ) {
        // A final removal through `/status` (no allocation began) gives back what the Service
        // held, as the main resource's does inside its allocation.
        if new.is_none() && !began {
            registry.release_service_allocations(old).await;
        }
        registry.sync_service_ip_addresses(Some(old), new).await;
    }

    async fn after_delete(&self, registry: &Registry, obj: &Value) {
        registry.release_service_allocations(obj).await;
        registry.sync_service_ip_addresses(Some(obj), None).await;
    }
}
