//! Unit tests of the graph builder: edges, virtual owners, transitions, cycles.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kcm_machinery::events::{EventType, FakeRecorder};
use kcm_machinery::workqueue::{Queue, RateLimitingQueue, default_controller_rate_limiter};
use kcm_testing::MetaBuilder;
use kube::api::ObjectMeta;
use kube::core::TypeMeta;

use super::*;

// ----- builders -------------------------------------------------------------------------------

fn owner_ref(kind: &str, api_version: &str, name: &str, uid: &str) -> OwnerReference {
    kcm_testing::owner_ref(api_version, kind, name, uid).build()
}

fn rs_ref(uid: &str) -> OwnerReference {
    owner_ref("ReplicaSet", "apps/v1", &format!("rs-{uid}"), uid)
}

fn blocking(mut r: OwnerReference) -> OwnerReference {
    r.block_owner_deletion = Some(true);
    r
}

fn meta(ns: &str, name: &str, uid: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
    let m = (owners.into_iter()).fold(kcm_testing::meta(name).uid(uid), |m, o| m.owner(o));
    if ns.is_empty() {
        m.build()
    } else {
        m.namespace(ns).build()
    }
}

fn deleting(mut m: ObjectMeta, finalizers: &[&str]) -> ObjectMeta {
    m.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    m.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    m
}

fn pod(m: ObjectMeta) -> SharedObject {
    Arc::new(Pod {
        metadata: m,
        ..Pod::default()
    })
}

fn rs(m: ObjectMeta) -> SharedObject {
    Arc::new(ReplicaSet {
        metadata: m,
        ..ReplicaSet::default()
    })
}

fn tm(api_version: &str, kind: &str) -> Arc<TypeMeta> {
    Arc::new(TypeMeta {
        api_version: api_version.into(),
        kind: kind.into(),
    })
}

fn add_pod(m: ObjectMeta) -> GraphEvent {
    GraphEvent::observed(ChangeType::Add, pod(m), None, tm("v1", "Pod"))
}

fn add_rs(m: ObjectMeta) -> GraphEvent {
    GraphEvent::observed(ChangeType::Add, rs(m), None, tm("apps/v1", "ReplicaSet"))
}

fn update_rs(old: ObjectMeta, new: ObjectMeta) -> GraphEvent {
    GraphEvent::observed(
        ChangeType::Update,
        rs(new),
        Some(rs(old)),
        tm("apps/v1", "ReplicaSet"),
    )
}

fn update_pod(old: ObjectMeta, new: ObjectMeta) -> GraphEvent {
    GraphEvent::observed(
        ChangeType::Update,
        pod(new),
        Some(pod(old)),
        tm("v1", "Pod"),
    )
}

fn delete_pod(m: ObjectMeta) -> GraphEvent {
    GraphEvent::observed(ChangeType::Delete, pod(m), None, tm("v1", "Pod"))
}

fn delete_rs(m: ObjectMeta) -> GraphEvent {
    GraphEvent::observed(ChangeType::Delete, rs(m), None, tm("apps/v1", "ReplicaSet"))
}

fn rs_identity(ns: &str, uid: &str) -> ObjectIdentity {
    ObjectIdentity::from_owner_reference(&rs_ref(uid), ns)
}

fn key(uid: &str, is_virtual: bool) -> NodeKey {
    NodeKey {
        uid: uid.into(),
        is_virtual,
    }
}

fn apply_all(nodes: &mut NodeMap, events: &[GraphEvent]) -> Vec<Effects> {
    events
        .iter()
        .map(|e| {
            let out = apply_event(nodes, e);
            let problems = nodes.invariant_violations();
            assert!(problems.is_empty(), "after {e:?}: {problems:?}");
            out
        })
        .collect()
}

fn dependents(nodes: &NodeMap, uid: &str) -> Vec<String> {
    let mut deps: Vec<String> = nodes
        .get(uid)
        .map(|n| n.dependents().iter().cloned().collect())
        .unwrap_or_default();
    deps.sort();
    deps
}

// ----- edges ----------------------------------------------------------------------------------

/// A pod event whose owners are given by uid only, as upstream's `createEvent`.
fn uid_event(change: ChangeType, uid: &str, owners: &[&str]) -> GraphEvent {
    let owners = owners
        .iter()
        .map(|o| OwnerReference {
            uid: (*o).into(),
            ..OwnerReference::default()
        })
        .collect();
    GraphEvent::observed(
        change,
        pod(meta("", "", uid, owners)),
        None,
        tm("v1", "Pod"),
    )
}

#[test]
fn process_event_keeps_the_two_way_edges_consistent() {
    // Upstream's TestProcessEvent scenarios; `apply_all` checks the invariants after each step.
    use ChangeType::{Add, Delete, Update};
    struct Case {
        name: &'static str,
        events: Vec<GraphEvent>,
        /// (node uid, expected dependents) after the last event.
        expect: Vec<(&'static str, Vec<&'static str>)>,
        absent_nodes: Vec<&'static str>,
    }
    let cases = vec![
        Case {
            name: "test1",
            events: vec![
                uid_event(Add, "1", &[]),
                uid_event(Add, "2", &["1"]),
                uid_event(Add, "3", &["1", "2"]),
            ],
            expect: vec![("1", vec!["2", "3"]), ("2", vec!["3"]), ("3", vec![])],
            absent_nodes: vec![],
        },
        Case {
            name: "test2",
            events: vec![
                uid_event(Add, "1", &[]),
                uid_event(Add, "2", &["1"]),
                uid_event(Add, "3", &["1", "2"]),
                uid_event(Add, "4", &["2"]),
                uid_event(Delete, "2", &["doesn't matter"]),
            ],
            expect: vec![("1", vec!["3"]), ("3", vec![]), ("4", vec![])],
            absent_nodes: vec!["2"],
        },
        Case {
            name: "test3",
            events: vec![
                uid_event(Add, "1", &[]),
                uid_event(Add, "2", &["1"]),
                uid_event(Add, "3", &["1", "2"]),
                uid_event(Add, "4", &["3"]),
                uid_event(Update, "2", &["4"]),
            ],
            expect: vec![("1", vec!["3"]), ("2", vec!["3"]), ("4", vec!["2"])],
            absent_nodes: vec![],
        },
        Case {
            name: "reverse test2",
            events: vec![
                uid_event(Add, "4", &["2"]),
                uid_event(Add, "3", &["1", "2"]),
                uid_event(Add, "2", &["1"]),
                uid_event(Add, "1", &[]),
                uid_event(Delete, "2", &["doesn't matter"]),
            ],
            expect: vec![("1", vec!["3"]), ("3", vec![]), ("4", vec![])],
            absent_nodes: vec!["2"],
        },
    ];
    for case in cases {
        let mut nodes = NodeMap::default();
        apply_all(&mut nodes, &case.events);
        for (uid, deps) in &case.expect {
            assert_eq!(dependents(&nodes, uid), *deps, "{}: node {uid}", case.name);
            assert!(
                nodes.get(uid).is_some_and(|n| !n.is_virtual()),
                "{}: {uid} observed",
                case.name
            );
        }
        for uid in &case.absent_nodes {
            assert!(!nodes.contains(uid), "{}: {uid} removed", case.name);
        }
    }
}

#[test]
fn an_unknown_owner_becomes_a_virtual_node_queued_for_verification() {
    let mut nodes = NodeMap::default();
    let out = apply_event(
        &mut nodes,
        &add_pod(meta("ns1", "p1", "p1", vec![rs_ref("rs1")])),
    );
    let owner = nodes.get("rs1").expect("virtual owner");
    assert!(owner.is_virtual());
    // A virtual owner takes the dependent's namespace.
    assert_eq!(owner.identity(), &rs_identity("ns1", "rs1"));
    assert_eq!(dependents(&nodes, "rs1"), vec!["p1"]);
    assert_eq!(out.attempt_to_delete, vec![key("rs1", true)]);

    // A second dependent of the same virtual owner does not queue it again.
    let out = apply_event(
        &mut nodes,
        &add_pod(meta("ns1", "p2", "p2", vec![rs_ref("rs1")])),
    );
    assert!(out.attempt_to_delete.is_empty(), "{out:?}");

    // The informer reports the owner: same node, now observed, its dependents kept.
    let out = apply_event(&mut nodes, &add_rs(meta("ns1", "rs-rs1", "rs1", vec![])));
    let owner = nodes.get("rs1").expect("owner");
    assert!(!owner.is_virtual());
    assert_eq!(dependents(&nodes, "rs1"), vec!["p1", "p2"]);
    assert_eq!(out, Effects::default());
}

#[test]
fn observing_an_owner_under_other_coordinates_verifies_its_dependents() {
    let mut nodes = NodeMap::default();
    // The pod names its owner apps/v1beta1: the graph guesses that identity.
    let stale = owner_ref("ReplicaSet", "apps/v1beta1", "rs-rs1", "rs1");
    apply_event(&mut nodes, &add_pod(meta("ns1", "p1", "p1", vec![stale])));
    let out = apply_event(&mut nodes, &add_rs(meta("ns1", "rs-rs1", "rs1", vec![])));
    let owner = nodes.get("rs1").expect("owner");
    assert_eq!(owner.identity(), &rs_identity("ns1", "rs1"));
    assert!(!owner.is_virtual());
    assert_eq!(out.attempt_to_delete, vec![key("p1", false)]);
    assert!(out.invalid_namespace.is_empty());
}

#[test]
fn an_owner_in_another_namespace_is_reported_and_its_dependent_verified() {
    // Owner first: the dependent names an observed owner of another namespace.
    let mut nodes = NodeMap::default();
    apply_event(&mut nodes, &add_rs(meta("ns1", "rs-rs1", "rs1", vec![])));
    let out = apply_event(
        &mut nodes,
        &add_pod(meta("ns2", "p1", "p1", vec![rs_ref("rs1")])),
    );
    assert_eq!(out.attempt_to_delete, vec![key("p1", false)]);
    assert_eq!(
        out.invalid_namespace,
        vec![InvalidNamespaceOwnerRef {
            dependent: ObjectIdentity {
                kind: "Pod".into(),
                api_version: "v1".into(),
                namespace: "ns2".into(),
                name: "p1".into(),
                uid: "p1".into(),
            },
            owner: rs_identity("ns2", "rs1"),
        }]
    );

    // Dependent first: the owner's observation reports it.
    let mut nodes = NodeMap::default();
    apply_event(
        &mut nodes,
        &add_pod(meta("ns2", "p1", "p1", vec![rs_ref("rs1")])),
    );
    let out = apply_event(&mut nodes, &add_rs(meta("ns1", "rs-rs1", "rs1", vec![])));
    assert_eq!(out.attempt_to_delete, vec![key("p1", false)]);
    assert_eq!(out.invalid_namespace.len(), 1);
    assert_eq!(out.invalid_namespace[0].owner, rs_identity("ns2", "rs1"));
}

#[test]
fn a_cluster_scoped_owner_may_own_objects_of_any_namespace() {
    let mut nodes = NodeMap::default();
    let node_ref = owner_ref("Node", "v1", "node-1", "n1");
    let node_obj: SharedObject = Arc::new(k8s_openapi::api::core::v1::Node {
        metadata: meta("", "node-1", "n1", vec![]),
        ..Default::default()
    });
    apply_event(
        &mut nodes,
        &GraphEvent::observed(ChangeType::Add, node_obj, None, tm("v1", "Node")),
    );
    let out = apply_event(
        &mut nodes,
        &add_pod(meta("ns1", "p1", "p1", vec![node_ref])),
    );
    assert_eq!(out, Effects::default());
    assert_eq!(dependents(&nodes, "n1"), vec!["p1"]);
}

#[test]
fn updates_move_edges_between_owners() {
    let mut nodes = NodeMap::default();
    apply_all(
        &mut nodes,
        &[
            add_rs(meta("ns", "rs-a", "a", vec![])),
            add_rs(meta("ns", "rs-b", "b", vec![])),
            add_pod(meta("ns", "p", "p", vec![rs_ref("a")])),
            update_pod(
                meta("ns", "p", "p", vec![rs_ref("a")]),
                meta("ns", "p", "p", vec![rs_ref("b")]),
            ),
        ],
    );
    assert!(dependents(&nodes, "a").is_empty());
    assert_eq!(dependents(&nodes, "b"), vec!["p"]);
    assert_eq!(nodes.get("p").map(|n| n.owners().len()), Some(1));
}

#[test]
fn removing_or_unsetting_a_blocking_reference_queues_the_owner() {
    let mut nodes = NodeMap::default();
    let old = meta(
        "ns",
        "p",
        "p",
        vec![blocking(rs_ref("a")), blocking(rs_ref("b"))],
    );
    apply_all(
        &mut nodes,
        &[
            add_rs(meta("ns", "rs-a", "a", vec![])),
            add_rs(meta("ns", "rs-b", "b", vec![])),
            add_pod(old.clone()),
        ],
    );
    // Reference to a removed, reference to b no longer blocking.
    let new = meta("ns", "p", "p", vec![rs_ref("b")]);
    let out = apply_event(&mut nodes, &update_pod(old, new));
    assert_eq!(
        out.attempt_to_delete,
        vec![key("a", false), key("b", false)]
    );
    assert!(dependents(&nodes, "a").is_empty());
}

#[test]
fn deleting_an_owner_queues_its_dependents_and_remembers_it_absent() {
    let mut nodes = NodeMap::default();
    apply_all(
        &mut nodes,
        &[
            add_rs(meta("ns", "rs-a", "a", vec![])),
            add_pod(meta("ns", "p1", "p1", vec![rs_ref("a")])),
            add_pod(meta("ns", "p2", "p2", vec![rs_ref("a")])),
        ],
    );
    let out = apply_event(&mut nodes, &delete_rs(meta("ns", "rs-a", "a", vec![])));
    assert!(!nodes.contains("a"));
    let mut queued = out.attempt_to_delete.clone();
    queued.sort_by(|x, y| x.uid.cmp(&y.uid));
    assert_eq!(queued, vec![key("p1", false), key("p2", false)]);
    assert_eq!(out.absent, vec![rs_identity("ns", "a")]);

    // An owner without dependents is not remembered.
    let out = apply_event(
        &mut nodes,
        &delete_pod(meta("ns", "p1", "p1", vec![rs_ref("a")])),
    );
    assert!(out.absent.is_empty());
    assert!(out.attempt_to_delete.is_empty());
}

#[test]
fn a_dependent_deletion_queues_its_foreground_deleting_owner() {
    let mut nodes = NodeMap::default();
    let owner = meta("ns", "rs-a", "a", vec![]);
    apply_all(
        &mut nodes,
        &[
            add_rs(owner.clone()),
            add_pod(meta("ns", "p1", "p1", vec![blocking(rs_ref("a"))])),
            update_rs(
                owner.clone(),
                deleting(owner, &[FINALIZER_DELETE_DEPENDENTS]),
            ),
        ],
    );
    let out = apply_event(
        &mut nodes,
        &delete_pod(meta("ns", "p1", "p1", vec![blocking(rs_ref("a"))])),
    );
    assert_eq!(out.attempt_to_delete, vec![key("a", false)]);
}

// ----- transitions ----------------------------------------------------------------------------

#[test]
fn foreground_deletion_marks_the_owner_and_queues_it_and_its_dependents() {
    let mut nodes = NodeMap::default();
    let owner = meta("ns", "rs-a", "a", vec![]);
    apply_all(
        &mut nodes,
        &[
            add_rs(owner.clone()),
            add_pod(meta("ns", "p1", "p1", vec![blocking(rs_ref("a"))])),
        ],
    );
    let started = deleting(owner.clone(), &[FINALIZER_DELETE_DEPENDENTS]);
    let out = apply_event(&mut nodes, &update_rs(owner, started.clone()));
    let node = nodes.get("a").expect("owner");
    assert!(node.is_deleting_dependents() && node.is_being_deleted());
    assert_eq!(
        out.attempt_to_delete,
        vec![key("p1", false), key("a", false)]
    );
    assert!(out.attempt_to_orphan.is_empty());

    // A later update of an object already deleting in the foreground starts nothing new.
    let mut relabelled = started.clone();
    relabelled.labels = Some([("a".to_string(), "b".to_string())].into());
    let out = apply_event(&mut nodes, &update_rs(started, relabelled));
    assert_eq!(out, Effects::default());
}

#[test]
fn orphan_deletion_queues_the_owner_for_orphaning() {
    let mut nodes = NodeMap::default();
    let owner = meta("ns", "rs-a", "a", vec![]);
    apply_all(
        &mut nodes,
        &[
            add_rs(owner.clone()),
            add_pod(meta("ns", "p1", "p1", vec![rs_ref("a")])),
        ],
    );
    let out = apply_event(
        &mut nodes,
        &update_rs(
            owner.clone(),
            deleting(owner, &[FINALIZER_ORPHAN_DEPENDENTS]),
        ),
    );
    assert_eq!(out.attempt_to_orphan, vec!["a".to_string()]);
    assert!(out.attempt_to_delete.is_empty());
    assert!(nodes.get("a").is_some_and(Node::is_being_deleted));
}

#[test]
fn objects_first_seen_mid_deletion_are_picked_up_after_a_restart() {
    // A collector that starts while an owner waits on its finalizer sees only adds.
    let mut nodes = NodeMap::default();
    let out = apply_all(
        &mut nodes,
        &[
            add_pod(meta("ns", "p1", "p1", vec![blocking(rs_ref("a"))])),
            add_rs(deleting(
                meta("ns", "rs-a", "a", vec![]),
                &[FINALIZER_DELETE_DEPENDENTS],
            )),
            add_rs(deleting(
                meta("ns", "rs-b", "b", vec![]),
                &[FINALIZER_ORPHAN_DEPENDENTS],
            )),
        ],
    );
    assert_eq!(out[0].attempt_to_delete, vec![key("a", true)]);
    assert_eq!(
        out[1].attempt_to_delete,
        vec![key("p1", false), key("a", false)]
    );
    assert!(nodes.get("a").is_some_and(Node::is_deleting_dependents));
    assert_eq!(out[2].attempt_to_orphan, vec!["b".to_string()]);
}

// ----- virtual deletes ------------------------------------------------------------------------

#[test]
fn a_virtual_delete_removes_a_virtual_owner_and_queues_its_dependents() {
    let mut nodes = NodeMap::default();
    apply_event(
        &mut nodes,
        &add_pod(meta("ns", "p1", "p1", vec![rs_ref("a")])),
    );
    let out = apply_event(
        &mut nodes,
        &GraphEvent::virtual_delete(&rs_identity("ns", "a")),
    );
    assert!(!nodes.contains("a"));
    assert_eq!(out.attempt_to_delete, vec![key("p1", false)]);
    assert_eq!(out.absent, vec![rs_identity("ns", "a")]);
}

#[test]
fn a_virtual_delete_of_other_coordinates_keeps_an_observed_node() {
    let mut nodes = NodeMap::default();
    let stale = owner_ref("ReplicaSet", "apps/v1beta1", "rs-a", "a");
    apply_all(
        &mut nodes,
        &[
            add_rs(meta("ns", "rs-a", "a", vec![])),
            add_pod(meta("ns", "p1", "p1", vec![stale.clone()])),
        ],
    );
    let stale_identity = ObjectIdentity::from_owner_reference(&stale, "ns");
    let out = apply_event(&mut nodes, &GraphEvent::virtual_delete(&stale_identity));
    assert!(nodes.get("a").is_some_and(|n| !n.is_virtual()));
    assert_eq!(out.absent, vec![stale_identity]);
    assert_eq!(out.attempt_to_delete, vec![key("p1", false)]);
}

#[test]
fn a_virtual_owner_disputed_by_its_dependents_tries_the_next_identity() {
    // Two dependents name uid "a" differently; the GET of the first identity found nothing.
    let mut nodes = NodeMap::default();
    let v1 = owner_ref("ReplicaSet", "apps/v1", "rs-a", "a");
    let v1beta1 = owner_ref("ReplicaSet", "apps/v1beta1", "rs-a", "a");
    apply_all(
        &mut nodes,
        &[
            add_pod(meta("ns", "p1", "p1", vec![v1.clone()])),
            add_pod(meta("ns", "p2", "p2", vec![v1beta1.clone()])),
        ],
    );
    let v1_identity = ObjectIdentity::from_owner_reference(&v1, "ns");
    assert_eq!(
        nodes.get("a").map(|n| n.identity().clone()),
        Some(v1_identity.clone())
    );
    let out = apply_event(&mut nodes, &GraphEvent::virtual_delete(&v1_identity));
    let node = nodes.get("a").expect("kept");
    assert!(node.is_virtual());
    assert_eq!(
        node.identity(),
        &ObjectIdentity::from_owner_reference(&v1beta1, "ns")
    );
    assert_eq!(out.absent, vec![v1_identity]);
    assert_eq!(out.attempt_to_delete, vec![key("p1", false)]);
    assert_eq!(out.attempt_to_delete_rate_limited, vec![key("a", true)]);
}

#[test]
fn a_delete_for_an_unknown_uid_changes_nothing() {
    let mut nodes = NodeMap::default();
    let out = apply_event(&mut nodes, &delete_pod(meta("ns", "p", "p", vec![])));
    assert_eq!(out, Effects::default());
    assert!(nodes.is_empty());
}

// ----- cycles ---------------------------------------------------------------------------------

#[test]
fn ownership_cycles_build_and_tear_down_without_hanging() {
    // a → b → c → a, and a self-owning object.
    let mut nodes = NodeMap::default();
    let cycle = [("a", "c"), ("b", "a"), ("c", "b")];
    let events: Vec<GraphEvent> = cycle
        .iter()
        .map(|(uid, owner)| add_rs(meta("ns", &format!("rs-{uid}"), uid, vec![rs_ref(owner)])))
        .chain(std::iter::once(add_rs(meta(
            "ns",
            "rs-s",
            "s",
            vec![rs_ref("s")],
        ))))
        .collect();
    let out = apply_all(&mut nodes, &events);
    // Only the first event saw its owner missing.
    assert_eq!(out[0].attempt_to_delete, vec![key("c", true)]);
    assert!(nodes.iter().all(|n| !n.is_virtual()));
    assert_eq!(dependents(&nodes, "a"), vec!["b"]);
    assert_eq!(dependents(&nodes, "s"), vec!["s"]);

    // Foreground deletion of a member queues the cycle once each and terminates.
    let a = meta("ns", "rs-a", "a", vec![rs_ref("c")]);
    let out = apply_event(
        &mut nodes,
        &update_rs(
            a.clone(),
            deleting(a.clone(), &[FINALIZER_DELETE_DEPENDENTS]),
        ),
    );
    assert_eq!(
        out.attempt_to_delete,
        vec![key("b", false), key("a", false)]
    );

    for (uid, owner) in cycle {
        apply_all(
            &mut nodes,
            &[delete_rs(meta(
                "ns",
                &format!("rs-{uid}"),
                uid,
                vec![rs_ref(owner)],
            ))],
        );
    }
    apply_all(
        &mut nodes,
        &[delete_rs(meta("ns", "rs-s", "s", vec![rs_ref("s")]))],
    );
    assert!(nodes.is_empty(), "{nodes:?}");
}

// ----- references_diffs -----------------------------------------------------------------------

#[test]
fn references_diffs_by_uid() {
    struct Case {
        name: &'static str,
        old: Vec<OwnerReference>,
        new: Vec<OwnerReference>,
        added: Vec<&'static str>,
        removed: Vec<&'static str>,
        changed: Vec<&'static str>,
    }
    let cases = vec![
        Case {
            name: "disjoint",
            old: vec![rs_ref("1"), rs_ref("2")],
            new: vec![rs_ref("2"), rs_ref("3")],
            added: vec!["3"],
            removed: vec!["1"],
            changed: vec![],
        },
        Case {
            name: "block flag flipped",
            old: vec![rs_ref("1")],
            new: vec![blocking(rs_ref("1"))],
            added: vec![],
            removed: vec![],
            changed: vec!["1"],
        },
        Case {
            name: "unchanged",
            old: vec![rs_ref("1")],
            new: vec![rs_ref("1")],
            added: vec![],
            removed: vec![],
            changed: vec![],
        },
        Case {
            name: "all removed",
            old: vec![rs_ref("1"), rs_ref("2")],
            new: vec![],
            added: vec![],
            removed: vec!["1", "2"],
            changed: vec![],
        },
    ];
    for case in cases {
        let (added, removed, changed) = references_diffs(&case.old, &case.new);
        let uids = |v: &[OwnerReference]| v.iter().map(|r| r.uid.clone()).collect::<Vec<_>>();
        assert_eq!(uids(&added), case.added, "{}: added", case.name);
        assert_eq!(uids(&removed), case.removed, "{}: removed", case.name);
        let changed: Vec<String> = changed.iter().map(|c| c.new.uid.clone()).collect();
        assert_eq!(changed, case.changed, "{}: changed", case.name);
    }
}

// ----- the builder with its queues --------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn the_builder_applies_queued_events_in_order_and_fills_the_queues() {
    let recorder = FakeRecorder::new();
    let attempt_to_delete = RateLimitingQueue::new(default_controller_rate_limiter());
    let attempt_to_orphan = RateLimitingQueue::new(default_controller_rate_limiter());
    let cache = Arc::new(ReferenceCache::new(10));
    let builder = GraphBuilder::new(
        GraphChanges::new(Queue::new()),
        attempt_to_delete.clone(),
        attempt_to_orphan.clone(),
        cache.clone(),
        Arc::new(recorder.clone()),
    );
    let handler = builder.handler("apps/v1", "ReplicaSet");
    use kcm_machinery::informer::ResourceEventHandler;
    let owner = ReplicaSet {
        metadata: meta("ns1", "rs-a", "a", vec![]),
        ..ReplicaSet::default()
    };
    handler.on_add(Arc::new(owner.clone()), true);
    builder.handler("v1", "Pod").on_add(
        Arc::new(Pod {
            metadata: meta("ns2", "p1", "p1", vec![rs_ref("a")]),
            ..Pod::default()
        }),
        true,
    );
    handler.on_delete(kcm_machinery::informer::DeletedObject::Object(Arc::new(
        owner,
    )));
    assert_eq!(builder.changes().len(), 3);
    for _ in 0..3 {
        assert!(builder.process_next().await);
    }
    assert!(!builder.graph().contains("a"));
    assert!(builder.graph().contains("p1"));
    // p1 was queued twice (invalid namespace, then its owner's deletion): once in the queue.
    assert_eq!(attempt_to_delete.len(), 1);
    assert_eq!(attempt_to_delete.get().await, Some(key("p1", false)));
    assert!(cache.has(&rs_identity("ns1", "a")));
    let events = recorder.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].type_, EventType::Warning);
    assert_eq!(events[0].reason, "OwnerRefInvalidNamespace");
    assert_eq!(
        events[0].message,
        "ownerRef [apps/v1/ReplicaSet, namespace: ns2, name: rs-a, uid: a] does not exist in namespace \"ns2\""
    );
    assert_eq!(events[0].regarding.name.as_deref(), Some("p1"));
    assert_eq!(events[0].regarding.namespace.as_deref(), Some("ns2"));

    // run() returns once cancelled.
    let cancel = tokio_util::sync::CancellationToken::new();
    cancel.cancel();
    builder.run(cancel).await;
}
