//! networking.k8s.io/v1 over HTTP: Ingress lifecycle, `/status` and pathType validation, NetworkPolicy defaults, IngressClass immutability, the default ServiceCIDR and IPAddress names.

use kcm_apiserver::testing::TestServer;
use serde_json::json;

use crate::common::{raw, timed};
use crate::lifecycle::{self, Lifecycle};

const NET: &str = "/apis/networking.k8s.io/v1";
const JSON: &str = "application/json";

fn body(v: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&v).expect("json")
}

#[tokio::test]
async fn ingresses_live_split_status_and_validate_paths() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let collection = format!("{NET}/namespaces/default/ingresses");
        let backend = json!({"service": {"name": "web", "port": {"number": 80}}});
        let out = lifecycle::run(
            &client,
            Lifecycle {
                collection: &collection,
                object: json!({"metadata": {"name": "web"}, "spec": {"ingressClassName": "nginx",
                    "rules": [{"host": "web.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}}]},
                    "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}),
                patch: json!({"spec": {"tls": [{"hosts": ["web.example.com"], "secretName": "web-tls"}]},
                    "status": {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}}}),
                apply: json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
                    "spec": {"defaultBackend": backend}}),
            },
        )
        .await;
        assert_eq!(out.created["status"], json!({"loadBalancer": {}}), "create drops the status");
        assert_eq!(out.patched["status"], json!({"loadBalancer": {}}), "the main resource keeps the status");
        assert_eq!(out.patched["metadata"]["generation"], 2);
        assert_eq!(out.events, ["MODIFIED", "MODIFIED"]);

        let (code, _) = raw(&client, "POST", &collection, JSON, body(json!({"metadata": {"name": "api"},
            "spec": {"defaultBackend": backend}}))).await;
        assert_eq!(code, 201);
        let (code, status) = raw(&client, "PATCH", &format!("{collection}/api/status"), "application/merge-patch+json",
            body(json!({"status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}, "spec": {"rules": []}}))).await;
        assert_eq!(code, 200, "{status}");
        assert_eq!(status["status"]["loadBalancer"]["ingress"][0]["hostname"], "lb.example.com");
        assert!(status["spec"].get("rules").is_none(), "/status keeps the spec");

        let (code, status) = raw(&client, "POST", &collection, JSON, body(json!({"metadata": {"name": "bad"},
            "spec": {"rules": [{"host": "web.example.com", "http": {"paths": [
                {"path": "/", "backend": backend}, {"path": "api", "pathType": "Exact", "backend": backend}]}}]}}))).await;
        assert_eq!(code, 422, "{status}");
        assert_eq!(
            status["message"],
            "Ingress.networking.k8s.io \"bad\" is invalid: [spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified, spec.rules[0].http.paths[1].path: Invalid value: \"api\": must be an absolute path]"
        );
    })
    .await;
}

#[tokio::test]
async fn network_policies_classes_cidrs_and_addresses() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let out = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{NET}/namespaces/default/networkpolicies"),
                object: json!({"metadata": {"name": "db"}, "spec": {"podSelector": {"matchLabels": {"app": "db"}},
                    "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}], "ports": [{"port": 5432}]}]}}),
                patch: json!({"spec": {"egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]}}),
                apply: json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "db"},
                    "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}}),
            },
        )
        .await;
        assert_eq!(out.created["spec"]["policyTypes"], json!(["Ingress"]));
        assert_eq!(out.created["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");

        let classes = format!("{NET}/ingressclasses");
        let (code, class) = raw(&client, "POST", &classes, JSON, body(json!({"metadata": {"name": "edge"},
            "spec": {"controller": "example.io/edge", "parameters": {"kind": "Params", "name": "p"}}}))).await;
        assert_eq!(code, 201, "{class}");
        assert_eq!(class["spec"]["parameters"]["scope"], "Cluster");
        let (code, status) = raw(&client, "PATCH", &format!("{classes}/edge"), "application/merge-patch+json",
            body(json!({"spec": {"controller": "example.io/other"}}))).await;
        assert_eq!(code, 422);
        assert!(status["message"].as_str().is_some_and(|m| m.ends_with(r#"spec.controller: Invalid value: "example.io/other": field is immutable"#)), "{status}");

        let (code, cidr) = raw(&client, "GET", &format!("{NET}/servicecidrs/kubernetes"), JSON, Vec::new()).await;
        assert_eq!(code, 200, "the default ServiceCIDR exists");
        assert_eq!(cidr["spec"]["cidrs"], json!(["10.96.0.0/12"]));
        assert_eq!(cidr["status"]["conditions"][0]["type"], "Ready");

        let addresses = format!("{NET}/ipaddresses");
        let (code, status) = raw(&client, "POST", &addresses, JSON, body(json!({"metadata": {"name": "2001:db8:0::1"},
            "spec": {"parentRef": {"resource": "services", "namespace": "default", "name": "web"}}}))).await;
        assert_eq!(code, 422);
        assert!(status["message"].as_str().is_some_and(|m| m.contains("must be a canonical format IP address")), "{status}");
        let (code, ip) = raw(&client, "POST", &addresses, JSON, body(json!({"metadata": {"name": "2001:db8::1"},
            "spec": {"parentRef": {"resource": "services", "namespace": "default", "name": "web"}}}))).await;
        assert_eq!(code, 201, "{ip}");
    })
    .await;
}
