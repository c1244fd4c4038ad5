//! autoscaling/v2 and autoscaling/v1 HorizontalPodAutoscalers over one storage: v2 defaults, v1's CPU target and its annotations, round trips between versions, validation.

use k8s_openapi::api::autoscaling::{v1, v2};
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{lifecycle, status_of, timed};

fn target() -> serde_json::Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
}

#[tokio::test]
async fn an_hpa_written_as_v2_reads_back_through_v1_unchanged() {
    timed(async {
        let server = TestServer::start().await;
        let v2_api: Api<v2::HorizontalPodAutoscaler> = Api::namespaced(server.client(), "default");
        let v1_api: Api<v1::HorizontalPodAutoscaler> = Api::namespaced(server.client(), "default");
        let hpa: v2::HorizontalPodAutoscaler = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": target(), "maxReplicas": 10, "metrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 60}}},
                {"type": "Pods", "pods": {"metric": {"name": "rps"},
                    "target": {"type": "AverageValue", "averageValue": "1k"}}}
            ], "behavior": {"scaleDown": {"stabilizationWindowSeconds": 120}}}
        }))
        .expect("hpa");
        let (created, _, _) = lifecycle(
            &v2_api,
            &hpa,
            json!({"spec": {"maxReplicas": 12}}),
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"scaleTargetRef": target(), "maxReplicas": 12}}),
        )
        .await;
        let spec = created.spec.clone();
        assert_eq!(spec.min_replicas, Some(1));
        let behavior = serde_json::to_value(&spec.behavior).expect("behavior");
        assert_eq!(
            behavior["scaleUp"]["policies"][0],
            json!({"type": "Pods", "value": 4, "periodSeconds": 15})
        );
        assert_eq!(behavior["scaleDown"]["stabilizationWindowSeconds"], 120);

        let as_v1 = v1_api.get("web").await.expect("get as v1");
        let v1_spec = as_v1.spec.clone();
        assert_eq!(v1_spec.target_cpu_utilization_percentage, Some(60));
        assert_eq!(v1_spec.max_replicas, 12);
        let annotations = as_v1.metadata.annotations.clone().expect("annotations");
        assert_eq!(
            annotations["autoscaling.alpha.kubernetes.io/metrics"],
            r#"[{"type":"Pods","pods":{"metricName":"rps","targetAverageValue":"1k"}}]"#
        );
        assert!(annotations.contains_key("autoscaling.alpha.kubernetes.io/behavior"));

        // A v1 update that keeps the annotations keeps every v2 field.
        let mut edited = as_v1.clone();
        {
            let spec = &mut edited.spec;
            spec.min_replicas = Some(2);
        }
        v1_api
            .replace("web", &PostParams::default(), &edited)
            .await
            .expect("replace as v1");
        let back = v2_api.get("web").await.expect("get as v2");
        let back_spec = back.spec;
        assert_eq!(back_spec.min_replicas, Some(2));
        let metrics = serde_json::to_value(&back_spec.metrics).expect("metrics");
        assert_eq!(metrics.as_array().map(Vec::len), Some(2), "{metrics}");
        assert_eq!(
            serde_json::to_value(&back_spec.behavior).expect("behavior"),
            behavior
        );
        assert!(
            back.metadata
                .annotations
                .is_none_or(|a| !a.keys().any(|k| k.starts_with("autoscaling.alpha")))
        );
    })
    .await;
}

#[tokio::test]
async fn a_v1_hpa_gets_the_implicit_cpu_target_and_validation_speaks_v2() {
    timed(async {
        let server = TestServer::start().await;
        let v1_api: Api<v1::HorizontalPodAutoscaler> = Api::namespaced(server.client(), "default");
        let v2_api: Api<v2::HorizontalPodAutoscaler> = Api::namespaced(server.client(), "default");
        let hpa: v1::HorizontalPodAutoscaler = serde_json::from_value(json!({
            "metadata": {"name": "api"}, "spec": {"scaleTargetRef": target(), "maxReplicas": 3}
        }))
        .expect("hpa");
        let created = v1_api.create(&PostParams::default(), &hpa).await.expect("create v1");
        assert_eq!(
            created.spec.target_cpu_utilization_percentage,
            Some(80)
        );
        let stored = v2_api.get("api").await.expect("get v2");
        assert_eq!(
            serde_json::to_value(stored.spec.metrics).expect("metrics"),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}])
        );
        let status = v2_api
            .patch_status(
                "api",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"currentReplicas": 2, "desiredReplicas": 2,
                    "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                        "current": {"averageUtilization": 41, "averageValue": "20m"}}}]}})),
            )
            .await
            .expect("status");
        assert_eq!(status.status.map(|s| s.current_replicas), Some(Some(2)));
        let read = v1_api.get("api").await.expect("get v1");
        assert_eq!(
            read.status.and_then(|s| s.current_cpu_utilization_percentage),
            Some(41)
        );

        let bad: v1::HorizontalPodAutoscaler = serde_json::from_value(json!({
            "metadata": {"name": "bad"},
            "spec": {"scaleTargetRef": target(), "minReplicas": 5, "maxReplicas": 2}
        }))
        .expect("hpa");
        let (code, _, message) =
            status_of(v1_api.create(&PostParams::default(), &bad).await.expect_err("invalid"));
        assert_eq!(code, 422);
        assert_eq!(
            message,
            "HorizontalPodAutoscaler.autoscaling \"bad\" is invalid: spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"
        );
        let zero: v2::HorizontalPodAutoscaler = serde_json::from_value(json!({
            "metadata": {"name": "zero"},
            "spec": {"scaleTargetRef": target(), "minReplicas": 0, "maxReplicas": 2}
        }))
        .expect("hpa");
        let (code, _, message) =
            status_of(v2_api.create(&PostParams::default(), &zero).await.expect_err("invalid"));
        assert_eq!(code, 422);
        assert!(message.contains("spec.minReplicas: Invalid value: 0: must be greater than or equal to 1"), "{message}");
    })
    .await;
}
