//! Scaling a Deployment: detecting scaling events, and spreading a change of `spec.replicas`
//! across the active ReplicaSets in proportion to their size, as upstream `sync.go`'s `scale`,
//! `scaleReplicaSet` and `deploymentutil.GetReplicaSetProportion`.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::accessors::{
    deployment_replicas, name, rs_available_replicas, rs_replicas, set_rs_replicas,
};
use super::annotations::{
    DESIRED_REPLICAS_ANNOTATION, desired_replicas_annotation, max_replicas_annotation,
    replicas_annotations_need_update, set_replicas_annotations,
};
use super::counts::{filter_active_replica_sets, get_replica_count_for_replica_sets};
use super::find::find_active_or_latest;
use super::sort::{sort_by_size_newer, sort_by_size_older};
use super::strategy::{is_rolling_update, max_surge};

/// A ReplicaSet and the size the controller should give it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleTarget<'a> {
    /// The ReplicaSet as read from the cache.
    pub rs: &'a ReplicaSet,
    /// Its new `spec.replicas`.
    pub replicas: i32,
}

impl ScaleTarget<'_> {
    /// The ReplicaSet's current `spec.replicas`.
    pub fn from(&self) -> i32 {
        rs_replicas(self.rs)
    }
}

/// The message of the `ScalingReplicaSet` event recorded when a ReplicaSet's size changes
/// from `from` to `to`: `Scaled up replica set web-5d9 from 1 to 3`.
pub fn scaling_event_message(rs_name: &str, from: i32, to: i32) -> String {
    let op = if from < to { "up" } else { "down" };
    format!("Scaled {op} replica set {rs_name} from {from} to {to}")
}

/// The ReplicaSet `scaleReplicaSet` would write to give `rs` `new_scale` replicas: the new size
/// plus up-to-date `desired-replicas`/`max-replicas` annotations; `None` when neither changes.
pub fn scaled_replica_set(d: &Deployment, rs: &ReplicaSet, new_scale: i32) -> Option<ReplicaSet> {
    let replicas = deployment_replicas(d);
    let max = replicas.saturating_add(max_surge(d));
    let size_needs_update = rs_replicas(rs) != new_scale;
    if !size_needs_update && !replicas_annotations_need_update(rs, replicas, max) {
        return None;
    }
    let mut copy = rs.clone();
    set_replicas_annotations(&mut copy, replicas, max);
    set_rs_replicas(&mut copy, new_scale);
    Some(copy)
}

/// Whether the Deployment was scaled since its active ReplicaSets were last sized: some
/// active ReplicaSet's `desired-replicas` annotation differs from `spec.replicas`, as
/// upstream `isScalingEvent`. `all_rss` holds the old and new ReplicaSets.
pub fn is_scaling_event(d: &Deployment, all_rss: &[&ReplicaSet]) -> bool {
    let replicas = deployment_replicas(d);
    filter_active_replica_sets(all_rss)
        .iter()
        .filter_map(|rs| desired_replicas_annotation(rs))
        .any(|desired| desired != replicas)
}

/// How many replicas `rs` should gain (negative: lose) so that it keeps its share of the
/// Deployment when it scales to `spec.replicas + maxSurge`, measured against the
/// `max-replicas` annotation (the size the ReplicaSet was last scaled for), as upstream
/// `getReplicaSetFraction`.
pub fn get_replica_set_fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    let replicas = deployment_replicas(d);
    // Scaling to zero: the whole ReplicaSet goes.
    if replicas == 0 {
        return -rs_replicas(rs);
    }
    let deployment_max_replicas = i64::from(replicas) + i64::from(max_surge(d));
    let mut before = max_replicas_annotation(rs).unwrap_or(0);
    if before == 0 {
        // A missing, invalid or zero annotation (tampered with by someone else): fall back to
        // the current size. Not an accurate proportion if other ReplicaSets still carry the
        // annotation, but the min/max in get_proportion keeps the result in bounds.
        before = d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        if before == 0 {
            // No annotation and no pods: nothing to be proportional to.
            return 0;
        }
    }
    let size = rs_replicas(rs);
    let new_size = (i64::from(size) * deployment_max_replicas) as f64 / f64::from(before);
    (new_size.round() as i32).saturating_sub(size)
}

/// The share of `to_add` replicas (negative: to remove) `rs` gets, given `added` were already
/// handed out, never overshooting what is left, as upstream `GetReplicaSetProportion`.
pub fn get_proportion(rs: Option<&ReplicaSet>, d: &Deployment, to_add: i32, added: i32) -> i32 {
    let Some(rs) = rs else {
        return 0;
    };
    if rs_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = get_replica_set_fraction(rs, d);
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// What `scale` decided.
#[derive(Debug, Clone, PartialEq)]
pub enum ScalePlan<'a> {
    /// Every ReplicaSet already has the right size.
    Nothing,
    /// Scale each ReplicaSet as `scaleReplicaSetAndRecordEvent` does: skip it if its size is
    /// unchanged, otherwise write [`scaled_replica_set`] and record an event whose direction
    /// follows from the sizes.
    Each(Vec<ScaleTarget<'a>>),
    /// Proportional scaling: write every active ReplicaSet, in this order, as
    /// `scaleReplicaSet` does ([`scaled_replica_set`]; skipped when neither size nor
    /// annotations change; an event for each size change). The first one absorbed the
    /// rounding leftovers.
    Proportional(Vec<ScaleTarget<'a>>),
}

impl ScalePlan<'_> {
    /// The planned sizes by ReplicaSet name (for logs and tests).
    pub fn sizes(&self) -> Vec<(&str, i32)> {
        match self {
            ScalePlan::Nothing => Vec::new(),
            ScalePlan::Each(targets) | ScalePlan::Proportional(targets) => targets
                .iter()
                .map(|t| (name(&t.rs.metadata), t.replicas))
                .collect(),
        }
    }
}

/// Scales a Deployment on a scaling event or while paused, as upstream `scale`:
///
/// - with at most one active ReplicaSet, that one (or the new one, or the newest) gets all
///   of `spec.replicas`;
/// - with a saturated new ReplicaSet, the active old ones go to zero;
/// - otherwise, for `RollingUpdate`, `spec.replicas + maxSurge` minus the current total is
///   spread over the active ReplicaSets in proportion to their size, largest first (ties: the
///   newer first when adding, the older first when removing), the largest taking the leftover.
///
/// Proportional scaling avoids speeding a rollout up or down by accident: a scale-up only
/// growing the new ReplicaSet would raise the share of possibly broken pods.
pub fn scale<'a>(
    d: &Deployment,
    new_rs: Option<&'a ReplicaSet>,
    old_rss: &[&'a ReplicaSet],
) -> ScalePlan<'a> {
    let replicas = deployment_replicas(d);
    if let Some(rs) = find_active_or_latest(new_rs, old_rss) {
        if rs_replicas(rs) == replicas {
            return ScalePlan::Nothing;
        }
        return ScalePlan::Each(vec![ScaleTarget { rs, replicas }]);
    }

    // A saturated new ReplicaSet (e.g. after adopting ReplicaSets mid-rollout) owns all pods.
    if is_saturated(d, new_rs) {
        let targets: Vec<ScaleTarget<'a>> = filter_active_replica_sets(old_rss)
            .into_iter()
            .map(|rs| ScaleTarget { rs, replicas: 0 })
            .collect();
        return if targets.is_empty() {
            ScalePlan::Nothing
        } else {
            ScalePlan::Each(targets)
        };
    }

    if !is_rolling_update(d) {
        return ScalePlan::Nothing;
    }

    let mut all: Vec<&'a ReplicaSet> = old_rss.to_vec();
    all.extend(new_rs);
    let mut active = filter_active_replica_sets(&all);
    let current = get_replica_count_for_replica_sets(&active);
    let allowed = if replicas > 0 {
        replicas.saturating_add(max_surge(d))
    } else {
        0
    };
    let to_add = allowed - current;
    // Same-size ReplicaSets: grow the newer ones first, shrink the older ones first.
    match to_add.cmp(&0) {
        std::cmp::Ordering::Greater => sort_by_size_newer(&mut active),
        std::cmp::Ordering::Less => sort_by_size_older(&mut active),
        std::cmp::Ordering::Equal => {}
    }

    // |added| never exceeds |to_add|.
    let mut added = 0;
    let mut targets: Vec<ScaleTarget<'a>> = active
        .iter()
        .map(|&rs| {
            let mut size = rs_replicas(rs);
            if to_add != 0 {
                let proportion = get_proportion(Some(rs), d, to_add, added);
                size += proportion;
                added += proportion;
            }
            ScaleTarget { rs, replicas: size }
        })
        .collect();
    // The largest ReplicaSet takes what rounding left over.
    if let Some(first) = targets.first_mut().filter(|_| to_add != 0) {
        first.replicas = (first.replicas + to_add - added).max(0);
    }
    ScalePlan::Proportional(targets)
}

/// Whether `rs` holds all of the Deployment's pods: its size and its `desired-replicas`
/// annotation both equal `spec.replicas` and all of them are available, as upstream
/// `IsSaturated`.
pub fn is_saturated(d: &Deployment, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else {
        return false;
    };
    let desired = rs
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DESIRED_REPLICAS_ANNOTATION))
        .and_then(|v| v.parse::<i32>().ok());
    let Some(desired) = desired else {
        return false;
    };
    let replicas = deployment_replicas(d);
    rs_replicas(rs) == replicas && desired == replicas && rs_available_replicas(rs) == replicas
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::DeploymentStatus;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::super::accessors::annotation;
    use super::super::annotations::{DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION};
    use super::super::test_support::{
        deployment, deployment_with, rs, rs_at, ts, with_annotations, with_status,
    };
    use super::*;

    fn surge(n: i32) -> IntOrString {
        IntOrString::Int(n)
    }

    #[test]
    fn scale_table() {
        // Upstream TestScale (the cases without PodReplacementPolicy). Every ReplicaSet without
        // annotations gets desired/max annotations from `old` (the Deployment before scaling).
        let new_ts = ts(2016, 5, 20, 2, 0, 0);
        let old_ts = ts(2016, 5, 20, 1, 0, 0);
        let older_ts = ts(2016, 5, 20, 0, 0, 0);
        let updated_template = |replicas| {
            let mut d = deployment("foo", replicas);
            if let Some(labels) = d
                .spec
                .as_mut()
                .and_then(|s| s.template.metadata.as_mut())
                .and_then(|m| m.labels.as_mut())
            {
                labels.insert("another".into(), "label".into());
            }
            d
        };
        struct Case {
            name: &'static str,
            deployment: Deployment,
            old: Deployment,
            new_rs: Option<ReplicaSet>,
            old_rss: Vec<ReplicaSet>,
            expected_new: Option<i32>,
            expected_old: Vec<i32>,
            desired_annotations: &'static [(&'static str, i32)],
        }
        let d = |replicas| deployment("foo", replicas);
        let ds = |replicas, s| deployment_with("foo", replicas, surge(s), IntOrString::Int(0));
        let cases = vec![
            Case {
                name: "normal scaling event: 10 -> 12",
                deployment: d(12),
                old: d(10),
                new_rs: Some(rs_at("foo-v1", 10, new_ts)),
                old_rss: vec![],
                expected_new: Some(12),
                expected_old: vec![],
                desired_annotations: &[],
            },
            Case {
                name: "normal scaling event: 10 -> 5",
                deployment: d(5),
                old: d(10),
                new_rs: Some(rs_at("foo-v1", 10, new_ts)),
                old_rss: vec![],
                expected_new: Some(5),
                expected_old: vec![],
                desired_annotations: &[],
            },
            Case {
                name: "proportional scaling: 5 -> 10",
                deployment: d(10),
                old: d(5),
                new_rs: Some(rs_at("foo-v2", 2, new_ts)),
                old_rss: vec![rs_at("foo-v1", 3, old_ts)],
                expected_new: Some(4),
                expected_old: vec![6],
                desired_annotations: &[],
            },
            Case {
                name: "proportional scaling: 5 -> 3",
                deployment: d(3),
                old: d(5),
                new_rs: Some(rs_at("foo-v2", 2, new_ts)),
                old_rss: vec![rs_at("foo-v1", 3, old_ts)],
                expected_new: Some(1),
                expected_old: vec![2],
                desired_annotations: &[],
            },
            Case {
                name: "proportional scaling: 9 -> 4",
                deployment: d(4),
                old: d(9),
                new_rs: Some(rs_at("foo-v2", 8, new_ts)),
                old_rss: vec![rs_at("foo-v1", 1, old_ts)],
                expected_new: Some(4),
                expected_old: vec![0],
                desired_annotations: &[],
            },
            Case {
                name: "proportional scaling: 7 -> 10",
                deployment: d(10),
                old: d(7),
                new_rs: Some(rs_at("foo-v3", 2, new_ts)),
                old_rss: vec![rs_at("foo-v2", 3, old_ts), rs_at("foo-v1", 2, older_ts)],
                expected_new: Some(3),
                expected_old: vec![4, 3],
                desired_annotations: &[],
            },
            Case {
                name: "proportional scaling: 13 -> 8",
                deployment: d(8),
                old: d(13),
                new_rs: Some(rs_at("foo-v3", 2, new_ts)),
                old_rss: vec![rs_at("foo-v2", 8, old_ts), rs_at("foo-v1", 3, older_ts)],
                expected_new: Some(1),
                expected_old: vec![5, 2],
                desired_annotations: &[],
            },
            Case {
                name: "leftover distribution: 3 -> 4",
                deployment: d(4),
                old: d(3),
                new_rs: Some(rs_at("foo-v3", 1, new_ts)),
                old_rss: vec![rs_at("foo-v2", 1, old_ts), rs_at("foo-v1", 1, older_ts)],
                expected_new: Some(2),
                expected_old: vec![1, 1],
                desired_annotations: &[],
            },
            Case {
                name: "leftover distribution: 3 -> 2",
                deployment: d(2),
                old: d(3),
                new_rs: Some(rs_at("foo-v3", 1, new_ts)),
                old_rss: vec![rs_at("foo-v2", 1, old_ts), rs_at("foo-v1", 1, older_ts)],
                expected_new: Some(1),
                expected_old: vec![1, 0],
                desired_annotations: &[],
            },
            Case {
                name: "proportional scaling (no new rs): 4 -> 5",
                deployment: d(5),
                old: d(4),
                new_rs: None,
                old_rss: vec![rs_at("foo-v2", 2, old_ts), rs_at("foo-v1", 2, older_ts)],
                expected_new: None,
                expected_old: vec![3, 2],
                desired_annotations: &[],
            },
            Case {
                name: "proportional scaling: 6 -> 0",
                deployment: d(0),
                old: d(6),
                new_rs: Some(rs_at("foo-v3", 3, new_ts)),
                old_rss: vec![rs_at("foo-v2", 2, old_ts), rs_at("foo-v1", 1, older_ts)],
                expected_new: Some(0),
                expected_old: vec![0, 0],
                desired_annotations: &[],
            },
            Case {
                name: "proportional scaling: 0 -> 6",
                deployment: d(6),
                old: d(6),
                new_rs: Some(rs_at("foo-v3", 0, new_ts)),
                old_rss: vec![rs_at("foo-v2", 0, old_ts), rs_at("foo-v1", 0, older_ts)],
                expected_new: Some(6),
                expected_old: vec![0, 0],
                desired_annotations: &[],
            },
            Case {
                name: "failed rs update",
                deployment: d(5),
                old: d(5),
                new_rs: Some(rs_at("foo-v3", 2, new_ts)),
                old_rss: vec![rs_at("foo-v2", 1, old_ts), rs_at("foo-v1", 1, older_ts)],
                expected_new: Some(2),
                expected_old: vec![2, 1],
                desired_annotations: &[("foo-v2", 3)],
            },
            Case {
                name: "deployment with surge pods",
                deployment: ds(20, 2),
                old: ds(10, 2),
                new_rs: Some(rs_at("foo-v2", 6, new_ts)),
                old_rss: vec![rs_at("foo-v1", 6, old_ts)],
                expected_new: Some(11),
                expected_old: vec![11],
                desired_annotations: &[],
            },
            Case {
                name: "change both surge and size",
                deployment: ds(50, 6),
                old: ds(10, 3),
                new_rs: Some(rs_at("foo-v2", 5, new_ts)),
                old_rss: vec![rs_at("foo-v1", 8, old_ts)],
                expected_new: Some(22),
                expected_old: vec![34],
                desired_annotations: &[],
            },
            Case {
                name: "change both size and template",
                deployment: updated_template(14),
                old: d(10),
                new_rs: None,
                old_rss: vec![rs_at("foo-v2", 7, new_ts), rs_at("foo-v1", 3, old_ts)],
                expected_new: None,
                expected_old: vec![10, 4],
                desired_annotations: &[],
            },
            Case {
                name: "saturated but broken new replica set does not affect old pods",
                deployment: deployment_with("foo", 2, surge(1), IntOrString::Int(1)),
                old: deployment_with("foo", 2, surge(1), IntOrString::Int(1)),
                new_rs: Some(with_status(rs_at("foo-v2", 2, new_ts), 2, 0)),
                old_rss: vec![rs_at("foo-v1", 1, old_ts)],
                expected_new: Some(2),
                expected_old: vec![1],
                desired_annotations: &[],
            },
        ];
        for c in cases {
            let annotate = |r: ReplicaSet| -> ReplicaSet {
                let r_name = name(&r.metadata).to_owned();
                let desired = c
                    .desired_annotations
                    .iter()
                    .find(|(n, _)| *n == r_name)
                    .map_or(deployment_replicas(&c.old), |(_, v)| *v);
                let mut r = r;
                set_replicas_annotations(&mut r, desired, desired + max_surge(&c.old));
                r
            };
            let new_rs = c.new_rs.map(annotate);
            let old_rss: Vec<ReplicaSet> = c.old_rss.into_iter().map(annotate).collect();
            let old_refs: Vec<&ReplicaSet> = old_rss.iter().collect();
            let plan = scale(&c.deployment, new_rs.as_ref(), &old_refs);
            let sizes = plan.sizes();
            let size_of = |r: &ReplicaSet| {
                sizes
                    .iter()
                    .find(|(n, _)| *n == name(&r.metadata))
                    .map_or(rs_replicas(r), |(_, s)| *s)
            };
            if let (Some(want), Some(r)) = (c.expected_new, new_rs.as_ref()) {
                assert_eq!(size_of(r), want, "{}: new replicas", c.name);
            }
            let got_old: Vec<i32> = old_rss.iter().map(size_of).collect();
            assert_eq!(got_old, c.expected_old, "{}: old replicas", c.name);
        }
    }

    #[test]
    fn scale_plan_shapes() {
        let t = |h| ts(2016, 5, 20, h, 0, 0);
        // Single active ReplicaSet at the right size: nothing to do.
        let d = deployment("foo", 3);
        let only = rs_at("foo-v1", 3, t(1));
        assert_eq!(scale(&d, Some(&only), &[]), ScalePlan::Nothing);
        // Saturated new ReplicaSet: every active old one to zero, one by one.
        let new = with_status(
            with_annotations(
                rs_at("foo-v2", 3, t(2)),
                &[(DESIRED_REPLICAS_ANNOTATION, "3")],
            ),
            3,
            3,
        );
        let old_a = rs_at("foo-v1", 1, t(1));
        let old_b = rs_at("foo-v0", 0, t(0));
        let plan = scale(&d, Some(&new), &[&old_a, &old_b]);
        assert_eq!(
            plan,
            ScalePlan::Each(vec![ScaleTarget {
                rs: &old_a,
                replicas: 0
            }])
        );
        // Recreate with several active ReplicaSets: upstream leaves them alone.
        let mut recreate = deployment("foo", 5);
        if let Some(s) = recreate.spec.as_mut().and_then(|s| s.strategy.as_mut()) {
            s.type_ = Some("Recreate".into());
            s.rolling_update = None;
        }
        let a = rs_at("foo-v2", 2, t(2));
        let b = rs_at("foo-v1", 2, t(1));
        assert_eq!(scale(&recreate, Some(&a), &[&b]), ScalePlan::Nothing);
        // Proportional without max-replicas annotations or status: no fractions, so the
        // leftover goes to the first one, the newer of two equal ReplicaSets.
        let plan = scale(&deployment("foo", 6), Some(&a), &[&b]);
        assert_eq!(plan.sizes(), [("foo-v2", 4), ("foo-v1", 2)]);
    }

    #[test]
    fn replica_set_fraction_table() {
        // Upstream TestGetReplicaSetFraction.
        struct Case {
            name: &'static str,
            deployment_replicas: i32,
            deployment_status_replicas: i32,
            deployment_max_surge: i32,
            rs_replicas: i32,
            max_replicas_annotation: Option<&'static str>,
            expected: i32,
        }
        let cases = [
            Case {
                name: "empty deployment always scales to 0",
                deployment_replicas: 0,
                deployment_status_replicas: 0,
                deployment_max_surge: 0,
                rs_replicas: 10,
                max_replicas_annotation: None,
                expected: -10,
            },
            Case {
                name: "unsynced deployment does not scale when max-replicas annotation is missing (removed by a 3rd party)",
                deployment_replicas: 10,
                deployment_status_replicas: 0,
                deployment_max_surge: 0,
                rs_replicas: 5,
                max_replicas_annotation: None,
                expected: 0,
            },
            Case {
                name: "unsynced deployment does not scale when max-replicas annotation is incorrectly set to 0 (by a 3rd party)",
                deployment_replicas: 10,
                deployment_status_replicas: 0,
                deployment_max_surge: 0,
                rs_replicas: 5,
                max_replicas_annotation: Some("0"),
                expected: 0,
            },
            Case {
                name: "scale up by 1/5 should increase RS replicas by 1/5 when max-replicas annotation is missing (removed by a 3rd party)",
                deployment_replicas: 120,
                deployment_status_replicas: 100,
                deployment_max_surge: 0,
                rs_replicas: 50,
                max_replicas_annotation: None,
                expected: 10,
            },
            Case {
                name: "scale up by 1/5 should increase RS replicas by 1/5 when max-replicas annotation is incorrectly set to 0 (by a 3rd party)",
                deployment_replicas: 120,
                deployment_status_replicas: 100,
                deployment_max_surge: 0,
                rs_replicas: 50,
                max_replicas_annotation: Some("0"),
                expected: 10,
            },
            Case {
                name: "scale up by 1/5 should increase RS replicas by 1/5",
                deployment_replicas: 120,
                deployment_status_replicas: 0,
                deployment_max_surge: 0,
                rs_replicas: 50,
                max_replicas_annotation: Some("100"),
                expected: 10,
            },
            Case {
                name: "scale up with maxSurge by 1/5 should increase RS replicas approximately by 1/5",
                deployment_replicas: 120,
                deployment_status_replicas: 0,
                deployment_max_surge: 10,
                rs_replicas: 50,
                max_replicas_annotation: Some("110"),
                expected: 9,
            },
            Case {
                name: "scale down by 1/6 should decrease RS replicas by 1/6",
                deployment_replicas: 10,
                deployment_status_replicas: 0,
                deployment_max_surge: 0,
                rs_replicas: 6,
                max_replicas_annotation: Some("12"),
                expected: -1,
            },
            Case {
                name: "scale down with maxSurge by 1/6 should decrease RS replicas approximately by 1/6",
                deployment_replicas: 100,
                deployment_status_replicas: 0,
                deployment_max_surge: 10,
                rs_replicas: 50,
                max_replicas_annotation: Some("130"),
                expected: -8,
            },
            Case {
                name: "garbage annotation falls back to the status",
                deployment_replicas: 120,
                deployment_status_replicas: 100,
                deployment_max_surge: 0,
                rs_replicas: 50,
                max_replicas_annotation: Some("lots"),
                expected: 10,
            },
        ];
        for c in cases {
            let mut d = deployment_with(
                "nginx",
                c.deployment_replicas,
                surge(c.deployment_max_surge),
                IntOrString::Int(1),
            );
            d.status = Some(DeploymentStatus {
                replicas: Some(c.deployment_status_replicas),
                ..Default::default()
            });
            let mut r = rs("nginx-1", c.rs_replicas);
            if let Some(v) = c.max_replicas_annotation {
                r = with_annotations(r, &[(MAX_REPLICAS_ANNOTATION, v)]);
            }
            assert_eq!(get_replica_set_fraction(&r, &d), c.expected, "{}", c.name);
        }
    }

    #[test]
    fn proportion_is_bounded_by_what_is_left() {
        let d = deployment("foo", 20);
        let r = with_annotations(rs("foo-1", 5), &[(MAX_REPLICAS_ANNOTATION, "10")]);
        // Fraction is +5; only 3 left to add.
        assert_eq!(get_proportion(Some(&r), &d, 8, 5), 3);
        assert_eq!(get_proportion(Some(&r), &d, 8, 0), 5);
        assert_eq!(get_proportion(Some(&r), &d, 8, 8), 0);
        assert_eq!(get_proportion(None, &d, 8, 0), 0);
        assert_eq!(get_proportion(Some(&rs("empty", 0)), &d, 8, 0), 0);
        let shrink = deployment("foo", 5);
        // Fraction is -2 (5 * 5 / 10 = 2.5 rounds away from zero to 3); only 1 left to remove.
        assert_eq!(get_proportion(Some(&r), &shrink, -5, 0), -2);
        assert_eq!(get_proportion(Some(&r), &shrink, -5, -4), -1);
    }

    #[test]
    fn scaling_event_detection() {
        struct Case {
            name: &'static str,
            annotations: Vec<(i32, Option<&'static str>)>,
            expected: bool,
        }
        let cases = [
            Case {
                name: "all annotations match",
                annotations: vec![(2, Some("5")), (3, Some("5"))],
                expected: false,
            },
            Case {
                name: "one active replica set was sized for another replica count",
                annotations: vec![(2, Some("5")), (3, Some("4"))],
                expected: true,
            },
            Case {
                name: "inactive replica sets do not count",
                annotations: vec![(5, Some("5")), (0, Some("3"))],
                expected: false,
            },
            Case {
                name: "missing annotations do not count",
                annotations: vec![(5, None)],
                expected: false,
            },
        ];
        for c in cases {
            let owned: Vec<ReplicaSet> = c
                .annotations
                .iter()
                .enumerate()
                .map(|(i, (replicas, desired))| {
                    let r = rs(&format!("foo-{i}"), *replicas);
                    match desired {
                        Some(v) => with_annotations(r, &[(DESIRED_REPLICAS_ANNOTATION, v)]),
                        None => r,
                    }
                })
                .collect();
            let refs: Vec<&ReplicaSet> = owned.iter().collect();
            assert_eq!(
                is_scaling_event(&deployment("foo", 5), &refs),
                c.expected,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn scaled_replica_set_writes_size_and_annotations() {
        let d = deployment_with("foo", 10, surge(3), IntOrString::Int(0));
        let r = rs("foo-abc", 4);
        let scaled = scaled_replica_set(&d, &r, 6).expect("needs an update");
        assert_eq!(rs_replicas(&scaled), 6);
        assert_eq!(
            annotation(&scaled.metadata, DESIRED_REPLICAS_ANNOTATION),
            Some("10")
        );
        assert_eq!(
            annotation(&scaled.metadata, MAX_REPLICAS_ANNOTATION),
            Some("13")
        );
        // Same size but stale annotations still needs a write.
        assert!(scaled_replica_set(&d, &r, 4).is_some());
        // Nothing to change.
        assert!(scaled_replica_set(&d, &scaled, 6).is_none());
    }

    #[test]
    fn event_messages() {
        assert_eq!(
            scaling_event_message("web-5d9", 1, 3),
            "Scaled up replica set web-5d9 from 1 to 3"
        );
        assert_eq!(
            scaling_event_message("web-5d9", 3, 0),
            "Scaled down replica set web-5d9 from 3 to 0"
        );
    }

    #[test]
    fn is_saturated_table() {
        struct Case {
            name: &'static str,
            rs: Option<ReplicaSet>,
            expected: bool,
        }
        let annotated = |replicas: i32, desired: &str, available: i32| {
            with_status(
                with_annotations(
                    rs("foo", replicas),
                    &[(DESIRED_REPLICAS_ANNOTATION, desired)],
                ),
                replicas,
                available,
            )
        };
        let cases = [
            Case {
                name: "no replica set",
                rs: None,
                expected: false,
            },
            Case {
                name: "saturated",
                rs: Some(annotated(1, "1", 1)),
                expected: true,
            },
            Case {
                name: "not all available",
                rs: Some(annotated(1, "1", 0)),
                expected: false,
            },
            Case {
                name: "desired annotation differs",
                rs: Some(annotated(1, "2", 1)),
                expected: false,
            },
            Case {
                name: "unparsable desired annotation",
                rs: Some(annotated(1, "x", 1)),
                expected: false,
            },
            Case {
                name: "no annotation",
                rs: Some(with_status(rs("foo", 1), 1, 1)),
                expected: false,
            },
        ];
        let d = deployment("nginx", 1);
        for c in cases {
            assert_eq!(is_saturated(&d, c.rs.as_ref()), c.expected, "{}", c.name);
        }
        // Upstream TestAnnotationUtils/IsSaturated: annotations set by set_replicas_annotations.
        let mut r = with_status(rs("foo", 1), 1, 1);
        set_replicas_annotations(&mut r, 1, 2);
        assert!(is_saturated(&d, Some(&r)));
    }
}
