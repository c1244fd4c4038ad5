//! core/v1 resourcequotas and limitranges over HTTP: canonical quantities, /status, the container defaults, upstream's 422s.

use k8s_openapi::api::core::v1::{LimitRange, ResourceQuota};
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{lifecycle, status_of, timed};

#[tokio::test]
async fn quotas_keep_their_status_apart_and_refuse_unknown_resources() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ResourceQuota> = Api::namespaced(server.client(), "default");
        let quota: ResourceQuota = serde_json::from_value(json!({
            "metadata": {"name": "compute"},
            "spec": {"hard": {"pods": "10", "requests.cpu": "1.5", "limits.memory": "2048Mi"}},
            "status": {"used": {"pods": "99"}}
        }))
        .expect("quota");
        let (created, _, applied) = lifecycle(
            &api,
            &quota,
            json!({"spec": {"hard": {"pods": "20"}}}),
            json!({"apiVersion": "v1", "kind": "ResourceQuota",
                "metadata": {"name": "compute", "namespace": "default"},
                "spec": {"hard": {"pods": "20", "requests.cpu": "1500m", "limits.memory": "2Gi",
                    "count/deployments.apps": "5"}}}),
        )
        .await;
        assert!(created.status.is_none(), "status is the controller's");
        let hard = created.spec.and_then(|s| s.hard).expect("hard");
        assert_eq!(hard["requests.cpu"].0, "1500m");
        assert_eq!(hard["limits.memory"].0, "2Gi");
        assert_eq!(
            applied.spec.and_then(|s| s.hard).expect("hard")["count/deployments.apps"].0,
            "5"
        );
        let status = api
            .patch_status(
                "compute",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"hard": {"pods": "20"}, "used": {"pods": "3"}}})),
            )
            .await
            .expect("status");
        assert_eq!(status.status.and_then(|s| s.used).expect("used")["pods"].0, "3");

        let bad: ResourceQuota = serde_json::from_value(json!({
            "metadata": {"name": "bad"}, "spec": {"hard": {"widgets": "1", "pods": "1.5"}}
        }))
        .expect("quota");
        let (code, _, message) =
            status_of(api.create(&PostParams::default(), &bad).await.expect_err("invalid"));
        assert_eq!(code, 422);
        assert_eq!(
            message,
            "ResourceQuota \"bad\" is invalid: [spec.hard[pods]: Invalid value: \"1500m\": must be an integer, spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource for quota]"
        );
    })
    .await;
}

#[tokio::test]
async fn limit_ranges_default_container_limits_and_order_them() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<LimitRange> = Api::namespaced(server.client(), "default");
        let range: LimitRange = serde_json::from_value(json!({
            "metadata": {"name": "limits"},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "100m"}}]}
        }))
        .expect("limit range");
        let (created, _, _) = lifecycle(
            &api,
            &range,
            json!({"metadata": {"labels": {"team": "a"}}}),
            json!({"apiVersion": "v1", "kind": "LimitRange",
                "metadata": {"name": "limits", "namespace": "default"},
                "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "100m"},
                    "default": {"cpu": "500m"}}]}}),
        )
        .await;
        let item = &created.spec.expect("spec").limits[0];
        assert_eq!(item.default.as_ref().expect("default")["cpu"].0, "2");
        assert_eq!(item.default_request.as_ref().expect("request")["cpu"].0, "2");

        let inverted: LimitRange = serde_json::from_value(json!({
            "metadata": {"name": "inverted"},
            "spec": {"limits": [{"type": "Pod", "max": {"memory": "1Gi"}, "min": {"memory": "2Gi"}}]}
        }))
        .expect("limit range");
        let (code, _, message) = status_of(
            api.create(&PostParams::default(), &inverted)
                .await
                .expect_err("min above max"),
        );
        assert_eq!(code, 422);
        assert!(
            message.contains("spec.limits[0].min[memory]: Invalid value: \"2Gi\": min value 2Gi is greater than max value 1Gi"),
            "{message}"
        );
    })
    .await;
}
