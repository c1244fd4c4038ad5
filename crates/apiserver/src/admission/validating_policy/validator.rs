//! One policy evaluated for one binding and param (upstream's `validating.validator`): match conditions, then each validation to a decision with its message and reason, then the audit annotations.

use cel::Value as CelValue;
use serde_json::Value;

use super::activation::{Activation, Inputs, Scope};
use super::compiled::{Compiled, FailurePolicy, Policy};
use super::cost::{self, Sizes};
use super::expression::{EvalError, Expression};

/// The longest message a `messageExpression` may produce (upstream's
/// `celconfig.MaxEvaluatedMessageExpressionSizeBytes`).
pub const MAX_MESSAGE_EXPRESSION_BYTES: usize = 5 * 1024;

/// A validation that did not pass, or an error the failure policy turned into a refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Which validation (its index in `spec.validations`); `None` for an error of the policy
    /// as a whole.
    pub index: Option<usize>,
    /// The message.
    pub message: String,
    /// The status reason: the validation's `reason`, or `Invalid`.
    pub reason: String,
    /// Whether an error (not a `false` validation) caused it.
    pub error: bool,
}

/// What one evaluation decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The failures, in validation order.
    pub failures: Vec<Failure>,
    /// Audit annotations to publish: `(key, value)`.
    pub audit_annotations: Vec<(String, String)>,
}

/// Evaluates `policy` over `inputs` with `params`.
pub fn validate(policy: &Policy, inputs: &Inputs, params: Option<&Value>) -> Outcome {
    let activation = Activation::new(inputs, params, &policy.variables);
    let mut run = Run {
        policy,
        scope: activation.scope(),
        sizes: activation.scope().sizes(),
        spent: 0,
        variables_charged: vec![false; policy.variables.len()],
    };
    run.validate()
}

/// One evaluation in progress: the budget spent so far.
struct Run<'a> {
    policy: &'a Policy,
    scope: Scope<'a>,
    sizes: Sizes,
    /// The estimated cost of everything evaluated so far.
    spent: u64,
    /// Which variables' cost is already counted (a variable is evaluated at most once).
    variables_charged: Vec<bool>,
}

impl Run<'_> {
    fn error(&self, index: Option<usize>, message: String) -> Option<Failure> {
        (self.policy.failure_policy == FailurePolicy::Fail).then(|| Failure {
            index,
            message,
            reason: "Invalid".to_owned(),
            error: true,
        })
    }

    /// Charges `e` (and the variables it reads, once) to the policy's budget.
    fn charge(&mut self, e: &Expression) -> Result<(), EvalError> {
        let mut cost = e.estimate(self.sizes);
        if cost > cost::PER_CALL_LIMIT {
            return Err(EvalError::Failed {
                expression: e.source.clone(),
                message: cost::PER_CALL_EXCEEDED.to_owned(),
            });
        }
        for &v in &e.variables {
            if let Some(charged) = self.variables_charged.get_mut(v)
                && !*charged
            {
                *charged = true;
                cost = cost.saturating_add(self.policy.variables[v].1.estimate(self.sizes));
            }
        }
        self.spent = self.spent.saturating_add(cost);
        if self.spent > cost::RUNTIME_BUDGET {
            return Err(EvalError::OutOfBudget);
        }
        Ok(())
    }

    fn evaluate(&mut self, compiled: &Compiled) -> Result<CelValue, String> {
        let e = compiled
            .as_ref()
            .map_err(|e| format!("compilation error: {e}"))?;
        self.charge(e).map_err(|e| e.to_string())?;
        e.evaluate(&self.scope, self.sizes)
            .map_err(|e| e.to_string())
    }

    fn validate(&mut self) -> Outcome {
        let mut outcome = Outcome::default();
        if let Some(e) = &self.policy.config_error {
            outcome.failures.extend(self.error(None, e.clone()));
            return outcome;
        }
        match self.match_conditions() {
            Ok(true) => {}
            Ok(false) => return outcome,
            Err(e) => {
                outcome.failures.extend(self.error(None, e));
                return outcome;
            }
        }
        let policy = self.policy;
        for (i, v) in policy.validations.iter().enumerate() {
            match self.evaluate(&v.expression) {
                Ok(CelValue::Bool(true)) => {}
                Ok(_) => {
                    let message = self.message(v);
                    outcome.failures.push(Failure {
                        index: Some(i),
                        message,
                        reason: v.reason.clone().unwrap_or_else(|| "Invalid".to_owned()),
                        error: false,
                    });
                }
                Err(e) if e == EvalError::OutOfBudget.to_string() => {
                    outcome.failures.extend(self.error(None, e));
                    return outcome;
                }
                Err(e) => outcome.failures.extend(self.error(Some(i), e)),
            }
        }
        for (key, expression) in &policy.audit_annotations {
            match self.evaluate(expression) {
                Ok(CelValue::String(s)) if !s.trim().is_empty() => {
                    outcome
                        .audit_annotations
                        .push((format!("{}/{key}", policy.name), s.trim().to_owned()));
                }
                Ok(CelValue::String(_) | CelValue::Null) => {}
                Ok(other) => outcome.failures.extend(self.error(
                    None,
                    format!(
                        "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                        expression.as_ref().map_or("", |e| e.source.as_str()),
                        other.type_of()
                    ),
                )),
                Err(e) => outcome.failures.extend(self.error(None, e)),
            }
        }
        outcome
    }

    /// Upstream's match-condition matcher: any `false` skips the policy (even when others
    /// failed); otherwise any error is the policy's error.
    fn match_conditions(&mut self) -> Result<bool, String> {
        let mut errors = Vec::new();
        let policy = self.policy;
        for (name, condition) in &policy.match_conditions {
            match self.evaluate(condition) {
                Ok(CelValue::Bool(true)) => {}
                Ok(CelValue::Bool(false)) => return Ok(false),
                Ok(other) => errors.push(format!(
                    "matchCondition '{name}' must evaluate to a bool, not {}",
                    other.type_of()
                )),
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(true)
        } else if errors.len() == 1 {
            Err(errors.remove(0))
        } else {
            Err(format!("[{}]", errors.join(", ")))
        }
    }

    /// The message of a failed validation: the `messageExpression`'s string if it is usable,
    /// else `message`, else `failed expression: ...` (upstream's fallbacks).
    fn message(&mut self, v: &super::compiled::Validation) -> String {
        if let Some(m) = &v.message_expression {
            match self.evaluate(m) {
                Ok(CelValue::String(s)) => {
                    let s = s.trim();
                    if !s.is_empty() && s.len() <= MAX_MESSAGE_EXPRESSION_BYTES && !s.contains('\n')
                    {
                        return s.to_owned();
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "messageExpression failed"),
            }
        }
        if !v.message.trim().is_empty() {
            return v.message.trim().to_owned();
        }
        format!("failed expression: {}", v.source.trim())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::attributes::{Attributes, Operation};
    use crate::auth::user::UserInfo;
    use crate::resources::apps::DEPLOYMENTS;

    fn outcome(spec: Value, replicas: i64, params: Option<Value>) -> Outcome {
        let policy =
            Policy::compile(&json!({"metadata": {"name": "demo"}, "spec": spec})).expect("policy");
        let user = UserInfo::admin();
        let a = Attributes::new(
            Operation::Create,
            &DEPLOYMENTS,
            "default",
            "web",
            Some(
                json!({"metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {"replicas": replicas}}),
            ),
            &user,
        );
        let inputs = Inputs::new(&a, None);
        validate(&policy, &inputs, params.as_ref())
    }

    fn failure(index: Option<usize>, message: &str, reason: &str, error: bool) -> Failure {
        Failure {
            index,
            message: message.to_owned(),
            reason: reason.to_owned(),
            error,
        }
    }

    #[test]
    fn validations_decide_with_upstreams_messages_and_reasons() {
        struct Case {
            name: &'static str,
            spec: Value,
            replicas: i64,
            params: Option<Value>,
            want: Vec<Failure>,
        }
        let cases = vec![
            Case {
                name: "passes",
                spec: json!({"validations": [{"expression": "object.spec.replicas <= 5"}]}),
                replicas: 3,
                params: None,
                want: vec![],
            },
            Case {
                name: "fails with the expression as message and Invalid",
                spec: json!({"validations": [{"expression": "object.spec.replicas <= 5"}]}),
                replicas: 6,
                params: None,
                want: vec![failure(
                    Some(0),
                    "failed expression: object.spec.replicas <= 5",
                    "Invalid",
                    false,
                )],
            },
            Case {
                name: "message and reason",
                spec: json!({"validations": [{"expression": "object.spec.replicas <= 5",
                    "message": "too many", "reason": "Forbidden"}]}),
                replicas: 6,
                params: None,
                want: vec![failure(Some(0), "too many", "Forbidden", false)],
            },
            Case {
                name: "messageExpression wins over message",
                spec: json!({"validations": [{"expression": "object.spec.replicas <= 5",
                    "message": "too many",
                    "messageExpression": "'replicas ' + string(object.spec.replicas) + ' > 5'"}]}),
                replicas: 6,
                params: None,
                want: vec![failure(Some(0), "replicas 6 > 5", "Invalid", false)],
            },
            Case {
                name: "a messageExpression that is not a usable string falls back",
                spec: json!({"validations": [{"expression": "false", "message": "fallback",
                    "messageExpression": "'two\\nlines'"}]}),
                replicas: 1,
                params: None,
                want: vec![failure(Some(0), "fallback", "Invalid", false)],
            },
            Case {
                name: "params",
                spec: json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                    "validations": [{"expression": "object.spec.replicas <= int(params.data.maxReplicas)"}]}),
                replicas: 4,
                params: Some(json!({"data": {"maxReplicas": "3"}})),
                want: vec![failure(
                    Some(0),
                    "failed expression: object.spec.replicas <= int(params.data.maxReplicas)",
                    "Invalid",
                    false,
                )],
            },
            Case {
                name: "a runtime error fails the request",
                spec: json!({"validations": [{"expression": "object.spec.nope > 1"}]}),
                replicas: 1,
                params: None,
                want: vec![failure(
                    Some(0),
                    "expression 'object.spec.nope > 1' resulted in error: no such key: nope",
                    "Invalid",
                    true,
                )],
            },
            Case {
                name: "a runtime error is ignored with Ignore",
                spec: json!({"failurePolicy": "Ignore",
                    "validations": [{"expression": "object.spec.nope > 1"},
                                    {"expression": "false", "message": "still checked"}]}),
                replicas: 1,
                params: None,
                want: vec![failure(Some(1), "still checked", "Invalid", false)],
            },
            Case {
                name: "a compile error fails the request",
                spec: json!({"validations": [{"expression": "params.x"}]}),
                replicas: 1,
                params: None,
                want: vec![failure(
                    Some(0),
                    "compilation error: ERROR: <input>: undeclared reference to 'params' (in container '')",
                    "Invalid",
                    true,
                )],
            },
            Case {
                name: "a false match condition skips the policy",
                spec: json!({"matchConditions": [
                        {"name": "broken", "expression": "object.nope"},
                        {"name": "web-only", "expression": "object.metadata.labels.app != 'web'"}],
                    "validations": [{"expression": "false"}]}),
                replicas: 1,
                params: None,
                want: vec![],
            },
            Case {
                name: "a failing match condition is the policy's error",
                spec: json!({"matchConditions": [{"name": "broken", "expression": "object.nope"}],
                    "validations": [{"expression": "false"}]}),
                replicas: 1,
                params: None,
                want: vec![failure(
                    None,
                    "expression 'object.nope' resulted in error: no such key: nope",
                    "Invalid",
                    true,
                )],
            },
            Case {
                name: "variables",
                spec: json!({"variables": [{"name": "r", "expression": "object.spec.replicas"},
                        {"name": "ok", "expression": "variables.r % 2 == 0"}],
                    "validations": [{"expression": "variables.ok", "message": "odd"}]}),
                replicas: 3,
                params: None,
                want: vec![failure(Some(0), "odd", "Invalid", false)],
            },
        ];
        for case in cases {
            let got = outcome(case.spec, case.replicas, case.params);
            assert_eq!(got.failures, case.want, "{}", case.name);
        }
    }

    #[test]
    fn audit_annotations_are_published_under_the_policy_name() {
        let got = outcome(
            json!({"validations": [{"expression": "true"}], "auditAnnotations": [
                {"key": "high-replicas", "valueExpression": "object.spec.replicas > 3 ? 'high: ' + string(object.spec.replicas) : null"},
                {"key": "never", "valueExpression": "null"}]}),
            9,
            None,
        );
        assert!(got.failures.is_empty());
        assert_eq!(
            got.audit_annotations,
            [("demo/high-replicas".to_owned(), "high: 9".to_owned())]
        );
    }

    #[test]
    fn a_runaway_expression_is_refused_before_it_runs() {
        let user = UserInfo::admin();
        let items: Vec<Value> = (0..2_000).map(Value::from).collect();
        let a = Attributes::new(
            Operation::Create,
            &DEPLOYMENTS,
            "default",
            "web",
            Some(json!({"spec": {"items": items}})),
            &user,
        );
        let inputs = Inputs::new(&a, None);
        let policy = Policy::compile(&json!({"metadata": {"name": "slow"}, "spec": {
            "validations": [{"expression":
                "object.spec.items.all(a, object.spec.items.all(b, object.spec.items.all(c, a + b + c >= 0)))"}]}}))
        .expect("policy");
        let got = validate(&policy, &inputs, None);
        assert_eq!(got.failures.len(), 1);
        assert!(
            got.failures[0]
                .message
                .ends_with("resulted in error: operation cancelled: estimated cost limit exceeded"),
            "{:?}",
            got.failures
        );
    }

    #[test]
    fn lists_grown_in_a_variable_count_where_they_are_iterated() {
        let user = UserInfo::admin();
        let items: Vec<Value> = (0..200).map(Value::from).collect();
        let a = Attributes::new(
            Operation::Create,
            &DEPLOYMENTS,
            "default",
            "web",
            Some(json!({"spec": {"items": items}})),
            &user,
        );
        let inputs = Inputs::new(&a, None);
        let run = |variable: &str| {
            let policy = Policy::compile(&json!({"metadata": {"name": "grow"}, "spec": {
                "variables": [{"name": "v", "expression": variable}],
                "validations": [{"expression": "variables.v.all(a, variables.v.all(b, a >= 0))"}]}}))
            .expect("policy");
            validate(&policy, &inputs, None).failures
        };
        assert_eq!(run("object.spec.items"), []);
        let l = "object.spec.items";
        let doubled = format!("(({l} + {l}) + ({l} + {l})) + (({l} + {l}) + ({l} + {l}))");
        let doubled = format!("({doubled}) + ({doubled})");
        let failures = run(&doubled);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(
            failures[0].message.ends_with(cost::PER_CALL_EXCEEDED),
            "{failures:?}"
        );
    }
}
