//! Which old ReplicaSets to delete to keep `revisionHistoryLimit` of them, as upstream
//! `cleanupDeployment`.

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::accessors::{
    generation, rs_observed_generation, rs_replicas, rs_status_replicas, rs_terminating_replicas,
};
use super::sort::sort_by_revision;

/// The old ReplicaSets to delete, lowest revision first: of the old ReplicaSets not already
/// being deleted, the `len - limit` with the lowest revisions, skipping any that still has
/// (or is asked for, or may not have noticed a change to) replicas — a skipped one is not
/// replaced by a newer one. Nothing without a limit or with `MaxInt32`. As upstream
/// `cleanupDeployment`, which the controller runs only once a rollout is complete (or the
/// Deployment is paused).
///
/// A ReplicaSet reporting terminating pods is kept too (upstream does so when the
/// `DeploymentReplicaSetTerminatingReplicas` feature is on).
pub fn old_replica_sets_to_delete<'a>(
    old_rss: &[&'a ReplicaSet],
    revision_history_limit: Option<i32>,
) -> Vec<&'a ReplicaSet> {
    let Some(limit) = revision_history_limit.filter(|l| *l != i32::MAX) else {
        return Vec::new();
    };
    let mut cleanable: Vec<&'a ReplicaSet> = old_rss
        .iter()
        .copied()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .collect();
    let diff = i64::try_from(cleanable.len()).unwrap_or(i64::MAX) - i64::from(limit);
    if diff <= 0 {
        return Vec::new();
    }
    sort_by_revision(&mut cleanable);
    cleanable
        .into_iter()
        .take(usize::try_from(diff).unwrap_or(usize::MAX))
        .filter(|rs| {
            rs_status_replicas(rs) == 0
                && rs_replicas(rs) == 0
                && generation(&rs.metadata) <= rs_observed_generation(rs)
                && rs_terminating_replicas(rs).unwrap_or(0) == 0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSetStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::super::accessors::name;
    use super::super::annotations::REVISION_ANNOTATION;
    use super::super::test_support::{rs, rs_at, ts, with_annotations};
    use super::*;

    /// Upstream `newRSWithStatus(name, specReplicas, statusReplicas, selector)`.
    fn rs_with_status(name: &str, spec: i32, status: i32) -> ReplicaSet {
        let mut r = rs(name, spec);
        r.status = Some(ReplicaSetStatus {
            replicas: status,
            ..Default::default()
        });
        r
    }

    #[test]
    fn cleanup_table() {
        // Upstream TestDeploymentController_cleanupDeployment.
        let mut already_deleted = rs_with_status("foo-1", 0, 0);
        already_deleted.metadata.deletion_timestamp = Some(Time(ts(2020, 1, 1, 0, 0, 0)));
        let mut not_observed = rs_with_status("foo-2", 0, 0);
        not_observed.metadata.generation = Some(3);
        let mut terminating = rs_with_status("foo-3", 0, 0);
        if let Some(s) = terminating.status.as_mut() {
            s.terminating_replicas = Some(1);
        }
        struct Case {
            name: &'static str,
            old_rss: Vec<ReplicaSet>,
            limit: Option<i32>,
            expected_deletions: usize,
        }
        let cases = [
            Case {
                name: "keep one of three",
                old_rss: vec![
                    rs_with_status("foo-1", 0, 0),
                    rs_with_status("foo-2", 0, 0),
                    rs_with_status("foo-3", 0, 0),
                ],
                limit: Some(1),
                expected_deletions: 2,
            },
            Case {
                name: "only delete the replica set with Spec.Replicas = Status.Replicas = 0",
                old_rss: vec![
                    rs_with_status("foo-1", 0, 0),
                    rs_with_status("foo-2", 0, 1),
                    rs_with_status("foo-3", 1, 0),
                    rs_with_status("foo-4", 1, 1),
                ],
                limit: Some(0),
                expected_deletions: 1,
            },
            Case {
                name: "limit 0 deletes all empty ones",
                old_rss: vec![rs_with_status("foo-1", 0, 0), rs_with_status("foo-2", 0, 0)],
                limit: Some(0),
                expected_deletions: 2,
            },
            Case {
                name: "never delete replica sets with replicas",
                old_rss: vec![rs_with_status("foo-1", 1, 1), rs_with_status("foo-2", 1, 1)],
                limit: Some(0),
                expected_deletions: 0,
            },
            Case {
                name: "already being deleted",
                old_rss: vec![already_deleted],
                limit: Some(0),
                expected_deletions: 0,
            },
            Case {
                name: "with unlimited revisionHistoryLimit",
                old_rss: vec![
                    rs_with_status("foo-1", 0, 0),
                    rs_with_status("foo-2", 0, 0),
                    rs_with_status("foo-3", 0, 0),
                ],
                limit: Some(i32::MAX),
                expected_deletions: 0,
            },
            Case {
                name: "without a revisionHistoryLimit",
                old_rss: vec![rs_with_status("foo-1", 0, 0)],
                limit: None,
                expected_deletions: 0,
            },
            Case {
                name: "a spec change the ReplicaSet controller has not observed",
                old_rss: vec![not_observed],
                limit: Some(0),
                expected_deletions: 0,
            },
            Case {
                name: "terminating pods keep the replica set",
                old_rss: vec![terminating],
                limit: Some(0),
                expected_deletions: 0,
            },
        ];
        for c in cases {
            let refs: Vec<&ReplicaSet> = c.old_rss.iter().collect();
            assert_eq!(
                old_replica_sets_to_delete(&refs, c.limit).len(),
                c.expected_deletions,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn cleanup_order_table() {
        // Upstream TestDeploymentController_cleanupDeploymentOrder: creation order is always
        // foo-1 < foo-2 < foo-3 < foo-4; deletion follows revisions.
        let at = |m: i8| ts(2020, 1, 1, 0, m, 0);
        let r = |n: &str, replicas: i32, m: i8, rev: &str| {
            let mut x = rs_at(n, replicas, at(m));
            x.status = Some(ReplicaSetStatus {
                replicas,
                ..Default::default()
            });
            if rev.is_empty() {
                x
            } else {
                with_annotations(x, &[(REVISION_ANNOTATION, rev)])
            }
        };
        struct Case {
            name: &'static str,
            old_rss: Vec<ReplicaSet>,
            limit: i32,
            expected: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "revision order: rs1 < rs2, delete rs1",
                old_rss: vec![r("foo-1", 0, 1, "1"), r("foo-2", 0, 2, "2")],
                limit: 1,
                expected: &["foo-1"],
            },
            Case {
                name: "revision order: rs2 < rs1, delete rs2",
                old_rss: vec![r("foo-1", 0, 1, "2"), r("foo-2", 0, 2, "1")],
                limit: 1,
                expected: &["foo-2"],
            },
            Case {
                name: "rs1 has revision but rs2 doesn't have revision, delete rs2",
                old_rss: vec![r("foo-1", 0, 1, "1"), r("foo-2", 0, 2, "")],
                limit: 1,
                expected: &["foo-2"],
            },
            Case {
                name: "rs1 doesn't have revision while rs2 has revision, delete rs1",
                old_rss: vec![r("foo-1", 0, 1, ""), r("foo-2", 0, 2, "2")],
                limit: 1,
                expected: &["foo-1"],
            },
            Case {
                name: "revision order: rs1 < rs2 < r3, but rs1 has replicas, delete rs2",
                old_rss: vec![
                    r("foo-1", 1, 1, "1"),
                    r("foo-2", 0, 2, "2"),
                    r("foo-3", 0, 3, "3"),
                ],
                limit: 1,
                expected: &["foo-2"],
            },
            Case {
                name: "revision order: rs1 < rs2 < r3, both rs1 && rs2 have replicas, don't delete",
                old_rss: vec![
                    r("foo-1", 1, 1, "1"),
                    r("foo-2", 1, 2, "2"),
                    r("foo-3", 0, 3, "3"),
                ],
                limit: 1,
                expected: &[],
            },
            Case {
                name: "revision order: rs2 < rs4 < rs1 < rs3, delete rs2 && rs4",
                old_rss: vec![
                    r("foo-1", 0, 1, "3"),
                    r("foo-2", 0, 2, "1"),
                    r("foo-3", 0, 3, "4"),
                    r("foo-4", 0, 4, "2"),
                ],
                limit: 2,
                expected: &["foo-2", "foo-4"],
            },
        ];
        for c in cases {
            let refs: Vec<&ReplicaSet> = c.old_rss.iter().collect();
            let got: Vec<&str> = old_replica_sets_to_delete(&refs, Some(c.limit))
                .into_iter()
                .map(|rs| name(&rs.metadata))
                .collect();
            assert_eq!(got, c.expected, "{}", c.name);
        }
    }
}
