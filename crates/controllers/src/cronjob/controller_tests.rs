//! Unit tests of the CronJob controller: caches seeded directly, fake controls, a fixed clock, `syncCronJob`/`sync(key)` called — as upstream's `cronjob_controllerv2_test.go`.

use std::sync::Arc;

use jiff::SignedDuration;
use k8s_openapi::api::batch::v1::CronJobStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::controller::api_status;
use kcm_machinery::events::FakeRecorder;
use kcm_testing::{
    CronJobBuilder, MetaBuilder, PodSpecBuilder, container, controller_ref_of, job_condition,
    pod_template,
};
use kube::core::Status;

use super::*;
use crate::cronjob::CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION;
use crate::cronjob::client::{FakeCronJobControl, FakeJobControl};
use crate::cronjob::utils::{NEXT_SCHEDULE_DELTA, job_from_template};

// ---------------------------------------------------------------------------------------------
// Times and builders (upstream's helpers)
// ---------------------------------------------------------------------------------------------

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn just_before_the_prior_hour() -> Timestamp {
    ts("2016-05-19T08:59:00Z")
}
fn just_after_the_prior_hour() -> Timestamp {
    ts("2016-05-19T09:01:00Z")
}
fn just_before_the_hour() -> Timestamp {
    ts("2016-05-19T09:59:00Z")
}
fn top_of_the_hour() -> Timestamp {
    ts("2016-05-19T10:00:00Z")
}
fn just_after_the_hour() -> Timestamp {
    ts("2016-05-19T10:01:00Z")
}
fn just_before_the_next_hour() -> Timestamp {
    ts("2016-05-19T10:59:00Z")
}
fn week_after_the_hour() -> Timestamp {
    ts("2016-05-26T10:00:00Z")
}
/// 10:01 on the wall clock of New York (14:01Z that day).
fn just_after_the_hour_in_new_york() -> Timestamp {
    ts("2016-05-19T14:01:00Z")
}

const ON_THE_HOUR: &str = "0 * * * ?";
const EVERY_HOUR: &str = "@every 1h";
const SHORT_DEAD: i64 = 10;
const LONG_DEAD: i64 = 1_000_000;

fn minutes(n: i64) -> SignedDuration {
    SignedDuration::from_mins(n)
}

fn secs(n: i64) -> SignedDuration {
    SignedDuration::from_secs(n)
}

/// The requeue delay for a schedule `d` away, as upstream writes it (`d + nextScheduleDelta`).
fn requeue(d: SignedDuration) -> Duration {
    requeue_delay(d + NEXT_SCHEDULE_DELTA)
}

/// `snazzycats/mycronjob` (UID `1a2b3c`), as upstream's `cronJob()`.
fn new_cron_job() -> CronJobBuilder {
    kcm_testing::cron_job("mycronjob")
        .namespace("snazzycats")
        .uid("1a2b3c")
        .created_at(just_before_the_hour())
        .schedule("* * * * ?")
        .concurrency_policy("Allow")
        .job_template(
            kcm_testing::job("template")
                .label("a", "b")
                .annotation("x", "y")
                .parallelism(1)
                .completions(1)
                .template(
                    pod_template()
                        .labels(&[("foo", "bar")])
                        .container(container("c").image("foo/bar")),
                ),
        )
}

// ---------------------------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------------------------

struct Fixture {
    controller: CronJobController,
    jobs: Indexer<Job>,
    cron_jobs: Indexer<CronJob>,
    cron_job_control: Arc<FakeCronJobControl>,
    job_control: Arc<FakeJobControl>,
    recorder: FakeRecorder,
    metrics: Arc<CronJobMetrics>,
}

impl Fixture {
    /// A controller whose clock reads `now`, in UTC.
    fn at(now: Timestamp) -> Self {
        let jobs = Indexer::new();
        let cron_jobs = Indexer::new();
        let cron_job_control = Arc::new(FakeCronJobControl::new());
        let job_control = Arc::new(FakeJobControl::new(now));
        let recorder = FakeRecorder::new();
        let metrics = Arc::new(CronJobMetrics::new());
        let controller = CronJobController::with_caches(
            jobs.clone(),
            cron_jobs.clone(),
            cron_job_control.clone(),
            job_control.clone(),
            Arc::new(recorder.clone()),
            CronJobControllerOptions {
                local: TimeZone::UTC,
                metrics: None,
                controller_metrics: Some(metrics.clone()),
            },
        )
        .with_clock(Arc::new(move || now));
        Self {
            controller,
            jobs,
            cron_jobs,
            cron_job_control,
            job_control,
            recorder,
            metrics,
        }
    }

    fn warnings(&self) -> Vec<String> {
        self.recorder
            .events()
            .into_iter()
            .filter(|e| e.type_ == EventType::Warning)
            .map(|e| e.reason)
            .collect()
    }

    fn add_cron_job(&self, cron_job: &CronJob) -> String {
        self.cron_jobs
            .add(Arc::new(cron_job.clone()))
            .expect("add cron job");
        self.cron_job_control.insert(cron_job.clone());
        meta_namespace_key(cron_job).expect("key")
    }

    fn add_job(&self, job: &Job) {
        self.jobs.add(Arc::new(job.clone())).expect("add job");
        self.job_control.insert(job.clone());
    }
}

fn active_len(cron_job: &CronJob) -> usize {
    cron_job
        .status
        .as_ref()
        .and_then(|s| s.active.as_ref())
        .map_or(0, Vec::len)
}

// ---------------------------------------------------------------------------------------------
// TestControllerV2SyncCronJob
// ---------------------------------------------------------------------------------------------

/// One case of upstream's `TestControllerV2SyncCronJob`.
struct SyncCase {
    name: &'static str,
    policy: &'static str,
    suspend: bool,
    schedule: &'static str,
    time_zone: Option<&'static str>,
    deadline: Option<i64>,
    ran_previously: bool,
    still_active: bool,
    cron_job_creation_time: Option<Timestamp>,
    job_creation_time: Timestamp,
    last_schedule_time: Option<Timestamp>,
    now: Timestamp,
    job_create_error: Option<Status>,

    expect_create: bool,
    expect_delete: bool,
    expect_active: usize,
    expect_warnings: usize,
    expect_err: bool,
    expect_requeue: Option<Duration>,
    expect_update_status: bool,
}

impl Default for SyncCase {
    fn default() -> Self {
        Self {
            name: "",
            policy: "Allow",
            suspend: false,
            schedule: ON_THE_HOUR,
            time_zone: None,
            deadline: None,
            ran_previously: false,
            still_active: false,
            cron_job_creation_time: None,
            job_creation_time: just_after_the_prior_hour(),
            last_schedule_time: None,
            now: just_before_the_hour(),
            job_create_error: None,
            expect_create: false,
            expect_delete: false,
            expect_active: 0,
            expect_warnings: 0,
            expect_err: false,
            expect_requeue: None,
            expect_update_status: false,
        }
    }
}

async fn run_sync_case(case: &SyncCase) {
    let f = Fixture::at(case.now);
    if let Some(status) = &case.job_create_error {
        f.job_control.set_create_error(Some(status.clone()));
    }
    let mut builder = new_cron_job()
        .concurrency_policy(case.policy)
        .suspend(case.suspend)
        .schedule(case.schedule);
    if let Some(zone) = case.time_zone {
        builder = builder.time_zone(zone);
    }
    if let Some(deadline) = case.deadline {
        builder = builder.starting_deadline_seconds(deadline);
    }
    let mut cron_job = builder.build();
    let mut jobs = Vec::new();
    if case.ran_previously {
        cron_job.metadata.creation_timestamp = Some(Time(
            case.cron_job_creation_time
                .unwrap_or_else(just_before_the_prior_hour),
        ));
        cron_job
            .status
            .get_or_insert_with(Default::default)
            .last_schedule_time = Some(Time(
            case.last_schedule_time
                .unwrap_or_else(just_after_the_prior_hour),
        ));
        let mut job = job_from_template(&cron_job, case.job_creation_time).expect("template");
        job.metadata.uid = Some("1234".into());
        job.metadata.namespace = cron_job.metadata.namespace.clone();
        if case.still_active {
            cron_job.status.get_or_insert_with(Default::default).active =
                Some(vec![job.object_ref(&())]);
        } else {
            let done = job
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0 + secs(10));
            let status = job.status.get_or_insert_with(Default::default);
            status.completion_time = done.map(Time);
            status.conditions = Some(vec![job_condition("Complete", "True").build()]);
        }
        f.add_job(&job);
        jobs.push(Arc::new(job));
    } else if let Some(created) = case.cron_job_creation_time {
        cron_job.metadata.creation_timestamp = Some(Time(created));
    }
    f.cron_job_control.insert(cron_job.clone());

    let mut copy = cron_job.clone();
    let outcome = f.controller.sync_cron_job(&mut copy, &jobs).await;
    assert_eq!(
        outcome.error.is_some(),
        case.expect_err,
        "{}: error {:?}",
        case.name,
        outcome.error
    );
    assert_eq!(
        outcome.requeue_after, case.expect_requeue,
        "{}: requeue",
        case.name
    );
    assert_eq!(
        outcome.update_status, case.expect_update_status,
        "{}: update status",
        case.name
    );
    let created = f.job_control.created();
    assert_eq!(
        created.len(),
        usize::from(case.expect_create),
        "{}: creations",
        case.name
    );
    for job in &created {
        let r = get_controller_of(&job.metadata).expect("controller ref");
        assert_eq!(
            (
                r.api_version.as_str(),
                r.kind.as_str(),
                r.name.as_str(),
                r.uid.as_str()
            ),
            ("batch/v1", "CronJob", "mycronjob", "1a2b3c"),
            "{}",
            case.name
        );
        assert_eq!(r.controller, Some(true), "{}", case.name);
    }
    if case.ran_previously && !case.still_active {
        assert_eq!(
            copy.status
                .as_ref()
                .and_then(|s| s.last_successful_time.clone()),
            Some(Time(case.job_creation_time + secs(10))),
            "{}: lastSuccessfulTime",
            case.name
        );
    }
    assert_eq!(
        f.job_control.deleted().len(),
        usize::from(case.expect_delete),
        "{}: deletions",
        case.name
    );
    assert_eq!(
        active_len(&copy),
        case.expect_active,
        "{}: active",
        case.name
    );
    assert_eq!(
        f.warnings().len(),
        case.expect_warnings,
        "{}: warnings {:?}",
        case.name,
        f.warnings()
    );
}

#[tokio::test]
async fn controller_v2_sync_cron_job_table() {
    let cases = vec![
        SyncCase {
            name: "never ran, not valid schedule, A",
            schedule: "obvious error schedule",
            expect_warnings: 1,
            ..Default::default()
        },
        SyncCase {
            name: "never ran, not valid schedule, F",
            policy: "Forbid",
            schedule: "obvious error schedule",
            expect_warnings: 1,
            ..Default::default()
        },
        SyncCase {
            name: "never ran, not valid time zone",
            time_zone: Some("bad timezone"),
            expect_warnings: 1,
            ..Default::default()
        },
        SyncCase {
            name: "never ran, not time, A",
            expect_requeue: Some(requeue(minutes(1))),
            ..Default::default()
        },
        SyncCase {
            name: "never ran, not time, R",
            policy: "Replace",
            expect_requeue: Some(requeue(minutes(1))),
            ..Default::default()
        },
        SyncCase {
            name: "never ran, not time in zone",
            time_zone: Some("America/New_York"),
            expect_requeue: Some(requeue(minutes(1))),
            ..Default::default()
        },
        SyncCase {
            name: "never ran, is time, A",
            now: just_after_the_hour(),
            expect_create: true,
            expect_active: 1,
            expect_requeue: Some(requeue(minutes(59))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "never ran, is time, F",
            policy: "Forbid",
            now: just_after_the_hour(),
            expect_create: true,
            expect_active: 1,
            expect_requeue: Some(requeue(minutes(59))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "never ran, is time in zone",
            time_zone: Some("America/New_York"),
            now: just_after_the_hour_in_new_york(),
            expect_create: true,
            expect_active: 1,
            expect_requeue: Some(requeue(minutes(59))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "never ran, is time in zone, but TZ is also set in schedule",
            schedule: "TZ=UTC 0 * * * ?",
            time_zone: Some("America/New_York"),
            now: just_after_the_hour_in_new_york(),
            expect_create: true,
            expect_active: 1,
            expect_warnings: 1,
            expect_requeue: Some(requeue(minutes(59))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "never ran, is time, suspended",
            suspend: true,
            now: just_after_the_hour(),
            ..Default::default()
        },
        SyncCase {
            name: "never ran, is time, past deadline",
            deadline: Some(SHORT_DEAD),
            now: just_after_the_hour() + minutes(SHORT_DEAD + 1),
            expect_requeue: Some(requeue(minutes(60 - 1 - (SHORT_DEAD + 1)))),
            ..Default::default()
        },
        SyncCase {
            name: "never ran, is time, not past deadline",
            deadline: Some(LONG_DEAD),
            now: just_after_the_hour(),
            expect_create: true,
            expect_active: 1,
            expect_requeue: Some(requeue(minutes(59))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "prev ran but done, not time, A",
            ran_previously: true,
            expect_requeue: Some(requeue(minutes(1))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "prev ran but done, is time, A",
            ran_previously: true,
            now: just_after_the_hour(),
            expect_create: true,
            expect_active: 1,
            expect_requeue: Some(requeue(minutes(59))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "prev ran but done, is time, past deadline",
            ran_previously: true,
            deadline: Some(SHORT_DEAD),
            now: just_after_the_hour() + minutes(SHORT_DEAD + 1),
            expect_requeue: Some(requeue(minutes(60 - 1 - (SHORT_DEAD + 1)))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "still active, not time, A",
            ran_previously: true,
            still_active: true,
            expect_active: 1,
            expect_requeue: Some(requeue(minutes(1))),
            ..Default::default()
        },
        SyncCase {
            name: "still active, is time, A",
            ran_previously: true,
            still_active: true,
            now: just_after_the_hour(),
            expect_create: true,
            expect_active: 2,
            expect_requeue: Some(requeue(minutes(59))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "still active, is time, F",
            policy: "Forbid",
            ran_previously: true,
            still_active: true,
            now: just_after_the_hour(),
            expect_active: 1,
            expect_requeue: Some(requeue(minutes(59))),
            ..Default::default()
        },
        SyncCase {
            name: "still active, is time, R",
            policy: "Replace",
            ran_previously: true,
            still_active: true,
            now: just_after_the_hour(),
            expect_create: true,
            expect_delete: true,
            expect_active: 1,
            expect_requeue: Some(requeue(minutes(59))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "still active, is time, past deadline, A",
            ran_previously: true,
            still_active: true,
            deadline: Some(SHORT_DEAD),
            now: just_after_the_hour() + minutes(SHORT_DEAD + 1),
            expect_active: 1,
            expect_requeue: Some(requeue(minutes(60 - 1 - (SHORT_DEAD + 1)))),
            ..Default::default()
        },
        SyncCase {
            name: "with @every schedule, never ran, is time",
            schedule: EVERY_HOUR,
            cron_job_creation_time: Some(just_before_the_prior_hour()),
            now: just_before_the_hour(),
            expect_create: true,
            expect_active: 1,
            expect_requeue: Some(requeue(minutes(60))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "with @every schedule, never ran, not time",
            schedule: EVERY_HOUR,
            cron_job_creation_time: Some(just_before_the_hour()),
            now: top_of_the_hour(),
            expect_requeue: Some(requeue(minutes(59))),
            ..Default::default()
        },
        SyncCase {
            name: "with @every schedule, prev ran but done, is time, past deadline",
            schedule: EVERY_HOUR,
            deadline: Some(SHORT_DEAD),
            ran_previously: true,
            cron_job_creation_time: Some(just_before_the_prior_hour()),
            job_creation_time: just_before_the_prior_hour(),
            last_schedule_time: Some(just_before_the_hour()),
            now: just_before_the_next_hour() + secs(SHORT_DEAD + 1),
            expect_requeue: Some(requeue(minutes(60) - secs(SHORT_DEAD + 1))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "with @every schedule, prev ran but done, long overdue, no deadline",
            schedule: EVERY_HOUR,
            ran_previously: true,
            cron_job_creation_time: Some(just_after_the_prior_hour()),
            last_schedule_time: Some(just_after_the_hour()),
            job_creation_time: just_after_the_prior_hour(),
            now: week_after_the_hour(),
            expect_create: true,
            expect_active: 1,
            expect_warnings: 1,
            expect_requeue: Some(requeue(minutes(1))),
            expect_update_status: true,
            ..Default::default()
        },
        SyncCase {
            name: "do nothing if the namespace is terminating",
            job_create_error: Some(api_status::namespace_terminating(
                "jobs.batch",
                "x",
                "snazzycats",
            )),
            ran_previously: true,
            still_active: true,
            now: just_after_the_hour(),
            expect_active: 1,
            expect_err: true,
            ..Default::default()
        },
    ];
    for case in &cases {
        run_sync_case(case).await;
    }
}

// ---------------------------------------------------------------------------------------------
// sync(key): history, status, requeue
// ---------------------------------------------------------------------------------------------

/// A finished Job of `cron_job`, named for `scheduled`, Complete or Failed.
fn finished_job(cron_job: &CronJob, scheduled: Timestamp, condition: &str) -> Job {
    let mut job = job_from_template(cron_job, scheduled).expect("template");
    job.metadata.namespace = cron_job.metadata.namespace.clone();
    job.metadata.uid = Some(format!("uid-{}", scheduled.as_second()));
    job.metadata.resource_version = Some("1".into());
    let status = job.status.get_or_insert_with(Default::default);
    status.start_time = Some(Time(scheduled));
    status.completion_time = Some(Time(scheduled + secs(10)));
    status.conditions = Some(vec![job_condition(condition, "True").build()]);
    job
}

/// Upstream `TestControllerV2CleanupFinishedJobs` in spirit: the oldest finished Jobs beyond
/// `successfulJobsHistoryLimit` / `failedJobsHistoryLimit` are deleted (with events), the
/// newest kept, and the status written once.
#[tokio::test]
async fn history_limits_delete_the_oldest_finished_jobs() {
    let now = just_after_the_hour();
    let f = Fixture::at(now);
    let cron_job = new_cron_job()
        .schedule(ON_THE_HOUR)
        .successful_jobs_history_limit(1)
        .failed_jobs_history_limit(1)
        .last_schedule_time(top_of_the_hour())
        .build();
    let key = f.add_cron_job(&cron_job);
    let hours = |n: i64| top_of_the_hour() - SignedDuration::from_hours(n);
    for (n, condition) in [
        (1, "Complete"),
        (2, "Complete"),
        (3, "Complete"),
        (4, "Failed"),
        (5, "Failed"),
    ] {
        f.add_job(&finished_job(&cron_job, hours(n), condition));
    }
    f.controller.sync(&key).await.expect("sync");
    let mut deleted = f.job_control.deleted();
    deleted.sort();
    let name = |n: i64| format!("mycronjob-{}", hours(n).as_second() / 60);
    let mut want = vec![name(2), name(3), name(5)];
    want.sort();
    assert_eq!(deleted, want);
    let reasons = f.recorder.reasons();
    assert_eq!(
        reasons.iter().filter(|r| *r == "SuccessfulDelete").count(),
        3
    );
    let updates = f.cron_job_control.updates();
    assert_eq!(updates.len(), 1, "one status write");
    assert_eq!(
        updates[0]
            .status
            .as_ref()
            .and_then(|s| s.last_successful_time.clone()),
        Some(Time(hours(1) + secs(10)))
    );
}

/// `*/1 * * * *`: the CronJob waits in the delaying queue until the next minute (no
/// polling), then creates `mycronjob-<minutes>` with the scheduled-timestamp annotation,
/// records it in `status.active` and `lastScheduleTime`, and observes the creation skew.
#[tokio::test(start_paused = true)]
async fn every_minute_requeues_for_the_next_schedule_then_creates_the_job() {
    let created_at = ts("2024-05-01T12:00:30Z");
    let cron_job = new_cron_job()
        .schedule("*/1 * * * *")
        .created_at(created_at)
        .build();
    let f = Fixture::at(created_at);
    let key = f.add_cron_job(&cron_job);
    f.controller.sync(&key).await.expect("sync");
    assert!(f.job_control.created().is_empty(), "not yet");
    assert!(f.controller.queue().is_empty());
    step(Duration::from_millis(30_000)).await;
    assert!(f.controller.queue().is_empty(), "not before the minute");
    step(Duration::from_millis(200)).await;
    assert_eq!(f.controller.queue().len(), 1, "woken at the minute");

    let due = ts("2024-05-01T12:01:00.1Z");
    let g = Fixture::at(due);
    let key = g.add_cron_job(&cron_job);
    g.controller.sync(&key).await.expect("sync");
    let created = g.job_control.created();
    assert_eq!(created.len(), 1);
    let scheduled = ts("2024-05-01T12:01:00Z");
    let job = &created[0];
    assert_eq!(
        job.metadata.name.as_deref(),
        Some(format!("mycronjob-{}", scheduled.as_second() / 60).as_str())
    );
    assert_eq!(
        job.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION))
            .map(String::as_str),
        Some("2024-05-01T12:01:00Z")
    );
    assert_eq!(
        job.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("a"))
            .map(String::as_str),
        Some("b")
    );
    let status: CronJobStatus = g.cron_job_control.updates()[0]
        .status
        .clone()
        .unwrap_or_default();
    assert_eq!(status.active.map(|a| a.len()), Some(1));
    assert_eq!(status.last_schedule_time, Some(Time(scheduled)));
    assert!(
        g.recorder
            .reasons()
            .contains(&"SuccessfulCreate".to_owned())
    );
    let mut registry = prometheus_client::registry::Registry::default();
    g.metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(
        text.contains("cronjob_controller_job_creation_skew_duration_seconds_count 1"),
        "{text}"
    );
}

/// A Job in the active list that finished is removed from it (`SawCompletedJob`) and sets
/// `lastSuccessfulTime`; one that vanished from the API server goes too (`MissingJob`).
#[tokio::test]
async fn active_list_follows_finished_and_missing_jobs() {
    let now = just_before_the_hour();
    let f = Fixture::at(now);
    let base = new_cron_job()
        .schedule(ON_THE_HOUR)
        .created_at(just_before_the_prior_hour())
        .last_schedule_time(just_after_the_prior_hour())
        .build();
    let done = finished_job(&base, just_after_the_prior_hour(), "Complete");
    let missing = finished_job(&base, just_before_the_prior_hour(), "Complete");
    let cron_job = CronJobBuilder::default()
        .with(|cj| *cj = base.clone())
        .active_job(done.object_ref(&()))
        .active_job(missing.object_ref(&()))
        .build();
    let key = f.add_cron_job(&cron_job);
    f.add_job(&done);
    f.controller.sync(&key).await.expect("sync");
    let status = f.cron_job_control.updates()[0]
        .status
        .clone()
        .unwrap_or_default();
    assert_eq!(status.active.unwrap_or_default().len(), 0);
    assert_eq!(
        status.last_successful_time,
        Some(Time(just_after_the_prior_hour() + secs(10)))
    );
    let reasons = f.recorder.reasons();
    assert!(
        reasons.contains(&"SawCompletedJob".to_owned()),
        "{reasons:?}"
    );
    assert!(reasons.contains(&"MissingJob".to_owned()), "{reasons:?}");
    let saw = f
        .recorder
        .events()
        .into_iter()
        .find(|e| e.reason == "SawCompletedJob")
        .expect("event");
    assert_eq!(
        saw.message,
        format!(
            "Saw completed job: {}, condition: Complete",
            done.metadata.name.clone().unwrap_or_default()
        )
    );
}

/// An unfinished Job controlled by the CronJob but missing from its (fresh) active list is
/// reported as `UnexpectedJob`.
#[tokio::test]
async fn an_unknown_running_job_is_reported() {
    let f = Fixture::at(just_before_the_hour());
    let cron_job = new_cron_job().schedule(ON_THE_HOUR).build();
    let key = f.add_cron_job(&cron_job);
    let mut stray = job_from_template(&cron_job, just_after_the_prior_hour()).expect("template");
    stray.metadata.namespace = Some("snazzycats".into());
    stray.metadata.uid = Some("stray".into());
    f.add_job(&stray);
    f.controller.sync(&key).await.expect("sync");
    assert_eq!(f.warnings(), vec!["UnexpectedJob".to_owned()]);
}

/// A CronJob gone from the cache is not requeued.
#[tokio::test]
async fn a_deleted_cron_job_is_left_alone() {
    let f = Fixture::at(just_before_the_hour());
    f.controller.sync("snazzycats/gone").await.expect("sync");
    assert!(f.controller.queue().is_empty());
    assert!(f.cron_job_control.updates().is_empty());
}

/// A failed status write is an error (the key is retried rate-limited).
#[tokio::test]
async fn a_failed_status_write_is_retried() {
    let f = Fixture::at(just_after_the_hour());
    let cron_job = new_cron_job().schedule(ON_THE_HOUR).build();
    let key = f.add_cron_job(&cron_job);
    f.cron_job_control
        .set_update_error(Some(api_status::conflict(
            "cronjobs.batch",
            "mycronjob",
            "stale",
        )));
    let err = f.controller.sync(&key).await.expect_err("conflict");
    assert!(matches!(err, Error::UpdateStatus { .. }), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// Moves paused time forward and lets the queue's timer task act on it.
async fn step(d: Duration) {
    tokio::time::advance(d).await;
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// A changed schedule requeues the CronJob for its next schedule under the new one; an
/// unparseable one is reported (`UnParseableCronJobSchedule`) and not requeued; other
/// changes sync at once. Job events wake the owning CronJob.
#[tokio::test(start_paused = true)]
async fn handlers_requeue_on_schedule_changes_and_job_events() {
    let now = ts("2016-05-19T10:00:30Z");
    let f = Fixture::at(now);
    let old = new_cron_job().schedule(ON_THE_HOUR).build();
    f.add_cron_job(&old);
    let handlers = f.controller.event_handlers().clone();

    let every_minute = new_cron_job().schedule("* * * * *").build();
    handlers.update_cron_job(&old, &every_minute);
    assert!(f.controller.queue().is_empty());
    step(Duration::from_millis(30_200)).await;
    assert_eq!(f.controller.queue().len(), 1, "at the next minute");
    let key = f.controller.queue().get().await.expect("key");
    f.controller.queue().done(&key);

    let broken = new_cron_job().schedule("not a schedule").build();
    handlers.update_cron_job(&old, &broken);
    assert_eq!(f.warnings(), vec!["UnParseableCronJobSchedule".to_owned()]);

    let suspended = new_cron_job().schedule(ON_THE_HOUR).suspend(true).build();
    handlers.update_cron_job(&old, &suspended);
    assert_eq!(f.controller.queue().len(), 1, "other changes sync now");
    let key = f.controller.queue().get().await.expect("key");
    f.controller.queue().done(&key);

    let job = kcm_testing::job("mycronjob-1")
        .namespace("snazzycats")
        .owner(controller_ref_of(&old))
        .build();
    handlers.add_job(&job);
    assert_eq!(f.controller.queue().len(), 1, "its CronJob is synced");
    let orphan = kcm_testing::job("orphan").namespace("snazzycats").build();
    let key = f.controller.queue().get().await.expect("key");
    f.controller.queue().done(&key);
    handlers.add_job(&orphan);
    assert!(f.controller.queue().is_empty(), "orphans wake nobody");
}

#[tokio::test(start_paused = true)]
async fn panicking_sync_is_recovered_counted_and_retried() {
    use std::sync::atomic::{AtomicU64, Ordering};
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
    let controller = CronJobController::with_caches(
        Indexer::new(),
        Indexer::new(),
        Arc::new(FakeCronJobControl::new()),
        Arc::new(FakeJobControl::new(Timestamp::UNIX_EPOCH)),
        Arc::new(FakeRecorder::new()),
        CronJobControllerOptions {
            local: TimeZone::UTC,
            metrics: Some(metrics.clone()),
            controller_metrics: None,
        },
    )
    .with_sync_handler(handler);
    let key = "ns/cj".to_owned();
    controller.queue().add(key.clone());
    assert!(controller.process_next_work_item().await);
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1);
    assert_eq!(controller.queue().num_requeues(&key), 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(controller.process_next_work_item().await);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}
