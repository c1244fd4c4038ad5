//! Which nodes run a DaemonSet's pod, as upstream's `NodeShouldRunDaemonPod`, `predicates` and `NewPod`.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, Taint, Toleration};
use kcm_machinery::scheduling::{RequiredNodeAffinity, find_matching_untolerated_taint};

use super::util::add_or_update_daemon_pod_tolerations;

/// What a node means for a DaemonSet, as the two booleans of `NodeShouldRunDaemonPod`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShouldRun {
    /// The node should run a daemon pod if it has none.
    pub should_run: bool,
    /// A daemon pod already on the node may stay (it tolerates every `NoExecute` taint).
    pub should_continue_running: bool,
}

impl ShouldRun {
    const NO: Self = Self {
        should_run: false,
        should_continue_running: false,
    };
    const YES: Self = Self {
        should_run: true,
        should_continue_running: true,
    };
}

/// A DaemonSet's placement constraints, computed once and judged against many nodes: the
/// pod it would create (upstream's `NewPod`: the template with the default daemon
/// tolerations) reduced to its node name, required node affinity and tolerations.
#[derive(Clone, Debug)]
pub struct DaemonPlacement {
    /// The template's `nodeName`, if it pins one node.
    node_name: Option<String>,
    /// The template's `nodeSelector` and required node affinity.
    affinity: RequiredNodeAffinity,
    /// The template's tolerations plus the default daemon tolerations.
    tolerations: Vec<Toleration>,
}

impl DaemonPlacement {
    /// The constraints of `ds`'s pods.
    pub fn of(ds: &DaemonSet) -> Self {
        let template = ds.spec.as_ref().map(|s| &s.template);
        let mut spec = template.and_then(|t| t.spec.clone()).unwrap_or_default();
        add_or_update_daemon_pod_tolerations(&mut spec);
        let node_name = spec.node_name.take().filter(|n| !n.is_empty());
        let tolerations = spec.tolerations.take().unwrap_or_default();
        let pod = Pod {
            spec: Some(PodSpec {
                node_selector: spec.node_selector.take(),
                affinity: spec.affinity.take(),
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        Self {
            node_name,
            affinity: RequiredNodeAffinity::of(&pod),
            tolerations,
        }
    }

    /// Whether the DaemonSet should run (and keep running) a pod on `node`, as upstream's
    /// `NodeShouldRunDaemonPod`: the template's node name and required node affinity must
    /// fit; an untolerated `NoSchedule`/`NoExecute` taint stops new pods, and only an
    /// untolerated `NoExecute` taint evicts the running one.
    pub fn should_run(&self, node: &Node) -> ShouldRun {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if self.node_name.as_deref().is_some_and(|n| n != name) {
            return ShouldRun::NO;
        }
        if !self.affinity.matches(node) {
            return ShouldRun::NO;
        }
        let taints: &[Taint] = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or(&[]);
        let blocks_scheduling = find_matching_untolerated_taint(taints, &self.tolerations, |t| {
            t.effect == "NoExecute" || t.effect == "NoSchedule"
        })
        .is_some();
        if blocks_scheduling {
            let evicts = find_matching_untolerated_taint(taints, &self.tolerations, |t| {
                t.effect == "NoExecute"
            })
            .is_some();
            return ShouldRun {
                should_run: false,
                should_continue_running: !evicts,
            };
        }
        ShouldRun::YES
    }
}

/// [`DaemonPlacement::should_run`] for one node, as upstream's `NodeShouldRunDaemonPod`.
pub fn node_should_run_daemon_pod(node: &Node, ds: &DaemonSet) -> ShouldRun {
    DaemonPlacement::of(ds).should_run(node)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    };
    use kcm_testing::{
        MetaBuilder, PodSpecBuilder, daemon_set, node, pod_template, taint, toleration,
    };

    use super::*;

    fn yes() -> ShouldRun {
        ShouldRun::YES
    }

    fn no() -> ShouldRun {
        ShouldRun::NO
    }

    fn stay_only() -> ShouldRun {
        ShouldRun {
            should_run: false,
            should_continue_running: true,
        }
    }

    /// Upstream's `TestNodeShouldRunDaemonPod` cases that do not involve resources (the
    /// controller no longer checks them).
    #[test]
    fn node_should_run_daemon_pod_table() {
        let plain = || node("n1").labels(&[("zone", "a")]).default_spec();
        let ds = || daemon_set("ds").namespace("ns").selecting(&[("app", "a")]);
        let cases = vec![
            ("plain node", ds().build(), plain().build(), yes()),
            (
                "nodeSelector matches",
                ds().node_selector(&[("zone", "a")]).build(),
                plain().build(),
                yes(),
            ),
            (
                "nodeSelector does not match",
                ds().node_selector(&[("zone", "b")]).build(),
                plain().build(),
                no(),
            ),
            (
                "template pins another node",
                ds().template(pod_template().labels(&[("app", "a")]).node("n2"))
                    .build(),
                plain().build(),
                no(),
            ),
            (
                "template pins this node",
                ds().template(pod_template().labels(&[("app", "a")]).node("n1"))
                    .build(),
                plain().build(),
                yes(),
            ),
            (
                "untolerated NoSchedule: keep running pods, start none",
                ds().build(),
                plain()
                    .taint(taint("dedicated", "NoSchedule").value("x"))
                    .build(),
                stay_only(),
            ),
            (
                "untolerated NoExecute: evict",
                ds().build(),
                plain().taint(taint("dedicated", "NoExecute")).build(),
                no(),
            ),
            (
                "tolerated NoSchedule",
                ds().template(
                    pod_template()
                        .labels(&[("app", "a")])
                        .toleration(toleration("dedicated").exists()),
                )
                .build(),
                plain().taint(taint("dedicated", "NoSchedule")).build(),
                yes(),
            ),
            (
                "PreferNoSchedule does not count",
                ds().build(),
                plain().taint(taint("soft", "PreferNoSchedule")).build(),
                yes(),
            ),
            (
                "default tolerations: cordoned node",
                ds().build(),
                plain()
                    .unschedulable(true)
                    .taint(taint(
                        super::super::util::TAINT_NODE_UNSCHEDULABLE,
                        "NoSchedule",
                    ))
                    .build(),
                yes(),
            ),
            (
                "default tolerations: not-ready NoExecute",
                ds().build(),
                plain()
                    .taint(taint(super::super::util::TAINT_NODE_NOT_READY, "NoExecute"))
                    .build(),
                yes(),
            ),
            (
                "network-unavailable blocks ordinary pods",
                ds().build(),
                plain()
                    .taint(taint(
                        super::super::util::TAINT_NODE_NETWORK_UNAVAILABLE,
                        "NoSchedule",
                    ))
                    .build(),
                stay_only(),
            ),
            (
                "network-unavailable tolerated with host networking",
                ds().template(
                    pod_template()
                        .labels(&[("app", "a")])
                        .with(|t| t.spec.get_or_insert_default().host_network = Some(true)),
                )
                .build(),
                plain()
                    .taint(taint(
                        super::super::util::TAINT_NODE_NETWORK_UNAVAILABLE,
                        "NoSchedule",
                    ))
                    .build(),
                yes(),
            ),
            (
                "required node affinity on metadata.name",
                ds().template(pod_template().labels(&[("app", "a")]).with(|t| {
                    t.spec.get_or_insert_default().affinity = Some(Affinity {
                        node_affinity: Some(NodeAffinity {
                            required_during_scheduling_ignored_during_execution: Some(
                                NodeSelector {
                                    node_selector_terms: vec![NodeSelectorTerm {
                                        match_fields: Some(vec![NodeSelectorRequirement {
                                            key: "metadata.name".into(),
                                            operator: "In".into(),
                                            values: Some(vec!["n2".into()]),
                                        }]),
                                        match_expressions: None,
                                    }],
                                },
                            ),
                            ..Default::default()
                        }),
                        ..Default::default()
                    });
                }))
                .build(),
                plain().build(),
                no(),
            ),
        ];
        for (name, ds, n, want) in cases {
            assert_eq!(node_should_run_daemon_pod(&n, &ds), want, "{name}");
        }
    }
}
