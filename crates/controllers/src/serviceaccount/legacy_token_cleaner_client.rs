//! The API calls of the legacy token cleaner (reading the API server's tracking ConfigMap, labelling and deleting token Secrets) behind a seam with a recording fake.
//!
//! [`LegacyTokenCleanerClient`] is the seam: [`ApiLegacyTokenCleanerClient`] talks to the
//! server (upstream's `CoreV1().ConfigMaps(ns).Get`, `Secrets(ns).Patch` and `Delete`),
//! [`FakeLegacyTokenCleanerClient`] records each call as a [`CleanerAction`] and serves one
//! ConfigMap (or NotFound), as client-go's fake clientset records actions for upstream's
//! `legacy_serviceaccount_token_cleaner_test.go`.

use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::core::Status;
use kube::core::response::{StatusDetails, StatusSummary};

/// The requests the legacy token cleaner makes.
#[async_trait]
pub trait LegacyTokenCleanerClient: Send + Sync {
    /// GETs ConfigMap `namespace/name` from the API server (uncached, as upstream's
    /// `latestPossibleTrackedSinceTime`).
    async fn get_config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, kube::Error>;

    /// Applies the JSON merge patch `patch` to Secret `namespace/name`.
    async fn patch_secret(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error>;

    /// Deletes Secret `namespace/name` if it is still at `resource_version` (a
    /// `preconditions.resourceVersion` delete).
    async fn delete_secret(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> Result<(), kube::Error>;
}

/// [`LegacyTokenCleanerClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiLegacyTokenCleanerClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiLegacyTokenCleanerClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiLegacyTokenCleanerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiLegacyTokenCleanerClient")
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl LegacyTokenCleanerClient for ApiLegacyTokenCleanerClient {
    async fn get_config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, kube::Error> {
        Api::<ConfigMap>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
    }

    async fn patch_secret(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        Api::<Secret>::namespaced(self.client.clone(), namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
    }

    async fn delete_secret(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> Result<(), kube::Error> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(resource_version.to_owned()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        Api::<Secret>::namespaced(self.client.clone(), namespace)
            .delete(name, &params)
            .await
            .map(drop)
    }
}

// ---------------------------------------------------------------------------------------------
// The fake
// ---------------------------------------------------------------------------------------------

/// One request the fake received, in the shape of client-go's recorded actions.
#[derive(Clone, Debug, PartialEq)]
pub enum CleanerAction {
    /// `get configmaps` of `namespace/name`.
    GetConfigMap {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
    /// A merge `patch` of Secret `namespace/name`.
    PatchSecret {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// The patch body.
        patch: serde_json::Value,
    },
    /// A `delete` of Secret `namespace/name` with a resourceVersion precondition.
    DeleteSecret {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// `preconditions.resourceVersion`.
        resource_version: String,
    },
}

/// What [`FakeLegacyTokenCleanerClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// The one ConfigMap the fake serves (any other name, or none, answers NotFound).
    config_map: Option<ConfigMap>,
    /// Every call, in order.
    actions: Vec<CleanerAction>,
}

/// An in-memory [`LegacyTokenCleanerClient`] recording its calls.
#[derive(Debug, Default)]
pub struct FakeLegacyTokenCleanerClient {
    /// The served ConfigMap and the recorded calls.
    state: Mutex<FakeState>,
}

impl FakeLegacyTokenCleanerClient {
    /// A fake serving no ConfigMap.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fake serving `config_map` to GETs of its namespace and name.
    pub fn with_config_map(config_map: ConfigMap) -> Self {
        let fake = Self::default();
        fake.state().config_map = Some(config_map);
        fake
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The calls so far.
    pub fn actions(&self) -> Vec<CleanerAction> {
        self.state().actions.clone()
    }
}

/// A 404 NotFound status for `resource` `name`, as apimachinery's `NewNotFound`.
pub fn not_found(resource: &str, name: &str) -> Status {
    Status {
        status: Some(StatusSummary::Failure),
        code: 404,
        message: format!("{resource} \"{name}\" not found"),
        metadata: None,
        reason: "NotFound".to_owned(),
        details: Some(StatusDetails {
            name: name.to_owned(),
            group: String::new(),
            kind: resource.to_owned(),
            uid: String::new(),
            causes: Vec::new(),
            retry_after_seconds: 0,
        }),
    }
}

#[async_trait]
impl LegacyTokenCleanerClient for FakeLegacyTokenCleanerClient {
    async fn get_config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, kube::Error> {
        let mut state = self.state();
        state.actions.push(CleanerAction::GetConfigMap {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        });
        state
            .config_map
            .clone()
            .filter(|cm| {
                cm.metadata.namespace.as_deref() == Some(namespace)
                    && cm.metadata.name.as_deref() == Some(name)
            })
            .ok_or_else(|| kube::Error::Api(not_found("configmaps", name).boxed()))
    }

    async fn patch_secret(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        self.state().actions.push(CleanerAction::PatchSecret {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            patch: patch.clone(),
        });
        Ok(())
    }

    async fn delete_secret(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> Result<(), kube::Error> {
        self.state().actions.push(CleanerAction::DeleteSecret {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            resource_version: resource_version.to_owned(),
        });
        Ok(())
    }
}
