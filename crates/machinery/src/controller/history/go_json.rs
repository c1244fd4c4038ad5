//! Go's `json.Marshal` of a JSON value: the exact bytes upstream stores in a ControllerRevision's `data` and hashes.
//!
//! Go encodes a `map[string]interface{}` compactly with its keys sorted byte-wise, and escapes
//! `<`, `>`, `&`, U+2028 and U+2029 inside strings (`\u003c` ...) besides the usual control
//! characters. Revision data written by upstream (or by this crate) re-encodes to the same
//! bytes, so equality and hashes of revisions agree with kube-controller-manager's and
//! kubectl's (`kubectl rollout undo` compares these bytes to skip a no-op rollback).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Map, Value};

/// A pod template as Go's `json.Marshal` of the typed `v1.PodTemplateSpec` has it: besides
/// the set fields, the zero-valued struct fields Go never omits — `metadata` with
/// `"creationTimestamp":null`, the pod `spec`, and every container's `"resources":{}`.
/// This is what upstream's DaemonSet and StatefulSet controllers store as revision data, so
/// revisions written here are byte-for-byte those kube-controller-manager writes.
pub fn pod_template_value(template: &PodTemplateSpec) -> Value {
    let mut value = serde_json::to_value(template).unwrap_or(Value::Null);
    let Some(object) = value.as_object_mut() else {
        return value;
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(m) = metadata.as_object_mut() {
        m.entry("creationTimestamp").or_insert(Value::Null);
    }
    let spec = object.entry("spec").or_insert_with(|| {
        let mut empty = Map::new();
        empty.insert("containers".to_owned(), Value::Null);
        Value::Object(empty)
    });
    if let Some(spec) = spec.as_object_mut() {
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
                continue;
            };
            for container in containers.iter_mut().filter_map(Value::as_object_mut) {
                container
                    .entry("resources")
                    .or_insert_with(|| Value::Object(Map::new()));
            }
        }
    }
    value
}

/// The bytes Go's `json.Marshal` writes for `value` (a value decoded from JSON, so every
/// object is a string-keyed map).
pub fn marshal(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            // Sorted here, whatever order the map keeps (serde_json's `preserve_order`).
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, key);
                out.push(b':');
                write_value(out, item);
            }
            out.push(b'}');
        }
    }
}

/// A string as Go's `encodeState.string` writes it with HTML escaping on.
fn write_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '<' | '>' | '&' | '\u{0}'..='\u{1f}' => {
                let b = c as u8;
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
            '\u{2028}' => out.extend_from_slice(b"\\u2028"),
            '\u{2029}' => out.extend_from_slice(b"\\u2029"),
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn marshal_table() {
        let cases = [
            (
                "sorted keys, compact",
                json!({"b": 1, "a": [true, null], "c": {"z": "x", "y": -2}}),
                r#"{"a":[true,null],"b":1,"c":{"y":-2,"z":"x"}}"#,
            ),
            (
                "HTML characters escaped",
                json!({"cmd": "a<b && c>d"}),
                r#"{"cmd":"a\u003cb \u0026\u0026 c\u003ed"}"#,
            ),
            (
                "control characters",
                json!("l1\nl2\t\u{1}\u{8}\u{c}\"\\"),
                r#""l1\nl2\t\u0001\b\f\"\\""#,
            ),
            (
                "line separators",
                json!("\u{2028}\u{2029}é"),
                "\"\\u2028\\u2029é\"",
            ),
            (
                "the DaemonSet template patch",
                json!({"spec": {"template": {"$patch": "replace", "metadata": {"creationTimestamp": null, "labels": {"app": "x"}}}}}),
                r#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"x"}}}}}"#,
            ),
        ];
        for (name, value, want) in cases {
            assert_eq!(
                String::from_utf8(marshal(&value)).unwrap_or_default(),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn pod_template_value_has_gos_zero_valued_structs() {
        let template: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "nginx"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx"}], "terminationGracePeriodSeconds": 30},
        }))
        .unwrap_or_default();
        assert_eq!(
            String::from_utf8(marshal(&pod_template_value(&template))).unwrap_or_default(),
            r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"image":"nginx","name":"nginx","resources":{}}],"terminationGracePeriodSeconds":30}}"#
        );
        assert_eq!(
            String::from_utf8(marshal(&pod_template_value(&PodTemplateSpec::default())))
                .unwrap_or_default(),
            r#"{"metadata":{"creationTimestamp":null},"spec":{"containers":null}}"#
        );
    }

    #[test]
    fn go_output_reencodes_to_the_same_bytes() {
        let go = r#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"command":["sh","-c","a \u003e b"],"image":"nginx","name":"nginx","resources":{}}],"terminationGracePeriodSeconds":30}}}}"#;
        let value: Value = serde_json::from_str(go).unwrap_or_default();
        assert_eq!(String::from_utf8(marshal(&value)).unwrap_or_default(), go);
    }
}
