//! A mutation's result applied to the object (upstream's `patch/smd.go` and `patch/json_patch.go`): an apply configuration merged as server-side apply merges, or a JSON patch.
//!
//! The merge follows the kind's list semantics as kcm's server-side apply does
//! ([`crate::fieldmanager::walk::merge`]: associative lists by key, sets by value, objects
//! field by field); an apply configuration that sets an atomic list is refused, as upstream
//! refuses any atomic list, map or struct (kcm's tables know atomic lists and replaced maps,
//! not upstream's few atomic structs). No field ownership is recorded, as upstream.

use serde_json::{Value, json};

use super::environment::{self, JSON_PATCH, OBJECT};
use crate::fieldmanager::walk;
use crate::strategic_merge::TypeDef;

/// Why a mutation could not be applied: the text upstream puts after `denied request: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The result has the wrong type or shape.
    #[error("{0}")]
    Result(String),
    /// The apply configuration sets atomic fields.
    #[error(
        "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
        .0.join(", ")
    )]
    Atomic(Vec<String>),
    /// The JSON patch does not apply.
    #[error("JSON Patch: {0}")]
    JsonPatch(String),
}

/// `object` with the apply configuration `result` (an `Object{...}`) merged in.
pub fn apply_configuration(
    object: &Value,
    result: &cel::Value,
    ty: &'static TypeDef,
) -> Result<Value, Error> {
    let cel::Value::Struct(s) = result else {
        return Err(Error::Result(format!(
            "unsupported return type from ApplyConfiguration expression: {}",
            result.type_of()
        )));
    };
    if s.name() != OBJECT {
        return Err(Error::Result(format!(
            "unsupported return type from ApplyConfiguration expression: {}",
            s.name()
        )));
    }
    let mut patch =
        environment::to_json(result, OBJECT).map_err(|e| Error::Result(e.to_string()))?;
    let atomics = walk::atomic_paths(&patch, ty);
    if !atomics.is_empty() {
        return Err(Error::Atomic(atomics));
    }
    // The configuration is of the object's kind (upstream sets its GVK to the object's).
    for field in ["apiVersion", "kind"] {
        if let (Some(value), Some(map)) = (object.get(field), patch.as_object_mut()) {
            map.insert(field.to_owned(), value.clone());
        }
    }
    Ok(walk::merge(object, &patch, ty))
}

/// `object` with the JSON patch `result` (a list of `JSONPatch{...}`) applied, or unchanged
/// when one of its `test` operations fails (upstream applies none of it then).
pub fn json_patch(object: &Value, result: &cel::Value) -> Result<Value, Error> {
    let cel::Value::List(items) = result else {
        return Err(Error::Result(
            "type mismatch: JSONPatchType.expression should evaluate to array".to_owned(),
        ));
    };
    let mut operations = Vec::with_capacity(items.len());
    for item in items.iter() {
        let cel::Value::Struct(op) = item else {
            return Err(Error::Result(
                "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch"
                    .to_owned(),
            ));
        };
        if op.name() != JSON_PATCH {
            return Err(Error::Result(format!(
                "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of {}",
                op.name()
            )));
        }
        let field = |name: &str| -> Result<Option<cel::Value>, Error> {
            op.field_value(name)
                .map(cel::Value::try_from)
                .transpose()
                .map_err(|e| Error::Result(crate::cel_error::message(&e)))
        };
        let text = |name: &str| -> Result<String, Error> {
            match field(name)? {
                None => Ok(String::new()),
                Some(cel::Value::String(s)) => Ok(s.to_string()),
                Some(other) => Err(Error::Result(format!(
                    "type mismatch: JSONPatch {name} should be a string, got {}",
                    other.type_of()
                ))),
            }
        };
        let mut operation = json!({"op": text("op")?, "path": text("path")?});
        let from = text("from")?;
        if !from.is_empty() {
            operation["from"] = Value::String(from);
        }
        if let Some(value) = field("value")? {
            // An `Object...{}` value is checked against its own type's path.
            let root = match &value {
                cel::Value::Struct(s) => s.name().to_owned(),
                _ => OBJECT.to_owned(),
            };
            operation["value"] = environment::to_json(&value, &root).map_err(|e| match e {
                environment::ResultError::TypeMismatch(_) => Error::Result(e.to_string()),
                environment::ResultError::NotJson(m) => Error::Result(format!(
                    "JSONPath valueExpression evaluated to a type that could not marshal to JSON: {m}"
                )),
            })?;
        }
        operations.push(operation);
    }
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(operations))
        .map_err(|e| Error::JsonPatch(e.to_string()))?;
    let mut patched = object.clone();
    match json_patch::patch(&mut patched, &patch) {
        Ok(()) => Ok(patched),
        Err(e) if matches!(e.kind, json_patch::PatchErrorKind::TestFailed) => Ok(object.clone()),
        Err(e) => Err(Error::JsonPatch(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use cel::{Context, Program};

    use super::*;
    use crate::strategic_merge::kinds;

    fn eval(source: &str) -> cel::Value {
        let program = Program::compile(source).expect("parses");
        let mut names = BTreeSet::new();
        environment::struct_names(program.expression(), &mut names);
        let env = environment::build(&names).expect("env");
        program.execute(&Context::with_env(env)).expect("evaluates")
    }

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "annotations": {"keep": "me"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}}})
    }

    #[test]
    fn apply_configurations_merge_maps_and_keyed_lists() {
        let result = eval(
            r#"Object{metadata: Object.metadata{annotations: {"mutated-by": "policy"}},
               spec: Object.spec{replicas: 1337, template: Object.spec.template{spec: Object.spec.template.spec{
                   containers: [Object.spec.template.spec.containers{name: "b", image: "b:2"}]}}}}"#,
        );
        let got = apply_configuration(&deployment(), &result, &kinds::DEPLOYMENT).expect("merges");
        assert_eq!(
            got["metadata"]["annotations"],
            json!({"keep": "me", "mutated-by": "policy"})
        );
        assert_eq!(got["spec"]["replicas"], 1337);
        assert_eq!(
            got["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}])
        );
        assert_eq!(got["kind"], "Deployment");
    }

    #[test]
    fn apply_configurations_may_not_set_atomic_lists_or_return_other_types() {
        let result = eval(
            r#"Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{
                containers: [Object.spec.template.spec.containers{name: "a", args: ["x"]}]}}}}"#,
        );
        assert_eq!(
            apply_configuration(&deployment(), &result, &kinds::DEPLOYMENT)
                .expect_err("atomic")
                .to_string(),
            "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.template.spec.containers[0].args"
        );
        let map = eval(r#"{"spec": {"replicas": 2}}"#);
        assert!(
            apply_configuration(&deployment(), &map, &kinds::DEPLOYMENT)
                .expect_err("a map is no Object")
                .to_string()
                .starts_with("unsupported return type from ApplyConfiguration expression")
        );
    }

    #[test]
    fn json_patches_apply_and_a_failed_test_applies_nothing() {
        let result = eval(
            r#"[JSONPatch{op: "add", path: "/metadata/annotations/a", value: "b"},
                JSONPatch{op: "replace", path: "/spec/replicas", value: 3}]"#,
        );
        let got = json_patch(&deployment(), &result).expect("applies");
        assert_eq!(got["metadata"]["annotations"]["a"], "b");
        assert_eq!(got["spec"]["replicas"], 3);
        let tested = eval(
            r#"[JSONPatch{op: "test", path: "/spec/replicas", value: 9},
                JSONPatch{op: "replace", path: "/spec/replicas", value: 3}]"#,
        );
        assert_eq!(
            json_patch(&deployment(), &tested).expect("unchanged"),
            deployment()
        );
        let bad = eval(r#"[JSONPatch{op: "remove", path: "/spec/nope"}]"#);
        assert!(
            json_patch(&deployment(), &bad)
                .expect_err("no such path")
                .to_string()
                .starts_with("JSON Patch: ")
        );
    }
}
