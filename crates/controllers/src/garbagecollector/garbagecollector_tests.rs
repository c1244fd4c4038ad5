//! Unit tests of the collector's decisions against the in-memory API (`FakeMetadataClient`).
//!
//! `Cluster` plays the informers: after every worker step it compares the fake's objects with
//! what it reported last and feeds add/update/delete events to the graph builder, so whole
//! cascades run deterministically without HTTP.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::events::FakeRecorder;
use kcm_testing::MetaBuilder;
use kube::api::ObjectMeta;
use kube::core::{ApiResource, DynamicObject, PartialObjectMeta, Status, TypeMeta};

use super::super::discovery::{DiscoveredResource, RestMapper};
use super::super::fake::FakeMetadataClient;
use super::super::graph::Node;
use super::super::graph_builder::{ChangeType, GraphEvent, SharedObject};
use super::*;

// ----- the resources --------------------------------------------------------------------------

struct Kind {
    api_version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
}

const POD: Kind = Kind {
    api_version: "v1",
    kind: "Pod",
    plural: "pods",
    namespaced: true,
};
const RS: Kind = Kind {
    api_version: "apps/v1",
    kind: "ReplicaSet",
    plural: "replicasets",
    namespaced: true,
};
const DEPLOY: Kind = Kind {
    api_version: "apps/v1",
    kind: "Deployment",
    plural: "deployments",
    namespaced: true,
};
const RC: Kind = Kind {
    api_version: "v1",
    kind: "ReplicationController",
    plural: "replicationcontrollers",
    namespaced: true,
};
const NODE: Kind = Kind {
    api_version: "v1",
    kind: "Node",
    plural: "nodes",
    namespaced: false,
};
const PV: Kind = Kind {
    api_version: "v1",
    kind: "PersistentVolume",
    plural: "persistentvolumes",
    namespaced: false,
};
const KINDS: [&Kind; 6] = [&POD, &RS, &DEPLOY, &RC, &NODE, &PV];

impl Kind {
    /// The fake's resource name (`resource.version.group`).
    fn resource(&self) -> String {
        let (group, version) = self
            .api_version
            .split_once('/')
            .unwrap_or(("", self.api_version));
        format!("{}.{version}.{group}", self.plural)
    }

    fn discovered(&self) -> DiscoveredResource {
        let (group, version) = self
            .api_version
            .split_once('/')
            .unwrap_or(("", self.api_version));
        DiscoveredResource {
            api_resource: ApiResource {
                group: group.into(),
                version: version.into(),
                api_version: self.api_version.into(),
                kind: self.kind.into(),
                plural: self.plural.into(),
            },
            namespaced: self.namespaced,
            verbs: vec!["delete".into(), "list".into(), "watch".into()],
        }
    }

    fn owner_ref(&self, name: &str) -> OwnerReference {
        kcm_testing::owner_ref(self.api_version, self.kind, name, &uid(name)).build()
    }

    fn identity(&self, ns: &str, name: &str) -> ObjectIdentity {
        ObjectIdentity {
            kind: self.kind.into(),
            api_version: self.api_version.into(),
            namespace: if self.namespaced {
                ns.into()
            } else {
                String::new()
            },
            name: name.into(),
            uid: uid(name),
        }
    }
}

fn uid(name: &str) -> String {
    format!("uid-{name}")
}

fn blocking(mut r: OwnerReference) -> OwnerReference {
    r.block_owner_deletion = Some(true);
    r
}

fn object(ns: &str, name: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
    let m = (owners.into_iter()).fold(kcm_testing::meta(name).uid(uid(name)), |m, o| m.owner(o));
    if ns.is_empty() {
        m.build()
    } else {
        m.namespace(ns).build()
    }
}

fn with_finalizers(mut m: ObjectMeta, finalizers: &[&str]) -> ObjectMeta {
    m.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    m
}

fn shared(meta: ObjectMeta) -> SharedObject {
    Arc::new(PartialObjectMeta::<DynamicObject> {
        types: None,
        metadata: meta,
        _phantom: std::marker::PhantomData,
    })
}

fn conflict() -> Status {
    Status::failure("the object has been modified", "Conflict").with_code(409)
}

// ----- the harness ----------------------------------------------------------------------------

/// The fake API, the collector, and a poor man's informer between them.
struct Cluster {
    api: Arc<FakeMetadataClient>,
    gc: Arc<GarbageCollector>,
    recorder: FakeRecorder,
    /// What the "informers" last reported, by (resource, key).
    seen: BTreeMap<(String, String), (&'static Kind, ObjectMeta)>,
}

impl Cluster {
    fn new() -> Self {
        Self::with_options(GarbageCollectorOptions::default())
    }

    fn with_options(options: GarbageCollectorOptions) -> Self {
        let api = Arc::new(FakeMetadataClient::new());
        let mapper = Arc::new(RestMapper::from_resources(
            KINDS
                .iter()
                .map(|k| k.discovered())
                .collect::<Vec<_>>()
                .iter(),
        ));
        let recorder = FakeRecorder::new();
        let gc = Arc::new(GarbageCollector::with_client(
            api.clone(),
            mapper,
            Arc::new(recorder.clone()),
            options,
        ));
        Self {
            api,
            gc,
            recorder,
            seen: BTreeMap::new(),
        }
    }

    /// Creates an object in the API only (the graph has not seen it).
    fn create_unobserved(&self, kind: &Kind, meta: ObjectMeta) {
        self.api.insert(&kind.resource(), meta);
    }

    /// Creates an object and lets the graph observe it.
    fn create(&mut self, kind: &'static Kind, meta: ObjectMeta) {
        self.create_unobserved(kind, meta);
        self.observe(kind);
    }

    fn get(&self, kind: &Kind, ns: &str, name: &str) -> Option<ObjectMeta> {
        let key = if kind.namespaced {
            format!("{ns}/{name}")
        } else {
            name.to_owned()
        };
        self.api.object(&kind.resource(), &key)
    }

    /// Reports every change of `kind`'s objects to the graph builder, as an informer would.
    fn observe(&mut self, kind: &'static Kind) {
        let resource = kind.resource();
        let type_meta = Arc::new(TypeMeta {
            api_version: kind.api_version.into(),
            kind: kind.kind.into(),
        });
        let mut events = Vec::new();
        let keys: Vec<(String, String)> = self
            .seen
            .keys()
            .filter(|(r, _)| r == &resource)
            .cloned()
            .collect();
        for (r, key) in keys {
            if self.api.object(&r, &key).is_none()
                && let Some((_, last)) = self.seen.remove(&(r.clone(), key.clone()))
            {
                events.push(GraphEvent::observed(
                    ChangeType::Delete,
                    shared(last),
                    None,
                    type_meta.clone(),
                ));
            }
        }
        for (key, meta) in self.objects(&resource) {
            let previous = self
                .seen
                .insert((resource.clone(), key), (kind, meta.clone()));
            match previous {
                None => events.push(GraphEvent::observed(
                    ChangeType::Add,
                    shared(meta),
                    None,
                    type_meta.clone(),
                )),
                Some((_, old)) if old != meta => events.push(GraphEvent::observed(
                    ChangeType::Update,
                    shared(meta),
                    Some(shared(old)),
                    type_meta.clone(),
                )),
                Some(_) => {}
            }
        }
        for event in events {
            self.gc.graph_builder().changes().push(event);
        }
    }

    fn objects(&self, resource: &str) -> Vec<(String, ObjectMeta)> {
        // The fake has no list; probe the keys we know plus everything inserted.
        self.api
            .keys(resource)
            .into_iter()
            .filter_map(|k| self.api.object(resource, &k).map(|m| (k, m)))
            .collect()
    }

    /// Applies every queued graph change.
    async fn process_graph_changes(&self) {
        while !self.gc.graph_builder().changes().is_empty() {
            assert!(self.gc.graph_builder().process_next().await);
        }
    }

    /// Runs informers, graph builder and workers until nothing is left to do (rate-limited
    /// requeues included, time advanced past their delay). Returns the steps taken; panics
    /// after `max_steps` (a cascade that never settles).
    async fn settle(&mut self, max_steps: usize) -> usize {
        for step in 0..max_steps {
            for kind in KINDS {
                self.observe(kind);
            }
            self.process_graph_changes().await;
            if !self.gc.attempt_to_delete.is_empty() {
                assert!(self.gc.process_attempt_to_delete_worker().await);
                continue;
            }
            if !self.gc.attempt_to_orphan.is_empty() {
                assert!(self.gc.process_attempt_to_orphan_worker().await);
                continue;
            }
            // Let rate-limited requeues come due.
            tokio::time::advance(std::time::Duration::from_secs(2)).await;
            tokio::task::yield_now().await;
            if self.gc.attempt_to_delete.is_empty()
                && self.gc.attempt_to_orphan.is_empty()
                && self.gc.graph_builder().changes().is_empty()
            {
                return step;
            }
        }
        panic!("the cascade did not settle in {max_steps} steps");
    }

    fn snapshot(&self, name: &str) -> NodeSnapshot {
        self.gc
            .graph()
            .snapshot(&uid(name))
            .unwrap_or_else(|| panic!("{name} is in the graph"))
    }

    fn actions(&self) -> Vec<String> {
        self.api.action_strings()
    }
}

// ----- attemptToDeleteItem --------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_dependent_whose_only_owner_is_gone_is_deleted_in_the_background() {
    // Upstream's TestAttemptToDeleteItem: the node is virtual with no owners; the live object
    // names a missing ReplicationController.
    let c = Cluster::new();
    c.create_unobserved(
        &POD,
        object("ns1", "ToBeDeletedPod", vec![RC.owner_ref("owner1")]),
    );
    let mut item = Node::virtual_owner(POD.identity("ns1", "ToBeDeletedPod")).snapshot();
    item.owners.clear();
    let outcome = c.gc.attempt_to_delete_item(&item).await.expect("no error");
    assert_eq!(outcome, DeleteOutcome::Done);
    assert_eq!(
        c.actions(),
        vec![
            "get pods.v1. ns1/ToBeDeletedPod",
            "get replicationcontrollers.v1. ns1/owner1",
            "delete pods.v1. ns1/ToBeDeletedPod Background",
        ]
    );
    assert!(c.get(&POD, "ns1", "ToBeDeletedPod").is_none());
    assert!(c.gc.absent_owner_cache().has(&RC.identity("ns1", "owner1")));
}

#[tokio::test(start_paused = true)]
async fn the_absent_owner_cache_saves_gets_and_evicts_the_least_recently_used() {
    // Upstream's TestAbsentOwnerCache, with a cache of two.
    let c = Cluster::with_options(GarbageCollectorOptions {
        absent_owner_cache_size: 2,
        ..GarbageCollectorOptions::default()
    });
    for (pod, rc) in [
        ("rc1Pod1", "rc1"),
        ("rc2Pod1", "rc2"),
        ("rc1Pod2", "rc1"),
        ("rc3Pod1", "rc3"),
    ] {
        c.create_unobserved(&POD, object("ns1", pod, vec![RC.owner_ref(rc)]));
    }
    for pod in ["rc1Pod1", "rc2Pod1", "rc1Pod2", "rc3Pod1"] {
        let item = Node::observed(POD.identity("ns1", pod), vec![]).snapshot();
        c.gc.attempt_to_delete_item(&item).await.expect("no error");
    }
    let cache = c.gc.absent_owner_cache();
    assert!(cache.has(&RC.identity("ns1", "rc1")));
    assert!(!cache.has(&RC.identity("ns1", "rc2")));
    assert!(cache.has(&RC.identity("ns1", "rc3")));
    let rc1_gets = c
        .actions()
        .iter()
        .filter(|a| *a == "get replicationcontrollers.v1. ns1/rc1")
        .count();
    assert_eq!(rc1_gets, 1);
}

#[tokio::test(start_paused = true)]
async fn decisions_by_owner_state() {
    // One row per branch of attemptToDeleteItem: what the owners look like, and what the
    // collector must do with the dependent pod "p".
    struct Case {
        name: &'static str,
        /// Owners created in the API (kind, meta).
        owners: Vec<(&'static Kind, ObjectMeta)>,
        /// The pod's owner references.
        refs: Vec<OwnerReference>,
        /// The pod's finalizers.
        pod_finalizers: Vec<&'static str>,
        /// Whether the pod has a dependent of its own in the graph.
        pod_has_dependent: bool,
        /// The writes expected (gets filtered out).
        writes: Vec<&'static str>,
        /// The pod's owner uids afterwards (None: the pod is gone).
        remaining: Option<Vec<&'static str>>,
    }
    let foreground_owner = || {
        let mut m = with_finalizers(object("ns", "fg", vec![]), &["foregroundDeletion"]);
        m.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::UNIX_EPOCH,
        ));
        m
    };
    let cases = vec![
        Case {
            name: "every owner exists: nothing",
            owners: vec![(&RS, object("ns", "a", vec![]))],
            refs: vec![RS.owner_ref("a")],
            pod_finalizers: vec![],
            pod_has_dependent: false,
            writes: vec![],
            remaining: Some(vec!["uid-a"]),
        },
        Case {
            name: "one owner gone, one left: the dangling reference is removed",
            owners: vec![(&RS, object("ns", "a", vec![]))],
            refs: vec![RS.owner_ref("a"), RS.owner_ref("gone")],
            pod_finalizers: vec![],
            pod_has_dependent: false,
            writes: vec!["patch pods.v1. ns/p strategic"],
            remaining: Some(vec!["uid-a"]),
        },
        Case {
            name: "an owner with another uid under the name counts as gone",
            owners: vec![
                (&RS, object("ns", "a", vec![])),
                (&RS, {
                    let mut m = object("ns", "b", vec![]);
                    m.uid = Some("someone-else".into());
                    m
                }),
            ],
            refs: vec![RS.owner_ref("a"), RS.owner_ref("b")],
            pod_finalizers: vec![],
            pod_has_dependent: false,
            writes: vec!["patch pods.v1. ns/p strategic"],
            remaining: Some(vec!["uid-a"]),
        },
        Case {
            name: "a solid owner and a foreground-deleting owner: the waiting reference is removed",
            owners: vec![
                (&RS, object("ns", "a", vec![])),
                (&DEPLOY, foreground_owner()),
            ],
            refs: vec![RS.owner_ref("a"), DEPLOY.owner_ref("fg")],
            pod_finalizers: vec![],
            pod_has_dependent: false,
            writes: vec!["patch pods.v1. ns/p strategic"],
            remaining: Some(vec!["uid-a"]),
        },
        Case {
            name: "every owner gone: background deletion",
            owners: vec![],
            refs: vec![RS.owner_ref("gone")],
            pod_finalizers: vec![],
            pod_has_dependent: false,
            writes: vec!["delete pods.v1. ns/p Background"],
            remaining: None,
        },
        Case {
            name: "every owner gone, orphan finalizer on the item: orphan deletion",
            owners: vec![],
            refs: vec![RS.owner_ref("gone")],
            pod_finalizers: vec!["orphan"],
            pod_has_dependent: false,
            writes: vec!["delete pods.v1. ns/p Orphan"],
            remaining: Some(vec!["uid-gone"]),
        },
        Case {
            name: "every owner gone, foreground finalizer on the item: foreground deletion",
            owners: vec![],
            refs: vec![RS.owner_ref("gone")],
            pod_finalizers: vec!["foregroundDeletion"],
            pod_has_dependent: false,
            writes: vec!["delete pods.v1. ns/p Foreground"],
            remaining: Some(vec!["uid-gone"]),
        },
        Case {
            name: "only a foreground-deleting owner, no dependents: background deletion",
            owners: vec![(&DEPLOY, foreground_owner())],
            refs: vec![blocking(DEPLOY.owner_ref("fg"))],
            pod_finalizers: vec![],
            pod_has_dependent: false,
            writes: vec!["delete pods.v1. ns/p Background"],
            remaining: None,
        },
        Case {
            name: "only a foreground-deleting owner, with dependents: foreground deletion",
            owners: vec![(&DEPLOY, foreground_owner())],
            refs: vec![blocking(DEPLOY.owner_ref("fg"))],
            pod_finalizers: vec![],
            pod_has_dependent: true,
            writes: vec!["delete pods.v1. ns/p Foreground"],
            remaining: Some(vec!["uid-fg"]),
        },
    ];
    for case in cases {
        let mut c = Cluster::new();
        for (kind, meta) in &case.owners {
            c.create(kind, meta.clone());
        }
        let mut pod = object("ns", "p", case.refs.clone());
        if !case.pod_finalizers.is_empty() {
            pod = with_finalizers(pod, &case.pod_finalizers);
        }
        c.create(&POD, pod);
        if case.pod_has_dependent {
            c.create(&POD, object("ns", "child", vec![POD.owner_ref("p")]));
        }
        c.process_graph_changes().await;
        c.api.clear_actions();
        let item = c.snapshot("p");
        let outcome = c.gc.attempt_to_delete_item(&item).await;
        assert_eq!(outcome.ok(), Some(DeleteOutcome::Done), "{}", case.name);
        let writes: Vec<String> = c
            .actions()
            .into_iter()
            .filter(|a| !a.starts_with("get "))
            .collect();
        assert_eq!(writes, case.writes, "{}", case.name);
        let remaining = c.get(&POD, "ns", "p").map(|m| {
            m.owner_references
                .unwrap_or_default()
                .into_iter()
                .map(|r| r.uid)
                .collect::<Vec<_>>()
        });
        let expected = case
            .remaining
            .map(|v| v.into_iter().map(String::from).collect::<Vec<_>>());
        assert_eq!(remaining, expected, "{}", case.name);
    }
}

#[tokio::test(start_paused = true)]
async fn a_missing_item_or_a_new_object_under_its_name_becomes_a_virtual_delete() {
    let mut c = Cluster::new();
    c.create(&POD, object("ns", "p", vec![RS.owner_ref("gone")]));
    c.process_graph_changes().await;
    let item = c.snapshot("p");
    // Replaced by another object with the same name.
    let mut other = object("ns", "p", vec![]);
    other.uid = Some("new".into());
    c.api.insert(&POD.resource(), other);
    let outcome = c.gc.attempt_to_delete_item(&item).await.expect("ok");
    assert_eq!(outcome, DeleteOutcome::VirtualDeleteEnqueued);
    c.api.remove(&POD.resource(), "ns/p");
    let outcome = c.gc.attempt_to_delete_item(&item).await.expect("ok");
    assert_eq!(outcome, DeleteOutcome::VirtualDeleteEnqueued);
    assert_eq!(c.gc.graph_builder().changes().len(), 2);
    c.process_graph_changes().await;
    assert!(!c.gc.graph().contains(&uid("p")));
}

#[tokio::test(start_paused = true)]
async fn an_item_being_deleted_is_left_to_finish() {
    let c = Cluster::new();
    let mut item = Node::observed(POD.identity("ns", "p"), vec![]).snapshot();
    item.being_deleted = true;
    let outcome = c.gc.attempt_to_delete_item(&item).await.expect("ok");
    assert_eq!(outcome, DeleteOutcome::Done);
    assert!(c.actions().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_cluster_scoped_dependent_of_a_namespaced_owner_is_dropped_not_retried() {
    let mut c = Cluster::new();
    c.create(&PV, object("", "pv1", vec![RS.owner_ref("rs")]));
    c.process_graph_changes().await;
    let item = c.snapshot("pv1");
    let err =
        c.gc.attempt_to_delete_item(&item)
            .await
            .expect_err("invalid");
    assert!(
        matches!(err, Error::NamespacedOwnerOfClusterScopedObject { .. }),
        "{err}"
    );
    // The worker forgets it: nothing is requeued and the PV stays.
    let key = NodeKey {
        uid: uid("pv1"),
        is_virtual: false,
    };
    c.gc.attempt_to_delete.add(key);
    // (the virtual owner node was queued by the graph builder too)
    while !c.gc.attempt_to_delete.is_empty() {
        assert!(c.gc.process_attempt_to_delete_worker().await);
    }
    assert!(c.get(&PV, "", "pv1").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_cluster_scoped_owner_is_looked_up_without_a_namespace() {
    let mut c = Cluster::new();
    c.create(&NODE, object("", "node1", vec![]));
    c.create(&POD, object("ns", "p", vec![NODE.owner_ref("node1")]));
    c.process_graph_changes().await;
    c.api.clear_actions();
    c.api.remove(&NODE.resource(), "node1");
    let item = c.snapshot("p");
    c.gc.attempt_to_delete_item(&item).await.expect("ok");
    assert_eq!(
        c.actions(),
        vec![
            "get pods.v1. ns/p",
            "get nodes.v1. node1",
            "delete pods.v1. ns/p Background",
        ]
    );
    // Remembered without a namespace.
    assert!(c.gc.absent_owner_cache().has(&NODE.identity("", "node1")));
}

#[tokio::test(start_paused = true)]
async fn an_unknown_owner_kind_deletes_nothing_and_is_retried() {
    let mut c = Cluster::new();
    let unknown = OwnerReference {
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        name: "w".into(),
        uid: uid("w"),
        ..OwnerReference::default()
    };
    c.create(&POD, object("ns", "p", vec![unknown]));
    c.process_graph_changes().await;
    let item = c.snapshot("p");
    let err =
        c.gc.attempt_to_delete_item(&item)
            .await
            .expect_err("mapping");
    assert_eq!(
        err.to_string(),
        "unable to get REST mapping for example.com/v1/Widget."
    );
    assert!(c.get(&POD, "ns", "p").is_some());
    // The worker requeues it (with back-off).
    c.gc.attempt_to_delete.add(NodeKey {
        uid: uid("p"),
        is_virtual: false,
    });
    // Drain: the virtual Widget node fails its mapping too.
    let mut processed = 0;
    while !c.gc.attempt_to_delete.is_empty() {
        assert!(c.gc.process_attempt_to_delete_worker().await);
        processed += 1;
    }
    assert_eq!(processed, 2);
    let key = NodeKey {
        uid: uid("p"),
        is_virtual: false,
    };
    assert_eq!(c.gc.attempt_to_delete.num_requeues(&key), 1);
    assert!(c.get(&POD, "ns", "p").is_some());
}

// ----- foreground bookkeeping -----------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_foreground_owner_queues_its_blocking_dependents_then_drops_its_finalizer() {
    let mut c = Cluster::new();
    c.create(&RS, object("ns", "rs", vec![]));
    c.create(
        &POD,
        object("ns", "blocker", vec![blocking(RS.owner_ref("rs"))]),
    );
    c.create(&POD, object("ns", "free", vec![RS.owner_ref("rs")]));
    c.process_graph_changes().await;
    // Foreground deletion by a user: the API adds the finalizer and the timestamp.
    c.api
        .delete(
            &c.gc
                .ops
                .api_resource("apps/v1", "ReplicaSet")
                .expect("mapped"),
            "ns",
            "rs",
            &kube::api::DeleteParams::foreground(),
        )
        .await
        .expect("delete");
    c.observe(&RS);
    c.process_graph_changes().await;
    assert!(c.snapshot("rs").deleting_dependents);
    // The owner is processed: its blocking dependent is queued, the owner stays.
    c.gc.attempt_to_delete_item(&c.snapshot("rs"))
        .await
        .expect("ok");
    assert!(c.get(&RS, "ns", "rs").is_some());
    let steps = c.settle(100).await;
    assert!(steps < 100);
    assert!(c.get(&RS, "ns", "rs").is_none(), "owner finalized");
    assert!(c.get(&POD, "ns", "blocker").is_none());
    assert!(c.get(&POD, "ns", "free").is_none());
    assert!(c.gc.graph().is_empty());
}

#[tokio::test(start_paused = true)]
async fn foreground_cycles_do_not_hang() {
    // a owns b, b owns a, both blocking; a is deleted in the foreground.
    let mut c = Cluster::new();
    c.create(&RS, object("ns", "a", vec![blocking(RS.owner_ref("b"))]));
    c.create(&RS, object("ns", "b", vec![blocking(RS.owner_ref("a"))]));
    c.process_graph_changes().await;
    c.api
        .delete(
            &c.gc
                .ops
                .api_resource("apps/v1", "ReplicaSet")
                .expect("mapped"),
            "ns",
            "a",
            &kube::api::DeleteParams::foreground(),
        )
        .await
        .expect("delete");
    c.settle(200).await;
    assert!(c.get(&RS, "ns", "a").is_none());
    assert!(c.get(&RS, "ns", "b").is_none());
    assert!(c.gc.graph().is_empty(), "{:?}", c.gc.graph().read());
}

#[tokio::test(start_paused = true)]
async fn finalizer_removal_retries_conflicts_then_gives_up() {
    let c = Cluster::new();
    let owner = RS.identity("ns", "rs");
    c.create_unobserved(
        &RS,
        with_finalizers(object("ns", "rs", vec![]), &["orphan", "x"]),
    );
    c.api
        .fail_next("patch", &RS.resource(), "ns/rs", conflict());
    c.gc.ops
        .remove_finalizer(&owner, "orphan")
        .await
        .expect("second attempt");
    assert_eq!(
        c.get(&RS, "ns", "rs").and_then(|m| m.finalizers),
        Some(vec!["x".to_string()])
    );
    for _ in 0..4 {
        c.api
            .fail_next("patch", &RS.resource(), "ns/rs", conflict());
    }
    let err =
        c.gc.ops
            .remove_finalizer(&owner, "x")
            .await
            .expect_err("conflicts");
    assert_eq!(
        err.to_string(),
        "updateMaxRetries(4) has reached. The garbage collector will retry later for owner [apps/v1/ReplicaSet, namespace: ns, name: rs, uid: uid-rs]"
    );
    // Already gone: success.
    c.gc.ops
        .remove_finalizer(&RS.identity("ns", "missing"), "x")
        .await
        .expect("missing is fine");
}

#[tokio::test(start_paused = true)]
async fn a_stale_resource_version_only_blocks_deletion_if_the_owners_changed() {
    let c = Cluster::new();
    let pod = POD.identity("ns", "p");
    let refs = vec![RS.owner_ref("gone")];
    c.create_unobserved(&POD, object("ns", "p", refs.clone()));
    // Judged at resourceVersion "0", which is stale; the owners are unchanged: deleted.
    c.gc.ops
        .delete_object(
            &pod,
            "0",
            &refs,
            Some(kube::api::PropagationPolicy::Background),
        )
        .await
        .expect("retried without the resourceVersion");
    assert!(c.get(&POD, "ns", "p").is_none());
    // The owners changed since: the conflict stands.
    c.create_unobserved(&POD, object("ns", "p", vec![RS.owner_ref("new-owner")]));
    let err =
        c.gc.ops
            .delete_object(
                &pod,
                "0",
                &refs,
                Some(kube::api::PropagationPolicy::Background),
            )
            .await
            .expect_err("conflict");
    assert!(err.is_conflict(), "{err}");
    assert!(c.get(&POD, "ns", "p").is_some());
}

// ----- orphaning ------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn orphaning_removes_the_reference_from_every_dependent_then_the_finalizer() {
    let mut c = Cluster::new();
    c.create(&RS, object("ns", "rs", vec![]));
    c.create(&POD, object("ns", "p1", vec![RS.owner_ref("rs")]));
    c.create(
        &POD,
        object("ns", "p2", vec![RS.owner_ref("rs"), RS.owner_ref("other")]),
    );
    c.create(&RS, object("ns", "other", vec![]));
    c.process_graph_changes().await;
    c.api
        .delete(
            &c.gc
                .ops
                .api_resource("apps/v1", "ReplicaSet")
                .expect("mapped"),
            "ns",
            "rs",
            &kube::api::DeleteParams::orphan(),
        )
        .await
        .expect("delete");
    c.settle(100).await;
    assert!(
        c.get(&RS, "ns", "rs").is_none(),
        "the owner goes once orphaned"
    );
    let p1 = c.get(&POD, "ns", "p1").expect("p1 orphaned, not deleted");
    assert_eq!(p1.owner_references, None);
    let p2 = c.get(&POD, "ns", "p2").expect("p2 kept");
    let owners: Vec<String> = p2
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.uid)
        .collect();
    assert_eq!(owners, vec![uid("other")]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_orphaning_is_retried_and_keeps_the_finalizer_meanwhile() {
    let mut c = Cluster::new();
    c.create(&RS, object("ns", "rs", vec![]));
    c.create(&POD, object("ns", "p1", vec![RS.owner_ref("rs")]));
    c.process_graph_changes().await;
    c.api
        .delete(
            &c.gc
                .ops
                .api_resource("apps/v1", "ReplicaSet")
                .expect("mapped"),
            "ns",
            "rs",
            &kube::api::DeleteParams::orphan(),
        )
        .await
        .expect("delete");
    c.observe(&RS);
    c.process_graph_changes().await;
    c.api
        .fail_next("patch", &POD.resource(), "ns/p1", conflict());
    let dependents = c.gc.graph().read().dependents_of(&uid("rs"));
    let err =
        c.gc.orphan_dependents(&RS.identity("ns", "rs"), &dependents)
            .await
            .expect_err("conflict");
    assert!(
        err.to_string().starts_with(
            "failed to orphan dependents of owner [apps/v1/ReplicaSet, namespace: ns, name: rs, uid: uid-rs], got errors: orphaning [v1/Pod, namespace: ns, name: p1, uid: uid-p1] failed"
        ),
        "{err}"
    );
    c.api
        .fail_next("patch", &POD.resource(), "ns/p1", conflict());
    assert!(c.gc.process_attempt_to_orphan_worker().await);
    assert_eq!(c.gc.attempt_to_orphan.num_requeues(&uid("rs")), 1);
    assert!(c.get(&RS, "ns", "rs").is_some(), "finalizer kept");
    c.settle(50).await;
    assert!(c.get(&RS, "ns", "rs").is_none());
    assert_eq!(
        c.get(&POD, "ns", "p1").and_then(|m| m.owner_references),
        None
    );
}

// ----- whole cascades -------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn background_cascade_through_three_levels() {
    let mut c = Cluster::new();
    c.create(&DEPLOY, object("ns", "d", vec![]));
    for rs in ["rs1", "rs2"] {
        c.create(&RS, object("ns", rs, vec![blocking(DEPLOY.owner_ref("d"))]));
        for i in 0..3 {
            c.create(
                &POD,
                object("ns", &format!("{rs}-{i}"), vec![blocking(RS.owner_ref(rs))]),
            );
        }
    }
    // A pod with two owners survives the deletion of one.
    c.create(&RS, object("ns", "keeper", vec![]));
    c.create(
        &POD,
        object(
            "ns",
            "shared",
            vec![RS.owner_ref("rs1"), RS.owner_ref("keeper")],
        ),
    );
    c.settle(100).await;
    assert!(
        c.actions().iter().all(|a| a.starts_with("get ")),
        "{:?}",
        c.actions()
    );
    c.api.remove(&DEPLOY.resource(), "ns/d");
    c.settle(500).await;
    for rs in ["rs1", "rs2"] {
        assert!(c.get(&RS, "ns", rs).is_none(), "{rs}");
        for i in 0..3 {
            assert!(c.get(&POD, "ns", &format!("{rs}-{i}")).is_none());
        }
    }
    let shared = c.get(&POD, "ns", "shared").expect("survives");
    let owners: Vec<String> = shared
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.uid)
        .collect();
    assert_eq!(owners, vec![uid("keeper")]);
    assert!(c.recorder.events().is_empty());
    let nodes = c.gc.graph().read();
    assert!(nodes.invariant_violations().is_empty());
    let mut left: Vec<String> = nodes.iter().map(|n| n.identity().name.clone()).collect();
    left.sort();
    assert_eq!(left, vec!["keeper", "shared"]);
}

#[tokio::test(start_paused = true)]
async fn a_virtual_owner_that_never_existed_gets_its_dependents_deleted() {
    let mut c = Cluster::new();
    c.create(&POD, object("ns", "p", vec![RS.owner_ref("never")]));
    c.settle(100).await;
    assert!(c.get(&POD, "ns", "p").is_none());
    assert!(c.gc.graph().is_empty());
    assert!(c.gc.absent_owner_cache().has(&RS.identity("ns", "never")));
}

#[tokio::test(start_paused = true)]
async fn an_owner_in_another_namespace_is_reported_and_never_deletes_anything() {
    let mut c = Cluster::new();
    c.create(&RS, object("ns1", "rs", vec![]));
    c.create(&POD, object("ns2", "p", vec![RS.owner_ref("rs")]));
    c.settle(100).await;
    // The reference does not resolve in ns2: the pod is garbage there, as upstream decides;
    // the owner in ns1 is untouched and the mismatch is reported.
    assert!(c.get(&RS, "ns1", "rs").is_some());
    assert!(c.get(&POD, "ns2", "p").is_none());
    let events = c.recorder.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].reason, "OwnerRefInvalidNamespace");
    assert_eq!(
        events[0].message,
        "ownerRef [apps/v1/ReplicaSet, namespace: ns2, name: rs, uid: uid-rs] does not exist in namespace \"ns2\""
    );
}

#[tokio::test(start_paused = true)]
async fn a_virtual_queue_entry_for_an_observed_node_is_dropped() {
    let mut c = Cluster::new();
    c.create(&RS, object("ns", "rs", vec![]));
    c.process_graph_changes().await;
    c.api.clear_actions();
    c.gc.attempt_to_delete.add(NodeKey {
        uid: uid("rs"),
        is_virtual: true,
    });
    assert!(c.gc.process_attempt_to_delete_worker().await);
    assert!(c.actions().is_empty());
    // An unknown uid is dropped too.
    c.gc.attempt_to_delete.add(NodeKey {
        uid: "nope".into(),
        is_virtual: false,
    });
    assert!(c.gc.process_attempt_to_delete_worker().await);
    assert!(c.actions().is_empty());
}

// ----- run ------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn run_collects_with_its_workers_and_returns_on_cancel() {
    let mut c = Cluster::new();
    c.create(&RS, object("ns", "rs", vec![]));
    c.create(&POD, object("ns", "p1", vec![RS.owner_ref("rs")]));
    c.create(&POD, object("ns", "p2", vec![RS.owner_ref("gone")]));
    let cancel = CancellationToken::new();
    let task = tokio::spawn(c.gc.clone().run(2, cancel.clone()));
    // The builder task applies the events; a worker deletes the pod whose owner is gone.
    for _ in 0..1000 {
        if c.get(&POD, "ns", "p2").is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        c.get(&POD, "ns", "p2").is_none(),
        "p2 collected by run's workers"
    );
    assert!(c.get(&POD, "ns", "p1").is_some());
    cancel.cancel();
    task.await.expect("run returns");
    assert!(c.gc.attempt_to_delete.shutting_down());
    assert!(c.gc.attempt_to_orphan.shutting_down());
}

#[tokio::test(start_paused = true)]
async fn workers_make_no_request_once_cancelled() {
    let mut c = Cluster::new();
    c.create(&POD, object("ns", "p", vec![RS.owner_ref("gone")]));
    c.process_graph_changes().await;
    c.api.clear_actions();
    c.gc.attempt_to_delete.add(NodeKey {
        uid: uid("p"),
        is_virtual: false,
    });
    c.gc.attempt_to_orphan.add(uid("p"));
    let cancel = CancellationToken::new();
    cancel.cancel();
    c.gc.attempt_to_delete.shut_down();
    c.gc.attempt_to_orphan.shut_down();
    c.gc.run_workers(1, &cancel).await;
    assert!(c.actions().is_empty(), "{:?}", c.actions());
    assert!(c.get(&POD, "ns", "p").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_resource_without_strategic_merge_gets_a_json_merge_patch() {
    // Custom resources answer 415 to strategic merge patches: the reference is removed with a
    // resourceVersion-guarded JSON merge patch computed from a fresh GET instead.
    let mut c = Cluster::new();
    c.create(&RS, object("ns", "a", vec![]));
    c.create(
        &POD,
        object("ns", "p", vec![RS.owner_ref("a"), RS.owner_ref("gone")]),
    );
    c.process_graph_changes().await;
    c.api.clear_actions();
    c.api.fail_next(
        "patch",
        &POD.resource(),
        "ns/p",
        Status::failure(
            "the body of the request was in an unknown format",
            "UnsupportedMediaType",
        )
        .with_code(415),
    );
    c.gc.attempt_to_delete_item(&c.snapshot("p"))
        .await
        .expect("ok");
    let writes: Vec<String> = c
        .actions()
        .into_iter()
        .filter(|a| a.starts_with("patch "))
        .collect();
    assert_eq!(
        writes,
        vec!["patch pods.v1. ns/p strategic", "patch pods.v1. ns/p merge"]
    );
    let owners: Vec<String> = c
        .get(&POD, "ns", "p")
        .and_then(|m| m.owner_references)
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.uid)
        .collect();
    assert_eq!(owners, vec![uid("a")]);
}

/// A panic injected in an `attemptToDelete` item (the fake client panics once) is recovered by
/// the shared worker, counted in `kcm_workqueue_sync_panics_total{name="garbage_collector_attempt_to_delete"}`,
/// and the item retried: the dependent of a gone owner is collected on the retry.
#[tokio::test(start_paused = true)]
async fn panicking_attempt_to_delete_is_recovered_counted_and_retried() {
    let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
    let mut c = Cluster::with_options(GarbageCollectorOptions {
        metrics: Some(metrics.clone()),
        ..GarbageCollectorOptions::default()
    });
    c.create(&POD, object("ns", "p", vec![RS.owner_ref("gone")]));
    c.process_graph_changes().await;
    // Whatever the graph builder queued is set aside: the panic must hit `p`.
    while !c.gc.attempt_to_delete.is_empty() {
        if let Some(queued) = c.gc.attempt_to_delete.get().await {
            c.gc.attempt_to_delete.done(&queued);
        }
    }
    let key = NodeKey {
        uid: uid("p"),
        is_virtual: false,
    };
    c.api.panic_on_next_call();
    c.gc.attempt_to_delete.add(key.clone());
    assert!(c.gc.process_attempt_to_delete_worker().await, "recovered");
    assert_eq!(
        metrics.sync_panics_total(super::ATTEMPT_TO_DELETE_QUEUE),
        1,
        "counted"
    );
    assert_eq!(c.gc.attempt_to_delete.num_requeues(&key), 1, "retried");
    assert!(c.get(&POD, "ns", "p").is_some());
    assert!(c.gc.process_attempt_to_delete_worker().await);
    assert!(c.get(&POD, "ns", "p").is_none(), "collected on the retry");
}
