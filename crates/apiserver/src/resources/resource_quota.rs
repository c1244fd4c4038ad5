//! core/v1 resourcequotas: canonical quantities, an empty status on create (the quota controller fills it), and upstream's validation of resource names, values and scopes.

use k8s_openapi::api::core::v1::ResourceQuota;
use serde_json::Value;

use crate::pointer::At;
use crate::registry::strategy::{Strategy, typed_roundtrip_checked};
use crate::resources::quantities::{self, canonicalize_resource_list, validate_quantity_value};
use crate::validation::FieldError;

/// Resource names without a `/` that a quota may limit (upstream's `standardQuotaResources`).
const STANDARD_QUOTA_RESOURCES: [&str; 17] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
];
/// Object counts, which must be whole numbers.
const INTEGER_RESOURCES: [&str; 9] = [
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];
/// Quota scopes (upstream's `standardResourceQuotaScopes`).
const SCOPES: [&str; 6] = [
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
];

/// The ResourceQuota strategy (upstream's `resourcequotaStrategy`).
#[derive(Debug, Default)]
pub struct ResourceQuotaStrategy;

impl Strategy for ResourceQuotaStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(map) = obj.as_object_mut() {
            map.remove("status");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_resource_list(obj.at("/spec/hard"), "spec.hard", &mut errs);
        validate_scopes(obj.get("spec"), &mut errs);
        errs
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_resource_list(new.at("/status/hard"), "status.hard", &mut errs);
        validate_resource_list(new.at("/status/used"), "status.used", &mut errs);
        errs
    }
}

/// Decodes a ResourceQuota with its quantities canonical (`SetDefaults_ResourceList`).
pub fn decode_resource_quota(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<ResourceQuota, quantities::Error>(obj, |quota| {
        if let Some(spec) = quota.spec.as_mut() {
            canonicalize_resource_list(spec.hard.as_mut(), "spec.hard")?;
        }
        if let Some(status) = quota.status.as_mut() {
            canonicalize_resource_list(status.hard.as_mut(), "status.hard")?;
            canonicalize_resource_list(status.used.as_mut(), "status.used")?;
        }
        Ok(())
    })
}

/// Names a quota knows, values not negative, counts whole.
fn validate_resource_list(list: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    for (name, value) in list.and_then(Value::as_object).into_iter().flatten() {
        let field = format!("{path}[{name}]");
        let standard = STANDARD_QUOTA_RESOURCES.contains(&name.as_str())
            || INTEGER_RESOURCES.contains(&name.as_str())
            || name.starts_with("hugepages-")
            || name.starts_with("requests.hugepages-");
        if !name.contains('/') && !standard {
            errs.push(FieldError::invalid(
                field.clone(),
                name.as_str(),
                "must be a standard resource for quota",
            ));
        }
        let Some(value) = value.as_str() else {
            continue;
        };
        let counted = INTEGER_RESOURCES.contains(&name.as_str()) || name.starts_with("count/");
        validate_quantity_value(&field, value, counted, errs);
    }
}

/// Known scopes, and no two that contradict each other (upstream's
/// `validateResourceQuotaScopes`).
fn validate_scopes(spec: Option<&Value>, errs: &mut Vec<FieldError>) {
    let scopes: Vec<&str> = spec
        .and_then(|s| s.get("scopes"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if scopes.is_empty() {
        return;
    }
    let raw = spec
        .and_then(|s| s.get("scopes"))
        .cloned()
        .unwrap_or(Value::Null);
    for scope in &scopes {
        if !SCOPES.contains(scope) {
            errs.push(FieldError::invalid(
                "spec.scopes",
                raw.clone(),
                "unsupported scope",
            ));
        }
    }
    let has = |s: &str| scopes.contains(&s);
    if (has("Terminating") && has("NotTerminating")) || (has("BestEffort") && has("NotBestEffort"))
    {
        errs.push(FieldError::invalid(
            "spec.scopes",
            raw,
            "conflicting scopes",
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(obj: Value) -> Vec<String> {
        let obj = decode_resource_quota(obj).expect("decodes");
        ResourceQuotaStrategy
            .validate(&obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn validation_messages_are_upstreams() {
        assert!(
            messages(
                json!({"spec": {"hard": {"pods": "10", "requests.cpu": "1.5",
            "count/deployments.apps": "3", "requests.nvidia.com/gpu": "1"}}})
            )
            .is_empty()
        );
        assert_eq!(
            messages(json!({"spec": {"hard": {"widgets": "1", "pods": "1.5", "memory": "-1Gi"}}})),
            [
                "spec.hard[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0",
                "spec.hard[pods]: Invalid value: \"1500m\": must be an integer",
                "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource for quota",
            ]
        );
        assert_eq!(
            messages(
                json!({"spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort", "NotBestEffort"]}})
            ),
            ["spec.scopes: Invalid value: [\"BestEffort\",\"NotBestEffort\"]: conflicting scopes"]
        );
        assert_eq!(
            messages(json!({"spec": {"scopes": ["Sometimes"]}})),
            ["spec.scopes: Invalid value: [\"Sometimes\"]: unsupported scope"]
        );
    }

    #[test]
    fn create_drops_the_status() {
        let mut obj = json!({"spec": {"hard": {"pods": "1"}}, "status": {"used": {"pods": "5"}}});
        ResourceQuotaStrategy.prepare_for_create(&mut obj);
        assert_eq!(obj.get("status"), None);
    }
}
