//! admissionregistration.k8s.io/v1 mutatingadmissionpolicies and their bindings: upstream's defaults (`SetDefaults_MutatingAdmissionPolicySpec`, `_MatchResources`) and validation (`validateMutatingAdmissionPolicySpec`, `validateMutation`, `validateMutatingAdmissionPolicyBindingSpec`), sharing the validating policies' parts ([`crate::resources::admission_policy`]).
//!
//! The expressions are parsed here, as upstream compiles them on create and update: one
//! that does not parse is an `Invalid value` of its field. Their types are not checked
//! (kcm's CEL has no schema-typed environment); a wrong field is found when the policy
//! applies ([`crate::admission::mutating_policy`]).

use std::collections::HashSet;
use std::panic::catch_unwind;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
};
use serde_json::Value;

use crate::registry::strategy::{Strategy, typed_roundtrip};
use crate::resources::admission_policy::{
    default_match_resources, list, str_of, validate_failure_policy, validate_match_resources,
    validate_param_kind, validate_param_ref, validate_policy_name,
};
use crate::validation::FieldError;

/// The operations a mutation can apply to, sorted as upstream's
/// `supportedMutatingOperations.List()`: a delete has no object to mutate.
const MUTATING_OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "UPDATE"];

/// Upstream's `supportedReinvocationPolicies.List()`.
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];

/// The most match conditions a policy may have.
const MAX_MATCH_CONDITIONS: usize = 64;

/// CEL's reserved words, which a variable may not be named (upstream's `celReserved`).
const CEL_RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Decodes a MutatingAdmissionPolicy with `failurePolicy: Fail` and the match defaults
/// (`reinvocationPolicy` has no default: it is required).
pub fn decode_policy(obj: Value) -> Result<Value, String> {
    typed_roundtrip::<MutatingAdmissionPolicy>(obj, |p| {
        if let Some(spec) = p.spec.as_mut() {
            spec.failure_policy.get_or_insert_with(|| "Fail".to_owned());
            if let Some(m) = spec.match_constraints.as_mut() {
                default_match_resources(m);
            }
        }
    })
}

/// Decodes a MutatingAdmissionPolicyBinding with the match defaults.
pub fn decode_binding(obj: Value) -> Result<Value, String> {
    typed_roundtrip::<MutatingAdmissionPolicyBinding>(obj, |b| {
        if let Some(m) = b.spec.as_mut().and_then(|s| s.match_resources.as_mut()) {
            default_match_resources(m);
        }
    })
}

/// The MutatingAdmissionPolicy strategy (no status: v1 has none).
#[derive(Debug, Default)]
pub struct PolicyStrategy;

impl Strategy for PolicyStrategy {
    /// Upstream's `validateMutatingAdmissionPolicySpec`.
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
            Some(m) => {
                // The resource rules are required: they give the mutations their types.
                validate_match_resources(m, "spec.matchConstraints", true, &mut errs);
                validate_mutating_operations(m, "spec.matchConstraints", &mut errs);
            }
        }
        validate_match_conditions(list(spec, "matchConditions"), &mut errs);
        for (i, variable) in list(spec, "variables").iter().enumerate() {
            validate_variable(variable, &format!("spec.variables[{i}]"), &mut errs);
        }
        let mutations = list(spec, "mutations");
        if mutations.is_empty() {
            errs.push(FieldError::required(
                "spec.mutations",
                "mutations must contain at least one item",
            ));
        }
        for (i, mutation) in mutations.iter().enumerate() {
            validate_mutation(mutation, &format!("spec.mutations[{i}]"), &mut errs);
        }
        match str_of(spec, "reinvocationPolicy") {
            "" => errs.push(FieldError::required("spec.reinvocationPolicy", "")),
            p if REINVOCATION_POLICIES.contains(&p) => {}
            other => errs.push(FieldError::not_supported(
                "spec.reinvocationPolicy",
                other,
                REINVOCATION_POLICIES,
            )),
        }
        errs
    }
}

/// The MutatingAdmissionPolicyBinding strategy.
#[derive(Debug, Default)]
pub struct BindingStrategy;

impl Strategy for BindingStrategy {
    /// Upstream's `validateMutatingAdmissionPolicyBindingSpec`.
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
            validate_mutating_operations(m, "spec.matchResources", &mut errs);
        }
        errs
    }
}

/// Only creates, updates and connects can be mutated. Upstream's path names no rule index.
fn validate_mutating_operations(m: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for rule in list(Some(m), "resourceRules") {
        for op in list(Some(rule), "operations") {
            let op = op.as_str().unwrap_or("");
            if !MUTATING_OPERATIONS.contains(&op) {
                errs.push(FieldError::not_supported(
                    format!("{path}.resourceRules.operations"),
                    op,
                    MUTATING_OPERATIONS,
                ));
            }
        }
    }
}

/// Upstream's `validateMatchConditions`: at most 64, each named once, each with a name and
/// an expression that parses.
fn validate_match_conditions(conditions: &[Value], errs: &mut Vec<FieldError>) {
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errs.push(FieldError::too_many(
            "spec.matchConditions",
            conditions.len(),
            MAX_MATCH_CONDITIONS,
        ));
    }
    let mut names = HashSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let path = format!("spec.matchConditions[{i}]");
        let expression = str_of(Some(condition), "expression");
        if expression.trim().is_empty() {
            errs.push(FieldError::required(format!("{path}.expression"), ""));
        } else {
            validate_parses(expression, &format!("{path}.expression"), errs);
        }
        let name = str_of(Some(condition), "name");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        } else if !names.insert(name) {
            errs.push(FieldError::duplicate(format!("{path}.name"), name));
        }
    }
}

/// Upstream's `validateVariable`: a CEL identifier for a name, and an expression.
fn validate_variable(variable: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let name = str_of(Some(variable), "name");
    if name.trim().is_empty() {
        errs.push(FieldError::required(
            format!("{path}.name"),
            "name is not specified",
        ));
    } else if !is_cel_identifier(name) {
        errs.push(FieldError::invalid(
            format!("{path}.name"),
            name,
            "name is not a valid CEL identifier",
        ));
    }
    let expression = str_of(Some(variable), "expression");
    if expression.trim().is_empty() {
        errs.push(FieldError::required(
            format!("{path}.expression"),
            "expression is not specified",
        ));
    } else {
        validate_parses(expression, &format!("{path}.expression"), errs);
    }
}

/// Upstream's `validateMutation`: the patch type names which of `applyConfiguration` and
/// `jsonPatch` is set, and only that one.
fn validate_mutation(mutation: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let set = |field: &str| mutation.get(field).is_some_and(|v| !v.is_null());
    let (own, other, other_rendered) = match str_of(Some(mutation), "patchType") {
        "JSONPatch" => ("jsonPatch", "applyConfiguration", "{applyConfiguration}"),
        "ApplyConfiguration" => ("applyConfiguration", "jsonPatch", "{jsonPatch}"),
        other => {
            errs.push(FieldError::not_supported(
                format!("{path}.patchType"),
                other,
                &["JSONPatch", "ApplyConfiguration"],
            ));
            return;
        }
    };
    let patch_type = str_of(Some(mutation), "patchType");
    if set(own) {
        let expression = str_of(mutation.get(own), "expression");
        let expression_path = format!("{path}.{own}.expression");
        if expression.trim().is_empty() {
            errs.push(FieldError::required(
                expression_path,
                "expression is not specified",
            ));
        } else {
            validate_parses(expression, &expression_path, errs);
        }
    } else {
        errs.push(FieldError::required(
            format!("{path}.{own}"),
            format!("must be specified when patchType is {patch_type}"),
        ));
    }
    if set(other) {
        errs.push(FieldError::invalid(
            format!("{path}.{other}"),
            other_rendered,
            format!("must not be specified when patchType is {patch_type}"),
        ));
    }
}

/// An expression that does not parse is invalid, with the parser's message (upstream's
/// `compilation failed: ...`).
fn validate_parses(expression: &str, path: &str, errs: &mut Vec<FieldError>) {
    // The parser is third-party code fed user input: a panic is a parse failure.
    let message = match catch_unwind(|| cel::Program::compile(expression)) {
        Ok(Ok(_)) => return,
        Ok(Err(e)) => e.to_string().trim().to_owned(),
        Err(_) => "the expression could not be parsed".to_owned(),
    };
    errs.push(FieldError::invalid(
        path,
        expression,
        format!("compilation failed: {message}"),
    ));
}

/// Upstream's `isCELIdentifier`: `[_a-zA-Z][_a-zA-Z0-9]*`, not a reserved word.
fn is_cel_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !CEL_RESERVED.contains(&name)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn policy(spec: Value) -> Value {
        decode_policy(json!({"metadata": {"name": "p"}, "spec": spec})).expect("decodes")
    }

    fn rules(operations: Value) -> Value {
        json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": operations, "resources": ["deployments"]}]})
    }

    #[test]
    fn policies_default_failure_policy_and_match_resources_not_reinvocation() {
        let p = policy(json!({"matchConstraints": rules(json!(["CREATE"])),
            "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                "expression": "Object{metadata: Object.metadata{annotations: {\"a\": \"b\"}}}"}}]}));
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        let m = &p["spec"]["matchConstraints"];
        assert_eq!(
            (
                &m["matchPolicy"],
                &m["namespaceSelector"],
                &m["objectSelector"]
            ),
            (&json!("Equivalent"), &json!({}), &json!({}))
        );
        assert_eq!(m["resourceRules"][0]["scope"], "*");
        assert!(PolicyStrategy.validate(&p).is_empty(), "{p}");
        let bare = policy(json!({"matchConstraints": rules(json!(["CREATE"])), "mutations": []}));
        assert_eq!(bare["spec"].get("reinvocationPolicy"), None);
    }

    #[test]
    fn policy_validation_messages() {
        let cases = [
            (
                "empty",
                json!({}),
                vec![
                    "spec.matchConstraints: Required value",
                    "spec.mutations: Required value: mutations must contain at least one item",
                    "spec.reinvocationPolicy: Required value",
                ],
            ),
            (
                "delete cannot be mutated",
                json!({"matchConstraints": rules(json!(["DELETE"])), "reinvocationPolicy": "Always",
                    "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}}]}),
                vec![
                    r#"spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE""#,
                    r#"spec.reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never""#,
                ],
            ),
            (
                "mutations name their patch",
                json!({"matchConstraints": rules(json!(["CREATE"])), "reinvocationPolicy": "Never",
                "mutations": [
                    {"patchType": "ApplyConfiguration", "jsonPatch": {"expression": "[]"}},
                    {"patchType": "JSONPatch", "jsonPatch": {"expression": " "}},
                    {"patchType": "Merge"},
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{"}},
                ]}),
                vec![
                    "spec.mutations[0].applyConfiguration: Required value: must be specified when patchType is ApplyConfiguration",
                    "spec.mutations[0].jsonPatch: Invalid value: \"{jsonPatch}\": must not be specified when patchType is ApplyConfiguration",
                    "spec.mutations[1].jsonPatch.expression: Required value: expression is not specified",
                    r#"spec.mutations[2].patchType: Unsupported value: "Merge": supported values: "JSONPatch", "ApplyConfiguration""#,
                ],
            ),
            (
                "variables and match conditions",
                json!({"matchConstraints": rules(json!(["*"])), "reinvocationPolicy": "IfNeeded",
                    "matchConditions": [{"name": "a", "expression": "true"}, {"name": "a", "expression": ""}],
                    "variables": [{"name": "in", "expression": "1"}, {"name": "", "expression": "2"}],
                    "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}}]}),
                vec![
                    "spec.matchConditions[1].expression: Required value",
                    r#"spec.matchConditions[1].name: Duplicate value: "a""#,
                    r#"spec.variables[0].name: Invalid value: "in": name is not a valid CEL identifier"#,
                    "spec.variables[1].name: Required value: name is not specified",
                ],
            ),
        ];
        for (name, spec, want) in cases {
            let got = messages(&PolicyStrategy.validate(&policy(spec)));
            // The parser's own words are not upstream's: only the field and its start are.
            let got: Vec<String> = got
                .into_iter()
                .filter(|m| !m.contains("compilation failed"))
                .collect();
            assert_eq!(got, want, "{name}");
        }
        let unparsable = policy(json!({"matchConstraints": rules(json!(["CREATE"])),
            "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{"}}]}));
        let errs = messages(&PolicyStrategy.validate(&unparsable));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with(
                r#"spec.mutations[0].applyConfiguration.expression: Invalid value: "Object{": compilation failed: "#
            ),
            "{errs:?}"
        );
    }

    #[test]
    fn bindings_validate() {
        let binding = |spec: Value| {
            decode_binding(json!({"metadata": {"name": "b"}, "spec": spec})).expect("decodes")
        };
        assert!(
            BindingStrategy
                .validate(&binding(json!({"policyName": "p"})))
                .is_empty()
        );
        let errs = messages(&BindingStrategy.validate(&binding(json!({
            "paramRef": {"name": "cfg", "selector": {}},
            "matchResources": rules(json!(["DELETE"]))}))));
        assert_eq!(
            errs,
            [
                "spec.policyName: Required value",
                "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.parameterNotFoundAction: Required value",
                r#"spec.matchResources.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE""#,
            ]
        );
        let b = binding(json!({"policyName": "p", "matchResources": {}}));
        assert_eq!(b["spec"]["matchResources"]["matchPolicy"], "Equivalent");
    }
}
