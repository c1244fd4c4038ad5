//! The two writes of the bootstrap controllers: the token cleaner's delete of an expired token Secret (with its UID as precondition) and the signer's update of `cluster-info`; with a recording fake.

use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::core::Status;

/// The bootstrap controllers' calls.
#[async_trait]
pub trait BootstrapClient: Send + Sync {
    /// Deletes Secret `namespace/name`, only if its UID is still `uid` when one is given.
    async fn delete_secret(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), kube::Error>;

    /// Replaces ConfigMap `config_map` (conditional on its resourceVersion).
    async fn update_config_map(&self, config_map: &ConfigMap) -> Result<(), kube::Error>;
}

/// [`BootstrapClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiBootstrapClient {
    client: kube::Client,
}

impl ApiBootstrapClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiBootstrapClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiBootstrapClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl BootstrapClient for ApiBootstrapClient {
    async fn delete_secret(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), kube::Error> {
        let params = DeleteParams {
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        Api::<Secret>::namespaced(self.client.clone(), namespace)
            .delete(name, &params)
            .await
            .map(|_| ())
    }

    async fn update_config_map(&self, config_map: &ConfigMap) -> Result<(), kube::Error> {
        let namespace = config_map.metadata.namespace.as_deref().unwrap_or_default();
        let name = config_map.metadata.name.as_deref().unwrap_or_default();
        Api::<ConfigMap>::namespaced(self.client.clone(), namespace)
            .replace(name, &PostParams::default(), config_map)
            .await
            .map(|_| ())
    }
}

/// What [`FakeBootstrapClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// Every delete: `(namespace, name, uid)`.
    deletes: Vec<(String, String, Option<String>)>,
    /// Every ConfigMap update.
    updates: Vec<ConfigMap>,
    /// When set, every call fails with this status.
    error: Option<Status>,
}

/// A [`BootstrapClient`] recording calls.
#[derive(Debug, Default)]
pub struct FakeBootstrapClient {
    state: Mutex<FakeState>,
}

impl FakeBootstrapClient {
    /// A fake that accepts everything.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every delete so far.
    pub fn deletes(&self) -> Vec<(String, String, Option<String>)> {
        self.state().deletes.clone()
    }

    /// Every ConfigMap update so far.
    pub fn updates(&self) -> Vec<ConfigMap> {
        self.state().updates.clone()
    }

    /// Makes every later call fail with `status`.
    pub fn fail_with(&self, status: Status) {
        self.state().error = Some(status);
    }
}

#[async_trait]
impl BootstrapClient for FakeBootstrapClient {
    async fn delete_secret(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), kube::Error> {
        let mut state = self.state();
        if let Some(status) = &state.error {
            return Err(kube::Error::Api(Box::new(status.clone())));
        }
        state.deletes.push((
            namespace.to_owned(),
            name.to_owned(),
            uid.map(str::to_owned),
        ));
        Ok(())
    }

    async fn update_config_map(&self, config_map: &ConfigMap) -> Result<(), kube::Error> {
        let mut state = self.state();
        if let Some(status) = &state.error {
            return Err(kube::Error::Api(Box::new(status.clone())));
        }
        state.updates.push(config_map.clone());
        Ok(())
    }
}
