//! apps/v1 workloads: generation, /status, /scale, validation that controllers rely on.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v1::Scale;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::{status_of, timed};

fn deployment(name: &str, replicas: i32, selector: &str, label: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": selector}},
            "template": {"metadata": {"labels": {"app": label}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}
        }
    }))
    .expect("deployment")
}

#[tokio::test]
async fn generation_bumps_on_spec_changes_only() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Deployment> = Api::namespaced(server.client(), "default");
        let mut d = deployment("web", 1, "web", "web");
        d.status = Some(serde_json::from_value(json!({"replicas": 7})).expect("status"));
        let created = api.create(&PostParams::default(), &d).await.expect("create");
        assert_eq!(created.metadata.generation, Some(1));
        assert!(created.status.is_none(), "status is cleared on create");

        let labeled = api
            .patch("web", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})))
            .await
            .expect("label");
        assert_eq!(labeled.metadata.generation, Some(1));

        let status = api
            .patch_status("web", &PatchParams::default(), &Patch::Merge(json!({"status": {"observedGeneration": 1, "replicas": 1}, "spec": {"replicas": 9}})))
            .await
            .expect("status");
        assert_eq!(status.metadata.generation, Some(1));
        assert_eq!(status.spec.as_ref().and_then(|s| s.replicas), Some(1), "/status keeps the spec");
        assert_eq!(status.status.as_ref().and_then(|s| s.replicas), Some(1));

        let scaled = api
            .patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 3}, "status": {"replicas": 99}})))
            .await
            .expect("scale via spec");
        assert_eq!(scaled.metadata.generation, Some(2));
        assert_eq!(scaled.status.as_ref().and_then(|s| s.replicas), Some(1), "main resource keeps the status");
    })
    .await;
}

#[tokio::test]
async fn scale_subresource_reads_and_writes_replicas() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Deployment> = Api::namespaced(server.client(), "default");
        api.create(&PostParams::default(), &deployment("web", 2, "web", "web")).await.expect("create");
        let scale = api.get_scale("web").await.expect("get scale");
        assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(2));
        assert_eq!(scale.status.as_ref().map(|s| s.selector.clone()), Some(Some("app=web".to_owned())));

        let patched = api
            .patch_scale("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 5}})))
            .await
            .expect("patch scale");
        assert_eq!(patched.spec.as_ref().and_then(|s| s.replicas), Some(5));
        let d = api.get("web").await.expect("get");
        assert_eq!(d.spec.as_ref().and_then(|s| s.replicas), Some(5));
        assert_eq!(d.metadata.generation, Some(2));

        let mut stale: Scale = scale.clone();
        stale.spec.as_mut().expect("spec").replicas = Some(1);
        let err = api.replace_scale("web", &PostParams::default(), &stale).await.expect_err("stale scale");
        assert_eq!(status_of(err).0, 409);
        stale.metadata.resource_version = None;
        let replaced = api.replace_scale("web", &PostParams::default(), &stale).await.expect("unconditional scale");
        assert_eq!(replaced.spec.as_ref().and_then(|s| s.replicas), Some(1));

        let sts_api: Api<StatefulSet> = Api::namespaced(server.client(), "default");
        let sts: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "db"},
            "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
        }))
        .expect("sts");
        sts_api.create(&PostParams::default(), &sts).await.expect("create sts");
        let s = sts_api
            .patch_scale("db", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 3}})))
            .await
            .expect("scale sts");
        assert_eq!(s.spec.and_then(|s| s.replicas), Some(3));
    })
    .await;
}

#[tokio::test]
async fn workload_validation_errors_name_the_field() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
        let err = api
            .create(&PostParams::default(), &deployment("bad", 1, "web", "other"))
            .await
            .expect_err("selector mismatch");
        let kube::Error::Api(status) = err else { panic!("api error") };
        assert_eq!(status.code, 422);
        assert_eq!(status.reason, "Invalid");
        // kube's Status does not expose causes: read them raw.
        let body = serde_json::to_vec(&deployment("bad", 1, "web", "other")).expect("json");
        let (code, raw) = crate::common::raw(&client, "POST", "/apis/apps/v1/namespaces/default/deployments", "application/json", body).await;
        assert_eq!(code, 422);
        assert_eq!(raw["details"]["kind"], "Deployment");
        assert_eq!(raw["details"]["group"], "apps");
        let fields: Vec<&str> = raw["details"]["causes"]
            .as_array()
            .expect("causes")
            .iter()
            .filter_map(|c| c["field"].as_str())
            .collect();
        assert_eq!(fields, vec!["spec.template.metadata.labels"]);

        let err = api.create(&PostParams::default(), &deployment("neg", -1, "web", "web")).await.expect_err("negative");
        assert_eq!(status_of(err).0, 422);

        api.create(&PostParams::default(), &deployment("ok", 1, "web", "web")).await.expect("create");
        let err = api
            .patch("ok", &PatchParams::default(), &Patch::Merge(json!({"spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}}}}})))
            .await
            .expect_err("selector immutable");
        let (code, _, message) = status_of(err);
        assert_eq!(code, 422);
        assert!(message.contains("spec.selector") && message.contains("field is immutable"), "{message}");
        let _: Value = json!(null);
    })
    .await;
}

#[tokio::test]
async fn quantities_are_stored_canonically() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Deployment> = Api::namespaced(server.client(), "default");
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "sized"},
            "spec": {
                "selector": {"matchLabels": {"app": "sized"}},
                "template": {"metadata": {"labels": {"app": "sized"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "resources": {
                        "limits": {"cpu": "0.5", "memory": "1.5Gi"},
                        "requests": {"cpu": "0.0001", "memory": "1024Mi"}
                    }}]}}
            }
        }))
        .expect("deployment");
        let created = api
            .create(&PostParams::default(), &d)
            .await
            .expect("create");
        let got = api.get("sized").await.expect("get");
        for obj in [&created, &got] {
            let v = serde_json::to_value(obj).expect("json");
            let res = &v["spec"]["template"]["spec"]["containers"][0]["resources"];
            assert_eq!(res["limits"], json!({"cpu": "500m", "memory": "1536Mi"}));
            assert_eq!(res["requests"], json!({"cpu": "1m", "memory": "1Gi"}));
        }

        // An unparsable quantity fails the decode, as in kube-apiserver: 400 with its message.
        let mut bad = d.clone();
        bad.metadata.name = Some("bad".to_owned());
        let mut v = serde_json::to_value(&bad).expect("json");
        v["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] =
            json!("lots");
        let bad: Deployment = serde_json::from_value(v).expect("deployment");
        let err = api
            .create(&PostParams::default(), &bad)
            .await
            .expect_err("invalid quantity");
        let (code, reason, message) = status_of(err);
        assert_eq!((code, reason.as_str()), (400, "BadRequest"));
        assert_eq!(
            message,
            "Deployment in version \"v1\" cannot be handled as a Deployment: quantities must match \
             the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    })
    .await;
}

/// As upstream's `deploymentStatusStrategy`: a `/status` write may change a Deployment's
/// annotations (the revision annotation is written so) but not its labels.
#[tokio::test]
async fn deployment_status_writes_take_annotations_but_keep_labels() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Deployment> = Api::namespaced(server.client(), "default");
        let mut d = deployment("web", 1, "web", "web");
        d.metadata.labels = Some([("tier".to_owned(), "front".to_owned())].into());
        api.create(&PostParams::default(), &d)
            .await
            .expect("create");
        let patched = api
            .patch_status(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"tier": "back"},
                    "annotations": {"deployment.kubernetes.io/revision": "2"}},
                    "status": {"replicas": 1}})),
            )
            .await
            .expect("patch status");
        let labels = patched.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
        let annotations = patched.metadata.annotations.unwrap_or_default();
        assert_eq!(
            annotations
                .get("deployment.kubernetes.io/revision")
                .map(String::as_str),
            Some("2")
        );
    })
    .await;
}
