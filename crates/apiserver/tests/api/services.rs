//! Services: the `default/kubernetes` Service and Endpoints, and cluster IP allocation.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{status_of, timed};

fn service(name: &str, cluster_ip: Option<&str>) -> Service {
    let mut spec = json!({"ports": [{"port": 80}]});
    if let Some(ip) = cluster_ip {
        spec["clusterIP"] = json!(ip);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("service")
}

/// What a server listening on 127.0.0.1 advertises.
fn advertised() -> String {
    kcm_apiserver::advertise::resolve_advertise_address(Ipv4Addr::LOCALHOST.into()).to_string()
}

fn cluster_ip(svc: &Service) -> String {
    svc.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .expect("clusterIP")
}

#[tokio::test]
async fn the_kubernetes_service_and_endpoints_exist_after_start() {
    timed(async {
        let server = TestServer::start().await;
        let port = i32::from(server.server().addr().port());
        let svc: Api<Service> = Api::namespaced(server.client(), "default");
        let kubernetes =
            serde_json::to_value(svc.get("kubernetes").await.expect("get svc")).expect("json");
        assert_eq!(
            kubernetes["metadata"]["labels"],
            json!({"component": "apiserver", "provider": "kubernetes"})
        );
        let spec = &kubernetes["spec"];
        assert_eq!(spec["type"], "ClusterIP");
        assert_eq!(spec["clusterIP"], "10.96.0.1");
        assert_eq!(spec["clusterIPs"], json!(["10.96.0.1"]));
        assert_eq!(spec["sessionAffinity"], "None");
        assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
        assert_eq!(
            spec["ports"],
            json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}])
        );
        assert!(spec.get("selector").is_none(), "no selector: {spec}");

        // A loopback listener advertises the default route's address, as kube-apiserver.
        let advertised = advertised();
        let eps: Api<Endpoints> = Api::namespaced(server.client(), "default");
        let ep = serde_json::to_value(eps.get("kubernetes").await.expect("get endpoints"))
            .expect("json");
        assert_eq!(
            ep["subsets"],
            json!([{"addresses": [{"ip": advertised}],
                    "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}])
        );
        assert_eq!(
            ep["metadata"]["labels"]["endpointslice.kubernetes.io/skip-mirror"],
            "true"
        );
        // The EndpointSlice mirrors them, unless the address is loopback (no route here).
        let slices: Api<EndpointSlice> = Api::namespaced(server.client(), "default");
        let slice = slices.get_opt("kubernetes").await.expect("get slice");
        if advertised == "127.0.0.1" {
            assert!(slice.is_none(), "a loopback address makes no slice");
        } else {
            let slice = serde_json::to_value(slice.expect("the kubernetes slice")).expect("json");
            assert_eq!(
                slice["metadata"]["labels"],
                json!({"kubernetes.io/service-name": "kubernetes"})
            );
            assert_eq!(slice["addressType"], "IPv4");
            assert_eq!(
                slice["endpoints"],
                json!([{"addresses": [advertised], "conditions": {"ready": true}}])
            );
            assert_eq!(
                slice["ports"],
                json!([{"name": "https", "port": port, "protocol": "TCP"}])
            );
        }
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_deleted_kubernetes_service_comes_back_at_the_next_start() {
    timed(async {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let server = TestServer::start_with_sqlite(dir.path()).await;
            let svc: Api<Service> = Api::namespaced(server.client(), "default");
            svc.delete("kubernetes", &DeleteParams::default())
                .await
                .expect("delete");
            let eps: Api<Endpoints> = Api::namespaced(server.client(), "default");
            let mut ep = eps.get("kubernetes").await.expect("endpoints");
            ep.subsets = None;
            eps.replace("kubernetes", &PostParams::default(), &ep)
                .await
                .expect("break the endpoints");
            server.shutdown().await;
        }
        let server = TestServer::start_with_sqlite(dir.path()).await;
        let svc: Api<Service> = Api::namespaced(server.client(), "default");
        let back = svc.get("kubernetes").await.expect("re-created");
        assert_eq!(cluster_ip(&back), "10.96.0.1");
        let eps: Api<Endpoints> = Api::namespaced(server.client(), "default");
        let ep = eps.get("kubernetes").await.expect("endpoints");
        let subsets = ep.subsets.expect("repaired subsets");
        assert_eq!(
            subsets[0].addresses.as_ref().expect("addresses")[0].ip,
            advertised()
        );
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn allocated_cluster_ips_are_unique_and_in_range() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Service> = Api::namespaced(server.client(), "default");
        let mut seen = HashSet::new();
        for i in 0..30 {
            let svc = api
                .create(&PostParams::default(), &service(&format!("s{i}"), None))
                .await
                .expect("create");
            let ip: Ipv4Addr = cluster_ip(&svc).parse().expect("an IPv4 address");
            let spec = svc.spec.as_ref().expect("spec");
            assert_eq!(spec.cluster_ips, Some(vec![ip.to_string()]));
            assert_eq!(spec.ip_families, Some(vec!["IPv4".to_owned()]));
            let [a, b, _, _] = ip.octets();
            assert!(a == 10 && (96..112).contains(&b), "{ip} in 10.96.0.0/12");
            assert_ne!(ip, Ipv4Addr::new(10, 96, 0, 0), "network address");
            assert_ne!(ip, Ipv4Addr::new(10, 96, 0, 1), "reserved for kubernetes");
            assert_ne!(ip, Ipv4Addr::new(10, 111, 255, 255), "broadcast address");
            assert!(seen.insert(ip), "{ip} allocated twice");
        }
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn requested_cluster_ips_must_be_free_and_in_range() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Service> = Api::namespaced(server.client(), "default");
        let first = api
            .create(&PostParams::default(), &service("a", Some("10.96.0.10")))
            .await
            .expect("create with a requested IP");
        assert_eq!(cluster_ip(&first), "10.96.0.10");

        struct Case {
            name: &'static str,
            ip: &'static str,
            detail: &'static str,
        }
        let cases = [
            Case {
                name: "taken by another service",
                ip: "10.96.0.10",
                detail: "provided IP is already allocated",
            },
            Case {
                name: "the kubernetes service's address",
                ip: "10.96.0.1",
                detail: "provided IP is already allocated",
            },
            Case {
                name: "outside the range",
                ip: "192.168.0.10",
                detail: "the provided IP (192.168.0.10) is not in the valid range. The range of valid IPs is 10.96.0.0/12",
            },
            Case {
                name: "the network address",
                ip: "10.96.0.0",
                detail: "the provided IP (10.96.0.0) is not in the valid range. The range of valid IPs is 10.96.0.0/12",
            },
        ];
        for case in cases {
            let err = api
                .create(&PostParams::default(), &service("b", Some(case.ip)))
                .await
                .expect_err(case.name);
            let (code, reason, message) = status_of(err);
            assert_eq!((code, reason.as_str()), (422, "Invalid"), "{}", case.name);
            assert_eq!(
                message,
                format!(
                    "Service \"b\" is invalid: spec.clusterIPs: Invalid value: []string{{\"{}\"}}: failed to allocate IP {}: {}",
                    case.ip, case.ip, case.detail
                ),
                "{}",
                case.name
            );
        }

        api.delete("a", &DeleteParams::default())
            .await
            .expect("delete");
        let again = api
            .create(&PostParams::default(), &service("c", Some("10.96.0.10")))
            .await
            .expect("a released address can be requested again");
        assert_eq!(cluster_ip(&again), "10.96.0.10");

        let headless = api
            .create(&PostParams::default(), &service("h", Some("None")))
            .await
            .expect("headless");
        let spec = headless.spec.expect("spec");
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.cluster_ips, Some(vec!["None".to_owned()]));
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_service_leaving_external_name_gets_a_cluster_ip_and_one_joining_drops_it() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<Service> = Api::namespaced(server.client(), "default");
        let external: Service = serde_json::from_value(json!({
            "metadata": {"name": "ext"},
            "spec": {"type": "ExternalName", "externalName": "example.com"}
        }))
        .expect("service");
        let created = api
            .create(&PostParams::default(), &external)
            .await
            .expect("create");
        assert_eq!(created.spec.expect("spec").cluster_ip, None);

        let to_cluster_ip = json!({"spec": {"type": "ClusterIP", "externalName": null,
            "ports": [{"port": 80}]}});
        let patched = api
            .patch(
                "ext",
                &PatchParams::default(),
                &Patch::Merge(&to_cluster_ip),
            )
            .await
            .expect("to ClusterIP");
        let ip: Ipv4Addr = cluster_ip(&patched).parse().expect("allocated");
        let [a, b, _, _] = ip.octets();
        assert!(a == 10 && (96..112).contains(&b), "{ip} in 10.96.0.0/12");
        assert_ne!(ip, Ipv4Addr::new(10, 96, 0, 1), "reserved for kubernetes");
        assert_eq!(
            patched.spec.as_ref().and_then(|s| s.cluster_ips.clone()),
            Some(vec![ip.to_string()])
        );

        let to_external = json!({"spec": {"type": "ExternalName", "externalName": "example.com"}});
        let back = api
            .patch("ext", &PatchParams::default(), &Patch::Merge(&to_external))
            .await
            .expect("to ExternalName");
        let spec = back.spec.expect("spec");
        assert_eq!((spec.cluster_ip, spec.cluster_ips), (None, None));
        server.shutdown().await;
    })
    .await;
}
