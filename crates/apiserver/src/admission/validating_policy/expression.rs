//! One CEL expression of a policy, compiled once: parsed, its free identifiers checked against what the policy declares, and evaluated under the cost bound with panics contained.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::context::VariableResolver;
use cel::{Context, Env, Program};

use super::cost::{self, Growth, Sizes};
use super::typing::{self, CelType};

/// The CEL environment every policy expression runs in: the standard library and macros.
/// Built once: building it registers every standard overload.
pub static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// Identifiers that name types (`type(x) == string`), never variables.
const TYPE_NAMES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
    "optional",
];

/// What an expression may refer to: upstream declares `params` only for a policy with a
/// `paramKind`, and each variable sees only the variables before it.
#[derive(Clone, Debug, Default)]
pub struct Declarations {
    /// Whether `params` is declared.
    pub params: bool,
    /// Whether `authorizer` is declared (upstream declares it for every admission
    /// expression; kcm's evaluation does not offer it yet, so only a write-time check of an
    /// expression sets this).
    pub authorizer: bool,
    /// The namespaces of functions the environment adds (`jsonpatch` for the mutating
    /// policies' `jsonpatch.escapeKey`): their names are not variables.
    pub namespaces: &'static [&'static str],
    /// The variables `variables.<name>` may name.
    pub variables: Vec<String>,
    /// Each variable's concatenations ([`Growth::total`]), index-aligned with `variables`
    /// (missing: none).
    pub growth: Vec<u32>,
}

/// A compiled expression.
pub struct Expression {
    /// The expression as written.
    pub source: String,
    /// The parsed program.
    program: Program,
    /// The environment it runs in: [`ENV`], or one that adds types and functions.
    env: Arc<Env>,
    /// The variables it names (indexes into the policy's variables), for the cost of
    /// evaluating them on first use.
    pub variables: Vec<usize>,
    /// How much its concatenations, and those of the variables it reads, may grow values.
    pub growth: Growth,
}

/// How an evaluation failed: the text upstream puts in the decision's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The expression raised an error (no such key, bad overload, ...), or was refused for
    /// its estimated cost.
    #[error("expression '{expression}' resulted in error: {message}")]
    Failed {
        /// The expression as written.
        expression: String,
        /// Why.
        message: String,
    },
    /// The policy's budget is spent.
    #[error(
        "validation failed due to running out of cost budget, no further validation rules will be run"
    )]
    OutOfBudget,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expression")
            .field("source", &self.source)
            .field("variables", &self.variables)
            .field("growth", &self.growth)
            .finish_non_exhaustive()
    }
}

impl Expression {
    /// Compiles `source`: a parse error, or a reference to something not declared, is a
    /// compile error (upstream's type checker reports `undeclared reference`).
    pub fn compile(source: &str, decls: &Declarations) -> Result<Expression, String> {
        Self::compile_in(source, decls, &ENV)
    }

    /// [`Self::compile`] for `env`, which the expression then runs in.
    pub fn compile_in(
        source: &str,
        decls: &Declarations,
        env: &Arc<Env>,
    ) -> Result<Expression, String> {
        // The parser is third-party code fed user input: a panic is a compile error.
        let program = match catch_unwind(AssertUnwindSafe(|| env.compile(source))) {
            Ok(Ok(program)) => program,
            Ok(Err(e)) => return Err(e.to_string().trim().to_owned()),
            Err(_) => return Err("the expression could not be parsed".to_owned()),
        };
        let mut check = Check {
            decls,
            bound: Vec::new(),
            variables: Vec::new(),
        };
        check.expr(program.expression())?;
        let mut variables = check.variables;
        variables.sort_unstable();
        variables.dedup();
        let read: u32 = variables
            .iter()
            .map(|&v| decls.growth.get(v).copied().unwrap_or(0))
            .fold(0, u32::saturating_add);
        let growth = Growth::of(program.expression(), read);
        Ok(Expression {
            source: source.to_owned(),
            program,
            env: Arc::clone(env),
            variables,
            growth,
        })
    }

    /// The type the expression is known to evaluate to; `None` when it depends on the
    /// data (see [`typing`]).
    pub fn result_type(&self) -> Option<CelType> {
        typing::result_type(self.program.expression())
    }

    /// The parsed expression.
    pub fn ast(&self) -> &IdedExpr {
        self.program.expression()
    }

    /// The estimated cost of this expression alone over inputs of `sizes`.
    pub fn estimate(&self, sizes: Sizes) -> u64 {
        cost::estimate(self.program.expression(), sizes, self.growth)
    }

    /// Evaluates the expression with the variables `resolver` gives (an activation's
    /// scope, whose values are bounded by `sizes`), refused beforehand if its estimated
    /// cost exceeds upstream's per-call limit.
    pub fn evaluate(
        &self,
        resolver: &dyn VariableResolver,
        sizes: Sizes,
    ) -> Result<cel::Value, EvalError> {
        let failed = |message: String| EvalError::Failed {
            expression: self.source.clone(),
            message,
        };
        if self.estimate(sizes) > cost::PER_CALL_LIMIT {
            return Err(failed(cost::PER_CALL_EXCEEDED.to_owned()));
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let mut context = Context::with_env(Arc::clone(&self.env));
            context.set_variable_resolver(resolver);
            self.program.execute(&context)
        }));
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(failed(crate::cel_error::message(&e))),
            Err(_) => Err(failed(
                "internal error evaluating the expression".to_owned(),
            )),
        }
    }
}

/// The walk checking an expression's free identifiers.
struct Check<'d> {
    decls: &'d Declarations,
    /// Comprehension variables in scope.
    bound: Vec<String>,
    /// The declared variables named.
    variables: Vec<usize>,
}

impl Check<'_> {
    fn undeclared(name: &str) -> String {
        format!("ERROR: <input>: undeclared reference to '{name}' (in container '')")
    }

    fn expr(&mut self, e: &IdedExpr) -> Result<(), String> {
        match &e.expr {
            Expr::Ident(name) => self.ident(name),
            Expr::Select(s) => {
                if let Expr::Ident(root) = &s.operand.expr
                    && root == "variables"
                    && !self.bound.iter().any(|b| b == root)
                {
                    return match self.decls.variables.iter().position(|v| *v == s.field) {
                        Some(i) => {
                            self.variables.push(i);
                            Ok(())
                        }
                        None => Err(Self::undeclared(&format!("variables.{}", s.field))),
                    };
                }
                self.expr(&s.operand)
            }
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.expr(target)?;
                }
                call.args.iter().try_for_each(|a| self.expr(a))
            }
            Expr::List(list) => list.elements.iter().try_for_each(|a| self.expr(a)),
            Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
                EntryExpr::MapEntry(m) => {
                    self.expr(&m.key)?;
                    self.expr(&m.value)
                }
                EntryExpr::StructField(f) => self.expr(&f.value),
            }),
            Expr::Struct(s) => s.entries.iter().try_for_each(|entry| match &entry.expr {
                EntryExpr::StructField(f) => self.expr(&f.value),
                EntryExpr::MapEntry(m) => self.expr(&m.value),
            }),
            Expr::Comprehension(c) => {
                self.expr(&c.iter_range)?;
                self.expr(&c.accu_init)?;
                let depth = self.bound.len();
                self.bound.push(c.iter_var.clone());
                self.bound.extend(c.iter_var2.iter().cloned());
                self.bound.push(c.accu_var.clone());
                let inner = [&c.loop_cond, &c.loop_step, &c.result]
                    .into_iter()
                    .try_for_each(|part| self.expr(part));
                self.bound.truncate(depth);
                inner
            }
            Expr::Literal(_) | Expr::Unspecified => Ok(()),
        }
    }

    fn ident(&mut self, name: &str) -> Result<(), String> {
        let declared = self.bound.iter().any(|b| b == name)
            || name.starts_with('@')
            || TYPE_NAMES.contains(&name)
            || matches!(name, "object" | "oldObject" | "request" | "namespaceObject")
            || (name == "params" && self.decls.params)
            || (name == "authorizer" && self.decls.authorizer)
            || self.decls.namespaces.contains(&name);
        if declared {
            return Ok(());
        }
        if name == "variables" && !self.decls.variables.is_empty() {
            // `variables['x']` or `variables` alone: every variable may be needed.
            self.variables.extend(0..self.decls.variables.len());
            return Ok(());
        }
        Err(Self::undeclared(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decls(params: bool, variables: &[&str]) -> Declarations {
        Declarations {
            params,
            authorizer: false,
            namespaces: &[],
            variables: variables.iter().map(|v| (*v).to_owned()).collect(),
            growth: Vec::new(),
        }
    }

    #[test]
    fn compile_checks_references_like_upstreams_type_checker() {
        struct Case {
            name: &'static str,
            expr: &'static str,
            decls: Declarations,
            err: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "object and oldObject",
                expr: "object.spec.replicas <= 5 && oldObject == null",
                decls: decls(false, &[]),
                err: None,
            },
            Case {
                name: "params without a paramKind",
                expr: "object.spec.replicas <= params.max",
                decls: decls(false, &[]),
                err: Some("undeclared reference to 'params'"),
            },
            Case {
                name: "params with a paramKind",
                expr: "object.spec.replicas <= int(params.data.max)",
                decls: decls(true, &[]),
                err: None,
            },
            Case {
                name: "comprehension variables are bound",
                expr: "object.spec.containers.all(c, c.image.startsWith('r/'))",
                decls: decls(false, &[]),
                err: None,
            },
            Case {
                name: "a comprehension variable does not leak",
                expr: "object.items.all(c, true) && c",
                decls: decls(false, &[]),
                err: Some("undeclared reference to 'c'"),
            },
            Case {
                name: "a declared variable",
                expr: "variables.big",
                decls: decls(false, &["big"]),
                err: None,
            },
            Case {
                name: "an undeclared variable",
                expr: "variables.small",
                decls: decls(false, &["big"]),
                err: Some("undeclared reference to 'variables.small'"),
            },
            Case {
                name: "authorizer is not offered",
                expr: "authorizer.group('').resource('pods').check('get').allowed()",
                decls: decls(false, &[]),
                err: Some("undeclared reference to 'authorizer'"),
            },
            Case {
                name: "a parse error",
                expr: "object.spec.replicas <=",
                decls: decls(false, &[]),
                err: Some(""),
            },
        ];
        for case in cases {
            match (Expression::compile(case.expr, &case.decls), case.err) {
                (Ok(_), None) => {}
                (Err(e), Some(want)) => assert!(e.contains(want), "{}: {e}", case.name),
                (Ok(_), Some(_)) => panic!("{}: compiled", case.name),
                (Err(e), None) => panic!("{}: {e}", case.name),
            }
        }
    }

    #[test]
    fn named_variables_are_recorded() {
        let e = Expression::compile(
            "variables.b > 1 && variables.a == 'x'",
            &decls(false, &["a", "b", "c"]),
        )
        .expect("compiles");
        assert_eq!(e.variables, [0, 1]);
    }
}
