//! The arithmetic of upstream's `manageJob` as a plan: from the Job's spec and its active, succeeded and terminating pods, which pods to delete or how many (and which indexes) to create, or how long to back off.
//!
//! The caller carries the plan out (expectations, pod deletions, slow-start creations) and
//! reports the `job_sync_*` metrics with [`ManagePlan::sync_action`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::controller::ranking::sort_active_pods;

use super::backoff::{
    BackoffRecord, DEFAULT_JOB_POD_FAILURE_BACKOFF, MAX_JOB_POD_FAILURE_BACKOFF,
    pod_creation_info_for_independent_indexes,
};
use super::indexed::{
    append_duplicated_index_pods_for_removal, first_pending_indexes, has_backoff_limit_per_index,
    is_indexed_job,
};
use super::intervals::OrderedIntervals;
use super::status::{count, job_suspended, only_replace_failed_pods};
use super::{completions, completions_or_zero, parallelism};

/// At most this many pods are created or deleted in one sync, as upstream's
/// `MaxPodCreateDeletePerSync`.
pub const MAX_POD_CREATE_DELETE_PER_SYNC: usize = 500;
/// At most this many UIDs are kept in `status.uncountedTerminatedPods` (about 20 KB), as
/// upstream's `MaxUncountedPods`.
pub const MAX_UNCOUNTED_PODS: usize = 500;
/// Pod events are batched: a Job syncs at most once per this period for them, as upstream's
/// `syncJobBatchPeriod`; back-off delays are never shorter.
pub const SYNC_JOB_BATCH_PERIOD: Duration = Duration::from_secs(1);

/// `action` label of `job_sync_duration_seconds`/`job_syncs_total`: a finishing Job.
pub const SYNC_ACTION_RECONCILING: &str = "reconciling";
/// `action` label: the sync only tracked pods.
pub const SYNC_ACTION_TRACKING: &str = "tracking";
/// `action` label: the sync created pods (or backed off from creating them).
pub const SYNC_ACTION_PODS_CREATED: &str = "pods_created";
/// `action` label: the sync deleted pods.
pub const SYNC_ACTION_PODS_DELETED: &str = "pods_deleted";

/// What one `manageJob` pass should do. Deletion and creation never happen in the same pass;
/// deletion wins.
#[derive(Clone, Debug, PartialEq)]
pub enum ManagePlan {
    /// Delete these active pods: all of them for a suspended Job, else the surplus (and, for
    /// Indexed Jobs, pods with duplicated or invalid indexes), worst-ranked first.
    Delete {
        /// The pods, in deletion order.
        pods: Vec<Arc<Pod>>,
    },
    /// Pods are missing but the pod-failure back-off has not passed: sync again after
    /// `delay` (never less than [`SYNC_JOB_BATCH_PERIOD`]). Upstream reports `status.active`
    /// as 0 for such a pass.
    Backoff {
        /// When to sync again.
        delay: Duration,
    },
    /// Create `count` pods; for an Indexed Job one per entry of `indexes` (then `count` is
    /// its length).
    Create {
        /// How many pods.
        count: usize,
        /// The completion indexes, lowest first; empty for a NonIndexed Job.
        indexes: Vec<i32>,
    },
    /// The right number of pods is running.
    Nothing,
}

impl ManagePlan {
    /// The `action` label the sync reports for this plan, as the action `manageJob` returns.
    pub fn sync_action(&self) -> &'static str {
        match self {
            Self::Delete { .. } => SYNC_ACTION_PODS_DELETED,
            Self::Backoff { .. } | Self::Create { .. } => SYNC_ACTION_PODS_CREATED,
            Self::Nothing => SYNC_ACTION_TRACKING,
        }
    }
}

/// What `manageJob` decides from.
#[derive(Clone, Copy, Debug)]
pub struct ManageInput<'a> {
    /// The Job.
    pub job: &'a Job,
    /// All pods of the Job (for terminating indexes).
    pub pods: &'a [Arc<Pod>],
    /// Its active pods.
    pub active_pods: &'a [Arc<Pod>],
    /// Succeeded pods (for an Indexed Job, succeeded indexes), counted and uncounted.
    pub succeeded: i32,
    /// Pods being deleted that have not finished (`status.terminating` of this sync).
    pub terminating: i32,
    /// Succeeded indexes (Indexed Jobs).
    pub succeeded_indexes: &'a OrderedIntervals,
    /// Failed indexes (Indexed Jobs with `backoffLimitPerIndex`).
    pub failed_indexes: Option<&'a OrderedIntervals>,
    /// The last failed pod of each index waiting for a replacement (`backoffLimitPerIndex`).
    pub pods_with_delayed_deletion_per_index: &'a HashMap<i32, Arc<Pod>>,
    /// The Job's back-off record after this sync's newly finished pods.
    pub backoff: &'a BackoffRecord,
    /// The current time.
    pub now: Timestamp,
}

/// How many pods should be active, as in upstream's `manageJob`: without `completions`,
/// `parallelism` until the first success, then whatever is still running; with it, the
/// remaining completions, at most `parallelism`, never negative.
pub fn want_active(job: &Job, succeeded: i32, active: i32) -> i32 {
    let parallelism = parallelism(job);
    match completions(job) {
        None if succeeded > 0 => active,
        None => parallelism,
        Some(completions) => completions
            .saturating_sub(succeeded)
            .clamp(0, parallelism.max(0)),
    }
}

/// The plan of one `manageJob` pass, as upstream's `manageJob` without its API calls.
pub fn plan_manage_job(input: &ManageInput<'_>) -> ManagePlan {
    let job = input.job;
    let active = count(input.active_pods.len());
    if job_suspended(job) {
        let pods = active_pods_for_removal(job, input.active_pods, input.active_pods.len());
        return ManagePlan::Delete { pods };
    }

    let want = want_active(job, input.succeeded, active);
    let rm_at_least = usize::try_from(active.saturating_sub(want)).unwrap_or(0);
    let mut to_delete = active_pods_for_removal(job, input.active_pods, rm_at_least);
    if !to_delete.is_empty() {
        to_delete.truncate(MAX_POD_CREATE_DELETE_PER_SYNC);
        return ManagePlan::Delete { pods: to_delete };
    }

    // With `podReplacementPolicy: Failed` (or a pod failure policy) terminating pods still
    // hold their place.
    let terminating = if only_replace_failed_pods(job) {
        input.terminating
    } else {
        0
    };
    let diff = want.saturating_sub(terminating).saturating_sub(active);
    if diff <= 0 {
        return ManagePlan::Nothing;
    }
    let per_index = has_backoff_limit_per_index(job);
    if !per_index {
        let remaining = input.backoff.remaining_time(
            input.now,
            DEFAULT_JOB_POD_FAILURE_BACKOFF,
            MAX_JOB_POD_FAILURE_BACKOFF,
        );
        if !remaining.is_zero() {
            return ManagePlan::Backoff {
                delay: remaining.max(SYNC_JOB_BATCH_PERIOD),
            };
        }
    }
    let diff = usize::try_from(diff)
        .unwrap_or(0)
        .min(MAX_POD_CREATE_DELETE_PER_SYNC);
    if !is_indexed_job(job) {
        return ManagePlan::Create {
            count: diff,
            indexes: Vec::new(),
        };
    }
    let completions = completions_or_zero(job);
    let mut indexes = first_pending_indexes(
        job,
        input.active_pods,
        input.pods,
        input.succeeded_indexes,
        input.failed_indexes,
        count(diff),
        completions,
    );
    if per_index {
        let (ready, remaining) = pod_creation_info_for_independent_indexes(
            input.now,
            &indexes,
            input.pods_with_delayed_deletion_per_index,
        );
        if !remaining.is_zero() {
            return ManagePlan::Backoff {
                delay: remaining.max(SYNC_JOB_BATCH_PERIOD),
            };
        }
        indexes = ready;
    }
    ManagePlan::Create {
        count: indexes.len(),
        indexes,
    }
}

/// The active pods to delete, at least `rm_at_least` of them, as upstream's
/// `activePodsForRemoval`: for an Indexed Job first those with duplicated, invalid or
/// out-of-range indexes; then the rest in `ActivePods` order (not ready before ready,
/// unscheduled before scheduled, pending before running).
pub fn active_pods_for_removal(job: &Job, pods: &[Arc<Pod>], rm_at_least: usize) -> Vec<Arc<Pod>> {
    let (mut rm, mut left) = if is_indexed_job(job) {
        append_duplicated_index_pods_for_removal(pods, completions_or_zero(job))
    } else {
        (Vec::new(), pods.to_vec())
    };
    if rm.len() < rm_at_least {
        sort_active_pods(&mut left);
        let more = (rm_at_least - rm.len()).min(left.len());
        rm.extend(left.drain(..more));
    }
    rm
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::indexed::{
        JOB_COMPLETION_INDEX_ANNOTATION, JOB_INDEX_FAILURE_COUNT_ANNOTATION,
    };
    use crate::job::intervals::Interval;
    use k8s_openapi::api::batch::v1::JobSpec;
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use std::collections::BTreeMap;

    fn now() -> Timestamp {
        "2024-03-01T12:00:00Z".parse().expect("timestamp")
    }

    fn job(completions: Option<i32>, parallelism: i32) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some("job".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: Some(JobSpec {
                completions,
                parallelism: Some(parallelism),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn indexed(completions: i32, parallelism: i32) -> Job {
        let mut j = job(Some(completions), parallelism);
        if let Some(s) = j.spec.as_mut() {
            s.completion_mode = Some("Indexed".into());
        }
        j
    }

    fn pod(name: &str, phase: &str, index: Option<i32>) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: index.map(|i| {
                    BTreeMap::from([(JOB_COMPLETION_INDEX_ANNOTATION.to_owned(), i.to_string())])
                }),
                ..Default::default()
            },
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn running(n: usize) -> Vec<Arc<Pod>> {
        (0..n)
            .map(|i| pod(&format!("p{i}"), "Running", None))
            .collect()
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap_or_default())
            .collect()
    }

    #[test]
    fn want_active_table() {
        struct Case {
            name: &'static str,
            completions: Option<i32>,
            parallelism: i32,
            succeeded: i32,
            active: i32,
            want: i32,
        }
        let cases = [
            Case {
                name: "work queue before any success runs parallelism",
                completions: None,
                parallelism: 3,
                succeeded: 0,
                active: 1,
                want: 3,
            },
            Case {
                name: "work queue after a success keeps what runs",
                completions: None,
                parallelism: 3,
                succeeded: 1,
                active: 2,
                want: 2,
            },
            Case {
                name: "remaining completions below parallelism",
                completions: Some(5),
                parallelism: 3,
                succeeded: 3,
                active: 0,
                want: 2,
            },
            Case {
                name: "capped by parallelism",
                completions: Some(10),
                parallelism: 3,
                succeeded: 1,
                active: 0,
                want: 3,
            },
            Case {
                name: "more succeeded than completions",
                completions: Some(2),
                parallelism: 3,
                succeeded: 4,
                active: 1,
                want: 0,
            },
            Case {
                name: "parallelism zero",
                completions: Some(2),
                parallelism: 0,
                succeeded: 0,
                active: 0,
                want: 0,
            },
        ];
        for c in cases {
            assert_eq!(
                want_active(&job(c.completions, c.parallelism), c.succeeded, c.active),
                c.want,
                "{}",
                c.name
            );
        }
    }

    struct Fixture {
        job: Job,
        pods: Vec<Arc<Pod>>,
        active: Vec<Arc<Pod>>,
        succeeded: i32,
        terminating: i32,
        succeeded_indexes: OrderedIntervals,
        delayed: HashMap<i32, Arc<Pod>>,
        backoff: BackoffRecord,
    }

    impl Fixture {
        fn new(job: Job, active: Vec<Arc<Pod>>) -> Self {
            Self {
                job,
                pods: active.clone(),
                active,
                succeeded: 0,
                terminating: 0,
                succeeded_indexes: OrderedIntervals::new(),
                delayed: HashMap::new(),
                backoff: BackoffRecord::default(),
            }
        }

        fn plan(&self) -> ManagePlan {
            plan_manage_job(&ManageInput {
                job: &self.job,
                pods: &self.pods,
                active_pods: &self.active,
                succeeded: self.succeeded,
                terminating: self.terminating,
                succeeded_indexes: &self.succeeded_indexes,
                failed_indexes: None,
                pods_with_delayed_deletion_per_index: &self.delayed,
                backoff: &self.backoff,
                now: now(),
            })
        }
    }

    fn create(count: usize) -> ManagePlan {
        ManagePlan::Create {
            count,
            indexes: vec![],
        }
    }

    #[test]
    fn plan_manage_job_table() {
        struct Case {
            name: &'static str,
            fixture: Fixture,
            want: ManagePlan,
        }
        let mut suspended = job(Some(5), 2);
        if let Some(s) = suspended.spec.as_mut() {
            s.suspend = Some(true);
        }
        let mut replace_failed = job(Some(5), 3);
        if let Some(s) = replace_failed.spec.as_mut() {
            s.pod_replacement_policy = Some("Failed".into());
        }
        let cases = vec![
            Case {
                name: "non-parallel job creates one pod",
                fixture: Fixture::new(job(Some(1), 1), vec![]),
                want: create(1),
            },
            Case {
                name: "parallel job creates up to parallelism",
                fixture: Fixture::new(job(Some(5), 2), running(0)),
                want: create(2),
            },
            Case {
                name: "work queue job with some running",
                fixture: Fixture::new(job(None, 3), running(1)),
                want: create(2),
            },
            Case {
                name: "remaining completions limit creations",
                fixture: Fixture {
                    succeeded: 4,
                    ..Fixture::new(job(Some(5), 3), running(0))
                },
                want: create(1),
            },
            Case {
                name: "right number running",
                fixture: Fixture::new(job(Some(5), 2), running(2)),
                want: ManagePlan::Nothing,
            },
            Case {
                name: "too many running deletes the surplus",
                fixture: Fixture::new(job(Some(5), 2), running(3)),
                want: ManagePlan::Delete {
                    pods: running(3)[..1].to_vec(),
                },
            },
            Case {
                name: "suspended job deletes every active pod",
                fixture: Fixture::new(suspended, running(2)),
                want: ManagePlan::Delete { pods: running(2) },
            },
            Case {
                name: "terminating pods count only when replacing failed pods only",
                fixture: Fixture {
                    terminating: 2,
                    ..Fixture::new(replace_failed, running(0))
                },
                want: create(1),
            },
            Case {
                name: "terminating pods are replaced at once by default",
                fixture: Fixture {
                    terminating: 2,
                    ..Fixture::new(job(Some(5), 3), running(0))
                },
                want: create(3),
            },
            Case {
                name: "back-off after failures delays creation",
                fixture: Fixture {
                    backoff: BackoffRecord {
                        key: "ns/job".into(),
                        failures_after_last_success: 2,
                        last_failure_time: Some(now() - jiff::SignedDuration::from_secs(5)),
                    },
                    ..Fixture::new(job(Some(5), 2), running(0))
                },
                want: ManagePlan::Backoff {
                    delay: Duration::from_secs(15),
                },
            },
            Case {
                name: "short back-off is raised to the batch period",
                fixture: Fixture {
                    backoff: BackoffRecord {
                        key: "ns/job".into(),
                        failures_after_last_success: 1,
                        last_failure_time: Some(now() - jiff::SignedDuration::from_millis(9_800)),
                    },
                    ..Fixture::new(job(Some(5), 2), running(0))
                },
                want: ManagePlan::Backoff {
                    delay: SYNC_JOB_BATCH_PERIOD,
                },
            },
            Case {
                name: "creations are capped per sync",
                fixture: Fixture::new(job(None, 2000), running(0)),
                want: create(MAX_POD_CREATE_DELETE_PER_SYNC),
            },
            Case {
                name: "indexed job creates the first pending indexes",
                fixture: Fixture {
                    succeeded_indexes: vec![Interval::new(0, 0)].into(),
                    succeeded: 1,
                    ..Fixture::new(indexed(5, 3), vec![pod("p1", "Running", Some(1))])
                },
                want: ManagePlan::Create {
                    count: 2,
                    indexes: vec![2, 3],
                },
            },
            Case {
                name: "indexed job removes duplicated indexes first",
                fixture: Fixture::new(
                    indexed(3, 3),
                    vec![
                        pod("a", "Running", Some(0)),
                        pod("b", "Pending", Some(0)),
                        pod("c", "Running", Some(7)),
                    ],
                ),
                // Out-of-range pods go first, as upstream appends them before the last group.
                want: ManagePlan::Delete {
                    pods: vec![pod("c", "Running", Some(7)), pod("b", "Pending", Some(0))],
                },
            },
        ];
        for c in cases {
            let got = c.fixture.plan();
            match (&got, &c.want) {
                (ManagePlan::Delete { pods: got }, ManagePlan::Delete { pods: want }) => {
                    assert_eq!(names(got), names(want), "{}", c.name)
                }
                _ => assert_eq!(got, c.want, "{}", c.name),
            }
        }
    }

    #[test]
    fn per_index_backoff_waits_for_the_shortest_index() {
        let mut job = indexed(3, 3);
        if let Some(s) = job.spec.as_mut() {
            s.backoff_limit_per_index = Some(2);
        }
        let mut failed = pod("f", "Failed", Some(0));
        let f = Arc::make_mut(&mut failed);
        if let Some(a) = f.metadata.annotations.as_mut() {
            a.insert(JOB_INDEX_FAILURE_COUNT_ANNOTATION.into(), "0".into());
        }
        f.metadata.deletion_timestamp = Some(Time(now() - jiff::SignedDuration::from_secs(4)));
        let active = vec![pod("a", "Running", Some(1)), pod("b", "Running", Some(2))];
        let fixture = Fixture {
            delayed: HashMap::from([(0, failed)]),
            // A global back-off is ignored for per-index Jobs.
            backoff: BackoffRecord {
                key: String::new(),
                failures_after_last_success: 5,
                last_failure_time: Some(now()),
            },
            ..Fixture::new(job, active)
        };
        assert_eq!(
            fixture.plan(),
            ManagePlan::Backoff {
                delay: Duration::from_secs(6)
            }
        );
        assert_eq!(fixture.plan().sync_action(), SYNC_ACTION_PODS_CREATED);
    }

    #[test]
    fn removal_order_prefers_pending_pods() {
        let pods = vec![pod("r", "Running", None), pod("p", "Pending", None)];
        assert_eq!(
            names(&active_pods_for_removal(&job(None, 1), &pods, 1)),
            vec!["p"]
        );
        assert_eq!(
            names(&active_pods_for_removal(&job(None, 1), &pods, 5)),
            vec!["p", "r"]
        );
        assert!(active_pods_for_removal(&job(None, 1), &pods, 0).is_empty());
        assert_eq!(ManagePlan::Nothing.sync_action(), SYNC_ACTION_TRACKING);
    }
}
