//! A Deployment's status computed from its ReplicaSets, as upstream `calculateStatus`, and
//! comparing statuses the way they look after a round trip through the API server.
//!
//! Every counter of the Go `DeploymentStatus` but `terminatingReplicas` (a pointer) is
//! `omitempty`: a 0 never reaches the wire and reads back as `None`. Computed statuses therefore hold `None` for zero counters, and
//! [`deployment_status_equal`] treats `Some(0)` and `None` alike, so a controller comparing the
//! cached status with a computed one does not write the same status forever.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};

use super::accessors::{deployment_replicas, generation};
use super::conditions::{
    CONDITION_FALSE, CONDITION_TRUE, DEPLOYMENT_AVAILABLE, MINIMUM_REPLICAS_AVAILABLE,
    MINIMUM_REPLICAS_UNAVAILABLE, new_deployment_condition, set_deployment_condition,
};
use super::counts::{
    get_actual_replica_count_for_replica_sets, get_available_replica_count_for_replica_sets,
    get_ready_replica_count_for_replica_sets, get_replica_count_for_replica_sets,
    get_terminating_replica_count_for_replica_sets,
};
use super::strategy::max_unavailable;

fn nonzero(v: i32) -> Option<i32> {
    (v != 0).then_some(v)
}

/// The Deployment's status from its ReplicaSets, as upstream `calculateStatus`.
///
/// `all_rss` holds the old and the new ReplicaSets; `new_rs` is the new one (also in
/// `all_rss`), if it exists. Conditions are copied from the current status and `Available` is
/// set from the available count (stamped with `now` when it changes). `terminatingReplicas`
/// sums the ReplicaSets' (unset while one the ReplicaSet controller synced does not report
/// it), as upstream with `DeploymentReplicaSetTerminatingReplicas` on (its default since
/// v1.35).
pub fn calculate_status(
    all_rss: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    d: &Deployment,
    now: Timestamp,
) -> DeploymentStatus {
    let available = get_available_replica_count_for_replica_sets(all_rss);
    let total = get_replica_count_for_replica_sets(all_rss);
    // More available than desired happens while scaling down; never report negative.
    let unavailable = (total - available).max(0);
    let current = d.status.as_ref();
    let mut status = DeploymentStatus {
        observed_generation: Some(generation(&d.metadata)).filter(|g| *g != 0),
        replicas: nonzero(get_actual_replica_count_for_replica_sets(all_rss)),
        updated_replicas: nonzero(
            new_rs.map_or(0, |rs| get_actual_replica_count_for_replica_sets(&[rs])),
        ),
        ready_replicas: nonzero(get_ready_replica_count_for_replica_sets(all_rss)),
        available_replicas: nonzero(available),
        unavailable_replicas: nonzero(unavailable),
        collision_count: current.and_then(|s| s.collision_count),
        conditions: current
            .and_then(|s| s.conditions.clone())
            .filter(|c| !c.is_empty()),
        terminating_replicas: get_terminating_replica_count_for_replica_sets(all_rss),
    };
    let condition = if available >= deployment_replicas(d) - max_unavailable(d) {
        new_deployment_condition(
            DEPLOYMENT_AVAILABLE,
            CONDITION_TRUE,
            MINIMUM_REPLICAS_AVAILABLE,
            "Deployment has minimum availability.",
            now,
        )
    } else {
        new_deployment_condition(
            DEPLOYMENT_AVAILABLE,
            CONDITION_FALSE,
            MINIMUM_REPLICAS_UNAVAILABLE,
            "Deployment does not have minimum availability.",
            now,
        )
    };
    set_deployment_condition(&mut status, condition);
    status
}

/// A status as it reads back from the API server: zero counters and empty conditions `None`.
pub fn normalize_status(status: &DeploymentStatus) -> DeploymentStatus {
    let nz = |v: Option<i32>| v.filter(|v| *v != 0);
    DeploymentStatus {
        available_replicas: nz(status.available_replicas),
        collision_count: status.collision_count,
        conditions: status.conditions.clone().filter(|c| !c.is_empty()),
        observed_generation: status.observed_generation.filter(|g| *g != 0),
        ready_replicas: nz(status.ready_replicas),
        replicas: nz(status.replicas),
        terminating_replicas: status.terminating_replicas,
        unavailable_replicas: nz(status.unavailable_replicas),
        updated_replicas: nz(status.updated_replicas),
    }
}

/// Whether two statuses are the same once written to the API server (upstream compares with
/// `reflect.DeepEqual` on Go values, where 0 and "omitted" are the same thing).
pub fn deployment_status_equal(a: Option<&DeploymentStatus>, b: Option<&DeploymentStatus>) -> bool {
    let empty = DeploymentStatus::default();
    normalize_status(a.unwrap_or(&empty)) == normalize_status(b.unwrap_or(&empty))
}

/// Reads an optional status counter as Go's zero value.
pub fn counter(v: Option<i32>) -> i32 {
    v.unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::super::conditions::{get_deployment_condition, reason};
    use super::super::test_support::{deployment_with, rs, with_status};
    use super::*;

    #[test]
    fn calculate_status_table() {
        struct Case {
            name: &'static str,
            replicas: i32,
            max_unavailable: i32,
            old: Vec<ReplicaSet>,
            new: Option<ReplicaSet>,
            want_replicas: i32,
            want_updated: i32,
            want_available: i32,
            want_unavailable: i32,
            want_available_reason: &'static str,
        }
        let cases = [
            Case {
                name: "rollout in progress, minimum available",
                replicas: 10,
                max_unavailable: 2,
                old: vec![with_status(rs("old", 7), 7, 7)],
                new: Some(with_status(rs("new", 5), 5, 2)),
                want_replicas: 12,
                want_updated: 5,
                want_available: 9,
                want_unavailable: 3,
                want_available_reason: MINIMUM_REPLICAS_AVAILABLE,
            },
            Case {
                name: "below minimum availability",
                replicas: 10,
                max_unavailable: 1,
                old: vec![with_status(rs("old", 5), 5, 5)],
                new: Some(with_status(rs("new", 5), 5, 3)),
                want_replicas: 10,
                want_updated: 5,
                want_available: 8,
                want_unavailable: 2,
                want_available_reason: MINIMUM_REPLICAS_UNAVAILABLE,
            },
            Case {
                name: "more available than desired never reports negative unavailable",
                replicas: 2,
                max_unavailable: 0,
                old: vec![with_status(rs("old", 0), 3, 3)],
                new: Some(with_status(rs("new", 2), 2, 2)),
                want_replicas: 5,
                want_updated: 2,
                want_available: 5,
                want_unavailable: 0,
                want_available_reason: MINIMUM_REPLICAS_AVAILABLE,
            },
            Case {
                name: "no new replica set",
                replicas: 3,
                max_unavailable: 1,
                old: vec![with_status(rs("old", 3), 3, 3)],
                new: None,
                want_replicas: 3,
                want_updated: 0,
                want_available: 3,
                want_unavailable: 0,
                want_available_reason: MINIMUM_REPLICAS_AVAILABLE,
            },
        ];
        let now = Timestamp::from_second(100).expect("valid");
        for c in cases {
            let mut d = deployment_with(
                "foo",
                c.replicas,
                IntOrString::Int(1),
                IntOrString::Int(c.max_unavailable),
            );
            d.metadata.generation = Some(4);
            d.status = Some(DeploymentStatus {
                collision_count: Some(2),
                ..Default::default()
            });
            let mut all: Vec<&ReplicaSet> = c.old.iter().collect();
            all.extend(c.new.as_ref());
            let s = calculate_status(&all, c.new.as_ref(), &d, now);
            assert_eq!(counter(s.replicas), c.want_replicas, "{}: replicas", c.name);
            assert_eq!(
                counter(s.updated_replicas),
                c.want_updated,
                "{}: updated",
                c.name
            );
            assert_eq!(
                counter(s.available_replicas),
                c.want_available,
                "{}: available",
                c.name
            );
            assert_eq!(
                counter(s.unavailable_replicas),
                c.want_unavailable,
                "{}: unavailable",
                c.name
            );
            assert_eq!(s.observed_generation, Some(4), "{}", c.name);
            assert_eq!(s.collision_count, Some(2), "{}", c.name);
            let available =
                get_deployment_condition(&s, DEPLOYMENT_AVAILABLE).expect("Available set");
            assert_eq!(reason(available), c.want_available_reason, "{}", c.name);
            // Zero counters are omitted, as on the wire.
            assert_ne!(s.updated_replicas, Some(0), "{}", c.name);
            assert_ne!(s.unavailable_replicas, Some(0), "{}", c.name);
        }
    }

    #[test]
    fn terminating_replicas_sum_those_of_the_replica_sets() {
        let d = deployment_with("foo", 3, IntOrString::Int(1), IntOrString::Int(0));
        let terminating = |mut r: ReplicaSet, n: Option<i32>, observed: i64| {
            let status = r.status.get_or_insert_with(Default::default);
            status.terminating_replicas = n;
            status.observed_generation = Some(observed);
            r
        };
        let old = terminating(with_status(rs("old", 0), 0, 0), Some(2), 1);
        let new = terminating(with_status(rs("new", 3), 3, 3), Some(0), 1);
        let s = calculate_status(&[&old, &new], Some(&new), &d, Timestamp::UNIX_EPOCH);
        assert_eq!(s.terminating_replicas, Some(2));

        // A synced ReplicaSet that does not report it: unknown, not zero.
        let silent = terminating(with_status(rs("older", 0), 0, 0), None, 1);
        let s = calculate_status(
            &[&silent, &old, &new],
            Some(&new),
            &d,
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(s.terminating_replicas, None);
        // One the ReplicaSet controller has not synced yet counts as none.
        let fresh = terminating(rs("fresh", 0), None, 0);
        let s = calculate_status(&[&fresh, &new], Some(&new), &d, Timestamp::UNIX_EPOCH);
        assert_eq!(s.terminating_replicas, Some(0));
    }

    #[test]
    fn available_condition_keeps_its_times_while_unchanged() {
        let t0 = Timestamp::from_second(100).expect("valid");
        let t1 = Timestamp::from_second(200).expect("valid");
        let mut d = deployment_with("foo", 1, IntOrString::Int(1), IntOrString::Int(0));
        let r = with_status(rs("new", 1), 1, 1);
        let first = calculate_status(&[&r], Some(&r), &d, t0);
        d.status = Some(first.clone());
        let second = calculate_status(&[&r], Some(&r), &d, t1);
        assert!(deployment_status_equal(Some(&first), Some(&second)));
        let c = get_deployment_condition(&second, DEPLOYMENT_AVAILABLE).expect("set");
        assert_eq!(c.last_update_time, Some(Time(t0)));
    }

    #[test]
    fn status_equality_ignores_zero_versus_missing() {
        let a = DeploymentStatus {
            replicas: Some(0),
            conditions: Some(vec![]),
            observed_generation: Some(0),
            ..Default::default()
        };
        assert!(deployment_status_equal(Some(&a), None));
        let b = DeploymentStatus {
            replicas: Some(1),
            ..Default::default()
        };
        assert!(!deployment_status_equal(Some(&a), Some(&b)));
    }
}
