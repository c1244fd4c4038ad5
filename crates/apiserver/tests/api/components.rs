//! componentstatuses (computed, read-only, deprecated), the bindings collection, and the connect subresources simulated nodes cannot serve, over HTTP.

use k8s_openapi::api::core::v1::{ComponentStatus, Pod};
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::common::{pod, raw, timed, with_warnings};

#[tokio::test]
async fn component_statuses_report_the_store_and_warn_they_are_deprecated() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let api: Api<ComponentStatus> = Api::all(client.clone());
        let list = api.list(&Default::default()).await.expect("list");
        let names: Vec<String> = list
            .items
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        assert_eq!(names, ["scheduler", "controller-manager", "etcd-0"]);
        let etcd = api.get("etcd-0").await.expect("get");
        let condition = &etcd.conditions.expect("conditions")[0];
        assert_eq!(
            (condition.type_.as_str(), condition.status.as_str()),
            ("Healthy", "True")
        );
        assert_eq!(
            condition.message.as_deref(),
            Some("ok (kcm stores objects in memory, not etcd)")
        );

        let (code, _, warnings) = with_warnings(&client, "GET", "/api/v1/componentstatuses").await;
        assert_eq!(code, 200);
        assert_eq!(
            warnings,
            ["299 - \"v1 ComponentStatus is deprecated in v1.19+\""]
        );
        let (code, body) = raw(
            &client,
            "GET",
            "/api/v1/componentstatuses?watch=true",
            "",
            "",
        )
        .await;
        assert_eq!(
            (code, body["reason"].as_str()),
            (405, Some("MethodNotAllowed"))
        );
        let (code, _) = raw(
            &client,
            "POST",
            "/api/v1/componentstatuses",
            "application/json",
            r#"{"metadata": {"name": "x"}}"#,
        )
        .await;
        assert_eq!(code, 405);
    })
    .await;
}

#[tokio::test]
async fn the_bindings_collection_binds_the_named_pod() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        pods.create(&PostParams::default(), &pod("web", &[]))
            .await
            .expect("pod");
        let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}});
        let (code, body) = raw(
            &client,
            "POST",
            "/api/v1/namespaces/default/bindings",
            "application/json",
            binding.to_string(),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        assert_eq!(body["status"], "Success");
        let bound = pods.get("web").await.expect("get");
        assert_eq!(
            bound.spec.and_then(|s| s.node_name).as_deref(),
            Some("node-1")
        );
        let (code, body) = raw(
            &client,
            "POST",
            "/api/v1/namespaces/default/bindings",
            "application/json",
            binding.to_string(),
        )
        .await;
        assert_eq!(code, 409, "{body}");
        let (code, _) = raw(
            &client,
            "GET",
            "/api/v1/namespaces/default/bindings",
            "",
            "",
        )
        .await;
        assert_eq!(code, 405, "bindings are create-only");
    })
    .await;
}

#[tokio::test]
async fn connect_subresources_say_why_nothing_answers() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        pods.create(&PostParams::default(), &pod("web", &[])).await.expect("pod");
        let base = "/api/v1/namespaces/default/pods/web";
        let cases = [
            ("GET", format!("{base}/log?container=c"), 400, "pod \"web\" is not scheduled to a node yet: there are no container logs to read"),
            ("POST", format!("{base}/exec?command=ls&stdout=true"), 400, "pod \"web\" is not scheduled to a node yet: there is no container to exec into"),
            ("GET", format!("{base}/attach"), 400, "pod \"web\" is not scheduled to a node yet: there is no container to attach to"),
            ("POST", format!("{base}/portforward?ports=80"), 400, "pod \"web\" is not scheduled to a node yet: there is no container port to forward to"),
            ("GET", format!("{base}/proxy/metrics"), 400, "pod \"web\" is not scheduled to a node yet: there is no container to proxy to"),
            ("GET", "/api/v1/nodes/node-1/proxy/stats".to_owned(), 404, "nodes \"node-1\" not found"),
            ("GET", "/api/v1/namespaces/default/services/kubernetes/proxy/".to_owned(), 400, "service \"kubernetes\" cannot be proxied: its endpoints are pods on simulated nodes, which run no containers to answer"),
            ("GET", "/api/v1/namespaces/default/pods/missing/log".to_owned(), 404, "pods \"missing\" not found"),
        ];
        for (method, path, want_code, want) in cases {
            let (code, body) = raw(&client, method, &path, "", "").await;
            assert_eq!(code, want_code, "{method} {path}: {body}");
            assert_eq!(body["message"], want, "{method} {path}");
            assert_eq!(body["kind"], "Status", "{method} {path}");
        }
        let (code, body) = raw(&client, "POST", &format!("{base}/log"), "", "").await;
        assert_eq!((code, body["reason"].as_str()), (405, Some("MethodNotAllowed")));

        let (_, discovery) = raw(&client, "GET", "/api/v1", "", "").await;
        let sub = |name: &str| {
            discovery["resources"]
                .as_array()
                .and_then(|r| r.iter().find(|e| e["name"] == name))
                .cloned()
                .unwrap_or(Value::Null)
        };
        assert_eq!(sub("pods/log")["verbs"], json!(["get"]));
        assert_eq!(sub("pods/exec")["kind"], "PodExecOptions");
        assert_eq!(sub("pods/portforward")["verbs"], json!(["create", "get"]));
        assert_eq!(sub("nodes/proxy")["kind"], "NodeProxyOptions");
        assert_eq!(
            sub("services/proxy")["verbs"],
            json!(["create", "delete", "get", "patch", "update"])
        );
        assert_eq!(sub("bindings")["verbs"], json!(["create"]));
        assert_eq!(sub("componentstatuses")["shortNames"], json!(["cs"]));
    })
    .await;
}
