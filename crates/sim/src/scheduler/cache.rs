//! The scheduler's cache: nodes and the pods bound (or assumed bound) to them, kept incrementally.
//!
//! As kube-scheduler's `internal/cache`: informer events add, update and remove nodes and
//! bound pods; a pod the scheduler has just chosen a node for is *assumed* on that node at
//! once, before its binding is even sent, so the next decision already sees its resources
//! and two quick pods never oversubscribe a node. The informer's view of the bound pod later
//! confirms the assumption; a failed binding forgets it. Assumed pods do not expire (upstream's
//! `durationToExpireAssumedPod` is zero).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::resources::occupies_node;
use super::{
    ExtraFilter, FitError, NodeInfo, PodResources, Selection, num_feasible_nodes_to_find,
    select_node_with,
};

/// One pod the cache accounts on a node.
#[derive(Clone, Debug)]
struct CachedPod {
    /// The pod's uid, so an event about a recreated pod of the same name is recognised.
    uid: String,
    /// The node the pod is accounted on.
    node: String,
    /// Exactly what was added to the node's totals.
    resources: PodResources,
    /// True until the informer shows the pod bound.
    assumed: bool,
}

/// Nodes and the pods bound or assumed bound to them. Not synchronised: the scheduler keeps it
/// behind one mutex and never holds that across an `.await`.
#[derive(Debug, Default)]
pub struct SchedulerCache {
    /// The snapshot decisions read, by node name.
    /// Invariant: every pod in `pods` is accounted in `nodes[pod.node]`; an entry without a
    /// Node object has at least one pod accounted (it is dropped when its last pod goes).
    nodes: BTreeMap<String, NodeInfo>,
    /// Accounted pods by `namespace/name` key.
    pods: HashMap<String, CachedPod>,
    /// Where the next search starts (upstream's `nextStartNodeIndex`).
    next_start: usize,
}

fn uid_of(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn node_name_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

impl SchedulerCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The snapshot decisions read.
    pub fn nodes(&self) -> &BTreeMap<String, NodeInfo> {
        &self.nodes
    }

    /// How many pods are accounted (bound or assumed).
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Adds or replaces a node, keeping the pods accounted on it.
    pub fn set_node(&mut self, node: Arc<Node>) {
        let Some(name) = node.metadata.name.clone() else {
            return;
        };
        self.nodes.entry(name).or_default().set_node(Some(node));
    }

    /// Removes a node. Pods still bound to it stay accounted (their deletion will follow) on
    /// an entry that no decision considers.
    pub fn remove_node(&mut self, name: &str) {
        if let Some(info) = self.nodes.get_mut(name) {
            info.set_node(None);
            if info.has_no_pods() {
                self.nodes.remove(name);
            }
        }
    }

    /// Applies the informer's view of a pod under `key`: a bound pod that still holds its
    /// node is accounted there (confirming an assumption), anything else is removed. Returns
    /// true when resources were freed (the pod left a node or finished), which may make
    /// unschedulable pods fit.
    pub fn update_pod(&mut self, key: &str, pod: &Pod) -> bool {
        let Some(node) = node_name_of(pod) else {
            // The informer says unbound: keep an assumption (binding may be in flight),
            // drop anything else.
            if self.pods.get(key).is_some_and(|p| p.assumed) {
                return false;
            }
            return self.remove_pod(key);
        };
        if !occupies_node(pod) {
            return self.remove_pod(key);
        }
        let resources = PodResources::of(pod);
        let moved_or_shrunk = self.pods.get(key).is_some_and(|old| {
            old.node != node
                || resources.requested.milli_cpu < old.resources.requested.milli_cpu
                || resources.requested.memory < old.resources.requested.memory
        });
        self.remove_pod(key);
        self.account(
            key,
            CachedPod {
                uid: uid_of(pod),
                node: node.to_owned(),
                resources,
                assumed: false,
            },
        );
        moved_or_shrunk
    }

    /// Stops accounting the pod under `key`; true if it was accounted.
    pub fn remove_pod(&mut self, key: &str) -> bool {
        let Some(old) = self.pods.remove(key) else {
            return false;
        };
        if let Some(info) = self.nodes.get_mut(&old.node) {
            info.remove(&old.resources);
            if info.node.is_none() && info.has_no_pods() {
                self.nodes.remove(&old.node);
            }
        }
        true
    }

    /// Removes the pod under `key` only if it is still the pod with `uid` (a deletion event
    /// for a pod recreated under the same name must not drop the new one); true if removed.
    pub fn remove_pod_with_uid(&mut self, key: &str, uid: &str) -> bool {
        if self.pods.get(key).is_some_and(|p| p.uid != uid) {
            return false;
        }
        self.remove_pod(key)
    }

    /// Accounts `pod` on `node` before its binding is confirmed, as upstream's `AssumePod`.
    pub fn assume(&mut self, key: &str, pod: &Pod, node: &str) {
        self.remove_pod(key);
        self.account(
            key,
            CachedPod {
                uid: uid_of(pod),
                node: node.to_owned(),
                resources: PodResources::of(pod),
                assumed: true,
            },
        );
    }

    /// Drops an assumption whose binding failed, as upstream's `ForgetPod`; a pod the
    /// informer already shows bound stays.
    pub fn forget(&mut self, key: &str) {
        if self.is_assumed(key) {
            self.remove_pod(key);
        }
    }

    /// Whether the pod under `key` is assumed and not yet confirmed.
    pub fn is_assumed(&self, key: &str) -> bool {
        self.pods.get(key).is_some_and(|p| p.assumed)
    }

    /// The node the pod under `key` is accounted on (bound or assumed).
    pub fn node_of(&self, key: &str) -> Option<&str> {
        self.pods.get(key).map(|p| p.node.as_str())
    }

    /// How many nodes the cache knows (entries with a Node object).
    pub fn node_count(&self) -> usize {
        self.nodes.values().filter(|i| i.node.is_some()).count()
    }

    /// The Node object of `name`, if known.
    pub fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.get(name).and_then(|i| i.node.clone())
    }

    /// Chooses a node for `pod` over the current snapshot, searching from where the last
    /// search stopped and stopping once enough feasible nodes are found (see
    /// [`num_feasible_nodes_to_find`]).
    pub fn select(&mut self, pod: &Pod) -> Result<Selection, FitError> {
        self.select_with(pod, None)
    }

    /// [`Self::select`] with an extra filter (see [`select_node_with`]).
    pub fn select_with(
        &mut self,
        pod: &Pod,
        extra: Option<ExtraFilter<'_>>,
    ) -> Result<Selection, FitError> {
        let enough = num_feasible_nodes_to_find(self.nodes.len());
        let result = select_node_with(pod, &self.nodes, self.next_start, enough, extra);
        let processed = match &result {
            Ok(s) => s.processed,
            Err(_) => self.nodes.len(),
        };
        if !self.nodes.is_empty() {
            self.next_start = (self.next_start + processed) % self.nodes.len();
        }
        result
    }

    fn account(&mut self, key: &str, pod: CachedPod) {
        self.nodes
            .entry(pod.node.clone())
            .or_default()
            .add(&pod.resources);
        self.pods.insert(key.to_owned(), pod);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::resources::Resources;
    use k8s_openapi::api::core::v1::PodStatus;
    use kcm_testing::{MetaBuilder, PodSpecBuilder, container, node_condition};

    fn node(name: &str, cpu: &str) -> Arc<Node> {
        kcm_testing::node(name)
            .default_spec()
            .allocatable(&[("cpu", cpu), ("memory", "8Gi"), ("pods", "110")])
            .condition(node_condition("Ready", "True"))
            .arc()
    }

    fn pod(name: &str, uid: &str, cpu: &str, node: Option<&str>) -> Pod {
        let pod = kcm_testing::pod(name)
            .namespace("ns")
            .uid(uid)
            .container(container("c").request("cpu", cpu));
        match node {
            Some(node) => pod.node(node).build(),
            None => pod.build(),
        }
    }

    fn requested(cache: &SchedulerCache, node: &str) -> Resources {
        cache.nodes()[node].requested
    }

    #[test]
    fn assumed_pods_hold_resources_so_quick_pods_do_not_oversubscribe() {
        let mut cache = SchedulerCache::new();
        cache.set_node(node("a", "1"));
        cache.set_node(node("b", "1"));
        let p1 = pod("p1", "u1", "600m", None);
        let p2 = pod("p2", "u2", "600m", None);
        let n1 = cache.select(&p1).expect("fits").node;
        cache.assume("ns/p1", &p1, &n1);
        let n2 = cache.select(&p2).expect("fits").node;
        assert_ne!(
            n1, n2,
            "the second pod must not land on the first pod's node"
        );
        cache.assume("ns/p2", &p2, &n2);
        let p3 = pod("p3", "u3", "600m", None);
        let err = cache.select(&p3).expect_err("both nodes are full");
        assert_eq!(err.reasons.get("Insufficient cpu"), Some(&2));
    }

    #[test]
    fn informer_confirms_assumption_and_forget_only_drops_unconfirmed() {
        let mut cache = SchedulerCache::new();
        cache.set_node(node("a", "2"));
        let p = pod("p", "u", "500m", None);
        cache.assume("ns/p", &p, "a");
        assert!(cache.is_assumed("ns/p"));
        // The informer still shows the pod unbound: the assumption stays.
        assert!(!cache.update_pod("ns/p", &p));
        assert!(cache.is_assumed("ns/p"));
        // Bound: confirmed, counted once.
        cache.update_pod("ns/p", &pod("p", "u", "500m", Some("a")));
        assert!(!cache.is_assumed("ns/p"));
        assert_eq!(requested(&cache, "a").milli_cpu, 500);
        assert_eq!(requested(&cache, "a").pods, 1);
        cache.forget("ns/p");
        assert_eq!(requested(&cache, "a").milli_cpu, 500, "confirmed pods stay");

        let q = pod("q", "uq", "300m", None);
        cache.assume("ns/q", &q, "a");
        assert_eq!(requested(&cache, "a").milli_cpu, 800);
        cache.forget("ns/q");
        assert_eq!(requested(&cache, "a").milli_cpu, 500);
        assert_eq!(requested(&cache, "a").pods, 1);
    }

    #[test]
    fn finished_and_deleted_pods_free_their_node() {
        let mut cache = SchedulerCache::new();
        cache.set_node(node("a", "2"));
        let mut p = pod("p", "u", "1", Some("a"));
        cache.update_pod("ns/p", &p);
        assert_eq!(requested(&cache, "a").milli_cpu, 1000);
        p.status = Some(PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        assert!(cache.update_pod("ns/p", &p), "finishing frees resources");
        assert_eq!(requested(&cache, "a"), Resources::default());
        assert_eq!(cache.pod_count(), 0, "a finished pod is not kept");
        let q = pod("q", "uq", "1", Some("a"));
        cache.update_pod("ns/q", &q);
        assert!(!cache.remove_pod_with_uid("ns/q", "other-uid"));
        assert_eq!(cache.pod_count(), 1);
        assert!(cache.remove_pod_with_uid("ns/q", "uq"));
        assert_eq!(requested(&cache, "a"), Resources::default());
        assert_eq!(cache.pod_count(), 0, "a deleted pod is not kept");
        cache.remove_node("a");
        assert!(cache.nodes().is_empty(), "nor is a deleted node");
    }

    #[test]
    fn pods_before_their_node_and_node_removal() {
        let mut cache = SchedulerCache::new();
        cache.update_pod("ns/p", &pod("p", "u", "1", Some("late")));
        assert!(cache.nodes()["late"].node.is_none());
        let err = cache
            .select(&pod("x", "ux", "1", None))
            .expect_err("no real node");
        assert_eq!(err.num_nodes, 0);
        cache.set_node(node("late", "4"));
        assert_eq!(
            requested(&cache, "late").milli_cpu,
            1000,
            "pods seen first stay accounted"
        );
        cache.remove_node("late");
        assert!(cache.nodes().contains_key("late"), "still holds a pod");
        cache.remove_pod("ns/p");
        assert!(!cache.nodes().contains_key("late"));
    }

    #[test]
    fn searches_rotate_over_large_clusters() {
        let mut cache = SchedulerCache::new();
        for i in 0..300 {
            cache.set_node(node(&format!("n{i:03}"), "4"));
        }
        // 300 nodes: 50% - 2% = 48% → 144 nodes are enough.
        assert_eq!(num_feasible_nodes_to_find(300), 144);
        let first = cache.select(&pod("p", "u", "1", None)).expect("fits");
        assert_eq!(first.processed, 144);
        let second = cache.select(&pod("q", "v", "1", None)).expect("fits");
        assert_eq!(second.processed, 144);
        assert_ne!(
            first.node, second.node,
            "the second search starts further on"
        );
    }
}
