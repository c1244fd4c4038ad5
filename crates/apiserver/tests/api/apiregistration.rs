//! apiregistration.k8s.io/v1 over HTTP: one local, available APIService per served group version (metrics.k8s.io included: kcm serves it itself); remote ones are stored, not proxied.

use kcm_apiserver::testing::TestServer;
use serde_json::json;

use crate::common::{raw, timed};
use crate::lifecycle::{self, Lifecycle};

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

#[tokio::test]
async fn local_api_services_match_discovery_and_remote_ones_are_stored() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let (_, groups) = raw(&client, "GET", "/apis", "application/json", Vec::new()).await;
        let mut expected: Vec<String> = vec!["v1.".to_owned()];
        for group in groups["groups"].as_array().expect("groups") {
            for version in group["versions"].as_array().expect("versions") {
                let name = group["name"].as_str().unwrap_or("");
                if name != "apiregistration.k8s.io" {
                    expected.push(format!("{}.{name}", version["version"].as_str().unwrap_or("")));
                }
            }
        }
        expected.sort();
        let (code, list) = raw(&client, "GET", APISERVICES, "application/json", Vec::new()).await;
        assert_eq!(code, 200);
        let mut names: Vec<String> = list["items"].as_array().expect("items").iter()
            .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned)).collect();
        names.sort();
        assert_eq!(names, expected);
        let (_, apps) = raw(&client, "GET", &format!("{APISERVICES}/v1.apps"), "application/json", Vec::new()).await;
        assert_eq!(apps["spec"], json!({"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15}));
        assert_eq!(apps["status"]["conditions"][0]["status"], "True");

        let out = lifecycle::run(
            &client,
            Lifecycle {
                collection: APISERVICES,
                object: json!({"metadata": {"name": "v1beta1.custom.metrics.k8s.io"}, "spec": {"group": "custom.metrics.k8s.io",
                    "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100, "insecureSkipTLSVerify": true,
                    "service": {"name": "prometheus-adapter", "namespace": "monitoring"}}}),
                patch: json!({"spec": {"versionPriority": 50}}),
                apply: json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                    "metadata": {"name": "v1beta1.custom.metrics.k8s.io", "labels": {"app": "prometheus-adapter"}},
                    "spec": {"group": "custom.metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
                        "versionPriority": 100, "service": {"name": "prometheus-adapter", "namespace": "monitoring"}}}),
            },
        )
        .await;
        assert_eq!(out.created["spec"]["service"]["port"], 443);
        let (code, _) = raw(&client, "GET", "/apis/custom.metrics.k8s.io", "application/json", Vec::new()).await;
        assert_eq!(code, 404, "the group is not served: no aggregation");
    })
    .await;
}
