//! Unit tests of the ReplicaSet controller: caches seeded directly, fake pod control and API,
//! `sync(key)` called, actions counted — as upstream's `replica_set_test.go`.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kcm_machinery::controller::api_status;
use kcm_machinery::controller::pod_control::FakePodControl;
use kcm_machinery::informer::delta::{DeletedFinalStateUnknown, DeletedObject};
use kcm_machinery::informer::store::Indexer;
use kcm_testing::{
    MetaBuilder, OwnerRefBuilder, PodSpecBuilder, WorkloadBuilder, container, labels, owner_ref,
    owner_ref_of, pod_condition, pod_template, replica_set,
};
use kube::api::Patch;

use super::*;
use crate::replicaset::client::{FakeReplicaSetClient, ReplicaSetAction};
use crate::replicaset::status::{REPLICA_FAILURE, get_condition};

// ---------------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------------

/// The fixed "now" of every test.
fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

fn uid() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("uid-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A ReplicaSet `default/foobar` selecting `selector`, controlled by an owner of UID `123`, as
/// upstream's `newReplicaSet`.
fn new_replica_set(replicas: i32, selector: &[(&str, &str)]) -> ReplicaSet {
    replica_set("foobar")
        .uid(uid())
        .namespace("default")
        .owner(OwnerRefBuilder::default().uid("123").controller(true))
        .resource_version("18")
        .replicas(replicas)
        .selector(kcm_testing::selector(selector))
        .template(
            pod_template()
                .labels(&[("name", "foo"), ("type", "production")])
                .container(container("c").image("foo/bar")),
        )
        .build()
}

fn controller_ref_to(rs: &ReplicaSet) -> OwnerReference {
    owner_ref_of(rs).controller(true).build()
}

/// A pod of `rs`'s namespace with its selector's labels, in `phase` (ready when Running,
/// since `ready_since` or the epoch), owned by `rs` when `owned`, as upstream's `newPod`.
fn new_pod(
    name: &str,
    rs: &ReplicaSet,
    phase: &str,
    ready_since: Option<Timestamp>,
    owned: bool,
) -> Pod {
    let mut pod = kcm_testing::pod(name)
        .uid(uid())
        .resource_version("1")
        .default_spec()
        .phase(phase);
    if phase == "Running" {
        let ready = pod_condition("Ready", "True");
        pod = pod.condition(match ready_since {
            Some(since) => ready.transitioned_at(since),
            None => ready,
        });
    }
    if owned {
        pod = pod.owner(controller_ref_to(rs));
    }
    pod.with(|p| {
        p.metadata.namespace = rs.metadata.namespace.clone();
        p.metadata.labels = selector_labels(rs);
    })
    .build()
}

/// `rs`'s `matchLabels`.
fn selector_labels(rs: &ReplicaSet) -> Option<std::collections::BTreeMap<String, String>> {
    rs.spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
}

/// `count` pods `<prefix>0..` owned by `rs` with `pod_labels`, added to `cache` when given,
/// as upstream's `newPodList`.
fn new_pod_list(
    cache: Option<&Indexer<Pod>>,
    count: usize,
    phase: &str,
    pod_labels: &[(&str, &str)],
    rs: &ReplicaSet,
    prefix: &str,
) -> Vec<Pod> {
    (0..count)
        .map(|i| {
            let mut pod = new_pod(&format!("{prefix}{i}"), rs, phase, None, true);
            pod.metadata.labels = Some(labels(pod_labels));
            if let Some(cache) = cache {
                cache.add(Arc::new(pod.clone())).expect("add pod");
            }
            pod
        })
        .collect()
}

fn key(rs: &ReplicaSet) -> String {
    meta_namespace_key(rs).expect("key")
}

/// `rs` with the status this controller writes for these counts and no terminating pods.
fn with_status(mut rs: ReplicaSet, replicas: i32, ready: i32, available: i32) -> ReplicaSet {
    rs.status = Some(ReplicaSetStatus {
        replicas,
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        terminating_replicas: Some(0),
        ..Default::default()
    });
    rs
}

// ---------------------------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------------------------

/// A controller over empty caches with fake pod control and a fake ReplicaSet API.
struct Fixture {
    controller: ReplicaSetController,
    pod_control: Arc<FakePodControl>,
    rs_client: Arc<FakeReplicaSetClient>,
    rs_cache: Indexer<ReplicaSet>,
    pod_cache: Indexer<Pod>,
}

fn fixture(burst_replicas: usize) -> Fixture {
    fixture_of(ManagedKind::replica_set(), burst_replicas)
}

/// A [`fixture`] whose controller manages `kind`.
fn fixture_of(kind: ManagedKind, burst_replicas: usize) -> Fixture {
    let rs_cache = Indexer::new();
    let pod_cache = Indexer::new();
    let pod_control = Arc::new(FakePodControl::new());
    let rs_client = Arc::new(FakeReplicaSetClient::new());
    let controller = ReplicaSetController::with_caches(
        rs_cache.clone(),
        pod_cache.clone(),
        rs_client.clone(),
        pod_control.clone(),
        ReplicaSetControllerOptions {
            kind,
            burst_replicas,
            metrics: None,
            controller_metrics: None,
        },
    )
    .with_clock(Arc::new(now));
    Fixture {
        controller,
        pod_control,
        rs_client,
        rs_cache,
        pod_cache,
    }
}

impl Fixture {
    /// Puts `rs` in the cache and on the fake server.
    fn add_rs(&self, rs: &ReplicaSet) {
        self.rs_cache.add(Arc::new(rs.clone())).expect("add rs");
        self.rs_client.insert(rs.clone());
    }

    fn add_pod(&self, pod: &Pod) {
        self.pod_cache.add(Arc::new(pod.clone())).expect("add pod");
    }

    fn handlers(&self) -> &ReplicaSetEventHandlers {
        self.controller.event_handlers()
    }

    /// Asserts the fake pod control's counts, as upstream's `validateSyncReplicaSet`.
    #[track_caller]
    fn validate(&self, creates: usize, deletes: usize, patches: usize) {
        assert_eq!(
            (
                self.pod_control.templates().len(),
                self.pod_control.deleted_pod_names().len(),
                self.pod_control.patches().len()
            ),
            (creates, deletes, patches),
            "(creates, deletes, patches)"
        );
    }

    fn expectations(&self, rs: &ReplicaSet) -> Option<(i64, i64)> {
        self.controller
            .expectations()
            .get_expectations(&key(rs))
            .map(|e| (e.add, e.del))
    }

    /// Every key currently queued, each taken out and marked done.
    async fn drain_queue(&self) -> BTreeSet<String> {
        let queue = self.controller.queue();
        let mut keys = BTreeSet::new();
        while !queue.is_empty() {
            let key = queue.get().await.expect("queued key");
            queue.done(&key);
            keys.insert(key);
        }
        keys
    }

    fn last_status(&self) -> ReplicaSetStatus {
        self.rs_client
            .status_updates()
            .last()
            .and_then(|rs| rs.status.clone())
            .expect("a status update")
    }
}

// ---------------------------------------------------------------------------------------------
// sync: scaling and expectations
// ---------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn sync_does_nothing_when_replicas_match() {
    let fx = fixture(BURST_REPLICAS);
    let rs = new_replica_set(2, &[("foo", "bar")]);
    fx.add_rs(&rs);
    new_pod_list(
        Some(&fx.pod_cache),
        2,
        "Running",
        &[("foo", "bar")],
        &rs,
        "pod",
    );

    fx.controller.sync(&key(&rs)).await.expect("sync");
    fx.validate(0, 0, 0);
}

#[tokio::test(start_paused = true)]
async fn sync_creates_up_to_burst_replicas() {
    struct Case {
        name: &'static str,
        replicas: i32,
        burst: usize,
        existing: usize,
        creates: usize,
    }
    let cases = [
        Case {
            name: "fewer missing than the burst",
            replicas: 10,
            burst: 500,
            existing: 0,
            creates: 10,
        },
        Case {
            name: "more missing than the burst",
            replicas: 700,
            burst: 500,
            existing: 0,
            creates: 500,
        },
        Case {
            name: "small burst, some pods exist",
            replicas: 12,
            burst: 5,
            existing: 4,
            creates: 5,
        },
    ];
    for case in cases {
        let fx = fixture(case.burst);
        let rs = new_replica_set(case.replicas, &[("foo", "bar")]);
        fx.add_rs(&rs);
        new_pod_list(
            Some(&fx.pod_cache),
            case.existing,
            "Running",
            &[("foo", "bar")],
            &rs,
            "pod",
        );
        fx.controller.sync(&key(&rs)).await.expect(case.name);
        assert_eq!(
            fx.pod_control.templates().len(),
            case.creates,
            "{}",
            case.name
        );
        let refs = fx.pod_control.controller_refs();
        assert!(
            refs.iter()
                .all(|r| r.uid == rs.metadata.uid.clone().unwrap_or_default()
                    && r.kind == "ReplicaSet"
                    && r.api_version == "apps/v1"
                    && r.controller == Some(true)
                    && r.block_owner_deletion == Some(true)),
            "{}: created pods are controlled by the ReplicaSet",
            case.name
        );
        assert_eq!(
            fx.expectations(&rs),
            Some((i64::try_from(case.creates).expect("small"), 0)),
            "{}: expectations raised for every creation",
            case.name
        );
    }
}

/// As upstream's `TestSyncReplicaSetCreateFailures`: a quota-like limit of 10 on 100 wanted
/// pods stops the slow start after the failing batch, and the skipped creations are taken off
/// the expectations.
#[tokio::test(start_paused = true)]
async fn slow_start_stops_on_error_and_lowers_expectations() {
    let fx = fixture(BURST_REPLICAS);
    fx.pod_control.set_create_limit(10);
    let rs = new_replica_set(100, &[("foo", "bar")]);
    fx.add_rs(&rs);

    let err = fx
        .controller
        .sync(&key(&rs))
        .await
        .expect_err("creations fail");
    assert!(matches!(err, Error::CreatePods { .. }), "{err}");
    fx.validate(10, 0, 0);
    // Batches of 1, 2, 4, 8: the fourth fails part-way and nothing more is tried.
    assert_eq!(fx.pod_control.create_call_count(), 15);
    // 100 expected, 90 never attempted or failed: 10 remain, the ones that succeeded.
    assert_eq!(fx.expectations(&rs), Some((10, 0)));

    let status = fx.last_status();
    let condition = get_condition(&status, REPLICA_FAILURE).expect("ReplicaFailure");
    assert_eq!(condition.status, "True");
    assert_eq!(condition.reason.as_deref(), Some("FailedCreate"));
    assert!(
        condition
            .message
            .as_deref()
            .is_some_and(|m| m.contains("limit 10 already reached")),
        "{condition:?}"
    );
}

/// As upstream's `TestSyncReplicaSetDormancy`: expectations hold scaling (not status updates)
/// until the creations are observed; a failed creation does not leave expectations behind.
#[tokio::test(start_paused = true)]
async fn expectations_block_scaling_until_pods_are_observed() {
    let fx = fixture(BURST_REPLICAS);
    let rs = new_replica_set(2, &[("foo", "bar")]);
    let rs = with_status(rs, 1, 1, 1);
    fx.add_rs(&rs);
    new_pod_list(
        Some(&fx.pod_cache),
        1,
        "Running",
        &[("foo", "bar")],
        &rs,
        "pod",
    );

    // Creates the missing replica and expects it.
    fx.controller.sync(&key(&rs)).await.expect("sync 1");
    fx.validate(1, 0, 0);

    // Expectations prevent another creation, not a status update.
    fx.add_rs(&with_status(rs.clone(), 0, 0, 0));
    fx.pod_control.clear();
    fx.controller.sync(&key(&rs)).await.expect("sync 2");
    fx.validate(0, 0, 0);

    // Observing the creation lets the next sync create; it fails, which lowers the
    // expectations again instead of leaving them waiting.
    fx.controller.expectations().creation_observed(&key(&rs));
    fx.add_rs(&with_status(rs.clone(), 1, 1, 1));
    fx.pod_control.clear();
    fx.pod_control
        .set_error(Some(api_status::internal_error("fake error")));
    fx.controller.sync(&key(&rs)).await.expect_err("sync 3");
    fx.validate(1, 0, 0);

    // So the next sync creates again without any observation.
    fx.pod_control.clear();
    fx.pod_control.set_error(None);
    fx.controller.sync(&key(&rs)).await.expect("sync 4");
    fx.validate(1, 0, 0);

    // Two status writes: the dormant sync's and the failed creation's condition.
    assert_eq!(fx.rs_client.status_updates().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn expectations_expire_after_five_minutes() {
    let fx = fixture(BURST_REPLICAS);
    let rs = new_replica_set(3, &[("foo", "bar")]);
    fx.add_rs(&rs);

    fx.controller.sync(&key(&rs)).await.expect("sync");
    fx.validate(3, 0, 0);
    // The pods never show up in the cache (lost watch events).
    fx.pod_control.clear();
    fx.controller.sync(&key(&rs)).await.expect("sync");
    fx.validate(0, 0, 0);
    tokio::time::advance(Duration::from_secs(5 * 60)).await;
    fx.controller.sync(&key(&rs)).await.expect("sync");
    fx.validate(0, 0, 0);
    tokio::time::advance(Duration::from_secs(1)).await;
    fx.controller.sync(&key(&rs)).await.expect("sync");
    fx.validate(3, 0, 0);
}

/// As upstream's `doTestControllerBurstReplicas`: scale up then down in bursts; each burst
/// waits until every one of its pods was observed, and the last observation releases the
/// next burst.
async fn controller_burst_replicas(burst: usize, num_replicas: usize) {
    let fx = fixture(burst);
    let sel = [("foo", "bar")];
    let mut rs = new_replica_set(i32::try_from(num_replicas).expect("small"), &sel);
    fx.add_rs(&rs);
    let rs_key = key(&rs);
    let mut pods = new_pod_list(None, num_replicas, "Pending", &sel, &rs, "pod");

    for replicas in [num_replicas, 0] {
        rs.spec.as_mut().expect("spec").replicas = Some(i32::try_from(replicas).expect("small"));
        fx.add_rs(&rs);
        let mut i = 0;
        while i < num_replicas {
            fx.pod_control.clear();
            fx.controller.sync(&rs_key).await.expect("sync");
            let active = fx.pod_cache.len();
            let expected;
            if replicas != 0 {
                expected = (replicas - active).min(burst);
                fx.validate(expected, 0, 0);
                // All but one of the expected pods show up; none wakes the ReplicaSet.
                for pod in &pods[..expected - 1] {
                    fx.add_pod(pod);
                    fx.handlers().add_pod(pod);
                }
                assert_eq!(fx.expectations(&rs).map(|e| e.0), Some(1));
            } else {
                expected = active.min(burst);
                fx.validate(0, expected, 0);
                // Delete exactly the pods the ReplicaSet waits for, all but one.
                let mut waiting: Vec<String> = fx
                    .controller
                    .expectations()
                    .get_uids(&rs_key)
                    .expect("deletions expected")
                    .into_iter()
                    .collect();
                waiting.sort();
                for pod_key in &waiting[..waiting.len() - 1] {
                    let pod = owned_pod_from_key(pod_key, &rs);
                    fx.pod_cache.delete(&pod).expect("delete");
                    fx.handlers()
                        .delete_pod(&DeletedObject::Object(Arc::new(pod)));
                }
                assert_eq!(fx.expectations(&rs).map(|e| e.1), Some(1));
            }

            // Nothing happens while one observation is missing.
            fx.pod_control.clear();
            fx.controller.sync(&rs_key).await.expect("sync");
            fx.validate(0, 0, 0);

            // The last observation.
            if replicas != 0 {
                fx.add_pod(&pods[expected - 1]);
                fx.handlers().add_pod(&pods[expected - 1]);
            } else {
                let waiting = fx
                    .controller
                    .expectations()
                    .get_uids(&rs_key)
                    .expect("deletions expected");
                assert_eq!(waiting.len(), 1, "waiting on one deletion");
                let last = waiting.into_iter().next().expect("one");
                let pod = owned_pod_from_key(&last, &rs);
                fx.pod_cache.delete(&pod).expect("delete");
                fx.handlers()
                    .delete_pod(&DeletedObject::Object(Arc::new(pod)));
            }
            pods.drain(..expected.min(pods.len()));
            i += burst;
        }
        assert_eq!(fx.pod_cache.len(), replicas, "active pods");
        pods = new_pod_list(None, replicas, "Running", &sel, &rs, "pod");
    }
}

fn owned_pod_from_key(pod_key: &str, rs: &ReplicaSet) -> Pod {
    let (namespace, name) = pod_key.split_once('/').expect("namespace/name");
    kcm_testing::pod(name)
        .namespace(namespace)
        .owner(controller_ref_to(rs))
        .with(|p| p.metadata.labels = selector_labels(rs))
        .build()
}

#[tokio::test(start_paused = true)]
async fn burst_replicas_scale_up_and_down_in_bursts() {
    controller_burst_replicas(5, 30).await;
    controller_burst_replicas(5, 12).await;
    controller_burst_replicas(3, 2).await;
}

/// As upstream's `TestDeleteControllerAndExpectations`.
#[tokio::test(start_paused = true)]
async fn deleted_replica_set_drops_its_expectations() {
    let fx = fixture(10);
    let rs = new_replica_set(1, &[("foo", "bar")]);
    fx.add_rs(&rs);
    fx.controller.sync(&key(&rs)).await.expect("sync");
    fx.validate(1, 0, 0);
    fx.pod_control.clear();
    assert_eq!(fx.expectations(&rs), Some((1, 0)));

    fx.rs_cache.delete(&rs).expect("delete");
    fx.handlers()
        .delete_rs(&DeletedObject::Object(Arc::new(rs.clone())));
    fx.controller.sync(&key(&rs)).await.expect("sync");
    assert_eq!(fx.expectations(&rs), None);

    // Observations for the deleted ReplicaSet change nothing.
    fx.controller.expectations().creation_observed(&key(&rs));
    fx.controller.sync(&key(&rs)).await.expect("sync");
    fx.validate(0, 0, 0);
    assert_eq!(fx.expectations(&rs), None);
}

#[tokio::test(start_paused = true)]
async fn missing_replica_set_drops_expectations() {
    let fx = fixture(10);
    let rs = new_replica_set(1, &[("foo", "bar")]);
    fx.controller.expectations().expect_creations(&key(&rs), 3);
    fx.controller.sync(&key(&rs)).await.expect("sync");
    assert_eq!(fx.expectations(&rs), None);
    assert!(fx.rs_client.actions().is_empty(), "nothing written");
}

#[tokio::test(start_paused = true)]
async fn invalid_key_is_an_error_without_retrying_in_vain() {
    let fx = fixture(10);
    let err = fx.controller.sync("a/b/c").await.expect_err("invalid key");
    assert!(matches!(err, Error::InvalidKey { .. }), "{err}");
}

#[tokio::test(start_paused = true)]
async fn invalid_selector_is_reported_not_retried() {
    let fx = fixture(10);
    let mut rs = new_replica_set(2, &[]);
    rs.spec.as_mut().expect("spec").selector.match_labels = Some(labels(&[("in valid", "x")]));
    fx.add_rs(&rs);
    fx.controller.sync(&key(&rs)).await.expect("not retried");
    fx.validate(0, 0, 0);
    assert!(fx.rs_client.actions().is_empty());
}

/// A creation refused because the namespace is being deleted is not an error: no
/// rate-limited retry, and the raised expectations keep the ReplicaSet quiet (no hot loop).
#[tokio::test(start_paused = true)]
async fn namespace_terminating_creations_do_not_hot_loop() {
    let fx = fixture(BURST_REPLICAS);
    let rs = with_status(new_replica_set(3, &[("foo", "bar")]), 0, 0, 0);
    fx.add_rs(&rs);
    fx.pod_control
        .set_error(Some(api_status::namespace_terminating(
            "pods", "", "default",
        )));

    fx.controller.sync(&key(&rs)).await.expect("not an error");
    assert_eq!(fx.pod_control.create_call_count(), 3);
    assert!(
        fx.rs_client.status_updates().is_empty(),
        "no failure condition, nothing to write"
    );
    fx.pod_control.clear();
    fx.controller.sync(&key(&rs)).await.expect("quiet");
    assert_eq!(fx.pod_control.create_call_count(), 0, "no new attempts");
}

// ---------------------------------------------------------------------------------------------
// sync: deletions and ranking
// ---------------------------------------------------------------------------------------------

fn on_node(mut pod: Pod, node: &str) -> Pod {
    pod.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
    pod
}

fn not_ready(mut pod: Pod) -> Pod {
    if let Some(conditions) = pod.status.as_mut().and_then(|s| s.conditions.as_mut()) {
        for c in conditions {
            c.status = "False".into();
        }
    }
    pod
}

#[tokio::test(start_paused = true)]
async fn scale_down_deletes_the_best_victims() {
    struct Case {
        name: &'static str,
        /// Pods of the ReplicaSet: (name, node, phase, ready).
        pods: &'static [(&'static str, &'static str, &'static str, bool)],
        /// Pods of a sibling ReplicaSet (same owner): (name, node).
        related: &'static [(&'static str, &'static str)],
        replicas: i32,
        deleted: &'static [&'static str],
    }
    let cases = [
        Case {
            name: "unscheduled before scheduled",
            pods: &[
                ("scheduled", "node-1", "Pending", false),
                ("unscheduled", "", "Pending", false),
            ],
            related: &[],
            replicas: 1,
            deleted: &["unscheduled"],
        },
        Case {
            name: "pending before running",
            pods: &[
                ("running", "node-1", "Running", false),
                ("pending", "node-1", "Pending", false),
            ],
            related: &[],
            replicas: 1,
            deleted: &["pending"],
        },
        Case {
            name: "not ready before ready",
            pods: &[
                ("ready", "node-1", "Running", true),
                ("not-ready-1", "node-1", "Running", false),
                ("not-ready-2", "node-1", "Running", false),
            ],
            related: &[],
            replicas: 1,
            deleted: &["not-ready-1", "not-ready-2"],
        },
        Case {
            name: "ready pods: the one co-located with a sibling's pod goes first",
            pods: &[
                ("alone", "node-1", "Running", true),
                ("crowded", "node-2", "Running", true),
            ],
            related: &[("sibling", "node-2")],
            replicas: 1,
            deleted: &["crowded"],
        },
        Case {
            name: "every pod goes when scaling to zero",
            pods: &[
                ("a", "node-1", "Running", true),
                ("b", "", "Pending", false),
            ],
            related: &[],
            replicas: 0,
            deleted: &["a", "b"],
        },
    ];
    for case in cases {
        let fx = fixture(BURST_REPLICAS);
        let rs = new_replica_set(case.replicas, &[("foo", "bar")]);
        fx.add_rs(&rs);
        for (name, node, phase, ready) in case.pods {
            let mut pod = on_node(new_pod(name, &rs, phase, None, true), node);
            if !ready {
                pod = not_ready(pod);
            }
            fx.add_pod(&pod);
        }
        // A sibling: another ReplicaSet of the same owner (UID 123) with its own pods.
        let mut sibling = new_replica_set(1, &[("foo", "sibling")]);
        sibling.metadata.name = Some("sibling".into());
        fx.add_rs(&sibling);
        for (name, node) in case.related {
            fx.add_pod(&on_node(
                new_pod(name, &sibling, "Running", None, true),
                node,
            ));
        }

        fx.controller.sync(&key(&rs)).await.expect(case.name);
        let mut deleted = fx.pod_control.deleted_pod_names();
        deleted.sort();
        assert_eq!(deleted, case.deleted, "{}", case.name);
        let expected_keys: BTreeSet<String> = case
            .deleted
            .iter()
            .map(|n| format!("default/{n}"))
            .collect();
        let waiting: BTreeSet<String> = fx
            .controller
            .expectations()
            .get_uids(&key(&rs))
            .expect("deletions expected")
            .into_iter()
            .collect();
        assert_eq!(waiting, expected_keys, "{}: expected deletions", case.name);
    }
}

#[tokio::test(start_paused = true)]
async fn failed_deletions_lower_expectations_not_found_is_no_error() {
    struct Case {
        name: &'static str,
        error: kube::core::Status,
        fails: bool,
    }
    let cases = [
        Case {
            name: "pod already gone",
            error: api_status::not_found("pods", "x"),
            fails: false,
        },
        Case {
            name: "server error",
            error: api_status::internal_error("boom"),
            fails: true,
        },
    ];
    for case in cases {
        let fx = fixture(BURST_REPLICAS);
        let rs = new_replica_set(0, &[("foo", "bar")]);
        fx.add_rs(&rs);
        new_pod_list(
            Some(&fx.pod_cache),
            2,
            "Running",
            &[("foo", "bar")],
            &rs,
            "pod",
        );
        fx.pod_control.set_error(Some(case.error));

        let result = fx.controller.sync(&key(&rs)).await;
        assert_eq!(result.is_err(), case.fails, "{}: {result:?}", case.name);
        fx.validate(0, 2, 0);
        assert_eq!(fx.expectations(&rs), Some((0, 0)), "{}", case.name);
        assert!(
            fx.controller
                .expectations()
                .satisfied_expectations(&key(&rs)),
            "{}",
            case.name
        );
        let condition = get_condition(&fx.last_status(), REPLICA_FAILURE).cloned();
        if case.fails {
            let condition = condition.expect("ReplicaFailure");
            assert_eq!(condition.reason.as_deref(), Some("FailedDelete"));
            assert_eq!(
                condition.message.as_deref(),
                Some("Internal error occurred: boom")
            );
        } else {
            assert!(condition.is_none(), "{}", case.name);
        }
    }
}

/// As upstream's `TestGetReplicaSetsWithSameController` and `TestRelatedPodsLookup`.
#[tokio::test(start_paused = true)]
async fn related_replica_sets_and_pods() {
    let fx = fixture(10);
    let mut some = new_replica_set(1, &[("foo", "bar")]);
    some.metadata.name = Some("rs1".into());
    let mut related = new_replica_set(1, &[("foo", "baz")]);
    related.metadata.name = Some("rs2".into());
    let mut unrelated = new_replica_set(1, &[("foo", "quux")]);
    unrelated.metadata.name = Some("rs3".into());
    unrelated.metadata.owner_references.as_mut().expect("owner")[0].uid = "456".into();
    let mut pending_deletion = new_replica_set(1, &[("foo", "xyzzy")]);
    pending_deletion.metadata.name = Some("rs4".into());
    pending_deletion
        .metadata
        .owner_references
        .as_mut()
        .expect("owner")[0]
        .uid = "789".into();
    pending_deletion.metadata.deletion_timestamp = Some(Time(now()));
    for rs in [&some, &related, &unrelated, &pending_deletion] {
        fx.add_rs(rs);
    }
    fx.add_pod(&new_pod("pod1", &some, "Running", None, true));
    fx.add_pod(&new_pod("pod2", &some, "Running", None, true));
    fx.add_pod(&new_pod("pod3", &related, "Running", None, true));
    fx.add_pod(&new_pod("pod4", &unrelated, "Running", None, true));
    fx.add_pod(&new_pod("pod5", &pending_deletion, "Running", None, true));

    let names = |rss: Vec<Arc<ReplicaSet>>| -> BTreeSet<String> {
        rss.iter().filter_map(|r| r.metadata.name.clone()).collect()
    };
    let pod_names = |pods: Vec<Arc<Pod>>| -> BTreeSet<String> {
        pods.iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    };
    let set = |items: &[&str]| {
        items
            .iter()
            .map(|s| (*s).to_owned())
            .collect::<BTreeSet<_>>()
    };

    let c = &fx.controller;
    assert_eq!(
        names(c.get_replica_sets_with_same_controller(&some)),
        set(&["rs1", "rs2"])
    );
    assert_eq!(
        names(c.get_replica_sets_with_same_controller(&pending_deletion)),
        set(&["rs4"])
    );
    assert_eq!(
        pod_names(c.get_indirectly_related_pods(&some)),
        set(&["pod1", "pod2", "pod3"])
    );
    assert_eq!(
        pod_names(c.get_indirectly_related_pods(&pending_deletion)),
        set(&["pod5"])
    );
    let mut orphan_rs = new_replica_set(1, &[("foo", "bar")]);
    orphan_rs.metadata.owner_references = None;
    assert!(c.get_indirectly_related_pods(&orphan_rs).is_empty());
}

// ---------------------------------------------------------------------------------------------
// sync: claiming
// ---------------------------------------------------------------------------------------------

fn strategic_patch(patch: &Patch<serde_json::Value>) -> &serde_json::Value {
    match patch {
        Patch::Strategic(value) => value,
        other => panic!("expected a strategic-merge patch, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn adopts_matching_orphans_and_releases_non_matching_pods() {
    let fx = fixture(BURST_REPLICAS);
    let rs = new_replica_set(2, &[("foo", "bar")]);
    fx.add_rs(&rs);
    let orphan = new_pod("orphan", &rs, "Running", None, false);
    let mut stray = new_pod("stray", &rs, "Running", None, true);
    stray.metadata.labels = Some(labels(&[("foo", "other")]));
    let non_matching_orphan = {
        let mut p = new_pod("unrelated", &rs, "Running", None, false);
        p.metadata.labels = Some(labels(&[("foo", "other")]));
        p
    };
    for pod in [&orphan, &stray, &non_matching_orphan] {
        fx.add_pod(pod);
    }

    fx.controller.sync(&key(&rs)).await.expect("sync");
    // Adopted the orphan, released the stray, created one more to reach two.
    fx.validate(1, 0, 2);
    let patches = fx.pod_control.patches();
    let by_name = |name: &str| {
        patches
            .iter()
            .find(|p| p.name == name)
            .map(|p| strategic_patch(&p.patch).clone())
            .unwrap_or_else(|| panic!("no patch for {name}"))
    };
    let adopt = by_name("orphan");
    let owner = &adopt["metadata"]["ownerReferences"][0];
    assert_eq!(owner["uid"], rs.metadata.uid.clone().expect("uid").as_str());
    assert_eq!(owner["kind"], "ReplicaSet");
    assert_eq!(owner["apiVersion"], "apps/v1");
    assert_eq!(owner["controller"], true);
    assert_eq!(owner["blockOwnerDeletion"], true);
    assert_eq!(
        adopt["metadata"]["uid"],
        orphan.metadata.uid.clone().expect("uid").as_str()
    );
    let release = by_name("stray");
    assert_eq!(
        release["metadata"]["ownerReferences"][0]["$patch"],
        "delete"
    );
    // The owner was re-read from the server once before adopting.
    assert_eq!(fx.rs_client.get_count(), 1);
    // Status counts only what the ReplicaSet owns now.
    assert_eq!(fx.last_status().replicas, 1);
}

/// As upstream's `TestDoNotPatchPodWithOtherControlRef`.
#[tokio::test(start_paused = true)]
async fn never_touches_pods_controlled_by_another() {
    let fx = fixture(BURST_REPLICAS);
    let rs = new_replica_set(2, &[("foo", "bar")]);
    fx.add_rs(&rs);
    let mut pod = new_pod("pod", &rs, "Running", None, true);
    pod.metadata.owner_references = Some(vec![
        owner_ref("apps/v1", "ReplicaSet", "AnotherRS", "someone-else")
            .controller(true)
            .build(),
    ]);
    fx.add_pod(&pod);
    fx.controller.sync(&key(&rs)).await.expect("sync");
    fx.validate(2, 0, 0);
    assert_eq!(fx.rs_client.get_count(), 0, "no adoption, no recheck");
}

/// As upstream's `TestPatchPodFails`: failed adoptions fail the sync, which is requeued.
#[tokio::test(start_paused = true)]
async fn failed_adoptions_fail_the_sync_and_requeue() {
    let fx = fixture(BURST_REPLICAS);
    let rs = new_replica_set(2, &[("foo", "bar")]);
    fx.add_rs(&rs);
    fx.add_pod(&new_pod("pod1", &rs, "Running", None, false));
    fx.add_pod(&new_pod("pod2", &rs, "Running", None, false));
    fx.pod_control
        .set_error(Some(api_status::internal_error("fake Error")));

    fx.controller.queue().add(key(&rs));
    assert!(fx.controller.process_next_work_item().await);
    fx.validate(0, 0, 2);
    assert_eq!(fx.controller.queue().num_requeues(&key(&rs)), 1);
    // The rate limiter's first delay is 5ms.
    tokio::time::advance(Duration::from_millis(5)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.drain_queue().await, BTreeSet::from([key(&rs)]));
}

/// As upstream's `TestDoNotAdoptOrCreateIfBeingDeleted`.
#[tokio::test(start_paused = true)]
async fn no_adoption_or_creation_while_being_deleted() {
    let fx = fixture(BURST_REPLICAS);
    let mut rs = new_replica_set(2, &[("foo", "bar")]);
    rs.metadata.deletion_timestamp = Some(Time(now()));
    fx.add_rs(&rs);
    fx.add_pod(&new_pod("pod1", &rs, "Running", None, false));
    fx.controller.sync(&key(&rs)).await.expect("sync");
    fx.validate(0, 0, 0);
}

/// As upstream's `TestDoNotAdoptOrCreateIfBeingDeletedRace`: the cache says alive, the
/// server says being deleted; the uncached recheck wins.
#[tokio::test(start_paused = true)]
async fn no_adoption_when_the_server_says_being_deleted() {
    let fx = fixture(BURST_REPLICAS);
    let rs = new_replica_set(2, &[("foo", "bar")]);
    fx.add_rs(&rs);
    let mut deleted = rs.clone();
    deleted.metadata.deletion_timestamp = Some(Time(now()));
    fx.rs_client.insert(deleted);
    fx.add_pod(&new_pod("pod1", &rs, "Running", None, false));

    let err = fx
        .controller
        .sync(&key(&rs))
        .await
        .expect_err("sync aborts");
    assert!(matches!(err, Error::ClaimPods { .. }), "{err}");
    fx.validate(0, 0, 0);
}

#[tokio::test(start_paused = true)]
async fn no_adoption_when_the_server_has_a_namesake() {
    let fx = fixture(BURST_REPLICAS);
    let rs = new_replica_set(2, &[("foo", "bar")]);
    fx.add_rs(&rs);
    let mut namesake = rs.clone();
    namesake.metadata.uid = Some(uid());
    fx.rs_client.insert(namesake);
    fx.add_pod(&new_pod("pod1", &rs, "Running", None, false));
    fx.controller
        .sync(&key(&rs))
        .await
        .expect_err("sync aborts");
    fx.validate(0, 0, 0);
}

// ---------------------------------------------------------------------------------------------
// sync: status
// ---------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn replica_failure_condition_is_set_then_cleared() {
    let fx = fixture(BURST_REPLICAS);
    let rs = new_replica_set(3, &[("foo", "bar")]);
    fx.add_rs(&rs);
    fx.pod_control
        .set_error(Some(api_status::internal_error("quota")));
    fx.controller.sync(&key(&rs)).await.expect_err("fails");
    let failed = fx.last_status();
    let condition = get_condition(&failed, REPLICA_FAILURE).expect("set");
    assert_eq!(condition.reason.as_deref(), Some("FailedCreate"));
    assert_eq!(condition.last_transition_time, Some(Time(now())));
    // One attempt, nothing else tried: no expectations left.
    assert_eq!(fx.pod_control.create_call_count(), 1);
    assert!(
        fx.controller
            .expectations()
            .satisfied_expectations(&key(&rs))
    );

    // The informer delivers the written status; the failure persists: no second write of
    // the same condition.
    let stored = fx.rs_client.object("default", "foobar").expect("stored");
    fx.rs_cache.add(Arc::new(stored)).expect("cache");
    fx.rs_client.clear_actions();
    fx.controller
        .sync(&key(&rs))
        .await
        .expect_err("still fails");
    assert!(
        fx.rs_client.status_updates().is_empty(),
        "condition unchanged, no write"
    );

    // The error clears: the condition goes.
    fx.pod_control.set_error(None);
    fx.controller.sync(&key(&rs)).await.expect("sync");
    let cleared = fx.last_status();
    assert!(
        get_condition(&cleared, REPLICA_FAILURE).is_none(),
        "{cleared:?}"
    );
    assert_eq!(cleared.conditions, None);
}

#[tokio::test(start_paused = true)]
async fn status_update_is_skipped_when_nothing_changed() {
    let fx = fixture(BURST_REPLICAS);
    let mut rs = new_replica_set(2, &[("foo", "bar")]);
    rs.metadata.generation = Some(3);
    rs.status = Some(ReplicaSetStatus {
        replicas: 2,
        ready_replicas: Some(2),
        available_replicas: Some(2),
        observed_generation: Some(3),
        terminating_replicas: Some(0),
        ..Default::default()
    });
    fx.add_rs(&rs);
    new_pod_list(
        Some(&fx.pod_cache),
        2,
        "Running",
        &[("foo", "bar")],
        &rs,
        "pod",
    );

    fx.controller.sync(&key(&rs)).await.expect("sync");
    assert!(
        fx.rs_client.actions().is_empty(),
        "{:?}",
        fx.rs_client.actions()
    );

    // A new generation must be observed even with the same counts.
    rs.metadata.generation = Some(4);
    fx.add_rs(&rs);
    fx.controller.sync(&key(&rs)).await.expect("sync");
    let status = fx.last_status();
    assert_eq!(status.observed_generation, Some(4));
    assert_eq!(status.replicas, 2);
}

#[tokio::test(start_paused = true)]
async fn status_counts_fully_labeled_ready_and_available() {
    let fx = fixture(BURST_REPLICAS);
    let mut rs = new_replica_set(4, &[("foo", "bar")]);
    rs.spec.as_mut().expect("spec").min_ready_seconds = Some(10);
    fx.add_rs(&rs);
    let long_ready = new_pod(
        "long-ready",
        &rs,
        "Running",
        Some(now() - SignedDuration::from_secs(60)),
        true,
    );
    let mut fully_labeled = new_pod(
        "fully-labeled",
        &rs,
        "Running",
        Some(now() - SignedDuration::from_secs(2)),
        true,
    );
    fully_labeled.metadata.labels = Some(labels(&[
        ("foo", "bar"),
        ("name", "foo"),
        ("type", "production"),
        ("extra", "ok"),
    ]));
    let pending = new_pod("pending", &rs, "Pending", None, true);
    let mut failed = new_pod("failed", &rs, "Failed", None, true);
    failed.metadata.labels = fully_labeled.metadata.labels.clone();
    for pod in [&long_ready, &fully_labeled, &pending, &failed] {
        fx.add_pod(pod);
    }
    fx.controller.sync(&key(&rs)).await.expect("sync");
    let status = fx.last_status();
    assert_eq!(status.replicas, 3, "the failed pod is not active");
    assert_eq!(status.fully_labeled_replicas, Some(1));
    assert_eq!(status.ready_replicas, Some(2));
    assert_eq!(status.available_replicas, Some(1));
}

/// As upstream's `TestReplicaSetController` terminating cases with
/// `DeploymentReplicaSetTerminatingReplicas` on.
#[tokio::test(start_paused = true)]
async fn terminating_replicas_count_the_owned_selected_pods_being_deleted() {
    let fx = fixture(BURST_REPLICAS);
    let rs = with_status(new_replica_set(2, &[("foo", "bar")]), 2, 2, 2);
    fx.add_rs(&rs);
    let deleting = |mut pod: Pod| {
        pod.metadata.deletion_timestamp = Some(Time(now()));
        pod
    };
    let other = new_replica_set(1, &[("foo", "bar")]);
    let mut unselected = deleting(new_pod("unselected", &rs, "Running", None, true));
    unselected.metadata.labels = Some(labels(&[("foo", "baz")]));
    for pod in [
        new_pod("a", &rs, "Running", None, true),
        new_pod("b", &rs, "Running", None, true),
        deleting(new_pod("stopping", &rs, "Running", None, true)),
        deleting(new_pod("pending", &rs, "Pending", None, true)),
        deleting(new_pod("done", &rs, "Succeeded", None, true)),
        deleting(new_pod("orphan", &rs, "Running", None, false)),
        deleting(new_pod("others", &other, "Running", None, true)),
        unselected,
    ] {
        fx.add_pod(&pod);
    }
    fx.controller.sync(&key(&rs)).await.expect("sync");
    fx.validate(0, 0, 0);
    let status = fx.last_status();
    assert_eq!(status.replicas, 2);
    assert_eq!(status.terminating_replicas, Some(2), "stopping and pending");
}

/// A ReplicationController's status has no `terminatingReplicas`: never written, so the
/// mirrored status (which cannot hold it) does not differ from the computed one forever.
#[tokio::test(start_paused = true)]
async fn kinds_without_terminating_replicas_never_write_them() {
    let fx = fixture_of(crate::replication::managed_kind(), BURST_REPLICAS);
    let mut rs = with_status(new_replica_set(1, &[("foo", "bar")]), 1, 1, 1);
    if let Some(status) = rs.status.as_mut() {
        status.terminating_replicas = None;
    }
    fx.add_rs(&rs);
    fx.add_pod(&new_pod("a", &rs, "Running", None, true));
    let mut stopping = new_pod("stopping", &rs, "Running", None, true);
    stopping.metadata.deletion_timestamp = Some(Time(now()));
    fx.add_pod(&stopping);
    fx.controller.sync(&key(&rs)).await.expect("sync");
    assert!(
        fx.rs_client.status_updates().is_empty(),
        "{:?}",
        fx.rs_client.status_updates()
    );
}

#[tokio::test(start_paused = true)]
async fn min_ready_seconds_requeues_until_available() {
    struct Case {
        name: &'static str,
        ready_for: i64,
        requeued_after: Option<u64>,
    }
    let cases = [
        Case {
            name: "ready but not yet available: look again after minReadySeconds",
            ready_for: 5,
            requeued_after: Some(10),
        },
        Case {
            name: "available: nothing to wait for",
            ready_for: 20,
            requeued_after: None,
        },
    ];
    for case in cases {
        let fx = fixture(BURST_REPLICAS);
        let mut rs = new_replica_set(2, &[("foo", "bar")]);
        rs.spec.as_mut().expect("spec").min_ready_seconds = Some(10);
        fx.add_rs(&rs);
        for i in 0..2 {
            let since = now() - SignedDuration::from_secs(case.ready_for);
            fx.add_pod(&new_pod(
                &format!("pod{i}"),
                &rs,
                "Running",
                Some(since),
                true,
            ));
        }
        fx.controller.sync(&key(&rs)).await.expect(case.name);
        let status = fx.last_status();
        assert_eq!(status.ready_replicas, Some(2), "{}", case.name);
        let queue = fx.controller.queue();
        assert_eq!(queue.len(), 0, "{}", case.name);
        match case.requeued_after {
            Some(secs) => {
                assert_eq!(status.available_replicas, None, "{}", case.name);
                assert_eq!(queue.waiting_len(), 1, "{}", case.name);
                tokio::time::advance(Duration::from_secs(secs) - Duration::from_millis(1)).await;
                tokio::task::yield_now().await;
                assert_eq!(queue.len(), 0, "{}: not before", case.name);
                tokio::time::advance(Duration::from_millis(1)).await;
                tokio::task::yield_now().await;
                assert_eq!(queue.len(), 1, "{}: requeued", case.name);
            }
            None => {
                assert_eq!(status.available_replicas, Some(2), "{}", case.name);
                assert_eq!(queue.waiting_len(), 0, "{}", case.name);
            }
        }
    }
}

/// As upstream's `TestControllerUpdateStatusWithFailure`: one retry after a fresh GET, the
/// new status kept; then the error.
#[tokio::test(start_paused = true)]
async fn status_update_retries_once_after_a_fresh_get() {
    let client = FakeReplicaSetClient::new();
    let rs = new_replica_set(1, &[("foo", "bar")]);
    client.insert(rs.clone());
    client.set_update_error(Some(api_status::internal_error("fake error")));
    let new_status = ReplicaSetStatus {
        replicas: 10,
        ..Default::default()
    };
    let err = crate::replicaset::status::update_replica_set_status(&client, &rs, new_status)
        .await
        .expect_err("both attempts fail");
    assert!(matches!(err, Error::UpdateStatus { .. }), "{err}");
    let actions = client.actions();
    assert_eq!(actions.len(), 3, "{actions:?}");
    assert!(matches!(&actions[1], ReplicaSetAction::Get { name, .. } if name == "foobar"));
    for update in client.status_updates() {
        assert_eq!(update.status.map(|s| s.replicas), Some(10));
    }
}

#[tokio::test(start_paused = true)]
async fn failed_status_update_requeues_rate_limited() {
    let fx = fixture(BURST_REPLICAS);
    let rs = new_replica_set(1, &[("foo", "bar")]);
    let rs = with_status(rs, 2, 0, 0);
    fx.add_rs(&rs);
    new_pod_list(
        Some(&fx.pod_cache),
        1,
        "Running",
        &[("foo", "bar")],
        &rs,
        "pod",
    );
    fx.rs_client
        .set_update_error(Some(api_status::internal_error("failed to update status")));

    fx.controller.queue().add(key(&rs));
    assert!(fx.controller.process_next_work_item().await);
    assert_eq!(fx.controller.queue().num_requeues(&key(&rs)), 1);
    tokio::time::advance(Duration::from_millis(5)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 1, "requeued");
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// As upstream's `TestDeleteFinalStateUnknown`.
#[tokio::test(start_paused = true)]
async fn tombstoned_pod_deletion_enqueues_its_owner() {
    let fx = fixture(BURST_REPLICAS);
    let rs = new_replica_set(1, &[("foo", "bar")]);
    fx.add_rs(&rs);
    let pod = new_pod_list(None, 1, "Running", &[("foo", "bar")], &rs, "pod").remove(0);
    fx.handlers()
        .delete_pod(&DeletedObject::Tombstone(DeletedFinalStateUnknown {
            key: "foo".into(),
            obj: Arc::new(pod),
        }));
    assert_eq!(fx.drain_queue().await, BTreeSet::from([key(&rs)]));
}

/// As upstream's `TestOverlappingRSs`: a pod with a controller reference wakes only its
/// owner, whatever else selects it.
#[tokio::test(start_paused = true)]
async fn owned_pod_wakes_only_its_owner() {
    let fx = fixture(10);
    let mut rss = Vec::new();
    for j in 1..10 {
        let mut rs = new_replica_set(1, &[("foo", "bar")]);
        rs.metadata.name = Some(format!("rs{j}"));
        fx.add_rs(&rs);
        rss.push(rs);
    }
    let owner = &rss[3];
    let pod = new_pod("pod", owner, "Pending", None, true);
    fx.handlers().add_pod(&pod);
    assert_eq!(fx.drain_queue().await, BTreeSet::from([key(owner)]));
    assert_eq!(fx.expectations(owner), None, "nothing was expected");
}

#[tokio::test(start_paused = true)]
async fn orphan_pod_wakes_every_selecting_replica_set_without_observing() {
    let fx = fixture(10);
    let mut a = new_replica_set(1, &[("foo", "bar")]);
    a.metadata.name = Some("a".into());
    let mut b = new_replica_set(1, &[("foo", "bar")]);
    b.metadata.name = Some("b".into());
    let mut other = new_replica_set(1, &[("foo", "other")]);
    other.metadata.name = Some("other".into());
    for rs in [&a, &b, &other] {
        fx.add_rs(rs);
        fx.controller.expectations().expect_creations(&key(rs), 1);
    }
    let orphan = new_pod("orphan", &a, "Pending", None, false);
    fx.handlers().add_pod(&orphan);
    assert_eq!(fx.drain_queue().await, BTreeSet::from([key(&a), key(&b)]));
    assert_eq!(
        fx.expectations(&a),
        Some((1, 0)),
        "an orphan is no observed creation"
    );
}

/// As upstream's `TestPodControllerLookup`.
#[tokio::test(start_paused = true)]
async fn pod_replica_set_lookup() {
    struct Case {
        name: &'static str,
        rs_namespace: &'static str,
        rs_selector: &'static [(&'static str, &'static str)],
        pod_namespace: &'static str,
        pod_labels: &'static [(&'static str, &'static str)],
        found: bool,
    }
    let cases = [
        Case {
            name: "a pod without labels matches nothing",
            rs_namespace: "ns",
            rs_selector: &[("foo", "bar")],
            pod_namespace: "ns",
            pod_labels: &[],
            found: false,
        },
        Case {
            name: "matching labels in another namespace",
            rs_namespace: "other",
            rs_selector: &[("foo", "bar")],
            pod_namespace: "ns",
            pod_labels: &[("foo", "bar")],
            found: false,
        },
        Case {
            name: "matching namespace and labels",
            rs_namespace: "ns",
            rs_selector: &[("foo", "bar")],
            pod_namespace: "ns",
            pod_labels: &[("foo", "bar")],
            found: true,
        },
        Case {
            name: "an empty selector matches nothing",
            rs_namespace: "ns",
            rs_selector: &[],
            pod_namespace: "ns",
            pod_labels: &[("foo", "bar")],
            found: false,
        },
    ];
    for case in cases {
        let fx = fixture(10);
        let mut rs = new_replica_set(1, case.rs_selector);
        rs.metadata.namespace = Some(case.rs_namespace.into());
        fx.add_rs(&rs);
        let mut pod = new_pod("pod", &rs, "Running", None, false);
        pod.metadata.namespace = Some(case.pod_namespace.into());
        pod.metadata.labels = Some(labels(case.pod_labels));
        let found = fx.handlers().get_pod_replica_sets(&pod);
        assert_eq!(!found.is_empty(), case.found, "{}", case.name);
    }
}

/// As upstream's `TestUpdatePods`.
#[tokio::test(start_paused = true)]
async fn pod_updates_wake_old_and_new_owners() {
    let fx = fixture(10);
    let rs1 = new_replica_set(1, &[("foo", "bar")]);
    let mut rs2 = new_replica_set(1, &[("bar", "foo")]);
    rs2.metadata.name = Some("barfoo".into());
    fx.add_rs(&rs1);
    fx.add_rs(&rs2);
    let (labels1, labels2) = (labels(&[("foo", "bar")]), labels(&[("bar", "foo")]));

    struct Case {
        name: &'static str,
        old_labels: BTreeMap<String, String>,
        old_owner: Option<OwnerReference>,
        new_labels: BTreeMap<String, String>,
        new_owner: Option<OwnerReference>,
        woken: BTreeSet<String>,
    }
    let cases = [
        Case {
            name: "owned pod relabelled: its owner",
            old_labels: labels1.clone(),
            old_owner: Some(controller_ref_to(&rs1)),
            new_labels: labels2.clone(),
            new_owner: Some(controller_ref_to(&rs1)),
            woken: BTreeSet::from([key(&rs1)]),
        },
        Case {
            name: "released by its owner: the owner and the ReplicaSets selecting it",
            old_labels: labels2.clone(),
            old_owner: Some(controller_ref_to(&rs1)),
            new_labels: labels2.clone(),
            new_owner: None,
            woken: BTreeSet::from([key(&rs1), key(&rs2)]),
        },
        Case {
            name: "orphaned with a label change: the ReplicaSets selecting it",
            old_labels: labels1.clone(),
            old_owner: Some(controller_ref_to(&rs2)),
            new_labels: labels2.clone(),
            new_owner: None,
            woken: BTreeSet::from([key(&rs2)]),
        },
        Case {
            name: "orphan relabelled: the ReplicaSets selecting it",
            old_labels: labels(&[("x", "y")]),
            old_owner: None,
            new_labels: labels1.clone(),
            new_owner: None,
            woken: BTreeSet::from([key(&rs1)]),
        },
        Case {
            name: "orphan unchanged: nobody",
            old_labels: labels1.clone(),
            old_owner: None,
            new_labels: labels1.clone(),
            new_owner: None,
            woken: BTreeSet::new(),
        },
    ];
    for case in cases {
        let mut old = new_pod("pod", &rs1, "Running", None, false);
        old.metadata.labels = Some(case.old_labels);
        old.metadata.owner_references = case.old_owner.map(|r| vec![r]);
        old.metadata.resource_version = Some("1".into());
        let mut cur = old.clone();
        cur.metadata.labels = Some(case.new_labels);
        cur.metadata.owner_references = case.new_owner.map(|r| vec![r]);
        cur.metadata.resource_version = Some("2".into());
        fx.handlers().update_pod(&old, &cur);
        assert_eq!(fx.drain_queue().await, case.woken, "{}", case.name);
    }

    // Same resourceVersion (a resync): ignored.
    let pod = new_pod("pod", &rs1, "Running", None, true);
    fx.handlers().update_pod(&pod, &pod);
    assert!(fx.drain_queue().await.is_empty(), "resync ignored");
}

#[tokio::test(start_paused = true)]
async fn pod_turning_ready_requeues_after_min_ready_seconds() {
    let fx = fixture(10);
    let mut rs = new_replica_set(1, &[("foo", "bar")]);
    rs.spec.as_mut().expect("spec").min_ready_seconds = Some(10);
    fx.add_rs(&rs);
    let old = not_ready(new_pod("pod", &rs, "Running", None, true));
    let mut cur = new_pod("pod", &rs, "Running", Some(now()), true);
    cur.metadata.resource_version = Some("2".into());
    fx.handlers().update_pod(&old, &cur);
    assert_eq!(fx.drain_queue().await, BTreeSet::from([key(&rs)]));
    assert_eq!(fx.controller.queue().waiting_len(), 1);
    tokio::time::advance(Duration::from_secs(10)).await;
    tokio::task::yield_now().await;
    assert!(
        fx.controller.queue().is_empty(),
        "minReadySeconds + 1s, not before"
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.drain_queue().await, BTreeSet::from([key(&rs)]));
}

/// As upstream's `TestDeletionTimestamp`: a pod being deleted counts as deleted exactly once.
#[tokio::test(start_paused = true)]
async fn deletion_timestamp_observes_deletion_once() {
    let fx = fixture(10);
    let rs = new_replica_set(1, &[("foo", "bar")]);
    fx.add_rs(&rs);
    let rs_key = key(&rs);
    let exp = fx.controller.expectations();

    let mut pod = new_pod_list(None, 1, "Pending", &[("foo", "bar")], &rs, "pod").remove(0);
    pod.metadata.deletion_timestamp = Some(Time(now()));
    pod.metadata.resource_version = Some("1".into());
    exp.expect_deletions(&rs_key, [pod_key(&pod)]);

    // Added while being deleted: a deletion, not a creation.
    fx.handlers().add_pod(&pod);
    assert_eq!(fx.drain_queue().await, BTreeSet::from([rs_key.clone()]));
    assert!(exp.get_expectations(&rs_key).expect("recorded").fulfilled());

    // An update that sets the deletionTimestamp is a deletion.
    let mut old = new_pod_list(None, 1, "Pending", &[("foo", "bar")], &rs, "pod").remove(0);
    old.metadata.resource_version = Some("2".into());
    exp.expect_deletions(&rs_key, [pod_key(&pod)]);
    fx.handlers().update_pod(&old, &pod);
    assert_eq!(fx.drain_queue().await, BTreeSet::from([rs_key.clone()]));
    assert!(exp.get_expectations(&rs_key).expect("recorded").fulfilled());

    // Later updates and the final delete of that pod are not second deletions.
    let second = owned_pod_from_key("default/secondPod", &rs);
    exp.expect_deletions(&rs_key, [pod_key(&second)]);
    old.metadata.deletion_timestamp = Some(Time(now()));
    fx.handlers().update_pod(&old, &pod);
    assert!(!exp.get_expectations(&rs_key).expect("recorded").fulfilled());
    fx.handlers()
        .delete_pod(&DeletedObject::Object(Arc::new(pod.clone())));
    assert!(!exp.get_expectations(&rs_key).expect("recorded").fulfilled());

    // Deleting the expected pod fulfils them.
    fx.drain_queue().await;
    fx.handlers()
        .delete_pod(&DeletedObject::Object(Arc::new(second)));
    assert_eq!(fx.drain_queue().await, BTreeSet::from([rs_key.clone()]));
    assert!(exp.get_expectations(&rs_key).expect("recorded").fulfilled());
}

/// As upstream's `TestExpectationsOnRecreate`: a ReplicaSet deleted and recreated under
/// the same name starts without the old one's expectations.
#[tokio::test(start_paused = true)]
async fn recreated_replica_set_starts_clean() {
    let fx = fixture(100);
    let old = new_replica_set(1, &[("foo", "bar")]);
    fx.add_rs(&old);
    fx.handlers().add_rs(&old);
    assert!(fx.controller.process_next_work_item().await);
    fx.validate(1, 0, 0);
    assert_eq!(fx.expectations(&old), Some((1, 0)));

    // Seen only as an update with a new UID (the delete was missed).
    let mut new = old.clone();
    new.metadata.uid = Some(uid());
    fx.add_rs(&new);
    fx.handlers().update_rs(&old, &new);
    assert_eq!(fx.expectations(&old), None, "old expectations dropped");
    fx.pod_control.clear();
    assert!(fx.controller.process_next_work_item().await);
    fx.validate(1, 0, 0);
    assert_eq!(fx.expectations(&new), Some((1, 0)));

    // A tombstone delete drops them too.
    fx.handlers()
        .delete_rs(&DeletedObject::Tombstone(DeletedFinalStateUnknown {
            key: key(&new),
            obj: Arc::new(new.clone()),
        }));
    assert_eq!(fx.expectations(&new), None);
    assert_eq!(fx.drain_queue().await, BTreeSet::from([key(&new)]));
}

#[tokio::test(start_paused = true)]
async fn pods_of_other_kinds_or_unknown_owners_are_ignored() {
    let fx = fixture(10);
    let rs = new_replica_set(1, &[("foo", "bar")]);
    fx.add_rs(&rs);
    let mut other_kind = new_pod("a", &rs, "Running", None, true);
    other_kind
        .metadata
        .owner_references
        .as_mut()
        .expect("owner")[0]
        .kind = "StatefulSet".into();
    let mut namesake = new_pod("b", &rs, "Running", None, true);
    namesake.metadata.owner_references.as_mut().expect("owner")[0].uid = "old-uid".into();
    fx.handlers().add_pod(&other_kind);
    fx.handlers().add_pod(&namesake);
    fx.handlers()
        .delete_pod(&DeletedObject::Object(Arc::new(namesake)));
    assert!(fx.drain_queue().await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Workers
// ---------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn workers_never_sync_one_key_concurrently_and_stop_on_cancel() {
    let fx = fixture(10);
    let in_flight: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let synced: Arc<Mutex<Vec<String>>> = Arc::default();
    let overlaps = Arc::new(AtomicU64::new(0));
    let handler: SyncHandler = {
        let (in_flight, synced, overlaps) = (in_flight.clone(), synced.clone(), overlaps.clone());
        Arc::new(move |key: String| {
            let (in_flight, synced, overlaps) =
                (in_flight.clone(), synced.clone(), overlaps.clone());
            Box::pin(async move {
                if !in_flight.lock().expect("lock").insert(key.clone()) {
                    overlaps.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                in_flight.lock().expect("lock").remove(&key);
                synced.lock().expect("lock").push(key.clone());
                if key == "ns/fails" {
                    return Err(Error::UpdateStatus {
                        replica_set: key,
                        source: kube::Error::Api(api_status::internal_error("test").boxed()),
                    });
                }
                if key == "ns/panics" {
                    panic!("sync panicked");
                }
                Ok(())
            })
        })
    };
    let controller = Arc::new(fx.controller.with_sync_handler(handler));
    let cancel = CancellationToken::new();
    let run = tokio::spawn(Arc::clone(&controller).run(5, cancel.clone()));
    for round in 0..20 {
        for k in ["ns/a", "ns/b", "ns/c"] {
            controller.queue().add(k.to_owned());
        }
        if round % 5 == 0 {
            controller.queue().add("ns/fails".to_owned());
            controller.queue().add("ns/panics".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        overlaps.load(Ordering::Relaxed),
        0,
        "a key synced twice at once"
    );
    let synced_keys: BTreeSet<String> = synced.lock().expect("lock").iter().cloned().collect();
    assert_eq!(
        synced_keys,
        ["ns/a", "ns/b", "ns/c", "ns/fails", "ns/panics"]
            .into_iter()
            .map(String::from)
            .collect()
    );
    assert!(
        controller.queue().num_requeues(&"ns/panics".to_owned()) > 0,
        "a panicking sync is retried"
    );
    assert_eq!(controller.queue().num_requeues(&"ns/a".to_owned()), 0);

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("run returns after cancel")
        .expect("run task");
    assert!(controller.queue().shutting_down());
}

#[tokio::test(start_paused = true)]
async fn run_waits_for_caches_and_gives_up_on_cancel() {
    let fx = fixture(10);
    let synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let calls: Arc<Mutex<Vec<String>>> = Arc::default();
    let handler: SyncHandler = {
        let calls = calls.clone();
        Arc::new(move |key| {
            calls.lock().expect("lock").push(key);
            Box::pin(async { Ok(()) })
        })
    };
    let flag = synced.clone();
    let controller = Arc::new(
        fx.controller
            .with_caches_synced(vec![Arc::new(move || flag.load(Ordering::Relaxed))])
            .with_sync_handler(handler),
    );
    controller.queue().add("ns/a".to_owned());
    let cancel = CancellationToken::new();
    let run = tokio::spawn(Arc::clone(&controller).run(2, cancel.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        calls.lock().expect("lock").is_empty(),
        "no sync before the caches sync"
    );
    synced.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(*calls.lock().expect("lock"), vec!["ns/a".to_owned()]);
    cancel.cancel();
    run.await.expect("run");

    // Cancelled before the caches sync: returns without syncing.
    let fx = fixture(10);
    let controller = Arc::new(fx.controller.with_caches_synced(vec![Arc::new(|| false)]));
    let cancel = CancellationToken::new();
    let run = tokio::spawn(Arc::clone(&controller).run(2, cancel.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    cancel.cancel();
    run.await.expect("run");
    assert!(controller.queue().shutting_down());
}

// ---------------------------------------------------------------------------------------------
// Wiring to shared informers
// ---------------------------------------------------------------------------------------------

/// A ListerWatcher serving a fixed list, then the watch events the test sends.
struct ChannelLw<K> {
    items: Vec<K>,
    resource_version: String,
    events: Mutex<
        Option<
            futures::channel::mpsc::UnboundedReceiver<
                Result<kube::api::WatchEvent<K>, kube::Error>,
            >,
        >,
    >,
}

type EventSender<K> =
    futures::channel::mpsc::UnboundedSender<Result<kube::api::WatchEvent<K>, kube::Error>>;

fn channel_lw<K>(items: Vec<K>, resource_version: &str) -> (ChannelLw<K>, EventSender<K>) {
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let lw = ChannelLw {
        items,
        resource_version: resource_version.to_owned(),
        events: Mutex::new(Some(rx)),
    };
    (lw, tx)
}

#[async_trait::async_trait]
impl<K> kcm_machinery::informer::ListerWatcher<K> for ChannelLw<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    async fn list(
        &self,
        _params: &kube::api::ListParams,
    ) -> std::result::Result<kube::core::ObjectList<K>, kube::Error> {
        Ok(kube::core::ObjectList {
            types: kube::core::TypeMeta::list::<K>(),
            metadata: kube::core::ListMeta {
                resource_version: Some(self.resource_version.clone()),
                ..Default::default()
            },
            items: self.items.clone(),
        })
    }

    async fn watch(
        &self,
        _params: &kube::api::WatchParams,
        _resource_version: &str,
    ) -> std::result::Result<kcm_machinery::informer::WatchStream<K>, kube::Error> {
        use futures::StreamExt;
        let events = self.events.lock().expect("lock").take();
        Ok(match events {
            Some(rx) => rx.boxed(),
            None => futures::stream::pending().boxed(),
        })
    }
}

/// Waits (bounded) until `condition` holds.
async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// As upstream's `TestWatchControllers` and `TestWatchPods`, end to end through the shared
/// informers: a listed ReplicaSet is synced (pods created), and watched pod events are
/// observed by its expectations.
#[tokio::test]
async fn informer_events_drive_syncs() {
    use kcm_machinery::informer::SharedIndexInformer;

    let mut rs = new_replica_set(2, &[("foo", "bar")]);
    rs.metadata.resource_version = Some("10".into());
    let (rs_lw, _rs_events) = channel_lw(vec![rs.clone()], "10");
    let (pod_lw, pod_events) = channel_lw(Vec::<Pod>::new(), "10");
    let rs_informer = SharedIndexInformer::new(rs_lw, Duration::ZERO);
    let pod_informer = SharedIndexInformer::new(pod_lw, Duration::ZERO);
    let pod_control = Arc::new(FakePodControl::new());
    let rs_client = Arc::new(FakeReplicaSetClient::new());
    rs_client.insert(rs.clone());
    let controller = Arc::new(ReplicaSetController::with_informers(
        &rs_informer,
        &pod_informer,
        rs_client.clone(),
        pod_control.clone(),
        ReplicaSetControllerOptions::default(),
    ));

    let cancel = CancellationToken::new();
    let tasks = [
        tokio::spawn({
            let (i, c) = (rs_informer.clone(), cancel.clone());
            async move { i.run(c).await }
        }),
        tokio::spawn({
            let (i, c) = (pod_informer.clone(), cancel.clone());
            async move { i.run(c).await }
        }),
        tokio::spawn(Arc::clone(&controller).run(2, cancel.clone())),
    ];

    eventually("the listed ReplicaSet creates its pods", || {
        pod_control.templates().len() == 2
    })
    .await;
    assert_eq!(
        controller
            .expectations()
            .get_expectations(&key(&rs))
            .map(|e| e.add),
        Some(2)
    );

    // The created pods arrive through the pod watch: both creations are observed.
    for (i, name) in ["pod-a", "pod-b"].into_iter().enumerate() {
        let mut pod = new_pod(name, &rs, "Pending", None, true);
        pod.metadata.resource_version = Some(format!("{}", 11 + i));
        pod_events
            .unbounded_send(Ok(kube::api::WatchEvent::Added(pod)))
            .expect("send");
    }
    eventually("creations observed", || {
        controller
            .expectations()
            .get_expectations(&key(&rs))
            .is_some_and(|e| e.add == 0)
    })
    .await;
    eventually("status written with both replicas", || {
        rs_client
            .status_updates()
            .last()
            .and_then(|r| r.status.clone())
            .is_some_and(|s| s.replicas == 2)
    })
    .await;
    assert_eq!(pod_control.templates().len(), 2, "nothing more created");

    cancel.cancel();
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("stops on cancel")
            .expect("task");
    }
}

#[tokio::test(start_paused = true)]
async fn queue_metrics_carry_the_replicaset_name() {
    let metrics = Arc::new(WorkqueueMetrics::new());
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let controller = ReplicaSetController::with_caches(
        Indexer::new(),
        Indexer::new(),
        Arc::new(FakeReplicaSetClient::new()),
        Arc::new(FakePodControl::new()),
        ReplicaSetControllerOptions {
            burst_replicas: BURST_REPLICAS,
            metrics: Some(metrics),
            controller_metrics: None,
            ..ReplicaSetControllerOptions::default()
        },
    );
    controller.queue().add("ns/a".to_owned());
    controller.queue().add("ns/b".to_owned());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(
        text.contains(r#"workqueue_adds_total{name="replicaset"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"workqueue_depth{name="replicaset"} 2"#),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn scale_down_reports_the_deletion_age_ratio() {
    let metrics = Arc::new(crate::replicaset::ReplicaSetMetrics::new());
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let rs_cache = Indexer::new();
    let pod_cache = Indexer::new();
    let pod_control = Arc::new(FakePodControl::new());
    let controller = ReplicaSetController::with_caches(
        rs_cache.clone(),
        pod_cache.clone(),
        Arc::new(FakeReplicaSetClient::new()),
        pod_control.clone(),
        ReplicaSetControllerOptions {
            controller_metrics: Some(metrics),
            ..ReplicaSetControllerOptions::default()
        },
    )
    .with_clock(Arc::new(now));
    let rs = new_replica_set(1, &[("foo", "bar")]);
    rs_cache.add(Arc::new(rs.clone())).expect("add");
    for (name, age) in [("young", 10), ("old", 100)] {
        let mut pod = new_pod(name, &rs, "Running", None, true);
        pod.metadata.creation_timestamp = Some(Time(now() - SignedDuration::from_secs(age)));
        pod_cache.add(Arc::new(pod)).expect("add");
    }
    controller.sync(&key(&rs)).await.expect("sync");
    // The younger pod goes first; its ratio to itself is 1.
    assert_eq!(pod_control.deleted_pod_names(), vec!["young".to_owned()]);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(
        text.contains("replicaset_controller_sorting_deletion_age_ratio_sum 1.0"),
        "{text}"
    );
}

/// A panic injected in the sync is recovered by the shared worker, counted in
/// `kcm_workqueue_sync_panics_total{name="replicaset"}`, and the key retried.
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
    let controller = ReplicaSetController::with_caches(
        Indexer::new(),
        Indexer::new(),
        Arc::new(FakeReplicaSetClient::new()),
        Arc::new(FakePodControl::new()),
        ReplicaSetControllerOptions {
            metrics: Some(metrics.clone()),
            ..ReplicaSetControllerOptions::default()
        },
    )
    .with_sync_handler(handler);
    let key = "ns/rs".to_owned();
    controller.queue().add(key.clone());
    assert!(controller.process_next_work_item().await, "recovered");
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1, "counted");
    assert_eq!(controller.queue().num_requeues(&key), 1, "retried");
    assert!(controller.process_next_work_item().await);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(
        controller.queue().num_requeues(&key),
        0,
        "the retry succeeded"
    );
}
