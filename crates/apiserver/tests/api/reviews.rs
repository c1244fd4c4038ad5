//! authentication.k8s.io and authorization.k8s.io reviews over HTTP: create-only, never stored, answered for the admin identity and the bootstrap policy.

use kcm_apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::common::{raw, timed};

async fn review(client: &kube::Client, path: &str, body: Value) -> (u16, Value) {
    raw(
        client,
        "POST",
        path,
        "application/json",
        serde_json::to_vec(&body).expect("json"),
    )
    .await
}

#[tokio::test]
async fn reviews_answer_from_the_identity_and_the_policy() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let (code, me) = review(&client, "/apis/authentication.k8s.io/v1/selfsubjectreviews", json!({})).await;
        assert_eq!(code, 201, "{me}");
        assert_eq!(
            me["status"]["userInfo"],
            json!({"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]})
        );
        let tokens = "/apis/authentication.k8s.io/v1/tokenreviews";
        let (code, good) = review(&client, tokens, json!({"spec": {"token": server.token()}})).await;
        assert_eq!(code, 201);
        assert_eq!((&good["status"]["authenticated"], &good["status"]["user"]["username"]),
            (&json!(true), &json!("kubernetes-admin")));
        let (_, bad) = review(&client, tokens, json!({"spec": {"token": "guess"}})).await;
        assert_eq!(bad["status"], json!({"user": {}}));
        let (code, _) = review(&client, tokens, json!({"spec": {}})).await;
        assert_eq!(code, 400);

        let authz = "/apis/authorization.k8s.io/v1";
        let (_, can) = review(&client, &format!("{authz}/selfsubjectaccessreviews"),
            json!({"spec": {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}})).await;
        assert_eq!(can["status"], json!({"allowed": true}));
        let (code, bob) = review(&client, &format!("{authz}/subjectaccessreviews"),
            json!({"spec": {"user": "bob", "groups": ["system:authenticated"], "resourceAttributes": {"verb": "list", "resource": "secrets"}}})).await;
        assert_eq!(code, 201);
        assert_eq!(bob["status"], json!({"allowed": false}));
        let (code, local) = review(&client, &format!("{authz}/namespaces/default/localsubjectaccessreviews"),
            json!({"spec": {"user": "bob", "groups": ["system:masters"], "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}}})).await;
        assert_eq!((code, &local["status"]["allowed"]), (201, &json!(true)));
        let (code, status) = review(&client, &format!("{authz}/namespaces/default/localsubjectaccessreviews"),
            json!({"spec": {"user": "bob", "resourceAttributes": {"namespace": "other", "verb": "get", "resource": "pods"}}})).await;
        assert_eq!(code, 422, "{status}");
        let (_, rules) = review(&client, &format!("{authz}/selfsubjectrulesreviews"), json!({"spec": {"namespace": "default"}})).await;
        assert_eq!(rules["status"]["resourceRules"][0], json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        assert_eq!(rules["status"]["nonResourceRules"][0], json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));

        let (code, _) = raw(&client, "GET", &format!("{authz}/selfsubjectaccessreviews"), "application/json", Vec::new()).await;
        assert_eq!(code, 405, "reviews are create-only");
    })
    .await;
}

/// A review has no table form (upstream's review storages have no `TableConvertor`): asking
/// for one only is a 406 and the review is not performed; a create of a stored kind may
/// answer as a Table.
#[tokio::test]
async fn a_table_of_a_review_is_not_acceptable() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let post = |path: &str, body: Value| {
            http::Request::builder()
                .method("POST")
                .uri(path)
                .header("content-type", "application/json")
                .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
                .body(kube::client::Body::from(
                    serde_json::to_vec(&body).expect("json"),
                ))
                .expect("request")
        };
        let answer = |response: http::Response<kube::client::Body>| async move {
            let code = response.status().as_u16();
            let bytes = response.into_body().collect_bytes().await.expect("body");
            (
                code,
                serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
            )
        };
        let review = json!({"spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}});
        let (code, status) = answer(
            client
                .send(post(
                    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                    review,
                ))
                .await
                .expect("response"),
        )
        .await;
        assert_eq!(
            (code, &status["reason"]),
            (406, &json!("NotAcceptable")),
            "{status}"
        );
        assert_eq!(
            status["message"],
            "only the following media types are accepted: application/json, application/yaml"
        );

        let configmap = json!({"metadata": {"name": "c"}, "data": {"k": "v"}});
        let (code, table) = answer(
            client
                .send(post("/api/v1/namespaces/default/configmaps", configmap))
                .await
                .expect("response"),
        )
        .await;
        assert_eq!((code, &table["kind"]), (201, &json!("Table")), "{table}");
        assert_eq!(table["rows"][0]["cells"][0], "c");
    })
    .await;
}
