//! Accessors for objects held as `serde_json::Value` (metadata, labels, finalizers, timestamps).
//!
//! Objects move through the server as JSON values; these helpers read and write the few
//! metadata fields the generic registry needs without decoding the whole typed object.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::pointer::At;

/// The garbage collector's orphan finalizer (`metav1.FinalizerOrphanDependents`).
pub const FINALIZER_ORPHAN: &str = "orphan";
/// The garbage collector's foreground finalizer (`metav1.FinalizerDeleteDependents`).
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// The string at `path`, if present and a string.
pub fn str_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = obj;
    for key in path {
        cur = cur.get(key)?;
    }
    cur.as_str()
}

/// `metadata.name`, or `""`.
pub fn name(obj: &Value) -> &str {
    str_at(obj, &["metadata", "name"]).unwrap_or("")
}

/// `metadata.namespace`, or `""`.
pub fn namespace(obj: &Value) -> &str {
    str_at(obj, &["metadata", "namespace"]).unwrap_or("")
}

/// `metadata.uid`, or `""`.
pub fn uid(obj: &Value) -> &str {
    str_at(obj, &["metadata", "uid"]).unwrap_or("")
}

/// `metadata.resourceVersion`, or `""`.
pub fn resource_version(obj: &Value) -> &str {
    str_at(obj, &["metadata", "resourceVersion"]).unwrap_or("")
}

/// `metadata.deletionTimestamp`, if set.
pub fn deletion_timestamp(obj: &Value) -> Option<&str> {
    str_at(obj, &["metadata", "deletionTimestamp"])
}

/// `metadata.deletionGracePeriodSeconds`, if set.
pub fn deletion_grace_period(obj: &Value) -> Option<i64> {
    obj.at("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
}

/// `metadata.generation`, or 0.
pub fn generation(obj: &Value) -> i64 {
    obj.at("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// `metadata.finalizers` (non-strings skipped).
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.at("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Replaces `metadata.finalizers` (removing the field when empty).
pub fn set_finalizers(obj: &mut Value, finalizers: Vec<String>) {
    let meta = metadata_mut(obj);
    if finalizers.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert(
            "finalizers".to_owned(),
            Value::Array(finalizers.into_iter().map(Value::String).collect()),
        );
    }
}

/// `metadata.labels` as a map (non-string values skipped).
pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    string_map(obj.at("/metadata/labels"))
}

/// A JSON object of strings as a map (non-string values skipped).
pub fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata` as a mutable map, creating it (and replacing a non-object) if needed.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let map = obj.as_object_mut().expect("just made an object");
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("just made an object")
}

/// Sets a metadata field.
pub fn set_meta(obj: &mut Value, key: &str, value: impl Into<Value>) {
    metadata_mut(obj).insert(key.to_owned(), value.into());
}

/// Removes a metadata field.
pub fn remove_meta(obj: &mut Value, key: &str) {
    metadata_mut(obj).remove(key);
}

/// Drops the `metadata` fields that Go's `omitempty` would leave out when the server encodes
/// an object: empty strings, a zero `generation`, empty `labels`/`annotations`, empty lists and
/// `null`s. Kubernetes stores every object after a typed decode, so `annotations: {}` sent by
/// a client (kubectl's three-way patches send exactly that) is never stored or answered;
/// without this, `kubectl diff` of an unchanged object reports `annotations: {}` as a change.
/// `creationTimestamp` is left as it is (Go's `metav1.Time` encodes a zero time as `null`).
pub fn omit_empty_meta(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    meta.retain(|key, value| {
        key == "creationTimestamp"
            || match value {
                Value::Null => false,
                Value::String(s) => !s.is_empty(),
                Value::Object(m) => !m.is_empty(),
                Value::Array(a) => !a.is_empty(),
                Value::Number(n) => key != "generation" || n.as_i64() != Some(0),
                Value::Bool(_) => true,
            }
    });
}

/// Sets `metadata.generation`, or removes it for 0 (Go's `omitempty`: an object without a
/// generation keeps none).
pub fn set_generation(obj: &mut Value, generation: i64) {
    if generation == 0 {
        remove_meta(obj, "generation");
    } else {
        set_meta(obj, "generation", generation);
    }
}

/// Sets `metadata.resourceVersion` to a revision.
pub fn set_resource_version(obj: &mut Value, revision: i64) {
    set_meta(obj, "resourceVersion", revision.to_string());
}

/// The current time as an RFC 3339 timestamp with second precision (`metav1.Time`'s format).
pub fn now_rfc3339() -> String {
    format_time(jiff::Timestamp::now())
}

/// Formats a timestamp as `metav1.Time` does (UTC, whole seconds).
pub fn format_time(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The current time as `metav1.MicroTime` does (UTC, microseconds).
pub fn now_micro_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string()
}

/// Whether `spec` differs between two objects (what bumps `metadata.generation`).
pub fn spec_changed(new: &Value, old: &Value) -> bool {
    new.get("spec") != old.get("spec")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn empty_metadata_fields_are_omitted_as_go_encodes_them() {
        let mut obj = json!({"kind": "ConfigMap", "data": {}, "metadata": {
            "name": "a", "namespace": "", "generateName": "", "uid": "u",
            "labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": [],
            "managedFields": [], "deletionTimestamp": null, "creationTimestamp": null,
            "generation": 0, "resourceVersion": "7"}});
        omit_empty_meta(&mut obj);
        assert_eq!(
            obj,
            json!({"kind": "ConfigMap", "data": {}, "metadata": {
                "name": "a", "uid": "u", "creationTimestamp": null, "resourceVersion": "7"}})
        );
        let mut kept = json!({"metadata": {"labels": {"a": "b"}, "finalizers": ["f"],
            "generation": 2, "deletionGracePeriodSeconds": 0}});
        let before = kept.clone();
        omit_empty_meta(&mut kept);
        assert_eq!(kept, before, "non-empty fields and a pointer's zero stay");
    }

    #[test]
    fn accessors_read_metadata() {
        let obj = json!({"metadata": {"name": "a", "namespace": "b", "labels": {"x": "1", "y": 2},
            "finalizers": ["f1", 3, "f2"], "generation": 4}});
        assert_eq!(name(&obj), "a");
        assert_eq!(namespace(&obj), "b");
        assert_eq!(labels(&obj).len(), 1);
        assert_eq!(finalizers(&obj), vec!["f1", "f2"]);
        assert_eq!(generation(&obj), 4);
    }

    #[test]
    fn metadata_mut_repairs_non_objects() {
        let mut obj = json!({"metadata": 5});
        set_resource_version(&mut obj, 12);
        assert_eq!(resource_version(&obj), "12");
        let mut not_object = json!([1]);
        set_meta(&mut not_object, "name", "x");
        assert_eq!(name(&not_object), "x");
    }

    #[test]
    fn set_finalizers_removes_when_empty() {
        let mut obj = json!({"metadata": {"finalizers": ["a"]}});
        set_finalizers(&mut obj, vec![]);
        assert_eq!(obj, json!({"metadata": {}}));
    }

    #[test]
    fn time_format_has_seconds_precision() {
        let ts: jiff::Timestamp = "2024-05-06T07:08:09.123Z".parse().expect("valid");
        assert_eq!(format_time(ts), "2024-05-06T07:08:09Z");
    }
}
