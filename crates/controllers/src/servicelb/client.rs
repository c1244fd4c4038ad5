//! The one API call the service-lb controller makes: a merge patch of a Service's `/status` (its load-balancer status, or its finalizers: upstream's `PatchService` also writes through `status`, which the bootstrap role grants).

use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};
use kube::core::Status;

/// The service-lb controller's calls.
#[async_trait]
pub trait ServiceLbClient: Send + Sync {
    /// Applies the JSON merge `patch` to `namespace/name`'s `/status`.
    async fn patch_service_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error>;
}

/// [`ServiceLbClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiServiceLbClient {
    client: kube::Client,
}

impl ApiServiceLbClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiServiceLbClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServiceLbClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl ServiceLbClient for ApiServiceLbClient {
    async fn patch_service_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        Api::<Service>::namespaced(self.client.clone(), namespace)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(|_| ())
    }
}

/// One patch recorded by [`FakeServiceLbClient`]: `namespace/name` and the patch.
pub type RecordedPatch = (String, serde_json::Value);

#[derive(Debug, Default)]
struct FakeState {
    patches: Vec<RecordedPatch>,
    /// Patches that fail before one succeeds, and how.
    failures: Vec<Status>,
}

/// A [`ServiceLbClient`] recording patches, optionally failing the next ones.
#[derive(Debug, Default)]
pub struct FakeServiceLbClient {
    state: Mutex<FakeState>,
}

impl FakeServiceLbClient {
    /// A fake whose patches succeed.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every patch so far, failed ones included.
    pub fn patches(&self) -> Vec<RecordedPatch> {
        self.state().patches.clone()
    }

    /// Makes the next patch fail with `status`.
    pub fn fail_next(&self, status: Status) {
        self.state().failures.push(status);
    }
}

#[async_trait]
impl ServiceLbClient for FakeServiceLbClient {
    async fn patch_service_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        let mut state = self.state();
        state
            .patches
            .push((format!("{namespace}/{name}"), patch.clone()));
        if state.failures.is_empty() {
            Ok(())
        } else {
            Err(kube::Error::Api(state.failures.remove(0).boxed()))
        }
    }
}
