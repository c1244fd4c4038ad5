//! Tests of the node lifecycle controller: caches seeded directly, passes called, the fake
//! client's writes inspected; tokio time paused and the wall clock following it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kcm_machinery::events::{FakeRecorder, TokioClock};
use kcm_machinery::informer::SharedIndexInformer;

use super::client::{FakeLifecycleClient, LifecycleAction};
use super::controller::{NodeLifecycleController, NodeLifecycleOptions};
use super::taints::not_ready_taint;
use super::testing::{informer, node, pod, seed, ts};
use super::zone::ZoneState;

struct Fixture {
    controller: Arc<NodeLifecycleController>,
    client: Arc<FakeLifecycleClient>,
    recorder: FakeRecorder,
    nodes: SharedIndexInformer<Node>,
    pods: SharedIndexInformer<Pod>,
}

impl Fixture {
    fn new(nodes_in: Vec<Node>, pods_in: Vec<Pod>) -> Self {
        let client = Arc::new(FakeLifecycleClient::new());
        let recorder = FakeRecorder::new();
        let nodes = informer::<Node>();
        let pods = informer::<Pod>();
        let controller = NodeLifecycleController::with_informers(
            nodes.clone(),
            pods.clone(),
            informer::<Lease>(),
            informer::<DaemonSet>(),
            client.clone(),
            Arc::new(recorder.clone()),
            Arc::new(TokioClock::starting_at(ts(0))),
            NodeLifecycleOptions::default(),
        );
        for n in nodes_in {
            client.insert_node(n.clone());
            seed(&nodes, n);
        }
        for p in pods_in {
            client.insert_pod(p.clone());
            seed(&pods, p);
        }
        Self {
            controller,
            client,
            recorder,
            nodes,
            pods,
        }
    }

    /// Copies the server's objects into the caches, as a watch would.
    fn sync_caches(&self) {
        for n in self.nodes.indexer().list() {
            if let Some(server) = self
                .client
                .node(n.metadata.name.as_deref().unwrap_or_default())
            {
                seed(&self.nodes, server);
            }
        }
        for p in self.pods.indexer().list() {
            let (ns, name) = (
                p.metadata.namespace.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default(),
            );
            if let Some(server) = self.client.pod(&ns, &name) {
                seed(&self.pods, server);
            }
        }
    }

    fn taint_keys(&self, name: &str) -> Vec<String> {
        let mut keys: Vec<String> = self
            .client
            .node(name)
            .and_then(|n| n.spec)
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect();
        keys.sort();
        keys
    }
}

fn ready_status(node: &Node, type_: &str) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
        .map(|c| c.status.clone())
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn silent_node_goes_unknown_pods_not_ready_and_unreachable_taints() {
    let f = Fixture::new(
        vec![
            node("n1", "z", "True", 0, vec![]),
            node("n2", "z", "True", 0, vec![]),
        ],
        vec![pod("p1", "n1", vec![])],
    );
    f.controller.monitor_node_health().await;
    assert_eq!(
        f.recorder.reasons(),
        ["RegisteredNode", "RegisteredNode"],
        "one event per new node"
    );
    assert_eq!(f.controller.zone_state("\0"), None);
    assert_eq!(f.controller.zone_state(":\0:z"), Some(ZoneState::Normal));
    let metrics = f.controller.metrics();
    assert_eq!(metrics.zone(":\0:z"), Some((2, 100.0, 0)));
    assert_eq!(
        metrics.evictions(":\0:z"),
        Some(0),
        "counter created with the zone"
    );

    // n2 keeps heartbeating; n1 goes silent for longer than the grace period.
    tokio::time::advance(Duration::from_secs(51)).await;
    let n2 = node("n2", "z", "True", 51, vec![]);
    f.client.insert_node(n2.clone());
    seed(&f.nodes, f.client.node("n2").expect("n2"));
    f.controller.monitor_node_health().await;
    let n1 = f.client.node("n1").expect("n1");
    for type_ in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        assert_eq!(ready_status(&n1, type_), "Unknown", "{type_}");
    }
    assert_eq!(
        ready_status(&f.client.node("n2").expect("n2"), "Ready"),
        "True"
    );
    let p1 = f.client.pod("default", "p1").expect("p1");
    let ready = p1.status.and_then(|s| s.conditions).expect("conditions");
    assert_eq!(ready[0].status, "False", "pod marked not ready");
    let reasons = f.recorder.reasons();
    assert!(reasons.contains(&"NodeNotReady".to_owned()), "{reasons:?}");
    assert_eq!(metrics.zone(":\0:z"), Some((2, 50.0, 1)));

    // The watch delivers the Unknown node; the NoSchedule pass and the next monitor pass
    // taint it; the NoExecute taint goes through the zone's rate-limited queue.
    f.sync_caches();
    f.controller
        .do_no_schedule_tainting_pass("n1")
        .await
        .expect("no schedule");
    assert_eq!(
        f.taint_keys("n1"),
        ["node.kubernetes.io/unreachable:NoSchedule"]
    );
    f.sync_caches();
    tokio::time::advance(Duration::from_secs(5)).await;
    f.controller.monitor_node_health().await;
    f.controller.do_no_execute_tainting_pass().await;
    assert_eq!(
        f.taint_keys("n1"),
        [
            "node.kubernetes.io/unreachable:NoExecute",
            "node.kubernetes.io/unreachable:NoSchedule"
        ]
    );
    assert!(f.taint_keys("n2").is_empty());
    assert_eq!(
        metrics.evictions(":\0:z"),
        Some(1),
        "one NoExecute taint placed"
    );

    // Heartbeats resume: Ready again, both taints removed.
    let mut back = node("n1", "z", "True", 70, vec![]);
    back.metadata.resource_version = f
        .client
        .node("n1")
        .and_then(|n| n.metadata.resource_version);
    back.spec = f.client.node("n1").and_then(|n| n.spec);
    f.client.insert_node(back);
    f.sync_caches();
    f.controller.monitor_node_health().await;
    f.sync_caches();
    f.controller
        .do_no_schedule_tainting_pass("n1")
        .await
        .expect("no schedule");
    assert!(f.taint_keys("n1").is_empty(), "{:?}", f.taint_keys("n1"));
}

#[tokio::test(start_paused = true)]
async fn not_ready_taint_is_swapped_for_unreachable_at_once() {
    let f = Fixture::new(
        vec![node("n1", "z", "Unknown", 0, vec![not_ready_taint()])],
        vec![],
    );
    // Keep another node healthy so the cluster is not in full disruption.
    let f2 = node("n2", "z", "True", 0, vec![]);
    f.client.insert_node(f2.clone());
    seed(&f.nodes, f2);
    f.controller.monitor_node_health().await;
    // First pass: n1 newly registered → markNodeAsReachable removes its NoExecute taint.
    f.sync_caches();
    let mut tainted = f.client.node("n1").expect("n1");
    tainted.spec.get_or_insert_with(Default::default).taints = Some(vec![not_ready_taint()]);
    f.client.insert_node(tainted);
    f.sync_caches();
    f.client.clear_actions();
    f.controller.monitor_node_health().await;
    assert_eq!(
        f.taint_keys("n1"),
        ["node.kubernetes.io/unreachable:NoExecute"],
        "swapped without waiting for the queue"
    );
    let updates = f
        .client
        .actions()
        .iter()
        .filter(|a| matches!(a, LifecycleAction::UpdateNode(_)))
        .count();
    assert_eq!(updates, 1, "one update swaps both taints");
}

#[tokio::test(start_paused = true)]
async fn all_zones_down_stops_tainting_and_removes_no_execute_taints() {
    let f = Fixture::new(
        vec![
            node("n1", "a", "True", 0, vec![]),
            node("n2", "b", "False", 0, vec![]),
        ],
        vec![pod("p1", "n1", vec![])],
    );
    f.controller.monitor_node_health().await;
    assert_eq!(f.controller.zone_qps(":\0:a"), Some(0.1));
    assert_eq!(
        f.controller.zone_state(":\0:b"),
        Some(ZoneState::FullDisruption)
    );
    // n2 (not ready) got its NoExecute taint while zone a was still healthy.
    let mut n2 = f.client.node("n2").expect("n2");
    n2.spec.get_or_insert_with(Default::default).taints = Some(vec![not_ready_taint()]);
    f.client.insert_node(n2);
    f.sync_caches();

    // Every node goes silent: every zone fully disrupted → master disruption mode.
    tokio::time::advance(Duration::from_secs(51)).await;
    f.controller.monitor_node_health().await;
    assert_eq!(
        f.controller.zone_state(":\0:a"),
        Some(ZoneState::FullDisruption)
    );
    assert_eq!(
        f.controller.zone_state(":\0:b"),
        Some(ZoneState::FullDisruption)
    );
    assert_eq!(f.controller.zone_qps(":\0:a"), Some(0.0));
    assert_eq!(f.controller.zone_qps(":\0:b"), Some(0.0));
    assert!(
        f.taint_keys("n2").is_empty(),
        "NoExecute taints removed on entering"
    );

    // Later passes queue the nodes, but nothing is tainted at rate 0.
    for _ in 0..5 {
        f.sync_caches();
        tokio::time::advance(Duration::from_secs(30)).await;
        f.controller.monitor_node_health().await;
        f.controller.do_no_execute_tainting_pass().await;
    }
    for name in ["n1", "n2"] {
        assert!(
            !f.taint_keys(name).iter().any(|k| k.ends_with("NoExecute")),
            "{name}: {:?}",
            f.taint_keys(name)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn conditions_drive_no_schedule_taints() {
    let mut n = node("n1", "z", "False", 0, vec![]);
    if let Some(cs) = n.status.as_mut().and_then(|s| s.conditions.as_mut()) {
        cs[1].status = "True".to_owned(); // MemoryPressure
    }
    n.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
    let f = Fixture::new(vec![n], vec![]);
    f.controller
        .do_no_schedule_tainting_pass("n1")
        .await
        .expect("pass");
    assert_eq!(
        f.taint_keys("n1"),
        [
            "node.kubernetes.io/memory-pressure:NoSchedule",
            "node.kubernetes.io/not-ready:NoSchedule",
            "node.kubernetes.io/unschedulable:NoSchedule"
        ]
    );
    let added = f
        .client
        .node("n1")
        .and_then(|n| n.spec)
        .and_then(|s| s.taints)
        .expect("taints");
    assert!(
        added.iter().all(|t| t.time_added.is_none()),
        "NoSchedule taints carry no time"
    );
}

#[tokio::test(start_paused = true)]
async fn beta_os_and_arch_labels_follow_the_stable_ones() {
    let mut n = node("n1", "z", "True", 0, vec![]);
    let labels = n.metadata.labels.get_or_insert_with(Default::default);
    labels.insert("kubernetes.io/os".into(), "linux".into());
    labels.insert("kubernetes.io/arch".into(), "arm64".into());
    labels.insert("beta.kubernetes.io/arch".into(), "amd64".into());
    let f = Fixture::new(vec![n], vec![]);
    f.controller
        .reconcile_node_labels("n1")
        .await
        .expect("reconcile");
    let stored = f
        .client
        .node("n1")
        .and_then(|n| n.metadata.labels)
        .expect("labels");
    assert_eq!(
        stored["beta.kubernetes.io/os"], "linux",
        "missing one added"
    );
    assert_eq!(
        stored["beta.kubernetes.io/arch"], "arm64",
        "stale one overwritten"
    );
    assert_eq!(
        stored["topology.kubernetes.io/zone"], "z",
        "others untouched"
    );

    // Consistent now: the next pass writes nothing.
    f.sync_caches();
    f.client.clear_actions();
    f.controller
        .reconcile_node_labels("n1")
        .await
        .expect("reconcile");
    assert!(f.client.actions().is_empty(), "{:?}", f.client.actions());
}

/// A panic injected in a node's sync (the fake client panics once) is recovered by the shared
/// worker, counted in `kcm_workqueue_sync_panics_total{name="node_lifecycle_controller"}`, and
/// the node retried: the NoSchedule taint lands on the retry.
#[tokio::test(start_paused = true)]
async fn panicking_node_sync_is_recovered_counted_and_retried() {
    let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
    let client = Arc::new(FakeLifecycleClient::new());
    let nodes = informer::<Node>();
    let controller = NodeLifecycleController::with_informers(
        nodes.clone(),
        informer::<Pod>(),
        informer::<Lease>(),
        informer::<DaemonSet>(),
        client.clone(),
        Arc::new(FakeRecorder::new()),
        Arc::new(TokioClock::starting_at(ts(0))),
        NodeLifecycleOptions {
            queue_metrics: Some(metrics.clone()),
            ..NodeLifecycleOptions::default()
        },
    );
    let n1 = node("n1", "z", "False", 0, vec![]);
    client.insert_node(n1.clone());
    seed(&nodes, n1);
    client.panic_on_next_call();
    let key = "n1".to_owned();
    controller.node_queue().add(key.clone());
    assert!(controller.process_next_node().await, "recovered");
    assert_eq!(
        metrics.sync_panics_total(super::controller::NODE_QUEUE),
        1,
        "counted"
    );
    assert_eq!(controller.node_queue().num_requeues(&key), 1, "retried");
    assert!(controller.process_next_node().await);
    assert_eq!(controller.node_queue().num_requeues(&key), 0);
    let taints: Vec<String> = client
        .node("n1")
        .and_then(|n| n.spec)
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    assert_eq!(taints, ["node.kubernetes.io/not-ready:NoSchedule"]);
}

/// A deleted node leaves nothing behind: it drops out of the known nodes and its health record
/// goes with it, so nodes coming and going for days do not grow the controller's state.
#[tokio::test(start_paused = true)]
async fn a_deleted_node_leaves_no_state_behind() {
    let f = Fixture::new(
        vec![
            node("n1", "z", "True", 0, vec![]),
            node("n2", "z", "True", 0, vec![]),
        ],
        vec![],
    );
    f.controller.monitor_node_health().await;
    assert_eq!(f.controller.tracked_nodes(), (2, 2));

    let n1 = f.nodes.indexer().get_by_key("n1").expect("cached");
    f.nodes.indexer().delete(&n1).expect("delete");
    tokio::time::advance(Duration::from_secs(5)).await;
    f.controller.monitor_node_health().await;
    let count = |reason: &str| f.recorder.reasons().iter().filter(|r| *r == reason).count();
    assert_eq!(count("RemovingNode"), 1);
    assert_eq!(f.controller.tracked_nodes(), (1, 1), "only n2 is tracked");

    // A namesake is a new node: registered again and health-checked from scratch.
    seed(&f.nodes, node("n1", "z", "True", 5, vec![]));
    f.controller.monitor_node_health().await;
    assert_eq!(f.controller.tracked_nodes(), (2, 2));
    assert_eq!(count("RegisteredNode"), 3);
}
