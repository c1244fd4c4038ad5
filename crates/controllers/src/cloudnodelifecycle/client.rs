//! The Node calls of the cloud node lifecycle controller: a read (before a taint change), an update (the taints, under the read's resourceVersion) and a delete.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use kcm_machinery::controller::api_status;
use kube::api::{Api, DeleteParams, PostParams};

/// The controller's calls.
#[async_trait]
pub trait CloudNodeClient: Send + Sync {
    /// Reads Node `name` from the API server.
    async fn get_node(&self, name: &str) -> Result<Node, kube::Error>;
    /// Replaces the Node (optimistic concurrency on its resourceVersion).
    async fn update_node(&self, node: &Node) -> Result<(), kube::Error>;
    /// Deletes Node `name`.
    async fn delete_node(&self, name: &str) -> Result<(), kube::Error>;
}

/// [`CloudNodeClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiCloudNodeClient {
    client: kube::Client,
}

impl ApiCloudNodeClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiCloudNodeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiCloudNodeClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl CloudNodeClient for ApiCloudNodeClient {
    async fn get_node(&self, name: &str) -> Result<Node, kube::Error> {
        Api::<Node>::all(self.client.clone()).get(name).await
    }

    async fn update_node(&self, node: &Node) -> Result<(), kube::Error> {
        let name = node.metadata.name.clone().unwrap_or_default();
        Api::<Node>::all(self.client.clone())
            .replace(&name, &PostParams::default(), node)
            .await
            .map(|_| ())
    }

    async fn delete_node(&self, name: &str) -> Result<(), kube::Error> {
        Api::<Node>::all(self.client.clone())
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
    }
}

/// One call recorded by [`FakeCloudNodeClient`].
#[derive(Debug, Clone, PartialEq)]
pub enum NodeAction {
    /// A read.
    Get(String),
    /// An update, with the Node as sent.
    Update(Node),
    /// A delete.
    Delete(String),
}

#[derive(Debug, Default)]
struct FakeState {
    nodes: BTreeMap<String, Node>,
    actions: Vec<NodeAction>,
}

/// A [`CloudNodeClient`] over Nodes in memory, recording calls.
#[derive(Debug, Default)]
pub struct FakeCloudNodeClient {
    state: Mutex<FakeState>,
}

impl FakeCloudNodeClient {
    /// A fake holding `nodes`.
    pub fn new(nodes: impl IntoIterator<Item = Node>) -> Self {
        let nodes = nodes
            .into_iter()
            .map(|n| (n.metadata.name.clone().unwrap_or_default(), n))
            .collect();
        Self {
            state: Mutex::new(FakeState {
                nodes,
                actions: Vec::new(),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every call so far.
    pub fn actions(&self) -> Vec<NodeAction> {
        self.state().actions.clone()
    }

    /// The Node as the "server" holds it.
    pub fn node(&self, name: &str) -> Option<Node> {
        self.state().nodes.get(name).cloned()
    }
}

#[async_trait]
impl CloudNodeClient for FakeCloudNodeClient {
    async fn get_node(&self, name: &str) -> Result<Node, kube::Error> {
        let mut state = self.state();
        state.actions.push(NodeAction::Get(name.to_owned()));
        state
            .nodes
            .get(name)
            .cloned()
            .ok_or_else(|| kube::Error::Api(api_status::not_found("nodes", name).boxed()))
    }

    async fn update_node(&self, node: &Node) -> Result<(), kube::Error> {
        let mut state = self.state();
        state.actions.push(NodeAction::Update(node.clone()));
        let name = node.metadata.name.clone().unwrap_or_default();
        state.nodes.insert(name, node.clone());
        Ok(())
    }

    async fn delete_node(&self, name: &str) -> Result<(), kube::Error> {
        let mut state = self.state();
        state.actions.push(NodeAction::Delete(name.to_owned()));
        match state.nodes.remove(name) {
            Some(_) => Ok(()),
            None => Err(kube::Error::Api(
                api_status::not_found("nodes", name).boxed(),
            )),
        }
    }
}
