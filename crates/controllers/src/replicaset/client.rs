//! The ReplicaSet API calls the controller makes directly: the uncached GET and the `/status` update.
//!
//! Everything else the controller reads comes from the informer caches; these two calls go to
//! the API server, as upstream's `kubeClient.AppsV1().ReplicaSets(ns)`. [`ReplicaSetClient`] is
//! the seam: [`ApiReplicaSetClient`] talks to the server, [`FakeReplicaSetClient`] records the
//! calls and injects failures for unit tests (upstream's fake clientset with reactors).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kcm_machinery::controller::api_status;
use kcm_machinery::informer::keys::object_key;
use kube::api::{Api, PostParams};
use kube::core::Status;

/// The ReplicaSet calls the controller makes to the API server, bypassing the cache.
#[async_trait]
pub trait ReplicaSetClient: Send + Sync {
    /// Reads `namespace/name` from the API server (a quorum read, never the cache), as
    /// client-go's `ReplicaSets(ns).Get`.
    async fn get(&self, namespace: &str, name: &str) -> Result<ReplicaSet, kube::Error>;

    /// Writes `rs.status` through the `/status` subresource, with `rs`'s resourceVersion as
    /// the precondition (a stale one is a 409 Conflict), as client-go's `UpdateStatus`.
    /// Returns the ReplicaSet as stored.
    async fn update_status(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error>;
}

/// [`ReplicaSetClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiReplicaSetClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiReplicaSetClient {
    /// ReplicaSet calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, namespace: &str) -> Api<ReplicaSet> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiReplicaSetClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiReplicaSetClient")
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl ReplicaSetClient for ApiReplicaSetClient {
    async fn get(&self, namespace: &str, name: &str) -> Result<ReplicaSet, kube::Error> {
        self.api(namespace).get(name).await
    }

    async fn update_status(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error> {
        let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
        let name = rs.metadata.name.as_deref().unwrap_or_default();
        self.api(namespace)
            .replace_status(name, &PostParams::default(), rs)
            .await
    }
}

/// One call recorded by [`FakeReplicaSetClient`].
#[derive(Clone, Debug, PartialEq)]
pub enum ReplicaSetAction {
    /// A `get` of `namespace/name`.
    Get {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
    /// An `update_status` with this object (status included).
    UpdateStatus(ReplicaSet),
}

/// What [`FakeReplicaSetClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// The "server's" objects by `namespace/name`, returned by `get` and replaced by
    /// successful status updates.
    objects: HashMap<String, ReplicaSet>,
    /// Every call, in order (failed ones too).
    actions: Vec<ReplicaSetAction>,
    /// When set, every `get` fails with this status.
    get_error: Option<Status>,
    /// When set, every `update_status` fails with this status.
    update_error: Option<Status>,
}

/// A [`ReplicaSetClient`] that serves objects from memory and records calls, as upstream's
/// fake clientset with reactors.
///
/// A `get` of an object it does not hold is a NotFound. A successful `update_status` stores
/// the object it was given (resourceVersion unchanged) and returns it.
#[derive(Debug, Default)]
pub struct FakeReplicaSetClient {
    state: Mutex<FakeState>,
}

impl FakeReplicaSetClient {
    /// A fake holding no objects and failing nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `rs` as the server's copy (what `get` returns).
    pub fn insert(&self, rs: ReplicaSet) {
        let key = object_key(
            rs.metadata.namespace.as_deref().unwrap_or_default(),
            rs.metadata.name.as_deref().unwrap_or_default(),
        );
        self.state().objects.insert(key, rs);
    }

    /// The server's copy of `namespace/name`.
    pub fn object(&self, namespace: &str, name: &str) -> Option<ReplicaSet> {
        self.state()
            .objects
            .get(&object_key(namespace, name))
            .cloned()
    }

    /// Makes every later `get` fail with `status` (or succeed again with `None`).
    pub fn set_get_error(&self, status: Option<Status>) {
        self.state().get_error = status;
    }

    /// Makes every later `update_status` fail with `status` (or succeed again with `None`).
    pub fn set_update_error(&self, status: Option<Status>) {
        self.state().update_error = status;
    }

    /// Every call so far, in order.
    pub fn actions(&self) -> Vec<ReplicaSetAction> {
        self.state().actions.clone()
    }

    /// The objects of every `update_status` call so far, in order.
    pub fn status_updates(&self) -> Vec<ReplicaSet> {
        self.state()
            .actions
            .iter()
            .filter_map(|a| match a {
                ReplicaSetAction::UpdateStatus(rs) => Some(rs.clone()),
                ReplicaSetAction::Get { .. } => None,
            })
            .collect()
    }

    /// How many `get` calls were made.
    pub fn get_count(&self) -> usize {
        self.state()
            .actions
            .iter()
            .filter(|a| matches!(a, ReplicaSetAction::Get { .. }))
            .count()
    }

    /// Forgets the recorded calls (not the objects or injected errors).
    pub fn clear_actions(&self) {
        self.state().actions.clear();
    }
}

#[async_trait]
impl ReplicaSetClient for FakeReplicaSetClient {
    async fn get(&self, namespace: &str, name: &str) -> Result<ReplicaSet, kube::Error> {
        let mut state = self.state();
        state.actions.push(ReplicaSetAction::Get {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        });
        if let Some(status) = &state.get_error {
            return Err(kube::Error::Api(status.clone().boxed()));
        }
        state
            .objects
            .get(&object_key(namespace, name))
            .cloned()
            .ok_or_else(|| {
                kube::Error::Api(api_status::not_found("replicasets.apps", name).boxed())
            })
    }

    async fn update_status(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error> {
        let mut state = self.state();
        state
            .actions
            .push(ReplicaSetAction::UpdateStatus(rs.clone()));
        if let Some(status) = &state.update_error {
            return Err(kube::Error::Api(status.clone().boxed()));
        }
        let key = object_key(
            rs.metadata.namespace.as_deref().unwrap_or_default(),
            rs.metadata.name.as_deref().unwrap_or_default(),
        );
        state.objects.insert(key, rs.clone());
        Ok(rs.clone())
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
    async fn fake_serves_stored_objects_and_records_calls() {
        let fake = FakeReplicaSetClient::new();
        fake.insert(rs("a"));
        let got = fake.get("default", "a").await.expect("stored");
        assert_eq!(got.metadata.name.as_deref(), Some("a"));
        let missing = fake.get("default", "b").await.expect_err("not stored");
        assert!(missing.is_not_found());

        let mut updated = rs("a");
        updated.status = Some(Default::default());
        fake.update_status(&updated).await.expect("update");
        assert_eq!(fake.get_count(), 2);
        assert_eq!(fake.status_updates(), vec![updated.clone()]);
        assert_eq!(fake.object("default", "a"), Some(updated));
    }

    #[tokio::test]
    async fn fake_injects_errors_after_recording() {
        let fake = FakeReplicaSetClient::new();
        fake.insert(rs("a"));
        fake.set_update_error(Some(api_status::conflict("replicasets.apps", "a", "stale")));
        let err = fake.update_status(&rs("a")).await.expect_err("injected");
        assert!(err.is_conflict());
        fake.set_get_error(Some(api_status::internal_error("boom")));
        assert!(fake.get("default", "a").await.is_err());
        assert_eq!(fake.actions().len(), 2);
        fake.clear_actions();
        assert!(fake.actions().is_empty());
    }
}
