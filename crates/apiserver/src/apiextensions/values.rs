//! Custom resource values against their structural schema: validation (upstream's kube-openapi validator as apiextensions reports it), pruning of unknown fields and defaulting.
//!
//! The order is upstream's: a request body is pruned (what is dropped is reported for
//! `fieldValidation`), then defaulted (also on every read from storage), then validated by the
//! strategy. Paths are field paths (`spec.replicas`, `spec.ports[0].name`); messages read as
//! kube-openapi's (`spec.replicas in body should be less than or equal to 10`).

use serde_json::{Map, Value};

use super::structural::Schema;
use crate::openapi::field_validation;
use crate::validation::FieldError;

/// Fields every object (and every embedded resource) keeps whatever its schema says.
const ALWAYS_KEPT: [&str; 3] = ["apiVersion", "kind", "metadata"];

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// What [`prune`] removed, in the order upstream reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// The fields `ObjectMeta` does not declare in the object's own `metadata`, then the
    /// fields the schema does not declare (upstream's `GetObjectMetaWithOptions`, then its
    /// pruning).
    pub fields: Vec<String>,
    /// The fields `ObjectMeta` does not declare in the `metadata` of embedded resources
    /// (upstream's `CoerceWithOptions`, after the pruning).
    pub embedded_meta: Vec<String>,
}

impl Pruned {
    /// Every removed field's path, in upstream's order.
    pub fn into_paths(self) -> Vec<String> {
        let mut out = self.fields;
        out.extend(self.embedded_meta);
        out
    }
}

/// Removes the fields `schema` does not declare from `value` (at `path`; `root` for the whole
/// object), and records their paths in `pruned`, as upstream's
/// `structuralpruning.PruneWithOptions` with `ReturnPruned`. The `apiVersion` and `kind` of
/// the object and of every embedded resource stay whatever the schema says, and their
/// `metadata` keeps what `ObjectMeta` declares.
pub fn prune(schema: &Schema, value: &mut Value, path: &str, root: bool, pruned: &mut Pruned) {
    match value {
        Value::Object(map) => {
            let keeps_meta = root || schema.embedded;
            if keeps_meta && let Some(meta) = map.get_mut("metadata") {
                let unknown = field_validation::prune_object_meta(meta, &child(path, "metadata"));
                if root {
                    pruned.fields.extend(unknown);
                } else {
                    pruned.embedded_meta.extend(unknown);
                }
            }
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if keeps_meta && ALWAYS_KEPT.contains(&key.as_str()) {
                    continue;
                }
                let p = child(path, &key);
                match schema.property(&key) {
                    Some(sub) => {
                        if let Some(v) = map.get_mut(&key) {
                            prune(sub, v, &p, false, pruned);
                        }
                    }
                    None if schema.keeps_unknown() => {}
                    None => {
                        map.remove(&key);
                        pruned.fields.push(p);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(sub, item, &format!("{path}[{i}]"), false, pruned);
                }
            }
        }
        _ => {}
    }
}

/// Applies the schema's `default`s to missing fields (and to `null`s of fields that are not
/// `nullable`, whose other `null`s are dropped), as upstream's `structuraldefaulting.Default`
/// with `PruneNonNullableNullsWithoutDefaults`.
pub fn apply_defaults(schema: &Schema, value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (name, sub) in &schema.properties {
                match map.get_mut(name) {
                    None => {
                        if let Some(d) = &sub.default {
                            map.insert(name.clone(), d.clone());
                        }
                    }
                    Some(Value::Null) if !sub.nullable => match &sub.default {
                        Some(d) => {
                            map.insert(name.clone(), d.clone());
                        }
                        None => {
                            map.remove(name);
                        }
                    },
                    Some(_) => {}
                }
                if let Some(v) = map.get_mut(name) {
                    apply_defaults(sub, v);
                }
            }
            if let Some(sub) = schema.additional_properties.as_deref() {
                for v in map.values_mut() {
                    apply_defaults(sub, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.items.as_deref() {
                for item in items.iter_mut() {
                    if item.is_null()
                        && !sub.nullable
                        && let Some(d) = &sub.default
                    {
                        *item = d.clone();
                    }
                    apply_defaults(sub, item);
                }
            }
        }
        _ => {}
    }
}

/// Validates `value` (at field path `path`) against `schema`, appending upstream's field
/// errors. `root` skips `apiVersion`, `kind` and `metadata`, which the object-meta
/// validation covers.
pub fn validate(
    schema: &Schema,
    value: &Value,
    path: &str,
    root: bool,
    errs: &mut Vec<FieldError>,
) {
    let shown = if path.is_empty() { "body" } else { path };
    let invalid = |errs: &mut Vec<FieldError>, v: Value, detail: String| {
        errs.push(FieldError::invalid(
            path,
            v,
            format!("{shown} in body {detail}"),
        ));
    };
    if value.is_null() {
        if !schema.nullable && !schema.ty.is_empty() {
            invalid(
                errs,
                Value::from("null"),
                format!("must be of type {}: \"null\"", schema.ty),
            );
        }
        return;
    }
    if schema.int_or_string {
        if !matches!(type_name(value), "integer" | "string") {
            invalid(
                errs,
                Value::from(type_name(value)),
                format!("must be of type integer,string: {:?}", type_name(value)),
            );
            return;
        }
    } else if !schema.ty.is_empty() {
        let actual = type_name(value);
        let fits = actual == schema.ty || (schema.ty == "number" && actual == "integer");
        if !fits {
            invalid(
                errs,
                Value::from(actual),
                format!("must be of type {}: {actual:?}", schema.ty),
            );
            return;
        }
    }
    if let Some(values) = &schema.enum_values
        && !values.contains(value)
    {
        let supported: Vec<String> = values
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let refs: Vec<&str> = supported.iter().map(String::as_str).collect();
        errs.push(FieldError::not_supported(path, value.clone(), &refs));
    }
    match value {
        Value::String(s) => validate_string(schema, s, path, shown, errs),
        Value::Number(n) => validate_number(schema, n, path, shown, errs),
        Value::Array(items) => validate_array(schema, items, path, shown, errs),
        Value::Object(map) => validate_object(schema, map, path, shown, root, errs),
        _ => {}
    }
    for (i, sub) in schema.all_of.iter().enumerate() {
        let _ = i;
        validate(sub, value, path, root, errs);
    }
    if !schema.any_of.is_empty() {
        let any = schema.any_of.iter().any(|sub| {
            let mut e = Vec::new();
            validate(sub, value, path, root, &mut e);
            e.is_empty()
        });
        if !any {
            invalid(
                errs,
                value.clone(),
                "must validate at least one schema (anyOf)".to_owned(),
            );
        }
    }
    if !schema.one_of.is_empty() {
        let passing = schema
            .one_of
            .iter()
            .filter(|sub| {
                let mut e = Vec::new();
                validate(sub, value, path, root, &mut e);
                e.is_empty()
            })
            .count();
        if passing != 1 {
            invalid(
                errs,
                value.clone(),
                "must validate one and only one schema (oneOf)".to_owned(),
            );
        }
    }
    if let Some(not) = &schema.not {
        let mut e = Vec::new();
        validate(not, value, path, root, &mut e);
        if e.is_empty() {
            invalid(
                errs,
                value.clone(),
                "must not validate the schema (not)".to_owned(),
            );
        }
    }
}

fn validate_string(schema: &Schema, s: &str, path: &str, shown: &str, errs: &mut Vec<FieldError>) {
    let len = s.chars().count() as i64;
    if let Some(max) = schema.max_length
        && len > max
    {
        errs.push(FieldError::too_long(
            path,
            usize::try_from(max).unwrap_or(0),
        ));
    }
    if let Some(min) = schema.min_length
        && len < min
    {
        errs.push(FieldError::invalid(
            path,
            s,
            format!("{shown} in body should be at least {min} chars long"),
        ));
    }
    if let Some((source, re)) = &schema.pattern
        && !re.is_match(s)
    {
        errs.push(FieldError::invalid(
            path,
            s,
            format!("{shown} in body should match '{source}'"),
        ));
    }
    let format_ok = match schema.format.as_str() {
        "date-time" => s.parse::<jiff::Timestamp>().is_ok(),
        "date" => s.parse::<jiff::civil::Date>().is_ok(),
        "uuid" => uuid::Uuid::parse_str(s).is_ok(),
        "byte" => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(s).is_ok()
        }
        "int32" | "int64" if schema.int_or_string => true,
        _ => true,
    };
    if !format_ok {
        errs.push(FieldError::invalid(
            path,
            s,
            format!("{shown} in body must be of type {}: {s:?}", schema.format),
        ));
    }
}

fn validate_number(
    schema: &Schema,
    n: &serde_json::Number,
    path: &str,
    shown: &str,
    errs: &mut Vec<FieldError>,
) {
    let v = n.as_f64().unwrap_or(0.0);
    let value = Value::Number(n.clone());
    let fits_format = match schema.format.as_str() {
        "int32" => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
        "int64" => n.as_i64().is_some(),
        _ => true,
    };
    if !fits_format {
        errs.push(FieldError::invalid(
            path,
            value.clone(),
            format!("{shown} in body must be of type {}: \"{n}\"", schema.format),
        ));
    }
    if let Some((max, exclusive)) = schema.maximum
        && (v > max || (exclusive && v == max))
    {
        let how = if exclusive {
            "less than"
        } else {
            "less than or equal to"
        };
        errs.push(FieldError::invalid(
            path,
            value.clone(),
            format!("{shown} in body should be {how} {}", render_bound(max)),
        ));
    }
    if let Some((min, exclusive)) = schema.minimum
        && (v < min || (exclusive && v == min))
    {
        let how = if exclusive {
            "greater than"
        } else {
            "greater than or equal to"
        };
        errs.push(FieldError::invalid(
            path,
            value.clone(),
            format!("{shown} in body should be {how} {}", render_bound(min)),
        ));
    }
    if let Some(m) = schema.multiple_of
        && m != 0.0
        && (v / m).fract() != 0.0
    {
        errs.push(FieldError::invalid(
            path,
            value,
            format!(
                "{shown} in body should be a multiple of {}",
                render_bound(m)
            ),
        ));
    }
}

/// A bound as Go's `%v` prints a float64 (no trailing `.0` for integral values).
fn render_bound(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        v.to_string()
    }
}

fn validate_array(
    schema: &Schema,
    items: &[Value],
    path: &str,
    shown: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(max) = schema.max_items
        && items.len() as i64 > max
    {
        errs.push(FieldError::too_many(
            path,
            items.len(),
            usize::try_from(max).unwrap_or(0),
        ));
    }
    if let Some(min) = schema.min_items
        && (items.len() as i64) < min
    {
        errs.push(FieldError::invalid(
            path,
            items.len(),
            format!("{shown} in body should have at least {min} items"),
        ));
    }
    match schema.list_type.as_str() {
        "set" => {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    errs.push(FieldError::duplicate(format!("{path}[{i}]"), item.clone()));
                }
            }
        }
        "map" => {
            let key_of = |item: &Value| -> Vec<Value> {
                schema
                    .list_map_keys
                    .iter()
                    .map(|k| item.get(k).cloned().unwrap_or(Value::Null))
                    .collect()
            };
            for (i, item) in items.iter().enumerate() {
                let key = key_of(item);
                if items[..i].iter().any(|other| key_of(other) == key) {
                    let shown_key: Map<String, Value> = schema
                        .list_map_keys
                        .iter()
                        .cloned()
                        .zip(key.iter().cloned())
                        .collect();
                    errs.push(FieldError::duplicate(
                        format!("{path}[{i}]"),
                        Value::Object(shown_key),
                    ));
                }
            }
        }
        _ => {}
    }
    if let Some(sub) = schema.items.as_deref() {
        for (i, item) in items.iter().enumerate() {
            validate(sub, item, &format!("{path}[{i}]"), false, errs);
        }
    }
}

fn validate_object(
    schema: &Schema,
    map: &Map<String, Value>,
    path: &str,
    shown: &str,
    root: bool,
    errs: &mut Vec<FieldError>,
) {
    for name in &schema.required {
        if root && ALWAYS_KEPT.contains(&name.as_str()) {
            continue;
        }
        if !map.contains_key(name) {
            errs.push(FieldError::required(child(path, name), ""));
        }
    }
    let props = map.len() as i64;
    if let Some(max) = schema.max_properties
        && props > max
    {
        errs.push(FieldError::too_many(
            path,
            map.len(),
            usize::try_from(max).unwrap_or(0),
        ));
    }
    if let Some(min) = schema.min_properties
        && props < min
    {
        errs.push(FieldError::invalid(
            path,
            props,
            format!("{shown} in body should have at least {min} properties"),
        ));
    }
    if schema.embedded {
        for field in ["apiVersion", "kind"] {
            if map
                .get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                errs.push(FieldError::required(
                    child(path, field),
                    "must not be empty",
                ));
            }
        }
    }
    for (name, v) in map {
        if (root || schema.embedded) && ALWAYS_KEPT.contains(&name.as_str()) {
            continue;
        }
        if let Some(sub) = schema.property(name) {
            validate(sub, v, &child(path, name), false, errs);
        }
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

    fn foo_schema() -> Schema {
        schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["deploymentName"], "properties": {
                "deploymentName": {"type": "string", "pattern": "^[a-z0-9-]+$", "maxLength": 20},
                "replicas": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 10, "default": 1},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "port": {"x-kubernetes-int-or-string": true},
                "when": {"type": "string", "format": "date-time", "nullable": true},
                "tags": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-preserve-unknown-fields": true},
            }},
            "status": {"type": "object", "properties": {"availableReplicas": {"type": "integer"}}},
        }}))
    }

    fn errors(obj: Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate(&foo_schema(), &obj, "", true, &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn validation_messages_read_as_upstreams() {
        struct Case {
            name: &'static str,
            spec: Value,
            want: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "valid",
                spec: json!({"deploymentName": "web", "replicas": 3, "port": "http",
                    "when": "2024-05-01T10:00:00Z", "tags": ["a"], "labels": {"a": "b"},
                    "template": {"apiVersion": "v1", "kind": "Pod"}}),
                want: &[],
            },
            Case {
                name: "required",
                spec: json!({}),
                want: &["spec.deploymentName: Required value"],
            },
            Case {
                name: "type",
                spec: json!({"deploymentName": "web", "replicas": "three"}),
                want: &[
                    "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
                ],
            },
            Case {
                name: "maximum and minimum",
                spec: json!({"deploymentName": "web", "replicas": 11}),
                want: &[
                    "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
                ],
            },
            Case {
                name: "minimum",
                spec: json!({"deploymentName": "web", "replicas": 0}),
                want: &[
                    "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
                ],
            },
            Case {
                name: "int32 format",
                spec: json!({"deploymentName": "web", "replicas": 5_000_000_000i64}),
                want: &[
                    "spec.replicas: Invalid value: 5000000000: spec.replicas in body must be of type int32: \"5000000000\"",
                    "spec.replicas: Invalid value: 5000000000: spec.replicas in body should be less than or equal to 10",
                ],
            },
            Case {
                name: "pattern and length",
                spec: json!({"deploymentName": "Web_Server_With_A_Long_Name"}),
                want: &[
                    "spec.deploymentName: Too long: must have at most 20 bytes",
                    "spec.deploymentName: Invalid value: \"Web_Server_With_A_Long_Name\": spec.deploymentName in body should match '^[a-z0-9-]+$'",
                ],
            },
            Case {
                name: "enum",
                spec: json!({"deploymentName": "web", "mode": "c"}),
                want: &["spec.mode: Unsupported value: \"c\": supported values: \"a\", \"b\""],
            },
            Case {
                name: "int or string",
                spec: json!({"deploymentName": "web", "port": true}),
                want: &[
                    "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                ],
            },
            Case {
                name: "date-time and nullable",
                spec: json!({"deploymentName": "web", "when": "yesterday"}),
                want: &[
                    "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
                ],
            },
            Case {
                name: "a null where nullable",
                spec: json!({"deploymentName": "web", "when": null}),
                want: &[],
            },
            Case {
                name: "max items and set",
                spec: json!({"deploymentName": "web", "tags": ["a", "a", "b"]}),
                want: &[
                    "spec.tags: Too many: 3: must have at most 2 items",
                    "spec.tags[1]: Duplicate value: \"a\"",
                ],
            },
            Case {
                name: "map list keys",
                spec: json!({"deploymentName": "web", "ports": [{"name": "a"}, {"name": "a", "port": 1}]}),
                want: &["spec.ports[1]: Duplicate value: {\"name\":\"a\"}"],
            },
            Case {
                name: "map values",
                spec: json!({"deploymentName": "web", "labels": {"a": 1}}),
                want: &[
                    "spec.labels.a: Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\"",
                ],
            },
            Case {
                name: "embedded resource",
                spec: json!({"deploymentName": "web", "template": {"kind": "Pod"}}),
                want: &["spec.template.apiVersion: Required value: must not be empty"],
            },
        ];
        for case in cases {
            let got = errors(
                json!({"apiVersion": "x/v1", "kind": "Foo", "metadata": {"name": "a"}, "spec": case.spec}),
            );
            assert_eq!(got, case.want, "{}", case.name);
        }
    }

    #[test]
    fn pruning_drops_and_reports_undeclared_fields_only() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "Foo", "metadata": {"name": "a"},
            "bogus": 1,
            "spec": {"deploymentName": "web", "typo": 2, "extra": {"anything": {"goes": 1}},
                "labels": {"free": "form"}, "ports": [{"name": "a", "protocol": "TCP"}],
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}});
        let mut pruned = Pruned::default();
        prune(&foo_schema(), &mut obj, "", true, &mut pruned);
        assert_eq!(
            pruned.fields,
            ["bogus", "spec.ports[0].protocol", "spec.typo"]
        );
        assert!(pruned.embedded_meta.is_empty());
        assert_eq!(obj["spec"]["extra"]["anything"]["goes"], 1);
        assert_eq!(obj["spec"]["labels"]["free"], "form");
        assert_eq!(obj["spec"]["template"]["metadata"]["name"], "p");
        assert_eq!(obj["metadata"]["name"], "a");
    }

    #[test]
    fn pruning_drops_metadata_fields_object_meta_does_not_declare() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "Foo",
            "metadata": {"name": "a", "labels": {"k": "v"}, "unknownMeta": 1,
                "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "o", "uid": "u", "bad": 1}]},
            "data": 1,
            "spec": {"deploymentName": "web",
                "template": {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "n", "unknownSubMeta": 1}, "spec": {}}}});
        let mut pruned = Pruned::default();
        prune(&foo_schema(), &mut obj, "", true, &mut pruned);
        assert_eq!(
            pruned.clone().into_paths(),
            [
                "metadata.ownerReferences[0].bad",
                "metadata.unknownMeta",
                "data",
                "spec.template.metadata.unknownSubMeta"
            ]
        );
        assert_eq!(
            obj["metadata"],
            json!({"name": "a", "labels": {"k": "v"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "o", "uid": "u"}]})
        );
        assert_eq!(
            obj["spec"]["template"]["metadata"],
            json!({"name": "p", "namespace": "n"})
        );
    }

    #[test]
    fn defaults_fill_missing_fields_and_non_nullable_nulls() {
        let mut obj = json!({"spec": {"deploymentName": "web"}});
        apply_defaults(&foo_schema(), &mut obj);
        assert_eq!(obj["spec"]["replicas"], 1);
        let mut obj = json!({"spec": {"deploymentName": "web", "replicas": null, "mode": null, "when": null}});
        apply_defaults(&foo_schema(), &mut obj);
        assert_eq!(obj["spec"]["replicas"], 1);
        assert!(
            obj["spec"].get("mode").is_none(),
            "a null without default is dropped"
        );
        assert_eq!(obj["spec"]["when"], Value::Null, "a nullable null stays");
        let mut kept = json!({"spec": {"deploymentName": "web", "replicas": 4}});
        apply_defaults(&foo_schema(), &mut kept);
        assert_eq!(kept["spec"]["replicas"], 4);
    }
}
