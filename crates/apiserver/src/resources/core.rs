//! The core/v1 resources without their own behaviour file: configmaps, secrets, serviceaccounts, endpoints, nodes.

use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Node, Secret, ServiceAccount};
use serde_json::Value;

use crate::registry::resource::{ResourceDef, SelectableField};
use crate::registry::strategy::{Strategy, typed_roundtrip, typed_roundtrip_checked};
use crate::registry::subresource::Subresource;
use crate::resources::quantities::{self, canonicalize_node};
use crate::resources::simple::{CreateOnUpdate, validate_data_keys, validate_immutable_data};
use crate::strategic_merge::kinds;
use crate::table::printers;
use crate::validation::FieldError;

/// The configmaps resource.
pub static CONFIGMAPS: ResourceDef = ResourceDef::of::<ConfigMap>()
    .short_names(&["cm"])
    .strategy(&ConfigMapStrategy)
    .printer(printers::CONFIG_MAP)
    .merge_schema(&kinds::METADATA_ONLY);

/// The secrets resource.
pub static SECRETS: ResourceDef = ResourceDef::of::<Secret>()
    .fields(&[SelectableField::string("type", "/type")])
    .decode_with(decode_secret)
    .strategy(&SecretStrategy)
    .printer(printers::SECRET)
    .merge_schema(&kinds::METADATA_ONLY);

/// The serviceaccounts resource.
pub static SERVICEACCOUNTS: ResourceDef = ResourceDef::of::<ServiceAccount>()
    .short_names(&["sa"])
    .printer(printers::SERVICE_ACCOUNT)
    .merge_schema(&kinds::SERVICE_ACCOUNT);

/// The endpoints resource (endpoints may be created by an update, as upstream).
pub static ENDPOINTS: ResourceDef = ResourceDef::of::<Endpoints>()
    .short_names(&["ep"])
    .strategy(&CreateOnUpdate)
    .printer(printers::ENDPOINTS)
    .merge_schema(&kinds::METADATA_ONLY);

/// The nodes resource.
pub static NODES: ResourceDef = ResourceDef::of::<Node>()
    .short_names(&["no"])
    .subresources(&[Subresource::Status])
    .fields(&[SelectableField::boolean(
        "spec.unschedulable",
        "/spec/unschedulable",
    )])
    .decode_with(decode_node)
    .strategy(&NodeStrategy)
    .printer(printers::NODE)
    .merge_schema(&kinds::NODE);

/// The configmap strategy: valid data keys; data frozen once `immutable`.
#[derive(Debug, Default)]
pub struct ConfigMapStrategy;

impl Strategy for ConfigMapStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_data_keys(obj, &["data", "binaryData"])
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(validate_immutable_data(new, old, &["data", "binaryData"]));
        errs
    }
}

/// Decodes a Secret: `stringData` is folded into `data` and the type defaults to `Opaque`.
pub fn decode_secret(mut obj: Value) -> Result<Value, String> {
    if let Some(map) = obj.as_object_mut()
        && let Some(string_data) = map.remove("stringData")
    {
        let Value::Object(string_data) = string_data else {
            return Err("Secret in version \"v1\" cannot be handled as a Secret: stringData must be an object".to_owned());
        };
        let data = map
            .entry("data")
            .or_insert_with(|| Value::Object(Default::default()));
        if !data.is_object() {
            *data = Value::Object(Default::default());
        }
        if let Some(data) = data.as_object_mut() {
            for (k, v) in string_data {
                let s = v.as_str().ok_or_else(|| {
                    format!("Secret in version \"v1\" cannot be handled as a Secret: stringData[{k}] must be a string")
                })?;
                data.insert(
                    k,
                    Value::String(base64::engine::general_purpose::STANDARD.encode(s)),
                );
            }
        }
    }
    typed_roundtrip::<Secret>(obj, |s| {
        s.type_.get_or_insert_with(|| "Opaque".to_owned());
    })
}

/// Decodes a Node with its quantities canonicalized.
pub fn decode_node(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<Node, quantities::Error>(obj, canonicalize_node)
}

/// The secret strategy: valid data keys, an immutable type, data frozen once `immutable`.
#[derive(Debug, Default)]
pub struct SecretStrategy;

impl Strategy for SecretStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_data_keys(obj, &["data"])
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("type") != old.get("type") {
            errs.push(FieldError::invalid(
                "type",
                new.get("type").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errs.extend(validate_immutable_data(new, old, &["data"]));
        errs
    }
}

/// The node strategy.
#[derive(Debug, Default)]
pub struct NodeStrategy;

impl Strategy for NodeStrategy {
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let old_cidr = old
            .pointer("/spec/podCIDR")
            .and_then(Value::as_str)
            .unwrap_or("");
        let new_cidr = new
            .pointer("/spec/podCIDR")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !old_cidr.is_empty() && old_cidr != new_cidr {
            errs.push(FieldError::forbidden(
                "spec.podCIDR",
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn secret_string_data_is_folded_into_data() {
        let out = decode_secret(json!({"metadata": {"name": "s"}, "stringData": {"user": "admin"}, "data": {"x": "eA=="}}))
            .expect("decodes");
        assert_eq!(out["data"]["user"], "YWRtaW4=");
        assert_eq!(out["data"]["x"], "eA==");
        assert_eq!(out["type"], "Opaque");
        assert!(out.get("stringData").is_none());
    }
}
