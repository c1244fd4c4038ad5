//! Unit tests of the TTL-after-finished controller: a bare cache, a fake client and a fixed clock, as upstream's `ttlafterfinished_controller_test.go`.

use std::time::Duration;

use jiff::SignedDuration;
use kcm_machinery::controller::api_status;
use kcm_testing::{JobBuilder, MetaBuilder, job_condition};

use super::*;
use crate::ttlafterfinished::client::{FakeTtlJobClient, RecordedDelete};
use crate::ttlafterfinished::expiry::finish_and_expire_time;

fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

/// `ns/job` (UID `u1`), finished `finished_ago` seconds ago with `condition` when given, with
/// `ttl` when given.
fn job(ttl: Option<i32>, finished_ago: Option<(i64, &str)>) -> JobBuilder {
    let mut builder = kcm_testing::job("job").namespace("ns").uid("u1");
    if let Some(ttl) = ttl {
        builder = builder.ttl_seconds_after_finished(ttl);
    }
    if let Some((ago, condition)) = finished_ago {
        builder = builder.condition(
            job_condition(condition, "True")
                .transitioned_at(now() - SignedDuration::from_secs(ago)),
        );
    }
    builder
}

struct Fixture {
    controller: TtlAfterFinishedController,
    jobs: Indexer<Job>,
    client: Arc<FakeTtlJobClient>,
    metrics: Arc<TtlAfterFinishedMetrics>,
}

impl Fixture {
    fn new() -> Self {
        let jobs = Indexer::new();
        let client = Arc::new(FakeTtlJobClient::new());
        let metrics = Arc::new(TtlAfterFinishedMetrics::new());
        let controller = TtlAfterFinishedController::with_cache(
            jobs.clone(),
            client.clone(),
            TtlAfterFinishedControllerOptions {
                metrics: None,
                controller_metrics: Some(metrics.clone()),
            },
        )
        .with_clock(Arc::new(now));
        Self {
            controller,
            jobs,
            client,
            metrics,
        }
    }

    /// Puts `job` in the cache and, as `fresh` (or itself), on the server.
    fn add(&self, job: &Job, fresh: Option<&Job>) {
        self.jobs.add(Arc::new(job.clone())).expect("add");
        self.client.insert(fresh.unwrap_or(job).clone());
    }
}

async fn step(d: Duration) {
    tokio::time::advance(d).await;
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// Upstream `TestTimeLeft`-style table over the finish and expiry times.
#[test]
fn finish_and_expire_times() {
    struct Case {
        name: &'static str,
        job: Job,
        want: Option<Option<(i64, i64)>>,
    }
    let cases = [
        Case {
            name: "no TTL",
            job: job(None, Some((10, "Complete"))).build(),
            want: None,
        },
        Case {
            name: "not finished",
            job: job(Some(5), None).build(),
            want: None,
        },
        Case {
            name: "complete",
            job: job(Some(5), Some((10, "Complete"))).build(),
            want: Some(Some((-10, -5))),
        },
        Case {
            name: "failed",
            job: job(Some(100), Some((10, "Failed"))).build(),
            want: Some(Some((-10, 90))),
        },
        Case {
            name: "finished without a transition time",
            job: job(Some(5), None)
                .condition(job_condition("Complete", "True"))
                .build(),
            want: Some(None),
        },
    ];
    for case in cases {
        let got = finish_and_expire_time(&case.job).map(|r| {
            r.ok().map(|(finished, expire)| {
                (
                    now().duration_until(finished).as_secs(),
                    now().duration_until(expire).as_secs(),
                )
            })
        });
        assert_eq!(got, case.want, "{}", case.name);
    }
}

/// An expired Job is re-read and deleted (foreground, UID precondition), and the latency
/// since it became eligible observed.
#[tokio::test]
async fn expired_jobs_are_deleted_after_a_fresh_read() {
    let f = Fixture::new();
    let done = job(Some(5), Some((7, "Complete"))).build();
    f.add(&done, None);
    f.controller.sync("ns/job").await.expect("sync");
    assert_eq!(f.client.gets(), 1);
    assert_eq!(
        f.client.deletes(),
        vec![RecordedDelete {
            key: "ns/job".into(),
            uid: "u1".into()
        }]
    );
    let mut registry = prometheus_client::registry::Registry::default();
    f.metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(
        text.contains("ttl_after_finished_controller_job_deletion_duration_seconds_sum 2.0"),
        "{text}"
    );
}

/// A TTL not expired yet requeues the Job for the moment it does: no polling, no GET.
#[tokio::test(start_paused = true)]
async fn unexpired_jobs_are_requeued_for_their_expiry() {
    let f = Fixture::new();
    f.add(&job(Some(5), Some((2, "Failed"))).build(), None);
    f.controller.sync("ns/job").await.expect("sync");
    assert!(f.client.deletes().is_empty());
    assert_eq!(f.client.gets(), 0);
    step(Duration::from_millis(2_900)).await;
    assert!(f.controller.queue().is_empty());
    step(Duration::from_millis(200)).await;
    assert_eq!(f.controller.queue().len(), 1, "requeued at expiry");
}

/// The fresh copy decides: a TTL raised meanwhile postpones the deletion; a Job gone or being
/// deleted is left alone.
#[tokio::test(start_paused = true)]
async fn the_fresh_copy_decides() {
    let f = Fixture::new();
    let cached = job(Some(5), Some((10, "Complete"))).build();
    let raised = JobBuilder::from_job(cached.clone())
        .ttl_seconds_after_finished(60)
        .build();
    f.add(&cached, Some(&raised));
    f.controller.sync("ns/job").await.expect("sync");
    assert!(f.client.deletes().is_empty(), "the new TTL has not expired");
    step(Duration::from_secs(50)).await;
    assert_eq!(f.controller.queue().len(), 1, "requeued for the new expiry");

    let g = Fixture::new();
    g.jobs.add(Arc::new(cached.clone())).expect("add");
    g.controller.sync("ns/job").await.expect("gone");
    assert!(g.client.deletes().is_empty());

    let h = Fixture::new();
    let deleting = JobBuilder::from_job(cached).deleted_at(now()).build();
    h.add(&deleting, None);
    h.controller.sync("ns/job").await.expect("deleting");
    assert!(h.client.deletes().is_empty());
    assert_eq!(h.client.gets(), 0);
}

/// A failed delete is an error (retried); a missing finish time too.
#[tokio::test]
async fn failures_are_errors() {
    let f = Fixture::new();
    f.add(&job(Some(0), Some((1, "Complete"))).build(), None);
    f.client
        .set_delete_error(Some(api_status::internal_error("boom")));
    assert!(matches!(
        f.controller.sync("ns/job").await,
        Err(Error::Delete { .. })
    ));
    let g = Fixture::new();
    g.add(
        &job(Some(0), None)
            .condition(job_condition("Failed", "True"))
            .build(),
        None,
    );
    assert!(matches!(
        g.controller.sync("ns/job").await,
        Err(Error::NoFinishTime { .. })
    ));
}

/// Only finished Jobs with a TTL that are not being deleted are enqueued.
#[tokio::test]
async fn handlers_enqueue_finished_jobs_with_a_ttl() {
    let f = Fixture::new();
    let handlers = f.controller.event_handlers().clone();
    handlers.add_job(&job(None, Some((1, "Complete"))).build());
    handlers.add_job(&job(Some(5), None).build());
    handlers.update_job(
        &job(Some(5), Some((1, "Complete")))
            .deleted_at(now())
            .build(),
    );
    assert!(f.controller.queue().is_empty());
    handlers.update_job(&job(Some(5), Some((1, "Complete"))).build());
    assert_eq!(f.controller.queue().len(), 1);
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
    let controller = TtlAfterFinishedController::with_cache(
        Indexer::new(),
        Arc::new(FakeTtlJobClient::new()),
        TtlAfterFinishedControllerOptions {
            metrics: Some(metrics.clone()),
            controller_metrics: None,
        },
    )
    .with_sync_handler(handler);
    controller.queue().add("ns/job".to_owned());
    assert!(controller.process_next_work_item().await);
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(controller.process_next_work_item().await);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}
