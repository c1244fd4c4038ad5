//! MutatingAdmissionPolicy: CEL mutations of admissionregistration.k8s.io/v1 policies, applied through their bindings in the mutating phase, as upstream's `policy/mutating` plugin.
//!
//! Start at the plugin below, which runs after the in-tree mutating plugins and before the
//! mutating webhooks (upstream's order). It lists the bindings (and, if there are any, the
//! policies) through the [`ObjectSource`], takes each one's compiled form from a cache
//! (compiled once per resourceVersion, [`compiled`], in the mutation environment of
//! [`environment`]), matches the request against the policy's `matchConstraints` and the
//! binding's `matchResources`, collects the binding's params, and then, policy by policy
//! (by name) and binding by binding (by name), evaluates the match conditions and each
//! mutation in order over the object as the previous ones left it ([`patch`]: an apply
//! configuration merged in, or a JSON patch), the object getting its kind's defaults again
//! after each. The matching, the params, the activation (`object`, `oldObject`, `request`,
//! `params`, `namespaceObject`, `variables`) and the expression runtime are the validating
//! policies' ([`crate::admission::validating_policy`]).
//!
//! An error (a configuration that cannot be applied, an expression that fails) refuses the
//! request under `failurePolicy: Fail`, with upstream's `policy '...' with binding '...'
//! denied request: ...`, and is ignored under `Ignore`. A policy that changed the object
//! asks for the mutating phase's second round, in which its `reinvocationPolicy: IfNeeded`
//! bindings are applied again when the object changed after them
//! ([`crate::admission::reinvocation`]).
//!
//! Not done: upstream's schema types (an initializer's fields are not type-checked against
//! the kind's schema, and a result of the wrong type is found when the policy applies, not
//! when it is written), atomic structs (only atomic lists and replaced maps are refused in
//! an apply configuration), the policy-wide cost budget (each expression's own cost limit
//! holds), and the `authorizer` variable.

pub mod compiled;
pub mod environment;
pub mod patch;

use std::sync::Arc;

use async_trait::async_trait;
use cel::Value as CelValue;
use serde_json::Value;

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::source::ObjectSource;
use crate::admission::validating_policy::activation::{Activation, Inputs};
use crate::admission::validating_policy::cache::Cache;
use crate::admission::validating_policy::compiled::{Compiled, FailurePolicy};
use crate::admission::validating_policy::matching::{self, Request};
use crate::admission::validating_policy::{is_policy_resource, params};
use crate::error::{ApiError, Result};
use crate::object;
use crate::resources::admissionregistration::{
    MUTATING_ADMISSION_POLICIES, MUTATING_ADMISSION_POLICY_BINDINGS,
};
use crate::resources::namespace::NAMESPACES;
use compiled::{Binding, PatchType, Policy};

/// The plugin's upstream name.
pub const NAME: &str = "MutatingAdmissionPolicy";

/// The plugin: the compiled policies and decoded bindings, shared by every request.
#[derive(Debug, Default)]
pub struct MutatingAdmissionPolicy {
    policies: Cache<Policy>,
    bindings: Cache<Binding>,
}

/// Why a policy refuses the request (upstream's `generic.PolicyError`).
#[derive(Debug)]
struct PolicyError {
    policy: String,
    binding: Option<String>,
    /// Whether the policy ignores its errors.
    ignored: bool,
    message: String,
    /// The status reason, when not the default `Forbidden`.
    reason: Option<&'static str>,
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.binding {
            Some(binding) => write!(
                f,
                "policy '{}' with binding '{binding}' denied request: {}",
                self.policy, self.message
            ),
            None => write!(
                f,
                "policy {:?} denied request: {}",
                self.policy, self.message
            ),
        }
    }
}

/// One policy to apply through one binding with one param.
struct Invocation<'p> {
    policy: &'p Policy,
    binding: &'p Binding,
    param: Option<Arc<Value>>,
}

impl Invocation<'_> {
    /// The invocation's key for reinvocation: policy, binding and param.
    fn key(&self) -> String {
        let (namespace, name) = self
            .param
            .as_deref()
            .map_or(("", ""), |p| (object::namespace(p), object::name(p)));
        format!(
            "{}/{}/{namespace}/{name}",
            self.policy.name, self.binding.name
        )
    }

    fn error(&self, message: String, reason: Option<&'static str>) -> PolicyError {
        PolicyError {
            policy: self.policy.name.clone(),
            binding: Some(self.binding.name.clone()),
            ignored: self.policy.failure_policy == FailurePolicy::Ignore,
            message,
            reason,
        }
    }
}

#[async_trait]
impl Plugin for MutatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A delete has no object to mutate.
    fn handles(&self, operation: Operation) -> bool {
        operation != Operation::Delete
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn admit(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if !source.serves(&MUTATING_ADMISSION_POLICY_BINDINGS) || is_policy_resource(a) {
            return Ok(());
        }
        // Bindings first: without one, no policy applies and the policies need not be read.
        let bindings = source.list(&MUTATING_ADMISSION_POLICY_BINDINGS, "").await?;
        let bindings = self.bindings.sync(&bindings, |obj| {
            Binding::decode(obj)
                .inspect_err(|e| tracing::warn!(error = %e, "undecodable binding skipped"))
                .ok()
        });
        if bindings.is_empty() {
            return Ok(());
        }
        let policies = source.list(&MUTATING_ADMISSION_POLICIES, "").await?;
        let mut policies = self.policies.sync(&policies, |obj| {
            Policy::compile(obj)
                .inspect_err(|e| tracing::warn!(error = %e, "undecodable policy skipped"))
                .ok()
        });
        policies.sort_by(|x, y| x.name.cmp(&y.name));
        let mut errors = Vec::new();
        let invocations = invocations(source, a, &policies, &bindings, &mut errors).await?;
        if !invocations.is_empty() {
            apply_all(source, a, &invocations, &mut errors).await?;
        }
        match errors
            .into_iter()
            .filter(|e| !e.ignored)
            .collect::<Vec<_>>()
        {
            refusals if refusals.is_empty() => Ok(()),
            refusals => Err(refusal(a, &refusals)),
        }
    }
}

/// Upstream's `policyDispatcher.Dispatch` up to its delegate: every policy with a binding
/// that matches the request, with each of the binding's params. Configuration errors are
/// collected in `errors`.
async fn invocations<'p>(
    source: &dyn ObjectSource,
    a: &Attributes<'_>,
    policies: &'p [Arc<Policy>],
    bindings: &'p [Arc<Binding>],
    errors: &mut Vec<PolicyError>,
) -> Result<Vec<Invocation<'p>>> {
    let request = Request::of(a);
    let mut namespace = None;
    let mut out = Vec::new();
    for policy in policies {
        let mut own: Vec<&Arc<Binding>> = bindings
            .iter()
            .filter(|b| b.policy_name == policy.name)
            .collect();
        if own.is_empty() {
            continue;
        }
        own.sort_by(|x, y| x.name.cmp(&y.name));
        let config_error = |binding: Option<&Binding>, err: &str| PolicyError {
            policy: policy.name.clone(),
            binding: binding.map(|b| b.name.clone()),
            ignored: policy.failure_policy == FailurePolicy::Ignore,
            message: match binding {
                None => format!("failed to configure policy: {err}"),
                Some(_) => format!("failed to configure binding: {err}"),
            },
            reason: None,
        };
        if namespace.is_none() {
            namespace = Some(a.namespace_object(source).await?);
        }
        let ns_labels = namespace
            .as_ref()
            .and_then(|n| n.as_deref())
            .map(matching::namespace_labels);
        let matched = match &policy.matcher {
            Ok(m) => m.matches(&request, ns_labels.as_ref()),
            Err(e) => Err(e.clone()),
        };
        match matched {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                errors.push(config_error(None, &e));
                continue;
            }
        }
        if let Some(e) = &policy.config_error {
            errors.push(config_error(None, e));
            continue;
        }
        for binding in own {
            let matched = match &binding.matcher {
                None => Ok(true),
                Some(Ok(m)) => m.matches(&request, ns_labels.as_ref()),
                Some(Err(e)) => Err(e.clone()),
            };
            match matched {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    errors.push(config_error(Some(binding), &e));
                    continue;
                }
            }
            let found = params::collect(
                source,
                policy.param_kind.as_ref(),
                binding.param_ref.as_ref(),
                a.namespace,
            )
            .await;
            match found {
                Ok(params) => out.extend(params.into_iter().map(|param| Invocation {
                    policy,
                    binding,
                    param,
                })),
                Err(e) => errors.push(config_error(Some(binding), &e)),
            }
        }
    }
    Ok(out)
}

/// Upstream's `dispatcher.dispatchInvocations`: each invocation's match conditions, then its
/// mutations in order, with the reinvocation bookkeeping.
async fn apply_all(
    source: &dyn ObjectSource,
    a: &mut Attributes<'_>,
    invocations: &[Invocation<'_>],
    errors: &mut Vec<PolicyError>,
) -> Result<()> {
    if a.reinvocation.is_reinvoke()
        && a.reinvocation
            .policies
            .output_changed_since_last(a.object.as_ref())
    {
        // Other plugins changed the object in the second round: every IfNeeded binding
        // applied so far sees it again.
        a.reinvocation
            .policies
            .require_reinvoking_previously_invoked();
    }
    // Upstream's namespaceObject is unset when the request is for a namespace; a missing
    // namespace of a namespaced request is an error.
    let namespace = if a.namespace.is_empty() || a.is_main(&NAMESPACES) {
        None
    } else {
        match a.namespace_object(source).await? {
            Some(ns) => Some(ns),
            None => {
                return Err(ApiError::not_found(
                    NAMESPACES.group_resource(),
                    a.namespace,
                ));
            }
        }
    };
    for invocation in invocations {
        let policy = invocation.policy;
        let param = invocation.param.as_deref();
        match match_conditions(a, namespace.as_deref(), policy, param) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                errors.push(invocation.error(e, Some("Invalid")));
                continue;
            }
        }
        let key = invocation.key();
        if a.reinvocation.is_reinvoke() && !a.reinvocation.policies.should_reinvoke(&key) {
            continue;
        }
        let before = a.object.clone();
        for mutation in &policy.mutations {
            let Some(current) = a.object.as_ref() else {
                // Nothing to mutate (a connect).
                continue;
            };
            let inputs = Inputs::new(a, namespace.as_deref());
            let mutated = mutate(a, current, &inputs, policy, mutation, param);
            match mutated {
                Ok(mutated) => a.object = Some(mutated),
                Err(e) => errors.push(invocation.error(e, Some("Invalid"))),
            }
        }
        if a.object != before {
            // The object changed: the IfNeeded bindings applied before this one are now
            // outdated, and the in-tree plugins run once more.
            a.mark_patched();
            a.reinvocation
                .policies
                .require_reinvoking_previously_invoked();
            a.reinvocation.set_should_reinvoke();
        }
        if policy.reinvoke_if_needed {
            a.reinvocation.policies.add_reinvocable(&key);
        }
    }
    let output = a.object.take();
    a.reinvocation.policies.set_last_output(output.as_ref());
    a.object = output;
    Ok(())
}

/// The policy's match conditions over the object as it is now: any `false` skips the
/// policy (even when others failed); otherwise any error is the policy's error.
fn match_conditions(
    a: &Attributes<'_>,
    namespace: Option<&Value>,
    policy: &Policy,
    param: Option<&Value>,
) -> std::result::Result<bool, String> {
    if policy.match_conditions.is_empty() {
        return Ok(true);
    }
    let inputs = Inputs::new(a, namespace);
    let activation = Activation::new(&inputs, param, &policy.variables);
    let scope = activation.scope();
    let mut errors = Vec::new();
    for (name, condition) in &policy.match_conditions {
        match evaluate(condition, &scope) {
            Ok(CelValue::Bool(true)) => {}
            Ok(CelValue::Bool(false)) => return Ok(false),
            Ok(other) => errors.push(format!(
                "matchCondition '{name}' must evaluate to a bool, not {}",
                other.type_of()
            )),
            Err(e) => errors.push(e),
        }
    }
    match errors.len() {
        0 => Ok(true),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// One mutation of `current`: its expression evaluated and its patch applied, the result
/// decoded as the request's kind (its defaults set again).
fn mutate(
    a: &Attributes<'_>,
    current: &Value,
    inputs: &Inputs,
    policy: &Policy,
    mutation: &compiled::Mutation,
    param: Option<&Value>,
) -> std::result::Result<Value, String> {
    let activation = Activation::new(inputs, param, &policy.variables);
    let result = evaluate(&mutation.expression, &activation.scope())?;
    let patched = match mutation.patch_type {
        PatchType::ApplyConfiguration => {
            patch::apply_configuration(current, &result, a.resource.patch_schema().root())
        }
        PatchType::JsonPatch => patch::json_patch(current, &result),
    }
    .map_err(|e| e.to_string())?;
    let kind_of = |o: &Value| (o.get("apiVersion").cloned(), o.get("kind").cloned());
    if kind_of(&patched) != kind_of(current) {
        return Err("the mutation changed the object's apiVersion or kind".to_owned());
    }
    a.resource.decode(patched)
}

/// Evaluates a compiled expression over `scope`.
fn evaluate(
    compiled: &Compiled,
    scope: &crate::admission::validating_policy::activation::Scope<'_>,
) -> std::result::Result<CelValue, String> {
    let e = compiled
        .as_ref()
        .map_err(|e| format!("compilation failed: {e}"))?;
    e.evaluate(scope, scope.sizes()).map_err(|e| e.to_string())
}

/// The refusal as upstream's dispatcher builds it: `admission.NewForbidden` whose message
/// is the first error's, with its reason when it has one, and every error as a cause.
fn refusal(a: &Attributes<'_>, errors: &[PolicyError]) -> ApiError {
    let mut err = a.forbidden("admission request denied by policy");
    if let Some(first) = errors.first() {
        err.message = first.to_string();
        if let Some(reason) = first.reason {
            err.reason = reason;
        }
    }
    for e in errors {
        err = err.with_cause("", e.to_string(), "");
    }
    err
}

#[cfg(test)]
mod tests;
