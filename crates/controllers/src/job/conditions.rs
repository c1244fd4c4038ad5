//! Job condition types, reasons and messages; creating, finding and updating conditions; whether a Job is finished.
//!
//! Since Kubernetes 1.31 a Job reaches a terminal condition in two steps: first the interim
//! `FailureTarget` or `SuccessCriteriaMet` (while its pods are terminated and their finalizers
//! removed), then `Failed` or `Complete` with the same reason and message. With
//! `JobManagedBy` and `JobPodReplacementPolicy` on (GA and locked since 1.35 and 1.34)
//! upstream's `delayTerminalCondition` is always true, so [`new_failure_condition`] and
//! [`new_success_condition`] build the interim ones.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The Job is suspended (`spec.suspend`), as batch/v1 `JobSuspended`.
pub const JOB_SUSPENDED: &str = "Suspended";
pub use crate::jobutil::{
    CONDITION_TRUE, JOB_COMPLETE, JOB_FAILED, finished_condition, is_job_finished, job_conditions,
};
/// The Job is about to fail; its pods are being terminated, as batch/v1 `JobFailureTarget`.
pub const JOB_FAILURE_TARGET: &str = "FailureTarget";
/// The Job met its success criteria; its pods are being terminated, as batch/v1
/// `JobSuccessCriteriaMet`.
pub const JOB_SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";

/// A pod matched a `FailJob` rule of the pod failure policy.
pub const REASON_POD_FAILURE_POLICY: &str = "PodFailurePolicy";
/// More pods failed than `spec.backoffLimit` allows.
pub const REASON_BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
/// The Job ran longer than `spec.activeDeadlineSeconds`.
pub const REASON_DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
/// More indexes failed than `spec.maxFailedIndexes` allows.
pub const REASON_MAX_FAILED_INDEXES_EXCEEDED: &str = "MaxFailedIndexesExceeded";
/// Every index finished and some failed (`spec.backoffLimitPerIndex`).
pub const REASON_FAILED_INDEXES: &str = "FailedIndexes";
/// A rule of `spec.successPolicy` was met.
pub const REASON_SUCCESS_POLICY: &str = "SuccessPolicy";
/// `spec.completions` pods succeeded.
pub const REASON_COMPLETIONS_REACHED: &str = "CompletionsReached";
/// Reason of the `Suspended=True` condition.
pub const REASON_JOB_SUSPENDED: &str = "JobSuspended";
/// Reason of the `Suspended=False` condition.
pub const REASON_JOB_RESUMED: &str = "JobResumed";

/// Message of [`REASON_BACKOFF_LIMIT_EXCEEDED`].
pub const MESSAGE_BACKOFF_LIMIT_EXCEEDED: &str = "Job has reached the specified backoff limit";
/// Message of [`REASON_DEADLINE_EXCEEDED`].
pub const MESSAGE_DEADLINE_EXCEEDED: &str = "Job was active longer than specified deadline";
/// Message of [`REASON_MAX_FAILED_INDEXES_EXCEEDED`].
pub const MESSAGE_MAX_FAILED_INDEXES_EXCEEDED: &str =
    "Job has exceeded the specified maximal number of failed indexes";
/// Message of [`REASON_FAILED_INDEXES`].
pub const MESSAGE_FAILED_INDEXES: &str = "Job has failed indexes";
/// Message of [`REASON_COMPLETIONS_REACHED`].
pub const MESSAGE_COMPLETIONS_REACHED: &str = "Reached expected number of succeeded pods";
/// Message of the `Suspended=True` condition (and of the `Suspended` event).
pub const MESSAGE_JOB_SUSPENDED: &str = "Job suspended";
/// Message of the `Suspended=False` condition (and of the `Resumed` event).
pub const MESSAGE_JOB_RESUMED: &str = "Job resumed";

/// `False`, as core/v1 `ConditionFalse`.
pub const CONDITION_FALSE: &str = "False";

/// A condition probed and transitioned `now`, as upstream's `newCondition`. An empty reason or
/// message is left out, as Go's `omitempty` writes it.
pub fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> JobCondition {
    JobCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: (!reason.is_empty()).then(|| reason.to_owned()),
        message: (!message.is_empty()).then(|| message.to_owned()),
    }
}

/// The interim failure condition (`FailureTarget=True`) with `reason` and `message`, as
/// upstream's `newFailureCondition` with `delayTerminalCondition()` true.
pub fn new_failure_condition(reason: &str, message: &str, now: Timestamp) -> JobCondition {
    new_condition(JOB_FAILURE_TARGET, CONDITION_TRUE, reason, message, now)
}

/// The interim success condition (`SuccessCriteriaMet=True`, `CompletionsReached`), as
/// upstream's `newSuccessCondition` with `delayTerminalCondition()` and `JobSuccessPolicy` on.
pub fn new_success_condition(now: Timestamp) -> JobCondition {
    new_condition(
        JOB_SUCCESS_CRITERIA_MET,
        CONDITION_TRUE,
        REASON_COMPLETIONS_REACHED,
        MESSAGE_COMPLETIONS_REACHED,
        now,
    )
}

/// The final `Failed=True` condition carrying the reason and message of an interim
/// `FailureTarget`, as upstream's `newFailedConditionForFailureTarget`.
pub fn new_failed_condition_for_failure_target(
    condition: &JobCondition,
    now: Timestamp,
) -> JobCondition {
    new_condition(
        JOB_FAILED,
        CONDITION_TRUE,
        condition.reason.as_deref().unwrap_or_default(),
        condition.message.as_deref().unwrap_or_default(),
        now,
    )
}

/// The final `Complete=True` condition carrying the reason and message of an interim
/// `SuccessCriteriaMet` (what `trackJobStatusAndRemoveFinalizers` prepares).
pub fn new_complete_condition_for_success_criteria(
    condition: &JobCondition,
    now: Timestamp,
) -> JobCondition {
    new_condition(
        JOB_COMPLETE,
        CONDITION_TRUE,
        condition.reason.as_deref().unwrap_or_default(),
        condition.message.as_deref().unwrap_or_default(),
        now,
    )
}

/// The first condition of `type_`, as upstream's `findConditionByType`.
pub fn find_condition_by_type<'a>(
    conditions: &'a [JobCondition],
    type_: &str,
) -> Option<&'a JobCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Sets the condition of `type_` to `status`/`reason`/`message`, as upstream's
/// `ensureJobConditionStatus`: an existing condition that differs is replaced (new times);
/// a missing one is appended unless `status` is `False` (going from nothing to false means
/// nothing). Returns whether the list changed.
pub fn ensure_job_condition_status(
    conditions: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        let differs = existing.status != status
            || existing.reason.as_deref().unwrap_or_default() != reason
            || existing.message.as_deref().unwrap_or_default() != message;
        if differs {
            *existing = new_condition(type_, status, reason, message, now);
        }
        return differs;
    }
    if status != CONDITION_FALSE {
        conditions.push(new_condition(type_, status, reason, message, now));
        return true;
    }
    false
}

/// Whether the Job completed successfully, as upstream's `IsJobSucceeded`.
pub fn is_job_succeeded(job: &Job) -> bool {
    job_conditions(job)
        .iter()
        .any(|c| c.type_ == JOB_COMPLETE && c.status == CONDITION_TRUE)
}

/// The Job's `SuccessCriteriaMet=True` condition, if any, as upstream's
/// `hasSuccessCriteriaMetCondition`.
pub fn success_criteria_met_condition(job: &Job) -> Option<&JobCondition> {
    find_condition_by_type(job_conditions(job), JOB_SUCCESS_CRITERIA_MET)
        .filter(|c| c.status == CONDITION_TRUE)
}

/// Whether `condition` is `SuccessCriteriaMet=True`, as upstream's
/// `isSuccessCriteriaMetCondition`.
pub fn is_success_criteria_met_condition(condition: Option<&JobCondition>) -> bool {
    condition.is_some_and(|c| c.type_ == JOB_SUCCESS_CRITERIA_MET && c.status == CONDITION_TRUE)
}

/// The Job's `FailureTarget=True` condition, if any (a failure decided in an earlier sync).
pub fn failure_target_condition(job: &Job) -> Option<&JobCondition> {
    find_condition_by_type(job_conditions(job), JOB_FAILURE_TARGET)
        .filter(|c| c.status == CONDITION_TRUE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::JobStatus;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("test timestamp")
    }

    fn job_with(conditions: Vec<JobCondition>) -> Job {
        Job {
            status: Some(JobStatus {
                conditions: Some(conditions),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn ensure_job_condition_status_appends_updates_and_skips() {
        let then = ts("2024-01-01T00:00:00Z");
        let now = ts("2024-01-01T00:05:00Z");
        struct Case {
            name: &'static str,
            existing: Vec<JobCondition>,
            status: &'static str,
            reason: &'static str,
            want_changed: bool,
            want: Vec<JobCondition>,
        }
        let suspended_true = new_condition(
            JOB_SUSPENDED,
            CONDITION_TRUE,
            REASON_JOB_SUSPENDED,
            MESSAGE_JOB_SUSPENDED,
            then,
        );
        let cases = [
            Case {
                name: "append true",
                existing: vec![],
                status: CONDITION_TRUE,
                reason: REASON_JOB_SUSPENDED,
                want_changed: true,
                want: vec![new_condition(
                    JOB_SUSPENDED,
                    CONDITION_TRUE,
                    REASON_JOB_SUSPENDED,
                    MESSAGE_JOB_SUSPENDED,
                    now,
                )],
            },
            Case {
                name: "no append of false",
                existing: vec![],
                status: CONDITION_FALSE,
                reason: REASON_JOB_RESUMED,
                want_changed: false,
                want: vec![],
            },
            Case {
                name: "same condition unchanged, times kept",
                existing: vec![suspended_true.clone()],
                status: CONDITION_TRUE,
                reason: REASON_JOB_SUSPENDED,
                want_changed: false,
                want: vec![suspended_true.clone()],
            },
            Case {
                name: "update to false",
                existing: vec![suspended_true.clone()],
                status: CONDITION_FALSE,
                reason: REASON_JOB_RESUMED,
                want_changed: true,
                want: vec![new_condition(
                    JOB_SUSPENDED,
                    CONDITION_FALSE,
                    REASON_JOB_RESUMED,
                    MESSAGE_JOB_SUSPENDED,
                    now,
                )],
            },
        ];
        for c in cases {
            let mut list = c.existing;
            let changed = ensure_job_condition_status(
                &mut list,
                JOB_SUSPENDED,
                c.status,
                c.reason,
                MESSAGE_JOB_SUSPENDED,
                now,
            );
            assert_eq!(changed, c.want_changed, "{}", c.name);
            assert_eq!(list, c.want, "{}", c.name);
        }
    }

    #[test]
    fn finished_only_on_true_terminal_conditions() {
        let now = ts("2024-01-01T00:00:00Z");
        let cond = |t: &str, s: &str| new_condition(t, s, "", "", now);
        assert_eq!(finished_condition(&Job::default()), None);
        assert!(!is_job_finished(&job_with(vec![cond(
            JOB_FAILURE_TARGET,
            CONDITION_TRUE
        )])));
        assert!(!is_job_finished(&job_with(vec![cond(
            JOB_COMPLETE,
            CONDITION_FALSE
        )])));
        let failed = job_with(vec![
            cond(JOB_SUSPENDED, CONDITION_TRUE),
            cond(JOB_FAILED, CONDITION_TRUE),
        ]);
        assert_eq!(finished_condition(&failed), Some(JOB_FAILED));
        assert!(is_job_finished(&failed) && !is_job_succeeded(&failed));
        let complete = job_with(vec![cond(JOB_COMPLETE, CONDITION_TRUE)]);
        assert!(is_job_succeeded(&complete));
    }

    #[test]
    fn interim_conditions_carry_over_to_terminal_ones() {
        let then = ts("2024-01-01T00:00:00Z");
        let now = ts("2024-01-01T00:01:00Z");
        let target =
            new_failure_condition(REASON_DEADLINE_EXCEEDED, MESSAGE_DEADLINE_EXCEEDED, then);
        assert_eq!(target.type_, JOB_FAILURE_TARGET);
        let failed = new_failed_condition_for_failure_target(&target, now);
        assert_eq!(failed.type_, JOB_FAILED);
        assert_eq!(failed.reason.as_deref(), Some(REASON_DEADLINE_EXCEEDED));
        assert_eq!(failed.message.as_deref(), Some(MESSAGE_DEADLINE_EXCEEDED));
        assert_eq!(failed.last_transition_time, Some(Time(now)));

        let met = new_success_condition(then);
        assert!(is_success_criteria_met_condition(Some(&met)));
        let complete = new_complete_condition_for_success_criteria(&met, now);
        assert_eq!(complete.type_, JOB_COMPLETE);
        assert_eq!(complete.reason.as_deref(), Some(REASON_COMPLETIONS_REACHED));
        assert_eq!(
            success_criteria_met_condition(&job_with(vec![met])).map(|c| c.status.as_str()),
            Some("True")
        );
    }
}
