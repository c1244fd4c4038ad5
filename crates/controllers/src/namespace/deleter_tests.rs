//! Unit tests of one deletion pass against the fake client (upstream `namespaced_resources_deleter_test.go`).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResource, APIResourceList};
use kcm_machinery::controller::api_status;
use kcm_testing::{MetaBuilder, PodSpecBuilder};
use kube::api::ObjectMeta;

use super::*;
use crate::namespace::client::NamespaceAction;
use crate::namespace::conditions::{
    NAMESPACE_CONTENT_REMAINING, NAMESPACE_DELETION_CONTENT_FAILURE,
    NAMESPACE_DELETION_DISCOVERY_FAILURE, NAMESPACE_FINALIZERS_REMAINING,
};
use crate::namespace::{FakeNamespaceClient, NamespaceClient};

const NS: &str = "team";
const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Deleted at t=1000; the clock reads t=1000 + `elapsed`.
fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(seconds).expect("valid")
}

fn namespace(phase: &str, deleting: bool, finalizers: &[&str]) -> Namespace {
    let ns = kcm_testing::namespace(NS)
        .uid("uid-1")
        .resource_version("1")
        .spec_finalizers(finalizers)
        .phase(phase);
    if deleting {
        ns.deleted_at(at(1000)).build()
    } else {
        ns.build()
    }
}

fn resource(name: &str, kind: &str, namespaced: bool, verbs: &[&str]) -> APIResource {
    APIResource {
        name: name.into(),
        kind: kind.into(),
        namespaced,
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        singular_name: String::new(),
        ..APIResource::default()
    }
}

fn gvr(group: &str, version: &str, resource: &str) -> GroupVersionResource {
    GroupVersionResource::new(group, version, resource)
}

fn meta(name: &str, finalizers: &[&str]) -> ObjectMeta {
    let m = kcm_testing::meta(name).namespace(NS);
    if finalizers.is_empty() {
        m.build()
    } else {
        m.finalizers(finalizers).build()
    }
}

fn pod(name: &str, grace: i64, phase: &str) -> Pod {
    kcm_testing::pod(name)
        .namespace(NS)
        .termination_grace_period(grace)
        .phase(phase)
        .build()
}

/// A server with core pods, configmaps, events (list+delete only, no deletecollection),
/// cluster-scoped nodes, and apps replicasets served in v1.
fn server() -> Arc<FakeNamespaceClient> {
    let fake = Arc::new(FakeNamespaceClient::new());
    fake.add_resource_list(APIResourceList {
        group_version: "v1".into(),
        resources: vec![
            resource("pods", "Pod", true, ALL_VERBS),
            resource("pods/status", "Pod", true, &["get", "patch", "update"]),
            resource("configmaps", "ConfigMap", true, ALL_VERBS),
            resource(
                "events",
                "Event",
                true,
                &["create", "delete", "get", "list"],
            ),
            resource("bindings", "Binding", true, &["create"]),
            resource("nodes", "Node", false, ALL_VERBS),
        ],
    });
    fake.add_resource_list(APIResourceList {
        group_version: "apps/v1".into(),
        resources: vec![resource("replicasets", "ReplicaSet", true, ALL_VERBS)],
    });
    fake
}

fn deleter(fake: &Arc<FakeNamespaceClient>, elapsed: i64) -> NamespacedResourcesDeleter {
    NamespacedResourcesDeleter::new(fake.clone(), FINALIZER_KUBERNETES)
        .with_clock(Arc::new(move || at(1000 + elapsed)))
}

fn conditions_of(ns: &Namespace) -> Vec<NamespaceCondition> {
    ns.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

fn condition(conditions: &[NamespaceCondition], t: &str) -> NamespaceCondition {
    conditions
        .iter()
        .find(|c| c.type_ == t)
        .cloned()
        .unwrap_or_else(|| panic!("no {t} condition in {conditions:?}"))
}

/// The conditions of the last status update.
fn last_conditions(fake: &FakeNamespaceClient) -> Vec<NamespaceCondition> {
    fake.status_updates()
        .last()
        .map(conditions_of)
        .unwrap_or_default()
}

#[tokio::test]
async fn nothing_to_do_for_namespaces_gone_live_or_finalized() {
    struct Case {
        name: &'static str,
        stored: Option<Namespace>,
    }
    let cases = [
        Case {
            name: "gone",
            stored: None,
        },
        Case {
            name: "not being deleted",
            stored: Some(namespace("Active", false, &["kubernetes"])),
        },
        Case {
            name: "already finalized and terminating",
            stored: Some(namespace("Terminating", true, &[])),
        },
    ];
    for case in cases {
        let fake = server();
        if let Some(ns) = case.stored {
            fake.insert_namespace(ns);
        }
        deleter(&fake, 0).delete(NS).await.expect(case.name);
        assert_eq!(
            fake.actions(),
            vec![NamespaceAction::GetNamespace(NS.into())],
            "{}",
            case.name
        );
    }
}

#[tokio::test]
async fn an_emptied_namespace_is_marked_terminating_has_its_conditions_written_and_is_finalized() {
    let fake = server();
    fake.insert_namespace(namespace(
        "Active",
        true,
        &["kubernetes", "example.com/other"],
    ));
    fake.insert_object(&gvr("", "v1", "configmaps"), meta("cm", &[]));
    fake.insert_object(&gvr("", "v1", "events"), meta("ev1", &[]));
    fake.insert_object(&gvr("", "v1", "events"), meta("ev2", &[]));
    fake.insert_object(&gvr("apps", "v1", "replicasets"), meta("rs", &[]));
    fake.insert_pod(pod("done", 30, "Succeeded"));

    deleter(&fake, 0).delete(NS).await.expect("finalized");

    // The content is gone: collections where served, one by one for events.
    for (g, v, r) in [
        ("", "v1", "configmaps"),
        ("", "v1", "events"),
        ("apps", "v1", "replicasets"),
        ("", "v1", "pods"),
    ] {
        assert_eq!(fake.count(&gvr(g, v, r), NS), 0, "{r}");
    }
    let actions = fake.actions();
    assert!(actions.contains(&NamespaceAction::DeleteCollection(
        "configmaps.v1.".into(),
        NS.into()
    )));
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, NamespaceAction::DeleteCollection(r, _) if r == "events.v1."))
    );
    assert!(actions.contains(&NamespaceAction::Delete(
        "events.v1.".into(),
        NS.into(),
        "ev1".into()
    )));
    // Never cluster-scoped, subresources or resources without delete.
    assert!(!actions.iter().any(|a| format!("{a:?}").contains("nodes")
        || format!("{a:?}").contains("bindings")
        || format!("{a:?}").contains("pods/status")));

    // First write: the phase; second: the conditions, all False.
    let updates = fake.status_updates();
    assert_eq!(updates.len(), 2);
    assert_eq!(
        updates[0].status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Terminating")
    );
    let conditions = conditions_of(&updates[1]);
    assert_eq!(conditions.len(), 5);
    assert!(
        conditions.iter().all(|c| c.status == "False"),
        "{conditions:?}"
    );
    assert_eq!(
        condition(&conditions, NAMESPACE_CONTENT_REMAINING)
            .reason
            .as_deref(),
        Some("ContentRemoved")
    );

    // The finalize keeps the other finalizer and drops ours; it carries the latest version.
    let finalizes = fake.finalizes();
    assert_eq!(finalizes.len(), 1);
    assert_eq!(
        finalizes[0]
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.clone()),
        Some(vec!["example.com/other".to_owned()])
    );
    let stored = fake.namespace(NS).expect("held by the other finalizer");
    assert_eq!(
        stored.spec.and_then(|s| s.finalizers),
        Some(vec!["example.com/other".to_owned()])
    );
}

#[tokio::test]
async fn the_last_finalizer_going_lets_the_server_remove_the_namespace() {
    let fake = server();
    fake.insert_namespace(namespace("Terminating", true, &["kubernetes"]));
    deleter(&fake, 0).delete(NS).await.expect("finalized");
    assert!(fake.namespace(NS).is_none());
}

#[tokio::test]
async fn pods_in_their_grace_period_make_the_pass_wait_for_the_estimate() {
    struct Case {
        name: &'static str,
        elapsed: i64,
        pods: Vec<Pod>,
        want_estimate: Option<i64>,
    }
    let cases = [
        Case {
            name: "longest grace period of running pods",
            elapsed: 5,
            pods: vec![
                pod("a", 30, "Running"),
                pod("b", 45, "Pending"),
                pod("c", 90, "Failed"),
            ],
            want_estimate: Some(45),
        },
        Case {
            name: "the grace period has passed since the deletion",
            elapsed: 45,
            pods: vec![pod("a", 30, "Running"), pod("b", 45, "Pending")],
            want_estimate: None,
        },
    ];
    for case in cases {
        let fake = server();
        fake.insert_namespace(namespace("Terminating", true, &["kubernetes"]));
        fake.set_sticky(&gvr("", "v1", "pods"));
        for p in case.pods {
            fake.insert_pod(p);
        }
        let result = deleter(&fake, case.elapsed).delete(NS).await;
        match case.want_estimate {
            Some(want) => {
                match result {
                    Err(Error::ResourcesRemaining { estimate, .. }) => {
                        assert_eq!(estimate, want, "{}", case.name)
                    }
                    other => panic!("{}: {other:?}", case.name),
                }
                assert!(fake.finalizes().is_empty(), "{}", case.name);
                let conditions = last_conditions(&fake);
                let remaining = condition(&conditions, NAMESPACE_CONTENT_REMAINING);
                assert_eq!(remaining.status, "True", "{}", case.name);
                assert_eq!(
                    remaining.message.as_deref(),
                    Some("Some resources are remaining: pods. has 3 resource instances"),
                    "{}",
                    case.name
                );
            }
            None => {
                // Past the estimate, pods that stay without finalizers are unexpected.
                let err = result.expect_err(case.name);
                assert_eq!(
                    err.to_string(),
                    "unexpected items still remain in namespace: team for gvr: { v1 pods}",
                    "{}",
                    case.name
                );
                let conditions = last_conditions(&fake);
                assert_eq!(
                    condition(&conditions, NAMESPACE_DELETION_CONTENT_FAILURE)
                        .message
                        .as_deref(),
                    Some(
                        "Failed to delete all resource types, 1 remaining: unexpected items still remain in namespace: team for gvr: { v1 pods}"
                    ),
                    "{}",
                    case.name
                );
            }
        }
    }
}

#[tokio::test]
async fn pods_are_deleted_first_and_nothing_else_while_any_remains() {
    let fake = server();
    fake.insert_namespace(namespace("Terminating", true, &["kubernetes"]));
    fake.set_sticky(&gvr("", "v1", "pods"));
    fake.insert_pod(
        kcm_testing::pod("held")
            .namespace(NS)
            .finalizers(&["e2e.example.com/finalizer"])
            .termination_grace_period(30)
            .phase("Running")
            .build(),
    );
    fake.insert_object(&gvr("", "v1", "configmaps"), meta("cm", &[]));
    fake.insert_object(&gvr("apps", "v1", "replicasets"), meta("rs", &[]));

    // The pod is asked to go; the rest is not touched while it stays.
    match deleter(&fake, 0).delete(NS).await {
        Err(Error::ResourcesRemaining { estimate, .. }) => assert_eq!(estimate, 30),
        other => panic!("{other:?}"),
    }
    assert!(fake.actions().contains(&NamespaceAction::DeleteCollection(
        "pods.v1.".into(),
        NS.into()
    )));
    assert!(
        !fake.actions().iter().any(|a| matches!(a,
            NamespaceAction::DeleteCollection(r, _) | NamespaceAction::Delete(r, _, _) | NamespaceAction::List(r, _)
                if r != "pods.v1.")),
        "{:?}",
        fake.actions()
    );
    assert_eq!(fake.count(&gvr("", "v1", "configmaps"), NS), 1);
    assert_eq!(fake.count(&gvr("apps", "v1", "replicasets"), NS), 1);
    let conditions = last_conditions(&fake);
    assert_eq!(
        condition(&conditions, NAMESPACE_CONTENT_REMAINING)
            .message
            .as_deref(),
        Some("Some resources are remaining: pods. has 1 resource instances")
    );
    assert_eq!(
        condition(&conditions, NAMESPACE_FINALIZERS_REMAINING)
            .message
            .as_deref(),
        Some("Some finalizers are remaining: e2e.example.com/finalizer in 1 resource instances")
    );
    assert_eq!(
        condition(&conditions, NAMESPACE_DELETION_CONTENT_FAILURE).status,
        "False"
    );
    assert!(fake.finalizes().is_empty());

    // Past its grace period the pod still holds everything else back.
    fake.clear_actions();
    match deleter(&fake, 60).delete(NS).await {
        Err(Error::ResourcesRemaining { estimate, .. }) => {
            assert_eq!(estimate, FINALIZER_ESTIMATE_SECONDS)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.count(&gvr("", "v1", "configmaps"), NS), 1);

    // Once it is gone, the rest goes and the namespace is finalized.
    fake.remove_pod(NS, "held");
    deleter(&fake, 60).delete(NS).await.expect("finalized");
    assert_eq!(fake.count(&gvr("", "v1", "configmaps"), NS), 0);
    assert_eq!(fake.count(&gvr("apps", "v1", "replicasets"), NS), 0);
    assert!(fake.namespace(NS).is_none());
}

#[tokio::test]
async fn pods_that_survive_deletion_unexpectedly_also_hold_back_the_rest() {
    let fake = server();
    fake.insert_namespace(namespace("Terminating", true, &["kubernetes"]));
    fake.set_sticky(&gvr("", "v1", "pods"));
    fake.insert_pod(pod("stuck", 30, "Running"));
    fake.insert_object(&gvr("", "v1", "configmaps"), meta("cm", &[]));
    let err = deleter(&fake, 60)
        .delete(NS)
        .await
        .expect_err("pods remain");
    assert_eq!(
        err.to_string(),
        "unexpected items still remain in namespace: team for gvr: { v1 pods}"
    );
    assert_eq!(fake.count(&gvr("", "v1", "configmaps"), NS), 1);
}

#[tokio::test]
async fn objects_held_by_finalizers_wait_the_default_estimate() {
    let fake = server();
    fake.insert_namespace(namespace("Terminating", true, &["kubernetes"]));
    fake.set_sticky(&gvr("apps", "v1", "replicasets"));
    fake.insert_object(
        &gvr("apps", "v1", "replicasets"),
        meta("a", &["foregroundDeletion"]),
    );
    fake.insert_object(
        &gvr("apps", "v1", "replicasets"),
        meta("b", &["foregroundDeletion", "example.com/x"]),
    );
    match deleter(&fake, 0).delete(NS).await {
        Err(Error::ResourcesRemaining { estimate, .. }) => {
            assert_eq!(estimate, FINALIZER_ESTIMATE_SECONDS)
        }
        other => panic!("{other:?}"),
    }
    let conditions = last_conditions(&fake);
    assert_eq!(
        condition(&conditions, NAMESPACE_FINALIZERS_REMAINING)
            .message
            .as_deref(),
        Some(
            "Some finalizers are remaining: example.com/x in 1 resource instances, foregroundDeletion in 2 resource instances"
        )
    );
    assert_eq!(
        condition(&conditions, NAMESPACE_CONTENT_REMAINING)
            .message
            .as_deref(),
        Some("Some resources are remaining: replicasets.apps has 2 resource instances")
    );
}

#[tokio::test]
async fn discovery_failures_are_recorded_and_block_finalization() {
    // Partial: the groups that answered are still emptied.
    let fake = server();
    fake.insert_namespace(namespace("Terminating", true, &["kubernetes"]));
    fake.insert_object(&gvr("", "v1", "configmaps"), meta("cm", &[]));
    fake.fail_group_version(
        "metrics.k8s.io/v1beta1",
        "the server is currently unable to handle the request",
    );
    let err = deleter(&fake, 0)
        .delete(NS)
        .await
        .expect_err("partial discovery");
    assert_eq!(
        err.to_string(),
        "unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: the server is currently unable to handle the request"
    );
    assert_eq!(fake.count(&gvr("", "v1", "configmaps"), NS), 0);
    assert!(fake.finalizes().is_empty());
    let conditions = last_conditions(&fake);
    let discovery = condition(&conditions, NAMESPACE_DELETION_DISCOVERY_FAILURE);
    assert_eq!(discovery.status, "True");
    assert_eq!(discovery.reason.as_deref(), Some("DiscoveryFailed"));
    assert_eq!(
        discovery.message.as_deref(),
        Some(
            "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: the server is currently unable to handle the request"
        )
    );

    // Total: nothing to work on.
    let fake = server();
    fake.insert_namespace(namespace("Terminating", true, &["kubernetes"]));
    fake.set_discovery_error(Some(api_status::internal_error("etcd is down")));
    let err = deleter(&fake, 0)
        .delete(NS)
        .await
        .expect_err("no discovery");
    assert_eq!(err.to_string(), "Internal error occurred: etcd is down");
    let discovery = condition(
        &last_conditions(&fake),
        NAMESPACE_DELETION_DISCOVERY_FAILURE,
    );
    assert_eq!(
        discovery.message.as_deref(),
        Some("Internal error occurred: etcd is down")
    );
    assert!(fake.finalizes().is_empty());
}

#[tokio::test]
async fn content_errors_are_aggregated_and_the_other_resources_still_emptied() {
    let fake = server();
    fake.insert_namespace(namespace("Terminating", true, &["kubernetes"]));
    fake.insert_object(&gvr("", "v1", "configmaps"), meta("cm", &[]));
    fake.insert_object(&gvr("apps", "v1", "replicasets"), meta("rs", &[]));
    fake.fail(
        "delete_collection",
        &gvr("", "v1", "configmaps"),
        api_status::internal_error("disk full"),
    );
    fake.fail(
        "list",
        &gvr("", "v1", "events"),
        api_status::internal_error("list broke"),
    );
    let err = deleter(&fake, 0)
        .delete(NS)
        .await
        .expect_err("content errors");
    assert!(
        matches!(&err, Error::Aggregate(errors) if errors.len() == 2),
        "{err}"
    );
    assert_eq!(fake.count(&gvr("apps", "v1", "replicasets"), NS), 0);
    let conditions = last_conditions(&fake);
    assert_eq!(
        condition(&conditions, NAMESPACE_DELETION_CONTENT_FAILURE)
            .message
            .as_deref(),
        Some(
            "Failed to delete all resource types, 2 remaining: Internal error occurred: disk full, Internal error occurred: list broke"
        )
    );
    assert!(fake.finalizes().is_empty());
}

#[tokio::test]
async fn unsupported_collection_deletes_fall_back_to_one_by_one() {
    let fake = server();
    fake.insert_namespace(namespace("Terminating", true, &["kubernetes"]));
    fake.insert_object(&gvr("", "v1", "configmaps"), meta("a", &[]));
    fake.insert_object(&gvr("", "v1", "configmaps"), meta("b", &[]));
    let mut not_allowed = api_status::internal_error("");
    not_allowed.code = 405;
    not_allowed.reason = "MethodNotAllowed".into();
    fake.fail(
        "delete_collection",
        &gvr("", "v1", "configmaps"),
        not_allowed,
    );
    deleter(&fake, 0).delete(NS).await.expect("finalized");
    assert_eq!(fake.count(&gvr("", "v1", "configmaps"), NS), 0);
    assert!(fake.actions().contains(&NamespaceAction::Delete(
        "configmaps.v1.".into(),
        NS.into(),
        "b".into()
    )));
    assert_eq!(fake.finalizes().len(), 1);
}

#[tokio::test]
async fn namespace_writes_retry_on_conflict_and_stop_when_the_uid_changes() {
    // Conflicts on the phase and the finalize: re-read and retried.
    let fake = server();
    fake.insert_namespace(namespace("Active", true, &["kubernetes"]));
    fake.set_conflicts(1);
    deleter(&fake, 0).delete(NS).await.expect("retried");
    let gets = fake
        .actions()
        .iter()
        .filter(|a| matches!(a, NamespaceAction::GetNamespace(_)))
        .count();
    assert_eq!(gets, 2, "{:?}", fake.actions());
    assert!(fake.namespace(NS).is_none());

    // A different UID on re-read: the namespace was recreated, stop.
    let fake = server();
    fake.insert_namespace(namespace("Active", true, &["kubernetes"]));
    fake.set_conflicts(1);
    let recreated = {
        let mut ns = namespace("Active", true, &["kubernetes"]);
        ns.metadata.uid = Some("uid-2".into());
        ns
    };
    // The first GET sees uid-1; swap in the namesake before the re-read.
    let deleter = deleter(&fake, 0);
    let first = fake.get_namespace(NS).await.expect("stored");
    fake.insert_namespace(recreated);
    let err = deleter
        .retry_on_conflict(first, NamespaceWrite::Terminating)
        .await
        .expect_err("uid changed");
    assert_eq!(err.to_string(), "namespace uid has changed across retries");
}

#[test]
fn deletable_resources_are_namespaced_preferred_and_deletable() {
    let mut d = DiscoveryResult::default();
    d.versions
        .insert("batch".into(), vec!["v1".into(), "v1beta1".into()]);
    d.add_resource_list(&APIResourceList {
        group_version: "batch/v1beta1".into(),
        resources: vec![
            resource("cronjobs", "CronJob", true, ALL_VERBS),
            resource("oldjobs", "OldJob", true, ALL_VERBS),
        ],
    });
    d.add_resource_list(&APIResourceList {
        group_version: "batch/v1".into(),
        resources: vec![resource("cronjobs", "CronJob", true, ALL_VERBS)],
    });
    d.add_resource_list(&APIResourceList {
        group_version: "v1".into(),
        resources: vec![
            resource("events", "Event", true, &["delete"]),
            resource("bindings", "Binding", true, &["create"]),
            resource("nodes", "Node", false, ALL_VERBS),
        ],
    });
    let got: Vec<String> = deletable_namespaced_resources(&d)
        .iter()
        .map(|r| r.gvr().to_string())
        .collect();
    assert_eq!(
        got,
        vec!["events.v1.", "cronjobs.v1.batch", "oldjobs.v1beta1.batch"]
    );
}
