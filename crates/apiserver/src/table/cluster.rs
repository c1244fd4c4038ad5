//! Rows of the storage and cluster kinds: PersistentVolume, PersistentVolumeClaim, ResourceQuota, ComponentStatus, RuntimeClass, and upstream's default NAME / CREATED AT row.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Row;
use super::duration::since;
use super::fields::{get, is_deleting, list_at, name, str_at, time_at};

fn age(obj: &Value, now: Timestamp) -> Value {
    json!(since(time_at(obj, &["metadata", "creationTimestamp"]), now))
}

/// `RWO,ROX,RWX,RWOP` in that order, each once (upstream's `GetAccessModesAsString`).
fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|v| v.as_str() == Some(m));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// The beta storage class annotation, else `spec.storageClassName` (upstream's
/// `GetPersistentVolumeClass` / `GetPersistentVolumeClaimClass`).
fn storage_class(obj: &Value) -> &str {
    get(
        obj,
        &[
            "metadata",
            "annotations",
            "volume.beta.kubernetes.io/storage-class",
        ],
    )
    .and_then(Value::as_str)
    .unwrap_or_else(|| str_at(obj, &["spec", "storageClassName"]))
}

/// A phase, or `Terminating` while the object is being deleted.
fn phase(obj: &Value) -> &str {
    if is_deleting(obj) {
        "Terminating"
    } else {
        str_at(obj, &["status", "phase"])
    }
}

/// A quantity as Go's zero-valued `Quantity.String()` prints a missing one.
fn quantity_at<'a>(obj: &'a Value, path: &[&str]) -> &'a str {
    get(obj, path).and_then(Value::as_str).unwrap_or("0")
}

fn unset_or<'a>(obj: &'a Value, path: &[&str]) -> &'a str {
    get(obj, path)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("<unset>")
}

/// upstream's `printPersistentVolume`.
pub(super) fn persistent_volume(obj: &Value, now: Timestamp) -> Row {
    let claim = match get(obj, &["spec", "claimRef"]) {
        Some(c) if c.is_object() => {
            format!("{}/{}", str_at(c, &["namespace"]), str_at(c, &["name"]))
        }
        _ => String::new(),
    };
    Row::new(vec![
        json!(name(obj)),
        json!(quantity_at(obj, &["spec", "capacity", "storage"])),
        json!(access_modes(list_at(obj, &["spec", "accessModes"]))),
        json!(str_at(obj, &["spec", "persistentVolumeReclaimPolicy"])),
        json!(phase(obj)),
        json!(claim),
        json!(storage_class(obj)),
        json!(unset_or(obj, &["spec", "volumeAttributesClassName"])),
        json!(str_at(obj, &["status", "reason"])),
        age(obj, now),
        json!(unset_or(obj, &["spec", "volumeMode"])),
    ])
}

/// upstream's `printPersistentVolumeClaim`: capacity and access modes only once bound.
pub(super) fn persistent_volume_claim(obj: &Value, now: Timestamp) -> Row {
    let volume = str_at(obj, &["spec", "volumeName"]);
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            quantity_at(obj, &["status", "capacity", "storage"]).to_owned(),
            access_modes(list_at(obj, &["status", "accessModes"])),
        )
    };
    Row::new(vec![
        json!(name(obj)),
        json!(phase(obj)),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(storage_class(obj)),
        json!(unset_or(obj, &["spec", "volumeAttributesClassName"])),
        age(obj, now),
        json!(unset_or(obj, &["spec", "volumeMode"])),
    ])
}

/// upstream's `printResourceQuota`: `resource: used/hard` for each hard limit, sorted, the
/// `limits.*` ones in their own column.
pub(super) fn resource_quota(obj: &Value, now: Timestamp) -> Row {
    let mut requests = Vec::new();
    let mut limits = Vec::new();
    let hard = get(obj, &["spec", "hard"]).and_then(Value::as_object);
    for resource in hard.into_iter().flat_map(|h| h.keys()) {
        let used = quantity_at(obj, &["status", "used", resource]);
        let limit = quantity_at(obj, &["status", "hard", resource]);
        let cell = format!("{resource}: {used}/{limit}");
        if resource.split('.').next() == Some("limits") && resource.contains('.') {
            limits.push(cell);
        } else {
            requests.push(cell);
        }
    }
    Row::new(vec![
        json!(name(obj)),
        age(obj, now),
        json!(requests.join(", ")),
        json!(limits.join(", ")),
    ])
}

/// upstream's `printComponentStatus`: the `Healthy` condition.
pub(super) fn component_status(obj: &Value, _now: Timestamp) -> Row {
    let healthy = list_at(obj, &["conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == "Healthy");
    let (status, message, error) = match healthy {
        Some(c) => (
            if str_at(c, &["status"]) == "True" {
                "Healthy"
            } else {
                "Unhealthy"
            },
            str_at(c, &["message"]),
            str_at(c, &["error"]),
        ),
        None => ("Unknown", "", ""),
    };
    Row::new(vec![
        json!(name(obj)),
        json!(status),
        json!(message),
        json!(error),
    ])
}

/// upstream's `printRuntimeClass`.
pub(super) fn runtime_class(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["handler"])),
        age(obj, now),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("now")
    }

    fn texts(row: Row) -> Vec<String> {
        row.cells
            .iter()
            .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned))
            .collect()
    }

    #[test]
    fn volume_rows() {
        let pv = json!({"metadata": {"name": "pv-1", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "manual",
                "claimRef": {"namespace": "default", "name": "data"}, "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}});
        assert_eq!(
            texts(persistent_volume(&pv, now())),
            [
                "pv-1",
                "10Gi",
                "RWO,RWX",
                "Retain",
                "Bound",
                "default/data",
                "manual",
                "<unset>",
                "",
                "60m",
                "Filesystem"
            ]
        );
        let pending = json!({"metadata": {"name": "data", "creationTimestamp": "2024-05-01T11:59:30Z"},
            "spec": {"resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"},
            "status": {"phase": "Pending"}});
        assert_eq!(
            texts(persistent_volume_claim(&pending, now())),
            [
                "data",
                "Pending",
                "",
                "",
                "",
                "",
                "<unset>",
                "30s",
                "Filesystem"
            ]
        );
        let bound = json!({"metadata": {"name": "data", "deletionTimestamp": "2024-05-01T11:59:00Z"},
            "spec": {"volumeName": "pv-1", "storageClassName": "manual"},
            "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOncePod"]}});
        assert_eq!(
            texts(persistent_volume_claim(&bound, now()))[..6],
            ["data", "Terminating", "pv-1", "10Gi", "RWOP", "manual"]
        );
    }

    #[test]
    fn quota_component_runtime_class_and_created_at_rows() {
        let quota = json!({"metadata": {"name": "q", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "spec": {"hard": {"pods": "10", "requests.cpu": "1", "limits.memory": "2Gi"}},
            "status": {"hard": {"pods": "10", "requests.cpu": "1", "limits.memory": "2Gi"},
                "used": {"pods": "3", "limits.memory": "512Mi"}}});
        assert_eq!(
            texts(resource_quota(&quota, now())),
            [
                "q",
                "60m",
                "pods: 3/10, requests.cpu: 0/1",
                "limits.memory: 512Mi/2Gi"
            ]
        );
        let cs = json!({"metadata": {"name": "etcd-0"},
            "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]});
        assert_eq!(
            texts(component_status(&cs, now())),
            ["etcd-0", "Healthy", "ok", ""]
        );
        let rc = json!({"metadata": {"name": "gvisor", "creationTimestamp": "2024-05-01T11:00:00Z"}, "handler": "runsc"});
        assert_eq!(texts(runtime_class(&rc, now())), ["gvisor", "runsc", "60m"]);
    }
}
