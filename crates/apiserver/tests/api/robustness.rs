//! Hostile input: every endpoint answers odd bodies with a 4xx `Status`, never a panic or a 5xx.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::common::{pod, raw, timed};

#[tokio::test]
async fn odd_bodies_get_client_errors_on_every_endpoint() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        pods.create(&PostParams::default(), &pod("p", &[])).await.expect("create");
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}}
        }))
        .expect("deployment");
        deployments.create(&PostParams::default(), &d).await.expect("create");

        let bodies: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"null".to_vec(),
            b"\"text\"".to_vec(),
            b"42".to_vec(),
            br#"{"metadata": "nope"}"#.to_vec(),
            br#"{"metadata": {"name": 5}}"#.to_vec(),
            br#"{"metadata": {"labels": ["x"]}}"#.to_vec(),
            br#"{"spec": "string", "status": 7}"#.to_vec(),
            br#"{"spec": {"containers": "x"}}"#.to_vec(),
            br#"{"deleteOptions": "x", "target": 3}"#.to_vec(),
            br#"{"spec": {"replicas": "many"}}"#.to_vec(),
            br#"{"spec": {"finalizers": {"a": 1}}}"#.to_vec(),
            "{\"a\": [".repeat(200).into_bytes(),
        ];
        let endpoints: [(&str, &str, &str); 14] = [
            ("POST", "/api/v1/namespaces/default/pods", "application/json"),
            ("PUT", "/api/v1/namespaces/default/pods/p", "application/json"),
            ("PUT", "/api/v1/namespaces/default/pods/p/status", "application/json"),
            ("PATCH", "/api/v1/namespaces/default/pods/p", "application/merge-patch+json"),
            ("PATCH", "/api/v1/namespaces/default/pods/p", "application/json-patch+json"),
            ("PATCH", "/api/v1/namespaces/default/pods/p/status", "application/strategic-merge-patch+json"),
            ("POST", "/api/v1/namespaces/default/pods/p/binding", "application/json"),
            ("POST", "/api/v1/namespaces/default/pods/p/eviction", "application/json"),
            ("DELETE", "/api/v1/namespaces/default/pods/p", "application/json"),
            ("PUT", "/apis/apps/v1/namespaces/default/deployments/d/scale", "application/json"),
            ("PATCH", "/apis/apps/v1/namespaces/default/deployments/d/scale", "application/merge-patch+json"),
            ("PUT", "/api/v1/namespaces/default/finalize", "application/json"),
            ("POST", "/api/v1/namespaces", "application/yaml"),
            ("DELETE", "/api/v1/namespaces/default/configmaps", "application/json"),
        ];
        for (method, path, content_type) in endpoints {
            for body in &bodies {
                let (code, status) = raw(&client, method, path, content_type, body.clone()).await;
                let shown = String::from_utf8_lossy(&body[..body.len().min(40)]).into_owned();
                // An odd body may still be a valid request (`{}` patches, an empty DELETE);
                // what must never happen is a server error or a non-Status failure.
                assert!(code < 500, "{method} {path} {shown:?} -> {code} {status}");
                if code >= 400 {
                    assert_eq!(status["kind"], "Status", "{method} {path} {shown:?}");
                }
            }
        }
        let (code, _) = raw(&client, "GET", "/api/v1/namespaces/default/pods/p", "application/json", vec![]).await;
        assert!(code == 200 || code == 404, "server still answers");
        let (code, _) = raw(&client, "GET", "/healthz", "application/json", vec![]).await;
        assert_eq!(code, 200);
    })
    .await;
}
