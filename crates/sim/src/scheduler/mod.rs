//! A small kube-scheduler: filters, scores and picks a node for each unscheduled pod.
//!
//! [`select_node`] is the pure decision (a pod and a snapshot of nodes and bound pods in, a
//! node name or a [`FitError`] out); [`cache::SchedulerCache`] keeps that snapshot up to date
//! incrementally; [`Scheduler`] (in [`service`]) feeds it from informers and binds through
//! `pods/binding`.

pub mod cache;
pub mod dynamic_resources;
pub mod filter;
pub mod resources;
pub mod score;
pub mod service;
pub mod volumes;

pub use service::{Scheduler, SchedulerConfig};

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use resources::{Resources, node_allocatable, occupies_node, pod_requests};
use score::NodeLoad;

/// The scheduler name pods get by default; this scheduler binds only those pods.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// Why no node fits a pod, rendered as kube-scheduler's `FitError`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FitError {
    /// How many nodes were considered.
    pub num_nodes: usize,
    /// Each reason and how many nodes gave it.
    pub reasons: BTreeMap<String, usize>,
    /// Why PreFilter ruled out every node (upstream's `Diagnosis.PreFilterMsg`); the
    /// per-node reasons are empty then.
    pub pre_filter: Option<String>,
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.num_nodes == 0 {
            return f.write_str("no nodes available to schedule pods");
        }
        let n = self.num_nodes;
        if let Some(message) = &self.pre_filter {
            return write!(
                f,
                "0/{n} nodes are available: {message}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
            );
        }
        let mut parts: Vec<String> = self
            .reasons
            .iter()
            .map(|(reason, n)| format!("{n} {reason}"))
            .collect();
        parts.sort();
        write!(
            f,
            "0/{n} nodes are available: {}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling.",
            parts.join(", "),
            n = self.num_nodes
        )
    }
}

impl std::error::Error for FitError {}

/// The identity used to spread a workload: its controller's uid. Bare pods have none and
/// are not spread.
fn workload_of(pod: &Pod) -> Option<String> {
    let controller = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true));
    controller.map(|r| r.uid.clone())
}

/// What one pod holds on its node, computed once when the pod is accounted so that removing
/// it later subtracts exactly what was added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodResources {
    /// The pod's actual requests (what NodeResourcesFit checks).
    pub requested: Resources,
    /// The pod's requests with the scoring defaults for missing cpu/memory requests.
    pub non_zero: Resources,
    /// The workload the pod belongs to, for spreading.
    pub workload: Option<String>,
}

impl PodResources {
    /// What `pod` holds once bound.
    pub fn of(pod: &Pod) -> Self {
        Self {
            requested: pod_requests(pod, false),
            non_zero: pod_requests(pod, true),
            workload: workload_of(pod),
        }
    }
}

/// Per-node state the scheduler keeps between decisions: the node and the pods bound to it.
///
/// Invariant: `requested`, `non_zero_requested` and `workloads` are the sums over the pods
/// accounted with [`NodeInfo::add`] and not yet removed with [`NodeInfo::remove`];
/// `allocatable` is [`node_allocatable`] of `node` (zero without one).
#[derive(Clone, Debug, Default)]
pub struct NodeInfo {
    /// The node; `None` while pods bound to it are known but the Node object is not.
    pub node: Option<Arc<Node>>,
    /// The node's allocatable resources, parsed once when the node is set.
    pub allocatable: Resources,
    /// Sum of the (actual) requests of the pods bound to the node; `pods` counts them.
    pub requested: Resources,
    /// Sum of the non-zero requests (scoring defaults applied) of the pods bound to it.
    pub non_zero_requested: Resources,
    /// Bound pods per workload identity (entries never hold zero).
    pub workloads: HashMap<String, usize>,
}

impl NodeInfo {
    /// The state of `node` with no pods.
    pub fn new(node: Arc<Node>) -> Self {
        let mut info = Self::default();
        info.set_node(Some(node));
        info
    }

    /// Replaces (or clears) the Node object, keeping the accounted pods.
    pub fn set_node(&mut self, node: Option<Arc<Node>>) {
        self.allocatable = node.as_deref().map(node_allocatable).unwrap_or_default();
        self.node = node;
    }

    /// Accounts a pod bound to this node.
    pub fn add_pod(&mut self, pod: &Pod) {
        self.add(&PodResources::of(pod));
    }

    /// Accounts what a pod holds.
    pub fn add(&mut self, pod: &PodResources) {
        self.requested = self.requested.plus(pod.requested);
        self.non_zero_requested = self.non_zero_requested.plus(pod.non_zero);
        if let Some(w) = &pod.workload {
            *self.workloads.entry(w.clone()).or_default() += 1;
        }
    }

    /// Stops accounting what a pod held (the exact value given to [`NodeInfo::add`]).
    pub fn remove(&mut self, pod: &PodResources) {
        self.requested = self.requested.minus(pod.requested);
        self.non_zero_requested = self.non_zero_requested.minus(pod.non_zero);
        if let Some(w) = &pod.workload
            && let Some(n) = self.workloads.get_mut(w)
        {
            *n -= 1;
            if *n == 0 {
                self.workloads.remove(w);
            }
        }
    }

    /// Whether no pod is accounted on this node.
    pub fn has_no_pods(&self) -> bool {
        self.requested.pods <= 0
    }
}

/// Builds the per-node snapshot from nodes and all pods (unbound and terminal pods skipped).
pub fn snapshot<'a>(
    nodes: impl IntoIterator<Item = &'a Arc<Node>>,
    pods: impl IntoIterator<Item = &'a Arc<Pod>>,
) -> BTreeMap<String, NodeInfo> {
    let mut infos: BTreeMap<String, NodeInfo> = nodes
        .into_iter()
        .filter_map(|n| Some((n.metadata.name.clone()?, NodeInfo::new(n.clone()))))
        .collect();
    for pod in pods {
        let Some(node_name) = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()) else {
            continue;
        };
        if !occupies_node(pod) {
            continue;
        }
        if let Some(info) = infos.get_mut(node_name) {
            info.add_pod(pod);
        }
    }
    infos
}

/// Below this many nodes every node is checked; above, the search stops once this many (or
/// the adaptive percentage) feasible nodes are found (upstream's `minFeasibleNodesToFind`).
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// The floor of the adaptive percentage (upstream's `minFeasibleNodesPercentageToFind`).
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;

/// How many feasible nodes are enough to stop filtering among `num_all_nodes`, as
/// kube-scheduler's `numFeasibleNodesToFind` with the default (adaptive)
/// `percentageOfNodesToScore`: 50% minus 1% per 125 nodes, at least 5%, at least 100 nodes.
pub fn num_feasible_nodes_to_find(num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let percentage = 50usize
        .saturating_sub(num_all_nodes / 125)
        .max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    (num_all_nodes * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// A scheduling decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The chosen node.
    pub node: String,
    /// How many snapshot entries were visited before the search stopped; the next search
    /// starts that many entries further on (upstream's `nextStartNodeIndex`), so every node gets its turn.
    pub processed: usize,
}

/// Picks the best node for `pod`, or explains why none fits, checking every node. Ties go to
/// the node whose name sorts first, so decisions are reproducible.
pub fn select_node(pod: &Pod, nodes: &BTreeMap<String, NodeInfo>) -> Result<String, FitError> {
    select_node_from(pod, nodes, 0, usize::MAX).map(|s| s.node)
}

/// As kube-scheduler's `schedulePod`: filters nodes in name order starting at the `start`-th
/// (wrapping around) until `enough` feasible nodes are found (see
/// [`num_feasible_nodes_to_find`]), then scores those and picks the highest. Ties go to the
/// first feasible node found. The [`FitError`] (only when no node fits, so every node was
/// checked) counts each filter's reason over all nodes.
pub fn select_node_from(
    pod: &Pod,
    nodes: &BTreeMap<String, NodeInfo>,
    start: usize,
    enough: usize,
) -> Result<Selection, FitError> {
    select_node_with(pod, nodes, start, enough, None)
}

/// A filter beyond the built-in ones (the volume binding's): the reasons a node does not fit,
/// none when it does.
pub type ExtraFilter<'a> = &'a dyn Fn(&Node) -> Vec<String>;

/// [`select_node_from`] with an `extra` filter run on each node that passes the built-in ones.
pub fn select_node_with(
    pod: &Pod,
    nodes: &BTreeMap<String, NodeInfo>,
    start: usize,
    enough: usize,
    extra: Option<ExtraFilter<'_>>,
) -> Result<Selection, FitError> {
    // Entries without a Node object (pods seen before their node) are not nodes yet.
    let total = nodes.values().filter(|i| i.node.is_some()).count();
    if total == 0 {
        return Err(FitError {
            num_nodes: 0,
            reasons: BTreeMap::new(),
            pre_filter: None,
        });
    }
    let start = start % nodes.len();
    let want = pod_requests(pod, false);
    let want_non_zero = pod_requests(pod, true);
    let workload = workload_of(pod);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut feasible: Vec<(&String, NodeLoad)> = Vec::new();
    let mut processed = 0;
    for (name, info) in nodes.iter().skip(start).chain(nodes.iter().take(start)) {
        processed += 1;
        if info.node.is_none() {
            continue;
        }
        let mut failed = filter::run_filters(pod, want, info);
        if failed.is_empty()
            && let (Some(extra), Some(node)) = (extra, info.node.as_deref())
        {
            failed = extra(node);
        }
        if failed.is_empty() {
            feasible.push((
                name,
                NodeLoad {
                    allocatable: info.allocatable,
                    requested: info.non_zero_requested.plus(want_non_zero),
                    same_workload_pods: workload
                        .as_ref()
                        .and_then(|w| info.workloads.get(w).copied())
                        .unwrap_or(0),
                },
            ));
            if feasible.len() >= enough {
                break;
            }
        } else {
            for reason in failed {
                *reasons.entry(reason).or_default() += 1;
            }
        }
    }
    if feasible.is_empty() {
        return Err(FitError {
            num_nodes: total,
            reasons,
            pre_filter: None,
        });
    }
    let loads: Vec<NodeLoad> = feasible.iter().map(|(_, l)| *l).collect();
    let scores = score::total_scores(&loads);
    let mut best = 0;
    for (i, s) in scores.iter().enumerate() {
        if *s > scores[best] {
            best = i;
        }
    }
    Ok(Selection {
        node: feasible[best].0.clone(),
        processed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcm_testing::{MetaBuilder, OwnerRefBuilder, PodSpecBuilder, node_condition};

    fn node(name: &str, unschedulable: bool) -> Arc<Node> {
        kcm_testing::node(name)
            .unschedulable(unschedulable)
            .allocatable(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "2")])
            .condition(node_condition("Ready", "True"))
            .arc()
    }

    fn pod(name: &str, node: Option<&str>, owner: &str) -> Arc<Pod> {
        let pod = kcm_testing::pod(name)
            .owner(OwnerRefBuilder::default().uid(owner).controller(true))
            .default_spec();
        match node {
            Some(node) => pod.node(node).arc(),
            None => pod.arc(),
        }
    }

    #[test]
    fn spreads_replicas_and_skips_cordoned_nodes() {
        let nodes = [node("a", false), node("b", false), node("c", true)];
        let pods = [pod("p1", Some("a"), "rs1")];
        let snap = snapshot(nodes.iter(), pods.iter());
        assert_eq!(
            select_node(&pod("p2", None, "rs1"), &snap),
            Ok("b".to_string())
        );
    }

    #[test]
    fn fit_error_reads_like_kube_scheduler() {
        let nodes = [node("a", true), node("b", false)];
        let pods = [pod("p1", Some("b"), "x"), pod("p2", Some("b"), "y")];
        let snap = snapshot(nodes.iter(), pods.iter());
        let err = select_node(&pod("p3", None, "z"), &snap).expect_err("nothing fits");
        assert_eq!(
            err.to_string(),
            "0/2 nodes are available: 1 Too many pods, 1 node(s) were unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        );
        let none = select_node(&pod("p4", None, "z"), &BTreeMap::new()).expect_err("no nodes");
        assert_eq!(none.to_string(), "no nodes available to schedule pods");
    }

    #[test]
    fn feasible_nodes_to_find_follows_the_adaptive_percentage() {
        struct Case {
            name: &'static str,
            nodes: usize,
            want: usize,
        }
        let cases = [
            Case {
                name: "small clusters check every node",
                nodes: 99,
                want: 99,
            },
            Case {
                name: "never fewer than 100",
                nodes: 150,
                want: 100,
            },
            Case {
                name: "1000 nodes: 50% - 8%",
                nodes: 1000,
                want: 420,
            },
            Case {
                name: "5000 nodes: 50% - 40%",
                nodes: 5000,
                want: 500,
            },
            Case {
                name: "floor of 5%",
                nodes: 20000,
                want: 1000,
            },
        ];
        for case in cases {
            assert_eq!(
                num_feasible_nodes_to_find(case.nodes),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn search_stops_early_and_reports_where() {
        let nodes: Vec<Arc<Node>> = (0..5).map(|i| node(&format!("n{i}"), false)).collect();
        let snap = snapshot(nodes.iter(), std::iter::empty());
        let first = select_node_from(&pod("p", None, "x"), &snap, 3, 2).expect("fits");
        assert_eq!(
            first,
            Selection {
                node: "n3".into(),
                processed: 2
            }
        );
        // Wrapping around the end of the node list.
        let wrapped = select_node_from(&pod("p", None, "x"), &snap, 4, 2).expect("fits");
        assert_eq!(wrapped.node, "n4");
        assert_eq!(wrapped.processed, 2);
    }

    #[test]
    fn terminal_pods_free_their_slot() {
        let nodes = [node("a", false)];
        let mut done = (*pod("p1", Some("a"), "x")).clone();
        done.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        let pods = [Arc::new(done), pod("p2", Some("a"), "x")];
        let snap = snapshot(nodes.iter(), pods.iter());
        assert_eq!(
            select_node(&pod("p3", None, "x"), &snap),
            Ok("a".to_string())
        );
    }
}
