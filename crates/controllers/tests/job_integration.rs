//! The batch controllers (Job, CronJob, TTL-after-finished) against the embedded API server: real HTTP, real informers, real pod writes.
//!
//! Each test starts its own in-memory API server and the controllers wired as
//! kube-controller-manager wires them. There are no nodes: the test plays the kubelet, moving
//! pods to `Succeeded` or `Failed` through `pods/status`. Waits are bounded polls of the API;
//! every assertion is on API state, never on timing.

mod manager_support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Event, Pod};
use kcm_apiserver::testing::TestServer;
use kcm_controllers::cronjob::{CronJobController, CronJobControllerOptions};
use kcm_controllers::job::{JobController, JobControllerOptions};
use kcm_controllers::ttlafterfinished::{
    TtlAfterFinishedController, TtlAfterFinishedControllerOptions,
};
use kcm_machinery::events::{EventBroadcaster, KubeEventSink};
use kcm_machinery::informer::SharedInformerFactory;
use kcm_testing::{PodSpecBuilder, container, pod_template};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use manager_support::{timed, wait_until};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TEST_LIMIT: Duration = Duration::from_secs(120);
const NS: &str = "default";
const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

/// The Job, CronJob and TTL controllers running on one informer factory, as `kcm run`
/// starts them.
struct Running {
    factory: SharedInformerFactory,
    broadcaster: EventBroadcaster,
    cancel: CancellationToken,
}

impl Running {
    fn start(client: &kube::Client) -> Self {
        let broadcaster = EventBroadcaster::new(Arc::new(KubeEventSink::new(client.clone())));
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let cancel = CancellationToken::new();
        let jobs = Arc::new(JobController::new(
            &factory,
            client.clone(),
            broadcaster.recorder("job-controller", None),
            JobControllerOptions::default(),
        ));
        let cron_jobs = Arc::new(CronJobController::new(
            &factory,
            client.clone(),
            broadcaster.recorder("cronjob-controller", None),
            CronJobControllerOptions::default(),
        ));
        let ttl = Arc::new(TtlAfterFinishedController::new(
            &factory,
            client.clone(),
            TtlAfterFinishedControllerOptions::default(),
        ));
        factory.start(&cancel);
        tokio::spawn(jobs.run(5, cancel.clone()));
        tokio::spawn(cron_jobs.run(5, cancel.clone()));
        tokio::spawn(ttl.run(5, cancel.clone()));
        Self {
            factory,
            broadcaster,
            cancel,
        }
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.factory.shutdown().await;
        self.broadcaster.shutdown().await;
    }
}

/// A Job selecting nothing (the API server generates the selector and labels), whose pods
/// run `c` and never restart.
fn job(name: &str) -> kcm_testing::JobBuilder {
    kcm_testing::job(name).template(
        pod_template()
            .restart_policy("Never")
            .container(container("c").image("busybox")),
    )
}

fn pods_of(pods: &[Pod], job: &str) -> Vec<Pod> {
    pods.iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("batch.kubernetes.io/job-name"))
                .is_some_and(|n| n == job)
        })
        .cloned()
        .collect()
}

fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

fn has_condition(job: &Job, type_: &str, reason: Option<&str>) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == type_
                && c.status == "True"
                && reason.is_none_or(|r| c.reason.as_deref() == Some(r))
        })
}

/// Moves the pod to `phase`, as its kubelet would when its container exits.
async fn finish(pods: &Api<Pod>, name: &str, phase: &str) {
    let code = if phase == "Succeeded" { 0 } else { 1 };
    let status = json!({ "status": {
        "phase": phase,
        "containerStatuses": [{
            "name": "c", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": { "terminated": {
                "exitCode": code, "finishedAt": jiff::Timestamp::now().to_string()
            } }
        }]
    } });
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("pod status");
}

async fn list(pods: &Api<Pod>) -> Vec<Pod> {
    pods.list(&ListParams::default())
        .await
        .expect("list pods")
        .items
}

/// `completions: 3, parallelism: 2`: never more than two active pods; each success is
/// counted once; the Job completes with `succeeded: 3` and no pod keeps the tracking
/// finalizer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_to_completion_within_its_parallelism() {
    timed(TEST_LIMIT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let running = Running::start(&client);
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        jobs.create(
            &PostParams::default(),
            &job("work").completions(3).parallelism(2).build(),
        )
        .await
        .expect("create job");

        for done in 1..=3_i32 {
            wait_until("an active pod to finish", || async {
                let all = pods_of(&list(&pods).await, "work");
                let active: Vec<&Pod> = all.iter().filter(|p| is_active(p)).collect();
                assert!(active.len() <= 2, "more than parallelism: {}", active.len());
                active.len() == usize::try_from((4 - done).min(2)).unwrap_or(0)
            })
            .await;
            let all = pods_of(&list(&pods).await, "work");
            let next = all.iter().find(|p| is_active(p)).expect("an active pod");
            finish(
                &pods,
                next.metadata.name.as_deref().unwrap_or_default(),
                "Succeeded",
            )
            .await;
            wait_until("the success to be counted", || async {
                let job = jobs.get("work").await.expect("job");
                job.status.and_then(|s| s.succeeded) == Some(done)
            })
            .await;
        }
        wait_until("the Job to complete", || async {
            let job = jobs.get("work").await.expect("job");
            has_condition(&job, "Complete", None)
        })
        .await;
        let job = jobs.get("work").await.expect("job");
        let status = job.status.clone().unwrap_or_default();
        assert_eq!(status.succeeded, Some(3));
        assert!(status.completion_time.is_some());
        assert!(has_condition(
            &job,
            "SuccessCriteriaMet",
            Some("CompletionsReached")
        ));
        wait_until("every tracking finalizer removed", || async {
            pods_of(&list(&pods).await, "work").iter().all(|p| {
                !p.metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == TRACKING_FINALIZER)
            })
        })
        .await;
        assert_eq!(pods_of(&list(&pods).await, "work").len(), 3, "no extra pod");
        let events: Api<Event> = Api::namespaced(client.clone(), NS);
        wait_until("a Completed event", || async {
            events
                .list(&ListParams::default())
                .await
                .expect("events")
                .items
                .iter()
                .any(|e| e.reason.as_deref() == Some("Completed"))
        })
        .await;
        running.stop().await;
    })
    .await;
}

/// An Indexed Job's pods carry their index (annotation, label, hostname) and
/// `status.completedIndexes` follows the successes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_job_numbers_its_pods() {
    timed(TEST_LIMIT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let running = Running::start(&client);
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        jobs.create(
            &PostParams::default(),
            &job("indexed")
                .completions(3)
                .parallelism(3)
                .indexed()
                .build(),
        )
        .await
        .expect("create job");
        wait_until("three pods", || async {
            pods_of(&list(&pods).await, "indexed").len() == 3
        })
        .await;
        let mut indexes: Vec<String> = Vec::new();
        for p in pods_of(&list(&pods).await, "indexed") {
            let index = p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("batch.kubernetes.io/job-completion-index"))
                .cloned()
                .expect("index annotation");
            assert_eq!(
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("batch.kubernetes.io/job-completion-index")),
                Some(&index)
            );
            assert_eq!(
                p.spec.as_ref().and_then(|s| s.hostname.clone()),
                Some(format!("indexed-{index}"))
            );
            if index != "1" {
                finish(
                    &pods,
                    p.metadata.name.as_deref().unwrap_or_default(),
                    "Succeeded",
                )
                .await;
            }
            indexes.push(index);
        }
        indexes.sort();
        assert_eq!(indexes, ["0", "1", "2"]);
        wait_until("indexes 0 and 2 completed", || async {
            let job = jobs.get("indexed").await.expect("job");
            job.status.and_then(|s| s.completed_indexes).as_deref() == Some("0,2")
        })
        .await;
        running.stop().await;
    })
    .await;
}

/// `backoffLimit: 0`: the first failure fails the Job (`BackoffLimitExceeded`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_beyond_the_backoff_limit_fails_the_job() {
    timed(TEST_LIMIT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let running = Running::start(&client);
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        jobs.create(
            &PostParams::default(),
            &job("fails").backoff_limit(0).build(),
        )
        .await
        .expect("create job");
        wait_until("a pod", || async {
            !pods_of(&list(&pods).await, "fails").is_empty()
        })
        .await;
        let p = pods_of(&list(&pods).await, "fails").remove(0);
        finish(
            &pods,
            p.metadata.name.as_deref().unwrap_or_default(),
            "Failed",
        )
        .await;
        wait_until("the Job to fail", || async {
            let job = jobs.get("fails").await.expect("job");
            has_condition(&job, "Failed", Some("BackoffLimitExceeded"))
        })
        .await;
        let job = jobs.get("fails").await.expect("job");
        assert!(has_condition(
            &job,
            "FailureTarget",
            Some("BackoffLimitExceeded")
        ));
        assert_eq!(job.status.and_then(|s| s.failed), Some(1));
        assert_eq!(
            pods_of(&list(&pods).await, "fails").len(),
            1,
            "not replaced"
        );
        running.stop().await;
    })
    .await;
}

/// Suspending a running Job deletes its active pods and sets `Suspended=True`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspending_a_job_deletes_its_active_pods() {
    timed(TEST_LIMIT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let running = Running::start(&client);
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        jobs.create(
            &PostParams::default(),
            &job("pausable").completions(4).parallelism(2).build(),
        )
        .await
        .expect("create job");
        wait_until("two pods", || async {
            pods_of(&list(&pods).await, "pausable").len() == 2
        })
        .await;
        jobs.patch(
            "pausable",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "suspend": true } })),
        )
        .await
        .expect("suspend");
        wait_until("the pods deleted and the Job suspended", || async {
            let job = jobs.get("pausable").await.expect("job");
            pods_of(&list(&pods).await, "pausable").is_empty()
                && has_condition(&job, "Suspended", Some("JobSuspended"))
        })
        .await;
        running.stop().await;
    })
    .await;
}

/// A CronJob whose schedule is due creates its Job `NAME-<minutes>`, owned by it, and lists
/// it in `status.active`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_cron_job_starts_its_job() {
    timed(TEST_LIMIT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let running = Running::start(&client);
        let cron_jobs: Api<CronJob> = Api::namespaced(client.clone(), NS);
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        cron_jobs
            .create(
                &PostParams::default(),
                &kcm_testing::cron_job("every-minute")
                    .schedule("* * * * *")
                    .job_template(
                        job("template").template(
                            pod_template()
                                .restart_policy("Never")
                                .container(container("c").image("busybox")),
                        ),
                    )
                    .build(),
            )
            .await
            .expect("create cron job");
        // As if the controller had run it two minutes ago: the last minute is due now.
        let earlier = jiff::Timestamp::now() - jiff::SignedDuration::from_mins(2);
        cron_jobs
            .patch_status(
                "every-minute",
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": { "lastScheduleTime": earlier.to_string() } })),
            )
            .await
            .expect("status");
        wait_until("the scheduled Job", || async {
            !jobs
                .list(&ListParams::default())
                .await
                .expect("jobs")
                .items
                .is_empty()
        })
        .await;
        let created = jobs.list(&ListParams::default()).await.expect("jobs").items;
        let name = created[0].metadata.name.clone().unwrap_or_default();
        let minutes = name
            .strip_prefix("every-minute-")
            .and_then(|m| m.parse::<i64>().ok())
            .expect("NAME-<minutes>");
        let now_minutes = jiff::Timestamp::now().as_second() / 60;
        assert!((now_minutes - 2..=now_minutes).contains(&minutes), "{name}");
        let owner = created[0]
            .metadata
            .owner_references
            .clone()
            .unwrap_or_default();
        assert_eq!(owner[0].kind, "CronJob");
        wait_until("the Job in status.active", || async {
            let cj = cron_jobs.get("every-minute").await.expect("cron job");
            cj.status
                .and_then(|s| s.active)
                .is_some_and(|a| a.iter().any(|r| r.name.as_deref() == Some(&name)))
        })
        .await;
        running.stop().await;
    })
    .await;
}

/// A finished Job with `ttlSecondsAfterFinished: 1` is deleted (foreground) about a second
/// after it completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_job_is_deleted_after_its_ttl() {
    timed(TEST_LIMIT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let running = Running::start(&client);
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        jobs.create(
            &PostParams::default(),
            &job("short-lived").ttl_seconds_after_finished(1).build(),
        )
        .await
        .expect("create job");
        wait_until("a pod", || async {
            !pods_of(&list(&pods).await, "short-lived").is_empty()
        })
        .await;
        let p = pods_of(&list(&pods).await, "short-lived").remove(0);
        finish(
            &pods,
            p.metadata.name.as_deref().unwrap_or_default(),
            "Succeeded",
        )
        .await;
        // No garbage collector runs here: the foreground deletion leaves the Job with a
        // deletionTimestamp until its dependents are gone.
        wait_until("the Job deleted", || async {
            match jobs.get_opt("short-lived").await.expect("get") {
                None => true,
                Some(job) => job.metadata.deletion_timestamp.is_some(),
            }
        })
        .await;
        running.stop().await;
    })
    .await;
}
