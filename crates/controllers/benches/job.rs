//! Job controller benchmarks: the sync pass and the pod handler over in-memory caches.
//!
//! Run with `cargo bench -p kcm-controllers --bench job`. Pod control and the Job API are the
//! recording fakes, so these measure the controller's own work: finding the Job's pods
//! through the controller-UID index, claiming, counting, the status arithmetic.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kcm_controllers::job::{FakeJobClient, JobController, JobControllerOptions};
use kcm_machinery::controller::FakePodControl;
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::Indexer;
use kcm_testing::{MetaBuilder, PodSpecBuilder, container, controller_ref_of, pod_template};

const TRACKING: &str = "batch.kubernetes.io/job-tracking";

/// Job `default/<name>` of `pods` completions and parallelism, its status matching `running`
/// ready pods.
fn job(name: &str, pods: i32, running: i32) -> Job {
    kcm_testing::job(name)
        .namespace("default")
        .uid(format!("job-{name}"))
        .generation(1)
        .completions(pods)
        .parallelism(pods)
        .backoff_limit(6)
        .selecting(&[("batch.kubernetes.io/job-name", name)])
        .template(
            pod_template()
                .restart_policy("Never")
                .container(container("c")),
        )
        .active(running)
        .ready(running)
        .terminating(0)
        .start_time(Timestamp::UNIX_EPOCH)
        .uncounted(&[], &[])
        .build()
}

/// Pod `i` of `job` in `phase` (ready when running), with the tracking finalizer.
fn pod(job: &Job, i: usize, phase: &str) -> Pod {
    let name = job.metadata.name.clone().unwrap_or_default();
    let mut pod = kcm_testing::pod(&format!("{name}-{i}"))
        .namespace("default")
        .uid(format!("{name}-{i}"))
        .label("batch.kubernetes.io/job-name", &name)
        .resource_version("1")
        .owner(controller_ref_of(job))
        .finalizers(&[TRACKING])
        .node(format!("node-{}", i % 20))
        .phase(phase);
    if phase == "Running" {
        pod = pod.ready();
    }
    pod.build()
}

struct Bench {
    controller: JobController,
    pod_control: Arc<FakePodControl>,
    client: Arc<FakeJobClient>,
    jobs: Indexer<Job>,
    pods: Indexer<Pod>,
}

fn bench_controller(rt: &tokio::runtime::Runtime) -> Bench {
    let _guard = rt.enter();
    let jobs = Indexer::new();
    let pods = Indexer::new();
    let pod_control = Arc::new(FakePodControl::new());
    let client = Arc::new(FakeJobClient::new());
    let controller = JobController::with_caches(
        jobs.clone(),
        pods.clone(),
        client.clone(),
        pod_control.clone(),
        Arc::new(FakeRecorder::new()),
        JobControllerOptions::default(),
    )
    .with_clock(Arc::new(|| Timestamp::UNIX_EPOCH));
    Bench {
        controller,
        pod_control,
        client,
        jobs,
        pods,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A running Job whose status is already right: the pass finds its pods, counts and
/// compares, and writes nothing. Its namespace also holds 199 other Jobs of 10 pods each
/// (the 200 × 10 stress shape), which the controller-UID index keeps out of the pass.
fn sync_steady_state(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("job_sync_steady_state");
    for pods in [10usize, 100, 1000] {
        let b = bench_controller(&rt);
        let n = i32::try_from(pods).expect("small");
        let steady = job("steady", n, n);
        b.jobs.add(Arc::new(steady.clone())).expect("add");
        for i in 0..pods {
            b.pods
                .add(Arc::new(pod(&steady, i, "Running")))
                .expect("add");
        }
        for other in 0..199 {
            let other = job(&format!("other-{other}"), 10, 10);
            b.jobs.add(Arc::new(other.clone())).expect("add");
            for i in 0..10 {
                b.pods
                    .add(Arc::new(pod(&other, i, "Running")))
                    .expect("add");
            }
        }
        group.bench_with_input(BenchmarkId::from_parameter(pods), &pods, |bencher, _| {
            bencher
                .to_async(&rt)
                .iter(|| async { b.controller.sync("default/steady").await.expect("sync") });
        });
        assert!(b.client.status_updates().is_empty(), "steady: no writes");
    }
    group.finish();
}

/// A Job whose 10 pods all succeeded: the pass records them as uncounted, removes their
/// finalizers (10 fake patches), counts them and completes the Job (three status writes).
fn sync_finishing(c: &mut Criterion) {
    let rt = runtime();
    let b = bench_controller(&rt);
    let done = job("done", 10, 0);
    b.jobs.add(Arc::new(done.clone())).expect("add");
    for i in 0..10 {
        b.pods
            .add(Arc::new(pod(&done, i, "Succeeded")))
            .expect("add");
    }
    c.bench_function("job_sync_finishing_10_pods", |bencher| {
        bencher.to_async(&rt).iter(|| async {
            // The caches never see the writes: reset what the pass remembers of them.
            b.pod_control.clear();
            b.client.clear_actions();
            b.controller
                .finalizer_expectations()
                .delete_expectations("default/done");
            b.controller.sync("default/done").await.expect("sync");
        });
    });
}

/// The pod handler for an owned pod: resolve the Job, observe the creation, batch the sync.
fn pod_event(c: &mut Criterion) {
    let rt = runtime();
    let b = bench_controller(&rt);
    let owner = job("owner", 10, 10);
    b.jobs.add(Arc::new(owner.clone())).expect("add");
    let owned = pod(&owner, 0, "Running");
    let handlers = b.controller.event_handlers().clone();
    let _guard = rt.enter();
    c.bench_function("job_add_owned_pod_event", |bencher| {
        bencher.iter(|| handlers.add_pod(black_box(&owned)));
    });
}

criterion_group!(benches, sync_steady_state, sync_finishing, pod_event);
criterion_main!(benches);
