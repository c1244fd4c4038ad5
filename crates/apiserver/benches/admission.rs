//! Pod create through the registry (in-memory store) with the admission chain: no plugins, the chain equivalent to kcm's create path before the chain existed (NamespaceLifecycle, Priority, DefaultTolerationSeconds), and kube-apiserver's default chain (ServiceAccount included).
//!
//! Run: `cargo bench -p kcm-apiserver --bench admission`.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use kcm_apiserver::admission::plugins::{
    self, DEFAULT_TOLERATION_SECONDS, NAMESPACE_LIFECYCLE, PRIORITY,
};
use kcm_apiserver::admission::{AdmissionConfig, Chain};
use kcm_apiserver::registry::Registry;
use kcm_apiserver::registry::options::WriteOptions;
use kcm_apiserver::resources::core::SERVICEACCOUNTS;
use kcm_apiserver::resources::pod::PODS;
use kcm_apiserver::storage::MemoryStorage;
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
    for (name, chain) in chains {
        let registry = registry(&rt, chain);
        let opts = WriteOptions::default();
        group.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(registry.create(&PODS, "default", pod(), &opts))
                    .expect("created")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, pod_creates);
criterion_main!(benches);
