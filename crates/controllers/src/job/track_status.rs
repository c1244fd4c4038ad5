//! The status bookkeeping of a Job sync before and after its API writes: recording finished pods in `status.uncountedTerminatedPods`, choosing whose tracking finalizers to remove, updating the indexes and interim conditions, and finally the terminal condition, as the pure parts of upstream's `trackJobStatusAndRemoveFinalizers` and `enactJobFinished`.
//!
//! The caller then writes the status (when `needs_flush`), removes the finalizers of
//! [`TrackOutcome::pods_to_remove_finalizer`], calls
//! [`super::tracking::clean_uncounted_pods_without_finalizers`] with the UIDs whose removal
//! failed, and, unless [`TrackOutcome::reached_max_uncounted_pods`], [`enact_job_finished`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::completions_or_zero;
use super::conditions::{
    JOB_COMPLETE, JOB_FAILURE_TARGET, ensure_job_condition_status,
    is_success_criteria_met_condition, new_complete_condition_for_success_criteria,
    new_failed_condition_for_failure_target, success_criteria_met_condition,
};
use super::finished_pods::{can_remove_finalizer, pod_uid};
use super::indexed::{completion_index, is_indexed_job};
use super::intervals::OrderedIntervals;
use super::manage::MAX_UNCOUNTED_PODS;
use super::pod_failure_policy::match_pod_failure_policy;
use super::status::is_pod_failed;
use super::tracking::{
    UncountedTerminatedPods, clean_uncounted_pods_without_finalizers, has_job_tracking_finalizer,
};

/// What [`track_finished_pods`] reads besides the Job.
#[derive(Clone, Copy, Debug)]
pub struct TrackInput<'a> {
    /// All pods of the Job.
    pub pods: &'a [Arc<Pod>],
    /// `status.uncountedTerminatedPods` as it was when the sync started.
    pub uncounted: &'a UncountedTerminatedPods,
    /// Pods whose finalizer removal is in flight (not yet observed).
    pub expected_rm_finalizers: &'a HashSet<String>,
    /// Succeeded indexes from `status.completedIndexes` (Indexed Jobs).
    pub prev_succeeded_indexes: &'a OrderedIntervals,
    /// Succeeded indexes including this sync's (Indexed Jobs).
    pub succeeded_indexes: &'a OrderedIntervals,
    /// Failed indexes (with `backoffLimitPerIndex`).
    pub failed_indexes: Option<&'a OrderedIntervals>,
    /// Failed pods kept until their index's replacement exists.
    pub pods_with_delayed_deletion_per_index: &'a HashMap<i32, Arc<Pod>>,
    /// The condition this sync decided the Job finishes with (interim or not), if any.
    pub finished_condition: Option<&'a JobCondition>,
    /// The current time.
    pub now: Timestamp,
}

/// What [`track_finished_pods`] decided.
#[derive(Clone, Debug, PartialEq)]
pub struct TrackOutcome {
    /// Pods whose tracking finalizer to remove now, in order.
    pub pods_to_remove_finalizer: Vec<Arc<Pod>>,
    /// UIDs of the pods that still carry the finalizer (and no removal is expected); drop
    /// the successfully patched ones before cleaning the uncounted lists again.
    pub uids_with_finalizer: HashSet<String>,
    /// Whether the status changed and must be written before removing finalizers.
    pub needs_flush: bool,
    /// [`MAX_UNCOUNTED_PODS`] was reached: the rest waits for the next sync, and the Job must
    /// not be declared finished in this one.
    pub reached_max_uncounted_pods: bool,
    /// Failed pods per matched pod-failure-policy action (the
    /// `job_pod_failures_handled_by_failure_policy_total` metric).
    pub pod_failures_by_policy_action: BTreeMap<&'static str, u64>,
    /// The succeeded indexes with this sync's (Indexed Jobs).
    pub succeeded_indexes: OrderedIntervals,
    /// The terminal condition to set once finalizers are gone: an interim `FailureTarget` or
    /// `SuccessCriteriaMet` became `Failed` or `Complete` (the interim one was appended to the
    /// status).
    pub finished_condition: Option<JobCondition>,
}

/// Records finished pods in `job.status` and picks the finalizers to remove, as the part of
/// upstream's `trackJobStatusAndRemoveFinalizers` before its first status write. At most
/// [`MAX_UNCOUNTED_PODS`] pods are recorded, to keep the status small and big Jobs from
/// starving others.
pub fn track_finished_pods(
    job: &mut Job,
    input: &TrackInput<'_>,
    needs_flush: bool,
) -> TrackOutcome {
    let indexed = is_indexed_job(job);
    let completions = completions_or_zero(job);
    let mut pods = input.pods.to_vec();
    if indexed {
        // Completed indexes are introduced in order.
        pods.sort_by_key(|p| completion_index(p).map_or(-1, i64::from));
    }
    let uids_with_finalizer: HashSet<String> = pods
        .iter()
        .filter(|p| has_job_tracking_finalizer(p))
        .map(|p| pod_uid(p).to_owned())
        .filter(|uid| !input.expected_rm_finalizers.contains(uid))
        .collect();

    let mut outcome = TrackOutcome {
        pods_to_remove_finalizer: Vec::new(),
        uids_with_finalizer,
        needs_flush,
        reached_max_uncounted_pods: false,
        pod_failures_by_policy_action: BTreeMap::new(),
        succeeded_indexes: input.succeeded_indexes.clone(),
        finished_condition: input.finished_condition.cloned(),
    };
    let status = job.status.get_or_insert_with(Default::default);
    if clean_uncounted_pods_without_finalizers(status, &outcome.uids_with_finalizer) {
        outcome.needs_flush = true;
    }
    let finishing_without_success = input
        .finished_condition
        .is_some_and(|c| !is_success_criteria_met_condition(Some(c)));
    let policy = job.spec.as_ref().and_then(|s| s.pod_failure_policy.clone());
    let mut new_succeeded_indexes: Vec<i32> = Vec::new();
    let mut uncounted_succeeded: Vec<String> = uncounted_list(job, true);
    let mut uncounted_failed: Vec<String> = uncounted_list(job, false);

    for pod in &pods {
        let uid = pod_uid(pod);
        if !has_job_tracking_finalizer(pod) || input.expected_rm_finalizers.contains(uid) {
            // Processed in an earlier sync.
            continue;
        }
        let consider_failed = is_pod_failed(pod, job);
        if !can_remove_finalizer(
            job,
            pod,
            input.finished_condition.is_some(),
            consider_failed,
            input.pods_with_delayed_deletion_per_index,
        ) {
            continue;
        }
        outcome.pods_to_remove_finalizer.push(pod.clone());
        let succeeded = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
        let index = completion_index(pod).filter(|&ix| ix < completions);
        if succeeded && !input.uncounted.failed.contains(uid) {
            if indexed {
                // The index is enough to never count a success twice.
                if let Some(ix) = index.filter(|&ix| !input.prev_succeeded_indexes.has(ix)) {
                    new_succeeded_indexes.push(ix);
                    outcome.needs_flush = true;
                }
            } else if !input.uncounted.succeeded.contains(uid) {
                outcome.needs_flush = true;
                uncounted_succeeded.push(uid.to_owned());
            }
        } else if consider_failed || finishing_without_success {
            // When the Job is finishing, every pod not terminated counts as failed.
            if !input.uncounted.failed.contains(uid) && (!indexed || index.is_some()) {
                let counted = match &policy {
                    Some(policy) => {
                        let matched = match_pod_failure_policy(Some(policy), pod);
                        if let Some(action) = matched.action {
                            *outcome
                                .pod_failures_by_policy_action
                                .entry(action.as_str())
                                .or_default() += 1;
                        }
                        matched.count_failed
                    }
                    None => true,
                };
                if counted {
                    outcome.needs_flush = true;
                    uncounted_failed.push(uid.to_owned());
                }
            }
        }
        let recorded =
            new_succeeded_indexes.len() + uncounted_succeeded.len() + uncounted_failed.len();
        if recorded >= MAX_UNCOUNTED_PODS {
            // The Job is synced again when the status and pod updates come back.
            outcome.reached_max_uncounted_pods = true;
            break;
        }
    }

    let status = job.status.get_or_insert_with(Default::default);
    let uncounted = status
        .uncounted_terminated_pods
        .get_or_insert_with(Default::default);
    uncounted.succeeded = (!uncounted_succeeded.is_empty()).then_some(uncounted_succeeded);
    uncounted.failed = (!uncounted_failed.is_empty()).then_some(uncounted_failed);

    if indexed {
        outcome.succeeded_indexes = outcome
            .succeeded_indexes
            .with_ordered_indexes(&new_succeeded_indexes);
        let completed = outcome.succeeded_indexes.to_string();
        if status.completed_indexes.as_deref().unwrap_or_default() != completed {
            outcome.needs_flush = true;
        }
        let total = i32::try_from(outcome.succeeded_indexes.total()).unwrap_or(i32::MAX);
        status.succeeded = Some(total);
        // `omitempty`: no index completed leaves the field out, as the API server stores it.
        status.completed_indexes = (!completed.is_empty()).then_some(completed);
        let failed = input.failed_indexes.map(ToString::to_string);
        if status.failed_indexes != failed {
            status.failed_indexes = failed;
            outcome.needs_flush = true;
        }
    }

    let now = input.now;
    if let Some(target) = outcome
        .finished_condition
        .take_if(|c| c.type_ == JOB_FAILURE_TARGET)
    {
        // The interim condition goes out with this write; `Failed` follows once the
        // finalizers are removed.
        status
            .conditions
            .get_or_insert_with(Vec::new)
            .push(target.clone());
        outcome.needs_flush = true;
        outcome.finished_condition = Some(new_failed_condition_for_failure_target(&target, now));
    }
    if let Some(met) = outcome
        .finished_condition
        .take_if(|c| is_success_criteria_met_condition(Some(c)))
    {
        if success_criteria_met_condition(job).is_none() {
            let status = job.status.get_or_insert_with(Default::default);
            status
                .conditions
                .get_or_insert_with(Vec::new)
                .push(met.clone());
            outcome.needs_flush = true;
        }
        outcome.finished_condition = Some(new_complete_condition_for_success_criteria(&met, now));
    }
    outcome
}

fn uncounted_list(job: &Job, succeeded: bool) -> Vec<String> {
    let uncounted = job
        .status
        .as_ref()
        .and_then(|s| s.uncounted_terminated_pods.as_ref());
    let list = uncounted.and_then(|u| {
        if succeeded {
            u.succeeded.as_ref()
        } else {
            u.failed.as_ref()
        }
    });
    list.cloned().unwrap_or_default()
}

/// Sets the terminal condition (and, for `Complete`, `status.completionTime`) unless pods are
/// still uncounted or terminating, as upstream's `enactJobFinished`. Returns whether the Job
/// is now finished.
pub fn enact_job_finished(
    job: &mut Job,
    finished_condition: Option<&JobCondition>,
    terminating: i32,
    now: Timestamp,
) -> bool {
    let Some(finished) = finished_condition else {
        return false;
    };
    let status = job.status.get_or_insert_with(Default::default);
    if let Some(uncounted) = &status.uncounted_terminated_pods {
        let count = uncounted.succeeded.as_ref().map_or(0, Vec::len)
            + uncounted.failed.as_ref().map_or(0, Vec::len);
        if count > 0 {
            tracing::trace!(
                count,
                "delaying marking the Job as finished: uncounted pods"
            );
            return false;
        }
    }
    if terminating > 0 {
        tracing::trace!(
            terminating,
            "delaying marking the Job as finished: terminating pods"
        );
        return false;
    }
    ensure_job_condition_status(
        status.conditions.get_or_insert_with(Vec::new),
        &finished.type_,
        &finished.status,
        finished.reason.as_deref().unwrap_or_default(),
        finished.message.as_deref().unwrap_or_default(),
        now,
    );
    if finished.type_ == JOB_COMPLETE {
        status.completion_time = finished.last_transition_time.clone().or(Some(Time(now)));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::conditions::{
        JOB_FAILED, MESSAGE_BACKOFF_LIMIT_EXCEEDED, REASON_BACKOFF_LIMIT_EXCEEDED,
        find_condition_by_type, new_failure_condition, new_success_condition,
    };
    use crate::job::indexed::JOB_COMPLETION_INDEX_ANNOTATION;
    use crate::job::intervals::Interval;
    use crate::job::tracking::JOB_TRACKING_FINALIZER;
    use k8s_openapi::api::batch::v1::{
        JobSpec, JobStatus, PodFailurePolicy, PodFailurePolicyOnPodConditionsPattern,
        PodFailurePolicyRule, UncountedTerminatedPods as UncountedStatus,
    };
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn now() -> Timestamp {
        "2024-05-01T10:00:00Z".parse().expect("timestamp")
    }

    fn pod(uid: &str, phase: &str, index: Option<i32>, finalizer: bool) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                name: Some(uid.into()),
                annotations: index.map(|i| {
                    BTreeMap::from([(JOB_COMPLETION_INDEX_ANNOTATION.to_owned(), i.to_string())])
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

    fn job_with_uncounted(succeeded: &[&str], failed: &[&str]) -> Job {
        let list = |v: &[&str]| (!v.is_empty()).then(|| v.iter().map(|s| s.to_string()).collect());
        Job {
            spec: Some(JobSpec {
                completions: Some(5),
                parallelism: Some(5),
                ..Default::default()
            }),
            status: Some(JobStatus {
                uncounted_terminated_pods: Some(UncountedStatus {
                    succeeded: list(succeeded),
                    failed: list(failed),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    struct Env {
        uncounted: UncountedTerminatedPods,
        expected: HashSet<String>,
        prev: OrderedIntervals,
        succeeded: OrderedIntervals,
        failed: Option<OrderedIntervals>,
        delayed: HashMap<i32, Arc<Pod>>,
        finished: Option<JobCondition>,
    }

    impl Env {
        fn for_job(job: &Job) -> Self {
            Self {
                uncounted: UncountedTerminatedPods::new(
                    job.status
                        .as_ref()
                        .and_then(|s| s.uncounted_terminated_pods.as_ref()),
                ),
                expected: HashSet::new(),
                prev: OrderedIntervals::new(),
                succeeded: OrderedIntervals::new(),
                failed: None,
                delayed: HashMap::new(),
                finished: None,
            }
        }

        fn track(&self, job: &mut Job, pods: &[Arc<Pod>]) -> TrackOutcome {
            let input = TrackInput {
                pods,
                uncounted: &self.uncounted,
                expected_rm_finalizers: &self.expected,
                prev_succeeded_indexes: &self.prev,
                succeeded_indexes: &self.succeeded,
                failed_indexes: self.failed.as_ref(),
                pods_with_delayed_deletion_per_index: &self.delayed,
                finished_condition: self.finished.as_ref(),
                now: now(),
            };
            track_finished_pods(job, &input, false)
        }
    }

    fn uids(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter().map(|p| pod_uid(p)).collect()
    }

    fn uncounted(job: &Job) -> (Vec<String>, Vec<String>) {
        let u = job
            .status
            .as_ref()
            .and_then(|s| s.uncounted_terminated_pods.clone())
            .unwrap_or_default();
        (
            u.succeeded.unwrap_or_default(),
            u.failed.unwrap_or_default(),
        )
    }

    #[test]
    fn finished_pods_are_recorded_once_and_their_finalizers_removed() {
        let mut job = job_with_uncounted(&["b"], &[]);
        let env = Env::for_job(&job);
        let pods = vec![
            pod("a", "Succeeded", None, true),
            pod("b", "Succeeded", None, true),
            pod("c", "Failed", None, true),
            pod("d", "Running", None, true),
            pod("e", "Succeeded", None, false),
        ];
        let out = env.track(&mut job, &pods);
        assert_eq!(uids(&out.pods_to_remove_finalizer), vec!["a", "b", "c"]);
        assert_eq!(
            uncounted(&job),
            (vec!["b".to_owned(), "a".to_owned()], vec!["c".to_owned()])
        );
        assert!(out.needs_flush);
        assert!(!out.reached_max_uncounted_pods);
        assert_eq!(out.uids_with_finalizer.len(), 4);
    }

    #[test]
    fn uncounted_pods_whose_finalizer_is_gone_are_counted() {
        let mut job = job_with_uncounted(&["gone"], &["gone-too"]);
        let env = Env::for_job(&job);
        let out = env.track(&mut job, &[pod("gone", "Succeeded", None, false)]);
        let status = job.status.clone().unwrap_or_default();
        assert_eq!((status.succeeded, status.failed), (Some(1), Some(1)));
        assert_eq!(uncounted(&job), (vec![], vec![]));
        assert!(out.needs_flush);
        assert!(out.pods_to_remove_finalizer.is_empty());
    }

    #[test]
    fn ignored_failures_are_removed_but_not_counted() {
        let mut job = job_with_uncounted(&[], &[]);
        if let Some(spec) = job.spec.as_mut() {
            spec.pod_failure_policy = Some(PodFailurePolicy {
                rules: vec![PodFailurePolicyRule {
                    action: "Ignore".into(),
                    on_exit_codes: None,
                    on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                        type_: "DisruptionTarget".into(),
                        status: Some("True".into()),
                    }]),
                }],
            });
        }
        let mut disrupted = pod("x", "Failed", None, true);
        if let Some(s) = Arc::make_mut(&mut disrupted).status.as_mut() {
            s.conditions = Some(vec![PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                ..Default::default()
            }]);
        }
        let env = Env::for_job(&job);
        let out = env.track(&mut job, &[disrupted, pod("y", "Failed", None, true)]);
        assert_eq!(uids(&out.pods_to_remove_finalizer), vec!["x", "y"]);
        assert_eq!(uncounted(&job).1, vec!["y".to_owned()]);
        assert_eq!(
            out.pod_failures_by_policy_action,
            BTreeMap::from([("Ignore", 1)])
        );
    }

    #[test]
    fn failing_job_counts_running_pods_as_failed_and_prepares_failed_condition() {
        let mut job = job_with_uncounted(&[], &[]);
        let mut env = Env::for_job(&job);
        let target = new_failure_condition(
            REASON_BACKOFF_LIMIT_EXCEEDED,
            MESSAGE_BACKOFF_LIMIT_EXCEEDED,
            now(),
        );
        env.finished = Some(target.clone());
        let out = env.track(&mut job, &[pod("r", "Running", None, true)]);
        assert_eq!(uids(&out.pods_to_remove_finalizer), vec!["r"]);
        assert_eq!(uncounted(&job).1, vec!["r".to_owned()]);
        let conditions = job
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        assert_eq!(conditions, vec![target]);
        let finished = out.finished_condition.expect("a terminal condition");
        assert_eq!(finished.type_, JOB_FAILED);
        assert_eq!(
            finished.reason.as_deref(),
            Some(REASON_BACKOFF_LIMIT_EXCEEDED)
        );
    }

    #[test]
    fn indexed_successes_go_to_completed_indexes() {
        let mut job = job_with_uncounted(&[], &[]);
        if let Some(spec) = job.spec.as_mut() {
            spec.completion_mode = Some("Indexed".into());
        }
        job.status
            .get_or_insert_with(Default::default)
            .completed_indexes = Some("0".into());
        let mut env = Env::for_job(&job);
        env.prev = vec![Interval::new(0, 0)].into();
        env.succeeded = vec![Interval::new(0, 0)].into();
        let pods = vec![
            pod("three", "Succeeded", Some(3), true),
            pod("zero-again", "Succeeded", Some(0), true),
            pod("one", "Succeeded", Some(1), true),
            pod("out-of-range", "Succeeded", Some(9), true),
        ];
        let out = env.track(&mut job, &pods);
        let status = job.status.clone().unwrap_or_default();
        assert_eq!(status.completed_indexes.as_deref(), Some("0,1,3"));
        assert_eq!(status.succeeded, Some(3));
        assert_eq!(
            uids(&out.pods_to_remove_finalizer),
            vec!["zero-again", "one", "three", "out-of-range"]
        );
        assert_eq!(uncounted(&job), (vec![], vec![]));
        assert!(out.needs_flush);
    }

    #[test]
    fn recording_stops_at_max_uncounted_pods() {
        let mut job = job_with_uncounted(&[], &[]);
        let pods: Vec<_> = (0..MAX_UNCOUNTED_PODS + 20)
            .map(|i| pod(&format!("p{i}"), "Succeeded", None, true))
            .collect();
        let env = Env::for_job(&job);
        let out = env.track(&mut job, &pods);
        assert!(out.reached_max_uncounted_pods);
        assert_eq!(out.pods_to_remove_finalizer.len(), MAX_UNCOUNTED_PODS);
        assert_eq!(uncounted(&job).0.len(), MAX_UNCOUNTED_PODS);
    }

    #[test]
    fn success_criteria_met_becomes_complete_once() {
        let mut job = job_with_uncounted(&[], &[]);
        let mut env = Env::for_job(&job);
        env.finished = Some(new_success_condition(now()));
        let out = env.track(&mut job, &[]);
        assert_eq!(
            out.finished_condition.as_ref().map(|c| c.type_.as_str()),
            Some(JOB_COMPLETE)
        );
        assert!(out.needs_flush);
        // A second sync does not append the interim condition again.
        let again = env.track(&mut job, &[]);
        assert!(!again.needs_flush);
        assert_eq!(
            job.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .map(Vec::len),
            Some(1)
        );
    }

    #[test]
    fn enact_job_finished_waits_for_uncounted_and_terminating_pods() {
        let complete =
            new_complete_condition_for_success_criteria(&new_success_condition(now()), now());
        let mut waiting = job_with_uncounted(&["a"], &[]);
        assert!(!enact_job_finished(&mut waiting, Some(&complete), 0, now()));
        let mut terminating = job_with_uncounted(&[], &[]);
        assert!(!enact_job_finished(
            &mut terminating,
            Some(&complete),
            1,
            now()
        ));
        assert!(!enact_job_finished(&mut terminating, None, 0, now()));
        let mut done = job_with_uncounted(&[], &[]);
        assert!(enact_job_finished(&mut done, Some(&complete), 0, now()));
        let status = done.status.clone().unwrap_or_default();
        assert_eq!(status.completion_time, Some(Time(now())));
        let conditions = status.conditions.unwrap_or_default();
        assert!(find_condition_by_type(&conditions, JOB_COMPLETE).is_some());
        assert!(crate::job::is_job_finished(&done));
    }
}
