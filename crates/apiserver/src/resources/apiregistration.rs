//! apiregistration.k8s.io/v1 apiservices (+status): the local ones kube-apiserver registers for every group version it serves (kept by [`crate::registry::apiservices`]), and remote ones stored, not proxied.
//!
//! kcm runs no aggregation layer: an APIService naming a Service (metrics-server's
//! `v1beta1.metrics.k8s.io`) is stored and listed, its group is not served and no
//! availability check writes its status.

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::{Value, json};

use crate::pointer::At;
use crate::registry::resource::ResourceDef;
use crate::registry::strategy::{MetadataReset, Strategy, typed_roundtrip};
use crate::registry::subresource::Subresource;
use crate::strategic_merge::kinds;
use crate::table::printers;
use crate::validation::{FieldError, NameRule};

/// apiregistration.k8s.io/v1 apiservices.
pub static API_SERVICES: ResourceDef = ResourceDef::of::<APIService>()
    .categories(&["api-extensions"])
    .subresources(&[Subresource::Status])
    .decode_with(decode)
    .strategy(&ApiServiceStrategy)
    .printer(printers::API_SERVICE)
    .merge_schema(&kinds::STATUS_CONDITIONS);

/// Decodes an APIService with the scheme default (service port 443); missing priorities
/// read as 0, as Go's zero values, so validation answers 422.
fn decode(mut obj: Value) -> Result<Value, String> {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("groupPriorityMinimum")
            .or_insert_with(|| json!(0));
        spec.entry("versionPriority").or_insert_with(|| json!(0));
    }
    typed_roundtrip::<APIService>(obj, |svc| {
        if let Some(service) = svc.spec.as_mut().and_then(|s| s.service.as_mut()) {
            service.port.get_or_insert(443);
        }
    })
}

/// The APIService strategy (kube-aggregator's `apiServerStrategy`, `ValidateAPIService`).
#[derive(Debug, Default)]
pub struct ApiServiceStrategy;

impl Strategy for ApiServiceStrategy {
    /// `apiServerStatusStrategy.PrepareForUpdate`: labels, annotations, finalizers and owner
    /// references keep their stored values.
    fn status_metadata_reset(&self) -> MetadataReset {
        MetadataReset::Fields(&["labels", "annotations", "finalizers", "ownerReferences"])
    }

    fn name_rule(&self) -> NameRule {
        // A path segment that must equal `version.group` (`v1.` for core), checked below.
        NameRule::PathSegment
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // The status starts empty; Go prints the empty status struct.
        obj["status"] = json!({});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let spec = obj.get("spec");
        let field = |k: &str| {
            spec.and_then(|s| s.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        let (group, version) = (field("group"), field("version"));
        let name = obj
            .at("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let required = format!("{version}.{group}");
        if name != required {
            errs.push(FieldError::invalid(
                "metadata.name",
                name,
                format!("must be `spec.version+\".\"+spec.group`: {required:?}"),
            ));
        }
        if !group.is_empty() {
            for msg in NameRule::Subdomain.check(group) {
                errs.push(FieldError::invalid("spec.group", group, msg));
            }
        }
        if version.is_empty() {
            errs.push(FieldError::required("spec.version", ""));
        } else {
            for msg in NameRule::Dns1035Label.check(version) {
                errs.push(FieldError::invalid("spec.version", version, msg));
            }
        }
        let int = |k: &str| {
            spec.and_then(|s| s.get(k))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        let group_priority = int("groupPriorityMinimum");
        if !(1..=20000).contains(&group_priority) {
            errs.push(FieldError::invalid(
                "spec.groupPriorityMinimum",
                group_priority,
                "must be positive and less than 20000",
            ));
        }
        let version_priority = int("versionPriority");
        if !(1..=1000).contains(&version_priority) {
            errs.push(FieldError::invalid(
                "spec.versionPriority",
                version_priority,
                "must be positive and less than 1000",
            ));
        }
        let skip_tls = spec
            .and_then(|s| s.get("insecureSkipTLSVerify"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let has_ca = !field("caBundle").is_empty();
        match spec.and_then(|s| s.get("service")).filter(|s| !s.is_null()) {
            None => {
                if has_ca {
                    errs.push(FieldError::invalid(
                        "spec.caBundle",
                        field("caBundle"),
                        "local APIServices may not have a caBundle",
                    ));
                }
                if skip_tls {
                    errs.push(FieldError::invalid(
                        "spec.insecureSkipTLSVerify",
                        true,
                        "local APIServices may not have insecureSkipTLSVerify",
                    ));
                }
            }
            Some(service) => {
                for key in ["namespace", "name"] {
                    let value = service.get(key).and_then(Value::as_str).unwrap_or("");
                    if value.is_empty() {
                        errs.push(FieldError::required(format!("spec.service.{key}"), ""));
                    }
                }
                if let Some(port) = service.get("port").and_then(Value::as_i64)
                    && !(1..=65535).contains(&port)
                {
                    errs.push(FieldError::invalid(
                        "spec.service.port",
                        port,
                        "port is not valid: must be between 1 and 65535, inclusive",
                    ));
                }
                if skip_tls && has_ca {
                    errs.push(FieldError::invalid(
                        "spec.insecureSkipTLSVerify",
                        true,
                        "may not be true if caBundle is present",
                    ));
                }
            }
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_services() {
        let metrics = decode(json!({"metadata": {"name": "v1beta1.metrics.k8s.io"}, "spec": {
            "group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
            "insecureSkipTLSVerify": true, "service": {"name": "metrics-server", "namespace": "kube-system"}}}))
        .expect("decodes");
        assert_eq!(metrics["spec"]["service"]["port"], 443);
        assert!(ApiServiceStrategy.validate(&metrics).is_empty());
        let bad = decode(json!({"metadata": {"name": "metrics"}, "spec": {"group": "metrics.k8s.io", "version": "v1beta1"}}))
            .expect("decodes");
        let errs: Vec<String> = ApiServiceStrategy
            .validate(&bad)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                r#"metadata.name: Invalid value: "metrics": must be `spec.version+"."+spec.group`: "v1beta1.metrics.k8s.io""#,
                "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
                "spec.versionPriority: Invalid value: 0: must be positive and less than 1000",
            ]
        );
    }
}
