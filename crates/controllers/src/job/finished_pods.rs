//! Which finished pods a sync has not counted yet, how many failures count, and which pods' tracking finalizers may be removed, from upstream's `job_controller.go`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use super::completions_or_zero;
use super::indexed::{completion_index, has_backoff_limit_per_index, is_indexed_job};
use super::pod_failure_policy::match_pod_failure_policy;
use super::status::is_pod_failed;
use super::tracking::{UncountedTerminatedPods, has_job_tracking_finalizer};

/// The pod's UID ("" when unset).
pub(crate) fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

fn is_succeeded(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
}

/// The pods that still need counting and pass `filter`, as upstream's `getValidPodsWithFilter`:
/// they carry the tracking finalizer, are neither in `uncounted` nor awaiting an expected
/// finalizer removal, and (for Indexed Jobs) have a valid index.
pub fn valid_pods_with_filter(
    job: &Job,
    pods: &[Arc<Pod>],
    uncounted: Option<&HashSet<String>>,
    expected_rm_finalizers: &HashSet<String>,
    filter: impl Fn(&Pod) -> bool,
) -> Vec<Arc<Pod>> {
    let indexed = is_indexed_job(job);
    let completions = completions_or_zero(job);
    pods.iter()
        .filter(|p| {
            let uid = pod_uid(p);
            // Pods without the finalizer, or already in the uncounted lists, are counted.
            if !has_job_tracking_finalizer(p)
                || uncounted.is_some_and(|u| u.contains(uid))
                || expected_rm_finalizers.contains(uid)
            {
                return false;
            }
            if indexed && completion_index(p).is_none_or(|ix| ix >= completions) {
                return false;
            }
            filter(p)
        })
        .cloned()
        .collect()
}

/// The newly succeeded and newly failed pods (failures as the Job sees them, see
/// [`is_pod_failed`]), as upstream's `getNewFinishedPods`.
pub fn new_finished_pods(
    job: &Job,
    pods: &[Arc<Pod>],
    uncounted: &UncountedTerminatedPods,
    expected_rm_finalizers: &HashSet<String>,
) -> (Vec<Arc<Pod>>, Vec<Arc<Pod>>) {
    let succeeded = valid_pods_with_filter(
        job,
        pods,
        Some(&uncounted.succeeded),
        expected_rm_finalizers,
        is_succeeded,
    );
    let failed = valid_pods_with_filter(
        job,
        pods,
        Some(&uncounted.failed),
        expected_rm_finalizers,
        |p| is_pod_failed(p, job),
    );
    (succeeded, failed)
}

/// How many of `failed_pods` count toward the backoff limit (those not matching an `Ignore`
/// rule), as upstream's `nonIgnoredFailedPodsCount`.
pub fn non_ignored_failed_pods_count(job: &Job, failed_pods: &[Arc<Pod>]) -> i32 {
    let policy = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref());
    let counted = failed_pods
        .iter()
        .filter(|p| policy.is_none_or(|pol| match_pod_failure_policy(Some(pol), p).count_failed))
        .count();
    i32::try_from(counted).unwrap_or(i32::MAX)
}

/// Whether the pod's tracking finalizer may be removed now, as upstream's
/// `canRemoveFinalizer`: always when the Job is being deleted or has a finishing condition or
/// the pod succeeded; for a failed pod, unless (with `backoffLimitPerIndex`) it is the last
/// failed pod of its index, kept until its replacement carries the failure count over.
pub fn can_remove_finalizer(
    job: &Job,
    pod: &Pod,
    has_finished_condition: bool,
    consider_pod_failed: bool,
    pods_with_delayed_deletion_per_index: &HashMap<i32, Arc<Pod>>,
) -> bool {
    if job.metadata.deletion_timestamp.is_some() || has_finished_condition || is_succeeded(pod) {
        return true;
    }
    if !consider_pod_failed {
        return false;
    }
    if has_backoff_limit_per_index(job)
        && let Some(index) = completion_index(pod)
        && let Some(delayed) = pods_with_delayed_deletion_per_index.get(&index)
        && pod_uid(delayed) == pod_uid(pod)
    {
        tracing::trace!(
            pod = pod.metadata.name.as_deref().unwrap_or_default(),
            "delaying pod finalizer removal to await for pod recreation within the index"
        );
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::indexed::JOB_COMPLETION_INDEX_ANNOTATION;
    use crate::job::tracking::JOB_TRACKING_FINALIZER;
    use k8s_openapi::api::batch::v1::{
        JobSpec, PodFailurePolicy, PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
    };
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use std::collections::BTreeMap;

    fn pod(uid: &str, phase: &str, index: Option<&str>, finalizer: bool) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                name: Some(uid.into()),
                annotations: index.map(|i| {
                    BTreeMap::from([(JOB_COMPLETION_INDEX_ANNOTATION.to_owned(), i.to_owned())])
                }),
                finalizers: finalizer.then(|| vec![JOB_TRACKING_FINALIZER.to_owned()]),
                ..Default::default()
            },
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn uids(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter().map(|p| pod_uid(p)).collect()
    }

    fn set(v: &[&str]) -> HashSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn new_finished_pods_skip_counted_and_expected() {
        struct Case {
            name: &'static str,
            job: Job,
            pods: Vec<Arc<Pod>>,
            uncounted: UncountedTerminatedPods,
            expected: HashSet<String>,
            want_succeeded: Vec<&'static str>,
            want_failed: Vec<&'static str>,
        }
        let indexed = Job {
            spec: Some(JobSpec {
                completion_mode: Some("Indexed".into()),
                completions: Some(2),
                ..Default::default()
            }),
            ..Default::default()
        };
        let cases = vec![
            Case {
                name: "finished pods with finalizers",
                job: Job::default(),
                pods: vec![
                    pod("a", "Succeeded", None, true),
                    pod("b", "Failed", None, true),
                    pod("c", "Running", None, true),
                ],
                uncounted: UncountedTerminatedPods::default(),
                expected: set(&[]),
                want_succeeded: vec!["a"],
                want_failed: vec!["b"],
            },
            Case {
                name: "without finalizer, uncounted or expected removal are skipped",
                job: Job::default(),
                pods: vec![
                    pod("a", "Succeeded", None, false),
                    pod("b", "Succeeded", None, true),
                    pod("c", "Failed", None, true),
                    pod("d", "Failed", None, true),
                ],
                uncounted: UncountedTerminatedPods {
                    succeeded: set(&["b"]),
                    failed: set(&[]),
                },
                expected: set(&["c"]),
                want_succeeded: vec![],
                want_failed: vec!["d"],
            },
            Case {
                name: "indexed pods need a valid index",
                job: indexed,
                pods: vec![
                    pod("a", "Succeeded", Some("0"), true),
                    pod("b", "Succeeded", Some("2"), true),
                    pod("c", "Failed", None, true),
                    pod("d", "Failed", Some("1"), true),
                ],
                uncounted: UncountedTerminatedPods::default(),
                expected: set(&[]),
                want_succeeded: vec!["a"],
                want_failed: vec!["d"],
            },
        ];
        for c in cases {
            let (succeeded, failed) = new_finished_pods(&c.job, &c.pods, &c.uncounted, &c.expected);
            assert_eq!(uids(&succeeded), c.want_succeeded, "{}", c.name);
            assert_eq!(uids(&failed), c.want_failed, "{}", c.name);
        }
    }

    #[test]
    fn ignored_failures_are_not_counted() {
        let policy = PodFailurePolicy {
            rules: vec![PodFailurePolicyRule {
                action: "Ignore".into(),
                on_exit_codes: None,
                on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                    type_: "DisruptionTarget".into(),
                    status: Some("True".into()),
                }]),
            }],
        };
        let job = Job {
            spec: Some(JobSpec {
                pod_failure_policy: Some(policy),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut disrupted = pod("a", "Failed", None, true);
        if let Some(s) = Arc::make_mut(&mut disrupted).status.as_mut() {
            s.conditions = Some(vec![PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                ..Default::default()
            }]);
        }
        let failed = vec![disrupted, pod("b", "Failed", None, true)];
        assert_eq!(non_ignored_failed_pods_count(&job, &failed), 1);
        assert_eq!(non_ignored_failed_pods_count(&Job::default(), &failed), 2);
    }

    #[test]
    fn can_remove_finalizer_table() {
        let per_index = Job {
            spec: Some(JobSpec {
                completion_mode: Some("Indexed".into()),
                completions: Some(3),
                backoff_limit_per_index: Some(1),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut deleting = per_index.clone();
        deleting.metadata.deletion_timestamp =
            Some(Time("2024-01-01T00:00:00Z".parse().expect("timestamp")));
        let failed = pod("f", "Failed", Some("1"), true);
        let delayed = HashMap::from([(1, failed.clone())]);
        struct Case {
            name: &'static str,
            job: Job,
            pod: Arc<Pod>,
            finished: bool,
            failed: bool,
            want: bool,
        }
        let cases = vec![
            Case {
                name: "succeeded pod",
                job: per_index.clone(),
                pod: pod("s", "Succeeded", Some("0"), true),
                finished: false,
                failed: false,
                want: true,
            },
            Case {
                name: "running pod",
                job: per_index.clone(),
                pod: pod("r", "Running", Some("0"), true),
                finished: false,
                failed: false,
                want: false,
            },
            Case {
                name: "running pod of a finished job",
                job: per_index.clone(),
                pod: pod("r", "Running", Some("0"), true),
                finished: true,
                failed: false,
                want: true,
            },
            Case {
                name: "running pod of a deleted job",
                job: deleting,
                pod: pod("r", "Running", Some("0"), true),
                finished: false,
                failed: false,
                want: true,
            },
            Case {
                name: "failed pod awaiting its replacement",
                job: per_index.clone(),
                pod: failed.clone(),
                finished: false,
                failed: true,
                want: false,
            },
            Case {
                name: "other failed pod of the index",
                job: per_index.clone(),
                pod: pod("g", "Failed", Some("1"), true),
                finished: false,
                failed: true,
                want: true,
            },
            Case {
                name: "failed pod without per-index limit",
                job: Job::default(),
                pod: failed.clone(),
                finished: false,
                failed: true,
                want: true,
            },
        ];
        for c in cases {
            assert_eq!(
                can_remove_finalizer(&c.job, &c.pod, c.finished, c.failed, &delayed),
                c.want,
                "{}",
                c.name
            );
        }
    }
}
