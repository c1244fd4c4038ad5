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

        // A patch that introduces an unknown field: a 422 on `patch`, showing the patched
        // object, with the patch's own repeated fields first.
        let (code, _, status) = send(
            &client,
            "PATCH",
            &format!("{base}/warned?fieldValidation=Strict"),
            "application/merge-patch+json",
            br#"{"spec": {"x": 1}, "data": {"a": "1", "a": "2"}}"#.to_vec(),
        )
        .await;
        assert_eq!((code, &status["reason"]), (422, &json!("Invalid")), "{status}");
        let message = status["message"].as_str().expect("message");
        assert!(
            message.starts_with(r#" "" is invalid: patch: Invalid value: "{"#),
            "{message}"
        );
        assert!(
            message.ends_with(
                r#"": strict decoding error: duplicate field "data.a", unknown field "spec""#
            ),
            "{message}"
        );
        let (code, warnings, patched) = send(
            &client,
            "PATCH",
            &format!("{base}/warned"),
            "application/strategic-merge-patch+json",
            br#"{"data": {"a": "1", "a": "2"}}"#.to_vec(),
        )
        .await;
        assert_eq!(code, 200, "{patched}");
        assert_eq!(patched["data"]["a"], "2", "the last value wins");
        assert_eq!(warnings, [r#"299 - "duplicate field \"data.a\"""#]);
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

/// A Deployment body as upstream's field validation tests send it: unknown fields, and
/// fields given twice (one of them unknown too).
const TYPED_BODY: &str = r#"{
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "dupename", "name": "NAME", "labels": {"app": "nginx"}, "unknownMeta": "v"},
    "spec": {
        "unknown1": "val1", "unknownDupe": "a", "unknownDupe": "b",
        "paused": true, "paused": false,
        "selector": {"matchLabels": {"app": "nginx"}},
        "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [
            {"name": "nginx", "image": "nginx:latest", "unknownNested": "v",
             "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}"#;

#[tokio::test]
async fn typed_bodies_report_unknown_and_duplicate_fields_in_document_order() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let base = "/apis/apps/v1/namespaces/default/deployments";
        let body = |name: &str| TYPED_BODY.replace("NAME", name).into_bytes();
        let (code, _, status) = send(
            &client,
            "POST",
            &format!("{base}?fieldValidation=Strict"),
            "application/json",
            body("strict"),
        )
        .await;
        assert_eq!(code, 400, "{status}");
        assert_eq!(
            status["message"],
            r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: duplicate field "metadata.name", unknown field "metadata.unknownMeta", unknown field "spec.unknown1", unknown field "spec.unknownDupe", duplicate field "spec.paused", unknown field "spec.template.spec.containers[0].unknownNested", duplicate field "spec.template.spec.containers[0].imagePullPolicy""#
        );

        let (code, warnings, created) =
            send(&client, "POST", base, "application/json", body("warned")).await;
        assert_eq!(code, 201, "{created}");
        assert_eq!(warnings.len(), 7, "{warnings:?}");
        assert_eq!(warnings[0], r#"299 - "duplicate field \"metadata.name\"""#);
        assert_eq!(
            warnings[6],
            r#"299 - "duplicate field \"spec.template.spec.containers[0].imagePullPolicy\"""#
        );
        assert_eq!(created["metadata"]["name"], "warned", "the last value wins");
        assert_eq!(created["spec"]["paused"], false);
        assert_eq!(
            created["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Never"
        );

        let (code, warnings, _) = send(
            &client,
            "PUT",
            &format!("{base}/warned?fieldValidation=Ignore"),
            "application/json",
            body("warned"),
        )
        .await;
        assert_eq!((code, warnings.len()), (200, 0));
    })
    .await;
}

#[tokio::test]
async fn yaml_bodies_report_repeated_keys_by_line_before_unknown_fields() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let base = "/api/v1/namespaces/default/configmaps";
        let body = |name: &str| {
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: first\n  a: second\nbogus: 1\n")
                .into_bytes()
        };
        let (code, _, status) = send(
            &client,
            "POST",
            &format!("{base}?fieldValidation=Strict"),
            "application/yaml",
            body("strict"),
        )
        .await;
        assert_eq!(code, 400, "{status}");
        assert_eq!(
            status["message"],
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: yaml: unmarshal errors:\n  line 7: key \"a\" already set in map, unknown field \"bogus\""
        );
        let (code, warnings, created) =
            send(&client, "POST", base, "application/yaml", body("warned")).await;
        assert_eq!(code, 201, "{created}");
        assert_eq!(
            warnings,
            [
                r#"299 - "line 7: key \"a\" already set in map""#,
                r#"299 - "unknown field \"bogus\"""#
            ]
        );
        assert_eq!(created["data"]["a"], "second");
    })
    .await;
}

#[tokio::test]
async fn apply_reports_repeated_yaml_keys_once_it_applied() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let path = |name: &str, validation: &str| {
            format!("/api/v1/namespaces/default/configmaps/{name}?fieldManager=m&fieldValidation={validation}")
        };
        let body = |name: &str| {
            format!("\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: first\n  a: second\n")
                .into_bytes()
        };
        let (code, _, status) = send(
            &client,
            "PATCH",
            &path("strict", "Strict"),
            "application/apply-patch+yaml",
            body("strict"),
        )
        .await;
        assert_eq!(code, 400, "{status}");
        assert_eq!(
            status["message"],
            "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 8: key \"a\" already set in map"
        );
        let (code, warnings, applied) = send(
            &client,
            "PATCH",
            &path("warned", "Warn"),
            "application/apply-patch+yaml",
            body("warned"),
        )
        .await;
        assert_eq!(code, 201, "{applied}");
        assert_eq!(warnings, [r#"299 - "line 8: key \"a\" already set in map""#]);
        assert_eq!(applied["data"]["a"], "second");
        let (code, warnings, _) = send(
            &client,
            "PATCH",
            &path("warned", "Ignore"),
            "application/apply-patch+yaml",
            body("warned"),
        )
        .await;
        assert_eq!((code, warnings.len()), (200, 0));
    })
    .await;
}
