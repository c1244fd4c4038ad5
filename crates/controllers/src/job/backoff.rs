//! The pod-failure back-off: how long a Job waits before replacing failed pods (10 s, doubling per consecutive failure, capped), when a pod finished, and the per-index variant, as upstream's `backoff_utils.go`.
//!
//! A [`BackoffRecord`] per Job remembers the failures since the last success and when the
//! last one happened; the [`BackoffStore`] keeps them between syncs. Times come in as
//! arguments (`now`), never from the wall clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::completions_or_zero;
use super::finished_pods::{pod_uid, valid_pods_with_filter};
use super::indexed::{completion_index, index_absolute_failure_count, indexes_of};
use super::intervals::OrderedIntervals;
use super::status::is_pod_failed;

/// The back-off after the first failure, as upstream's `DefaultJobPodFailureBackOff`.
pub const DEFAULT_JOB_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
/// The longest back-off, as upstream's `MaxJobPodFailureBackOff` (10 minutes in the
/// controller's code since 1.28; the Job documentation still says six).
pub const MAX_JOB_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10 * 60);

pub use kcm_machinery::cron::go_time::GO_ZERO_TIME;

/// Consecutive pod failures of one Job since its last success, as upstream's
/// `backoffRecord`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackoffRecord {
    /// The Job key (`namespace/name`).
    pub key: String,
    /// Failures finished after the last success.
    pub failures_after_last_success: i32,
    /// When the last of those failures finished; `None` when there are none.
    pub last_failure_time: Option<Timestamp>,
}

impl BackoffRecord {
    /// How long pod creation must still wait at `now`, as upstream's `getRemainingTime`.
    pub fn remaining_time(&self, now: Timestamp, default: Duration, max: Duration) -> Duration {
        remaining_time_for_failures_count(
            now,
            default,
            max,
            self.failures_after_last_success,
            self.last_failure_time,
        )
    }
}

/// The back-off records of all Jobs, as upstream's `backoffStore`. Safe to share between
/// workers; a record is replaced whole, never edited in place by readers.
#[derive(Debug, Default)]
pub struct BackoffStore {
    /// Job key → its record.
    records: Mutex<HashMap<String, BackoffRecord>>,
}

impl BackoffStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, HashMap<String, BackoffRecord>> {
        // The map holds plain values; a panic elsewhere cannot leave it half-written.
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The record of `key`, if any.
    pub fn get(&self, key: &str) -> Option<BackoffRecord> {
        self.locked().get(key).cloned()
    }

    /// Stores `record` under its key, as upstream's `updateBackoffRecord`.
    pub fn update_backoff_record(&self, record: BackoffRecord) {
        self.locked().insert(record.key.clone(), record);
    }

    /// Forgets the record of `key` (the Job finished or was deleted), as upstream's
    /// `removeBackoffRecord`.
    pub fn remove_backoff_record(&self, key: &str) {
        self.locked().remove(key);
    }

    /// The record of `key` updated with this sync's newly finished pods (not stored), as
    /// upstream's `newBackoffRecord`: failures add up; a success resets the count to the
    /// failures that finished after the latest success.
    pub fn new_backoff_record(
        &self,
        key: &str,
        new_succeeded_pods: &[Arc<Pod>],
        new_failed_pods: &[Arc<Pod>],
    ) -> BackoffRecord {
        let previous = self.get(key);
        next_backoff_record(key, previous, new_succeeded_pods, new_failed_pods)
    }
}

/// [`BackoffStore::new_backoff_record`] on an explicit previous record.
pub fn next_backoff_record(
    key: &str,
    previous: Option<BackoffRecord>,
    new_succeeded_pods: &[Arc<Pod>],
    new_failed_pods: &[Arc<Pod>],
) -> BackoffRecord {
    let mut record = previous.unwrap_or_else(|| BackoffRecord {
        key: key.to_owned(),
        ..Default::default()
    });
    let mut succeeded: Vec<Timestamp> = new_succeeded_pods
        .iter()
        .map(|p| finished_time(p))
        .collect();
    let mut failed: Vec<Timestamp> = new_failed_pods.iter().map(|p| finished_time(p)).collect();
    succeeded.sort();
    failed.sort();
    if succeeded.is_empty() {
        if let Some(&last_failure) = failed.last() {
            let new_failures = i32::try_from(failed.len()).unwrap_or(i32::MAX);
            record.failures_after_last_success = record
                .failures_after_last_success
                .saturating_add(new_failures);
            record.last_failure_time = Some(last_failure);
        }
        return record;
    }
    record.failures_after_last_success = 0;
    record.last_failure_time = None;
    if let Some(&last_success) = succeeded.last() {
        // Only failures after the latest success count.
        for &failure in failed.iter().rev() {
            if failure <= last_success {
                break;
            }
            record.last_failure_time.get_or_insert(failure);
            record.failures_after_last_success += 1;
        }
    }
    record
}

/// When the pod finished, as upstream's `getFinishedTime`: the latest container finish time
/// if all containers terminated (restartable init containers, i.e. sidecars, included), else
/// the `Ready=False` transition, else the deletion timestamp minus its grace period, else the
/// creation timestamp.
pub fn finished_time(pod: &Pod) -> Timestamp {
    finish_time_from_containers(pod)
        .or_else(|| finish_time_from_pod_ready_false_condition(pod))
        .or_else(|| finish_time_from_deletion_timestamp(pod))
        .unwrap_or_else(|| {
            pod.metadata
                .creation_timestamp
                .as_ref()
                .map_or(GO_ZERO_TIME, |t| t.0)
        })
}

fn finish_time_from_containers(pod: &Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref()?;
    let regular = latest_finish_time(None, status.container_statuses.iter().flatten());
    // Sidecars (restartable init containers) stop after the regular containers.
    let sidecars: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let init = status
        .init_container_statuses
        .iter()
        .flatten()
        .filter(|s| sidecars.contains(&s.name.as_str()));
    latest_finish_time(regular, init)
}

/// The latest finish time of `statuses` (starting from `previous`), `None` as soon as one of
/// them has not terminated, as upstream's `latestFinishTime`. With no statuses at all it
/// returns `previous`.
fn latest_finish_time<'a>(
    previous: Option<Timestamp>,
    statuses: impl Iterator<Item = &'a ContainerStatus>,
) -> Option<Timestamp> {
    let mut latest = previous;
    let mut any = false;
    for status in statuses {
        any = true;
        let finished = status
            .state
            .as_ref()?
            .terminated
            .as_ref()?
            .finished_at
            .as_ref()?
            .0;
        if latest.is_none_or(|l| l < finished) {
            latest = Some(finished);
        }
    }
    if any { latest } else { previous }
}

fn finish_time_from_pod_ready_false_condition(pod: &Pod) -> Option<Timestamp> {
    let ready = pod
        .status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")?;
    if ready.status != "False" {
        return None;
    }
    ready.last_transition_time.as_ref().map(|t| t.0)
}

fn finish_time_from_deletion_timestamp(pod: &Pod) -> Option<Timestamp> {
    let deleted = pod.metadata.deletion_timestamp.as_ref()?.0;
    let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
    deleted
        .checked_sub(SignedDuration::from_secs(grace))
        .ok()
        .or(Some(deleted))
}

/// The back-off after `failures` consecutive failures, the last at `last_failure_time`,
/// still left at `now`, as upstream's `getRemainingTimeForFailuresCount`: `default` doubled
/// per failure after the first, capped at `max`.
pub fn remaining_time_for_failures_count(
    now: Timestamp,
    default: Duration,
    max: Duration,
    failures: i32,
    last_failure_time: Option<Timestamp>,
) -> Duration {
    if failures <= 0 {
        return Duration::ZERO;
    }
    let mut backoff = default;
    for _ in 1..failures {
        backoff = backoff.saturating_mul(2);
        if backoff >= max {
            backoff = max;
            break;
        }
    }
    // Upstream dereferences the time unconditionally; a record with failures always has one.
    let Some(last) = last_failure_time else {
        return Duration::ZERO;
    };
    let elapsed = now.duration_since(last);
    let Ok(backoff) = SignedDuration::try_from(backoff) else {
        return max;
    };
    if backoff < elapsed {
        return Duration::ZERO;
    }
    Duration::try_from(backoff.saturating_sub(elapsed)).unwrap_or(Duration::ZERO)
}

/// The back-off still left for an index whose last failed pod is `last_failed_pod`, as
/// upstream's `getRemainingTimePerIndex`: its failures so far come from the pod's
/// failure-count annotations, plus the pod itself.
pub fn remaining_time_per_index(
    now: Timestamp,
    default: Duration,
    max: Duration,
    last_failed_pod: Option<&Pod>,
) -> Duration {
    let Some(pod) = last_failed_pod else {
        return Duration::ZERO;
    };
    let failures = index_absolute_failure_count(pod).saturating_add(1);
    remaining_time_for_failures_count(now, default, max, failures, Some(finished_time(pod)))
}

/// For each index with no active pod and not yet succeeded or failed, its latest failed pod
/// (most failures, then latest finish), whose finalizer stays until the replacement pod
/// copies its failure count, as upstream's `getPodsWithDelayedDeletionPerIndex`.
pub fn pods_with_delayed_deletion_per_index(
    job: &Job,
    pods: &[Arc<Pod>],
    active_pods: &[Arc<Pod>],
    succeeded_indexes: &OrderedIntervals,
    failed_indexes: Option<&OrderedIntervals>,
    expected_rm_finalizers: &std::collections::HashSet<String>,
) -> HashMap<i32, Arc<Pod>> {
    // Failed pods of indexes with an active pod can go: that pod carries the count already.
    let active = indexes_of(active_pods);
    let completions = completions_or_zero(job);
    let mut delayed: HashMap<i32, Arc<Pod>> = HashMap::new();
    let candidates = valid_pods_with_filter(job, pods, None, expected_rm_finalizers, |p| {
        is_pod_failed(p, job)
    });
    for pod in candidates {
        let Some(index) = completion_index(&pod).filter(|&ix| ix < completions) else {
            continue;
        };
        if succeeded_indexes.has(index)
            || failed_indexes.is_some_and(|f| f.has(index))
            || active.binary_search(&index).is_ok()
        {
            continue;
        }
        match delayed.get(&index) {
            Some(last)
                if index_absolute_failure_count(last) <= index_absolute_failure_count(&pod)
                    && finished_time(&pod) >= finished_time(last) =>
            {
                delayed.insert(index, pod);
            }
            Some(_) => {}
            None => {
                delayed.insert(index, pod);
            }
        }
    }
    tracing::trace!(pods = ?delayed.values().map(|p| pod_uid(p)).collect::<Vec<_>>(), "delayed deletions");
    delayed
}

/// Of `indexes_to_add`, those whose back-off is over; when none is, the shortest back-off
/// left among them, as upstream's `getPodCreationInfoForIndependentIndexes`.
pub fn pod_creation_info_for_independent_indexes(
    now: Timestamp,
    indexes_to_add: &[i32],
    pods_with_delayed_deletion_per_index: &HashMap<i32, Arc<Pod>>,
) -> (Vec<i32>, Duration) {
    let mut ready = Vec::new();
    let mut min_remaining: Option<Duration> = None;
    for &index in indexes_to_add {
        let last_failed = pods_with_delayed_deletion_per_index
            .get(&index)
            .map(|p| &**p);
        let remaining = remaining_time_per_index(
            now,
            DEFAULT_JOB_POD_FAILURE_BACKOFF,
            MAX_JOB_POD_FAILURE_BACKOFF,
            last_failed,
        );
        if remaining.is_zero() {
            ready.push(index);
        } else if min_remaining.is_none_or(|m| remaining < m) {
            min_remaining = Some(remaining);
        }
    }
    if !ready.is_empty() {
        return (ready, Duration::ZERO);
    }
    (ready, min_remaining.unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::indexed::{
        JOB_COMPLETION_INDEX_ANNOTATION, JOB_INDEX_FAILURE_COUNT_ANNOTATION,
        JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION,
    };
    use crate::job::tracking::JOB_TRACKING_FINALIZER;
    use k8s_openapi::api::batch::v1::JobSpec;
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, PodCondition,
        PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use std::collections::{BTreeMap, HashSet};

    fn default_test_time() -> Timestamp {
        "2009-11-10T23:00:00Z".parse().expect("timestamp")
    }

    fn ms(n: i64) -> SignedDuration {
        SignedDuration::from_millis(n)
    }

    fn terminated_at(finished_at: Option<Timestamp>) -> ContainerStatus {
        ContainerStatus {
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    finished_at: finished_at.map(Time),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn running() -> ContainerStatus {
        ContainerStatus {
            state: Some(ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn finished_pod(phase: &str, at: Timestamp) -> Arc<Pod> {
        Arc::new(Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                container_statuses: Some(vec![terminated_at(Some(at))]),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    #[test]
    fn new_backoff_record_table() {
        let t = default_test_time();
        struct Case {
            name: &'static str,
            previous: Option<BackoffRecord>,
            succeeded: Vec<Timestamp>,
            failed: Vec<Timestamp>,
            want: BackoffRecord,
        }
        let record = |failures: i32, last: Option<Timestamp>| BackoffRecord {
            key: "key".into(),
            failures_after_last_success: failures,
            last_failure_time: last,
        };
        let cases = vec![
            Case {
                name: "Empty backoff store and one new failure",
                previous: None,
                succeeded: vec![],
                failed: vec![t],
                want: record(1, Some(t)),
            },
            Case {
                name: "Empty backoff store and two new failures",
                previous: None,
                succeeded: vec![],
                failed: vec![t, t - ms(1)],
                want: record(2, Some(t)),
            },
            Case {
                name: "Empty backoff store, two failures followed by success",
                previous: None,
                succeeded: vec![t],
                failed: vec![t - ms(2), t - ms(1)],
                want: record(0, None),
            },
            Case {
                name: "Empty backoff store, two failures, one success and two more failures",
                previous: None,
                succeeded: vec![t - ms(2)],
                failed: vec![t, t - ms(4), t - ms(3), t - ms(1)],
                want: record(2, Some(t)),
            },
            Case {
                name: "Backoff store having failure count 2 and one new failure",
                previous: Some(record(2, None)),
                succeeded: vec![],
                failed: vec![t],
                want: record(3, Some(t)),
            },
            Case {
                name: "Empty backoff store with success and failure at same timestamp",
                previous: None,
                succeeded: vec![t],
                failed: vec![t],
                want: record(0, None),
            },
            Case {
                name: "Empty backoff store with no success/failure",
                previous: None,
                succeeded: vec![],
                failed: vec![],
                want: record(0, None),
            },
            Case {
                name: "Empty backoff store with one success",
                previous: None,
                succeeded: vec![t],
                failed: vec![],
                want: record(0, None),
            },
        ];
        for c in cases {
            let store = BackoffStore::new();
            if let Some(previous) = c.previous {
                store.update_backoff_record(previous);
            }
            let succeeded: Vec<_> = c
                .succeeded
                .iter()
                .map(|&at| finished_pod("Succeeded", at))
                .collect();
            let failed: Vec<_> = c
                .failed
                .iter()
                .map(|&at| finished_pod("Failed", at))
                .collect();
            assert_eq!(
                store.new_backoff_record("key", &succeeded, &failed),
                c.want,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn store_update_and_remove() {
        let store = BackoffStore::new();
        let record = BackoffRecord {
            key: "ns/job".into(),
            failures_after_last_success: 1,
            last_failure_time: Some(default_test_time()),
        };
        store.update_backoff_record(record.clone());
        assert_eq!(store.get("ns/job"), Some(record));
        store.remove_backoff_record("ns/job");
        assert_eq!(store.get("ns/job"), None);
    }

    #[test]
    fn finished_time_table() {
        let t = default_test_time();
        let minus = |s: i64| t - SignedDuration::from_secs(s);
        struct Case {
            name: &'static str,
            pod: Pod,
            want: Timestamp,
        }
        let with_status = |statuses: Vec<ContainerStatus>| PodStatus {
            container_statuses: Some(statuses),
            ..Default::default()
        };
        let deleted = |grace: Option<i64>| ObjectMeta {
            deletion_timestamp: Some(Time(t)),
            deletion_grace_period_seconds: grace,
            ..Default::default()
        };
        let cases = vec![
            Case {
                name: "Pod with multiple containers and all containers terminated",
                pod: Pod {
                    status: Some(with_status(vec![
                        terminated_at(Some(minus(1))),
                        terminated_at(Some(t)),
                        terminated_at(Some(minus(2))),
                    ])),
                    ..Default::default()
                },
                want: t,
            },
            Case {
                name: "Pod with multiple containers; two containers in terminated state and one in running state; fallback to deletionTimestamp",
                pod: Pod {
                    metadata: deleted(None),
                    status: Some(with_status(vec![
                        terminated_at(Some(minus(1))),
                        running(),
                        terminated_at(Some(minus(2))),
                    ])),
                    ..Default::default()
                },
                want: t,
            },
            Case {
                name: "fallback to deletionTimestamp",
                pod: Pod {
                    metadata: deleted(None),
                    status: Some(with_status(vec![running()])),
                    ..Default::default()
                },
                want: t,
            },
            Case {
                name: "fallback to deletionTimestamp, decremented by grace period",
                pod: Pod {
                    metadata: deleted(Some(30)),
                    status: Some(with_status(vec![running()])),
                    ..Default::default()
                },
                want: minus(30),
            },
            Case {
                name: "fallback to PodReady.LastTransitionTime when status of the condition is False",
                pod: Pod {
                    status: Some(PodStatus {
                        container_statuses: Some(vec![terminated_at(None)]),
                        conditions: Some(vec![PodCondition {
                            type_: "Ready".into(),
                            status: "False".into(),
                            reason: Some("PodFailed".into()),
                            last_transition_time: Some(Time(t)),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                want: t,
            },
            Case {
                name: "skip fallback to PodReady.LastTransitionTime when status of the condition is True",
                pod: Pod {
                    metadata: deleted(None),
                    status: Some(PodStatus {
                        container_statuses: Some(vec![terminated_at(None)]),
                        conditions: Some(vec![PodCondition {
                            type_: "Ready".into(),
                            status: "True".into(),
                            last_transition_time: Some(Time(minus(30))),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                want: t,
            },
            Case {
                name: "fallback to creationTimestamp",
                pod: Pod {
                    metadata: ObjectMeta {
                        creation_timestamp: Some(Time(t)),
                        ..Default::default()
                    },
                    status: Some(with_status(vec![terminated_at(None)])),
                    ..Default::default()
                },
                want: t,
            },
            Case {
                name: "Pod with sidecar container and all containers terminated",
                pod: Pod {
                    spec: Some(PodSpec {
                        init_containers: Some(vec![Container {
                            name: "sidecar".into(),
                            restart_policy: Some("Always".into()),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }),
                    status: Some(PodStatus {
                        container_statuses: Some(vec![terminated_at(Some(minus(1)))]),
                        init_container_statuses: Some(vec![ContainerStatus {
                            name: "sidecar".into(),
                            ..terminated_at(Some(t))
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                want: t,
            },
            Case {
                name: "no timestamps at all is Go's zero time",
                pod: Pod::default(),
                want: GO_ZERO_TIME,
            },
        ];
        for c in cases {
            assert_eq!(finished_time(&c.pod), c.want, "{}", c.name);
        }
    }

    #[test]
    fn remaining_backoff_time_table() {
        let t = default_test_time();
        struct Case {
            name: &'static str,
            failures: i32,
            last: Option<Timestamp>,
            now: Timestamp,
            want_secs: u64,
        }
        let at = |s: i64| t + SignedDuration::from_secs(s);
        let cases = [
            Case {
                name: "no failures",
                failures: 0,
                last: None,
                now: t,
                want_secs: 0,
            },
            Case {
                name: "one failure; current time and failure time are same",
                failures: 1,
                last: Some(t),
                now: t,
                want_secs: 5,
            },
            Case {
                name: "one failure; current time == 1 second + failure time",
                failures: 1,
                last: Some(t),
                now: at(1),
                want_secs: 4,
            },
            Case {
                name: "one failure; current time == expected backoff time",
                failures: 1,
                last: Some(t),
                now: at(5),
                want_secs: 0,
            },
            Case {
                name: "one failure; current time == expected backoff time + 1 Second",
                failures: 1,
                last: Some(t),
                now: at(6),
                want_secs: 0,
            },
            Case {
                name: "three failures; current time and failure time are same",
                failures: 3,
                last: Some(t),
                now: t,
                want_secs: 20,
            },
            Case {
                name: "eight failures; current time and failure time are same; backoff not exceeding maxBackoff",
                failures: 8,
                last: Some(t),
                now: t,
                want_secs: 640,
            },
            Case {
                name: "nine failures; current time and failure time are same; backoff exceeding maxBackoff",
                failures: 9,
                last: Some(t),
                now: t,
                want_secs: 700,
            },
        ];
        for c in cases {
            let record = BackoffRecord {
                key: String::new(),
                failures_after_last_success: c.failures,
                last_failure_time: c.last,
            };
            let got =
                record.remaining_time(c.now, Duration::from_secs(5), Duration::from_secs(700));
            assert_eq!(got, Duration::from_secs(c.want_secs), "{}", c.name);
        }
        // The controller's own constants: 10 s, 20 s, 40 s, ... capped at 10 minutes.
        let record = |n: i32| BackoffRecord {
            key: String::new(),
            failures_after_last_success: n,
            last_failure_time: Some(t),
        };
        let real = |n: i32| {
            record(n).remaining_time(
                t,
                DEFAULT_JOB_POD_FAILURE_BACKOFF,
                MAX_JOB_POD_FAILURE_BACKOFF,
            )
        };
        assert_eq!(real(1), Duration::from_secs(10));
        assert_eq!(real(3), Duration::from_secs(40));
        assert_eq!(real(7), Duration::from_secs(600));
        assert_eq!(real(1000), Duration::from_secs(600));
    }

    fn failed_index_pod(
        uid: &str,
        index: &str,
        count: &str,
        ignored: Option<&str>,
        deleted_at: Timestamp,
    ) -> Arc<Pod> {
        let mut annotations = BTreeMap::from([
            (JOB_COMPLETION_INDEX_ANNOTATION.to_owned(), index.to_owned()),
            (
                JOB_INDEX_FAILURE_COUNT_ANNOTATION.to_owned(),
                count.to_owned(),
            ),
        ]);
        if let Some(ignored) = ignored {
            annotations.insert(
                JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION.to_owned(),
                ignored.to_owned(),
            );
        }
        Arc::new(Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                annotations: Some(annotations),
                finalizers: Some(vec![JOB_TRACKING_FINALIZER.to_owned()]),
                deletion_timestamp: Some(Time(deleted_at)),
                ..Default::default()
            },
            status: Some(PodStatus {
                phase: Some("Failed".into()),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    #[test]
    fn remaining_backoff_time_per_index_table() {
        let t = default_test_time();
        struct Case {
            name: &'static str,
            pod: Option<Arc<Pod>>,
            want_secs: u64,
        }
        let cases = vec![
            Case {
                name: "no failures",
                pod: None,
                want_secs: 0,
            },
            Case {
                name: "two prev failures; current time and failure time are same",
                pod: Some(failed_index_pod("a", "0", "2", None, t)),
                want_secs: 20,
            },
            Case {
                name: "one prev failure counted and one ignored; current time and failure time are same",
                pod: Some(failed_index_pod("a", "0", "1", Some("1"), t)),
                want_secs: 20,
            },
        ];
        for c in cases {
            let got = remaining_time_per_index(
                t,
                Duration::from_secs(5),
                Duration::from_secs(700),
                c.pod.as_deref(),
            );
            assert_eq!(got, Duration::from_secs(c.want_secs), "{}", c.name);
        }
    }

    #[test]
    fn delayed_deletion_keeps_the_latest_failed_pod_per_pending_index() {
        let t = default_test_time();
        let job = Job {
            spec: Some(JobSpec {
                completion_mode: Some("Indexed".into()),
                completions: Some(4),
                backoff_limit_per_index: Some(3),
                ..Default::default()
            }),
            ..Default::default()
        };
        let older = failed_index_pod("old", "0", "0", None, t);
        let newer = failed_index_pod("new", "0", "1", None, t + SignedDuration::from_secs(5));
        let of_succeeded = failed_index_pod("s", "1", "0", None, t);
        let of_active = failed_index_pod("x", "2", "0", None, t);
        let mut active = failed_index_pod("act", "2", "1", None, t);
        if let Some(s) = Arc::make_mut(&mut active).status.as_mut() {
            s.phase = Some("Running".into());
        }
        Arc::make_mut(&mut active).metadata.deletion_timestamp = None;
        let of_failed = failed_index_pod("f", "3", "3", None, t);
        let pods = vec![
            newer.clone(),
            older,
            of_succeeded,
            of_active,
            active.clone(),
            of_failed,
        ];
        let succeeded: OrderedIntervals = vec![crate::job::Interval::new(1, 1)].into();
        let failed: OrderedIntervals = vec![crate::job::Interval::new(3, 3)].into();
        let delayed = pods_with_delayed_deletion_per_index(
            &job,
            &pods,
            &[active],
            &succeeded,
            Some(&failed),
            &HashSet::new(),
        );
        assert_eq!(delayed.len(), 1);
        assert_eq!(delayed.get(&0).map(|p| pod_uid(p)), Some("new"));

        // Index 0 waits: its last pod failed twice in total (count 1 + itself), 20 s back-off
        // from 5 s after t; index 1 has no failed pod and can start at once.
        let now = t + SignedDuration::from_secs(10);
        assert_eq!(
            pod_creation_info_for_independent_indexes(now, &[0], &delayed),
            (vec![], Duration::from_secs(15))
        );
        assert_eq!(
            pod_creation_info_for_independent_indexes(now, &[0, 1], &delayed),
            (vec![1], Duration::ZERO)
        );
    }
}
