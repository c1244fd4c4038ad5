//! ValidatingAdmissionPolicy: CEL validations of admissionregistration.k8s.io/v1 policies, applied through their bindings, as upstream's `policy/validating` plugin.
//!
//! Start at the plugin below, which runs in the validating phase: it lists the bindings (and,
//! if there are any, the policies) through the [`ObjectSource`], takes each one's compiled
//! form from the [`cache`] (compiled once per resourceVersion, [`compiled`]), matches the
//! request against the policy's `matchConstraints` and the binding's `matchResources`
//! ([`matching`]), collects the binding's params ([`params`]), and evaluates the policy
//! ([`validator`]) over the request's [`activation`] under the cost bound of [`cost`]. Each
//! failed validation then does what the binding's `validationActions` say: `Deny` refuses
//! the request with upstream's message and the validation's reason (422 `Invalid` unless
//! the validation names another), `Warn` adds upstream's warning, `Audit` is logged (kcm
//! writes no audit log; the record carries the `validation.policy.admission.k8s.io/
//! validation_failure` annotation upstream would add).
//!
//! `status.typeChecking` is the `validatingadmissionpolicy-status-controller`'s (in
//! kcm-controllers); admission itself type-checks only what [`typing`] infers, so a wrong
//! field name is a runtime error, which the failure policy handles. Not done: the
//! `authorizer` variable, Kubernetes' CEL
//! extension libraries (`quantity`, `url`, `ip`, `format`...: the standard library and
//! macros are offered), and `matchPolicy: Equivalent` beyond the served version (kcm serves
//! one version of each resource).

pub mod activation;
pub mod cache;
pub mod compiled;
pub mod cost;
pub mod expression;
pub mod matching;
pub mod params;
pub mod typing;
pub mod validator;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::source::ObjectSource;
use crate::error::{ApiError, Result};
use crate::resources::admissionregistration::{
    VALIDATING_ADMISSION_POLICIES, VALIDATING_ADMISSION_POLICY_BINDINGS,
};
use activation::Inputs;
use cache::Cache;
use compiled::{Binding, FailurePolicy, Policy};
use matching::Request;

/// The plugin's upstream name.
pub const NAME: &str = "ValidatingAdmissionPolicy";

/// The resources policies never apply to (upstream's `isPolicyResource`): a policy must not
/// be able to lock out its own repair.
const EXEMPT: &[&str] = &[
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
];

/// Whether `a` writes an admission policy or binding, which no policy applies to (the
/// validating and the mutating plugins alike).
pub fn is_policy_resource(a: &Attributes<'_>) -> bool {
    a.resource.group == "admissionregistration.k8s.io" && EXEMPT.contains(&&*a.resource.plural)
}

/// The plugin: the compiled policies and decoded bindings, shared by every request.
#[derive(Debug, Default)]
pub struct ValidatingAdmissionPolicy {
    policies: Cache<Policy>,
    bindings: Cache<Binding>,
}

/// A refusal: which policy and binding, and the failure.
struct Denial {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: String,
}

/// What the bindings decided for one request.
#[derive(Default)]
struct Decisions {
    denials: Vec<Denial>,
    warnings: Vec<String>,
}

impl Decisions {
    /// Upstream's `addConfigError`: a policy or binding that cannot be applied refuses the
    /// request unless its policy ignores failures.
    fn config_error(&mut self, policy: &Policy, binding: Option<&Binding>, err: &str) {
        if policy.failure_policy == FailurePolicy::Ignore {
            tracing::debug!(policy = %policy.name, error = %err, "policy error ignored");
            return;
        }
        let message = match binding {
            None => format!("failed to configure policy: {err}"),
            Some(_) => format!("failed to configure binding: {err}"),
        };
        self.denials.push(Denial {
            policy: policy.name.clone(),
            binding: binding.map(|b| b.name.clone()),
            message,
            reason: "Invalid".to_owned(),
        });
    }
}

#[async_trait]
impl Plugin for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handles(&self, _: Operation) -> bool {
        true
    }

    fn validates(&self) -> bool {
        true
    }

    async fn validate(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if !source.serves(&VALIDATING_ADMISSION_POLICY_BINDINGS) || is_policy_resource(a) {
            return Ok(());
        }
        // Bindings first: without one, no policy applies and the policies need not be read.
        let bindings = source
            .list(&VALIDATING_ADMISSION_POLICY_BINDINGS, "")
            .await?;
        let bindings = self.bindings.sync(&bindings, |obj| {
            Binding::decode(obj)
                .inspect_err(|e| tracing::warn!(error = %e, "undecodable binding skipped"))
                .ok()
        });
        if bindings.is_empty() {
            return Ok(());
        }
        let policies = source.list(&VALIDATING_ADMISSION_POLICIES, "").await?;
        let policies = self.policies.sync(&policies, |obj| {
            Policy::compile(obj)
                .inspect_err(|e| tracing::warn!(error = %e, "undecodable policy skipped"))
                .ok()
        });
        let decisions = self.decide(source, a, &policies, &bindings).await?;
        for warning in decisions.warnings {
            a.add_warning(warning);
        }
        match decisions.denials.into_iter().next() {
            None => Ok(()),
            Some(d) => Err(denial_error(a, d)),
        }
    }
}

impl ValidatingAdmissionPolicy {
    /// Upstream's `dispatcher.Dispatch`: every policy with a binding, every binding that
    /// matches, every param; the first refusal is the request's.
    async fn decide(
        &self,
        source: &dyn ObjectSource,
        a: &Attributes<'_>,
        policies: &[Arc<Policy>],
        bindings: &[Arc<Binding>],
    ) -> Result<Decisions> {
        let mut decisions = Decisions::default();
        let request = Request::of(a);
        let mut namespace = None;
        let mut inputs: Option<Inputs> = None;
        let mut audit: Vec<(String, String)> = Vec::new();
        for policy in policies {
            let mut own: Vec<&Arc<Binding>> = bindings
                .iter()
                .filter(|b| b.policy_name == policy.name)
                .collect();
            if own.is_empty() {
                continue;
            }
            own.sort_by(|x, y| x.name.cmp(&y.name));
            if namespace.is_none() {
                namespace = Some(a.namespace_object(source).await?);
            }
            let ns = namespace.as_ref().and_then(|n| n.as_deref());
            let ns_labels = ns.map(matching::namespace_labels);
            let matched = match &policy.matcher {
                Ok(m) => m.matches(&request, ns_labels.as_ref()),
                Err(e) => Err(e.clone()),
            };
            match matched {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    decisions.config_error(policy, None, &e);
                    continue;
                }
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
                        decisions.config_error(policy, Some(binding), &e);
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
                let params = match found {
                    Ok(params) => params,
                    Err(e) => {
                        decisions.config_error(policy, Some(binding), &e);
                        continue;
                    }
                };
                // Upstream's namespaceObject is unset when the request is for a namespace.
                let own_ns = (!request.namespace.is_empty()).then_some(ns).flatten();
                let inputs = inputs.get_or_insert_with(|| Inputs::new(a, own_ns));
                for param in params {
                    let outcome = validator::validate(policy, inputs, param.as_deref());
                    for failure in outcome.failures {
                        apply(&mut decisions, &mut audit, policy, binding, failure);
                    }
                    for annotation in outcome.audit_annotations {
                        if !audit.contains(&annotation) {
                            audit.push(annotation);
                        }
                    }
                }
            }
        }
        for (key, value) in audit {
            tracing::info!(
                resource = %a.resource.plural,
                namespace = a.namespace,
                name = a.name,
                key = %key,
                value = %value,
                "admission audit annotation"
            );
        }
        Ok(decisions)
    }
}

/// A failed validation under a binding's actions (upstream's `ActionDeny` switch).
fn apply(
    decisions: &mut Decisions,
    audit: &mut Vec<(String, String)>,
    policy: &Policy,
    binding: &Binding,
    failure: validator::Failure,
) {
    if binding.action_set.deny {
        decisions.denials.push(Denial {
            policy: policy.name.clone(),
            binding: Some(binding.name.clone()),
            message: failure.message.clone(),
            reason: failure.reason.clone(),
        });
    }
    if binding.action_set.warn {
        decisions.warnings.push(format!(
            "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
            policy.name, binding.name, failure.message
        ));
    }
    if binding.action_set.audit {
        let value = json!([{
            "message": failure.message,
            "policy": binding.policy_name,
            "binding": binding.name,
            "expressionIndex": failure.index.unwrap_or(0),
            "validationActions": binding.actions,
        }]);
        audit.push((
            "validation.policy.admission.k8s.io/validation_failure".to_owned(),
            value.to_string(),
        ));
    }
}

/// The refusal as upstream builds it: `admission.NewForbidden` with the decision's reason and
/// its code, and the message as a cause.
fn denial_error(a: &Attributes<'_>, d: Denial) -> ApiError {
    let message = match &d.binding {
        Some(binding) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{binding}' denied request: {}",
            d.policy, d.message
        ),
        None => format!(
            "ValidatingAdmissionPolicy '{}' denied request: {}",
            d.policy, d.message
        ),
    };
    let (code, reason) = match d.reason.as_str() {
        "Forbidden" => (403, "Forbidden"),
        "Unauthorized" => (401, "Unauthorized"),
        "RequestEntityTooLarge" => (413, "RequestEntityTooLarge"),
        _ => (422, "Invalid"),
    };
    let mut err = a.forbidden(&message).with_cause("", message, "");
    err.code = code;
    err.reason = reason;
    err
}

#[cfg(test)]
mod tests;
