//! The device taint eviction controller: constants, the controller, `Run`, the claim, slice, rule and pod handlers, and the work (pod deletion, rule status) of upstream's `device_taint_eviction.go`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodCondition, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::resource::v1beta2::DeviceTaintRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::controller::ranking::update_pod_condition;
use kcm_machinery::dra::{claim_name, is_for_pod, is_reserved_for_pod, pod_claims, reserved_for};
use kcm_machinery::events::{EventRecorder, EventType, SystemClock, WallClock};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, Lister, ResourceEventHandlerFuncs, SharedInformerFactory,
    wait_for_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use serde_json::json;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::client::{ApiDeviceTaintEvictionClient, DeviceTaintEvictionClient};
use super::eviction::{
    EvictionAndReason, allocation_results, claim_eviction_time, join, rule_matches_device,
    same_eviction,
};
use super::metrics::DeviceTaintEvictionMetrics;
use super::pools::{Pool, PoolId};
use super::rule_status::{RULE_STATUS_PERIOD, RuleCounts, eviction_condition, existing_condition};
use super::tolerations::{EFFECT_NO_EXECUTE, EFFECT_NONE};
use super::uid_cache::UidCache;
use super::{Error, Result};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// kube-controller-manager's name of this controller (upstream's
/// `names.DeviceTaintEvictionController`); also its work queue's name, its events' source and
/// its field manager.
pub const CONTROLLER_NAME: &str = "device-taint-eviction-controller";

/// `--concurrent-device-taint-eviction-syncs`' default (upstream's
/// `RecommendedDefaultDeviceTaintEvictionControllerConfiguration`).
pub const DEFAULT_CONCURRENT_SYNCS: u32 = 8;

/// How many evicted pod UIDs are remembered (upstream's `maxUIDCacheEntries`).
const MAX_UID_CACHE_ENTRIES: usize = 500;

/// The reason of the controller's pod events.
pub const REASON_DEVICE_TAINT_MANAGER_EVICTION: &str = "DeviceTaintManagerEviction";
/// The event message when a pod is about to be deleted.
pub const MESSAGE_MARKING_FOR_DELETION: &str = "Marking for deletion";
/// The event message when a scheduled deletion is called off.
pub const MESSAGE_CANCELLING_DELETION: &str = "Cancelling deletion";
/// The pod condition set before deletion (core/v1 `DisruptionTarget`).
pub use kcm_machinery::controller::ranking::DISRUPTION_TARGET;
/// Its reason.
pub const REASON_DELETION_BY_DEVICE_TAINT_MANAGER: &str = "DeletionByDeviceTaintManager";
/// Its message.
pub const MESSAGE_DELETION_BY_DEVICE_TAINT_MANAGER: &str =
    "Device Taint manager: deleting due to NoExecute taint";

// ---------------------------------------------------------------------------------------------
// Work items and shared state
// ---------------------------------------------------------------------------------------------

/// An object by namespace, name and UID (upstream's `tainteviction.NamespacedObject`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// Empty for a cluster-scoped object.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The UID, telling the object from a later one of the same name.
    pub uid: String,
}

impl ObjectRef {
    /// The reference of an object's metadata (upstream's `newObject`).
    pub fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        Self {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}", self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// What a worker does (upstream's `workItem`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WorkItem {
    /// Delete the pod if `State::delete_pod_at` says it is time.
    Pod(ObjectRef),
    /// Update the DeviceTaintRule's status.
    Rule(ObjectRef),
}

fn rule_item(rule: &DeviceTaintRule) -> WorkItem {
    WorkItem::Rule(ObjectRef::of(&rule.metadata))
}

/// An allocated claim and when its pods must go (upstream's `allocatedClaim`).
#[derive(Clone, Debug)]
struct AllocatedClaim {
    /// The claim as last seen; `status.allocation` is set.
    claim: Arc<ResourceClaim>,
    /// When and why its pods must be evicted; `None` when no taint asks for it.
    eviction: Option<EvictionAndReason>,
}

/// `namespace/name` of a claim.
type ClaimKey = (String, String);

fn claim_key(claim: &ResourceClaim) -> ClaimKey {
    (
        claim.metadata.namespace.clone().unwrap_or_default(),
        claim.metadata.name.clone().unwrap_or_default(),
    )
}

/// Everything the handlers and the workers share, behind one lock (upstream's fields guarded
/// by `mutex`). Handlers never block while holding it; workers drop it before any request.
#[derive(Debug)]
struct State {
    /// Pods to delete and when: the source of truth for pod work items (an item whose pod is
    /// not here any more is obsolete).
    delete_pod_at: HashMap<ObjectRef, EvictionAndReason>,
    /// Pods known to be evicted: their work items are obsolete.
    evicted_pods: UidCache,
    /// How often a worker looked at a pod (tests).
    maybe_delete_pod_count: i64,
    /// Every allocated claim.
    allocated_claims: HashMap<ClaimKey, AllocatedClaim>,
    /// The slices of every pool.
    pools: HashMap<PoolId, Pool>,
    /// DeviceTaintRules with effect NoExecute, by name.
    evicting_rules: BTreeMap<String, Arc<DeviceTaintRule>>,
    /// Pods evicted because of each rule since start, by rule UID; kept while the rule exists.
    rule_evictions: HashMap<String, i64>,
}

impl State {
    fn new() -> Self {
        Self {
            delete_pod_at: HashMap::new(),
            evicted_pods: UidCache::new(MAX_UID_CACHE_ENTRIES),
            maybe_delete_pod_count: 0,
            allocated_claims: HashMap::new(),
            pools: HashMap::new(),
            evicting_rules: BTreeMap::new(),
            rule_evictions: HashMap::new(),
        }
    }
}

/// Where the handlers' side effects go: the work queue and the event recorder, both absent in
/// a simulation (upstream's copy of the controller with a no-op queue and no recorder).
struct Effects<'a> {
    /// The work queue.
    queue: Option<&'a RateLimitingQueue<WorkItem>>,
    /// Pod events.
    recorder: Option<&'a dyn EventRecorder>,
    /// Pods by namespace and name.
    pods: &'a Lister<Pod>,
    /// The wall clock's reading for this change.
    now: Timestamp,
}

fn until(when: Timestamp, now: Timestamp) -> Duration {
    when.duration_since(now)
        .try_into()
        .unwrap_or(Duration::ZERO)
}

fn pod_event_ref(pod: &ObjectRef) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        name: Some(pod.name.clone()),
        namespace: Some(pod.namespace.clone()),
        uid: Some(pod.uid.clone()),
        ..ObjectReference::default()
    }
}

impl Effects<'_> {
    fn add(&self, item: WorkItem) {
        if let Some(queue) = self.queue {
            queue.add(item);
        }
    }

    fn add_after(&self, item: WorkItem, delay: Duration) {
        if let Some(queue) = self.queue {
            queue.add_after(item, delay);
        }
    }

    fn pod_event(&self, pod: &ObjectRef, message: &str) {
        if let Some(recorder) = self.recorder {
            recorder.event(
                &pod_event_ref(pod),
                EventType::Normal,
                REASON_DEVICE_TAINT_MANAGER_EVICTION,
                message.to_owned(),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers (upstream's handle* methods; the lock is held, nothing blocks)
// ---------------------------------------------------------------------------------------------

impl State {
    /// A claim was added, updated or deleted (upstream's `handleClaimChange`).
    fn handle_claim_change(
        &mut self,
        fx: &Effects<'_>,
        old: Option<&Arc<ResourceClaim>>,
        new: Option<&Arc<ResourceClaim>>,
    ) {
        let Some(claim) = new.or(old) else { return };
        let key = claim_key(claim);
        let allocated =
            |c: &ResourceClaim| c.status.as_ref().is_some_and(|s| s.allocation.is_some());
        let (old, new) = match (old, new) {
            (_, None) => {
                self.allocated_claims.remove(&key);
                self.handle_pods(fx, claim);
                return;
            }
            (None, Some(new)) => {
                if !allocated(new) {
                    return;
                }
                self.track_claim(key, new);
                self.handle_pods(fx, new);
                return;
            }
            (Some(old), Some(new)) => (old, new),
        };
        if old.metadata.uid != new.metadata.uid {
            // A replacement under the same name: a removal and an addition.
            self.handle_claim_change(fx, Some(old), None);
            self.handle_claim_change(fx, None, Some(new));
            return;
        }
        let (was, is) = (allocated(old), allocated(new));
        match (was, is) {
            (false, true) => self.track_claim(key, new),
            (true, false) => {
                self.allocated_claims.remove(&key);
            }
            (true, true) => {
                // The allocation is immutable: the eviction time stays.
                let eviction = self
                    .allocated_claims
                    .get(&key)
                    .and_then(|c| c.eviction.clone());
                self.allocated_claims.insert(
                    key,
                    AllocatedClaim {
                        claim: Arc::clone(new),
                        eviction,
                    },
                );
            }
            (false, false) => return,
        }
        // reservedFor may have changed: then both lists' pods are looked at.
        if reserved_for(old) != reserved_for(new) {
            self.handle_pods(fx, old);
            self.handle_pods(fx, new);
        } else {
            self.handle_pods(fx, new);
        }
    }

    fn track_claim(&mut self, key: ClaimKey, claim: &Arc<ResourceClaim>) {
        let eviction = claim_eviction_time(claim, &self.pools, &self.evicting_rules);
        self.allocated_claims.insert(
            key,
            AllocatedClaim {
                claim: Arc::clone(claim),
                eviction,
            },
        );
    }

    /// A DeviceTaintRule was added, updated or deleted (upstream's `handleRuleChange`).
    fn handle_rule_change(
        &mut self,
        fx: &Effects<'_>,
        old: Option<&Arc<DeviceTaintRule>>,
        new: Option<&Arc<DeviceTaintRule>>,
    ) {
        if old.is_none()
            && let Some(new) = new
        {
            // The status is updated at least once, at once and before any eviction.
            fx.add(rule_item(new));
        }
        if new.is_none()
            && let Some(old) = old
        {
            self.rule_evictions
                .remove(old.metadata.uid.as_deref().unwrap_or_default());
            self.evicting_rules
                .remove(old.metadata.name.as_deref().unwrap_or_default());
        }
        if let (Some(old), Some(new)) = (old, new)
            && old.metadata.uid == new.metadata.uid
        {
            if old.spec == new.spec {
                return;
            }
            fx.add(rule_item(new));
        }
        // Spec changes are rare: every allocated claim is judged again.
        if let Some(old) = old
            && old.spec.taint.effect == EFFECT_NO_EXECUTE
        {
            self.evicting_rules
                .remove(old.metadata.name.as_deref().unwrap_or_default());
        }
        if let Some(new) = new
            && new.spec.taint.effect == EFFECT_NO_EXECUTE
        {
            self.evicting_rules.insert(
                new.metadata.name.clone().unwrap_or_default(),
                Arc::clone(new),
            );
        }
        let keys: Vec<ClaimKey> = self.allocated_claims.keys().cloned().collect();
        for key in keys {
            let Some(current) = self.allocated_claims.get(&key) else {
                continue;
            };
            let claim = Arc::clone(&current.claim);
            let eviction = claim_eviction_time(&claim, &self.pools, &self.evicting_rules);
            let changed = !same_eviction(eviction.as_ref(), current.eviction.as_ref());
            self.allocated_claims.insert(
                key,
                AllocatedClaim {
                    claim: Arc::clone(&claim),
                    eviction,
                },
            );
            if changed {
                self.handle_pods(fx, &claim);
            }
        }
    }

    /// A ResourceSlice was added, updated or deleted: the claims using a device whose
    /// NoExecute taints changed are judged again (upstream's `handleSliceChange`).
    fn handle_slice_change(
        &mut self,
        fx: &Effects<'_>,
        old: Option<&Arc<ResourceSlice>>,
        new: Option<&Arc<ResourceSlice>>,
    ) {
        let Some(slice) = new.or(old) else { return };
        let id = PoolId::of(slice);
        let mut pool = self.pools.remove(&id).unwrap_or_default();
        let old_taints = pool.tainted_devices();
        if let Some(old) = old {
            pool.remove_slice(old);
        }
        if let Some(new) = new {
            pool.add_slice(Arc::clone(new));
        }
        let new_taints = pool.tainted_devices();
        if !pool.is_empty() {
            self.pools.insert(id.clone(), pool);
        }
        if old_taints.is_empty() && new_taints.is_empty() {
            return;
        }
        let modified = modified_devices(&old_taints, &new_taints);
        if modified.is_empty() {
            return;
        }
        let keys: Vec<ClaimKey> = self.allocated_claims.keys().cloned().collect();
        for key in keys {
            let Some(current) = self.allocated_claims.get(&key) else {
                continue;
            };
            let uses = allocation_results(&current.claim).iter().any(|r| {
                r.driver == id.driver && r.pool == id.pool && modified.contains(&r.device)
            });
            if !uses {
                continue;
            }
            let claim = Arc::clone(&current.claim);
            let eviction = claim_eviction_time(&claim, &self.pools, &self.evicting_rules);
            if same_eviction(eviction.as_ref(), current.eviction.as_ref()) {
                continue;
            }
            self.allocated_claims.insert(
                key,
                AllocatedClaim {
                    claim: Arc::clone(&claim),
                    eviction,
                },
            );
            self.handle_pods(fx, &claim);
        }
    }

    /// A pod was added, updated or deleted (upstream's `handlePodChange`): it is judged again
    /// only when it got scheduled elsewhere or its claim statuses changed.
    fn handle_pod_change(&mut self, fx: &Effects<'_>, old: Option<&Pod>, new: Option<&Pod>) {
        let Some(new) = new else {
            // Gone: nothing left to do, and no event about it.
            if let Some(old) = old {
                self.cancel_evict(&ObjectRef::of(&old.metadata));
            }
            return;
        };
        if let Some(old) = old {
            fn node(p: &Pod) -> Option<&str> {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref())
            }
            fn statuses(p: &Pod) -> &[PodResourceClaimStatus] {
                p.status
                    .as_ref()
                    .and_then(|s| s.resource_claim_statuses.as_deref())
                    .unwrap_or_default()
            }
            if node(old) == node(new) && statuses(old) == statuses(new) {
                // In particular the pod's own DisruptionTarget update lands here.
                return;
            }
        }
        self.handle_pod(fx, new);
    }

    /// Judges every pod the claim is reserved for (upstream's `handlePods`; PodGroup
    /// consumers need `DRAWorkloadResourceClaims`, alpha and off in v1.36, and are skipped).
    fn handle_pods(&mut self, fx: &Effects<'_>, claim: &ResourceClaim) {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        for consumer in reserved_for(claim) {
            if consumer.api_group.as_deref().is_some_and(|g| !g.is_empty())
                || consumer.resource != "pods"
            {
                continue;
            }
            let Some(pod) = fx.pods.get(namespace, &consumer.name) else {
                continue;
            };
            if pod.metadata.uid.as_deref().unwrap_or_default() != consumer.uid {
                // Not the pod the claim is reserved for.
                continue;
            }
            self.handle_pod(fx, &pod);
        }
    }

    /// Schedules or cancels the pod's eviction (upstream's `handlePod`).
    fn handle_pod(&mut self, fx: &Effects<'_>, pod: &Pod) {
        let pod_ref = ObjectRef::of(&pod.metadata);
        let Some(eviction) = self.pod_eviction_time(pod) else {
            if self.cancel_work_with_event(fx, &pod_ref) {
                tracing::debug!(controller = CONTROLLER_NAME, pod = %pod_ref, "Canceled pod eviction");
            }
            return;
        };
        let rules: Vec<WorkItem> = eviction
            .reason
            .iter()
            .filter_map(|r| r.rule().map(|rule| rule_item(rule)))
            .collect();
        self.evict_pod(fx, pod_ref, eviction);
        // Eviction is in progress: the rules' status may need an update, but later, as more
        // pod changes may follow.
        for item in rules {
            fx.add_after(item, RULE_STATUS_PERIOD);
        }
    }

    /// When and why the pod must go, `None` when it may stay (upstream's `podEvictionTime`):
    /// only a scheduled pod, only its allocated claims that are its own and reserved for it.
    fn pod_eviction_time(&self, pod: &Pod) -> Option<EvictionAndReason> {
        let scheduled = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        if !scheduled {
            return None;
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let mut eviction: Option<EvictionAndReason> = None;
        for entry in pod_claims(pod) {
            // Not created yet or an unsupported entry: not tainted.
            let Ok((Some(name), check_owner)) = claim_name(pod, entry) else {
                continue;
            };
            let Some(allocated) = self.allocated_claims.get(&(namespace.clone(), name)) else {
                continue;
            };
            if check_owner && is_for_pod(pod, &allocated.claim).is_err() {
                continue;
            }
            if !is_reserved_for_pod(pod, &allocated.claim) {
                // Perhaps a replacement of the pod the claim is for: not this one's.
                continue;
            }
            let Some(claim_eviction) = &allocated.eviction else {
                continue;
            };
            eviction = Some(match eviction {
                None => claim_eviction.clone(),
                Some(current) => join(current, claim_eviction),
            });
        }
        eviction
    }

    /// Makes sure the pod goes at the eviction's time (upstream's `evictPod`).
    fn evict_pod(&mut self, fx: &Effects<'_>, pod_ref: ObjectRef, eviction: EvictionAndReason) {
        let delay = until(eviction.when, fx.now);
        tracing::debug!(controller = CONTROLLER_NAME, pod = %pod_ref, %eviction, ?delay, "Adding pod eviction");
        self.delete_pod_at.insert(pod_ref.clone(), eviction);
        if delay.is_zero() {
            fx.add(WorkItem::Pod(pod_ref));
        } else {
            fx.add_after(WorkItem::Pod(pod_ref), delay);
        }
    }

    /// Calls off a scheduled eviction; false when there was none (upstream's `cancelEvict`).
    /// The work item stays queued: the worker sees it is obsolete.
    fn cancel_evict(&mut self, pod_ref: &ObjectRef) -> bool {
        self.delete_pod_at.remove(pod_ref).is_some()
    }

    /// [`Self::cancel_evict`] with a `Cancelling deletion` event (upstream's
    /// `cancelWorkWithEvent`).
    fn cancel_work_with_event(&mut self, fx: &Effects<'_>, pod_ref: &ObjectRef) -> bool {
        if self.cancel_evict(pod_ref) {
            fx.pod_event(pod_ref, MESSAGE_CANCELLING_DELETION);
            return true;
        }
        false
    }

    /// Pods not being deleted that `rule` evicts, and their namespaces (upstream's
    /// `countPendingPods`).
    fn count_pending_pods(&self, pods: &Lister<Pod>, rule: &DeviceTaintRule) -> (i64, i64) {
        let uid = rule.metadata.uid.as_deref().unwrap_or_default();
        let mut namespaces = BTreeSet::new();
        let mut pending = 0;
        for pod in pods.indexer().list() {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(eviction) = self.pod_eviction_time(&pod) else {
                continue;
            };
            for reason in &eviction.reason {
                if reason
                    .rule()
                    .is_some_and(|r| r.metadata.uid.as_deref().unwrap_or_default() == uid)
                {
                    pending += 1;
                    namespaces.insert(pod.metadata.namespace.clone().unwrap_or_default());
                }
            }
        }
        (pending, namespaces.len() as i64)
    }

    /// Published devices and allocated devices `rule` selects (upstream's
    /// `countTaintedDevices`).
    fn count_tainted_devices(&self, rule: &DeviceTaintRule) -> (i64, i64) {
        let mut published = 0;
        for (id, pool) in &self.pools {
            for slice in pool.current_slices() {
                for device in slice.spec.devices.iter().flatten() {
                    if rule_matches_device(rule, &id.driver, &id.pool, &device.name) {
                        published += 1;
                    }
                }
            }
        }
        let mut allocated = 0;
        for claim in self.allocated_claims.values() {
            for result in allocation_results(&claim.claim) {
                if rule_matches_device(rule, &result.driver, &result.pool, &result.device) {
                    allocated += 1;
                }
            }
        }
        (published, allocated)
    }
}

/// The devices whose NoExecute taints differ between two `(device, taint)` lists sorted by
/// device (upstream's merge loop in `handleSliceChange`).
fn modified_devices(
    old: &[(String, k8s_openapi::api::resource::v1::DeviceTaint)],
    new: &[(String, k8s_openapi::api::resource::v1::DeviceTaint)],
) -> BTreeSet<String> {
    let group = |list: &[(String, k8s_openapi::api::resource::v1::DeviceTaint)]| {
        let mut by_device: BTreeMap<String, Vec<k8s_openapi::api::resource::v1::DeviceTaint>> =
            BTreeMap::new();
        for (device, taint) in list {
            by_device
                .entry(device.clone())
                .or_default()
                .push(taint.clone());
        }
        by_device
    };
    let (old, new) = (group(old), group(new));
    old.keys()
        .chain(new.keys())
        .filter(|device| old.get(*device) != new.get(*device))
        .cloned()
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Wiring of a [`DeviceTaintEvictionController`].
#[derive(Clone, Default)]
pub struct DeviceTaintEvictionOptions {
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub queue_metrics: Option<Arc<WorkqueueMetrics>>,
    /// `DRADeviceTaintRules`: watch DeviceTaintRules (resource.k8s.io/v1beta2), evict for
    /// theirs and keep their status. Beta and off by default in v1.36.
    pub rules_enabled: bool,
}

impl std::fmt::Debug for DeviceTaintEvictionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceTaintEvictionOptions")
            .field("queue_metrics", &self.queue_metrics.is_some())
            .field("rules_enabled", &self.rules_enabled)
            .finish()
    }
}

/// Deletes the pods using allocated claims whose devices carry NoExecute taints the claims
/// do not tolerate, as upstream's devicetainteviction `Controller`.
pub struct DeviceTaintEvictionController {
    /// The requests. Test seam: [`super::FakeDeviceTaintEvictionClient`].
    client: Arc<dyn DeviceTaintEvictionClient>,
    /// Pod events, from [`CONTROLLER_NAME`].
    recorder: Arc<dyn EventRecorder>,
    /// The wall clock taints' `timeAdded` is compared with.
    clock: Arc<dyn WallClock>,
    /// The pod cache (read only).
    pods: Lister<Pod>,
    /// The DeviceTaintRule cache, with `DRADeviceTaintRules` (read only).
    rules: Option<Lister<DeviceTaintRule>>,
    /// The informers `run` waits for.
    caches_synced: Vec<InformerSynced>,
    /// Pod deletions and rule status updates.
    queue: RateLimitingQueue<WorkItem>,
    /// The handlers' and workers' shared state.
    state: Mutex<State>,
    /// `device_taint_eviction_controller_*`.
    metrics: DeviceTaintEvictionMetrics,
}

impl std::fmt::Debug for DeviceTaintEvictionController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceTaintEvictionController")
            .field("queue_len", &self.queue.len())
            .field("rules_enabled", &self.rules.is_some())
            .finish_non_exhaustive()
    }
}

/// Registers `f(controller, old, new)` for adds, updates and deletes of `K`.
fn handler<K>(
    weak: &Weak<DeviceTaintEvictionController>,
    f: fn(&DeviceTaintEvictionController, Option<&Arc<K>>, Option<&Arc<K>>),
) -> ResourceEventHandlerFuncs<K>
where
    K: Send + Sync + 'static,
{
    let (w1, w2, w3) = (weak.clone(), weak.clone(), weak.clone());
    ResourceEventHandlerFuncs::<K>::new()
        .add_func(move |obj, _| {
            if let Some(this) = w1.upgrade() {
                f(&this, None, Some(&obj));
            }
        })
        .update_func(move |old, new| {
            if let Some(this) = w2.upgrade() {
                f(&this, Some(&old), Some(&new));
            }
        })
        .delete_func(move |deleted| {
            if let Some(this) = w3.upgrade() {
                f(&this, Some(deleted.object()), None);
            }
        })
}

impl DeviceTaintEvictionController {
    /// The controller kube-controller-manager runs, over the factory's Pod, ResourceClaim,
    /// ResourceSlice and DeviceClass informers (and DeviceTaintRule's with
    /// `DRADeviceTaintRules`), as upstream's `New` + the handler registration of `Run`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: DeviceTaintEvictionOptions,
    ) -> Arc<Self> {
        let pods = factory.pods();
        let claims = factory.informer_for::<ResourceClaim>();
        let slices = factory.informer_for::<ResourceSlice>();
        let classes = factory.informer_for::<DeviceClass>();
        let rules = options
            .rules_enabled
            .then(|| factory.informer_for::<DeviceTaintRule>());
        Arc::new_cyclic(|weak: &Weak<Self>| {
            let mut registrar = InformerRegistrar::new(CONTROLLER_NAME)
                .register(&pods, handler(weak, Self::pod_changed))
                .register(&claims, handler(weak, Self::handle_claim_change))
                .register(&slices, handler(weak, Self::handle_slice_change))
                .wait_for(&classes);
            if let Some(rules) = &rules {
                registrar = registrar.register(rules, handler(weak, Self::handle_rule_change));
            }
            let mut controller = Self::build(
                pods.indexer().clone(),
                rules.as_ref().map(|r| r.indexer().clone()),
                Arc::new(ApiDeviceTaintEvictionClient::new(client)),
                recorder,
                Arc::new(SystemClock),
                options.queue_metrics,
            );
            controller.caches_synced = registrar.finish();
            controller
        })
    }

    /// A controller over bare caches (unit tests fill them and call the handlers and
    /// [`Self::process_next_work_item`] themselves), with an injected wall clock.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        pods: Indexer<Pod>,
        rules: Option<Indexer<DeviceTaintRule>>,
        client: Arc<dyn DeviceTaintEvictionClient>,
        recorder: Arc<dyn EventRecorder>,
        clock: Arc<dyn WallClock>,
    ) -> Arc<Self> {
        Arc::new(Self::build(pods, rules, client, recorder, clock, None))
    }

    fn build(
        pods: Indexer<Pod>,
        rules: Option<Indexer<DeviceTaintRule>>,
        client: Arc<dyn DeviceTaintEvictionClient>,
        recorder: Arc<dyn EventRecorder>,
        clock: Arc<dyn WallClock>,
        queue_metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: CONTROLLER_NAME.to_owned(),
                metrics: queue_metrics,
            },
        );
        Self {
            client,
            recorder,
            clock,
            pods: Lister::new(pods),
            rules: rules.map(Lister::new),
            caches_synced: Vec::new(),
            queue,
            state: Mutex::new(State::new()),
            metrics: DeviceTaintEvictionMetrics::new(&super::metrics::NAMES),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn effects(&self) -> Effects<'_> {
        Effects {
            queue: Some(&self.queue),
            recorder: Some(self.recorder.as_ref()),
            pods: &self.pods,
            now: self.clock.now(),
        }
    }

    /// The work queue.
    pub fn queue(&self) -> &RateLimitingQueue<WorkItem> {
        &self.queue
    }

    /// The controller's `device_taint_eviction_controller_*` metrics, to register.
    pub fn metrics(&self) -> &DeviceTaintEvictionMetrics {
        &self.metrics
    }

    /// The informer handlers (tests call them directly, with the caches already updated).
    pub fn handle_claim_change(
        &self,
        old: Option<&Arc<ResourceClaim>>,
        new: Option<&Arc<ResourceClaim>>,
    ) {
        let fx = self.effects();
        self.state().handle_claim_change(&fx, old, new);
    }

    /// See [`Self::handle_claim_change`].
    pub fn handle_slice_change(
        &self,
        old: Option<&Arc<ResourceSlice>>,
        new: Option<&Arc<ResourceSlice>>,
    ) {
        let fx = self.effects();
        self.state().handle_slice_change(&fx, old, new);
    }

    /// See [`Self::handle_claim_change`].
    pub fn handle_rule_change(
        &self,
        old: Option<&Arc<DeviceTaintRule>>,
        new: Option<&Arc<DeviceTaintRule>>,
    ) {
        let fx = self.effects();
        self.state().handle_rule_change(&fx, old, new);
    }

    /// See [`Self::handle_claim_change`].
    pub fn handle_pod_change(&self, old: Option<&Pod>, new: Option<&Pod>) {
        let fx = self.effects();
        self.state().handle_pod_change(&fx, old, new);
    }

    fn pod_changed(&self, old: Option<&Arc<Pod>>, new: Option<&Arc<Pod>>) {
        self.handle_pod_change(old.map(|p| p.as_ref()), new.map(|p| p.as_ref()));
    }

    /// Whether the pod's deletion is scheduled, and for when (tests).
    pub fn scheduled_eviction(&self, pod: &ObjectRef) -> Option<Timestamp> {
        self.state().delete_pod_at.get(pod).map(|e| e.when)
    }

    /// How often a worker looked at a pod (tests).
    pub fn maybe_delete_pod_count(&self) -> i64 {
        self.state().maybe_delete_pod_count
    }

    /// Waits for the caches, then runs `workers` workers until `cancel` fires (upstream's
    /// `Run`); the queue then shuts down and busy workers finish their item.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tracing::info!(controller = CONTROLLER_NAME, workers, "Starting");
        if !wait_for_synced(CONTROLLER_NAME, &cancel, &self.caches_synced).await {
            self.queue.shut_down();
            return;
        }
        let mut tasks = JoinSet::new();
        for _ in 0..workers.max(1) {
            let (this, cancel) = (Arc::clone(&self), cancel.clone());
            tasks.spawn(async move {
                while !cancel.is_cancelled() && this.process_next_work_item().await {}
            });
        }
        cancel.cancelled().await;
        self.queue.shut_down();
        while let Some(joined) = tasks.join_next().await {
            if let Err(err) = joined {
                tracing::error!(controller = CONTROLLER_NAME, %err, "worker ended abnormally");
            }
        }
        tracing::info!(controller = CONTROLLER_NAME, "Shut down controller");
    }

    /// Takes one item and handles it (upstream's `worker` loop body): a failure comes back
    /// rate-limited, a "not yet" after its delay, anything else is forgotten. False once the
    /// queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        let Some(item) = self.queue.get().await else {
            return false;
        };
        match self.handle_work(&item).await {
            Err(err) => {
                tracing::info!(controller = CONTROLLER_NAME, ?item, %err, "Processing work item failed, will retry");
                self.queue.add_rate_limited(item.clone());
            }
            Ok(again) if !again.is_zero() => {
                self.queue.add_after(item.clone(), again);
            }
            Ok(_) => self.queue.forget(&item),
        }
        self.queue.done(&item);
        true
    }

    async fn handle_work(&self, item: &WorkItem) -> Result<Duration> {
        match item {
            WorkItem::Pod(pod) => self.maybe_delete_pod(pod).await,
            WorkItem::Rule(rule) => self.maybe_update_rule_status(rule).await,
        }
    }

    /// Deletes the pod if it is time (upstream's `maybeDeletePod`): `Ok(delay)` to look again
    /// later, `Ok(0)` when done or no longer needed, an error to retry.
    async fn maybe_delete_pod(&self, pod: &ObjectRef) -> Result<Duration> {
        let (eviction, evicted) = {
            let mut state = self.state();
            state.maybe_delete_pod_count += 1;
            let evicted = state.evicted_pods.has(&pod.uid);
            (state.delete_pod_at.get(pod).cloned(), evicted)
        };
        let Some(eviction) = eviction.filter(|_| !evicted) else {
            // Obsolete.
            return Ok(Duration::ZERO);
        };
        let again = until(eviction.when, self.clock.now());
        if !again.is_zero() {
            // Not yet; maybe the time moved.
            return Ok(again);
        }
        let deleted = match self.add_condition_and_delete_pod(pod).await {
            Ok(()) => true,
            // Done, but not by us: no metric.
            Err(err) if err.is_not_found() => false,
            Err(err) => return Err(err),
        };
        let mut state = self.state();
        state.delete_pod_at.remove(pod);
        state.evicted_pods.add(&pod.uid);
        if !deleted {
            return Ok(Duration::ZERO);
        }
        let latency = self.clock.now().duration_since(eviction.when);
        tracing::info!(controller = CONTROLLER_NAME, %pod, ?latency, reason = %eviction, "Evicted pod by deleting it");
        self.metrics.pod_deleted(latency.as_secs_f64().max(0.0));
        for rule in eviction.reason.iter().filter_map(|r| r.rule()) {
            *state
                .rule_evictions
                .entry(rule.metadata.uid.clone().unwrap_or_default())
                .or_default() += 1;
            // Not at once: the status is computed from the cache, which lags behind.
            self.queue.add_after(rule_item(rule), RULE_STATUS_PERIOD);
        }
        Ok(Duration::ZERO)
    }

    /// Reads the pod, emits `Marking for deletion`, sets `DisruptionTarget` and deletes it
    /// with a UID precondition (upstream's `addConditionAndDeletePod`). A pod already being
    /// deleted needs nothing; one replaced under the same name counts as not found.
    async fn add_condition_and_delete_pod(&self, pod_ref: &ObjectRef) -> Result<()> {
        let pod = self
            .client
            .get_pod(&pod_ref.namespace, &pod_ref.name)
            .await
            .map_err(|source| Error::GetPod {
                pod: pod_ref.to_string(),
                source,
            })?;
        if pod.metadata.uid.as_deref().unwrap_or_default() != pod_ref.uid {
            return Err(Error::Replaced {
                pod: pod_ref.to_string(),
            });
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        self.recorder.event(
            &pod_event_ref(pod_ref),
            EventType::Normal,
            REASON_DEVICE_TAINT_MANAGER_EVICTION,
            MESSAGE_MARKING_FOR_DELETION.to_owned(),
        );
        let mut status = pod.status.clone().unwrap_or_default();
        let condition = PodCondition {
            type_: DISRUPTION_TARGET.to_owned(),
            status: "True".to_owned(),
            reason: Some(REASON_DELETION_BY_DEVICE_TAINT_MANAGER.to_owned()),
            message: Some(MESSAGE_DELETION_BY_DEVICE_TAINT_MANAGER.to_owned()),
            ..PodCondition::default()
        };
        if let Some(changed) = update_pod_condition(&mut status, condition, self.clock.now()) {
            let patch = json!({
                "metadata": {"uid": pod_ref.uid},
                // Conditions merge by type: only this one changes.
                "status": {"conditions": [changed]},
            });
            self.client
                .patch_pod_status(&pod_ref.namespace, &pod_ref.name, &patch)
                .await
                .map_err(|source| Error::PatchPodStatus {
                    pod: pod_ref.to_string(),
                    source,
                })?;
        }
        self.client
            .delete_pod(&pod_ref.namespace, &pod_ref.name, &pod_ref.uid)
            .await
            .map_err(|source| Error::DeletePod {
                pod: pod_ref.to_string(),
                source,
            })
    }

    /// Sets the rule's `EvictionInProgress` condition, at most every [`RULE_STATUS_PERIOD`]
    /// while nothing but counts change (upstream's `maybeUpdateRuleStatus`). For effect `None`
    /// the eviction is simulated on a copy of the state.
    async fn maybe_update_rule_status(&self, rule_ref: &ObjectRef) -> Result<Duration> {
        let Some(rules) = &self.rules else {
            return Ok(Duration::ZERO);
        };
        let Some(rule) = rules.get_cluster(&rule_ref.name) else {
            // Deleted: the item is obsolete.
            return Ok(Duration::ZERO);
        };
        if rule.metadata.uid.as_deref().unwrap_or_default() != rule_ref.uid {
            // Replaced.
            return Ok(Duration::ZERO);
        }
        let now = self.clock.now();
        let existing = existing_condition(&rule).cloned();
        if let Some(existing) = &existing {
            let since: Duration = now
                .duration_since(existing.last_transition_time.0)
                .try_into()
                .unwrap_or(Duration::ZERO);
            if existing.observed_generation == rule.metadata.generation
                && since < RULE_STATUS_PERIOD
            {
                return Ok(RULE_STATUS_PERIOD - since);
            }
        }
        let condition = {
            let state = self.state();
            let mut counts = RuleCounts {
                evicted_pods: state
                    .rule_evictions
                    .get(rule_ref.uid.as_str())
                    .copied()
                    .unwrap_or_default(),
                ..RuleCounts::default()
            };
            match rule.spec.taint.effect.as_str() {
                EFFECT_NONE => {
                    // Pretend the effect were NoExecute, on a copy: no queue, no events.
                    let mut evicting = (*rule).clone();
                    evicting.spec.taint.effect = EFFECT_NO_EXECUTE.to_owned();
                    let mut simulated = State {
                        delete_pod_at: HashMap::new(),
                        evicted_pods: UidCache::new(1),
                        maybe_delete_pod_count: 0,
                        allocated_claims: state.allocated_claims.clone(),
                        pools: state.pools.clone(),
                        evicting_rules: BTreeMap::new(),
                        rule_evictions: HashMap::new(),
                    };
                    let fx = Effects {
                        queue: None,
                        recorder: None,
                        pods: &self.pods,
                        now,
                    };
                    simulated.handle_rule_change(&fx, Some(&rule), Some(&Arc::new(evicting)));
                    (counts.pending_pods, counts.pending_namespaces) =
                        simulated.count_pending_pods(&self.pods, &rule);
                    (
                        counts.tainted_slice_devices,
                        counts.tainted_allocated_devices,
                    ) = simulated.count_tainted_devices(&rule);
                }
                EFFECT_NO_EXECUTE => {
                    (counts.pending_pods, counts.pending_namespaces) =
                        state.count_pending_pods(&self.pods, &rule);
                }
                _ => {}
            }
            let last = existing.as_ref().map_or(Time(Timestamp::UNIX_EPOCH), |c| {
                c.last_transition_time.clone()
            });
            eviction_condition(&rule, &counts, last)
        };
        if existing.as_ref() != Some(&condition) {
            let mut condition = condition;
            condition.last_transition_time = Time(now);
            tracing::debug!(controller = CONTROLLER_NAME, rule = %rule_ref, ?condition, "Calculated new condition");
            self.client
                .apply_rule_status(&rule_ref.name, &rule_ref.uid, &condition, CONTROLLER_NAME)
                .await
                .map_err(|source| Error::ApplyRuleStatus {
                    rule: rule_ref.name.clone(),
                    source,
                })?;
        }
        Ok(Duration::ZERO)
    }
}
