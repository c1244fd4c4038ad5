//! flowcontrol.apiserver.k8s.io/v1 over HTTP: the bootstrap configuration is present at start; user objects are defaulted and live like any other.

use kcm_apiserver::testing::TestServer;
use serde_json::json;

use crate::common::{raw, timed};
use crate::lifecycle::{self, Lifecycle};

const FLOW: &str = "/apis/flowcontrol.apiserver.k8s.io/v1";

#[tokio::test]
async fn bootstrap_configuration_is_present_and_user_objects_live() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let (code, schemas) = raw(&client, "GET", &format!("{FLOW}/flowschemas"), "application/json", Vec::new()).await;
        assert_eq!(code, 200);
        let names: Vec<&str> = schemas["items"].as_array().expect("items").iter()
            .filter_map(|i| i["metadata"]["name"].as_str()).collect();
        for want in ["exempt", "probes", "system-leader-election", "workload-leader-election", "system-nodes",
            "kube-controller-manager", "service-accounts", "global-default", "catch-all"] {
            assert!(names.contains(&want), "{want} in {names:?}");
        }
        let (_, levels) = raw(&client, "GET", &format!("{FLOW}/prioritylevelconfigurations"), "application/json", Vec::new()).await;
        let names: Vec<&str> = levels["items"].as_array().expect("items").iter()
            .filter_map(|i| i["metadata"]["name"].as_str()).collect();
        assert_eq!(names, ["catch-all", "exempt", "global-default", "leader-election", "node-high", "system",
            "workload-high", "workload-low"]);

        let out = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{FLOW}/prioritylevelconfigurations"),
                object: json!({"metadata": {"name": "batch"}, "spec": {"type": "Limited",
                    "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}}),
                patch: json!({"spec": {"limited": {"lendablePercent": 10}}}),
                apply: json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
                    "metadata": {"name": "batch"}, "spec": {"type": "Limited",
                        "limited": {"nominalConcurrencyShares": 15, "limitResponse": {"type": "Queue"}}}}),
            },
        )
        .await;
        assert_eq!(
            out.created["spec"]["limited"],
            json!({"nominalConcurrencyShares": 30, "lendablePercent": 0,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}})
        );
        let schema = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{FLOW}/flowschemas"),
                object: json!({"metadata": {"name": "batch"}, "spec": {"priorityLevelConfiguration": {"name": "workload-low"},
                    "rules": [{"subjects": [{"kind": "Group", "group": {"name": "batch"}}],
                        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}]}]}}),
                patch: json!({"spec": {"matchingPrecedence": 500}}),
                apply: json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "batch"},
                    "spec": {"priorityLevelConfiguration": {"name": "workload-low"}, "distinguisherMethod": {"type": "ByUser"}}}),
            },
        )
        .await;
        assert_eq!(schema.created["spec"]["matchingPrecedence"], 1000);
    })
    .await;
}
