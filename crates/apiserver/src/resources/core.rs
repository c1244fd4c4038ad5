//! The core/v1 resources without their own behaviour file: configmaps, secrets, serviceaccounts, endpoints, nodes.

use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Node, Secret, ServiceAccount};
use serde_json::Value;

use crate::registry::strategy::{
    ResourceInfo, SelectableField, Strategy, Subresource, typed_roundtrip, typed_roundtrip_checked,
};
use crate::resources::quantities::{self, canonicalize_node};
use crate::resources::simple::{SimpleStrategy, validate_data_keys, validate_immutable_data};
use crate::validation::FieldError;

/// The configmaps resource.
pub static CONFIGMAPS: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    singular: "configmap",
    short_names: &["cm"],
    categories: &[],
    namespaced: true,
    subresources: &[],
    fields: &[],
    storage_resource: ("core", "configmaps"),
};

/// The secrets resource.
pub static SECRETS: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Secret",
    plural: "secrets",
    singular: "secret",
    short_names: &[],
    categories: &[],
    namespaced: true,
    subresources: &[],
    fields: &[SelectableField::string("type", "/type")],
    storage_resource: ("core", "secrets"),
};

/// The serviceaccounts resource.
pub static SERVICEACCOUNTS: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "ServiceAccount",
    plural: "serviceaccounts",
    singular: "serviceaccount",
    short_names: &["sa"],
    categories: &[],
    namespaced: true,
    subresources: &[],
    fields: &[],
    storage_resource: ("core", "serviceaccounts"),
};

/// The endpoints resource.
pub static ENDPOINTS: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Endpoints",
    plural: "endpoints",
    singular: "endpoints",
    short_names: &["ep"],
    categories: &[],
    namespaced: true,
    subresources: &[],
    fields: &[],
    storage_resource: ("core", "endpoints"),
};

/// The nodes resource.
pub static NODES: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Node",
    plural: "nodes",
    singular: "node",
    short_names: &["no"],
    categories: &[],
    namespaced: false,
    subresources: &[Subresource::Status],
    fields: &[SelectableField::boolean(
        "spec.unschedulable",
        "/spec/unschedulable",
    )],
    storage_resource: ("core", "nodes"),
};

/// The configmaps strategy.
pub fn configmaps() -> SimpleStrategy<ConfigMap> {
    SimpleStrategy::new(&CONFIGMAPS)
        .with_validation(|obj| validate_data_keys(obj, &["data", "binaryData"]))
        .with_update_validation(|new, old| {
            validate_immutable_data(new, old, &["data", "binaryData"])
        })
}

/// The serviceaccounts strategy.
pub fn serviceaccounts() -> SimpleStrategy<ServiceAccount> {
    SimpleStrategy::new(&SERVICEACCOUNTS)
}

/// The endpoints strategy (endpoints may be created by an update, as upstream).
pub fn endpoints() -> SimpleStrategy<Endpoints> {
    SimpleStrategy::new(&ENDPOINTS).create_on_update()
}

/// The secret strategy: `stringData` is folded into `data` and the type defaults to `Opaque`.
#[derive(Debug, Default)]
pub struct SecretStrategy;

impl Strategy for SecretStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &SECRETS
    }

    fn decode(&self, mut obj: Value) -> Result<Value, String> {
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
        typed_roundtrip::<Secret>(obj, "Secret", |s| {
            s.type_.get_or_insert_with(|| "Opaque".to_owned());
        })
    }

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
    fn info(&self) -> &'static ResourceInfo {
        &NODES
    }

    fn decode(&self, obj: Value) -> Result<Value, String> {
        typed_roundtrip_checked::<Node, quantities::Error>(obj, "Node", canonicalize_node)
    }

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
        let out = SecretStrategy
            .decode(json!({"metadata": {"name": "s"}, "stringData": {"user": "admin"}, "data": {"x": "eA=="}}))
            .expect("decodes");
        assert_eq!(out["data"]["user"], "YWRtaW4=");
        assert_eq!(out["data"]["x"], "eA==");
        assert_eq!(out["type"], "Opaque");
        assert!(out.get("stringData").is_none());
    }
}
