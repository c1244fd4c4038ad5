//! Pods: create-time defaults and admission, binding, graceful deletion.

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};

use crate::common::{pod, status_of, timed};

#[tokio::test]
async fn pod_create_applies_defaults_pending_and_default_tolerations() {
    timed(async {
        let server = TestServer::start().await;
        let pods: Api<Pod> = Api::namespaced(server.client(), "default");
        let created = pods
            .create(&PostParams::default(), &pod("p", &[("app", "web")]))
            .await
            .expect("create");
        let spec = created.spec.expect("spec");
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
        let tolerations = spec.tolerations.expect("tolerations");
        let keys: Vec<_> = tolerations
            .iter()
            .map(|t| (t.key.clone().unwrap_or_default(), t.toleration_seconds))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("node.kubernetes.io/not-ready".to_owned(), Some(300)),
                ("node.kubernetes.io/unreachable".to_owned(), Some(300)),
            ]
        );
        assert_eq!(
            created.status.expect("status").phase.as_deref(),
            Some("Pending")
        );
    })
    .await;
}

#[tokio::test]
async fn a_request_above_its_limit_is_refused_in_pods_and_templates() {
    timed(async {
        let server = TestServer::start().await;
        let pods: Api<Pod> = Api::namespaced(server.client(), "default");
        let mut greedy = pod("greedy", &[]);
        if let Some(spec) = greedy.spec.as_mut() {
            spec.containers[0].resources = Some(
                serde_json::from_value(serde_json::json!({
                    "requests": {"cpu": "2"}, "limits": {"cpu": "1"}
                }))
                .expect("resources"),
            );
        }
        let err = pods
            .create(&PostParams::default(), &greedy)
            .await
            .expect_err("request above limit");
        assert_eq!(
            status_of(err),
            (
                422,
                "Invalid".to_owned(),
                "Pod \"greedy\" is invalid: spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1".to_owned()
            )
        );
        // The same rule holds in a workload's template, under its own path.
        let deployment = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "nginx",
                    "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "512Mi"}}}]}}}
        });
        let (code, status) = crate::common::raw(
            &server.client(),
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            "application/json",
            deployment.to_string(),
        )
        .await;
        assert_eq!(code, 422, "{status}");
        assert_eq!(
            status["message"],
            "Deployment.apps \"d\" is invalid: spec.template.spec.containers[0].resources.requests: Invalid value: \"1Gi\": must be less than or equal to memory limit of 512Mi"
        );
    })
    .await;
}

async fn bind(pods: &Api<Pod>, pod: &str, node: &str) -> Result<serde_json::Value, kube::Error> {
    pods.create_subresource("binding", pod, &PostParams::default(), &binding(pod, node))
        .await
}

fn binding(pod: &str, node: &str) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: Some(pod.to_owned()),
            ..Default::default()
        },
        target: ObjectReference {
            kind: Some("Node".to_owned()),
            name: Some(node.to_owned()),
            ..Default::default()
        },
    }
}

#[tokio::test]
async fn binding_sets_node_and_condition_once() {
    timed(async {
        let server = TestServer::start().await;
        let pods: Api<Pod> = Api::namespaced(server.client(), "default");
        pods.create(&PostParams::default(), &pod("b", &[]))
            .await
            .expect("create");
        bind(&pods, "b", "node-1").await.expect("bind");
        let bound = pods.get("b").await.expect("get");
        assert_eq!(
            bound.spec.expect("spec").node_name.as_deref(),
            Some("node-1")
        );
        let conditions = bound
            .status
            .expect("status")
            .conditions
            .expect("conditions");
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == "PodScheduled" && c.status == "True")
        );

        let err = bind(&pods, "b", "node-2").await.expect_err("already bound");
        let (code, _, message) = status_of(err);
        assert_eq!(code, 409);
        assert!(
            message.contains("is already assigned to node \"node-1\""),
            "{message}"
        );
    })
    .await;
}

#[tokio::test]
async fn scheduled_pod_is_deleted_gracefully_then_with_grace_zero() {
    timed(async {
        let server = TestServer::start().await;
        let pods: Api<Pod> = Api::namespaced(server.client(), "default");
        pods.create(&PostParams::default(), &pod("g", &[]))
            .await
            .expect("create");
        // Unscheduled: deleted at once, whatever the grace period.
        pods.create(&PostParams::default(), &pod("u", &[]))
            .await
            .expect("create");
        pods.delete("u", &DeleteParams::default())
            .await
            .expect("delete");
        assert_eq!(status_of(pods.get("u").await.expect_err("gone")).0, 404);

        bind(&pods, "g", "n").await.expect("bind");
        let deleted = pods
            .delete("g", &DeleteParams::default())
            .await
            .expect("delete");
        let pending = deleted
            .left()
            .expect("the pod comes back while terminating");
        assert!(pending.metadata.deletion_timestamp.is_some());
        assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(30));
        // Still there, terminating.
        let still = pods.get("g").await.expect("still there");
        assert!(still.metadata.deletion_timestamp.is_some());
        // A binding of a terminating pod is refused.
        let err = bind(&pods, "g", "n2").await.expect_err("terminating");
        assert_eq!(status_of(err).0, 409);
        // The (simulated) kubelet confirms with grace 0.
        pods.delete(
            "g",
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .expect("force");
        assert_eq!(status_of(pods.get("g").await.expect_err("gone")).0, 404);
    })
    .await;
}

/// Mutating admission runs before an update's validation, as upstream: an update that
/// replaces the tolerations (the e2e Pod Generation test's) gets the default ones back from
/// DefaultTolerationSeconds, so it only adds one and is allowed; the generation bumps.
#[tokio::test]
async fn an_update_replacing_tolerations_keeps_the_defaults_and_bumps_the_generation() {
    timed(async {
        let server = TestServer::start().await;
        let pods: Api<Pod> = Api::namespaced(server.client(), "default");
        let created = pods
            .create(&PostParams::default(), &pod("tolerant", &[]))
            .await
            .expect("create");
        assert_eq!(created.metadata.generation, Some(1));
        let mut changed = created.clone();
        let spec = changed.spec.as_mut().expect("spec");
        spec.tolerations = Some(vec![k8s_openapi::api::core::v1::Toleration {
            key: Some("foo".to_owned()),
            operator: Some("Equal".to_owned()),
            value: Some("bar".to_owned()),
            effect: Some("NoSchedule".to_owned()),
            ..Default::default()
        }]);
        let updated = pods
            .replace("tolerant", &PostParams::default(), &changed)
            .await
            .expect("adding a toleration is allowed");
        let keys: Vec<String> = updated
            .spec
            .clone()
            .and_then(|s| s.tolerations)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|t| t.key)
            .collect();
        assert_eq!(
            keys,
            [
                "foo",
                "node.kubernetes.io/not-ready",
                "node.kubernetes.io/unreachable"
            ]
        );
        assert_eq!(updated.metadata.generation, Some(2));

        // Dropping a toleration the admission does not restore is still refused.
        let mut dropped = updated.clone();
        let Some(spec) = dropped.spec.as_mut() else {
            panic!("spec");
        };
        spec.tolerations = Some(Vec::new());
        let err = pods
            .replace("tolerant", &PostParams::default(), &dropped)
            .await
            .expect_err("the foo toleration cannot go");
        let (code, _, message) = status_of(err);
        assert_eq!(code, 422, "{message}");
        assert!(
            message.contains("only additions to existing tolerations"),
            "{message}"
        );
    })
    .await;
}
