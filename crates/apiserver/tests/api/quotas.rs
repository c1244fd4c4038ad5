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

/// Sets a quota's computed status, as the ResourceQuota controller would.
async fn compute_status(
    api: &Api<ResourceQuota>,
    name: &str,
    hard: serde_json::Value,
    used: serde_json::Value,
) {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"hard": hard, "used": used}})),
    )
    .await
    .expect("quota status");
}

#[tokio::test]
async fn parallel_creates_never_overshoot_a_quota() {
    use k8s_openapi::api::core::v1::Pod;

    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let quota: ResourceQuota = serde_json::from_value(json!({
            "metadata": {"name": "pods"}, "spec": {"hard": {"pods": "10"}}
        }))
        .expect("quota");
        quotas.create(&PostParams::default(), &quota).await.expect("quota");
        compute_status(&quotas, "pods", json!({"pods": "10"}), json!({"pods": "0"})).await;

        let creates = (0..20).map(|i| {
            let pods = pods.clone();
            async move {
                pods.create(&PostParams::default(), &crate::common::pod(&format!("p{i}"), &[]))
                    .await
            }
        });
        let results = futures::future::join_all(creates).await;
        let mut refusals = Vec::new();
        let mut created = 0;
        for result in results {
            match result {
                Ok(_) => created += 1,
                Err(e) => refusals.push(status_of(e)),
            }
        }
        assert_eq!(created, 10, "refusals: {refusals:?}");
        for (code, reason, message) in &refusals {
            assert_eq!((*code, reason.as_str()), (403, "Forbidden"));
            assert!(
                message.ends_with("is forbidden: exceeded quota: pods, requested: pods=1, used: pods=10, limited: pods=10"),
                "{message}"
            );
        }
        assert_eq!(pods.list(&Default::default()).await.expect("list").items.len(), 10);
        let used = quotas.get("pods").await.expect("quota").status.and_then(|s| s.used).expect("used");
        assert_eq!(used["pods"].0, "10");
    })
    .await;
}

#[tokio::test]
async fn quota_admission_counts_objects_and_refuses_unknown_status() {
    use k8s_openapi::api::core::v1::{ConfigMap, Service};

    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "default");
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let services: Api<Service> = Api::namespaced(client.clone(), "default");
        let quota: ResourceQuota = serde_json::from_value(json!({
            "metadata": {"name": "objects"},
            "spec": {"hard": {"count/configmaps": "1", "services.nodeports": "1"}}
        }))
        .expect("quota");
        quotas.create(&PostParams::default(), &quota).await.expect("quota");

        // Not computed yet: the quota does not apply.
        configmaps
            .create(&PostParams::default(), &crate::common::configmap("before", &[]))
            .await
            .expect("uncomputed quota does not apply");

        compute_status(
            &quotas,
            "objects",
            json!({"count/configmaps": "1", "services.nodeports": "1"}),
            json!({"count/configmaps": "0"}),
        )
        .await;
        // A dry run is checked but charges nothing.
        let dry = PostParams { dry_run: true, ..Default::default() };
        configmaps
            .create(&dry, &crate::common::configmap("dry", &[]))
            .await
            .expect("dry run fits");
        configmaps
            .create(&PostParams::default(), &crate::common::configmap("a", &[]))
            .await
            .expect("fits");
        let (code, _, message) = status_of(
            configmaps
                .create(&PostParams::default(), &crate::common::configmap("b", &[]))
                .await
                .expect_err("over"),
        );
        assert_eq!(code, 403);
        assert_eq!(
            message,
            "configmaps \"b\" is forbidden: exceeded quota: objects, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1"
        );

        // services.nodeports is limited but its usage is not known.
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"type": "NodePort", "ports": [{"port": 80}]}
        }))
        .expect("service");
        let (code, _, message) =
            status_of(services.create(&PostParams::default(), &svc).await.expect_err("unknown"));
        assert_eq!(code, 403);
        assert_eq!(
            message,
            "services \"web\" is forbidden: status unknown for quota: objects, resources: services.nodeports"
        );
    })
    .await;
}
