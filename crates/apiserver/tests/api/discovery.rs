//! Discovery documents, /version and health checks.

use kcm_apiserver::testing::TestServer;

use crate::common::{raw, timed};

#[tokio::test]
async fn discovery_lists_groups_resources_and_subresources() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let get = |path: &'static str| {
            let client = client.clone();
            async move { raw(&client, "GET", path, "application/json", vec![]).await }
        };
        let (code, api) = get("/api").await;
        assert_eq!(code, 200);
        assert_eq!(api["versions"][0], "v1");

        let (_, groups) = get("/apis").await;
        let names: Vec<&str> = groups["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .filter_map(|g| g["name"].as_str())
            .collect();
        for want in ["apps", "coordination.k8s.io", "events.k8s.io", "policy"] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        let (_, apps) = get("/apis/apps").await;
        assert_eq!(apps["preferredVersion"]["groupVersion"], "apps/v1");

        let (_, core) = get("/api/v1").await;
        let resources = core["resources"].as_array().expect("resources");
        let find = |name: &str| {
            resources
                .iter()
                .find(|r| r["name"] == name)
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(find("pods")["shortNames"][0], "po");
        assert_eq!(find("pods")["namespaced"], true);
        assert_eq!(find("nodes")["namespaced"], false);
        assert_eq!(find("pods/eviction")["group"], "policy");
        assert_eq!(find("pods/binding")["verbs"][0], "create");
        assert_eq!(find("namespaces/finalize")["verbs"][0], "update");

        let (_, apps_v1) = get("/apis/apps/v1").await;
        let scale = apps_v1["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .cloned()
            .expect("scale");
        assert_eq!(scale["group"], "autoscaling");
        assert_eq!(scale["kind"], "Scale");

        let (code, _) = get("/apis/nope.example.com").await;
        assert_eq!(code, 404);
        let (_, version) = get("/version").await;
        assert!(
            version["gitVersion"]
                .as_str()
                .expect("gitVersion")
                .starts_with("v1.36.")
        );
        for path in ["/healthz", "/livez", "/readyz"] {
            assert_eq!(get(path).await.0, 200, "{path}");
        }
        let text = |path: &'static str| {
            let client = client.clone();
            async move {
                let request = http::Request::get(path).body(Vec::new()).expect("request");
                client.request_text(request).await.expect(path)
            }
        };
        let verbose = text("/readyz?verbose").await;
        assert!(
            verbose.starts_with("[+]ping ok\n[+]log ok\n[+]etcd ok\n"),
            "{verbose}"
        );
        assert!(verbose.ends_with("readyz check passed\n"), "{verbose}");
        assert_eq!(text("/readyz/etcd").await, "ok");
        // The requests above, counted as kube-apiserver counts them.
        let metrics = text("/metrics").await;
        assert!(
            metrics.contains("# TYPE apiserver_request_duration_seconds histogram"),
            "{metrics}"
        );
        let readyz = metrics
            .lines()
            .find(|l| {
                l.starts_with("apiserver_request_total{")
                    && l.contains(r#"subresource="/readyz""#)
                    && l.contains(r#"code="200""#)
            })
            .unwrap_or_else(|| panic!("/readyz not counted: {metrics}"));
        assert!(readyz.ends_with(" 2"), "/readyz twice: {readyz}");
        assert_eq!(
            text("/livez?verbose&exclude=etcd").await,
            "[+]ping ok\n[+]log ok\n[+]etcd excluded: ok\nlivez check passed\n"
        );
    })
    .await;
}

#[tokio::test]
async fn kube_discovery_runs_against_the_server() {
    timed(async {
        let server = TestServer::start().await;
        let discovery = kube::discovery::Discovery::new(server.client())
            .run()
            .await
            .expect("discovery");
        let (deploy, caps) = discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .find(|(ar, _)| ar.kind == "Deployment")
            .expect("deployments discovered");
        assert_eq!(deploy.group, "apps");
        assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
        assert!(
            caps.subresources
                .iter()
                .any(|(sub, _)| sub.plural == "scale" || sub.plural == "deployments/scale")
        );
    })
    .await;
}

#[tokio::test]
async fn aggregated_discovery_answers_kubectls_first_request() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        let get = |path: &'static str| {
            let client = client.clone();
            async move {
                let request = http::Request::get(path)
                    .header("accept", accept)
                    .body(kube::client::Body::empty())
                    .expect("request");
                let response = client.send(request).await.expect("response");
                let content_type = response.headers()["content-type"]
                    .to_str()
                    .expect("ascii")
                    .to_owned();
                let bytes = response.into_body().collect_bytes().await.expect("body");
                let doc: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
                (content_type, doc)
            }
        };
        let (content_type, apis) = get("/apis").await;
        assert_eq!(
            content_type,
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
        assert_eq!(apis["kind"], "APIGroupDiscoveryList");
        assert_eq!(apis["apiVersion"], "apidiscovery.k8s.io/v2");
        let apps = apis["items"]
            .as_array()
            .expect("items")
            .iter()
            .find(|g| g["metadata"]["name"] == "apps")
            .expect("apps");
        let deployments = apps["versions"][0]["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["resource"] == "deployments")
            .expect("deployments");
        assert_eq!(deployments["scope"], "Namespaced");
        assert_eq!(deployments["shortNames"][0], "deploy");
        assert_eq!(deployments["categories"][0], "all");
        assert_eq!(
            deployments["responseKind"],
            serde_json::json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        let scale = deployments["subresources"]
            .as_array()
            .expect("subresources")
            .iter()
            .find(|s| s["subresource"] == "scale")
            .expect("scale");
        assert_eq!(scale["responseKind"]["group"], "autoscaling");

        let (_, core) = get("/api").await;
        assert_eq!(core["items"][0]["metadata"]["name"], "");
        let pods = core["items"][0]["versions"][0]["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["resource"] == "pods")
            .expect("pods");
        let eviction = pods["subresources"]
            .as_array()
            .expect("subresources")
            .iter()
            .find(|s| s["subresource"] == "eviction")
            .expect("eviction");
        assert_eq!(
            eviction["responseKind"],
            serde_json::json!({"group": "policy", "version": "v1", "kind": "Eviction"})
        );
        assert_eq!(eviction["verbs"], serde_json::json!(["create"]));
    })
    .await;
}
