//! Unit tests of the cloud node lifecycle controller: a bare Node cache, the recording fake client and the simulated cloud's machines, with the cases of upstream's `node_lifecycle_controller_test.go` (`Test_NodesDeleted`, `Test_NodesShutdown`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_machinery::events::FakeRecorder;

use super::*;
use crate::cloud::simulated::{INSTANCE_ANNOTATION, IpPool, SimulatedCloud};
use crate::cloudnodelifecycle::client::{FakeCloudNodeClient, NodeAction};

fn node(name: &str, ready: Option<&str>, instance: Option<&str>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            uid: Some(format!("uid-{name}")),
            annotations: instance
                .map(|i| BTreeMap::from([(INSTANCE_ANNOTATION.to_owned(), i.to_owned())])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            conditions: ready.map(|s| {
                vec![NodeCondition {
                    type_: "Ready".to_owned(),
                    status: s.to_owned(),
                    ..NodeCondition::default()
                }]
            }),
            ..NodeStatus::default()
        }),
    }
}

fn tainted(mut n: Node) -> Node {
    n.spec.get_or_insert_with(Default::default).taints = Some(vec![shutdown_taint()]);
    n
}

struct Fixture {
    controller: CloudNodeLifecycleController,
    client: Arc<FakeCloudNodeClient>,
    recorder: FakeRecorder,
}

fn fixture(nodes: Vec<Node>) -> Fixture {
    let cache = Indexer::new();
    for n in &nodes {
        cache.add(Arc::new(n.clone())).expect("add");
    }
    let client = Arc::new(FakeCloudNodeClient::new(nodes));
    let recorder = FakeRecorder::new();
    let cloud = SimulatedCloud::new(IpPool::parse("192.0.2.0/24").expect("pool"));
    let controller = CloudNodeLifecycleController::with_cache(
        cache,
        client.clone(),
        cloud,
        Arc::new(recorder.clone()),
        Duration::from_secs(5),
    );
    Fixture {
        controller,
        client,
        recorder,
    }
}

/// Upstream's `Test_NodesDeleted` cases.
#[tokio::test]
async fn nodes_whose_machine_is_gone_are_deleted() {
    // Not ready, machine gone: deleted, with the event.
    let f = fixture(vec![node("n1", Some("False"), Some("deleted"))]);
    f.controller.monitor_nodes().await;
    assert_eq!(f.client.actions(), [NodeAction::Delete("n1".to_owned())]);
    let events = f.recorder.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, "DeletingNode");
    assert_eq!(
        events[0].message,
        "Deleting node n1 because it does not exist in the cloud provider"
    );
    assert_eq!(events[0].regarding.kind.as_deref(), Some("Node"));

    // Unknown (no Ready condition), machine gone: deleted too.
    let f = fixture(vec![node("n1", None, Some("deleted"))]);
    f.controller.monitor_nodes().await;
    assert_eq!(f.client.actions(), [NodeAction::Delete("n1".to_owned())]);

    // Ready, even if the cloud says gone: left alone.
    let f = fixture(vec![node("n1", Some("True"), Some("deleted"))]);
    f.controller.monitor_nodes().await;
    assert!(f.client.actions().is_empty());

    // Not ready, machine there: left alone.
    let f = fixture(vec![node("n1", Some("Unknown"), None)]);
    f.controller.monitor_nodes().await;
    assert!(f.client.actions().is_empty());
    assert!(f.recorder.events().is_empty());
}

/// Upstream's `Test_NodesShutdown` cases.
#[tokio::test]
async fn shut_down_machines_taint_their_node_until_it_is_ready() {
    let f = fixture(vec![node("n1", Some("Unknown"), Some("shutdown"))]);
    f.controller.monitor_nodes().await;
    let updated = f.client.node("n1").expect("node");
    assert_eq!(
        updated.spec.and_then(|s| s.taints),
        Some(vec![shutdown_taint()])
    );
    assert_eq!(f.client.actions().len(), 2, "a read, then the update");

    // Already tainted in the cache: no write.
    let f = fixture(vec![tainted(node("n1", Some("Unknown"), Some("shutdown")))]);
    f.controller.monitor_nodes().await;
    assert!(f.client.actions().is_empty());

    // Ready again: the taint goes.
    let f = fixture(vec![tainted(node("n1", Some("True"), None))]);
    f.controller.monitor_nodes().await;
    let updated = f.client.node("n1").expect("node");
    assert_eq!(updated.spec.and_then(|s| s.taints), None);
}
