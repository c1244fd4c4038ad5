//! `x-kubernetes-validations`: CEL rules of a structural schema, compiled when the CRD is written and evaluated on every write of a custom resource (with the `cel` crate).
//!
//! As upstream: `self` is the value at the rule's level; a rule naming `oldSelf` is a
//! transition rule, evaluated on updates only, when the old object has a value there; a rule
//! that does not compile makes the CRD invalid (`compilation failed: ...`), so no rule is ever
//! silently unchecked; a rule that evaluates to `false` fails the write with its `message`
//! at its level (or `fieldPath`), and one that cannot be evaluated fails it too.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cel::{Context, Program};
use serde_json::Value;

use super::structural::Schema;
use crate::validation::FieldError;

/// Compiles a rule; the error is the parser's message.
fn compile(rule: &str) -> Result<Program, String> {
    // The parser is third-party code fed user input: a panic is a compile error, not a crash.
    match catch_unwind(|| Program::compile(rule)) {
        Ok(Ok(program)) => Ok(program),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the expression could not be parsed".to_owned()),
    }
}

/// The errors of every rule of `schema` that does not compile (path of the schema level,
/// e.g. `spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule`).
pub fn check_rules(schema: &Schema, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk(schema, path, &mut errs);
    errs
}

fn walk(schema: &Schema, path: &str, errs: &mut Vec<FieldError>) {
    for (i, rule) in schema.rules.iter().enumerate() {
        let at = format!("{path}.x-kubernetes-validations[{i}].rule");
        if rule.rule.trim().is_empty() {
            errs.push(FieldError::required(at, ""));
            continue;
        }
        if let Err(e) = compile(&rule.rule) {
            errs.push(FieldError::invalid(
                at,
                rule.rule.as_str(),
                format!("compilation failed: {e}"),
            ));
        }
    }
    for (name, sub) in &schema.properties {
        walk(sub, &format!("{path}.properties[{name}]"), errs);
    }
    if let Some(items) = &schema.items {
        walk(items, &format!("{path}.items"), errs);
    }
    if let Some(ap) = &schema.additional_properties {
        walk(ap, &format!("{path}.additionalProperties"), errs);
    }
}

/// Whether any level of `schema` has rules (evaluation is skipped entirely otherwise).
pub fn has_rules(schema: &Schema) -> bool {
    !schema.rules.is_empty()
        || schema.properties.values().any(has_rules)
        || schema.items.as_deref().is_some_and(has_rules)
        || schema
            .additional_properties
            .as_deref()
            .is_some_and(has_rules)
}

/// Evaluates every rule against `value` (at field path `path`), with `old` the same level of
/// the stored object on an update.
pub fn evaluate(
    schema: &Schema,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if value.is_null() {
        return;
    }
    for rule in &schema.rules {
        let compiled = rule
            .compiled
            .0
            .get_or_init(|| compile(&rule.rule).map(Arc::new));
        let program = match compiled {
            Ok(p) => p,
            Err(e) => {
                errs.push(FieldError::invalid(
                    path,
                    Value::Null,
                    format!("compilation failed: {e}"),
                ));
                continue;
            }
        };
        let transition = program.references().has_variable("oldSelf");
        if transition && old.is_none() {
            continue;
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let mut context = Context::default();
            context.add_variable("self", value.clone())?;
            if let Some(old) = old {
                context.add_variable("oldSelf", old.clone())?;
            }
            Ok::<_, cel::SerializationError>(program.execute(&context))
        }));
        let at = if rule.field_path.is_empty() {
            path.to_owned()
        } else {
            format!("{path}{}", rule.field_path)
        };
        // Upstream reports the schema's type as the value (`fieldErrorForReason(fldPath,
        // sts.Type, ...)`), never the object itself: a rule's failure names no data.
        let shown = Value::String(schema.ty.clone());
        match outcome {
            Ok(Ok(Ok(cel::Value::Bool(true)))) => {}
            Ok(Ok(Ok(cel::Value::Bool(false)))) => {
                errs.push(FieldError::invalid(at, shown.clone(), rule.message.clone()));
            }
            Ok(Ok(Ok(other))) => errs.push(FieldError::invalid(
                at,
                shown.clone(),
                format!("rule {:?} evaluated to {other:?}, not a bool", rule.rule),
            )),
            Ok(Ok(Err(e))) => errs.push(FieldError::invalid(
                at,
                shown.clone(),
                format!(
                    "{}: rule {:?} could not be evaluated: {}",
                    rule.message,
                    rule.rule,
                    crate::cel_error::message(&e)
                ),
            )),
            Ok(Err(e)) => errs.push(FieldError::invalid(
                at,
                shown.clone(),
                format!("rule {:?} could not be given the value: {e}", rule.rule),
            )),
            Err(_) => errs.push(FieldError::invalid(
                at,
                shown.clone(),
                format!("rule {:?} could not be evaluated", rule.rule),
            )),
        }
    }
    match value {
        Value::Object(map) => {
            for (name, v) in map {
                if let Some(sub) = schema.property(name) {
                    let old_v = old.and_then(|o| o.get(name));
                    let p = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}.{name}")
                    };
                    evaluate(sub, v, old_v, &p, errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.items.as_deref() {
                for (i, item) in items.iter().enumerate() {
                    // Upstream correlates list items with the old list only for map lists
                    // and sets; for the others, transition rules see no old value.
                    let old_item = match schema.list_type.as_str() {
                        "map" => old.and_then(Value::as_array).and_then(|olds| {
                            olds.iter().find(|o| {
                                schema.list_map_keys.iter().all(|k| o.get(k) == item.get(k))
                            })
                        }),
                        "set" => old
                            .and_then(Value::as_array)
                            .and_then(|olds| olds.iter().find(|o| *o == item)),
                        _ => None,
                    };
                    evaluate(sub, item, old_item, &format!("{path}[{i}]"), errs);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
    use serde_json::json;

    use super::*;

    fn schema(v: Value) -> Schema {
        let props: JSONSchemaProps = serde_json::from_value(v).expect("props");
        Schema::build(&props, "s").expect("structural")
    }

    fn foo() -> Schema {
        schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.minReplicas <= self.replicas", "message": "replicas must be at least minReplicas"},
                {"rule": "self.replicas >= oldSelf.replicas", "message": "replicas may not shrink"},
            ],
            "properties": {"replicas": {"type": "integer"}, "minReplicas": {"type": "integer"}}}}}),
        )
    }

    fn run(new: Value, old: Option<Value>) -> Vec<String> {
        let mut errs = Vec::new();
        evaluate(&foo(), &new, old.as_ref(), "", &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn rules_are_evaluated_with_self_and_transition_rules_only_on_update() {
        assert!(run(json!({"spec": {"replicas": 3, "minReplicas": 1}}), None).is_empty());
        let errs = run(json!({"spec": {"replicas": 1, "minReplicas": 2}}), None);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("spec: Invalid value: \"object\": "),
            "{errs:?}"
        );
        assert!(
            errs[0].ends_with("replicas must be at least minReplicas"),
            "{errs:?}"
        );
        let shrink = run(
            json!({"spec": {"replicas": 2, "minReplicas": 1}}),
            Some(json!({"spec": {"replicas": 3, "minReplicas": 1}})),
        );
        assert_eq!(shrink.len(), 1, "{shrink:?}");
        assert!(shrink[0].ends_with("replicas may not shrink"));
    }

    #[test]
    fn a_rule_that_does_not_compile_is_a_crd_error() {
        let bad =
            schema(json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.a >"}]}));
        let errs = check_rules(&bad, "s");
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0]
                .to_string()
                .starts_with("s.x-kubernetes-validations[0].rule: Invalid value: \"self.a >\": compilation failed: "),
            "{}",
            errs[0]
        );
        assert!(check_rules(&foo(), "s").is_empty());
        assert!(has_rules(&foo()));
    }
}
