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

    /// Status-update changes beyond the generic reset (the status strategies'
    /// `PrepareForUpdate`): `new` is the stored object with the requested status, and
    /// `requested_meta` the request's `metadata`. Most resources keep all stored metadata;
    /// Deployments let annotations through (the revision annotation is written this way).
    fn prepare_for_status_update(&self, _new: &mut Value, _requested_meta: Option<&Value>) {}

    /// [`Self::prepare_for_status_update`] with the stored object `old` at hand, for a status
    /// strategy that keeps parts of the stored status (a CertificateSigningRequest's approval
    /// conditions). Defaults to [`Self::prepare_for_status_update`].
    fn prepare_for_status_update_from(
        &self,
        new: &mut Value,
        _old: &Value,
        requested_meta: Option<&Value>,
    ) {
        self.prepare_for_status_update(new, requested_meta);
    }

    /// Validation of a `/status` update.
    fn validate_status_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// `/approval`-update changes (`csrApprovalStrategy.PrepareForUpdate`): `new` is the
    /// stored object with the requested status, `old` the stored object. Only resources
    /// serving [`Subresource::Approval`](crate::registry::subresource::Subresource::Approval)
    /// are asked.
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

/// The strategy of a resource with no behaviour beyond the generic rules.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultStrategy;

impl Strategy for DefaultStrategy {}

/// Writes the request's `fields` of metadata (e.g. `annotations`) over `new`'s, a field the
/// request leaves out being removed: for the status strategies of resources whose upstream
/// `PrepareForUpdate` resets only the spec (no `ResetObjectMetaForStatus`), so a `/status`
/// write keeps the labels or annotations it carries.
pub fn keep_requested_meta(new: &mut Value, requested_meta: Option<&Value>, fields: &[&str]) {
    let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    for field in fields {
        match requested_meta.and_then(|m| m.get(*field)) {
            Some(value) => {
                meta.insert((*field).to_owned(), value.clone());
            }
            None => {
                meta.remove(*field);
            }
        }
    }
}

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
