//! Tracking finished pods with the `batch.kubernetes.io/job-tracking` finalizer: the finalizer itself, `status.uncountedTerminatedPods`, and the expected finalizer removals, as upstream's `tracking_utils.go`.
//!
//! Every pod a Job creates carries the finalizer, so a finished pod cannot disappear before
//! the Job counted it. Counting is two-phase so that a crash never counts twice: the pod's UID
//! is first written to `status.uncountedTerminatedPods`, then its finalizer is removed, then
//! (once the finalizer is observed gone) the UID moves from the uncounted list into
//! `status.succeeded`/`status.failed`.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use k8s_openapi::api::batch::v1::{JobStatus, UncountedTerminatedPods as UncountedStatus};
use k8s_openapi::api::core::v1::Pod;

/// The finalizer the Job controller puts on its pods until it has counted them, as batch/v1
/// `JobTrackingFinalizer`.
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

/// Whether the pod carries [`JOB_TRACKING_FINALIZER`], as upstream's `hasJobTrackingFinalizer`.
pub fn has_job_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == JOB_TRACKING_FINALIZER)
}

/// Whether the pod finished (`Succeeded` or `Failed`) and still carries the finalizer, as
/// upstream's `isFinishedPodWithTrackingFinalizer` (what the
/// `job_terminated_pods_tracking_finalizer_total` metric follows).
pub fn is_finished_pod_with_tracking_finalizer(pod: Option<&Pod>) -> bool {
    pod.is_some_and(|p| {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        matches!(phase, Some("Succeeded" | "Failed")) && has_job_tracking_finalizer(p)
    })
}

/// The strategic-merge patch that removes [`JOB_TRACKING_FINALIZER`] from a pod, or `None`
/// when the pod has no such finalizer, as upstream's `removeTrackingFinalizerPatch`.
pub fn remove_tracking_finalizer_patch(pod: &Pod) -> Option<serde_json::Value> {
    has_job_tracking_finalizer(pod).then(|| {
        serde_json::json!({
            "metadata": { "$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER] }
        })
    })
}

/// `finalizers` with [`JOB_TRACKING_FINALIZER`] appended unless already present (for the pod
/// template of every created pod), as upstream's `appendJobCompletionFinalizerIfNotFound`.
pub fn append_job_completion_finalizer_if_not_found(finalizers: &mut Vec<String>) {
    if !finalizers.iter().any(|f| f == JOB_TRACKING_FINALIZER) {
        finalizers.push(JOB_TRACKING_FINALIZER.to_owned());
    }
}

/// The UIDs of `status.uncountedTerminatedPods` as sets, for membership tests, as upstream's
/// `uncountedTerminatedPods`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UncountedTerminatedPods {
    /// UIDs of succeeded pods not yet counted in `status.succeeded`.
    pub succeeded: HashSet<String>,
    /// UIDs of failed pods not yet counted in `status.failed`.
    pub failed: HashSet<String>,
}

impl UncountedTerminatedPods {
    /// The sets of the status lists, as upstream's `newUncountedTerminatedPods`.
    pub fn new(status: Option<&UncountedStatus>) -> Self {
        let set = |list: Option<&Vec<String>>| list.into_iter().flatten().cloned().collect();
        Self {
            succeeded: set(status.and_then(|s| s.succeeded.as_ref())),
            failed: set(status.and_then(|s| s.failed.as_ref())),
        }
    }
}

/// The UIDs of `uncounted` that are in `include`, in order, as upstream's
/// `filterInUncountedUIDs`.
pub fn filter_in_uncounted_uids(uncounted: &[String], include: &HashSet<String>) -> Vec<String> {
    uncounted
        .iter()
        .filter(|uid| include.contains(*uid))
        .cloned()
        .collect()
}

/// Moves the uncounted UIDs whose pods no longer carry the finalizer (not in
/// `uids_with_finalizer`) into the `succeeded`/`failed` counters, as upstream's
/// `cleanUncountedPodsWithoutFinalizers`. Returns whether the status changed.
pub fn clean_uncounted_pods_without_finalizers(
    status: &mut JobStatus,
    uids_with_finalizer: &HashSet<String>,
) -> bool {
    let mut updated = false;
    let uncounted = status
        .uncounted_terminated_pods
        .get_or_insert_with(Default::default);
    let mut counted = |list: &mut Option<Vec<String>>| -> i32 {
        let old = list.as_deref().unwrap_or_default();
        let kept = filter_in_uncounted_uids(old, uids_with_finalizer);
        let moved = old.len() - kept.len();
        if moved == 0 {
            return 0;
        }
        updated = true;
        // Go keeps a nil slice when nothing is left; `omitempty` writes neither.
        *list = (!kept.is_empty()).then_some(kept);
        i32::try_from(moved).unwrap_or(i32::MAX)
    };
    let succeeded = counted(&mut uncounted.succeeded);
    let failed = counted(&mut uncounted.failed);
    if succeeded > 0 {
        status.succeeded = Some(status.succeeded.unwrap_or(0).saturating_add(succeeded));
    }
    if failed > 0 {
        status.failed = Some(status.failed.unwrap_or(0).saturating_add(failed));
    }
    updated
}

/// The pod UIDs whose finalizer removal each Job is waiting to observe, as upstream's
/// `uidTrackingExpectations`. Safe to share between workers.
#[derive(Debug, Default)]
pub struct UidTrackingExpectations {
    /// Job key (`namespace/name`) → pod UIDs with a removal in flight. A key with an empty
    /// set is kept until [`Self::delete_expectations`], as upstream keeps its store entry.
    expected: Mutex<HashMap<String, HashSet<String>>>,
}

impl UidTrackingExpectations {
    /// No expectations.
    pub fn new() -> Self {
        Self::default()
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
        // A panic while the lock was held leaves only a set of UIDs behind; keep going.
        self.expected
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A copy of the UIDs `job_key` waits for, `None` if it never expected any, as upstream's
    /// `getExpectedUIDs`.
    pub fn get_expected_uids(&self, job_key: &str) -> Option<HashSet<String>> {
        self.locked().get(job_key).cloned()
    }

    /// Expects the finalizers of `uids` to be removed, as upstream's
    /// `expectFinalizersRemoved`.
    pub fn expect_finalizers_removed<I>(&self, job_key: &str, uids: I)
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let uids: Vec<String> = uids.into_iter().map(Into::into).collect();
        tracing::trace!(job = job_key, pods = ?uids, "expecting tracking finalizers removed");
        self.locked()
            .entry(job_key.to_owned())
            .or_default()
            .extend(uids);
    }

    /// Records that the finalizer of pod `uid` was seen removed, as upstream's
    /// `finalizerRemovalObserved`.
    pub fn finalizer_removal_observed(&self, job_key: &str, uid: &str) {
        if let Some(uids) = self.locked().get_mut(job_key)
            && uids.remove(uid)
        {
            tracing::trace!(
                job = job_key,
                pod = uid,
                "observed tracking finalizer removed"
            );
        }
    }

    /// Forgets `job_key`, as upstream's `deleteExpectations`.
    pub fn delete_expectations(&self, job_key: &str) {
        self.locked().remove(job_key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(phase: &str, finalizers: &[&str]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
                ..Default::default()
            },
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn finalizer_helpers() {
        let tracked = pod("Succeeded", &["x", JOB_TRACKING_FINALIZER]);
        assert!(has_job_tracking_finalizer(&tracked));
        assert!(is_finished_pod_with_tracking_finalizer(Some(&tracked)));
        assert!(!is_finished_pod_with_tracking_finalizer(Some(&pod(
            "Running",
            &[JOB_TRACKING_FINALIZER]
        ))));
        assert!(!is_finished_pod_with_tracking_finalizer(None));
        assert_eq!(
            remove_tracking_finalizer_patch(&tracked).map(|p| p.to_string()),
            Some(r#"{"metadata":{"$deleteFromPrimitiveList/finalizers":["batch.kubernetes.io/job-tracking"]}}"#.to_owned())
        );
        assert_eq!(
            remove_tracking_finalizer_patch(&pod("Failed", &["x"])),
            None
        );

        let mut finalizers = strings(&["a"]);
        append_job_completion_finalizer_if_not_found(&mut finalizers);
        append_job_completion_finalizer_if_not_found(&mut finalizers);
        assert_eq!(finalizers, strings(&["a", JOB_TRACKING_FINALIZER]));
    }

    #[test]
    fn clean_uncounted_pods_without_finalizers_counts_removed() {
        struct Case {
            name: &'static str,
            succeeded: Vec<String>,
            failed: Vec<String>,
            with_finalizer: &'static [&'static str],
            want_updated: bool,
            want_succeeded: Option<i32>,
            want_failed: Option<i32>,
            want_uncounted_succeeded: Option<Vec<String>>,
            want_uncounted_failed: Option<Vec<String>>,
        }
        let cases = [
            Case {
                name: "all still have finalizers",
                succeeded: strings(&["a"]),
                failed: strings(&["b"]),
                with_finalizer: &["a", "b"],
                want_updated: false,
                want_succeeded: Some(1),
                want_failed: Some(2),
                want_uncounted_succeeded: Some(strings(&["a"])),
                want_uncounted_failed: Some(strings(&["b"])),
            },
            Case {
                name: "some removed",
                succeeded: strings(&["a", "c", "d"]),
                failed: strings(&["b", "e"]),
                with_finalizer: &["c", "e"],
                want_updated: true,
                want_succeeded: Some(3),
                want_failed: Some(3),
                want_uncounted_succeeded: Some(strings(&["c"])),
                want_uncounted_failed: Some(strings(&["e"])),
            },
            Case {
                name: "all removed",
                succeeded: strings(&["a"]),
                failed: vec![],
                with_finalizer: &[],
                want_updated: true,
                want_succeeded: Some(2),
                want_failed: Some(2),
                want_uncounted_succeeded: None,
                want_uncounted_failed: Some(vec![]),
            },
        ];
        for c in cases {
            let mut status = JobStatus {
                succeeded: Some(1),
                failed: Some(2),
                uncounted_terminated_pods: Some(UncountedStatus {
                    succeeded: Some(c.succeeded),
                    failed: Some(c.failed),
                }),
                ..Default::default()
            };
            let include: HashSet<String> = c.with_finalizer.iter().map(|s| s.to_string()).collect();
            assert_eq!(
                clean_uncounted_pods_without_finalizers(&mut status, &include),
                c.want_updated,
                "{}",
                c.name
            );
            assert_eq!(status.succeeded, c.want_succeeded, "{}", c.name);
            assert_eq!(status.failed, c.want_failed, "{}", c.name);
            let uncounted = status.uncounted_terminated_pods.unwrap_or_default();
            assert_eq!(
                uncounted.succeeded, c.want_uncounted_succeeded,
                "{}",
                c.name
            );
            assert_eq!(uncounted.failed, c.want_uncounted_failed, "{}", c.name);
        }
    }

    #[test]
    fn uid_tracking_expectations_follow_observations() {
        let exp = UidTrackingExpectations::new();
        assert_eq!(exp.get_expected_uids("ns/job"), None);
        exp.expect_finalizers_removed("ns/job", ["a", "b"]);
        exp.expect_finalizers_removed("ns/job", ["c"]);
        exp.finalizer_removal_observed("ns/job", "b");
        exp.finalizer_removal_observed("ns/other", "a");
        let want: HashSet<String> = ["a", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(exp.get_expected_uids("ns/job"), Some(want));
        exp.delete_expectations("ns/job");
        assert_eq!(exp.get_expected_uids("ns/job"), None);
    }

    #[test]
    fn uncounted_sets_from_status() {
        let status = UncountedStatus {
            succeeded: Some(strings(&["a", "b"])),
            failed: None,
        };
        let sets = UncountedTerminatedPods::new(Some(&status));
        assert!(sets.succeeded.contains("a") && sets.succeeded.contains("b"));
        assert!(sets.failed.is_empty());
        assert_eq!(
            UncountedTerminatedPods::new(None),
            UncountedTerminatedPods::default()
        );
    }
}
