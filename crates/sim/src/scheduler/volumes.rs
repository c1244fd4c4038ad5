//! The scheduler's volume binding, as kube-scheduler's `VolumeBinding` plugin and its
//! `volumeBinder`.
//!
//! - **PreFilter** ([`VolumeBinding::pre_filter`]): every claim the pod uses (directly, or
//!   `<pod>-<volume>` for a generic ephemeral volume) must exist, not be lost or being deleted,
//!   and an ephemeral one must be the pod's. A claim whose binding is complete is *bound*; an
//!   unbound claim of a `WaitForFirstConsumer` class without `spec.volumeName` is *delayed*;
//!   any other unbound claim makes the pod unschedulable until the PV controller binds it.
//! - **Filter** ([`VolumeBinding::find_pod_volumes`]): on a node, every bound claim's volume must
//!   exist and admit the node; every delayed claim needs an `Available` volume that matches it
//!   there (smallest claims first, each volume chosen once) or, failing that, a class whose
//!   provisioner can provision it there. A delayed claim whose node is already selected fits
//!   that node only.
//! - **Reserve** ([`VolumeBinding::assume`]): the chosen volumes are held for the pod, so
//!   concurrent decisions do not pick them again, until its binding cycle ends.
//! - **PreBind** ([`VolumeBinding::bind_pod_volumes`]): each chosen volume gets the claim's
//!   `claimRef` (and `pv.kubernetes.io/bound-by-controller`), each claim to provision the
//!   `volume.kubernetes.io/selected-node` annotation; then it waits, polling every second for
//!   at most the bind timeout (600 s), until the PV controller has bound every claim.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::informer::Indexer;
use kcm_machinery::storage::ephemeral::{PodVolumeClaim, pod_volume_claim, volume_is_for_pod};
use kcm_machinery::storage::volume::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, check_node_affinity,
    claim_class, claim_key, claim_phase, claim_reference, find_matching_volume, has_annotation,
    is_volume_bound_to_claim, requested_storage, volume_class,
};

use crate::storage::class::NO_PROVISIONER;
use crate::storage::client::VolumeClient;

/// A node where no volume matches a delayed claim and none can be provisioned
/// (upstream's `ErrReasonBindConflict`).
pub const ERR_REASON_BIND_CONFLICT: &str =
    "node(s) didn't find available persistent volumes to bind";
/// A node a bound claim's volume does not admit (`ErrReasonNodeConflict`).
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
/// A bound claim's volume does not exist (`ErrReasonPVNotExist`).
pub const ERR_REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
/// The PreFilter message for unbound claims of an immediate class.
pub const UNBOUND_IMMEDIATE_CLAIMS: &str = "pod has unbound immediate PersistentVolumeClaims";
/// How long the binding cycle waits for the PV controller (`VolumeBindingArgs`'
/// `bindTimeoutSeconds` default).
pub const DEFAULT_BIND_TIMEOUT: Duration = Duration::from_secs(600);
/// How often the binding cycle checks the claims (upstream polls every second).
pub const BIND_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Whether the pod uses any claim, so the volume binding has work to do.
pub fn uses_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|vs| vs.iter().any(|v| pod_volume_claim(pod, v).is_some()))
}

/// What PreFilter found: the pod's claims by binding state, and the volumes delayed claims
/// may be matched with, by class.
#[derive(Clone, Debug, Default)]
pub struct PodVolumeClaims {
    /// Claims whose binding is complete.
    pub bound: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound claims of a `WaitForFirstConsumer` class: bound or provisioned by the scheduler.
    pub delayed: Vec<Arc<PersistentVolumeClaim>>,
    /// The volumes of each delayed claim's class.
    pub unbound_volumes: BTreeMap<String, Vec<Arc<PersistentVolume>>>,
}

/// The outcome of PreFilter.
#[derive(Clone, Debug)]
pub enum PreFilter {
    /// The pod uses no claim.
    NoClaims,
    /// No node can fit the pod until its claims change; the message says why.
    Unresolvable(String),
    /// Filter each node against these.
    Claims(PodVolumeClaims),
}

/// What the pod needs done to its volumes on one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodVolumes {
    /// Delayed claims and the volume each is to be bound to.
    pub static_bindings: Vec<(Arc<PersistentVolumeClaim>, Arc<PersistentVolume>)>,
    /// Delayed claims to provision on the node.
    pub dynamic_provisions: Vec<Arc<PersistentVolumeClaim>>,
}

impl PodVolumes {
    /// Whether nothing needs writing: every claim is bound already.
    pub fn all_bound(&self) -> bool {
        self.static_bindings.is_empty() && self.dynamic_provisions.is_empty()
    }
}

/// The volume binding: the caches it reads, the volumes held for pods being bound, and the API
/// writes of the binding cycle.
pub struct VolumeBinding {
    claims: Indexer<PersistentVolumeClaim>,
    volumes: Indexer<PersistentVolume>,
    classes: Indexer<StorageClass>,
    client: Arc<dyn VolumeClient>,
    /// Volume name → the `namespace/name` of the claim it is held for. Never held across an
    /// `.await`.
    assumed: Mutex<HashMap<String, String>>,
    bind_timeout: Duration,
    poll_interval: Duration,
}

impl std::fmt::Debug for VolumeBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeBinding")
            .field("bind_timeout", &self.bind_timeout)
            .finish_non_exhaustive()
    }
}

fn volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default()
}

/// Whether the PV controller finished binding the claim (`isPVCFullyBound`).
fn fully_bound(claim: &PersistentVolumeClaim) -> bool {
    !volume_name(claim).is_empty() && has_annotation(&claim.metadata, ANN_BIND_COMPLETED)
}

/// Whether a class's `allowedTopologies` admit a node with these labels
/// (`MatchTopologySelectorTerms`: no terms admit every node).
fn topology_admits(class: &StorageClass, node: &Node) -> bool {
    let Some(terms) = class.allowed_topologies.as_ref().filter(|t| !t.is_empty()) else {
        return true;
    };
    let labels = node.metadata.labels.as_ref();
    terms.iter().any(|term| {
        term.match_label_expressions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .all(|req| {
                labels
                    .and_then(|l| l.get(&req.key))
                    .is_some_and(|v| req.values.contains(v))
            })
    })
}

/// `volume` bound to `claim` as the scheduler writes it (`GetBindVolumeToClaim`), or `None`
/// when it is already.
pub fn bind_volume_to_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Option<PersistentVolume> {
    let set_bound_by_controller = !is_volume_bound_to_claim(volume, claim);
    let mut clone = volume.clone();
    let mut dirty = false;
    let current = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    if current.is_none_or(|r| {
        r.name != claim.metadata.name
            || r.namespace != claim.metadata.namespace
            || r.uid != claim.metadata.uid
    }) {
        clone.spec.get_or_insert_default().claim_ref = Some(claim_reference(claim));
        dirty = true;
    }
    if set_bound_by_controller && !has_annotation(&clone.metadata, ANN_BOUND_BY_CONTROLLER) {
        clone
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(ANN_BOUND_BY_CONTROLLER.to_owned(), "yes".to_owned());
        dirty = true;
    }
    dirty.then_some(clone)
}

impl VolumeBinding {
    /// A volume binding over these caches, writing through `client`.
    pub fn new(
        claims: Indexer<PersistentVolumeClaim>,
        volumes: Indexer<PersistentVolume>,
        classes: Indexer<StorageClass>,
        client: Arc<dyn VolumeClient>,
    ) -> Self {
        Self {
            claims,
            volumes,
            classes,
            client,
            assumed: Mutex::new(HashMap::new()),
            bind_timeout: DEFAULT_BIND_TIMEOUT,
            poll_interval: BIND_POLL_INTERVAL,
        }
    }

    /// The same with another bind timeout and poll interval (tests).
    pub fn with_timing(mut self, bind_timeout: Duration, poll_interval: Duration) -> Self {
        self.bind_timeout = bind_timeout;
        self.poll_interval = poll_interval;
        self
    }

    fn assumed(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.assumed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a claim waits for the first consumer: its class exists and says so
    /// (`IsDelayBindingMode`).
    fn delay_binding(&self, claim: &PersistentVolumeClaim) -> bool {
        let class = claim_class(claim);
        !class.is_empty()
            && self
                .classes
                .get_by_key(class)
                .is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"))
    }

    /// PreFilter: the pod's claims, or why it cannot be scheduled anywhere
    /// (`podHasPVCs` and `GetPodVolumeClaims`).
    pub fn pre_filter(&self, pod: &Pod) -> PreFilter {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut claims = PodVolumeClaims::default();
        let mut any = false;
        let mut immediate = false;
        for volume in pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_deref())
            .unwrap_or_default()
        {
            let Some(PodVolumeClaim { name, ephemeral }) = pod_volume_claim(pod, volume) else {
                continue;
            };
            any = true;
            let Some(claim) = self.claims.get_by_key(&format!("{namespace}/{name}")) else {
                return PreFilter::Unresolvable(if ephemeral {
                    format!(
                        "waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}"
                    )
                } else {
                    format!("persistentvolumeclaim {name:?} not found")
                });
            };
            if claim_phase(&claim) == "Lost" {
                return PreFilter::Unresolvable(format!(
                    "persistentvolumeclaim {name:?} bound to non-existent persistentvolume {:?}",
                    volume_name(&claim)
                ));
            }
            if claim.metadata.deletion_timestamp.is_some() {
                return PreFilter::Unresolvable(format!(
                    "persistentvolumeclaim {name:?} is being deleted"
                ));
            }
            if ephemeral && let Err(err) = volume_is_for_pod(pod, &claim) {
                return PreFilter::Unresolvable(err.to_string());
            }
            if fully_bound(&claim) {
                claims.bound.push(claim);
            } else if self.delay_binding(&claim) && volume_name(&claim).is_empty() {
                claims.delayed.push(claim);
            } else {
                immediate = true;
            }
        }
        if !any {
            return PreFilter::NoClaims;
        }
        if immediate {
            return PreFilter::Unresolvable(UNBOUND_IMMEDIATE_CLAIMS.to_owned());
        }
        if !claims.delayed.is_empty() {
            let classes: HashSet<&str> = claims.delayed.iter().map(|c| claim_class(c)).collect();
            for volume in self.volumes.list() {
                let class = volume_class(&volume);
                if classes.contains(class) {
                    claims
                        .unbound_volumes
                        .entry(class.to_owned())
                        .or_default()
                        .push(volume);
                }
            }
        }
        PreFilter::Claims(claims)
    }

    /// Filter: what the pod's claims need on `node`, or the reasons it does not fit there
    /// (`FindPodVolumes`).
    pub fn find_pod_volumes(
        &self,
        claims: &PodVolumeClaims,
        node: &Node,
    ) -> Result<PodVolumes, Vec<String>> {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        let mut bound_satisfied = true;
        let mut pvs_found = true;
        for claim in &claims.bound {
            match self.volumes.get_by_key(volume_name(claim)) {
                None => pvs_found = false,
                Some(volume) if !check_node_affinity(&volume, node) => bound_satisfied = false,
                Some(_) => {}
            }
        }
        let mut out = PodVolumes::default();
        let mut unbound_satisfied = true;
        let mut to_match = Vec::new();
        for claim in &claims.delayed {
            let selected = claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANN_SELECTED_NODE));
            match selected {
                Some(selected) if selected != node_name => {
                    unbound_satisfied = false;
                    to_match.clear();
                    out.dynamic_provisions.clear();
                    break;
                }
                Some(_) => out.dynamic_provisions.push(Arc::clone(claim)),
                None => to_match.push(Arc::clone(claim)),
            }
        }
        if unbound_satisfied && !to_match.is_empty() {
            // Smallest claims first, so the smallest volumes go to them (`byPVCSize`).
            to_match.sort_by_key(|c| requested_storage(c));
            let assumed = self.assumed();
            let mut chosen: HashSet<String> = HashSet::new();
            for claim in to_match {
                let key = claim_key(&claim);
                let candidates = claims
                    .unbound_volumes
                    .get(claim_class(&claim))
                    .into_iter()
                    .flatten()
                    .filter(|v| {
                        let name = v.metadata.name.as_deref().unwrap_or_default();
                        !chosen.contains(name)
                            && assumed.get(name).is_none_or(|holder| *holder == key)
                    });
                match find_matching_volume(&claim, candidates, Some(node), true) {
                    Ok(Some(volume)) => {
                        chosen.insert(volume.metadata.name.clone().unwrap_or_default());
                        out.static_bindings.push((claim, volume));
                    }
                    Ok(None) => out.dynamic_provisions.push(claim),
                    Err(_) => unbound_satisfied = false,
                }
            }
        }
        if unbound_satisfied {
            unbound_satisfied = out
                .dynamic_provisions
                .iter()
                .all(|claim| self.can_provision(claim, node));
        }
        let mut reasons = Vec::new();
        if !bound_satisfied {
            reasons.push(ERR_REASON_NODE_CONFLICT.to_owned());
        }
        if !unbound_satisfied {
            reasons.push(ERR_REASON_BIND_CONFLICT.to_owned());
        }
        if !pvs_found {
            reasons.push(ERR_REASON_PV_NOT_EXIST.to_owned());
        }
        if reasons.is_empty() {
            Ok(out)
        } else {
            Err(reasons)
        }
    }

    /// Whether the claim's class can provision it on `node` (`checkVolumeProvisions`).
    fn can_provision(&self, claim: &PersistentVolumeClaim, node: &Node) -> bool {
        let class = claim_class(claim);
        if class.is_empty() {
            return false;
        }
        self.classes
            .get_by_key(class)
            .is_some_and(|c| c.provisioner != NO_PROVISIONER && topology_admits(&c, node))
    }

    /// Reserve: holds the chosen volumes for their claims.
    pub fn assume(&self, volumes: &PodVolumes) {
        let mut assumed = self.assumed();
        for (claim, volume) in &volumes.static_bindings {
            assumed.insert(
                volume.metadata.name.clone().unwrap_or_default(),
                claim_key(claim),
            );
        }
    }

    /// Unreserve, or the end of a binding cycle: releases the volumes held for the pod.
    pub fn revert(&self, volumes: &PodVolumes) {
        let mut assumed = self.assumed();
        for (claim, volume) in &volumes.static_bindings {
            let name = volume.metadata.name.as_deref().unwrap_or_default();
            if assumed
                .get(name)
                .is_some_and(|holder| *holder == claim_key(claim))
            {
                assumed.remove(name);
            }
        }
    }

    /// How many volumes are held for pods being bound.
    pub fn assumed_count(&self) -> usize {
        self.assumed().len()
    }

    /// PreBind: writes the bindings and provisioning requests, then waits until the PV
    /// controller has bound every claim (`BindPodVolumes`). The error is the scheduler's
    /// message.
    pub async fn bind_pod_volumes(&self, node: &str, volumes: &PodVolumes) -> Result<(), String> {
        for (claim, volume) in &volumes.static_bindings {
            if let Some(bound) = bind_volume_to_claim(volume, claim) {
                self.client
                    .update_volume(&bound)
                    .await
                    .map_err(|err| format!("binding volumes: {}", error_message(&err)))?;
            }
        }
        for claim in &volumes.dynamic_provisions {
            let annotations = claim.metadata.annotations.as_ref();
            if annotations
                .and_then(|a| a.get(ANN_SELECTED_NODE))
                .map(String::as_str)
                == Some(node)
            {
                continue;
            }
            let mut selected = (**claim).clone();
            selected
                .metadata
                .annotations
                .get_or_insert_default()
                .insert(ANN_SELECTED_NODE.to_owned(), node.to_owned());
            self.client
                .update_claim(&selected)
                .await
                .map_err(|err| format!("binding volumes: {}", error_message(&err)))?;
        }
        let deadline = tokio::time::Instant::now() + self.bind_timeout;
        loop {
            tokio::time::sleep(self.poll_interval).await;
            if self.bindings_done(volumes)? {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(
                    "binding volumes: context deadline exceeded: timed out waiting for the condition"
                        .to_owned(),
                );
            }
        }
    }

    /// Whether every claim of the binding cycle is bound, or why the binding failed
    /// (`checkBindings`).
    fn bindings_done(&self, volumes: &PodVolumes) -> Result<bool, String> {
        let mut done = true;
        let claims = volumes
            .static_bindings
            .iter()
            .map(|(c, _)| c)
            .chain(&volumes.dynamic_provisions);
        for claim in claims {
            let key = claim_key(claim);
            let Some(current) = self.claims.get_by_key(&key) else {
                return Err(format!(
                    "binding volumes: failed to check binding: cannot get pvc {key:?}: persistentvolumeclaim {:?} not found",
                    claim.metadata.name.as_deref().unwrap_or_default()
                ));
            };
            if current.metadata.uid != claim.metadata.uid {
                return Err(format!(
                    "binding volumes: failed to check binding: pvc {key:?} was recreated"
                ));
            }
            if !fully_bound(&current) {
                done = false;
            }
        }
        for (claim, volume) in &volumes.static_bindings {
            let name = volume.metadata.name.as_deref().unwrap_or_default();
            match self.volumes.get_by_key(name) {
                Some(current) if is_volume_bound_to_claim(&current, claim) => {}
                // Our write has not reached the cache yet.
                Some(current)
                    if current
                        .spec
                        .as_ref()
                        .and_then(|s| s.claim_ref.as_ref())
                        .is_none() =>
                {
                    done = false;
                }
                Some(_) => {
                    return Err(format!(
                        "binding volumes: failed to check binding: pv {name:?} is bound to another claim"
                    ));
                }
                None => {
                    return Err(format!(
                        "binding volumes: failed to check binding: pv {name:?} not found"
                    ));
                }
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
#[path = "volumes_tests.rs"]
mod tests;
