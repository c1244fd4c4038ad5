//! The strategy of resources with no behaviour beyond decoding and the generic rules (configmaps, serviceaccounts, endpoints, leases).

use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::registry::strategy::{ResourceInfo, Strategy, typed_roundtrip};
use crate::validation::{FieldError, NameRule};

/// A strategy that only decodes `K` and applies the generic rules.
pub struct SimpleStrategy<K> {
    info: &'static ResourceInfo,
    name_rule: NameRule,
    create_on_update: bool,
    validate: fn(&Value) -> Vec<FieldError>,
    validate_update: fn(&Value, &Value) -> Vec<FieldError>,
    _kind: PhantomData<fn() -> K>,
}

impl<K> std::fmt::Debug for SimpleStrategy<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleStrategy")
            .field("resource", &self.info.plural)
            .finish()
    }
}

impl<K> SimpleStrategy<K> {
    /// A strategy for `info` whose names are RFC 1123 subdomains.
    pub fn new(info: &'static ResourceInfo) -> Self {
        Self {
            info,
            name_rule: NameRule::Subdomain,
            create_on_update: false,
            validate: |_| Vec::new(),
            validate_update: |_, _| Vec::new(),
            _kind: PhantomData,
        }
    }

    /// Lets an update of a missing object create it (`AllowCreateOnUpdate`).
    pub fn create_on_update(mut self) -> Self {
        self.create_on_update = true;
        self
    }

    /// Adds resource-specific validation.
    pub fn with_validation(mut self, validate: fn(&Value) -> Vec<FieldError>) -> Self {
        self.validate = validate;
        self
    }

    /// Adds update-only validation (run after the create validation).
    pub fn with_update_validation(
        mut self,
        validate_update: fn(&Value, &Value) -> Vec<FieldError>,
    ) -> Self {
        self.validate_update = validate_update;
        self
    }
}

impl<K> Strategy for SimpleStrategy<K>
where
    K: DeserializeOwned + Serialize + 'static,
{
    fn info(&self) -> &'static ResourceInfo {
        self.info
    }

    fn decode(&self, obj: Value) -> Result<Value, String> {
        typed_roundtrip::<K>(obj, self.info.kind, |_| {})
    }

    fn name_rule(&self) -> NameRule {
        self.name_rule
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        (self.validate)(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = (self.validate)(new);
        errs.extend((self.validate_update)(new, old));
        errs
    }

    fn allow_create_on_update(&self) -> bool {
        self.create_on_update
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
