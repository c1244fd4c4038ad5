//! core/v1 replicationcontrollers and podtemplates, apps/v1 controllerrevisions over HTTP: defaults from the template, /scale over a label-map selector, orphaning by default, immutable revision data.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PodTemplate, ReplicationController};
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{lifecycle, status_of, timed};

fn rc() -> ReplicationController {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}
    }))
    .expect("rc")
}

#[tokio::test]
async fn replication_controllers_default_scale_and_orphan_by_default() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ReplicationController> = Api::namespaced(server.client(), "default");
        let (created, patched, _) = lifecycle(
            &api,
            &rc(),
            json!({"spec": {"replicas": 2}}),
            json!({"apiVersion": "v1", "kind": "ReplicationController",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"replicas": 2, "selector": {"app": "web"},
                    "template": {"metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}}),
        )
        .await;
        let spec = created.spec.clone().expect("spec");
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.selector.expect("selector")["app"], "web");
        assert_eq!(created.metadata.labels.expect("labels")["app"], "web");
        assert_eq!(patched.metadata.generation, Some(2));

        let scale = api.get_scale("web").await.expect("scale");
        assert_eq!(scale.spec.and_then(|s| s.replicas), Some(2));
        assert_eq!(
            scale.status.and_then(|s| s.selector).as_deref(),
            Some("app=web")
        );
        api.patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("scale");
        assert_eq!(
            api.get("web").await.expect("get").spec.and_then(|s| s.replicas),
            Some(4)
        );

        let mut bad = rc();
        bad.metadata.name = Some("bad".to_owned());
        if let Some(spec) = bad.spec.as_mut() {
            spec.selector = Some([("app".to_owned(), "other".to_owned())].into());
        }
        let (code, _, message) =
            status_of(api.create(&PostParams::default(), &bad).await.expect_err("mismatch"));
        assert_eq!(code, 422);
        assert!(
            message.contains("spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`"),
            "{message}"
        );

        // core/v1 ReplicationControllers orphan their pods unless told otherwise.
        let deleted = api
            .delete("web", &DeleteParams::default())
            .await
            .expect("delete");
        let pending = deleted.left().expect("kept for the garbage collector");
        assert_eq!(pending.metadata.finalizers, Some(vec!["orphan".to_owned()]));
    })
    .await;
}

#[tokio::test]
async fn pod_templates_and_controller_revisions() {
    timed(async {
        let server = TestServer::start().await;
        let templates: Api<PodTemplate> = Api::namespaced(server.client(), "default");
        let template: PodTemplate = serde_json::from_value(json!({
            "metadata": {"name": "base"},
            "template": {"metadata": {"labels": {"app": "base"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        }))
        .expect("pod template");
        let (created, _, _) = lifecycle(
            &templates,
            &template,
            json!({"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}),
            json!({"apiVersion": "v1", "kind": "PodTemplate",
                "metadata": {"name": "base", "namespace": "default"},
                "template": {"metadata": {"labels": {"app": "base"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}}),
        )
        .await;
        let spec = created
            .template
            .and_then(|t| t.spec)
            .expect("template spec");
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));

        let revisions: Api<ControllerRevision> = Api::namespaced(server.client(), "default");
        let revision: ControllerRevision = serde_json::from_value(json!({
            "metadata": {"name": "web-5d8f"}, "revision": 1,
            "data": {"spec": {"template": {"metadata": {"labels": {"app": "web"}}}}}
        }))
        .expect("revision");
        lifecycle(
            &revisions,
            &revision,
            json!({"metadata": {"labels": {"controller-revision-hash": "5d8f"}}}),
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": "web-5d8f", "namespace": "default"}, "revision": 2,
                "data": {"spec": {"template": {"metadata": {"labels": {"app": "web"}}}}}}),
        )
        .await;
        let (code, _, message) = status_of(
            revisions
                .patch(
                    "web-5d8f",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"spec": {"replicas": 3}}})),
                )
                .await
                .expect_err("data is immutable"),
        );
        assert_eq!(code, 422);
        assert!(message.contains("data: Invalid value"), "{message}");
        assert!(message.ends_with("field is immutable"), "{message}");
    })
    .await;
}
