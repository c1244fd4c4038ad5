//! Rollout progress: complete, progressing or timed out, the `Progressing` condition
//! transitions of `syncRolloutStatus`, paused/resumed conditions, and when to re-check a
//! stuck rollout, as upstream `progress.go` and the matching `deploymentutil` helpers.
//!
//! Time is always passed in (`now`); nothing here reads the clock.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};

use super::accessors::{
    deployment_replicas, generation, is_paused, name, progress_deadline_seconds,
};
use super::conditions::{
    CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN, DEPLOYMENT_PROGRESSING,
    DEPLOYMENT_REPLICA_FAILURE, NEW_RS_AVAILABLE_REASON, PAUSED_DEPLOY_REASON,
    REPLICA_SET_REPLICA_FAILURE, REPLICA_SET_UPDATED_REASON, RESUMED_DEPLOY_REASON,
    TIMED_OUT_REASON, get_condition_of, get_deployment_condition, new_deployment_condition, reason,
    remove_deployment_condition, replica_set_to_deployment_condition, set_deployment_condition,
};
use super::status::{calculate_status, counter};
use super::strategy::has_progress_deadline;

/// Whether the rollout is done: every desired replica is updated and available, no old pods
/// remain, and the status describes the current generation, as upstream `DeploymentComplete`.
pub fn deployment_complete(d: &Deployment, new_status: &DeploymentStatus) -> bool {
    let replicas = deployment_replicas(d);
    counter(new_status.updated_replicas) == replicas
        && counter(new_status.replicas) == replicas
        && counter(new_status.available_replicas) == replicas
        && new_status.observed_generation.unwrap_or(0) >= generation(&d.metadata)
}

/// Whether `new_status` shows progress over the Deployment's current status: more updated,
/// ready or available pods, or fewer old pods, as upstream `DeploymentProgressing`.
pub fn deployment_progressing(d: &Deployment, new_status: &DeploymentStatus) -> bool {
    let empty = DeploymentStatus::default();
    let old = d.status.as_ref().unwrap_or(&empty);
    let old_old_replicas = counter(old.replicas) - counter(old.updated_replicas);
    let new_old_replicas = counter(new_status.replicas) - counter(new_status.updated_replicas);
    counter(new_status.updated_replicas) > counter(old.updated_replicas)
        || new_old_replicas < old_old_replicas
        || counter(new_status.ready_replicas) > counter(old.ready_replicas)
        || counter(new_status.available_replicas) > counter(old.available_replicas)
}

/// Time since the `Progressing` condition last recorded progress; a missing update time is
/// Go's zero time, i.e. forever ago.
fn since_last_update(condition: &DeploymentCondition, now: Timestamp) -> SignedDuration {
    match &condition.last_update_time {
        Some(t) => now.duration_since(t.0),
        None => SignedDuration::MAX,
    }
}

/// Whether the rollout has made no progress for `progressDeadlineSeconds` since the
/// `Progressing` condition in `new_status` was last updated, or has already been marked
/// timed out. A completed rollout (`NewReplicaSetAvailable`) never times out. As upstream
/// `DeploymentTimedOut`, with `now` injected.
pub fn deployment_timed_out(d: &Deployment, new_status: &DeploymentStatus, now: Timestamp) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let Some(condition) = get_deployment_condition(new_status, DEPLOYMENT_PROGRESSING) else {
        // No base to estimate progress from.
        return false;
    };
    // A resync can see a finished rollout's condition before the cached Deployment shows the
    // new ReplicaSet; a deadline counted from the last rollout's end must not fire then.
    match reason(condition) {
        NEW_RS_AVAILABLE_REASON => return false,
        TIMED_OUT_REASON => return true,
        _ => {}
    }
    let deadline = SignedDuration::from_secs(i64::from(progress_deadline_seconds(d).unwrap_or(0)));
    let elapsed = since_last_update(condition, now);
    let timed_out = elapsed > deadline;
    tracing::trace!(
        deployment = name(&d.metadata),
        timed_out,
        elapsed_secs = elapsed.as_secs(),
        "progress deadline check"
    );
    timed_out
}

/// The `ReplicaFailure` conditions of the ReplicaSets as Deployment conditions: the new
/// ReplicaSet's if it has any, otherwise every ReplicaSet's in order, as upstream
/// `getReplicaFailures`.
pub fn replica_failures(
    all_rss: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
) -> Vec<DeploymentCondition> {
    let failures = |rs: &ReplicaSet| -> Vec<DeploymentCondition> {
        rs.status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .filter(|c| c.type_ == REPLICA_SET_REPLICA_FAILURE)
            .map(replica_set_to_deployment_condition)
            .collect()
    };
    if let Some(new_rs) = new_rs {
        let conditions = failures(new_rs);
        if !conditions.is_empty() {
            return conditions;
        }
    }
    all_rss.iter().flat_map(|rs| failures(rs)).collect()
}

/// The status `syncRolloutStatus` would write: [`calculate_status`] plus the `Progressing`
/// transitions (complete → `NewReplicaSetAvailable`, progress → `ReplicaSetUpdated` with a
/// fresh update time, no progress past the deadline → `ProgressDeadlineExceeded`) and the
/// `ReplicaFailure` condition. Write it if it differs from the current status
/// ([`deployment_status_equal`](super::status::deployment_status_equal)); otherwise ask
/// [`requeue_stuck_deployment`] when to look again.
pub fn sync_rollout_status(
    d: &Deployment,
    all_rss: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    now: Timestamp,
) -> DeploymentStatus {
    let mut new_status = calculate_status(all_rss, new_rs, d, now);
    let has_deadline = has_progress_deadline(d);
    if !has_deadline {
        remove_deployment_condition(&mut new_status, DEPLOYMENT_PROGRESSING);
    }

    // With a finished rollout and one active ReplicaSet this is a resync, not a rollout: do not
    // estimate progress.
    let current = get_condition_of(d.status.as_ref(), DEPLOYMENT_PROGRESSING);
    let is_complete_deployment = counter(new_status.replicas)
        == counter(new_status.updated_replicas)
        && current.is_some_and(|c| reason(c) == NEW_RS_AVAILABLE_REASON);
    let subject = |what: &str| match new_rs {
        Some(rs) => format!("ReplicaSet {:?} {what}", name(&rs.metadata)),
        None => format!("Deployment {:?} {what}", name(&d.metadata)),
    };

    if has_deadline && !is_complete_deployment {
        if deployment_complete(d, &new_status) {
            let condition = new_deployment_condition(
                DEPLOYMENT_PROGRESSING,
                CONDITION_TRUE,
                NEW_RS_AVAILABLE_REASON,
                subject("has successfully progressed."),
                now,
            );
            set_deployment_condition(&mut new_status, condition);
        } else if deployment_progressing(d, &new_status) {
            let mut condition = new_deployment_condition(
                DEPLOYMENT_PROGRESSING,
                CONDITION_TRUE,
                REPLICA_SET_UPDATED_REASON,
                subject("is progressing."),
                now,
            );
            // Unlike set_deployment_condition, progress with an unchanged reason must still
            // move lastUpdateTime; only lastTransitionTime survives a True → True update.
            if let Some(current) = current {
                if current.status == CONDITION_TRUE {
                    condition.last_transition_time = current.last_transition_time.clone();
                }
                remove_deployment_condition(&mut new_status, DEPLOYMENT_PROGRESSING);
            }
            set_deployment_condition(&mut new_status, condition);
        } else if deployment_timed_out(d, &new_status, now) {
            let condition = new_deployment_condition(
                DEPLOYMENT_PROGRESSING,
                CONDITION_FALSE,
                TIMED_OUT_REASON,
                subject("has timed out progressing."),
                now,
            );
            set_deployment_condition(&mut new_status, condition);
        }
    }

    // Only one ReplicaFailure condition is kept.
    match replica_failures(all_rss, new_rs).into_iter().next() {
        Some(failure) => set_deployment_condition(&mut new_status, failure),
        None => remove_deployment_condition(&mut new_status, DEPLOYMENT_REPLICA_FAILURE),
    }
    new_status
}

/// When to look at a rollout again to check its progress deadline, as upstream
/// `requeueStuckDeployment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StuckCheck {
    /// No check needed: no deadline, no `Progressing` condition, complete, or already timed out.
    NotNeeded,
    /// The deadline is less than a second away or past: requeue now (rate limited).
    Now,
    /// The deadline is this far away.
    After(Duration),
}

impl StuckCheck {
    /// The delay to requeue with: upstream adds a second to `After` to avoid sub-second skew
    /// (kubernetes#39785); `None` for `NotNeeded` and `Some(ZERO)` for `Now`.
    pub fn queue_delay(self) -> Option<Duration> {
        match self {
            StuckCheck::NotNeeded => None,
            StuckCheck::Now => Some(Duration::ZERO),
            StuckCheck::After(after) => Some(after + Duration::from_secs(1)),
        }
    }
}

/// Whether and when a rollout whose status did not change should be re-checked against its
/// progress deadline: `lastUpdateTime + progressDeadlineSeconds - now`, as upstream
/// `requeueStuckDeployment`.
pub fn requeue_stuck_deployment(
    d: &Deployment,
    new_status: &DeploymentStatus,
    now: Timestamp,
) -> StuckCheck {
    let Some(current) = get_condition_of(d.status.as_ref(), DEPLOYMENT_PROGRESSING) else {
        return StuckCheck::NotNeeded;
    };
    if !has_progress_deadline(d) {
        return StuckCheck::NotNeeded;
    }
    if deployment_complete(d, new_status) || reason(current) == TIMED_OUT_REASON {
        return StuckCheck::NotNeeded;
    }
    let deadline = SignedDuration::from_secs(i64::from(progress_deadline_seconds(d).unwrap_or(0)));
    let after = deadline.saturating_sub(since_last_update(current, now));
    if after < SignedDuration::from_secs(1) {
        return StuckCheck::Now;
    }
    match Duration::try_from(after) {
        Ok(after) => StuckCheck::After(after),
        Err(_) => StuckCheck::Now,
    }
}

/// Adds `DeploymentPaused` (Unknown) to a paused Deployment or `DeploymentResumed` (Unknown)
/// to a resumed one, so time spent paused never counts against the deadline; leaves a
/// timed-out condition alone. True if the status changed and must be written. As upstream
/// `checkPausedConditions`.
pub fn check_paused_conditions(d: &mut Deployment, now: Timestamp) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let current = get_condition_of(d.status.as_ref(), DEPLOYMENT_PROGRESSING);
    if current.is_some_and(|c| reason(c) == TIMED_OUT_REASON) {
        // Lack of progress was reported: a pause must not hide it.
        return false;
    }
    let paused_cond_exists = current.is_some_and(|c| reason(c) == PAUSED_DEPLOY_REASON);
    let paused = is_paused(d);
    let condition = if paused && !paused_cond_exists {
        new_deployment_condition(
            DEPLOYMENT_PROGRESSING,
            CONDITION_UNKNOWN,
            PAUSED_DEPLOY_REASON,
            "Deployment is paused",
            now,
        )
    } else if !paused && paused_cond_exists {
        new_deployment_condition(
            DEPLOYMENT_PROGRESSING,
            CONDITION_UNKNOWN,
            RESUMED_DEPLOY_REASON,
            "Deployment is resumed",
            now,
        )
    } else {
        return false;
    };
    set_deployment_condition(d.status.get_or_insert_with(Default::default), condition);
    true
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{ReplicaSetCondition, ReplicaSetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::super::accessors::RECREATE_STRATEGY;
    use super::super::conditions::CONDITION_TRUE;
    use super::super::test_support::{deployment, deployment_with, rs, ts, with_strategy};
    use super::*;

    fn status(replicas: i32, updated: i32, ready: i32, available: i32) -> DeploymentStatus {
        DeploymentStatus {
            replicas: Some(replicas),
            updated_replicas: Some(updated),
            ready_replicas: Some(ready),
            available_replicas: Some(available),
            ..Default::default()
        }
    }

    /// Upstream progress_test.go `currentDeployment`: a Recreate Deployment named
    /// `progress-test` whose status is already observed.
    fn current_deployment(
        pds: Option<i32>,
        replicas: i32,
        status_replicas: i32,
        updated: i32,
        available: i32,
        conditions: Vec<DeploymentCondition>,
    ) -> Deployment {
        let mut d = with_strategy(deployment("progress-test", replicas), RECREATE_STRATEGY);
        if let Some(s) = d.spec.as_mut() {
            s.progress_deadline_seconds = pds;
        }
        d.status = Some(DeploymentStatus {
            replicas: Some(status_replicas),
            updated_replicas: Some(updated),
            available_replicas: Some(available),
            conditions: Some(conditions),
            ..Default::default()
        });
        d
    }

    fn rs_with_available(
        name: &str,
        spec: i32,
        status_replicas: i32,
        available: i32,
    ) -> ReplicaSet {
        let mut r = rs(name, spec);
        r.status = Some(ReplicaSetStatus {
            replicas: status_replicas,
            available_replicas: Some(available),
            ..Default::default()
        });
        r
    }

    fn cond(status: &str, reason: &str, at: Option<Timestamp>) -> DeploymentCondition {
        DeploymentCondition {
            type_: DEPLOYMENT_PROGRESSING.into(),
            status: status.into(),
            reason: Some(reason.into()),
            last_update_time: at.map(Time),
            last_transition_time: at.map(Time),
            message: None,
        }
    }

    #[test]
    fn deployment_complete_table() {
        // Upstream TestDeploymentComplete.
        struct Case {
            name: &'static str,
            d: Deployment,
            expected: bool,
        }
        let d = |desired, current, updated, available, max_unavailable, max_surge| {
            let mut d = deployment_with(
                "foo",
                desired,
                IntOrString::Int(max_surge),
                IntOrString::Int(max_unavailable),
            );
            d.status = Some(DeploymentStatus {
                replicas: Some(current),
                updated_replicas: Some(updated),
                available_replicas: Some(available),
                ..Default::default()
            });
            d
        };
        let cases = [
            Case {
                name: "not complete: min but not all pods become available",
                d: d(5, 5, 5, 4, 1, 0),
                expected: false,
            },
            Case {
                name: "not complete: min availability is not honored",
                d: d(5, 5, 5, 3, 1, 0),
                expected: false,
            },
            Case {
                name: "complete",
                d: d(5, 5, 5, 5, 0, 0),
                expected: true,
            },
            Case {
                name: "not complete: all pods are available but not updated",
                d: d(5, 5, 4, 5, 0, 0),
                expected: false,
            },
            Case {
                name: "not complete: still running old pods",
                d: d(1, 2, 1, 1, 0, 1),
                expected: false,
            },
            Case {
                name: "not complete: one replica deployment never comes up",
                d: d(1, 1, 1, 0, 1, 1),
                expected: false,
            },
        ];
        for c in cases {
            let s = c.d.status.clone().unwrap_or_default();
            assert_eq!(deployment_complete(&c.d, &s), c.expected, "{}", c.name);
        }
        // A status from an older generation is not complete.
        let mut stale = d(5, 5, 5, 5, 0, 0);
        stale.metadata.generation = Some(2);
        let s = DeploymentStatus {
            observed_generation: Some(1),
            ..stale.status.clone().unwrap_or_default()
        };
        assert!(!deployment_complete(&stale, &s));
    }

    #[test]
    fn deployment_progressing_table() {
        // Upstream TestDeploymentProgressing.
        struct Case {
            name: &'static str,
            old: DeploymentStatus,
            new: DeploymentStatus,
            expected: bool,
        }
        let cases = [
            Case {
                name: "progressing: updated pods",
                old: status(10, 4, 4, 4),
                new: status(10, 6, 4, 4),
                expected: true,
            },
            Case {
                name: "not progressing",
                old: status(10, 4, 4, 4),
                new: status(10, 4, 4, 4),
                expected: false,
            },
            Case {
                name: "progressing: old pods removed",
                old: status(10, 4, 6, 6),
                new: status(8, 4, 6, 6),
                expected: true,
            },
            Case {
                name: "not progressing: less new pods",
                old: status(10, 7, 3, 3),
                new: status(10, 6, 3, 3),
                expected: false,
            },
            Case {
                name: "progressing: less overall but more new pods",
                old: status(10, 4, 7, 7),
                new: status(8, 8, 5, 5),
                expected: true,
            },
            Case {
                name: "progressing: more ready pods",
                old: status(10, 10, 9, 8),
                new: status(10, 10, 10, 8),
                expected: true,
            },
            Case {
                name: "progressing: more available pods",
                old: status(10, 10, 10, 9),
                new: status(10, 10, 10, 10),
                expected: true,
            },
        ];
        for c in cases {
            let mut d = deployment("foo", 10);
            d.status = Some(c.old);
            assert_eq!(deployment_progressing(&d, &c.new), c.expected, "{}", c.name);
        }
    }

    #[test]
    fn deployment_timed_out_table() {
        // Upstream TestDeploymentTimedOut.
        let time = |min, sec| ts(2016, 1, 1, 0, min, sec);
        struct Case {
            name: &'static str,
            reason: &'static str,
            pds: Option<i32>,
            from: Option<Timestamp>,
            now: Timestamp,
            expected: bool,
        }
        let cases = [
            Case {
                name: "nil progressDeadlineSeconds specified - no timeout",
                reason: "",
                pds: None,
                from: Some(time(1, 9)),
                now: time(1, 20),
                expected: false,
            },
            Case {
                name: "infinite progressDeadlineSeconds specified - no timeout",
                reason: "",
                pds: Some(i32::MAX),
                from: Some(time(1, 9)),
                now: time(1, 20),
                expected: false,
            },
            Case {
                name: "progressDeadlineSeconds: 10s, now - started => 00:01:20 - 00:01:09 => 11s",
                reason: "",
                pds: Some(10),
                from: Some(time(1, 9)),
                now: time(1, 20),
                expected: true,
            },
            Case {
                name: "progressDeadlineSeconds: 10s, now - started => 00:01:20 - 00:01:11 => 9s",
                reason: "",
                pds: Some(10),
                from: Some(time(1, 11)),
                now: time(1, 20),
                expected: false,
            },
            Case {
                name: "progressDeadlineSeconds: 10s, exactly at the deadline is not past it",
                reason: "",
                pds: Some(10),
                from: Some(time(1, 10)),
                now: time(1, 20),
                expected: false,
            },
            Case {
                name: "previous status was a complete deployment",
                reason: NEW_RS_AVAILABLE_REASON,
                pds: None,
                from: None,
                now: time(1, 20),
                expected: false,
            },
            Case {
                name: "complete deployment with a deadline never times out",
                reason: NEW_RS_AVAILABLE_REASON,
                pds: Some(10),
                from: Some(time(0, 0)),
                now: time(1, 20),
                expected: false,
            },
            Case {
                name: "already timed out",
                reason: TIMED_OUT_REASON,
                pds: Some(600),
                from: Some(time(1, 19)),
                now: time(1, 20),
                expected: true,
            },
            Case {
                name: "missing update time is the zero time",
                reason: "",
                pds: Some(600),
                from: None,
                now: time(1, 20),
                expected: true,
            },
        ];
        for c in cases {
            let mut d = deployment("foo", 1);
            if let Some(s) = d.spec.as_mut() {
                s.progress_deadline_seconds = c.pds;
            }
            let s = DeploymentStatus {
                conditions: Some(vec![cond(CONDITION_TRUE, c.reason, c.from)]),
                ..Default::default()
            };
            assert_eq!(
                deployment_timed_out(&d, &s, c.now),
                c.expected,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn requeue_stuck_deployment_table() {
        // Upstream TestRequeueStuckDeployment.
        let pds = Some(60);
        let failed = vec![cond(CONDITION_FALSE, TIMED_OUT_REASON, None)];
        let stuck = vec![cond(CONDITION_TRUE, "", Some(ts(2017, 2, 15, 18, 49, 0)))];
        let at = |sec: i8, nanos: i32| {
            ts(2017, 2, 15, 18, 49, 0)
                .checked_add(SignedDuration::new(i64::from(sec), nanos))
                .expect("in range")
        };
        struct Case {
            name: &'static str,
            d: Deployment,
            status: DeploymentStatus,
            now: Timestamp,
            expected: StuckCheck,
        }
        let new_status = |r, u, a| DeploymentStatus {
            replicas: Some(r),
            updated_replicas: Some(u),
            available_replicas: Some(a),
            ..Default::default()
        };
        let cases = [
            Case {
                name: "nil progressDeadlineSeconds specified",
                d: current_deployment(None, 4, 3, 3, 2, vec![]),
                status: new_status(3, 3, 2),
                now: at(0, 0),
                expected: StuckCheck::NotNeeded,
            },
            Case {
                name: "infinite progressDeadlineSeconds specified",
                d: current_deployment(Some(i32::MAX), 4, 3, 3, 2, vec![]),
                status: new_status(3, 3, 2),
                now: at(0, 0),
                expected: StuckCheck::NotNeeded,
            },
            Case {
                name: "no progressing condition found",
                d: current_deployment(pds, 4, 3, 3, 2, vec![]),
                status: new_status(3, 3, 2),
                now: at(0, 0),
                expected: StuckCheck::NotNeeded,
            },
            Case {
                name: "complete deployment does not need to be requeued",
                d: current_deployment(pds, 3, 3, 3, 3, stuck.clone()),
                status: new_status(3, 3, 3),
                now: at(0, 0),
                expected: StuckCheck::NotNeeded,
            },
            Case {
                name: "already failed deployment does not need to be requeued",
                d: current_deployment(pds, 3, 3, 3, 0, failed),
                status: new_status(3, 3, 0),
                now: at(0, 0),
                expected: StuckCheck::NotNeeded,
            },
            Case {
                name: "stuck deployment - 30s",
                d: current_deployment(pds, 3, 3, 3, 1, stuck.clone()),
                status: new_status(3, 3, 1),
                now: at(30, 0),
                expected: StuckCheck::After(Duration::from_secs(30)),
            },
            Case {
                name: "stuck deployment - 1s",
                d: current_deployment(pds, 3, 3, 3, 1, stuck.clone()),
                status: new_status(3, 3, 1),
                now: at(59, 0),
                expected: StuckCheck::After(Duration::from_secs(1)),
            },
            Case {
                name: "failed deployment - less than a second => now",
                d: current_deployment(pds, 3, 3, 3, 1, stuck.clone()),
                status: new_status(3, 3, 1),
                now: at(59, 1),
                expected: StuckCheck::Now,
            },
            Case {
                name: "failed deployment - now",
                d: current_deployment(pds, 3, 3, 3, 1, stuck.clone()),
                status: new_status(3, 3, 1),
                now: at(60, 0),
                expected: StuckCheck::Now,
            },
            Case {
                name: "failed deployment - 1s after deadline",
                d: current_deployment(pds, 3, 3, 3, 1, stuck.clone()),
                status: new_status(3, 3, 1),
                now: at(61, 0),
                expected: StuckCheck::Now,
            },
            Case {
                name: "failed deployment - 60s after deadline",
                d: current_deployment(pds, 3, 3, 3, 1, stuck),
                status: new_status(3, 3, 1),
                now: at(120, 0),
                expected: StuckCheck::Now,
            },
        ];
        for c in cases {
            assert_eq!(
                requeue_stuck_deployment(&c.d, &c.status, c.now),
                c.expected,
                "{}",
                c.name
            );
        }
        assert_eq!(
            StuckCheck::After(Duration::from_secs(30)).queue_delay(),
            Some(Duration::from_secs(31))
        );
        assert_eq!(StuckCheck::Now.queue_delay(), Some(Duration::ZERO));
        assert_eq!(StuckCheck::NotNeeded.queue_delay(), None);
    }

    #[test]
    fn sync_rollout_status_table() {
        // Upstream TestSyncRolloutStatus, checking the resulting Progressing condition and,
        // where given, that its times were kept (test_time) or refreshed (now).
        let pds = Some(60);
        let test_time = ts(2017, 2, 15, 18, 49, 0);
        let now = ts(2017, 2, 15, 18, 55, 0);
        let failed_timed_out = cond(CONDITION_FALSE, TIMED_OUT_REASON, None);
        let new_rs_available = cond(CONDITION_TRUE, NEW_RS_AVAILABLE_REASON, Some(test_time));
        let replica_set_updated = cond(CONDITION_TRUE, REPLICA_SET_UPDATED_REASON, Some(test_time));

        struct Case {
            name: &'static str,
            d: Deployment,
            all_rss: Vec<ReplicaSet>,
            new_rs: Option<ReplicaSet>,
            /// `None`: no Progressing condition expected.
            expected: Option<(&'static str, &'static str)>,
            last_update: Option<Timestamp>,
            last_transition: Option<Timestamp>,
        }
        let cases = [
            Case {
                name: "General: remove Progressing condition and do not estimate progress if deployment has no Progress Deadline",
                d: current_deployment(None, 3, 2, 2, 2, vec![replica_set_updated.clone()]),
                all_rss: vec![rs_with_available("bar", 0, 1, 1)],
                new_rs: Some(rs_with_available("foo", 3, 2, 2)),
                expected: None,
                last_update: None,
                last_transition: None,
            },
            Case {
                name: "General: do not estimate progress of deployment with only one active ReplicaSet",
                d: current_deployment(pds, 3, 3, 3, 3, vec![new_rs_available.clone()]),
                all_rss: vec![rs_with_available("bar", 3, 3, 3)],
                new_rs: None,
                expected: Some((CONDITION_TRUE, NEW_RS_AVAILABLE_REASON)),
                last_update: Some(test_time),
                last_transition: Some(test_time),
            },
            Case {
                name: "DeploymentProgressing: dont update lastTransitionTime if deployment already has Progressing=True",
                d: current_deployment(pds, 3, 2, 2, 2, vec![replica_set_updated.clone()]),
                all_rss: vec![rs_with_available("bar", 0, 1, 1)],
                new_rs: Some(rs_with_available("foo", 3, 2, 2)),
                expected: Some((CONDITION_TRUE, REPLICA_SET_UPDATED_REASON)),
                last_update: Some(now),
                last_transition: Some(test_time),
            },
            Case {
                name: "DeploymentProgressing: update everything if deployment has Progressing=False",
                d: current_deployment(pds, 3, 2, 2, 2, vec![failed_timed_out.clone()]),
                all_rss: vec![rs_with_available("bar", 0, 1, 1)],
                new_rs: Some(rs_with_available("foo", 3, 2, 2)),
                expected: Some((CONDITION_TRUE, REPLICA_SET_UPDATED_REASON)),
                last_update: Some(now),
                last_transition: Some(now),
            },
            Case {
                name: "DeploymentProgressing: create Progressing condition if it does not exist",
                d: current_deployment(pds, 3, 2, 2, 2, vec![]),
                all_rss: vec![rs_with_available("bar", 0, 1, 1)],
                new_rs: Some(rs_with_available("foo", 3, 2, 2)),
                expected: Some((CONDITION_TRUE, REPLICA_SET_UPDATED_REASON)),
                last_update: Some(now),
                last_transition: Some(now),
            },
            Case {
                name: "DeploymentComplete: dont update lastTransitionTime if deployment already has Progressing=True",
                d: current_deployment(pds, 3, 3, 3, 3, vec![replica_set_updated.clone()]),
                all_rss: vec![],
                new_rs: Some(rs_with_available("foo", 3, 3, 3)),
                expected: Some((CONDITION_TRUE, NEW_RS_AVAILABLE_REASON)),
                last_update: Some(now),
                last_transition: Some(test_time),
            },
            Case {
                name: "DeploymentComplete: update everything if deployment has Progressing=False",
                d: current_deployment(pds, 3, 3, 3, 3, vec![failed_timed_out.clone()]),
                all_rss: vec![],
                new_rs: Some(rs_with_available("foo", 3, 3, 3)),
                expected: Some((CONDITION_TRUE, NEW_RS_AVAILABLE_REASON)),
                last_update: Some(now),
                last_transition: Some(now),
            },
            Case {
                name: "DeploymentComplete: create Progressing condition if it does not exist",
                d: current_deployment(pds, 3, 3, 3, 3, vec![]),
                all_rss: vec![],
                new_rs: Some(rs_with_available("foo", 3, 3, 3)),
                expected: Some((CONDITION_TRUE, NEW_RS_AVAILABLE_REASON)),
                last_update: Some(now),
                last_transition: Some(now),
            },
            Case {
                name: "DeploymentComplete: defend against NPE when newRS=nil",
                d: current_deployment(pds, 0, 3, 3, 3, vec![replica_set_updated.clone()]),
                all_rss: vec![rs_with_available("foo", 0, 0, 0)],
                new_rs: None,
                expected: Some((CONDITION_TRUE, NEW_RS_AVAILABLE_REASON)),
                last_update: Some(now),
                last_transition: Some(test_time),
            },
            Case {
                name: "DeploymentTimedOut: update status if rollout exceeds Progress Deadline",
                d: current_deployment(pds, 3, 2, 2, 2, vec![replica_set_updated.clone()]),
                all_rss: vec![],
                new_rs: Some(rs_with_available("foo", 3, 2, 2)),
                expected: Some((CONDITION_FALSE, TIMED_OUT_REASON)),
                last_update: Some(now),
                last_transition: Some(now),
            },
            Case {
                name: "DeploymentTimedOut: do not update status if deployment has existing timedOut condition",
                d: current_deployment(
                    pds,
                    3,
                    2,
                    2,
                    2,
                    vec![cond(CONDITION_FALSE, TIMED_OUT_REASON, Some(test_time))],
                ),
                all_rss: vec![],
                new_rs: Some(rs_with_available("foo", 3, 2, 2)),
                expected: Some((CONDITION_FALSE, TIMED_OUT_REASON)),
                last_update: Some(test_time),
                last_transition: Some(test_time),
            },
            Case {
                name: "DeploymentTimedOut: not yet past the deadline keeps the condition",
                d: current_deployment(
                    pds,
                    3,
                    2,
                    2,
                    2,
                    vec![cond(CONDITION_TRUE, REPLICA_SET_UPDATED_REASON, Some(now))],
                ),
                all_rss: vec![],
                new_rs: Some(rs_with_available("foo", 3, 2, 2)),
                expected: Some((CONDITION_TRUE, REPLICA_SET_UPDATED_REASON)),
                last_update: Some(now),
                last_transition: Some(now),
            },
        ];
        for c in cases {
            let mut all: Vec<&ReplicaSet> = c.all_rss.iter().collect();
            all.extend(c.new_rs.as_ref());
            let s = sync_rollout_status(&c.d, &all, c.new_rs.as_ref(), now);
            let got = get_deployment_condition(&s, DEPLOYMENT_PROGRESSING);
            match (got, c.expected) {
                (None, None) => {}
                (Some(got), Some((status, reason_))) => {
                    assert_eq!(
                        (got.status.as_str(), reason(got)),
                        (status, reason_),
                        "{}",
                        c.name
                    );
                    if let Some(t) = c.last_update {
                        assert_eq!(
                            got.last_update_time,
                            Some(Time(t)),
                            "{}: lastUpdateTime",
                            c.name
                        );
                    }
                    if let Some(t) = c.last_transition {
                        assert_eq!(
                            got.last_transition_time,
                            Some(Time(t)),
                            "{}: lastTransitionTime",
                            c.name
                        );
                    }
                }
                (got, want) => panic!("{}: got {got:?}, want {want:?}", c.name),
            }
        }
    }

    #[test]
    fn sync_rollout_status_messages_and_replica_failure() {
        let now = ts(2020, 1, 1, 0, 0, 0);
        let mut d = current_deployment(Some(60), 3, 0, 0, 0, vec![]);
        d.metadata.name = Some("web".into());
        let mut failing = rs_with_available("web-abc", 3, 0, 0);
        if let Some(s) = failing.status.as_mut() {
            s.conditions = Some(vec![ReplicaSetCondition {
                type_: REPLICA_SET_REPLICA_FAILURE.into(),
                status: CONDITION_TRUE.into(),
                reason: Some("FailedCreate".into()),
                message: Some("exceeded quota".into()),
                last_transition_time: Some(Time(now)),
            }]);
        }
        let s = sync_rollout_status(&d, &[&failing], Some(&failing), now);
        let failure = get_deployment_condition(&s, DEPLOYMENT_REPLICA_FAILURE).expect("promoted");
        assert_eq!(reason(failure), "FailedCreate");
        // Once the ReplicaSet recovers the condition goes away.
        d.status = Some(s);
        let healed = rs_with_available("web-abc", 3, 3, 3);
        let s = sync_rollout_status(&d, &[&healed], Some(&healed), now);
        assert!(get_deployment_condition(&s, DEPLOYMENT_REPLICA_FAILURE).is_none());
        let p = get_deployment_condition(&s, DEPLOYMENT_PROGRESSING).expect("set");
        assert_eq!(
            p.message.as_deref(),
            Some("ReplicaSet \"web-abc\" has successfully progressed.")
        );
    }

    #[test]
    fn replica_failures_prefer_the_new_replica_set() {
        let failure = |reason: &str| ReplicaSetCondition {
            type_: REPLICA_SET_REPLICA_FAILURE.into(),
            status: CONDITION_TRUE.into(),
            reason: Some(reason.into()),
            ..Default::default()
        };
        let with_conds = |name: &str, conds: Vec<ReplicaSetCondition>| {
            let mut r = rs(name, 1);
            r.status = Some(ReplicaSetStatus {
                conditions: Some(conds),
                ..Default::default()
            });
            r
        };
        let old = with_conds("old", vec![failure("OldFailure")]);
        let new = with_conds("new", vec![failure("NewFailure")]);
        let healthy_new = with_conds("new", vec![]);
        let got: Vec<String> = replica_failures(&[&old, &new], Some(&new))
            .iter()
            .map(|c| reason(c).to_owned())
            .collect();
        assert_eq!(got, ["NewFailure"]);
        let got: Vec<String> = replica_failures(&[&old, &healthy_new], Some(&healthy_new))
            .iter()
            .map(|c| reason(c).to_owned())
            .collect();
        assert_eq!(got, ["OldFailure"]);
        assert!(replica_failures(&[&healthy_new], None).is_empty());
    }

    #[test]
    fn check_paused_conditions_table() {
        let now = ts(2020, 1, 1, 0, 0, 0);
        struct Case {
            name: &'static str,
            paused: bool,
            pds: Option<i32>,
            current: Option<DeploymentCondition>,
            changed: bool,
            want_reason: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "no deadline: nothing",
                paused: true,
                pds: None,
                current: None,
                changed: false,
                want_reason: None,
            },
            Case {
                name: "paused: add DeploymentPaused",
                paused: true,
                pds: Some(60),
                current: Some(cond(CONDITION_TRUE, REPLICA_SET_UPDATED_REASON, Some(now))),
                changed: true,
                want_reason: Some(PAUSED_DEPLOY_REASON),
            },
            Case {
                name: "paused twice: unchanged",
                paused: true,
                pds: Some(60),
                current: Some(cond(CONDITION_UNKNOWN, PAUSED_DEPLOY_REASON, Some(now))),
                changed: false,
                want_reason: Some(PAUSED_DEPLOY_REASON),
            },
            Case {
                name: "resumed: DeploymentResumed",
                paused: false,
                pds: Some(60),
                current: Some(cond(CONDITION_UNKNOWN, PAUSED_DEPLOY_REASON, Some(now))),
                changed: true,
                want_reason: Some(RESUMED_DEPLOY_REASON),
            },
            Case {
                name: "timed out stays timed out",
                paused: true,
                pds: Some(60),
                current: Some(cond(CONDITION_FALSE, TIMED_OUT_REASON, Some(now))),
                changed: false,
                want_reason: Some(TIMED_OUT_REASON),
            },
            Case {
                name: "not paused, never paused: nothing",
                paused: false,
                pds: Some(60),
                current: None,
                changed: false,
                want_reason: None,
            },
        ];
        for c in cases {
            let mut d = deployment("foo", 1);
            if let Some(s) = d.spec.as_mut() {
                s.paused = Some(c.paused);
                s.progress_deadline_seconds = c.pds;
            }
            d.status = Some(DeploymentStatus {
                conditions: c.current.map(|x| vec![x]),
                ..Default::default()
            });
            assert_eq!(
                check_paused_conditions(&mut d, now),
                c.changed,
                "{}",
                c.name
            );
            let got = get_condition_of(d.status.as_ref(), DEPLOYMENT_PROGRESSING)
                .map(|c| reason(c).to_owned());
            assert_eq!(got.as_deref(), c.want_reason, "{}", c.name);
        }
    }
}
