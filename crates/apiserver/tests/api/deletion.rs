//! Deletion: finalizers, propagation policies, preconditions, responses, deletecollection.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use serde_json::json;

use crate::common::{configmap, status_of, timed};

fn with_finalizer(name: &str) -> ConfigMap {
    let mut cm = configmap(name, &[]);
    cm.metadata.finalizers = Some(vec!["example.com/hold".to_owned()]);
    cm
}

#[tokio::test]
async fn finalizers_hold_the_object_until_removed() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let created = api
            .create(&PostParams::default(), &with_finalizer("f"))
            .await
            .expect("create");
        let deleted = api
            .delete("f", &DeleteParams::default())
            .await
            .expect("delete");
        let held = deleted.left().expect("object returned while held");
        assert!(held.metadata.deletion_timestamp.is_some());
        assert_eq!(held.metadata.deletion_grace_period_seconds, Some(0));
        let still = api.get("f").await.expect("still there");
        assert!(still.metadata.deletion_timestamp.is_some());
        assert_eq!(
            still.metadata.generation,
            created.metadata.generation.map(|g| g + 1)
        );

        // New finalizers cannot be added while deleting.
        let err = api
            .patch(
                "f",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}),
                ),
            )
            .await
            .expect_err("no new finalizers");
        assert_eq!(status_of(err).0, 422);

        // A second delete changes nothing, not even the resourceVersion (no watch event).
        api.delete("f", &DeleteParams::default())
            .await
            .expect("delete again");
        let again = api.get("f").await.expect("still there");
        assert_eq!(
            again.metadata.resource_version,
            still.metadata.resource_version
        );

        // Removing the last finalizer deletes it.
        api.patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("remove finalizer");
        assert_eq!(status_of(api.get("f").await.expect_err("gone")).0, 404);
    })
    .await;
}

/// A kubelet deletes a stopped pod with grace period 0 on every change it sees; while a
/// finalizer holds the pod, those deletes must not change it, or each one would be a change.
#[tokio::test]
async fn repeated_graceless_deletes_of_a_pod_held_by_a_finalizer_write_nothing() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Pod> = Api::namespaced(server.client(), "default");
        let mut pod = crate::common::pod("held", &[]);
        pod.metadata.finalizers = Some(vec!["example.com/hold".to_owned()]);
        api.create(&PostParams::default(), &pod)
            .await
            .expect("create");
        api.delete("held", &DeleteParams::default())
            .await
            .expect("delete");
        let graceless = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        api.delete("held", &graceless).await.expect("graceless");
        let first = api.get("held").await.expect("held");
        assert_eq!(first.metadata.deletion_grace_period_seconds, Some(0));
        api.delete("held", &graceless).await.expect("again");
        let second = api.get("held").await.expect("still held");
        assert_eq!(
            second.metadata.resource_version,
            first.metadata.resource_version
        );
    })
    .await;
}

#[tokio::test]
async fn propagation_policies_add_gc_finalizers() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let cases = [
            (
                PropagationPolicy::Foreground,
                Some(vec!["foregroundDeletion".to_owned()]),
            ),
            (PropagationPolicy::Orphan, Some(vec!["orphan".to_owned()])),
            (PropagationPolicy::Background, None),
        ];
        for (i, (policy, want)) in cases.into_iter().enumerate() {
            let name = format!("p{i}");
            api.create(&PostParams::default(), &configmap(&name, &[]))
                .await
                .expect("create");
            let dp = DeleteParams {
                propagation_policy: Some(policy.clone()),
                ..Default::default()
            };
            let outcome = api.delete(&name, &dp).await.expect("delete");
            match want {
                Some(finalizers) => {
                    let held = outcome.left().expect("held by the GC finalizer");
                    assert_eq!(held.metadata.finalizers, Some(finalizers), "{policy:?}");
                    assert!(held.metadata.deletion_timestamp.is_some());
                }
                None => {
                    let status = outcome.right().expect("Status for an immediate delete");
                    assert_eq!(
                        status.status,
                        Some(kube::core::response::StatusSummary::Success)
                    );
                    let details = status.details.expect("details");
                    assert_eq!(details.name, name);
                    assert_eq!(details.kind, "configmaps");
                    assert_eq!(status_of(api.get(&name).await.expect_err("gone")).0, 404);
                }
            }
        }
    })
    .await;
}

#[tokio::test]
async fn foreground_deletion_of_a_workload_waits_for_the_gc() {
    timed(async {
        let server = TestServer::start().await;
        let rs_api: Api<ReplicaSet> = Api::namespaced(server.client(), "default");
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "rs"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}},
                "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
        }))
        .expect("rs");
        rs_api.create(&PostParams::default(), &rs).await.expect("create");
        rs_api.delete("rs", &DeleteParams::foreground()).await.expect("delete");
        let held = rs_api.get("rs").await.expect("held");
        assert_eq!(held.metadata.finalizers, Some(vec!["foregroundDeletion".to_owned()]));
        // The garbage collector removes its finalizer once dependents are gone.
        let (code, _) = crate::common::raw(
            &server.client(),
            "PATCH",
            "/apis/apps/v1/namespaces/default/replicasets/rs",
            "application/json-patch+json",
            br#"[{"op": "remove", "path": "/metadata/finalizers"}]"#.to_vec(),
        )
        .await;
        assert_eq!(code, 200, "gc removes its finalizer with a JSON patch");
        assert_eq!(status_of(rs_api.get("rs").await.expect_err("gone")).0, 404);
    })
    .await;
}

#[tokio::test]
async fn delete_preconditions() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let cm = api
            .create(&PostParams::default(), &configmap("c", &[]))
            .await
            .expect("create");
        let uid_mismatch = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some("other".to_owned()),
                resource_version: None,
            }),
            ..Default::default()
        };
        let (code, reason, message) =
            status_of(api.delete("c", &uid_mismatch).await.expect_err("uid"));
        assert_eq!((code, reason.as_str()), (409, "Conflict"));
        assert!(
            message
                .contains("the UID in the precondition (other) does not match the UID in record"),
            "{message}"
        );
        let rv_mismatch = DeleteParams {
            preconditions: Some(Preconditions {
                uid: None,
                resource_version: Some("1".to_owned()),
            }),
            ..Default::default()
        };
        assert_eq!(
            status_of(api.delete("c", &rv_mismatch).await.expect_err("rv")).0,
            409
        );
        let matching = DeleteParams {
            preconditions: Some(Preconditions {
                uid: cm.metadata.uid.clone(),
                resource_version: cm.metadata.resource_version.clone(),
            }),
            ..Default::default()
        };
        api.delete("c", &matching)
            .await
            .expect("matching preconditions");
    })
    .await;
}

#[tokio::test]
async fn dry_run_delete_and_delete_collection() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        for (name, team) in [("a", "x"), ("b", "x"), ("c", "y")] {
            let mut cm = configmap(name, &[]);
            cm.metadata.labels = Some([("team".to_owned(), team.to_owned())].into());
            api.create(&PostParams::default(), &cm)
                .await
                .expect("create");
        }
        api.delete(
            "a",
            &DeleteParams {
                dry_run: true,
                ..Default::default()
            },
        )
        .await
        .expect("dry run");
        api.get("a").await.expect("dry run kept it");

        let deleted = api
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels("team=x"),
            )
            .await
            .expect("deletecollection");
        let list = deleted.left().expect("list of deleted objects");
        let mut names: Vec<String> = list
            .items
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        names.sort();
        assert_eq!(names, vec!["a", "b"]);
        let left = api.list(&ListParams::default()).await.expect("list");
        assert_eq!(
            left.items
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .collect::<Vec<_>>(),
            vec!["c"]
        );
    })
    .await;
}
