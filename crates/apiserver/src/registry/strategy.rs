//! The per-resource strategy: what the one generic registry asks each resource (defaults, validation, status, scope).
//!
//! As kube-apiserver's `rest.RESTCreateStrategy` / `RESTUpdateStrategy` /
//! `RESTGracefulDeleteStrategy`: the registry does everything common (metadata, optimistic
//! concurrency, finalizers, watch), and calls the strategy for what differs per resource.
//! Static facts (names, scope, selectable fields) live in [`ResourceInfo`].

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ApiError, GroupKind, GroupResource};
use crate::validation::{FieldError, NameRule};

/// A subresource a resource serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    /// `/status`: get, update and patch of `.status` only.
    Status,
    /// `/scale`: autoscaling/v1 `Scale` over `spec.replicas`.
    Scale,
    /// `pods/binding`: assigns a pod to a node.
    Binding,
    /// `pods/eviction`: a PodDisruptionBudget-checked delete.
    Eviction,
    /// `namespaces/finalize`: updates `spec.finalizers`.
    Finalize,
}

impl Subresource {
    /// The path segment, e.g. `status`.
    pub fn name(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Binding => "binding",
            Subresource::Eviction => "eviction",
            Subresource::Finalize => "finalize",
        }
    }
}

/// A field usable in a `fieldSelector`, read from the object at a JSON pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SelectableField {
    /// The selector's field name, e.g. `spec.nodeName`.
    pub name: &'static str,
    /// Where the value lives, e.g. `/spec/nodeName`.
    pub pointer: &'static str,
    /// The value when the field is absent (`""`, or `"false"` for booleans).
    pub default: &'static str,
}

impl SelectableField {
    /// A string field whose absence reads as `""`.
    pub const fn string(name: &'static str, pointer: &'static str) -> Self {
        Self {
            name,
            pointer,
            default: "",
        }
    }

    /// A boolean field whose absence reads as `"false"`.
    pub const fn boolean(name: &'static str, pointer: &'static str) -> Self {
        Self {
            name,
            pointer,
            default: "false",
        }
    }

    /// The field's value in `obj`, rendered as upstream's field sets do.
    pub fn value(&self, obj: &Value) -> String {
        match obj.pointer(self.pointer) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => self.default.to_owned(),
        }
    }
}

/// Static facts about a resource: names for discovery and errors, scope, subresources.
#[derive(Debug)]
pub struct ResourceInfo {
    /// API group; empty for core.
    pub group: &'static str,
    /// API version, e.g. `v1`.
    pub version: &'static str,
    /// Kind, e.g. `Pod`.
    pub kind: &'static str,
    /// Plural resource name (the URL segment), e.g. `pods`.
    pub plural: &'static str,
    /// Singular name, e.g. `pod`.
    pub singular: &'static str,
    /// kubectl short names, e.g. `po`.
    pub short_names: &'static [&'static str],
    /// Discovery categories, e.g. `all`.
    pub categories: &'static [&'static str],
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Subresources served under `/{name}/`.
    pub subresources: &'static [Subresource],
    /// Fields usable in `fieldSelector` beyond `metadata.name` and `metadata.namespace`.
    pub fields: &'static [SelectableField],
    /// The `{group}/{plural}` the objects are stored under (several versions or groups can
    /// share one, as `events` and `events.k8s.io/events` do).
    pub storage_resource: (&'static str, &'static str),
}

impl ResourceInfo {
    /// `apiVersion` of objects, e.g. `apps/v1` or `v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group/resource used in error messages.
    pub fn group_resource(&self) -> GroupResource<'static> {
        GroupResource {
            group: self.group,
            resource: self.plural,
        }
    }

    /// The group/kind used in `Invalid` errors.
    pub fn group_kind(&self) -> GroupKind<'static> {
        GroupKind {
            group: self.group,
            kind: self.kind,
        }
    }

    /// Whether the resource serves a subresource.
    pub fn has_subresource(&self, sub: Subresource) -> bool {
        self.subresources.contains(&sub)
    }

    /// The selectable field named `name`, including the generic metadata ones.
    pub fn field(&self, name: &str) -> Option<SelectableField> {
        const GENERIC: [SelectableField; 2] = [
            SelectableField::string("metadata.name", "/metadata/name"),
            SelectableField::string("metadata.namespace", "/metadata/namespace"),
        ];
        GENERIC
            .iter()
            .chain(self.fields.iter())
            .find(|f| f.name == name)
            .copied()
    }

    /// The storage key prefix of every object of this resource (ends with `/`).
    pub fn storage_root(&self) -> String {
        let (group, resource) = self.storage_resource;
        format!("/registry/{group}/{resource}/")
    }

    /// The storage key prefix of a namespace, or of everything when `namespace` is `None`.
    pub fn storage_prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}{ns}/", self.storage_root()),
            _ => self.storage_root(),
        }
    }

    /// The storage key of one object.
    pub fn storage_key(&self, namespace: &str, name: &str) -> String {
        if self.namespaced {
            format!("{}{namespace}/{name}", self.storage_root())
        } else {
            format!("{}{name}", self.storage_root())
        }
    }
}

/// Per-resource behaviour called by the generic registry. Every method has the common default;
/// a resource overrides what upstream's strategy for it does differently.
pub trait Strategy: Send + Sync + 'static {
    /// The resource's static facts.
    fn info(&self) -> &'static ResourceInfo;

    /// Decodes an incoming object as the typed resource, applies the scheme defaults
    /// (`SetDefaults_*`) and re-encodes it: unknown fields are dropped and a wrong type is an
    /// error message (answered as 400 BadRequest).
    fn decode(&self, obj: Value) -> Result<Value, String>;

    /// How names must look.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// Whether `.status` is a separate subresource (the main resource keeps the stored status
    /// and `/status` keeps the stored spec).
    fn has_status(&self) -> bool {
        self.info().has_subresource(Subresource::Status)
    }

    /// Create-time changes (`PrepareForCreate` plus mutating admission): reset status,
    /// start phases, add default tolerations.
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// Update-time changes of the main resource (`PrepareForUpdate`), after the registry has
    /// restored the stored status.
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) {}

    /// Resource-specific validation on create (`Validate`); metadata is validated generically.
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Resource-specific validation on update (`ValidateUpdate`); defaults to [`Self::validate`].
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }

    /// Status-update changes beyond the generic reset (the status strategies'
    /// `PrepareForUpdate`): `new` is the stored object with the requested status, and
    /// `requested_meta` the request's `metadata`. Most resources keep all stored metadata;
    /// Deployments let annotations through (the revision annotation is written this way).
    fn prepare_for_status_update(&self, _new: &mut Value, _requested_meta: Option<&Value>) {}

    /// Validation of a `/status` update.
    fn validate_status_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// The grace period for a graceful delete (`CheckGracefulDelete`), given the requested
    /// one; `None` when the resource is not deleted gracefully.
    fn graceful_delete_period(&self, _obj: &Value, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// Whether a delete answers with the deleted object rather than a `Status` (pods).
    fn returns_deleted_object(&self) -> bool {
        false
    }

    /// Whether an update of a missing object creates it (`AllowCreateOnUpdate`).
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// Converts a stored object to this resource's version (identity unless several versions
    /// share the storage, as events do).
    fn convert_from_storage(&self, obj: Value) -> Value {
        obj
    }

    /// Converts an object of this resource's version to the stored form.
    fn convert_to_storage(&self, obj: Value) -> Value {
        obj
    }
}

/// Decodes `obj` as `K`, lets `default` fill in scheme defaults, and encodes it back: the
/// common body of [`Strategy::decode`].
pub fn typed_roundtrip<K>(
    obj: Value,
    kind: &str,
    default: impl FnOnce(&mut K),
) -> Result<Value, String>
where
    K: DeserializeOwned + Serialize,
{
    typed_roundtrip_checked(obj, kind, |typed: &mut K| {
        default(typed);
        Ok::<(), std::convert::Infallible>(())
    })
}

/// [`typed_roundtrip`] whose `decode` step can fail like Go's decoding does (an unparsable
/// `resource.Quantity`): its error reads as the decode error kube-apiserver returns.
pub fn typed_roundtrip_checked<K, E: std::fmt::Display>(
    obj: Value,
    kind: &str,
    decode: impl FnOnce(&mut K) -> Result<(), E>,
) -> Result<Value, String>
where
    K: DeserializeOwned + Serialize,
{
    let cannot = |e: &dyn std::fmt::Display| {
        format!("{kind} in version \"v1\" cannot be handled as a {kind}: {e}")
    };
    let mut typed: K = serde_json::from_value(obj).map_err(|e| cannot(&e))?;
    decode(&mut typed).map_err(|e| cannot(&e))?;
    serde_json::to_value(&typed).map_err(|e| format!("encoding {kind}: {e}"))
}

/// Decodes `obj` as `K` for reading, or `None` when it does not fit the type.
pub fn typed<K: DeserializeOwned>(obj: &Value) -> Option<K> {
    K::deserialize(obj).ok()
}

/// Validation helper: an error unless `ApiError` is empty.
pub fn check(info: &ResourceInfo, name: &str, errs: Vec<FieldError>) -> Result<(), ApiError> {
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(info.group_kind(), name, &errs))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    static INFO: ResourceInfo = ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        short_names: &["deploy"],
        categories: &["all"],
        namespaced: true,
        subresources: &[Subresource::Status, Subresource::Scale],
        fields: &[SelectableField::boolean("spec.paused", "/spec/paused")],
        storage_resource: ("apps", "deployments"),
    };

    #[test]
    fn keys_and_prefixes() {
        assert_eq!(
            INFO.storage_key("ns", "a"),
            "/registry/apps/deployments/ns/a"
        );
        assert_eq!(
            INFO.storage_prefix(Some("ns")),
            "/registry/apps/deployments/ns/"
        );
        assert_eq!(INFO.storage_prefix(None), "/registry/apps/deployments/");
        assert_eq!(INFO.api_version(), "apps/v1");
    }

    #[test]
    fn selectable_fields_render_values() {
        let obj = json!({"metadata": {"name": "a"}, "spec": {"paused": true}});
        assert_eq!(
            INFO.field("metadata.name").map(|f| f.value(&obj)),
            Some("a".to_owned())
        );
        assert_eq!(
            INFO.field("metadata.namespace").map(|f| f.value(&obj)),
            Some(String::new())
        );
        assert_eq!(
            INFO.field("spec.paused").map(|f| f.value(&obj)),
            Some("true".to_owned())
        );
        assert_eq!(
            INFO.field("spec.paused").map(|f| f.value(&json!({}))),
            Some("false".to_owned())
        );
        assert!(INFO.field("spec.replicas").is_none());
    }

    #[test]
    fn typed_roundtrip_drops_unknown_fields_and_rejects_wrong_types() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let out = typed_roundtrip::<ConfigMap>(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "bogus": 1}),
            "ConfigMap",
            |_| {},
        )
        .expect("decodes");
        assert!(out.get("bogus").is_none());
        let err = typed_roundtrip::<ConfigMap>(json!({"data": 5}), "ConfigMap", |_| {})
            .expect_err("wrong type");
        assert!(err.starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap"));
    }
}
