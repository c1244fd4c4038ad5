//! What resources with little behaviour share: the create-on-update strategy (endpoints, events) and data-map validation (configmaps, secrets).

use serde_json::Value;

use crate::registry::strategy::Strategy;
use crate::validation::FieldError;

/// The strategy of a resource whose update of a missing object creates it
/// (`AllowCreateOnUpdate`: endpoints and events) and that has no other behaviour.
#[derive(Clone, Copy, Debug, Default)]
pub struct CreateOnUpdate;

impl Strategy for CreateOnUpdate {
    fn allow_create_on_update(&self) -> bool {
        true
    }
}

/// Validates the keys of a `data`-like map (`IsConfigMapKey`).
pub fn validate_data_keys(obj: &Value, fields: &[&str]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for field in fields {
        if let Some(map) = obj.get(*field).and_then(Value::as_object) {
            for key in map.keys() {
                let ok = !key.is_empty()
                    && key.len() <= 253
                    && key != "."
                    && key != ".."
                    && !key.starts_with("..")
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
                if !ok {
                    errs.push(FieldError::invalid(
                        format!("{field}[{key}]"),
                        key.as_str(),
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                    ));
                }
            }
        }
    }
    errs
}

/// An `immutable: true` object's data fields may not change, nor may `immutable` be unset
/// (upstream's `ValidateConfigMapUpdate` / `ValidateSecretUpdate`).
pub fn validate_immutable_data(new: &Value, old: &Value, fields: &[&str]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return errs;
    }
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        errs.push(FieldError::forbidden(
            "immutable",
            "field is immutable when `immutable` is set",
        ));
    }
    for field in fields {
        if new.get(*field) != old.get(*field) {
            errs.push(FieldError::forbidden(
                *field,
                "field is immutable when `immutable` is set",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn immutable_data() {
        let old = json!({"immutable": true, "data": {"a": "1"}});
        assert!(validate_immutable_data(&old, &old, &["data"]).is_empty());
        let changed = json!({"immutable": true, "data": {"a": "2"}});
        assert_eq!(validate_immutable_data(&changed, &old, &["data"]).len(), 1);
        let unset = json!({"data": {"a": "1"}});
        assert_eq!(validate_immutable_data(&unset, &old, &["data"]).len(), 1);
        let mutable = json!({"data": {"a": "1"}});
        assert!(validate_immutable_data(&changed, &mutable, &["data"]).is_empty());
    }

    #[test]
    fn data_keys() {
        let obj = json!({"data": {"ok.key": "1", "bad/key": "2"}, "binaryData": {"..x": "AA=="}});
        let errs = validate_data_keys(&obj, &["data", "binaryData"]);
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, vec!["data[bad/key]", "binaryData[..x]"]);
    }
}
