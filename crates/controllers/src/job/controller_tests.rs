//! Unit tests of the Job controller: caches seeded directly, fake pod control and API, `sync(key)` called, actions counted — as upstream's `job_controller_test.go`.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::SignedDuration;
use k8s_openapi::api::batch::v1::{
    JobCondition, PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyRule, SuccessPolicyRule,
};
use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, ContainerStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::controller::api_status;
use kcm_machinery::controller::pod_control::FakePodControl;
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::delta::{DeletedFinalStateUnknown, DeletedObject};
use kcm_testing::{
    JobBuilder, MetaBuilder, PodBuilder, PodSpecBuilder, container, controller_ref_of,
    job_condition, pod_template,
};
use kube::api::Patch;

use super::*;
use crate::job::backoff::{BackoffRecord, GO_ZERO_TIME};
use crate::job::client::{FakeJobClient, JobAction};
use crate::job::conditions::{
    JOB_COMPLETE, JOB_FAILED, JOB_FAILURE_TARGET, JOB_SUCCESS_CRITERIA_MET, JOB_SUSPENDED,
};
use crate::job::indexed::JOB_COMPLETION_INDEX_ANNOTATION;
use crate::job::tracking::JOB_TRACKING_FINALIZER;

// ---------------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------------

/// The fixed "now" of every test.
fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

/// When test pods finished: a second after Go's zero time, long enough ago that no back-off
/// applies (upstream's `testFinishedAt`).
fn test_finished_at() -> Timestamp {
    GO_ZERO_TIME + SignedDuration::from_secs(1)
}

fn uid() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("uid-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// `default/foobar` selecting `foo=bar`, as upstream's `newJob` (`None` leaves completions or
/// parallelism unset).
fn new_job(
    parallelism: Option<i32>,
    completions: Option<i32>,
    backoff_limit: i32,
    indexed: bool,
) -> JobBuilder {
    let mut job = kcm_testing::job("foobar")
        .namespace("default")
        .uid(uid())
        .resource_version("1")
        .selecting(&[("foo", "bar")])
        .template(pod_template().container(container("c").image("foo/bar")))
        .backoff_limit(backoff_limit);
    if let Some(p) = parallelism {
        job = job.parallelism(p);
    }
    if let Some(c) = completions {
        job = job.completions(c);
    }
    if indexed {
        job = job.indexed();
    }
    job
}

/// A pod of `job` in `phase`, owned by it, with the tracking finalizer; finished ones have a
/// container terminated at [`test_finished_at`] (upstream's `newPodList`).
fn new_pod(job: &Job, phase: &str) -> PodBuilder {
    let name = format!("pod-{}", uid());
    let mut pod = kcm_testing::pod(&name)
        .namespace("default")
        .uid(name.clone())
        .resource_version("1")
        .labels(&[("foo", "bar")])
        .owner(controller_ref_of(job))
        .finalizers(&[JOB_TRACKING_FINALIZER])
        .default_spec()
        .phase(phase);
    if matches!(phase, "Succeeded" | "Failed") {
        pod = pod.container_status(terminated_at(test_finished_at(), 0));
    }
    pod
}

fn terminated_at(at: Timestamp, exit_code: i32) -> ContainerStatus {
    ContainerStatus {
        name: "c".into(),
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                finished_at: Some(Time(at)),
                exit_code,
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn with_index(pod: PodBuilder, index: &str) -> PodBuilder {
    pod.annotation(JOB_COMPLETION_INDEX_ANNOTATION, index)
}

// ---------------------------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------------------------

/// A controller over bare caches with every seam faked and the clock fixed at [`now`].
struct Fixture {
    controller: JobController,
    jobs: Indexer<Job>,
    pods: Indexer<Pod>,
    client: Arc<FakeJobClient>,
    pod_control: Arc<FakePodControl>,
    recorder: FakeRecorder,
    metrics: Arc<JobMetrics>,
}

impl Fixture {
    fn new() -> Self {
        Self::at(now())
    }

    fn at(at: Timestamp) -> Self {
        let jobs = Indexer::new();
        let pods = Indexer::new();
        let client = Arc::new(FakeJobClient::new());
        let pod_control = Arc::new(FakePodControl::new());
        let recorder = FakeRecorder::new();
        let metrics = Arc::new(JobMetrics::new());
        let controller = JobController::with_caches(
            jobs.clone(),
            pods.clone(),
            client.clone(),
            pod_control.clone(),
            Arc::new(recorder.clone()),
            JobControllerOptions {
                metrics: None,
                controller_metrics: Some(metrics.clone()),
            },
        )
        .with_clock(Arc::new(move || at));
        Self {
            controller,
            jobs,
            pods,
            client,
            pod_control,
            recorder,
            metrics,
        }
    }

    fn add_job(&self, job: &Job) -> String {
        self.jobs.add(Arc::new(job.clone())).expect("add job");
        self.client.insert(job.clone());
        meta_namespace_key(job).expect("key")
    }

    fn add_pod(&self, pod: impl Into<Pod>) -> Arc<Pod> {
        let pod = Arc::new(pod.into());
        self.pods.add(pod.clone()).expect("add pod");
        pod
    }

    fn add_pods(&self, job: &Job, count: usize, phase: &str) {
        for _ in 0..count {
            self.add_pod(new_pod(job, phase));
        }
    }

    /// The last status written (the Job as the sync left it).
    fn last_status(&self) -> Option<Job> {
        self.client.status_updates().pop()
    }

    fn created_indexes(&self) -> BTreeSet<i32> {
        self.pod_control
            .templates()
            .iter()
            .filter_map(|t| {
                t.metadata
                    .as_ref()?
                    .annotations
                    .as_ref()?
                    .get(JOB_COMPLETION_INDEX_ANNOTATION)?
                    .parse()
                    .ok()
            })
            .collect()
    }

    fn metrics_text(&self) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        self.metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        text
    }
}

fn condition_summary(job: &Job) -> Vec<(String, String, String)> {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c: JobCondition| (c.type_, c.status, c.reason.unwrap_or_default()))
        .collect()
}

/// Moves paused time forward and lets the queue's timer task act on it.
async fn step(d: Duration) {
    tokio::time::advance(d).await;
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

fn cond(type_: &str, status: &str, reason: &str) -> (String, String, String) {
    (type_.to_owned(), status.to_owned(), reason.to_owned())
}

// ---------------------------------------------------------------------------------------------
// TestControllerSyncJob
// ---------------------------------------------------------------------------------------------

/// One case of upstream's `TestControllerSyncJob`, with the 1.36 gates on: terminating pods
/// are always counted, and terminal conditions come after their interim ones.
#[derive(Default)]
struct SyncCase {
    name: &'static str,
    parallelism: Option<i32>,
    completions: Option<i32>,
    backoff_limit: i32,
    indexed: bool,
    deleting: bool,
    suspend: bool,
    was_suspended: bool,
    replace_failed_only: bool,
    pod_limit: usize,
    pod_error: bool,
    backoff_failures: Option<i32>,
    /// Positive: creations expected before the sync; negative: deletions.
    fake_expectation: i64,
    pending: usize,
    active: usize,
    ready: usize,
    succeeded: usize,
    failed: usize,
    terminating: usize,
    with_indexes: &'static [(&'static str, &'static str)],

    want_creations: usize,
    want_deletions: usize,
    want_patches: usize,
    want_active: i32,
    want_ready: i32,
    want_succeeded: i32,
    want_failed: i32,
    want_terminating: i32,
    want_completed_indexes: Option<&'static str>,
    want_created_indexes: &'static [i32],
    want_conditions: Vec<(String, String, String)>,
}

async fn run_sync_case(case: &SyncCase) {
    let f = Fixture::new();
    if case.pod_limit > 0 {
        f.pod_control.set_create_limit(case.pod_limit);
    }
    if case.pod_error {
        f.pod_control
            .set_error(Some(api_status::internal_error("fake error")));
    }
    let mut builder = new_job(
        case.parallelism,
        case.completions,
        case.backoff_limit,
        case.indexed,
    )
    .suspend(case.suspend);
    if case.replace_failed_only {
        builder = builder.pod_replacement_policy("Failed");
    }
    if case.was_suspended {
        builder = builder.condition(
            job_condition(JOB_SUSPENDED, "True")
                .reason("JobSuspended")
                .message("Job suspended"),
        );
    }
    if case.deleting {
        builder = builder.deleted_at(now());
    }
    let job = builder.build();
    let key = f.add_job(&job);
    if let Some(failures) = case.backoff_failures {
        f.controller
            .backoff_store
            .update_backoff_record(BackoffRecord {
                key: key.clone(),
                failures_after_last_success: failures,
                last_failure_time: Some(now()),
            });
    }
    if case.fake_expectation > 0 {
        f.controller
            .expectations
            .expect_creations(&key, case.fake_expectation);
    } else if case.fake_expectation < 0 {
        f.controller
            .expectations
            .expect_deletions(&key, -case.fake_expectation);
    }
    f.add_pods(&job, case.pending, "Pending");
    for i in 0..case.active {
        let pod = new_pod(&job, "Running");
        f.add_pod(if i < case.ready { pod.ready() } else { pod });
    }
    f.add_pods(&job, case.succeeded, "Succeeded");
    f.add_pods(&job, case.failed, "Failed");
    for _ in 0..case.terminating {
        f.add_pod(new_pod(&job, "Running").deleted_at(now()));
    }
    for (index, phase) in case.with_indexes {
        f.add_pod(with_index(new_pod(&job, phase), index));
    }

    let result = f.controller.sync(&key).await;
    let limited = case.pod_limit > 0 && f.pod_control.create_call_count() > case.pod_limit;
    if case.pod_error || limited {
        assert!(result.is_err(), "{}: want an error", case.name);
    } else {
        result.unwrap_or_else(|err| panic!("{}: {err}", case.name));
    }

    assert_eq!(
        f.pod_control.templates().len(),
        case.want_creations,
        "{}: creations",
        case.name
    );
    for r in f.pod_control.controller_refs() {
        assert_eq!(
            (r.api_version.as_str(), r.kind.as_str(), r.name.as_str()),
            ("batch/v1", "Job", "foobar"),
            "{}",
            case.name
        );
        assert_eq!(
            Some(r.uid.as_str()),
            job.metadata.uid.as_deref(),
            "{}",
            case.name
        );
        assert_eq!(r.controller, Some(true), "{}", case.name);
    }
    if case.indexed {
        let want: BTreeSet<i32> = case.want_created_indexes.iter().copied().collect();
        assert_eq!(f.created_indexes(), want, "{}: created indexes", case.name);
    }
    assert_eq!(
        f.pod_control.deleted_pod_names().len(),
        case.want_deletions,
        "{}: deletions",
        case.name
    );
    assert_eq!(
        f.pod_control.patches().len(),
        case.want_patches,
        "{}: patches",
        case.name
    );
    let actual = f.last_status().unwrap_or(job);
    let status = actual.status.clone().unwrap_or_default();
    assert_eq!(
        status.active.unwrap_or(0),
        case.want_active,
        "{}: active",
        case.name
    );
    assert_eq!(status.ready, Some(case.want_ready), "{}: ready", case.name);
    assert_eq!(
        status.succeeded.unwrap_or(0),
        case.want_succeeded,
        "{}: succeeded",
        case.name
    );
    assert_eq!(
        status.failed.unwrap_or(0),
        case.want_failed,
        "{}: failed",
        case.name
    );
    assert_eq!(
        status.terminating,
        Some(case.want_terminating),
        "{}: terminating",
        case.name
    );
    assert_eq!(
        status.completed_indexes.as_deref(),
        case.want_completed_indexes,
        "{}: completed indexes",
        case.name
    );
    assert_eq!(
        status.start_time.is_some(),
        !case.suspend,
        "{}: start time",
        case.name
    );
    assert_eq!(
        condition_summary(&actual),
        case.want_conditions,
        "{}: conditions",
        case.name
    );
}

#[tokio::test]
async fn controller_sync_job_table() {
    let backoff = |reason: &str| {
        vec![
            cond(JOB_FAILURE_TARGET, "True", reason),
            cond(JOB_FAILED, "True", reason),
        ]
    };
    let completed = vec![
        cond(JOB_SUCCESS_CRITERIA_MET, "True", "CompletionsReached"),
        cond(JOB_COMPLETE, "True", "CompletionsReached"),
    ];
    let cases = vec![
        SyncCase {
            name: "job start",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            want_creations: 2,
            want_active: 2,
            ..Default::default()
        },
        SyncCase {
            name: "WQ job start",
            parallelism: Some(2),
            backoff_limit: 6,
            want_creations: 2,
            want_active: 2,
            ..Default::default()
        },
        SyncCase {
            name: "pending pods",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            pending: 2,
            want_active: 2,
            ..Default::default()
        },
        SyncCase {
            name: "correct # of pods",
            parallelism: Some(3),
            completions: Some(5),
            backoff_limit: 6,
            active: 3,
            ready: 2,
            want_active: 3,
            want_ready: 2,
            ..Default::default()
        },
        SyncCase {
            name: "too few active pods",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            active: 1,
            succeeded: 1,
            want_creations: 1,
            want_active: 2,
            want_succeeded: 1,
            want_patches: 1,
            ..Default::default()
        },
        SyncCase {
            name: "WQ job: recreate pods when failed",
            parallelism: Some(1),
            backoff_limit: 6,
            active: 1,
            failed: 1,
            terminating: 1,
            replace_failed_only: true,
            want_terminating: 1,
            want_patches: 1,
            want_failed: 1,
            want_active: 1,
            ..Default::default()
        },
        SyncCase {
            name: "WQ job: recreate pods when terminating or failed",
            parallelism: Some(1),
            backoff_limit: 6,
            active: 1,
            failed: 1,
            terminating: 1,
            want_terminating: 1,
            want_active: 1,
            want_patches: 2,
            want_failed: 2,
            ..Default::default()
        },
        SyncCase {
            name: "more terminating pods than parallelism",
            parallelism: Some(1),
            completions: Some(1),
            backoff_limit: 6,
            active: 2,
            terminating: 4,
            replace_failed_only: true,
            want_terminating: 5,
            want_active: 1,
            want_deletions: 1,
            want_patches: 1,
            ..Default::default()
        },
        SyncCase {
            name: "too few active pods and active back-off",
            parallelism: Some(1),
            completions: Some(1),
            backoff_limit: 6,
            backoff_failures: Some(1),
            ..Default::default()
        },
        SyncCase {
            name: "too few active pods and no back-offs",
            parallelism: Some(1),
            completions: Some(1),
            backoff_limit: 6,
            backoff_failures: Some(0),
            want_creations: 1,
            want_active: 1,
            ..Default::default()
        },
        SyncCase {
            name: "too few active pods with a dynamic job",
            parallelism: Some(2),
            backoff_limit: 6,
            active: 1,
            want_creations: 1,
            want_active: 2,
            ..Default::default()
        },
        SyncCase {
            name: "too few active pods, with controller error",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            pod_error: true,
            active: 1,
            succeeded: 1,
            want_creations: 1,
            want_active: 1,
            want_patches: 1,
            ..Default::default()
        },
        SyncCase {
            name: "too many active pods",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            active: 3,
            want_deletions: 1,
            want_active: 2,
            want_patches: 1,
            want_terminating: 1,
            ..Default::default()
        },
        SyncCase {
            name: "too many active pods, with controller error",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            pod_error: true,
            active: 3,
            want_patches: 1,
            want_active: 3,
            ..Default::default()
        },
        SyncCase {
            name: "count ready pods when too many active pods",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            active: 3,
            ready: 3,
            want_deletions: 1,
            want_active: 2,
            want_patches: 1,
            want_ready: 2,
            want_terminating: 1,
            ..Default::default()
        },
        SyncCase {
            name: "failed + succeed pods: reset backoff delay",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            active: 1,
            succeeded: 1,
            failed: 1,
            want_creations: 1,
            want_active: 2,
            want_succeeded: 1,
            want_failed: 1,
            want_patches: 2,
            ..Default::default()
        },
        SyncCase {
            name: "new failed pod",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            active: 1,
            failed: 1,
            want_creations: 1,
            want_active: 2,
            want_failed: 1,
            want_patches: 1,
            ..Default::default()
        },
        SyncCase {
            name: "only new failed pod with controller error",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            pod_error: true,
            active: 1,
            failed: 1,
            want_creations: 1,
            want_active: 1,
            want_patches: 1,
            ..Default::default()
        },
        SyncCase {
            name: "job finish",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            succeeded: 5,
            want_succeeded: 5,
            want_conditions: completed.clone(),
            want_patches: 5,
            ..Default::default()
        },
        SyncCase {
            name: "WQ job finishing",
            parallelism: Some(2),
            backoff_limit: 6,
            active: 1,
            succeeded: 1,
            want_active: 1,
            want_succeeded: 1,
            want_patches: 1,
            ..Default::default()
        },
        SyncCase {
            name: "WQ job all finished despite one failure",
            parallelism: Some(2),
            backoff_limit: 6,
            succeeded: 1,
            failed: 1,
            want_succeeded: 1,
            want_failed: 1,
            want_conditions: completed.clone(),
            want_patches: 2,
            ..Default::default()
        },
        SyncCase {
            name: "more active pods than parallelism",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            active: 10,
            want_deletions: 8,
            want_active: 2,
            want_patches: 8,
            want_terminating: 8,
            ..Default::default()
        },
        SyncCase {
            name: "more active pods than remaining completions",
            parallelism: Some(3),
            completions: Some(4),
            backoff_limit: 6,
            active: 3,
            succeeded: 2,
            want_deletions: 1,
            want_active: 2,
            want_succeeded: 2,
            want_patches: 3,
            want_terminating: 1,
            ..Default::default()
        },
        SyncCase {
            name: "deleting job",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            deleting: true,
            pending: 1,
            active: 1,
            succeeded: 1,
            want_active: 2,
            want_succeeded: 1,
            want_patches: 3,
            ..Default::default()
        },
        SyncCase {
            name: "limited pods",
            parallelism: Some(100),
            completions: Some(200),
            backoff_limit: 6,
            pod_limit: 10,
            want_creations: 10,
            want_active: 10,
            ..Default::default()
        },
        SyncCase {
            name: "too many job failures",
            parallelism: Some(2),
            completions: Some(5),
            deleting: true,
            failed: 1,
            want_failed: 1,
            want_conditions: backoff("BackoffLimitExceeded"),
            want_patches: 1,
            ..Default::default()
        },
        SyncCase {
            name: "job failures, unsatisfied expectations",
            parallelism: Some(2),
            completions: Some(5),
            deleting: true,
            failed: 1,
            fake_expectation: 1,
            want_failed: 1,
            want_patches: 1,
            ..Default::default()
        },
        SyncCase {
            name: "indexed job start",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            indexed: true,
            want_creations: 2,
            want_active: 2,
            want_created_indexes: &[0, 1],
            ..Default::default()
        },
        SyncCase {
            name: "indexed job with some pods deleted, podReplacementPolicy Failed",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            indexed: true,
            replace_failed_only: true,
            terminating: 1,
            want_creations: 1,
            want_active: 1,
            want_created_indexes: &[0],
            want_terminating: 1,
            ..Default::default()
        },
        SyncCase {
            name: "indexed job with some pods deleted, podReplacementPolicy TerminatingOrFailed",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            indexed: true,
            terminating: 1,
            want_creations: 2,
            want_active: 2,
            want_created_indexes: &[0, 1],
            want_terminating: 1,
            want_patches: 1,
            ..Default::default()
        },
        SyncCase {
            name: "indexed job completed",
            parallelism: Some(2),
            completions: Some(3),
            backoff_limit: 6,
            indexed: true,
            with_indexes: &[
                ("0", "Succeeded"),
                ("1", "Failed"),
                ("1", "Succeeded"),
                ("2", "Succeeded"),
            ],
            want_succeeded: 3,
            want_failed: 1,
            want_completed_indexes: Some("0-2"),
            want_conditions: completed.clone(),
            want_patches: 4,
            ..Default::default()
        },
        SyncCase {
            name: "count terminating pods when indexed job fails",
            parallelism: Some(2),
            completions: Some(3),
            backoff_limit: 0,
            indexed: true,
            with_indexes: &[("0", "Succeeded"), ("1", "Failed"), ("2", "Running")],
            want_succeeded: 1,
            want_failed: 2,
            want_completed_indexes: Some("0"),
            want_conditions: vec![cond(JOB_FAILURE_TARGET, "True", "BackoffLimitExceeded")],
            want_patches: 3,
            want_deletions: 1,
            want_terminating: 1,
            ..Default::default()
        },
        SyncCase {
            name: "count ready pods when job fails",
            parallelism: Some(2),
            completions: Some(3),
            backoff_limit: 0,
            active: 2,
            ready: 2,
            failed: 1,
            want_failed: 3,
            want_conditions: vec![cond(JOB_FAILURE_TARGET, "True", "BackoffLimitExceeded")],
            want_patches: 3,
            want_deletions: 2,
            want_terminating: 2,
            ..Default::default()
        },
        SyncCase {
            name: "indexed job repeated completed index",
            parallelism: Some(2),
            completions: Some(3),
            backoff_limit: 6,
            indexed: true,
            with_indexes: &[("0", "Succeeded"), ("1", "Succeeded"), ("1", "Succeeded")],
            want_creations: 1,
            want_active: 1,
            want_succeeded: 2,
            want_completed_indexes: Some("0,1"),
            want_created_indexes: &[2],
            want_patches: 3,
            ..Default::default()
        },
        SyncCase {
            name: "indexed job some running and completed pods",
            parallelism: Some(8),
            completions: Some(20),
            backoff_limit: 6,
            indexed: true,
            with_indexes: &[
                ("0", "Running"),
                ("2", "Succeeded"),
                ("3", "Pending"),
                ("4", "Succeeded"),
                ("5", "Succeeded"),
                ("7", "Succeeded"),
                ("8", "Succeeded"),
                ("9", "Succeeded"),
            ],
            want_creations: 6,
            want_active: 8,
            want_succeeded: 6,
            want_completed_indexes: Some("2,4,5,7-9"),
            want_created_indexes: &[1, 6, 10, 11, 12, 13],
            want_patches: 6,
            ..Default::default()
        },
        SyncCase {
            name: "indexed job some failed pods",
            parallelism: Some(3),
            completions: Some(4),
            backoff_limit: 6,
            indexed: true,
            with_indexes: &[("0", "Failed"), ("1", "Pending"), ("2", "Failed")],
            want_creations: 2,
            want_active: 3,
            want_failed: 2,
            want_created_indexes: &[0, 2],
            want_patches: 2,
            ..Default::default()
        },
        SyncCase {
            name: "indexed job some pods without index",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            indexed: true,
            active: 1,
            succeeded: 1,
            failed: 1,
            with_indexes: &[
                ("invalid", "Running"),
                ("invalid", "Succeeded"),
                ("invalid", "Failed"),
                ("invalid", "Pending"),
                ("0", "Succeeded"),
                ("1", "Running"),
                ("2", "Running"),
            ],
            want_deletions: 3,
            want_active: 2,
            want_succeeded: 1,
            want_completed_indexes: Some("0"),
            want_patches: 8,
            want_terminating: 3,
            ..Default::default()
        },
        SyncCase {
            name: "indexed job repeated indexes",
            parallelism: Some(5),
            completions: Some(5),
            backoff_limit: 6,
            indexed: true,
            succeeded: 1,
            failed: 1,
            with_indexes: &[
                ("invalid", "Running"),
                ("0", "Succeeded"),
                ("1", "Running"),
                ("2", "Running"),
                ("2", "Pending"),
            ],
            want_deletions: 2,
            want_active: 2,
            want_succeeded: 1,
            want_completed_indexes: Some("0"),
            want_patches: 5,
            want_terminating: 2,
            ..Default::default()
        },
        SyncCase {
            name: "indexed job with indexes outside of range",
            parallelism: Some(2),
            completions: Some(5),
            backoff_limit: 6,
            indexed: true,
            with_indexes: &[
                ("0", "Succeeded"),
                ("5", "Running"),
                ("6", "Succeeded"),
                ("7", "Pending"),
                ("8", "Failed"),
            ],
            want_succeeded: 1,
            want_deletions: 2,
            want_completed_indexes: Some("0"),
            want_patches: 5,
            want_terminating: 2,
            ..Default::default()
        },
        SyncCase {
            name: "suspending a job with satisfied expectations",
            suspend: true,
            parallelism: Some(2),
            completions: Some(4),
            backoff_limit: 6,
            active: 2,
            want_deletions: 2,
            want_conditions: vec![cond(JOB_SUSPENDED, "True", "JobSuspended")],
            want_patches: 2,
            want_terminating: 2,
            ..Default::default()
        },
        SyncCase {
            name: "count ready pods when suspending a job with satisfied expectations",
            suspend: true,
            parallelism: Some(2),
            completions: Some(4),
            backoff_limit: 6,
            active: 2,
            ready: 2,
            want_deletions: 2,
            want_conditions: vec![cond(JOB_SUSPENDED, "True", "JobSuspended")],
            want_patches: 2,
            want_terminating: 2,
            ..Default::default()
        },
        SyncCase {
            name: "suspending a job with unsatisfied expectations",
            suspend: true,
            parallelism: Some(2),
            completions: Some(4),
            backoff_limit: 6,
            active: 3,
            ready: 3,
            fake_expectation: -1,
            want_active: 3,
            want_ready: 3,
            ..Default::default()
        },
        SyncCase {
            name: "resuming a suspended job",
            was_suspended: true,
            parallelism: Some(2),
            completions: Some(4),
            backoff_limit: 6,
            want_creations: 2,
            want_active: 2,
            want_conditions: vec![cond(JOB_SUSPENDED, "False", "JobResumed")],
            ..Default::default()
        },
        SyncCase {
            name: "suspending a deleted job",
            suspend: true,
            deleting: true,
            parallelism: Some(2),
            completions: Some(4),
            backoff_limit: 6,
            active: 2,
            want_active: 2,
            want_patches: 2,
            ..Default::default()
        },
    ];
    for case in &cases {
        run_sync_case(case).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Pod failure policy, success policy, per-index back-off, deadline
// ---------------------------------------------------------------------------------------------

fn exit_code_rule(action: &str, values: &[i32]) -> PodFailurePolicyRule {
    PodFailurePolicyRule {
        action: action.to_owned(),
        on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
            container_name: None,
            operator: "In".to_owned(),
            values: values.to_vec(),
        }),
        on_pod_conditions: None,
    }
}

fn failed_with_exit_code(job: &Job, code: i32) -> PodBuilder {
    new_pod(job, "Running")
        .with(|p| {
            if let Some(status) = p.status.as_mut() {
                status.phase = Some("Failed".into());
            }
        })
        .container_status(terminated_at(test_finished_at(), code))
}

/// Upstream `TestSyncJobWithJobPodFailurePolicy`, "job marked failed due to exit code": a
/// `FailJob` rule fails the Job with reason `PodFailurePolicy` and the rule's message, via the
/// interim `FailureTarget`, deleting the other active pods.
#[tokio::test]
async fn pod_failure_policy_fail_job_rule_fails_the_job() {
    let f = Fixture::new();
    let job = new_job(Some(2), Some(2), 6, false)
        .pod_failure_policy(vec![exit_code_rule("FailJob", &[5, 6, 7])])
        .build();
    let key = f.add_job(&job);
    let failed = f.add_pod(failed_with_exit_code(&job, 5));
    f.add_pod(new_pod(&job, "Running"));
    f.controller.sync(&key).await.expect("sync");

    let status = f.last_status().and_then(|j| j.status).unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let target = conditions
        .iter()
        .find(|c| c.type_ == JOB_FAILURE_TARGET)
        .expect("interim FailureTarget");
    assert_eq!(target.reason.as_deref(), Some("PodFailurePolicy"));
    let name = failed.metadata.name.clone().unwrap_or_default();
    assert_eq!(
        target.message.as_deref(),
        Some(
            format!(
                "Container c for pod default/{name} failed with exit code 5 matching FailJob rule at index 0"
            )
            .as_str()
        )
    );
    assert_eq!(
        f.pod_control.deleted_pod_names().len(),
        1,
        "the running pod goes"
    );
    // The deleted pod is still terminating: Failed waits for the next sync.
    assert!(conditions.iter().all(|c| c.type_ != JOB_FAILED));
    assert_eq!(
        status.failed,
        Some(2),
        "every non-terminated pod counts as failed"
    );
}

/// An `Ignore` rule keeps a failure out of `status.failed` and of the back-off limit: with
/// `backoffLimit: 0` the Job still runs and replaces the pod.
#[tokio::test]
async fn pod_failure_policy_ignore_rule_does_not_count() {
    let f = Fixture::new();
    let job = new_job(Some(1), Some(1), 0, false)
        .pod_failure_policy(vec![exit_code_rule("Ignore", &[42])])
        .build();
    let key = f.add_job(&job);
    f.add_pod(failed_with_exit_code(&job, 42));
    f.controller.sync(&key).await.expect("sync");

    let status = f.last_status().and_then(|j| j.status).unwrap_or_default();
    assert_eq!(status.failed.unwrap_or(0), 0);
    assert!(condition_summary(&f.last_status().unwrap_or_default()).is_empty());
    assert_eq!(f.pod_control.templates().len(), 1, "replaced");
    assert_eq!(f.pod_control.patches().len(), 1, "finalizer removed");
    assert!(f.metrics_text().contains(
        r#"job_controller_pod_failures_handled_by_failure_policy_total{action="Ignore"} 1"#
    ));
}

/// `successPolicy`: once index 0 succeeded the Job meets its success criteria, deletes the
/// other active pods and waits for them before `Complete`.
#[tokio::test]
async fn success_policy_completes_early() {
    let f = Fixture::new();
    let job = new_job(Some(3), Some(3), 6, true)
        .success_policy(vec![SuccessPolicyRule {
            succeeded_indexes: Some("0".into()),
            succeeded_count: None,
        }])
        .build();
    let key = f.add_job(&job);
    f.add_pod(with_index(new_pod(&job, "Succeeded"), "0"));
    f.add_pod(with_index(new_pod(&job, "Running"), "1"));
    f.add_pod(with_index(new_pod(&job, "Running"), "2"));
    f.controller.sync(&key).await.expect("sync");
    let job_after = f.last_status().unwrap_or_default();
    assert_eq!(
        condition_summary(&job_after),
        vec![cond(JOB_SUCCESS_CRITERIA_MET, "True", "SuccessPolicy")]
    );
    assert_eq!(f.pod_control.deleted_pod_names().len(), 2);
    let status = job_after.status.unwrap_or_default();
    assert_eq!(status.completed_indexes.as_deref(), Some("0"));
    assert_eq!(status.terminating, Some(2));
}

/// `backoffLimitPerIndex: 0`: a failed index is never retried; when the failed and succeeded
/// indexes cover all completions the Job fails with `FailedIndexes`.
#[tokio::test]
async fn backoff_limit_per_index_fails_the_index_then_the_job() {
    let f = Fixture::new();
    let job = new_job(Some(2), Some(2), i32::MAX, true)
        .backoff_limit_per_index(0)
        .build();
    let key = f.add_job(&job);
    f.add_pod(with_index(new_pod(&job, "Failed"), "0"));
    f.add_pod(with_index(new_pod(&job, "Succeeded"), "1"));
    f.controller.sync(&key).await.expect("sync");
    let job_after = f.last_status().unwrap_or_default();
    let status = job_after.status.clone().unwrap_or_default();
    assert_eq!(status.failed_indexes.as_deref(), Some("0"));
    assert_eq!(status.completed_indexes.as_deref(), Some("1"));
    assert_eq!(
        condition_summary(&job_after),
        vec![
            cond(JOB_FAILURE_TARGET, "True", "FailedIndexes"),
            cond(JOB_FAILED, "True", "FailedIndexes"),
        ]
    );
    assert!(f.pod_control.templates().is_empty(), "no retry of index 0");
}

/// `activeDeadlineSeconds` past: the Job fails with `DeadlineExceeded` and its pods go; before
/// it, the Job is requeued for the moment it passes.
#[tokio::test(start_paused = true)]
async fn active_deadline_fails_the_job_or_requeues_it() {
    let f = Fixture::new();
    let job = new_job(Some(1), Some(1), 6, false)
        .active_deadline_seconds(10)
        .start_time(now() - SignedDuration::from_secs(11))
        .build();
    let key = f.add_job(&job);
    f.add_pod(new_pod(&job, "Running"));
    f.controller.sync(&key).await.expect("sync");
    assert_eq!(
        condition_summary(&f.last_status().unwrap_or_default()),
        vec![cond(JOB_FAILURE_TARGET, "True", "DeadlineExceeded")]
    );
    assert_eq!(f.pod_control.deleted_pod_names().len(), 1);

    let f = Fixture::new();
    let job = new_job(Some(1), Some(1), 6, false)
        .active_deadline_seconds(10)
        .start_time(now() - SignedDuration::from_secs(4))
        .build();
    let key = f.add_job(&job);
    f.add_pod(new_pod(&job, "Running"));
    f.controller.sync(&key).await.expect("sync");
    assert!(f.controller.queue().is_empty());
    step(Duration::from_secs(5)).await;
    assert!(f.controller.queue().is_empty(), "not before the deadline");
    step(Duration::from_secs(2)).await;
    assert_eq!(
        f.controller.queue().len(),
        1,
        "synced again at the deadline"
    );
}

// ---------------------------------------------------------------------------------------------
// Back-off between failed-pod recreations
// ---------------------------------------------------------------------------------------------

/// A pod that failed just now delays its replacement by 10 s; a second consecutive failure by
/// 20 s; the Job is requeued for that moment (not polled), as `manageJob` with the back-off
/// store.
#[tokio::test(start_paused = true)]
async fn failed_pods_are_replaced_after_an_exponential_back_off() {
    let f = Fixture::new();
    let job = new_job(Some(1), Some(1), 6, false).build();
    let key = f.add_job(&job);
    // The first failure, finished now.
    let failed = f.add_pod(
        new_pod(&job, "Running")
            .with(|p| {
                if let Some(status) = p.status.as_mut() {
                    status.phase = Some("Failed".into());
                }
            })
            .container_status(terminated_at(now(), 1)),
    );
    f.controller.sync(&key).await.expect("sync");
    assert!(f.pod_control.templates().is_empty(), "backing off");
    let record = f.controller.backoff_store().get(&key).expect("record");
    assert_eq!(record.failures_after_last_success, 1);
    assert_eq!(record.last_failure_time, Some(now()));
    step(Duration::from_millis(9_900)).await;
    assert!(f.controller.queue().is_empty(), "not requeued before 10s");
    step(Duration::from_millis(200)).await;
    assert_eq!(f.controller.queue().len(), 1, "requeued at 10s");

    // Ten seconds later the replacement is created.
    let later = Fixture::at(now() + SignedDuration::from_secs(10));
    let job = f.last_status().unwrap_or(job);
    let key = later.add_job(&job);
    later
        .controller
        .backoff_store()
        .update_backoff_record(record);
    // The failed pod is counted now (its finalizer is gone).
    let mut counted = (*failed).clone();
    counted.metadata.finalizers = None;
    later.add_pod(counted);
    later.controller.sync(&key).await.expect("sync");
    assert_eq!(later.pod_control.templates().len(), 1, "replaced after 10s");

    // A second failure, right after: 20 s this time.
    let record = BackoffRecord {
        key: key.clone(),
        failures_after_last_success: 2,
        last_failure_time: Some(now() + SignedDuration::from_secs(10)),
    };
    let third = Fixture::at(now() + SignedDuration::from_secs(25));
    let key = third.add_job(&job);
    third
        .controller
        .backoff_store()
        .update_backoff_record(record);
    third.controller.sync(&key).await.expect("sync");
    assert!(
        third.pod_control.templates().is_empty(),
        "15s of 20s passed"
    );
    step(Duration::from_millis(4_900)).await;
    assert!(third.controller.queue().is_empty());
    step(Duration::from_millis(200)).await;
    assert_eq!(
        third.controller.queue().len(),
        1,
        "requeued when 20s passed"
    );
}

/// `backoffLimit: 2` with pods that always fail: the third failure exceeds it, the Job fails
/// with `BackoffLimitExceeded`, a warning event, and exactly three failed pods.
#[tokio::test]
async fn backoff_limit_exceeded_after_three_failures() {
    let f = Fixture::new();
    let job = new_job(Some(1), Some(1), 2, false)
        .failed(2)
        .start_time(now())
        .build();
    let key = f.add_job(&job);
    f.add_pod(new_pod(&job, "Failed"));
    f.controller.sync(&key).await.expect("sync");
    let job_after = f.last_status().unwrap_or_default();
    assert_eq!(job_after.status.as_ref().and_then(|s| s.failed), Some(3));
    assert_eq!(
        condition_summary(&job_after),
        vec![
            cond(JOB_FAILURE_TARGET, "True", "BackoffLimitExceeded"),
            cond(JOB_FAILED, "True", "BackoffLimitExceeded"),
        ]
    );
    let events = f.recorder.events();
    let failed = events
        .iter()
        .find(|e| e.reason == "BackoffLimitExceeded")
        .expect("event");
    assert_eq!(failed.type_, kcm_machinery::events::EventType::Warning);
    assert_eq!(
        failed.message,
        "Job has reached the specified backoff limit"
    );
    assert!(f.pod_control.templates().is_empty());
    assert!(f.metrics_text().contains(
        r#"job_controller_jobs_finished_total{completion_mode="NonIndexed",result="failed",reason="BackoffLimitExceeded"} 1"#
    ));
}

// ---------------------------------------------------------------------------------------------
// Finalizer tracking: never twice, never lost
// ---------------------------------------------------------------------------------------------

/// A succeeded pod goes through `uncountedTerminatedPods` and is counted once its finalizer is
/// gone; a second sync over the same pod (finalizer removal observed) counts nothing more.
#[tokio::test]
async fn finished_pods_are_counted_exactly_once() {
    let f = Fixture::new();
    let job = new_job(Some(1), Some(2), 6, false).build();
    let key = f.add_job(&job);
    let done = f.add_pod(new_pod(&job, "Succeeded"));
    f.controller.sync(&key).await.expect("first sync");
    let updates = f.client.status_updates();
    // First write: the pod's UID in the uncounted list; second: moved into `succeeded`.
    let first = updates[0].status.clone().unwrap_or_default();
    assert_eq!(
        first
            .uncounted_terminated_pods
            .and_then(|u| u.succeeded)
            .unwrap_or_default(),
        vec![done.metadata.uid.clone().unwrap_or_default()]
    );
    let last = f.last_status().unwrap_or_default();
    assert_eq!(last.status.as_ref().and_then(|s| s.succeeded), Some(1));
    assert_eq!(
        f.controller
            .finalizer_expectations()
            .get_expected_uids(&key)
            .map(|u| u.len()),
        Some(1),
        "the removal is expected"
    );

    // The next sync sees the stored status while the cache still shows the finalizer: the
    // pod is awaited, not counted again.
    f.jobs.update(Arc::new(last.clone())).expect("update");
    f.pod_control.clear();
    f.client.clear_actions();
    f.controller.sync(&key).await.expect("second sync");
    let status = f
        .last_status()
        .unwrap_or(last.clone())
        .status
        .unwrap_or_default();
    assert_eq!(status.succeeded, Some(1), "not counted twice");
    assert!(f.pod_control.patches().is_empty(), "no second removal");

    // The finalizer removal is observed: the pod no longer counts.
    let mut without = (*done).clone();
    without.metadata.finalizers = None;
    without.metadata.resource_version = Some("2".into());
    f.pods.update(Arc::new(without.clone())).expect("update");
    f.controller.event_handlers().update_pod(&done, &without);
    assert_eq!(
        f.controller
            .finalizer_expectations()
            .get_expected_uids(&key)
            .map(|u| u.len()),
        Some(0)
    );
    f.client.clear_actions();
    f.controller.sync(&key).await.expect("third sync");
    let status = f.last_status().unwrap_or(last).status.unwrap_or_default();
    assert_eq!(status.succeeded, Some(1), "still one");
}

/// A finalizer removal that fails leaves the UID in `uncountedTerminatedPods` (the pod is
/// not lost); the next sync removes it and counts the pod once.
#[tokio::test]
async fn a_failed_finalizer_removal_is_retried_without_losing_the_pod() {
    let f = Fixture::new();
    let job = new_job(Some(1), Some(1), 6, false).build();
    let key = f.add_job(&job);
    let done = f.add_pod(new_pod(&job, "Succeeded"));
    f.pod_control
        .set_error(Some(api_status::internal_error("patch refused")));
    assert!(f.controller.sync(&key).await.is_err());
    let stored = f.last_status().unwrap_or_default();
    let status = stored.status.clone().unwrap_or_default();
    assert_eq!(status.succeeded.unwrap_or(0), 0);
    let uid = done.metadata.uid.clone().unwrap_or_default();
    assert_eq!(
        status
            .uncounted_terminated_pods
            .and_then(|u| u.succeeded)
            .unwrap_or_default(),
        vec![uid.clone()]
    );
    assert!(
        f.controller
            .finalizer_expectations()
            .get_expected_uids(&key)
            .is_some_and(|u| !u.contains(&uid)),
        "a failed patch is not awaited"
    );

    f.pod_control.set_error(None);
    f.jobs.update(Arc::new(stored)).expect("update");
    f.client.clear_actions();
    f.controller.sync(&key).await.expect("retry");
    let done_job = f.last_status().unwrap_or_default();
    let status = done_job.status.clone().unwrap_or_default();
    assert_eq!(status.succeeded, Some(1));
    assert_eq!(
        condition_summary(&done_job),
        vec![
            cond(JOB_SUCCESS_CRITERIA_MET, "True", "CompletionsReached"),
            cond(JOB_COMPLETE, "True", "CompletionsReached"),
        ]
    );
    assert!(status.completion_time.is_some());
    assert!(f.recorder.reasons().contains(&"Completed".to_owned()));
}

// ---------------------------------------------------------------------------------------------
// Indexed pods
// ---------------------------------------------------------------------------------------------

/// Upstream `checkIndexedJobPods`: each created pod carries its index as annotation and label,
/// hostname `NAME-INDEX`, generate name `NAME-INDEX-`, `JOB_COMPLETION_INDEX` from the label,
/// and the tracking finalizer.
#[tokio::test]
async fn indexed_pods_carry_their_index() {
    let f = Fixture::new();
    let job = new_job(Some(3), Some(3), 6, true).build();
    let key = f.add_job(&job);
    f.controller.sync(&key).await.expect("sync");
    let templates = f.pod_control.templates();
    assert_eq!(templates.len(), 3);
    let mut seen = BTreeSet::new();
    for t in templates {
        let meta = t.metadata.clone().unwrap_or_default();
        let index = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(JOB_COMPLETION_INDEX_ANNOTATION))
            .cloned()
            .expect("index annotation");
        assert_eq!(
            meta.labels
                .as_ref()
                .and_then(|l| l.get(JOB_COMPLETION_INDEX_ANNOTATION)),
            Some(&index)
        );
        let spec = t.spec.clone().unwrap_or_default();
        assert_eq!(spec.hostname, Some(format!("foobar-{index}")));
        assert_eq!(meta.generate_name, Some(format!("foobar-{index}-")));
        assert_eq!(
            meta.finalizers,
            Some(vec![JOB_TRACKING_FINALIZER.to_owned()])
        );
        let env = spec.containers[0].env.clone().unwrap_or_default();
        let var = env
            .iter()
            .find(|e| e.name == "JOB_COMPLETION_INDEX")
            .expect("env");
        assert_eq!(
            var.value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|r| r.field_path.as_str()),
            Some("metadata.labels['batch.kubernetes.io/job-completion-index']")
        );
        seen.insert(index);
    }
    assert_eq!(seen, BTreeSet::from(["0".into(), "1".into(), "2".into()]));
}

// ---------------------------------------------------------------------------------------------
// Suspend and resume
// ---------------------------------------------------------------------------------------------

/// Suspending deletes the active pods (`Suspended` event); resuming recreates them, records
/// `Resumed` and resets `startTime` (the active deadline counts continuous activity).
#[tokio::test]
async fn suspend_then_resume_resets_the_start_time() {
    let f = Fixture::new();
    let earlier = now() - SignedDuration::from_secs(3600);
    let job = new_job(Some(2), Some(4), 6, false)
        .suspend(true)
        .start_time(earlier)
        .build();
    let key = f.add_job(&job);
    f.add_pods(&job, 2, "Running");
    f.controller.sync(&key).await.expect("suspend");
    assert_eq!(f.pod_control.deleted_pod_names().len(), 2);
    assert_eq!(f.recorder.reasons(), vec!["Suspended".to_owned()]);
    let suspended = f.last_status().unwrap_or_default();
    assert_eq!(
        suspended.status.as_ref().and_then(|s| s.start_time.clone()),
        Some(Time(earlier)),
        "suspending keeps the start time"
    );

    let g = Fixture::new();
    let resumed = JobBuilder::from_job(suspended).suspend(false).build();
    let key = g.add_job(&resumed);
    g.controller.sync(&key).await.expect("resume");
    assert_eq!(g.pod_control.templates().len(), 2);
    assert_eq!(g.recorder.reasons(), vec!["Resumed".to_owned()]);
    let after = g.last_status().unwrap_or_default();
    assert_eq!(
        after.status.as_ref().and_then(|s| s.start_time.clone()),
        Some(Time(now()))
    );
    assert_eq!(
        condition_summary(&after),
        vec![cond(JOB_SUSPENDED, "False", "JobResumed")]
    );
}

// ---------------------------------------------------------------------------------------------
// Orphans and adoption
// ---------------------------------------------------------------------------------------------

/// An orphan pod matching the selector is adopted with the tracking finalizer (after the
/// uncached re-read of the Job) and counted.
#[tokio::test]
async fn matching_orphans_are_adopted_with_the_tracking_finalizer() {
    let f = Fixture::new();
    let job = new_job(Some(1), Some(1), 6, false).build();
    let key = f.add_job(&job);
    let orphan = kcm_testing::pod("orphan")
        .namespace("default")
        .uid("orphan")
        .labels(&[("foo", "bar")])
        .default_spec()
        .phase("Running")
        .build();
    f.add_pod(orphan);
    f.controller.sync(&key).await.expect("sync");
    let patches = f.pod_control.patches();
    assert_eq!(patches.len(), 1, "adopted");
    let text = match &patches[0].patch {
        Patch::Strategic(body) => body.to_string(),
        other => panic!("want a strategic-merge patch, got {other:?}"),
    };
    assert!(text.contains(JOB_TRACKING_FINALIZER), "{text}");
    assert!(text.contains("ownerReferences"), "{text}");
    assert!(f.pod_control.templates().is_empty(), "the adopted pod runs");
    assert!(
        f.client
            .actions()
            .iter()
            .any(|a| matches!(a, JobAction::Get { .. })),
        "the Job was re-read before adopting"
    );
}

/// The orphan worker removes the finalizer of a pod whose Job is gone, keeps it on a pod
/// whose (unfinished) Job still exists, and never touches pods of other kinds.
#[tokio::test]
async fn orphan_pods_lose_their_finalizer_unless_adopted() {
    let f = Fixture::new();
    let job = new_job(Some(1), Some(1), 6, false).build();
    let gone = new_job(Some(1), Some(1), 6, false)
        .name("gone")
        .uid("gone-uid")
        .build();
    f.add_job(&job);
    let of_gone = f.add_pod(new_pod(&gone, "Succeeded").name("of-gone"));
    let of_job = f.add_pod(new_pod(&job, "Succeeded").name("of-job"));
    let of_rs = f.add_pod(
        kcm_testing::pod("of-rs")
            .namespace("default")
            .owner(kcm_testing::owner_ref("apps/v1", "ReplicaSet", "rs", "rs-uid").controller(true))
            .finalizers(&[JOB_TRACKING_FINALIZER]),
    );
    let none = kcm_testing::pod("no-owner")
        .namespace("default")
        .finalizers(&[JOB_TRACKING_FINALIZER])
        .build();
    f.add_pod(none.clone());
    for pod in [&*of_gone, &*of_job, &*of_rs, &none] {
        f.controller
            .sync_orphan_pod(&kcm_machinery::controller::pod_key(pod))
            .await
            .expect("orphan sync");
    }
    let patched: Vec<String> = f
        .pod_control
        .patches()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(patched, vec!["of-gone".to_owned(), "no-owner".to_owned()]);
    // A pod already gone is fine.
    f.controller
        .sync_orphan_pod("default/missing")
        .await
        .expect("missing pod");
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// Pod events observe the Job's expectations and enqueue it after the batch period; a
/// finished Job's and a deleted Job's pods with the finalizer go to the orphan queue.
#[tokio::test(start_paused = true)]
async fn handlers_observe_expectations_and_batch_syncs() {
    let f = Fixture::new();
    let job = new_job(Some(1), Some(1), 6, false).build();
    let key = f.add_job(&job);
    let handlers = f.controller.event_handlers().clone();
    f.controller.expectations().expect_creations(&key, 1);
    let pod = new_pod(&job, "Running").build();
    handlers.add_pod(&pod);
    assert!(f.controller.expectations().satisfied_expectations(&key));
    assert!(f.controller.queue().is_empty(), "batched");
    step(SYNC_JOB_BATCH_PERIOD).await;
    assert_eq!(f.controller.queue().len(), 1);

    // A deleted pod observes one expected deletion.
    f.controller.expectations().expect_deletions(&key, 1);
    handlers.delete_pod(&DeletedObject::Object(Arc::new(pod.clone())));
    assert!(f.controller.expectations().satisfied_expectations(&key));

    // A deleted Job: synced at once, its pods with the finalizer queued for removal.
    f.pods.add(Arc::new(pod.clone())).expect("add");
    handlers.delete_job(&DeletedObject::Tombstone(DeletedFinalStateUnknown {
        key: key.clone(),
        obj: Arc::new(job.clone()),
    }));
    assert_eq!(f.controller.orphan_queue().len(), 1);
}

/// A spec change (new generation) syncs at once; a status-only change waits for the batch.
#[tokio::test(start_paused = true)]
async fn job_updates_sync_now_or_batched() {
    let f = Fixture::new();
    let job = new_job(Some(1), Some(1), 6, false).generation(1).build();
    f.add_job(&job);
    let handlers = f.controller.event_handlers().clone();
    let status_only = JobBuilder::from_job(job.clone()).active(1).build();
    handlers.update_job(&job, &status_only);
    assert!(f.controller.queue().is_empty());
    let respec = JobBuilder::from_job(job.clone()).generation(2).build();
    handlers.update_job(&job, &respec);
    assert_eq!(f.controller.queue().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Worker
// ---------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn panicking_sync_is_recovered_counted_and_retried() {
    let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
    let attempts = Arc::new(AtomicU64::new(0));
    let handler: SyncHandler = {
        let attempts = attempts.clone();
        Arc::new(move |_key: String| {
            let attempts = attempts.clone();
            Box::pin(async move {
                if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("injected panic");
                }
                Ok(())
            })
        })
    };
    let controller = JobController::with_caches(
        Indexer::new(),
        Indexer::new(),
        Arc::new(FakeJobClient::new()),
        Arc::new(FakePodControl::new()),
        Arc::new(FakeRecorder::new()),
        JobControllerOptions {
            metrics: Some(metrics.clone()),
            controller_metrics: None,
        },
    )
    .with_sync_handler(handler);
    let key = "ns/job".to_owned();
    controller.queue().add(key.clone());
    assert!(controller.process_next_work_item().await, "recovered");
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1, "counted");
    assert_eq!(controller.queue().num_requeues(&key), 1, "retried");
    tokio::time::sleep(DEFAULT_JOB_API_BACKOFF * 2).await;
    assert!(controller.process_next_work_item().await);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(controller.queue().num_requeues(&key), 0);
}

/// A Job that is gone drops its expectations and back-off record; one managed by another
/// controller, or finished, is left alone.
#[tokio::test]
async fn gone_external_and_finished_jobs_are_not_managed() {
    let f = Fixture::new();
    f.controller
        .expectations()
        .expect_creations("default/gone", 1);
    f.controller
        .finalizer_expectations()
        .expect_finalizers_removed("default/gone", ["uid-1".to_owned()]);
    f.controller
        .backoff_store()
        .update_backoff_record(BackoffRecord {
            key: "default/gone".into(),
            failures_after_last_success: 2,
            last_failure_time: None,
        });
    f.controller.sync("default/gone").await.expect("gone");
    assert!(
        f.controller
            .expectations()
            .get_expectations("default/gone")
            .is_none()
    );
    assert!(
        f.controller
            .finalizer_expectations()
            .get_expected_uids("default/gone")
            .is_none(),
        "the finalizer expectations of a deleted Job are dropped"
    );
    assert!(
        f.controller.backoff_store().get("default/gone").is_none(),
        "so is its back-off record"
    );

    let external = new_job(Some(1), Some(1), 6, false)
        .managed_by("example.com/other")
        .build();
    let key = f.add_job(&external);
    f.controller.sync(&key).await.expect("external");
    let finished = new_job(Some(1), Some(1), 6, false)
        .name("done")
        .condition(job_condition(JOB_COMPLETE, "True"))
        .build();
    let key = f.add_job(&finished);
    f.controller.sync(&key).await.expect("finished");
    assert!(f.pod_control.templates().is_empty());
    assert!(f.client.status_updates().is_empty());
}
