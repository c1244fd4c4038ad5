//! A MutatingAdmissionPolicy and a binding as the plugin uses them: decoded, selectors parsed and every expression compiled in the mutation environment, once per resourceVersion.

use std::collections::BTreeSet;
use std::panic::catch_unwind;
use std::sync::Arc;

use cel::{Env, Program};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, ParamRef,
};
use serde_json::Value;

use super::environment;
use crate::admission::validating_policy::compiled::{Compiled, FailurePolicy, compile_variables};
use crate::admission::validating_policy::expression::{Declarations, Expression};
use crate::admission::validating_policy::matching::Matcher;
use crate::object;

/// How a mutation changes the object (`patchType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `ApplyConfiguration`: the expression returns an `Object`, merged into the object.
    ApplyConfiguration,
    /// `JSONPatch`: the expression returns a list of `JSONPatch` operations.
    JsonPatch,
}

/// One of `mutations`.
#[derive(Debug)]
pub struct Mutation {
    /// Which patch the expression makes.
    pub patch_type: PatchType,
    /// The compiled expression.
    pub expression: Compiled,
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
    /// `spec.mutations`, in order.
    pub mutations: Vec<Mutation>,
    /// `spec.reinvocationPolicy: IfNeeded`.
    pub reinvoke_if_needed: bool,
    /// Why the policy cannot be applied at all (a variable that does not compile).
    pub config_error: Option<String>,
}

/// The function namespaces of the mutation environment.
const NAMESPACES: &[&str] = &["jsonpatch"];

impl Policy {
    /// Compiles a stored policy.
    pub fn compile(obj: &Value) -> Result<Policy, String> {
        let policy: MutatingAdmissionPolicy =
            serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
        let spec = policy.spec.unwrap_or_default();
        let param_kind = spec.param_kind.map(|k| {
            (
                k.api_version.unwrap_or_default(),
                k.kind.unwrap_or_default(),
            )
        });
        let variables_in = spec.variables.unwrap_or_default();
        let conditions_in = spec.match_conditions.unwrap_or_default();
        let mutations_in = spec.mutations.unwrap_or_default();
        let sources = variables_in
            .iter()
            .map(|v| v.expression.as_str())
            .chain(conditions_in.iter().map(|c| c.expression.as_str()))
            .chain(
                mutations_in
                    .iter()
                    .filter_map(|m| mutation_source(m).map(|(_, s)| s)),
            );
        let env = env_for(sources);
        let compile_in = |source: &str, decls: &Declarations| match &env {
            Ok(env) => Expression::compile_in(source, decls, env),
            Err(e) => Err(e.clone()),
        };
        let mut decls = Declarations {
            params: param_kind.is_some(),
            authorizer: false,
            namespaces: NAMESPACES,
            variables: Vec::new(),
            growth: Vec::new(),
        };
        let (variables, config_error) = compile_variables(variables_in, &mut decls, compile_in);
        let match_conditions = conditions_in
            .into_iter()
            .map(|c| {
                let compiled = compile_in(&c.expression, &decls);
                (c.name, compiled)
            })
            .collect();
        let mutations = mutations_in
            .iter()
            .map(|m| match mutation_source(m) {
                Some((patch_type, source)) => Mutation {
                    patch_type,
                    expression: compile_in(source, &decls),
                },
                None => Mutation {
                    patch_type: PatchType::ApplyConfiguration,
                    expression: Err(format!("unsupported patch type {:?}", m.patch_type)),
                },
            })
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
            mutations,
            reinvoke_if_needed: spec.reinvocation_policy.as_deref() == Some("IfNeeded"),
            config_error,
        })
    }
}

/// A mutation's patch type and expression; `None` for a patch type upstream has not.
fn mutation_source(
    m: &k8s_openapi::api::admissionregistration::v1::Mutation,
) -> Option<(PatchType, &str)> {
    match m.patch_type.as_str() {
        "ApplyConfiguration" => Some((
            PatchType::ApplyConfiguration,
            m.apply_configuration
                .as_ref()
                .and_then(|c| c.expression.as_deref())
                .unwrap_or(""),
        )),
        "JSONPatch" => Some((
            PatchType::JsonPatch,
            m.json_patch
                .as_ref()
                .and_then(|p| p.expression.as_deref())
                .unwrap_or(""),
        )),
        _ => None,
    }
}

/// The environment of a policy's expressions: the struct types they construct. An
/// expression that does not parse contributes none (its own compile reports it).
fn env_for<'a>(sources: impl Iterator<Item = &'a str>) -> Result<Arc<Env>, String> {
    let mut names = BTreeSet::new();
    for source in sources {
        // The parser is third-party code fed user input: a panic is a parse failure.
        if let Ok(Ok(program)) = catch_unwind(|| Program::compile(source)) {
            environment::struct_names(program.expression(), &mut names);
        }
    }
    environment::build(&names)
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
    /// `spec.paramRef`.
    pub param_ref: Option<ParamRef>,
    /// `spec.matchResources`, if given, or why it does not parse.
    pub matcher: Option<Result<Matcher, String>>,
}

impl Binding {
    /// Decodes a stored binding.
    pub fn decode(obj: &Value) -> Result<Binding, String> {
        let binding: MutatingAdmissionPolicyBinding =
            serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
        let spec = binding.spec.unwrap_or_default();
        Ok(Binding {
            name: object::name(obj).to_owned(),
            resource_version: object::resource_version(obj).to_owned(),
            policy_name: spec.policy_name.unwrap_or_default(),
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
    fn a_policy_compiles_its_mutations_in_its_environment() {
        let policy = Policy::compile(&json!({
            "metadata": {"name": "p", "resourceVersion": "3"},
            "spec": {
                "failurePolicy": "Ignore",
                "reinvocationPolicy": "IfNeeded",
                "variables": [{"name": "n", "expression": "object.spec.replicas + 1"}],
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {
                        "expression": "Object{spec: Object.spec{replicas: variables.n}}"}},
                    {"patchType": "JSONPatch", "jsonPatch": {
                        "expression": "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('a/b'), value: 'c'}]"}},
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {
                        "expression": "Object{spec: params.x}"}},
                ],
            }
        }))
        .expect("compiles");
        assert_eq!((&*policy.name, &*policy.resource_version), ("p", "3"));
        assert_eq!(policy.failure_policy, FailurePolicy::Ignore);
        assert!(policy.reinvoke_if_needed);
        assert_eq!(policy.variables.len(), 1);
        assert_eq!(policy.mutations[1].patch_type, PatchType::JsonPatch);
        assert!(policy.mutations[0].expression.is_ok());
        assert!(policy.mutations[1].expression.is_ok());
        let err = policy.mutations[2]
            .expression
            .as_ref()
            .expect_err("no paramKind");
        assert!(err.contains("undeclared reference to 'params'"), "{err}");
    }

    #[test]
    fn an_undeclared_type_fails_every_expression_of_the_policy() {
        let policy = Policy::compile(&json!({"metadata": {"name": "p"}, "spec": {
            "mutations": [{"patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": "Pod{}"}}]}}))
        .expect("decodes");
        let err = policy.mutations[0]
            .expression
            .as_ref()
            .expect_err("undeclared");
        assert!(err.contains("undeclared reference to 'Pod'"), "{err}");
    }

    #[test]
    fn bindings_decode() {
        let binding = Binding::decode(&json!({"metadata": {"name": "b"}, "spec": {
            "policyName": "p", "paramRef": {"name": "cfg", "parameterNotFoundAction": "Allow"}}}))
        .expect("decodes");
        assert_eq!(binding.policy_name, "p");
        assert!(binding.param_ref.is_some());
        assert!(binding.matcher.is_none());
    }
}
