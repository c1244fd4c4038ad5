//! The Endpoints writes of the endpoints controller behind a seam, with an in-memory fake that counts them.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Endpoints;
use kcm_machinery::controller::api_status;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::Status;

/// The Endpoints requests the controller makes (upstream's `CoreV1().Endpoints(ns)`).
#[async_trait]
pub trait EndpointsClient: Send + Sync {
    /// POSTs `endpoints` into `namespace`.
    async fn create(
        &self,
        namespace: &str,
        endpoints: &Endpoints,
    ) -> Result<Endpoints, kube::Error>;
    /// PUTs `endpoints` (with the resourceVersion it was read at).
    async fn update(
        &self,
        namespace: &str,
        endpoints: &Endpoints,
    ) -> Result<Endpoints, kube::Error>;
    /// DELETEs Endpoints `name` of `namespace`.
    async fn delete(&self, namespace: &str, name: &str) -> Result<(), kube::Error>;
}

/// [`EndpointsClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiEndpointsClient {
    client: kube::Client,
}

impl ApiEndpointsClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, namespace: &str) -> Api<Endpoints> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiEndpointsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiEndpointsClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl EndpointsClient for ApiEndpointsClient {
    async fn create(
        &self,
        namespace: &str,
        endpoints: &Endpoints,
    ) -> Result<Endpoints, kube::Error> {
        self.api(namespace)
            .create(&PostParams::default(), endpoints)
            .await
    }

    async fn update(
        &self,
        namespace: &str,
        endpoints: &Endpoints,
    ) -> Result<Endpoints, kube::Error> {
        let name = endpoints.metadata.name.clone().unwrap_or_default();
        self.api(namespace)
            .replace(&name, &PostParams::default(), endpoints)
            .await
    }

    async fn delete(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        self.api(namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
    }
}

/// One call recorded by [`FakeEndpointsClient`]: the verb and `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndpointsAction {
    /// A create.
    Create(String),
    /// An update.
    Update(String),
    /// A delete.
    Delete(String),
}

#[derive(Debug, Default)]
struct FakeState {
    /// Stored objects by `namespace/name`.
    stored: BTreeMap<String, Endpoints>,
    /// Every call, in order.
    actions: Vec<EndpointsAction>,
    /// The last resourceVersion handed out.
    resource_version: u64,
    /// When set, every call fails with this status.
    error: Option<Status>,
    /// When set, the next call panics (once).
    panic_next_call: bool,
}

/// An in-memory [`EndpointsClient`] recording its calls.
#[derive(Debug, Default)]
pub struct FakeEndpointsClient {
    state: Mutex<FakeState>,
}

impl FakeEndpointsClient {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every call so far.
    pub fn actions(&self) -> Vec<EndpointsAction> {
        self.state().actions.clone()
    }

    /// The stored object `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Endpoints> {
        self.state()
            .stored
            .get(&format!("{namespace}/{name}"))
            .cloned()
    }

    /// Stores `endpoints` as if it existed on the server.
    pub fn insert(&self, endpoints: Endpoints) {
        let key = format!(
            "{}/{}",
            endpoints.metadata.namespace.as_deref().unwrap_or_default(),
            endpoints.metadata.name.as_deref().unwrap_or_default()
        );
        let mut state = self.state();
        // Later writes get newer resourceVersions than anything inserted.
        let rv = endpoints
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .unwrap_or(0);
        state.resource_version = state.resource_version.max(rv);
        state.stored.insert(key, endpoints);
    }

    /// Makes every later call fail with `error` (`None` restores success).
    pub fn set_error(&self, error: Option<Status>) {
        self.state().error = error;
    }

    /// Makes the next call panic, once.
    pub fn panic_on_next_call(&self) {
        self.state().panic_next_call = true;
    }

    fn begin(&self) -> Result<MutexGuard<'_, FakeState>, kube::Error> {
        let armed = std::mem::take(&mut self.state().panic_next_call);
        if armed {
            panic!("FakeEndpointsClient: injected panic");
        }
        let state = self.state();
        match &state.error {
            Some(status) => Err(kube::Error::Api(status.clone().boxed())),
            None => Ok(state),
        }
    }
}

#[async_trait]
impl EndpointsClient for FakeEndpointsClient {
    async fn create(
        &self,
        namespace: &str,
        endpoints: &Endpoints,
    ) -> Result<Endpoints, kube::Error> {
        let name = endpoints.metadata.name.clone().unwrap_or_default();
        let key = format!("{namespace}/{name}");
        let mut state = self.begin()?;
        state.actions.push(EndpointsAction::Create(key.clone()));
        if state.stored.contains_key(&key) {
            return Err(kube::Error::Api(
                Status::failure(
                    &format!("endpoints \"{name}\" already exists"),
                    "AlreadyExists",
                )
                .with_code(409)
                .boxed(),
            ));
        }
        state.resource_version += 1;
        let mut created = endpoints.clone();
        created.metadata.namespace = Some(namespace.to_owned());
        created.metadata.resource_version = Some(state.resource_version.to_string());
        state.stored.insert(key, created.clone());
        Ok(created)
    }

    async fn update(
        &self,
        namespace: &str,
        endpoints: &Endpoints,
    ) -> Result<Endpoints, kube::Error> {
        let name = endpoints.metadata.name.clone().unwrap_or_default();
        let key = format!("{namespace}/{name}");
        let mut state = self.begin()?;
        state.actions.push(EndpointsAction::Update(key.clone()));
        if !state.stored.contains_key(&key) {
            return Err(kube::Error::Api(
                api_status::not_found("endpoints", &name).boxed(),
            ));
        }
        state.resource_version += 1;
        let mut updated = endpoints.clone();
        updated.metadata.namespace = Some(namespace.to_owned());
        updated.metadata.resource_version = Some(state.resource_version.to_string());
        state.stored.insert(key, updated.clone());
        Ok(updated)
    }

    async fn delete(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let key = format!("{namespace}/{name}");
        let mut state = self.begin()?;
        state.actions.push(EndpointsAction::Delete(key.clone()));
        match state.stored.remove(&key) {
            Some(_) => Ok(()),
            None => Err(kube::Error::Api(
                api_status::not_found("endpoints", name).boxed(),
            )),
        }
    }
}
