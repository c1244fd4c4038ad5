//! coordination.k8s.io/v1 leases and policy/v1 poddisruptionbudgets.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcm_machinery::labels::Selector;
use serde_json::Value;

use crate::registry::generation::Generation;
use crate::registry::resource::ResourceDef;
use crate::registry::strategy::{Strategy, typed};
use crate::registry::subresource::Subresource;
use crate::strategic_merge::kinds;
use crate::table::printers;
use crate::validation::FieldError;

/// coordination.k8s.io/v1 leases.
pub static LEASES: ResourceDef = ResourceDef::of::<Lease>()
    .printer(printers::LEASE)
    .merge_schema(&kinds::METADATA_ONLY);

/// policy/v1 poddisruptionbudgets.
pub static PDBS: ResourceDef = ResourceDef::of::<PodDisruptionBudget>()
    .generation(Generation::Spec)
    .short_names(&["pdb"])
    .subresources(&[Subresource::Status])
    .strategy(&PdbStrategy)
    .printer(printers::POD_DISRUPTION_BUDGET)
    .merge_schema(&kinds::POD_DISRUPTION_BUDGET);

/// The PodDisruptionBudget strategy (upstream's `podDisruptionBudgetStrategy`).
#[derive(Debug, Default)]
pub struct PdbStrategy;

impl Strategy for PdbStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(map) = obj.as_object_mut() {
            map.remove("status");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let spec = obj.get("spec");
        let min = spec.and_then(|s| s.get("minAvailable"));
        let max = spec.and_then(|s| s.get("maxUnavailable"));
        if min.is_some() && max.is_some() {
            errs.push(FieldError::invalid(
                "spec",
                spec.cloned().unwrap_or(Value::Null),
                "minAvailable and maxUnavailable cannot be both set",
            ));
        }
        for (field, v) in [("spec.minAvailable", min), ("spec.maxUnavailable", max)] {
            match v {
                Some(Value::Number(n)) if n.as_i64().is_some_and(|n| n < 0) => errs.push(
                    FieldError::invalid(field, v.cloned().unwrap_or(Value::Null), "must be greater than or equal to 0"),
                ),
                Some(Value::String(s)) if !valid_percent(s) => errs.push(FieldError::invalid(
                    field,
                    s.as_str(),
                    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                )),
                _ => {}
            }
        }
        if let Some(raw) = spec.and_then(|s| s.get("selector")) {
            let ok = typed::<LabelSelector>(raw)
                .is_some_and(|ls| Selector::from_label_selector(&ls).is_ok());
            if !ok {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    raw.clone(),
                    "invalid label selector",
                ));
            }
        }
        errs
    }
}

fn valid_percent(s: &str) -> bool {
    s.strip_suffix('%')
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pdb_validation() {
        let cases = [
            ("min only", json!({"spec": {"minAvailable": 1}}), 0),
            (
                "both",
                json!({"spec": {"minAvailable": 1, "maxUnavailable": 1}}),
                1,
            ),
            ("bad percent", json!({"spec": {"maxUnavailable": "5"}}), 1),
            ("negative", json!({"spec": {"minAvailable": -1}}), 1),
        ];
        for (name, obj, n) in cases {
            assert_eq!(PdbStrategy.validate(&obj).len(), n, "case {name}");
        }
    }
}
