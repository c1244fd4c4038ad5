//! What the Job, CronJob and TTL-after-finished controllers all read of a Job: its terminal condition types and whether it finished, as upstream's `pkg/controller/job/util` (`FinishedCondition`, `IsJobFinished`).

use k8s_openapi::api::batch::v1::{Job, JobCondition};

/// The Job completed, as batch/v1 `JobComplete`.
pub const JOB_COMPLETE: &str = "Complete";
/// The Job failed, as batch/v1 `JobFailed`.
pub const JOB_FAILED: &str = "Failed";
/// `True`, as core/v1 `ConditionTrue`.
pub const CONDITION_TRUE: &str = "True";

/// The Job's conditions (none when the status is unset).
pub fn job_conditions(job: &Job) -> &[JobCondition] {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
}

/// The type of the Job's terminal condition (`Complete` or `Failed` with status `True`), if
/// any, as upstream's `FinishedCondition` (and the CronJob controller's `getFinishedStatus`).
pub fn finished_condition(job: &Job) -> Option<&str> {
    job_conditions(job)
        .iter()
        .find(|c| (c.type_ == JOB_COMPLETE || c.type_ == JOB_FAILED) && c.status == CONDITION_TRUE)
        .map(|c| c.type_.as_str())
}

/// Whether the Job finished, successfully or not, as upstream's `IsJobFinished`.
pub fn is_job_finished(job: &Job) -> bool {
    finished_condition(job).is_some()
}

/// `namespace/name` of a Job, for log lines.
pub fn job_key(job: &Job) -> String {
    format!(
        "{}/{}",
        job.metadata.namespace.as_deref().unwrap_or_default(),
        job.metadata.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::JobStatus;

    use super::*;

    fn job_with(conditions: &[(&str, &str)]) -> Job {
        Job {
            status: Some(JobStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(type_, status)| JobCondition {
                            type_: (*type_).to_owned(),
                            status: (*status).to_owned(),
                            ..JobCondition::default()
                        })
                        .collect(),
                ),
                ..JobStatus::default()
            }),
            ..Job::default()
        }
    }

    #[test]
    fn only_a_true_complete_or_failed_condition_finishes_a_job() {
        assert_eq!(finished_condition(&Job::default()), None);
        assert_eq!(
            finished_condition(&job_with(&[("Complete", "True")])),
            Some("Complete")
        );
        assert_eq!(
            finished_condition(&job_with(&[("Failed", "True")])),
            Some("Failed")
        );
        assert!(!is_job_finished(&job_with(&[("Complete", "False")])));
        assert!(!is_job_finished(&job_with(&[
            ("FailureTarget", "True"),
            ("SuccessCriteriaMet", "True")
        ])));
        assert!(is_job_finished(&job_with(&[
            ("Suspended", "True"),
            ("Failed", "True")
        ])));
    }
}
