//! admissionregistration.k8s.io/v1 validatingadmissionpolicies (+status) and their bindings: upstream's defaults (`SetDefaults_ValidatingAdmissionPolicySpec`, `_MatchResources`) and structural validation, with the parts the mutating policies share ([`crate::resources::mutating_admission_policy`]). The CEL expressions are not compiled here; the admission plugins compile them when they apply.

use std::collections::HashSet;

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use crate::registry::strategy::{MetadataReset, Strategy, typed_roundtrip};
use crate::resources::label_selector;
use crate::resources::webhook::validate_rule_with_operations;
use crate::validation::{FieldError, NameRule};

/// `SetDefaults_MatchResources` and the rules' `scope: "*"`.
pub(crate) fn default_match_resources(m: &mut MatchResources) {
    m.match_policy
        .get_or_insert_with(|| "Equivalent".to_owned());
    m.namespace_selector
        .get_or_insert_with(LabelSelector::default);
    m.object_selector.get_or_insert_with(LabelSelector::default);
    let rules = m
        .resource_rules
        .iter_mut()
        .chain(m.exclude_resource_rules.iter_mut());
    for rule in rules.flatten() {
        rule.scope.get_or_insert_with(|| "*".to_owned());
    }
}

/// Decodes a ValidatingAdmissionPolicy with `failurePolicy: Fail` and the match defaults.
pub fn decode_policy(obj: Value) -> Result<Value, String> {
    typed_roundtrip::<ValidatingAdmissionPolicy>(obj, |p| {
        if let Some(spec) = p.spec.as_mut() {
            spec.failure_policy.get_or_insert_with(|| "Fail".to_owned());
            if let Some(m) = spec.match_constraints.as_mut() {
                default_match_resources(m);
            }
        }
    })
}

/// Decodes a ValidatingAdmissionPolicyBinding with the match defaults.
pub fn decode_binding(obj: Value) -> Result<Value, String> {
    typed_roundtrip::<ValidatingAdmissionPolicyBinding>(obj, |b| {
        if let Some(m) = b.spec.match_resources.as_mut() {
            default_match_resources(m);
        }
    })
}

pub(crate) fn list<'a>(v: Option<&'a Value>, key: &str) -> &'a [Value] {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub(crate) fn str_of<'a>(v: Option<&'a Value>, key: &str) -> &'a str {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The ValidatingAdmissionPolicy strategy: status through `/status` only (the type checker's,
/// which kcm does not run).
#[derive(Debug, Default)]
pub struct PolicyStrategy;

impl Strategy for PolicyStrategy {
    /// `validatingAdmissionPolicyStatusStrategy.PrepareForUpdate` calls
    /// `ResetObjectMetaForStatus`.
    fn status_metadata_reset(&self) -> MetadataReset {
        MetadataReset::FOR_STATUS
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // The status starts empty; Go prints the empty status struct.
        obj["status"] = json!({});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let spec = obj.get("spec");
        validate_failure_policy(spec, &mut errs);
        validate_param_kind(spec, &mut errs);
        match spec
            .and_then(|s| s.get("matchConstraints"))
            .filter(|m| !m.is_null())
        {
            None => errs.push(FieldError::required("spec.matchConstraints", "")),
            Some(m) => validate_match_resources(m, "spec.matchConstraints", true, &mut errs),
        }
        let validations = list(spec, "validations");
        if validations.is_empty() && list(spec, "auditAnnotations").is_empty() {
            errs.push(FieldError::required(
                "spec.validations",
                "validations or auditAnnotations must contain at least one item",
            ));
        }
        for (i, v) in validations.iter().enumerate() {
            let path = format!("spec.validations[{i}]");
            if str_of(Some(v), "expression").is_empty() {
                errs.push(FieldError::required(
                    format!("{path}.expression"),
                    "expression is not specified",
                ));
            }
            if let Some(reason) = v.get("reason").and_then(Value::as_str)
                && ![
                    "Forbidden",
                    "Invalid",
                    "RequestEntityTooLarge",
                    "Unauthorized",
                ]
                .contains(&reason)
            {
                errs.push(FieldError::not_supported(
                    format!("{path}.reason"),
                    reason,
                    &[
                        "Forbidden",
                        "Invalid",
                        "RequestEntityTooLarge",
                        "Unauthorized",
                    ],
                ));
            }
        }
        for (i, a) in list(spec, "auditAnnotations").iter().enumerate() {
            let path = format!("spec.auditAnnotations[{i}]");
            if str_of(Some(a), "key").is_empty() {
                errs.push(FieldError::required(format!("{path}.key"), ""));
            }
            if str_of(Some(a), "valueExpression").is_empty() {
                errs.push(FieldError::required(
                    format!("{path}.valueExpression"),
                    "valueExpression is not specified",
                ));
            }
        }
        errs
    }
}

/// A policy's `spec.failurePolicy`: required (defaulted to `Fail` on decode), `Fail` or `Ignore`.
pub(crate) fn validate_failure_policy(spec: Option<&Value>, errs: &mut Vec<FieldError>) {
    match spec
        .and_then(|s| s.get("failurePolicy"))
        .and_then(Value::as_str)
    {
        None => errs.push(FieldError::required("spec.failurePolicy", "")),
        Some("Fail" | "Ignore") => {}
        Some(other) => errs.push(FieldError::not_supported(
            "spec.failurePolicy",
            other,
            &["Fail", "Ignore"],
        )),
    }
}

/// A policy's `spec.paramKind`, when set: `apiVersion` and `kind` are required (upstream's
/// `validateParamKind`, without its group/version syntax checks).
pub(crate) fn validate_param_kind(spec: Option<&Value>, errs: &mut Vec<FieldError>) {
    let Some(kind) = spec
        .and_then(|s| s.get("paramKind"))
        .filter(|k| !k.is_null())
    else {
        return;
    };
    if str_of(Some(kind), "apiVersion").is_empty() {
        errs.push(FieldError::required("spec.paramKind.apiVersion", ""));
    }
    if str_of(Some(kind), "kind").is_empty() {
        errs.push(FieldError::required("spec.paramKind.kind", ""));
    }
}

/// A binding's `spec.policyName`: required, a DNS subdomain.
pub(crate) fn validate_policy_name(spec: Option<&Value>, errs: &mut Vec<FieldError>) {
    let policy = str_of(spec, "policyName");
    if policy.is_empty() {
        errs.push(FieldError::required("spec.policyName", ""));
    } else {
        for msg in NameRule::Subdomain.check(policy) {
            errs.push(FieldError::invalid("spec.policyName", policy, msg));
        }
    }
}

/// Upstream's `validateParamRef`: a binding's `spec.paramRef`, when set, names its params by
/// `name` or by `selector` (not both) and says what to do when none is found.
pub(crate) fn validate_param_ref(spec: Option<&Value>, errs: &mut Vec<FieldError>) {
    let Some(param_ref) = spec
        .and_then(|s| s.get("paramRef"))
        .filter(|p| !p.is_null())
    else {
        return;
    };
    let name = str_of(Some(param_ref), "name");
    let selector = param_ref.get("selector").filter(|s| !s.is_null());
    if !name.is_empty() {
        for msg in NameRule::PathSegment.check(name) {
            errs.push(FieldError::invalid("spec.paramRef.name", name, msg));
        }
        if selector.is_some() {
            errs.push(FieldError::forbidden(
                "spec.paramRef.name",
                "name and selector are mutually exclusive",
            ));
        }
    }
    if selector.is_some() {
        errs.extend(label_selector::validate(selector, "spec.paramRef.selector"));
        if !name.is_empty() {
            errs.push(FieldError::forbidden(
                "spec.paramRef.selector",
                "name and selector are mutually exclusive",
            ));
        }
    }
    if name.is_empty() && selector.is_none() {
        errs.push(FieldError::required(
            "spec.paramRef",
            "one of name or selector must be specified",
        ));
    }
    match param_ref
        .get("parameterNotFoundAction")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
    {
        None => errs.push(FieldError::required(
            "spec.paramRef.parameterNotFoundAction",
            "",
        )),
        Some("Allow" | "Deny") => {}
        Some(other) => errs.push(FieldError::not_supported(
            "spec.paramRef.parameterNotFoundAction",
            other,
            &["Deny", "Allow"],
        )),
    }
}

/// Upstream's `validateMatchResources`: rules (required for a policy's constraints),
/// selectors and the match policy.
pub(crate) fn validate_match_resources(
    m: &Value,
    path: &str,
    rules_required: bool,
    errs: &mut Vec<FieldError>,
) {
    if let Some(policy) = m.get("matchPolicy").and_then(Value::as_str)
        && policy != "Equivalent"
        && policy != "Exact"
    {
        errs.push(FieldError::not_supported(
            format!("{path}.matchPolicy"),
            policy,
            &["Equivalent", "Exact"],
        ));
    }
    for selector in ["namespaceSelector", "objectSelector"] {
        errs.extend(label_selector::validate(
            m.get(selector),
            &format!("{path}.{selector}"),
        ));
    }
    let rules = list(Some(m), "resourceRules");
    if rules_required && rules.is_empty() {
        errs.push(FieldError::required(format!("{path}.resourceRules"), ""));
    }
    for (field, items) in [
        ("resourceRules", rules),
        (
            "excludeResourceRules",
            list(Some(m), "excludeResourceRules"),
        ),
    ] {
        for (i, rule) in items.iter().enumerate() {
            validate_rule_with_operations(rule, &format!("{path}.{field}[{i}]"), errs);
        }
    }
}

/// The ValidatingAdmissionPolicyBinding strategy.
#[derive(Debug, Default)]
pub struct BindingStrategy;

impl Strategy for BindingStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let spec = obj.get("spec");
        validate_policy_name(spec, &mut errs);
        validate_param_ref(spec, &mut errs);
        if let Some(m) = spec
            .and_then(|s| s.get("matchResources"))
            .filter(|m| !m.is_null())
        {
            validate_match_resources(m, "spec.matchResources", false, &mut errs);
        }
        let actions = list(spec, "validationActions");
        if actions.is_empty() {
            errs.push(FieldError::required(
                "spec.validationActions",
                "at least one validation action is required",
            ));
        }
        let mut seen = HashSet::new();
        for (i, action) in actions.iter().enumerate() {
            let action = action.as_str().unwrap_or("");
            if !seen.insert(action) {
                errs.push(FieldError::duplicate(
                    format!("spec.validationActions[{i}]"),
                    action,
                ));
            }
            if !["Audit", "Deny", "Warn"].contains(&action) {
                errs.push(FieldError::not_supported(
                    format!("spec.validationActions[{i}]"),
                    action,
                    &["Audit", "Deny", "Warn"],
                ));
            }
        }
        if seen.contains("Deny") && seen.contains("Warn") {
            errs.push(FieldError::invalid(
                "spec.validationActions",
                Value::Array(actions.to_vec()),
                "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
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
    fn policies_default_and_validate() {
        let policy = decode_policy(json!({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5"}]}}))
        .expect("decodes");
        assert_eq!(policy["spec"]["failurePolicy"], "Fail");
        assert_eq!(
            policy["spec"]["matchConstraints"]["matchPolicy"],
            "Equivalent"
        );
        assert_eq!(
            policy["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
            "*"
        );
        assert!(PolicyStrategy.validate(&policy).is_empty());
        let empty = decode_policy(json!({"metadata": {"name": "p"}, "spec": {}})).expect("decodes");
        let errs: Vec<String> = PolicyStrategy
            .validate(&empty)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                "spec.matchConstraints: Required value",
                "spec.validations: Required value: validations or auditAnnotations must contain at least one item"
            ]
        );
    }

    #[test]
    fn bindings_validate() {
        let binding =
            json!({"spec": {"policyName": "p", "validationActions": ["Deny", "Warn", "Deny"]}});
        let errs: Vec<String> = BindingStrategy
            .validate(&binding)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs[0],
            r#"spec.validationActions[2]: Duplicate value: "Deny""#
        );
        assert!(errs[1].ends_with("must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"));
        let ok = json!({"spec": {"policyName": "p", "validationActions": ["Deny"],
            "paramRef": {"name": "cfg", "parameterNotFoundAction": "Deny"}}});
        assert!(BindingStrategy.validate(&ok).is_empty());
        assert_eq!(
            BindingStrategy.validate(&json!({"spec": {}}))[0].to_string(),
            "spec.policyName: Required value"
        );
    }
}
