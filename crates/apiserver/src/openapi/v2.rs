//! OpenAPI v2 (`/openapi/v2`): one Swagger 2.0 document of every served kind, converted from the v3 documents, custom resources' schemas filtered as upstream's CRD builder filters them for v2.
//!
//! Upstream serves both versions from the same definitions; kcm builds v3 and derives v2
//! from it: `components.schemas` become `definitions` (a `$ref` beside a field's own
//! description instead of v3's one-element `allOf`), request bodies become `body`
//! parameters, and media types move to `consumes`/`produces`. Clients that still read v2
//! (upstream's e2e waits for a CRD's definition there, `kubectl explain --output
//! plaintext-openapiv2`) see what kube-apiserver would show them.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// Where v3 documents keep their schemas, and where v2 keeps them.
const V3_REFS: &str = "#/components/schemas/";
const V2_REFS: &str = "#/definitions/";

/// The operations of a path item.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The properties upstream's builder adds to every custom kind (and to embedded
/// resources); never filtered as the CRD's own schema is.
const TYPE_META: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// The Swagger 2.0 document of `documents` (v3 documents, one per group version). A
/// definition reached from several documents is taken from the first; `custom_kinds` names
/// the definitions that are custom resources' kinds.
pub fn document<'a>(
    documents: impl IntoIterator<Item = &'a Value>,
    custom_kinds: &BTreeSet<String>,
) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for doc in documents {
        if let Some(Value::Object(items)) = doc.get("paths") {
            for (path, item) in items {
                if let Value::Object(item) = item {
                    paths.insert(path.clone(), Value::Object(path_item(item)));
                }
            }
        }
        if let Some(Value::Object(schemas)) = doc.pointer("/components/schemas") {
            for (name, s) in schemas {
                if definitions.contains_key(name) {
                    continue;
                }
                let s = if custom_kinds.contains(name) {
                    custom_kind(s.clone())
                } else {
                    s.clone()
                };
                definitions.insert(name.clone(), schema(&s));
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": crate::version::GIT_VERSION},
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": {
            "description": "Bearer Token authentication",
            "type": "apiKey",
            "name": "authorization",
            "in": "header",
        }},
        "security": [{"BearerToken": []}],
    })
}

/// A v3 path item as v2 writes it: its parameters and each operation converted.
fn path_item(item: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in item {
        match (key.as_str(), value) {
            ("parameters", Value::Array(params)) => {
                out.insert(key.clone(), params.iter().map(parameter).collect());
            }
            (method, Value::Object(op)) if METHODS.contains(&method) => {
                out.insert(key.clone(), Value::Object(operation(op)));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

/// A v3 operation as v2 writes it: the request body a `body` parameter, media types in
/// `consumes` and `produces`, one schema per response.
fn operation(op: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    let mut params: Vec<Value> = match op.get("parameters") {
        Some(Value::Array(params)) => params.iter().map(parameter).collect(),
        _ => Vec::new(),
    };
    if let Some(Value::Object(body)) = op.get("requestBody") {
        let (types, body_schema) = media(body.get("content"));
        out.insert("consumes".to_owned(), json!(types));
        let mut param = json!({"name": "body", "in": "body"});
        if let Some(required) = body.get("required") {
            param["required"] = required.clone();
        }
        if let Some(s) = body_schema {
            param["schema"] = schema(&s);
        }
        params.insert(0, param);
    }
    let mut produces: Vec<String> = Vec::new();
    let mut responses = Map::new();
    if let Some(Value::Object(codes)) = op.get("responses") {
        for (code, response) in codes {
            let mut converted = Map::new();
            if let Some(d) = response.get("description") {
                converted.insert("description".to_owned(), d.clone());
            }
            let (types, response_schema) = media(response.get("content"));
            for t in types {
                if !produces.contains(&t) {
                    produces.push(t);
                }
            }
            if let Some(s) = response_schema {
                converted.insert("schema".to_owned(), schema(&s));
            }
            responses.insert(code.clone(), Value::Object(converted));
        }
    }
    for (key, value) in op {
        if !matches!(key.as_str(), "parameters" | "requestBody" | "responses") {
            out.insert(key.clone(), value.clone());
        }
    }
    if !params.is_empty() {
        out.insert("parameters".to_owned(), Value::Array(params));
    }
    if !produces.is_empty() {
        out.insert("produces".to_owned(), json!(produces));
    }
    out.insert("responses".to_owned(), Value::Object(responses));
    out.insert("schemes".to_owned(), json!(["https"]));
    out
}

/// The media types of a v3 `content` map, and the first one's schema (v2 has one schema
/// for all of them).
fn media(content: Option<&Value>) -> (Vec<String>, Option<Value>) {
    let Some(Value::Object(content)) = content else {
        return (Vec::new(), None);
    };
    let types = content.keys().cloned().collect();
    let first = content.values().find_map(|m| m.get("schema").cloned());
    (types, first)
}

/// A v3 parameter as v2 writes it: the schema's type (and format, uniqueItems, ...)
/// beside the name instead of under `schema`.
fn parameter(p: &Value) -> Value {
    let Value::Object(p) = p else {
        return p.clone();
    };
    let mut out = Map::new();
    for (key, value) in p {
        match (key.as_str(), value) {
            ("schema", Value::Object(s)) => {
                for (k, v) in s {
                    out.insert(k.clone(), v.clone());
                }
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// A v3 schema as v2 writes it: references into `definitions`, a field that refers to a
/// type as a `$ref` beside its own description, no defaults (upstream prunes them from
/// every v2 definition).
fn schema(s: &Value) -> Value {
    let Value::Object(s) = s else {
        return s.clone();
    };
    let mut out = Map::new();
    for (key, value) in s {
        match (key.as_str(), value) {
            ("$ref", Value::String(r)) => {
                let r = r
                    .strip_prefix(V3_REFS)
                    .map_or_else(|| r.clone(), |n| format!("{V2_REFS}{n}"));
                out.insert(key.clone(), Value::String(r));
            }
            ("allOf", Value::Array(all)) if all.len() == 1 && is_bare_ref(&all[0]) => {
                if let Value::Object(inner) = schema(&all[0]) {
                    out.extend(inner);
                }
            }
            ("properties" | "patternProperties" | "definitions", Value::Object(props)) => {
                let props = props.iter().map(|(k, v)| (k.clone(), schema(v))).collect();
                out.insert(key.clone(), Value::Object(props));
            }
            ("items" | "additionalProperties" | "not", Value::Object(_)) => {
                out.insert(key.clone(), schema(value));
            }
            ("items" | "allOf" | "anyOf" | "oneOf", Value::Array(list)) => {
                out.insert(key.clone(), list.iter().map(schema).collect());
            }
            ("default", _) => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// Whether `v` is `{"$ref": ...}` and nothing else.
fn is_bare_ref(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.len() == 1 && m.get("$ref").is_some_and(Value::is_string))
}

/// A custom resource kind's published schema as upstream's builder publishes it for v2
/// (`buildKubeNative` with `V2`): a kind that preserves unknown fields at its root is just
/// `{type: object}` (kubectl would otherwise reject every field it does not know);
/// otherwise the schema filtered as `ToStructuralOpenAPIV2` filters it.
fn custom_kind(s: Value) -> Value {
    let Value::Object(mut s) = s else {
        return s;
    };
    if preserves_unknown(&s) {
        let mut out = Map::new();
        out.insert("type".to_owned(), json!("object"));
        if let Some(gvk) = s.remove("x-kubernetes-group-version-kind") {
            out.insert("x-kubernetes-group-version-kind".to_owned(), gvk);
        }
        return Value::Object(out);
    }
    structural_v2(&mut s, true);
    Value::Object(s)
}

fn preserves_unknown(s: &Map<String, Value>) -> bool {
    s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

fn is_nullable(s: &Value) -> bool {
    s.get("nullable") == Some(&Value::Bool(true))
}

/// What OpenAPI v2 (and kubectl reading it) cannot express, removed as upstream's
/// `ToStructuralOpenAPIV2` removes it: junctors (`allOf`, `anyOf`, `oneOf`, `not`),
/// nullable values' types and members, members of values that preserve unknown fields, and
/// types that no longer fit; then embedded resources get `apiVersion`, `kind` and `metadata`
/// (`addEmbeddedProperties`). `root` skips the type meta the kind's schema carries.
fn structural_v2(s: &mut Map<String, Value>, root: bool) {
    for junctor in ["allOf", "anyOf", "oneOf", "not"] {
        s.remove(junctor);
    }
    if s.remove("nullable") == Some(Value::Bool(true)) {
        s.remove("type");
        s.remove("items");
        s.remove("properties");
    }
    let preserve = preserves_unknown(s);
    if preserve {
        s.remove("items");
        s.remove("properties");
    }
    if !s.contains_key("items") && s.get("type") == Some(&json!("array")) {
        s.remove("type");
    }
    if preserve && s.get("type") == Some(&json!("object")) {
        s.remove("type");
    }
    // Nullable members are optional to v2 readers: their values may be null.
    let nullable: Vec<String> = match s.get("properties") {
        Some(Value::Object(props)) => props
            .iter()
            .filter(|(_, p)| is_nullable(p))
            .map(|(name, _)| name.clone())
            .collect(),
        _ => Vec::new(),
    };
    if let Some(Value::Array(required)) = s.get_mut("required") {
        required.retain(|r| r.as_str().is_none_or(|r| !nullable.iter().any(|n| n == r)));
        if required.is_empty() {
            s.remove("required");
        }
    }
    if s.get("additionalProperties").is_some_and(is_nullable) {
        s.remove("required");
    }
    if let Some(Value::Object(props)) = s.get_mut("properties") {
        for (name, prop) in props.iter_mut() {
            if root && TYPE_META.contains(&name.as_str()) {
                continue;
            }
            if let Value::Object(prop) = prop {
                structural_v2(prop, false);
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(Value::Object(child)) = s.get_mut(key) {
            structural_v2(child, false);
        }
    }
    if !root && !preserve && s.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)) {
        add_type_meta(s);
    }
}

/// `apiVersion`, `kind` and `metadata` of an embedded resource, both required, as upstream's
/// `addEmbeddedProperties` adds them.
fn add_type_meta(s: &mut Map<String, Value>) {
    let props = s
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(props) = props {
        props.insert(
            "apiVersion".to_owned(),
            json!({"type": "string", "description": "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}),
        );
        props.insert(
            "kind".to_owned(),
            json!({"type": "string", "description": "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}),
        );
        props.insert(
            "metadata".to_owned(),
            json!({"$ref": format!("{V3_REFS}io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
                   "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}),
        );
    }
    let required = s
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(required) = required {
        for name in ["kind", "apiVersion"] {
            if !required.iter().any(|r| r == name) {
                required.push(json!(name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_take_v2_shape() {
        let v3 = json!({
            "paths": {"/apis/g/v1/widgets": {
                "parameters": [{"name": "pretty", "in": "query", "description": "p",
                                "schema": {"type": "string", "uniqueItems": true}}],
                "post": {
                    "operationId": "createWidget",
                    "requestBody": {"required": true, "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/g.v1.W"}},
                        "application/yaml": {"schema": {"$ref": "#/components/schemas/g.v1.W"}}}},
                    "responses": {
                        "200": {"description": "OK", "content": {"application/json":
                            {"schema": {"$ref": "#/components/schemas/g.v1.W"}}}},
                        "401": {"description": "Unauthorized"}},
                    "x-kubernetes-action": "post",
                },
            }},
            "components": {"schemas": {"g.v1.W": {"type": "object", "properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/Meta"}],
                             "description": "m", "default": {}},
                "spec": {"type": "object", "default": {"a": 1}}}}}},
        });
        let doc = document([&v3], &BTreeSet::new());
        assert_eq!(doc["swagger"], "2.0");
        let item = &doc["paths"]["/apis/g/v1/widgets"];
        assert_eq!(
            item["parameters"],
            json!([{"name": "pretty", "in": "query", "description": "p", "type": "string",
                    "uniqueItems": true}])
        );
        assert_eq!(
            item["post"],
            json!({
                "operationId": "createWidget",
                "consumes": ["application/json", "application/yaml"],
                "produces": ["application/json"],
                "parameters": [{"name": "body", "in": "body", "required": true,
                                "schema": {"$ref": "#/definitions/g.v1.W"}}],
                "responses": {
                    "200": {"description": "OK", "schema": {"$ref": "#/definitions/g.v1.W"}},
                    "401": {"description": "Unauthorized"}},
                "schemes": ["https"],
                "x-kubernetes-action": "post",
            })
        );
        assert_eq!(
            doc["definitions"]["g.v1.W"],
            json!({"type": "object", "properties": {
                "metadata": {"$ref": "#/definitions/Meta", "description": "m"},
                "spec": {"type": "object"}}})
        );
    }

    fn kind_doc(schema: Value) -> Value {
        json!({"components": {"schemas": {"com.example.v1.Foo": schema}}})
    }

    fn published(schema: Value) -> Value {
        let kinds = BTreeSet::from(["com.example.v1.Foo".to_owned()]);
        document([&kind_doc(schema)], &kinds)["definitions"]["com.example.v1.Foo"].clone()
    }

    #[test]
    fn a_custom_kind_preserving_unknown_fields_at_its_root_is_just_an_object() {
        let gvk = json!([{"group": "example.com", "version": "v1", "kind": "Foo"}]);
        let got = published(json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"spec": {"type": "object"},
                           "metadata": {"allOf": [{"$ref": "#/components/schemas/Meta"}]}},
            "x-kubernetes-group-version-kind": gvk,
        }));
        assert_eq!(
            got,
            json!({"type": "object", "x-kubernetes-group-version-kind": gvk})
        );
    }

    #[test]
    fn custom_kinds_lose_what_v2_cannot_say() {
        let got = published(json!({
            "type": "object",
            "required": ["spec", "maybe"],
            "properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/Meta"}],
                             "description": "m"},
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                         "properties": {"a": {"type": "string"}}},
                "maybe": {"type": "object", "nullable": true,
                          "properties": {"a": {"type": "string"}}},
                "either": {"x-kubernetes-int-or-string": true,
                           "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "list": {"type": "array", "x-kubernetes-preserve-unknown-fields": true,
                         "items": {"type": "string"}},
                "nested": {"type": "object", "x-kubernetes-embedded-resource": true,
                           "properties": {"x": {"type": "string", "pattern": "a|b",
                                                "default": "a"}}},
            },
        }));
        let meta = json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"});
        assert_eq!(got["required"], json!(["spec"]));
        assert_eq!(
            got["properties"]["metadata"],
            json!({"$ref": "#/definitions/Meta", "description": "m"})
        );
        assert_eq!(
            got["properties"]["spec"],
            json!({"x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(got["properties"]["maybe"], json!({}));
        assert_eq!(
            got["properties"]["either"],
            json!({"x-kubernetes-int-or-string": true})
        );
        assert_eq!(
            got["properties"]["list"],
            json!({"x-kubernetes-preserve-unknown-fields": true})
        );
        let nested = &got["properties"]["nested"];
        assert_eq!(
            nested["properties"]["x"],
            json!({"type": "string", "pattern": "a|b"})
        );
        assert_eq!(nested["properties"]["metadata"]["$ref"], meta["$ref"]);
        assert_eq!(nested["required"], json!(["kind", "apiVersion"]));
    }
}
