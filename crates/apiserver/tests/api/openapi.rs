//! OpenAPI v3 documents and the v2 document over HTTP, and `fieldValidation` (Strict, Warn, Ignore) on create, update and patch.

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
    })
    .await;
}

/// `/openapi/v2` is one Swagger 2.0 document: every kind's definition, references into
/// `definitions`, an ETag pollers may send back; protobuf-only clients are told 406.
#[tokio::test]
async fn the_v2_document_defines_every_kind_with_an_etag() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let (code, _, doc) = send(&client, "GET", "/openapi/v2", "", Vec::new()).await;
        assert_eq!(code, 200);
        assert_eq!(doc["swagger"], "2.0");
        let deployment = &doc["definitions"]["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deployment["properties"]["spec"]["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        let create = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]["post"];
        assert!(
            create["parameters"]
                .as_array()
                .expect("parameters")
                .iter()
                .any(|p| p["in"] == "body"
                    && p["schema"]["$ref"] == "#/definitions/io.k8s.api.apps.v1.Deployment")
        );
        let refs = doc.to_string();
        assert!(
            !refs.contains("#/components/schemas/"),
            "v3 references left"
        );

        let request = http::Request::get("/openapi/v2")
            .body(kube::client::Body::from(Vec::new()))
            .expect("request");
        let response = client.send(request).await.expect("v2");
        let etag = response.headers()["etag"].clone();
        let request = http::Request::get("/openapi/v2")
            .header("if-none-match", etag)
            .body(kube::client::Body::from(Vec::new()))
            .expect("request");
        let response = client.send(request).await.expect("v2");
        assert_eq!(response.status(), 304);

        let request = http::Request::get("/openapi/v2")
            .header(
                "accept",
                "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
            )
            .body(kube::client::Body::from(Vec::new()))
            .expect("request");
        let response = client.send(request).await.expect("v2");
        assert_eq!(response.status(), 406);
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
