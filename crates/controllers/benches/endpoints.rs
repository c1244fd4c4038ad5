//! Endpoint controller benchmarks: the EndpointSlice and Endpoints syncs of a Service over in-memory caches, and the pod handler's Service lookup.
//!
//! Run with `cargo bench -p kcm-controllers --bench endpoints`. Writes go to the recording
//! fakes, so these measure the controllers' own work: listing and matching pods, building and
//! comparing endpoints, packing slices.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kcm_controllers::endpoint::{
    EndpointController, EndpointControllerOptions, FakeEndpointsClient,
};
use kcm_controllers::endpointslice::{EndpointSliceController, EndpointSliceControllerOptions};
use kcm_controllers::endpointsliceutil::{
    FakeEndpointSliceClient, pod_update_projection_key, services_to_update,
};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::Indexer;
use kcm_machinery::informer::index::namespace_indexers;
use kcm_testing::{MetaBuilder, PodSpecBuilder, container, node, pod, service};

fn web_pod(i: usize, ready: bool) -> Pod {
    let p = pod(&format!("web-{i}"))
        .namespace("default")
        .uid(format!("uid-{i}"))
        .resource_version(format!("{}", if ready { 1 } else { 2 }))
        .labels(&[("app", "web")])
        .node(format!("node-{}", i % 50))
        .container(container("app").named_port("http", 8080, "TCP"))
        .phase("Running")
        .pod_ips(&[&format!(
            "10.{}.{}.{}",
            244 + i / 65_000,
            (i / 250) % 256,
            i % 250 + 2
        )]);
    if ready { p.ready().build() } else { p.build() }
}

fn web_service() -> Service {
    service("web")
        .namespace("default")
        .uid("svc-uid")
        .selector(&[("app", "web")])
        .cluster_ip("10.96.0.10")
        .ip_families(&["IPv4"])
        .named_port("http", 80, "http")
        .build()
}

struct SliceBench {
    controller: EndpointSliceController,
    client: Arc<FakeEndpointSliceClient>,
    pods: Indexer<Pod>,
    slices: Indexer<EndpointSlice>,
}

fn slice_bench(rt: &tokio::runtime::Runtime, pods: usize) -> SliceBench {
    let _guard = rt.enter();
    let pod_cache = Indexer::with_indexers(namespace_indexers());
    let services = Indexer::with_indexers(namespace_indexers());
    let nodes: Indexer<Node> = Indexer::new();
    let slices = Indexer::with_indexers(namespace_indexers());
    let client = Arc::new(FakeEndpointSliceClient::new());
    for n in 0..50 {
        nodes
            .add(
                node(&format!("node-{n}"))
                    .labels(&[("topology.kubernetes.io/zone", "zone-a")])
                    .arc(),
            )
            .expect("add");
    }
    services.add(Arc::new(web_service())).expect("add");
    for i in 0..pods {
        pod_cache.add(Arc::new(web_pod(i, true))).expect("add");
    }
    let controller = EndpointSliceController::with_caches(
        pod_cache.clone(),
        services,
        nodes,
        slices.clone(),
        client.clone(),
        Arc::new(FakeRecorder::new()),
        EndpointSliceControllerOptions::default(),
    );
    let b = SliceBench {
        controller,
        client,
        pods: pod_cache,
        slices,
    };
    rt.block_on(b.controller.sync("default/web"))
        .expect("first sync");
    b.observe();
    b
}

impl SliceBench {
    /// Delivers the fake server's slices to the cache, as the informer would.
    fn observe(&self) {
        self.slices
            .replace(self.client.slices().into_iter().map(Arc::new))
            .expect("replace");
        self.client.clear_actions();
    }
}

/// A steady Service: every pod already in a slice; the sync lists, builds and compares.
fn endpointslice_steady_state(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("endpointslice_sync_steady_state");
    for pods in [100usize, 1000, 5000] {
        let b = slice_bench(&rt, pods);
        group.bench_with_input(BenchmarkId::from_parameter(pods), &pods, |bencher, _| {
            bencher.to_async(&rt).iter(|| async {
                b.controller.sync("default/web").await.expect("sync");
            });
        });
        assert!(b.client.actions().is_empty(), "steady state writes nothing");
    }
    group.finish();
}

/// One pod of 1000 flips readiness: one slice update per sync.
fn endpointslice_one_pod_changed(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let b = slice_bench(&rt, 1000);
    let mut ready = true;
    c.bench_function("endpointslice_sync_one_pod_of_1000_changed", |bencher| {
        bencher.to_async(&rt).iter(|| {
            ready = !ready;
            b.pods
                .update(Arc::new(web_pod(437, ready)))
                .expect("update");
            async {
                b.controller.sync("default/web").await.expect("sync");
                b.observe();
            }
        });
    });
}

/// The Endpoints of a steady Service: list, build, repack, compare.
fn endpoints_steady_state(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("endpoints_sync_steady_state");
    for pods in [100usize, 1000] {
        let _guard = rt.enter();
        let pod_cache = Indexer::with_indexers(namespace_indexers());
        let services = Indexer::with_indexers(namespace_indexers());
        let endpoints: Indexer<Endpoints> = Indexer::new();
        let client = Arc::new(FakeEndpointsClient::new());
        services.add(Arc::new(web_service())).expect("add");
        for i in 0..pods {
            pod_cache.add(Arc::new(web_pod(i, true))).expect("add");
        }
        let controller = EndpointController::with_caches(
            pod_cache,
            services,
            endpoints.clone(),
            client.clone(),
            Arc::new(FakeRecorder::new()),
            EndpointControllerOptions::default(),
        );
        rt.block_on(controller.sync("default/web"))
            .expect("first sync");
        endpoints
            .add(Arc::new(client.get("default", "web").expect("written")))
            .expect("add");
        group.bench_with_input(BenchmarkId::from_parameter(pods), &pods, |bencher, _| {
            bencher.to_async(&rt).iter(|| async {
                controller.sync("default/web").await.expect("sync");
            });
        });
        assert_eq!(client.actions().len(), 1, "only the first sync wrote");
    }
    group.finish();
}

/// A pod readiness change in a namespace of 1000 Services: every selector is matched, as
/// upstream's `GetServicesToUpdate`.
fn pod_event_service_lookup(c: &mut Criterion) {
    let services = Indexer::with_indexers(namespace_indexers());
    for i in 0..1000 {
        services
            .add(Arc::new(
                service(&format!("svc-{i}"))
                    .namespace("default")
                    .selector(&[("app", &format!("app-{i}"))])
                    .build(),
            ))
            .expect("add");
    }
    let old = pod("p")
        .namespace("default")
        .resource_version("1")
        .labels(&[("app", "app-7")])
        .pod_ips(&["10.0.0.1"])
        .build();
    let new = pod("p")
        .namespace("default")
        .resource_version("2")
        .labels(&[("app", "app-7")])
        .pod_ips(&["10.0.0.1"])
        .ready()
        .build();
    c.bench_function("pod_update_service_lookup_1000_services", |bencher| {
        bencher.iter(|| {
            let key = pod_update_projection_key(Some(&old), Some(&new)).expect("changed");
            black_box(services_to_update(&services, &key))
        });
    });
}

criterion_group!(
    benches,
    endpointslice_steady_state,
    endpointslice_one_pod_changed,
    endpoints_steady_state,
    pod_event_service_lookup
);
criterion_main!(benches);
