//! The result type of a parsed CEL expression, as far as its literals and operators tell: the part of upstream's type checker that refuses a condition that can never be a bool (`must evaluate to bool`).
//!
//! Upstream type-checks every expression against typed declarations (`object` is `dyn`,
//! `request` an `AdmissionRequest`, ...) and refuses one whose result type is not the one
//! asked for. Without a checker, kcm infers what the expression itself fixes: a literal, a
//! comparison, a logical operator, a conversion, `size`, a macro, arithmetic on operands of
//! known types. Anything that depends on the data is `None` (upstream's `dyn`), which every
//! result type accepts, so an expression is only refused when upstream would refuse it too.

use std::fmt;

use cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};

/// A CEL type an expression's result is known to have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CelType {
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `uint`.
    Uint,
    /// `double`.
    Double,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `null_type`.
    Null,
    /// `list(...)`.
    List,
    /// `map(...)`.
    Map,
    /// `type`.
    Type,
    /// `google.protobuf.Duration`.
    Duration,
    /// `google.protobuf.Timestamp`.
    Timestamp,
}

impl fmt::Display for CelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CelType::Bool => "bool",
            CelType::Int => "int",
            CelType::Uint => "uint",
            CelType::Double => "double",
            CelType::String => "string",
            CelType::Bytes => "bytes",
            CelType::Null => "null_type",
            CelType::List => "list",
            CelType::Map => "map",
            CelType::Type => "type",
            CelType::Duration => "google.protobuf.Duration",
            CelType::Timestamp => "google.protobuf.Timestamp",
        })
    }
}

/// Deeper than any expression the parser accepts; bounds the walk.
const MAX_DEPTH: usize = 256;

/// The type `expr` is known to evaluate to; `None` when it depends on the data.
pub fn result_type(expr: &IdedExpr) -> Option<CelType> {
    Infer { bound: Vec::new() }.expr(expr, 0)
}

/// The walk: the comprehension variables in scope, with their types where known.
struct Infer {
    bound: Vec<(String, Option<CelType>)>,
}

impl Infer {
    fn expr(&mut self, e: &IdedExpr, depth: usize) -> Option<CelType> {
        if depth > MAX_DEPTH {
            return None;
        }
        match &e.expr {
            Expr::Literal(literal) => Some(match literal {
                LiteralValue::Boolean(_) => CelType::Bool,
                LiteralValue::Bytes(_) => CelType::Bytes,
                LiteralValue::Double(_) => CelType::Double,
                LiteralValue::Int(_) => CelType::Int,
                LiteralValue::Null => CelType::Null,
                LiteralValue::String(_) => CelType::String,
                LiteralValue::UInt(_) => CelType::Uint,
            }),
            Expr::List(_) => Some(CelType::List),
            Expr::Map(_) => Some(CelType::Map),
            Expr::Ident(name) => self
                .bound
                .iter()
                .rev()
                .find(|(bound, _)| bound == name)
                .and_then(|(_, ty)| *ty),
            Expr::Select(select) if select.test => Some(CelType::Bool),
            Expr::Call(call) => {
                let arg = |infer: &mut Self, i: usize| {
                    call.args.get(i).and_then(|a| infer.expr(a, depth + 1))
                };
                match call.func_name.as_str() {
                    operators::LOGICAL_AND
                    | operators::LOGICAL_OR
                    | operators::LOGICAL_NOT
                    | operators::NOT_STRICTLY_FALSE
                    | operators::EQUALS
                    | operators::NOT_EQUALS
                    | operators::LESS
                    | operators::LESS_EQUALS
                    | operators::GREATER
                    | operators::GREATER_EQUALS
                    | operators::IN
                    | operators::HAS
                    | operators::ALL
                    | operators::EXISTS
                    | operators::EXISTS_ONE
                    | "bool"
                    | "matches"
                    | "startsWith"
                    | "endsWith"
                    | "contains" => Some(CelType::Bool),
                    operators::MAP | operators::FILTER => Some(CelType::List),
                    "size" | "int" => Some(CelType::Int),
                    "uint" => Some(CelType::Uint),
                    "double" => Some(CelType::Double),
                    "string" => Some(CelType::String),
                    "bytes" => Some(CelType::Bytes),
                    "type" => Some(CelType::Type),
                    "duration" => Some(CelType::Duration),
                    "timestamp" => Some(CelType::Timestamp),
                    operators::CONDITIONAL => {
                        let (then, otherwise) = (arg(self, 1), arg(self, 2));
                        then.filter(|t| Some(*t) == otherwise)
                    }
                    operators::NEGATE => arg(self, 0),
                    operators::ADD
                    | operators::SUBSTRACT
                    | operators::MULTIPLY
                    | operators::DIVIDE
                    | operators::MODULO => {
                        arithmetic(&call.func_name, arg(self, 0)?, arg(self, 1)?)
                    }
                    _ => None,
                }
            }
            Expr::Comprehension(c) => {
                let accu = self.expr(&c.accu_init, depth + 1);
                let depth_before = self.bound.len();
                self.bound.push((c.iter_var.clone(), None));
                if let Some(second) = &c.iter_var2 {
                    self.bound.push((second.clone(), None));
                }
                self.bound.push((c.accu_var.clone(), accu));
                let result = self.expr(&c.result, depth + 1);
                self.bound.truncate(depth_before);
                result
            }
            Expr::Select(_) | Expr::Struct(_) | Expr::Unspecified => None,
        }
    }
}

/// The result of an arithmetic operator on operands of known types, where CEL has an
/// overload for them; `None` otherwise (the checker's overload error is not reproduced).
fn arithmetic(op: &str, left: CelType, right: CelType) -> Option<CelType> {
    use CelType::{Duration, Timestamp};
    match (op, left, right) {
        (operators::SUBSTRACT, Timestamp, Timestamp) => Some(Duration),
        (operators::ADD | operators::SUBSTRACT, Timestamp, Duration)
        | (operators::ADD, Duration, Timestamp) => Some(Timestamp),
        (_, l, r) if l == r => Some(l),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_types_of_literals_operators_and_macros() {
        let cases: &[(&str, Option<CelType>)] = &[
            ("true", Some(CelType::Bool)),
            ("'a'", Some(CelType::String)),
            ("1 + 2", Some(CelType::Int)),
            ("'a' + 'b'", Some(CelType::String)),
            ("[1, 2]", Some(CelType::List)),
            ("{'a': 1}", Some(CelType::Map)),
            ("null", Some(CelType::Null)),
            ("size(object.items)", Some(CelType::Int)),
            ("object.metadata.name != 'skip-me'", Some(CelType::Bool)),
            ("!(object.a in ['x'])", Some(CelType::Bool)),
            ("has(object.spec)", Some(CelType::Bool)),
            ("object.items.all(i, i.x > 1)", Some(CelType::Bool)),
            ("object.items.exists_one(i, i.x > 1)", Some(CelType::Bool)),
            ("object.items.map(i, i.x)", Some(CelType::List)),
            ("object.a ? 'x' : 'y'", Some(CelType::String)),
            ("object.a ? 'x' : 1", None),
            ("object.metadata.name", None),
            ("object.a + 1", None),
            (
                "request.userInfo.username.startsWith('system:')",
                Some(CelType::Bool),
            ),
            (
                "timestamp('2024-01-01T00:00:00Z') - timestamp('2023-01-01T00:00:00Z')",
                Some(CelType::Duration),
            ),
        ];
        for (source, want) in cases {
            // The standard environment, as the expressions' own (not imported from
            // `expression`, which imports this module).
            let program = cel::Env::stdlib().compile(source).expect(source);
            assert_eq!(result_type(program.expression()), *want, "{source}");
        }
    }
}
