//! An in-memory [`MetadataClient`] for unit tests: objects' metadata by resource, the calls recorded, failures injectable.
//!
//! It follows the API server where the collector depends on it: delete preconditions (uid,
//! resourceVersion → 409), propagation policies adding the `foregroundDeletion` / `orphan`
//! finalizers, objects with finalizers only marked deleted, the last finalizer's removal
//! deleting a marked object, strategic merge patches of `ownerReferences` by uid (with the
//! body's `uid` checked), JSON merge patches guarded by `resourceVersion`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kcm_machinery::controller::api_status;
use kube::api::{DeleteParams, ObjectMeta, PropagationPolicy};
use kube::core::Status;
use serde_json::Value;

use super::discovery::RestMapping;
use super::graph_builder::{FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN_DEPENDENTS};
use super::operations::{MetadataClient, PatchBody};

/// One call recorded by [`FakeMetadataClient`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeAction {
    /// `get`, `delete` or `patch`.
    pub verb: &'static str,
    /// `resource.version.group`, e.g. `replicasets.v1.apps`.
    pub resource: String,
    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub key: String,
    /// Deletes: the propagation policy (`Background`, `Foreground`, `Orphan`), if any.
    /// Patches: `strategic` or `merge`.
    pub detail: Option<String>,
}

impl std::fmt::Display for FakeAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.verb, self.resource, self.key)?;
        if let Some(d) = &self.detail {
            write!(f, " {d}")?;
        }
        Ok(())
    }
}

#[derive(Default)]
struct State {
    /// Objects by (resource, key).
    objects: BTreeMap<(String, String), ObjectMeta>,
    actions: Vec<FakeAction>,
    /// Errors to return, consumed one per matching call, by (verb, resource, key).
    failures: HashMap<(String, String, String), VecDeque<Status>>,
    /// The last resourceVersion handed out.
    revision: u64,
    /// When set, the next call through the client trait panics (and clears it): a sync that
    /// panics once, for the shared worker's panic recovery.
    panic_next_call: bool,
}

/// An in-memory [`MetadataClient`], as upstream's fake metadata client with reactors.
#[derive(Default)]
pub struct FakeMetadataClient {
    state: Mutex<State>,
}

impl std::fmt::Debug for FakeMetadataClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("FakeMetadataClient")
            .field("objects", &state.objects.len())
            .field("actions", &state.actions.len())
            .finish()
    }
}

fn resource_name(resource: &RestMapping) -> String {
    let r = &resource.resource;
    format!("{}.{}.{}", r.plural, r.version, r.group)
}

fn object_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}

fn conflict(message: String) -> kube::Error {
    kube::Error::Api(Status::failure(&message, "Conflict").with_code(409).boxed())
}

impl FakeMetadataClient {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next call through the client trait panic, once (tests of the shared worker's
    /// panic recovery).
    pub fn panic_on_next_call(&self) {
        self.state().panic_next_call = true;
    }

    /// Panics if [`Self::panic_on_next_call`] armed it; the state's lock is released first, so
    /// the fake stays usable.
    fn take_injected_panic(&self) {
        let armed = std::mem::take(&mut self.state().panic_next_call);
        if armed {
            panic!("FakeMetadataClient: injected panic");
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `meta` as the object `namespace/name` of `resource` (`resource.version.group`),
    /// giving it a resourceVersion.
    pub fn insert(&self, resource: &str, mut meta: ObjectMeta) {
        let mut state = self.state();
        state.revision += 1;
        meta.resource_version = Some(state.revision.to_string());
        let key = object_key(
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        );
        state.objects.insert((resource.to_owned(), key), meta);
    }

    /// Removes an object, as if someone else deleted it.
    pub fn remove(&self, resource: &str, key: &str) {
        self.state()
            .objects
            .remove(&(resource.to_owned(), key.to_owned()));
    }

    /// The stored metadata of `key` (`namespace/name`) of `resource`.
    pub fn object(&self, resource: &str, key: &str) -> Option<ObjectMeta> {
        self.state()
            .objects
            .get(&(resource.to_owned(), key.to_owned()))
            .cloned()
    }

    /// The keys (`namespace/name`) of `resource`'s objects, sorted.
    pub fn keys(&self, resource: &str) -> Vec<String> {
        self.state()
            .objects
            .keys()
            .filter(|(r, _)| r == resource)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// Every call so far, oldest first.
    pub fn actions(&self) -> Vec<FakeAction> {
        self.state().actions.clone()
    }

    /// Every call so far as text (`verb resource key [detail]`).
    pub fn action_strings(&self) -> Vec<String> {
        self.actions().iter().map(ToString::to_string).collect()
    }

    /// Forgets the recorded calls.
    pub fn clear_actions(&self) {
        self.state().actions.clear();
    }

    /// Makes the next `verb` (`get`, `delete`, `patch`) on `key` of `resource` fail with
    /// `status` (queue several to fail several calls).
    pub fn fail_next(&self, verb: &str, resource: &str, key: &str, status: Status) {
        self.state()
            .failures
            .entry((verb.to_owned(), resource.to_owned(), key.to_owned()))
            .or_default()
            .push_back(status);
    }

    fn begin(
        state: &mut State,
        verb: &'static str,
        resource: &RestMapping,
        namespace: &str,
        name: &str,
        detail: Option<String>,
    ) -> Result<(String, String), kube::Error> {
        let resource = resource_name(resource);
        let key = object_key(namespace, name);
        state.actions.push(FakeAction {
            verb,
            resource: resource.clone(),
            key: key.clone(),
            detail,
        });
        if let Some(queue) =
            state
                .failures
                .get_mut(&(verb.to_owned(), resource.clone(), key.clone()))
            && let Some(status) = queue.pop_front()
        {
            return Err(kube::Error::Api(status.boxed()));
        }
        Ok((resource, key))
    }

    fn not_found(resource: &RestMapping, name: &str) -> kube::Error {
        kube::Error::Api(api_status::not_found(&resource.resource.plural, name).boxed())
    }
}

fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_deref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

fn add_finalizer(meta: &mut ObjectMeta, finalizer: &str) {
    if !has_finalizer(meta, finalizer) {
        meta.finalizers
            .get_or_insert_with(Vec::new)
            .push(finalizer.to_owned());
    }
}

/// Applies a strategic merge patch's `metadata.ownerReferences` (merged by uid, `$patch:
/// delete` removing) to `meta`.
fn apply_strategic(meta: &mut ObjectMeta, body: &Value) -> Result<(), String> {
    let patch_meta = body.get("metadata").unwrap_or(&Value::Null);
    if let Some(uid) = patch_meta.get("uid").and_then(Value::as_str)
        && meta.uid.as_deref() != Some(uid)
    {
        return Err(format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta.uid.as_deref().unwrap_or_default()
        ));
    }
    let Some(entries) = patch_meta.get("ownerReferences").and_then(Value::as_array) else {
        return Ok(());
    };
    let refs = meta.owner_references.get_or_insert_with(Vec::new);
    for entry in entries {
        let uid = entry.get("uid").and_then(Value::as_str).unwrap_or_default();
        if entry.get("$patch").and_then(Value::as_str) == Some("delete") {
            refs.retain(|r| r.uid != uid);
            continue;
        }
        let incoming: OwnerReference =
            serde_json::from_value(entry.clone()).map_err(|e| e.to_string())?;
        match refs.iter_mut().find(|r| r.uid == uid) {
            Some(existing) => {
                if entry.get("blockOwnerDeletion").is_some() {
                    existing.block_owner_deletion = incoming.block_owner_deletion;
                }
                if entry.get("controller").is_some() {
                    existing.controller = incoming.controller;
                }
            }
            None => refs.push(incoming),
        }
    }
    if refs.is_empty() {
        meta.owner_references = None;
    }
    Ok(())
}

/// Applies a JSON merge patch's `metadata.ownerReferences` and `metadata.finalizers`.
fn apply_merge(meta: &mut ObjectMeta, body: &Value) -> Result<(), String> {
    let patch_meta = body.get("metadata").unwrap_or(&Value::Null);
    if let Some(refs) = patch_meta.get("ownerReferences") {
        meta.owner_references = if refs.is_null() {
            None
        } else {
            Some(serde_json::from_value(refs.clone()).map_err(|e| e.to_string())?)
        };
    }
    if let Some(finalizers) = patch_meta.get("finalizers") {
        meta.finalizers = if finalizers.is_null() {
            None
        } else {
            Some(serde_json::from_value(finalizers.clone()).map_err(|e| e.to_string())?)
        };
    }
    Ok(())
}

#[async_trait]
impl MetadataClient for FakeMetadataClient {
    async fn get(
        &self,
        resource: &RestMapping,
        namespace: &str,
        name: &str,
    ) -> Result<ObjectMeta, kube::Error> {
        self.take_injected_panic();
        let mut state = self.state();
        let key = Self::begin(&mut state, "get", resource, namespace, name, None)?;
        state
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| Self::not_found(resource, name))
    }

    async fn delete(
        &self,
        resource: &RestMapping,
        namespace: &str,
        name: &str,
        params: &DeleteParams,
    ) -> Result<(), kube::Error> {
        self.take_injected_panic();
        let policy = params.propagation_policy.as_ref().map(|p| {
            match p {
                PropagationPolicy::Orphan => "Orphan",
                PropagationPolicy::Background => "Background",
                PropagationPolicy::Foreground => "Foreground",
            }
            .to_owned()
        });
        let mut state = self.state();
        let key = Self::begin(&mut state, "delete", resource, namespace, name, policy)?;
        state.revision += 1;
        let revision = state.revision.to_string();
        let Some(meta) = state.objects.get_mut(&key) else {
            return Err(Self::not_found(resource, name));
        };
        if let Some(pre) = &params.preconditions {
            if let Some(uid) = &pre.uid
                && meta.uid.as_ref() != Some(uid)
            {
                return Err(conflict(format!(
                    "the UID in the precondition ({uid}) does not match the UID in record"
                )));
            }
            if let Some(rv) = &pre.resource_version
                && meta.resource_version.as_ref() != Some(rv)
            {
                return Err(conflict(format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record"
                )));
            }
        }
        match params.propagation_policy {
            Some(PropagationPolicy::Foreground) => add_finalizer(meta, FINALIZER_DELETE_DEPENDENTS),
            Some(PropagationPolicy::Orphan) => add_finalizer(meta, FINALIZER_ORPHAN_DEPENDENTS),
            _ => {}
        }
        if meta.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
            if meta.deletion_timestamp.is_none() {
                meta.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
            }
            meta.resource_version = Some(revision);
        } else {
            state.objects.remove(&key);
        }
        Ok(())
    }

    async fn patch(
        &self,
        resource: &RestMapping,
        namespace: &str,
        name: &str,
        patch: &PatchBody,
    ) -> Result<ObjectMeta, kube::Error> {
        self.take_injected_panic();
        let detail = match patch {
            PatchBody::Strategic(_) => "strategic",
            PatchBody::Merge(_) => "merge",
        };
        let mut state = self.state();
        let key = Self::begin(
            &mut state,
            "patch",
            resource,
            namespace,
            name,
            Some(detail.to_owned()),
        )?;
        state.revision += 1;
        let revision = state.revision.to_string();
        let Some(meta) = state.objects.get_mut(&key) else {
            return Err(Self::not_found(resource, name));
        };
        let mut updated = meta.clone();
        let applied = match patch {
            PatchBody::Strategic(body) => apply_strategic(&mut updated, body),
            PatchBody::Merge(body) => {
                if let Some(rv) = body
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    && meta.resource_version.as_deref() != Some(rv)
                {
                    return Err(conflict(format!(
                        "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please apply your changes to the latest version and try again",
                        resource.resource.plural
                    )));
                }
                apply_merge(&mut updated, body)
            }
        };
        if let Err(message) = applied {
            return Err(conflict(message));
        }
        updated.resource_version = Some(revision);
        let finalized = updated.deletion_timestamp.is_some()
            && updated.finalizers.as_ref().is_none_or(Vec::is_empty);
        if finalized {
            state.objects.remove(&key);
        } else {
            *meta = updated.clone();
        }
        Ok(updated)
    }
}

#[cfg(test)]
mod tests {
    use kcm_testing::MetaBuilder;
    use kube::core::ApiResource;

    use super::*;

    fn pods() -> RestMapping {
        RestMapping {
            resource: ApiResource {
                group: String::new(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: "Pod".into(),
                plural: "pods".into(),
            },
            namespaced: true,
        }
    }

    fn pod(name: &str, finalizers: &[&str]) -> ObjectMeta {
        let m = kcm_testing::meta(name)
            .namespace("ns")
            .uid(format!("uid-{name}"));
        if finalizers.is_empty() {
            m.build()
        } else {
            m.finalizers(finalizers).build()
        }
    }

    #[tokio::test]
    async fn deletes_honour_preconditions_policies_and_finalizers() {
        let fake = FakeMetadataClient::new();
        fake.insert("pods.v1.", pod("a", &[]));
        fake.insert("pods.v1.", pod("b", &[]));
        let wrong_uid = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: Some("other".into()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let err = fake
            .delete(&pods(), "ns", "a", &wrong_uid)
            .await
            .expect_err("conflict");
        assert!(matches!(err, kube::Error::Api(s) if s.code == 409));
        fake.delete(&pods(), "ns", "a", &DeleteParams::foreground())
            .await
            .expect("delete");
        let a = fake
            .object("pods.v1.", "ns/a")
            .expect("kept with finalizer");
        assert!(a.deletion_timestamp.is_some());
        assert_eq!(a.finalizers, Some(vec!["foregroundDeletion".to_string()]));
        fake.delete(&pods(), "ns", "b", &DeleteParams::background())
            .await
            .expect("delete");
        assert!(fake.object("pods.v1.", "ns/b").is_none());
        // Removing the last finalizer of a deleted object deletes it.
        let rv = a.resource_version.clone().unwrap_or_default();
        fake.patch(
            &pods(),
            "ns",
            "a",
            &PatchBody::Merge(
                serde_json::json!({"metadata": {"resourceVersion": rv, "finalizers": null}}),
            ),
        )
        .await
        .expect("patch");
        assert!(fake.object("pods.v1.", "ns/a").is_none());
        assert_eq!(
            fake.action_strings(),
            vec![
                "delete pods.v1. ns/a",
                "delete pods.v1. ns/a Foreground",
                "delete pods.v1. ns/b Background",
                "patch pods.v1. ns/a merge",
            ]
        );
    }

    #[tokio::test]
    async fn injected_failures_are_consumed_one_per_call() {
        let fake = FakeMetadataClient::new();
        fake.insert("pods.v1.", pod("a", &[]));
        fake.fail_next(
            "get",
            "pods.v1.",
            "ns/a",
            Status::failure("boom", "InternalError").with_code(500),
        );
        assert!(fake.get(&pods(), "ns", "a").await.is_err());
        assert!(fake.get(&pods(), "ns", "a").await.is_ok());
    }
}
