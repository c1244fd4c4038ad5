//! The per-resource strategy: what the one generic registry asks each resource (validation, create/update preparation, status, graceful deletion).
//!
//! As kube-apiserver's `rest.RESTCreateStrategy` / `RESTUpdateStrategy` /
//! `RESTGracefulDeleteStrategy`: the registry does everything common (metadata, optimistic
//! concurrency, finalizers, watch), and calls the strategy for what differs per resource.
//! Static facts (names, scope, verbs, subresources, storage) and the typed decode live in the
//! resource's [`ResourceDef`](crate::registry::resource::ResourceDef), which holds its strategy.

use k8s_openapi::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::auth::authenticator::Authenticator;
use crate::auth::authorizer::Authorizer;
use crate::auth::user::UserInfo;
use crate::error::ApiError;
use crate::registry::subresource::Subresource;
use crate::validation::{FieldError, NameRule};

/// What a create may read of its request besides the object (upstream's request context):
/// who asks, and the server's authenticator and authorizer, which the review APIs answer from.
#[derive(Clone, Copy, Debug)]
pub struct RequestContext<'a> {
    /// The requesting user (the server's own identity for its internal writes).
    pub user: &'a UserInfo,
    /// The namespace of the request's path; empty for cluster-scoped requests.
    pub namespace: &'a str,
    /// Authenticates bearer tokens (`tokenreviews`).
    pub authenticator: &'a dyn Authenticator,
    /// Decides access (`subjectaccessreviews` and friends).
    pub authorizer: &'a dyn Authorizer,
}

/// Per-resource behaviour called by the generic registry. Every method has the common default;
/// a resource overrides what upstream's strategy for it does differently.
pub trait Strategy: Send + Sync + 'static {
    /// How names must look.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// Create-time changes (`PrepareForCreate` plus mutating admission): reset status,
    /// start phases, add default tolerations. For a never-stored resource it completes the
    /// answer (a review's `status`), after [`Self::validate`].
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// [`Self::prepare_for_create`] for a strategy that needs the request: a
    /// CertificateSigningRequest records its requestor, a review answers from the
    /// authenticator or authorizer. An error fails the create (upstream's review `Create`s
    /// answer some requests with 400). Defaults to [`Self::prepare_for_create`].
    fn prepare_for_create_in(
        &self,
        obj: &mut Value,
        _request: &RequestContext<'_>,
    ) -> Result<(), ApiError> {
        self.prepare_for_create(obj);
        Ok(())
    }

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

    /// The metadata a `/status` write cannot change: what the status strategy's
    /// `PrepareForUpdate` puts back from the stored object (the `metadata` paths of its
    /// `GetResetFields`). Most of upstream's status strategies reset only the spec, so a
    /// status patch may also set labels, annotations, finalizers and owner references.
    fn status_metadata_reset(&self) -> MetadataReset {
        MetadataReset::None
    }

    /// Status-update changes beyond the generic ones (the rest of the status strategy's
    /// `PrepareForUpdate`): `new` is the request's object with the stored spec and the
    /// [`Self::status_metadata_reset`] applied, `old` the stored object (a
    /// CertificateSigningRequest keeps its stored approval conditions).
    fn prepare_for_status_update(&self, _new: &mut Value, _old: &Value) {}

    /// Validation of a `/status` update.
    fn validate_status_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// `/approval`-update changes (`csrApprovalStrategy.PrepareForUpdate`): `new` is the
    /// stored object with the requested status, `old` the stored object. Only resources
    /// serving [`Subresource::Approval`] are asked.
    fn prepare_for_approval_update(&self, _new: &mut Value, _old: &Value) {}

    /// Validation of an `/approval` update.
    fn validate_approval_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// The grace period for a graceful delete (`CheckGracefulDelete`), given the requested
    /// one; `None` when the resource is not deleted gracefully.
    fn graceful_delete_period(&self, _obj: &Value, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// Why deleting the object named `name` is forbidden (a REST `Delete` override, such as
    /// the system priority classes'); `None` lets the delete through. Upstream checks only
    /// single deletes, not `deletecollection`.
    fn forbid_delete(&self, _name: &str) -> Option<&'static str> {
        None
    }

    /// Whether a delete that names no propagation policy orphans the dependents (upstream's
    /// `DefaultGarbageCollectionPolicy` = `OrphanDependents`: batch/v1 Jobs and core/v1
    /// ReplicationControllers, for backwards compatibility).
    fn orphans_by_default(&self) -> bool {
        false
    }

    /// The warning a delete that names no propagation policy gets when it orphans by default
    /// (upstream warns for Jobs, whose pods would otherwise linger unnoticed).
    fn orphan_warning(&self) -> Option<&'static str> {
        None
    }

    /// Changes the first delete of an object makes before it waits for finalizers (upstream's
    /// CRD `Delete`, which adds its cleanup finalizer and a `Terminating` condition); whether
    /// it changed anything. Called only while the object is not yet being deleted.
    fn prepare_for_delete(&self, _obj: &mut Value) -> bool {
        false
    }

    /// Whether a delete answers with the deleted object rather than a `Status` (pods).
    fn returns_deleted_object(&self) -> bool {
        false
    }

    /// Whether an update of a missing object creates it (`AllowCreateOnUpdate`).
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// Why the connect subresource `sub` of the existing object `obj` cannot be served (pods,
    /// services and nodes say why a simulated node cannot answer); `None` gives the generic
    /// reason. Only resources serving a connect subresource are asked.
    fn connect_refusal(&self, _obj: &Value, _sub: Subresource) -> Option<String> {
        None
    }

    /// What writing an object of this resource grants, for RBAC's escalation check (upstream
    /// wraps the four RBAC resources' storage in its `policybased` storage).
    fn grants(&self) -> Grants {
        Grants::Nothing
    }
}

/// What writing an object grants ([`Strategy::grants`]): a user may grant only what they
/// hold, unless allowed to `escalate` (rules) or `bind` (a role reference).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grants {
    /// No permissions: not checked.
    Nothing,
    /// The object's `rules` (Roles and ClusterRoles).
    Rules,
    /// The rules of the role its `roleRef` names (RoleBindings and ClusterRoleBindings).
    RoleRef,
}

/// The strategy an entry holds: a built-in's `static` one, or the one a custom resource's
/// entry shares with nothing else and drops with its CRD.
#[derive(Clone)]
pub enum StrategyRef {
    /// A built-in entry's strategy.
    Static(&'static dyn Strategy),
    /// A strategy built at run time (a custom resource's, from its CRD's schema).
    Shared(std::sync::Arc<dyn Strategy>),
}

impl std::ops::Deref for StrategyRef {
    type Target = dyn Strategy;

    fn deref(&self) -> &Self::Target {
        match self {
            StrategyRef::Static(s) => *s,
            StrategyRef::Shared(s) => s.as_ref(),
        }
    }
}

impl std::fmt::Debug for StrategyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StrategyRef::Static(_) => "StrategyRef::Static",
            StrategyRef::Shared(_) => "StrategyRef::Shared",
        })
    }
}

/// Which of the stored metadata a write puts back over the request's (see
/// [`Strategy::status_metadata_reset`]). The fields the server owns (uid, resourceVersion,
/// creationTimestamp, generation, the deletion fields) are kept on every write regardless.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataReset {
    /// The request's metadata is taken.
    None,
    /// These `metadata` fields keep their stored values (or stay absent).
    Fields(&'static [&'static str]),
    /// All of the stored metadata is kept but `managedFields`, which records the write
    /// (FlowSchemas, PriorityLevelConfigurations and custom resources).
    All,
}

impl MetadataReset {
    /// The fields `metav1.ResetObjectMetaForStatus` restores.
    pub const FOR_STATUS: MetadataReset = MetadataReset::Fields(&[
        "deletionTimestamp",
        "generation",
        "labels",
        "annotations",
        "finalizers",
        "ownerReferences",
    ]);

    /// Puts the reset fields of the stored `old` metadata back into `new`.
    pub fn apply(self, new: &mut Value, old: &Value) {
        let stored = old.get("metadata").and_then(Value::as_object);
        let restore = |meta: &mut serde_json::Map<String, Value>, field: &str| {
            match stored.and_then(|m| m.get(field)) {
                Some(v) => meta.insert(field.to_owned(), v.clone()),
                None => meta.remove(field),
            };
        };
        match self {
            MetadataReset::None => {}
            MetadataReset::Fields(fields) => {
                if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                    for field in fields {
                        restore(meta, field);
                    }
                }
            }
            MetadataReset::All => {
                let managed = new
                    .get("metadata")
                    .and_then(|m| m.get("managedFields"))
                    .cloned();
                let mut meta = stored.cloned().unwrap_or_default();
                match managed {
                    Some(m) => meta.insert("managedFields".to_owned(), m),
                    None => meta.remove("managedFields"),
                };
                new["metadata"] = Value::Object(meta);
            }
        }
    }
}

/// The strategy of a resource with no behaviour beyond the generic rules.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultStrategy;

impl Strategy for DefaultStrategy {}

/// Decodes `obj` as `K`, lets `default` fill in scheme defaults, and encodes it back: the
/// common body of every resource's decode (see
/// [`ResourceDef::decode_with`](crate::registry::resource::ResourceDef::decode_with)).
pub fn typed_roundtrip<K>(obj: Value, default: impl FnOnce(&mut K)) -> Result<Value, String>
where
    K: Resource + DeserializeOwned + Serialize,
{
    typed_roundtrip_checked(obj, |typed: &mut K| {
        default(typed);
        Ok::<(), std::convert::Infallible>(())
    })
}

/// [`typed_roundtrip`] whose `decode` step can fail like Go's decoding does (an unparsable
/// `resource.Quantity`): its error reads as the decode error kube-apiserver returns.
pub fn typed_roundtrip_checked<K, E: std::fmt::Display>(
    obj: Value,
    decode: impl FnOnce(&mut K) -> Result<(), E>,
) -> Result<Value, String>
where
    K: Resource + DeserializeOwned + Serialize,
{
    let kind = K::KIND;
    let cannot = |e: &dyn std::fmt::Display| {
        format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {e}",
            version = K::VERSION
        )
    };
    let mut typed: K = serde_json::from_value(obj).map_err(|e| cannot(&e))?;
    decode(&mut typed).map_err(|e| cannot(&e))?;
    serde_json::to_value(&typed).map_err(|e| format!("encoding {kind}: {e}"))
}

/// Decodes `obj` as `K` with no defaults: the decode of a resource whose scheme has none.
pub fn decode_as<K>(obj: Value) -> Result<Value, String>
where
    K: Resource + DeserializeOwned + Serialize,
{
    typed_roundtrip::<K>(obj, |_| {})
}

/// Decodes `obj` as `K` for reading, or `None` when it does not fit the type.
pub fn typed<K: DeserializeOwned>(obj: &Value) -> Option<K> {
    K::deserialize(obj).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn metadata_resets_put_back_the_stored_fields() {
        let old = json!({"metadata": {"name": "a", "labels": {"l": "old"}, "finalizers": ["f"],
            "managedFields": [{"manager": "old"}]}});
        let new = json!({"metadata": {"name": "a", "labels": {"l": "new"},
            "annotations": {"a": "new"}, "managedFields": [{"manager": "new"}]}});
        let cases = [
            ("none", MetadataReset::None, new["metadata"].clone()),
            (
                "labels",
                MetadataReset::Fields(&["labels"]),
                json!({"name": "a", "labels": {"l": "old"}, "annotations": {"a": "new"},
                    "managedFields": [{"manager": "new"}]}),
            ),
            (
                "for status",
                MetadataReset::FOR_STATUS,
                json!({"name": "a", "labels": {"l": "old"}, "finalizers": ["f"],
                    "managedFields": [{"manager": "new"}]}),
            ),
            (
                "all",
                MetadataReset::All,
                json!({"name": "a", "labels": {"l": "old"}, "finalizers": ["f"],
                    "managedFields": [{"manager": "new"}]}),
            ),
        ];
        for (name, reset, want) in cases {
            let mut got = new.clone();
            reset.apply(&mut got, &old);
            assert_eq!(got["metadata"], want, "case {name}");
        }
    }

    #[test]
    fn typed_roundtrip_drops_unknown_fields_and_rejects_wrong_types() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let out = decode_as::<ConfigMap>(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "bogus": 1}),
        )
        .expect("decodes");
        assert!(out.get("bogus").is_none());
        let err = decode_as::<ConfigMap>(json!({"data": 5})).expect_err("wrong type");
        assert!(err.starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap"));
    }
}
