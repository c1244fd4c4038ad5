//! Deployment conditions (`Available`, `Progressing`, `ReplicaFailure`), their reasons, and
//! the helpers that add, replace and remove them, as upstream `deploymentutil`.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus, ReplicaSetCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Condition type: the Deployment has at least `spec.replicas - maxUnavailable` available pods.
pub const DEPLOYMENT_AVAILABLE: &str = "Available";
/// Condition type: the rollout is progressing, done, paused, or has timed out.
pub const DEPLOYMENT_PROGRESSING: &str = "Progressing";
/// Condition type: a ReplicaSet failed to create or delete pods (copied from the ReplicaSet).
pub const DEPLOYMENT_REPLICA_FAILURE: &str = "ReplicaFailure";
/// ReplicaSet condition type promoted to the Deployment.
pub const REPLICA_SET_REPLICA_FAILURE: &str = "ReplicaFailure";

/// Condition status `True`.
pub const CONDITION_TRUE: &str = "True";
/// Condition status `False`.
pub const CONDITION_FALSE: &str = "False";
/// Condition status `Unknown`.
pub const CONDITION_UNKNOWN: &str = "Unknown";

/// Progressing: one of the ReplicaSets was scaled as part of the rollout.
pub const REPLICA_SET_UPDATED_REASON: &str = "ReplicaSetUpdated";
/// Progressing: the new ReplicaSet could not be created.
pub const FAILED_RS_CREATE_REASON: &str = "ReplicaSetCreateError";
/// Progressing: the new ReplicaSet was created.
pub const NEW_REPLICA_SET_REASON: &str = "NewReplicaSetCreated";
/// Progressing: an existing ReplicaSet was found to be the new one.
pub const FOUND_NEW_RS_REASON: &str = "FoundNewReplicaSet";
/// Progressing: the new ReplicaSet is fully available; the rollout is complete.
pub const NEW_RS_AVAILABLE_REASON: &str = "NewReplicaSetAvailable";
/// Progressing: no progress within `progressDeadlineSeconds`.
pub const TIMED_OUT_REASON: &str = "ProgressDeadlineExceeded";
/// Progressing: the Deployment is paused; no progress is estimated.
pub const PAUSED_DEPLOY_REASON: &str = "DeploymentPaused";
/// Progressing: the Deployment was resumed; the deadline counts from now.
pub const RESUMED_DEPLOY_REASON: &str = "DeploymentResumed";
/// Available: the minimum number of replicas is available.
pub const MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
/// Available: fewer than the minimum number of replicas are available.
pub const MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

/// Event reason: the revision to roll back to does not exist.
pub const ROLLBACK_REVISION_NOT_FOUND: &str = "DeploymentRollbackRevisionNotFound";
/// Event reason: the rollback target has the current template already.
pub const ROLLBACK_TEMPLATE_UNCHANGED: &str = "DeploymentRollbackTemplateUnchanged";
/// Event reason: rolled back.
pub const ROLLBACK_DONE: &str = "DeploymentRollback";
/// Event reason of every scale of a ReplicaSet by the Deployment controller.
pub const SCALING_REPLICA_SET_REASON: &str = "ScalingReplicaSet";

/// A condition stamped with `now` as both update and transition time, as upstream
/// `NewDeploymentCondition`.
pub fn new_deployment_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.into()),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// The condition of the given type, as upstream `GetDeploymentCondition`.
pub fn get_deployment_condition<'a>(
    status: &'a DeploymentStatus,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// The condition of the given type on an optional status.
pub fn get_condition_of<'a>(
    status: Option<&'a DeploymentStatus>,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    status.and_then(|s| get_deployment_condition(s, type_))
}

/// The reason of a condition (empty when unset, like Go's zero string).
pub fn reason(c: &DeploymentCondition) -> &str {
    c.reason.as_deref().unwrap_or("")
}

/// Adds or replaces the condition of `condition`'s type, as upstream `SetDeploymentCondition`:
/// nothing changes if one with the same status and reason exists; a condition keeping its
/// status keeps its `lastTransitionTime`; the new one goes last.
pub fn set_deployment_condition(status: &mut DeploymentStatus, mut condition: DeploymentCondition) {
    if let Some(current) = get_deployment_condition(status, &condition.type_) {
        if current.status == condition.status && reason(current) == reason(&condition) {
            return;
        }
        if current.status == condition.status {
            condition.last_transition_time = current.last_transition_time.clone();
        }
    }
    remove_deployment_condition(status, &condition.type_);
    status
        .conditions
        .get_or_insert_with(Vec::new)
        .push(condition);
}

/// Removes the condition of the given type (an emptied list becomes `None`, like Go's nil
/// slice), as upstream `RemoveDeploymentCondition`.
pub fn remove_deployment_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != type_);
        if conditions.is_empty() {
            status.conditions = None;
        }
    }
}

/// A ReplicaSet condition as a Deployment condition (its transition time used for both
/// times), as upstream `ReplicaSetToDeploymentCondition`.
pub fn replica_set_to_deployment_condition(cond: &ReplicaSetCondition) -> DeploymentCondition {
    DeploymentCondition {
        type_: cond.type_.clone(),
        status: cond.status.clone(),
        last_transition_time: cond.last_transition_time.clone(),
        last_update_time: cond.last_transition_time.clone(),
        reason: cond.reason.clone(),
        message: cond.message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, status: &str, reason: &str) -> DeploymentCondition {
        DeploymentCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            ..Default::default()
        }
    }
    fn cond_progressing() -> DeploymentCondition {
        cond(DEPLOYMENT_PROGRESSING, CONDITION_FALSE, "ForSomeReason")
    }
    fn cond_progressing2() -> DeploymentCondition {
        cond(DEPLOYMENT_PROGRESSING, CONDITION_TRUE, "BecauseItIs")
    }
    fn cond_available() -> DeploymentCondition {
        cond(DEPLOYMENT_AVAILABLE, CONDITION_TRUE, "AwesomeController")
    }
    fn status(conds: Vec<DeploymentCondition>) -> DeploymentStatus {
        DeploymentStatus {
            conditions: Some(conds),
            ..Default::default()
        }
    }

    #[test]
    fn get_condition_table() {
        // Upstream TestGetCondition.
        struct Case {
            name: &'static str,
            cond_type: &'static str,
            expected: bool,
        }
        let example = status(vec![cond_progressing(), cond_available()]);
        let cases = [
            Case {
                name: "condition exists",
                cond_type: DEPLOYMENT_AVAILABLE,
                expected: true,
            },
            Case {
                name: "condition does not exist",
                cond_type: DEPLOYMENT_REPLICA_FAILURE,
                expected: false,
            },
        ];
        for c in cases {
            assert_eq!(
                get_deployment_condition(&example, c.cond_type).is_some(),
                c.expected,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn set_condition_table() {
        // Upstream TestSetCondition.
        struct Case {
            name: &'static str,
            status: DeploymentStatus,
            cond: DeploymentCondition,
            expected: DeploymentStatus,
        }
        let cases = [
            Case {
                name: "set for the first time",
                status: DeploymentStatus::default(),
                cond: cond_available(),
                expected: status(vec![cond_available()]),
            },
            Case {
                name: "simple set",
                status: status(vec![cond_progressing()]),
                cond: cond_available(),
                expected: status(vec![cond_progressing(), cond_available()]),
            },
            Case {
                name: "overwrite",
                status: status(vec![cond_progressing()]),
                cond: cond_progressing2(),
                expected: status(vec![cond_progressing2()]),
            },
        ];
        for mut c in cases {
            set_deployment_condition(&mut c.status, c.cond);
            assert_eq!(c.status, c.expected, "{}", c.name);
        }
    }

    #[test]
    fn set_condition_keeps_transition_time_and_ignores_same_reason() {
        let t0 = Timestamp::from_second(1_000).expect("valid");
        let t1 = Timestamp::from_second(2_000).expect("valid");
        let mut s = DeploymentStatus::default();
        set_deployment_condition(
            &mut s,
            new_deployment_condition(DEPLOYMENT_PROGRESSING, CONDITION_TRUE, "A", "a", t0),
        );
        // Same status, same reason: nothing changes, not even the message or update time.
        set_deployment_condition(
            &mut s,
            new_deployment_condition(DEPLOYMENT_PROGRESSING, CONDITION_TRUE, "A", "b", t1),
        );
        let c = get_deployment_condition(&s, DEPLOYMENT_PROGRESSING).expect("set");
        assert_eq!(c.message.as_deref(), Some("a"));
        // Same status, new reason: replaced, transition time kept.
        set_deployment_condition(
            &mut s,
            new_deployment_condition(DEPLOYMENT_PROGRESSING, CONDITION_TRUE, "B", "b", t1),
        );
        let c = get_deployment_condition(&s, DEPLOYMENT_PROGRESSING).expect("set");
        assert_eq!(c.reason.as_deref(), Some("B"));
        assert_eq!(c.last_update_time, Some(Time(t1)));
        assert_eq!(c.last_transition_time, Some(Time(t0)));
        // New status: both times move.
        set_deployment_condition(
            &mut s,
            new_deployment_condition(DEPLOYMENT_PROGRESSING, CONDITION_FALSE, "C", "c", t1),
        );
        let c = get_deployment_condition(&s, DEPLOYMENT_PROGRESSING).expect("set");
        assert_eq!(c.last_transition_time, Some(Time(t1)));
    }

    #[test]
    fn remove_condition_table() {
        // Upstream TestRemoveCondition.
        struct Case {
            name: &'static str,
            status: DeploymentStatus,
            cond_type: &'static str,
            expected: DeploymentStatus,
        }
        let cases = [
            Case {
                name: "remove from empty status",
                status: DeploymentStatus::default(),
                cond_type: DEPLOYMENT_PROGRESSING,
                expected: DeploymentStatus::default(),
            },
            Case {
                name: "simple remove",
                status: status(vec![cond_progressing()]),
                cond_type: DEPLOYMENT_PROGRESSING,
                expected: DeploymentStatus::default(),
            },
            Case {
                name: "doesn't remove anything",
                status: status(vec![cond_progressing(), cond_available()]),
                cond_type: DEPLOYMENT_REPLICA_FAILURE,
                expected: status(vec![cond_progressing(), cond_available()]),
            },
        ];
        for mut c in cases {
            remove_deployment_condition(&mut c.status, c.cond_type);
            assert_eq!(c.status, c.expected, "{}", c.name);
        }
    }

    #[test]
    fn replica_set_condition_is_promoted() {
        let t = Time(Timestamp::from_second(5).expect("valid"));
        let rs_cond = ReplicaSetCondition {
            type_: REPLICA_SET_REPLICA_FAILURE.into(),
            status: CONDITION_TRUE.into(),
            last_transition_time: Some(t.clone()),
            reason: Some("FailedCreate".into()),
            message: Some("quota".into()),
        };
        let c = replica_set_to_deployment_condition(&rs_cond);
        assert_eq!(c.type_, DEPLOYMENT_REPLICA_FAILURE);
        assert_eq!(c.last_update_time, Some(t.clone()));
        assert_eq!(c.last_transition_time, Some(t));
        assert_eq!(c.reason.as_deref(), Some("FailedCreate"));
    }
}
