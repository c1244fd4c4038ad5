//! A small kube-scheduler: filters, scores and picks a node for each unscheduled pod.
//!
//! [`select_node`] is the pure decision (a pod and a snapshot of nodes and bound pods in, a
//! node name or a [`FitError`] out); the running scheduler feeds it from informers and binds
//! through `pods/binding`.

pub mod filter;
pub mod resources;
pub mod score;

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
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.num_nodes == 0 {
            return f.write_str("no nodes available to schedule pods");
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

/// The identity used to spread a workload: its controller's uid, or for bare pods the
/// namespace and labels.
fn workload_of(pod: &Pod) -> Option<String> {
    let controller = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true));
    controller.map(|r| r.uid.clone())
}

/// Per-node state the scheduler keeps between decisions: bound pods and their requests.
#[derive(Clone, Debug, Default)]
pub struct NodeInfo {
    /// The node.
    pub node: Option<Arc<Node>>,
    /// Sum of the (actual) requests of the pods bound to the node.
    pub requested: Resources,
    /// Sum of the non-zero requests (scoring defaults applied) of the pods bound to it.
    pub non_zero_requested: Resources,
    /// Bound pods per workload identity.
    pub workloads: HashMap<String, usize>,
}

/// Builds the per-node snapshot from nodes and all pods (unbound and terminal pods skipped).
pub fn snapshot<'a>(
    nodes: impl IntoIterator<Item = &'a Arc<Node>>,
    pods: impl IntoIterator<Item = &'a Arc<Pod>>,
) -> BTreeMap<String, NodeInfo> {
    let mut infos: BTreeMap<String, NodeInfo> = nodes
        .into_iter()
        .filter_map(|n| {
            let name = n.metadata.name.clone()?;
            Some((
                name,
                NodeInfo {
                    node: Some(n.clone()),
                    ..Default::default()
                },
            ))
        })
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

impl NodeInfo {
    /// Accounts a pod bound to this node.
    pub fn add_pod(&mut self, pod: &Pod) {
        self.requested = self.requested.plus(pod_requests(pod, false));
        self.non_zero_requested = self.non_zero_requested.plus(pod_requests(pod, true));
        if let Some(w) = workload_of(pod) {
            *self.workloads.entry(w).or_default() += 1;
        }
    }
}

/// Picks the best node for `pod`, or explains why none fits. Ties go to the node whose name
/// sorts first, so decisions are reproducible.
pub fn select_node(pod: &Pod, nodes: &BTreeMap<String, NodeInfo>) -> Result<String, FitError> {
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut feasible: Vec<(&String, NodeLoad)> = Vec::new();
    let workload = workload_of(pod);
    let want = pod_requests(pod, true);
    for (name, info) in nodes {
        let Some(node) = info.node.as_deref() else {
            continue;
        };
        let failed = filter::run_filters(pod, node, info.requested);
        if failed.is_empty() {
            feasible.push((
                name,
                NodeLoad {
                    allocatable: node_allocatable(node),
                    requested: info.non_zero_requested.plus(want),
                    same_workload_pods: workload
                        .as_ref()
                        .and_then(|w| info.workloads.get(w).copied())
                        .unwrap_or(0),
                },
            ));
        } else {
            for reason in failed {
                *reasons.entry(reason).or_default() += 1;
            }
        }
    }
    if feasible.is_empty() {
        return Err(FitError {
            num_nodes: nodes.len(),
            reasons,
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
    Ok(feasible[best].0.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, PodSpec};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn node(name: &str, unschedulable: bool) -> Arc<Node> {
        Arc::new(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                unschedulable: Some(unschedulable),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                allocatable: Some(
                    [("cpu", "4"), ("memory", "8Gi"), ("pods", "2")]
                        .iter()
                        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                        .collect(),
                ),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        })
    }

    fn pod(name: &str, node: Option<&str>, owner: &str) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                owner_references: Some(vec![OwnerReference {
                    uid: owner.into(),
                    controller: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        })
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
