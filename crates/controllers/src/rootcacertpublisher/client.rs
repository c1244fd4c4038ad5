//! The ConfigMap writes of the root CA publisher behind a seam, with a recording fake.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ConfigMap;
use kcm_machinery::controller::api_status;
use kube::api::{Api, PostParams};
use kube::core::Status;

/// The ConfigMap requests the publisher makes.
#[async_trait]
pub trait ConfigMapClient: Send + Sync {
    /// POSTs `config_map` into `namespace`.
    async fn create(
        &self,
        namespace: &str,
        config_map: &ConfigMap,
    ) -> Result<ConfigMap, kube::Error>;
    /// PUTs `config_map` (read from the cache, with its resourceVersion).
    async fn update(
        &self,
        namespace: &str,
        config_map: &ConfigMap,
    ) -> Result<ConfigMap, kube::Error>;
}

/// [`ConfigMapClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiConfigMapClient {
    client: kube::Client,
}

impl ApiConfigMapClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiConfigMapClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiConfigMapClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl ConfigMapClient for ApiConfigMapClient {
    async fn create(
        &self,
        namespace: &str,
        config_map: &ConfigMap,
    ) -> Result<ConfigMap, kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        api.create(&PostParams::default(), config_map).await
    }

    async fn update(
        &self,
        namespace: &str,
        config_map: &ConfigMap,
    ) -> Result<ConfigMap, kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let name = config_map.metadata.name.clone().unwrap_or_default();
        api.replace(&name, &PostParams::default(), config_map).await
    }
}

/// One call recorded by [`FakeConfigMapClient`]: the verb and `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigMapAction {
    /// A create.
    Create(String),
    /// An update.
    Update(String),
}

#[derive(Debug, Default)]
struct FakeState {
    stored: BTreeMap<String, ConfigMap>,
    actions: Vec<ConfigMapAction>,
    error: Option<Status>,
    panic_next_call: bool,
}

/// An in-memory [`ConfigMapClient`] recording its calls.
#[derive(Debug, Default)]
pub struct FakeConfigMapClient {
    state: Mutex<FakeState>,
}

impl FakeConfigMapClient {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every call so far.
    pub fn actions(&self) -> Vec<ConfigMapAction> {
        self.state().actions.clone()
    }

    /// The stored ConfigMap `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<ConfigMap> {
        self.state()
            .stored
            .get(&format!("{namespace}/{name}"))
            .cloned()
    }

    /// Stores `config_map` as if it existed on the server (not recorded as a call).
    pub fn insert(&self, config_map: ConfigMap) {
        let key = format!(
            "{}/{}",
            config_map.metadata.namespace.as_deref().unwrap_or_default(),
            config_map.metadata.name.as_deref().unwrap_or_default()
        );
        self.state().stored.insert(key, config_map);
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
            panic!("FakeConfigMapClient: injected panic");
        }
        let state = self.state();
        match &state.error {
            Some(status) => Err(kube::Error::Api(status.clone().boxed())),
            None => Ok(state),
        }
    }
}

#[async_trait]
impl ConfigMapClient for FakeConfigMapClient {
    async fn create(
        &self,
        namespace: &str,
        config_map: &ConfigMap,
    ) -> Result<ConfigMap, kube::Error> {
        let name = config_map.metadata.name.clone().unwrap_or_default();
        let key = format!("{namespace}/{name}");
        let mut state = self.begin()?;
        state.actions.push(ConfigMapAction::Create(key.clone()));
        let mut created = config_map.clone();
        created.metadata.namespace = Some(namespace.to_owned());
        state.stored.insert(key, created.clone());
        Ok(created)
    }

    async fn update(
        &self,
        namespace: &str,
        config_map: &ConfigMap,
    ) -> Result<ConfigMap, kube::Error> {
        let name = config_map.metadata.name.clone().unwrap_or_default();
        let key = format!("{namespace}/{name}");
        let mut state = self.begin()?;
        state.actions.push(ConfigMapAction::Update(key.clone()));
        if !state.stored.contains_key(&key) {
            return Err(kube::Error::Api(
                api_status::not_found("configmaps", &name).boxed(),
            ));
        }
        state.stored.insert(key, config_map.clone());
        Ok(config_map.clone())
    }
}
