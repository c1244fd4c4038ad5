//! The claim status of a volume expansion, as external-resizer and the kubelet write it: condition and `allocatedResourceStatuses` names, their merges, and the merge patch that carries them.
//!
//! Both writers go through `persistentvolumeclaims/status` with a patch computed from the
//! claim they read and the claim they want, pinned to the read `resourceVersion` where upstream
//! pins it (`addResourceVersionCheck`), so a stale writer gets a Conflict. Upstream sends a
//! strategic merge patch from `CreateTwoWayMergePatch`; this sends the RFC 7386 merge patch of
//! the same change (`conditions` whole, map entries set or `null`), which the API server applies
//! to the same result.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolumeClaim, PersistentVolumeClaimCondition,
    PersistentVolumeClaimStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Map, Value, json};

use crate::quantity::Quantity as Milli;

/// The resource name of a claim's size.
pub const STORAGE: &str = "storage";

/// Condition: the volume is being resized in the control plane (`PersistentVolumeClaimResizing`).
pub const RESIZING: &str = "Resizing";
/// Condition: the control-plane resize is done and the file system waits for the node
/// (`PersistentVolumeClaimFileSystemResizePending`).
pub const FILE_SYSTEM_RESIZE_PENDING: &str = "FileSystemResizePending";
/// Condition: the control-plane resize failed (`PersistentVolumeClaimControllerResizeError`).
pub const CONTROLLER_RESIZE_ERROR: &str = "ControllerResizeError";
/// Condition: the node resize failed (`PersistentVolumeClaimNodeResizeError`).
pub const NODE_RESIZE_ERROR: &str = "NodeResizeError";

/// `allocatedResourceStatuses` value: the resizer started the control-plane resize.
pub const CONTROLLER_RESIZE_IN_PROGRESS: &str = "ControllerResizeInProgress";
/// `allocatedResourceStatuses` value: the control-plane resize failed with a final error.
pub const CONTROLLER_RESIZE_INFEASIBLE: &str = "ControllerResizeInfeasible";
/// `allocatedResourceStatuses` value: the control-plane resize is done; the node must expand.
pub const NODE_RESIZE_PENDING: &str = "NodeResizePending";
/// `allocatedResourceStatuses` value: the kubelet started expanding on the node.
pub const NODE_RESIZE_IN_PROGRESS: &str = "NodeResizeInProgress";
/// `allocatedResourceStatuses` value: the node resize failed with a final error.
pub const NODE_RESIZE_INFEASIBLE: &str = "NodeResizeInfeasible";

/// The message of the `FileSystemResizePending` condition, as external-resizer's
/// `markForPendingNodeExpansion` (and the kubelet's `MarkForFSResize`).
pub const FILE_SYSTEM_RESIZE_PENDING_MESSAGE: &str =
    "Waiting for user to (re-)start a pod to finish file system resize of volume on node.";

/// The conditions a resize owns (`knownResizeConditions` of `pkg/volume/util/resize_util.go`);
/// every other condition of a claim is kept as it is.
const RESIZE_CONDITIONS: [&str; 4] = [
    RESIZING,
    FILE_SYSTEM_RESIZE_PENDING,
    CONTROLLER_RESIZE_ERROR,
    NODE_RESIZE_ERROR,
];

/// `new` merged into `old`, as upstream's `MergeResizeConditionOnPVC`: conditions that are not
/// resize conditions stay; a resize condition of a type in `new` is replaced when its status
/// changed (kept, with its transition time, when not); other resize conditions stay only with
/// `keep_old`; the types of `new` not seen are appended in order.
pub fn merge_resize_conditions(
    old: &[PersistentVolumeClaimCondition],
    new: Vec<PersistentVolumeClaimCondition>,
    keep_old: bool,
) -> Vec<PersistentVolumeClaimCondition> {
    let mut pending: Vec<Option<PersistentVolumeClaimCondition>> =
        new.into_iter().map(Some).collect();
    let mut merged = Vec::with_capacity(old.len() + pending.len());
    for condition in old {
        if !RESIZE_CONDITIONS.contains(&condition.type_.as_str()) {
            merged.push(condition.clone());
            continue;
        }
        let replacement = pending
            .iter_mut()
            .find(|c| c.as_ref().is_some_and(|c| c.type_ == condition.type_));
        match replacement {
            Some(slot) => {
                if let Some(replacement) = slot.take() {
                    if replacement.status != condition.status {
                        merged.push(replacement);
                    } else {
                        merged.push(condition.clone());
                    }
                }
            }
            None if keep_old => merged.push(condition.clone()),
            None => {}
        }
    }
    merged.extend(pending.into_iter().flatten());
    merged
}

/// Stores `conditions` in `status`, none as an absent list (Go's `omitempty`).
pub fn set_conditions(
    status: &mut PersistentVolumeClaimStatus,
    conditions: Vec<PersistentVolumeClaimCondition>,
) {
    status.conditions = (!conditions.is_empty()).then_some(conditions);
}

/// A `True` condition of `type_` that transitioned at `now`.
pub fn true_condition(
    type_: &str,
    message: Option<String>,
    now: jiff::Timestamp,
) -> PersistentVolumeClaimCondition {
    PersistentVolumeClaimCondition {
        type_: type_.to_owned(),
        status: "True".to_owned(),
        last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now)),
        message,
        ..Default::default()
    }
}

/// Whether `claim` has the condition `type_` with status `True`.
pub fn has_true_condition(claim: &PersistentVolumeClaim, type_: &str) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// The claim's `allocatedResourceStatuses.storage`, if any.
pub fn resize_status(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocated_resource_statuses.as_ref())
        .and_then(|m| m.get(STORAGE))
        .map(String::as_str)
}

/// Sets `allocatedResourceStatuses.storage` (upstream's `mergeStorageResourceStatus`), or
/// removes it with `None`, dropping the map once empty (as `MarkFSResizeFinished`).
pub fn set_resize_status(status: &mut PersistentVolumeClaimStatus, value: Option<&str>) {
    match value {
        Some(v) => {
            status
                .allocated_resource_statuses
                .get_or_insert_with(BTreeMap::new)
                .insert(STORAGE.to_owned(), v.to_owned());
        }
        None => {
            if let Some(map) = status.allocated_resource_statuses.as_mut() {
                map.remove(STORAGE);
                if map.is_empty() {
                    status.allocated_resource_statuses = None;
                }
            }
        }
    }
}

/// The storage entry of a resource map (`capacity`, `allocatedResources`, a request).
pub fn storage_of(map: Option<&BTreeMap<String, Quantity>>) -> Option<&Quantity> {
    map.and_then(|m| m.get(STORAGE))
}

/// A storage quantity in milli-bytes for comparisons; absent or malformed is zero.
pub fn milli(q: Option<&Quantity>) -> Milli {
    Milli::parse_opt(q).unwrap_or(Milli::ZERO)
}

/// The claim's requested size (`spec.resources.requests.storage`).
pub fn requested(claim: &PersistentVolumeClaim) -> Option<&Quantity> {
    storage_of(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref()),
    )
}

/// The claim's size in `status.capacity.storage`.
pub fn capacity(claim: &PersistentVolumeClaim) -> Option<&Quantity> {
    storage_of(claim.status.as_ref().and_then(|s| s.capacity.as_ref()))
}

/// The claim's `status.allocatedResources.storage`.
pub fn allocated(claim: &PersistentVolumeClaim) -> Option<&Quantity> {
    storage_of(
        claim
            .status
            .as_ref()
            .and_then(|s| s.allocated_resources.as_ref()),
    )
}

/// The RFC 7386 merge patch turning `old` into `new`: changed members of objects recursively,
/// removed members as `null`, everything else (arrays included) whole. `None` when equal.
fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for (key, value) in new {
                match old.get(key) {
                    Some(before) => {
                        if let Some(change) = merge_diff(before, value) {
                            patch.insert(key.clone(), change);
                        }
                    }
                    None => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            for key in old.keys() {
                if !new.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ if old == new => None,
        _ => Some(new.clone()),
    }
}

/// The status patch from `old` to `new` (their `status` only), with `metadata.resourceVersion`
/// of `old` when `check_resource_version` (upstream's `addResourceVersion`).
pub fn status_patch(
    old: &PersistentVolumeClaim,
    new: &PersistentVolumeClaim,
    check_resource_version: bool,
) -> Value {
    let as_json = |c: &PersistentVolumeClaim| {
        serde_json::to_value(c.status.clone().unwrap_or_default())
            .unwrap_or_else(|_| Value::Object(Map::new()))
    };
    let status = merge_diff(&as_json(old), &as_json(new)).unwrap_or_else(|| json!({}));
    let mut patch = json!({ "status": status });
    if check_resource_version && let Some(rv) = old.metadata.resource_version.as_deref() {
        patch["metadata"] = json!({ "resourceVersion": rv });
    }
    patch
}

/// The reference an event about `claim` carries, as `reference.GetReference`.
pub fn claim_reference(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("PersistentVolumeClaim".to_owned()),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(type_: &str, status: &str) -> PersistentVolumeClaimCondition {
        PersistentVolumeClaimCondition {
            type_: type_.into(),
            status: status.into(),
            ..Default::default()
        }
    }

    fn types(conditions: &[PersistentVolumeClaimCondition]) -> Vec<(&str, &str)> {
        conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect()
    }

    /// Cases of upstream's `TestMergeResizeCondition` (resize_util_test.go).
    #[test]
    fn resize_conditions_merge_as_upstream() {
        struct Case {
            name: &'static str,
            old: Vec<PersistentVolumeClaimCondition>,
            new: Vec<PersistentVolumeClaimCondition>,
            keep_old: bool,
            want: Vec<(&'static str, &'static str)>,
        }
        let cases = [
            Case {
                name: "empty old conditions",
                old: vec![],
                new: vec![condition(RESIZING, "True")],
                keep_old: false,
                want: vec![(RESIZING, "True")],
            },
            Case {
                name: "adding a new condition drops the other resize conditions",
                old: vec![condition(RESIZING, "True")],
                new: vec![condition(FILE_SYSTEM_RESIZE_PENDING, "True")],
                keep_old: false,
                want: vec![(FILE_SYSTEM_RESIZE_PENDING, "True")],
            },
            Case {
                name: "keeping old resize conditions",
                old: vec![condition(RESIZING, "True")],
                new: vec![condition(FILE_SYSTEM_RESIZE_PENDING, "True")],
                keep_old: true,
                want: vec![(RESIZING, "True"), (FILE_SYSTEM_RESIZE_PENDING, "True")],
            },
            Case {
                name: "no new conditions clear the resize conditions only",
                old: vec![
                    condition(RESIZING, "True"),
                    condition("Ready", "True"),
                    condition(FILE_SYSTEM_RESIZE_PENDING, "True"),
                ],
                new: vec![],
                keep_old: false,
                want: vec![("Ready", "True")],
            },
            Case {
                name: "a status change replaces the condition",
                old: vec![condition(RESIZING, "True")],
                new: vec![condition(RESIZING, "False")],
                keep_old: false,
                want: vec![(RESIZING, "False")],
            },
        ];
        for case in cases {
            let merged = merge_resize_conditions(&case.old, case.new, case.keep_old);
            assert_eq!(types(&merged), case.want, "{}", case.name);
        }
    }

    #[test]
    fn an_unchanged_condition_keeps_its_transition_time() {
        let mut old = condition(RESIZING, "True");
        old.message = Some("old".into());
        let merged = merge_resize_conditions(
            std::slice::from_ref(&old),
            vec![condition(RESIZING, "True")],
            false,
        );
        assert_eq!(merged, vec![old]);
    }

    #[test]
    fn the_status_patch_sets_and_removes_members_and_pins_the_resource_version() {
        let old: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "default", "resourceVersion": "7"},
            "status": {
                "phase": "Bound",
                "capacity": {"storage": "1Gi"},
                "allocatedResources": {"storage": "2Gi"},
                "allocatedResourceStatuses": {"storage": "NodeResizePending"},
                "conditions": [{"type": "FileSystemResizePending", "status": "True"}],
            },
        }))
        .expect("claim");
        let mut new = old.clone();
        if let Some(status) = new.status.as_mut() {
            status
                .capacity
                .get_or_insert_with(BTreeMap::new)
                .insert(STORAGE.into(), Quantity("2Gi".into()));
            set_resize_status(status, None);
            let merged = merge_resize_conditions(
                status.conditions.as_deref().unwrap_or_default(),
                vec![],
                false,
            );
            set_conditions(status, merged);
        }
        assert_eq!(
            status_patch(&old, &new, true),
            json!({
                "metadata": {"resourceVersion": "7"},
                "status": {
                    "capacity": {"storage": "2Gi"},
                    "allocatedResourceStatuses": null,
                    "conditions": null,
                },
            })
        );
        assert_eq!(status_patch(&old, &old, false), json!({"status": {}}));
        let mut applied = serde_json::to_value(&old).expect("json");
        json_patch::merge(&mut applied, &status_patch(&old, &new, false));
        let applied: PersistentVolumeClaim = serde_json::from_value(applied).expect("claim");
        assert_eq!(applied.status, new.status);
    }
}
