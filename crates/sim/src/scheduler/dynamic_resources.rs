//! The scheduler's Dynamic Resource Allocation, as kube-scheduler's `DynamicResources` plugin
//! with the structured-parameters allocator.
//!
//! - **PreFilter** ([`DynamicResources::pre_filter`]): every ResourceClaim the pod names in
//!   `spec.resourceClaims` (directly by `resourceClaimName`, or through the name the
//!   resourceclaim controller recorded in `status.resourceClaimStatuses` for a template entry)
//!   must exist, not be being deleted, be owned by the pod when made from a template, and not
//!   be in use by others beyond `reservedFor`'s limit; a claim to allocate must not be in the
//!   middle of another pod's allocation and its requests' DeviceClasses must exist. Otherwise
//!   the pod is unschedulable everywhere with upstream's message.
//! - **Filter** ([`DynamicResources::filter`]): on a node, an allocated claim's
//!   `allocation.nodeSelector` must admit the node (`resourceclaim not available on the node`),
//!   and every unallocated claim must be allocatable from the devices the node's
//!   ResourceSlices publish that no claim holds yet (`cannot allocate all claims`).
//! - **Reserve** ([`DynamicResources::reserve`]): the chosen allocations are held in flight, so
//!   concurrent decisions neither reuse the devices nor allocate the claim again.
//! - **PreBind** ([`DynamicResources::pre_bind`]): each claim to allocate gets the finalizer
//!   `resource.kubernetes.io/delete-protection`, then through `resourceclaims/status` its
//!   `allocation` (`devices.results` `{request, driver, pool, device}` and, for node-local
//!   devices, a `nodeSelector` on `metadata.name`) and the pod in `reservedFor`; an allocated
//!   claim not yet reserved for the pod gets the pod added to `reservedFor`. Written claims are
//!   assumed until the informer shows them.
//!
//! The allocator handles `exactly` requests (allocationMode `ExactCount` with `count`, default
//! 1, and `All`) and `firstAvailable` sub-requests (the first that fits wins; results are named
//! `<request>/<subrequest>`), DeviceClass and request CEL selectors in the forms of
//! [`crate::dra::cel`], and slices published for a node (`nodeName`) or all nodes
//! (`allNodes`). A device with a `NoSchedule` or `NoExecute` taint that the request's
//! `tolerations` do not tolerate is not allocated (the allocator's `taintPreventsAllocation`;
//! taints from DeviceTaintRules are not applied). Not done: constraints (`matchAttribute`),
//! admin access, partitionable devices and counters, consumable capacity, config copied into the allocation,
//! incomplete-pool detection, and scoring.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationResult, DeviceClass, DeviceRequestAllocationResult,
    DeviceSelector, DeviceToleration, ResourceClaim, ResourceClaimConsumerReference,
    ResourceClaimStatus, ResourceSlice,
};
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::informer::Indexer;
use kcm_machinery::scheduling::device_taints::taint_prevents_allocation;
use kcm_machinery::scheduling::node_affinity::{NODE_NAME_FIELD, ParsedNodeSelector};

use crate::dra::cel;
use crate::dra::client::DraClient;
use kcm_machinery::dra::{
    DELETE_PROTECTION_FINALIZER, can_be_reserved, claim_name, is_allocated, is_for_pod,
    is_reserved_for_pod, pod_claims,
};

/// A node whose devices cannot satisfy the pod's claims (upstream's Filter status).
pub const ERR_REASON_CANNOT_ALLOCATE: &str = "cannot allocate all claims";
/// A node an allocated claim's node selector excludes.
pub const ERR_REASON_NOT_AVAILABLE: &str = "resourceclaim not available on the node";
/// The PreFilter message for a claim allocated and reserved for as many consumers as allowed.
pub const CLAIM_IN_USE: &str = "resourceclaim in use";
/// `allocationMode` taking exactly `count` devices (the default).
pub const ALLOCATION_MODE_EXACT_COUNT: &str = "ExactCount";
/// `allocationMode` taking every matching device.
pub const ALLOCATION_MODE_ALL: &str = "All";

/// Whether the pod names any ResourceClaim, so the plugin has work to do.
pub fn uses_resource_claims(pod: &Pod) -> bool {
    !pod_claims(pod).is_empty()
}

/// A device: driver, pool, name.
type DeviceId = (String, String, String);

/// What PreFilter found: the pod's claims and a snapshot of the devices to allocate from.
#[derive(Clone, Debug, Default)]
pub struct PodClaims {
    /// The pod's claims in `spec.resourceClaims` order (entries without a claim skipped).
    pub claims: Vec<Arc<ResourceClaim>>,
    /// Devices held by allocated claims or allocations in flight.
    allocated: HashSet<DeviceId>,
    /// Every ResourceSlice, sorted by name.
    slices: Vec<Arc<ResourceSlice>>,
    /// DeviceClasses by name.
    classes: HashMap<String, Arc<DeviceClass>>,
}

/// The outcome of PreFilter.
#[derive(Clone, Debug)]
pub enum PreFilter {
    /// The pod names no claim (or none it needs).
    NoClaims,
    /// No node can fit the pod until claims, classes or the pod change; the message says why.
    Unresolvable(String),
    /// Filter each node against these.
    Claims(PodClaims),
}

/// What the pod's claims need on the chosen node: each claim and, when it is to be allocated,
/// the allocation found there.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeClaims {
    /// Each claim and its new allocation (`None`: allocated already).
    pub claims: Vec<(Arc<ResourceClaim>, Option<AllocationResult>)>,
}

/// The plugin: the caches it reads, the allocations in flight and the claims it wrote.
pub struct DynamicResources {
    claims: Indexer<ResourceClaim>,
    slices: Indexer<ResourceSlice>,
    classes: Indexer<DeviceClass>,
    client: Arc<dyn DraClient>,
    /// Claim uid → the allocation chosen for it, between Reserve and the end of PreBind.
    /// Never held across an `.await`.
    in_flight: Mutex<HashMap<String, AllocationResult>>,
    /// `namespace/name` → the claim as this scheduler last wrote it, until the informer
    /// shows that version or a later one (upstream's assume cache). Never held across an
    /// `.await`.
    assumed: Mutex<HashMap<String, Arc<ResourceClaim>>>,
}

impl std::fmt::Debug for DynamicResources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicResources").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn claim_key(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

fn resource_version(claim: &ResourceClaim) -> u64 {
    claim
        .metadata
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

fn allocation_devices(allocation: &AllocationResult) -> impl Iterator<Item = DeviceId> + '_ {
    allocation
        .devices
        .iter()
        .flat_map(|d| d.results.iter().flatten())
        .map(|r| (r.driver.clone(), r.pool.clone(), r.device.clone()))
}

/// The node selector of an allocation of devices local to `node` (the allocator's
/// `metadata.name In [node]`).
pub fn node_name_selector(node: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: NODE_NAME_FIELD.to_owned(),
                operator: "In".to_owned(),
                values: Some(vec![node.to_owned()]),
            }]),
        }],
    }
}

/// One request (or sub-request) to satisfy: its result name, class, selectors, mode, count.
struct Want<'a> {
    name: String,
    class: &'a str,
    selectors: &'a [DeviceSelector],
    tolerations: &'a [DeviceToleration],
    all: bool,
    count: usize,
}

fn want<'a>(
    name: String,
    class: &'a str,
    selectors: Option<&'a Vec<DeviceSelector>>,
    tolerations: Option<&'a Vec<DeviceToleration>>,
    mode: Option<&str>,
    count: Option<i64>,
) -> Want<'a> {
    Want {
        name,
        class,
        selectors: selectors.map(Vec::as_slice).unwrap_or_default(),
        tolerations: tolerations.map(Vec::as_slice).unwrap_or_default(),
        all: mode == Some(ALLOCATION_MODE_ALL),
        count: usize::try_from(count.unwrap_or(1).max(1)).unwrap_or(1),
    }
}

/// Whether every CEL selector of `selectors` selects the device.
fn selected(
    selectors: &[DeviceSelector],
    driver: &str,
    device: &k8s_openapi::api::resource::v1::Device,
) -> bool {
    selectors.iter().all(|s| match &s.cel {
        Some(c) => match cel::selects(&c.expression, driver, device) {
            Ok(b) => b,
            Err(err) => {
                tracing::debug!(%err, "device selector not evaluated");
                false
            }
        },
        None => true,
    })
}

impl PodClaims {
    /// Whether a slice publishes devices usable on `node`.
    fn slice_on_node(slice: &ResourceSlice, node: &Node) -> bool {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if let Some(slice_node) = slice.spec.node_name.as_deref() {
            return slice_node == name;
        }
        if slice.spec.all_nodes == Some(true) {
            return true;
        }
        slice
            .spec
            .node_selector
            .as_ref()
            .is_some_and(|s| ParsedNodeSelector::new(s).matches(node))
    }

    /// Allocates `claim` on `node` from devices not in `taken` (which gets the chosen ones), or
    /// `None` when it does not fit.
    fn allocate(
        &self,
        claim: &ResourceClaim,
        node: &Node,
        taken: &mut HashSet<DeviceId>,
    ) -> Option<AllocationResult> {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        let requests = claim
            .spec
            .devices
            .as_ref()
            .and_then(|d| d.requests.as_deref())
            .unwrap_or_default();
        let slices: Vec<&Arc<ResourceSlice>> = self
            .slices
            .iter()
            .filter(|s| Self::slice_on_node(s, node))
            .collect();
        let mut results = Vec::new();
        let mut node_local = false;
        let mut selector: Option<NodeSelector> = None;
        for request in requests {
            let alternatives: Vec<Want<'_>> = match (&request.exactly, &request.first_available) {
                (Some(e), _) => vec![want(
                    request.name.clone(),
                    &e.device_class_name,
                    e.selectors.as_ref(),
                    e.tolerations.as_ref(),
                    e.allocation_mode.as_deref(),
                    e.count,
                )],
                (None, Some(subs)) => subs
                    .iter()
                    .map(|s| {
                        want(
                            format!("{}/{}", request.name, s.name),
                            &s.device_class_name,
                            s.selectors.as_ref(),
                            s.tolerations.as_ref(),
                            s.allocation_mode.as_deref(),
                            s.count,
                        )
                    })
                    .collect(),
                (None, None) => return None,
            };
            let mut satisfied = false;
            for alt in alternatives {
                let class_selectors = self
                    .classes
                    .get(alt.class)
                    .and_then(|c| c.spec.selectors.clone())
                    .unwrap_or_default();
                let mut chosen = Vec::new();
                for slice in &slices {
                    let driver = slice.spec.driver.as_str();
                    let pool = slice.spec.pool.name.as_str();
                    for device in slice.spec.devices.iter().flatten() {
                        let id = (driver.to_owned(), pool.to_owned(), device.name.clone());
                        if taken.contains(&id)
                            || chosen
                                .iter()
                                .any(|(c, _): &(DeviceId, &ResourceSlice)| *c == id)
                            || !selected(&class_selectors, driver, device)
                            || !selected(alt.selectors, driver, device)
                            || taint_prevents_allocation(
                                device.taints.as_deref().unwrap_or_default(),
                                alt.tolerations,
                            )
                        {
                            continue;
                        }
                        chosen.push((id, slice.as_ref()));
                        if !alt.all && chosen.len() == alt.count {
                            break;
                        }
                    }
                    if !alt.all && chosen.len() == alt.count {
                        break;
                    }
                }
                let enough = if alt.all {
                    !chosen.is_empty()
                } else {
                    chosen.len() == alt.count
                };
                if !enough {
                    continue;
                }
                for ((driver, pool, device), slice) in chosen {
                    if slice.spec.node_name.is_some() {
                        node_local = true;
                    } else if let Some(s) = &slice.spec.node_selector {
                        selector = Some(s.clone());
                    }
                    taken.insert((driver.clone(), pool.clone(), device.clone()));
                    results.push(DeviceRequestAllocationResult {
                        request: alt.name.clone(),
                        driver,
                        pool,
                        device,
                        // Upstream's allocator copies the request's tolerations into the
                        // result, where taint eviction reads them.
                        tolerations: (!alt.tolerations.is_empty())
                            .then(|| alt.tolerations.to_vec()),
                        ..DeviceRequestAllocationResult::default()
                    });
                }
                satisfied = true;
                break;
            }
            if !satisfied {
                return None;
            }
        }
        Some(AllocationResult {
            devices: Some(DeviceAllocationResult {
                results: Some(results),
                config: None,
            }),
            node_selector: if node_local {
                Some(node_name_selector(node_name))
            } else {
                selector
            },
            allocation_timestamp: None,
        })
    }
}

/// The reference `reservedFor` holds for `pod`.
pub fn consumer_reference(pod: &Pod) -> ResourceClaimConsumerReference {
    ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".to_owned(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

impl DynamicResources {
    /// The plugin over these caches, writing through `client`.
    pub fn new(
        claims: Indexer<ResourceClaim>,
        slices: Indexer<ResourceSlice>,
        classes: Indexer<DeviceClass>,
        client: Arc<dyn DraClient>,
    ) -> Self {
        Self {
            claims,
            slices,
            classes,
            client,
            in_flight: Mutex::new(HashMap::new()),
            assumed: Mutex::new(HashMap::new()),
        }
    }

    /// The newest known version of claim `key`: the informer's, or the one written here when
    /// the informer has not caught up.
    fn claim(&self, key: &str) -> Option<Arc<ResourceClaim>> {
        let cached = self.claims.get_by_key(key);
        let mut assumed = lock(&self.assumed);
        match (cached, assumed.get(key).cloned()) {
            (None, Some(_)) => {
                assumed.remove(key);
                None
            }
            (Some(cached), Some(mine))
                if cached.metadata.uid == mine.metadata.uid
                    && resource_version(&mine) > resource_version(&cached) =>
            {
                Some(mine)
            }
            (Some(cached), Some(_)) => {
                assumed.remove(key);
                Some(cached)
            }
            (cached, None) => cached,
        }
    }

    /// Devices held by allocated claims and by allocations in flight.
    fn allocated_devices(&self) -> HashSet<DeviceId> {
        let mut held: HashSet<DeviceId> = HashSet::new();
        for cached in self.claims.list() {
            let claim = self.claim(&claim_key(&cached)).unwrap_or(cached);
            if let Some(allocation) = claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
                held.extend(allocation_devices(allocation));
            }
        }
        for allocation in lock(&self.in_flight).values() {
            held.extend(allocation_devices(allocation));
        }
        held
    }

    /// How many allocations are in flight (tests).
    pub fn in_flight_count(&self) -> usize {
        lock(&self.in_flight).len()
    }

    /// PreFilter: the pod's claims, or why it cannot be scheduled anywhere.
    pub fn pre_filter(&self, pod: &Pod) -> PreFilter {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut claims = Vec::new();
        for entry in pod_claims(pod) {
            let (name, must_check_owner) = match claim_name(pod, entry) {
                Ok((Some(name), owned)) => (name, owned),
                Ok((None, _)) => continue,
                Err(e) => return PreFilter::Unresolvable(e.to_string()),
            };
            let key = format!("{namespace}/{name}");
            let Some(claim) = self.claim(&key) else {
                return PreFilter::Unresolvable(format!("could not find ResourceClaim {key:?}"));
            };
            if claim.metadata.deletion_timestamp.is_some() {
                return PreFilter::Unresolvable(format!("resourceclaim {name:?} is being deleted"));
            }
            if must_check_owner && let Err(e) = is_for_pod(pod, &claim) {
                return PreFilter::Unresolvable(e.to_string());
            }
            claims.push(claim);
        }
        if claims.is_empty() {
            return PreFilter::NoClaims;
        }
        let classes: HashMap<String, Arc<DeviceClass>> = self
            .classes
            .list()
            .into_iter()
            .filter_map(|c| Some((c.metadata.name.clone()?, c)))
            .collect();
        for claim in &claims {
            if is_allocated(claim) {
                if !can_be_reserved(claim) && !is_reserved_for_pod(pod, claim) {
                    return PreFilter::Unresolvable(CLAIM_IN_USE.to_owned());
                }
                continue;
            }
            let uid = claim.metadata.uid.as_deref().unwrap_or_default();
            if lock(&self.in_flight).contains_key(uid) {
                return PreFilter::Unresolvable(format!(
                    "resource claim {} is in the process of being allocated",
                    claim_key(claim)
                ));
            }
            for request in claim
                .spec
                .devices
                .as_ref()
                .and_then(|d| d.requests.as_deref())
                .unwrap_or_default()
            {
                let wanted: Vec<(String, &str)> = match (&request.exactly, &request.first_available)
                {
                    (Some(e), _) => vec![(request.name.clone(), e.device_class_name.as_str())],
                    (None, Some(subs)) => subs
                        .iter()
                        .map(|s| {
                            (
                                format!("{}/{}", request.name, s.name),
                                s.device_class_name.as_str(),
                            )
                        })
                        .collect(),
                    (None, None) => Vec::new(),
                };
                for (name, class) in wanted {
                    if !classes.contains_key(class) {
                        return PreFilter::Unresolvable(format!(
                            "request {name}: device class {class} does not exist"
                        ));
                    }
                }
            }
        }
        let mut slices = self.slices.list();
        slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        PreFilter::Claims(PodClaims {
            claims,
            allocated: self.allocated_devices(),
            slices,
            classes,
        })
    }

    /// Filter: what the pod's claims need on `node`, or the reasons it does not fit there.
    pub fn filter(&self, state: &PodClaims, node: &Node) -> Result<NodeClaims, Vec<String>> {
        let mut taken = state.allocated.clone();
        let mut out = NodeClaims::default();
        for claim in &state.claims {
            let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
            match allocation {
                Some(allocation) => {
                    if let Some(selector) = &allocation.node_selector
                        && !ParsedNodeSelector::new(selector).matches(node)
                    {
                        return Err(vec![ERR_REASON_NOT_AVAILABLE.to_owned()]);
                    }
                    out.claims.push((Arc::clone(claim), None));
                }
                None => match state.allocate(claim, node, &mut taken) {
                    Some(allocation) => out.claims.push((Arc::clone(claim), Some(allocation))),
                    None => return Err(vec![ERR_REASON_CANNOT_ALLOCATE.to_owned()]),
                },
            }
        }
        Ok(out)
    }

    /// Reserve: holds the new allocations in flight.
    pub fn reserve(&self, claims: &NodeClaims) {
        let mut in_flight = lock(&self.in_flight);
        for (claim, allocation) in &claims.claims {
            if let Some(allocation) = allocation {
                in_flight.insert(
                    claim.metadata.uid.clone().unwrap_or_default(),
                    allocation.clone(),
                );
            }
        }
    }

    /// Unreserve, or the end of PreBind: drops the allocations in flight.
    pub fn unreserve(&self, claims: &NodeClaims) {
        let mut in_flight = lock(&self.in_flight);
        for (claim, allocation) in &claims.claims {
            if allocation.is_some() {
                in_flight.remove(claim.metadata.uid.as_deref().unwrap_or_default());
            }
        }
    }

    /// PreBind: writes each claim's allocation and the pod's reservation, as upstream's
    /// `bindClaim`. The error is the plugin's message. The allocations in flight are dropped
    /// either way (the written claims are assumed instead).
    pub async fn pre_bind(&self, pod: &Pod, claims: &NodeClaims) -> Result<(), String> {
        let result = self.write_claims(pod, claims).await;
        self.unreserve(claims);
        result
    }

    async fn write_claims(&self, pod: &Pod, claims: &NodeClaims) -> Result<(), String> {
        for (claim, allocation) in &claims.claims {
            let key = claim_key(claim);
            let fail = |err: kube::Error| format!("binding claim {key}: {}", error_message(&err));
            let current = self
                .claim(&key)
                .filter(|c| c.metadata.uid == claim.metadata.uid)
                .ok_or_else(|| format!("binding claim {key}: claim was deleted"))?;
            if is_reserved_for_pod(pod, &current) {
                continue;
            }
            let mut next = (*current).clone();
            if let Some(allocation) = allocation {
                if is_allocated(&current) {
                    return Err(format!(
                        "binding claim {key}: claim got allocated elsewhere in the meantime"
                    ));
                }
                let finalizers = next.metadata.finalizers.get_or_insert_default();
                if !finalizers.iter().any(|f| f == DELETE_PROTECTION_FINALIZER) {
                    finalizers.push(DELETE_PROTECTION_FINALIZER.to_owned());
                    next = self.client.update_claim(&next).await.map_err(fail)?;
                }
                next.status
                    .get_or_insert_with(ResourceClaimStatus::default)
                    .allocation = Some(allocation.clone());
            }
            next.status
                .get_or_insert_with(ResourceClaimStatus::default)
                .reserved_for
                .get_or_insert_default()
                .push(consumer_reference(pod));
            let written = self.client.update_claim_status(&next).await.map_err(fail)?;
            lock(&self.assumed).insert(key, Arc::new(written));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "dynamic_resources_tests.rs"]
mod tests;
