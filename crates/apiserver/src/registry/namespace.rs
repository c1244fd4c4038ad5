//! Namespace lifecycle: namespace deletion (`Terminating`), `/finalize`, and the default namespaces.

use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::object;
use crate::pointer::At;
use crate::registry::options::WriteOptions;
use crate::registry::resource::ResourceDef;
use crate::registry::store_hooks::StoreHooks;
use crate::registry::{Registry, decode_stored, encode_for_storage};
use crate::resources::namespace as ns_resource;
use crate::storage;

/// Namespaces created at start, as kube-apiserver's system namespaces controller does.
pub const DEFAULT_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

impl Registry {
    /// Creates the default namespaces that do not exist yet.
    pub async fn ensure_default_namespaces(&self) -> Result<()> {
        let Some(def) = self.served(&ns_resource::NAMESPACES) else {
            return Ok(());
        };
        for name in DEFAULT_NAMESPACES {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            match self.create(def, "", body, &WriteOptions::default()).await {
                Ok(_) => {}
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The first delete of a namespace: sets `deletionTimestamp` and phase `Terminating`
    /// (the namespace controller empties it and clears `spec.finalizers` via `/finalize`).
    /// Returns `None` when the namespace is already terminating with no finalizers left,
    /// so the caller deletes it for real, as upstream's namespace `REST.Delete`.
    pub(crate) async fn begin_namespace_delete(
        &self,
        def: &ResourceDef,
        name: &str,
        dry_run: bool,
    ) -> Result<Option<Value>> {
        let gr = ns_resource::NAMESPACES.group_resource();
        for _ in 0..super::MAX_WRITE_RETRIES {
            let Some((mut ns, kv)) = self.get_kv(def, "", name).await? else {
                return Err(ApiError::not_found(gr, name));
            };
            if object::deletion_timestamp(&ns).is_some() {
                let finalizers_left = ns
                    .at("/spec/finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|f| !f.is_empty());
                return Ok(finalizers_left.then_some(ns));
            }
            object::set_meta(&mut ns, "deletionTimestamp", object::now_rfc3339());
            object::set_meta(&mut ns, "deletionGracePeriodSeconds", 0);
            ns["status"]["phase"] = Value::String("Terminating".to_owned());
            if dry_run {
                return Ok(Some(ns));
            }
            let bytes = encode_for_storage(def, &ns)?;
            match self.storage().update(&kv.key, kv.mod_revision, bytes).await {
                Ok(rev) => {
                    object::set_resource_version(&mut ns, rev);
                    return Ok(Some(ns));
                }
                Err(storage::Error::Conflict { .. }) => continue,
                Err(e) => return Err(ApiError::from_storage(e, gr, name)),
            }
        }
        Err(ApiError::stale(gr, name))
    }

    /// `PUT namespaces/{name}/finalize`: replaces `spec.finalizers` only. When that leaves a
    /// namespace being deleted with no `spec.finalizers` and no `metadata.finalizers`, the
    /// namespace is removed from storage instead (upstream's `ShouldDeleteNamespaceDuringUpdate`
    /// on the finalize store): this is how a namespace disappears once the namespace controller
    /// has emptied it. The last state is returned either way.
    pub async fn finalize_namespace(
        &self,
        def: &ResourceDef,
        name: &str,
        body: Value,
        dry_run: bool,
    ) -> Result<Value> {
        let gr = ns_resource::NAMESPACES.group_resource();
        let body = def.check_kind(body)?;
        let body = def.decode(body).map_err(ApiError::bad_request)?;
        let requested_rv = super::parse_resource_version(object::resource_version(&body))?;
        let finalizers = body
            .at("/spec/finalizers")
            .cloned()
            .unwrap_or_else(|| json!([]));
        for _ in 0..super::MAX_WRITE_RETRIES {
            let key = ns_resource::NAMESPACES.storage_key("", name);
            let kv = self
                .storage()
                .get(&key)
                .await
                .map_err(|e| ApiError::from_storage(e, gr, name))?
                .ok_or_else(|| ApiError::not_found(gr, name))?;
            if let Some(rv) = requested_rv
                && rv != kv.mod_revision
            {
                return Err(ApiError::stale(gr, name));
            }
            let mut ns = decode_stored(def, &kv)?;
            ns["spec"]["finalizers"] = finalizers.clone();
            if dry_run {
                return Ok(ns);
            }
            if should_delete_namespace_during_update(&ns) {
                match self.storage().delete(&key, kv.mod_revision).await {
                    Ok(_) => return Ok(ns),
                    Err(storage::Error::Conflict { .. }) if requested_rv.is_none() => continue,
                    Err(e) => return Err(ApiError::from_storage(e, gr, name)),
                }
            }
            let bytes = encode_for_storage(def, &ns)?;
            match self.storage().update(&key, kv.mod_revision, bytes).await {
                Ok(rev) => {
                    object::set_resource_version(&mut ns, rev);
                    return Ok(ns);
                }
                Err(storage::Error::Conflict { .. }) if requested_rv.is_none() => continue,
                Err(e) => return Err(ApiError::from_storage(e, gr, name)),
            }
        }
        Err(ApiError::stale(gr, name))
    }
}

/// Whether an update leaving the namespace as `ns` deletes it, as upstream's
/// `ShouldDeleteNamespaceDuringUpdate`: no `spec.finalizers` left, and the generic rule (being
/// deleted with no grace period left and no `metadata.finalizers`).
fn should_delete_namespace_during_update(ns: &Value) -> bool {
    let spec_finalizers_left = ns
        .at("/spec/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    !spec_finalizers_left
        && object::finalizers(ns).is_empty()
        && object::deletion_timestamp(ns).is_some()
        && object::deletion_grace_period(ns).unwrap_or(0) == 0
}
/// The namespace storage's delete (upstream's namespace `REST.Delete`): the first delete turns
/// the namespace Terminating and waits for the namespace controller to empty it and clear
/// `spec.finalizers`; a delete of a terminating namespace with none left removes it.
#[derive(Debug, Default)]
pub struct NamespaceHooks;

#[async_trait::async_trait]
impl StoreHooks for NamespaceHooks {
    fn begins_delete(&self) -> bool {
        true
    }

    async fn begin_delete(
        &self,
        registry: &Registry,
        def: &ResourceDef,
        name: &str,
        dry_run: bool,
    ) -> Result<Option<Value>> {
        registry.begin_namespace_delete(def, name, dry_run).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_deleted_during_update_once_every_finalizer_is_gone() {
        struct Case {
            name: &'static str,
            ns: Value,
            want: bool,
        }
        let deleting = |spec: Value, meta: Value| {
            json!({"metadata": {"name": "a", "deletionTimestamp": "2025-01-01T00:00:00Z",
                "deletionGracePeriodSeconds": 0, "finalizers": meta}, "spec": {"finalizers": spec}})
        };
        let cases = [
            Case {
                name: "all finalizers gone",
                ns: deleting(json!([]), json!([])),
                want: true,
            },
            Case {
                name: "no finalizer fields at all",
                ns: json!({"metadata": {"name": "a", "deletionTimestamp": "2025-01-01T00:00:00Z"}}),
                want: true,
            },
            Case {
                name: "spec finalizer left",
                ns: deleting(json!(["kubernetes"]), json!([])),
                want: false,
            },
            Case {
                name: "metadata finalizer left",
                ns: deleting(json!([]), json!(["example.com/hold"])),
                want: false,
            },
            Case {
                name: "not being deleted",
                ns: json!({"metadata": {"name": "a"}, "spec": {"finalizers": []}}),
                want: false,
            },
        ];
        for case in cases {
            assert_eq!(
                should_delete_namespace_during_update(&case.ns),
                case.want,
                "{}",
                case.name
            );
        }
    }
}
