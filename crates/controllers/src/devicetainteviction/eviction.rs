//! When the pods of an allocated claim must go and which taints say so: `trackedTaint`, `evictionAndReason`, `claimEvictionTime` and `ruleMatchesDevice` of upstream's `device_taint_eviction.go`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::resource::v1::{
    Device, DeviceRequestAllocationResult, DeviceTaint, ResourceClaim, ResourceSlice,
};
use k8s_openapi::api::resource::v1beta2::DeviceTaintRule;

use super::pools::{Pool, PoolId, device_taints};
use super::tolerations::{EFFECT_NO_EXECUTE, tolerates_taint};

/// One taint that makes pods go, with where it comes from (upstream's `trackedTaint`).
/// Equality is identity, as upstream's pointer comparison: the same rule or slice object.
#[derive(Clone, Debug)]
pub enum TrackedTaint {
    /// The taint of a DeviceTaintRule.
    Rule(Arc<DeviceTaintRule>),
    /// Taint number `index` of device `device` in `slice`.
    Slice {
        /// The slice publishing the device.
        slice: Arc<ResourceSlice>,
        /// The device's name.
        device: String,
        /// The taint's index in the device's `taints`.
        index: usize,
    },
}

impl PartialEq for TrackedTaint {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Rule(a), Self::Rule(b)) => Arc::ptr_eq(a, b),
            (
                Self::Slice {
                    slice: a,
                    device: da,
                    index: ia,
                },
                Self::Slice {
                    slice: b,
                    device: db,
                    index: ib,
                },
            ) => Arc::ptr_eq(a, b) && da == db && ia == ib,
            _ => false,
        }
    }
}

/// The taint of a rule in the v1 form (upstream's `deviceTaint` for a rule).
pub fn rule_taint(rule: &DeviceTaintRule) -> DeviceTaint {
    let taint = &rule.spec.taint;
    DeviceTaint {
        key: taint.key.clone(),
        value: taint.value.clone(),
        effect: taint.effect.clone(),
        time_added: taint.time_added.clone(),
    }
}

impl TrackedTaint {
    /// The taint itself (upstream's `deviceTaint`).
    pub fn device_taint(&self) -> Option<DeviceTaint> {
        match self {
            Self::Rule(rule) => Some(rule_taint(rule)),
            Self::Slice {
                slice,
                device,
                index,
            } => slice
                .spec
                .devices
                .iter()
                .flatten()
                .find(|d| &d.name == device)
                .and_then(|d| device_taints(d).get(*index))
                .cloned(),
        }
    }

    /// The rule, if the taint comes from one.
    pub fn rule(&self) -> Option<&Arc<DeviceTaintRule>> {
        match self {
            Self::Rule(rule) => Some(rule),
            Self::Slice { .. } => None,
        }
    }

    /// Upstream's order (`Compare`): rules first, by name; then slice taints by driver, pool,
    /// device and index.
    pub fn compare(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Rule(a), Self::Rule(b)) => a.metadata.name.cmp(&b.metadata.name),
            (Self::Rule(_), Self::Slice { .. }) => Ordering::Less,
            (Self::Slice { .. }, Self::Rule(_)) => Ordering::Greater,
            (
                Self::Slice {
                    slice: a,
                    device: da,
                    index: ia,
                },
                Self::Slice {
                    slice: b,
                    device: db,
                    index: ib,
                },
            ) => a
                .spec
                .driver
                .cmp(&b.spec.driver)
                .then_with(|| a.spec.pool.name.cmp(&b.spec.pool.name))
                .then_with(|| da.cmp(db))
                .then_with(|| ia.cmp(ib)),
        }
    }
}

impl fmt::Display for TrackedTaint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rule(rule) => write!(
                f,
                "DeviceTaintRule {}",
                rule.metadata.name.as_deref().unwrap_or_default()
            ),
            Self::Slice {
                slice,
                device,
                index,
            } => write!(
                f,
                "ResourceSlice {} {}/{}/{device} taint #{index}",
                slice.metadata.name.as_deref().unwrap_or_default(),
                slice.spec.driver,
                slice.spec.pool.name,
            ),
        }
    }
}

/// When eviction starts and every taint that asks for it, sorted by
/// [`TrackedTaint::compare`] (upstream's `evictionAndReason`).
#[derive(Clone, Debug, PartialEq)]
pub struct EvictionAndReason {
    /// When the pods must be deleted.
    pub when: Timestamp,
    /// Why; never empty.
    pub reason: Vec<TrackedTaint>,
}

impl fmt::Display for EvictionAndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (", self.when)?;
        for (i, taint) in self.reason.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{taint}")?;
        }
        f.write_str(")")
    }
}

/// Upstream's `evictionAndReason.equal`: false when either is missing.
pub fn same_eviction(a: Option<&EvictionAndReason>, b: Option<&EvictionAndReason>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a == b)
}

/// Whether `rule` selects the device `driver/pool/device` (upstream's `ruleMatchesDevice`): a
/// rule without a selector selects nothing; each field given must match.
pub fn rule_matches_device(rule: &DeviceTaintRule, driver: &str, pool: &str, device: &str) -> bool {
    let Some(selector) = &rule.spec.device_selector else {
        return false;
    };
    let differs = |want: &Option<String>, have: &str| want.as_deref().is_some_and(|w| w != have);
    !(differs(&selector.driver, driver)
        || differs(&selector.pool, pool)
        || differs(&selector.device, device))
}

/// The allocation results of `claim`.
pub fn allocation_results(claim: &ResourceClaim) -> &[DeviceRequestAllocationResult] {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default()
}

/// Every NoExecute taint of the allocated device: the slice's (from the device as published)
/// first, then each evicting rule selecting it (upstream's `allEvictingDeviceTaints`).
fn evicting_taints(
    allocated: &DeviceRequestAllocationResult,
    published: Option<(&Arc<ResourceSlice>, &Device)>,
    evicting_rules: &BTreeMap<String, Arc<DeviceTaintRule>>,
) -> Vec<(TrackedTaint, DeviceTaint)> {
    let mut taints = Vec::new();
    if let Some((slice, device)) = published {
        for (index, taint) in device_taints(device).iter().enumerate() {
            if taint.effect == EFFECT_NO_EXECUTE {
                taints.push((
                    TrackedTaint::Slice {
                        slice: Arc::clone(slice),
                        device: device.name.clone(),
                        index,
                    },
                    taint.clone(),
                ));
            }
        }
    }
    for rule in evicting_rules.values() {
        if rule_matches_device(rule, &allocated.driver, &allocated.pool, &allocated.device) {
            taints.push((TrackedTaint::Rule(Arc::clone(rule)), rule_taint(rule)));
        }
    }
    taints
}

/// When a taint counts from. Upstream's API server always sets `timeAdded`; kcm's does not
/// default it, so a taint without one counts as added long ago: it evicts at once.
fn time_added(taint: &DeviceTaint) -> Timestamp {
    taint
        .time_added
        .as_ref()
        .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
}

/// The earliest time any NoExecute taint of the claim's allocated devices asks its pods to go,
/// with every such taint, or `None` when all are tolerated (upstream's `claimEvictionTime`).
///
/// A taint counts from its `timeAdded`; a toleration of the request with effect NoExecute
/// that matches it either ignores it (no `tolerationSeconds`) or delays it by the smallest
/// `tolerationSeconds` (negative counts as 0).
pub fn claim_eviction_time(
    claim: &ResourceClaim,
    pools: &HashMap<PoolId, Pool>,
    evicting_rules: &BTreeMap<String, Arc<DeviceTaintRule>>,
) -> Option<EvictionAndReason> {
    let mut when: Option<Timestamp> = None;
    let mut reason: Vec<TrackedTaint> = Vec::new();
    for allocated in allocation_results(claim) {
        let id = PoolId {
            driver: allocated.driver.clone(),
            pool: allocated.pool.clone(),
        };
        let published = pools.get(&id).and_then(|p| p.device(&allocated.device));
        let tolerations = allocated.tolerations.as_deref().unwrap_or_default();
        'taints: for (tracked, taint) in evicting_taints(allocated, published, evicting_rules) {
            let mut seconds: Option<i64> = None;
            for toleration in tolerations {
                if toleration.effect.as_deref() != Some(EFFECT_NO_EXECUTE)
                    || !tolerates_taint(toleration, &taint)
                {
                    continue;
                }
                let Some(s) = toleration.toleration_seconds else {
                    // Tolerated forever: this taint does not count.
                    continue 'taints;
                };
                let s = s.max(0);
                seconds = Some(seconds.map_or(s, |m| m.min(s)));
            }
            let mut at = time_added(&taint);
            if let Some(s) = seconds {
                at = at
                    .checked_add(SignedDuration::from_secs(s))
                    .unwrap_or(Timestamp::MAX);
            }
            if !reason.contains(&tracked) {
                reason.push(tracked);
            }
            when = Some(when.map_or(at, |w| w.min(at)));
        }
    }
    let when = when?;
    reason.sort_by(TrackedTaint::compare);
    Some(EvictionAndReason { when, reason })
}

/// Joins a pod's evictions from two claims: the reasons merged in order, the earlier time
/// (upstream's loop in `podEvictionTime`).
pub fn join(current: EvictionAndReason, other: &EvictionAndReason) -> EvictionAndReason {
    let mut reason = other.reason.clone();
    for taint in current.reason {
        if let Err(at) = reason.binary_search_by(|probe| probe.compare(&taint)) {
            reason.insert(at, taint);
        }
    }
    EvictionAndReason {
        when: current.when.min(other.when),
        reason,
    }
}
