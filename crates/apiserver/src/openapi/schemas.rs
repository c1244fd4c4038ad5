//! Component schemas: the k8s-openapi types behind every served kind, rendered by `schemars` as OpenAPI 3.0 schemas.
//!
//! Each schema keeps the upstream component name (`io.k8s.api.apps.v1.Deployment`, as the
//! k8s-openapi types name themselves) and `$ref`s to `#/components/schemas/...`. Top-level
//! kinds carry `x-kubernetes-group-version-kind`, which `kubectl explain` matches on. List
//! kinds (`DeploymentList`) have no Rust type with a schema, so their schema is assembled
//! from the item type's reference and `ListMeta`, as upstream's generated `*List` types are.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ListMeta, Patch, Status};
use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use k8s_openapi::schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

/// The `$ref` prefix of component schemas.
pub const REF_PREFIX: &str = "#/components/schemas/";

/// A kind with a Rust type: its group/version/kind and how to generate its schema.
#[derive(Clone, Copy)]
pub struct TypedKind {
    /// API group (empty for core).
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// The component name, e.g. `io.k8s.api.core.v1.Pod`.
    pub name: fn() -> std::borrow::Cow<'static, str>,
    /// Adds the type's schema (and everything it references) to a generator.
    pub generate: fn(&mut SchemaGenerator) -> Schema,
}

impl std::fmt::Debug for TypedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} {}", self.group, self.version, self.kind)
    }
}

impl TypedKind {
    /// The typed kind of `K`.
    pub const fn of<K: k8s_openapi::Resource + JsonSchema>() -> Self {
        TypedKind {
            group: K::GROUP,
            version: K::VERSION,
            kind: K::KIND,
            name: K::schema_name,
            generate: SchemaGenerator::subschema_for::<K>,
        }
    }
}

/// Collects component schemas for one document: add kinds, then [`Components::finish`].
pub struct Components {
    generator: SchemaGenerator,
    /// Extensions to set on named schemas once generated: (component name, GVKs).
    gvks: Vec<(String, Value)>,
    /// List schemas and custom resources' schemas assembled here: (component name, schema).
    lists: Vec<(String, Value)>,
}

impl std::fmt::Debug for Components {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Components")
            .field("gvks", &self.gvks.len())
            .finish_non_exhaustive()
    }
}

impl Default for Components {
    fn default() -> Self {
        Self::new()
    }
}

/// The `x-kubernetes-group-version-kind` value of one kind.
pub fn gvk_json(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// A `$ref` to a component.
pub fn reference(name: &str) -> Value {
    json!({"$ref": format!("{REF_PREFIX}{name}")})
}

impl Components {
    /// An empty set of components (OpenAPI 3.0 dialect).
    pub fn new() -> Self {
        Self {
            generator: SchemaGenerator::new(SchemaSettings::openapi3()),
            gvks: Vec::new(),
            lists: Vec::new(),
        }
    }

    /// Adds a kind's schema (tagged with its group/version/kind) and returns its component name.
    pub fn add_kind(&mut self, k: &TypedKind) -> String {
        (k.generate)(&mut self.generator);
        let name = (k.name)().into_owned();
        self.gvks
            .push((name.clone(), gvk_json(k.group, k.version, k.kind)));
        name
    }

    /// Adds `{Kind}List` for a kind added with [`Self::add_kind`] and returns its name.
    pub fn add_list(&mut self, k: &TypedKind) -> String {
        let item = self.add_kind(k);
        self.add_list_of(&item, k.group, k.version, k.kind)
    }

    /// Adds a custom resource's kind, whose `schema` (the whole object's, with `metadata`
    /// referring to `ObjectMeta`) comes from its CRD, and its list; returns both component
    /// names. The names are upstream's for custom resources: the group reversed, then
    /// version and kind (`io.k8s.samplecontroller.v1alpha1.Foo` for
    /// `samplecontroller.k8s.io`).
    pub fn add_custom(
        &mut self,
        group: &str,
        version: &str,
        kind: &str,
        mut schema: Value,
    ) -> (String, String) {
        self.add::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>();
        let reversed: Vec<&str> = group.split('.').rev().collect();
        let name = format!("{}.{version}.{kind}", reversed.join("."));
        if let Some(map) = schema.as_object_mut() {
            map.insert(
                "x-kubernetes-group-version-kind".to_owned(),
                json!([gvk_json(group, version, kind)]),
            );
        }
        self.lists.push((name.clone(), schema));
        let list = self.add_list_of(&name, group, version, kind);
        (name, list)
    }

    /// Adds `{Kind}List` of the component `item` and returns its name.
    fn add_list_of(&mut self, item: &str, group: &str, version: &str, kind: &str) -> String {
        let list_meta = self.add::<ListMeta>();
        let item_kind = kind;
        let kind = format!("{kind}List");
        let name = format!("{item}List");
        let schema = json!({
            "description": format!("{kind} is a list of {item_kind}."),
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {
                    "description": "APIVersion defines the versioned schema of this representation of an object.",
                    "type": "string",
                },
                "items": {
                    "description": format!("Items is the list of {item_kind}."),
                    "type": "array",
                    "items": reference(item),
                },
                "kind": {
                    "description": "Kind is a string value representing the REST resource this object represents.",
                    "type": "string",
                },
                "metadata": {
                    "allOf": [reference(&list_meta)],
                    "description": "Standard list metadata.",
                },
            },
            "x-kubernetes-group-version-kind": [gvk_json(group, version, &kind)],
        });
        self.lists.push((name.clone(), schema));
        name
    }

    /// Adds any type's schema without a group/version/kind and returns its component name.
    pub fn add<T: JsonSchema>(&mut self) -> String {
        self.generator.subschema_for::<T>();
        T::schema_name().into_owned()
    }

    /// Adds the meta/v1 types every document's operations refer to (DeleteOptions, Status,
    /// Patch).
    pub fn add_common(&mut self) -> CommonNames {
        CommonNames {
            delete_options: self.add::<DeleteOptions>(),
            status: self.add::<Status>(),
            patch: self.add::<Patch>(),
        }
    }

    /// The generated schemas, by component name, with group/version/kind extensions.
    pub fn finish(mut self) -> Map<String, Value> {
        let mut defs = self.generator.take_definitions(true);
        for (name, gvk) in self.gvks {
            if let Some(Value::Object(schema)) = defs.get_mut(&name) {
                let entry = schema
                    .entry("x-kubernetes-group-version-kind")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(list) = entry
                    && !list.contains(&gvk)
                {
                    list.push(gvk);
                }
            }
        }
        for (name, schema) in self.lists {
            defs.insert(name, schema);
        }
        defs
    }
}

/// Component names of the meta/v1 types operations refer to.
#[derive(Clone, Debug)]
pub struct CommonNames {
    /// `io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions`.
    pub delete_options: String,
    /// `io.k8s.apimachinery.pkg.apis.meta.v1.Status`.
    pub status: String,
    /// `io.k8s.apimachinery.pkg.apis.meta.v1.Patch`.
    pub patch: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_schema_has_gvk_refs_and_descriptions() {
        let mut c = Components::new();
        let dep = TypedKind::of::<k8s_openapi::api::apps::v1::Deployment>();
        let name = c.add_list(&dep);
        assert_eq!(name, "io.k8s.api.apps.v1.DeploymentList");
        let defs = c.finish();
        let schema = &defs["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            schema["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        // Fields that reference a type keep their own description next to an allOf, as
        // upstream's v3 documents do (kubectl explain prints both).
        let spec = &schema["properties"]["spec"];
        assert_eq!(
            spec["allOf"],
            json!([{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}])
        );
        assert!(spec["description"].as_str().is_some());
        let replicas = &defs["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"];
        assert_eq!(replicas["type"], "integer");
        assert!(
            replicas["description"]
                .as_str()
                .is_some_and(|d| d.starts_with("Number of desired pods"))
        );
        assert!(defs.contains_key("io.k8s.api.core.v1.PodSpec"));
        assert!(defs.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"));
        assert_eq!(
            defs["io.k8s.api.apps.v1.DeploymentList"]["x-kubernetes-group-version-kind"][0]["kind"],
            "DeploymentList"
        );
    }
}
