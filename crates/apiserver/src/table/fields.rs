//! Reading fields out of objects held as JSON, with Go's zero values for missing ones.
//!
//! The printers read objects the way upstream's read typed structs: a missing string is
//! `""`, a missing number `0`, a missing list empty. Timestamps are RFC 3339 strings;
//! an unparsable one counts as unset.

use jiff::Timestamp;
use serde_json::Value;

/// The value at `path` (object keys), if every step exists.
pub(super) fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, key| v.get(key))
}

/// The string at `path`, `""` when missing or not a string.
pub(super) fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

/// The integer at `path`, `0` when missing or not an integer.
pub(super) fn int_at(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(Value::as_i64).unwrap_or(0)
}

/// The integer at `path`, `None` when missing (a Go pointer field).
pub(super) fn opt_int_at(v: &Value, path: &[&str]) -> Option<i64> {
    get(v, path).and_then(Value::as_i64)
}

/// The boolean at `path`, `false` when missing.
pub(super) fn bool_at(v: &Value, path: &[&str]) -> bool {
    get(v, path).and_then(Value::as_bool).unwrap_or(false)
}

/// The list at `path`, empty when missing or not a list.
pub(super) fn list_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The number of entries of the map at `path` (0 when missing).
pub(super) fn map_len_at(v: &Value, path: &[&str]) -> usize {
    get(v, path)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
}

/// The timestamp at `path`, `None` when missing, empty or unparsable.
pub(super) fn time_at(v: &Value, path: &[&str]) -> Option<Timestamp> {
    get(v, path)
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<Timestamp>().ok())
}

/// `metadata.name`.
pub(super) fn name(v: &Value) -> &str {
    str_at(v, &["metadata", "name"])
}

/// Whether `metadata.deletionTimestamp` is set.
pub(super) fn is_deleting(v: &Value) -> bool {
    get(v, &["metadata", "deletionTimestamp"]).is_some_and(|t| !t.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_fields_read_as_zero_values() {
        let v = json!({"spec": {"replicas": 3, "paused": true, "name": 5}});
        assert_eq!(int_at(&v, &["spec", "replicas"]), 3);
        assert_eq!(int_at(&v, &["spec", "missing"]), 0);
        assert_eq!(opt_int_at(&v, &["status", "x"]), None);
        assert_eq!(str_at(&v, &["spec", "name"]), "");
        assert!(bool_at(&v, &["spec", "paused"]));
        assert!(list_at(&v, &["spec", "containers"]).is_empty());
        assert_eq!(map_len_at(&v, &["spec"]), 3);
    }

    #[test]
    fn timestamps_parse_rfc3339_and_ignore_garbage() {
        let v =
            json!({"metadata": {"creationTimestamp": "2024-01-02T03:04:05Z", "bad": "yesterday"}});
        assert_eq!(
            time_at(&v, &["metadata", "creationTimestamp"]),
            Some("2024-01-02T03:04:05Z".parse().expect("ts"))
        );
        assert_eq!(time_at(&v, &["metadata", "bad"]), None);
        assert!(!is_deleting(&v));
    }
}
