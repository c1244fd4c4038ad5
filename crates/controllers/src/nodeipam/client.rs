//! The node IPAM controller's one write, patching a Node's pod CIDRs, behind a seam with a recording fake.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::core::Status;
use serde_json::json;

/// The requests the node IPAM controller makes.
#[async_trait]
pub trait NodeCidrClient: Send + Sync {
    /// Sets `spec.podCIDR` (the first) and `spec.podCIDRs` of node `name` with a strategic
    /// merge patch, as component-helpers' `PatchNodeCIDRs`.
    async fn patch_node_cidrs(&self, name: &str, cidrs: &[String]) -> Result<(), kube::Error>;
}

/// [`NodeCidrClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiNodeCidrClient {
    client: kube::Client,
}

impl ApiNodeCidrClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiNodeCidrClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiNodeCidrClient").finish_non_exhaustive()
    }
}

/// The patch body: `{"spec":{"podCIDR":..., "podCIDRs":[...]}}`.
pub fn node_cidrs_patch(cidrs: &[String]) -> serde_json::Value {
    json!({"spec": {"podCIDR": cidrs.first().cloned().unwrap_or_default(), "podCIDRs": cidrs}})
}

#[async_trait]
impl NodeCidrClient for ApiNodeCidrClient {
    async fn patch_node_cidrs(&self, name: &str, cidrs: &[String]) -> Result<(), kube::Error> {
        let api: Api<Node> = Api::all(self.client.clone());
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Strategic(node_cidrs_patch(cidrs)),
        )
        .await
        .map(|_| ())
    }
}

#[derive(Debug, Default)]
struct FakeState {
    /// Every patch, in order: node name and CIDRs.
    patches: Vec<(String, Vec<String>)>,
    /// The CIDRs last patched per node.
    nodes: BTreeMap<String, Vec<String>>,
    /// Failures to return before succeeding again.
    failures: Vec<Status>,
    panic_next_call: bool,
}

/// An in-memory [`NodeCidrClient`] recording its calls.
#[derive(Debug, Default)]
pub struct FakeNodeCidrClient {
    state: Mutex<FakeState>,
}

impl FakeNodeCidrClient {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every patch so far.
    pub fn patches(&self) -> Vec<(String, Vec<String>)> {
        self.state().patches.clone()
    }

    /// Makes the next `n` patches fail with `status`.
    pub fn fail_next(&self, n: usize, status: Status) {
        let mut state = self.state();
        for _ in 0..n {
            state.failures.push(status.clone());
        }
    }

    /// Makes the next call panic, once.
    pub fn panic_on_next_call(&self) {
        self.state().panic_next_call = true;
    }
}

#[async_trait]
impl NodeCidrClient for FakeNodeCidrClient {
    async fn patch_node_cidrs(&self, name: &str, cidrs: &[String]) -> Result<(), kube::Error> {
        let armed = std::mem::take(&mut self.state().panic_next_call);
        if armed {
            panic!("FakeNodeCidrClient: injected panic");
        }
        let mut state = self.state();
        state.patches.push((name.to_owned(), cidrs.to_vec()));
        if !state.failures.is_empty() {
            let status = state.failures.remove(0);
            return Err(kube::Error::Api(status.boxed()));
        }
        state.nodes.insert(name.to_owned(), cidrs.to_vec());
        Ok(())
    }
}
