//! One served version of a custom resource: the [`ResourceDef`] built from an Established CRD, whose [`CustomKind`] decodes, defaults, validates, prints and documents objects from the version's schema.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use jiff::Timestamp;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use serde_json::{Value, json};

use super::printer::CustomPrinter;
use super::structural::Schema;
use super::{cel, values};
use crate::error::ApiError;
use crate::openapi::schemas::reference;
use crate::registry::custom::{CustomBehaviour, ScalePaths};
use crate::registry::resource::{CustomNames, ResourceDef};
use crate::registry::strategy::{MetadataReset, RequestContext, Strategy};
use crate::registry::subresource::Subresource;
use crate::table::IncludeObject;
use crate::validation::FieldError;

/// Gives every [`CustomKind`] its own id (see [`CustomBehaviour::id`]).
static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

/// The ObjectMeta component every custom resource's `metadata` refers to.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// Upstream's descriptions of the fields every custom resource has.
const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// What one served version of a custom resource does (the entry's [`CustomBehaviour`] and
/// [`Strategy`]).
#[derive(Debug)]
pub struct CustomKind {
    id: usize,
    singular: String,
    /// `apiVersion` of this version's objects.
    api_version: String,
    /// `apiVersion` of the stored objects (the CRD's storage version).
    storage_api_version: String,
    schema: Schema,
    printer: CustomPrinter,
    openapi: Value,
    scale: Option<ScalePaths>,
    /// `/status` is a subresource: the main resource keeps the stored status.
    status_enabled: bool,
    /// The CRD is being deleted: creates are refused, as upstream's.
    terminating: bool,
}

/// The subresource sets a version can have.
const NO_SUBRESOURCES: &[Subresource] = &[];
const STATUS: &[Subresource] = &[Subresource::Status];
const SCALE: &[Subresource] = &[Subresource::Scale];
const STATUS_AND_SCALE: &[Subresource] = &[Subresource::Status, Subresource::Scale];

/// `.spec.replicas` → `/spec/replicas`.
fn pointer(json_path: &str) -> String {
    json_path.replace('.', "/")
}

/// The entries of every served version of `crd` (already Established, names accepted), the
/// preferred version first (upstream's kube-aware version priority).
pub fn entries(crd: &CustomResourceDefinition, terminating: bool) -> Vec<Arc<ResourceDef>> {
    let spec = &crd.spec;
    let accepted = crd
        .status
        .as_ref()
        .and_then(|s| s.accepted_names.clone())
        .unwrap_or_else(|| spec.names.clone());
    let storage = spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone())
        .unwrap_or_default();
    let mut versions: Vec<&CustomResourceDefinitionVersion> =
        spec.versions.iter().filter(|v| v.served).collect();
    versions.sort_by(|a, b| super::version_priority(&a.name, &b.name));
    let mut out = Vec::new();
    for version in versions {
        let Some(props) = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
        else {
            continue;
        };
        let Ok(schema) = Schema::build(props, "") else {
            continue;
        };
        let subresources = version.subresources.as_ref();
        let status_enabled = subresources.is_some_and(|s| s.status.is_some());
        let scale = subresources
            .and_then(|s| s.scale.as_ref())
            .map(|s| ScalePaths {
                spec_replicas: pointer(&s.spec_replicas_path),
                status_replicas: pointer(&s.status_replicas_path),
                label_selector: s.label_selector_path.as_deref().map(pointer),
            });
        let subs = match (status_enabled, scale.is_some()) {
            (false, false) => NO_SUBRESOURCES,
            (true, false) => STATUS,
            (false, true) => SCALE,
            (true, true) => STATUS_AND_SCALE,
        };
        let api_version = format!("{}/{}", spec.group, version.name);
        let kind = Arc::new(CustomKind {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            singular: accepted
                .singular
                .clone()
                .unwrap_or_else(|| accepted.kind.to_ascii_lowercase()),
            storage_api_version: format!("{}/{storage}", spec.group),
            openapi: openapi_schema(props),
            printer: CustomPrinter::new(
                version.additional_printer_columns.as_deref().unwrap_or(&[]),
            ),
            schema,
            scale,
            status_enabled,
            terminating,
            api_version,
        });
        let deprecation = (version.deprecated == Some(true)).then(|| {
            version.deprecation_warning.clone().unwrap_or_else(|| {
                format!(
                    "{}/{} {} is deprecated",
                    spec.group, version.name, accepted.kind
                )
            })
        });
        let names = CustomNames {
            group: spec.group.clone(),
            version: version.name.clone(),
            kind: accepted.kind.clone(),
            plural: accepted.plural.clone(),
            namespaced: spec.scope == "Namespaced",
            short_names: accepted.short_names.clone().unwrap_or_default(),
            categories: accepted.categories.clone().unwrap_or_default(),
            deprecation,
        };
        out.push(Arc::new(ResourceDef::custom(
            names,
            subs,
            Arc::clone(&kind) as Arc<dyn Strategy>,
            kind as Arc<dyn CustomBehaviour>,
        )));
    }
    out
}

/// The published schema of a version: the CRD's, with `apiVersion`, `kind` and `metadata`
/// described as upstream's OpenAPI builder adds them.
fn openapi_schema(
    props: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps,
) -> Value {
    let mut schema = serde_json::to_value(props).unwrap_or_else(|_| json!({"type": "object"}));
    if let Some(map) = schema.as_object_mut() {
        let properties = map
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut();
        if let Some(properties) = properties {
            properties.insert(
                "apiVersion".to_owned(),
                json!({"type": "string", "description": API_VERSION_DOC}),
            );
            properties.insert(
                "kind".to_owned(),
                json!({"type": "string", "description": KIND_DOC}),
            );
            properties.insert(
                "metadata".to_owned(),
                json!({"allOf": [reference(OBJECT_META)], "description": METADATA_DOC}),
            );
        }
    }
    schema
}

impl CustomKind {
    /// Every schema (and CEL rule) failure of `obj`, `old` being the stored object on update.
    fn check(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = Vec::new();
        values::validate(&self.schema, obj, "", true, &mut errs);
        if errs.is_empty() && cel::has_rules(&self.schema) {
            cel::evaluate(&self.schema, obj, old, "", &mut errs);
        }
        errs
    }

    /// The object with its `apiVersion` and `kind` set to this version's.
    fn with_api_version(&self, mut obj: Value, api_version: &str) -> Value {
        if let Some(map) = obj.as_object_mut() {
            map.insert("apiVersion".to_owned(), json!(api_version));
        }
        obj
    }
}

impl CustomBehaviour for CustomKind {
    fn id(&self) -> usize {
        self.id
    }

    fn singular(&self) -> &str {
        &self.singular
    }

    fn decode(&self, obj: Value) -> Result<Value, String> {
        let mut obj = self.with_api_version(obj, &self.api_version);
        let mut pruned = values::Pruned::default();
        values::prune(&self.schema, &mut obj, "", true, &mut pruned);
        values::apply_defaults(&self.schema, &mut obj);
        Ok(obj)
    }

    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        let mut copy = obj.clone();
        let mut pruned = values::Pruned::default();
        values::prune(&self.schema, &mut copy, "", true, &mut pruned);
        pruned.into_paths()
    }

    fn stored_to_served(&self, obj: Value) -> Value {
        let mut obj = self.with_api_version(obj, &self.api_version);
        values::apply_defaults(&self.schema, &mut obj);
        obj
    }

    fn served_to_stored(&self, obj: Value) -> Value {
        self.with_api_version(obj, &self.storage_api_version)
    }

    fn table(&self, objects: &[Value], include: IncludeObject, now: Timestamp) -> Value {
        self.printer.table(objects, include, now)
    }

    fn openapi_schema(&self) -> Value {
        self.openapi.clone()
    }

    fn scale_paths(&self) -> Option<&ScalePaths> {
        self.scale.as_ref()
    }
}

impl Strategy for CustomKind {
    /// The custom resource `statusStrategy.PrepareForUpdate` starts from the stored object:
    /// only the status and the managed fields change.
    fn status_metadata_reset(&self) -> MetadataReset {
        MetadataReset::All
    }

    fn prepare_for_create_in(
        &self,
        obj: &mut Value,
        _request: &RequestContext<'_>,
    ) -> Result<(), ApiError> {
        if self.terminating {
            return Err(ApiError {
                code: 405,
                reason: "MethodNotAllowed",
                message: "create not allowed while custom resource definition is terminating"
                    .to_owned(),
                details: None,
                continue_token: None,
            });
        }
        if self.status_enabled
            && let Some(map) = obj.as_object_mut()
        {
            map.remove("status");
        }
        Ok(())
    }

    /// Upstream bumps a custom resource's generation on any change but metadata (and status,
    /// when `/status` is a subresource), not only on `spec` changes.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(map) = v.as_object_mut() {
                map.remove("metadata");
                if self.status_enabled {
                    map.remove("status");
                }
            }
            v
        };
        let generation = crate::object::generation(old);
        let next = if strip(new) != strip(old) {
            generation + 1
        } else {
            generation
        };
        crate::object::set_meta(new, "generation", next);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        self.check(obj, None)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.check(new, Some(old))
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.check(new, Some(old))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn foo_crd() -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": {"name": "foos.samplecontroller.k8s.io"},
            "spec": {
                "group": "samplecontroller.k8s.io",
                "scope": "Namespaced",
                "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "listKind": "FooList", "shortNames": ["fo"]},
                "versions": [
                    {"name": "v1alpha1", "served": true, "storage": true,
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.availableReplicas"}},
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"replicas": {"type": "integer", "default": 1}}},
                        "status": {"type": "object", "properties": {"availableReplicas": {"type": "integer"}}}}}}},
                    {"name": "v1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                ],
            },
        }))
        .expect("crd")
    }

    #[test]
    fn every_served_version_gets_an_entry_the_preferred_first() {
        let defs = entries(&foo_crd(), false);
        let versions: Vec<&str> = defs.iter().map(|d| &*d.version).collect();
        assert_eq!(versions, ["v1", "v1alpha1"]);
        let alpha = &defs[1];
        assert_eq!(alpha.singular(), "foo");
        assert!(alpha.has_status());
        assert!(alpha.has_subresource(Subresource::Scale));
        assert_eq!(alpha.short_names.iter().collect::<Vec<_>>(), ["fo"]);
        assert_eq!(
            alpha.storage_root(),
            "/registry/samplecontroller.k8s.io/foos/"
        );
        assert_eq!(defs[0].storage_root(), alpha.storage_root());
        assert_ne!(defs[0].id(), alpha.id());
    }

    #[test]
    fn versions_share_storage_with_apiversion_rewritten_and_defaults_on_read() {
        let defs = entries(&foo_crd(), false);
        let (v1, alpha) = (&defs[0], &defs[1]);
        let stored = v1.to_storage(
            json!({"apiVersion": "samplecontroller.k8s.io/v1", "kind": "Foo", "spec": {}}),
        );
        assert_eq!(stored["apiVersion"], "samplecontroller.k8s.io/v1alpha1");
        let read = alpha.from_storage(stored.clone());
        assert_eq!(
            read["spec"]["replicas"], 1,
            "the alpha schema's default applies on read"
        );
        let as_v1 = v1.from_storage(stored);
        assert_eq!(as_v1["apiVersion"], "samplecontroller.k8s.io/v1");
        assert!(as_v1["spec"].get("replicas").is_none());
    }

    #[test]
    fn generation_follows_everything_but_metadata_and_status() {
        let defs = entries(&foo_crd(), false);
        let alpha = &defs[1];
        let old = json!({"metadata": {"generation": 2}, "spec": {"replicas": 1}, "status": {"availableReplicas": 0}});
        let mut same = json!({"metadata": {"generation": 2, "labels": {"a": "b"}}, "spec": {"replicas": 1}, "status": {"availableReplicas": 1}});
        alpha.strategy.prepare_for_update(&mut same, &old);
        assert_eq!(same["metadata"]["generation"], 2);
        let mut changed = json!({"metadata": {"generation": 2}, "spec": {"replicas": 3}});
        alpha.strategy.prepare_for_update(&mut changed, &old);
        assert_eq!(changed["metadata"]["generation"], 3);
    }

    #[test]
    fn the_published_schema_describes_the_common_fields() {
        let defs = entries(&foo_crd(), false);
        let schema = defs[1].custom.as_ref().expect("custom").openapi_schema();
        assert_eq!(
            schema["properties"]["metadata"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(
            schema["properties"]["spec"]["properties"]["replicas"]["type"],
            "integer"
        );
    }
}
