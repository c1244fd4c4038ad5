//! Pod predicates and counters a Job sync needs (failed, ready, terminating pods), the backoff-limit and active-deadline checks, and external management, from upstream's `job_controller.go`.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::controller::is_pod_ready;
pub use kcm_machinery::controller::is_pod_terminating;

use super::pod_failure_policy::match_pod_failure_policy;
use super::{JOB_CONTROLLER_NAME, backoff_limit};

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Whether `spec.suspend` is true, as upstream's `jobSuspended`.
pub fn job_suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

/// Whether replacement pods wait for failed pods to be fully terminal (`Failed` phase) rather
/// than only being deleted: `spec.podReplacementPolicy: Failed`, or any pod failure policy,
/// as upstream's `onlyReplaceFailedPods`.
pub fn only_replace_failed_pods(job: &Job) -> bool {
    job.spec.as_ref().is_some_and(|s| {
        s.pod_replacement_policy.as_deref() == Some("Failed") || s.pod_failure_policy.is_some()
    })
}

/// Whether `status.terminating` is tracked; always with `JobPodReplacementPolicy` (and
/// `JobManagedBy`) on, as upstream's `trackTerminatingPods`.
pub fn track_terminating_pods(_job: &Job) -> bool {
    true
}

/// Whether the pod counts as failed for the Job: phase `Failed`, or (unless only failed pods
/// are replaced) being deleted without having succeeded, which catches orphans that never
/// reach `Failed`, as upstream's `isPodFailed`.
pub fn is_pod_failed(pod: &Pod, job: &Job) -> bool {
    let phase = phase(pod);
    if phase == "Failed" {
        return true;
    }
    if only_replace_failed_pods(job) {
        return false;
    }
    pod.metadata.deletion_timestamp.is_some() && phase != "Succeeded"
}

/// The terminating pods of `pods`, as upstream's `FilterTerminatingPods`.
pub fn filter_terminating_pods(pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    pods.iter()
        .filter(|p| is_pod_terminating(p))
        .cloned()
        .collect()
}

/// How many pods are terminating, as upstream's `CountTerminatingPods`.
pub fn count_terminating_pods(pods: &[Arc<Pod>]) -> i32 {
    count(pods.iter().filter(|p| is_pod_terminating(p)).count())
}

/// How many pods are ready, as upstream's `countReadyPods`.
pub fn count_ready_pods(pods: &[Arc<Pod>]) -> i32 {
    count(pods.iter().filter(|p| is_pod_ready(p)).count())
}

/// Converts a count to the API's `int32`, saturating.
pub(crate) fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Whether container restarts of running and pending pods reached `spec.backoffLimit`, for
/// `restartPolicy: OnFailure` templates only (with `backoffLimit: 0` any restart counts), as
/// upstream's `pastBackoffLimitOnFailure`.
pub fn past_backoff_limit_on_failure(job: &Job, pods: &[Arc<Pod>]) -> bool {
    let restart_policy = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.restart_policy.as_deref());
    if restart_policy != Some("OnFailure") {
        return false;
    }
    let restarts: i64 = pods
        .iter()
        .filter(|p| matches!(phase(p), "Running" | "Pending"))
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| {
            let init = s.init_container_statuses.iter().flatten();
            init.chain(s.container_statuses.iter().flatten())
        })
        .map(|c| i64::from(c.restart_count))
        .sum();
    let limit = i64::from(backoff_limit(job));
    if limit == 0 {
        return restarts > 0;
    }
    restarts >= limit
}

/// How long the Job may still run before `spec.activeDeadlineSeconds` passes (negative once
/// past), `None` without a deadline, a start time, or while suspended. The sync requeues the
/// Job after this long.
pub fn active_deadline_remaining(job: &Job, now: Timestamp) -> Option<SignedDuration> {
    let deadline = job.spec.as_ref()?.active_deadline_seconds?;
    let start = job.status.as_ref()?.start_time.as_ref()?.0;
    if job_suspended(job) {
        return None;
    }
    let allowed = SignedDuration::from_secs(deadline);
    Some(allowed.saturating_sub(now.duration_since(start)))
}

/// Whether the Job ran at least `spec.activeDeadlineSeconds` since `status.startTime` (never
/// while suspended), as upstream's `pastActiveDeadline`.
pub fn past_active_deadline(job: &Job, now: Timestamp) -> bool {
    active_deadline_remaining(job, now).is_some_and(|left| left <= SignedDuration::ZERO)
}

/// The failure message of the first failed pod matching a `FailJob` rule, as upstream's
/// `getFailJobMessage`.
pub fn fail_job_message(job: &Job, pods: &[Arc<Pod>]) -> Option<String> {
    let policy = job.spec.as_ref()?.pod_failure_policy.as_ref()?;
    pods.iter()
        .filter(|p| is_pod_failed(p, job))
        .find_map(|p| match_pod_failure_policy(Some(policy), p).job_failure_message)
}

/// The controller named in `spec.managedBy` when it is not this one (the Job is then left
/// alone), as upstream's `managedByExternalController` with `JobManagedBy` on.
pub fn managed_by_external_controller(job: &Job) -> Option<&str> {
    job.spec
        .as_ref()?
        .managed_by
        .as_deref()
        .filter(|name| *name != JOB_CONTROLLER_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobSpec, JobStatus, PodFailurePolicy};
    use k8s_openapi::api::core::v1::{ContainerStatus, PodSpec, PodStatus, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("test timestamp")
    }

    fn job(spec: JobSpec) -> Job {
        Job {
            spec: Some(spec),
            ..Default::default()
        }
    }

    fn pod_with(phase: &str, deleted: bool, restarts: &[i32], init_restarts: &[i32]) -> Arc<Pod> {
        let statuses = |r: &[i32]| {
            Some(
                r.iter()
                    .map(|&n| ContainerStatus {
                        restart_count: n,
                        ..Default::default()
                    })
                    .collect(),
            )
        };
        Arc::new(Pod {
            metadata: ObjectMeta {
                deletion_timestamp: deleted.then(|| Time(ts("2024-01-01T00:00:00Z"))),
                ..Default::default()
            },
            status: Some(PodStatus {
                phase: Some(phase.into()),
                container_statuses: statuses(restarts),
                init_container_statuses: statuses(init_restarts),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn on_failure_job(backoff_limit: i32) -> Job {
        job(JobSpec {
            backoff_limit: Some(backoff_limit),
            template: PodTemplateSpec {
                spec: Some(PodSpec {
                    restart_policy: Some("OnFailure".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    #[test]
    fn is_pod_failed_depends_on_replacement_policy() {
        struct Case {
            name: &'static str,
            job: Job,
            pod: Arc<Pod>,
            want: bool,
        }
        let replace_failed = job(JobSpec {
            pod_replacement_policy: Some("Failed".into()),
            ..Default::default()
        });
        let with_policy = job(JobSpec {
            pod_failure_policy: Some(PodFailurePolicy { rules: vec![] }),
            ..Default::default()
        });
        let cases = [
            Case {
                name: "failed phase",
                job: Job::default(),
                pod: pod_with("Failed", false, &[], &[]),
                want: true,
            },
            Case {
                name: "deleted running pod",
                job: Job::default(),
                pod: pod_with("Running", true, &[], &[]),
                want: true,
            },
            Case {
                name: "deleted succeeded pod",
                job: Job::default(),
                pod: pod_with("Succeeded", true, &[], &[]),
                want: false,
            },
            Case {
                name: "running pod",
                job: Job::default(),
                pod: pod_with("Running", false, &[], &[]),
                want: false,
            },
            Case {
                name: "deleted pod with replacement policy Failed",
                job: replace_failed,
                pod: pod_with("Running", true, &[], &[]),
                want: false,
            },
            Case {
                name: "deleted pod with pod failure policy",
                job: with_policy,
                pod: pod_with("Pending", true, &[], &[]),
                want: false,
            },
        ];
        for c in cases {
            assert_eq!(is_pod_failed(&c.pod, &c.job), c.want, "{}", c.name);
        }
    }

    #[test]
    fn past_backoff_limit_on_failure_table() {
        struct Case {
            name: &'static str,
            job: Job,
            pods: Vec<Arc<Pod>>,
            want: bool,
        }
        let cases = [
            Case {
                name: "restart policy Never is never past",
                job: job(JobSpec {
                    backoff_limit: Some(0),
                    ..Default::default()
                }),
                pods: vec![pod_with("Running", false, &[5], &[])],
                want: false,
            },
            Case {
                name: "limit 0 and one restart",
                job: on_failure_job(0),
                pods: vec![pod_with("Running", false, &[1], &[])],
                want: true,
            },
            Case {
                name: "limit 0 and no restarts",
                job: on_failure_job(0),
                pods: vec![pod_with("Running", false, &[0], &[])],
                want: false,
            },
            Case {
                name: "init and regular restarts add up",
                job: on_failure_job(3),
                pods: vec![
                    pod_with("Pending", false, &[1], &[1]),
                    pod_with("Running", false, &[1], &[]),
                ],
                want: true,
            },
            Case {
                name: "finished pods are not counted",
                job: on_failure_job(3),
                pods: vec![
                    pod_with("Failed", false, &[5], &[]),
                    pod_with("Running", false, &[2], &[]),
                ],
                want: false,
            },
        ];
        for c in cases {
            assert_eq!(
                past_backoff_limit_on_failure(&c.job, &c.pods),
                c.want,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn active_deadline() {
        let start = ts("2024-01-01T00:00:00Z");
        let mut j = job(JobSpec {
            active_deadline_seconds: Some(10),
            ..Default::default()
        });
        assert!(!past_active_deadline(&j, start), "no start time");
        j.status = Some(JobStatus {
            start_time: Some(Time(start)),
            ..Default::default()
        });
        assert_eq!(
            active_deadline_remaining(&j, ts("2024-01-01T00:00:04Z")),
            Some(SignedDuration::from_secs(6))
        );
        assert!(!past_active_deadline(&j, ts("2024-01-01T00:00:09Z")));
        assert!(past_active_deadline(&j, ts("2024-01-01T00:00:10Z")));
        if let Some(s) = j.spec.as_mut() {
            s.suspend = Some(true);
        }
        assert!(
            !past_active_deadline(&j, ts("2024-01-01T01:00:00Z")),
            "suspended"
        );
    }

    #[test]
    fn counters_and_management() {
        let ready = Arc::new(Pod {
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
        let pods = vec![
            ready,
            pod_with("Running", true, &[], &[]),
            pod_with("Failed", true, &[], &[]),
        ];
        assert_eq!(count_ready_pods(&pods), 1);
        assert_eq!(count_terminating_pods(&pods), 1);
        assert_eq!(filter_terminating_pods(&pods).len(), 1);

        let managed = |name: Option<&str>| {
            job(JobSpec {
                managed_by: name.map(Into::into),
                ..Default::default()
            })
        };
        assert_eq!(managed_by_external_controller(&managed(None)), None);
        assert_eq!(
            managed_by_external_controller(&managed(Some(JOB_CONTROLLER_NAME))),
            None
        );
        assert_eq!(
            managed_by_external_controller(&managed(Some("example.com/other"))),
            Some("example.com/other")
        );
    }
}
