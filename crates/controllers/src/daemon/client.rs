//! The DaemonSet API calls the controller makes directly: the uncached GET and the `/status` update.
//!
//! Everything else the controller reads comes from the informer caches. [`DaemonSetClient`]
//! is the seam: [`ApiDaemonSetClient`] talks to the server, [`FakeDaemonSetClient`] records
//! calls and injects failures for unit tests. ControllerRevisions are written through
//! `kcm_machinery::controller::history::RevisionClient`, pods through `PodControl`.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::DaemonSet;
use kcm_machinery::controller::api_status;
use kcm_machinery::informer::keys::object_key;
use kube::api::{Api, PostParams};
use kube::core::Status;

/// The DaemonSet calls the controller makes to the API server, bypassing the cache.
#[async_trait]
pub trait DaemonSetClient: Send + Sync {
    /// Reads `namespace/name` from the API server, as client-go's `DaemonSets(ns).Get`.
    async fn get(&self, namespace: &str, name: &str) -> Result<DaemonSet, kube::Error>;

    /// Writes `ds.status` through `/status` with `ds`'s resourceVersion as the precondition,
    /// as client-go's `UpdateStatus`. Returns the DaemonSet as stored.
    async fn update_status(&self, ds: &DaemonSet) -> Result<DaemonSet, kube::Error>;
}

/// [`DaemonSetClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiDaemonSetClient {
    client: kube::Client,
}

impl ApiDaemonSetClient {
    /// DaemonSet calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, namespace: &str) -> Api<DaemonSet> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiDaemonSetClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiDaemonSetClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl DaemonSetClient for ApiDaemonSetClient {
    async fn get(&self, namespace: &str, name: &str) -> Result<DaemonSet, kube::Error> {
        self.api(namespace).get(name).await
    }

    async fn update_status(&self, ds: &DaemonSet) -> Result<DaemonSet, kube::Error> {
        let namespace = ds.metadata.namespace.as_deref().unwrap_or_default();
        let name = ds.metadata.name.as_deref().unwrap_or_default();
        self.api(namespace)
            .replace_status(name, &PostParams::default(), ds)
            .await
    }
}

/// One call recorded by [`FakeDaemonSetClient`].
#[derive(Clone, Debug, PartialEq)]
pub enum DaemonSetAction {
    /// A `get` of `namespace/name`.
    Get(String),
    /// An `update_status` with this object.
    UpdateStatus(DaemonSet),
}

#[derive(Debug, Default)]
struct FakeState {
    objects: HashMap<String, DaemonSet>,
    actions: Vec<DaemonSetAction>,
    get_error: Option<Status>,
    update_error: Option<Status>,
}

/// A [`DaemonSetClient`] serving objects from memory and recording calls. A `get` of an
/// unknown object is a NotFound; a successful `update_status` stores and returns its object.
#[derive(Debug, Default)]
pub struct FakeDaemonSetClient {
    state: Mutex<FakeState>,
}

impl FakeDaemonSetClient {
    /// A fake holding nothing and failing nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `ds` as the server's copy.
    pub fn insert(&self, ds: DaemonSet) {
        let key = object_key(
            ds.metadata.namespace.as_deref().unwrap_or_default(),
            ds.metadata.name.as_deref().unwrap_or_default(),
        );
        self.state().objects.insert(key, ds);
    }

    /// Makes every later `get` fail with `status` (or succeed with `None`).
    pub fn set_get_error(&self, status: Option<Status>) {
        self.state().get_error = status;
    }

    /// Makes every later `update_status` fail with `status` (or succeed with `None`).
    pub fn set_update_error(&self, status: Option<Status>) {
        self.state().update_error = status;
    }

    /// Every call so far.
    pub fn actions(&self) -> Vec<DaemonSetAction> {
        self.state().actions.clone()
    }

    /// The statuses written so far, in order.
    pub fn status_updates(&self) -> Vec<DaemonSet> {
        self.actions()
            .into_iter()
            .filter_map(|a| match a {
                DaemonSetAction::UpdateStatus(ds) => Some(ds),
                DaemonSetAction::Get(_) => None,
            })
            .collect()
    }
}

#[async_trait]
impl DaemonSetClient for FakeDaemonSetClient {
    async fn get(&self, namespace: &str, name: &str) -> Result<DaemonSet, kube::Error> {
        let key = object_key(namespace, name);
        let mut state = self.state();
        state.actions.push(DaemonSetAction::Get(key.clone()));
        if let Some(status) = &state.get_error {
            return Err(kube::Error::Api(status.clone().boxed()));
        }
        state
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| kube::Error::Api(api_status::not_found("daemonsets.apps", name).boxed()))
    }

    async fn update_status(&self, ds: &DaemonSet) -> Result<DaemonSet, kube::Error> {
        let mut state = self.state();
        state
            .actions
            .push(DaemonSetAction::UpdateStatus(ds.clone()));
        if let Some(status) = &state.update_error {
            return Err(kube::Error::Api(status.clone().boxed()));
        }
        let key = object_key(
            ds.metadata.namespace.as_deref().unwrap_or_default(),
            ds.metadata.name.as_deref().unwrap_or_default(),
        );
        state.objects.insert(key, ds.clone());
        Ok(ds.clone())
    }
}
