//! Scheduling decisions over large snapshots, and a whole simulated cluster end to end.
//!
//! Run with `cargo bench -p kcm-sim --bench sim`.
//! - `select/<nodes>`: one scheduling decision (filters + scores over the rotating share of
//!   nodes upstream's `percentageOfNodesToScore` picks) with 20 pods already on each node.
//! - `cluster/<nodes>x<pods>`: an in-memory cluster with the real informers, queues,
//!   scheduler and simulator: register the nodes, create the pods, and wait until every
//!   pod is Running (pod-ready delay 0). Each iteration builds everything afresh on a
//!   multi-threaded Tokio runtime.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::events::FakeRecorder;
use kcm_sim::fake::{FakeCluster, spawn_informer};
use kcm_sim::node::{NodeTemplate, build_node};
use kcm_sim::scheduler::cache::SchedulerCache;
use kcm_sim::{Scheduler, SchedulerConfig, Simulator, SimulatorConfig};
use kcm_testing::{MetaBuilder, OwnerRefBuilder, PodSpecBuilder, container};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn pod(name: &str, owner: &str, node: Option<&str>) -> Pod {
    let pod = kcm_testing::pod(name)
        .namespace("default")
        .uid(format!("uid-{name}"))
        .owner(OwnerRefBuilder::default().uid(owner).controller(true))
        .container(
            container("app")
                .image("nginx")
                .request("cpu", "100m")
                .request("memory", "128Mi"),
        );
    match node {
        Some(node) => pod.node(node).build(),
        None => pod.build(),
    }
}

fn select(c: &mut Criterion) {
    let mut group = c.benchmark_group("select");
    let template = NodeTemplate::default();
    for nodes in [100usize, 1000, 5000] {
        let mut cache = SchedulerCache::new();
        for i in 0..nodes {
            let node = build_node(i, &template, jiff::Timestamp::UNIX_EPOCH);
            cache.set_node(Arc::new(node));
            for j in 0..20 {
                let name = format!("p-{i}-{j}");
                let node_name = template.node_name(i);
                cache.update_pod(
                    &format!("default/{name}"),
                    &pod(&name, &format!("rs-{}", j % 5), Some(&node_name)),
                );
            }
        }
        let incoming = pod("incoming", "rs-1", None);
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::from_parameter(nodes), &nodes, |b, _| {
            b.iter(|| black_box(cache.select(&incoming)).is_ok())
        });
    }
    group.finish();
}

/// Registers `nodes` simulated nodes, creates `pods` pods, and returns once all run.
async fn whole_cluster(nodes: usize, pods: usize) {
    let fake = FakeCluster::with_clock(Arc::new(kcm_machinery::events::SystemClock));
    let cancel = CancellationToken::new();
    let pod_informer = fake.pod_informer();
    let node_informer = fake.node_informer();
    let scheduler = Scheduler::with_client(
        Arc::new(fake.clone()),
        pod_informer.clone(),
        node_informer.clone(),
        Arc::new(FakeRecorder::new()),
        SchedulerConfig::default(),
        fake.clock(),
    )
    .expect("scheduler");
    let simulator = Simulator::with_client(
        Arc::new(fake.clone()),
        pod_informer.clone(),
        node_informer.clone(),
        &|_| Arc::new(FakeRecorder::new()),
        SimulatorConfig {
            nodes,
            pod_ready_delay: Duration::ZERO,
            ..SimulatorConfig::default()
        },
        fake.clock(),
    )
    .expect("simulator");
    spawn_informer(pod_informer, cancel.clone());
    spawn_informer(node_informer, cancel.clone());
    let s = tokio::spawn({
        let cancel = cancel.clone();
        async move { scheduler.run(cancel).await }
    });
    let m = tokio::spawn({
        let cancel = cancel.clone();
        async move { simulator.run(cancel).await }
    });
    for i in 0..pods {
        fake.create_pod(pod(&format!("web-{i}"), &format!("rs-{}", i % 10), None));
    }
    let running = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    while fake.count_pods(running) < pods {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cancel.cancel();
    let _ = tokio::join!(s, m);
}

fn cluster(c: &mut Criterion) {
    let mut group = c.benchmark_group("cluster");
    group.sample_size(10);
    let rt = runtime();
    for (nodes, pods) in [(100usize, 1000usize), (1000, 5000)] {
        group.throughput(Throughput::Elements(pods as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{nodes}x{pods}")),
            &(nodes, pods),
            |b, &(nodes, pods)| b.to_async(&rt).iter(|| whole_cluster(nodes, pods)),
        );
    }
    group.finish();
}

criterion_group!(benches, select, cluster);
criterion_main!(benches);
