//! resource.k8s.io/v1 over HTTP (Dynamic Resource Allocation, served by default since v1.34): device classes, claims with their status subresource, claim templates and resource slices selectable by node.

use kcm_apiserver::testing::TestServer;
use serde_json::json;

use crate::common::{raw, timed};
use crate::lifecycle::{self, Lifecycle};

const RESOURCE: &str = "/apis/resource.k8s.io/v1";

fn body(v: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&v).expect("json")
}

fn slice(name: &str, node: &str) -> serde_json::Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
        "spec": {"driver": "gpu.example.com", "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}]}})
}

#[tokio::test]
async fn dra_objects_are_stored_with_their_generations_and_status() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let class = json!({"metadata": {"name": "gpu.example.com"}, "spec": {"selectors": [
            {"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}});
        let out = lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{RESOURCE}/deviceclasses"),
                object: class.clone(),
                patch: json!({"spec": {"selectors": []}}),
                apply: json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                    "metadata": {"name": "gpu.example.com"}, "spec": class["spec"]}),
            },
        )
        .await;
        assert_eq!(out.created["metadata"]["generation"], 1);
        assert_eq!(out.patched["metadata"]["generation"], 2);

        let claim = json!({"metadata": {"name": "gpu", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
            "status": {"allocation": {"devices": {"results": []}}}});
        let claims = format!("{RESOURCE}/namespaces/default/resourceclaims");
        let (code, created) = raw(&client, "POST", &claims, "application/json", body(claim)).await;
        assert_eq!(code, 201, "{created}");
        assert_eq!(created["status"], json!({}), "status only through /status");
        let (code, reserved) = raw(&client, "PATCH", &format!("{claims}/gpu/status"), "application/merge-patch+json",
            body(json!({"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}))).await;
        assert_eq!(code, 200, "{reserved}");
        assert_eq!(reserved["status"]["reservedFor"][0]["name"], "p");

        lifecycle::run(
            &client,
            Lifecycle {
                collection: &format!("{RESOURCE}/namespaces/default/resourceclaimtemplates"),
                object: json!({"metadata": {"name": "gpu"}, "spec": {"spec": {"devices": {}}}}),
                patch: json!({"metadata": {"labels": {"a": "b"}}}),
                apply: json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                    "metadata": {"name": "gpu"}, "spec": {"spec": {"devices": {}}}}),
            },
        )
        .await;

        let slices = format!("{RESOURCE}/resourceslices");
        for (name, node) in [("a", "node-1"), ("b", "node-2")] {
            let (code, created) = raw(&client, "POST", &slices, "application/json", body(slice(name, node))).await;
            assert_eq!(code, 201, "{created}");
            assert_eq!(created["metadata"]["generation"], 1);
        }
        let (code, list) = raw(&client, "GET", &format!("{slices}?fieldSelector=spec.nodeName%3Dnode-2"),
            "application/json", Vec::new()).await;
        assert_eq!(code, 200, "{list}");
        let names: Vec<&str> = list["items"].as_array().expect("items").iter()
            .filter_map(|s| s["metadata"]["name"].as_str()).collect();
        assert_eq!(names, ["b"]);
    })
    .await;
}
