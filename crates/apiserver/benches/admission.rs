//! Pod create with the admission chain, at two levels: through the registry on the in-memory store (`pod_create`: no plugins, the chain equivalent to kcm's create path before the chain existed — NamespaceLifecycle, Priority, DefaultTolerationSeconds —, the default chain without ServiceAccount, kube-apiserver's default chain), and as a client sees it (`pod_create_http`: `POST /api/v1/namespaces/default/pods` over HTTPS to the API server as `kcm up` runs it — SQLite, TLS, the admin token, RBAC — with every admission plugin disabled and with the default chain; each request's latency is kept and its p50/p99 printed).
//!
//! Run: `cargo bench -p kcm-apiserver --bench admission`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kcm_apiserver::admission::plugins::{
    self, DEFAULT_TOLERATION_SECONDS, NAMESPACE_LIFECYCLE, PRIORITY,
};
use kcm_apiserver::admission::{AdmissionConfig, Chain};
use kcm_apiserver::registry::Registry;
use kcm_apiserver::registry::options::WriteOptions;
use kcm_apiserver::resources::core::SERVICEACCOUNTS;
use kcm_apiserver::resources::pod::PODS;
use kcm_apiserver::storage::MemoryStorage;
use kcm_apiserver::{RunningServer, Server, ServerConfig};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use tokio::runtime::Runtime;

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "web-", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}})
}

fn registry(rt: &Runtime, chain: Chain) -> Registry {
    let registry = Registry::new(Arc::new(MemoryStorage::new())).with_admission(chain);
    rt.block_on(async {
        registry
            .ensure_default_namespaces()
            .await
            .expect("namespaces");
        registry
            .ensure_bootstrap_objects()
            .await
            .expect("bootstrap");
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": "default"}});
        registry
            .create(
                &SERVICEACCOUNTS,
                "default",
                account,
                &WriteOptions::default(),
            )
            .await
            .expect("service account");
    });
    registry
}

fn pod_creates(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let legacy = [NAMESPACE_LIFECYCLE, PRIORITY, DEFAULT_TOLERATION_SECONDS]
        .iter()
        .filter_map(|n| plugins::build(n))
        .collect();
    let chains = [
        ("no_admission", Chain::new(Vec::new())),
        ("pre_chain_equivalent", Chain::new(legacy)),
        (
            "default_chain_without_service_account",
            Chain::from_config(&AdmissionConfig::default().disabling(&[plugins::SERVICE_ACCOUNT]))
                .expect("chain"),
        ),
        (
            "default_chain",
            Chain::from_config(&AdmissionConfig::default()).expect("default chain"),
        ),
    ];
    let mut group = c.benchmark_group("pod_create");
    let opts = WriteOptions::default();
    for (name, chain) in chains {
        // Each sample starts from a fresh registry (made, and given one pod so its one-off
        // work is done, outside the timing): the store does not grow across the whole run,
        // and a chain measured later does not inherit the heap an earlier one left behind
        // (with one registry per chain, the fourth chain ran ~40 % slower than alone).
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let registry = registry(&rt, chain.clone());
                rt.block_on(registry.create(&PODS, "default", pod(), &opts))
                    .expect("created");
                let start = Instant::now();
                for _ in 0..iters {
                    rt.block_on(registry.create(&PODS, "default", pod(), &opts))
                        .expect("created");
                }
                start.elapsed()
            })
        });
    }
    group.finish();
}

/// A started server per [`ServerConfig`] defaults (SQLite, TLS) with `admission`, its `default`
/// service account created, and a client; the data dir lives as long as the server.
async fn server(admission: AdmissionConfig) -> (RunningServer, kube::Client, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ServerConfig::new(dir.path());
    config.listen = "127.0.0.1:0".parse().expect("addr");
    config.admission = admission;
    let server = Server::start(config).await.expect("server starts");
    let client = server.client().expect("client");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let account =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).expect("service account");
    // The service account controller is not running beside a bare server; the default chain
    // needs the account (upstream waits for it, then refuses the pod).
    if let Err(err) = accounts.create(&PostParams::default(), &account).await {
        assert!(
            matches!(&err, kube::Error::Api(s) if s.code == 409),
            "{err}"
        );
    }
    (server, client, dir)
}

/// The `p` quantile of `samples` (sorted).
fn quantile(samples: &[Duration], p: f64) -> Duration {
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(index).copied().unwrap_or_default()
}

fn http_pod_creates(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let every = AdmissionConfig::default().enabled_names();
    let configs = [
        ("no_admission", AdmissionConfig::default().disabling(&every)),
        ("default_chain", AdmissionConfig::default()),
    ];
    let body: Pod = serde_json::from_value(pod()).expect("pod");
    let mut group = c.benchmark_group("pod_create_http");
    group.sample_size(10);
    for (name, admission) in configs {
        let (server, client, dir) = rt.block_on(server(admission));
        let pods: Api<Pod> = Api::namespaced(client, "default");
        let mut latencies = Vec::new();
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let sent = Instant::now();
                        pods.create(&PostParams::default(), &body)
                            .await
                            .expect("created");
                        latencies.push(sent.elapsed());
                    }
                    start.elapsed()
                })
            })
        });
        let n = latencies.len();
        latencies.sort_unstable();
        let p50 = quantile(&latencies, 0.5);
        let p99 = quantile(&latencies, 0.99);
        let micros = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "pod_create_http/{name}: p50 {:.0} µs, p99 {:.0} µs over {n} creates",
            micros(p50),
            micros(p99)
        );
        rt.block_on(server.shutdown());
        drop(dir);
    }
    group.finish();
}

criterion_group!(benches, pod_creates, http_pod_creates);
criterion_main!(benches);
