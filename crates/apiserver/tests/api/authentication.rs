//! Authentication: ServiceAccount tokens (TokenRequest, validation, TokenReview), client certificates, issuer discovery, 401s.

use k8s_openapi::api::core::v1::ServiceAccount;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::common::{raw, timed};

/// A client of `server` whose only credential is `auth` (a kubeconfig `user`).
fn client_as(server: &TestServer, auth: Value) -> kube::Client {
    let mut config = server.server().kube_config();
    config.default_retry = false;
    config.auth_info = serde_json::from_value(auth).expect("auth info");
    kube::Client::try_from(config).expect("client")
}

async fn create_sa(server: &TestServer, name: &str) {
    let api: Api<ServiceAccount> = Api::namespaced(server.client(), "default");
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": name}})).expect("sa"),
    )
    .await
    .expect("service account created");
}

async fn request_token(server: &TestServer, sa: &str, spec: Value) -> (u16, Value) {
    raw(
        &server.client(),
        "POST",
        &format!("/api/v1/namespaces/default/serviceaccounts/{sa}/token"),
        "application/json",
        serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}))
            .expect("json"),
    )
    .await
}

async fn get_code(client: &kube::Client, path: &str) -> u16 {
    raw(client, "GET", path, "application/json", vec![]).await.0
}

#[tokio::test]
async fn service_account_tokens_authenticate_while_their_account_exists() {
    timed(async {
        let server = TestServer::start().await;
        create_sa(&server, "ci").await;
        let (code, answer) = request_token(&server, "ci", json!({})).await;
        assert_eq!(code, 201, "{answer}");
        assert_eq!(answer["kind"], "TokenRequest");
        assert_eq!(answer["spec"]["expirationSeconds"], 3600);
        assert!(answer["status"]["expirationTimestamp"].is_string());
        let token = answer["status"]["token"].as_str().expect("token").to_owned();
        let sa_client = client_as(&server, json!({"token": token}));
        let (code, review) = raw(
            &sa_client,
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            "application/json",
            serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})).expect("json"),
        )
        .await;
        assert_eq!(code, 201, "{review}");
        let user = &review["status"]["userInfo"];
        assert_eq!(user["username"], "system:serviceaccount:default:ci");
        assert_eq!(
            user["groups"],
            json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"])
        );

        // TokenReview (as the admin) agrees.
        let (code, review) = raw(
            &server.client(),
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            "application/json",
            serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})).expect("json"),
        )
        .await;
        assert_eq!(code, 201, "{review}");
        assert_eq!(review["status"]["authenticated"], true);
        assert_eq!(review["status"]["user"]["username"], "system:serviceaccount:default:ci");

        // A token for another audience is not an API token.
        let (_, other) = request_token(&server, "ci", json!({"audiences": ["vault"]})).await;
        let vault = client_as(&server, json!({"token": other["status"]["token"]}));
        assert_eq!(get_code(&vault, "/api/v1/namespaces").await, 401);

        // TokenReview checks the audiences asked about: the vault token is good for vault,
        // not for the API (no audiences) nor for another; the answer names what matched.
        let review_for = |token: Value, audiences: Value| {
            let client = server.client();
            async move {
                let (code, review) = raw(
                    &client,
                    "POST",
                    "/apis/authentication.k8s.io/v1/tokenreviews",
                    "application/json",
                    serde_json::to_vec(&json!({"spec": {"token": token, "audiences": audiences}})).expect("json"),
                )
                .await;
                assert_eq!(code, 201, "{review}");
                review["status"].clone()
            }
        };
        let vault_token = other["status"]["token"].clone();
        let status = review_for(vault_token.clone(), json!(["other", "vault"])).await;
        assert_eq!(status["authenticated"], true, "{status}");
        assert_eq!(status["audiences"], json!(["vault"]));
        for audiences in [json!([]), json!(["other"])] {
            let status = review_for(vault_token.clone(), audiences.clone()).await;
            assert_ne!(status["authenticated"], true, "{audiences}: {status}");
        }
        let status = review_for(json!(token), json!([])).await;
        assert_eq!(status["audiences"], json!(["https://kubernetes.default.svc.cluster.local"]));
        let status = review_for(json!(server.token()), json!(["vault"])).await;
        assert_ne!(status["authenticated"], true, "the admin token is for the API only: {status}");

        // Too short a lifetime is invalid, as upstream.
        let (code, status) = request_token(&server, "ci", json!({"expirationSeconds": 60})).await;
        assert_eq!(code, 422, "{status}");
        assert!(
            status["message"]
                .as_str()
                .unwrap_or("")
                .contains("may not specify a duration less than 10 minutes"),
            "{status}"
        );
        let (code, _) = request_token(&server, "nobody", json!({})).await;
        assert_eq!(code, 404);

        // Deleting the account revokes its tokens.
        let api: Api<ServiceAccount> = Api::namespaced(server.client(), "default");
        api.delete("ci", &DeleteParams::default()).await.expect("deleted");
        assert_eq!(get_code(&sa_client, "/api/v1/namespaces").await, 401);
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn client_certificates_of_the_cluster_ca_authenticate() {
    timed(async {
        let server = TestServer::start().await;
        let kubeconfig: Value = serde_saphyr::from_str(
            &std::fs::read_to_string(server.kubeconfig_path()).expect("kubeconfig"),
        )
        .expect("yaml");
        let user = &kubeconfig["users"][0]["user"];
        let admin = client_as(
            &server,
            json!({
                "client-certificate-data": user["client-certificate-data"],
                "client-key-data": user["client-key-data"],
            }),
        );
        let (code, review) = raw(
            &admin,
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            "application/json",
            serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})).expect("json"),
        )
        .await;
        assert_eq!(code, 201, "{review}");
        assert_eq!(
            review["status"]["userInfo"],
            json!({"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]})
        );

        // A certificate of another CA (same subject, another key) is 401, not a TLS error.
        let other_ca = rcgen::KeyPair::generate().expect("key").serialize_pem();
        let (cert, key) = kcm_apiserver::auth::client_cert::issue(
            &other_ca,
            "kubernetes-admin",
            &["system:masters"],
        )
        .expect("issued");
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let forged = client_as(
            &server,
            json!({"client-certificate-data": b64(&cert), "client-key-data": b64(&key)}),
        );
        assert_eq!(get_code(&forged, "/api/v1/namespaces").await, 401);
        assert_eq!(get_code(&forged, "/healthz").await, 401);
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn anonymous_requests_reach_only_the_public_paths() {
    timed(async {
        let server = TestServer::start().await;
        let anonymous = client_as(&server, json!({}));
        for path in ["/healthz", "/livez", "/readyz", "/version"] {
            assert_eq!(get_code(&anonymous, path).await, 200, "{path}");
        }
        for path in [
            "/api",
            "/apis",
            "/api/v1/namespaces",
            "/openapi/v3",
            "/.well-known/openid-configuration",
            "/nonexistent",
        ] {
            assert_eq!(get_code(&anonymous, path).await, 401, "{path}");
        }
        // Issuer discovery, for the authenticated.
        let (code, config) = raw(
            &server.client(),
            "GET",
            "/.well-known/openid-configuration",
            "application/json",
            vec![],
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(
            config["issuer"],
            "https://kubernetes.default.svc.cluster.local"
        );
        let (code, jwks) = raw(
            &server.client(),
            "GET",
            "/openid/v1/jwks",
            "application/json",
            vec![],
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(jwks["keys"][0]["alg"], "ES256");
        server.shutdown().await;
    })
    .await;
}
