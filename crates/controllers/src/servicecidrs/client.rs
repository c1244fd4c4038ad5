//! The ServiceCIDR controller's API calls: merge patches of a ServiceCIDR (its finalizers) and of its `/status` (the `Ready` condition).

use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::api::{Api, Patch, PatchParams};
use kube::core::Status;

/// The ServiceCIDR controller's calls.
#[async_trait]
pub trait ServiceCidrClient: Send + Sync {
    /// Merge-patches ServiceCIDR `name` (`status`: its `/status`).
    async fn patch(
        &self,
        name: &str,
        status: bool,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error>;
}

/// [`ServiceCidrClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiServiceCidrClient {
    client: kube::Client,
}

impl ApiServiceCidrClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiServiceCidrClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServiceCidrClient")
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl ServiceCidrClient for ApiServiceCidrClient {
    async fn patch(
        &self,
        name: &str,
        status: bool,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        let api = Api::<ServiceCIDR>::all(self.client.clone());
        let params = PatchParams::default();
        let result = if status {
            api.patch_status(name, &params, &Patch::Merge(patch)).await
        } else {
            api.patch(name, &params, &Patch::Merge(patch)).await
        };
        result.map(|_| ())
    }
}

/// One patch recorded by [`FakeServiceCidrClient`].
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedPatch {
    /// The ServiceCIDR.
    pub name: String,
    /// Whether it went to `/status`.
    pub status: bool,
    /// The patch.
    pub patch: serde_json::Value,
}

#[derive(Debug, Default)]
struct FakeState {
    patches: Vec<RecordedPatch>,
    failures: Vec<Status>,
}

/// A [`ServiceCidrClient`] recording patches, optionally failing the next ones.
#[derive(Debug, Default)]
pub struct FakeServiceCidrClient {
    state: Mutex<FakeState>,
}

impl FakeServiceCidrClient {
    /// A fake whose patches succeed.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every patch so far.
    pub fn patches(&self) -> Vec<RecordedPatch> {
        self.state().patches.clone()
    }

    /// Makes the next patch fail with `status`.
    pub fn fail_next(&self, status: Status) {
        self.state().failures.push(status);
    }
}

#[async_trait]
impl ServiceCidrClient for FakeServiceCidrClient {
    async fn patch(
        &self,
        name: &str,
        status: bool,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        let mut state = self.state();
        state.patches.push(RecordedPatch {
            name: name.to_owned(),
            status,
            patch: patch.clone(),
        });
        if state.failures.is_empty() {
            Ok(())
        } else {
            Err(kube::Error::Api(state.failures.remove(0).boxed()))
        }
    }
}
