//! Informer throughput and memory: Reflector → DeltaFIFO → Indexer → one handler.
//!
//! Run with `cargo bench -p kcm-machinery --bench informer`.
//!
//! - `informer/watch_updates/100k_pod_updates_10k_pods`: a SharedIndexInformer synced on 10k
//!   pods receives 100k `MODIFIED` watch events (10 per pod) through the `ListerWatcher`
//!   trait (no HTTP, no JSON: decoding is kube's cost, not the informer's); timed from the
//!   first event until the one handler has seen all 100k updates.
//! - Memory per cached pod is printed before the timed runs: the growth of the process's
//!   resident set (`VmRSS`, Linux) while 100k realistic pods are listed into an informer's
//!   cache, divided by 100k. The workspace forbids `unsafe`, which rules out a counting
//!   global allocator, so RSS is the measure: it includes allocator overhead and whatever
//!   the DeltaFIFO's transient queue left in the heap, so it is an upper bound. The size of
//!   the same pods held in a plain `Vec<Pod>` is printed alongside for comparison. Each is
//!   measured in a fresh child process. Set `KCM_INFORMER_BENCH_SKIP_MEMORY=1` to skip it
//!   (e.g. when profiling).

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::informer::{
    ListerWatcher, ResourceEventHandlerFuncs, SharedIndexInformer, SharedInformerOptions,
    WatchStream,
};
use kcm_testing::{
    MetaBuilder, PodSpecBuilder, container, container_status, owner_ref, pod_condition,
};
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::core::{ListMeta, ObjectList, TypeMeta};
use tokio::runtime::Runtime;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const PODS: usize = 10_000;
const UPDATES: usize = 100_000;
const MEMORY_PODS: usize = 100_000;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A pod shaped like a ReplicaSet's running pod: labels, owner, one container with
/// requests, status with conditions.
fn pod(i: usize, rv: u64) -> Pod {
    let owner = owner_ref(
        "apps/v1",
        "ReplicaSet",
        "web-5d8f9c7b6",
        "0b7e8d52-1111-4111-8111-000000000001",
    )
    .controller(true)
    .block_owner_deletion(true);
    let mut pod = kcm_testing::pod(&format!("web-{:05}-{}", i, "x7k2p"))
        .namespace(format!("team-{}", i % 20))
        .uid(format!("6f1c2a4e-0000-4000-8000-{i:012}"))
        .resource_version(rv.to_string())
        .labels(&[
            ("app", "web"),
            ("pod-template-hash", "5d8f9c7b6"),
            ("tier", "frontend"),
        ])
        .owner(owner)
        .node(format!("node-{}", i % 100))
        .container(
            container("web")
                .image("registry.example/web:1.2.3")
                .port(8080)
                .request("cpu", "100m")
                .request("memory", "128Mi"),
        )
        .phase("Running")
        .pod_ip(format!("10.0.{}.{}", (i / 250) % 250, i % 250))
        .host_ip(format!("192.168.0.{}", i % 100));
    for condition in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        pod = pod.condition(pod_condition(condition, "True"));
    }
    pod.container_status(
        container_status("web")
            .image("registry.example/web:1.2.3")
            .image_id("sha256:0123456789abcdef")
            .ready(true)
            .started(true)
            .restarts(0),
    )
    .build()
}

/// A pod with only a name, namespace and resourceVersion: isolates the pipeline's own cost
/// from allocating and freeing realistic objects.
fn minimal_pod(i: usize, rv: u64) -> Pod {
    kcm_testing::pod(&format!("web-{i:05}"))
        .namespace(format!("team-{}", i % 20))
        .resource_version(rv.to_string())
        .build()
}

/// Lists `list` once, then serves one watch whose events flow once `gate` is notified;
/// later watches never end.
struct BenchSource {
    list: Mutex<Option<Vec<Pod>>>,
    events: Mutex<Option<Vec<WatchEvent<Pod>>>>,
    gate: Arc<Notify>,
}

#[async_trait]
impl ListerWatcher<Pod> for BenchSource {
    async fn list(&self, _params: &ListParams) -> Result<ObjectList<Pod>, kube::Error> {
        let items = self.list.lock().expect("lock").take().unwrap_or_default();
        Ok(ObjectList {
            types: TypeMeta::list::<Pod>(),
            metadata: ListMeta {
                resource_version: Some("1".into()),
                ..ListMeta::default()
            },
            items,
        })
    }

    async fn watch(
        &self,
        _params: &WatchParams,
        _resource_version: &str,
    ) -> Result<WatchStream<Pod>, kube::Error> {
        let Some(events) = self.events.lock().expect("lock").take() else {
            return Ok(futures::stream::pending().boxed());
        };
        let gate = self.gate.clone();
        let events = futures::stream::once(async move {
            gate.notified().await;
            futures::stream::iter(events.into_iter().map(Ok))
        })
        .flatten()
        .chain(futures::stream::pending());
        Ok(events.boxed())
    }
}

/// Counts notifications and wakes the bench when a target is reached.
struct Counter {
    seen: AtomicUsize,
    target: AtomicUsize,
    done: Notify,
}

impl Counter {
    fn bump(&self) {
        let seen = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if seen == self.target.load(Ordering::SeqCst) {
            self.done.notify_one();
        }
    }
}

fn informer(source: BenchSource) -> (SharedIndexInformer<Pod>, Arc<Counter>) {
    let informer = SharedIndexInformer::with_options(
        Arc::new(source),
        SharedInformerOptions {
            name: "v1/Pod".into(),
            ..SharedInformerOptions::default()
        },
    );
    let counter = Arc::new(Counter {
        seen: AtomicUsize::new(0),
        target: AtomicUsize::new(usize::MAX),
        done: Notify::new(),
    });
    let handler = ResourceEventHandlerFuncs::<Pod>::new()
        .add_func({
            let counter = counter.clone();
            move |obj, _| {
                black_box(&obj);
                counter.bump();
            }
        })
        .update_func({
            let counter = counter.clone();
            move |old, new| {
                black_box((&old, &new));
                counter.bump();
            }
        });
    informer.add_event_handler(handler).expect("handler");
    (informer, counter)
}

/// One timed run: sync on `PODS` pods, then time `UPDATES` watch updates end to end.
/// Returns the wall time and the process CPU time spent.
async fn watch_updates(list: Vec<Pod>, events: Vec<WatchEvent<Pod>>) -> (Duration, Duration) {
    let gate = Arc::new(Notify::new());
    let (informer, counter) = informer(BenchSource {
        list: Mutex::new(Some(list)),
        events: Mutex::new(Some(events)),
        gate: gate.clone(),
    });
    counter.target.store(PODS, Ordering::SeqCst);
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let informer = informer.clone();
        let cancel = cancel.clone();
        async move { informer.run(cancel).await }
    });
    counter.done.notified().await;
    counter.seen.store(0, Ordering::SeqCst);
    counter.target.store(UPDATES, Ordering::SeqCst);

    let cpu_start = process_cpu_time().unwrap_or_default();
    let start = Instant::now();
    gate.notify_one();
    counter.done.notified().await;
    let elapsed = start.elapsed();
    let cpu = process_cpu_time()
        .unwrap_or_default()
        .saturating_sub(cpu_start);

    assert_eq!(informer.indexer().len(), PODS);
    cancel.cancel();
    task.await.expect("informer task");
    (elapsed, cpu)
}

fn updates_for(pods: &[Pod]) -> Vec<WatchEvent<Pod>> {
    (0..UPDATES)
        .map(|i| {
            let mut p = pods[i % PODS].clone();
            p.metadata.resource_version = Some((i + 2).to_string());
            WatchEvent::Modified(p)
        })
        .collect()
}

/// CPU time used by the whole process so far (all threads; Linux `/proc/self/stat`, in
/// USER_HZ = 100 ticks per second), or `None`.
fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesized command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// Resident set size in bytes (Linux), or `None`.
fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Which memory measurement a child process runs (see [`memory_per_cached_pod`]).
const MEMORY_ENV: &str = "KCM_INFORMER_BENCH_MEMORY";

/// In a child process: grows the heap by `MEMORY_PODS` pods, either listed into an
/// informer's cache (`informer`) or just held in a `Vec` (`vec`), and prints the RSS growth.
fn memory_child(rt: &Runtime, what: &str) {
    let before = rss_bytes().unwrap_or(0);
    let after = match what {
        "vec" => {
            let plain: Vec<Pod> = (0..MEMORY_PODS).map(|i| pod(i, 1)).collect();
            let after = rss_bytes().unwrap_or(0);
            black_box(&plain);
            after
        }
        _ => rt.block_on(async {
            let list: Vec<Pod> = (0..MEMORY_PODS).map(|i| pod(i, 1)).collect();
            let (informer, counter) = informer(BenchSource {
                list: Mutex::new(Some(list)),
                events: Mutex::new(None),
                gate: Arc::new(Notify::new()),
            });
            counter.target.store(MEMORY_PODS, Ordering::SeqCst);
            let cancel = CancellationToken::new();
            let task = tokio::spawn({
                let informer = informer.clone();
                let cancel = cancel.clone();
                async move { informer.run(cancel).await }
            });
            counter.done.notified().await;
            let after = rss_bytes().unwrap_or(0);
            assert_eq!(informer.indexer().len(), MEMORY_PODS);
            cancel.cancel();
            task.await.expect("informer task");
            after
        }),
    };
    println!("{}", after.saturating_sub(before));
}

/// Measures each case in a fresh child process, so one case's freed-but-kept heap does not
/// hide the other's growth.
fn memory_per_cached_pod() {
    if rss_bytes().is_none() {
        println!("memory per cached pod: n/a (no /proc/self/status)");
        return;
    }
    let measure = |what: &str| -> Option<f64> {
        let exe = std::env::current_exe().ok()?;
        let out = std::process::Command::new(exe)
            .env(MEMORY_ENV, what)
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let bytes: f64 = text.lines().last()?.trim().parse().ok()?;
        Some(bytes / MEMORY_PODS as f64)
    };
    match (measure("informer"), measure("vec")) {
        (Some(cached), Some(plain)) => println!(
            "memory per cached pod ({MEMORY_PODS} pods, RSS growth): informer cache {cached:.0} B/pod; \
             the same pods in a plain Vec<Pod> {plain:.0} B/pod"
        ),
        _ => println!("memory per cached pod: measurement failed"),
    }
}

fn informer_benches(c: &mut Criterion) {
    let rt = runtime();
    if let Ok(what) = std::env::var(MEMORY_ENV) {
        memory_child(&rt, &what);
        std::process::exit(0);
    }
    if std::env::var_os("KCM_INFORMER_BENCH_SKIP_MEMORY").is_none() {
        memory_per_cached_pod();
    }

    let mut group = c.benchmark_group("informer");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(UPDATES as u64));
    for (name, make) in [
        (
            "watch_updates/100k_pod_updates_10k_pods",
            pod as fn(usize, u64) -> Pod,
        ),
        (
            "watch_updates/100k_minimal_pod_updates_10k_pods",
            minimal_pod,
        ),
    ] {
        let pods: Vec<Pod> = (0..PODS).map(|i| make(i, 1)).collect();
        let cpu = Mutex::new((Duration::ZERO, 0u64));
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let list = pods.clone();
                    let events = updates_for(&pods);
                    let (wall, used) = rt.block_on(watch_updates(list, events));
                    total += wall;
                    let mut cpu = cpu.lock().expect("lock");
                    cpu.0 += used;
                    cpu.1 += 1;
                }
                total
            });
        });
        let (used, runs) = *cpu.lock().expect("lock");
        if runs > 0 {
            let per_event = used.as_secs_f64() / (runs as f64 * UPDATES as f64);
            println!(
                "{name}: process CPU time {:.2} µs/event ({:.0} events per CPU-second), mean of {runs} runs",
                per_event * 1e6,
                1.0 / per_event
            );
        }
    }
    group.finish();
}

criterion_group!(benches, informer_benches);
criterion_main!(benches);
