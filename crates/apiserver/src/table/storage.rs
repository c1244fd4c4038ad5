//! Rows of the storage.k8s.io kinds: StorageClass, CSIDriver, CSINode, CSIStorageCapacity, VolumeAttachment, VolumeAttributesClass.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Row;
use super::duration::since;
use super::fields::{get, list_at, name, str_at, time_at};

/// The annotation marking the default StorageClass, and its beta predecessor.
const DEFAULT_CLASS_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];

fn age(obj: &Value, now: Timestamp) -> Value {
    json!(since(time_at(obj, &["metadata", "creationTimestamp"]), now))
}

/// A `*bool` field: its value, or `default` when unset.
fn bool_or(obj: &Value, path: &[&str], default: bool) -> bool {
    get(obj, path).and_then(Value::as_bool).unwrap_or(default)
}

/// upstream's `printStorageClass`: NAME gains ` (default)` on the default class; unset
/// policies print as their defaults.
pub(super) fn storage_class(obj: &Value, now: Timestamp) -> Row {
    let is_default = DEFAULT_CLASS_ANNOTATIONS
        .iter()
        .any(|key| str_at(obj, &["metadata", "annotations", key]) == "true");
    let mut class_name = name(obj).to_owned();
    if is_default {
        class_name.push_str(" (default)");
    }
    let or = |v: &str, default: &'static str| {
        if v.is_empty() {
            default.to_owned()
        } else {
            v.to_owned()
        }
    };
    Row::new(vec![
        json!(class_name),
        json!(str_at(obj, &["provisioner"])),
        json!(or(str_at(obj, &["reclaimPolicy"]), "Delete")),
        json!(or(str_at(obj, &["volumeBindingMode"]), "Immediate")),
        json!(bool_or(obj, &["allowVolumeExpansion"], false)),
        age(obj, now),
    ])
}

/// The annotation marking the default VolumeAttributesClass (upstream's
/// `AlphaIsDefaultVolumeAttributesClassAnnotation`).
const DEFAULT_VOLUME_ATTRIBUTES_CLASS_ANNOTATION: &str =
    "volumeattributesclass.alpha.kubernetes.io/is-default-class";

/// upstream's `printVolumeAttributesClass`: NAME gains ` (default)` on the default class.
pub(super) fn volume_attributes_class(obj: &Value, now: Timestamp) -> Row {
    let mut class_name = name(obj).to_owned();
    if str_at(
        obj,
        &[
            "metadata",
            "annotations",
            DEFAULT_VOLUME_ATTRIBUTES_CLASS_ANNOTATION,
        ],
    ) == "true"
    {
        class_name.push_str(" (default)");
    }
    Row::new(vec![
        json!(class_name),
        json!(str_at(obj, &["driverName"])),
        age(obj, now),
    ])
}

/// upstream's `printCSIDriver`.
pub(super) fn csi_driver(obj: &Value, now: Timestamp) -> Row {
    let modes: Vec<&str> = list_at(obj, &["spec", "volumeLifecycleModes"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let modes = if modes.is_empty() {
        "<none>".to_owned()
    } else {
        modes.join(",")
    };
    let token_requests = match get(obj, &["spec", "tokenRequests"]).and_then(Value::as_array) {
        None => "<unset>".to_owned(),
        Some(requests) => requests
            .iter()
            .map(|r| str_at(r, &["audience"]))
            .collect::<Vec<_>>()
            .join(","),
    };
    Row::new(vec![
        json!(name(obj)),
        json!(bool_or(obj, &["spec", "attachRequired"], true)),
        json!(bool_or(obj, &["spec", "podInfoOnMount"], false)),
        json!(bool_or(obj, &["spec", "storageCapacity"], false)),
        json!(token_requests),
        json!(bool_or(obj, &["spec", "requiresRepublish"], false)),
        json!(modes),
        age(obj, now),
    ])
}

/// upstream's `printCSINode`.
pub(super) fn csi_node(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(list_at(obj, &["spec", "drivers"]).len()),
        age(obj, now),
    ])
}

/// upstream's `printCSIStorageCapacity`.
pub(super) fn csi_storage_capacity(obj: &Value, _now: Timestamp) -> Row {
    let capacity = get(obj, &["capacity"])
        .and_then(Value::as_str)
        .unwrap_or("<unset>");
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["storageClassName"])),
        json!(capacity),
    ])
}

/// upstream's `printVolumeAttachment`.
pub(super) fn volume_attachment(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "attacher"])),
        json!(str_at(obj, &["spec", "source", "persistentVolumeName"])),
        json!(str_at(obj, &["spec", "nodeName"])),
        json!(bool_or(obj, &["status", "attached"], false)),
        age(obj, now),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("now")
    }

    const CREATED: &str = "2024-05-01T11:00:00Z";

    #[test]
    fn storage_class_rows_mark_the_default_and_print_defaults() {
        let sc = json!({"metadata": {"name": "standard", "creationTimestamp": CREATED,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer"});
        assert_eq!(
            storage_class(&sc, now()).cells,
            [
                json!("standard (default)"),
                json!("rancher.io/local-path"),
                json!("Delete"),
                json!("WaitForFirstConsumer"),
                json!(false),
                json!("60m")
            ]
        );
    }

    #[test]
    fn csi_rows() {
        let driver = json!({"metadata": {"name": "ebs.csi.aws.com", "creationTimestamp": CREATED},
            "spec": {"attachRequired": false, "tokenRequests": [{"audience": "a"}, {"audience": "b"}],
                     "volumeLifecycleModes": ["Persistent", "Ephemeral"]}});
        assert_eq!(
            csi_driver(&driver, now()).cells,
            [
                json!("ebs.csi.aws.com"),
                json!(false),
                json!(false),
                json!(false),
                json!("a,b"),
                json!(false),
                json!("Persistent,Ephemeral"),
                json!("60m")
            ]
        );
        let bare = json!({"metadata": {"name": "d"}, "spec": {}});
        let cells = csi_driver(&bare, now()).cells;
        assert_eq!(
            (&cells[1], &cells[4], &cells[6]),
            (&json!(true), &json!("<unset>"), &json!("<none>"))
        );
        let node = json!({"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(csi_node(&node, now()).cells[1], json!(2));
        let capacity = json!({"metadata": {"name": "c"}, "storageClassName": "fast"});
        assert_eq!(
            csi_storage_capacity(&capacity, now()).cells,
            [json!("c"), json!("fast"), json!("<unset>")]
        );
        let va = json!({"metadata": {"name": "csi-1", "creationTimestamp": CREATED},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv-1"}},
            "status": {"attached": true}});
        assert_eq!(
            volume_attachment(&va, now()).cells,
            [
                json!("csi-1"),
                json!("ebs.csi.aws.com"),
                json!("pv-1"),
                json!("n1"),
                json!(true),
                json!("60m")
            ]
        );
    }
}
