//! The CEL environment of mutations (upstream's `mutation` library): `Object` and its nested types (`Object.spec`, `Object.spec.template`, ...) for apply configurations, `JSONPatch` for JSON patches, `jsonpatch.escapeKey`; and their results as JSON.
//!
//! Upstream declares `Object` and every `Object.<path>` from the object's OpenAPI schema and
//! type-checks initializers against it. kcm's CEL has no schema types: an expression's own
//! struct literals are registered as it names them (each a struct of any fields), and the
//! result is checked as upstream checks it at run time
//! (`ObjectVal.CheckTypeNamesMatchFieldPathNames`): a type's name must be the path of field
//! names from `Object` to it, so `Object{spec: Object.metadata{}}` is a type mismatch.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::common::types::{self, CelString, CelStruct, Type};
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError, StructType};
use serde_json::{Map, Value};

/// The type of the object an apply configuration returns.
pub const OBJECT: &str = "Object";

/// The type of one JSON patch operation.
pub const JSON_PATCH: &str = "JSONPatch";

/// The fields a `JSONPatch` may set (upstream's `JSONPatchType`).
const JSON_PATCH_FIELDS: &[&str] = &["op", "path", "from", "value"];

/// The struct type names `expr` constructs (`Object`, `Object.spec`, `JSONPatch`, ...).
pub fn struct_names(expr: &IdedExpr, out: &mut BTreeSet<String>) {
    match &expr.expr {
        Expr::Struct(s) => {
            out.insert(s.type_name.trim_start_matches('.').to_owned());
            for entry in &s.entries {
                match &entry.expr {
                    EntryExpr::StructField(f) => struct_names(&f.value, out),
                    EntryExpr::MapEntry(m) => struct_names(&m.value, out),
                }
            }
        }
        Expr::Select(s) => struct_names(&s.operand, out),
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                struct_names(target, out);
            }
            call.args.iter().for_each(|a| struct_names(a, out));
        }
        Expr::List(list) => list.elements.iter().for_each(|e| struct_names(e, out)),
        Expr::Map(map) => {
            for entry in &map.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(m) => {
                        struct_names(&m.key, out);
                        struct_names(&m.value, out);
                    }
                    EntryExpr::StructField(f) => struct_names(&f.value, out),
                }
            }
        }
        Expr::Comprehension(c) => {
            for part in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                struct_names(part, out);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// The environment in which the struct types `names` can be constructed: the standard
/// library, the types, and `jsonpatch.escapeKey`. A name that is neither `Object`, a type
/// under it, nor `JSONPatch` is undeclared, as upstream's type checker says.
pub fn build(names: &BTreeSet<String>) -> Result<Arc<Env>, String> {
    let mut env = Env::stdlib();
    for name in names {
        let is_object = name == OBJECT
            || name
                .strip_prefix(OBJECT)
                .is_some_and(|rest| rest.starts_with('.'));
        let fields = if is_object {
            None
        } else if name == JSON_PATCH {
            Some(JSON_PATCH_FIELDS)
        } else {
            return Err(format!(
                "ERROR: <input>: undeclared reference to '{name}' (in container '')"
            ));
        };
        env.add_type(ObjectType {
            ty: Type::new_struct(name.clone()),
            fields,
        })
        .map_err(|e| e.to_string())?;
    }
    env.add_overload(
        "jsonpatch.escapeKey",
        "jsonpatch_escapeKey_string",
        vec![types::STRING_TYPE],
        escape_key,
    )
    .map_err(|e| e.to_string())?;
    Ok(Arc::new(env))
}

/// `jsonpatch.escapeKey(k)`: `k` as one JSON pointer segment (`~` as `~0`, `/` as `~1`).
fn escape_key<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let key = args
        .first()
        .and_then(|a| a.downcast_ref::<CelString>())
        .ok_or_else(|| ExecutionError::function_error("jsonpatch.escapeKey", "expects a string"))?;
    let escaped = key.inner().replace('~', "~0").replace('/', "~1");
    Ok(CowVal::owned(CelString::from(escaped)))
}

/// A struct type an expression constructs: any fields for `Object` types (their schema is
/// not known here), the listed ones for `JSONPatch`.
struct ObjectType {
    ty: Type,
    /// The fields allowed; `None`: any.
    fields: Option<&'static [&'static str]>,
}

impl StructType for ObjectType {
    fn get_type(&self) -> &Type {
        &self.ty
    }

    fn new_value<'b, 'v>(
        &self,
        fields: BTreeMap<String, CowVal<'b, 'v>>,
    ) -> Result<Box<dyn Val + 'v>, ExecutionError> {
        let mut value = CelStruct::new(self.ty.name().to_owned());
        for (name, field) in fields {
            if self
                .fields
                .is_some_and(|allowed| !allowed.contains(&name.as_str()))
            {
                return Err(ExecutionError::NoSuchKey(Arc::new(format!(
                    "field `{name}` on struct `{}`",
                    self.ty.name()
                ))));
            }
            value.add_field_value(name, field);
        }
        Ok(Box::new(value))
    }
}

/// A value an expression returned that cannot be a mutation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultError {
    /// A struct's type name is not the path of field names from its root type.
    #[error("type mismatch: {0}")]
    TypeMismatch(String),
    /// The value has no JSON form (a map with non-string keys, bytes, a function...).
    #[error("{0}")]
    NotJson(String),
}

/// `value` as JSON, its structs' type names checked against their paths from `root` (the
/// type name the value itself must have, when it is a struct).
pub fn to_json(value: &cel::Value, root: &str) -> Result<Value, ResultError> {
    let mut mismatches = Vec::new();
    let json = convert(value, &mut vec![root.to_owned()], &mut mismatches)?;
    if mismatches.is_empty() {
        Ok(json)
    } else {
        Err(ResultError::TypeMismatch(mismatches.join("\n")))
    }
}

fn convert(
    value: &cel::Value,
    path: &mut Vec<String>,
    mismatches: &mut Vec<String>,
) -> Result<Value, ResultError> {
    Ok(match value {
        cel::Value::Null => Value::Null,
        cel::Value::Bool(b) => Value::Bool(*b),
        cel::Value::Int(i) => Value::from(*i),
        cel::Value::UInt(u) => Value::from(*u),
        cel::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| ResultError::NotJson(format!("{f} has no JSON form")))?,
        cel::Value::String(s) => Value::String(s.to_string()),
        cel::Value::List(items) => Value::Array(
            items
                .iter()
                .map(|item| convert(item, path, mismatches))
                .collect::<Result<_, _>>()?,
        ),
        cel::Value::Map(map) => {
            let mut out = Map::new();
            for (key, item) in map.map.iter() {
                let cel::objects::Key::String(key) = key else {
                    return Err(ResultError::NotJson(format!(
                        "map key {key:?} is not a string"
                    )));
                };
                out.insert(key.to_string(), convert(item, path, mismatches)?);
            }
            Value::Object(out)
        }
        cel::Value::Struct(s) => {
            let expected = path.join(".");
            if s.name() != expected {
                mismatches.push(format!(
                    "unexpected type name {:?}, expected {expected:?}, which matches field name path from root Object type",
                    s.name()
                ));
            }
            let mut out = Map::new();
            for (field, item) in s.field_values() {
                let item = cel::Value::try_from(item.as_ref())
                    .map_err(|e| ResultError::NotJson(crate::cel_error::message(&e)))?;
                path.push(field.clone());
                let converted = convert(&item, path, mismatches);
                path.pop();
                out.insert(field, converted?);
            }
            Value::Object(out)
        }
        other => {
            return Err(ResultError::NotJson(format!(
                "{:?} has no JSON form",
                other.type_of()
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use cel::{Context, Program};
    use serde_json::json;

    use super::*;

    fn run(source: &str) -> Result<cel::Value, String> {
        let program = Program::compile(source).map_err(|e| e.to_string())?;
        let mut names = BTreeSet::new();
        struct_names(program.expression(), &mut names);
        let env = build(&names)?;
        program
            .execute(&Context::with_env(env))
            .map_err(|e| crate::cel_error::message(&e))
    }

    #[test]
    fn object_initializers_become_json_with_their_paths_checked() {
        let v = run(r#"Object{metadata: Object.metadata{annotations: {"a": "b"}},
            spec: Object.spec{replicas: 1337, template: Object.spec.template{spec:
                Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: "c"}]}}}}"#)
        .expect("evaluates");
        assert_eq!(
            to_json(&v, OBJECT).expect("json"),
            json!({"metadata": {"annotations": {"a": "b"}}, "spec": {"replicas": 1337,
                "template": {"spec": {"containers": [{"name": "c"}]}}}})
        );
        let wrong = run("Object{spec: Object.metadata{}}").expect("evaluates");
        assert_eq!(
            to_json(&wrong, OBJECT),
            Err(ResultError::TypeMismatch(
                r#"unexpected type name "Object.metadata", expected "Object.spec", which matches field name path from root Object type"#.to_owned()
            ))
        );
    }

    #[test]
    fn json_patches_and_escaped_keys() {
        let v = run(r#"[JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey("example.com/a~b"), value: "x"}]"#)
            .expect("evaluates");
        assert_eq!(
            to_json(&v, JSON_PATCH).expect("json"),
            json!([{"op": "add", "path": "/metadata/labels/example.com~1a~0b", "value": "x"}])
        );
        assert!(
            run(r#"[JSONPatch{op: "add", nope: 1}]"#)
                .expect_err("unknown field")
                .contains("nope")
        );
    }

    #[test]
    fn only_object_types_and_json_patch_are_declared() {
        let err = run("Pod{}").expect_err("undeclared");
        assert!(err.contains("undeclared reference to 'Pod'"), "{err}");
        let err = run("Objects{}").expect_err("undeclared");
        assert!(err.contains("'Objects'"), "{err}");
    }
}
