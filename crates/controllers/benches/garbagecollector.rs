//! The garbage collector's graph builder: applying informer events to the dependency graph.
//!
//! Run with `cargo bench -p kcm-controllers --bench garbagecollector`. The graph is 1 000
//! ReplicaSets of 20 pods each (21 000 objects), as a collector sees it after its initial
//! lists; pods arrive before their owners half of the time (virtual owners, then observed).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kcm_controllers::garbagecollector::graph::NodeMap;
use kcm_controllers::garbagecollector::graph_builder::{ChangeType, GraphEvent, apply_event};
use kcm_testing::{MetaBuilder, ObjectMetaBuilder, owner_ref};
use kube::core::TypeMeta;

const REPLICA_SETS: usize = 1_000;
const PODS_PER_RS: usize = 20;

/// Object `default/<name>` (UID `uid-<name>`) at resourceVersion 1.
fn meta(name: &str) -> ObjectMetaBuilder {
    kcm_testing::meta(name)
        .namespace("default")
        .uid(format!("uid-{name}"))
        .resource_version("1")
}

fn rs_event(i: usize, change: ChangeType) -> GraphEvent {
    let rs = ReplicaSet {
        metadata: meta(&format!("rs{i}")).build(),
        ..ReplicaSet::default()
    };
    GraphEvent::observed(
        change,
        Arc::new(rs),
        None,
        Arc::new(TypeMeta {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
        }),
    )
}

fn pod_event(rs: usize, i: usize) -> GraphEvent {
    let owner = owner_ref(
        "apps/v1",
        "ReplicaSet",
        &format!("rs{rs}"),
        &format!("uid-rs{rs}"),
    )
    .controller(true)
    .block_owner_deletion(true);
    let pod = Pod {
        metadata: meta(&format!("rs{rs}-{i}")).owner(owner).build(),
        ..Pod::default()
    };
    GraphEvent::observed(
        ChangeType::Add,
        Arc::new(pod),
        None,
        Arc::new(TypeMeta {
            api_version: "v1".into(),
            kind: "Pod".into(),
        }),
    )
}

/// The initial-list events: even ReplicaSets before their pods, odd ones after.
fn initial_events() -> Vec<GraphEvent> {
    let mut events = Vec::with_capacity(REPLICA_SETS * (PODS_PER_RS + 1));
    for rs in 0..REPLICA_SETS {
        if rs % 2 == 0 {
            events.push(rs_event(rs, ChangeType::Add));
        }
        for i in 0..PODS_PER_RS {
            events.push(pod_event(rs, i));
        }
        if rs % 2 == 1 {
            events.push(rs_event(rs, ChangeType::Add));
        }
    }
    events
}

fn build(events: &[GraphEvent]) -> NodeMap {
    let mut nodes = NodeMap::default();
    for e in events {
        black_box(apply_event(&mut nodes, e));
    }
    nodes
}

fn bench(c: &mut Criterion) {
    let events = initial_events();
    let mut group = c.benchmark_group("gc_graph");
    group.sample_size(20);
    group.bench_function("build_1000rs_x_20pods", |b| {
        b.iter(|| black_box(build(&events)))
    });
    let deletes: Vec<GraphEvent> = (0..REPLICA_SETS)
        .map(|i| rs_event(i, ChangeType::Delete))
        .collect();
    group.bench_function("delete_1000_owners_of_20_pods", |b| {
        b.iter_batched(
            || build(&events),
            |mut nodes| {
                for e in &deletes {
                    black_box(apply_event(&mut nodes, e));
                }
                nodes
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
