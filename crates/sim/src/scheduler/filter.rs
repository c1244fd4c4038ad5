//! Node filters, as kube-scheduler's default Filter plugins judge a pod against a node.
//!
//! Each filter returns the upstream reason strings when the node does not fit, so the
//! aggregated `0/N nodes are available: ...` message reads exactly as kube-scheduler's.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};

use super::NodeInfo;
use super::resources::Resources;

/// The taint the node lifecycle controller puts on unschedulable (cordoned) nodes.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// The taint the node lifecycle controller puts on nodes whose Ready condition is False.
pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint the node lifecycle controller puts on nodes whose Ready condition is Unknown.
pub const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// Whether `toleration` tolerates `taint`, as core/v1's `Toleration.ToleratesTaint`.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref().filter(|e| !e.is_empty())
        && effect != taint.effect
    {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        "Equal" | "" => {
            key == taint.key
                && toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerated_by(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

fn pod_tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[])
}

fn node_is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// NodeUnschedulable: a cordoned node admits only pods tolerating its unschedulable taint.
pub fn node_unschedulable(pod: &Pod, node: &Node) -> Option<String> {
    let unschedulable = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    if !unschedulable {
        return None;
    }
    let taint = Taint {
        key: TAINT_NODE_UNSCHEDULABLE.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    (!tolerated_by(pod_tolerations(pod), &taint)).then(|| "node(s) were unschedulable".to_string())
}

/// TaintToleration: every NoSchedule/NoExecute taint must be tolerated. A node that is not
/// Ready counts as carrying the `not-ready` NoSchedule taint even before the node lifecycle
/// controller has put it there, so a scheduler running beside a fresh control plane never
/// places pods on a node that cannot run them.
pub fn taint_toleration(pod: &Pod, node: &Node) -> Option<String> {
    let tolerations = pod_tolerations(pod);
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[]);
    let untolerated = taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerated_by(tolerations, t));
    if let Some(taint) = untolerated {
        return Some(format!(
            "node(s) had untolerated taint {{{}: {}}}",
            taint.key,
            taint.value.as_deref().unwrap_or("")
        ));
    }
    if !node_is_ready(node) {
        let implied = Taint {
            key: TAINT_NODE_NOT_READY.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        if !tolerated_by(tolerations, &implied) {
            return Some(format!(
                "node(s) had untolerated taint {{{TAINT_NODE_NOT_READY}: }}"
            ));
        }
    }
    None
}

fn requirement_matches(req: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&req.key);
    let values = req.values.as_deref().unwrap_or(&[]);
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(actual), Some(bound)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|v| v.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if req.operator == "Gt" {
                actual > bound
            } else {
                actual < bound
            }
        }
        _ => false,
    }
}

/// Whether a node selector term matches: all expressions and fields hold; an empty term
/// matches nothing, as upstream.
fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    if !exprs.iter().all(|r| requirement_matches(r, labels)) {
        return false;
    }
    if fields.is_empty() {
        return true;
    }
    let mut node_fields = BTreeMap::new();
    if let Some(name) = &node.metadata.name {
        node_fields.insert("metadata.name".to_string(), name.clone());
    }
    fields.iter().all(|r| requirement_matches(r, &node_fields))
}

/// NodeAffinity: `nodeSelector` and required node affinity (terms ORed).
pub fn node_affinity(pod: &Pod, node: &Node) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let selector_ok = spec
        .node_selector
        .as_ref()
        .is_none_or(|sel| sel.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let affinity_ok =
        required.is_none_or(|r| r.node_selector_terms.iter().any(|t| term_matches(t, node)));
    (!(selector_ok && affinity_ok))
        .then(|| "node(s) didn't match Pod's node affinity/selector".to_string())
}

/// NodeResourcesFit: `want` (the pod's [`super::resources::pod_requests`]) must fit in `allocatable` minus
/// `requested` (the sum of the requests of the pods already on the node). Every shortage is
/// reported, as upstream's `fitsRequest`.
pub fn resources_fit(want: Resources, allocatable: Resources, requested: Resources) -> Vec<String> {
    let mut reasons = Vec::new();
    if requested.pods + 1 > allocatable.pods {
        reasons.push("Too many pods".to_string());
    }
    if want.milli_cpu > 0 && requested.milli_cpu + want.milli_cpu > allocatable.milli_cpu {
        reasons.push("Insufficient cpu".to_string());
    }
    if want.memory > 0 && requested.memory + want.memory > allocatable.memory {
        reasons.push("Insufficient memory".to_string());
    }
    reasons
}

/// Runs every filter in kube-scheduler's order against one node of the snapshot and returns
/// the first failing filter's reasons (empty when the node fits). `want` is the pod's
/// [`super::resources::pod_requests`] (computed once per pod, not per node). A snapshot entry without a Node
/// object (pods seen before their node) never fits.
pub fn run_filters(pod: &Pod, want: Resources, info: &NodeInfo) -> Vec<String> {
    let Some(node) = info.node.as_deref() else {
        return vec!["node(s) not found".to_string()];
    };
    if let Some(reason) = node_unschedulable(pod, node) {
        return vec![reason];
    }
    if let Some(reason) = taint_toleration(pod, node) {
        return vec![reason];
    }
    if let Some(reason) = node_affinity(pod, node) {
        return vec![reason];
    }
    resources_fit(want, info.allocatable, info.requested)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::resources::{node_allocatable, pod_requests};
    use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelector};
    use kcm_testing::{
        MetaBuilder, NodeBuilder, PodBuilder, PodSpecBuilder, container, node_condition, taint,
    };
    use std::sync::Arc;

    /// A ready node with 2 CPUs, 4Gi and room for 110 pods.
    fn node(name: &str, labels: &[(&str, &str)]) -> NodeBuilder {
        kcm_testing::node(name)
            .labels(labels)
            .default_spec()
            .allocatable(&[("cpu", "2"), ("memory", "4Gi"), ("pods", "110")])
            .condition(node_condition("Ready", "True"))
    }

    /// A pod with an empty spec.
    fn pod() -> PodBuilder {
        PodBuilder::default().default_spec()
    }

    fn toleration(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        Toleration {
            key: (!key.is_empty()).then(|| key.into()),
            operator: Some(op.into()),
            value: (!value.is_empty()).then(|| value.into()),
            effect: (!effect.is_empty()).then(|| effect.into()),
            toleration_seconds: None,
        }
    }

    #[test]
    fn toleration_matching_table() {
        struct Case {
            name: &'static str,
            toleration: Toleration,
            taint: (&'static str, &'static str, &'static str),
            want: bool,
        }
        let cases = [
            Case {
                name: "equal key value effect",
                toleration: toleration("k", "Equal", "v", "NoSchedule"),
                taint: ("k", "v", "NoSchedule"),
                want: true,
            },
            Case {
                name: "equal wrong value",
                toleration: toleration("k", "Equal", "x", "NoSchedule"),
                taint: ("k", "v", "NoSchedule"),
                want: false,
            },
            Case {
                name: "exists any value",
                toleration: toleration("k", "Exists", "", "NoSchedule"),
                taint: ("k", "v", "NoSchedule"),
                want: true,
            },
            Case {
                name: "empty effect matches all",
                toleration: toleration("k", "Exists", "", ""),
                taint: ("k", "v", "NoExecute"),
                want: true,
            },
            Case {
                name: "effect mismatch",
                toleration: toleration("k", "Exists", "", "NoSchedule"),
                taint: ("k", "v", "NoExecute"),
                want: false,
            },
            Case {
                name: "empty key exists tolerates all",
                toleration: toleration("", "Exists", "", ""),
                taint: ("any", "v", "NoExecute"),
                want: true,
            },
            Case {
                name: "other key",
                toleration: toleration("a", "Exists", "", ""),
                taint: ("b", "", "NoSchedule"),
                want: false,
            },
        ];
        for case in cases {
            let (key, value, effect) = case.taint;
            let taint = taint(key, effect).value(value).build();
            assert_eq!(
                tolerates(&case.toleration, &taint),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn cordoned_node_rejected_unless_tolerated() {
        let n = node("n1", &[]).unschedulable(true).build();
        let want = pod_requests(&pod().build(), false);
        assert_eq!(
            run_filters(&pod().build(), want, &NodeInfo::new(Arc::new(n.clone()))),
            vec!["node(s) were unschedulable"]
        );
        let tolerant = pod()
            .toleration(toleration(
                TAINT_NODE_UNSCHEDULABLE,
                "Exists",
                "",
                "NoSchedule",
            ))
            .build();
        assert!(run_filters(&tolerant, want, &NodeInfo::new(Arc::new(n))).is_empty());
    }

    #[test]
    fn taints_and_not_ready() {
        let n = node("n1", &[])
            .taint(taint("dedicated", "NoSchedule").value("gpu"))
            .build();
        assert_eq!(
            taint_toleration(&pod().build(), &n).as_deref(),
            Some("node(s) had untolerated taint {dedicated: gpu}")
        );
        let mut not_ready = node("n2", &[]).build();
        if let Some(status) = not_ready.status.as_mut() {
            status.conditions = Some(vec![node_condition("Ready", "Unknown").build()]);
        }
        assert_eq!(
            taint_toleration(&pod().build(), &not_ready).as_deref(),
            Some("node(s) had untolerated taint {node.kubernetes.io/not-ready: }")
        );
        // PreferNoSchedule taints never filter.
        let soft = node("n3", &[])
            .taint(taint("soft", "PreferNoSchedule"))
            .build();
        assert_eq!(taint_toleration(&pod().build(), &soft), None);
    }

    #[test]
    fn node_selector_and_required_affinity() {
        let n = node("n1", &[("zone", "a"), ("disk", "ssd"), ("gen", "5")]).build();
        let with = |selector: Option<&[(&str, &str)]>,
                    exprs: Option<Vec<NodeSelectorRequirement>>| {
            let mut p = pod().build();
            let spec = p.spec.get_or_insert_with(Default::default);
            spec.node_selector = selector.map(|s| {
                s.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            });
            spec.affinity = exprs.map(|e| Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(e),
                            match_fields: None,
                        }],
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            });
            p
        };
        let req = |key: &str, op: &str, values: &[&str]| NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        };
        assert_eq!(node_affinity(&with(Some(&[("zone", "a")]), None), &n), None);
        assert!(node_affinity(&with(Some(&[("zone", "b")]), None), &n).is_some());
        assert_eq!(
            node_affinity(
                &with(None, Some(vec![req("disk", "In", &["ssd", "nvme"])])),
                &n
            ),
            None
        );
        assert!(
            node_affinity(&with(None, Some(vec![req("disk", "NotIn", &["ssd"])])), &n).is_some()
        );
        assert_eq!(
            node_affinity(&with(None, Some(vec![req("disk", "Exists", &[])])), &n),
            None
        );
        assert!(node_affinity(&with(None, Some(vec![req("gpu", "Exists", &[])])), &n).is_some());
        assert_eq!(
            node_affinity(&with(None, Some(vec![req("gpu", "DoesNotExist", &[])])), &n),
            None
        );
        assert_eq!(
            node_affinity(&with(None, Some(vec![req("gen", "Gt", &["4"])])), &n),
            None
        );
        assert!(node_affinity(&with(None, Some(vec![req("gen", "Lt", &["4"])])), &n).is_some());
        // An empty term matches nothing.
        assert!(node_affinity(&with(None, Some(vec![])), &n).is_some());
    }

    #[test]
    fn resources_fit_reports_every_shortage() {
        let n = node("n1", &[]).build();
        let p = pod()
            .container(
                container("c")
                    .request("cpu", "1500m")
                    .request("memory", "3Gi"),
            )
            .build();
        let want = pod_requests(&p, false);
        let alloc = node_allocatable(&n);
        assert!(resources_fit(want, alloc, Resources::default()).is_empty());
        let used = Resources {
            milli_cpu: 1000,
            memory: 2 * 1024 * 1024 * 1024,
            pods: 110,
        };
        assert_eq!(
            resources_fit(want, alloc, used),
            vec!["Too many pods", "Insufficient cpu", "Insufficient memory"]
        );
    }
}
