//! The API server's CRD controller: upstream's naming, establishing and finalizing controllers in one loop, and the registry's custom resource set kept in step with the CRDs.
//!
//! Every pass reads all CRDs (a cluster has few) in creation order and, for each:
//! - names: the requested names are accepted unless another CRD of the group already has
//!   one of them (or a built-in resource has the plural): `NamesAccepted` (`NoConflicts`, or
//!   `PluralConflict` / `SingularConflict` / `KindConflict` / `ListKindConflict`) and
//!   `status.acceptedNames`;
//! - `Established` once the initial names are accepted (`InitialNamesAccepted`), or `False`
//!   (`NotAccepted`) while they are not;
//! - a deleted CRD (held by [`CLEANUP_FINALIZER`]): `Terminating` (`InstanceDeletionInProgress`),
//!   every custom resource deleted, then the finalizer removed and the CRD gone
//!   (`InstanceDeletionFailed` while some remain, retried every second).
//!
//! Then every served version of every Established CRD becomes an entry of the registry's
//! custom set (replaced only when a CRD changed), and the local APIServices follow.
//! [`run`] repeats the pass on every change of a CRD in the store.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::crd_strategy::set_condition;
use super::{CLEANUP_FINALIZER, custom_kind, is_established};
use crate::error::{ApiError, Result};
use crate::object;
use crate::pointer::At;
use crate::registry::Registry;
use crate::registry::delete::DeleteOptions;
use crate::registry::list::ListOptions;
use crate::registry::options::WriteOptions;
use crate::registry::resource::ResourceDef;
use crate::registry::update::Target;
use crate::resources::apiextensions::CUSTOM_RESOURCE_DEFINITIONS as CRDS;

/// How often a pass repeats while a CRD waits for its custom resources to go.
const TERMINATING_RETRY: Duration = Duration::from_secs(1);
/// How often a pass repeats with nothing to wait for (a missed event is healed by then).
const RESYNC: Duration = Duration::from_secs(30);
/// The field manager of the controller's status writes.
const MANAGER: &str = "kube-apiserver";

/// The state a pass compares against to know whether the custom set must be rebuilt.
#[derive(Default, Debug)]
pub struct CrdController {
    /// `(name, resourceVersion)` of every CRD the current custom set was built from.
    built_from: Vec<(String, String)>,
}

/// What a CRD's requested names collide with.
struct Conflict {
    reason: &'static str,
    message: String,
}

fn requested(crd: &CustomResourceDefinition) -> &CustomResourceDefinitionNames {
    &crd.spec.names
}

fn accepted(crd: &CustomResourceDefinition) -> Option<&CustomResourceDefinitionNames> {
    crd.status
        .as_ref()
        .and_then(|s| s.accepted_names.as_ref())
        .filter(|n| !n.plural.is_empty())
}

/// The first name of `crd` another CRD of its group (or a built-in resource) already has.
fn conflict(
    crd: &CustomResourceDefinition,
    others: &[&CustomResourceDefinitionNames],
    builtin: &[&ResourceDef],
) -> Option<Conflict> {
    let names = requested(crd);
    let in_use = |reason: &'static str, name: &str| Conflict {
        reason,
        message: format!("{name:?} is already in use"),
    };
    let plural_taken = others.iter().any(|o| o.plural == names.plural)
        || builtin
            .iter()
            .any(|d| d.group == crd.spec.group && d.plural == names.plural);
    if plural_taken {
        return Some(in_use("PluralConflict", &names.plural));
    }
    let singular = names.singular.clone().unwrap_or_default();
    if others
        .iter()
        .any(|o| o.singular.as_deref() == Some(singular.as_str()))
    {
        return Some(in_use("SingularConflict", &singular));
    }
    if others.iter().any(|o| o.kind == names.kind) {
        return Some(in_use("KindConflict", &names.kind));
    }
    let list_kind = names.list_kind.clone().unwrap_or_default();
    if others
        .iter()
        .any(|o| o.list_kind.as_deref() == Some(list_kind.as_str()))
    {
        return Some(in_use("ListKindConflict", &list_kind));
    }
    None
}

impl CrdController {
    /// One pass over every CRD (see the [module docs](self)); `Ok(true)` while a deleted CRD
    /// still waits for its custom resources.
    pub async fn sync_all(&mut self, registry: &Registry) -> Result<bool> {
        let list = registry.list(&CRDS, None, &ListOptions::default()).await?;
        let mut items: Vec<Value> = match list.get("items") {
            Some(Value::Array(items)) => items.clone(),
            _ => Vec::new(),
        };
        items.sort_by(|a, b| {
            let key = |o: &Value| {
                (
                    object::str_at(o, &["metadata", "creationTimestamp"])
                        .unwrap_or("")
                        .to_owned(),
                    object::name(o).to_owned(),
                )
            };
            key(a).cmp(&key(b))
        });
        let crds: Vec<CustomResourceDefinition> = items
            .iter()
            .filter_map(|o| serde_json::from_value(o.clone()).ok())
            .collect();
        let builtin: Vec<&ResourceDef> = registry.resources().builtin().to_vec();
        let mut pending = false;
        let mut served = Vec::new();
        for (i, crd) in crds.iter().enumerate() {
            let others: Vec<&CustomResourceDefinitionNames> = crds
                .iter()
                .enumerate()
                .filter(|(j, o)| *j != i && o.spec.group == crd.spec.group)
                .filter_map(|(j, o)| {
                    // An earlier CRD claims its requested names (it is accepted first in
                    // this pass); a later one only what it was already given.
                    if j < i {
                        accepted(o).or(Some(requested(o)))
                    } else {
                        accepted(o)
                    }
                })
                .collect();
            let conflict = conflict(crd, &others, &builtin);
            let mut obj = items[i].clone();
            let name = object::name(&obj).to_owned();
            let deleting = object::deletion_timestamp(&obj).is_some();
            match &conflict {
                None => {
                    obj["status"]["acceptedNames"] =
                        serde_json::to_value(requested(crd)).unwrap_or(Value::Null);
                    set_condition(
                        &mut obj,
                        "NamesAccepted",
                        "True",
                        "NoConflicts",
                        "no conflicts found",
                    );
                    if !is_established(crd) {
                        set_condition(
                            &mut obj,
                            "Established",
                            "True",
                            "InitialNamesAccepted",
                            "the initial names have been accepted",
                        );
                    }
                }
                Some(c) => {
                    if obj.at("/status/acceptedNames").is_none() {
                        obj["status"]["acceptedNames"] = json!({"plural": "", "kind": ""});
                    }
                    set_condition(&mut obj, "NamesAccepted", "False", c.reason, &c.message);
                    if !is_established(crd) {
                        set_condition(
                            &mut obj,
                            "Established",
                            "False",
                            "NotAccepted",
                            "not all names are accepted",
                        );
                    }
                }
            }
            if deleting {
                set_condition(
                    &mut obj,
                    "Terminating",
                    "True",
                    "InstanceDeletionInProgress",
                    "CustomResource deletion is in progress",
                );
            }
            let obj = if obj.get("status") != items[i].get("status") {
                match write_status(registry, &name, obj).await {
                    Ok(written) => written,
                    // Changed meanwhile: the next pass (its watch event) sees the new one.
                    Err(e) if e.code == 409 => continue,
                    Err(e) => return Err(e),
                }
            } else {
                obj
            };
            let Ok(crd) = serde_json::from_value::<CustomResourceDefinition>(obj.clone()) else {
                continue;
            };
            let entries = if is_established(&crd) && accepted(&crd).is_some() {
                custom_kind::entries(&crd, deleting)
            } else {
                Vec::new()
            };
            if deleting
                && object::finalizers(&obj)
                    .iter()
                    .any(|f| f == CLEANUP_FINALIZER)
            {
                if self.finalize(registry, &obj, &entries).await? {
                    continue;
                }
                pending = true;
            }
            served.push((name, object::resource_version(&obj).to_owned(), entries));
        }
        let fingerprint: Vec<(String, String)> = served
            .iter()
            .map(|(n, rv, _)| (n.clone(), rv.clone()))
            .collect();
        if fingerprint != self.built_from {
            let defs = served.into_iter().flat_map(|(_, _, e)| e).collect();
            registry.set_custom_resources(defs);
            self.built_from = fingerprint;
            if let Err(e) = registry.ensure_local_api_services().await {
                tracing::warn!(error = %e, "unable to sync the APIServices of custom resources");
            }
        }
        Ok(pending)
    }

    /// Deletes every custom resource of a deleted CRD, then its cleanup finalizer (which
    /// deletes the CRD); `Ok(true)` once the CRD is gone.
    async fn finalize(
        &self,
        registry: &Registry,
        crd: &Value,
        entries: &[Arc<ResourceDef>],
    ) -> Result<bool> {
        let name = object::name(crd).to_owned();
        if let Some(def) = entries.first() {
            let list = registry.list(def, None, &ListOptions::default()).await?;
            let items = list
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if !items.is_empty() {
                let opts = DeleteOptions {
                    propagation_policy: Some("Background".to_owned()),
                    ..DeleteOptions::default()
                };
                let mut failed = None;
                for item in &items {
                    if object::deletion_timestamp(item).is_some() {
                        continue;
                    }
                    let ns = object::namespace(item);
                    if let Err(e) = registry.delete(def, ns, object::name(item), &opts).await
                        && e.code != 404
                    {
                        failed = Some(e.message);
                    }
                }
                let mut status = crd.clone();
                let (reason, message) = match failed {
                    Some(m) => (
                        "InstanceDeletionFailed",
                        format!("could not delete instances: {m}"),
                    ),
                    None => (
                        "InstanceDeletionCheck",
                        format!(
                            "could not confirm zero CustomResources remaining: {} remain",
                            items.len()
                        ),
                    ),
                };
                set_condition(&mut status, "Terminating", "True", reason, &message);
                if status.get("status") != crd.get("status") {
                    let _ = write_status(registry, &name, status).await;
                }
                return Ok(false);
            }
        }
        let mut obj = registry.get(&CRDS, "", &name).await?;
        let finalizers: Vec<String> = object::finalizers(&obj)
            .into_iter()
            .filter(|f| f != CLEANUP_FINALIZER)
            .collect();
        object::set_finalizers(&mut obj, finalizers);
        match registry
            .update(&CRDS, "", &name, obj, Target::Main, &manager_options())
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.code == 409 || e.code == 404 => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn manager_options() -> WriteOptions {
    WriteOptions {
        field_manager: Some(MANAGER.to_owned()),
        ..WriteOptions::default()
    }
}

/// Writes a CRD's status through `/status`.
async fn write_status(registry: &Registry, name: &str, obj: Value) -> Result<Value> {
    registry
        .update(&CRDS, "", name, obj, Target::Status, &manager_options())
        .await
        .map(|outcome| outcome.object)
}

/// Runs passes until `shutdown`: on every change of a CRD in the store, every second while a
/// deleted CRD waits, and every 30 s regardless.
pub async fn run(
    registry: Arc<Registry>,
    mut controller: CrdController,
    shutdown: CancellationToken,
) {
    let prefix = CRDS.storage_root();
    loop {
        let start = match registry.storage().current_revision().await {
            Ok(rev) => rev,
            Err(e) => {
                tracing::warn!(error = %e, "CRD controller: reading the store's revision");
                0
            }
        };
        let pending = match controller.sync_all(&registry).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %ApiErrorDisplay(&e), "CRD controller pass failed");
                true
            }
        };
        let wait = if pending { TERMINATING_RETRY } else { RESYNC };
        let mut events = registry.storage().watch(&prefix, start).await.ok();
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
            _ = async {
                match events.as_mut() {
                    Some(stream) => stream.next().await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}

/// Renders an [`ApiError`] for logs.
struct ApiErrorDisplay<'a>(&'a ApiError);

impl std::fmt::Display for ApiErrorDisplay<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.0.message, self.0.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::options::WriteOptions;
    use crate::storage::memory::MemoryStorage;

    fn foo_crd(plural: &str, kind: &str) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.samplecontroller.k8s.io"),
                "annotations": {"api-approved.kubernetes.io": "unapproved, test"}},
            "spec": {"group": "samplecontroller.k8s.io", "scope": "Namespaced",
                "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind},
                "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}})
    }

    fn condition(obj: &Value, ty: &str) -> (String, String) {
        let c = obj["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == ty).cloned())
            .unwrap_or(Value::Null);
        (
            c["status"].as_str().unwrap_or("").to_owned(),
            c["reason"].as_str().unwrap_or("").to_owned(),
        )
    }

    #[tokio::test]
    async fn names_accepted_established_and_a_conflicting_kind_is_not() {
        let registry = Registry::new(Arc::new(MemoryStorage::new()));
        let opts = WriteOptions::default();
        registry
            .create(&CRDS, "", foo_crd("foos", "Foo"), &opts)
            .await
            .expect("create foos");
        registry
            .create(&CRDS, "", foo_crd("zoos", "Foo"), &opts)
            .await
            .expect("create foobars");
        let mut controller = CrdController::default();
        assert!(!controller.sync_all(&registry).await.expect("pass"));
        let foos = registry
            .get(&CRDS, "", "foos.samplecontroller.k8s.io")
            .await
            .expect("foos");
        assert_eq!(
            condition(&foos, "NamesAccepted"),
            ("True".into(), "NoConflicts".into())
        );
        assert_eq!(
            condition(&foos, "Established"),
            ("True".into(), "InitialNamesAccepted".into())
        );
        assert_eq!(foos["status"]["acceptedNames"]["kind"], "Foo");
        let bars = registry
            .get(&CRDS, "", "zoos.samplecontroller.k8s.io")
            .await
            .expect("bars");
        assert_eq!(
            condition(&bars, "NamesAccepted"),
            ("False".into(), "KindConflict".into())
        );
        assert_eq!(
            condition(&bars, "Established"),
            ("False".into(), "NotAccepted".into())
        );
        assert!(
            registry
                .lookup("samplecontroller.k8s.io", "v1alpha1", "foos")
                .is_some()
        );
        assert!(
            registry
                .lookup("samplecontroller.k8s.io", "v1alpha1", "zoos")
                .is_none()
        );
    }

    #[tokio::test]
    async fn deleting_a_crd_deletes_its_resources_then_itself() {
        let registry = Registry::new(Arc::new(MemoryStorage::new()));
        registry
            .ensure_default_namespaces()
            .await
            .expect("namespaces");
        let opts = WriteOptions::default();
        registry
            .create(&CRDS, "", foo_crd("foos", "Foo"), &opts)
            .await
            .expect("create");
        let mut controller = CrdController::default();
        controller.sync_all(&registry).await.expect("pass");
        let def = registry
            .lookup("samplecontroller.k8s.io", "v1alpha1", "foos")
            .expect("served");
        registry
            .create(
                &def,
                "default",
                json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1",
                "kind": "Foo", "metadata": {"name": "a"}, "spec": {"x": 1}}),
                &opts,
            )
            .await
            .expect("create foo");
        let deleted = registry
            .delete(
                &CRDS,
                "",
                "foos.samplecontroller.k8s.io",
                &DeleteOptions::default(),
            )
            .await
            .expect("delete");
        let crate::registry::delete::DeleteOutcome::Pending(crd) = deleted else {
            panic!("the cleanup finalizer holds the CRD: {deleted:?}");
        };
        assert_eq!(
            condition(&crd, "Terminating"),
            ("True".into(), "InstanceDeletionPending".into())
        );
        // The first pass deletes the custom resources; the next removes the finalizer.
        for _ in 0..3 {
            if !controller.sync_all(&registry).await.expect("pass") {
                break;
            }
        }
        let gone = registry
            .get(&CRDS, "", "foos.samplecontroller.k8s.io")
            .await;
        assert_eq!(gone.map_err(|e| e.code).err(), Some(404));
        assert!(
            registry
                .lookup("samplecontroller.k8s.io", "v1alpha1", "foos")
                .is_none()
        );
        let left = registry
            .storage()
            .list(crate::storage::ListOptions {
                prefix: "/registry/samplecontroller.k8s.io/foos/".to_owned(),
                ..Default::default()
            })
            .await
            .expect("list");
        assert!(left.kvs.is_empty());
    }
}
