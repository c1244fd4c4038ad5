//! Unit tests of the attach/detach controller, after upstream's `attach_detach_controller_test.go` and `reconciler_test.go`: caches seeded directly, reconcile passes run on paused time, the fake client's actions counted.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment, VolumeAttachmentStatus};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::store::Indexer;
use serde_json::json;
use tokio::time::Duration;

use super::*;
use crate::volume::attachdetach::client::{Action, FakeAttachDetachClient, Verb};
use crate::volume::attachdetach::reconciler::ForceDetachReason;

const DRIVER: &str = "hostpath.csi.example.com";
const NODE: &str = "node-1";

fn from<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Arc<T> {
    Arc::new(serde_json::from_value(value).expect("valid object"))
}

fn node(name: &str, managed: bool, in_use: &[&str]) -> Arc<Node> {
    let annotations = if managed {
        json!({CONTROLLER_MANAGED_ATTACH_DETACH_ANNOTATION: "true"})
    } else {
        json!({})
    };
    from(json!({
        "metadata": {"name": name, "annotations": annotations},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "volumesInUse": in_use,
        },
    }))
}

fn pod(name: &str, node: &str, claim: &str) -> Arc<Pod> {
    from(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "busybox"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
        "status": {"phase": "Running"},
    }))
}

fn claim(name: &str, volume: &str) -> Arc<PersistentVolumeClaim> {
    from(json!({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"volumeName": volume},
        "status": {"phase": "Bound"},
    }))
}

fn csi_volume(name: &str, driver: &str) -> Arc<PersistentVolume> {
    from(json!({
        "metadata": {"name": name},
        "spec": {"csi": {"driver": driver, "volumeHandle": format!("handle-{name}")}},
    }))
}

fn driver(name: &str, attach_required: bool) -> Arc<CSIDriver> {
    from(json!({"metadata": {"name": name}, "spec": {"attachRequired": attach_required}}))
}

struct Fixture {
    caches: AttachDetachCaches,
    client: Arc<FakeAttachDetachClient>,
    recorder: FakeRecorder,
    controller: Arc<AttachDetachController>,
}

impl Fixture {
    /// A managed node with pod `p` using claim `c` bound to CSI volume `pv`.
    fn new() -> Self {
        Self::with_options(AttachDetachControllerOptions::default())
    }

    fn with_options(options: AttachDetachControllerOptions) -> Self {
        let caches = AttachDetachCaches {
            pods: Indexer::new(),
            nodes: Indexer::new(),
            claims: Indexer::new(),
            volumes: Indexer::new(),
            attachments: Indexer::new(),
            drivers: Indexer::new(),
        };
        let client = Arc::new(FakeAttachDetachClient::new());
        let recorder = FakeRecorder::new();
        let controller = Arc::new(AttachDetachController::with_caches(
            caches.clone(),
            client.clone(),
            Arc::new(recorder.clone()),
            options,
        ));
        let fixture = Self {
            caches,
            client,
            recorder,
            controller,
        };
        fixture.add_node(node(NODE, true, &[]));
        fixture.caches.claims.add(claim("c", "pv")).expect("add");
        fixture
            .caches
            .volumes
            .add(csi_volume("pv", DRIVER))
            .expect("add");
        fixture
    }

    fn add_node(&self, n: Arc<Node>) {
        self.caches.nodes.update(n.clone()).expect("add");
        self.controller.event_handlers().node_changed(&n);
    }

    fn add_pod(&self, p: Arc<Pod>) {
        self.caches.pods.update(p.clone()).expect("add");
        self.controller.event_handlers().pod_changed(&p);
    }

    fn delete_pod(&self, p: &Pod) {
        self.caches.pods.delete(p).expect("delete");
        self.controller.event_handlers().pod_deleted(p);
    }

    /// The external attacher: every VolumeAttachment the fake holds shows up attached (or
    /// failed with `error`) in the cache.
    fn attacher(&self, error: Option<&str>) {
        for va in self.client.attachments().into_values() {
            let mut va: VolumeAttachment = va;
            va.status = Some(VolumeAttachmentStatus {
                attached: error.is_none(),
                attach_error: error.map(|m| k8s_openapi::api::storage::v1::VolumeError {
                    message: Some(m.to_owned()),
                    ..Default::default()
                }),
                ..Default::default()
            });
            self.caches.attachments.update(Arc::new(va)).expect("add");
        }
        let names = self.client.attachments();
        for va in self.caches.attachments.list() {
            if !names.contains_key(va.metadata.name.as_deref().unwrap_or_default()) {
                self.caches.attachments.delete(&va).expect("delete");
            }
        }
    }

    /// One reconciler pass, then lets the operations it started run for `for_` of paused time.
    async fn pass(&self, for_: Duration) {
        self.controller.reconcile_once().await;
        settle(for_).await;
    }

    fn count(&self, verb: Verb) -> usize {
        self.client
            .actions()
            .iter()
            .filter(|a| {
                matches!(
                    (a, verb),
                    (
                        Action::CreateVolumeAttachment(_),
                        Verb::CreateVolumeAttachment
                    ) | (
                        Action::DeleteVolumeAttachment(_),
                        Verb::DeleteVolumeAttachment
                    ) | (Action::PatchNodeStatus(..), Verb::PatchNodeStatus)
                )
            })
            .count()
    }

    fn last_node_patch(&self) -> Option<(String, Vec<String>)> {
        self.client
            .actions()
            .into_iter()
            .rev()
            .find_map(|a| match a {
                Action::PatchNodeStatus(node, volumes) => Some((node, volumes)),
                _ => None,
            })
    }
}

async fn settle(for_: Duration) {
    let steps = (for_.as_millis() / 100).max(1);
    for _ in 0..steps {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        tokio::time::advance(Duration::from_millis(100)).await;
    }
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

fn volume_name() -> String {
    unique_volume_name(DRIVER, "handle-pv")
}

#[tokio::test(start_paused = true)]
async fn a_pod_with_a_csi_volume_gets_a_volume_attachment_and_its_node_lists_it_once_attached() {
    let f = Fixture::new();
    f.add_pod(pod("p", NODE, "c"));
    f.pass(Duration::from_millis(100)).await;
    let created: Vec<VolumeAttachment> = f
        .client
        .actions()
        .into_iter()
        .filter_map(|a| match a {
            Action::CreateVolumeAttachment(va) => Some(va),
            _ => None,
        })
        .collect();
    assert_eq!(created.len(), 1);
    let va = &created[0];
    assert_eq!(
        va.metadata.name.as_deref(),
        Some(attachment_name("handle-pv", DRIVER, NODE).as_str())
    );
    assert_eq!(va.spec.attacher, DRIVER);
    assert_eq!(va.spec.node_name, NODE);
    assert_eq!(va.spec.source.persistent_volume_name.as_deref(), Some("pv"));
    assert!(
        f.controller.volumes_to_report(NODE).is_empty(),
        "not reported before attached"
    );

    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    assert_eq!(f.controller.volumes_to_report(NODE), vec![volume_name()]);
    f.pass(Duration::from_millis(100)).await;
    assert_eq!(
        f.last_node_patch(),
        Some((NODE.to_owned(), vec![volume_name()]))
    );
    assert_eq!(f.count(Verb::CreateVolumeAttachment), 1, "no second attach");
    let events = f.recorder.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, SUCCESSFUL_ATTACH_VOLUME);
    assert_eq!(
        events[0].message,
        "AttachVolume.Attach succeeded for volume \"pv\" "
    );
    assert_eq!(events[0].regarding.name.as_deref(), Some("p"));
}

#[tokio::test(start_paused = true)]
async fn pods_on_unmanaged_nodes_and_volumes_of_drivers_without_attach_are_not_attached() {
    let f = Fixture::new();
    f.add_node(node("node-2", false, &[]));
    f.add_pod(pod("elsewhere", "node-2", "c"));
    f.caches.claims.add(claim("c2", "pv2")).expect("add");
    f.caches
        .volumes
        .add(csi_volume("pv2", "no-attach.example.com"))
        .expect("add");
    f.caches
        .drivers
        .add(driver("no-attach.example.com", false))
        .expect("add");
    f.add_pod(pod("unattachable", NODE, "c2"));
    let mut unbound = (*claim("c3", "pv")).clone();
    unbound.status = None;
    f.caches.claims.add(Arc::new(unbound)).expect("add");
    f.add_pod(pod("unbound", NODE, "c3"));
    f.pass(Duration::from_millis(300)).await;
    assert!(f.client.actions().is_empty(), "{:?}", f.client.actions());
}

#[tokio::test(start_paused = true)]
async fn a_deleted_pods_volume_is_detached_once_the_node_stops_using_it() {
    let f = Fixture::new();
    let p = pod("p", NODE, "c");
    f.add_pod(p.clone());
    f.pass(Duration::from_millis(100)).await;
    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    f.add_node(node(NODE, true, &[&volume_name()]));

    f.delete_pod(&p);
    f.pass(Duration::from_millis(300)).await;
    assert_eq!(
        f.count(Verb::DeleteVolumeAttachment),
        0,
        "mounted on a healthy node"
    );
    assert_eq!(f.controller.volumes_to_report(NODE), vec![volume_name()]);

    f.add_node(node(NODE, true, &[]));
    f.controller.reconcile_once().await;
    assert_eq!(
        f.last_node_patch(),
        Some((NODE.to_owned(), vec![])),
        "the node stops listing the volume before the detach"
    );
    settle(Duration::from_millis(100)).await;
    assert_eq!(f.count(Verb::DeleteVolumeAttachment), 1);
    f.attacher(None);
    settle(Duration::from_millis(200)).await;
    assert!(
        !f.controller
            .state
            .lock()
            .expect("lock")
            .asw
            .is_attached(&volume_name(), NODE)
    );
}

#[tokio::test(start_paused = true)]
async fn an_attach_error_is_reported_on_the_pod_and_retried_with_back_off() {
    let f = Fixture::new();
    f.add_pod(pod("p", NODE, "c"));
    f.pass(Duration::from_millis(100)).await;
    f.attacher(Some("rpc error: busy"));
    f.pass(Duration::from_millis(200)).await;
    let events = f.recorder.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].reason, FAILED_ATTACH_VOLUME);
    assert_eq!(
        events[0].message,
        "AttachVolume.Attach failed for volume \"pv\" : rpc error: busy"
    );
    assert_eq!(f.count(Verb::CreateVolumeAttachment), 1);
    // Backing off 500 ms: the next pass starts nothing, one after the back-off retries
    // (the VolumeAttachment exists, so the create is refused and the wait starts again).
    f.pass(Duration::from_millis(100)).await;
    assert_eq!(f.count(Verb::CreateVolumeAttachment), 1);
    settle(Duration::from_millis(500)).await;
    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    assert_eq!(f.count(Verb::CreateVolumeAttachment), 2);
    assert_eq!(f.controller.volumes_to_report(NODE), vec![volume_name()]);
}

#[tokio::test(start_paused = true)]
async fn the_actual_state_starts_from_node_status_and_volume_attachments() {
    let f = Fixture::new();
    let reported = unique_volume_name(DRIVER, "old");
    let mut n = (*node(NODE, true, &[])).clone();
    if let Some(status) = n.status.as_mut() {
        status.volumes_attached = Some(vec![k8s_openapi::api::core::v1::AttachedVolume {
            name: reported.clone(),
            device_path: String::new(),
        }]);
    }
    f.add_node(Arc::new(n));
    f.controller.populate_actual_state_of_world();
    f.controller.populate_desired_state_of_world();
    assert_eq!(f.controller.volumes_to_report(NODE), vec![reported.clone()]);
    f.pass(Duration::from_millis(100)).await;
    assert_eq!(
        f.client.actions().first(),
        Some(&Action::PatchNodeStatus(NODE.to_owned(), vec![])),
        "a volume no pod needs and the node does not use is dropped, then detached"
    );
    assert!(
        f.client
            .actions()
            .contains(&Action::DeleteVolumeAttachment(attachment_name(
                "old", DRIVER, NODE
            )))
    );
}

#[tokio::test(start_paused = true)]
async fn the_reconcile_sync_reattaches_a_volume_whose_attachment_is_gone() {
    let f = Fixture::with_options(AttachDetachControllerOptions {
        reconcile_sync_period: Duration::from_secs(1),
        ..AttachDetachControllerOptions::default()
    });
    f.add_pod(pod("p", NODE, "c"));
    f.pass(Duration::from_millis(100)).await;
    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    assert_eq!(f.controller.volumes_to_report(NODE), vec![volume_name()]);
    // Someone deletes the VolumeAttachment behind the controller's back.
    f.client
        .delete_volume_attachment(&attachment_name("handle-pv", DRIVER, NODE))
        .await
        .expect("delete");
    f.attacher(None);
    for _ in 0..12 {
        f.pass(Duration::from_millis(100)).await;
    }
    assert_eq!(
        f.count(Verb::CreateVolumeAttachment),
        2,
        "{:?}",
        f.client.actions()
    );
}

#[tokio::test(start_paused = true)]
async fn a_disabled_reconcile_sync_never_rechecks_attached_volumes() {
    let f = Fixture::with_options(AttachDetachControllerOptions {
        reconcile_sync_period: Duration::from_secs(1),
        disable_reconcile_sync: true,
        ..AttachDetachControllerOptions::default()
    });
    f.add_pod(pod("p", NODE, "c"));
    f.pass(Duration::from_millis(100)).await;
    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    f.client
        .delete_volume_attachment(&attachment_name("handle-pv", DRIVER, NODE))
        .await
        .expect("delete");
    f.attacher(None);
    for _ in 0..20 {
        f.pass(Duration::from_millis(100)).await;
    }
    assert_eq!(f.count(Verb::CreateVolumeAttachment), 1);
    assert_eq!(f.controller.volumes_to_report(NODE), vec![volume_name()]);
}

#[tokio::test(start_paused = true)]
async fn the_populator_drops_pods_gone_from_the_cache_and_a_claim_sync_adds_late_bound_pods() {
    let f = Fixture::new();
    let mut unbound = (*claim("c", "pv")).clone();
    unbound.status = None;
    f.caches.claims.update(Arc::new(unbound)).expect("update");
    let p = pod("p", NODE, "c");
    f.add_pod(p.clone());
    assert!(!f.controller.desired(&volume_name(), NODE));
    f.caches.claims.update(claim("c", "pv")).expect("update");
    f.controller.sync_claim("ns/c");
    assert!(f.controller.desired(&volume_name(), NODE));
    // The pod's delete event was missed: the populator notices.
    f.caches.pods.delete(&p).expect("delete");
    f.controller.find_and_remove_deleted_pods();
    assert!(!f.controller.desired(&volume_name(), NODE));
}

#[tokio::test(start_paused = true)]
async fn a_failed_node_status_update_holds_the_detach_back() {
    let f = Fixture::new();
    let p = pod("p", NODE, "c");
    f.add_pod(p.clone());
    f.pass(Duration::from_millis(100)).await;
    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    f.client.fail(
        Verb::PatchNodeStatus,
        1,
        kcm_machinery::controller::api_status::internal_error("etcd down"),
    );
    f.delete_pod(&p);
    f.pass(Duration::from_millis(100)).await;
    assert_eq!(f.count(Verb::DeleteVolumeAttachment), 0);
    f.pass(Duration::from_millis(800)).await;
    f.pass(Duration::from_millis(100)).await;
    assert_eq!(f.count(Verb::DeleteVolumeAttachment), 1);
}

// Multi-Attach, after upstream's `reconciler_test.go`.

fn csi_volume_with_modes(name: &str, driver: &str, modes: &[&str]) -> Arc<PersistentVolume> {
    from(json!({
        "metadata": {"name": name},
        "spec": {
            "accessModes": modes,
            "csi": {"driver": driver, "volumeHandle": format!("handle-{name}")},
        },
    }))
}

fn created(f: &Fixture) -> Vec<String> {
    f.client
        .actions()
        .into_iter()
        .filter_map(|a| match a {
            Action::CreateVolumeAttachment(va) => Some(va.spec.node_name),
            _ => None,
        })
        .collect()
}

/// `(type, reason, pod, message)` of every event.
fn events(f: &Fixture) -> Vec<(EventType, String, String, String)> {
    f.recorder
        .events()
        .into_iter()
        .map(|e| {
            (
                e.type_,
                e.reason,
                e.regarding.name.unwrap_or_default(),
                e.message,
            )
        })
        .collect()
}

/// Upstream's `Test_Run_OneVolumeAttachAndDetachMultipleNodesWithReadWriteOnce`: two pods on
/// two nodes want one ReadWriteOnce volume at once; it is attached to one node only, the
/// other pod is told why once, and the attach proceeds when the first node lets it go.
#[tokio::test(start_paused = true)]
async fn a_read_write_once_volume_is_attached_to_one_node_until_the_other_detaches() {
    let f = Fixture::new();
    f.caches
        .volumes
        .update(csi_volume_with_modes("pv", DRIVER, &["ReadWriteOnce"]))
        .expect("update");
    f.add_node(node("node-2", true, &[]));
    let p1 = pod("p1", NODE, "c");
    f.add_pod(p1.clone());
    f.add_pod(pod("p2", "node-2", "c"));
    f.pass(Duration::from_millis(100)).await;
    assert_eq!(created(&f), [NODE], "one attach for both pods");
    f.attacher(None);
    for _ in 0..5 {
        f.pass(Duration::from_millis(100)).await;
    }
    assert_eq!(
        created(&f),
        [NODE],
        "never a second node while the first holds it"
    );
    assert_eq!(
        events(&f),
        [
            (
                EventType::Normal,
                SUCCESSFUL_ATTACH_VOLUME.to_owned(),
                "p1".to_owned(),
                "AttachVolume.Attach succeeded for volume \"pv\" ".to_owned()
            ),
            (
                EventType::Warning,
                FAILED_ATTACH_VOLUME.to_owned(),
                "p2".to_owned(),
                "Multi-Attach error for volume \"pv\" Volume is already used by pod(s) p1"
                    .to_owned()
            ),
        ],
        "reported once, not on every pass"
    );

    // p1 goes and node-1 does not mount the volume: detached, then attached to node-2.
    f.delete_pod(&p1);
    f.pass(Duration::from_millis(100)).await;
    assert_eq!(f.count(Verb::DeleteVolumeAttachment), 1);
    assert_eq!(created(&f), [NODE], "not before the detach completes");
    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    f.pass(Duration::from_millis(100)).await;
    assert_eq!(created(&f), [NODE, "node-2"]);
    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    assert_eq!(
        f.controller.volumes_to_report("node-2"),
        vec![volume_name()]
    );
    assert!(f.controller.volumes_to_report(NODE).is_empty());
    assert_eq!(events(&f).len(), 3);
    assert_eq!(events(&f)[2].1, SUCCESSFUL_ATTACH_VOLUME);
    assert_eq!(events(&f)[2].2, "p2");
}

/// A pod wanting a volume still mounted on the node its old pod left: no pod there wants it,
/// so the pod is told the volume is exclusively attached elsewhere.
#[tokio::test(start_paused = true)]
async fn a_volume_still_mounted_by_a_node_no_pod_wants_is_reported_exclusively_attached() {
    let f = Fixture::new();
    f.caches
        .volumes
        .update(csi_volume_with_modes("pv", DRIVER, &["ReadWriteOncePod"]))
        .expect("update");
    let p1 = pod("p1", NODE, "c");
    f.add_pod(p1.clone());
    f.pass(Duration::from_millis(100)).await;
    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    f.add_node(node(NODE, true, &[&volume_name()]));
    f.delete_pod(&p1);
    f.add_node(node("node-2", true, &[]));
    f.add_pod(pod("p2", "node-2", "c"));
    for _ in 0..3 {
        f.pass(Duration::from_millis(100)).await;
    }
    assert_eq!(f.count(Verb::DeleteVolumeAttachment), 0, "still mounted");
    assert_eq!(created(&f), [NODE]);
    assert_eq!(
        events(&f).last(),
        Some(&(
            EventType::Warning,
            FAILED_ATTACH_VOLUME.to_owned(),
            "p2".to_owned(),
            "Multi-Attach error for volume \"pv\" Volume is already exclusively attached to one node and can't be attached to another".to_owned()
        ))
    );
    assert_eq!(events(&f).len(), 2);
}

/// Upstream's `Test_Run_OneVolumeAttachAndDetachMultipleNodesWithReadWriteMany`.
#[tokio::test(start_paused = true)]
async fn a_read_write_many_volume_is_attached_to_both_nodes() {
    let f = Fixture::new();
    f.caches
        .volumes
        .update(csi_volume_with_modes("pv", DRIVER, &["ReadWriteMany"]))
        .expect("update");
    f.add_node(node("node-2", true, &[]));
    f.add_pod(pod("p1", NODE, "c"));
    f.add_pod(pod("p2", "node-2", "c"));
    f.pass(Duration::from_millis(100)).await;
    assert_eq!(created(&f), [NODE, "node-2"]);
    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    assert!(events(&f).iter().all(|e| e.1 == SUCCESSFUL_ATTACH_VOLUME));
    assert_eq!(events(&f).len(), 2);
}

// Metrics.

fn fixture_with_metrics() -> (Fixture, Arc<AttachDetachMetrics>) {
    let m = Arc::new(AttachDetachMetrics::new());
    let f = Fixture::with_options(AttachDetachControllerOptions {
        controller_metrics: Some(Arc::clone(&m)),
        ..AttachDetachControllerOptions::default()
    });
    (f, m)
}

/// Upstream's `Test_Run_OneVolumeDetachOnOutOfServiceTaintedNode` and
/// `Test_Run_Positive_OneDesiredVolumeAttachThenDetachWithMountedVolume`: a detach that does
/// not wait for the unmount is counted with its reason.
#[tokio::test(start_paused = true)]
async fn forced_detaches_are_counted_by_reason() {
    let (f, m) = fixture_with_metrics();
    let p = pod("p", NODE, "c");
    f.add_pod(p.clone());
    f.pass(Duration::from_millis(100)).await;
    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    // Still mounted, and the node is out of service: detached at once.
    let tainted: Arc<Node> = from(json!({
        "metadata": {"name": NODE, "annotations": {CONTROLLER_MANAGED_ATTACH_DETACH_ANNOTATION: "true"}},
        "spec": {"taints": [{"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}]},
        "status": {"conditions": [{"type": "Ready", "status": "False"}], "volumesInUse": [volume_name()]},
    }));
    f.add_node(tainted);
    f.delete_pod(&p);
    f.pass(Duration::from_millis(100)).await;
    assert_eq!(f.count(Verb::DeleteVolumeAttachment), 1);
    assert_eq!(m.forced_detaches(ForceDetachReason::OutOfService), 1);
    assert_eq!(m.forced_detaches(ForceDetachReason::Timeout), 0);

    // Mounted on an unhealthy node: forced off once the unmount wait is over.
    let (f, m) = fixture_with_metrics();
    let p = pod("p", NODE, "c");
    f.add_pod(p.clone());
    f.pass(Duration::from_millis(100)).await;
    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    let unhealthy: Arc<Node> = from(json!({
        "metadata": {"name": NODE, "annotations": {CONTROLLER_MANAGED_ATTACH_DETACH_ANNOTATION: "true"}},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}], "volumesInUse": [volume_name()]},
    }));
    f.add_node(unhealthy);
    f.delete_pod(&p);
    f.pass(Duration::from_millis(100)).await;
    assert_eq!(f.count(Verb::DeleteVolumeAttachment), 0);
    tokio::time::advance(crate::volume::attachdetach::reconciler::MAX_WAIT_FOR_UNMOUNT).await;
    f.pass(Duration::from_millis(100)).await;
    assert_eq!(f.count(Verb::DeleteVolumeAttachment), 1);
    assert_eq!(m.forced_detaches(ForceDetachReason::Timeout), 1);
    assert_eq!(m.forced_detaches(ForceDetachReason::OutOfService), 0);
}

#[tokio::test(start_paused = true)]
async fn the_state_collector_counts_desired_attached_and_in_use_volumes() {
    let (f, m) = fixture_with_metrics();
    let mut registry = prometheus_client::registry::Registry::default();
    m.register(&mut registry);
    f.controller.register_state_metrics(&mut registry);
    let encode = |registry: &prometheus_client::registry::Registry| {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
        text
    };
    assert!(!encode(&registry).contains("attachdetach_controller_total_volumes{"));
    f.add_pod(pod("p", NODE, "c"));
    f.pass(Duration::from_millis(100)).await;
    let plugin = format!("kubernetes.io/csi:{DRIVER}");
    let text = encode(&registry);
    for line in [
        format!(
            "attachdetach_controller_total_volumes{{plugin_name=\"{plugin}\",state=\"desired_state_of_world\"}} 1"
        ),
        format!(
            "storage_count_attachable_volumes_in_use{{node=\"{NODE}\",volume_plugin=\"{plugin}\"}} 1"
        ),
    ] {
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
    assert!(!text.contains("actual_state_of_world"), "{text}");
    f.attacher(None);
    f.pass(Duration::from_millis(200)).await;
    let text = encode(&registry);
    let actual = format!(
        "attachdetach_controller_total_volumes{{plugin_name=\"{plugin}\",state=\"actual_state_of_world\"}} 1"
    );
    assert!(text.contains(&actual), "missing {actual} in\n{text}");
    // A volume known only from a node's status has no spec: not counted, as upstream.
    let mut n = (*node(NODE, true, &[])).clone();
    if let Some(status) = n.status.as_mut() {
        status.volumes_attached = Some(vec![k8s_openapi::api::core::v1::AttachedVolume {
            name: unique_volume_name(DRIVER, "old"),
            device_path: String::new(),
        }]);
    }
    f.add_node(Arc::new(n));
    f.controller.populate_actual_state_of_world();
    assert_eq!(
        f.controller
            .total_volumes_count()
            .get(&("actual_state_of_world".to_owned(), plugin.clone())),
        Some(&1)
    );
    m.forced_detach(ForceDetachReason::Timeout);
    assert!(
        encode(&registry).contains(
            "attach_detach_controller_attachdetach_controller_forced_detaches_total{reason=\"timeout\"} 1"
        )
    );
}
