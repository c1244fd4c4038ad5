//! The API calls of the node lifecycle and taint eviction controllers, behind a seam for tests.
//!
//! Reads come from informer caches; these writes (and the GETs before retried writes) go to
//! the API server. [`ApiLifecycleClient`] talks to it; [`FakeLifecycleClient`] keeps objects
//! in memory, checks resourceVersions like the server and records every write.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Pod};
use kcm_machinery::controller::api_status;
use kcm_machinery::informer::keys::object_key;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

/// The writes (and uncached reads) the controllers make.
#[async_trait]
pub trait LifecycleClient: Send + Sync {
    /// GET a Node from the server.
    async fn get_node(&self, name: &str) -> Result<Node, kube::Error>;
    /// PUT a Node (its spec, e.g. taints), with its resourceVersion as precondition.
    async fn update_node(&self, node: &Node) -> Result<Node, kube::Error>;
    /// PUT a Node's status through `nodes/status`, with its resourceVersion as precondition.
    async fn update_node_status(&self, node: &Node) -> Result<Node, kube::Error>;
    /// Sets these labels on a Node with a strategic merge patch (other labels untouched), as
    /// upstream's `AddOrUpdateLabelsOnNode`.
    async fn patch_node_labels(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Node, kube::Error>;
    /// GET a Pod from the server.
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Pod, kube::Error>;
    /// PUT a Pod's status through `pods/status`, with its resourceVersion as precondition.
    async fn update_pod_status(&self, pod: &Pod) -> Result<Pod, kube::Error>;
    /// DELETE a Pod (default grace period).
    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), kube::Error>;
}

/// [`LifecycleClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiLifecycleClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiLifecycleClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiLifecycleClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiLifecycleClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl LifecycleClient for ApiLifecycleClient {
    async fn get_node(&self, name: &str) -> Result<Node, kube::Error> {
        self.nodes().get(name).await
    }

    async fn update_node(&self, node: &Node) -> Result<Node, kube::Error> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.nodes()
            .replace(name, &PostParams::default(), node)
            .await
    }

    async fn update_node_status(&self, node: &Node) -> Result<Node, kube::Error> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.nodes()
            .replace_status(name, &PostParams::default(), node)
            .await
    }

    async fn patch_node_labels(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Node, kube::Error> {
        let patch = serde_json::json!({ "metadata": { "labels": labels } });
        self.nodes()
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Pod, kube::Error> {
        self.pods(namespace).get(name).await
    }

    async fn update_pod_status(&self, pod: &Pod) -> Result<Pod, kube::Error> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        self.pods(namespace)
            .replace_status(name, &PostParams::default(), pod)
            .await
    }

    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        self.pods(namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
    }
}

/// One write recorded by [`FakeLifecycleClient`].
#[derive(Clone, Debug, PartialEq)]
pub enum LifecycleAction {
    /// `update_node` with this object.
    UpdateNode(Node),
    /// `update_node_status` with this object.
    UpdateNodeStatus(Node),
    /// `patch_node_labels` of this node with these labels.
    PatchNodeLabels(String, BTreeMap<String, String>),
    /// `update_pod_status` with this object.
    UpdatePodStatus(Pod),
    /// `delete_pod` of `namespace/name`.
    DeletePod(String),
}

#[derive(Debug, Default)]
struct FakeState {
    /// Nodes by name.
    nodes: HashMap<String, Node>,
    /// Pods by `namespace/name`.
    pods: HashMap<String, Pod>,
    /// Every write, in order (failed ones too).
    actions: Vec<LifecycleAction>,
    /// Last resourceVersion handed out.
    revision: u64,
    /// When set, the next call through the client trait panics (and clears it): a sync that
    /// panics once, for the shared worker's panic recovery.
    panic_next_call: bool,
}

/// An in-memory [`LifecycleClient`]: writes with a stale resourceVersion are 409s, writes
/// to missing objects 404s; every write is recorded.
#[derive(Debug, Default)]
pub struct FakeLifecycleClient {
    state: Mutex<FakeState>,
}

fn conflict(resource: &str, name: &str) -> kube::Error {
    kube::Error::Api(api_status::conflict(resource, name, "the object has been modified").boxed())
}

fn not_found(resource: &str, name: &str) -> kube::Error {
    kube::Error::Api(api_status::not_found(resource, name).boxed())
}

impl FakeLifecycleClient {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next call through the client trait panic, once (tests of the shared worker's
    /// panic recovery).
    pub fn panic_on_next_call(&self) {
        self.state().panic_next_call = true;
    }

    /// Panics if [`Self::panic_on_next_call`] armed it; the state's lock is released first, so
    /// the fake stays usable.
    fn take_injected_panic(&self) {
        let armed = std::mem::take(&mut self.state().panic_next_call);
        if armed {
            panic!("FakeLifecycleClient: injected panic");
        }
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `node` as the server's copy (resourceVersion kept when set).
    pub fn insert_node(&self, mut node: Node) {
        let mut state = self.state();
        state.revision += 1;
        if node.metadata.resource_version.is_none() {
            node.metadata.resource_version = Some(state.revision.to_string());
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        state.nodes.insert(name, node);
    }

    /// Stores `pod` as the server's copy (resourceVersion kept when set).
    pub fn insert_pod(&self, mut pod: Pod) {
        let mut state = self.state();
        state.revision += 1;
        if pod.metadata.resource_version.is_none() {
            pod.metadata.resource_version = Some(state.revision.to_string());
        }
        let key = object_key(
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default(),
        );
        state.pods.insert(key, pod);
    }

    /// The server's copy of a node.
    pub fn node(&self, name: &str) -> Option<Node> {
        self.state().nodes.get(name).cloned()
    }

    /// The server's copy of a pod.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.state().pods.get(&object_key(namespace, name)).cloned()
    }

    /// Every write so far.
    pub fn actions(&self) -> Vec<LifecycleAction> {
        self.state().actions.clone()
    }

    /// Forgets the recorded writes.
    pub fn clear_actions(&self) {
        self.state().actions.clear();
    }

    /// The `namespace/name` of every deleted pod, in order.
    pub fn deleted_pods(&self) -> Vec<String> {
        self.state()
            .actions
            .iter()
            .filter_map(|a| match a {
                LifecycleAction::DeletePod(k) => Some(k.clone()),
                _ => None,
            })
            .collect()
    }

    fn store_node(state: &mut FakeState, node: &Node, status: bool) -> Result<Node, kube::Error> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(current) = state.nodes.get(&name) else {
            return Err(not_found("nodes", &name));
        };
        if current.metadata.resource_version != node.metadata.resource_version {
            return Err(conflict("nodes", &name));
        }
        let mut stored = current.clone();
        if status {
            stored.status = node.status.clone();
        } else {
            stored.spec = node.spec.clone();
            stored.metadata.labels = node.metadata.labels.clone();
        }
        state.revision += 1;
        stored.metadata.resource_version = Some(state.revision.to_string());
        state.nodes.insert(name, stored.clone());
        Ok(stored)
    }
}

#[async_trait]
impl LifecycleClient for FakeLifecycleClient {
    async fn get_node(&self, name: &str) -> Result<Node, kube::Error> {
        self.take_injected_panic();
        self.node(name).ok_or_else(|| not_found("nodes", name))
    }

    async fn update_node(&self, node: &Node) -> Result<Node, kube::Error> {
        self.take_injected_panic();
        let mut state = self.state();
        state
            .actions
            .push(LifecycleAction::UpdateNode(node.clone()));
        Self::store_node(&mut state, node, false)
    }

    async fn update_node_status(&self, node: &Node) -> Result<Node, kube::Error> {
        self.take_injected_panic();
        let mut state = self.state();
        state
            .actions
            .push(LifecycleAction::UpdateNodeStatus(node.clone()));
        Self::store_node(&mut state, node, true)
    }

    async fn patch_node_labels(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Node, kube::Error> {
        self.take_injected_panic();
        let mut state = self.state();
        state.actions.push(LifecycleAction::PatchNodeLabels(
            name.to_owned(),
            labels.clone(),
        ));
        state.revision += 1;
        let revision = state.revision.to_string();
        let Some(node) = state.nodes.get_mut(name) else {
            return Err(not_found("nodes", name));
        };
        let current = node.metadata.labels.get_or_insert_with(BTreeMap::new);
        current.extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        node.metadata.resource_version = Some(revision);
        Ok(node.clone())
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Pod, kube::Error> {
        self.take_injected_panic();
        self.pod(namespace, name)
            .ok_or_else(|| not_found("pods", name))
    }

    async fn update_pod_status(&self, pod: &Pod) -> Result<Pod, kube::Error> {
        self.take_injected_panic();
        let mut state = self.state();
        state
            .actions
            .push(LifecycleAction::UpdatePodStatus(pod.clone()));
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let key = object_key(pod.metadata.namespace.as_deref().unwrap_or_default(), name);
        let Some(current) = state.pods.get(&key) else {
            return Err(not_found("pods", name));
        };
        if current.metadata.resource_version != pod.metadata.resource_version {
            return Err(conflict("pods", name));
        }
        let mut stored = current.clone();
        stored.status = pod.status.clone();
        state.revision += 1;
        stored.metadata.resource_version = Some(state.revision.to_string());
        state.pods.insert(key, stored.clone());
        Ok(stored)
    }

    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        self.take_injected_panic();
        let mut state = self.state();
        let key = object_key(namespace, name);
        state.actions.push(LifecycleAction::DeletePod(key.clone()));
        state
            .pods
            .remove(&key)
            .map(|_| ())
            .ok_or_else(|| not_found("pods", name))
    }
}

/// Whether `err` is the server's 404.
pub fn is_not_found(err: &kube::Error) -> bool {
    use kcm_machinery::controller::ApiStatus;
    err.is_not_found()
}

/// Whether `err` is the server's 409.
pub fn is_conflict(err: &kube::Error) -> bool {
    use kcm_machinery::controller::ApiStatus;
    err.is_conflict()
}
