//! What bounds a policy's evaluation: each expression's cost estimated from its syntax tree and the actual sizes of this request's inputs, checked against upstream's per-call limit and per-policy budget before anything runs.
//!
//! Upstream counts the cost while the expression runs (cel-go's interpreter is instrumented)
//! and cancels it at `celconfig.PerCallLimit`, and stops a policy's remaining expressions
//! when its `RuntimeCELCostBudget` is spent. The `cel` crate has no such hook, so kcm bounds
//! the evaluation *before* it starts instead: CEL has no unbounded loops (a comprehension
//! iterates once over a list or map that already exists), so its cost is at most a function
//! of the expression's shape and the sizes of the lists and strings it can see. The estimate
//! takes those sizes from the request's own objects (the longest list or map, the longest
//! string), lets every `+` double them (concatenation is the only way an expression grows a
//! value), and multiplies a comprehension's body by the length of what it iterates. It
//! over-approximates, never under: an expression it admits cannot run away, and ordinary
//! expressions over ordinary objects estimate far below the limit.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::Value;

/// The most one expression may cost (upstream's `celconfig.PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// The most one policy evaluation (all its expressions, for one binding and param) may cost
/// (upstream's `celconfig.RuntimeCELCostBudget`).
pub const RUNTIME_BUDGET: u64 = 10_000_000;

/// The error of an expression refused for its cost (upstream's words, with "estimated"
/// where upstream's counts the actual cost).
pub const PER_CALL_EXCEEDED: &str = "operation cancelled: estimated cost limit exceeded";

/// Functions whose cost may grow with the length of any operand, a string or a list.
const SIZED: &[&str] = &["_+_", "_==_", "_!=_", "@in", "string", "join"];

/// Functions whose cost grows with the length of a string operand, as upstream's cost model
/// charges string functions by length.
const LINEAR: &[&str] = &[
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "bytes",
    "split",
    "lowerAscii",
    "upperAscii",
    "replace",
    "indexOf",
    "lastIndexOf",
    "trim",
    "substring",
];

/// The sizes an expression can see: bounds on every list or map length and every string
/// length in its inputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sizes {
    /// The longest list or map (number of items) anywhere in the inputs.
    pub items: u64,
    /// The longest string (bytes) anywhere in the inputs.
    pub chars: u64,
}

impl Sizes {
    /// The sizes of `value` (walked once).
    pub fn of(value: &Value) -> Sizes {
        let mut sizes = Sizes::default();
        walk(value, &mut sizes);
        sizes
    }

    /// The larger of each bound.
    pub fn max(self, other: Sizes) -> Sizes {
        Sizes {
            items: self.items.max(other.items),
            chars: self.chars.max(other.chars),
        }
    }
}

fn walk(value: &Value, sizes: &mut Sizes) {
    match value {
        Value::String(s) => sizes.chars = sizes.chars.max(s.len() as u64),
        Value::Array(items) => {
            sizes.items = sizes.items.max(items.len() as u64);
            items.iter().for_each(|v| walk(v, sizes));
        }
        Value::Object(map) => {
            sizes.items = sizes.items.max(map.len() as u64);
            for (k, v) in map {
                sizes.chars = sizes.chars.max(k.len() as u64);
                walk(v, sizes);
            }
        }
        _ => {}
    }
}

/// How many concatenations may have grown the values an expression sees: a `+` may double
/// a list or a string, and nothing else makes one longer than the inputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Growth {
    /// Every `+` of the expression and of the variables it reads: bounds strings.
    pub total: u32,
    /// The `+` inside what a comprehension iterates (and every `+` of the variables read):
    /// bounds the lists and maps iterated. A `+` elsewhere builds nothing that is iterated.
    pub ranges: u32,
}

impl Growth {
    /// The concatenations of `expr` itself (`variables` adds those of the variables it reads).
    pub fn of(expr: &IdedExpr, variables: u32) -> Growth {
        let mut shape = Shape::default();
        shape.scan(expr, false);
        Growth {
            total: shape.plus.saturating_add(variables),
            ranges: shape.plus_in_ranges.saturating_add(variables),
        }
    }
}

/// The estimated cost of `expr` when its inputs have `sizes` (saturating: an absurd
/// expression estimates `u64::MAX`, never wraps).
pub fn estimate(expr: &IdedExpr, sizes: Sizes, growth: Growth) -> u64 {
    // Literals count as inputs; every `+` may double what exists.
    let mut shape = Shape::default();
    shape.scan(expr, false);
    let items = sizes
        .items
        .max(shape.literal_items)
        .saturating_add(1)
        .saturating_mul(1u64 << growth.ranges.min(40));
    let chars = sizes
        .chars
        .max(shape.literal_chars)
        .saturating_add(1)
        .saturating_mul(1u64 << growth.total.min(40));
    let per = Per {
        items,
        string: chars / 10 + 1,
        sized: items.max(chars) / 10 + 1,
    };
    cost(expr, &per)
}

/// What one node costs beyond the first unit.
struct Per {
    /// Iterations of a comprehension.
    items: u64,
    /// A string function.
    string: u64,
    /// A function over strings or lists.
    sized: u64,
}

/// The literal sizes and concatenations of an expression.
#[derive(Default)]
struct Shape {
    plus: u32,
    plus_in_ranges: u32,
    literal_items: u64,
    literal_chars: u64,
}

impl Shape {
    fn scan(&mut self, e: &IdedExpr, in_range: bool) {
        match &e.expr {
            Expr::Literal(LiteralValue::String(s)) => {
                self.literal_chars = self.literal_chars.max(s.inner().len() as u64);
            }
            Expr::Literal(_) | Expr::Ident(_) | Expr::Unspecified => {}
            Expr::Call(call) => {
                if call.func_name == "_+_" {
                    self.plus += 1;
                    if in_range {
                        self.plus_in_ranges += 1;
                    }
                }
                call.target.iter().for_each(|t| self.scan(t, in_range));
                call.args.iter().for_each(|a| self.scan(a, in_range));
            }
            Expr::Select(s) => self.scan(&s.operand, in_range),
            Expr::List(list) => {
                self.literal_items = self.literal_items.max(list.elements.len() as u64);
                list.elements.iter().for_each(|a| self.scan(a, in_range));
            }
            Expr::Map(map) => {
                self.literal_items = self.literal_items.max(map.entries.len() as u64);
                for entry in &map.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(m) => {
                            self.scan(&m.key, in_range);
                            self.scan(&m.value, in_range);
                        }
                        EntryExpr::StructField(f) => self.scan(&f.value, in_range),
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        self.scan(&f.value, in_range);
                    }
                }
            }
            Expr::Comprehension(c) => {
                self.scan(&c.iter_range, true);
                for part in [&c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                    self.scan(part, in_range);
                }
            }
        }
    }
}

/// Whether `e` is a scalar literal (comparing with one costs at most its length).
fn is_scalar_literal(e: &IdedExpr) -> bool {
    matches!(e.expr, Expr::Literal(_))
}

/// The cost of `e`: one per node, more per size-dependent call, a comprehension's body
/// times the items it may iterate.
fn cost(e: &IdedExpr, per: &Per) -> u64 {
    let sum = |exprs: &mut dyn Iterator<Item = &IdedExpr>| {
        exprs.fold(0u64, |acc, x| acc.saturating_add(cost(x, per)))
    };
    match &e.expr {
        Expr::Literal(_) | Expr::Ident(_) | Expr::Unspecified => 1,
        Expr::Select(s) => cost(&s.operand, per).saturating_add(1),
        Expr::Call(call) => {
            let name = call.func_name.as_str();
            let own = if matches!(name, "_==_" | "_!=_") && call.args.iter().any(is_scalar_literal)
            {
                per.string
            } else if SIZED.contains(&name) {
                per.sized
            } else if LINEAR.contains(&name) {
                per.string
            } else {
                1
            };
            own.saturating_add(sum(&mut call.target.iter().map(|t| t.as_ref())))
                .saturating_add(sum(&mut call.args.iter()))
        }
        Expr::List(list) => 1u64.saturating_add(sum(&mut list.elements.iter())),
        Expr::Map(map) => map.entries.iter().fold(1u64, |acc, entry| {
            acc.saturating_add(match &entry.expr {
                EntryExpr::MapEntry(m) => cost(&m.key, per).saturating_add(cost(&m.value, per)),
                EntryExpr::StructField(f) => cost(&f.value, per),
            })
        }),
        Expr::Struct(s) => s.entries.iter().fold(1u64, |acc, entry| match &entry.expr {
            EntryExpr::StructField(f) => acc.saturating_add(cost(&f.value, per)),
            EntryExpr::MapEntry(_) => acc,
        }),
        Expr::Comprehension(c) => {
            let body = cost(&c.loop_cond, per)
                .saturating_add(cost(&c.loop_step, per))
                .saturating_add(1);
            cost(&c.iter_range, per)
                .saturating_add(cost(&c.accu_init, per))
                .saturating_add(per.items.saturating_mul(body))
                .saturating_add(cost(&c.result, per))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn est(source: &str, input: &Value) -> u64 {
        let program = cel::Program::compile(source).expect("parses");
        let growth = Growth::of(program.expression(), 0);
        estimate(program.expression(), Sizes::of(input), growth)
    }

    #[test]
    fn sizes_are_the_longest_list_and_string() {
        let sizes = Sizes::of(&json!({"a": [1, 2, 3], "b": {"c": "hello"}}));
        assert_eq!(sizes, Sizes { items: 3, chars: 5 });
    }

    #[test]
    fn estimates_grow_with_nesting_and_input_not_with_ordinary_use() {
        struct Case {
            name: &'static str,
            expr: &'static str,
            items: usize,
            within_limit: bool,
        }
        let cases = [
            Case {
                name: "a comparison",
                expr: "object.spec.replicas <= 5",
                items: 10_000,
                within_limit: true,
            },
            Case {
                name: "one comprehension over a big list",
                expr: "object.items.all(i, i.startsWith('a'))",
                items: 10_000,
                within_limit: true,
            },
            Case {
                name: "two nested comprehensions over a small list",
                expr: "object.items.all(a, object.items.all(b, a == b || a != b))",
                items: 100,
                within_limit: true,
            },
            Case {
                name: "three nested comprehensions over a big list",
                expr: "object.items.all(a, object.items.all(b, object.items.all(c, true)))",
                items: 10_000,
                within_limit: false,
            },
            Case {
                name: "concatenating strings in nested loops over a small map",
                expr: "object.items.all(a, object.items.all(b, object.items.all(c, a + b + c != '')))",
                items: 10,
                within_limit: true,
            },
            Case {
                name: "doubling a list in a loop",
                expr: "object.items.map(a, object.items + object.items + object.items + object.items).all(l, l.all(x, x == 'a'))",
                items: 1_000,
                within_limit: false,
            },
        ];
        for case in cases {
            let items: Vec<Value> = (0..case.items).map(|i| json!(format!("i{i}"))).collect();
            let cost = est(case.expr, &json!({"items": items}));
            assert_eq!(
                cost <= PER_CALL_LIMIT,
                case.within_limit,
                "{}: estimated {cost}",
                case.name
            );
        }
    }

    #[test]
    fn absurd_expressions_saturate() {
        let nested = (0..40).fold("true".to_owned(), |body, i| {
            format!("object.items.all(v{i}, {body})")
        });
        assert_eq!(est(&nested, &json!({"items": [1, 2, 3]})), u64::MAX);
    }
}
