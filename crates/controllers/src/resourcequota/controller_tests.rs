//! Unit tests of the ResourceQuota controller: bare caches, a fake client and a fixed clock, as upstream's `resource_quota_controller_test.go`.

use k8s_openapi::api::core::v1::ResourceQuotaStatus;
use kcm_machinery::informer::index::namespace_indexers;
use serde_json::{Value, json};

use super::*;
use crate::resourcequota::client::FakeQuotaClient;

fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

fn quota(name: &str, spec: Value, status: Option<Value>) -> Arc<ResourceQuota> {
    let mut obj = json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"}, "spec": spec});
    if let Some(status) = status {
        obj["status"] = status;
    }
    Arc::new(serde_json::from_value(obj).expect("quota"))
}

fn pod(name: &str, namespace: &str, cpu: Option<&str>, phase: &str) -> Arc<Pod> {
    let resources = cpu.map_or(json!({}), |c| json!({"requests": {"cpu": c}}));
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "app", "resources": resources}]},
            "status": {"phase": phase}
        }))
        .expect("pod"),
    )
}

struct Fixture {
    controller: ResourceQuotaController,
    caches: QuotaCaches,
    client: Arc<FakeQuotaClient>,
}

fn fixture() -> Fixture {
    let caches = QuotaCaches {
        quotas: Indexer::with_indexers(namespace_indexers()),
        pods: Indexer::with_indexers(namespace_indexers()),
        services: Indexer::with_indexers(namespace_indexers()),
        pvcs: Indexer::with_indexers(namespace_indexers()),
    };
    let client = Arc::new(FakeQuotaClient::new());
    let controller = ResourceQuotaController::with_caches(
        caches.clone(),
        client.clone(),
        ResourceQuotaControllerOptions::default(),
    )
    .with_clock(Arc::new(now));
    Fixture {
        controller,
        caches,
        client,
    }
}

fn used(q: &ResourceQuota) -> Vec<(String, String)> {
    q.status
        .as_ref()
        .and_then(|s| s.used.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[tokio::test]
async fn sync_computes_hard_and_used_from_the_namespace() {
    let f = fixture();
    f.caches
        .quotas
        .add(quota(
            "q",
            json!({"hard": {"pods": "5", "requests.cpu": "2", "services": "2", "count/deployments.apps": "4", "count/pods": "9"}}),
            None,
        ))
        .expect("add");
    for p in [
        pod("a", "ns", Some("500m"), "Running"),
        pod("b", "ns", Some("250m"), "Pending"),
        pod("done", "ns", Some("1"), "Succeeded"),
        pod("elsewhere", "other", Some("1"), "Running"),
    ] {
        f.caches.pods.add(p).expect("add");
    }
    f.caches
        .services
        .add(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "s", "namespace": "ns"}}))
                .expect("svc"),
        ))
        .expect("add");
    f.client.set_count("ns", "apps", "deployments", 3);

    f.controller.sync("ns/q").await.expect("sync");
    let updates = f.client.updates();
    assert_eq!(updates.len(), 1);
    assert_eq!(
        used(&updates[0]),
        pairs(&[
            ("count/deployments.apps", "3"),
            ("count/pods", "3"),
            ("pods", "2"),
            ("requests.cpu", "750m"),
            ("services", "1"),
        ])
    );
    let status_hard = updates[0].status.as_ref().and_then(|s| s.hard.clone());
    assert_eq!(
        status_hard,
        updates[0].spec.as_ref().and_then(|s| s.hard.clone())
    );
}

#[tokio::test]
async fn sync_writes_nothing_when_the_status_is_current() {
    let f = fixture();
    f.caches
        .quotas
        .add(quota(
            "q",
            json!({"hard": {"pods": "5"}}),
            Some(json!({"hard": {"pods": "5"}, "used": {"pods": "1"}})),
        ))
        .expect("add");
    f.caches
        .pods
        .add(pod("a", "ns", None, "Running"))
        .expect("add");
    f.controller.sync("ns/q").await.expect("sync");
    assert!(f.client.updates().is_empty());

    // A deleted quota needs nothing.
    f.controller.sync("ns/gone").await.expect("sync");
    assert!(f.client.updates().is_empty());
}

#[tokio::test]
async fn scoped_quotas_measure_only_the_pods_they_select() {
    let f = fixture();
    f.caches
        .quotas
        .add(quota(
            "best",
            json!({"hard": {"pods": "5", "count/configmaps": "5"}, "scopes": ["BestEffort"]}),
            None,
        ))
        .expect("add");
    f.caches
        .pods
        .add(pod("be", "ns", None, "Running"))
        .expect("add");
    f.caches
        .pods
        .add(pod("burst", "ns", Some("1"), "Running"))
        .expect("add");
    f.client.set_count("ns", "", "configmaps", 7);
    f.controller.sync("ns/best").await.expect("sync");
    let updates = f.client.updates();
    assert_eq!(
        used(&updates[0]),
        pairs(&[("count/configmaps", "0"), ("pods", "1")]),
        "only pods have scopes"
    );
}

#[tokio::test]
async fn new_quotas_go_to_the_priority_queue() {
    let f = fixture();
    let handlers = f.controller.quota_handlers();
    let uncomputed = quota("new", json!({"hard": {"pods": "1"}}), None);
    handlers.on_add(Arc::clone(&uncomputed), true);
    assert_eq!(f.controller.missing_usage_queue().len(), 1);
    assert_eq!(f.controller.queue().len(), 0);

    let missing_usage = quota(
        "partial",
        json!({"hard": {"pods": "1", "services": "1"}}),
        Some(json!({"hard": {"pods": "1", "services": "1"}, "used": {"pods": "0"}})),
    );
    handlers.on_add(missing_usage, true);
    assert_eq!(f.controller.missing_usage_queue().len(), 2);

    let computed = quota(
        "done",
        json!({"hard": {"pods": "1"}}),
        Some(json!({"hard": {"pods": "1"}, "used": {"pods": "0"}})),
    );
    handlers.on_add(Arc::clone(&computed), true);
    assert_eq!(f.controller.queue().len(), 1);

    // A status write or resync is not a spec change.
    let mut restated = (*computed).clone();
    restated.status = Some(ResourceQuotaStatus::default());
    handlers.on_update(Arc::clone(&computed), Arc::new(restated));
    assert_eq!(f.controller.queue().len(), 1);
    assert_eq!(f.controller.missing_usage_queue().len(), 2);
}

#[tokio::test]
async fn deleted_and_finished_pods_replenish_their_namespaces_quotas() {
    let f = fixture();
    let computed = |name: &str, hard: Value| {
        quota(
            name,
            json!({"hard": hard.clone()}),
            Some(json!({"hard": hard, "used": {}})),
        )
    };
    f.caches
        .quotas
        .add(computed("pods", json!({"pods": "5"})))
        .expect("add");
    f.caches
        .quotas
        .add(computed("svc", json!({"services": "5"})))
        .expect("add");
    let handlers = f.controller.replenishment_handlers();

    ResourceEventHandler::<Pod>::on_delete(
        handlers,
        DeletedObject::Object(pod("a", "ns", None, "Running")),
    );
    assert_eq!(
        f.controller.queue().len(),
        1,
        "only the quota limiting pods"
    );
    let key = f.controller.queue().get().await;
    assert_eq!(key.as_deref(), Some("ns/pods"));
    if let Some(key) = key {
        f.controller.queue().done(&key);
    }

    let running = pod("b", "ns", None, "Running");
    let finished = pod("b", "ns", None, "Succeeded");
    ResourceEventHandler::<Pod>::on_update(handlers, Arc::clone(&running), Arc::clone(&running));
    assert_eq!(f.controller.queue().len(), 0, "still counting");
    ResourceEventHandler::<Pod>::on_update(handlers, running, finished);
    assert_eq!(f.controller.queue().len(), 1);

    // Another namespace's pods do not touch these quotas.
    let q = f.controller.queue();
    while !q.is_empty() {
        if let Some(k) = q.get().await {
            q.done(&k);
        }
    }
    ResourceEventHandler::<Pod>::on_delete(
        handlers,
        DeletedObject::Object(pod("c", "other", None, "Running")),
    );
    assert_eq!(q.len(), 0);
}
