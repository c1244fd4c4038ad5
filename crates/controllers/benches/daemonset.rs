//! DaemonSet controller benchmarks: the steady-state sync over 100 nodes and the node-update handler, over in-memory caches.
//!
//! Run with `cargo bench -p kcm-controllers --bench daemonset`. Pod control, the DaemonSet
//! API and the revision API are the recording fakes, so these measure the controller's own
//! work: claiming pods and revisions, placement per node, the rolling-update pass, status.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcm_controllers::daemon::{
    DaemonSetsController, DaemonSetsControllerOptions, FakeDaemonSetClient,
};
use kcm_machinery::controller::FakePodControl;
use kcm_machinery::controller::history::FakeRevisionClient;
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::Indexer;
use kcm_testing::{
    MetaBuilder, PodSpecBuilder, container, controller_ref_of, daemon_set, node, node_condition,
};

const NODES: usize = 100;

fn ds(i: usize) -> DaemonSet {
    daemon_set(&format!("agent-{i}"))
        .namespace("default")
        .uid(format!("ds-{i}"))
        .generation(1)
        .template_generation(1)
        .selecting(&[("app", &format!("agent-{i}"))])
        .container(container("agent").image("pause"))
        .max_unavailable(IntOrString::Int(1))
        .build()
}

fn new_node(i: usize) -> Node {
    node(&format!("node-{i}"))
        .labels(&[("kubernetes.io/hostname", &format!("node-{i}"))])
        .default_spec()
        .condition(node_condition("Ready", "True"))
        .build()
}

struct Bench {
    controller: DaemonSetsController,
}

/// A controller with `NODES` nodes, one DaemonSet, and after a first pass its pods on every
/// node (ready, at the current revision).
fn steady(rt: &tokio::runtime::Runtime) -> Bench {
    rt.block_on(async {
        let (ds_cache, history, pods, nodes) = (
            Indexer::new(),
            Indexer::new(),
            Indexer::new(),
            Indexer::new(),
        );
        let revisions = Arc::new(FakeRevisionClient::with_cache(history.clone()));
        let ds_client = Arc::new(FakeDaemonSetClient::new());
        let controller = DaemonSetsController::with_caches(
            ds_cache.clone(),
            history,
            pods.clone(),
            nodes.clone(),
            ds_client.clone(),
            revisions,
            Arc::new(FakePodControl::new()),
            Arc::new(FakeRecorder::new()),
            DaemonSetsControllerOptions::default(),
        );
        for i in 0..NODES {
            let _ = nodes.add(Arc::new(new_node(i)));
        }
        let d = ds(0);
        let _ = ds_cache.add(Arc::new(d.clone()));
        ds_client.insert(d.clone());
        let _ = controller.sync("default/agent-0").await;
        let template = d
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        let hash = kcm_machinery::controller::compute_hash(&template, None);
        for i in 0..NODES {
            let p: Pod = kcm_testing::pod(&format!("agent-0-{i}"))
                .namespace("default")
                .uid(format!("pod-{i}"))
                .labels(&[
                    ("app", "agent-0"),
                    ("controller-revision-hash", &hash),
                    ("pod-template-generation", "1"),
                ])
                .owner(controller_ref_of(&d))
                .node(format!("node-{i}"))
                .phase("Running")
                .ready()
                .build();
            let _ = pods.add(Arc::new(p));
        }
        controller
            .expectations()
            .delete_expectations("default/agent-0");
        let _ = controller.sync("default/agent-0").await;
        Bench { controller }
    })
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("runtime: {e}"));
    let b = steady(&rt);
    c.bench_function("daemonset_sync_steady_state_100_nodes", |bencher| {
        bencher.iter(|| {
            rt.block_on(async { black_box(b.controller.sync("default/agent-0").await.is_ok()) })
        });
    });

    let handlers = b.controller.event_handlers().clone();
    let old = new_node(7);
    let mut relabelled = old.clone();
    relabelled
        .metadata
        .labels
        .get_or_insert_default()
        .insert("role".into(), "edge".into());
    let mut heartbeat = old.clone();
    heartbeat.metadata.resource_version = Some("2".into());
    c.bench_function("daemonset_update_node_heartbeat", |bencher| {
        bencher.iter(|| handlers.update_node(black_box(&old), black_box(&heartbeat)));
    });
    c.bench_function("daemonset_update_node_relabel", |bencher| {
        bencher.iter(|| handlers.update_node(black_box(&old), black_box(&relabelled)));
    });
}

criterion_group!(daemonset, benches);
criterion_main!(daemonset);
