//! ReplicaSet status: counting replicas, the `ReplicaFailure` condition, and the `/status` write.
//!
//! Mirrors upstream's `replica_set_utils.go`: [`calculate_status`] derives the counts from the
//! pods a sync pass claimed, [`update_replica_set_status`] skips the write when nothing
//! changed and otherwise retries once after re-reading the object.
//!
//! Integer fields are written the way Go serialises them (`omitempty`: a zero count is left
//! out) and compared the way Go compares them (absent is zero), so a status read back from
//! any server compares equal to the one computed.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::controller::pod_control::{FAILED_CREATE_POD_REASON, FAILED_DELETE_POD_REASON};
use kcm_machinery::controller::{is_pod_available, is_pod_ready};

use super::client::ReplicaSetClient;
use super::{Error, Result};

/// How many times a failed `/status` update is retried (after re-reading the ReplicaSet), as
/// upstream's `statusUpdateRetries`.
pub const STATUS_UPDATE_RETRIES: usize = 1;

/// The condition type set while creating or deleting pods fails, as apps/v1
/// `ReplicaSetReplicaFailure`.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// The desired replica count: `spec.replicas`, 1 when unset (the API server's default).
pub fn desired_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `spec.minReadySeconds`, 0 when unset.
pub fn min_ready_seconds(rs: &ReplicaSet) -> i32 {
    rs.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

/// `Some(n)` unless `n` is zero, as Go's `omitempty` serialises an `int32`.
fn non_zero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// Converts a count to the API's `int32`, saturating (a namespace never holds 2^31 pods).
fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Whether every label of `template` is on the pod with the same value (the pod may have more),
/// as upstream's `labels.Set(template).AsSelectorPreValidated().Matches(pod)`.
fn has_template_labels(
    template: Option<&BTreeMap<String, String>>,
    pod: Option<&BTreeMap<String, String>>,
) -> bool {
    let Some(template) = template.filter(|t| !t.is_empty()) else {
        return true;
    };
    let Some(pod) = pod else {
        return false;
    };
    template.iter().all(|(k, v)| pod.get(k) == Some(v))
}

/// The status of `rs` given the active pods it owns after claiming (`filtered_pods`), how
/// many of its pods are terminating (`None` for a kind without `terminatingReplicas`) and the
/// outcome of managing replicas, as upstream's `calculateStatus`.
///
/// Counts `replicas`, `fullyLabeledReplicas` (pods carrying every template label),
/// `readyReplicas` and `availableReplicas` (ready for `minReadySeconds` at `now`), and sets
/// `terminatingReplicas` (zero included, as upstream's pointer). A
/// `manage_replicas_error` (its condition message) sets `ReplicaFailure` with reason
/// `FailedCreate` or `FailedDelete` unless the condition is already there; no error removes
/// it. `observedGeneration` is left as it was: [`update_replica_set_status`] sets it.
pub fn calculate_status(
    rs: &ReplicaSet,
    filtered_pods: &[Arc<Pod>],
    terminating_pods: Option<i32>,
    manage_replicas_error: Option<&str>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let mut new_status = rs.status.clone().unwrap_or_default();
    let template_labels = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.as_ref());
    let min_ready = min_ready_seconds(rs);

    let (mut fully_labeled, mut ready, mut available) = (0, 0, 0);
    for pod in filtered_pods {
        if has_template_labels(template_labels, pod.metadata.labels.as_ref()) {
            fully_labeled += 1;
        }
        if is_pod_ready(pod) {
            ready += 1;
            if is_pod_available(pod, min_ready, now) {
                available += 1;
            }
        }
    }

    let has_failure = get_condition(&new_status, REPLICA_FAILURE).is_some();
    match manage_replicas_error {
        Some(message) if !has_failure => {
            let diff = filtered_pods.len() as i64 - i64::from(desired_replicas(rs));
            let reason = match diff {
                d if d < 0 => FAILED_CREATE_POD_REASON,
                d if d > 0 => FAILED_DELETE_POD_REASON,
                _ => "",
            };
            let condition = new_condition(REPLICA_FAILURE, "True", reason, message, now);
            set_condition(&mut new_status, condition);
        }
        None if has_failure => remove_condition(&mut new_status, REPLICA_FAILURE),
        _ => {}
    }

    new_status.replicas = count(filtered_pods.len());
    new_status.fully_labeled_replicas = non_zero(fully_labeled);
    new_status.ready_replicas = non_zero(ready);
    new_status.available_replicas = non_zero(available);
    new_status.terminating_replicas = terminating_pods;
    new_status
}

/// The condition of `type_`, as upstream's `GetCondition`.
pub fn get_condition<'a>(
    status: &'a ReplicaSetStatus,
    type_: &str,
) -> Option<&'a ReplicaSetCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// A condition that transitions at `now`, as upstream's `NewReplicaSetCondition`. Empty
/// reason or message are left out, as Go's `omitempty`.
pub fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> ReplicaSetCondition {
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    ReplicaSetCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        last_transition_time: Some(Time(now)),
        reason: non_empty(reason),
        message: non_empty(message),
    }
}

/// Adds `condition`, replacing one of the same type, unless one with the same status and
/// reason is already there, as upstream's `SetCondition` (the replaced condition moves last).
pub fn set_condition(status: &mut ReplicaSetStatus, condition: ReplicaSetCondition) {
    if let Some(current) = get_condition(status, &condition.type_)
        && current.status == condition.status
        && current.reason == condition.reason
    {
        return;
    }
    remove_condition(status, &condition.type_);
    status
        .conditions
        .get_or_insert_with(Vec::new)
        .push(condition);
}

/// Removes the condition of `type_`, as upstream's `RemoveCondition`; no conditions left
/// means none at all (`None`), as Go's nil slice.
pub fn remove_condition(status: &mut ReplicaSetStatus, type_: &str) {
    if let Some(conditions) = &mut status.conditions {
        conditions.retain(|c| c.type_ != type_);
        if conditions.is_empty() {
            status.conditions = None;
        }
    }
}

/// Whether writing `new_status` would change nothing: same counts (`terminatingReplicas` unset
/// and zero differ, as upstream's `ptr.Equal`), same conditions, and the
/// current generation already observed — upstream's early return in `updateReplicaSetStatus`.
pub fn status_unchanged(rs: &ReplicaSet, new_status: &ReplicaSetStatus) -> bool {
    let default = ReplicaSetStatus::default();
    let old = rs.status.as_ref().unwrap_or(&default);
    let n = |v: Option<i32>| v.unwrap_or(0);
    old.replicas == new_status.replicas
        && n(old.fully_labeled_replicas) == n(new_status.fully_labeled_replicas)
        && n(old.ready_replicas) == n(new_status.ready_replicas)
        && n(old.available_replicas) == n(new_status.available_replicas)
        && old.terminating_replicas == new_status.terminating_replicas
        && rs.metadata.generation.unwrap_or(0) == old.observed_generation.unwrap_or(0)
        && old.conditions.as_deref().unwrap_or(&[])
            == new_status.conditions.as_deref().unwrap_or(&[])
}

/// Writes `new_status` (with `observedGeneration` set to the generation it was computed
/// from), as upstream's `updateReplicaSetStatus`: nothing is written when
/// [`status_unchanged`]; a failed write is retried once on a freshly read copy (same new
/// status), and a failing read between the two attempts is returned instead.
///
/// Returns the ReplicaSet as stored, or `None` when nothing was written (`rs` is current).
pub async fn update_replica_set_status(
    client: &dyn ReplicaSetClient,
    rs: &ReplicaSet,
    mut new_status: ReplicaSetStatus,
) -> Result<Option<ReplicaSet>> {
    if status_unchanged(rs, &new_status) {
        return Ok(None);
    }
    // The generation acted on; a retry on a newer copy must not claim to have seen its spec.
    new_status.observed_generation = rs.metadata.generation.filter(|g| *g != 0);
    let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
    let name = rs.metadata.name.as_deref().unwrap_or_default();
    let key = || format!("{namespace}/{name}");

    let mut current = rs.clone();
    let mut attempt = 0;
    loop {
        let old = current.status.clone().unwrap_or_default();
        tracing::debug!(
            replica_set = %key(),
            replicas = %format!("{}->{} (need {})", old.replicas, new_status.replicas, desired_replicas(&current)),
            fully_labeled_replicas = %format!("{}->{}", old.fully_labeled_replicas.unwrap_or(0), new_status.fully_labeled_replicas.unwrap_or(0)),
            ready_replicas = %format!("{}->{}", old.ready_replicas.unwrap_or(0), new_status.ready_replicas.unwrap_or(0)),
            available_replicas = %format!("{}->{}", old.available_replicas.unwrap_or(0), new_status.available_replicas.unwrap_or(0)),
            observed_generation = %format!("{}->{}", old.observed_generation.unwrap_or(0), new_status.observed_generation.unwrap_or(0)),
            "updating status"
        );
        current.status = Some(new_status.clone());
        let source = match client.update_status(&current).await {
            Ok(updated) => return Ok(Some(updated)),
            Err(source) => source,
        };
        if attempt >= STATUS_UPDATE_RETRIES {
            return Err(Error::UpdateStatus {
                replica_set: key(),
                source,
            });
        }
        attempt += 1;
        current =
            client
                .get(namespace, name)
                .await
                .map_err(|source| Error::GetForStatusUpdate {
                    replica_set: key(),
                    source,
                })?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcm_testing::{
        MetaBuilder, PodBuilder, WorkloadBuilder, pod_condition, pod_template, selector,
    };

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("timestamp")
    }

    fn replica_set(replicas: i32, min_ready: i32) -> ReplicaSet {
        kcm_testing::replica_set("rs")
            .namespace("default")
            .replicas(replicas)
            .min_ready_seconds(min_ready)
            .selector(selector(&[("foo", "bar")]))
            .template(pod_template().labels(&[("foo", "bar"), ("tier", "web")]))
            .build()
    }

    /// A pod with `pod_labels`, ready since `ready_for` seconds before now when given.
    fn pod(pod_labels: &[(&str, &str)], ready_for: Option<i64>) -> Arc<Pod> {
        let pod = PodBuilder::default().labels(pod_labels).phase("Running");
        match ready_for {
            Some(secs) => pod
                .condition(
                    pod_condition("Ready", "True")
                        .transitioned_at(now() - jiff::SignedDuration::from_secs(secs)),
                )
                .arc(),
            None => pod.arc(),
        }
    }

    fn condition(type_: &str, reason: &str) -> ReplicaSetCondition {
        ReplicaSetCondition {
            type_: type_.into(),
            status: "True".into(),
            reason: Some(reason.into()),
            ..Default::default()
        }
    }

    fn with_conditions(conditions: Vec<ReplicaSetCondition>) -> ReplicaSetStatus {
        ReplicaSetStatus {
            conditions: (!conditions.is_empty()).then_some(conditions),
            ..Default::default()
        }
    }

    /// As upstream's `TestCalculateStatus`.
    #[test]
    fn calculate_status_counts() {
        struct Case {
            name: &'static str,
            min_ready: i32,
            pods: Vec<Arc<Pod>>,
            /// (replicas, fullyLabeled, ready, available)
            expected: (i32, i32, i32, i32),
        }
        let full = [("foo", "bar"), ("tier", "web")];
        let partial = [("foo", "bar")];
        let cases = [
            Case {
                name: "1 fully labelled pod",
                min_ready: 0,
                pods: vec![pod(&full, None)],
                expected: (1, 1, 0, 0),
            },
            Case {
                name: "1 not fully labelled pod",
                min_ready: 0,
                pods: vec![pod(&partial, None)],
                expected: (1, 0, 0, 0),
            },
            Case {
                name: "2 fully labelled pods, extra labels allowed",
                min_ready: 0,
                pods: vec![
                    pod(&full, None),
                    pod(&[("foo", "bar"), ("tier", "web"), ("x", "y")], None),
                ],
                expected: (2, 2, 0, 0),
            },
            Case {
                name: "1 fully labelled pod, 1 not",
                min_ready: 0,
                pods: vec![pod(&full, None), pod(&partial, None)],
                expected: (2, 1, 0, 0),
            },
            Case {
                name: "ready pods are available without minReadySeconds",
                min_ready: 0,
                pods: vec![pod(&full, Some(0)), pod(&partial, Some(0))],
                expected: (2, 1, 2, 2),
            },
            Case {
                name: "ready for less than minReadySeconds: not available",
                min_ready: 30,
                pods: vec![pod(&full, Some(29)), pod(&full, Some(31))],
                expected: (2, 2, 2, 1),
            },
            Case {
                name: "no pods",
                min_ready: 0,
                pods: vec![],
                expected: (0, 0, 0, 0),
            },
        ];
        for case in cases {
            let rs = replica_set(2, case.min_ready);
            let s = calculate_status(&rs, &case.pods, None, None, now());
            let got = (
                s.replicas,
                s.fully_labeled_replicas.unwrap_or(0),
                s.ready_replicas.unwrap_or(0),
                s.available_replicas.unwrap_or(0),
            );
            assert_eq!(got, case.expected, "{}", case.name);
            assert_ne!(s.ready_replicas, Some(0), "{}: zero is omitted", case.name);
        }
    }

    /// As upstream's `TestCalculateStatus` cases with `DeploymentReplicaSetTerminatingReplicas`.
    #[test]
    fn terminating_replicas_are_written_for_kinds_that_count_them_zero_included() {
        let rs = replica_set(2, 0);
        let pods = vec![pod(&[("foo", "bar")], None)];
        for (terminating, want) in [(Some(2), Some(2)), (Some(0), Some(0)), (None, None)] {
            let s = calculate_status(&rs, &pods, terminating, None, now());
            assert_eq!(s.terminating_replicas, want, "{terminating:?}");
        }
        // Unset and zero differ: the first pass of a ReplicaSet controller writes the zero.
        let mut synced = rs.clone();
        synced.status = Some(calculate_status(&rs, &pods, None, None, now()));
        assert!(status_unchanged(
            &synced,
            &calculate_status(&synced, &pods, None, None, now())
        ));
        assert!(!status_unchanged(
            &synced,
            &calculate_status(&synced, &pods, Some(0), None, now())
        ));
    }

    /// As upstream's `TestCalculateStatusConditions`.
    #[test]
    fn calculate_status_conditions() {
        struct Case {
            name: &'static str,
            replicas: i32,
            pods: usize,
            existing: Vec<ReplicaSetCondition>,
            error: Option<&'static str>,
            expected: Vec<(&'static str, &'static str)>,
        }
        let cases = [
            Case {
                name: "error, no condition yet, too few pods",
                replicas: 2,
                pods: 1,
                existing: vec![],
                error: Some("fake manageReplicasErr"),
                expected: vec![(REPLICA_FAILURE, "FailedCreate")],
            },
            Case {
                name: "error, no condition yet, too many pods",
                replicas: 2,
                pods: 3,
                existing: vec![],
                error: Some("fake manageReplicasErr"),
                expected: vec![(REPLICA_FAILURE, "FailedDelete")],
            },
            Case {
                name: "error with a failure condition already there: kept as is",
                replicas: 2,
                pods: 1,
                existing: vec![condition(REPLICA_FAILURE, "FailedDelete")],
                error: Some("fake manageReplicasErr"),
                expected: vec![(REPLICA_FAILURE, "FailedDelete")],
            },
            Case {
                name: "no error: the failure condition goes, others stay",
                replicas: 2,
                pods: 2,
                existing: vec![
                    condition("ImagePullBackOff", "NonExistentImage"),
                    condition(REPLICA_FAILURE, "FailedCreate"),
                ],
                error: None,
                expected: vec![("ImagePullBackOff", "NonExistentImage")],
            },
            Case {
                name: "no error, no condition",
                replicas: 2,
                pods: 2,
                existing: vec![],
                error: None,
                expected: vec![],
            },
        ];
        for case in cases {
            let mut rs = replica_set(case.replicas, 0);
            rs.status = Some(with_conditions(case.existing));
            let pods: Vec<_> = (0..case.pods)
                .map(|_| pod(&[("foo", "bar")], None))
                .collect();
            let s = calculate_status(&rs, &pods, None, case.error, now());
            let got: Vec<(String, String)> = s
                .conditions
                .iter()
                .flatten()
                .map(|c| (c.type_.clone(), c.reason.clone().unwrap_or_default()))
                .collect();
            let expected: Vec<(String, String)> = case
                .expected
                .iter()
                .map(|(t, r)| ((*t).to_owned(), (*r).to_owned()))
                .collect();
            assert_eq!(got, expected, "{}", case.name);
            if let (Some(message), Some(c)) = (case.error, get_condition(&s, REPLICA_FAILURE))
                && c.last_transition_time == Some(Time(now()))
            {
                assert_eq!(c.message.as_deref(), Some(message), "{}", case.name);
            }
        }
    }

    /// As upstream's `TestGetCondition`, `TestSetCondition` and `TestRemoveCondition`.
    #[test]
    fn condition_helpers() {
        let failure = condition(REPLICA_FAILURE, "OtherFailure");
        let failure2 = condition(REPLICA_FAILURE, "AnotherFailure");
        let backoff = condition("ImagePullBackOff", "NonExistentImage");

        let status = with_conditions(vec![failure.clone()]);
        assert!(
            get_condition(&status, REPLICA_FAILURE).is_some(),
            "condition exists"
        );
        assert!(
            get_condition(&status, "ImagePullBackOff").is_none(),
            "does not exist"
        );

        struct SetCase {
            name: &'static str,
            status: ReplicaSetStatus,
            cond: ReplicaSetCondition,
            expected: ReplicaSetStatus,
        }
        let set_cases = [
            SetCase {
                name: "set for the first time",
                status: with_conditions(vec![]),
                cond: failure.clone(),
                expected: with_conditions(vec![failure.clone()]),
            },
            SetCase {
                name: "simple set",
                status: with_conditions(vec![backoff.clone()]),
                cond: failure.clone(),
                expected: with_conditions(vec![backoff.clone(), failure.clone()]),
            },
            SetCase {
                name: "overwrite",
                status: with_conditions(vec![failure.clone()]),
                cond: failure2.clone(),
                expected: with_conditions(vec![failure2.clone()]),
            },
            SetCase {
                name: "same status and reason: kept, not replaced",
                status: with_conditions(vec![failure.clone()]),
                cond: new_condition(REPLICA_FAILURE, "True", "OtherFailure", "new", now()),
                expected: with_conditions(vec![failure.clone()]),
            },
        ];
        for mut case in set_cases {
            set_condition(&mut case.status, case.cond);
            assert_eq!(case.status, case.expected, "{}", case.name);
        }

        struct RemoveCase {
            name: &'static str,
            status: ReplicaSetStatus,
            type_: &'static str,
            expected: ReplicaSetStatus,
        }
        let remove_cases = [
            RemoveCase {
                name: "remove from empty status",
                status: with_conditions(vec![]),
                type_: REPLICA_FAILURE,
                expected: with_conditions(vec![]),
            },
            RemoveCase {
                name: "simple remove",
                status: with_conditions(vec![failure.clone()]),
                type_: REPLICA_FAILURE,
                expected: with_conditions(vec![]),
            },
            RemoveCase {
                name: "doesn't remove anything",
                status: with_conditions(vec![failure.clone()]),
                type_: "ImagePullBackOff",
                expected: with_conditions(vec![failure.clone()]),
            },
        ];
        for mut case in remove_cases {
            remove_condition(&mut case.status, case.type_);
            assert_eq!(case.status, case.expected, "{}", case.name);
        }
    }

    #[test]
    fn unchanged_status_compares_absent_as_zero() {
        let mut rs = replica_set(2, 0);
        rs.metadata.generation = Some(1);
        rs.status = Some(ReplicaSetStatus {
            replicas: 2,
            ready_replicas: Some(0),
            observed_generation: Some(1),
            conditions: Some(vec![]),
            ..Default::default()
        });
        let same = ReplicaSetStatus {
            replicas: 2,
            observed_generation: Some(1),
            ..Default::default()
        };
        assert!(status_unchanged(&rs, &same));
        let more_ready = ReplicaSetStatus {
            ready_replicas: Some(1),
            ..same.clone()
        };
        assert!(!status_unchanged(&rs, &more_ready));
        rs.metadata.generation = Some(2);
        assert!(
            !status_unchanged(&rs, &same),
            "a new generation is a change"
        );
    }
}
