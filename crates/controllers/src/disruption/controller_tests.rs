//! Unit tests of the disruption controller: bare caches, a fake client and recorder and a fixed clock, ported in spirit from upstream's `disruption_test.go`.

use jiff::SignedDuration;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::index::namespace_indexers;
use serde_json::{Value, json};

use super::*;
use crate::disruption::client::{FakeDisruptionClient, ScaleOf};

fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

struct Fixture {
    controller: DisruptionController,
    caches: DisruptionCaches,
    client: Arc<FakeDisruptionClient>,
    recorder: FakeRecorder,
}

fn fixture() -> Fixture {
    let caches = DisruptionCaches {
        pdbs: Indexer::with_indexers(namespace_indexers()),
        pods: Indexer::with_indexers(namespace_indexers()),
        rcs: Indexer::with_indexers(namespace_indexers()),
        rss: Indexer::with_indexers(namespace_indexers()),
        deployments: Indexer::with_indexers(namespace_indexers()),
        stateful_sets: Indexer::with_indexers(namespace_indexers()),
    };
    let client = Arc::new(FakeDisruptionClient::new());
    let recorder = FakeRecorder::new();
    let controller = DisruptionController::with_caches(
        caches.clone(),
        client.clone(),
        Arc::new(recorder.clone()),
        DisruptionControllerOptions::default(),
    )
    .with_clock(Arc::new(now));
    Fixture {
        controller,
        caches,
        client,
        recorder,
    }
}

fn pdb(spec: Value, status: Option<Value>) -> Arc<PodDisruptionBudget> {
    let mut obj = json!({"metadata": {"name": "pdb", "namespace": "ns", "generation": 1, "resourceVersion": "1"}, "spec": spec});
    if let Some(status) = status {
        obj["status"] = status;
    }
    Arc::new(serde_json::from_value(obj).expect("pdb"))
}

/// A pod labelled `app=web`, ready or not, controlled by `owner` (`kind`, `name`, `uid`).
fn pod(name: &str, ready: bool, owner: Option<(&str, &str, &str, &str)>) -> Arc<Pod> {
    let mut obj = json!({
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
    });
    if let Some((api_version, kind, owner_name, uid)) = owner {
        obj["metadata"]["ownerReferences"] = json!([{"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": uid, "controller": true}]);
    }
    Arc::new(serde_json::from_value(obj).expect("pod"))
}

fn selector() -> Value {
    json!({"matchLabels": {"app": "web"}})
}

fn last_status(f: &Fixture) -> PodDisruptionBudgetStatus {
    f.client
        .updates()
        .last()
        .and_then(|p| p.status.clone())
        .expect("a status was written")
}

/// (currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed, condition reason).
fn summary(s: &PodDisruptionBudgetStatus) -> (i32, i32, i32, i32, String) {
    let reason = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionAllowed")
        .map(|c| c.reason.clone())
        .unwrap_or_default();
    (
        s.current_healthy.unwrap_or(-1),
        s.desired_healthy.unwrap_or(-1),
        s.expected_pods.unwrap_or(-1),
        s.disruptions_allowed.unwrap_or(-1),
        reason,
    )
}

use k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus;

fn s(reason: &str) -> String {
    reason.to_owned()
}

#[tokio::test]
async fn min_available_integer_counts_the_selected_pods() {
    let cases: [(&str, Value, &[bool], (i32, i32, i32, i32, String)); 4] = [
        (
            "three ready, min 2",
            json!(2),
            &[true, true, true],
            (3, 2, 3, 1, s("SufficientPods")),
        ),
        (
            "one unready",
            json!(2),
            &[true, true, false],
            (2, 2, 3, 0, s("InsufficientPods")),
        ),
        (
            "no pods",
            json!(2),
            &[],
            (0, 2, 0, 0, s("InsufficientPods")),
        ),
        (
            "min 0",
            json!(0),
            &[true],
            (1, 0, 1, 1, s("SufficientPods")),
        ),
    ];
    for (name, min, ready, want) in cases {
        let f = fixture();
        f.caches
            .pdbs
            .add(pdb(
                json!({"minAvailable": min, "selector": selector()}),
                None,
            ))
            .expect("add");
        for (i, r) in ready.iter().enumerate() {
            f.caches
                .pods
                .add(pod(&format!("p{i}"), *r, None))
                .expect("add");
        }
        f.controller.sync("ns/pdb").await.expect("sync");
        let status = last_status(&f);
        assert_eq!(summary(&status), want, "case {name}");
        assert_eq!(status.observed_generation, Some(1), "case {name}");
    }
}

#[tokio::test]
async fn a_nil_selector_selects_no_pods() {
    let f = fixture();
    f.caches
        .pdbs
        .add(pdb(json!({"minAvailable": 1}), None))
        .expect("add");
    f.caches.pods.add(pod("p", true, None)).expect("add");
    f.controller.sync("ns/pdb").await.expect("sync");
    assert_eq!(
        summary(&last_status(&f)),
        (0, 1, 0, 0, s("InsufficientPods"))
    );
    assert_eq!(f.recorder.reasons(), ["NoPods"]);
}

#[tokio::test]
async fn max_unavailable_scales_against_the_deployment() {
    let f = fixture();
    let dep: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "dep-uid"},
        "spec": {"replicas": 4, "selector": selector(), "template": {}}
    }))
    .expect("deployment");
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web-1", "namespace": "ns", "uid": "rs-uid",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "dep-uid", "controller": true}]},
        "spec": {"replicas": 3, "selector": selector()}
    }))
    .expect("rs");
    f.caches.deployments.add(Arc::new(dep)).expect("add");
    f.caches.rss.add(Arc::new(rs)).expect("add");
    for i in 0..3 {
        f.caches
            .pods
            .add(pod(
                &format!("p{i}"),
                true,
                Some(("apps/v1", "ReplicaSet", "web-1", "rs-uid")),
            ))
            .expect("add");
    }
    f.caches
        .pdbs
        .add(pdb(
            json!({"maxUnavailable": "25%", "selector": selector()}),
            None,
        ))
        .expect("add");
    f.controller.sync("ns/pdb").await.expect("sync");
    // Expected is the Deployment's 4; 25% of 4 is 1 unavailable, so 3 desired.
    assert_eq!(
        summary(&last_status(&f)),
        (3, 3, 4, 0, s("InsufficientPods"))
    );
}

#[tokio::test]
async fn percentage_min_available_rounds_up_over_any_scale_owner() {
    let f = fixture();
    f.client.set_scale(
        "ns",
        "Widget",
        "w",
        ScaleOf {
            uid: "w-uid".into(),
            replicas: 3,
        },
    );
    for i in 0..3 {
        f.caches
            .pods
            .add(pod(
                &format!("p{i}"),
                true,
                Some(("example.com/v1", "Widget", "w", "w-uid")),
            ))
            .expect("add");
    }
    f.caches
        .pdbs
        .add(pdb(
            json!({"minAvailable": "34%", "selector": selector()}),
            None,
        ))
        .expect("add");
    f.controller.sync("ns/pdb").await.expect("sync");
    assert_eq!(summary(&last_status(&f)), (3, 2, 3, 1, s("SufficientPods")));
}

#[tokio::test]
async fn pods_without_a_known_controller_fail_safe() {
    let f = fixture();
    f.caches
        .pods
        .add(pod("p", true, Some(("apps/v1", "ReplicaSet", "gone", "x"))))
        .expect("add");
    f.caches
        .pdbs
        .add(pdb(
            json!({"maxUnavailable": 1, "selector": selector()}),
            None,
        ))
        .expect("add");
    f.controller
        .sync("ns/pdb")
        .await
        .expect("fail-safe status written");
    let status = last_status(&f);
    let cond = status
        .conditions
        .iter()
        .flatten()
        .next()
        .expect("condition");
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "SyncFailed")
    );
    assert_eq!(cond.message, "found no controllers for pod \"p\"");
    assert_eq!(status.disruptions_allowed, Some(0));
    assert_eq!(f.recorder.reasons(), ["CalculateExpectedPodCountFailed"]);
}

#[tokio::test]
async fn unmanaged_pods_are_reported_not_fatal() {
    let f = fixture();
    f.caches.pods.add(pod("p", true, None)).expect("add");
    f.caches
        .pdbs
        .add(pdb(
            json!({"maxUnavailable": 1, "selector": selector()}),
            None,
        ))
        .expect("add");
    f.controller.sync("ns/pdb").await.expect("sync");
    assert_eq!(
        summary(&last_status(&f)),
        (1, 0, 0, 0, s("InsufficientPods"))
    );
    assert_eq!(f.recorder.reasons(), ["UnmanagedPods"]);
}

#[tokio::test(start_paused = true)]
async fn recently_disrupted_pods_are_not_healthy_and_expire() {
    let f = fixture();
    let recent = (now() - SignedDuration::from_secs(30)).to_string();
    let old = (now() - SignedDuration::from_secs(300)).to_string();
    for name in ["a", "b", "c"] {
        f.caches.pods.add(pod(name, true, None)).expect("add");
    }
    f.caches
        .pdbs
        .add(pdb(
            json!({"minAvailable": 1, "selector": selector()}),
            Some(json!({"disruptedPods": {"a": recent, "b": old}, "observedGeneration": 1})),
        ))
        .expect("add");
    f.controller.sync("ns/pdb").await.expect("sync");
    let status = last_status(&f);
    assert_eq!(summary(&status), (2, 1, 3, 1, s("SufficientPods")));
    let disrupted = status.disrupted_pods.expect("disrupted");
    assert_eq!(disrupted.keys().collect::<Vec<_>>(), ["a"], "b expired");
    assert_eq!(f.recorder.reasons(), ["NotDeleted"]);
    // The budget is rechecked when a's two minutes are up (90 s from now).
    assert_eq!(f.controller.queue().len(), 0);
    tokio::time::advance(std::time::Duration::from_secs(91)).await;
    tokio::task::yield_now().await;
    assert_eq!(f.controller.queue().len(), 1);
}

#[tokio::test]
async fn an_up_to_date_status_is_not_rewritten_and_conflicts_are_retried() {
    let f = fixture();
    f.caches.pods.add(pod("p", true, None)).expect("add");
    f.caches
        .pdbs
        .add(pdb(
            json!({"minAvailable": 1, "selector": selector()}),
            None,
        ))
        .expect("add");
    f.controller.sync("ns/pdb").await.expect("sync");
    let written = f.client.updates().pop().expect("written");
    f.caches.pdbs.update(Arc::new(written)).expect("update");
    f.controller.sync("ns/pdb").await.expect("sync");
    assert_eq!(f.client.updates().len(), 1, "nothing changed");

    f.caches.pods.add(pod("q", true, None)).expect("add");
    f.client.set_conflict(true);
    let err = f.controller.sync("ns/pdb").await.expect_err("conflict");
    assert!(err.is_conflict(), "{err}");
}

#[tokio::test]
async fn pod_events_enqueue_their_budget() {
    let f = fixture();
    f.caches
        .pdbs
        .add(pdb(
            json!({"minAvailable": 1, "selector": selector()}),
            None,
        ))
        .expect("add");
    let handlers = f.controller.event_handlers();
    ResourceEventHandler::<Pod>::on_add(handlers, pod("p", true, None), false);
    assert_eq!(f.controller.queue().len(), 1);
    let unlabelled: Pod =
        serde_json::from_value(json!({"metadata": {"name": "u", "namespace": "ns"}})).expect("pod");
    assert!(handlers.pdb_for_pod(&unlabelled).is_none());
}
