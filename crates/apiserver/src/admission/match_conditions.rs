//! CEL `matchConditions` of admission webhooks (and policies): compiled once per configuration generation, evaluated per request with upstream's failure-policy semantics (`matchconditions.matcher.Match`).
//!
//! The variables are upstream's: `object` and `oldObject` (the objects, `null` when the
//! operation has none) and `request` (the `AdmissionRequest` without its objects). Upstream's
//! `authorizer` and `params` are not offered: an expression naming them fails to evaluate,
//! which the failure policy then decides, as any evaluation error.
//!
//! Evaluation, as upstream: every condition is evaluated in order; the first `false` skips the
//! call (whatever errors came before); otherwise, if some condition failed to evaluate, a
//! `Fail` policy answers the errors and an `Ignore` policy skips the call; otherwise it matches.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cel::{Context, Program};
use serde_json::Value;

use crate::admission::validating_policy::expression::{Declarations, Expression};
use crate::admission::validating_policy::typing::CelType;

/// Why a condition (or a set of them) could not be decided.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The expression does not compile (upstream refuses such a configuration when written;
    /// kcm's stored configurations are not compiled then, so it surfaces here).
    #[error("compilation failed: {message}")]
    Compile {
        /// The condition's name.
        name: String,
        /// The parser's message.
        message: String,
    },
    /// The expression failed at run time (a missing field, an undeclared variable, ...).
    #[error("expression '{expression}' resulted in error: {message}")]
    Evaluation {
        /// The condition's expression.
        expression: String,
        /// The interpreter's message.
        message: String,
    },
    /// The expression returned something other than a bool.
    #[error("expression '{expression}' resulted in error: no such overload: want bool, got {got}")]
    NotBool {
        /// The condition's expression.
        expression: String,
        /// What it returned.
        got: String,
    },
    /// Several conditions failed: upstream's aggregate (`[a, b]`).
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Aggregate(Vec<Error>),
}

/// What to do when a condition cannot be evaluated (the configuration's `failurePolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Refuse the request (the default).
    #[default]
    Fail,
    /// Skip the webhook or policy as if it did not match.
    Ignore,
}

impl FailurePolicy {
    /// `Ignore` for `"Ignore"`, `Fail` otherwise (the API's default, and the safe reading of
    /// anything else).
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            Some("Ignore") => FailurePolicy::Ignore,
            _ => FailurePolicy::Fail,
        }
    }
}

/// One condition, compiled.
#[derive(Debug)]
struct Compiled {
    /// The condition's `name`.
    name: String,
    /// The condition's `expression`.
    expression: String,
    /// The program, or the compile error (reported on every evaluation).
    program: Result<Program, String>,
}

/// The conditions of one webhook or policy, compiled. Cheap to share behind an [`Arc`]:
/// evaluation takes `&self`.
#[derive(Debug, Default)]
pub struct MatchConditions {
    /// In the configuration's order.
    conditions: Vec<Compiled>,
}

/// The variables a condition sees.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    /// `object`: the new object (`None` on delete and connect).
    pub object: Option<&'a Value>,
    /// `oldObject`: the stored object (`None` on create and connect).
    pub old_object: Option<&'a Value>,
    /// `request`: the `AdmissionRequest` (kind, resource, name, namespace, operation,
    /// userInfo, dryRun, options...).
    pub request: &'a Value,
}

/// The outcome of [`MatchConditions::evaluate`] (upstream's `MatchResult`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every condition held (or there are none): call the webhook.
    Matches,
    /// Skip the webhook: `failed` names the condition that was false (`None` when an error
    /// was ignored by an `Ignore` policy).
    Skip {
        /// The first condition that evaluated to `false`.
        failed: Option<String>,
    },
    /// A condition could not be evaluated under a `Fail` policy.
    Error(Error),
}

impl MatchConditions {
    /// Compiles `(name, expression)` pairs, in order. Never fails: a condition that does not
    /// compile is an evaluation error on every request, decided by the failure policy.
    pub fn compile<'a>(conditions: impl IntoIterator<Item = (&'a str, &'a str)>) -> Arc<Self> {
        let conditions = conditions
            .into_iter()
            .map(|(name, expression)| Compiled {
                name: name.to_owned(),
                expression: expression.to_owned(),
                program: compile(expression),
            })
            .collect();
        Arc::new(Self { conditions })
    }

    /// The conditions of an admissionregistration `matchConditions` list (`[{name,
    /// expression}]`); entries without an expression are skipped (validation refuses them).
    pub fn from_json(conditions: Option<&Value>) -> Arc<Self> {
        let pairs = conditions
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let name = c.get("name").and_then(Value::as_str).unwrap_or("");
                c.get("expression")
                    .and_then(Value::as_str)
                    .map(|expression| (name, expression))
            });
        Self::compile(pairs)
    }

    /// Whether there are no conditions (every request matches).
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// Evaluates every condition against `input`, as upstream's `matcher.Match`.
    pub fn evaluate(&self, input: Input<'_>, policy: FailurePolicy) -> Outcome {
        if self.conditions.is_empty() {
            return Outcome::Matches;
        }
        let context = match context(input) {
            Ok(c) => c,
            Err(message) => {
                // The inputs could not be given to the interpreter: upstream's "filter
                // returning error" case, decided by the policy alone.
                return match policy {
                    FailurePolicy::Fail => Outcome::Error(Error::Evaluation {
                        expression: String::new(),
                        message,
                    }),
                    FailurePolicy::Ignore => Outcome::Skip { failed: None },
                };
            }
        };
        let mut errors = Vec::new();
        for condition in &self.conditions {
            match condition.run(&context) {
                Ok(true) => {}
                Ok(false) => {
                    return Outcome::Skip {
                        failed: Some(condition.name.clone()),
                    };
                }
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            return Outcome::Matches;
        }
        match policy {
            FailurePolicy::Fail => Outcome::Error(if errors.len() == 1 {
                errors.remove(0)
            } else {
                Error::Aggregate(errors)
            }),
            FailurePolicy::Ignore => Outcome::Skip { failed: None },
        }
    }
}

impl Compiled {
    /// Runs the condition; a panic in the third-party interpreter is an evaluation error.
    fn run(&self, context: &Context<'_, '_>) -> Result<bool, Error> {
        let program = self.program.as_ref().map_err(|message| Error::Compile {
            name: self.name.clone(),
            message: message.clone(),
        })?;
        let evaluation = |message: String| Error::Evaluation {
            expression: self.expression.clone(),
            message,
        };
        match catch_unwind(AssertUnwindSafe(|| program.execute(context))) {
            Ok(Ok(cel::Value::Bool(b))) => Ok(b),
            Ok(Ok(other)) => Err(Error::NotBool {
                expression: self.expression.clone(),
                got: format!("{:?}", other.type_of()),
            }),
            Ok(Err(e)) => Err(evaluation(crate::cel_error::message(&e))),
            Err(_) => Err(evaluation(
                "the expression could not be evaluated".to_owned(),
            )),
        }
    }
}

/// Why `expression` cannot be a webhook's match condition, as upstream's
/// `validateMatchConditionsExpression` refuses it when the configuration is written: it does
/// not compile, or names something not declared (`compilation failed: ...`; `object`,
/// `oldObject`, `request`, `namespaceObject` and `authorizer` are), or can never be a bool
/// (`must evaluate to bool`). `None` when it may be stored.
pub fn expression_error(expression: &str) -> Option<String> {
    let decls = Declarations {
        authorizer: true,
        ..Declarations::default()
    };
    match Expression::compile(expression, &decls) {
        Err(e) => Some(format!("compilation failed: {e}")),
        Ok(compiled) => match compiled.result_type() {
            Some(ty) if ty != CelType::Bool => Some("must evaluate to bool".to_owned()),
            _ => None,
        },
    }
}

/// Compiles one expression; a parser panic is a compile error, not a crash.
fn compile(expression: &str) -> Result<Program, String> {
    if expression.trim().is_empty() {
        return Err("expression is empty".to_owned());
    }
    match catch_unwind(|| Program::compile(expression)) {
        Ok(Ok(program)) => Ok(program),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the expression could not be parsed".to_owned()),
    }
}

/// The interpreter's variables for `input` (built once per evaluation, shared by every
/// condition).
fn context(input: Input<'_>) -> Result<Context<'static, 'static>, String> {
    let mut context = Context::default();
    for (name, value) in [
        ("object", input.object),
        ("oldObject", input.old_object),
        ("request", Some(input.request)),
    ] {
        context
            .add_variable(name, value.cloned().unwrap_or(Value::Null))
            .map_err(|e| e.to_string())?;
    }
    Ok(context)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn input<'a>(object: &'a Value, request: &'a Value) -> Input<'a> {
        Input {
            object: Some(object),
            old_object: None,
            request,
        }
    }

    /// As upstream's `TestMatcher` table: the first false wins over errors; errors then go by
    /// the failure policy.
    #[test]
    fn conditions_decide_as_upstreams_matcher() {
        struct Case {
            name: &'static str,
            conditions: &'static [(&'static str, &'static str)],
            policy: FailurePolicy,
            want: Outcome,
        }
        let cases = [
            Case {
                name: "no conditions match",
                conditions: &[],
                policy: FailurePolicy::Fail,
                want: Outcome::Matches,
            },
            Case {
                name: "all true",
                conditions: &[
                    ("label", "object.metadata.labels.team == 'a'"),
                    ("op", "request.operation == 'CREATE'"),
                ],
                policy: FailurePolicy::Fail,
                want: Outcome::Matches,
            },
            Case {
                name: "one false skips, naming it",
                conditions: &[
                    ("op", "request.operation == 'CREATE'"),
                    ("user", "request.userInfo.username == 'someone-else'"),
                ],
                policy: FailurePolicy::Fail,
                want: Outcome::Skip {
                    failed: Some("user".to_owned()),
                },
            },
            Case {
                name: "false wins over an earlier error",
                conditions: &[("broken", "object.spec.nope == 1"), ("no", "false")],
                policy: FailurePolicy::Fail,
                want: Outcome::Skip {
                    failed: Some("no".to_owned()),
                },
            },
            Case {
                name: "an error under Ignore skips",
                conditions: &[("broken", "object.spec.nope == 1"), ("yes", "true")],
                policy: FailurePolicy::Ignore,
                want: Outcome::Skip { failed: None },
            },
            Case {
                name: "an old object is null on create",
                conditions: &[("create", "oldObject == null")],
                policy: FailurePolicy::Fail,
                want: Outcome::Matches,
            },
        ];
        let object = json!({"metadata": {"name": "p", "labels": {"team": "a"}}, "spec": {}});
        let request = json!({"operation": "CREATE", "userInfo": {"username": "admin"}});
        for case in cases {
            let conditions = MatchConditions::compile(case.conditions.iter().copied());
            let got = conditions.evaluate(input(&object, &request), case.policy);
            assert_eq!(got, case.want, "{}", case.name);
        }
    }

    #[test]
    fn errors_under_fail_are_reported_with_the_expression() {
        let object = json!({"metadata": {}});
        let request = json!({});
        let one = MatchConditions::compile([("broken", "object.spec.nope == 1")]);
        let Outcome::Error(err) = one.evaluate(input(&object, &request), FailurePolicy::Fail)
        else {
            panic!("an evaluation error");
        };
        assert!(
            err.to_string()
                .starts_with("expression 'object.spec.nope == 1' resulted in error: "),
            "{err}"
        );

        let two = MatchConditions::compile([("a", "1 + "), ("b", "'text'")]);
        let Outcome::Error(Error::Aggregate(errs)) =
            two.evaluate(input(&object, &request), FailurePolicy::Fail)
        else {
            panic!("two errors aggregate");
        };
        assert!(matches!(errs[0], Error::Compile { .. }), "{errs:?}");
        assert!(matches!(errs[1], Error::NotBool { .. }), "{errs:?}");
        let text = Error::Aggregate(errs).to_string();
        assert!(text.starts_with("[compilation failed: "), "{text}");
    }

    #[test]
    fn conditions_come_from_the_api_list() {
        let conditions = MatchConditions::from_json(Some(&json!([
            {"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"},
            {"name": "no-expression"}
        ])));
        let object = json!({});
        let request = json!({"namespace": "kube-system"});
        assert_eq!(
            conditions.evaluate(input(&object, &request), FailurePolicy::Fail),
            Outcome::Skip {
                failed: Some("not-kube-system".to_owned())
            }
        );
        assert!(MatchConditions::from_json(None).is_empty());
    }
}
