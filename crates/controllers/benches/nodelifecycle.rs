//! One steady-state monitor pass of the node lifecycle controller (`monitorNodeHealth`, run
//! every `--node-monitor-period`): every node healthy, its Lease renewed, nothing to write —
//! the cost kcm pays every 5 s per cluster size.
//!
//! Run with `cargo bench -p kcm-controllers --bench nodelifecycle`.

use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kcm_controllers::nodelifecycle::{
    FakeLifecycleClient, NodeLifecycleController, NodeLifecycleOptions,
};
use kcm_machinery::events::{FakeRecorder, SystemClock};
use kcm_machinery::informer::{NeverListerWatcher, SharedIndexInformer};
use kcm_testing::{MetaBuilder, node_condition};

fn informer<K>() -> SharedIndexInformer<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + Send
        + Sync
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + 'static,
{
    SharedIndexInformer::new(NeverListerWatcher, Duration::ZERO)
}

fn node(i: usize, now: jiff::Timestamp) -> Node {
    let condition = |type_: &str, status: &str| {
        node_condition(type_, status)
            .heartbeat(now)
            .transitioned_at(now)
    };
    kcm_testing::node(&format!("node-{i}"))
        .uid(format!("uid-{i}"))
        .resource_version("1")
        .created_at(now)
        .labels(&[
            ("topology.kubernetes.io/region", "r"),
            ("topology.kubernetes.io/zone", &format!("z{}", i % 3)),
            ("kubernetes.io/os", "linux"),
            ("beta.kubernetes.io/os", "linux"),
        ])
        .condition(condition("Ready", "True"))
        .condition(condition("MemoryPressure", "False"))
        .condition(condition("DiskPressure", "False"))
        .condition(condition("PIDPressure", "False"))
        .build()
}

fn lease(i: usize, now: jiff::Timestamp) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(format!("node-{i}")),
            namespace: Some("kube-node-lease".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(format!("node-{i}")),
            renew_time: Some(MicroTime(now)),
            lease_duration_seconds: Some(40),
            ..LeaseSpec::default()
        }),
    }
}

fn controller(rt: &tokio::runtime::Runtime, nodes: usize) -> Arc<NodeLifecycleController> {
    rt.block_on(async {
        let now = jiff::Timestamp::now();
        let node_informer = informer::<Node>();
        let lease_informer = informer::<Lease>();
        for i in 0..nodes {
            node_informer
                .indexer()
                .add(Arc::new(node(i, now)))
                .expect("seed node");
            lease_informer
                .indexer()
                .add(Arc::new(lease(i, now)))
                .expect("seed lease");
        }
        let controller = NodeLifecycleController::with_informers(
            node_informer,
            informer::<Pod>(),
            lease_informer,
            informer::<DaemonSet>(),
            Arc::new(FakeLifecycleClient::new()),
            Arc::new(FakeRecorder::new()),
            Arc::new(SystemClock),
            NodeLifecycleOptions {
                // Nothing changes during the run: keep every node healthy however long it is.
                node_monitor_grace_period: Duration::from_secs(3600),
                ..NodeLifecycleOptions::default()
            },
        );
        // The first pass registers every node and zone; the measured ones are steady.
        controller.monitor_node_health().await;
        controller
    })
}

fn monitor_pass(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("nodelifecycle");
    for nodes in [100, 1000, 5000] {
        let controller = controller(&rt, nodes);
        group.bench_with_input(
            BenchmarkId::new("monitor_pass_healthy", nodes),
            &controller,
            |b, controller| b.to_async(&rt).iter(|| controller.monitor_node_health()),
        );
    }
    group.finish();
}

criterion_group!(benches, monitor_pass);
criterion_main!(benches);
