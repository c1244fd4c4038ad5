//! A ValidatingAdmissionPolicy and a binding as the plugin uses them: decoded, selectors parsed and every expression compiled, once per resourceVersion.

use k8s_openapi::api::admissionregistration::v1::{
    ParamRef, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, Variable,
};
use serde_json::Value;

use super::expression::{Declarations, Expression};
use super::matching::Matcher;
use crate::object;

/// `failurePolicy`: what an error (configuration, compilation, evaluation) does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailurePolicy {
    /// The request is refused (the default).
    Fail,
    /// The error is ignored.
    Ignore,
}

/// An expression, or why it did not compile.
pub type Compiled = Result<Expression, String>;

/// One of `validations`.
#[derive(Debug)]
pub struct Validation {
    /// The compiled `expression`.
    pub expression: Compiled,
    /// The expression as written (for `failed expression: ...`).
    pub source: String,
    /// `message`.
    pub message: String,
    /// The compiled `messageExpression`, if given.
    pub message_expression: Option<Compiled>,
    /// `reason`: `Forbidden`, `Invalid`, ...; `None` means `Invalid`.
    pub reason: Option<String>,
}

/// A policy, compiled.
#[derive(Debug)]
pub struct Policy {
    /// `metadata.name`.
    pub name: String,
    /// The resourceVersion it was compiled from.
    pub resource_version: String,
    /// `spec.failurePolicy`.
    pub failure_policy: FailurePolicy,
    /// `spec.paramKind`: `(apiVersion, kind)`.
    pub param_kind: Option<(String, String)>,
    /// `spec.matchConstraints`, or why they do not parse.
    pub matcher: Result<Matcher, String>,
    /// `spec.matchConditions`: `(name, expression)`.
    pub match_conditions: Vec<(String, Compiled)>,
    /// `spec.variables`, in order (all compiled, or `config_error` says why not).
    pub variables: Vec<(String, Expression)>,
    /// `spec.validations`.
    pub validations: Vec<Validation>,
    /// `spec.auditAnnotations`: `(key, valueExpression)`.
    pub audit_annotations: Vec<(String, Compiled)>,
    /// Why the policy cannot be evaluated at all (a variable that does not compile).
    pub config_error: Option<String>,
}

impl Policy {
    /// Compiles a stored policy.
    pub fn compile(obj: &Value) -> Result<Policy, String> {
        let policy: ValidatingAdmissionPolicy =
            serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
        let spec = policy.spec.unwrap_or_default();
        let param_kind = spec.param_kind.map(|k| {
            (
                k.api_version.unwrap_or_default(),
                k.kind.unwrap_or_default(),
            )
        });
        let mut decls = Declarations {
            params: param_kind.is_some(),
            authorizer: false,
            namespaces: &[],
            variables: Vec::new(),
            growth: Vec::new(),
        };
        let (variables, config_error) = compile_variables(
            spec.variables.unwrap_or_default(),
            &mut decls,
            Expression::compile,
        );
        let compile = |source: &str| Expression::compile(source, &decls);
        let match_conditions = spec
            .match_conditions
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.name, compile(&c.expression)))
            .collect();
        let validations = spec
            .validations
            .unwrap_or_default()
            .into_iter()
            .map(|v| Validation {
                expression: compile(&v.expression),
                source: v.expression,
                message: v.message.unwrap_or_default(),
                message_expression: v
                    .message_expression
                    .filter(|m| !m.is_empty())
                    .map(|m| compile(&m)),
                reason: v.reason,
            })
            .collect();
        let audit_annotations = spec
            .audit_annotations
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.key, compile(&a.value_expression)))
            .collect();
        Ok(Policy {
            name: object::name(obj).to_owned(),
            resource_version: object::resource_version(obj).to_owned(),
            failure_policy: match spec.failure_policy.as_deref() {
                Some("Ignore") => FailurePolicy::Ignore,
                _ => FailurePolicy::Fail,
            },
            param_kind,
            matcher: Matcher::new(&spec.match_constraints.unwrap_or_default()),
            match_conditions,
            variables,
            validations,
            audit_annotations,
            config_error,
        })
    }
}

/// Compiles a policy's `spec.variables` in order, each able to use the ones before it (they
/// join `decls`, with their size growth); the compiled ones, and the first compile error as
/// the policy's configuration error. Shared by the validating and mutating policies.
pub fn compile_variables(
    variables: Vec<Variable>,
    decls: &mut Declarations,
    compile: impl Fn(&str, &Declarations) -> Result<Expression, String>,
) -> (Vec<(String, Expression)>, Option<String>) {
    let mut compiled = Vec::new();
    let mut config_error = None;
    for (i, v) in variables.into_iter().enumerate() {
        match compile(&v.expression, decls) {
            Ok(e) => {
                decls.growth.push(e.growth.total);
                compiled.push((v.name.clone(), e));
            }
            Err(e) => {
                decls.growth.push(0);
                config_error.get_or_insert(format!(
                    "spec.variables[{i}].expression: compilation failed: {e}"
                ));
            }
        }
        decls.variables.push(v.name);
    }
    (compiled, config_error)
}

/// `validationActions`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Actions {
    /// `Deny`: a failure refuses the request.
    pub deny: bool,
    /// `Warn`: a failure is a warning to the client.
    pub warn: bool,
    /// `Audit`: a failure is recorded for audit.
    pub audit: bool,
}

/// A binding, decoded.
#[derive(Debug)]
pub struct Binding {
    /// `metadata.name`.
    pub name: String,
    /// The resourceVersion it was decoded from.
    pub resource_version: String,
    /// `spec.policyName`.
    pub policy_name: String,
    /// `spec.validationActions`, as written (for the audit annotation) and as flags.
    pub actions: Vec<String>,
    /// The same as flags.
    pub action_set: Actions,
    /// `spec.paramRef`.
    pub param_ref: Option<ParamRef>,
    /// `spec.matchResources`, if given, or why it does not parse.
    pub matcher: Option<Result<Matcher, String>>,
}

impl Binding {
    /// Decodes a stored binding.
    pub fn decode(obj: &Value) -> Result<Binding, String> {
        let binding: ValidatingAdmissionPolicyBinding =
            serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
        let spec = binding.spec;
        let actions = spec.validation_actions;
        let has = |a: &str| actions.iter().any(|x| x == a);
        Ok(Binding {
            name: object::name(obj).to_owned(),
            resource_version: object::resource_version(obj).to_owned(),
            policy_name: spec.policy_name,
            action_set: Actions {
                deny: has("Deny"),
                warn: has("Warn"),
                audit: has("Audit"),
            },
            actions,
            param_ref: spec.param_ref,
            matcher: spec.match_resources.as_ref().map(Matcher::new),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_policy_compiles_each_expression_once_with_its_declarations() {
        let policy = Policy::compile(&json!({
            "metadata": {"name": "p", "resourceVersion": "7"},
            "spec": {
                "failurePolicy": "Ignore",
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"],
                    "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]},
                "variables": [{"name": "r", "expression": "object.spec.replicas"}],
                "validations": [
                    {"expression": "variables.r <= int(params.data.max)", "reason": "Forbidden"},
                    {"expression": "variables.nope", "message": "m"},
                ],
            }
        }))
        .expect("compiles");
        assert_eq!(policy.name, "p");
        assert_eq!(policy.resource_version, "7");
        assert_eq!(policy.failure_policy, FailurePolicy::Ignore);
        assert_eq!(
            policy.param_kind,
            Some(("v1".to_owned(), "ConfigMap".to_owned()))
        );
        assert!(policy.validations[0].expression.is_ok());
        assert_eq!(policy.validations[0].reason.as_deref(), Some("Forbidden"));
        assert!(
            policy.validations[1]
                .expression
                .as_ref()
                .expect_err("undeclared")
                .contains("variables.nope")
        );
        assert!(policy.config_error.is_none());
    }

    #[test]
    fn a_variable_that_does_not_compile_is_a_configuration_error() {
        let policy = Policy::compile(&json!({"metadata": {"name": "p"}, "spec": {
            "variables": [{"name": "a", "expression": "variables.b"},
                          {"name": "b", "expression": "1"}],
            "validations": [{"expression": "true"}]}}))
        .expect("decodes");
        assert!(
            policy
                .config_error
                .as_deref()
                .is_some_and(|e| e.starts_with("spec.variables[0].expression: compilation failed")),
            "{:?}",
            policy.config_error
        );
    }

    #[test]
    fn bindings_decode_their_actions() {
        let binding = Binding::decode(&json!({"metadata": {"name": "b"}, "spec": {
            "policyName": "p", "validationActions": ["Warn", "Audit"]}}))
        .expect("decodes");
        assert_eq!(
            binding.action_set,
            Actions {
                deny: false,
                warn: true,
                audit: true
            }
        );
        assert_eq!(binding.policy_name, "p");
        assert!(binding.matcher.is_none());
    }
}
