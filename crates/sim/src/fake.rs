//! An in-memory cluster for tests: a [`ClusterClient`] and the list/watch source of informers.
//!
//! [`FakeCluster`] holds pods, nodes, Leases and namespaces with a resourceVersion counter,
//! applies the scheduler's and the simulated kubelets' calls with the API server's rules that
//! matter to them (uid preconditions, optimistic concurrency, "already assigned" bindings,
//! graceful pod deletion), records every call as an [`Action`], and streams changes to
//! informers built with [`FakeCluster::pod_informer`] / [`FakeCluster::node_informer`]. Time
//! comes from a [`WallClock`], by default one that advances with tokio's (pausable) clock.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::channel::mpsc::{UnboundedSender, unbounded};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    Node, NodeStatus, PersistentVolumeClaim, Pod, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, Time};
use kube::Resource;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::core::{ObjectList, Status, TypeMeta};

use kcm_machinery::controller::api_status;
use kcm_machinery::events::{TokioClock, WallClock};
use kcm_machinery::informer::{ListerWatcher, SharedIndexInformer, WatchStream};

use crate::client::{ClusterClient, Result};

/// One call the fake received, in order. Object names are `namespace/name` for pods and
/// Leases, bare names for nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// `pods/binding`.
    Bind {
        /// The pod.
        pod: String,
        /// The target node.
        node: String,
    },
    /// A `pods/status` patch of one condition.
    PatchPodCondition {
        /// The pod.
        pod: String,
        /// The condition's type.
        type_: String,
        /// The condition's status.
        status: String,
        /// The condition's reason.
        reason: Option<String>,
    },
    /// A `pods/status` update.
    UpdatePodStatus {
        /// The pod.
        pod: String,
        /// The phase posted.
        phase: Option<String>,
    },
    /// A pod deletion with grace period 0.
    DeletePod {
        /// The pod.
        pod: String,
    },
    /// A Node creation.
    CreateNode {
        /// The node.
        node: String,
    },
    /// A Node read.
    GetNode {
        /// The node.
        node: String,
    },
    /// A `nodes/status` patch.
    PatchNodeStatus {
        /// The node.
        node: String,
    },
    /// A namespace ensured.
    EnsureNamespace {
        /// The namespace.
        namespace: String,
    },
    /// A Lease read.
    GetLease {
        /// The Lease.
        lease: String,
    },
    /// A Lease creation.
    CreateLease {
        /// The Lease.
        lease: String,
    },
    /// A Lease update.
    UpdateLease {
        /// The Lease.
        lease: String,
    },
    /// A `persistentvolumeclaims/status` patch.
    PatchClaimStatus {
        /// The claim.
        claim: String,
        /// The patch sent.
        patch: serde_json::Value,
    },
}

/// Which call an injected failure applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// [`ClusterClient::bind`].
    Bind,
    /// [`ClusterClient::update_pod_status`].
    UpdatePodStatus,
    /// [`ClusterClient::delete_pod`].
    DeletePod,
    /// [`ClusterClient::patch_node_status`].
    PatchNodeStatus,
    /// [`ClusterClient::update_lease`].
    UpdateLease,
}

/// One resource type: its objects, its change history and its open watches.
struct Kind<K> {
    /// Objects by key.
    objects: BTreeMap<String, K>,
    /// Every change, oldest first, so a watch can start from any past resourceVersion.
    history: Vec<(u64, WatchEvent<K>)>,
    /// Open watches; closed ones are dropped on the next send.
    watchers: Vec<UnboundedSender<std::result::Result<WatchEvent<K>, kube::Error>>>,
}

impl<K> Default for Kind<K> {
    fn default() -> Self {
        Self {
            objects: BTreeMap::new(),
            history: Vec::new(),
            watchers: Vec::new(),
        }
    }
}

impl<K: Clone> Kind<K> {
    fn emit(&mut self, rv: u64, event: WatchEvent<K>) {
        self.watchers
            .retain(|w| w.unbounded_send(Ok(event.clone())).is_ok());
        self.history.push((rv, event));
    }
}

struct State {
    /// The last resourceVersion handed out.
    rv: u64,
    /// For uids.
    next_uid: u64,
    pods: Kind<Pod>,
    nodes: Kind<Node>,
    leases: Kind<Lease>,
    namespaces: BTreeSet<String>,
    /// Claims by `namespace/name`, put by tests (no watch: the tests fill claim caches by hand).
    claims: BTreeMap<String, PersistentVolumeClaim>,
    actions: Vec<Action>,
    failures: HashMap<Verb, VecDeque<Status>>,
}

impl State {
    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn take_failure(&mut self, verb: Verb) -> Option<kube::Error> {
        self.failures
            .get_mut(&verb)
            .and_then(VecDeque::pop_front)
            .map(|s| kube::Error::Api(Box::new(s)))
    }
}

/// An in-memory cluster. Cheap to clone; clones share the cluster.
#[derive(Clone)]
pub struct FakeCluster {
    state: Arc<Mutex<State>>,
    clock: Arc<dyn WallClock>,
}

impl std::fmt::Debug for FakeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeCluster").finish_non_exhaustive()
    }
}

impl Default for FakeCluster {
    fn default() -> Self {
        Self::new()
    }
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn meta_key<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    match meta.namespace.as_deref() {
        Some(ns) => key(ns, meta.name.as_deref().unwrap_or_default()),
        None => meta.name.clone().unwrap_or_default(),
    }
}

fn api_error(status: Status) -> kube::Error {
    kube::Error::Api(Box::new(status))
}

fn already_exists(resource: &str, name: &str) -> kube::Error {
    let mut status = api_status::conflict(resource, name, "");
    status.reason = "AlreadyExists".into();
    status.message = format!("{resource} \"{name}\" already exists");
    api_error(status)
}

fn conflict(resource: &str, name: &str, message: &str) -> kube::Error {
    api_error(api_status::conflict(resource, name, message))
}

fn stale(resource: &str, name: &str) -> kube::Error {
    conflict(
        resource,
        name,
        &format!(
            "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        ),
    )
}

fn not_found(resource: &str, name: &str) -> kube::Error {
    api_error(api_status::not_found(resource, name))
}

impl FakeCluster {
    /// An empty cluster (with the `default` namespace) whose clock starts at
    /// 2025-01-01T00:00:00Z and advances with tokio's clock.
    pub fn new() -> Self {
        let start =
            jiff::Timestamp::from_second(1_735_689_600).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        Self::with_clock(Arc::new(TokioClock::starting_at(start)))
    }

    /// An empty cluster (with the `default` namespace) reading time from `clock`.
    pub fn with_clock(clock: Arc<dyn WallClock>) -> Self {
        let state = State {
            rv: 1,
            next_uid: 0,
            pods: Kind::default(),
            nodes: Kind::default(),
            leases: Kind::default(),
            namespaces: BTreeSet::from(["default".to_owned()]),
            claims: BTreeMap::new(),
            actions: Vec::new(),
            failures: HashMap::new(),
        };
        Self {
            state: Arc::new(Mutex::new(state)),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The clock the cluster stamps objects with.
    pub fn clock(&self) -> Arc<dyn WallClock> {
        self.clock.clone()
    }

    /// A pod informer over this cluster (not started).
    pub fn pod_informer(&self) -> SharedIndexInformer<Pod> {
        SharedIndexInformer::new(self.clone(), Duration::ZERO)
    }

    /// A node informer over this cluster (not started).
    pub fn node_informer(&self) -> SharedIndexInformer<Node> {
        SharedIndexInformer::new(self.clone(), Duration::ZERO)
    }

    /// Every call received so far, oldest first.
    pub fn actions(&self) -> Vec<Action> {
        self.lock().actions.clone()
    }

    /// Forgets the calls received so far.
    pub fn clear_actions(&self) {
        self.lock().actions.clear();
    }

    /// Makes the next call of `verb` fail with `status` (queued: several calls fail in turn).
    pub fn fail_next(&self, verb: Verb, status: Status) {
        self.lock()
            .failures
            .entry(verb)
            .or_default()
            .push_back(status);
    }

    /// Puts `claim` in the cluster as it is (what claim status patches apply to).
    pub fn put_claim(&self, claim: PersistentVolumeClaim) {
        self.lock().claims.insert(meta_key(&claim), claim);
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<PersistentVolumeClaim> {
        self.lock().claims.get(&key(namespace, name)).cloned()
    }

    /// Creates a pod as the API server would: uid, resourceVersion, creationTimestamp,
    /// `Pending` phase, the `default` namespace when none is set.
    pub fn create_pod(&self, mut pod: Pod) -> Pod {
        let now = self.clock.now();
        let mut state = self.lock();
        state.next_uid += 1;
        let rv = state.next_rv();
        pod.metadata
            .namespace
            .get_or_insert_with(|| "default".into());
        pod.metadata.uid = Some(format!("pod-uid-{}", state.next_uid));
        pod.metadata.resource_version = Some(rv.to_string());
        pod.metadata.creation_timestamp = Some(Time(now));
        let status = pod.status.get_or_insert_with(PodStatus::default);
        status.phase.get_or_insert_with(|| "Pending".into());
        state.pods.objects.insert(meta_key(&pod), pod.clone());
        state.pods.emit(rv, WatchEvent::Added(pod.clone()));
        pod
    }

    /// Deletes a pod as the API server would: a pod that is bound and not finished gets a
    /// `deletionTimestamp` `grace_seconds` ahead (default 30 s) and waits for its kubelet; any
    /// other pod, or a grace of zero, goes at once. False if there was no such pod.
    pub fn delete_pod_gracefully(
        &self,
        namespace: &str,
        name: &str,
        grace_seconds: Option<i64>,
    ) -> bool {
        let now = self.clock.now();
        let mut state = self.lock();
        let k = key(namespace, name);
        let Some(mut pod) = state.pods.objects.get(&k).cloned() else {
            return false;
        };
        let grace = grace_seconds.unwrap_or(30);
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_some_and(|n| !n.is_empty());
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        let rv = state.next_rv();
        pod.metadata.resource_version = Some(rv.to_string());
        if grace == 0 || !bound || finished {
            state.pods.objects.remove(&k);
            state.pods.emit(rv, WatchEvent::Deleted(pod));
            return true;
        }
        if pod.metadata.deletion_timestamp.is_none() {
            let at = now
                .checked_add(jiff::SignedDuration::from_secs(grace))
                .unwrap_or(now);
            pod.metadata.deletion_timestamp = Some(Time(at));
            pod.metadata.deletion_grace_period_seconds = Some(grace);
        }
        state.pods.objects.insert(k, pod.clone());
        state.pods.emit(rv, WatchEvent::Modified(pod));
        true
    }

    /// Changes a pod's metadata or spec (as a client's update would); false if absent.
    pub fn update_pod(&self, namespace: &str, name: &str, f: impl FnOnce(&mut Pod)) -> bool {
        let mut state = self.lock();
        let k = key(namespace, name);
        let Some(mut pod) = state.pods.objects.get(&k).cloned() else {
            return false;
        };
        f(&mut pod);
        let rv = state.next_rv();
        pod.metadata.resource_version = Some(rv.to_string());
        state.pods.objects.insert(k, pod.clone());
        state.pods.emit(rv, WatchEvent::Modified(pod));
        true
    }

    /// Changes a node (labels, annotations, spec, status); false if absent.
    pub fn update_node(&self, name: &str, f: impl FnOnce(&mut Node)) -> bool {
        let mut state = self.lock();
        let Some(mut node) = state.nodes.objects.get(name).cloned() else {
            return false;
        };
        f(&mut node);
        let rv = state.next_rv();
        node.metadata.resource_version = Some(rv.to_string());
        state.nodes.objects.insert(name.to_owned(), node.clone());
        state.nodes.emit(rv, WatchEvent::Modified(node));
        true
    }

    /// Deletes a node; false if absent.
    pub fn delete_node(&self, name: &str) -> bool {
        let mut state = self.lock();
        let Some(mut node) = state.nodes.objects.remove(name) else {
            return false;
        };
        let rv = state.next_rv();
        node.metadata.resource_version = Some(rv.to_string());
        state.nodes.emit(rv, WatchEvent::Deleted(node));
        true
    }

    /// The pod `namespace/name`.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.lock().pods.objects.get(&key(namespace, name)).cloned()
    }

    /// Every pod.
    pub fn pods(&self) -> Vec<Pod> {
        self.lock().pods.objects.values().cloned().collect()
    }

    /// How many pods satisfy `f` (without copying them).
    pub fn count_pods(&self, f: impl Fn(&Pod) -> bool) -> usize {
        self.lock().pods.objects.values().filter(|p| f(p)).count()
    }

    /// The node `name`.
    pub fn node(&self, name: &str) -> Option<Node> {
        self.lock().nodes.objects.get(name).cloned()
    }

    /// Every node.
    pub fn nodes(&self) -> Vec<Node> {
        self.lock().nodes.objects.values().cloned().collect()
    }

    /// The Lease `namespace/name`.
    pub fn lease(&self, namespace: &str, name: &str) -> Option<Lease> {
        self.lock()
            .leases
            .objects
            .get(&key(namespace, name))
            .cloned()
    }

    /// Whether namespace `name` exists.
    pub fn has_namespace(&self, name: &str) -> bool {
        self.lock().namespaces.contains(name)
    }
}

/// A strategic merge of `patch` into `status`, for the fields the simulator sets:
/// conditions merge by type, addresses by type, maps by key, the rest is replaced when set.
fn merge_node_status(status: &mut NodeStatus, patch: &NodeStatus) {
    if let Some(conditions) = &patch.conditions {
        let existing = status.conditions.get_or_insert_with(Vec::new);
        for c in conditions {
            match existing.iter_mut().find(|e| e.type_ == c.type_) {
                Some(e) => *e = c.clone(),
                None => existing.push(c.clone()),
            }
        }
    }
    if let Some(addresses) = &patch.addresses {
        let existing = status.addresses.get_or_insert_with(Vec::new);
        for a in addresses {
            match existing.iter_mut().find(|e| e.type_ == a.type_) {
                Some(e) => *e = a.clone(),
                None => existing.push(a.clone()),
            }
        }
    }
    for (target, source) in [
        (&mut status.capacity, &patch.capacity),
        (&mut status.allocatable, &patch.allocatable),
    ] {
        if let Some(source) = source {
            target
                .get_or_insert_with(Default::default)
                .extend(source.clone());
        }
    }
    if patch.node_info.is_some() {
        status.node_info = patch.node_info.clone();
    }
    if patch.phase.is_some() {
        status.phase = patch.phase.clone();
    }
    if patch.volumes_in_use.is_some() {
        status.volumes_in_use = patch.volumes_in_use.clone();
    }
}

/// Runs `informer` in a task until `cancel` fires (informers over a [`FakeCluster`] are
/// started by the test).
pub fn spawn_informer<K>(
    informer: SharedIndexInformer<K>,
    cancel: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    tokio::spawn(async move { informer.run(cancel).await })
}

/// Checks an update's resourceVersion against the stored one (an update without one is
/// unconditional, as the API server allows for most kinds).
fn check_rv<K: Resource>(stored: &K, update: &K, resource: &str, name: &str) -> Result<()> {
    match update.meta().resource_version.as_deref() {
        Some(rv) if Some(rv) != stored.meta().resource_version.as_deref() => {
            Err(stale(resource, name))
        }
        _ => Ok(()),
    }
}

#[async_trait]
impl ClusterClient for FakeCluster {
    async fn bind(&self, pod: &Pod, node: &str) -> Result<()> {
        let now = self.clock.now();
        let mut state = self.lock();
        let k = meta_key(pod);
        let name = pod.metadata.name.clone().unwrap_or_default();
        state.actions.push(Action::Bind {
            pod: k.clone(),
            node: node.to_owned(),
        });
        if let Some(err) = state.take_failure(Verb::Bind) {
            return Err(err);
        }
        let Some(mut stored) = state.pods.objects.get(&k).cloned() else {
            return Err(not_found("pods", &name));
        };
        if pod.metadata.uid.is_some() && pod.metadata.uid != stored.metadata.uid {
            return Err(conflict(
                "pods",
                &name,
                "Precondition failed: UID in precondition does not match the object",
            ));
        }
        let spec = stored.spec.get_or_insert_with(Default::default);
        if let Some(existing) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
            return Err(conflict(
                "pods",
                &name,
                &format!("pod {name} is already assigned to node \"{existing}\""),
            ));
        }
        if stored.metadata.deletion_timestamp.is_some() {
            return Err(conflict(
                "pods",
                &name,
                &format!("pod {name} is being deleted, cannot be assigned to a host"),
            ));
        }
        spec.node_name = Some(node.to_owned());
        let status = stored.status.get_or_insert_with(PodStatus::default);
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        conditions.retain(|c| c.type_ != "PodScheduled");
        conditions.push(PodCondition {
            type_: "PodScheduled".into(),
            status: "True".into(),
            last_transition_time: Some(Time(now)),
            ..PodCondition::default()
        });
        let rv = state.next_rv();
        stored.metadata.resource_version = Some(rv.to_string());
        state.pods.objects.insert(k, stored.clone());
        state.pods.emit(rv, WatchEvent::Modified(stored));
        Ok(())
    }

    async fn patch_pod_condition(&self, pod: &Pod, condition: &PodCondition) -> Result<()> {
        let mut state = self.lock();
        let k = meta_key(pod);
        state.actions.push(Action::PatchPodCondition {
            pod: k.clone(),
            type_: condition.type_.clone(),
            status: condition.status.clone(),
            reason: condition.reason.clone(),
        });
        let Some(mut stored) = state.pods.objects.get(&k).cloned() else {
            return Err(not_found(
                "pods",
                pod.metadata.name.as_deref().unwrap_or_default(),
            ));
        };
        let conditions = stored
            .status
            .get_or_insert_with(PodStatus::default)
            .conditions
            .get_or_insert_with(Vec::new);
        match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
            Some(c) => *c = condition.clone(),
            None => conditions.push(condition.clone()),
        }
        let rv = state.next_rv();
        stored.metadata.resource_version = Some(rv.to_string());
        state.pods.objects.insert(k, stored.clone());
        state.pods.emit(rv, WatchEvent::Modified(stored));
        Ok(())
    }

    async fn update_pod_status(&self, pod: &Pod) -> Result<Pod> {
        let mut state = self.lock();
        let k = meta_key(pod);
        let name = pod.metadata.name.clone().unwrap_or_default();
        state.actions.push(Action::UpdatePodStatus {
            pod: k.clone(),
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
        });
        if let Some(err) = state.take_failure(Verb::UpdatePodStatus) {
            return Err(err);
        }
        let Some(mut stored) = state.pods.objects.get(&k).cloned() else {
            return Err(not_found("pods", &name));
        };
        if pod.metadata.uid.is_some() && pod.metadata.uid != stored.metadata.uid {
            return Err(conflict("pods", &name, "uid mismatch"));
        }
        check_rv(&stored, pod, "pods", &name)?;
        stored.status = pod.status.clone();
        let rv = state.next_rv();
        stored.metadata.resource_version = Some(rv.to_string());
        state.pods.objects.insert(k, stored.clone());
        state.pods.emit(rv, WatchEvent::Modified(stored.clone()));
        Ok(stored)
    }

    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<()> {
        let mut state = self.lock();
        let k = key(namespace, name);
        state.actions.push(Action::DeletePod { pod: k.clone() });
        if let Some(err) = state.take_failure(Verb::DeletePod) {
            return Err(err);
        }
        let Some(mut stored) = state.pods.objects.get(&k).cloned() else {
            return Ok(());
        };
        if stored.metadata.uid.as_deref() != Some(uid) {
            return Err(conflict(
                "pods",
                name,
                "Precondition failed: UID in precondition does not match the object",
            ));
        }
        state.pods.objects.remove(&k);
        let rv = state.next_rv();
        stored.metadata.resource_version = Some(rv.to_string());
        state.pods.emit(rv, WatchEvent::Deleted(stored));
        Ok(())
    }

    async fn create_node(&self, node: &Node) -> Result<Node> {
        let now = self.clock.now();
        let mut state = self.lock();
        let name = node.metadata.name.clone().unwrap_or_default();
        state
            .actions
            .push(Action::CreateNode { node: name.clone() });
        if state.nodes.objects.contains_key(&name) {
            return Err(already_exists("nodes", &name));
        }
        let mut node = node.clone();
        state.next_uid += 1;
        node.metadata.uid = Some(format!("node-uid-{}", state.next_uid));
        node.metadata.creation_timestamp = Some(Time(now));
        let rv = state.next_rv();
        node.metadata.resource_version = Some(rv.to_string());
        state.nodes.objects.insert(name, node.clone());
        state.nodes.emit(rv, WatchEvent::Added(node.clone()));
        Ok(node)
    }

    async fn get_node(&self, name: &str) -> Result<Option<Node>> {
        let mut state = self.lock();
        state.actions.push(Action::GetNode {
            node: name.to_owned(),
        });
        Ok(state.nodes.objects.get(name).cloned())
    }

    async fn patch_node_status(&self, name: &str, status: &NodeStatus) -> Result<Node> {
        let mut state = self.lock();
        state.actions.push(Action::PatchNodeStatus {
            node: name.to_owned(),
        });
        if let Some(err) = state.take_failure(Verb::PatchNodeStatus) {
            return Err(err);
        }
        let Some(mut stored) = state.nodes.objects.get(name).cloned() else {
            return Err(not_found("nodes", name));
        };
        merge_node_status(
            stored.status.get_or_insert_with(NodeStatus::default),
            status,
        );
        let rv = state.next_rv();
        stored.metadata.resource_version = Some(rv.to_string());
        state.nodes.objects.insert(name.to_owned(), stored.clone());
        state.nodes.emit(rv, WatchEvent::Modified(stored.clone()));
        Ok(stored)
    }

    async fn ensure_namespace(&self, name: &str) -> Result<()> {
        let mut state = self.lock();
        state.actions.push(Action::EnsureNamespace {
            namespace: name.to_owned(),
        });
        state.namespaces.insert(name.to_owned());
        Ok(())
    }

    async fn get_lease(&self, namespace: &str, name: &str) -> Result<Option<Lease>> {
        let mut state = self.lock();
        let k = key(namespace, name);
        state.actions.push(Action::GetLease { lease: k.clone() });
        Ok(state.leases.objects.get(&k).cloned())
    }

    async fn create_lease(&self, lease: &Lease) -> Result<Lease> {
        let mut state = self.lock();
        let k = meta_key(lease);
        let name = lease.metadata.name.clone().unwrap_or_default();
        state.actions.push(Action::CreateLease { lease: k.clone() });
        let namespace = lease.metadata.namespace.clone().unwrap_or_default();
        if !state.namespaces.contains(&namespace) {
            return Err(not_found("namespaces", &namespace));
        }
        if state.leases.objects.contains_key(&k) {
            return Err(already_exists("leases.coordination.k8s.io", &name));
        }
        let mut lease = lease.clone();
        let rv = state.next_rv();
        lease.metadata.resource_version = Some(rv.to_string());
        state.leases.objects.insert(k, lease.clone());
        state.leases.emit(rv, WatchEvent::Added(lease.clone()));
        Ok(lease)
    }

    async fn patch_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
        patch: &serde_json::Value,
    ) -> Result<PersistentVolumeClaim> {
        let mut state = self.lock();
        let k = meta_key(claim);
        let name = claim.metadata.name.clone().unwrap_or_default();
        state.actions.push(Action::PatchClaimStatus {
            claim: k.clone(),
            patch: patch.clone(),
        });
        let Some(stored) = state.claims.get(&k).cloned() else {
            return Err(not_found("persistentvolumeclaims", &name));
        };
        if let Some(pinned) = patch
            .pointer("/metadata/resourceVersion")
            .and_then(serde_json::Value::as_str)
            && Some(pinned) != stored.metadata.resource_version.as_deref()
        {
            return Err(stale("persistentvolumeclaims", &name));
        }
        let mut doc = serde_json::to_value(&stored).map_err(kube::Error::SerdeError)?;
        json_patch::merge(&mut doc, patch);
        let mut patched: PersistentVolumeClaim =
            serde_json::from_value(doc).map_err(kube::Error::SerdeError)?;
        let rv = state.next_rv();
        patched.metadata.resource_version = Some(rv.to_string());
        state.claims.insert(k, patched.clone());
        Ok(patched)
    }

    async fn update_lease(&self, lease: &Lease) -> Result<Lease> {
        let mut state = self.lock();
        let k = meta_key(lease);
        let name = lease.metadata.name.clone().unwrap_or_default();
        state.actions.push(Action::UpdateLease { lease: k.clone() });
        if let Some(err) = state.take_failure(Verb::UpdateLease) {
            return Err(err);
        }
        let Some(stored) = state.leases.objects.get(&k) else {
            return Err(not_found("leases.coordination.k8s.io", &name));
        };
        check_rv(stored, lease, "leases.coordination.k8s.io", &name)?;
        let mut lease = lease.clone();
        let rv = state.next_rv();
        lease.metadata.resource_version = Some(rv.to_string());
        state.leases.objects.insert(k, lease.clone());
        state.leases.emit(rv, WatchEvent::Modified(lease.clone()));
        Ok(lease)
    }
}

/// Lists and watches one kind of the fake.
fn list_kind<K>(kind: &Kind<K>, rv: u64) -> ObjectList<K>
where
    K: Resource<DynamicType = ()> + Clone,
{
    ObjectList {
        types: TypeMeta::list::<K>(),
        metadata: ListMeta {
            resource_version: Some(rv.to_string()),
            ..ListMeta::default()
        },
        items: kind.objects.values().cloned().collect(),
    }
}

fn watch_kind<K>(kind: &mut Kind<K>, from: &str) -> WatchStream<K>
where
    K: Clone + Send + 'static,
{
    let from: u64 = from.parse().unwrap_or(0);
    let (tx, rx) = unbounded();
    for (rv, event) in &kind.history {
        if *rv > from {
            // The receiver is alive: it is still in this function.
            let _ = tx.unbounded_send(Ok(event.clone()));
        }
    }
    kind.watchers.push(tx);
    rx.boxed()
}

#[async_trait]
impl ListerWatcher<Pod> for FakeCluster {
    async fn list(
        &self,
        _params: &ListParams,
    ) -> std::result::Result<ObjectList<Pod>, kube::Error> {
        let state = self.lock();
        Ok(list_kind(&state.pods, state.rv))
    }

    async fn watch(
        &self,
        _params: &WatchParams,
        resource_version: &str,
    ) -> std::result::Result<WatchStream<Pod>, kube::Error> {
        Ok(watch_kind(&mut self.lock().pods, resource_version))
    }
}

#[async_trait]
impl ListerWatcher<Node> for FakeCluster {
    async fn list(
        &self,
        _params: &ListParams,
    ) -> std::result::Result<ObjectList<Node>, kube::Error> {
        let state = self.lock();
        Ok(list_kind(&state.nodes, state.rv))
    }

    async fn watch(
        &self,
        _params: &WatchParams,
        resource_version: &str,
    ) -> std::result::Result<WatchStream<Node>, kube::Error> {
        Ok(watch_kind(&mut self.lock().nodes, resource_version))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcm_machinery::controller::api_status::ApiStatus;
    use kcm_testing::PodSpecBuilder;
    use tokio_util::sync::CancellationToken;

    fn pod(name: &str) -> Pod {
        kcm_testing::pod(name).default_spec().build()
    }

    #[tokio::test(start_paused = true)]
    async fn bind_sets_node_once_and_checks_uid() {
        let fake = FakeCluster::new();
        let p = fake.create_pod(pod("web"));
        fake.bind(&p, "n1").await.expect("bind");
        let bound = fake.pod("default", "web").expect("pod");
        assert_eq!(
            bound.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some("n1")
        );
        let again = fake.bind(&p, "n2").await.expect_err("already bound");
        assert!(again.is_conflict());
        let mut other = p.clone();
        other.metadata.uid = Some("someone-else".into());
        fake.delete_pod_gracefully("default", "web", Some(0));
        let gone = fake.bind(&other, "n1").await.expect_err("gone");
        assert!(gone.is_not_found());
    }

    #[tokio::test(start_paused = true)]
    async fn status_updates_are_optimistic() {
        let fake = FakeCluster::new();
        let p = fake.create_pod(pod("web"));
        let mut update = p.clone();
        update.status = Some(PodStatus {
            phase: Some("Running".into()),
            ..PodStatus::default()
        });
        let stored = fake.update_pod_status(&update).await.expect("update");
        let err = fake
            .update_pod_status(&update)
            .await
            .expect_err("stale resourceVersion");
        assert!(err.is_conflict());
        assert_ne!(
            stored.metadata.resource_version,
            p.metadata.resource_version
        );
    }

    #[tokio::test(start_paused = true)]
    async fn graceful_delete_of_bound_pod_waits_for_the_kubelet() {
        let fake = FakeCluster::new();
        let p = fake.create_pod(pod("web"));
        fake.bind(&p, "n1").await.expect("bind");
        assert!(fake.delete_pod_gracefully("default", "web", None));
        let terminating = fake.pod("default", "web").expect("still there");
        assert!(terminating.metadata.deletion_timestamp.is_some());
        let uid = terminating.metadata.uid.clone().unwrap_or_default();
        let err = fake
            .delete_pod("default", "web", "wrong")
            .await
            .expect_err("uid precondition");
        assert!(err.is_conflict());
        fake.delete_pod("default", "web", &uid)
            .await
            .expect("delete");
        assert!(fake.pod("default", "web").is_none());
        fake.delete_pod("default", "web", &uid)
            .await
            .expect("already gone is fine");
    }

    #[tokio::test(start_paused = true)]
    async fn informers_see_changes_after_their_list() {
        let fake = FakeCluster::new();
        fake.create_pod(pod("a"));
        let informer = fake.pod_informer();
        let cancel = CancellationToken::new();
        tokio::spawn({
            let informer = informer.clone();
            let cancel = cancel.clone();
            async move { informer.run(cancel).await }
        });
        while !informer.has_synced() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        fake.create_pod(pod("b"));
        let lister = informer.lister();
        for _ in 0..100 {
            if lister.get("default", "b").is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(lister.get("default", "a").is_some());
        assert!(lister.get("default", "b").is_some());
        cancel.cancel();
    }
}
