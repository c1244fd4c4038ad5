//! The core/v1 resources but pods, services, events and namespaces: configmaps, secrets, serviceaccounts, endpoints, nodes, podtemplates and bindings here; the entries of those with a behaviour file of their own (persistent volumes and claims, quotas, limit ranges, replication controllers, component statuses).

use base64::Engine;
use k8s_openapi::api::core::v1::{
    Binding, ComponentStatus, ConfigMap, Endpoints, LimitRange, Node, PersistentVolume,
    PersistentVolumeClaim, PodTemplate, ReplicationController, ResourceQuota, Secret,
    ServiceAccount,
};
use serde_json::Value;

use crate::pointer::At;
use crate::registry::generation::Generation;
use crate::registry::resource::{ResourceDef, Rest, SelectableField};
use crate::registry::strategy::{Strategy, typed, typed_roundtrip, typed_roundtrip_checked};
use crate::registry::subresource::Subresource;
use crate::resources::component_status::ComponentStatuses;
use crate::resources::limit_range::{LimitRangeStrategy, decode_limit_range};
use crate::resources::persistent_volume::{PersistentVolumeStrategy, decode_persistent_volume};
use crate::resources::persistent_volume_claim::{
    PersistentVolumeClaimStrategy, decode_persistent_volume_claim,
};
use crate::resources::pod::validate_pod_spec;
use crate::resources::pod_defaults::default_template;
use crate::resources::quantities::{self, canonicalize_node, canonicalize_template};
use crate::resources::replication_controller::{
    ReplicationControllerStrategy, decode_replication_controller,
};
use crate::resources::resource_quota::{ResourceQuotaStrategy, decode_resource_quota};
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
    .subresources(&[Subresource::Token])
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
    .subresources(&[Subresource::Proxy, Subresource::Status])
    .fields(&[SelectableField::boolean(
        "spec.unschedulable",
        "/spec/unschedulable",
    )])
    .decode_with(decode_node)
    .strategy(&NodeStrategy)
    .printer(printers::NODE)
    .merge_schema(&kinds::NODE);

/// The persistentvolumes resource.
pub static PERSISTENT_VOLUMES: ResourceDef = ResourceDef::of::<PersistentVolume>()
    .short_names(&["pv"])
    .subresources(&[Subresource::Status])
    .decode_with(decode_persistent_volume)
    .strategy(&PersistentVolumeStrategy)
    .printer(printers::PERSISTENT_VOLUME)
    .merge_schema(&kinds::METADATA_ONLY);

/// The persistentvolumeclaims resource.
pub static PERSISTENT_VOLUME_CLAIMS: ResourceDef = ResourceDef::of::<PersistentVolumeClaim>()
    .short_names(&["pvc"])
    .subresources(&[Subresource::Status])
    .decode_with(decode_persistent_volume_claim)
    .strategy(&PersistentVolumeClaimStrategy)
    .printer(printers::PERSISTENT_VOLUME_CLAIM)
    .merge_schema(&kinds::STATUS_CONDITIONS);

/// The resourcequotas resource.
pub static RESOURCE_QUOTAS: ResourceDef = ResourceDef::of::<ResourceQuota>()
    .short_names(&["quota"])
    .subresources(&[Subresource::Status])
    .decode_with(decode_resource_quota)
    .strategy(&ResourceQuotaStrategy)
    .printer(printers::RESOURCE_QUOTA)
    .merge_schema(&kinds::METADATA_ONLY);

/// The limitranges resource (upstream prints NAME and CREATED AT).
pub static LIMIT_RANGES: ResourceDef = ResourceDef::of::<LimitRange>()
    .short_names(&["limits"])
    .decode_with(decode_limit_range)
    .strategy(&LimitRangeStrategy)
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);

/// The replicationcontrollers resource.
pub static REPLICATION_CONTROLLERS: ResourceDef = ResourceDef::of::<ReplicationController>()
    .generation(Generation::Spec)
    .short_names(&["rc"])
    .categories(&["all"])
    .subresources(&[Subresource::Scale, Subresource::Status])
    .decode_with(decode_replication_controller)
    .strategy(&ReplicationControllerStrategy)
    .printer(printers::REPLICATION_CONTROLLER)
    .merge_schema(&kinds::TEMPLATED_WORKLOAD);

/// The podtemplates resource.
pub static POD_TEMPLATES: ResourceDef = ResourceDef::of::<PodTemplate>()
    .generation(Generation::Field("template"))
    .decode_with(decode_pod_template)
    .strategy(&PodTemplateStrategy)
    .printer(printers::POD_TEMPLATE)
    .merge_schema(&kinds::POD_TEMPLATE);

/// The componentstatuses resource: read-only, computed on every read, deprecated.
pub static COMPONENT_STATUSES: ResourceDef = ResourceDef::of::<ComponentStatus>()
    .short_names(&["cs"])
    .computed(&ComponentStatuses)
    .deprecated("v1 ComponentStatus is deprecated in v1.19+")
    .printer(printers::COMPONENT_STATUS)
    .merge_schema(&kinds::METADATA_ONLY);

/// The bindings resource: create-only, the collection form of `pods/binding` (the registry
/// binds the pod the Binding names).
pub static BINDINGS: ResourceDef = ResourceDef::of::<Binding>()
    .transient()
    .rest(Rest::BindPod)
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);

/// The podtemplate strategy: the template is a valid pod template (upstream's
/// `ValidatePodTemplate`; it may change freely).
#[derive(Debug, Default)]
pub struct PodTemplateStrategy;

impl Strategy for PodTemplateStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match obj
            .at("/template/spec")
            .and_then(typed::<k8s_openapi::api::core::v1::PodSpec>)
        {
            Some(spec) => validate_pod_spec(&spec, "template.spec", &mut errs),
            None => errs.push(FieldError::required("template.spec.containers", "")),
        }
        errs
    }
}

/// Decodes a PodTemplate with its template's defaults.
pub fn decode_pod_template(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<PodTemplate, quantities::Error>(obj, |pt| {
        if let Some(template) = pt.template.as_mut() {
            canonicalize_template(template)?;
            default_template(template);
        }
        Ok(())
    })
}

/// The most a ConfigMap's or a Secret's data may hold, in bytes (upstream's `MaxSecretSize`).
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

/// The bytes of a map of strings (a ConfigMap's `data`).
fn text_size(map: Option<&Value>) -> usize {
    map.and_then(Value::as_object).map_or(0, |m| {
        m.values().filter_map(Value::as_str).map(str::len).sum()
    })
}

/// The decoded bytes of a map of base64 strings (`binaryData`, a Secret's `data`).
fn binary_size(map: Option<&Value>) -> usize {
    let decoded = |s: &str| {
        let padding = s.bytes().rev().take_while(|b| *b == b'=').count();
        (s.len() / 4 * 3).saturating_sub(padding)
    };
    map.and_then(Value::as_object).map_or(0, |m| {
        m.values().filter_map(Value::as_str).map(decoded).sum()
    })
}

/// The configmap strategy: valid data keys, at most 1 MiB of data; data frozen once
/// `immutable`.
#[derive(Debug, Default)]
pub struct ConfigMapStrategy;

impl Strategy for ConfigMapStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_data_keys(obj, &["data", "binaryData"]);
        if text_size(obj.get("data")) + binary_size(obj.get("binaryData")) > MAX_DATA_SIZE {
            // Upstream reports it on the empty path, which prints as `[]`.
            errs.push(FieldError::too_long("[]", MAX_DATA_SIZE));
        }
        errs
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

/// The secret strategy: valid data keys, at most 1 MiB of data, an immutable type, data
/// frozen once `immutable`.
#[derive(Debug, Default)]
pub struct SecretStrategy;

impl Strategy for SecretStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_data_keys(obj, &["data"]);
        if binary_size(obj.get("data")) > MAX_DATA_SIZE {
            errs.push(FieldError::too_long("data", MAX_DATA_SIZE));
        }
        errs
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
    /// `nodes/proxy` would reach the node's kubelet; a simulated node has none.
    fn connect_refusal(&self, obj: &Value, _sub: Subresource) -> Option<String> {
        let name = crate::object::name(obj);
        Some(format!(
            "node {name:?} is simulated: there is no kubelet to proxy to"
        ))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let old_cidr = old
            .at("/spec/podCIDR")
            .and_then(Value::as_str)
            .unwrap_or("");
        let new_cidr = new
            .at("/spec/podCIDR")
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

    #[test]
    fn config_maps_and_secrets_hold_at_most_one_mebibyte() {
        use base64::Engine;
        let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![7u8; n]);
        let half = MAX_DATA_SIZE / 2;
        let cases = [
            (
                json!({"data": {"a": "x".repeat(half), "b": "y".repeat(half)}}),
                true,
            ),
            (
                json!({"data": {"a": "x".repeat(half), "b": "y".repeat(half + 1)}}),
                false,
            ),
            (
                json!({"data": {"a": "x".repeat(half)}, "binaryData": {"b": b64(half + 1)}}),
                false,
            ),
            (
                json!({"data": {"a": "x".repeat(half)}, "binaryData": {"b": b64(half)}}),
                true,
            ),
        ];
        // The errors of `obj` under `strategy`: none when it fits, else one on `field`.
        let check = |strategy: &dyn Strategy, obj: Value, fits: bool, field: &str| {
            let got: Vec<String> = strategy
                .validate(&obj)
                .iter()
                .map(ToString::to_string)
                .collect();
            let want: Vec<String> = if fits {
                vec![]
            } else {
                vec![format!(
                    "{field}: Too long: must have at most 1048576 bytes"
                )]
            };
            assert_eq!(got, want, "fits: {fits}");
        };
        for (cm, fits) in cases {
            check(&ConfigMapStrategy, cm, fits, "[]");
        }
        for (n, fits) in [
            (MAX_DATA_SIZE, true),
            (MAX_DATA_SIZE + 1, false),
            (MAX_DATA_SIZE - 1, true),
        ] {
            check(
                &SecretStrategy,
                json!({"data": {"k": b64(n)}}),
                fits,
                "data",
            );
        }
    }
}
