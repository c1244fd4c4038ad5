//! Pod create with the admission chain, at two levels: through the registry on the in-memory store (`pod_create`: no plugins, the chain equivalent to kcm's create path before the chain existed — NamespaceLifecycle, Priority, DefaultTolerationSeconds —, the default chain without ServiceAccount, kube-apiserver's default chain), and as a client sees it (`pod_create_http`: `POST /api/v1/namespaces/default/pods` over HTTPS to two API servers as `kcm up` runs them — SQLite, TLS, the admin token, RBAC —, one with every admission plugin disabled and one with the default chain, measured in alternating rounds, plus the admitted pod's shape sent to the first to tell the plugins' cost from the bigger pod's; each request's latency is kept and the p50/p99 and the share added to the p50 printed).
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

/// The median of `samples` (sorted in place).
fn p50(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    quantile(samples, 0.5)
}

/// How many rounds `pod_create_http` runs, and how many creates per config in each.
const HTTP_ROUNDS: usize = 20;
const HTTP_CREATES_PER_ROUND: usize = 250;

/// Whether the command line's filter (if any) selects `name`, as criterion's own filter.
fn selected(name: &str) -> bool {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        // Flags, and the numbers some of them take (`--measurement-time 3`), are not filters.
        .filter(|a| !a.starts_with('-') && a.parse::<f64>().is_err())
        .collect();
    filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
}

/// A lane of `pod_create_http`: which server a round's creates go to, and which body.
struct Lane {
    name: &'static str,
    server: usize,
    body: Pod,
}

/// `pod` as the default chain returned it, without the fields a server owns (name, uid,
/// resourceVersion, timestamps, status): the admitted shape — token volume and mounts,
/// tolerations, priority — sent as the request body.
fn admitted_shape(mut pod: Pod) -> Pod {
    let meta = &mut pod.metadata;
    meta.name = None;
    meta.uid = None;
    meta.resource_version = None;
    meta.creation_timestamp = None;
    meta.managed_fields = None;
    pod.status = None;
    pod
}

/// Pod creates as a client sees them, the lanes measured in alternation: each round sends
/// [`HTTP_CREATES_PER_ROUND`] creates down every lane in turn (which goes first rotates), so
/// drift on the machine (other load, page cache, the store growing) falls on all alike. The
/// lanes: the test pod to a server with every plugin disabled, to a server with the default
/// chain, and — to tell the plugins' own cost from the admitted pod's size — the admitted
/// shape of the pod to the server without plugins. Prints each lane's p50/p99 over every
/// create, and the per-round ratio of the p50s to the first lane's (median and range): one
/// run of the configs in sequence varied by ±8 % on this two-core machine, more than the
/// difference measured.
fn http_pod_creates(_: &mut Criterion) {
    if !selected("pod_create_http") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let every = AdmissionConfig::default().enabled_names();
    let configs = [
        AdmissionConfig::default().disabling(&every),
        AdmissionConfig::default(),
    ];
    let body: Pod = serde_json::from_value(pod()).expect("pod");
    let mut servers = Vec::new();
    for admission in configs {
        let (server, client, dir) = rt.block_on(server(admission));
        servers.push((server, Api::<Pod>::namespaced(client, "default"), dir));
    }
    let admitted = rt
        .block_on(servers[1].1.create(&PostParams::default(), &body))
        .expect("created through the chain");
    let lanes = [
        Lane {
            name: "no_admission",
            server: 0,
            body: body.clone(),
        },
        Lane {
            name: "default_chain",
            server: 1,
            body,
        },
        Lane {
            name: "no_admission_admitted_pod",
            server: 0,
            body: admitted_shape(admitted),
        },
    ];
    let round = |lane: &Lane, creates: usize| -> Vec<Duration> {
        rt.block_on(async {
            let pods = &servers[lane.server].1;
            let mut latencies = Vec::with_capacity(creates);
            for _ in 0..creates {
                let sent = Instant::now();
                pods.create(&PostParams::default(), &lane.body)
                    .await
                    .expect("created");
                latencies.push(sent.elapsed());
            }
            latencies
        })
    };
    for lane in &lanes {
        round(lane, HTTP_CREATES_PER_ROUND); // warm-up: connections, caches, first pages
    }
    let mut all: [Vec<Duration>; 3] = Default::default();
    let mut ratios: [Vec<f64>; 3] = Default::default();
    for r in 0..HTTP_ROUNDS {
        let mut p50s = [Duration::ZERO; 3];
        for k in 0..lanes.len() {
            let i = (r + k) % lanes.len();
            let mut latencies = round(&lanes[i], HTTP_CREATES_PER_ROUND);
            p50s[i] = p50(&mut latencies);
            all[i].extend(latencies);
        }
        for i in 1..lanes.len() {
            ratios[i].push(p50s[i].as_secs_f64() / p50s[0].as_secs_f64());
        }
    }
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    let pct = |r: f64| (r - 1.0) * 100.0;
    let mut overall = [Duration::ZERO; 3];
    for (i, lane) in lanes.iter().enumerate() {
        overall[i] = p50(&mut all[i]);
        print!(
            "pod_create_http/{}: p50 {:.0} µs, p99 {:.0} µs over {} creates",
            lane.name,
            micros(overall[i]),
            micros(quantile(&all[i], 0.99)),
            all[i].len()
        );
        if i == 0 {
            println!();
            continue;
        }
        let per_round = &mut ratios[i];
        per_round.sort_by(f64::total_cmp);
        println!(
            "; {:+.1} % to the p50 of {} (all creates); per round (of {HTTP_ROUNDS}) median \
             {:+.1} %, min {:+.1} %, max {:+.1} %",
            pct(overall[i].as_secs_f64() / overall[0].as_secs_f64()),
            lanes[0].name,
            pct(per_round[per_round.len() / 2]),
            pct(per_round[0]),
            pct(per_round[per_round.len() - 1])
        );
    }
    for (server, _, dir) in servers {
        rt.block_on(server.shutdown());
        drop(dir);
    }
}

criterion_group!(benches, pod_creates, http_pod_creates);
criterion_main!(benches);
