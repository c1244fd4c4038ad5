//! Tests of the taint eviction controller with paused time and a fake client.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kcm_machinery::events::{FakeRecorder, TokioClock};
use kcm_machinery::informer::SharedIndexInformer;

use super::controller::{PodUpdate, TaintEvictionController};
use crate::nodelifecycle::client::FakeLifecycleClient;
use crate::nodelifecycle::taints::{TAINT_NODE_UNREACHABLE, unreachable_taint};
use crate::nodelifecycle::testing::{informer, node, pod, seed, tolerate, ts};

struct Fixture {
    controller: Arc<TaintEvictionController>,
    client: Arc<FakeLifecycleClient>,
    recorder: FakeRecorder,
    nodes: SharedIndexInformer<Node>,
}

fn fixture(tainted: bool, pods_in: Vec<Pod>) -> Fixture {
    let client = Arc::new(FakeLifecycleClient::new());
    let recorder = FakeRecorder::new();
    let nodes = informer::<Node>();
    let pods = informer::<Pod>();
    let controller = TaintEvictionController::with_informers(
        nodes.clone(),
        pods.clone(),
        client.clone(),
        Arc::new(recorder.clone()),
        Arc::new(TokioClock::starting_at(ts(0))),
        None,
    );
    let taints = if tainted {
        vec![unreachable_taint()]
    } else {
        vec![]
    };
    seed(&nodes, node("n1", "z", "Unknown", 0, taints));
    for p in pods_in {
        client.insert_pod(p.clone());
        seed(&pods, p);
    }
    Fixture {
        controller,
        client,
        recorder,
        nodes,
    }
}

async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn intolerant_pod_is_deleted_at_once_with_disruption_target() {
    let f = fixture(true, vec![pod("p", "n1", vec![])]);
    f.controller.handle_node_update("n1");
    tokio::time::sleep(Duration::from_millis(1)).await;
    settle().await;
    assert_eq!(f.client.deleted_pods(), ["default/p"]);
    assert_eq!(f.controller.metrics().pod_deletions(), 1);
    let status_update = f
        .client
        .actions()
        .into_iter()
        .find_map(|a| match a {
            crate::nodelifecycle::LifecycleAction::UpdatePodStatus(p) => Some(p),
            _ => None,
        })
        .expect("status update before deletion");
    let cond = status_update
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == "DisruptionTarget"))
        .expect("DisruptionTarget");
    assert_eq!(cond.status, "True");
    assert_eq!(cond.reason.as_deref(), Some("DeletionByTaintManager"));
    assert_eq!(
        cond.message.as_deref(),
        Some("Taint manager: deleting due to NoExecute taint")
    );
    let events = f.recorder.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, "TaintManagerEviction");
    assert_eq!(events[0].message, "Marking for deletion Pod default/p");
}

#[tokio::test(start_paused = true)]
async fn toleration_seconds_delay_the_deletion() {
    let f = fixture(
        true,
        vec![pod(
            "p",
            "n1",
            vec![tolerate(TAINT_NODE_UNREACHABLE, Some(5))],
        )],
    );
    f.controller.handle_node_update("n1");
    assert!(f.controller.is_scheduled("default/p"));
    tokio::time::sleep(Duration::from_millis(4_900)).await;
    settle().await;
    assert!(f.client.deleted_pods().is_empty(), "not before 5s");
    // A later node update does not push the deadline back.
    f.controller.handle_node_update("n1");
    tokio::time::sleep(Duration::from_millis(200)).await;
    settle().await;
    assert_eq!(f.client.deleted_pods(), ["default/p"]);
}

#[tokio::test(start_paused = true)]
async fn taint_removed_before_the_deadline_cancels_the_eviction() {
    let f = fixture(
        true,
        vec![pod(
            "p",
            "n1",
            vec![tolerate(TAINT_NODE_UNREACHABLE, Some(5))],
        )],
    );
    f.controller.handle_node_update("n1");
    tokio::time::sleep(Duration::from_secs(2)).await;
    seed(&f.nodes, node("n1", "z", "True", 2, vec![]));
    f.controller.handle_node_update("n1");
    assert!(!f.controller.is_scheduled("default/p"));
    tokio::time::sleep(Duration::from_secs(10)).await;
    settle().await;
    assert!(f.client.deleted_pods().is_empty());
    let events = f.recorder.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, "TaintManagerEviction");
    assert_eq!(events[0].message, "Cancelling deletion of Pod default/p");
}

#[tokio::test(start_paused = true)]
async fn forever_tolerating_pods_stay_and_untainted_nodes_evict_nothing() {
    let f = fixture(
        true,
        vec![pod("p", "n1", vec![tolerate(TAINT_NODE_UNREACHABLE, None)])],
    );
    f.controller.handle_node_update("n1");
    f.controller.handle_pod_update(&PodUpdate {
        namespace: "default".into(),
        name: "p".into(),
        node_name: "n1".into(),
    });
    tokio::time::sleep(Duration::from_secs(3600)).await;
    settle().await;
    assert!(f.client.deleted_pods().is_empty());

    let g = fixture(false, vec![pod("q", "n1", vec![])]);
    g.controller.handle_node_update("n1");
    tokio::time::sleep(Duration::from_secs(10)).await;
    settle().await;
    assert!(g.client.deleted_pods().is_empty());
}

/// Records events, panicking on the first one once armed: a sync that panics once.
#[derive(Clone, Default)]
struct PanicOnceRecorder {
    armed: Arc<std::sync::atomic::AtomicBool>,
    inner: FakeRecorder,
}

impl kcm_machinery::events::EventRecorder for PanicOnceRecorder {
    fn event(
        &self,
        regarding: &k8s_openapi::api::core::v1::ObjectReference,
        type_: kcm_machinery::events::EventType,
        reason: &str,
        message: String,
    ) {
        if self.armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            panic!("injected panic");
        }
        self.inner.event(regarding, type_, reason, message);
    }
}

/// A panic injected in a node update (the event recorder panics once) is recovered by the
/// shared worker, counted in `kcm_workqueue_sync_panics_total{name="noexec_taint_node"}`, and
/// the node retried.
#[tokio::test(start_paused = true)]
async fn panicking_node_update_is_recovered_counted_and_retried() {
    let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
    let recorder = PanicOnceRecorder::default();
    let nodes = informer::<Node>();
    let pods = informer::<Pod>();
    let controller = TaintEvictionController::with_informers(
        nodes.clone(),
        pods.clone(),
        Arc::new(FakeLifecycleClient::new()),
        Arc::new(recorder.clone()),
        Arc::new(TokioClock::starting_at(ts(0))),
        Some(metrics.clone()),
    );
    seed(
        &nodes,
        node("n1", "z", "Unknown", 0, vec![unreachable_taint()]),
    );
    seed(
        &pods,
        pod("p", "n1", vec![tolerate(TAINT_NODE_UNREACHABLE, Some(5))]),
    );
    controller.handle_node_update("n1");
    assert!(controller.is_scheduled("default/p"));
    // The taint goes: cancelling the deletion records an event, which panics.
    seed(&nodes, node("n1", "z", "True", 2, vec![]));
    recorder
        .armed
        .store(true, std::sync::atomic::Ordering::SeqCst);
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
    assert!(!controller.is_scheduled("default/p"));
}
