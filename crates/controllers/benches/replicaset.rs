//! ReplicaSet controller benchmarks: the sync pass and the event handlers' lookups over in-memory caches.
//!
//! Run with `cargo bench -p kcm-controllers --bench replicaset`. Pod control and the
//! ReplicaSet API are the recording fakes, so these measure the controller's own work:
//! listing and claiming from the cache, ranking, expectations, status computation.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use kcm_controllers::replicaset::{
    FakeReplicaSetClient, ReplicaSetController, ReplicaSetControllerOptions,
};
use kcm_machinery::controller::FakePodControl;
use kcm_machinery::informer::Indexer;
use kcm_testing::{
    MetaBuilder, PodSpecBuilder, WorkloadBuilder, controller_ref_of, owner_ref, pod_template,
};

/// ReplicaSet `default/<name>` selecting `app=<name>`, owned by Deployment `owner`.
fn replica_set(name: &str, replicas: i32, owner: &str) -> ReplicaSet {
    kcm_testing::replica_set(name)
        .namespace("default")
        .uid(format!("rs-{name}"))
        .generation(1)
        .owner(
            owner_ref("apps/v1", "Deployment", owner, owner)
                .controller(true)
                .block_owner_deletion(true),
        )
        .replicas(replicas)
        .selecting(&[("app", name)])
        .template(pod_template().default_spec())
        .build()
}

/// A ready pod owned by `rs` on node `node`.
fn pod(rs: &ReplicaSet, i: usize, node: usize) -> Pod {
    let name = rs.metadata.name.clone().unwrap_or_default();
    kcm_testing::pod(&format!("{name}-{i}"))
        .namespace("default")
        .uid(format!("{name}-{i}"))
        .label("app", &name)
        .resource_version("1")
        .owner(controller_ref_of(rs))
        .node(format!("node-{node}"))
        .phase("Running")
        .ready()
        .build()
}

struct Bench {
    controller: ReplicaSetController,
    pod_control: Arc<FakePodControl>,
    rs_client: Arc<FakeReplicaSetClient>,
    rs_cache: Indexer<ReplicaSet>,
    pod_cache: Indexer<Pod>,
}

fn bench_controller(rt: &tokio::runtime::Runtime, burst: usize) -> Bench {
    let _guard = rt.enter();
    let rs_cache = Indexer::new();
    let pod_cache = Indexer::new();
    let pod_control = Arc::new(FakePodControl::new());
    let rs_client = Arc::new(FakeReplicaSetClient::new());
    let controller = ReplicaSetController::with_caches(
        rs_cache.clone(),
        pod_cache.clone(),
        rs_client.clone(),
        pod_control.clone(),
        ReplicaSetControllerOptions {
            burst_replicas: burst,
            metrics: None,
            controller_metrics: None,
            ..ReplicaSetControllerOptions::default()
        },
    );
    Bench {
        controller,
        pod_control,
        rs_client,
        rs_cache,
        pod_cache,
    }
}

/// A steady ReplicaSet: `pods` ready pods, status already written. The pass claims, counts
/// and compares; nothing is written.
fn sync_steady_state(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("replicaset_sync_steady_state");
    for pods in [10usize, 500, 5000] {
        let b = bench_controller(&rt, 500);
        let mut rs = replica_set("web", i32::try_from(pods).expect("small"), "deploy");
        rs.status = Some(ReplicaSetStatus {
            replicas: i32::try_from(pods).expect("small"),
            fully_labeled_replicas: Some(i32::try_from(pods).expect("small")),
            ready_replicas: Some(i32::try_from(pods).expect("small")),
            available_replicas: Some(i32::try_from(pods).expect("small")),
            observed_generation: Some(1),
            conditions: None,
            terminating_replicas: None,
        });
        b.rs_cache.add(Arc::new(rs.clone())).expect("add");
        for i in 0..pods {
            b.pod_cache.add(Arc::new(pod(&rs, i, i % 50))).expect("add");
        }
        group.bench_with_input(BenchmarkId::from_parameter(pods), &pods, |bencher, _| {
            bencher
                .to_async(&rt)
                .iter(|| async { b.controller.sync("default/web").await.expect("sync") });
        });
    }
    group.finish();
}

/// Scaling 1000 pods down to 500: ranking by co-location with a sibling ReplicaSet's pods,
/// 500 (fake) deletions, expectations by pod key.
fn sync_scale_down(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let b = bench_controller(&rt, 500);
    let rs = replica_set("web", 500, "deploy");
    let sibling = replica_set("web-old", 200, "deploy");
    b.rs_cache.add(Arc::new(rs.clone())).expect("add");
    b.rs_cache.add(Arc::new(sibling.clone())).expect("add");
    for i in 0..1000 {
        b.pod_cache.add(Arc::new(pod(&rs, i, i % 50))).expect("add");
    }
    for i in 0..200 {
        b.pod_cache
            .add(Arc::new(pod(&sibling, i, i % 7)))
            .expect("add");
    }
    c.bench_function("replicaset_sync_scale_down_1000_to_500", |bencher| {
        bencher.to_async(&rt).iter(|| async {
            // The fakes record every call: forget them so memory stays flat.
            b.pod_control.clear();
            b.rs_client.clear_actions();
            b.controller
                .expectations()
                .delete_expectations("default/web");
            b.controller.sync("default/web").await.expect("sync");
        });
    });
}

/// An orphan pod event in a namespace of 200 ReplicaSets: every selector is checked, as
/// upstream's `GetPodReplicaSets`; an owned pod resolves its owner directly.
fn pod_event_lookups(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let b = bench_controller(&rt, 500);
    for i in 0..200 {
        let rs = replica_set(&format!("rs-{i}"), 1, &format!("deploy-{i}"));
        b.rs_cache.add(Arc::new(rs)).expect("add");
    }
    let owner = replica_set("rs-100", 1, "deploy-100");
    let owned = pod(&owner, 0, 0);
    let mut orphan = owned.clone();
    orphan.metadata.owner_references = None;
    let handlers = b.controller.event_handlers();
    let queue = b.controller.queue().clone();
    let drain = || {
        rt.block_on(async {
            while !queue.is_empty() {
                if let Some(key) = queue.get().await {
                    queue.done(&key);
                }
            }
        });
    };
    c.bench_function("replicaset_get_pod_replica_sets_200_rs", |bencher| {
        bencher.iter(|| black_box(handlers.get_pod_replica_sets(black_box(&orphan))));
    });
    c.bench_function("replicaset_add_owned_pod_event", |bencher| {
        bencher.iter(|| handlers.add_pod(black_box(&owned)));
    });
    drain();
    c.bench_function(
        "replicaset_get_replica_sets_with_same_controller",
        |bencher| {
            bencher.iter(|| {
                black_box(
                    b.controller
                        .get_replica_sets_with_same_controller(black_box(&owner)),
                )
            });
        },
    );
}

criterion_group!(
    benches,
    sync_steady_state,
    sync_scale_down,
    pod_event_lookups
);
criterion_main!(benches);
