//! Field validation (`fieldValidation=Ignore|Warn|Strict`): finding the fields of a request body its kind's schema does not declare.
//!
//! Upstream decodes bodies strictly into the Go types and reports each unknown field as
//! `unknown field "spec.foo"` (sigs.k8s.io/json's path syntax: `.` between fields, `[i]` for
//! list items). Here the same is found by walking the body against the component schemas
//! the OpenAPI documents are made of, which come from the same types.

use std::sync::LazyLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value};

use super::schemas::Components;

use crate::error::{ApiError, Result};

/// What the server does with fields the schema does not declare (`fieldValidation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and answer with a `Warning` header per field (upstream's default).
    #[default]
    Warn,
    /// Fail the request with 400 BadRequest.
    Strict,
}

impl FieldValidation {
    /// Parses the `fieldValidation` query parameter; absent or empty is `Warn`, anything
    /// else but the three directives is a 400, as upstream's `ValidateFieldValidation`.
    pub fn parse(value: Option<&str>) -> Result<Self> {
        match value.unwrap_or("") {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Ignore" => Ok(FieldValidation::Ignore),
            "Strict" => Ok(FieldValidation::Strict),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// The fields of `obj` the component schema `root` (and the schemas it references) does not
/// declare. Objects whose schema declares neither `properties` nor `additionalProperties`
/// (FieldsV1, RawExtension) accept anything.
pub fn unknown_fields(components: &Map<String, Value>, root: &str, obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(schema) = components.get(root) {
        walk(components, schema, obj, &mut String::new(), &mut out, 0);
    }
    out
}

/// Removes from `meta`, the `metadata` at `path` of a custom resource (or of a resource
/// embedded in one), the fields `ObjectMeta` does not declare, and returns their paths
/// (`metadata.unknownMeta`): upstream reads a custom resource's metadata into `ObjectMeta`
/// whatever the CRD's schema says (`GetObjectMetaWithOptions` and `CoerceWithOptions` with
/// `ReturnUnknownFieldPaths`), which drops them.
pub fn prune_object_meta(meta: &mut Value, path: &str) -> Vec<String> {
    static OBJECT_META: LazyLock<(String, Map<String, Value>)> = LazyLock::new(|| {
        let mut components = Components::new();
        let name = components.add::<ObjectMeta>();
        (name, components.finish())
    });
    let (name, components) = &*OBJECT_META;
    let mut out = Vec::new();
    if let Some(schema) = components.get(name) {
        strip(components, schema, meta, &mut path.to_owned(), &mut out, 0);
    }
    out
}

/// Deeper than any Kubernetes type nests; stops a malicious body from recursing forever.
const MAX_DEPTH: usize = 64;

/// Follows `$ref` and single-element `allOf` to the schema that describes the value.
fn resolve<'a>(components: &'a Map<String, Value>, mut schema: &'a Value) -> &'a Value {
    for _ in 0..MAX_DEPTH {
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            match r
                .strip_prefix(super::schemas::REF_PREFIX)
                .and_then(|name| components.get(name))
            {
                Some(target) => schema = target,
                None => return schema,
            }
        } else if schema.get("properties").is_none()
            && let Some([only]) = schema
                .get("allOf")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
        {
            schema = only;
        } else {
            return schema;
        }
    }
    schema
}

fn walk(
    components: &Map<String, Value>,
    schema: &Value,
    value: &Value,
    path: &mut String,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let schema = resolve(components, schema);
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            if properties.is_none() && additional.is_none() {
                return;
            }
            for (key, child) in map {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                match properties.and_then(|p| p.get(key)).or(additional) {
                    Some(sub) => walk(components, sub, child, path, out, depth + 1),
                    None => out.push(path.clone()),
                }
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    walk(components, item_schema, item, path, out, depth + 1);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// [`walk`] that also removes the unknown fields it finds.
fn strip(
    components: &Map<String, Value>,
    schema: &Value,
    value: &mut Value,
    path: &mut String,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let schema = resolve(components, schema);
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            if properties.is_none() && additional.is_none() {
                return;
            }
            map.retain(|key, child| {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                let known = match properties.and_then(|p| p.get(key)).or(additional) {
                    Some(sub) => {
                        strip(components, sub, child, path, out, depth + 1);
                        true
                    }
                    None => {
                        out.push(path.clone());
                        false
                    }
                };
                path.truncate(len);
                known
            });
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    strip(components, item_schema, item, path, out, depth + 1);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::openapi::schemas::TypedKind;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::core::v1::ConfigMap;

    fn components() -> Map<String, Value> {
        let mut c = Components::new();
        c.add_kind(&TypedKind::of::<Deployment>());
        c.add_kind(&TypedKind::of::<ReplicaSet>());
        c.add_kind(&TypedKind::of::<ConfigMap>());
        c.finish()
    }

    #[test]
    fn unknown_fields_are_reported_with_upstream_paths() {
        let defs = components();
        struct Case {
            name: &'static str,
            root: &'static str,
            obj: Value,
            want: Vec<&'static str>,
        }
        let cases = [
            Case {
                name: "clean deployment",
                root: "io.k8s.api.apps.v1.Deployment",
                obj: json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "a", "labels": {"x": "y"}, "managedFields": [{"fieldsV1": {"f:spec": {}}}]},
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                        "template": {"metadata": {"labels": {"a": "b"}},
                            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                                "resources": {"limits": {"cpu": "1"}}}]}}}}),
                want: vec![],
            },
            Case {
                name: "unknown spec field",
                root: "io.k8s.api.apps.v1.Deployment",
                obj: json!({"spec": {"replicas": 1, "foo": 2}}),
                want: vec!["spec.foo"],
            },
            Case {
                name: "unknown field in a list item and in metadata",
                root: "io.k8s.api.apps.v1.Deployment",
                obj: json!({"metadata": {"nam": "x"}, "spec": {"template": {"spec": {"containers": [
                    {"name": "a"}, {"name": "b", "imagee": "x"}]}}}}),
                want: vec!["metadata.nam", "spec.template.spec.containers[1].imagee"],
            },
            Case {
                name: "top-level unknown field",
                root: "io.k8s.api.core.v1.ConfigMap",
                obj: json!({"data": {"k": "v"}, "bogus": true}),
                want: vec!["bogus"],
            },
        ];
        for case in cases {
            let got = unknown_fields(&defs, case.root, &case.obj);
            assert_eq!(got, case.want, "case {}", case.name);
        }
    }

    #[test]
    fn directives() {
        assert_eq!(
            FieldValidation::parse(None).ok(),
            Some(FieldValidation::Warn)
        );
        assert_eq!(
            FieldValidation::parse(Some("Strict")).ok(),
            Some(FieldValidation::Strict)
        );
        assert_eq!(
            FieldValidation::parse(Some("Ignore")).ok(),
            Some(FieldValidation::Ignore)
        );
        assert_eq!(
            FieldValidation::parse(Some("strict"))
                .map_err(|e| e.code)
                .err(),
            Some(400)
        );
    }
}
