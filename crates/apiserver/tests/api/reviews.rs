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
