//! The CEL types the checker reasons with, and the declared type of an OpenAPI v3 schema, as upstream's `apiserver/pkg/cel` `DeclType` and `common.SchemaDeclType`.
//!
//! An object schema becomes an [`Ty::Object`] that keeps the schema itself and resolves a
//! field's type only when an expression selects it: built-in schemas are recursive
//! (`JSONSchemaProps` holds `JSONSchemaProps`), so converting a schema eagerly would not end.
//! Where kcm cannot tell a schema's type it is [`Ty::Dyn`], which every operator accepts:
//! the checker only warns where upstream's would.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

/// How deep `$ref`/`allOf` chains are followed before a schema counts as `dyn`.
const MAX_REF_DEPTH: usize = 16;

/// The component schemas of one OpenAPI v3 document (`components.schemas`), which `$ref`s
/// point into.
#[derive(Debug, Default)]
pub struct Components {
    /// Schema name to schema.
    schemas: Map<String, Value>,
}

impl Components {
    /// The components of an OpenAPI v3 `document`, moved out of it (a group-version's
    /// document is large: no copy); none when it has no `components.schemas`.
    pub fn of_document(mut document: Value) -> Self {
        let schemas = match document.pointer_mut("/components/schemas").map(Value::take) {
            Some(Value::Object(schemas)) => schemas,
            _ => Map::new(),
        };
        Self { schemas }
    }

    /// The component schemas named so, for tests and for looking up a kind's schema.
    pub fn from_schemas(schemas: Map<String, Value>) -> Self {
        Self { schemas }
    }

    /// Every named schema.
    pub fn schemas(&self) -> &Map<String, Value> {
        &self.schemas
    }

    /// `schema` with `$ref`s and single-entry `allOf` wrappers (upstream's way of giving a
    /// referenced schema a description) followed; `None` for a dangling reference.
    fn resolve<'a>(&'a self, mut schema: &'a Value) -> Option<&'a Value> {
        for _ in 0..MAX_REF_DEPTH {
            if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
                let name = reference.strip_prefix("#/components/schemas/")?;
                schema = self.schemas.get(name)?;
                continue;
            }
            match schema.get("allOf").and_then(Value::as_array) {
                Some(all) if all.len() == 1 && schema.get("properties").is_none() => {
                    schema = &all[0];
                }
                _ => return Some(schema),
            }
        }
        None
    }
}

/// An object schema: its fields are typed on selection.
#[derive(Clone)]
pub struct ObjectTy {
    /// The type's name in messages (the kind, or the schema's component name).
    pub name: Arc<str>,
    /// The resolved object schema.
    schema: Arc<Value>,
    /// The document's components.
    components: Arc<Components>,
    /// Whether this is a resource's root (or an embedded resource): `apiVersion`, `kind`
    /// and `metadata` are always selectable there, as upstream adds them.
    resource_root: bool,
}

impl fmt::Debug for ObjectTy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectTy")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ObjectTy {
    /// The type of field `name`; `None` when the schema declares no such field (upstream's
    /// `undefined field`).
    pub fn field(&self, name: &str) -> Option<Ty> {
        let properties = self.schema.get("properties").and_then(Value::as_object);
        if let Some(property) = properties.and_then(|p| p.get(name)) {
            let embedded = property
                .get("x-kubernetes-embedded-resource")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let field_name: Arc<str> = format!("{}.{name}", self.name).into();
            return Some(schema_type(
                &self.components,
                property,
                field_name,
                embedded,
            ));
        }
        if self.resource_root {
            match name {
                "apiVersion" | "kind" => return Some(Ty::String),
                // Upstream declares `metadata` with `name` and `generateName` when the schema
                // has none; kcm lets any field of it through.
                "metadata" => return Some(Ty::Dyn),
                _ => {}
            }
        }
        None
    }
}

/// A CEL type as the checker sees it.
#[derive(Clone, Debug)]
pub enum Ty {
    /// `dyn`: anything; also what an expression with an error has, so one mistake is
    /// reported once.
    Dyn,
    /// `null_type`.
    Null,
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
    /// `google.protobuf.Timestamp`.
    Timestamp,
    /// `google.protobuf.Duration`.
    Duration,
    /// `type`: the value of a type name such as `int`.
    Type,
    /// `list(T)`.
    List(Arc<Ty>),
    /// `map(K, V)`.
    Map(Arc<Ty>, Arc<Ty>),
    /// An object with declared fields.
    Object(ObjectTy),
    /// A record of named fields that is not a schema: the composited `variables`.
    Record(Arc<Vec<(String, Ty)>>),
}

impl Ty {
    /// Whether the type is `dyn` (accepted by every operator).
    pub fn is_dyn(&self) -> bool {
        matches!(self, Ty::Dyn)
    }

    /// Whether the type is `int`, `uint` or `double`.
    pub fn is_number(&self) -> bool {
        matches!(self, Ty::Int | Ty::Uint | Ty::Double)
    }

    /// Whether `self` and `other` are the same type, as far as overload resolution goes:
    /// lists and maps by their element types, objects by name, `dyn` matching anything.
    pub fn same(&self, other: &Ty) -> bool {
        match (self, other) {
            (Ty::Dyn, _) | (_, Ty::Dyn) => true,
            (Ty::List(a), Ty::List(b)) => a.same(b),
            (Ty::Map(ka, va), Ty::Map(kb, vb)) => ka.same(kb) && va.same(vb),
            (Ty::Object(a), Ty::Object(b)) => a.name == b.name,
            (Ty::Record(a), Ty::Record(b)) => Arc::ptr_eq(a, b),
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }

    /// The root type of a resource of the given kind from its schema.
    pub fn resource(components: Arc<Components>, schema: &Value, kind: &str) -> Ty {
        schema_type(&components, schema, kind.into(), true)
    }
}

impl fmt::Display for Ty {
    /// cel-go's type names, as its overload errors print them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Dyn => f.write_str("dyn"),
            Ty::Null => f.write_str("null_type"),
            Ty::Bool => f.write_str("bool"),
            Ty::Int => f.write_str("int"),
            Ty::Uint => f.write_str("uint"),
            Ty::Double => f.write_str("double"),
            Ty::String => f.write_str("string"),
            Ty::Bytes => f.write_str("bytes"),
            Ty::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Ty::Duration => f.write_str("google.protobuf.Duration"),
            Ty::Type => f.write_str("type"),
            Ty::List(elem) => write!(f, "list({elem})"),
            Ty::Map(key, value) => write!(f, "map({key}, {value})"),
            Ty::Object(object) => f.write_str(&object.name),
            Ty::Record(_) => f.write_str("kubernetes.variables"),
        }
    }
}

/// The declared type of `schema`, as upstream's `SchemaDeclType`; `name` names an object
/// type, `resource_root` marks a resource's root or an embedded resource.
fn schema_type(
    components: &Arc<Components>,
    schema: &Value,
    name: Arc<str>,
    resource_root: bool,
) -> Ty {
    let Some(schema) = components.resolve(schema) else {
        return Ty::Dyn;
    };
    let flag = |key: &str| schema.get(key).and_then(Value::as_bool).unwrap_or(false);
    if flag("x-kubernetes-int-or-string") || flag("x-kubernetes-preserve-unknown-fields") {
        return Ty::Dyn;
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("boolean") => Ty::Bool,
        Some("integer") => Ty::Int,
        Some("number") => Ty::Double,
        Some("string") => match schema.get("format").and_then(Value::as_str) {
            Some("byte") => Ty::Bytes,
            Some("duration") => Ty::Duration,
            Some("date-time" | "datetime" | "date") => Ty::Timestamp,
            _ => Ty::String,
        },
        Some("array") => {
            let elem = schema.get("items").map_or(Ty::Dyn, |items| {
                schema_type(components, items, format!("{name}@idx").into(), false)
            });
            Ty::List(Arc::new(elem))
        }
        Some("object") => {
            if let Some(additional) = schema.get("additionalProperties") {
                let value = match additional {
                    Value::Object(_) => {
                        schema_type(components, additional, format!("{name}@elem").into(), false)
                    }
                    _ => Ty::Dyn,
                };
                return Ty::Map(Arc::new(Ty::String), Arc::new(value));
            }
            let has_properties = schema
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| !p.is_empty());
            if !has_properties && !resource_root {
                // An object with nothing declared (RawExtension, a free-form field): kcm
                // cannot tell what it holds.
                return Ty::Dyn;
            }
            Ty::Object(ObjectTy {
                name,
                schema: Arc::new(schema.clone()),
                components: Arc::clone(components),
                resource_root,
            })
        }
        // No type: a schema kcm does not model (oneOf, an untyped field).
        _ => Ty::Dyn,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment() -> (Arc<Components>, Value) {
        let components = json!({
            "io.k8s.api.apps.v1.Deployment": {
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "spec": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}], "default": {}},
                },
            },
            "io.k8s.api.apps.v1.DeploymentSpec": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer", "format": "int32"},
                    "paused": {"type": "boolean"},
                    "selector": {"$ref": "#/components/schemas/Missing"},
                    "strategy": {"type": "object", "properties": {"maxSurge": {"x-kubernetes-int-or-string": true}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "list": {"type": "array", "items": {"type": "string", "format": "date-time"}},
                },
            },
        });
        let Value::Object(map) = components else {
            unreachable!()
        };
        let components = Arc::new(Components::from_schemas(map));
        let root = components.schemas()["io.k8s.api.apps.v1.Deployment"].clone();
        (components, root)
    }

    fn select(ty: &Ty, field: &str) -> Option<Ty> {
        match ty {
            Ty::Object(object) => object.field(field),
            other => panic!("{other} is not an object"),
        }
    }

    #[test]
    fn schemas_map_to_upstreams_declared_types() {
        let (components, root) = deployment();
        let deployment = Ty::resource(components, &root, "Deployment");
        let spec = select(&deployment, "spec").expect("spec");
        assert_eq!(
            select(&spec, "replicas").expect("replicas").to_string(),
            "int"
        );
        assert_eq!(select(&spec, "paused").expect("paused").to_string(), "bool");
        assert_eq!(
            select(&spec, "labels").expect("labels").to_string(),
            "map(string, string)"
        );
        assert_eq!(
            select(&spec, "list").expect("list").to_string(),
            "list(google.protobuf.Timestamp)"
        );
        // A dangling reference and int-or-string are dyn, never an error.
        assert!(select(&spec, "selector").expect("selector").is_dyn());
        let strategy = select(&spec, "strategy").expect("strategy");
        assert!(select(&strategy, "maxSurge").expect("maxSurge").is_dyn());
        // Undeclared fields are undefined; the root always has kind and metadata.
        assert!(select(&spec, "maxRetries").is_none());
        assert_eq!(
            select(&deployment, "kind").expect("kind").to_string(),
            "string"
        );
        assert!(select(&deployment, "metadata").is_some());
        assert!(select(&spec, "kind").is_none());
    }

    #[test]
    fn recursive_schemas_resolve_lazily() {
        let Value::Object(map) = json!({
            "Props": {"type": "object", "properties": {"items": {"$ref": "#/components/schemas/Props"}, "n": {"type": "integer"}}},
        }) else {
            unreachable!()
        };
        let components = Arc::new(Components::from_schemas(map));
        let root = components.schemas()["Props"].clone();
        let mut ty = Ty::resource(components, &root, "Props");
        for _ in 0..100 {
            ty = select(&ty, "items").expect("items");
        }
        assert_eq!(select(&ty, "n").expect("n").to_string(), "int");
    }
}
