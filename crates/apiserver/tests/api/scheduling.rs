//! scheduling.k8s.io/v1 priorityclasses and node.k8s.io/v1 runtimeclasses over HTTP: the system classes, their protection, one global default, pods' priorities, immutable handlers.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{lifecycle, pod, status_of, timed};

#[tokio::test]
async fn system_priority_classes_exist_and_stay() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<PriorityClass> = Api::all(server.client());
        let node = api.get("system-node-critical").await.expect("system-node-critical");
        assert_eq!(node.value, Some(2_000_001_000));
        assert_eq!(node.preemption_policy.as_deref(), Some("PreemptLowerPriority"));
        assert_eq!(api.get("system-cluster-critical").await.expect("cluster").value, Some(2_000_000_000));

        let (code, reason, message) = status_of(
            api.delete("system-node-critical", &DeleteParams::default())
                .await
                .expect_err("protected"),
        );
        assert_eq!((code, reason.as_str()), (403, "Forbidden"));
        assert_eq!(
            message,
            "priorityclasses.scheduling.k8s.io \"system-node-critical\" is forbidden: this is a system priority class and cannot be deleted"
        );
        let (code, _, message) = status_of(
            api.patch(
                "system-cluster-critical",
                &PatchParams::default(),
                &Patch::Merge(json!({"value": 5})),
            )
            .await
            .expect_err("value is fixed"),
        );
        assert_eq!(code, 422);
        assert!(message.contains("value: Forbidden: may not be changed in an update."), "{message}");
    })
    .await;
}

#[tokio::test]
async fn one_global_default_and_pods_take_their_class_priority() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<PriorityClass> = Api::all(server.client());
        let class = |name: &str, value: i32, default: bool| -> PriorityClass {
            serde_json::from_value(json!({"metadata": {"name": name}, "value": value,
                "globalDefault": default, "description": "test"}))
            .expect("class")
        };
        let (created, _, _) = lifecycle(
            &api,
            &class("high", 1000, false),
            json!({"description": "important"}),
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "high"}, "value": 1000, "description": "very important"}),
        )
        .await;
        assert_eq!(created.preemption_policy.as_deref(), Some("PreemptLowerPriority"));
        api.create(&PostParams::default(), &class("standard", 10, true))
            .await
            .expect("first default");
        let (code, _, message) = status_of(
            api.create(&PostParams::default(), &class("other", 20, true))
                .await
                .expect_err("second default"),
        );
        assert_eq!(code, 403);
        assert_eq!(
            message,
            "priorityclasses.scheduling.k8s.io \"other\" is forbidden: PriorityClass standard is already marked as default. Only one default can exist"
        );

        let pods: Api<Pod> = Api::namespaced(server.client(), "default");
        let plain = pods.create(&PostParams::default(), &pod("plain", &[])).await.expect("pod");
        let spec = plain.spec.expect("spec");
        assert_eq!(spec.priority, Some(10));
        assert_eq!(spec.priority_class_name.as_deref(), Some("standard"));
        let mut critical = pod("critical", &[]);
        if let Some(spec) = critical.spec.as_mut() {
            spec.priority_class_name = Some("system-node-critical".to_owned());
        }
        let critical = pods.create(&PostParams::default(), &critical).await.expect("pod");
        assert_eq!(critical.spec.and_then(|s| s.priority), Some(2_000_001_000));
        let mut unknown = pod("unknown", &[]);
        if let Some(spec) = unknown.spec.as_mut() {
            spec.priority_class_name = Some("gold".to_owned());
        }
        let (code, _, message) = status_of(
            pods.create(&PostParams::default(), &unknown)
                .await
                .expect_err("unknown class"),
        );
        assert_eq!(code, 403);
        assert_eq!(
            message,
            "pods \"unknown\" is forbidden: no PriorityClass with name gold was found"
        );
    })
    .await;
}

#[tokio::test]
async fn runtime_classes_keep_their_handler() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<RuntimeClass> = Api::all(server.client());
        let rc: RuntimeClass = serde_json::from_value(json!({
            "metadata": {"name": "gvisor"}, "handler": "runsc",
            "overhead": {"podFixed": {"memory": "0.125Gi"}}
        }))
        .expect("runtime class");
        let (created, _, _) = lifecycle(
            &api,
            &rc,
            json!({"metadata": {"labels": {"sandbox": "true"}}}),
            json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                "metadata": {"name": "gvisor"}, "handler": "runsc",
                "scheduling": {"nodeSelector": {"sandbox": "gvisor"}}}),
        )
        .await;
        assert_eq!(
            created.overhead.and_then(|o| o.pod_fixed).expect("overhead")["memory"].0,
            "128Mi"
        );
        let (code, _, message) = status_of(
            api.patch(
                "gvisor",
                &PatchParams::default(),
                &Patch::Merge(json!({"handler": "kata"})),
            )
            .await
            .expect_err("handler is immutable"),
        );
        assert_eq!(code, 422);
        assert_eq!(
            message,
            "RuntimeClass.node.k8s.io \"gvisor\" is invalid: handler: Invalid value: \"kata\": field is immutable"
        );
    })
    .await;
}
