//! The API calls the Deployment controller makes: the uncached Deployment GET, Deployment and status updates, and ReplicaSet create/update/delete/patch.
//!
//! Everything the controller reads comes from the informer caches; these calls go to the API
//! server, as upstream's `dc.client.AppsV1()`. [`DeploymentClient`] is the seam:
//! [`ApiDeploymentClient`] talks to the server, [`FakeDeploymentClient`] serves objects from
//! memory, records the calls and injects failures for unit tests (upstream's fake clientset
//! with reactors).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::controller::api_status;
use kcm_machinery::controller::ref_manager::ObjectPatcher;
use kcm_machinery::informer::keys::object_key;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::Value;

/// The API calls of the Deployment controller, bypassing the cache.
#[async_trait]
pub trait DeploymentClient: Send + Sync {
    /// Reads Deployment `namespace/name` from the API server (a quorum read, never the cache),
    /// for the check before adopting ReplicaSets.
    async fn get_deployment(&self, namespace: &str, name: &str) -> Result<Deployment, kube::Error>;

    /// Replaces a Deployment (spec and metadata; a rollback), with its resourceVersion as the
    /// precondition, as client-go's `Deployments(ns).Update`.
    async fn update_deployment(&self, d: &Deployment) -> Result<Deployment, kube::Error>;

    /// Writes a Deployment through its `/status` subresource (status and annotations; spec and
    /// labels are kept by the server), with its resourceVersion as the precondition, as
    /// client-go's `UpdateStatus`.
    async fn update_deployment_status(&self, d: &Deployment) -> Result<Deployment, kube::Error>;

    /// Creates a ReplicaSet; AlreadyExists when its name is taken.
    async fn create_replica_set(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error>;

    /// Replaces a ReplicaSet with its resourceVersion as the precondition (a stale one is a
    /// 409 Conflict).
    async fn update_replica_set(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error>;

    /// Deletes ReplicaSet `namespace/name` (its pods follow through garbage collection).
    async fn delete_replica_set(&self, namespace: &str, name: &str) -> Result<(), kube::Error>;

    /// Patches ReplicaSet `namespace/name` (adoption and release by the ref manager).
    async fn patch_replica_set(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<(), kube::Error>;
}

/// [`DeploymentClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiDeploymentClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiDeploymentClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn deployments(&self, namespace: &str) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn replica_sets(&self, namespace: &str) -> Api<ReplicaSet> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiDeploymentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiDeploymentClient")
            .finish_non_exhaustive()
    }
}

fn ns_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (&str, &str) {
    (
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

#[async_trait]
impl DeploymentClient for ApiDeploymentClient {
    async fn get_deployment(&self, namespace: &str, name: &str) -> Result<Deployment, kube::Error> {
        self.deployments(namespace).get(name).await
    }

    async fn update_deployment(&self, d: &Deployment) -> Result<Deployment, kube::Error> {
        let (namespace, name) = ns_name(&d.metadata);
        self.deployments(namespace)
            .replace(name, &PostParams::default(), d)
            .await
    }

    async fn update_deployment_status(&self, d: &Deployment) -> Result<Deployment, kube::Error> {
        let (namespace, name) = ns_name(&d.metadata);
        self.deployments(namespace)
            .replace_status(name, &PostParams::default(), d)
            .await
    }

    async fn create_replica_set(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error> {
        let (namespace, _) = ns_name(&rs.metadata);
        self.replica_sets(namespace)
            .create(&PostParams::default(), rs)
            .await
    }

    async fn update_replica_set(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error> {
        let (namespace, name) = ns_name(&rs.metadata);
        self.replica_sets(namespace)
            .replace(name, &PostParams::default(), rs)
            .await
    }

    async fn delete_replica_set(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        self.replica_sets(namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(drop)
    }

    async fn patch_replica_set(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<(), kube::Error> {
        self.replica_sets(namespace)
            .patch(name, &PatchParams::default(), patch)
            .await
            .map(drop)
    }
}

/// Adoption and release patches of the ref manager, sent through a [`DeploymentClient`]
/// (upstream's `RealRSControl.PatchReplicaSet`).
#[derive(Clone)]
pub struct ClientPatcher(pub Arc<dyn DeploymentClient>);

impl std::fmt::Debug for ClientPatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientPatcher").finish_non_exhaustive()
    }
}

#[async_trait]
impl ObjectPatcher for ClientPatcher {
    type Error = kube::Error;

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<(), Self::Error> {
        self.0.patch_replica_set(namespace, name, patch).await
    }
}

/// The kinds of call of a [`DeploymentClient`], to inject failures into a fake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// [`DeploymentClient::get_deployment`].
    GetDeployment,
    /// [`DeploymentClient::update_deployment`].
    UpdateDeployment,
    /// [`DeploymentClient::update_deployment_status`].
    UpdateDeploymentStatus,
    /// [`DeploymentClient::create_replica_set`].
    CreateReplicaSet,
    /// [`DeploymentClient::update_replica_set`].
    UpdateReplicaSet,
    /// [`DeploymentClient::delete_replica_set`].
    DeleteReplicaSet,
    /// [`DeploymentClient::patch_replica_set`].
    PatchReplicaSet,
}

/// One call recorded by [`FakeDeploymentClient`].
#[derive(Clone, Debug, PartialEq)]
pub enum DeploymentAction {
    /// A `get_deployment` of `namespace/name`.
    GetDeployment {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
    /// An `update_deployment` with this object.
    UpdateDeployment(Deployment),
    /// An `update_deployment_status` with this object.
    UpdateDeploymentStatus(Deployment),
    /// A `create_replica_set` with this object.
    CreateReplicaSet(ReplicaSet),
    /// An `update_replica_set` with this object.
    UpdateReplicaSet(ReplicaSet),
    /// A `delete_replica_set` of `namespace/name`.
    DeleteReplicaSet {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
    /// A `patch_replica_set` of `namespace/name`.
    PatchReplicaSet {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// The patch.
        patch: Patch<Value>,
    },
}

impl DeploymentAction {
    /// The verb of this call.
    pub fn verb(&self) -> Verb {
        match self {
            DeploymentAction::GetDeployment { .. } => Verb::GetDeployment,
            DeploymentAction::UpdateDeployment(_) => Verb::UpdateDeployment,
            DeploymentAction::UpdateDeploymentStatus(_) => Verb::UpdateDeploymentStatus,
            DeploymentAction::CreateReplicaSet(_) => Verb::CreateReplicaSet,
            DeploymentAction::UpdateReplicaSet(_) => Verb::UpdateReplicaSet,
            DeploymentAction::DeleteReplicaSet { .. } => Verb::DeleteReplicaSet,
            DeploymentAction::PatchReplicaSet { .. } => Verb::PatchReplicaSet,
        }
    }
}

/// What [`FakeDeploymentClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// The "server's" Deployments by `namespace/name`.
    deployments: HashMap<String, Deployment>,
    /// The "server's" ReplicaSets by `namespace/name`.
    replica_sets: HashMap<String, ReplicaSet>,
    /// Every call, in order (failed ones too).
    actions: Vec<DeploymentAction>,
    /// Per verb, the status every such call fails with.
    errors: HashMap<Verb, Status>,
    /// The last resourceVersion handed out.
    resource_version: u64,
}

impl FakeState {
    fn next_resource_version(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    fn fail(&self, verb: Verb) -> Result<(), kube::Error> {
        match self.errors.get(&verb) {
            Some(status) => Err(kube::Error::Api(status.clone().boxed())),
            None => Ok(()),
        }
    }
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    let (namespace, name) = ns_name(meta);
    object_key(namespace, name)
}

/// A [`DeploymentClient`] that keeps objects in memory and records calls, as upstream's fake
/// clientset with reactors.
///
/// Writes succeed unless a failure was injected for their [`Verb`]: a create stores the object
/// (AlreadyExists when the name is taken), giving it a uid and a creation time; updates store
/// the object given (a status update keeps the stored spec and labels); every write hands out
/// a new resourceVersion. No precondition is checked. A `get` or `patch` of a missing object is
/// NotFound.
#[derive(Debug, Default)]
pub struct FakeDeploymentClient {
    state: Mutex<FakeState>,
}

impl FakeDeploymentClient {
    /// A fake holding no objects and failing nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `d` as the server's copy.
    pub fn insert_deployment(&self, d: Deployment) {
        self.state().deployments.insert(key_of(&d.metadata), d);
    }

    /// Stores `rs` as the server's copy.
    pub fn insert_replica_set(&self, rs: ReplicaSet) {
        self.state().replica_sets.insert(key_of(&rs.metadata), rs);
    }

    /// The server's copy of Deployment `namespace/name`.
    pub fn deployment(&self, namespace: &str, name: &str) -> Option<Deployment> {
        self.state()
            .deployments
            .get(&object_key(namespace, name))
            .cloned()
    }

    /// The server's copy of ReplicaSet `namespace/name`.
    pub fn replica_set(&self, namespace: &str, name: &str) -> Option<ReplicaSet> {
        self.state()
            .replica_sets
            .get(&object_key(namespace, name))
            .cloned()
    }

    /// Every ReplicaSet the server holds.
    pub fn replica_sets(&self) -> Vec<ReplicaSet> {
        self.state().replica_sets.values().cloned().collect()
    }

    /// Makes every later call of `verb` fail with `status` (or succeed again with `None`).
    pub fn set_error(&self, verb: Verb, status: Option<Status>) {
        let mut state = self.state();
        match status {
            Some(status) => state.errors.insert(verb, status),
            None => state.errors.remove(&verb),
        };
    }

    /// Every call so far, in order.
    pub fn actions(&self) -> Vec<DeploymentAction> {
        self.state().actions.clone()
    }

    /// The calls of `verb` so far, in order.
    pub fn actions_of(&self, verb: Verb) -> Vec<DeploymentAction> {
        self.state()
            .actions
            .iter()
            .filter(|a| a.verb() == verb)
            .cloned()
            .collect()
    }

    /// Forgets the recorded calls (not the objects or injected errors).
    pub fn clear_actions(&self) {
        self.state().actions.clear();
    }
}

#[async_trait]
impl DeploymentClient for FakeDeploymentClient {
    async fn get_deployment(&self, namespace: &str, name: &str) -> Result<Deployment, kube::Error> {
        let mut state = self.state();
        state.actions.push(DeploymentAction::GetDeployment {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        });
        state.fail(Verb::GetDeployment)?;
        state
            .deployments
            .get(&object_key(namespace, name))
            .cloned()
            .ok_or_else(|| {
                kube::Error::Api(api_status::not_found("deployments.apps", name).boxed())
            })
    }

    async fn update_deployment(&self, d: &Deployment) -> Result<Deployment, kube::Error> {
        let mut state = self.state();
        state
            .actions
            .push(DeploymentAction::UpdateDeployment(d.clone()));
        state.fail(Verb::UpdateDeployment)?;
        let mut stored = d.clone();
        stored.metadata.resource_version = Some(state.next_resource_version());
        state
            .deployments
            .insert(key_of(&stored.metadata), stored.clone());
        Ok(stored)
    }

    async fn update_deployment_status(&self, d: &Deployment) -> Result<Deployment, kube::Error> {
        let mut state = self.state();
        state
            .actions
            .push(DeploymentAction::UpdateDeploymentStatus(d.clone()));
        state.fail(Verb::UpdateDeploymentStatus)?;
        let key = key_of(&d.metadata);
        let mut stored = d.clone();
        if let Some(old) = state.deployments.get(&key) {
            // The status strategy keeps the stored spec and labels.
            stored.spec = old.spec.clone();
            stored.metadata.labels = old.metadata.labels.clone();
        }
        stored.metadata.resource_version = Some(state.next_resource_version());
        state.deployments.insert(key, stored.clone());
        Ok(stored)
    }

    async fn create_replica_set(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error> {
        let mut state = self.state();
        state
            .actions
            .push(DeploymentAction::CreateReplicaSet(rs.clone()));
        state.fail(Verb::CreateReplicaSet)?;
        let key = key_of(&rs.metadata);
        let name = rs.metadata.name.as_deref().unwrap_or_default();
        if state.replica_sets.contains_key(&key) {
            let mut status = api_status::conflict("replicasets.apps", name, "already exists");
            status.reason = kube::core::response::reason::ALREADY_EXISTS.to_owned();
            status.message = format!("replicasets.apps {name:?} already exists");
            return Err(kube::Error::Api(status.boxed()));
        }
        let mut stored = rs.clone();
        stored
            .metadata
            .uid
            .get_or_insert_with(|| format!("uid-{key}"));
        stored
            .metadata
            .creation_timestamp
            .get_or_insert(Time(jiff::Timestamp::UNIX_EPOCH));
        stored.metadata.resource_version = Some(state.next_resource_version());
        state.replica_sets.insert(key, stored.clone());
        Ok(stored)
    }

    async fn update_replica_set(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error> {
        let mut state = self.state();
        state
            .actions
            .push(DeploymentAction::UpdateReplicaSet(rs.clone()));
        state.fail(Verb::UpdateReplicaSet)?;
        let mut stored = rs.clone();
        stored.metadata.resource_version = Some(state.next_resource_version());
        state
            .replica_sets
            .insert(key_of(&stored.metadata), stored.clone());
        Ok(stored)
    }

    async fn delete_replica_set(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let mut state = self.state();
        state.actions.push(DeploymentAction::DeleteReplicaSet {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        });
        state.fail(Verb::DeleteReplicaSet)?;
        match state.replica_sets.remove(&object_key(namespace, name)) {
            Some(_) => Ok(()),
            None => Err(kube::Error::Api(
                api_status::not_found("replicasets.apps", name).boxed(),
            )),
        }
    }

    async fn patch_replica_set(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<(), kube::Error> {
        let mut state = self.state();
        state.actions.push(DeploymentAction::PatchReplicaSet {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            patch: patch.clone(),
        });
        state.fail(Verb::PatchReplicaSet)?;
        if state
            .replica_sets
            .contains_key(&object_key(namespace, name))
        {
            Ok(())
        } else {
            Err(kube::Error::Api(
                api_status::not_found("replicasets.apps", name).boxed(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcm_machinery::controller::ApiStatus;
    use kcm_testing::MetaBuilder;

    fn rs(name: &str) -> ReplicaSet {
        kcm_testing::replica_set(name).namespace("default").build()
    }

    #[tokio::test]
    async fn fake_creates_once_and_records_calls() {
        let fake = FakeDeploymentClient::new();
        let created = fake.create_replica_set(&rs("a")).await.expect("create");
        assert_eq!(created.metadata.uid.as_deref(), Some("uid-default/a"));
        assert_eq!(created.metadata.resource_version.as_deref(), Some("1"));
        let again = fake.create_replica_set(&rs("a")).await.expect_err("taken");
        assert!(again.is_already_exists());
        fake.delete_replica_set("default", "a")
            .await
            .expect("delete");
        let gone = fake
            .delete_replica_set("default", "a")
            .await
            .expect_err("gone");
        assert!(gone.is_not_found());
        assert_eq!(fake.actions().len(), 4);
        assert_eq!(fake.actions_of(Verb::CreateReplicaSet).len(), 2);
    }

    #[tokio::test]
    async fn fake_status_update_keeps_spec_and_injects_errors() {
        let fake = FakeDeploymentClient::new();
        let mut d = kcm_testing::deployment("d")
            .namespace("default")
            .default_spec()
            .build();
        fake.insert_deployment(d.clone());
        d.spec = None;
        d.status = Some(Default::default());
        let stored = fake.update_deployment_status(&d).await.expect("status");
        assert!(stored.spec.is_some(), "spec kept");
        assert!(stored.status.is_some());
        fake.set_error(
            Verb::UpdateDeploymentStatus,
            Some(api_status::conflict("deployments.apps", "d", "stale")),
        );
        let err = fake
            .update_deployment_status(&d)
            .await
            .expect_err("injected");
        assert!(err.is_conflict());
        fake.set_error(Verb::UpdateDeploymentStatus, None);
        fake.update_deployment_status(&d).await.expect("healed");
        assert!(fake.get_deployment("default", "nope").await.is_err());
        fake.clear_actions();
        assert!(fake.actions().is_empty());
    }
}
