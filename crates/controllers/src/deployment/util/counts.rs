//! Replica counts summed over a Deployment's ReplicaSets, and the active-ReplicaSet filter.

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::accessors::{
    rs_available_replicas, rs_observed_generation, rs_ready_replicas, rs_replicas,
    rs_status_replicas, rs_terminating_replicas,
};

/// The ReplicaSets with `spec.replicas > 0`, in order, as upstream
/// `controller.FilterActiveReplicaSets`.
pub fn filter_active_replica_sets<'a>(rss: &[&'a ReplicaSet]) -> Vec<&'a ReplicaSet> {
    rss.iter()
        .copied()
        .filter(|rs| rs_replicas(rs) > 0)
        .collect()
}

fn sum(rss: &[&ReplicaSet], f: impl Fn(&ReplicaSet) -> i32) -> i32 {
    rss.iter().fold(0i32, |acc, rs| acc.saturating_add(f(rs)))
}

/// Sum of `spec.replicas`, as upstream `GetReplicaCountForReplicaSets`.
pub fn get_replica_count_for_replica_sets(rss: &[&ReplicaSet]) -> i32 {
    sum(rss, rs_replicas)
}

/// Sum of `status.replicas` (pods that exist), as upstream
/// `GetActualReplicaCountForReplicaSets`.
pub fn get_actual_replica_count_for_replica_sets(rss: &[&ReplicaSet]) -> i32 {
    sum(rss, rs_status_replicas)
}

/// Sum of `status.readyReplicas`, as upstream `GetReadyReplicaCountForReplicaSets`.
pub fn get_ready_replica_count_for_replica_sets(rss: &[&ReplicaSet]) -> i32 {
    sum(rss, rs_ready_replicas)
}

/// Sum of `status.availableReplicas`, as upstream `GetAvailableReplicaCountForReplicaSets`.
pub fn get_available_replica_count_for_replica_sets(rss: &[&ReplicaSet]) -> i32 {
    sum(rss, rs_available_replicas)
}

/// Sum of `status.terminatingReplicas`, or `None` when a ReplicaSet the ReplicaSet controller
/// has already synced does not report it, as upstream
/// `GetTerminatingReplicaCountForReplicaSets`. Never-synced ReplicaSets
/// (`observedGeneration == 0`) without the field count as 0.
pub fn get_terminating_replica_count_for_replica_sets(rss: &[&ReplicaSet]) -> Option<i32> {
    let mut total = 0i32;
    for rs in rss {
        match rs_terminating_replicas(rs) {
            Some(n) => total = total.saturating_add(n),
            None if rs_observed_generation(rs) == 0 => {}
            None => return None,
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSetStatus;

    use super::super::test_support::rs;
    use super::*;

    fn with(name: &str, spec: i32, status: ReplicaSetStatus) -> ReplicaSet {
        let mut r = rs(name, spec);
        r.status = Some(status);
        r
    }

    #[test]
    fn replica_counts_table() {
        // Upstream TestGetReplicaCountForReplicaSets.
        let rs1 = with(
            "foo-rs",
            1,
            ReplicaSetStatus {
                observed_generation: Some(1),
                replicas: 2,
                terminating_replicas: Some(3),
                ..Default::default()
            },
        );
        let rs2 = with(
            "bar-rs",
            2,
            ReplicaSetStatus {
                replicas: 3,
                terminating_replicas: Some(1),
                ..Default::default()
            },
        );
        let rs3 = with("unsynced-rs", 3, ReplicaSetStatus::default());
        let rs4 = with(
            "dropped-rs",
            1,
            ReplicaSetStatus {
                observed_generation: Some(1),
                replicas: 1,
                ..Default::default()
            },
        );
        struct Case<'a> {
            name: &'static str,
            sets: Vec<&'a ReplicaSet>,
            count: i32,
            actual: i32,
            terminating: Option<i32>,
        }
        let cases = [
            Case {
                name: "scaling down rs1",
                sets: vec![&rs1],
                count: 1,
                actual: 2,
                terminating: Some(3),
            },
            Case {
                name: "scaling down rs1 and rs2",
                sets: vec![&rs1, &rs2],
                count: 3,
                actual: 5,
                terminating: Some(4),
            },
            Case {
                name: "scaling up rs3",
                sets: vec![&rs3],
                count: 3,
                actual: 0,
                terminating: Some(0),
            },
            Case {
                name: "scaling down rs1 and rs2 and scaling up rs3",
                sets: vec![&rs1, &rs2, &rs3],
                count: 6,
                actual: 5,
                terminating: Some(4),
            },
            Case {
                name: "invalid/unknown terminating status for rs4",
                sets: vec![&rs4],
                count: 1,
                actual: 1,
                terminating: None,
            },
            Case {
                name: "invalid/unknown terminating status for rs4 with rs1, rs2 and rs3",
                sets: vec![&rs1, &rs2, &rs3, &rs4],
                count: 7,
                actual: 6,
                terminating: None,
            },
        ];
        for c in cases {
            assert_eq!(
                get_replica_count_for_replica_sets(&c.sets),
                c.count,
                "{}",
                c.name
            );
            assert_eq!(
                get_actual_replica_count_for_replica_sets(&c.sets),
                c.actual,
                "{}",
                c.name
            );
            assert_eq!(
                get_terminating_replica_count_for_replica_sets(&c.sets),
                c.terminating,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn ready_available_and_active() {
        let a = with(
            "a",
            2,
            ReplicaSetStatus {
                replicas: 2,
                ready_replicas: Some(2),
                available_replicas: Some(1),
                ..Default::default()
            },
        );
        let b = with(
            "b",
            0,
            ReplicaSetStatus {
                replicas: 1,
                ready_replicas: Some(1),
                available_replicas: Some(1),
                ..Default::default()
            },
        );
        let all = [&a, &b];
        assert_eq!(get_ready_replica_count_for_replica_sets(&all), 3);
        assert_eq!(get_available_replica_count_for_replica_sets(&all), 2);
        let active = filter_active_replica_sets(&all);
        assert_eq!(active.len(), 1);
        assert!(std::ptr::eq(active[0], &a));
        assert_eq!(get_replica_count_for_replica_sets(&[]), 0);
    }
}
