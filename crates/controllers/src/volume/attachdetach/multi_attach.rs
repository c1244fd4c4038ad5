//! The Multi-Attach check: which volumes may be attached to one node only, and what the pods waiting for such a volume are told while another node holds it (upstream `util.IsMultiAttachAllowed` and the reconciler's `reportMultiAttachError`).

use k8s_openapi::api::core::v1::PersistentVolume;

use super::cache::{DesiredStateOfWorld, VolumeToAttach};

/// The prefix of every Multi-Attach message, upstream's `GenerateMsg` prefix.
pub const MULTI_ATTACH_ERROR: &str = "Multi-Attach error";

/// Whether `pv` may be attached to several nodes at once, as upstream's
/// `util.IsMultiAttachAllowed`: a volume without access modes is given the benefit of the
/// doubt (the attacher fails if it cannot), otherwise only `ReadWriteMany` or `ReadOnlyMany`
/// allow it (`ReadWriteOnce` and `ReadWriteOncePod` alone do not).
pub fn is_multi_attach_allowed(pv: &PersistentVolume) -> bool {
    let modes = pv
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default();
    modes.is_empty()
        || modes
            .iter()
            .any(|m| m == "ReadWriteMany" || m == "ReadOnlyMany")
}

/// A volume that cannot be attached to its node because it is exclusively attached to other
/// nodes, with what upstream's `reportMultiAttachError` tells about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiAttachError {
    /// The volume the pods on [`VolumeToAttach::node_name`] wait for.
    pub volume: VolumeToAttach,
    /// The other nodes it is attached to, sorted (in practice one).
    pub other_nodes: Vec<String>,
    /// The pods (`namespace/name`, sorted) that use it on those nodes.
    pub pods_on_other_nodes: Vec<String>,
}

impl MultiAttachError {
    /// The report for `volume`, attached to `attached_nodes` (which may name its own node;
    /// that one is left out), with the pods the desired state has for it on the others.
    pub fn new(
        dsw: &DesiredStateOfWorld,
        volume: &VolumeToAttach,
        attached_nodes: &[String],
    ) -> Self {
        let other_nodes: Vec<String> = attached_nodes
            .iter()
            .filter(|n| **n != volume.node_name)
            .cloned()
            .collect();
        let pods_on_other_nodes = dsw.volume_pods_on_nodes(&other_nodes, &volume.volume_name);
        Self {
            volume: volume.clone(),
            other_nodes,
            pods_on_other_nodes,
        }
    }

    /// The `FailedAttachVolume` warning each pod waiting for the volume gets, as (pod
    /// `namespace/name`, message), in pod order. A pod is told the names of the blocking pods
    /// of its own namespace only, and how many others there are; with no blocking pod known
    /// (they are gone, the detach is pending), that the volume is exclusively attached.
    pub fn events(&self) -> Vec<(String, String)> {
        let volume = &self.volume.pv_name;
        if self.pods_on_other_nodes.is_empty() {
            let message = format!(
                "{MULTI_ATTACH_ERROR} for volume {volume:?} Volume is already exclusively attached to one node and can't be attached to another"
            );
            return self
                .volume
                .pods
                .iter()
                .map(|pod| (pod.clone(), message.clone()))
                .collect();
        }
        self.volume
            .pods
            .iter()
            .map(|pod| {
                let namespace = namespace_of(pod);
                let mut local = Vec::new();
                let mut others = 0usize;
                for other in &self.pods_on_other_nodes {
                    if namespace_of(other) == namespace {
                        local.push(name_of(other));
                    } else {
                        others += 1;
                    }
                }
                let detail = if local.is_empty() {
                    format!("Volume is already used by {others} pod(s) in different namespaces")
                } else if others > 0 {
                    format!(
                        "Volume is already used by pod(s) {} and {others} pod(s) in different namespaces",
                        local.join(", ")
                    )
                } else {
                    format!("Volume is already used by pod(s) {}", local.join(", "))
                };
                (pod.clone(), format!("{MULTI_ATTACH_ERROR} for volume {volume:?} {detail}"))
            })
            .collect()
    }

    /// Logs the report for the administrator, with every pod and node, as upstream does once
    /// per (volume, node).
    pub fn log(&self) {
        let volume = &self.volume;
        if self.pods_on_other_nodes.is_empty() {
            tracing::info!(
                attached_to = ?self.other_nodes,
                volume = volume.volume_name,
                node = volume.node_name,
                "Multi-Attach error: volume is already exclusively attached and can't be attached to another node"
            );
        } else {
            tracing::info!(
                pods = ?self.pods_on_other_nodes,
                attached_to = ?self.other_nodes,
                volume = volume.volume_name,
                node = volume.node_name,
                "Multi-Attach error: volume is already used by pods"
            );
        }
    }
}

/// The namespace of a `namespace/name` key.
fn namespace_of(key: &str) -> &str {
    key.split_once('/').map_or("", |(ns, _)| ns)
}

/// The name of a `namespace/name` key.
fn name_of(key: &str) -> &str {
    key.split_once('/').map_or(key, |(_, name)| name)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pv(modes: serde_json::Value) -> PersistentVolume {
        serde_json::from_value(json!({"metadata": {"name": "pv"}, "spec": {"accessModes": modes}}))
            .expect("pv")
    }

    #[test]
    fn only_many_node_access_modes_or_none_allow_multi_attach() {
        for (modes, allowed) in [
            (json!([]), true),
            (json!(null), true),
            (json!(["ReadWriteOnce"]), false),
            (json!(["ReadWriteOncePod"]), false),
            (json!(["ReadWriteOnce", "ReadWriteOncePod"]), false),
            (json!(["ReadWriteMany"]), true),
            (json!(["ReadOnlyMany"]), true),
            (json!(["ReadWriteOnce", "ReadOnlyMany"]), true),
        ] {
            assert_eq!(
                is_multi_attach_allowed(&pv(modes.clone())),
                allowed,
                "{modes}"
            );
        }
    }

    /// Upstream's `Test_ReportMultiAttachError`: the volume is wanted by `ns1/pod1` on node1 and
    /// by the other pods on the other nodes, to all of which it is attached.
    #[test]
    fn report_multi_attach_error_names_only_same_namespace_pods() {
        struct Case {
            name: &'static str,
            nodes: &'static [(&'static str, &'static [&'static str])],
            expected: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "no pods use the volume",
                nodes: &[("node1", &["ns1/pod1"])],
                expected: &[
                    "Multi-Attach error for volume \"volume-name\" Volume is already exclusively attached to one node and can't be attached to another",
                ],
            },
            Case {
                name: "pods in the same namespace use the volume",
                nodes: &[("node1", &["ns1/pod1"]), ("node2", &["ns1/pod2"])],
                expected: &[
                    "Multi-Attach error for volume \"volume-name\" Volume is already used by pod(s) pod2",
                ],
            },
            Case {
                name: "pods in another namespace use the volume",
                nodes: &[("node1", &["ns1/pod1"]), ("node2", &["ns2/pod2"])],
                expected: &[
                    "Multi-Attach error for volume \"volume-name\" Volume is already used by 1 pod(s) in different namespaces",
                ],
            },
            Case {
                name: "pods both in the same and another namespace use the volume",
                nodes: &[
                    ("node1", &["ns1/pod1"]),
                    ("node2", &["ns2/pod2"]),
                    ("node3", &["ns1/pod3"]),
                ],
                expected: &[
                    "Multi-Attach error for volume \"volume-name\" Volume is already used by pod(s) pod3 and 1 pod(s) in different namespaces",
                ],
            },
        ];
        for case in cases {
            let mut dsw = DesiredStateOfWorld::default();
            let mut nodes = Vec::new();
            for (node, pods) in case.nodes {
                nodes.push(node.to_string());
                for pod in *pods {
                    dsw.add_pod(pod, node, "d", "h", "volume-name", false);
                }
            }
            let volume = dsw
                .volumes_to_attach()
                .find(|v| v.node_name == "node1")
                .cloned()
                .expect("node1 wants the volume");
            let report = MultiAttachError::new(&dsw, &volume, &nodes);
            assert!(
                !report.other_nodes.contains(&"node1".to_owned()),
                "{}",
                case.name
            );
            let events: Vec<String> = report
                .events()
                .into_iter()
                .map(|(pod, m)| {
                    assert_eq!(pod, "ns1/pod1", "{}", case.name);
                    m
                })
                .collect();
            assert_eq!(events, case.expected, "{}", case.name);
        }
    }

    #[test]
    fn every_waiting_pod_gets_its_own_message() {
        let mut dsw = DesiredStateOfWorld::default();
        dsw.add_pod("ns1/b", "node1", "d", "h", "pv", false);
        dsw.add_pod("ns2/a", "node1", "d", "h", "pv", false);
        dsw.add_pod("ns1/y", "node2", "d", "h", "pv", false);
        dsw.add_pod("ns1/x", "node2", "d", "h", "pv", false);
        let volume = dsw
            .volume(&super::super::naming::unique_volume_name("d", "h"), "node1")
            .cloned()
            .expect("desired");
        let report = MultiAttachError::new(&dsw, &volume, &["node2".to_owned()]);
        assert_eq!(report.pods_on_other_nodes, vec!["ns1/x", "ns1/y"]);
        assert_eq!(
            report.events(),
            vec![
                ("ns1/b".to_owned(), "Multi-Attach error for volume \"pv\" Volume is already used by pod(s) x, y".to_owned()),
                ("ns2/a".to_owned(), "Multi-Attach error for volume \"pv\" Volume is already used by 2 pod(s) in different namespaces".to_owned()),
            ]
        );
    }
}
