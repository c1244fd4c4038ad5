//! The decisions of a `Recreate` rollout, as upstream `recreate.go`: every old ReplicaSet to
//! zero, wait until no old pod runs, then the new ReplicaSet to `spec.replicas`.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;

use super::accessors::rs_replicas;
use super::counts::get_actual_replica_count_for_replica_sets;
use super::scale::ScaleTarget;

/// Scale-downs to zero of every old ReplicaSet that still asks for pods, as upstream
/// `scaleDownOldReplicaSetsForRecreate`.
pub fn scale_down_old_replica_sets_for_recreate<'a>(
    old_rss: &[&'a ReplicaSet],
) -> Vec<ScaleTarget<'a>> {
    old_rss
        .iter()
        .copied()
        .filter(|rs| rs_replicas(rs) != 0)
        .map(|rs| ScaleTarget { rs, replicas: 0 })
        .collect()
}

/// Whether old pods may still run: an old ReplicaSet reports pods, or a pod owned by a
/// ReplicaSet other than the new one is not `Failed`/`Succeeded` (an `Unknown` phase counts
/// as running), as upstream `oldPodsRunning`. `pods` yields each pod with the UID of the
/// ReplicaSet that owns it (the controller's pod map, flattened).
pub fn old_pods_running<'a>(
    new_rs: Option<&ReplicaSet>,
    old_rss: &[&ReplicaSet],
    pods: impl IntoIterator<Item = (&'a str, &'a Pod)>,
) -> bool {
    if get_actual_replica_count_for_replica_sets(old_rss) > 0 {
        return true;
    }
    let new_uid = new_rs.and_then(|rs| rs.metadata.uid.as_deref());
    pods.into_iter()
        .filter(|(owner_uid, _)| Some(*owner_uid) != new_uid)
        .any(|(_, pod)| {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Failed") | Some("Succeeded"))
        })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{rs, with_status};
    use super::*;

    fn pod(name: &str, phase: Option<&str>) -> Pod {
        let pod = kcm_testing::pod(name).default_status();
        match phase {
            Some(phase) => pod.phase(phase).build(),
            None => pod.build(),
        }
    }

    #[test]
    fn old_pods_running_table() {
        // Modelled on upstream TestOldPodsRunning.
        struct Case {
            name: &'static str,
            new_rs: Option<ReplicaSet>,
            old_rss: Vec<ReplicaSet>,
            pods: Vec<(&'static str, Pod)>,
            expected: bool,
        }
        let cases = [
            Case {
                name: "no old RSs",
                new_rs: None,
                old_rss: vec![],
                pods: vec![],
                expected: false,
            },
            Case {
                name: "old RSs with running pods",
                new_rs: None,
                old_rss: vec![with_status(rs("old-1", 0), 1, 1)],
                pods: vec![],
                expected: true,
            },
            Case {
                name: "old RSs without pods but with non-zero status replicas",
                new_rs: None,
                old_rss: vec![with_status(rs("old-1", 0), 1, 0)],
                pods: vec![],
                expected: true,
            },
            Case {
                name: "old RSs without pods or non-zero status replicas",
                new_rs: None,
                old_rss: vec![rs("old-1", 0)],
                pods: vec![],
                expected: false,
            },
            Case {
                name: "old RSs with zero status replicas but pods in terminal state are present",
                new_rs: None,
                old_rss: vec![rs("old-1", 0)],
                pods: vec![
                    ("uid-old-1", pod("p1", Some("Failed"))),
                    ("uid-old-1", pod("p2", Some("Succeeded"))),
                ],
                expected: false,
            },
            Case {
                name: "old RSs with zero status replicas but pod in unknown phase present",
                new_rs: None,
                old_rss: vec![rs("old-1", 0)],
                pods: vec![("uid-old-1", pod("p1", Some("Unknown")))],
                expected: true,
            },
            Case {
                name: "old RSs with zero status replicas with pending pod present",
                new_rs: None,
                old_rss: vec![rs("old-1", 0)],
                pods: vec![("uid-old-1", pod("p1", Some("Pending")))],
                expected: true,
            },
            Case {
                name: "old RSs with zero status replicas with running pod present",
                new_rs: None,
                old_rss: vec![rs("old-1", 0)],
                pods: vec![("uid-old-1", pod("p1", Some("Running")))],
                expected: true,
            },
            Case {
                name: "pods of the new RS do not count",
                new_rs: Some(rs("new", 3)),
                old_rss: vec![rs("old-1", 0)],
                pods: vec![("uid-new", pod("p1", Some("Running")))],
                expected: false,
            },
            Case {
                name: "pods without a phase count as running",
                new_rs: Some(rs("new", 3)),
                old_rss: vec![],
                pods: vec![("uid-old-2", pod("p1", None))],
                expected: true,
            },
        ];
        for c in cases {
            let olds: Vec<&ReplicaSet> = c.old_rss.iter().collect();
            let pods = c.pods.iter().map(|(uid, p)| (*uid, p));
            assert_eq!(
                old_pods_running(c.new_rs.as_ref(), &olds, pods),
                c.expected,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn recreate_scales_every_active_old_replica_set_to_zero() {
        let a = rs("a", 3);
        let b = rs("b", 0);
        let c = rs("c", 1);
        let got = scale_down_old_replica_sets_for_recreate(&[&a, &b, &c]);
        assert_eq!(
            got,
            vec![
                ScaleTarget {
                    rs: &a,
                    replicas: 0
                },
                ScaleTarget {
                    rs: &c,
                    replicas: 0
                }
            ]
        );
    }
}
