//! The structural schema of a custom resource version: built from the CRD's `openAPIV3Schema`, with upstream's structural rules checked on the way (`apiextensions-apiserver/pkg/apiserver/schema`).
//!
//! A schema is structural when every level says its type (`type`, or
//! `x-kubernetes-int-or-string` / `x-kubernetes-preserve-unknown-fields`), arrays say their
//! items, and objects use `properties` or `additionalProperties`, not both. Only a structural
//! schema can prune unknown fields and apply defaults, so upstream's `apiextensions.k8s.io/v1`
//! refuses any other; so does [`Schema::build`], with upstream's field errors (`properties[spec].type:
//! Required value: must not be empty for specified object fields`).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use regex::Regex;
use serde_json::Value;

use crate::validation::FieldError;

/// The types a structural schema may name.
const TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

/// `x-kubernetes-list-type` values.
const LIST_TYPES: [&str; 3] = ["atomic", "map", "set"];

/// `x-kubernetes-map-type` values.
const MAP_TYPES: [&str; 2] = ["atomic", "granular"];

/// One level of a structural schema.
#[derive(Clone, Debug, Default)]
pub struct Schema {
    /// `type`: empty only with `x-kubernetes-int-or-string` or
    /// `x-kubernetes-preserve-unknown-fields`.
    pub ty: String,
    /// `format` (`int32`, `int64`, `date-time`, ...).
    pub format: String,
    /// `description`, for `kubectl explain`.
    pub description: String,
    /// `nullable`: `null` is a valid value (else a `null` is pruned, or defaulted).
    pub nullable: bool,
    /// `properties` of an object.
    pub properties: BTreeMap<String, Schema>,
    /// `additionalProperties` of a map-like object (its values' schema).
    pub additional_properties: Option<Box<Schema>>,
    /// `additionalProperties: true`: any value is kept under any key.
    pub additional_any: bool,
    /// `items` of an array.
    pub items: Option<Box<Schema>>,
    /// `required` property names.
    pub required: Vec<String>,
    /// `enum` values.
    pub enum_values: Option<Vec<Value>>,
    /// `pattern`, compiled (Go's RE2 and Rust's `regex` accept the same syntax).
    pub pattern: Option<(String, Regex)>,
    /// `minimum` and whether it is exclusive.
    pub minimum: Option<(f64, bool)>,
    /// `maximum` and whether it is exclusive.
    pub maximum: Option<(f64, bool)>,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `minLength`.
    pub min_length: Option<i64>,
    /// `maxLength`.
    pub max_length: Option<i64>,
    /// `minItems`.
    pub min_items: Option<i64>,
    /// `maxItems`.
    pub max_items: Option<i64>,
    /// `minProperties`.
    pub min_properties: Option<i64>,
    /// `maxProperties`.
    pub max_properties: Option<i64>,
    /// `default`, applied when the field is missing.
    pub default: Option<Value>,
    /// `x-kubernetes-preserve-unknown-fields`: unknown fields are kept below this level.
    pub preserve_unknown: bool,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// `x-kubernetes-embedded-resource`: an object with `apiVersion`, `kind` and `metadata`.
    pub embedded: bool,
    /// `x-kubernetes-list-type`.
    pub list_type: String,
    /// `x-kubernetes-list-map-keys`.
    pub list_map_keys: Vec<String>,
    /// `allOf`, `anyOf`, `oneOf` and `not`: value validations only (a structural schema
    /// declares no types or properties in them that the level itself lacks).
    pub all_of: Vec<Schema>,
    /// `anyOf`.
    pub any_of: Vec<Schema>,
    /// `oneOf`.
    pub one_of: Vec<Schema>,
    /// `not`.
    pub not: Option<Box<Schema>>,
    /// `x-kubernetes-validations` (CEL rules) at this level.
    pub rules: Vec<Rule>,
}

/// One `x-kubernetes-validations` rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The CEL expression.
    pub rule: String,
    /// `message` (upstream's default: `failed rule: {rule}`).
    pub message: String,
    /// `fieldPath`, relative to the level (`.spec.x`), if any.
    pub field_path: String,
    /// `reason`: `FieldValueInvalid` unless said otherwise.
    pub reason: String,
    /// The compiled program, filled on the first evaluation and kept with the schema (which
    /// lives as long as the CRD version is served), so no write compiles a rule again.
    pub compiled: CompiledRule,
}

/// A rule's program once compiled (or the compiler's message). Carries no identity of its
/// own: two rules are equal when their texts are.
#[derive(Clone, Debug, Default)]
pub struct CompiledRule(pub OnceLock<Result<Arc<cel::Program>, String>>);

impl PartialEq for CompiledRule {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for CompiledRule {}

/// Where a level sits, for the structural rules that differ by position.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Position {
    Root,
    Property,
    Items,
    Additional,
    Junctor,
}

impl Schema {
    /// Builds the structural schema of `props`, or every reason it is not one (paths
    /// relative to `path`, e.g. `spec.versions[0].schema.openAPIV3Schema`).
    pub fn build(props: &JSONSchemaProps, path: &str) -> Result<Schema, Vec<FieldError>> {
        let mut errs = Vec::new();
        let schema = build_level(props, path, Position::Root, &mut errs);
        if schema.ty != "object" && errs.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.type"),
                schema.ty.clone(),
                "must be object at the root",
            ));
        }
        if let Some(meta) = props.properties.as_ref().and_then(|p| p.get("metadata")) {
            errs.extend(check_root_metadata(
                meta,
                &format!("{path}.properties[metadata]"),
            ));
        }
        if errs.is_empty() {
            Ok(schema)
        } else {
            Err(errs)
        }
    }

    /// The schema every value at this level's property `name` follows: a declared property,
    /// else `additionalProperties`.
    pub fn property(&self, name: &str) -> Option<&Schema> {
        self.properties
            .get(name)
            .or(self.additional_properties.as_deref())
    }

    /// Whether this level keeps fields it does not declare.
    pub fn keeps_unknown(&self) -> bool {
        self.preserve_unknown || self.additional_any
    }
}

fn build_level(
    props: &JSONSchemaProps,
    path: &str,
    position: Position,
    errs: &mut Vec<FieldError>,
) -> Schema {
    let at = |field: &str| format!("{path}.{field}");
    let ty = props.type_.clone().unwrap_or_default();
    let preserve = props.x_kubernetes_preserve_unknown_fields;
    let int_or_string = props.x_kubernetes_int_or_string == Some(true);
    let embedded = props.x_kubernetes_embedded_resource == Some(true);
    if preserve == Some(false) {
        errs.push(FieldError::invalid(
            at("x-kubernetes-preserve-unknown-fields"),
            false,
            "must be true or undefined",
        ));
    }
    let preserve = preserve == Some(true);
    if !ty.is_empty() && !TYPES.contains(&ty.as_str()) {
        errs.push(FieldError::not_supported(at("type"), ty.clone(), &TYPES));
    }
    if position != Position::Junctor && ty.is_empty() && !int_or_string && !preserve {
        let detail = match position {
            Position::Root => "must not be empty at the root",
            Position::Items => "must not be empty for specified array items",
            Position::Additional => "must not be empty for specified additionalProperties",
            _ => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(at("type"), detail));
    }
    if position == Position::Junctor && !ty.is_empty() {
        errs.push(FieldError::forbidden(
            at("type"),
            "must be empty to be structural",
        ));
    }
    if int_or_string && !ty.is_empty() {
        errs.push(FieldError::invalid(
            at("type"),
            ty.clone(),
            "must be empty if x-kubernetes-int-or-string is true",
        ));
    }
    if embedded && ty != "object" {
        errs.push(FieldError::invalid(
            at("type"),
            ty.clone(),
            "must be object if x-kubernetes-embedded-resource is true",
        ));
    }
    if embedded && props.properties.as_ref().is_none_or(BTreeMap::is_empty) && !preserve {
        errs.push(FieldError::required(
            at("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
    if props.ref_path.is_some() {
        errs.push(FieldError::forbidden(at("$ref"), "$ref is not supported"));
    }
    if props.definitions.as_ref().is_some_and(|d| !d.is_empty()) {
        errs.push(FieldError::forbidden(
            at("definitions"),
            "definitions are not supported",
        ));
    }
    if props.dependencies.as_ref().is_some_and(|d| !d.is_empty()) {
        errs.push(FieldError::forbidden(
            at("dependencies"),
            "dependencies are not supported",
        ));
    }
    if props.additional_items.is_some() {
        errs.push(FieldError::forbidden(
            at("additionalItems"),
            "additionalItems cannot be set to false",
        ));
    }
    if props
        .pattern_properties
        .as_ref()
        .is_some_and(|p| !p.is_empty())
    {
        errs.push(FieldError::forbidden(
            at("patternProperties"),
            "patternProperties is not supported",
        ));
    }
    if props.id.is_some() {
        errs.push(FieldError::forbidden(at("id"), "id is not supported"));
    }
    if props.schema.is_some() {
        errs.push(FieldError::forbidden(
            at("$schema"),
            "$schema is not supported",
        ));
    }
    if props.unique_items == Some(true) {
        errs.push(FieldError::forbidden(
            at("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }

    let mut properties = BTreeMap::new();
    for (name, p) in props.properties.iter().flatten() {
        let child = build_level(
            p,
            &format!("{path}.properties[{name}]"),
            if position == Position::Junctor {
                Position::Junctor
            } else {
                Position::Property
            },
            errs,
        );
        properties.insert(name.clone(), child);
    }
    let (mut additional_properties, mut additional_any) = (None, false);
    match &props.additional_properties {
        None => {}
        Some(JSONSchemaPropsOrBool::Bool(true)) => additional_any = true,
        Some(JSONSchemaPropsOrBool::Bool(false)) => errs.push(FieldError::forbidden(
            at("additionalProperties"),
            "additionalProperties cannot be set to false",
        )),
        Some(JSONSchemaPropsOrBool::Schema(s)) => {
            if !properties.is_empty() {
                errs.push(FieldError::forbidden(
                    at("additionalProperties"),
                    "additionalProperties and properties are mutual exclusive",
                ));
            }
            additional_properties = Some(Box::new(build_level(
                s,
                &at("additionalProperties"),
                Position::Additional,
                errs,
            )));
        }
    }
    let items = match &props.items {
        None => {
            if ty == "array" {
                errs.push(FieldError::required(at("items"), "must be specified"));
            }
            None
        }
        Some(JSONSchemaPropsOrArray::Schema(s)) => Some(Box::new(build_level(
            s,
            &at("items"),
            if position == Position::Junctor {
                Position::Junctor
            } else {
                Position::Items
            },
            errs,
        ))),
        Some(JSONSchemaPropsOrArray::Schemas(_)) => {
            errs.push(FieldError::forbidden(
                at("items"),
                "items must be a schema object and not an array",
            ));
            None
        }
    };
    if ty == "object" && items.is_some() {
        errs.push(FieldError::forbidden(
            at("items"),
            "must not be specified for object fields",
        ));
    }
    let pattern = props.pattern.as_ref().and_then(|p| match Regex::new(p) {
        Ok(re) => Some((p.clone(), re)),
        Err(e) => {
            errs.push(FieldError::invalid(
                at("pattern"),
                p.clone(),
                format!("must be a valid regular expression, but isn't: {e}"),
            ));
            None
        }
    });
    let list_type = props.x_kubernetes_list_type.clone().unwrap_or_default();
    let list_map_keys = props.x_kubernetes_list_map_keys.clone().unwrap_or_default();
    if !list_type.is_empty() {
        if !LIST_TYPES.contains(&list_type.as_str()) {
            errs.push(FieldError::not_supported(
                at("x-kubernetes-list-type"),
                list_type.clone(),
                &LIST_TYPES,
            ));
        } else if ty != "array" {
            errs.push(FieldError::invalid(
                at("x-kubernetes-list-type"),
                list_type.clone(),
                "must only be used if type is array",
            ));
        }
    }
    if list_type == "map" && list_map_keys.is_empty() {
        errs.push(FieldError::required(
            at("x-kubernetes-list-map-keys"),
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    if !list_map_keys.is_empty() && list_type != "map" {
        errs.push(FieldError::forbidden(
            at("x-kubernetes-list-map-keys"),
            "must only be used if x-kubernetes-list-type is map",
        ));
    }
    if list_type == "map" {
        let item_props = props.items.as_ref().and_then(|i| match i {
            JSONSchemaPropsOrArray::Schema(s) => Some(s),
            JSONSchemaPropsOrArray::Schemas(_) => None,
        });
        if item_props.and_then(|s| s.type_.as_deref()) != Some("object") {
            errs.push(FieldError::invalid(
                at("items.type"),
                item_props.and_then(|s| s.type_.clone()).unwrap_or_default(),
                "must be object if parent array's x-kubernetes-list-type is map",
            ));
        }
    }
    if let Some(map_type) = &props.x_kubernetes_map_type
        && !MAP_TYPES.contains(&map_type.as_str())
    {
        errs.push(FieldError::not_supported(
            at("x-kubernetes-map-type"),
            map_type.clone(),
            &MAP_TYPES,
        ));
    }
    let junctors = |list: &Option<Vec<JSONSchemaProps>>, name: &str, errs: &mut Vec<FieldError>| {
        list.iter()
            .flatten()
            .enumerate()
            .map(|(i, p)| build_level(p, &format!("{path}.{name}[{i}]"), Position::Junctor, errs))
            .collect::<Vec<_>>()
    };
    let all_of = junctors(&props.all_of, "allOf", errs);
    let any_of = junctors(&props.any_of, "anyOf", errs);
    let one_of = junctors(&props.one_of, "oneOf", errs);
    let not = props
        .not
        .as_ref()
        .map(|n| Box::new(build_level(n, &at("not"), Position::Junctor, errs)));
    let rules = props
        .x_kubernetes_validations
        .iter()
        .flatten()
        .map(|r| Rule {
            rule: r.rule.clone(),
            message: r
                .message
                .clone()
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| format!("failed rule: {}", r.rule)),
            field_path: r.field_path.clone().unwrap_or_default(),
            reason: r
                .reason
                .clone()
                .unwrap_or_else(|| "FieldValueInvalid".to_owned()),
            compiled: CompiledRule::default(),
        })
        .collect();
    Schema {
        ty,
        format: props.format.clone().unwrap_or_default(),
        description: props.description.clone().unwrap_or_default(),
        nullable: props.nullable == Some(true),
        properties,
        additional_properties,
        additional_any,
        items,
        required: props.required.clone().unwrap_or_default(),
        enum_values: props
            .enum_
            .as_ref()
            .map(|v| v.iter().map(|j| j.0.clone()).collect()),
        pattern,
        minimum: props
            .minimum
            .map(|m| (m, props.exclusive_minimum == Some(true))),
        maximum: props
            .maximum
            .map(|m| (m, props.exclusive_maximum == Some(true))),
        multiple_of: props.multiple_of,
        min_length: props.min_length,
        max_length: props.max_length,
        min_items: props.min_items,
        max_items: props.max_items,
        min_properties: props.min_properties,
        max_properties: props.max_properties,
        default: props.default.as_ref().map(|d| d.0.clone()),
        preserve_unknown: preserve,
        int_or_string,
        embedded,
        list_type,
        list_map_keys,
        all_of,
        any_of,
        one_of,
        not,
        rules,
    }
}

/// The root `metadata` may only restrict `name` and `generateName` (upstream's
/// `validateMetadata` of `ValidateCustomResourceDefinitionOpenAPISchema`).
fn check_root_metadata(meta: &JSONSchemaProps, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(ty) = &meta.type_
        && ty != "object"
    {
        errs.push(FieldError::invalid(
            format!("{path}.type"),
            ty.clone(),
            "must be object",
        ));
    }
    let other = meta
        .properties
        .iter()
        .flatten()
        .any(|(name, _)| name != "name" && name != "generateName")
        || meta.required.as_ref().is_some_and(|r| !r.is_empty())
        || meta.additional_properties.is_some()
        || meta.default.is_some();
    if other {
        errs.push(FieldError::forbidden(
            path,
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn props(v: Value) -> JSONSchemaProps {
        serde_json::from_value(v).expect("schema")
    }

    fn errors(v: Value) -> Vec<String> {
        match Schema::build(&props(v), "s") {
            Ok(_) => Vec::new(),
            Err(errs) => errs.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn structural_rules_name_the_field_as_upstream() {
        struct Case {
            name: &'static str,
            schema: Value,
            want: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "structural",
                schema: json!({"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "replicas": {"type": "integer", "format": "int32"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "port": {"x-kubernetes-int-or-string": true},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    }},
                }}),
                want: &[],
            },
            Case {
                name: "no type at the root",
                schema: json!({"properties": {"spec": {"type": "object"}}}),
                want: &["s.type: Required value: must not be empty at the root"],
            },
            Case {
                name: "a property without a type",
                schema: json!({"type": "object", "properties": {"spec": {"properties": {}}}}),
                want: &[
                    "s.properties[spec].type: Required value: must not be empty for specified object fields",
                ],
            },
            Case {
                name: "an array without items",
                schema: json!({"type": "object", "properties": {"l": {"type": "array"}}}),
                want: &["s.properties[l].items: Required value: must be specified"],
            },
            Case {
                name: "items without a type",
                schema: json!({"type": "object", "properties": {"l": {"type": "array", "items": {}}}}),
                want: &[
                    "s.properties[l].items.type: Required value: must not be empty for specified array items",
                ],
            },
            Case {
                name: "preserve unknown fields false",
                schema: json!({"type": "object", "x-kubernetes-preserve-unknown-fields": false}),
                want: &[
                    "s.x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined",
                ],
            },
            Case {
                name: "properties and additionalProperties",
                schema: json!({"type": "object", "properties": {"a": {"type": "string"}},
                    "additionalProperties": {"type": "string"}}),
                want: &[
                    "s.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
                ],
            },
            Case {
                name: "metadata beyond name",
                schema: json!({"type": "object", "properties": {"metadata": {"type": "object",
                    "properties": {"labels": {"type": "object"}}}}}),
                want: &[
                    "s.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
                ],
            },
            Case {
                name: "a string at the root",
                schema: json!({"type": "string"}),
                want: &["s.type: Invalid value: \"string\": must be object at the root"],
            },
            Case {
                name: "a bad pattern",
                schema: json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}),
                want: &[
                    "s.properties[a].pattern: Invalid value: \"(\": must be a valid regular expression",
                ],
            },
        ];
        for case in cases {
            let got = errors(case.schema);
            assert_eq!(got.len(), case.want.len(), "{}: {got:?}", case.name);
            for (g, w) in got.iter().zip(case.want) {
                assert!(
                    g.starts_with(w),
                    "{}: {g} does not start with {w}",
                    case.name
                );
            }
        }
    }

    #[test]
    fn the_model_keeps_what_validation_and_pruning_read() {
        let s = Schema::build(
            &props(
                json!({"type": "object", "properties": {"spec": {"type": "object",
                "required": ["x"], "properties": {"x": {"type": "string", "default": "d",
                "enum": ["d", "e"], "pattern": "^[a-z]$"}}}}}),
            ),
            "s",
        )
        .expect("structural");
        let spec = s.property("spec").expect("spec");
        assert_eq!(spec.required, ["x"]);
        let x = spec.property("x").expect("x");
        assert_eq!(x.default, Some(json!("d")));
        assert_eq!(
            x.enum_values.as_deref(),
            Some(&[json!("d"), json!("e")][..])
        );
        assert!(x.pattern.as_ref().is_some_and(|(_, re)| re.is_match("a")));
        assert!(spec.property("y").is_none());
    }
}
