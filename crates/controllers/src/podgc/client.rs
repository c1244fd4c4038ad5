//! The API calls the pod garbage collector makes: whether a node exists (an uncached GET), patching a pod's status to `Failed`, and force-deleting a pod.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Pod};
use kcm_machinery::controller::ApiStatus;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::core::Status;

/// The pod garbage collector's calls.
#[async_trait]
pub trait PodGcClient: Send + Sync {
    /// Whether node `name` exists, asked of the API server (a quorum read), as upstream's
    /// `checkIfNodeExists`.
    async fn node_exists(&self, name: &str) -> Result<bool, kube::Error>;

    /// Applies `patch` (a strategic merge of `status`, with `metadata.uid` as a precondition)
    /// to the pod's `/status`, as upstream's `PatchPodStatus`.
    async fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error>;

    /// Deletes the pod with grace period 0, as upstream's `NewDeleteOptions(0)`.
    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), kube::Error>;
}

/// [`PodGcClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiPodGcClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiPodGcClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiPodGcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiPodGcClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl PodGcClient for ApiPodGcClient {
    async fn node_exists(&self, name: &str) -> Result<bool, kube::Error> {
        match Api::<Node>::all(self.client.clone()).get(name).await {
            Ok(_) => Ok(true),
            Err(err) if err.is_not_found() => Ok(false),
            Err(err) => Err(err),
        }
    }

    async fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map(|_| ())
    }

    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .delete(name, &params)
            .await
            .map(|_| ())
    }
}

/// One call recorded by [`FakePodGcClient`].
#[derive(Clone, Debug, PartialEq)]
pub enum PodGcAction {
    /// A node GET.
    GetNode(String),
    /// A status patch of `namespace/name`.
    PatchStatus {
        /// `namespace/name`.
        pod: String,
        /// The patch.
        patch: serde_json::Value,
    },
    /// A force delete of `namespace/name`.
    Delete(String),
}

/// What [`FakePodGcClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// Nodes the "server" has.
    nodes: HashSet<String>,
    /// Every call, in order.
    actions: Vec<PodGcAction>,
    /// When set, every node GET fails with this status.
    get_node_error: Option<Status>,
    /// When set, every delete fails with this status.
    delete_error: Option<Status>,
}

/// A [`PodGcClient`] answering from memory and recording calls.
#[derive(Debug, Default)]
pub struct FakePodGcClient {
    state: Mutex<FakeState>,
}

impl FakePodGcClient {
    /// A fake whose server has no nodes.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes node `name` exist on the "server".
    pub fn add_node(&self, name: &str) {
        self.state().nodes.insert(name.to_owned());
    }

    /// Every call so far.
    pub fn actions(&self) -> Vec<PodGcAction> {
        self.state().actions.clone()
    }

    /// The pods deleted so far, in order.
    pub fn deleted(&self) -> Vec<String> {
        self.actions()
            .into_iter()
            .filter_map(|a| match a {
                PodGcAction::Delete(pod) => Some(pod),
                _ => None,
            })
            .collect()
    }

    /// The status patches so far, in order.
    pub fn patches(&self) -> Vec<(String, serde_json::Value)> {
        self.actions()
            .into_iter()
            .filter_map(|a| match a {
                PodGcAction::PatchStatus { pod, patch } => Some((pod, patch)),
                _ => None,
            })
            .collect()
    }

    /// Makes node GETs fail with `status` (or succeed with `None`).
    pub fn set_get_node_error(&self, status: Option<Status>) {
        self.state().get_node_error = status;
    }

    /// Makes deletes fail with `status` (or succeed with `None`).
    pub fn set_delete_error(&self, status: Option<Status>) {
        self.state().delete_error = status;
    }

    /// Forgets the recorded calls.
    pub fn clear(&self) {
        self.state().actions.clear();
    }
}

#[async_trait]
impl PodGcClient for FakePodGcClient {
    async fn node_exists(&self, name: &str) -> Result<bool, kube::Error> {
        let mut state = self.state();
        state.actions.push(PodGcAction::GetNode(name.to_owned()));
        if let Some(status) = &state.get_node_error {
            return Err(kube::Error::Api(status.clone().boxed()));
        }
        Ok(state.nodes.contains(name))
    }

    async fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        self.state().actions.push(PodGcAction::PatchStatus {
            pod: format!("{namespace}/{name}"),
            patch: patch.clone(),
        });
        Ok(())
    }

    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let mut state = self.state();
        state
            .actions
            .push(PodGcAction::Delete(format!("{namespace}/{name}")));
        match &state.delete_error {
            Some(status) => Err(kube::Error::Api(status.clone().boxed())),
            None => Ok(()),
        }
    }
}
