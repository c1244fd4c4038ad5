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

/// Each Service cluster IP has an IPAddress naming the Service, as kube-apiserver v1.36's
/// allocator keeps them: made on create, gone with the Service (also when its last finalizer
/// goes through `/status`, which also gives the IP back), and put back by the repair loop.
#[tokio::test]
async fn service_cluster_ips_have_ip_addresses() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let registry = server.server().registry();
        let services = "/api/v1/namespaces/default/services";
        let addresses = format!("{NET}/ipaddresses");
        let (code, svc) = raw(
            &client,
            "POST",
            services,
            JSON,
            body(json!({"metadata": {"name": "web"},
            "spec": {"ports": [{"port": 80}]}})),
        )
        .await;
        assert_eq!(code, 201, "{svc}");
        let ip = svc["spec"]["clusterIP"]
            .as_str()
            .expect("cluster IP")
            .to_owned();
        let (code, obj) = raw(
            &client,
            "GET",
            &format!("{addresses}/{ip}"),
            JSON,
            Vec::new(),
        )
        .await;
        assert_eq!(code, 200, "{obj}");
        assert_eq!(
            obj["spec"]["parentRef"],
            json!({"group": "", "resource": "services", "namespace": "default", "name": "web"})
        );
        assert_eq!(
            obj["metadata"]["labels"]["ipaddress.kubernetes.io/managed-by"],
            "ipallocator.k8s.io"
        );
        assert_eq!(
            obj["metadata"]["labels"]["ipaddress.kubernetes.io/ip-family"],
            "IPv4"
        );
        // The default/kubernetes Service's address is there too.
        let (code, _) = raw(
            &client,
            "GET",
            &format!("{addresses}/10.96.0.1"),
            JSON,
            Vec::new(),
        )
        .await;
        assert_eq!(code, 200);

        // Deleted by hand: the repair loop puts it back.
        let (code, _) = raw(
            &client,
            "DELETE",
            &format!("{addresses}/{ip}"),
            JSON,
            Vec::new(),
        )
        .await;
        assert_eq!(code, 200);
        registry.repair_service_allocations().await.expect("repair");
        let (code, _) = raw(
            &client,
            "GET",
            &format!("{addresses}/{ip}"),
            JSON,
            Vec::new(),
        )
        .await;
        assert_eq!(code, 200, "repaired");

        // A Service held by a finalizer, released through /status (as the service-lb
        // controller does): its IP and its IPAddress go with it.
        let (code, held) = raw(
            &client,
            "POST",
            services,
            JSON,
            body(json!({"metadata": {"name": "lb",
            "finalizers": ["service.kubernetes.io/load-balancer-cleanup"]},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}})),
        )
        .await;
        assert_eq!(code, 201, "{held}");
        let held_ip = held["spec"]["clusterIP"].as_str().expect("ip").to_owned();
        let (ips_before, ports_before) = registry.service_allocations_used().await.expect("used");
        let (code, _) = raw(
            &client,
            "DELETE",
            &format!("{services}/lb"),
            JSON,
            Vec::new(),
        )
        .await;
        assert_eq!(code, 200);
        let (code, out) = raw(
            &client,
            "PATCH",
            &format!("{services}/lb/status"),
            "application/merge-patch+json",
            body(json!({"metadata": {"finalizers": null}})),
        )
        .await;
        assert_eq!(code, 200, "{out}");
        let (code, _) = raw(&client, "GET", &format!("{services}/lb"), JSON, Vec::new()).await;
        assert_eq!(code, 404, "removed with its last finalizer");
        let (ips_after, ports_after) = registry.service_allocations_used().await.expect("used");
        assert_eq!(
            (ips_after, ports_after),
            (ips_before - 1, ports_before - 1),
            "IP and node port given back"
        );
        let (code, _) = raw(
            &client,
            "GET",
            &format!("{addresses}/{held_ip}"),
            JSON,
            Vec::new(),
        )
        .await;
        assert_eq!(code, 404);

        let (code, _) = raw(
            &client,
            "DELETE",
            &format!("{services}/web"),
            JSON,
            Vec::new(),
        )
        .await;
        assert_eq!(code, 200);
        let (code, _) = raw(
            &client,
            "GET",
            &format!("{addresses}/{ip}"),
            JSON,
            Vec::new(),
        )
        .await;
        assert_eq!(code, 404, "gone with its Service");
    })
    .await;
}
