//! pods/eviction against PodDisruptionBudgets.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{EvictParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::common::{drain, pod, status_of, timed};

async fn running_pod(pods: &Api<Pod>, name: &str) {
    pods.create(&PostParams::default(), &pod(name, &[("app", "web")]))
        .await
        .expect("create");
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await
    .expect("running");
}

#[tokio::test]
async fn eviction_respects_the_disruption_budget() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
        running_pod(&pods, "a").await;
        running_pod(&pods, "b").await;
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
        }))
        .expect("pdb");
        pdbs.create(&PostParams::default(), &pdb).await.expect("create pdb");

        // Not yet processed by the disruption controller: 429.
        let (code, reason, _) = status_of(pods.evict("a", &EvictParams::default()).await.expect_err("unprocessed"));
        assert_eq!((code, reason.as_str()), (429, "TooManyRequests"));

        // The disruption controller's status: one disruption allowed.
        let status = json!({"status": {"observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}});
        pdbs.patch_status("web", &PatchParams::default(), &Patch::Merge(status)).await.expect("pdb status");
        let since = pods.get("a").await.expect("a").metadata.resource_version.expect("rv");
        pods.evict("a", &EvictParams::default()).await.expect("evicted");
        // Before it went, the pod was marked as an eviction's target (upstream's
        // addConditionAndDeletePod).
        let events = drain(
            pods.watch(&WatchParams::default().fields("metadata.name=a").timeout(1), &since)
                .await
                .expect("watch"),
        )
        .await;
        let marked = events.iter().find_map(|e| match e {
            WatchEvent::Modified(p) => p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "DisruptionTarget").cloned(),
            _ => None,
        });
        let marked = marked.expect("a DisruptionTarget condition before the delete");
        assert_eq!(
            (marked.status.as_str(), marked.reason.as_deref(), marked.message.as_deref()),
            ("True", Some("EvictionByEvictionAPI"), Some("Eviction API: evicting"))
        );
        assert!(marked.last_transition_time.is_some());
        let a = pods.get("a").await;
        assert!(a.is_err() || a.expect("pod").metadata.deletion_timestamp.is_some());
        let pdb = pdbs.get("web").await.expect("pdb");
        let pdb_status = pdb.status.expect("status");
        assert_eq!(pdb_status.disruptions_allowed, Some(0));
        assert!(pdb_status.disrupted_pods.expect("disrupted").contains_key("a"));

        // Budget exhausted: 429 with the DisruptionBudget cause.
        let (code, status) = crate::common::raw(
            &client,
            "POST",
            "/api/v1/namespaces/default/pods/b/eviction",
            "application/json",
            serde_json::to_vec(&json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "b"}})).expect("json"),
        )
        .await;
        assert_eq!(code, 429);
        assert_eq!(status["message"], "Cannot evict pod as it would violate the pod's disruption budget.");
        assert_eq!(status["details"]["causes"][0]["reason"], "DisruptionBudget");
        assert_eq!(status["details"]["causes"][0]["message"], "The disruption budget web needs 1 healthy pods and has 2 currently");
        pods.get("b").await.expect("b survives");
    })
    .await;
}

#[tokio::test]
async fn pending_pods_are_evicted_without_a_budget_check() {
    timed(async {
        let server = TestServer::start().await;
        let pods: Api<Pod> = Api::namespaced(server.client(), "default");
        pods.create(&PostParams::default(), &pod("p", &[]))
            .await
            .expect("create");
        pods.evict("p", &EvictParams::default())
            .await
            .expect("evict");
        assert_eq!(status_of(pods.get("p").await.expect_err("gone")).0, 404);
    })
    .await;
}
