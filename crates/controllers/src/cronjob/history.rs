//! Which finished jobs of a CronJob to delete so that at most `successfulJobsHistoryLimit` completed and `failedJobsHistoryLimit` failed ones remain, oldest first, as upstream's `cleanupFinishedJobs` and `removeOldestJobs`.

use std::cmp::Ordering;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::{CronJob, Job};

use crate::jobutil::{JOB_COMPLETE, JOB_FAILED, finished_condition};

/// `spec.successfulJobsHistoryLimit` when the API server defaults it.
pub const DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT: i32 = 3;
/// `spec.failedJobsHistoryLimit` when the API server defaults it.
pub const DEFAULT_FAILED_JOBS_HISTORY_LIMIT: i32 = 1;

/// The order of upstream's `byJobStartTime`: jobs that started before jobs that did not,
/// earlier starts first, then by name.
pub fn by_job_start_time(a: &Job, b: &Job) -> Ordering {
    let start = |j: &Job| {
        j.status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0)
    };
    let name = |j: &Job| j.metadata.name.clone().unwrap_or_default();
    match (start(a), start(b)) {
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (x, y) if x == y => name(a).cmp(&name(b)),
        (x, y) => x.cmp(&y),
    }
}

/// The finished jobs beyond the history limits, oldest first (completed ones, then failed
/// ones), as the deletions of upstream's `cleanupFinishedJobs`. A limit left unset keeps all
/// jobs of its kind (the API server defaults them to 3 and 1).
pub fn jobs_to_delete_for_history(cron_job: &CronJob, jobs: &[Arc<Job>]) -> Vec<Arc<Job>> {
    let spec = Some(&cron_job.spec);
    let successful_limit = spec.and_then(|s| s.successful_jobs_history_limit);
    let failed_limit = spec.and_then(|s| s.failed_jobs_history_limit);
    let finished_as = |kind: &str| -> Vec<Arc<Job>> {
        jobs.iter()
            .filter(|j| finished_condition(j) == Some(kind))
            .cloned()
            .collect()
    };
    let mut delete = Vec::new();
    for (limit, kind) in [(successful_limit, JOB_COMPLETE), (failed_limit, JOB_FAILED)] {
        if let Some(limit) = limit {
            delete.extend(oldest_beyond(finished_as(kind), limit));
        }
    }
    delete
}

/// The oldest jobs beyond `max_jobs`, as upstream's `removeOldestJobs`.
fn oldest_beyond(mut jobs: Vec<Arc<Job>>, max_jobs: i32) -> Vec<Arc<Job>> {
    let keep = usize::try_from(max_jobs).unwrap_or(0);
    if jobs.len() <= keep {
        return Vec::new();
    }
    jobs.sort_by(|a, b| by_job_start_time(a, b));
    jobs.truncate(jobs.len() - keep);
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::conditions::new_condition;
    use jiff::Timestamp;
    use k8s_openapi::api::batch::v1::{CronJobSpec, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn job(name: &str, start: Option<&str>, finished: Option<&str>) -> Arc<Job> {
        let now = ts("2020-01-01T00:00:00Z");
        Arc::new(Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            status: Some(JobStatus {
                start_time: start.map(|s| Time(ts(s))),
                conditions: finished.map(|t| vec![new_condition(t, "True", "", "", now)]),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn names(jobs: &[Arc<Job>]) -> Vec<&str> {
        jobs.iter()
            .map(|j| j.metadata.name.as_deref().unwrap_or_default())
            .collect()
    }

    #[test]
    fn by_job_start_time_table() {
        let now = Some("2018-01-01T02:03:04Z");
        let later = Some("2019-01-01T02:03:04Z");
        struct Case {
            name: &'static str,
            input: Vec<Arc<Job>>,
            expected: Vec<&'static str>,
        }
        let cases = vec![
            Case {
                name: "both have nil start times",
                input: vec![job("b", None, None), job("a", None, None)],
                expected: vec!["a", "b"],
            },
            Case {
                name: "only the first has a nil start time",
                input: vec![job("a", None, None), job("b", now, None)],
                expected: vec!["b", "a"],
            },
            Case {
                name: "only the second has a nil start time",
                input: vec![job("a", now, None), job("b", None, None)],
                expected: vec!["a", "b"],
            },
            Case {
                name: "both have non-nil, equal start time",
                input: vec![job("b", now, None), job("a", now, None)],
                expected: vec!["a", "b"],
            },
            Case {
                name: "both have non-nil, different start time",
                input: vec![job("a", later, None), job("b", now, None)],
                expected: vec!["b", "a"],
            },
        ];
        for c in cases {
            let mut jobs = c.input;
            jobs.sort_by(|a, b| by_job_start_time(a, b));
            assert_eq!(names(&jobs), c.expected, "{}", c.name);
        }
    }

    #[test]
    fn jobs_to_delete_for_history_table() {
        let jobs = vec![
            job("s1", Some("2020-01-01T01:00:00Z"), Some(JOB_COMPLETE)),
            job("s2", Some("2020-01-01T02:00:00Z"), Some(JOB_COMPLETE)),
            job("s3", Some("2020-01-01T03:00:00Z"), Some(JOB_COMPLETE)),
            job("s4", Some("2020-01-01T04:00:00Z"), Some(JOB_COMPLETE)),
            job("f1", Some("2020-01-01T01:30:00Z"), Some(JOB_FAILED)),
            job("f2", Some("2020-01-01T02:30:00Z"), Some(JOB_FAILED)),
            job("running", Some("2020-01-01T00:00:00Z"), None),
            job(
                "target",
                Some("2020-01-01T00:00:00Z"),
                Some("FailureTarget"),
            ),
        ];
        struct Case {
            name: &'static str,
            successful: Option<i32>,
            failed: Option<i32>,
            want: Vec<&'static str>,
        }
        let cases = [
            Case {
                name: "no limits keeps everything",
                successful: None,
                failed: None,
                want: vec![],
            },
            Case {
                name: "default limits",
                successful: Some(DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT),
                failed: Some(DEFAULT_FAILED_JOBS_HISTORY_LIMIT),
                want: vec!["s1", "f1"],
            },
            Case {
                name: "only a failed limit",
                successful: None,
                failed: Some(0),
                want: vec!["f1", "f2"],
            },
            Case {
                name: "zero successful",
                successful: Some(0),
                failed: Some(5),
                want: vec!["s1", "s2", "s3", "s4"],
            },
            Case {
                name: "limits above the counts",
                successful: Some(10),
                failed: Some(10),
                want: vec![],
            },
        ];
        for c in cases {
            let cj = CronJob {
                spec: CronJobSpec {
                    successful_jobs_history_limit: c.successful,
                    failed_jobs_history_limit: c.failed,
                    ..Default::default()
                },
                ..Default::default()
            };
            assert_eq!(
                names(&jobs_to_delete_for_history(&cj, &jobs)),
                c.want,
                "{}",
                c.name
            );
        }
    }
}
