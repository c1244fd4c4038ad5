//! Unit tests of the ReplicationController manager: the ReplicaSet logic over converted RCs,
//! as upstream's `replication_controller_test.go` cases that matter (scale up and down, RC
//! controller references and status written as an RC).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kcm_machinery::controller::pod_control::FakePodControl;
use kcm_machinery::informer::ResourceEventHandler;
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::store::Indexer;
use kcm_testing::{
    MetaBuilder, PodSpecBuilder, container, controller_ref_of, pod, replication_controller,
};

use super::*;
use crate::replicaset::{FakeReplicaSetClient, ReplicaSetAction};

fn rc(replicas: i32) -> ReplicationController {
    replication_controller("frontend")
        .namespace("default")
        .uid("rc-uid")
        .resource_version("1")
        .replicas(replicas)
        .selecting(&[("app", "web")])
        .container(container("nginx"))
        .build()
}

struct Fixture {
    mirror: Indexer<ReplicaSet>,
    pods: Indexer<Pod>,
    client: Arc<FakeReplicaSetClient>,
    pod_control: Arc<FakePodControl>,
    adapter: RcInformerAdapter,
    controller: crate::replicaset::ReplicaSetController,
}

fn fixture() -> Fixture {
    let mirror = Indexer::new();
    let pods = Indexer::new();
    let client = Arc::new(FakeReplicaSetClient::new());
    let pod_control = Arc::new(FakePodControl::new());
    let controller = ReplicationManager::controller(
        mirror.clone(),
        pods.clone(),
        client.clone(),
        pod_control.clone(),
        None,
    );
    let adapter = RcInformerAdapter::new(mirror.clone(), controller.event_handlers().clone());
    Fixture {
        mirror,
        pods,
        client,
        pod_control,
        adapter,
        controller,
    }
}

/// Upstream's `TestSyncReplicationControllerCreates`: pods created for an RC are controlled
/// by the RC (apiVersion v1, kind ReplicationController).
#[tokio::test]
async fn creates_pods_controlled_by_the_rc() {
    let f = fixture();
    let rc = rc(2);
    f.adapter.on_add(Arc::new(rc.clone()), true);
    assert_eq!(
        f.controller.queue().len(),
        1,
        "the adapter forwarded the add"
    );
    f.client.insert(rc_to_rs(&rc));
    f.controller
        .sync("default/frontend")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.pod_control.templates().len(), 2);
    let refs = f.pod_control.controller_refs();
    assert_eq!(refs[0].kind, "ReplicationController");
    assert_eq!(refs[0].api_version, "v1");
    assert_eq!(refs[0].uid, "rc-uid");
}

/// Upstream's `TestSyncReplicationControllerDeletes` and status: extra pods are deleted and
/// the status written has the RC's numbers.
#[tokio::test]
async fn deletes_extra_pods_and_writes_status() {
    let f = fixture();
    let rc = rc(1);
    f.adapter.on_add(Arc::new(rc.clone()), true);
    f.client.insert(rc_to_rs(&rc));
    for i in 0..3 {
        let p = pod(&format!("frontend-{i}"))
            .namespace("default")
            .uid(format!("p{i}"))
            .labels(&[("app", "web")])
            .owner(controller_ref_of(&rc))
            .node("n")
            .phase("Running")
            .ready()
            .build();
        let _ = f.pods.add(Arc::new(p));
    }
    f.controller
        .sync("default/frontend")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.pod_control.deleted_pod_names().len(), 2);
    let status = f
        .client
        .actions()
        .into_iter()
        .find_map(|a| match a {
            ReplicaSetAction::UpdateStatus(rs) => rs.status,
            ReplicaSetAction::Get { .. } => None,
        })
        .unwrap_or_default();
    assert_eq!(status.replicas, 3);
    assert_eq!(status.ready_replicas, Some(3));
}

/// The mirror follows the RC informer, and a deleted RC leaves it.
#[tokio::test]
async fn the_mirror_follows_the_rc_informer() {
    let f = fixture();
    let rc1 = Arc::new(rc(1));
    f.adapter.on_add(Arc::clone(&rc1), true);
    let mut scaled = rc(4);
    scaled.metadata.resource_version = Some("2".into());
    f.adapter.on_update(Arc::clone(&rc1), Arc::new(scaled));
    let mirrored = f.mirror.get_by_key("default/frontend");
    assert_eq!(
        mirrored
            .and_then(|rs| rs.spec.clone())
            .and_then(|s| s.replicas),
        Some(4)
    );
    f.adapter.on_delete(DeletedObject::Object(rc1));
    assert!(f.mirror.get_by_key("default/frontend").is_none());
}
