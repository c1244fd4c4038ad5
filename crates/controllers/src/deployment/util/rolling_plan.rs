//! The decisions of a rolling update step, as upstream `rolling.go`: how far the new
//! ReplicaSet may grow (`maxSurge`) and how far the old ones may shrink (`maxUnavailable`),
//! unhealthy old replicas first.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::accessors::{deployment_replicas, object_key, rs_available_replicas, rs_replicas};
use super::counts::{
    get_available_replica_count_for_replica_sets, get_replica_count_for_replica_sets,
};
use super::scale::ScaleTarget;
use super::sort::cmp_by_creation_timestamp;
use super::strategy::{self, max_unavailable, new_rs_new_replicas};

/// Errors of rolling-update planning.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A "scale down" would grow a ReplicaSet: its status reports more available replicas
    /// than its spec asks for (a stale status). Upstream refuses the step.
    #[error("when {phase}, got invalid request to scale down {replica_set} {from} -> {to}")]
    InvalidScaleDown {
        /// `"cleaning up unhealthy replicas"` or `"scaling down old RS"`.
        phase: &'static str,
        /// `namespace/name` of the ReplicaSet.
        replica_set: String,
        /// Its current size.
        from: i32,
        /// The computed size.
        to: i32,
    },
    /// The new ReplicaSet's next size could not be computed.
    #[error(transparent)]
    Strategy(#[from] strategy::Error),
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The size the new ReplicaSet should be scaled to now, or `None` if it stays as it is: down
/// to `spec.replicas` if above it, otherwise up as far as `maxSurge` allows
/// ([`new_rs_new_replicas`]), as upstream `reconcileNewReplicaSet`. `all_rss` holds the old
/// and the new ReplicaSets.
pub fn reconcile_new_replica_set(
    d: &Deployment,
    all_rss: &[&ReplicaSet],
    new_rs: &ReplicaSet,
) -> Result<Option<i32>> {
    let replicas = deployment_replicas(d);
    let current = rs_replicas(new_rs);
    if current == replicas {
        return Ok(None);
    }
    if current > replicas {
        return Ok(Some(replicas));
    }
    let next = new_rs_new_replicas(d, all_rss, new_rs)?;
    Ok((next != current).then_some(next))
}

/// What `reconcileOldReplicaSets` decided.
#[derive(Debug, Default)]
pub struct OldReplicaSetsPlan<'a> {
    /// First step: old ReplicaSets shrunk by their unavailable replicas, oldest first. The
    /// ReplicaSet controller deletes not-ready pods first, so this does not reduce
    /// availability (kubernetes#16737).
    pub cleanup: Vec<ScaleTarget<'a>>,
    /// Second step, applied after the first: old ReplicaSets shrunk while more than
    /// `spec.replicas - maxUnavailable` pods stay available, oldest first. Sizes already
    /// account for the first step.
    pub scale_down: Vec<ScaleTarget<'a>>,
    /// Replicas removed by the first step.
    pub cleanup_count: i32,
    /// Replicas removed by the second step.
    pub scale_down_count: i32,
    /// Set when planning stopped at an inconsistent ReplicaSet; `cleanup` holds the steps
    /// planned before it and `scale_down` is empty. Upstream then reports "not scaled".
    pub aborted: Option<Error>,
}

impl OldReplicaSetsPlan<'_> {
    /// Whether the step scaled anything down (upstream's `scaledDown` result).
    pub fn scaled_down(&self) -> bool {
        self.aborted.is_none() && self.cleanup_count + self.scale_down_count > 0
    }

    /// Every scale in order (cleanup, then scale-down).
    pub fn targets(&self) -> impl Iterator<Item = &ScaleTarget<'_>> {
        self.cleanup.iter().chain(self.scale_down.iter())
    }
}

/// An old ReplicaSet and its size as the plan goes.
#[derive(Clone, Copy)]
struct Sized<'a> {
    rs: &'a ReplicaSet,
    replicas: i32,
}

fn sized_oldest_first<'a>(rss: &[&'a ReplicaSet]) -> Vec<Sized<'a>> {
    let mut sorted: Vec<&'a ReplicaSet> = rss.to_vec();
    sorted.sort_by(|a, b| cmp_by_creation_timestamp(a, b));
    sorted
        .into_iter()
        .map(|rs| Sized {
            rs,
            replicas: rs_replicas(rs),
        })
        .collect()
}

/// Plans the cleanup of unhealthy old replicas; `olds` is updated with the new sizes.
fn plan_cleanup<'a>(
    olds: &mut [Sized<'a>],
    max_cleanup_count: i32,
) -> (Vec<ScaleTarget<'a>>, i32, Option<Error>) {
    let mut targets = Vec::new();
    let mut total = 0;
    for old in olds.iter_mut() {
        if total >= max_cleanup_count {
            break;
        }
        if old.replicas == 0 {
            continue;
        }
        let available = rs_available_replicas(old.rs);
        if old.replicas == available {
            // No unhealthy replicas.
            continue;
        }
        let count = (max_cleanup_count - total).min(old.replicas - available);
        let new_replicas = old.replicas - count;
        if new_replicas > old.replicas {
            let err = Error::InvalidScaleDown {
                phase: "cleaning up unhealthy replicas",
                replica_set: object_key(&old.rs.metadata),
                from: old.replicas,
                to: new_replicas,
            };
            return (targets, total, Some(err));
        }
        targets.push(ScaleTarget {
            rs: old.rs,
            replicas: new_replicas,
        });
        old.replicas = new_replicas;
        total += count;
    }
    (targets, total, None)
}

/// Plans the scale-down of old ReplicaSets down to the availability floor.
fn plan_scale_down<'a>(
    d: &Deployment,
    available: i32,
    olds: &[Sized<'a>],
) -> Result<(Vec<ScaleTarget<'a>>, i32)> {
    let min_available = deployment_replicas(d) - max_unavailable(d);
    if available <= min_available {
        return Ok((Vec::new(), 0));
    }
    let total_scale_down = available - min_available;
    let mut targets = Vec::new();
    let mut total = 0;
    for old in olds {
        if total >= total_scale_down {
            break;
        }
        if old.replicas == 0 {
            continue;
        }
        let count = old.replicas.min(total_scale_down - total);
        let new_replicas = old.replicas - count;
        if new_replicas > old.replicas {
            return Err(Error::InvalidScaleDown {
                phase: "scaling down old RS",
                replica_set: object_key(&old.rs.metadata),
                from: old.replicas,
                to: new_replicas,
            });
        }
        targets.push(ScaleTarget {
            rs: old.rs,
            replicas: new_replicas,
        });
        total += count;
    }
    Ok((targets, total))
}

/// Scale-downs removing up to `max_cleanup_count` unavailable replicas from old ReplicaSets,
/// oldest first, and how many that removes, as upstream `cleanupUnhealthyReplicas`.
pub fn cleanup_unhealthy_replicas<'a>(
    old_rss: &[&'a ReplicaSet],
    max_cleanup_count: i32,
) -> Result<(Vec<ScaleTarget<'a>>, i32)> {
    let mut olds = sized_oldest_first(old_rss);
    match plan_cleanup(&mut olds, max_cleanup_count) {
        (_, _, Some(err)) => Err(err),
        (targets, total, None) => Ok((targets, total)),
    }
}

/// Scale-downs of old ReplicaSets, oldest first, while more than `spec.replicas -
/// maxUnavailable` pods of `all_rss` stay available, and how many that removes, as upstream
/// `scaleDownOldReplicaSetsForRollingUpdate`.
pub fn scale_down_old_replica_sets_for_rolling_update<'a>(
    d: &Deployment,
    all_rss: &[&ReplicaSet],
    old_rss: &[&'a ReplicaSet],
) -> Result<(Vec<ScaleTarget<'a>>, i32)> {
    let available = get_available_replica_count_for_replica_sets(all_rss);
    plan_scale_down(d, available, &sized_oldest_first(old_rss))
}

/// How the old ReplicaSets of a rolling update shrink this step, as upstream
/// `reconcileOldReplicaSets`. `all_rss` holds every ReplicaSet, `old_rss` the *active* old
/// ones, `new_rs` the new one.
///
/// At most `allPods - minAvailable - newRSUnavailable` replicas go: counting the new
/// ReplicaSet's unavailable pods keeps a broken new template from draining the old pods
/// (e.g. 10 replicas, maxUnavailable 2, maxSurge 3, 5 crash-looping new pods: 13 - 8 - 5 = 0).
pub fn reconcile_old_replica_sets<'a>(
    d: &Deployment,
    all_rss: &[&ReplicaSet],
    old_rss: &[&'a ReplicaSet],
    new_rs: &ReplicaSet,
) -> OldReplicaSetsPlan<'a> {
    let mut plan = OldReplicaSetsPlan::default();
    if get_replica_count_for_replica_sets(old_rss) == 0 {
        // Nothing left to scale down.
        return plan;
    }
    let all_pods = get_replica_count_for_replica_sets(all_rss);
    let min_available = deployment_replicas(d) - max_unavailable(d);
    let new_rs_unavailable = rs_replicas(new_rs) - rs_available_replicas(new_rs);
    let max_scaled_down = all_pods - min_available - new_rs_unavailable;
    if max_scaled_down <= 0 {
        return plan;
    }

    let mut olds = sized_oldest_first(old_rss);
    let (cleanup, cleanup_count, aborted) = plan_cleanup(&mut olds, max_scaled_down);
    plan.cleanup = cleanup;
    plan.cleanup_count = cleanup_count;
    if aborted.is_some() {
        plan.aborted = aborted;
        return plan;
    }

    // Upstream recomputes availability over the (cleaned) active old ReplicaSets plus the
    // new one; statuses did not change, so only their available counts matter.
    let mut remaining: Vec<&ReplicaSet> = old_rss.to_vec();
    remaining.push(new_rs);
    let available = get_available_replica_count_for_replica_sets(&remaining);
    match plan_scale_down(d, available, &olds) {
        Ok((targets, count)) => {
            plan.scale_down = targets;
            plan.scale_down_count = count;
        }
        Err(err) => plan.aborted = Some(err),
    }
    plan
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::super::test_support::{deployment_with, rs, with_status};
    use super::*;

    fn int(n: i32) -> IntOrString {
        IntOrString::Int(n)
    }

    #[test]
    fn reconcile_new_replica_set_table() {
        // Upstream TestDeploymentController_reconcileNewReplicaSet (without
        // PodReplacementPolicy): maxUnavailable 0.
        struct Case {
            name: &'static str,
            deployment_replicas: i32,
            max_surge: i32,
            old_replicas: i32,
            new_replicas: i32,
            expected: Option<i32>,
        }
        let cases = [
            Case {
                name: "should not scale up when old replica set is fully saturated",
                deployment_replicas: 10,
                max_surge: 0,
                old_replicas: 10,
                new_replicas: 0,
                expected: None,
            },
            Case {
                name: "should scale up according to the maxSurge when old replica set is fully saturated",
                deployment_replicas: 10,
                max_surge: 2,
                old_replicas: 10,
                new_replicas: 0,
                expected: Some(2),
            },
            Case {
                name: "should scale up according to the maxSurge",
                deployment_replicas: 10,
                max_surge: 2,
                old_replicas: 5,
                new_replicas: 0,
                expected: Some(7),
            },
            Case {
                name: "should not scale when maxSurge is fully saturated",
                deployment_replicas: 10,
                max_surge: 2,
                old_replicas: 10,
                new_replicas: 2,
                expected: None,
            },
            Case {
                name: "should scale down when there are replicas above maxSurge",
                deployment_replicas: 10,
                max_surge: 2,
                old_replicas: 2,
                new_replicas: 11,
                expected: Some(10),
            },
            Case {
                name: "already at the desired size",
                deployment_replicas: 10,
                max_surge: 2,
                old_replicas: 0,
                new_replicas: 10,
                expected: None,
            },
        ];
        for c in cases {
            let new_rs = rs("foo-v2", c.new_replicas);
            let old_rs = rs("foo-v1", c.old_replicas);
            let d = deployment_with("foo", c.deployment_replicas, int(c.max_surge), int(0));
            let got =
                reconcile_new_replica_set(&d, &[&new_rs, &old_rs], &new_rs).expect("no error");
            assert_eq!(got, c.expected, "{}", c.name);
        }
    }

    #[test]
    fn reconcile_old_replica_sets_table() {
        // Upstream TestDeploymentController_reconcileOldReplicaSets (maxSurge 0), checking the
        // resulting old size as well as whether anything was scaled.
        struct Case {
            name: &'static str,
            deployment_replicas: i32,
            max_unavailable: i32,
            old_replicas: i32,
            new_replicas: i32,
            ready_from_old: i32,
            ready_from_new: i32,
            scale_expected: bool,
            expected_old_replicas: i32,
        }
        let cases = [
            Case {
                name: "maxUnavailable 0 (resolves to 1): one old replica goes",
                deployment_replicas: 10,
                max_unavailable: 0,
                old_replicas: 10,
                new_replicas: 0,
                ready_from_old: 10,
                ready_from_new: 0,
                scale_expected: true,
                expected_old_replicas: 9,
            },
            Case {
                name: "maxUnavailable 2: two old replicas go",
                deployment_replicas: 10,
                max_unavailable: 2,
                old_replicas: 10,
                new_replicas: 0,
                ready_from_old: 10,
                ready_from_new: 0,
                scale_expected: true,
                expected_old_replicas: 8,
            },
            Case {
                name: "expect unhealthy replicas from old replica sets been cleaned up",
                deployment_replicas: 10,
                max_unavailable: 2,
                old_replicas: 10,
                new_replicas: 0,
                ready_from_old: 8,
                ready_from_new: 0,
                scale_expected: true,
                expected_old_replicas: 8,
            },
            Case {
                name: "expect 1 unhealthy replica from old replica sets been cleaned up, and 1 ready pod been scaled down",
                deployment_replicas: 10,
                max_unavailable: 2,
                old_replicas: 10,
                new_replicas: 0,
                ready_from_old: 9,
                ready_from_new: 0,
                scale_expected: true,
                expected_old_replicas: 8,
            },
            Case {
                name: "the unavailable pods from the newRS would not make us scale down old RSs in a further step",
                deployment_replicas: 10,
                max_unavailable: 2,
                old_replicas: 8,
                new_replicas: 2,
                ready_from_old: 8,
                ready_from_new: 0,
                scale_expected: false,
                expected_old_replicas: 8,
            },
        ];
        for c in cases {
            let new_rs = with_status(
                rs("foo-new", c.new_replicas),
                c.new_replicas,
                c.ready_from_new,
            );
            let old_rs = with_status(
                rs("foo-old", c.old_replicas),
                c.old_replicas,
                c.ready_from_old,
            );
            let d = deployment_with("foo", c.deployment_replicas, int(0), int(c.max_unavailable));
            let plan = reconcile_old_replica_sets(&d, &[&old_rs, &new_rs], &[&old_rs], &new_rs);
            assert!(plan.aborted.is_none(), "{}", c.name);
            assert_eq!(plan.scaled_down(), c.scale_expected, "{}", c.name);
            let final_size = plan.targets().last().map_or(c.old_replicas, |t| t.replicas);
            assert_eq!(final_size, c.expected_old_replicas, "{}", c.name);
        }
    }

    #[test]
    fn reconcile_old_replica_sets_splits_cleanup_and_scale_down() {
        // 1 unhealthy replica cleaned up first (10 -> 9), then 1 available one (9 -> 8).
        let d = deployment_with("foo", 10, int(0), int(2));
        let new_rs = with_status(rs("foo-new", 0), 0, 0);
        let old_rs = with_status(rs("foo-old", 10), 10, 9);
        let plan = reconcile_old_replica_sets(&d, &[&old_rs, &new_rs], &[&old_rs], &new_rs);
        assert_eq!(
            plan.cleanup,
            vec![ScaleTarget {
                rs: &old_rs,
                replicas: 9
            }]
        );
        assert_eq!(
            plan.scale_down,
            vec![ScaleTarget {
                rs: &old_rs,
                replicas: 8
            }]
        );
        assert_eq!((plan.cleanup_count, plan.scale_down_count), (1, 1));
    }

    #[test]
    fn reconcile_old_replica_sets_oldest_first_across_replica_sets() {
        use super::super::test_support::{rs_at, ts};
        // 10 replicas, maxUnavailable 3, all old pods available, new RS at 0: 3 may go, all
        // from the oldest ReplicaSet first.
        let d = deployment_with("foo", 10, int(0), int(3));
        let older = with_status(rs_at("foo-v1", 2, ts(2020, 1, 1, 0, 0, 0)), 2, 2);
        let old = with_status(rs_at("foo-v2", 8, ts(2020, 1, 1, 1, 0, 0)), 8, 8);
        let new_rs = with_status(rs_at("foo-v3", 0, ts(2020, 1, 1, 2, 0, 0)), 0, 0);
        let plan =
            reconcile_old_replica_sets(&d, &[&old, &older, &new_rs], &[&old, &older], &new_rs);
        assert_eq!(
            plan.scale_down,
            vec![
                ScaleTarget {
                    rs: &older,
                    replicas: 0
                },
                ScaleTarget {
                    rs: &old,
                    replicas: 7
                }
            ]
        );
    }

    #[test]
    fn reconcile_old_replica_sets_stops_on_a_stale_status() {
        // Status claims 8 available out of a spec of 5: upstream refuses to "scale down" to 8.
        let d = deployment_with("foo", 10, int(0), int(2));
        let new_rs = with_status(rs("foo-new", 5), 5, 5);
        let old_rs = with_status(rs("foo-old", 5), 8, 8);
        let plan = reconcile_old_replica_sets(&d, &[&old_rs, &new_rs], &[&old_rs], &new_rs);
        assert!(matches!(
            plan.aborted,
            Some(Error::InvalidScaleDown { from: 5, to: 8, .. })
        ));
        assert!(!plan.scaled_down());
        assert!(plan.scale_down.is_empty());
    }

    #[test]
    fn cleanup_unhealthy_replicas_table() {
        // Upstream TestDeploymentController_cleanupUnhealthyReplicas.
        struct Case {
            name: &'static str,
            old_replicas: i32,
            ready_pods: i32,
            max_cleanup_count: i32,
            cleanup_count_expected: i32,
        }
        let cases = [
            Case {
                name: "cleanup bounded by max",
                old_replicas: 10,
                ready_pods: 8,
                max_cleanup_count: 1,
                cleanup_count_expected: 1,
            },
            Case {
                name: "cleanup all unhealthy",
                old_replicas: 10,
                ready_pods: 8,
                max_cleanup_count: 3,
                cleanup_count_expected: 2,
            },
            Case {
                name: "no budget",
                old_replicas: 10,
                ready_pods: 8,
                max_cleanup_count: 0,
                cleanup_count_expected: 0,
            },
            Case {
                name: "nothing unhealthy",
                old_replicas: 10,
                ready_pods: 10,
                max_cleanup_count: 3,
                cleanup_count_expected: 0,
            },
        ];
        for c in cases {
            let old_rs = with_status(rs("foo-v2", c.old_replicas), c.old_replicas, c.ready_pods);
            let (targets, count) =
                cleanup_unhealthy_replicas(&[&old_rs], c.max_cleanup_count).expect("no error");
            assert_eq!(count, c.cleanup_count_expected, "{}", c.name);
            assert_eq!(targets.len(), usize::from(count > 0), "{}", c.name);
            if let Some(t) = targets.first() {
                assert_eq!(t.replicas, c.old_replicas - count, "{}", c.name);
            }
        }
    }

    #[test]
    fn scale_down_old_replica_sets_for_rolling_update_table() {
        // Upstream TestDeploymentController_scaleDownOldReplicaSetsForRollingUpdate (maxSurge 0).
        struct Case {
            name: &'static str,
            deployment_replicas: i32,
            max_unavailable: i32,
            ready_pods: i32,
            old_replicas: i32,
            expected: Option<i32>,
        }
        let cases = [
            Case {
                name: "maxUnavailable 0 resolves to 1",
                deployment_replicas: 10,
                max_unavailable: 0,
                ready_pods: 10,
                old_replicas: 10,
                expected: Some(9),
            },
            Case {
                name: "maxUnavailable 2",
                deployment_replicas: 10,
                max_unavailable: 2,
                ready_pods: 10,
                old_replicas: 10,
                expected: Some(8),
            },
            Case {
                name: "at the availability floor",
                deployment_replicas: 10,
                max_unavailable: 2,
                ready_pods: 8,
                old_replicas: 10,
                expected: None,
            },
            Case {
                name: "old replica set already empty",
                deployment_replicas: 10,
                max_unavailable: 2,
                ready_pods: 10,
                old_replicas: 0,
                expected: None,
            },
            Case {
                name: "below the availability floor",
                deployment_replicas: 10,
                max_unavailable: 2,
                ready_pods: 1,
                old_replicas: 10,
                expected: None,
            },
        ];
        for c in cases {
            let old_rs = with_status(rs("foo-v2", c.old_replicas), c.old_replicas, c.ready_pods);
            let d = deployment_with("foo", c.deployment_replicas, int(0), int(c.max_unavailable));
            let (targets, count) =
                scale_down_old_replica_sets_for_rolling_update(&d, &[&old_rs], &[&old_rs])
                    .expect("no error");
            assert_eq!(
                targets.first().map(|t| t.replicas),
                c.expected,
                "{}",
                c.name
            );
            assert_eq!(count > 0, c.expected.is_some(), "{}", c.name);
        }
    }
}
