//! Custom resources against pods: listing 10,000 over HTTP (JSON), watch fan-out, and the memory an informer cache spends per object, dynamic (`DynamicObject`) against typed.
//!
//! Run with `cargo bench -p kcm-machinery --bench custom_resources`.
//!
//! - `list/10k_{foos,pods}_json`: one unpaginated `GET` of 10,000 objects from the embedded
//!   API server (in memory) over HTTPS, the body read as text (the server's encoding and the
//!   transfer; no client decoding).
//! - `watch_fanout/{foos,pods}_20_watchers`: 20 watches open, 100 objects created one after
//!   the other; timed from the first create until every watcher has seen all 100 `ADDED`
//!   events (so the create latency is part of it).
//! - Memory per cached object is printed before the timed runs: the resident-set growth of a
//!   fresh child process while 100,000 objects decoded from the API's JSON are added to an
//!   informer's cache, as a typed struct (`custom_resource!` `Foo`, `Pod`) and as a
//!   `DynamicObject`. RSS, not a counting allocator (the workspace forbids `unsafe`), so each
//!   number is an upper bound including allocator overhead.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_apiserver::testing::TestServer;
use kcm_machinery::informer::SharedInformerFactory;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams, WatchEvent, WatchParams};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

const LIST_OBJECTS: usize = 10_000;
const WATCHERS: usize = 20;
const WATCH_CREATES: usize = 100;
const MEMORY_OBJECTS: usize = 100_000;
const NAMESPACE: &str = "bench";
const MEMORY_ENV: &str = "KCM_CR_BENCH_MEMORY";

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct Foo {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: FooSpec,
    #[serde(default)]
    status: Option<FooStatus>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct FooSpec {
    #[serde(default)]
    deployment_name: String,
    #[serde(default)]
    replicas: Option<i32>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct FooStatus {
    #[serde(default)]
    available_replicas: i32,
}

kcm_machinery::custom_resource!(Foo {
    group: "samplecontroller.k8s.io",
    version: "v1alpha1",
    kind: "Foo",
    plural: "foos",
    namespaced,
});

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn foo_resource() -> ApiResource {
    ApiResource::erase::<Foo>(&())
}

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": "foos.samplecontroller.k8s.io",
            "annotations": {"api-approved.kubernetes.io": "unapproved, benchmark"}},
        "spec": {"group": "samplecontroller.k8s.io", "scope": "Namespaced",
            "names": {"plural": "foos", "kind": "Foo"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "deploymentName": {"type": "string"},
                        "replicas": {"type": "integer", "minimum": 1, "maximum": 10}}},
                    "status": {"type": "object", "properties": {
                        "availableReplicas": {"type": "integer"}}}}}}}]}
    }))
    .expect("crd")
}

/// A Foo as the sample-controller's users write it.
fn foo_body(name: &str) -> Value {
    json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": name, "labels": {"app": "web", "tier": "frontend"}},
        "spec": {"deploymentName": name, "replicas": 3}})
}

/// A pod as a ReplicaSet creates it (one container with requests and a port).
fn pod_body(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web", "tier": "frontend"}},
        "spec": {"containers": [{"name": "web", "image": "registry.example/web:1.2.3",
            "ports": [{"containerPort": 8080}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}})
}

/// The embedded API server with the Foo CRD Established and the `bench` namespace.
async fn server() -> TestServer {
    let server = TestServer::start().await;
    let client = server.client();
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("ns"),
        )
        .await
        .expect("create namespace");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd())
        .await
        .expect("create crd");
    let foos = foos_api(&client);
    let deadline = Instant::now() + Duration::from_secs(30);
    while foos.list(&Default::default()).await.is_err() {
        assert!(Instant::now() < deadline, "the Foo CRD was never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server
}

fn foos_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NAMESPACE, &foo_resource())
}

fn pods_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NAMESPACE, &ApiResource::erase::<Pod>(&()))
}

/// Creates `names` through `api`, 16 at a time.
async fn create_all(api: &Api<DynamicObject>, bodies: Vec<Value>) {
    futures::stream::iter(bodies)
        .map(|body| async move {
            let obj: DynamicObject = serde_json::from_value(body).expect("object");
            api.create(&PostParams::default(), &obj).await.map(drop)
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .expect("create");
}

async fn get_text(client: &kube::Client, path: &str) -> String {
    let request = http::Request::get(path).body(Vec::new()).expect("request");
    client.request_text(request).await.expect("list")
}

/// One fan-out run: `WATCHERS` watches from the current resourceVersion, then
/// `WATCH_CREATES` sequential creates of `make(prefix-i)`; returns the time until every
/// watcher has seen every `ADDED`.
async fn fanout(api: &Api<DynamicObject>, prefix: &str, make: fn(&str) -> Value) -> Duration {
    let rv = api
        .list_metadata(&Default::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let stream = api
            .watch(&WatchParams::default().timeout(290), &rv)
            .await
            .expect("watch")
            .boxed();
        watchers.push(tokio::spawn(async move {
            let mut stream = stream;
            let mut added = 0;
            while added < WATCH_CREATES {
                match stream.next().await {
                    Some(Ok(WatchEvent::Added(obj))) => {
                        black_box(&obj);
                        added += 1;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => panic!("watch: {e}"),
                    None => panic!("watch ended after {added} events"),
                }
            }
        }));
    }
    let started = Instant::now();
    for i in 0..WATCH_CREATES {
        let obj: DynamicObject =
            serde_json::from_value(make(&format!("{prefix}-{i}"))).expect("object");
        api.create(&PostParams::default(), &obj)
            .await
            .expect("create");
    }
    for watcher in watchers {
        watcher.await.expect("watcher");
    }
    started.elapsed()
}

fn http_benches(c: &mut Criterion, rt: &Runtime) {
    let server = rt.block_on(server());
    let client = server.client();
    rt.block_on(async {
        let foos = (0..LIST_OBJECTS).map(|i| foo_body(&format!("foo-{i:05}")));
        create_all(&foos_api(&client), foos.collect()).await;
        let pods = (0..LIST_OBJECTS).map(|i| pod_body(&format!("pod-{i:05}")));
        create_all(&pods_api(&client), pods.collect()).await;
    });

    let mut group = c.benchmark_group("list");
    group.sample_size(10);
    group.throughput(Throughput::Elements(LIST_OBJECTS as u64));
    for (name, path) in [
        (
            "10k_foos_json",
            "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/bench/foos",
        ),
        ("10k_pods_json", "/api/v1/namespaces/bench/pods"),
    ] {
        let bytes = rt.block_on(get_text(&client, path)).len();
        println!("list/{name}: {bytes} bytes");
        group.bench_function(name, |b| {
            b.iter(|| rt.block_on(async { black_box(get_text(&client, path).await.len()) }));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("watch_fanout");
    group.sample_size(10);
    group.throughput(Throughput::Elements((WATCHERS * WATCH_CREATES) as u64));
    let mut run = 0usize;
    for (name, api, make) in [
        (
            "foos_20_watchers",
            foos_api(&client),
            foo_body as fn(&str) -> Value,
        ),
        ("pods_20_watchers", pods_api(&client), pod_body),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    run += 1;
                    total += rt.block_on(fanout(&api, &format!("w{run}"), make));
                }
                total
            });
        });
    }
    group.finish();
    rt.block_on(server.shutdown());
}

/// Resident set size in bytes (Linux), or `None`.
fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The JSON the API server returns for object `i` (what an informer decodes).
fn served(kind: &str, i: usize) -> Value {
    let name = format!("web-{i:06}");
    let mut obj = if kind.starts_with("foo") {
        foo_body(&name)
    } else {
        pod_body(&name)
    };
    let meta = &mut obj["metadata"];
    meta["namespace"] = json!(format!("team-{}", i % 20));
    meta["uid"] = json!(format!("6f1c2a4e-0000-4000-8000-{i:012}"));
    meta["resourceVersion"] = json!((i + 1).to_string());
    meta["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    if kind.starts_with("foo") {
        meta["generation"] = json!(1);
        obj["status"] = json!({"availableReplicas": 3});
    } else {
        obj["spec"]["nodeName"] = json!(format!("node-{}", i % 100));
        obj["status"] = json!({"phase": "Running", "podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}]});
    }
    obj
}

/// In a child process: adds `MEMORY_OBJECTS` decoded objects to an informer's cache and
/// prints the RSS growth.
fn memory_child(rt: &Runtime, what: &str) {
    let _guard = rt.enter();
    // Never started: only the cache is used, so the client never connects.
    let client = kube::Client::try_from(kube::Config::new(
        "http://127.0.0.1:9".parse().expect("url"),
    ))
    .expect("client");
    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let before = rss_bytes().unwrap_or(0);
    match what {
        "foo_typed" | "pod_typed" => {
            if what == "foo_typed" {
                let informer = factory.informer_for::<Foo>();
                for i in 0..MEMORY_OBJECTS {
                    let obj: Foo = serde_json::from_value(served(what, i)).expect("foo");
                    informer.indexer().add(Arc::new(obj)).expect("add");
                }
                assert_eq!(informer.indexer().len(), MEMORY_OBJECTS);
            } else {
                let informer = factory.pods();
                for i in 0..MEMORY_OBJECTS {
                    let obj: Pod = serde_json::from_value(served(what, i)).expect("pod");
                    informer.indexer().add(Arc::new(obj)).expect("add");
                }
                assert_eq!(informer.indexer().len(), MEMORY_OBJECTS);
            }
        }
        _ => {
            let resource = if what == "foo_dynamic" {
                foo_resource()
            } else {
                ApiResource::erase::<Pod>(&())
            };
            let informer = factory.dynamic(resource);
            for i in 0..MEMORY_OBJECTS {
                let obj: DynamicObject = serde_json::from_value(served(what, i)).expect("obj");
                informer.indexer().add(Arc::new(obj)).expect("add");
            }
            assert_eq!(informer.indexer().len(), MEMORY_OBJECTS);
        }
    }
    let after = rss_bytes().unwrap_or(0);
    println!("{}", after.saturating_sub(before));
}

/// Each case in a fresh child process, so one case's freed-but-kept heap does not hide the
/// next one's growth.
fn memory_per_cached_object() {
    if rss_bytes().is_none() {
        println!("memory per cached object: n/a (no /proc/self/status)");
        return;
    }
    for what in ["foo_typed", "foo_dynamic", "pod_typed", "pod_dynamic"] {
        let measured = std::env::current_exe().ok().and_then(|exe| {
            let out = std::process::Command::new(exe)
                .env(MEMORY_ENV, what)
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout);
            text.lines().last()?.trim().parse::<f64>().ok()
        });
        match measured {
            Some(bytes) => println!(
                "memory per cached object ({what}, {MEMORY_OBJECTS} objects, RSS growth): {:.0} B",
                bytes / MEMORY_OBJECTS as f64
            ),
            None => println!("memory per cached object ({what}): measurement failed"),
        }
    }
}

fn custom_resource_benches(c: &mut Criterion) {
    let rt = runtime();
    if let Ok(what) = std::env::var(MEMORY_ENV) {
        memory_child(&rt, &what);
        std::process::exit(0);
    }
    memory_per_cached_object();
    http_benches(c, &rt);
}

criterion_group!(benches, custom_resource_benches);
criterion_main!(benches);
