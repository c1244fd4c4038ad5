//! Unit tests of the DaemonSet controller: caches seeded directly, fake pod control, revision
//! and DaemonSet clients, `sync(key)` called and actions counted — as upstream's
//! `daemon_controller_test.go` and `update_test.go`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcm_machinery::controller::api_status;
use kcm_machinery::controller::history::FakeRevisionClient;
use kcm_machinery::controller::pod_control::FakePodControl;
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::store::Indexer;
use kcm_testing::{
    MetaBuilder, PodSpecBuilder, container, controller_ref_of, daemon_set, node, node_condition,
    pod, pod_template, taint,
};

use super::*;
use crate::daemon::client::FakeDaemonSetClient;
use crate::daemon::util::{DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY, get_target_node_name};

// ---------------------------------------------------------------------------------------------
// Builders and fixture
// ---------------------------------------------------------------------------------------------

fn now() -> Timestamp {
    "2024-05-01T12:00:00Z"
        .parse()
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

fn uid() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("uid-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A DaemonSet `default/foo` selecting `name=simple-daemon`, generation 1, as upstream's
/// `newDaemonSet` (RollingUpdate, maxUnavailable 1, maxSurge 0, history limit 10).
fn new_daemon_set() -> kcm_testing::DaemonSetBuilder {
    daemon_set("foo")
        .namespace("default")
        .uid(uid())
        .generation(1)
        .template_generation(1)
        .selecting(&[("name", "simple-daemon"), ("type", "production")])
        .container(container("foo").image("foo/bar"))
        .max_unavailable(IntOrString::Int(1))
        .max_surge(IntOrString::Int(0))
        .revision_history_limit(10)
}

/// A ready node `name` with `labels`.
fn new_node(name: &str, labels: &[(&str, &str)]) -> Node {
    node(name)
        .labels(labels)
        .default_spec()
        .condition(node_condition("Ready", "True"))
        .build()
}

struct Fixture {
    controller: DaemonSetsController,
    ds_cache: Indexer<DaemonSet>,
    pod_cache: Indexer<Pod>,
    node_cache: Indexer<Node>,
    ds_client: Arc<FakeDaemonSetClient>,
    revisions: Arc<FakeRevisionClient>,
    pods: Arc<FakePodControl>,
    recorder: Arc<FakeRecorder>,
}

fn fixture() -> Fixture {
    fixture_with(DaemonSetsControllerOptions::default())
}

fn fixture_with(options: DaemonSetsControllerOptions) -> Fixture {
    let ds_cache = Indexer::new();
    let history_cache = Indexer::new();
    let pod_cache = Indexer::new();
    let node_cache = Indexer::new();
    let ds_client = Arc::new(FakeDaemonSetClient::new());
    let revisions = Arc::new(FakeRevisionClient::with_cache(history_cache.clone()));
    let pods = Arc::new(FakePodControl::new());
    let recorder = Arc::new(FakeRecorder::new());
    let controller = DaemonSetsController::with_caches(
        ds_cache.clone(),
        history_cache.clone(),
        pod_cache.clone(),
        node_cache.clone(),
        ds_client.clone(),
        revisions.clone(),
        pods.clone(),
        recorder.clone(),
        options,
    )
    .with_clock(Arc::new(now));
    Fixture {
        controller,
        ds_cache,
        pod_cache,
        node_cache,
        ds_client,
        revisions,
        pods,
        recorder,
    }
}

impl Fixture {
    fn add_ds(&self, ds: &DaemonSet) {
        let _ = self.ds_cache.update(Arc::new(ds.clone()));
        self.ds_client.insert(ds.clone());
    }

    fn add_nodes(&self, count: usize, labels: &[(&str, &str)]) {
        for i in 0..count {
            let _ = self
                .node_cache
                .add(Arc::new(new_node(&format!("node-{i}"), labels)));
        }
    }

    /// A pod of `ds` on `node`, owned, labelled with `hash` (empty: the hash of `ds`'s current
    /// template, as upstream's `newPod`), Running and ready (since `ready`).
    fn daemon_pod(&self, ds: &DaemonSet, node: &str, hash: &str, ready: Option<Timestamp>) -> Pod {
        let current = template_hash(ds);
        let hash = if hash.is_empty() {
            current.as_str()
        } else {
            hash
        };
        let labels: Vec<(&str, &str)> = vec![
            ("name", "simple-daemon"),
            ("type", "production"),
            (DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY, hash),
        ];
        let mut p = pod(&format!(
            "{}-{node}-{}",
            ds.metadata.name.as_deref().unwrap_or_default(),
            uid()
        ))
        .namespace("default")
        .uid(uid())
        .resource_version("1")
        .labels(&labels)
        .owner(controller_ref_of(ds))
        .node(node)
        .created_at(now() - SignedDuration::from_secs(60))
        .phase("Running");
        if let Some(since) = ready {
            p = p.ready_since(since);
        }
        p.build()
    }

    /// Adds `pod` to the cache and tells the controller, as the informer would.
    fn observe_pod(&self, pod: &Pod) {
        let _ = self.pod_cache.add(Arc::new(pod.clone()));
        self.controller.event_handlers().add_pod(pod);
    }

    fn remove_pod(&self, name: &str) {
        let key = format!("default/{name}");
        if let Some(p) = self.pod_cache.get_by_key(&key) {
            let _ = self.pod_cache.delete(&p);
            self.controller
                .event_handlers()
                .delete_pod(&kcm_machinery::informer::delta::DeletedObject::Object(p));
        }
    }

    async fn sync(&self, ds: &DaemonSet) -> Result<()> {
        self.controller.sync(&key(ds)).await
    }

    /// The nodes of the recorded creations (from their pinning affinity), sorted.
    fn created_nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self
            .pods
            .templates()
            .into_iter()
            .filter_map(|t| {
                get_target_node_name(&Pod {
                    spec: t.spec,
                    ..Pod::default()
                })
                .ok()
            })
            .collect();
        nodes.sort();
        nodes
    }

    /// The hash label of the revision currently matching `ds` (created by a sync).
    fn current_hash(&self, ds: &DaemonSet) -> String {
        self.revisions
            .objects()
            .into_iter()
            .find(|r| revision_history_matches(ds, r))
            .and_then(|r| {
                r.metadata
                    .labels
                    .and_then(|l| l.get(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY).cloned())
            })
            .unwrap_or_default()
    }

    /// The last status written.
    fn last_status(&self) -> k8s_openapi::api::apps::v1::DaemonSetStatus {
        self.ds_client
            .status_updates()
            .last()
            .and_then(|d| d.status.clone())
            .unwrap_or_default()
    }

    /// Every pod creation and deletion so far observed, as if the informer had seen them.
    fn settle_expectations(&self, ds: &DaemonSet) {
        self.controller.expectations().delete_expectations(&key(ds));
    }
}

/// The pod-template hash naming `ds`'s current revision.
fn template_hash(ds: &DaemonSet) -> String {
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    kcm_machinery::controller::compute_hash(
        &template,
        ds.status.as_ref().and_then(|s| s.collision_count),
    )
}

fn revision_history_matches(ds: &DaemonSet, r: &ControllerRevision) -> bool {
    super::super::revision_history::daemon_set_matches(ds, r)
}

fn key(ds: &DaemonSet) -> String {
    format!(
        "{}/{}",
        ds.metadata.namespace.as_deref().unwrap_or_default(),
        ds.metadata.name.as_deref().unwrap_or_default()
    )
}

// ---------------------------------------------------------------------------------------------
// Creating and deleting daemon pods
// ---------------------------------------------------------------------------------------------

/// Upstream's `TestSimpleDaemonSetLaunchesPods`: one pod per node, pinned to it.
#[tokio::test]
async fn simple_daemon_set_launches_pods() {
    let f = fixture();
    f.add_nodes(5, &[]);
    let ds = new_daemon_set().build();
    f.add_ds(&ds);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(
        f.created_nodes(),
        ["node-0", "node-1", "node-2", "node-3", "node-4"]
    );
    assert!(f.pods.deleted_pod_names().is_empty());
    let template = &f.pods.templates()[0];
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    assert_eq!(
        labels.get("pod-template-generation").map(String::as_str),
        Some("1")
    );
    assert!(labels.contains_key(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY));
    let tolerations = template
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    assert_eq!(tolerations.len(), 6, "the default daemon tolerations");
    // Expectations hold the next pass until the informer has seen the five pods.
    assert!(
        !f.controller
            .expectations()
            .satisfied_expectations(&key(&ds))
    );
    let refs = f.pods.controller_refs();
    assert_eq!(refs[0].kind, "DaemonSet");
    assert_eq!(refs[0].controller, Some(true));
}

/// Upstream's `TestSimpleDaemonSetScheduleDaemonSetPodsLaunchesPods` /
/// `TestNodeSelectorDaemonLaunchesPods`: only nodes matching the nodeSelector.
#[tokio::test]
async fn node_selector_limits_the_nodes() {
    let f = fixture();
    f.add_nodes(3, &[]);
    let _ = f
        .node_cache
        .add(Arc::new(new_node("simple", &[("color", "blue")])));
    let ds = new_daemon_set().node_selector(&[("color", "blue")]).build();
    f.add_ds(&ds);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(f.created_nodes(), ["simple"]);
    let status = f.last_status();
    assert_eq!(status.desired_number_scheduled, 1);
    assert_eq!(status.number_unavailable, Some(1));
}

/// Upstream's `TestNodeDaemonDoesNotLaunchPodsOnUnmatchedNodes` extended: a pod on a node the
/// DaemonSet no longer selects is deleted (the nodeSelector moves pods).
#[tokio::test]
async fn pods_on_nodes_that_no_longer_match_are_deleted() {
    let f = fixture();
    let _ = f
        .node_cache
        .add(Arc::new(new_node("blue", &[("color", "blue")])));
    let _ = f
        .node_cache
        .add(Arc::new(new_node("red", &[("color", "red")])));
    let ds = new_daemon_set().node_selector(&[("color", "blue")]).build();
    f.add_ds(&ds);
    let on_red = f.daemon_pod(&ds, "red", "", Some(now()));
    f.observe_pod(&on_red);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(f.created_nodes(), ["blue"]);
    assert_eq!(
        f.pods.deleted_pod_names(),
        [on_red.metadata.name.clone().unwrap_or_default()]
    );
    assert_eq!(f.last_status().number_misscheduled, 1);
}

/// Upstream's `TestDealsWithExistingPods`: excess pods on a node go, the oldest stays.
#[tokio::test]
async fn excess_daemon_pods_on_a_node_keep_the_oldest() {
    let f = fixture();
    f.add_nodes(2, &[]);
    let ds = new_daemon_set().build();
    f.add_ds(&ds);
    let old = f.daemon_pod(&ds, "node-0", "", Some(now()));
    let mut newer = f.daemon_pod(&ds, "node-0", "", Some(now()));
    newer.metadata.creation_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    f.observe_pod(&old);
    f.observe_pod(&newer);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(f.created_nodes(), ["node-1"]);
    assert_eq!(
        f.pods.deleted_pod_names(),
        [newer.metadata.name.clone().unwrap_or_default()]
    );
}

/// Upstream's `TestDaemonKillFailedPods` and `TestDaemonKillFailedPodsBackoff`: a failed pod
/// is deleted with a `FailedDaemonPod` warning, then not again until the back-off passed.
#[tokio::test(start_paused = true)]
async fn failed_pods_are_deleted_with_backoff() {
    let f = fixture();
    f.add_nodes(1, &[]);
    let ds = new_daemon_set().build();
    f.add_ds(&ds);
    let failed = f.daemon_pod(&ds, "node-0", "", None);
    let failed = Pod {
        status: Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Failed".into()),
            ..Default::default()
        }),
        ..failed
    };
    f.observe_pod(&failed);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(f.pods.deleted_pod_names().len(), 1);
    assert_eq!(f.recorder.reasons(), [FAILED_DAEMON_POD_REASON]);
    assert!(
        f.recorder.events()[0]
            .message
            .contains("will try to kill it")
    );

    // The deletion was not observed; the pod is still there and failed: backed off.
    f.settle_expectations(&ds);
    f.pods.clear();
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert!(f.pods.deleted_pod_names().is_empty(), "within the back-off");
    let backoff_key = super::super::sync::failed_pods_backoff_key(&ds, "node-0");
    assert_eq!(
        f.controller.failed_pods_backoff().get(&backoff_key),
        std::time::Duration::from_secs(1)
    );

    tokio::time::advance(std::time::Duration::from_millis(1100)).await;
    f.settle_expectations(&ds);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(f.pods.deleted_pod_names().len(), 1, "after the back-off");
    assert_eq!(
        f.controller.failed_pods_backoff().get(&backoff_key),
        std::time::Duration::from_secs(2)
    );
}

/// Succeeded daemon pods are deleted with a `SucceededDaemonPod` event.
#[tokio::test]
async fn succeeded_pods_are_deleted() {
    let f = fixture();
    f.add_nodes(1, &[]);
    let ds = new_daemon_set().build();
    f.add_ds(&ds);
    let mut done = f.daemon_pod(&ds, "node-0", "", None);
    if let Some(status) = done.status.as_mut() {
        status.phase = Some("Succeeded".into());
    }
    f.observe_pod(&done);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(f.pods.deleted_pod_names().len(), 1);
    assert_eq!(f.recorder.reasons(), [SUCCEEDED_DAEMON_POD_REASON]);
}

/// Upstream's taint tests (`TestTaintedNodeDaemonDoesNotLaunchIntolerantPods`,
/// `TestNodeDaemonLaunchesToleratePod`, `TestTaintOutOfDiskNodeDaemonLaunchesCriticalPod`
/// family) as a table: which nodes get a pod, which pods go.
#[tokio::test]
async fn taints_and_tolerations_table() {
    struct Case {
        name: &'static str,
        node: Node,
        tolerate: bool,
        existing: bool,
        want_create: bool,
        want_delete: bool,
    }
    let with_taint = |effect: &str| {
        let mut n = new_node("n", &[]);
        n.spec.get_or_insert_default().taints =
            Some(vec![taint("dedicated", effect).value("x").build()]);
        n
    };
    let cases = vec![
        Case {
            name: "NoSchedule: no new pod",
            node: with_taint("NoSchedule"),
            tolerate: false,
            existing: false,
            want_create: false,
            want_delete: false,
        },
        Case {
            name: "NoSchedule: existing pod stays",
            node: with_taint("NoSchedule"),
            tolerate: false,
            existing: true,
            want_create: false,
            want_delete: false,
        },
        Case {
            name: "NoExecute: existing pod evicted",
            node: with_taint("NoExecute"),
            tolerate: false,
            existing: true,
            want_create: false,
            want_delete: true,
        },
        Case {
            name: "tolerated NoSchedule: new pod",
            node: with_taint("NoSchedule"),
            tolerate: true,
            existing: false,
            want_create: true,
            want_delete: false,
        },
        Case {
            name: "cordoned: new pod (default toleration)",
            node: {
                let mut n = new_node("n", &[]);
                let spec = n.spec.get_or_insert_default();
                spec.unschedulable = Some(true);
                spec.taints = Some(vec![
                    taint("node.kubernetes.io/unschedulable", "NoSchedule").build(),
                ]);
                n
            },
            tolerate: false,
            existing: false,
            want_create: true,
            want_delete: false,
        },
        Case {
            name: "not ready NoExecute: existing pod stays (default toleration)",
            node: {
                let mut n = new_node("n", &[]);
                n.spec.get_or_insert_default().taints = Some(vec![
                    taint("node.kubernetes.io/not-ready", "NoExecute").build(),
                ]);
                n
            },
            tolerate: false,
            existing: true,
            want_create: false,
            want_delete: false,
        },
    ];
    for c in cases {
        let f = fixture();
        let _ = f.node_cache.add(Arc::new(c.node.clone()));
        let mut builder = new_daemon_set();
        if c.tolerate {
            builder = builder.template(
                pod_template()
                    .labels(&[("name", "simple-daemon"), ("type", "production")])
                    .container(container("foo").image("foo/bar"))
                    .toleration(kcm_testing::toleration("dedicated").exists()),
            );
        }
        let ds = builder.build();
        f.add_ds(&ds);
        if c.existing {
            let p = f.daemon_pod(&ds, "n", "", Some(now()));
            f.observe_pod(&p);
        }
        f.sync(&ds)
            .await
            .unwrap_or_else(|e| panic!("{}: sync: {e}", c.name));
        assert_eq!(
            !f.pods.templates().is_empty(),
            c.want_create,
            "{}: create",
            c.name
        );
        assert_eq!(
            !f.pods.deleted_pod_names().is_empty(),
            c.want_delete,
            "{}: delete",
            c.name
        );
    }
}

/// Upstream's `TestDaemonSetRespectsTermination` / `TestGetUnscheduledPodsWithoutNode`: an
/// unscheduled pod pinned to a node that is gone is deleted.
#[tokio::test]
async fn unscheduled_pods_for_missing_nodes_are_deleted() {
    let f = fixture();
    f.add_nodes(1, &[]);
    let ds = new_daemon_set().build();
    f.add_ds(&ds);
    let mut orphaned = f.daemon_pod(&ds, "gone", "", None);
    if let Some(spec) = orphaned.spec.as_mut() {
        spec.node_name = None;
        spec.affinity =
            Some(super::super::util::replace_daemon_set_pod_node_name_node_affinity(None, "gone"));
    }
    f.observe_pod(&orphaned);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(f.created_nodes(), ["node-0"]);
    assert_eq!(
        f.pods.deleted_pod_names(),
        [orphaned.metadata.name.clone().unwrap_or_default()]
    );
}

/// Upstream's `TestSimpleDaemonSetPodCreateErrors` / burst replicas: at most `burstReplicas`
/// creations per pass; a failing batch stops the slow start and lowers the expectations.
#[tokio::test]
async fn burst_and_slow_start_failures() {
    let f = fixture_with(DaemonSetsControllerOptions {
        burst_replicas: 3,
        ..DaemonSetsControllerOptions::default()
    });
    f.add_nodes(5, &[]);
    let ds = new_daemon_set().build();
    f.add_ds(&ds);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(f.pods.templates().len(), 3, "burst");

    let f = fixture();
    f.add_nodes(10, &[]);
    let ds = new_daemon_set().build();
    f.add_ds(&ds);
    f.pods.set_create_limit(2);
    let err = f.sync(&ds).await.err();
    assert!(matches!(err, Some(Error::SyncNodes { .. })), "{err:?}");
    // Batches of 1 and 2 were tried; the second failed at its second pod: 7 never tried.
    assert_eq!(f.pods.create_call_count(), 3);
    let e = f.controller.expectations().get_expectations(&key(&ds));
    assert_eq!(e.map(|e| e.fulfilled()), Some(false));
}

/// A creation refused because the namespace is terminating is not an error.
#[tokio::test]
async fn namespace_terminating_creations_are_not_errors() {
    let f = fixture();
    f.add_nodes(2, &[]);
    let ds = new_daemon_set().build();
    f.add_ds(&ds);
    f.pods.set_error(Some(api_status::namespace_terminating(
        "pods", "x", "default",
    )));
    assert!(f.sync(&ds).await.is_ok());
}

/// Upstream's `TestSelectorDaemonSetLaunchesPods` negative: an empty selector only warns.
#[tokio::test]
async fn selecting_everything_only_warns() {
    let f = fixture();
    f.add_nodes(1, &[]);
    let ds = daemon_set("foo")
        .namespace("default")
        .uid(uid())
        .container(container("c"))
        .build();
    f.add_ds(&ds);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(f.recorder.reasons(), [SELECTING_ALL_REASON]);
    assert!(f.pods.templates().is_empty());
}

/// A DaemonSet being deleted is left alone (no pods, no revisions, no status).
#[tokio::test]
async fn daemon_set_being_deleted_is_left_alone() {
    let f = fixture();
    f.add_nodes(1, &[]);
    let ds = new_daemon_set().deleted_at(now()).build();
    f.add_ds(&ds);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert!(f.pods.templates().is_empty());
    assert!(f.revisions.actions().is_empty());
    assert!(f.ds_client.status_updates().is_empty());
}

/// Upstream's `TestDaemonSetUpdatesStatusWhenExpectationsNotSatisfied`-style: unsatisfied
/// expectations only update the status, without raising `observedGeneration`.
#[tokio::test]
async fn unsatisfied_expectations_only_update_the_status() {
    let f = fixture();
    f.add_nodes(2, &[]);
    let ds = new_daemon_set().build();
    f.add_ds(&ds);
    f.controller.expectations().expect_creations(&key(&ds), 1);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert!(f.pods.templates().is_empty());
    let status = f.last_status();
    assert_eq!(status.desired_number_scheduled, 2);
    assert_eq!(status.observed_generation, None);
}

// ---------------------------------------------------------------------------------------------
// Status
// ---------------------------------------------------------------------------------------------

/// Upstream's `TestUpdateDaemonSetStatus`-style counts: desired, current, ready, available
/// (minReadySeconds), updated, misscheduled, unavailable, observedGeneration.
#[tokio::test]
async fn status_counts_pods_per_node() {
    let f = fixture();
    f.add_nodes(3, &[]);
    let _ = f
        .node_cache
        .add(Arc::new(new_node("other", &[("role", "other")])));
    let ds = new_daemon_set()
        .node_selector(&[])
        .min_ready_seconds(30)
        .build();
    f.add_ds(&ds);
    // First pass records the revision (and creates pods, which we pretend are there).
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let hash = f.current_hash(&ds);
    f.settle_expectations(&ds);
    f.pods.clear();
    let long_ready = now() - SignedDuration::from_secs(60);
    let just_ready = now() - SignedDuration::from_secs(5);
    for p in [
        f.daemon_pod(&ds, "node-0", &hash, Some(long_ready)),
        f.daemon_pod(&ds, "node-1", &hash, Some(just_ready)),
        f.daemon_pod(&ds, "node-2", "old", None),
    ] {
        f.observe_pod(&p);
    }
    f.settle_expectations(&ds);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let status = f.last_status();
    assert_eq!(
        status.desired_number_scheduled, 4,
        "every node (no selector)"
    );
    assert_eq!(status.current_number_scheduled, 3);
    assert_eq!(status.number_ready, 2);
    assert_eq!(status.number_available, Some(1));
    assert_eq!(status.updated_number_scheduled, Some(2));
    assert_eq!(status.number_unavailable, Some(3));
    assert_eq!(status.number_misscheduled, 0);
    assert_eq!(status.observed_generation, Some(1));
}

// ---------------------------------------------------------------------------------------------
// History
// ---------------------------------------------------------------------------------------------

/// Upstream's `TestConstructHistory`-style: the first sync records revision 1 (labelled with
/// the pod-template hash, owned, the template as a replace patch); a template change records
/// revision 2 and keeps 1 as history; going back renumbers the old revision instead of
/// creating a third.
#[tokio::test]
async fn revisions_follow_the_template() {
    let f = fixture();
    f.add_nodes(1, &[]);
    let v1 = new_daemon_set().build();
    f.add_ds(&v1);
    f.sync(&v1).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let revs = f.revisions.objects();
    assert_eq!(revs.len(), 1);
    let r1 = &revs[0];
    assert_eq!(r1.revision, 1);
    let hash = r1
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY))
        .cloned()
        .unwrap_or_default();
    let template = v1
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    assert_eq!(
        hash,
        kcm_machinery::controller::compute_hash(&template, None)
    );
    assert_eq!(
        r1.metadata.name.as_deref(),
        Some(format!("foo-{hash}").as_str())
    );
    let data = r1.data.as_ref().map(|d| d.0.clone()).unwrap_or_default();
    assert_eq!(
        data.pointer("/spec/template/$patch")
            .and_then(|v| v.as_str()),
        Some("replace")
    );
    assert_eq!(
        data.pointer("/spec/template/metadata/creationTimestamp"),
        Some(&serde_json::Value::Null)
    );
    let owner = r1.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owner.first().map(|o| o.kind.as_str()), Some("DaemonSet"));

    let v2 = new_daemon_set()
        .with(|d| {
            d.metadata.uid = v1.metadata.uid.clone();
            d.metadata.generation = Some(2);
        })
        .template_generation(2)
        .template(
            pod_template()
                .labels(&[("name", "simple-daemon"), ("type", "production")])
                .container(container("foo").image("foo/bar:v2")),
        )
        .build();
    f.add_ds(&v2);
    f.settle_expectations(&v2);
    f.sync(&v2).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let mut numbers: Vec<i64> = f.revisions.objects().iter().map(|r| r.revision).collect();
    numbers.sort();
    assert_eq!(numbers, [1, 2]);

    // Back to v1's template: its revision becomes number 3.
    let back = Arc::new(DaemonSet {
        spec: v1.spec.clone(),
        ..v2.clone()
    });
    f.add_ds(&back);
    f.settle_expectations(&back);
    f.sync(&back).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let objects = f.revisions.objects();
    assert_eq!(objects.len(), 2, "no new revision for an old template");
    let r1_again = objects
        .iter()
        .find(|r| r.metadata.name == r1.metadata.name)
        .map(|r| r.revision);
    assert_eq!(r1_again, Some(3));
}

/// Upstream's `TestCleanupHistory`-style: old revisions beyond `revisionHistoryLimit` go,
/// oldest first, except those a pod still runs.
#[tokio::test]
async fn history_is_pruned_to_the_limit_keeping_live_revisions() {
    let f = fixture();
    f.add_nodes(1, &[]);
    let ds = new_daemon_set().revision_history_limit(1).build();
    f.add_ds(&ds);
    // Three old revisions, the oldest of which a pod still runs.
    for (name, number, hash) in [("foo-a", 1, "a"), ("foo-b", 2, "b"), ("foo-c", 3, "c")] {
        let mut r = kcm_machinery::controller::history::new_controller_revision(
            &ds.metadata,
            &kube::core::GroupVersionKind::gvk("apps", "v1", "DaemonSet"),
            Some(&kcm_testing::labels(&[
                ("name", "simple-daemon"),
                ("type", "production"),
                (DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY, hash),
            ])),
            serde_json::json!({"spec": {"template": {"$patch": "replace", "n": number}}}),
            number,
            None,
        );
        r.metadata.name = Some(name.into());
        r.metadata.namespace = Some("default".into());
        r.metadata
            .labels
            .get_or_insert_default()
            .insert(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY.into(), hash.into());
        f.revisions.insert(r);
    }
    let p = f.daemon_pod(&ds, "node-0", "a", Some(now()));
    f.observe_pod(&p);
    f.sync(&ds).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let mut names: Vec<String> = f
        .revisions
        .objects()
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect();
    names.sort();
    // Three old revisions, a limit of one: two go, oldest first, skipping the live one.
    let current = format!("foo-{}", template_hash(&ds));
    let mut want = vec!["foo-a".to_owned(), current];
    want.sort();
    assert_eq!(names, want, "a is live; b and c are deleted");
    let deletes: Vec<_> = f
        .revisions
        .actions()
        .into_iter()
        .filter(|a| a.verb() == "delete")
        .collect();
    assert_eq!(deletes.len(), 2);
}

/// Upstream's `TestSnapshot` collision: the name is taken by another template, so the
/// DaemonSet's `collisionCount` is bumped and the sync fails (to retry with the new name).
#[tokio::test]
async fn hash_collision_bumps_the_collision_count() {
    let f = fixture();
    f.add_nodes(1, &[]);
    let ds = new_daemon_set().build();
    f.add_ds(&ds);
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let hash = kcm_machinery::controller::compute_hash(&template, None);
    let squatter = ControllerRevision {
        metadata: kcm_testing::meta(&format!("foo-{hash}"))
            .namespace("default")
            .build(),
        data: Some(k8s_openapi::apimachinery::pkg::runtime::RawExtension(
            serde_json::json!({"other": 1}),
        )),
        revision: 7,
    };
    f.revisions.insert(squatter);
    let err = f.sync(&ds).await.err();
    assert!(
        matches!(err, Some(Error::Revision { verb: "create", .. })),
        "{err:?}"
    );
    assert_eq!(
        f.ds_client
            .status_updates()
            .last()
            .and_then(|d| d.status.clone())
            .and_then(|s| s.collision_count),
        Some(1)
    );
}

// ---------------------------------------------------------------------------------------------
// Rolling updates
// ---------------------------------------------------------------------------------------------

/// Two versions of a DaemonSet: the second changes the image (generation 2).
fn versions() -> (DaemonSet, DaemonSet) {
    let v1 = new_daemon_set().build();
    let v2 = DaemonSet {
        metadata: {
            let mut m = v1.metadata.clone();
            m.generation = Some(2);
            m.annotations.get_or_insert_default().insert(
                super::super::util::DEPRECATED_TEMPLATE_GENERATION.into(),
                "2".into(),
            );
            m
        },
        spec: v1.spec.clone().map(|mut s| {
            if let Some(c) = s
                .template
                .spec
                .as_mut()
                .and_then(|p| p.containers.first_mut())
            {
                c.image = Some("foo/bar:v2".into());
            }
            s
        }),
        status: None,
    };
    (v1, v2)
}

/// Upstream's `TestDaemonSetUpdatesPods` (maxUnavailable 1): one node at a time — an old pod
/// is deleted, its node gets the new pod, and the next old pod goes only once that one is
/// available.
#[tokio::test]
async fn rolling_update_one_node_at_a_time() {
    let f = fixture();
    f.add_nodes(3, &[]);
    let (v1, v2) = versions();
    f.add_ds(&v1);
    f.sync(&v1).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let h1 = f.current_hash(&v1);
    f.settle_expectations(&v1);
    f.pods.clear();
    for node in ["node-0", "node-1", "node-2"] {
        f.observe_pod(&f.daemon_pod(&v1, node, &h1, Some(now())));
    }

    f.add_ds(&v2);
    f.settle_expectations(&v2);
    f.sync(&v2).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let h2 = f.current_hash(&v2);
    assert_ne!(h1, h2);
    let deleted = f.pods.deleted_pod_names();
    assert_eq!(deleted.len(), 1, "maxUnavailable 1");
    assert!(f.pods.templates().is_empty());
    assert_eq!(f.last_status().updated_number_scheduled, None);

    // The deleted pod is gone: manage creates its replacement; nothing else is deleted.
    f.remove_pod(&deleted[0]);
    f.settle_expectations(&v2);
    f.pods.clear();
    f.sync(&v2).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let replaced = f.created_nodes();
    assert_eq!(replaced.len(), 1);
    assert!(
        f.pods.deleted_pod_names().is_empty(),
        "the empty node is the unavailable one"
    );
    let labels = f.pods.templates()[0]
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    assert_eq!(labels.get(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY), Some(&h2));
    assert_eq!(
        labels.get("pod-template-generation").map(String::as_str),
        Some("2")
    );

    // The new pod runs but is not ready yet: still nothing deleted.
    let new_pod = f.daemon_pod(&v2, &replaced[0], &h2, None);
    f.observe_pod(&new_pod);
    f.settle_expectations(&v2);
    f.pods.clear();
    f.sync(&v2).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert!(f.pods.deleted_pod_names().is_empty());

    // Once it is ready the next old pod goes.
    f.remove_pod(new_pod.metadata.name.as_deref().unwrap_or_default());
    f.observe_pod(&f.daemon_pod(&v2, &replaced[0], &h2, Some(now())));
    f.settle_expectations(&v2);
    f.sync(&v2).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(f.pods.deleted_pod_names().len(), 1);
    assert_eq!(f.last_status().updated_number_scheduled, Some(1));
}

/// `OnDelete`: a template change deletes nothing.
#[tokio::test]
async fn on_delete_never_deletes_old_pods() {
    let f = fixture();
    f.add_nodes(2, &[]);
    let v1 = new_daemon_set().on_delete().build();
    f.add_ds(&v1);
    f.sync(&v1).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let h1 = f.current_hash(&v1);
    f.settle_expectations(&v1);
    for node in ["node-0", "node-1"] {
        f.observe_pod(&f.daemon_pod(&v1, node, &h1, Some(now())));
    }
    let mut v2 = v1.clone();
    if let Some(c) = v2
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .and_then(|p| p.containers.first_mut())
    {
        c.image = Some("v2".into());
    }
    f.add_ds(&v2);
    f.settle_expectations(&v2);
    f.pods.clear();
    f.sync(&v2).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert!(f.pods.deleted_pod_names().is_empty());
    assert!(f.pods.templates().is_empty());
}

/// Upstream's `TestDaemonSetUpdatesSomeOldPodsNotReady`: unavailable old pods are replaced
/// at once, beyond maxUnavailable.
#[tokio::test]
async fn unavailable_old_pods_are_replaced_at_once() {
    let f = fixture();
    f.add_nodes(3, &[]);
    let (v1, v2) = versions();
    f.add_ds(&v1);
    f.sync(&v1).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let h1 = f.current_hash(&v1);
    f.settle_expectations(&v1);
    f.pods.clear();
    f.observe_pod(&f.daemon_pod(&v1, "node-0", &h1, None));
    f.observe_pod(&f.daemon_pod(&v1, "node-1", &h1, None));
    f.observe_pod(&f.daemon_pod(&v1, "node-2", &h1, Some(now())));
    f.add_ds(&v2);
    f.settle_expectations(&v2);
    f.sync(&v2).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(
        f.pods.deleted_pod_names().len(),
        2,
        "both not-ready old pods"
    );
}

/// Upstream's `TestDaemonSetUpdatesAllOldPodsNotReadyMaxSurge`/surge flow: with maxSurge 1
/// (maxUnavailable 0) a new pod starts beside one old pod; the old one goes once the new one
/// is available.
#[tokio::test]
async fn surge_starts_new_pods_beside_old_ones() {
    let f = fixture();
    f.add_nodes(2, &[]);
    let (v1, v2) = versions();
    let surge = |ds: &DaemonSet| {
        let mut ds = ds.clone();
        if let Some(ru) = ds
            .spec
            .as_mut()
            .and_then(|s| s.update_strategy.as_mut())
            .and_then(|u| u.rolling_update.as_mut())
        {
            ru.max_surge = Some(IntOrString::Int(1));
            ru.max_unavailable = Some(IntOrString::Int(0));
        }
        ds
    };
    let (v1, v2) = (surge(&v1), surge(&v2));
    f.add_ds(&v1);
    f.sync(&v1).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let h1 = f.current_hash(&v1);
    f.settle_expectations(&v1);
    f.pods.clear();
    let old0 = f.daemon_pod(&v1, "node-0", &h1, Some(now()));
    f.observe_pod(&old0);
    f.observe_pod(&f.daemon_pod(&v1, "node-1", &h1, Some(now())));
    f.add_ds(&v2);
    f.settle_expectations(&v2);
    f.sync(&v2).await.unwrap_or_else(|e| panic!("sync: {e}"));
    let h2 = f.current_hash(&v2);
    assert_eq!(f.created_nodes().len(), 1, "one surge pod");
    assert!(f.pods.deleted_pod_names().is_empty());
    let surged = f.created_nodes()[0].clone();

    // The surge pod became available: its old pod is deleted.
    let old_on_surged = if surged == "node-0" {
        old0.clone()
    } else {
        f.pod_cache
            .list()
            .into_iter()
            .map(|p| (*p).clone())
            .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("node-1"))
            .unwrap_or_default()
    };
    f.observe_pod(&f.daemon_pod(&v2, &surged, &h2, Some(now())));
    f.settle_expectations(&v2);
    f.pods.clear();
    f.sync(&v2).await.unwrap_or_else(|e| panic!("sync: {e}"));
    assert!(
        f.pods
            .deleted_pod_names()
            .contains(&old_on_surged.metadata.name.clone().unwrap_or_default())
    );
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

async fn drain(queue: &kcm_machinery::workqueue::RateLimitingQueue<String>) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    while !queue.is_empty() {
        match queue.get().await {
            Some(k) => {
                queue.done(&k);
                keys.insert(k);
            }
            None => break,
        }
    }
    keys
}

/// Upstream's `TestAddNode` / `TestUpdateNode` table: a node is relevant when the verdict
/// for it changes; heartbeats are ignored.
#[tokio::test]
async fn node_events_enqueue_the_daemon_sets_they_affect() {
    let f = fixture();
    let ds = new_daemon_set().node_selector(&[("color", "blue")]).build();
    f.add_ds(&ds);
    let h = f.controller.event_handlers();
    h.add_node(&new_node("red", &[("color", "red")]));
    assert!(
        drain(f.controller.queue()).await.is_empty(),
        "does not match"
    );
    h.add_node(&new_node("blue", &[("color", "blue")]));
    assert_eq!(drain(f.controller.queue()).await, [key(&ds)].into());

    let before = new_node("n", &[("color", "red")]);
    let mut heartbeat = before.clone();
    heartbeat.metadata.resource_version = Some("2".into());
    h.update_node(&before, &heartbeat);
    assert!(
        drain(f.controller.queue()).await.is_empty(),
        "heartbeat ignored"
    );
    let relabelled = new_node("n", &[("color", "blue")]);
    h.update_node(&before, &relabelled);
    assert_eq!(
        drain(f.controller.queue()).await,
        [key(&ds)].into(),
        "relabelled into the selector"
    );
    let tainted = {
        let mut n = relabelled.clone();
        n.spec.get_or_insert_default().taints = Some(vec![taint("x", "NoSchedule").build()]);
        n
    };
    h.update_node(&relabelled, &tainted);
    assert_eq!(
        drain(f.controller.queue()).await,
        [key(&ds)].into(),
        "tainted"
    );
}

#[test]
fn node_in_same_condition_compares_true_conditions() {
    let c = |t: &str, s: &str| node_condition(t, s).build();
    assert!(super::node_in_same_condition(&[], &[]));
    assert!(super::node_in_same_condition(
        &[c("Ready", "True"), c("X", "False")],
        &[c("Ready", "True")]
    ));
    assert!(!super::node_in_same_condition(
        &[c("Ready", "True")],
        &[c("Ready", "False")]
    ));
}

/// Pod events: an owned pod observes a creation; an orphan wakes the selecting DaemonSet.
#[tokio::test]
async fn pod_events_observe_expectations() {
    let f = fixture();
    let ds = new_daemon_set().build();
    f.add_ds(&ds);
    f.controller.expectations().expect_creations(&key(&ds), 1);
    let p = f.daemon_pod(&ds, "n", "", None);
    f.controller.event_handlers().add_pod(&p);
    assert!(
        f.controller
            .expectations()
            .satisfied_expectations(&key(&ds))
    );
    assert_eq!(drain(f.controller.queue()).await, [key(&ds)].into());
    let mut orphan = p.clone();
    orphan.metadata.owner_references = None;
    f.controller.event_handlers().add_pod(&orphan);
    assert_eq!(drain(f.controller.queue()).await, [key(&ds)].into());
    let mut unrelated = orphan.clone();
    unrelated.metadata.labels = Some(kcm_testing::labels(&[("app", "x")]));
    f.controller.event_handlers().add_pod(&unrelated);
    assert!(drain(f.controller.queue()).await.is_empty());
}

/// A panic injected in the sync is recovered by the shared worker, counted in
/// `kcm_workqueue_sync_panics_total{name="daemonset"}`, and the key retried.
#[tokio::test(start_paused = true)]
async fn panicking_sync_is_recovered_counted_and_retried() {
    let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
    let attempts = Arc::new(AtomicU64::new(0));
    let handler: SyncHandler = {
        let attempts = attempts.clone();
        Arc::new(move |_key: String| {
            let attempts = attempts.clone();
            Box::pin(async move {
                if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("injected panic");
                }
                Ok(())
            })
        })
    };
    let f = fixture_with(DaemonSetsControllerOptions {
        metrics: Some(metrics.clone()),
        ..DaemonSetsControllerOptions::default()
    });
    let controller = f.controller.with_sync_handler(handler);
    let key = "ns/ds".to_owned();
    controller.queue().add(key.clone());
    assert!(controller.process_next_work_item().await, "recovered");
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1, "counted");
    assert_eq!(controller.queue().num_requeues(&key), 1, "retried");
    assert!(controller.process_next_work_item().await);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

/// As upstream's `deleteDaemonset`: a deleted DaemonSet (seen whole or as a tombstone) drops
/// its expectations, so a namesake starts clean and deleted DaemonSets leave no record.
#[tokio::test]
async fn deleted_daemon_set_drops_its_expectations() {
    use kcm_machinery::informer::delta::{DeletedFinalStateUnknown, DeletedObject};

    let f = fixture();
    f.add_nodes(2, &[]);
    let ds = new_daemon_set().build();
    f.add_ds(&ds);
    f.sync(&ds).await.expect("sync");
    assert_eq!(f.pods.create_call_count(), 2);
    let e = f.controller.expectations().get_expectations(&key(&ds));
    assert_eq!(
        e.map(|e| e.fulfilled()),
        Some(false),
        "two creations expected"
    );

    let _ = f.ds_cache.delete(&ds);
    f.controller
        .event_handlers()
        .delete_daemon_set(&DeletedObject::Object(Arc::new(ds.clone())));
    assert!(
        f.controller
            .expectations()
            .get_expectations(&key(&ds))
            .is_none()
    );
    f.sync(&ds).await.expect("sync of a deleted DaemonSet");
    assert!(
        f.controller
            .expectations()
            .get_expectations(&key(&ds))
            .is_none()
    );
    assert_eq!(f.pods.create_call_count(), 2, "nothing more created");

    // The same through a tombstone (the delete was missed and found by a relist).
    f.controller.expectations().expect_creations(&key(&ds), 1);
    f.controller
        .event_handlers()
        .delete_daemon_set(&DeletedObject::Tombstone(DeletedFinalStateUnknown {
            key: key(&ds),
            obj: Arc::new(ds.clone()),
        }));
    assert!(
        f.controller
            .expectations()
            .get_expectations(&key(&ds))
            .is_none()
    );
}
