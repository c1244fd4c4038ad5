//! Indexed Jobs: a pod's completion index, the succeeded and failed indexes, the first pending indexes to create, duplicated indexes to remove, per-index failure counts, and the names of indexed pods, as upstream's `indexed_job_utils.go`.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodTemplateSpec,
};
use kcm_machinery::controller::ranking::sort_active_pods;

use super::intervals::{OrderedIntervals, go_atoi};
use super::pod_failure_policy::{PodFailurePolicyAction, match_pod_failure_policy};
use super::status::{filter_terminating_pods, is_pod_failed, only_replace_failed_pods};
use super::tracking::has_job_tracking_finalizer;
use super::{completions_or_zero, job_key};

/// The annotation (and, with `PodIndexLabel`, label) holding a pod's completion index, as
/// batch/v1 `JobCompletionIndexAnnotation`.
pub const JOB_COMPLETION_INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
/// The annotation counting the failed pods of an index so far (with `backoffLimitPerIndex`),
/// as batch/v1 `JobIndexFailureCountAnnotation`.
pub const JOB_INDEX_FAILURE_COUNT_ANNOTATION: &str = "batch.kubernetes.io/job-index-failure-count";
/// The annotation counting the ignored failures of an index so far, as batch/v1
/// `JobIndexIgnoredFailureCountAnnotation`.
pub const JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION: &str =
    "batch.kubernetes.io/job-index-ignored-failure-count";
/// The environment variable through which containers of Indexed Jobs learn their index.
pub const COMPLETION_INDEX_ENV_NAME: &str = "JOB_COMPLETION_INDEX";
/// The longest `generateName` the API server keeps whole (63 minus the 5 random characters),
/// as apiserver `names.MaxGeneratedNameLength`.
pub const MAX_GENERATED_NAME_LENGTH: usize = 58;

/// Whether `spec.completionMode` is `Indexed`, as upstream's `isIndexedJob`.
pub fn is_indexed_job(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed")
}

/// Whether the Job limits failures per index (`spec.backoffLimitPerIndex` set), as upstream's
/// `hasBackoffLimitPerIndex` with the gate on.
pub fn has_backoff_limit_per_index(job: &Job) -> bool {
    job.spec
        .as_ref()
        .is_some_and(|s| s.backoff_limit_per_index.is_some())
}

/// `Indexed` or `NonIndexed` (the `completion_mode` metrics label), as upstream's
/// `getCompletionMode`.
pub fn completion_mode_str(job: &Job) -> &'static str {
    if is_indexed_job(job) {
        "Indexed"
    } else {
        "NonIndexed"
    }
}

/// The pod's completion index from its annotation; `None` when missing, not a number,
/// negative, or beyond `i32` (such a pod has no valid index for any Job), as upstream's
/// `getCompletionIndex`.
pub fn completion_index(pod: &Pod) -> Option<i32> {
    let value = pod
        .metadata
        .annotations
        .as_ref()?
        .get(JOB_COMPLETION_INDEX_ANNOTATION)?;
    go_atoi(value)
        .filter(|&i| i >= 0)
        .and_then(|i| i32::try_from(i).ok())
}

/// The pod's index if it is valid for a Job of `completions`.
fn valid_index(pod: &Pod, completions: i32) -> Option<i32> {
    completion_index(pod).filter(|&ix| ix < completions)
}

/// The distinct completion indexes of `pods`, in increasing order, as upstream's `getIndexes`.
pub fn indexes_of(pods: &[Arc<Pod>]) -> Vec<i32> {
    let set: BTreeSet<i32> = pods.iter().filter_map(|p| completion_index(p)).collect();
    set.into_iter().collect()
}

/// The succeeded indexes before this sync (from `status.completedIndexes`) and after it (with
/// the succeeded pods that still carry the tracking finalizer, i.e. are not counted yet), as
/// upstream's `calculateSucceededIndexes`.
pub fn calculate_succeeded_indexes(
    job: &Job,
    pods: &[Arc<Pod>],
) -> (OrderedIntervals, OrderedIntervals) {
    let completions = completions_or_zero(job);
    let completed = job
        .status
        .as_ref()
        .and_then(|s| s.completed_indexes.as_deref())
        .unwrap_or_default();
    let prev = OrderedIntervals::parse(completed, completions);
    let new: BTreeSet<i32> = pods
        .iter()
        .filter(|p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
                && has_job_tracking_finalizer(p)
        })
        .filter_map(|p| valid_index(p, completions))
        .collect();
    let all = prev.with_ordered_indexes(&new.into_iter().collect::<Vec<_>>());
    (prev, all)
}

/// The failed indexes: those in `status.failedIndexes` and those whose latest pod failed for
/// good since the last sync, as upstream's `calculateFailedIndexes`.
pub fn calculate_failed_indexes(job: &Job, pods: &[Arc<Pod>]) -> OrderedIntervals {
    let completions = completions_or_zero(job);
    let prev = job
        .status
        .as_ref()
        .and_then(|s| s.failed_indexes.as_deref())
        .map(|s| OrderedIntervals::parse(s, completions))
        .unwrap_or_default();
    let new: BTreeSet<i32> = pods
        .iter()
        .filter(|p| has_job_tracking_finalizer(p) && is_index_failed(job, p))
        .filter_map(|p| valid_index(p, completions))
        .collect();
    prev.with_ordered_indexes(&new.into_iter().collect::<Vec<_>>())
}

/// Whether the pod's failure fails its index: it matched a `FailIndex` rule, or its counted
/// failure reaches `spec.backoffLimitPerIndex`, as upstream's `isIndexFailed`.
pub fn is_index_failed(job: &Job, pod: &Pod) -> bool {
    if !is_pod_failed(pod, job) {
        return false;
    }
    let policy = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref());
    let counted = match policy {
        Some(policy) => {
            let matched = match_pod_failure_policy(Some(policy), pod);
            if matched.action == Some(PodFailurePolicyAction::FailIndex) {
                return true;
            }
            matched.count_failed
        }
        None => true,
    };
    let limit = job
        .spec
        .as_ref()
        .and_then(|s| s.backoff_limit_per_index)
        .unwrap_or(0);
    counted && index_failure_count(pod) >= limit
}

/// Up to `count` indexes below `completions` that have no active pod and are neither
/// succeeded nor failed (nor, when only failed pods are replaced, held by a terminating pod),
/// lowest first, as upstream's `firstPendingIndexes`.
pub fn first_pending_indexes(
    job: &Job,
    active_pods: &[Arc<Pod>],
    pods: &[Arc<Pod>],
    succeeded_indexes: &OrderedIntervals,
    failed_indexes: Option<&OrderedIntervals>,
    count: i32,
    completions: i32,
) -> Vec<i32> {
    if count <= 0 {
        return Vec::new();
    }
    let mut non_pending = succeeded_indexes.with_ordered_indexes(&indexes_of(active_pods));
    if only_replace_failed_pods(job) {
        let terminating = indexes_of(&filter_terminating_pods(pods));
        non_pending = non_pending.with_ordered_indexes(&terminating);
    }
    if let Some(failed) = failed_indexes {
        non_pending = non_pending.merge(failed);
    }
    let want = usize::try_from(count).unwrap_or(0);
    let mut result = Vec::with_capacity(want.min(1024));
    // Bounded by the number of intervals and by `count`.
    let mut candidate: i32 = 0;
    for interval in non_pending.as_slice() {
        while candidate < completions && result.len() < want && candidate < interval.first {
            result.push(candidate);
            candidate += 1;
        }
        if candidate <= interval.last {
            candidate = interval.last.saturating_add(1);
        }
    }
    while candidate < completions && result.len() < want {
        result.push(candidate);
        candidate += 1;
    }
    result
}

/// Splits active pods into those to remove and those to keep, as upstream's
/// `appendDuplicatedIndexPodsForRemoval`: pods without a valid index and pods at or beyond
/// `completions` are removed; of the pods sharing an index, all but the one ranked last by
/// `ActivePods` (the most advanced) are removed.
pub fn append_duplicated_index_pods_for_removal(
    pods: &[Arc<Pod>],
    completions: i32,
) -> (Vec<Arc<Pod>>, Vec<Arc<Pod>>) {
    let mut sorted = pods.to_vec();
    // Unknown indexes sort first, as upstream's -1 does.
    sorted.sort_by_key(|p| completion_index(p).map_or(-1, i64::from));
    let (mut rm, mut left) = (Vec::new(), Vec::new());
    let mut group_start = 0;
    let mut group_index: Option<i32> = None;
    let mut looped = 0;
    for (i, pod) in sorted.iter().enumerate() {
        let index = completion_index(pod);
        if index.is_some_and(|ix| ix >= completions) {
            rm.extend_from_slice(&sorted[i..]);
            break;
        }
        if index != group_index {
            split_group(&mut rm, &mut left, &sorted[group_start..i], group_index);
            group_start = i;
            group_index = index;
        }
        looped += 1;
    }
    split_group(
        &mut rm,
        &mut left,
        &sorted[group_start..looped],
        group_index,
    );
    (rm, left)
}

/// Upstream's `appendPodsWithSameIndexForRemovalAndRemaining`.
fn split_group(
    rm: &mut Vec<Arc<Pod>>,
    left: &mut Vec<Arc<Pod>>,
    group: &[Arc<Pod>],
    index: Option<i32>,
) {
    if index.is_none() {
        rm.extend_from_slice(group);
        return;
    }
    let mut group = group.to_vec();
    sort_active_pods(&mut group);
    if let Some(keep) = group.pop() {
        rm.extend(group);
        left.push(keep);
    }
}

/// A failure-count annotation as a non-negative `int32`, 0 when missing or not one (a user
/// may have written anything there), as upstream's `parseInt32`.
fn annotation_count(pod: &Pod, key: &str) -> i32 {
    let Some(value) = pod.metadata.annotations.as_ref().and_then(|a| a.get(key)) else {
        return 0;
    };
    match go_atoi(value).map(i32::try_from) {
        Some(Ok(n)) if n >= 0 => n,
        _ => {
            tracing::debug!(
                annotation = key,
                value,
                "invalid index failure count, using 0"
            );
            0
        }
    }
}

/// The index's counted failures before this pod, as upstream's `getIndexFailureCount`.
pub fn index_failure_count(pod: &Pod) -> i32 {
    annotation_count(pod, JOB_INDEX_FAILURE_COUNT_ANNOTATION)
}

/// The index's ignored failures before this pod.
pub fn index_ignored_failure_count(pod: &Pod) -> i32 {
    annotation_count(pod, JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION)
}

/// Counted plus ignored failures, as upstream's `getIndexAbsoluteFailureCount`.
pub fn index_absolute_failure_count(pod: &Pod) -> i32 {
    index_failure_count(pod).saturating_add(index_ignored_failure_count(pod))
}

/// The failure and ignored-failure counts for the pod replacing `pod_being_replaced` (the
/// last failed pod of the index), as upstream's `getNewIndexFailureCounts`.
pub fn new_index_failure_counts(job: &Job, pod_being_replaced: Option<&Pod>) -> (i32, i32) {
    let Some(replaced) = pod_being_replaced else {
        return (0, 0);
    };
    let (mut failures, mut ignored) = (
        index_failure_count(replaced),
        index_ignored_failure_count(replaced),
    );
    let policy = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref());
    let counted = policy.is_none_or(|p| match_pod_failure_policy(Some(p), replaced).count_failed);
    if counted {
        failures = failures.saturating_add(1);
    } else {
        ignored = ignored.saturating_add(1);
    }
    (failures, ignored)
}

/// The `generateName` of a pod for `index`: `NAME-INDEX-`, the name cut so the whole fits
/// [`MAX_GENERATED_NAME_LENGTH`], as upstream's `podGenerateNameWithIndex`.
pub fn pod_generate_name_with_index(job_name: &str, index: i32) -> String {
    let suffix = format!("-{index}-");
    let prefix = format!("{job_name}{suffix}");
    if prefix.len() <= MAX_GENERATED_NAME_LENGTH {
        return prefix;
    }
    // Job names are DNS subdomains (ASCII); cut on a char boundary regardless.
    let mut cut = MAX_GENERATED_NAME_LENGTH.saturating_sub(suffix.len());
    while !job_name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &job_name[..cut])
}

/// The hostname of the pod for `index`: `NAME-INDEX`.
pub fn pod_hostname(job_name: &str, index: i32) -> String {
    format!("{job_name}-{index}")
}

/// Adds `JOB_COMPLETION_INDEX` (from the pod's index label) to every container and init
/// container that does not set it, as upstream's `addCompletionIndexEnvVariables` with
/// `PodIndexLabel` on.
pub fn add_completion_index_env_variables(template: &mut PodTemplateSpec) {
    let Some(spec) = template.spec.as_mut() else {
        return;
    };
    let init = spec.init_containers.iter_mut().flatten();
    for container in init.chain(spec.containers.iter_mut()) {
        add_completion_index_env_variable(container);
    }
}

fn add_completion_index_env_variable(container: &mut Container) {
    let env = container.env.get_or_insert_with(Vec::new);
    if env.iter().any(|v| v.name == COMPLETION_INDEX_ENV_NAME) {
        return;
    }
    env.push(EnvVar {
        name: COMPLETION_INDEX_ENV_NAME.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: format!("metadata.labels['{JOB_COMPLETION_INDEX_ANNOTATION}']"),
            }),
            ..Default::default()
        }),
    });
}

/// The template of the pod for `index`, from the Job's template already prepared for
/// creation (env variables, tracking finalizer): the index annotation and label, the
/// hostname, and with `backoffLimitPerIndex` the failure counts carried over from
/// `pod_being_replaced`. Returns it with the pod's `generateName`. Upstream does this inline
/// in `manageJob`.
pub fn pod_template_for_index(
    job: &Job,
    template: &PodTemplateSpec,
    index: i32,
    pod_being_replaced: Option<&Pod>,
) -> (PodTemplateSpec, String) {
    let name = job.metadata.name.as_deref().unwrap_or_default();
    let mut template = template.clone();
    let meta = template.metadata.get_or_insert_with(Default::default);
    let index_text = index.to_string();
    let annotations = meta.annotations.get_or_insert_with(Default::default);
    annotations.insert(
        JOB_COMPLETION_INDEX_ANNOTATION.to_owned(),
        index_text.clone(),
    );
    if has_backoff_limit_per_index(job) {
        let (failures, ignored) = new_index_failure_counts(job, pod_being_replaced);
        annotations.insert(
            JOB_INDEX_FAILURE_COUNT_ANNOTATION.to_owned(),
            failures.to_string(),
        );
        if ignored > 0 {
            annotations.insert(
                JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION.to_owned(),
                ignored.to_string(),
            );
        }
    }
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(JOB_COMPLETION_INDEX_ANNOTATION.to_owned(), index_text);
    template.spec.get_or_insert_with(Default::default).hostname = Some(pod_hostname(name, index));
    tracing::trace!(job = %job_key(job), index, "pod template for index");
    (template, pod_generate_name_with_index(name, index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::intervals::Interval;
    use crate::job::tracking::JOB_TRACKING_FINALIZER;
    use k8s_openapi::api::batch::v1::{
        JobSpec, JobStatus, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
        PodFailurePolicyRule,
    };
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStatus, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use std::collections::BTreeMap;

    const NO_INDEX: &str = "-";

    /// Upstream's `hollowPodsWithIndexPhase`: pods with an index annotation (unless `-`), a
    /// phase, and the tracking finalizer.
    fn pods(descs: &[(&str, &str)]) -> Vec<Arc<Pod>> {
        descs
            .iter()
            .map(|(index, phase)| {
                let annotations = (*index != NO_INDEX).then(|| {
                    BTreeMap::from([(
                        JOB_COMPLETION_INDEX_ANNOTATION.to_owned(),
                        index.to_string(),
                    )])
                });
                Arc::new(Pod {
                    metadata: ObjectMeta {
                        annotations,
                        finalizers: Some(vec![JOB_TRACKING_FINALIZER.to_owned()]),
                        ..Default::default()
                    },
                    status: Some(PodStatus {
                        phase: Some(phase.to_string()),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            })
            .collect()
    }

    fn index_phases(pods: &[Arc<Pod>]) -> Vec<(String, String)> {
        pods.iter()
            .map(|p| {
                let index = p
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(JOB_COMPLETION_INDEX_ANNOTATION).cloned())
                    .unwrap_or_else(|| NO_INDEX.to_owned());
                let phase = p
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_default();
                (index, phase)
            })
            .collect()
    }

    fn owned(descs: &[(&str, &str)]) -> Vec<(String, String)> {
        descs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn ivs(v: &[(i32, i32)]) -> OrderedIntervals {
        v.iter()
            .map(|&(a, b)| Interval::new(a, b))
            .collect::<Vec<_>>()
            .into()
    }

    fn indexed_job(completions: i32) -> Job {
        Job {
            spec: Some(JobSpec {
                completion_mode: Some("Indexed".into()),
                completions: Some(completions),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn completion_index_parsing() {
        let one = |v: &str| pods(&[(v, "Running")]).remove(0);
        assert_eq!(completion_index(&one("3")), Some(3));
        assert_eq!(completion_index(&one("+3")), Some(3));
        assert_eq!(completion_index(&one("-2")), None);
        assert_eq!(completion_index(&one("invalid")), None);
        assert_eq!(completion_index(&one("99999999999")), None);
        assert_eq!(completion_index(&one(NO_INDEX)), None);
    }

    #[test]
    fn calculate_succeeded_indexes_table() {
        struct Case {
            name: &'static str,
            prev_succeeded: &'static str,
            pods: Vec<(&'static str, &'static str)>,
            completions: i32,
            want_status_intervals: OrderedIntervals,
            want_intervals: OrderedIntervals,
        }
        let cases = vec![
            Case {
                name: "one index",
                prev_succeeded: "",
                pods: vec![("1", "Succeeded")],
                completions: 2,
                want_status_intervals: ivs(&[]),
                want_intervals: ivs(&[(1, 1)]),
            },
            Case {
                name: "two separate",
                prev_succeeded: "",
                pods: vec![
                    ("2", "Failed"),
                    ("5", "Succeeded"),
                    ("5", "Succeeded"),
                    ("10", "Failed"),
                    ("10", "Succeeded"),
                ],
                completions: 11,
                want_status_intervals: ivs(&[]),
                want_intervals: ivs(&[(5, 5), (10, 10)]),
            },
            Case {
                name: "two intervals",
                prev_succeeded: "",
                pods: vec![
                    ("0", "Running"),
                    ("1", "Pending"),
                    ("2", "Succeeded"),
                    ("3", "Succeeded"),
                    ("5", "Succeeded"),
                    ("6", "Succeeded"),
                    ("7", "Succeeded"),
                ],
                completions: 8,
                want_status_intervals: ivs(&[]),
                want_intervals: ivs(&[(2, 3), (5, 7)]),
            },
            Case {
                name: "one index and one interval",
                prev_succeeded: "",
                pods: vec![
                    ("0", "Succeeded"),
                    ("1", "Failed"),
                    ("2", "Succeeded"),
                    ("3", "Succeeded"),
                    ("4", "Succeeded"),
                    ("5", "Succeeded"),
                    (NO_INDEX, "Succeeded"),
                    ("-2", "Succeeded"),
                ],
                completions: 6,
                want_status_intervals: ivs(&[]),
                want_intervals: ivs(&[(0, 0), (2, 5)]),
            },
            Case {
                name: "out of range",
                prev_succeeded: "",
                pods: vec![
                    ("0", "Succeeded"),
                    ("1", "Succeeded"),
                    ("2", "Succeeded"),
                    ("3", "Failed"),
                    ("4", "Succeeded"),
                    ("5", "Succeeded"),
                    (NO_INDEX, "Succeeded"),
                    ("-2", "Succeeded"),
                ],
                completions: 5,
                want_status_intervals: ivs(&[]),
                want_intervals: ivs(&[(0, 2), (4, 4)]),
            },
            Case {
                name: "prev interval out of range",
                prev_succeeded: "0-5,8-10",
                pods: vec![],
                completions: 8,
                want_status_intervals: ivs(&[(0, 5)]),
                want_intervals: ivs(&[(0, 5)]),
            },
            Case {
                name: "prev and new separate",
                prev_succeeded: "0,4,5,10-12",
                pods: vec![("2", "Succeeded"), ("7", "Succeeded"), ("8", "Succeeded")],
                completions: 13,
                want_status_intervals: ivs(&[(0, 0), (4, 5), (10, 12)]),
                want_intervals: ivs(&[(0, 0), (2, 2), (4, 5), (7, 8), (10, 12)]),
            },
            Case {
                name: "corrupted interval",
                prev_succeeded: "0,1-foo,bar",
                pods: vec![("3", "Succeeded")],
                completions: 4,
                want_status_intervals: ivs(&[(0, 0)]),
                want_intervals: ivs(&[(0, 0), (3, 3)]),
            },
        ];
        for c in cases {
            let mut job = indexed_job(c.completions);
            job.status = Some(JobStatus {
                completed_indexes: Some(c.prev_succeeded.into()),
                ..Default::default()
            });
            let (prev, all) = calculate_succeeded_indexes(&job, &pods(&c.pods));
            assert_eq!(prev, c.want_status_intervals, "{}", c.name);
            assert_eq!(all, c.want_intervals, "{}", c.name);
        }
    }

    #[test]
    fn succeeded_pods_without_finalizer_are_already_counted() {
        let job = indexed_job(4);
        let mut counted = pods(&[("1", "Succeeded")]);
        Arc::make_mut(&mut counted[0]).metadata.finalizers = None;
        let (_, all) = calculate_succeeded_indexes(&job, &counted);
        assert!(all.is_empty());
    }

    #[test]
    fn calculate_failed_indexes_table() {
        fn job_with(
            prev_failed: Option<&str>,
            limit: i32,
            policy: Option<PodFailurePolicy>,
        ) -> Job {
            let mut job = indexed_job(5);
            if let Some(spec) = job.spec.as_mut() {
                spec.backoff_limit_per_index = Some(limit);
                spec.pod_failure_policy = policy;
            }
            job.status = Some(JobStatus {
                failed_indexes: prev_failed.map(Into::into),
                ..Default::default()
            });
            job
        }
        fn with_count(pod: Arc<Pod>, count: &str, exit_code: i32) -> Arc<Pod> {
            let mut pod = pod;
            let p = Arc::make_mut(&mut pod);
            if let Some(a) = p.metadata.annotations.as_mut() {
                a.insert(JOB_INDEX_FAILURE_COUNT_ANNOTATION.into(), count.into());
            }
            if let Some(s) = p.status.as_mut() {
                s.container_statuses = Some(vec![ContainerStatus {
                    state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            exit_code,
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]);
            }
            pod
        }
        let fail_index_on_42 = PodFailurePolicy {
            rules: vec![PodFailurePolicyRule {
                action: "FailIndex".into(),
                on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                    container_name: None,
                    operator: "In".into(),
                    values: vec![42],
                }),
                on_pod_conditions: None,
            }],
        };
        struct Case {
            name: &'static str,
            job: Job,
            pods: Vec<Arc<Pod>>,
            want: OrderedIntervals,
        }
        let failed = |ix: &str, count: &str, code: i32| {
            with_count(pods(&[(ix, "Failed")]).remove(0), count, code)
        };
        let cases = vec![
            Case {
                name: "failure below the limit does not fail the index",
                job: job_with(None, 1, None),
                pods: vec![failed("1", "0", 1)],
                want: ivs(&[]),
            },
            Case {
                name: "failure at the limit fails the index",
                job: job_with(None, 1, None),
                pods: vec![failed("1", "1", 1), failed("3", "2", 1)],
                want: ivs(&[(1, 1), (3, 3)]),
            },
            Case {
                name: "previous failed indexes are kept and merged",
                job: job_with(Some("0,2"), 0, None),
                pods: vec![failed("1", "0", 1)],
                want: ivs(&[(0, 2)]),
            },
            Case {
                name: "FailIndex rule fails the index at once",
                job: job_with(None, 3, Some(fail_index_on_42.clone())),
                pods: vec![failed("4", "0", 42), failed("2", "0", 1)],
                want: ivs(&[(4, 4)]),
            },
            Case {
                name: "out of range indexes are ignored",
                job: job_with(None, 0, None),
                pods: vec![failed("7", "0", 1)],
                want: ivs(&[]),
            },
        ];
        for c in cases {
            assert_eq!(
                calculate_failed_indexes(&c.job, &c.pods),
                c.want,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn first_pending_indexes_table() {
        struct Case {
            name: &'static str,
            cnt: i32,
            completions: i32,
            active_pods: Vec<(&'static str, &'static str)>,
            succeeded_indexes: OrderedIntervals,
            failed_indexes: Option<OrderedIntervals>,
            want: Vec<i32>,
        }
        let cases = vec![
            Case {
                name: "cnt greater than completions",
                cnt: 5,
                completions: 3,
                active_pods: vec![],
                succeeded_indexes: ivs(&[]),
                failed_indexes: None,
                want: vec![0, 1, 2],
            },
            Case {
                name: "cnt less than completions",
                cnt: 2,
                completions: 5,
                active_pods: vec![],
                succeeded_indexes: ivs(&[]),
                failed_indexes: None,
                want: vec![0, 1],
            },
            Case {
                name: "first pods active",
                cnt: 3,
                completions: 10,
                active_pods: vec![("0", "Running"), ("1", "Pending")],
                succeeded_indexes: ivs(&[]),
                failed_indexes: None,
                want: vec![2, 3, 4],
            },
            Case {
                name: "last pods active or succeeded",
                cnt: 6,
                completions: 6,
                active_pods: vec![("6", "Pending")],
                succeeded_indexes: ivs(&[(4, 5)]),
                failed_indexes: None,
                want: vec![0, 1, 2, 3],
            },
            Case {
                name: "mixed",
                cnt: 5,
                completions: 20,
                active_pods: vec![
                    ("3", "Pending"),
                    ("5", "Running"),
                    ("8", "Pending"),
                    (NO_INDEX, "Running"),
                    ("-3", "Running"),
                ],
                succeeded_indexes: ivs(&[(2, 4), (9, 9)]),
                failed_indexes: None,
                want: vec![0, 1, 6, 7, 10],
            },
            Case {
                name: "failed indexes are not pending",
                cnt: 5,
                completions: 8,
                active_pods: vec![("0", "Running")],
                succeeded_indexes: ivs(&[(2, 2)]),
                failed_indexes: Some(ivs(&[(1, 1), (4, 5)])),
                want: vec![3, 6, 7],
            },
            Case {
                name: "zero count",
                cnt: 0,
                completions: 8,
                active_pods: vec![],
                succeeded_indexes: ivs(&[]),
                failed_indexes: None,
                want: vec![],
            },
        ];
        for c in cases {
            let active = pods(&c.active_pods);
            let job = indexed_job(c.completions);
            let got = first_pending_indexes(
                &job,
                &active,
                &active,
                &c.succeeded_indexes,
                c.failed_indexes.as_ref(),
                c.cnt,
                c.completions,
            );
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    #[test]
    fn terminating_pods_hold_their_index_when_only_failed_pods_are_replaced() {
        let mut job = indexed_job(4);
        if let Some(spec) = job.spec.as_mut() {
            spec.pod_replacement_policy = Some("Failed".into());
        }
        let mut all = pods(&[("0", "Running"), ("1", "Running")]);
        Arc::make_mut(&mut all[1]).metadata.deletion_timestamp =
            Some(Time("2024-01-01T00:00:00Z".parse().expect("timestamp")));
        let active = vec![all[0].clone()];
        let got = first_pending_indexes(&job, &active, &all, &ivs(&[]), None, 4, 4);
        assert_eq!(got, vec![2, 3]);
        let default_job = indexed_job(4);
        assert_eq!(
            first_pending_indexes(&default_job, &active, &all, &ivs(&[]), None, 4, 4),
            vec![1, 2, 3]
        );
    }

    #[test]
    fn append_duplicated_index_pods_for_removal_table() {
        struct Case {
            name: &'static str,
            pods: Vec<(&'static str, &'static str)>,
            want_rm: Vec<(&'static str, &'static str)>,
            want_left: Vec<(&'static str, &'static str)>,
            completions: i32,
        }
        let cases = vec![
            Case {
                name: "all unique",
                pods: vec![
                    (NO_INDEX, "Pending"),
                    ("2", "Pending"),
                    ("5", "Running"),
                    ("6", "Running"),
                ],
                want_rm: vec![(NO_INDEX, "Pending"), ("6", "Running")],
                want_left: vec![("2", "Pending"), ("5", "Running")],
                completions: 6,
            },
            Case {
                name: "all with index",
                pods: vec![
                    ("5", "Pending"),
                    ("0", "Running"),
                    ("3", "Pending"),
                    ("0", "Running"),
                    ("3", "Running"),
                    ("0", "Pending"),
                    ("6", "Running"),
                    ("6", "Pending"),
                ],
                want_rm: vec![
                    ("0", "Pending"),
                    ("0", "Running"),
                    ("3", "Pending"),
                    ("6", "Running"),
                    ("6", "Pending"),
                ],
                want_left: vec![("0", "Running"), ("3", "Running"), ("5", "Pending")],
                completions: 6,
            },
            Case {
                name: "mixed",
                pods: vec![
                    (NO_INDEX, "Pending"),
                    ("invalid", "Running"),
                    ("-2", "Running"),
                    ("0", "Pending"),
                    ("1", "Pending"),
                    ("1", "Pending"),
                    ("1", "Running"),
                ],
                want_rm: vec![
                    (NO_INDEX, "Pending"),
                    ("invalid", "Running"),
                    ("-2", "Running"),
                    ("1", "Pending"),
                    ("1", "Pending"),
                ],
                want_left: vec![("0", "Pending"), ("1", "Running")],
                completions: 6,
            },
        ];
        for c in cases {
            let (rm, left) =
                append_duplicated_index_pods_for_removal(&pods(&c.pods), c.completions);
            assert_eq!(index_phases(&rm), owned(&c.want_rm), "{} rm", c.name);
            assert_eq!(index_phases(&left), owned(&c.want_left), "{} left", c.name);
        }
    }

    #[test]
    fn pod_generate_name_with_index_table() {
        struct Case {
            name: &'static str,
            job_name: &'static str,
            index: i32,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "short job name",
                job_name: "indexed-job",
                index: 1,
                want: "indexed-job-1-",
            },
            Case {
                name: "job name exceeds MaxGeneneratedNameLength",
                job_name: "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooo",
                index: 1,
                want: "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhh-1-",
            },
            Case {
                name: "job name with index suffix exceeds MaxGeneratedNameLength",
                job_name: "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhoo",
                index: 1,
                want: "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhh-1-",
            },
        ];
        for c in cases {
            assert_eq!(
                pod_generate_name_with_index(c.job_name, c.index),
                c.want,
                "{}",
                c.name
            );
        }
        assert_eq!(pod_hostname("myjob", 3), "myjob-3");
    }

    #[test]
    fn failure_counts_carry_over_to_the_replacement() {
        let mut job = indexed_job(3);
        if let Some(spec) = job.spec.as_mut() {
            spec.backoff_limit_per_index = Some(2);
        }
        job.metadata.name = Some("myjob".into());
        assert_eq!(new_index_failure_counts(&job, None), (0, 0));
        let mut replaced = pods(&[("1", "Failed")]).remove(0);
        if let Some(a) = Arc::make_mut(&mut replaced).metadata.annotations.as_mut() {
            a.insert(JOB_INDEX_FAILURE_COUNT_ANNOTATION.into(), "1".into());
            a.insert(
                JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION.into(),
                "bogus".into(),
            );
        }
        assert_eq!(new_index_failure_counts(&job, Some(&replaced)), (2, 0));
        assert_eq!(index_absolute_failure_count(&replaced), 1);

        let base = PodTemplateSpec {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    ..Default::default()
                }],
                init_containers: Some(vec![Container {
                    name: "i".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut prepared = base.clone();
        add_completion_index_env_variables(&mut prepared);
        add_completion_index_env_variables(&mut prepared);
        let (template, generate_name) = pod_template_for_index(&job, &prepared, 1, Some(&replaced));
        assert_eq!(generate_name, "myjob-1-");
        let meta = template.metadata.clone().unwrap_or_default();
        let annotations = meta.annotations.unwrap_or_default();
        assert_eq!(
            annotations
                .get(JOB_COMPLETION_INDEX_ANNOTATION)
                .map(String::as_str),
            Some("1")
        );
        assert_eq!(
            annotations
                .get(JOB_INDEX_FAILURE_COUNT_ANNOTATION)
                .map(String::as_str),
            Some("2")
        );
        assert_eq!(
            annotations.get(JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION),
            None
        );
        assert_eq!(
            meta.labels
                .unwrap_or_default()
                .get(JOB_COMPLETION_INDEX_ANNOTATION)
                .map(String::as_str),
            Some("1")
        );
        let spec = template.spec.unwrap_or_default();
        assert_eq!(spec.hostname.as_deref(), Some("myjob-1"));
        for container in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            let env = container.env.clone().unwrap_or_default();
            assert_eq!(env.len(), 1, "{} has the variable once", container.name);
            let path = env[0]
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.as_str());
            assert_eq!(
                path,
                Some("metadata.labels['batch.kubernetes.io/job-completion-index']")
            );
        }
    }
}
