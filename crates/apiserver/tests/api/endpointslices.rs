//! discovery.k8s.io/v1 over HTTP: EndpointSlice lifecycle, port defaults, address validation, immutable address type.

use kcm_apiserver::testing::TestServer;
use serde_json::json;

use crate::common::{raw, timed};
use crate::lifecycle::{self, Lifecycle};

const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";

#[tokio::test]
async fn endpoint_slices_live_and_validate() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let out = lifecycle::run(
            &client,
            Lifecycle {
                collection: SLICES,
                object: json!({"metadata": {"name": "web-abc12", "labels": {"kubernetes.io/service-name": "web"}},
                    "addressType": "IPv4", "endpoints": [{"addresses": ["10.244.0.5"], "conditions": {"ready": true}}],
                    "ports": [{"port": 8080}]}),
                patch: json!({"endpoints": [{"addresses": ["10.244.0.6"], "nodeName": "node-1"}]}),
                apply: json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "web-abc12"},
                    "addressType": "IPv4", "endpoints": [{"addresses": ["10.244.0.7"]}]}),
            },
        )
        .await;
        assert_eq!(out.created["ports"], json!([{"name": "", "port": 8080, "protocol": "TCP"}]));
        let body = |v: serde_json::Value| serde_json::to_vec(&v).expect("json");
        let (code, status) = raw(&client, "POST", SLICES, "application/json", body(json!({"metadata": {"name": "bad"},
            "addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1"]}, {"addresses": []}]}))).await;
        assert_eq!(code, 422);
        assert_eq!(
            status["message"],
            "EndpointSlice.discovery.k8s.io \"bad\" is invalid: [endpoints[0].addresses[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128), endpoints[1].addresses: Required value: must contain at least 1 address]"
        );
        let (code, _) = raw(&client, "POST", SLICES, "application/json", body(json!({"metadata": {"name": "db"},
            "addressType": "IPv4", "endpoints": []}))).await;
        assert_eq!(code, 201);
        let (code, status) = raw(&client, "PATCH", &format!("{SLICES}/db"), "application/merge-patch+json",
            body(json!({"addressType": "IPv6"}))).await;
        assert_eq!(code, 422);
        assert!(status["message"].as_str().is_some_and(|m| m.contains("addressType: Invalid value: \"IPv6\": field is immutable")), "{status}");
    })
    .await;
}
