//! A container's `resources`: requests and limits validated as kube-apiserver validates them
//! (upstream's `validateResourceRequirements` with `validateContainerResourceName`).
//!
//! - names: `cpu`, `memory`, `ephemeral-storage` and `hugepages-*` without a prefix; a name
//!   with a `/` is native under `kubernetes.io/`, else an extended resource (`example.com/gpu`);
//! - values: not negative; extended resources whole numbers;
//! - a request at most its limit; for resources that cannot be overcommitted (extended
//!   resources, huge pages) equal to it, and a limit required;
//! - huge pages only with cpu or memory.
//!
//! Values arrive canonical and rounded up to milli scale (the decode's
//! `SetDefaults_ResourceList`), so comparing thousandths is exact.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kcm_machinery::labels;
use kcm_machinery::resource_names::{is_extended, is_huge_pages, is_native, overcommit_allowed};

use crate::resources::quantities::{milli_value, validate_quantity_value};
use crate::validation::FieldError;

/// The resources a container may name without a prefix (`IsStandardContainerResourceName`).
const STANDARD_CONTAINER_RESOURCES: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

/// Appends the errors of a container's `resources` at `path`
/// (`spec.containers[0].resources`).
pub fn validate_resource_requirements(
    resources: &ResourceRequirements,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let empty = BTreeMap::new();
    let limits = resources.limits.as_ref().unwrap_or(&empty);
    let requests = resources.requests.as_ref().unwrap_or(&empty);
    let limits_path = format!("{path}.limits");
    let requests_path = format!("{path}.requests");
    for (name, value) in limits {
        validate_entry(&limits_path, name, value, errs);
    }
    for (name, value) in requests {
        validate_entry(&requests_path, name, value, errs);
        match limits.get(name) {
            Some(limit) => {
                let ordering = milli_value(&value.0).zip(milli_value(&limit.0));
                if !overcommit_allowed(name) && ordering.is_some_and(|(r, l)| r != l) {
                    errs.push(FieldError::invalid(
                        &requests_path,
                        value.0.as_str(),
                        format!("must be equal to {name} limit of {}", limit.0),
                    ));
                } else if ordering.is_some_and(|(r, l)| r > l) {
                    errs.push(FieldError::invalid(
                        &requests_path,
                        value.0.as_str(),
                        format!("must be less than or equal to {name} limit of {}", limit.0),
                    ));
                }
            }
            None if !overcommit_allowed(name) => errs.push(FieldError::required(
                &limits_path,
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
    }
    let mut names = limits.keys().chain(requests.keys());
    if names.clone().any(|n| is_huge_pages(n)) && !names.any(|n| n == "cpu" || n == "memory") {
        errs.push(FieldError::forbidden(
            path,
            "HugePages require cpu or memory",
        ));
    }
}

/// The checks every entry of `limits` or `requests` (at `list_path`) gets: its name and value.
fn validate_entry(list_path: &str, name: &str, value: &Quantity, errs: &mut Vec<FieldError>) {
    let field = format!("{list_path}[{name}]");
    validate_name(name, &field, errs);
    validate_quantity_value(&field, &value.0, is_extended(name), errs);
}

/// `validateContainerResourceName`: a qualified name; unprefixed ones standard for
/// containers, prefixed ones native or extended.
fn validate_name(name: &str, field: &str, errs: &mut Vec<FieldError>) {
    if let Err(labels::Error::InvalidKey { reason, .. }) = labels::validate_label_key(name) {
        errs.push(FieldError::invalid(field, name, reason));
        return;
    }
    if !name.contains('/') {
        if !STANDARD_CONTAINER_RESOURCES.contains(&name) && !is_huge_pages(name) {
            errs.push(FieldError::invalid(
                field,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native(name) && !is_extended(name) {
        errs.push(FieldError::invalid(
            field,
            name,
            "doesn't follow extended resource name standard",
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn errors(resources: serde_json::Value) -> Vec<String> {
        let resources: ResourceRequirements = serde_json::from_value(resources).expect("typed");
        let mut errs = Vec::new();
        validate_resource_requirements(&resources, "spec.containers[0].resources", &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn upstream_cases() {
        let p = "spec.containers[0].resources";
        let cases: [(serde_json::Value, Vec<String>); 9] = [
            (
                json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}}),
                vec![],
            ),
            (
                json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
                vec![format!(
                    "{p}.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"
                )],
            ),
            (
                json!({"requests": {"memory": "1Gi"}, "limits": {"memory": "512Mi"}}),
                vec![format!(
                    "{p}.requests: Invalid value: \"1Gi\": must be less than or equal to memory limit of 512Mi"
                )],
            ),
            (
                json!({"requests": {"cpu": "-1"}}),
                vec![format!(
                    "{p}.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"
                )],
            ),
            (
                json!({"limits": {"gpu": "1"}}),
                vec![format!(
                    "{p}.limits[gpu]: Invalid value: \"gpu\": must be a standard resource for containers"
                )],
            ),
            (
                json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}),
                vec![format!(
                    "{p}.requests: Invalid value: \"1\": must be equal to example.com/gpu limit of 2"
                )],
            ),
            (
                json!({"requests": {"example.com/gpu": "1"}}),
                vec![format!(
                    "{p}.limits: Required value: Limit must be set for non overcommitable resources"
                )],
            ),
            (
                json!({"limits": {"example.com/gpu": "500m"}}),
                vec![format!(
                    "{p}.limits[example.com/gpu]: Invalid value: \"500m\": must be an integer"
                )],
            ),
            (
                json!({"limits": {"hugepages-2Mi": "2Mi"}, "requests": {"hugepages-2Mi": "2Mi"}}),
                vec![format!("{p}: Forbidden: HugePages require cpu or memory")],
            ),
        ];
        for (resources, want) in cases {
            assert_eq!(errors(resources.clone()), want, "{resources}");
        }
    }
}
