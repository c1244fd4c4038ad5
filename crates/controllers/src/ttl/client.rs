//! The TTL controller's one write, a strategic merge patch of a Node's TTL annotation, behind a seam with a recording fake.

use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::core::Status;
use serde_json::json;

use super::TTL_ANNOTATION;

/// The requests the TTL controller makes.
#[async_trait]
pub trait TtlNodeClient: Send + Sync {
    /// Sets node `name`'s TTL annotation to `ttl_seconds` with a strategic merge patch.
    async fn patch_ttl(&self, name: &str, ttl_seconds: i32) -> Result<(), kube::Error>;
}

/// The patch body, `{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"<ttl>"}}}`:
/// what upstream's two-way merge patch of the annotated copy against the Node comes to.
pub fn ttl_annotation_patch(ttl_seconds: i32) -> serde_json::Value {
    json!({"metadata": {"annotations": {TTL_ANNOTATION: ttl_seconds.to_string()}}})
}

/// [`TtlNodeClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiTtlNodeClient {
    client: kube::Client,
}

impl ApiTtlNodeClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiTtlNodeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiTtlNodeClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl TtlNodeClient for ApiTtlNodeClient {
    async fn patch_ttl(&self, name: &str, ttl_seconds: i32) -> Result<(), kube::Error> {
        let api: Api<Node> = Api::all(self.client.clone());
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Strategic(ttl_annotation_patch(ttl_seconds)),
        )
        .await
        .map(|_| ())
    }
}

#[derive(Debug, Default)]
struct FakeState {
    /// Every patch, in order: the Node and the body sent.
    patches: Vec<(String, serde_json::Value)>,
    /// The error every call fails with, when set.
    error: Option<Status>,
}

/// An in-memory [`TtlNodeClient`] recording its patches.
#[derive(Debug, Default)]
pub struct FakeTtlNodeClient {
    state: Mutex<FakeState>,
}

impl FakeTtlNodeClient {
    /// A fake that accepts every patch.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every patch so far: the Node and the body.
    pub fn patches(&self) -> Vec<(String, serde_json::Value)> {
        self.state().patches.clone()
    }

    /// Makes every later call fail with `error` (`None` restores success).
    pub fn set_error(&self, error: Option<Status>) {
        self.state().error = error;
    }
}

#[async_trait]
impl TtlNodeClient for FakeTtlNodeClient {
    async fn patch_ttl(&self, name: &str, ttl_seconds: i32) -> Result<(), kube::Error> {
        let mut state = self.state();
        state
            .patches
            .push((name.to_owned(), ttl_annotation_patch(ttl_seconds)));
        match &state.error {
            Some(status) => Err(kube::Error::Api(status.clone().boxed())),
            None => Ok(()),
        }
    }
}
