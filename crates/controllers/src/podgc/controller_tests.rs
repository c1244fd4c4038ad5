//! Unit tests of the pod garbage collector: caches seeded directly, a fake client, paused time for the quarantine, as upstream's `gc_controller_test.go`.

use jiff::SignedDuration;
use kcm_testing::{MetaBuilder, PodBuilder, PodSpecBuilder, node, node_condition, pod, taint};

use super::*;
use crate::podgc::client::FakePodGcClient;

fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

/// Pod `name` of `default`, created `age` seconds before [`now`], in `phase`.
fn a_pod(name: &str, age: i64, phase: &str) -> PodBuilder {
    pod(name)
        .namespace("default")
        .uid(format!("uid-{name}"))
        .created_at(now() - SignedDuration::from_secs(age))
        .default_spec()
        .phase(phase)
}

struct Fixture {
    controller: PodGcController,
    pods: Indexer<Pod>,
    nodes: Indexer<Node>,
    client: Arc<FakePodGcClient>,
    metrics: Arc<PodGcMetrics>,
}

impl Fixture {
    fn new(threshold: i32) -> Self {
        let pods = Indexer::new();
        let nodes = Indexer::new();
        let client = Arc::new(FakePodGcClient::new());
        let metrics = Arc::new(PodGcMetrics::new());
        let controller = PodGcController::with_caches(
            pods.clone(),
            nodes.clone(),
            client.clone(),
            PodGcControllerOptions {
                terminated_pod_threshold: threshold,
                controller_metrics: Some(metrics.clone()),
                ..PodGcControllerOptions::default()
            },
        )
        .with_clock(Arc::new(now));
        Self {
            controller,
            pods,
            nodes,
            client,
            metrics,
        }
    }

    fn add_pod(&self, pod: impl Into<Pod>) {
        self.pods.add(Arc::new(pod.into())).expect("add pod");
    }

    fn add_node(&self, node: impl Into<Node>) {
        self.nodes.add(Arc::new(node.into())).expect("add node");
    }

    fn metrics_text(&self) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        self.metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        text
    }
}

async fn step(d: Duration) {
    tokio::time::advance(d).await;
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// Upstream `TestGCTerminated`: beyond the threshold the oldest terminated pods go (names
/// break ties); running and pending pods never count.
#[tokio::test]
async fn terminated_pods_beyond_the_threshold_oldest_first() {
    struct Case {
        name: &'static str,
        threshold: i32,
        pods: Vec<(&'static str, i64, &'static str)>,
        want: Vec<&'static str>,
    }
    let cases = [
        Case {
            name: "threshold = 0, disables terminated pod deletion",
            threshold: 0,
            pods: vec![("a", 3, "Failed"), ("b", 2, "Succeeded")],
            want: vec![],
        },
        Case {
            name: "threshold = 1, delete pod a which is PodFailed and pod b which is PodSucceeded",
            threshold: 1,
            pods: vec![
                ("a", 3, "Failed"),
                ("b", 2, "Succeeded"),
                ("c", 1, "Failed"),
            ],
            want: vec!["default/a", "default/b"],
        },
        Case {
            name: "threshold = 1, delete pod b which is PodSucceeded",
            threshold: 1,
            pods: vec![
                ("a", 3, "Running"),
                ("b", 2, "Succeeded"),
                ("c", 1, "Failed"),
            ],
            want: vec!["default/b"],
        },
        Case {
            name: "threshold = 1, tie broken by name",
            threshold: 1,
            pods: vec![("b", 3, "Failed"), ("a", 3, "Failed")],
            want: vec!["default/a"],
        },
        Case {
            name: "threshold = 5, don't delete pod",
            threshold: 5,
            pods: vec![
                ("a", 3, "Failed"),
                ("b", 2, "Succeeded"),
                ("c", 1, "Pending"),
            ],
            want: vec![],
        },
    ];
    for case in cases {
        let f = Fixture::new(case.threshold);
        for (name, age, phase) in &case.pods {
            f.add_pod(a_pod(name, *age, phase).node("n"));
        }
        f.add_node(node("n").condition(node_condition("Ready", "True")));
        f.controller.gc().await;
        let mut deleted = f.client.deleted();
        deleted.sort();
        assert_eq!(deleted, case.want, "{}", case.name);
        assert!(
            f.client.patches().is_empty(),
            "{}: already terminal",
            case.name
        );
    }
}

/// Upstream `TestGCOrphaned`: a pod on a node missing from the cache waits out the 40 s
/// quarantine; then, if the API server does not know the node either, it is marked `Failed`
/// with `DisruptionTarget` and deleted.
#[tokio::test(start_paused = true)]
async fn orphans_of_deleted_nodes_after_the_quarantine() {
    let f = Fixture::new(0);
    f.add_pod(a_pod("orphan", 10, "Running").node("deleted"));
    f.add_pod(a_pod("cached-node", 10, "Running").node("alive"));
    f.add_pod(a_pod("uncached-node", 10, "Running").node("slow"));
    f.add_node(node("alive").condition(node_condition("Ready", "True")));
    f.client.add_node("slow");

    f.controller.gc().await;
    assert!(
        f.client.actions().is_empty(),
        "quarantined, nothing asked yet"
    );
    step(QUARANTINE_TIME - Duration::from_secs(1)).await;
    f.controller.gc().await;
    assert!(f.client.actions().is_empty(), "still quarantined");
    step(Duration::from_secs(2)).await;
    f.controller.gc().await;
    assert_eq!(f.client.deleted(), vec!["default/orphan".to_owned()]);
    let patches = f.client.patches();
    assert_eq!(patches.len(), 1);
    let (pod, patch) = &patches[0];
    assert_eq!(pod, "default/orphan");
    assert_eq!(patch["metadata"]["uid"], "uid-orphan");
    assert_eq!(patch["status"]["phase"], "Failed");
    let condition = &patch["status"]["conditions"][0];
    assert_eq!(condition["type"], "DisruptionTarget");
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], "DeletionByPodGC");
    assert_eq!(condition["message"], "PodGC: node no longer exists");
    assert!(
        f.metrics_text().contains(
            r#"pod_gc_collector_force_delete_pods_total{namespace="default",reason="orphaned"} 1"#
        ),
        "{}",
        f.metrics_text()
    );
}

/// A failing node GET keeps the pod: the node is quarantined again by the next pass.
#[tokio::test(start_paused = true)]
async fn an_unanswered_node_get_deletes_nothing() {
    let f = Fixture::new(0);
    f.add_pod(a_pod("orphan", 10, "Running").node("deleted"));
    f.client
        .set_get_node_error(Some(kcm_machinery::controller::api_status::internal_error(
            "boom",
        )));
    f.controller.gc().await;
    step(QUARANTINE_TIME + Duration::from_secs(1)).await;
    f.controller.gc().await;
    assert!(f.client.deleted().is_empty());
}

/// Upstream `TestGCUnscheduledTerminating`: terminating pods with no node are force-deleted
/// (and marked failed); terminating pods on a node are left to their kubelet.
#[tokio::test]
async fn unscheduled_terminating_pods() {
    let f = Fixture::new(0);
    f.add_pod(a_pod("unscheduled", 10, "Pending").deleted_at(now()));
    f.add_pod(
        a_pod("scheduled", 10, "Running")
            .node("n")
            .deleted_at(now()),
    );
    f.add_pod(a_pod("not-terminating", 10, "Pending"));
    f.add_node(node("n").condition(node_condition("Ready", "True")));
    f.controller.gc().await;
    assert_eq!(f.client.deleted(), vec!["default/unscheduled".to_owned()]);
    let patches = f.client.patches();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].1["status"]["phase"], "Failed");
    assert!(patches[0].1["status"].get("conditions").is_none());
}

/// Upstream `TestGCTerminating`: terminating pods on a not-ready node tainted
/// `node.kubernetes.io/out-of-service` are force-deleted; on a ready or untainted node not.
#[tokio::test]
async fn terminating_pods_on_out_of_service_nodes() {
    let f = Fixture::new(0);
    let out_of_service = taint("node.kubernetes.io/out-of-service", "NoExecute");
    f.add_node(
        node("oos")
            .condition(node_condition("Ready", "False"))
            .taints(vec![out_of_service.clone().into()]),
    );
    f.add_node(
        node("ready-tainted")
            .condition(node_condition("Ready", "True"))
            .taints(vec![out_of_service.into()]),
    );
    f.add_node(node("not-ready").condition(node_condition("Ready", "False")));
    for (name, node) in [("a", "oos"), ("b", "ready-tainted"), ("c", "not-ready")] {
        f.add_pod(a_pod(name, 10, "Running").node(node).deleted_at(now()));
    }
    f.add_pod(a_pod("d", 10, "Running").node("oos"));
    f.controller.gc().await;
    assert_eq!(f.client.deleted(), vec!["default/a".to_owned()]);
    assert!(f.metrics_text().contains(
        r#"pod_gc_collector_force_delete_pods_total{namespace="default",reason="out-of-service"} 1"#
    ));
}

/// A failed delete is counted in the error metric; the next pass tries again.
#[tokio::test]
async fn failed_deletions_are_counted() {
    let f = Fixture::new(1);
    f.add_pod(a_pod("a", 3, "Failed"));
    f.add_pod(a_pod("b", 2, "Failed"));
    f.client
        .set_delete_error(Some(kcm_machinery::controller::api_status::internal_error(
            "boom",
        )));
    f.controller.gc().await;
    assert!(f.metrics_text().contains(
        r#"pod_gc_collector_force_delete_pod_errors_total{namespace="default",reason="terminated"} 1"#
    ));
    f.client.set_delete_error(None);
    f.client.clear();
    f.controller.gc().await;
    assert_eq!(f.client.deleted(), vec!["default/a".to_owned()]);
}

/// `run` passes every period and stops on cancellation.
#[tokio::test(start_paused = true)]
async fn run_collects_every_period_until_cancelled() {
    let f = Fixture::new(1);
    f.add_pod(a_pod("a", 3, "Failed"));
    f.add_pod(a_pod("b", 2, "Failed"));
    let controller = Arc::new(f.controller);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(Arc::clone(&controller).run(cancel.clone()));
    step(Duration::from_millis(10)).await;
    assert_eq!(f.client.deleted().len(), 1, "first pass at once");
    step(GC_CHECK_PERIOD).await;
    assert_eq!(
        f.client.deleted().len(),
        2,
        "the cache still shows it: deleted again"
    );
    cancel.cancel();
    task.await.expect("run returns");
}
