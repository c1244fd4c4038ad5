//! Roles and ClusterRoles: policy-rule validation and the ClusterRole aggregation rule (upstream's `ValidateRole` / `ValidateClusterRole`, `validatePolicyRule`).

use serde_json::Value;

use crate::registry::strategy::{Grants, Strategy};
use crate::resources::go_values;
use crate::resources::label_selector;
use crate::validation::{FieldError, NameRule};

/// The Role strategy: path-segment names, rules without non-resource URLs.
#[derive(Debug, Default)]
pub struct RoleStrategy;

impl Strategy for RoleStrategy {
    fn grants(&self) -> Grants {
        Grants::Rules
    }

    fn name_rule(&self) -> NameRule {
        // rbac's minimalNameRequirements: any path segment name.
        NameRule::PathSegment
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_rules(obj, true)
    }
}

/// The ClusterRole strategy: as Roles, plus non-resource rules and the aggregation rule.
#[derive(Debug, Default)]
pub struct ClusterRoleStrategy;

impl Strategy for ClusterRoleStrategy {
    fn grants(&self) -> Grants {
        Grants::Rules
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_rules(obj, false);
        if let Some(rule) = obj.get("aggregationRule").filter(|r| !r.is_null()) {
            let selectors = rule
                .get("clusterRoleSelectors")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            if selectors.is_empty() {
                errs.push(FieldError::required(
                    "aggregationRule.clusterRoleSelectors",
                    "at least one clusterRoleSelector required if aggregationRule is non-nil",
                ));
            }
            for (i, selector) in selectors.iter().enumerate() {
                errs.extend(label_selector::validate(
                    Some(selector),
                    &format!("aggregationRule.clusterRoleSelectors[{i}]"),
                ));
            }
        }
        errs
    }
}

/// Every rule of `obj.rules`, as upstream's `ValidatePolicyRule`.
fn validate_rules(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let rules = obj
        .get("rules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (i, rule) in rules.iter().enumerate() {
        validate_policy_rule(rule, namespaced, &format!("rules[{i}]"), &mut errs);
    }
    errs
}

fn len(rule: &Value, field: &str) -> usize {
    rule.get(field)
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

/// Upstream's `ValidatePolicyRule`: verbs required; non-resource URLs only in cluster
/// roles and never with resources; resource rules need groups and resources, and names
/// only for one resource.
fn validate_policy_rule(rule: &Value, namespaced: bool, path: &str, errs: &mut Vec<FieldError>) {
    if len(rule, "verbs") == 0 {
        errs.push(FieldError::required(
            format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    if len(rule, "nonResourceURLs") > 0 {
        let urls = || go_values::string_slice("[]string", rule.get("nonResourceURLs"));
        if namespaced {
            errs.push(go_values::invalid(
                format!("{path}.nonResourceURLs"),
                urls(),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if len(rule, "apiGroups") > 0
            || len(rule, "resources") > 0
            || len(rule, "resourceNames") > 0
        {
            errs.push(go_values::invalid(
                format!("{path}.nonResourceURLs"),
                urls(),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return;
    }
    if len(rule, "apiGroups") == 0 {
        errs.push(FieldError::required(
            format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if len(rule, "resources") == 0 {
        errs.push(FieldError::required(
            format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    if len(rule, "resourceNames") > 0 && len(rule, "resources") > 1 {
        errs.push(FieldError::required(
            format!("{path}.resourceNames"),
            "resource names cannot apply to multiple resources",
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn policy_rules() {
        struct Case {
            name: &'static str,
            rules: Value,
            namespaced: bool,
            errors: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "resource rule",
                rules: json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]),
                namespaced: true,
                errors: &[],
            },
            Case {
                name: "no verbs, groups or resources",
                rules: json!([{}]),
                namespaced: true,
                errors: &[
                    "rules[0].verbs: Required value: verbs must contain at least one value",
                    "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
                    "rules[0].resources: Required value: resource rules must supply at least one resource",
                ],
            },
            Case {
                name: "non-resource URLs in a role",
                rules: json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]),
                namespaced: true,
                errors: &[
                    r#"rules[0].nonResourceURLs: Invalid value: []string{"/healthz"}: namespaced rules cannot apply to non-resource URLs"#,
                ],
            },
            Case {
                name: "non-resource URLs with resources",
                rules: json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"], "resources": ["pods"]}]),
                namespaced: false,
                errors: &[
                    r#"rules[0].nonResourceURLs: Invalid value: []string{"/healthz"}: rules cannot apply to both regular resources and non-resource URLs"#,
                ],
            },
            Case {
                name: "names over two resources",
                rules: json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods", "secrets"], "resourceNames": ["a"]}]),
                namespaced: true,
                errors: &[
                    "rules[0].resourceNames: Required value: resource names cannot apply to multiple resources",
                ],
            },
        ];
        for case in cases {
            let errs: Vec<String> = validate_rules(&json!({"rules": case.rules}), case.namespaced)
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(errs, case.errors, "{}", case.name);
        }
    }

    #[test]
    fn aggregation_rules_need_valid_selectors() {
        let empty = json!({"aggregationRule": {"clusterRoleSelectors": []}});
        let errs = ClusterRoleStrategy.validate(&empty);
        assert_eq!(errs[0].field, "aggregationRule.clusterRoleSelectors");
        let bad = json!({"aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"rbac.example.com/aggregate-to-view": "true"}},
            {"matchExpressions": [{"key": "a", "operator": "In"}]}]}});
        let errs = ClusterRoleStrategy.validate(&bad);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].field,
            "aggregationRule.clusterRoleSelectors[1].matchExpressions[0].values"
        );
    }
}
