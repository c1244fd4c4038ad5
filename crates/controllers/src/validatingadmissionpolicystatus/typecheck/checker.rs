//! Type-checks one parsed CEL expression against declared variables, reporting cel-go's checker errors in its words and layout (`ERROR: <input>:1:22: found no matching overload for '_>_' applied to '(int, string)'`, then the source line and a caret).
//!
//! What is checked, as cel-go's checker does for the standard library: identifiers against
//! the declarations (`undeclared reference`), field selection against object types
//! (`undefined field`) and on scalars (`does not support field selection`), and the
//! arithmetic, comparison, logical and conditional operators' overloads. Calls of other
//! functions (the Kubernetes libraries, string and list extensions) are not resolved: their
//! results are `dyn`, so they never cause a warning upstream would not give.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, SourceInfo, operators,
};

use super::types::Ty;

/// The variables an expression may name, with their types.
#[derive(Clone, Debug, Default)]
pub struct Declarations {
    /// Name to type.
    vars: HashMap<String, Ty>,
}

impl Declarations {
    /// Declares `name` as `ty`.
    pub fn declare(&mut self, name: &str, ty: Ty) {
        self.vars.insert(name.to_owned(), ty);
    }
}

/// One checker error: where (a character offset into the source) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Issue {
    /// Character offset of the expression the error is about.
    offset: usize,
    /// cel-go's message.
    message: String,
}

/// The result of checking an expression: its type, or the errors rendered as cel-go's
/// `Issues.String()`.
pub fn check(source: &str, decls: &Declarations) -> Result<Ty, String> {
    let parsed =
        std::panic::catch_unwind(|| cel::Env::stdlib().parser().parse_with_source_info(source));
    let (expr, info) = match parsed {
        Ok(Ok(parsed)) => parsed,
        // A syntax error is the compiler's to report when the policy is used; the type
        // checker has nothing to add.
        Ok(Err(_)) | Err(_) => return Ok(Ty::Dyn),
    };
    let mut checker = Checker {
        decls,
        scopes: Vec::new(),
        info: &info,
        issues: Vec::new(),
    };
    let ty = checker.expr(&expr);
    if checker.issues.is_empty() {
        return Ok(ty);
    }
    let mut issues = checker.issues;
    issues.sort_by_key(|issue| issue.offset);
    Err(render(source, &issues))
}

/// cel-go's `Errors.ToDisplayString`: each error as `ERROR: <input>:line:col: message`,
/// then ` | ` and the source line, then ` | ` and dots up to a caret under the column.
fn render(source: &str, issues: &[Issue]) -> String {
    let mut out = String::new();
    for (i, issue) in issues.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let (line, column, text) = locate(source, issue.offset);
        let _ = write!(
            out,
            "ERROR: <input>:{line}:{}: {}\n | {text}\n | {}^",
            column + 1,
            issue.message,
            ".".repeat(column)
        );
    }
    out
}

/// The 1-based line, 0-based column (in characters) and text of the line holding
/// character `offset` of `source`.
fn locate(source: &str, offset: usize) -> (usize, usize, &str) {
    let mut seen = 0;
    for (index, text) in source.split('\n').enumerate() {
        let chars = text.chars().count();
        if offset <= seen + chars {
            return (index + 1, offset - seen, text);
        }
        seen += chars + 1;
    }
    (1, 0, source.lines().next().unwrap_or_default())
}

/// The walk over one expression.
struct Checker<'a> {
    /// The declared variables.
    decls: &'a Declarations,
    /// Comprehension variables in scope, innermost last.
    scopes: Vec<(String, Ty)>,
    /// Where each expression id starts.
    info: &'a SourceInfo,
    /// The errors found so far.
    issues: Vec<Issue>,
}

impl Checker<'_> {
    /// Records `message` at expression `id`; the expression's type becomes `dyn`.
    fn error(&mut self, id: u64, message: String) -> Ty {
        let offset = self
            .info
            .offset_for(id)
            .map_or(0, |(start, _)| start as usize);
        self.issues.push(Issue { offset, message });
        Ty::Dyn
    }

    fn expr(&mut self, e: &IdedExpr) -> Ty {
        match &e.expr {
            Expr::Unspecified => Ty::Dyn,
            Expr::Literal(literal) => match literal {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::Null => Ty::Null,
                LiteralValue::String(_) => Ty::String,
                LiteralValue::UInt(_) => Ty::Uint,
            },
            Expr::Ident(name) => self.ident(e.id, name),
            Expr::Select(select) => {
                let operand = self.expr(&select.operand);
                if select.test {
                    // `has(x.f)`: the selection must be possible; the result is a bool.
                    self.select(e.id, &operand, &select.field);
                    return Ty::Bool;
                }
                self.select(e.id, &operand, &select.field)
            }
            Expr::Call(call) => self.call(e.id, call),
            Expr::List(list) => {
                let elems: Vec<Ty> = list.elements.iter().map(|x| self.expr(x)).collect();
                Ty::List(Arc::new(common(&elems)))
            }
            Expr::Map(map) => {
                let mut keys = Vec::new();
                let mut values = Vec::new();
                for entry in &map.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(entry) => {
                            keys.push(self.expr(&entry.key));
                            values.push(self.expr(&entry.value));
                        }
                        EntryExpr::StructField(field) => {
                            self.expr(&field.value);
                        }
                    }
                }
                Ty::Map(Arc::new(common(&keys)), Arc::new(common(&values)))
            }
            Expr::Struct(structure) => {
                for entry in &structure.entries {
                    match &entry.expr {
                        EntryExpr::StructField(field) => {
                            self.expr(&field.value);
                        }
                        EntryExpr::MapEntry(entry) => {
                            self.expr(&entry.key);
                            self.expr(&entry.value);
                        }
                    }
                }
                Ty::Dyn
            }
            Expr::Comprehension(comprehension) => self.comprehension(comprehension),
        }
    }

    fn ident(&mut self, id: u64, name: &str) -> Ty {
        if let Some((_, ty)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return ty.clone();
        }
        if let Some(ty) = self.decls.vars.get(name) {
            return ty.clone();
        }
        match name {
            "int" | "uint" | "double" | "bool" | "string" | "bytes" | "list" | "map"
            | "null_type" | "type" | "dyn" => Ty::Type,
            _ => self.error(
                id,
                format!("undeclared reference to '{name}' (in container '')"),
            ),
        }
    }

    fn select(&mut self, id: u64, operand: &Ty, field: &str) -> Ty {
        match operand {
            Ty::Dyn => Ty::Dyn,
            Ty::Map(_, value) => (**value).clone(),
            Ty::Object(object) => match object.field(field) {
                Some(ty) => ty,
                None => self.error(id, format!("undefined field '{field}'")),
            },
            Ty::Record(fields) => match fields.iter().find(|(name, _)| name == field) {
                Some((_, ty)) => ty.clone(),
                None => self.error(id, format!("undefined field '{field}'")),
            },
            other => self.error(
                id,
                format!("type '{other}' does not support field selection"),
            ),
        }
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Ty {
        let range = self.expr(&c.iter_range);
        let (first, second) = match &range {
            Ty::List(elem) => (Ty::Int, (**elem).clone()),
            Ty::Map(key, value) => ((**key).clone(), (**value).clone()),
            _ => (Ty::Dyn, Ty::Dyn),
        };
        let accu = self.expr(&c.accu_init);
        let scope = self.scopes.len();
        // Two-variable comprehensions bind index/key and value; the one-variable form binds
        // a list's element or a map's key.
        match &c.iter_var2 {
            Some(var2) => {
                self.scopes.push((c.iter_var.clone(), first));
                self.scopes.push((var2.clone(), second));
            }
            None => {
                let single = match &range {
                    Ty::List(elem) => (**elem).clone(),
                    Ty::Map(key, _) => (**key).clone(),
                    _ => Ty::Dyn,
                };
                self.scopes.push((c.iter_var.clone(), single));
            }
        }
        // The accumulator starts as its initial value's type; a list that starts empty
        // (`map`, `filter`) is `list(dyn)`, so the step's type wins.
        self.scopes.push((c.accu_var.clone(), accu.clone()));
        self.expr(&c.loop_cond);
        let step = self.expr(&c.loop_step);
        let accu_ty = if accu.same(&step) { step } else { Ty::Dyn };
        self.scopes.truncate(scope);
        self.scopes.push((c.accu_var.clone(), accu_ty));
        let result = self.expr(&c.result);
        self.scopes.truncate(scope);
        result
    }

    fn call(&mut self, id: u64, call: &CallExpr) -> Ty {
        let target = call.target.as_ref().map(|t| self.expr(t));
        let args: Vec<Ty> = call.args.iter().map(|a| self.expr(a)).collect();
        let name = call.func_name.as_str();
        if target.is_none()
            && let Some(result) = operator(name, &args)
        {
            return match result {
                Some(ty) => ty,
                None => {
                    let applied = args
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ");
                    self.error(
                        id,
                        format!("found no matching overload for '{name}' applied to '({applied})'"),
                    )
                }
            };
        }
        match (name, target.is_some(), args.len()) {
            ("size", _, _) => Ty::Int,
            (
                "startsWith" | "endsWith" | "contains" | "matches" | "isSorted" | "isURL" | "isIP"
                | "isCIDR" | "isQuantity" | "isSemver",
                _,
                _,
            ) => Ty::Bool,
            ("int", false, 1) => Ty::Int,
            ("uint", false, 1) => Ty::Uint,
            ("double", false, 1) => Ty::Double,
            ("string", false, 1) => Ty::String,
            ("bytes", false, 1) => Ty::Bytes,
            ("bool", false, 1) => Ty::Bool,
            ("timestamp", false, 1) => Ty::Timestamp,
            ("duration", false, 1) => Ty::Duration,
            ("type", false, 1) => Ty::Type,
            ("lowerAscii" | "upperAscii" | "trim" | "replace" | "join" | "format", _, _) => {
                Ty::String
            }
            _ => Ty::Dyn,
        }
    }
}

/// The element type of a literal list or map: the type all share, else `dyn`.
fn common(types: &[Ty]) -> Ty {
    match types.split_first() {
        Some((first, rest)) if rest.iter().all(|t| t.same(first) && !t.is_dyn()) => first.clone(),
        _ => Ty::Dyn,
    }
}

/// The result of operator `name` applied to `args`: `None` when `name` is no operator,
/// `Some(None)` when no overload matches, as cel-go's standard declarations (with
/// Kubernetes' cross-type numeric comparisons).
fn operator(name: &str, args: &[Ty]) -> Option<Option<Ty>> {
    use Ty::*;
    let any_dyn = args.iter().any(Ty::is_dyn);
    let result = match (name, args) {
        (operators::LOGICAL_AND | operators::LOGICAL_OR, [a, b]) => {
            (matches!(a, Bool | Dyn) && matches!(b, Bool | Dyn)).then_some(Bool)
        }
        (operators::LOGICAL_NOT, [a]) => matches!(a, Bool | Dyn).then_some(Bool),
        (operators::NOT_STRICTLY_FALSE, [_]) => Some(Bool),
        (operators::NEGATE, [a]) => match a {
            Int | Double | Dyn => Some(a.clone()),
            _ => None,
        },
        (operators::CONDITIONAL, [c, a, b]) => {
            if !matches!(c, Bool | Dyn) {
                None
            } else if a.same(b) && !a.is_dyn() {
                Some(a.clone())
            } else {
                Some(Dyn)
            }
        }
        (
            operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS,
            [a, b],
        ) => {
            let ok = any_dyn
                || (a.is_number() && b.is_number())
                || (a.same(b) && matches!(a, String | Bytes | Bool | Timestamp | Duration));
            ok.then_some(Bool)
        }
        (operators::EQUALS | operators::NOT_EQUALS, [_, _]) => Some(Bool),
        (operators::IN, [_, b]) => matches!(b, List(_) | Map(..) | Dyn).then_some(Bool),
        (operators::ADD, [a, b]) => {
            if any_dyn {
                Some(Dyn)
            } else {
                match (a, b) {
                    (Int, Int)
                    | (Uint, Uint)
                    | (Double, Double)
                    | (String, String)
                    | (Bytes, Bytes)
                    | (Duration, Duration) => Some(a.clone()),
                    (Timestamp, Duration) | (Duration, Timestamp) => Some(Timestamp),
                    (List(x), List(y)) => Some(if x.same(y) && !x.is_dyn() {
                        a.clone()
                    } else {
                        List(Arc::new(if x.is_dyn() { (**y).clone() } else { Dyn }))
                    }),
                    _ => None,
                }
            }
        }
        (operators::SUBSTRACT, [a, b]) => {
            if any_dyn {
                Some(Dyn)
            } else {
                match (a, b) {
                    (Int, Int) | (Uint, Uint) | (Double, Double) | (Duration, Duration) => {
                        Some(a.clone())
                    }
                    (Timestamp, Timestamp) => Some(Duration),
                    (Timestamp, Duration) => Some(Timestamp),
                    _ => None,
                }
            }
        }
        (operators::MULTIPLY | operators::DIVIDE, [a, b]) => {
            if any_dyn {
                Some(Dyn)
            } else {
                (a.same(b) && a.is_number()).then(|| a.clone())
            }
        }
        (operators::MODULO, [a, b]) => {
            if any_dyn {
                Some(Dyn)
            } else {
                (a.same(b) && matches!(a, Int | Uint)).then(|| a.clone())
            }
        }
        (operators::INDEX | operators::OPT_INDEX, [a, b]) => match a {
            List(elem) => matches!(b, Int | Uint | Dyn).then(|| (**elem).clone()),
            Map(_, value) => Some((**value).clone()),
            _ => Some(Dyn),
        },
        _ => return None,
    };
    Some(result)
}

#[cfg(test)]
#[path = "checker_tests.rs"]
mod tests;
