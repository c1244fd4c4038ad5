//! StatefulSet controller benchmarks: the steady-state sync of a 100-replica set over in-memory caches.
//!
//! Run with `cargo bench -p kcm-controllers --bench statefulset`. The object manager, the set
//! API and the revision API are the fakes writing into the caches, so this measures the
//! controller's own work: claiming pods, revisions, the per-replica checks and the status.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::PodCondition;
use kcm_controllers::statefulset::{
    FakeObjectManager, FakeStatefulSetClient, StatefulSetCaches, StatefulSetController,
    StatefulSetControllerOptions,
};
use kcm_machinery::controller::FakePodControl;
use kcm_machinery::controller::history::FakeRevisionClient;
use kcm_machinery::events::FakeRecorder;
use kcm_testing::{MetaBuilder, WorkloadBuilder, container, pvc, stateful_set};

const REPLICAS: i32 = 100;

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("runtime: {e}"));
    let caches = StatefulSetCaches::default();
    let controller = rt.block_on(async {
        let set_client = Arc::new(FakeStatefulSetClient::with_cache(caches.sets.clone()));
        let controller = StatefulSetController::with_caches(
            caches.clone(),
            set_client.clone(),
            Arc::new(FakeObjectManager::new(
                caches.pods.clone(),
                caches.claims.clone(),
            )),
            Arc::new(FakeRevisionClient::with_cache(caches.revisions.clone())),
            Arc::new(FakePodControl::new()),
            Arc::new(FakeRecorder::new()),
            Arc::new(jiff::Timestamp::now),
            StatefulSetControllerOptions::default(),
        );
        let set = stateful_set("web")
            .namespace("default")
            .uid("web")
            .generation(1)
            .replicas(REPLICAS)
            .selecting(&[("app", "web")])
            .container(container("nginx").image("nginx"))
            .service_name("nginx")
            .volume_claim_template(pvc("www").storage("1Gi"))
            .pod_management_policy("Parallel")
            .build();
        let _ = caches.sets.add(Arc::new(set.clone()));
        set_client.insert(set);
        let _ = controller.sync("default/web").await;
        // Every pod Running and Ready, as the kubelets would make them.
        for p in caches.pods.list() {
            let mut p = (*p).clone();
            let status = p.status.get_or_insert_default();
            status.phase = Some("Running".into());
            status.conditions = Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..PodCondition::default()
            }]);
            let _ = caches.pods.update(Arc::new(p));
        }
        let _ = controller.sync("default/web").await;
        controller
    });
    c.bench_function("statefulset_sync_steady_state_100_parallel", |bencher| {
        bencher.iter(|| {
            rt.block_on(async { black_box(controller.sync("default/web").await.is_ok()) })
        });
    });
}

criterion_group!(statefulset, benches);
criterion_main!(statefulset);
