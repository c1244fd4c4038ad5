//! OpenAPI v3 documents over HTTP, and `fieldValidation` (Strict, Warn, Ignore) on create, update and patch.

use kcm_apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::common::timed;

/// Sends a request and returns the status, the `Warning` headers and the JSON body.
async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Vec<String>, Value) {
    let (code, body, warnings) =
        crate::common::send(client, method, path, Some(content_type), body).await;
    (code, warnings, body)
}

#[tokio::test]
async fn index_points_at_group_version_documents_kubectl_can_use() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let (code, _, index) = send(&client, "GET", "/openapi/v3", "", Vec::new()).await;
        assert_eq!(code, 200);
        let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .expect("apps/v1 listed");
        assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
        let (code, _, doc) = send(&client, "GET", url, "", Vec::new()).await;
        assert_eq!(code, 200);
        assert_eq!(doc["openapi"], "3.0.0");
        let patch =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "kind": "Deployment", "version": "v1"})
        );
        assert!(
            patch["parameters"]
                .as_array()
                .expect("parameters")
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(
            doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]
                ["x-kubernetes-group-version-kind"]
                .is_array()
        );
        let (code, _, _) = send(&client, "GET", "/openapi/v2", "", Vec::new()).await;
        assert_eq!(code, 404);
    })
    .await;
}

#[tokio::test]
async fn field_validation_strict_warn_and_ignore() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let base = "/api/v1/namespaces/default/configmaps";
        let body = |name: &str| {
            serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "bogus": 1}, "data": {"a": "b"}, "extra": true}))
            .expect("json")
        };

        let (code, _, status) = send(
            &client,
            "POST",
            &format!("{base}?fieldValidation=Strict"),
            "application/json",
            body("strict"),
        )
        .await;
        assert_eq!(code, 400);
        assert_eq!(status["reason"], "BadRequest");
        assert_eq!(
            status["message"],
            r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "extra", unknown field "metadata.bogus""#
        );

        // Warn is the default: the object is created without the fields, with warnings.
        let (code, warnings, created) = send(
            &client,
            "POST",
            base,
            "application/json",
            body("warned"),
        )
        .await;
        assert_eq!(code, 201);
        assert_eq!(
            warnings,
            [
                r#"299 - "unknown field \"extra\"""#,
                r#"299 - "unknown field \"metadata.bogus\"""#
            ]
        );
        assert!(created.get("extra").is_none());

        let (code, warnings, _) = send(
            &client,
            "POST",
            &format!("{base}?fieldValidation=Ignore"),
            "application/json",
            body("ignored"),
        )
        .await;
        assert_eq!((code, warnings.len()), (201, 0));

        // A patch that introduces an unknown field: the strict error alone.
        let (code, _, status) = send(
            &client,
            "PATCH",
            &format!("{base}/warned?fieldValidation=Strict"),
            "application/merge-patch+json",
            br#"{"spec": {"x": 1}}"#.to_vec(),
        )
        .await;
        assert_eq!(code, 400);
        assert_eq!(
            status["message"],
            r#"strict decoding error: unknown field "spec""#
        );
        let (code, _, status) = send(
            &client,
            "PUT",
            &format!("{base}/warned?fieldValidation=Strict"),
            "application/json",
            body("warned"),
        )
        .await;
        assert_eq!(code, 400, "{status}");
        let (code, _, status) = send(
            &client,
            "POST",
            &format!("{base}?fieldValidation=Loose"),
            "application/json",
            body("x"),
        )
        .await;
        assert_eq!(code, 400);
        assert!(
            status["message"]
                .as_str()
                .expect("message")
                .starts_with("fieldValidation: Unsupported value: \"Loose\"")
        );
    })
    .await;
}
