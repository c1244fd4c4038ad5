//! The ControllerRevision API calls of the history helpers: [`RevisionClient`] over a `kube::Client`, and a recording fake.
//!
//! Upstream's `history.Interface` talks to the clientset directly; here the calls go through
//! this seam so controller tests run against [`FakeRevisionClient`], which keeps revisions in
//! memory (mirrored into an informer cache, as upstream's `fakeHistory` writes to the
//! informer's indexer) and records every call.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::Value;

use crate::controller::api_status::{self, ApiStatus};
use crate::controller::ref_manager::ObjectPatcher;
use crate::informer::keys::object_key;
use crate::informer::store::Indexer;

/// The ControllerRevision calls the history helpers make.
#[async_trait]
pub trait RevisionClient: Send + Sync {
    /// Creates `revision` in `namespace`; an existing name is an AlreadyExists error.
    async fn create(
        &self,
        namespace: &str,
        revision: &ControllerRevision,
    ) -> Result<ControllerRevision, kube::Error>;

    /// Reads `namespace/name` from the server (not the cache).
    async fn get(&self, namespace: &str, name: &str) -> Result<ControllerRevision, kube::Error>;

    /// Replaces `revision` (its resourceVersion is the precondition).
    async fn update(
        &self,
        revision: &ControllerRevision,
    ) -> Result<ControllerRevision, kube::Error>;

    /// Deletes `namespace/name`.
    async fn delete(&self, namespace: &str, name: &str) -> Result<(), kube::Error>;

    /// Patches `namespace/name`.
    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<ControllerRevision, kube::Error>;
}

/// [`RevisionClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiRevisionClient {
    client: kube::Client,
}

impl ApiRevisionClient {
    /// Revision calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, namespace: &str) -> Api<ControllerRevision> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiRevisionClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiRevisionClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl RevisionClient for ApiRevisionClient {
    async fn create(
        &self,
        namespace: &str,
        revision: &ControllerRevision,
    ) -> Result<ControllerRevision, kube::Error> {
        self.api(namespace)
            .create(&PostParams::default(), revision)
            .await
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<ControllerRevision, kube::Error> {
        self.api(namespace).get(name).await
    }

    async fn update(
        &self,
        revision: &ControllerRevision,
    ) -> Result<ControllerRevision, kube::Error> {
        let namespace = revision.metadata.namespace.as_deref().unwrap_or_default();
        let name = revision.metadata.name.as_deref().unwrap_or_default();
        self.api(namespace)
            .replace(name, &PostParams::default(), revision)
            .await
    }

    async fn delete(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        self.api(namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(drop)
    }

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<ControllerRevision, kube::Error> {
        self.api(namespace)
            .patch(name, &PatchParams::default(), patch)
            .await
    }
}

/// Patches revisions through a [`RevisionClient`]: the ref manager's seam for claiming
/// revisions (upstream's `ControllerRevisionControlInterface.PatchControllerRevision`).
#[derive(Clone)]
pub struct RevisionPatcher(pub Arc<dyn RevisionClient>);

#[async_trait]
impl ObjectPatcher for RevisionPatcher {
    type Error = kube::Error;

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<(), kube::Error> {
        self.0.patch(namespace, name, patch).await.map(drop)
    }
}

/// One call recorded by [`FakeRevisionClient`].
#[derive(Clone, Debug, PartialEq)]
pub enum RevisionAction {
    /// A create, with the object sent.
    Create(ControllerRevision),
    /// A get of `namespace/name`.
    Get(String),
    /// An update, with the object sent.
    Update(ControllerRevision),
    /// A delete of `namespace/name`.
    Delete(String),
    /// A patch of `namespace/name`, with the patch body.
    Patch(String, Value),
}

impl RevisionAction {
    /// The verb: `create`, `get`, `update`, `delete` or `patch`.
    pub fn verb(&self) -> &'static str {
        match self {
            RevisionAction::Create(_) => "create",
            RevisionAction::Get(_) => "get",
            RevisionAction::Update(_) => "update",
            RevisionAction::Delete(_) => "delete",
            RevisionAction::Patch(..) => "patch",
        }
    }
}

#[derive(Default)]
struct FakeState {
    /// The "server's" revisions by `namespace/name`.
    objects: BTreeMap<String, ControllerRevision>,
    actions: Vec<RevisionAction>,
    /// Per verb, the status every call of that verb fails with.
    errors: BTreeMap<&'static str, Status>,
    /// The next resourceVersion handed out.
    next_rv: u64,
}

/// A [`RevisionClient`] that keeps revisions in memory, mirrors every write into an optional
/// informer cache, records calls and fails the verbs it is told to.
#[derive(Default)]
pub struct FakeRevisionClient {
    state: Mutex<FakeState>,
    /// The cache the controller under test reads, kept in step with the fake's objects.
    cache: Option<Indexer<ControllerRevision>>,
}

impl std::fmt::Debug for FakeRevisionClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeRevisionClient").finish_non_exhaustive()
    }
}

impl FakeRevisionClient {
    /// A fake with no cache to mirror into.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fake whose writes also land in `cache` (as if the informer had observed them).
    pub fn with_cache(cache: Indexer<ControllerRevision>) -> Self {
        Self {
            state: Mutex::default(),
            cache: Some(cache),
        }
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `revision` as the server's (and the cache's) copy without recording a call.
    pub fn insert(&self, revision: ControllerRevision) {
        let key = key_of(&revision);
        self.mirror(&revision);
        self.state().objects.insert(key, revision);
    }

    /// Makes every later call of `verb` (`create`, `get`, `update`, `delete`, `patch`) fail
    /// with `status`, or succeed again with `None`.
    pub fn set_error(&self, verb: &'static str, status: Option<Status>) {
        let mut state = self.state();
        match status {
            Some(s) => state.errors.insert(verb, s),
            None => state.errors.remove(verb),
        };
    }

    /// Every call so far.
    pub fn actions(&self) -> Vec<RevisionAction> {
        self.state().actions.clone()
    }

    /// The verbs of every call so far.
    pub fn verbs(&self) -> Vec<&'static str> {
        self.state()
            .actions
            .iter()
            .map(RevisionAction::verb)
            .collect()
    }

    /// Forgets the recorded calls.
    pub fn clear_actions(&self) {
        self.state().actions.clear();
    }

    /// The server's revisions, sorted by key.
    pub fn objects(&self) -> Vec<ControllerRevision> {
        self.state().objects.values().cloned().collect()
    }

    fn mirror(&self, revision: &ControllerRevision) {
        if let Some(cache) = &self.cache {
            // A revision the fake accepted always has a name and namespace.
            let _ = cache.update(Arc::new(revision.clone()));
        }
    }

    fn unmirror(&self, revision: &ControllerRevision) {
        if let Some(cache) = &self.cache {
            let _ = cache.delete(revision);
        }
    }

    /// Records `action` and returns the injected failure for `verb`, if any.
    fn record(&self, action: RevisionAction) -> Result<(), kube::Error> {
        let mut state = self.state();
        let verb = action.verb();
        state.actions.push(action);
        match state.errors.get(verb) {
            Some(status) => Err(kube::Error::Api(status.clone().boxed())),
            None => Ok(()),
        }
    }
}

fn key_of(revision: &ControllerRevision) -> String {
    object_key(
        revision.metadata.namespace.as_deref().unwrap_or_default(),
        revision.metadata.name.as_deref().unwrap_or_default(),
    )
}

fn not_found(key: &str) -> kube::Error {
    kube::Error::Api(api_status::not_found("controllerrevisions.apps", key).boxed())
}

/// Applies the `metadata.ownerReferences` part of a strategic-merge patch (add or replace by
/// uid; `$patch: delete` removes), which is all the ref manager sends.
fn apply_owner_patch(revision: &mut ControllerRevision, patch: &Value) {
    let Some(refs) = patch
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
    else {
        return;
    };
    let owners = revision
        .metadata
        .owner_references
        .get_or_insert_with(Vec::new);
    for r in refs {
        let uid = r.get("uid").and_then(Value::as_str).unwrap_or_default();
        owners.retain(|o| o.uid != uid);
        if r.get("$patch").and_then(Value::as_str) != Some("delete")
            && let Ok(owner) = serde_json::from_value::<OwnerReference>(r.clone())
        {
            owners.push(owner);
        }
    }
}

#[async_trait]
impl RevisionClient for FakeRevisionClient {
    async fn create(
        &self,
        namespace: &str,
        revision: &ControllerRevision,
    ) -> Result<ControllerRevision, kube::Error> {
        self.record(RevisionAction::Create(revision.clone()))?;
        let mut created = revision.clone();
        created.metadata.namespace = Some(namespace.to_owned());
        let key = key_of(&created);
        let mut state = self.state();
        if state.objects.contains_key(&key) {
            let name = created.metadata.name.clone().unwrap_or_default();
            return Err(kube::Error::Api(
                api_status::already_exists("controllerrevisions.apps", &name).boxed(),
            ));
        }
        state.next_rv += 1;
        created.metadata.resource_version = Some(state.next_rv.to_string());
        created.metadata.uid = Some(format!("uid-{key}"));
        state.objects.insert(key, created.clone());
        drop(state);
        self.mirror(&created);
        Ok(created)
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<ControllerRevision, kube::Error> {
        let key = object_key(namespace, name);
        self.record(RevisionAction::Get(key.clone()))?;
        self.state()
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found(&key))
    }

    async fn update(
        &self,
        revision: &ControllerRevision,
    ) -> Result<ControllerRevision, kube::Error> {
        self.record(RevisionAction::Update(revision.clone()))?;
        let key = key_of(revision);
        let mut state = self.state();
        if !state.objects.contains_key(&key) {
            return Err(not_found(&key));
        }
        state.next_rv += 1;
        let mut updated = revision.clone();
        updated.metadata.resource_version = Some(state.next_rv.to_string());
        state.objects.insert(key, updated.clone());
        drop(state);
        self.mirror(&updated);
        Ok(updated)
    }

    async fn delete(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let key = object_key(namespace, name);
        self.record(RevisionAction::Delete(key.clone()))?;
        let removed = self
            .state()
            .objects
            .remove(&key)
            .ok_or_else(|| not_found(&key))?;
        self.unmirror(&removed);
        Ok(())
    }

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<ControllerRevision, kube::Error> {
        let key = object_key(namespace, name);
        let body = match patch {
            Patch::Strategic(v) | Patch::Merge(v) | Patch::Apply(v) => v.clone(),
            _ => Value::Null,
        };
        self.record(RevisionAction::Patch(key.clone(), body.clone()))?;
        let mut state = self.state();
        let Some(existing) = state.objects.get_mut(&key) else {
            return Err(not_found(&key));
        };
        apply_owner_patch(existing, &body);
        let patched = existing.clone();
        drop(state);
        self.mirror(&patched);
        Ok(patched)
    }
}

/// True when `err` is an AlreadyExists API error.
pub(crate) fn is_already_exists(err: &kube::Error) -> bool {
    err.is_already_exists()
}
