//! Security and robustness: bearer token, TLS trust, body limits, malformed input, the kubeconfig.

use k8s_openapi::api::core::v1::Namespace;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::ListParams;

use crate::common::{raw, timed};

fn client_with(server: &TestServer, edit: impl FnOnce(&mut kube::Config)) -> kube::Client {
    let mut config = server.server().kube_config();
    config.default_retry = false;
    edit(&mut config);
    kube::Client::try_from(config).expect("client")
}

#[tokio::test]
async fn requests_without_the_token_are_401() {
    timed(async {
        let server = TestServer::start().await;
        for (name, client) in [
            (
                "no token",
                client_with(&server, |c| c.auth_info = Default::default()),
            ),
            (
                "wrong token",
                client_with(&server, |c| {
                    c.auth_info = serde_json::from_value(serde_json::json!({"token": "wrong"}))
                        .expect("auth");
                }),
            ),
        ] {
            let (code, status) = raw(
                &client,
                "GET",
                "/api/v1/namespaces",
                "application/json",
                vec![],
            )
            .await;
            assert_eq!(code, 401, "case {name}");
            assert_eq!(status["kind"], "Status");
            assert_eq!(status["reason"], "Unauthorized");
            assert_eq!(status["code"], 401);
            // Health checks stay open to anonymous requests, as upstream's
            // public-info-viewer role allows; a bad token is 401 everywhere, as upstream.
            let (code, _) = raw(&client, "GET", "/healthz", "application/json", vec![]).await;
            let expected = if name == "no token" { 200 } else { 401 };
            assert_eq!(code, expected, "case {name}");
        }
    })
    .await;
}

#[tokio::test]
async fn untrusted_ca_is_refused_by_clients() {
    timed(async {
        let server = TestServer::start().await;
        let client = client_with(&server, |c| c.root_cert = None);
        let api: Api<Namespace> = Api::all(client);
        let err = api
            .list(&ListParams::default())
            .await
            .expect_err("unknown CA");
        assert!(
            !matches!(err, kube::Error::Api(_)),
            "TLS must fail before HTTP: {err:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn oversized_malformed_and_unsupported_bodies() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let path = "/api/v1/namespaces/default/configmaps";
        let big = format!(
            "{{\"metadata\":{{\"name\":\"big\"}},\"data\":{{\"k\":\"{}\"}}}}",
            "x".repeat(4 * 1024 * 1024)
        );
        let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
            (
                "too large",
                "application/json",
                big.into_bytes(),
                413,
                "RequestEntityTooLarge",
            ),
            (
                "malformed json",
                "application/json",
                b"{\"metadata\": ".to_vec(),
                400,
                "BadRequest",
            ),
            (
                "not an object",
                "application/json",
                b"[1,2,3]".to_vec(),
                400,
                "BadRequest",
            ),
            (
                "binary garbage",
                "application/json",
                vec![0xff, 0xfe, 0x00, 0x13],
                400,
                "BadRequest",
            ),
            (
                "wrong kind",
                "application/json",
                br#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"x"}}"#.to_vec(),
                400,
                "BadRequest",
            ),
            (
                "wrong field type",
                "application/json",
                br#"{"metadata":{"name":"x"},"data":5}"#.to_vec(),
                400,
                "BadRequest",
            ),
            (
                "truncated protobuf",
                "application/vnd.kubernetes.protobuf",
                b"k8s\x00".to_vec(),
                400,
                "BadRequest",
            ),
            (
                "unknown media type",
                "application/cbor",
                b"\xa0".to_vec(),
                415,
                "UnsupportedMediaType",
            ),
        ];
        for (name, content_type, body, want_code, want_reason) in cases {
            let (code, status) = raw(&client, "POST", path, content_type, body).await;
            assert_eq!(code, want_code, "case {name}: {status}");
            assert_eq!(status["kind"], "Status", "case {name}");
            assert_eq!(status["reason"], want_reason, "case {name}");
            assert!(
                status["message"].as_str().is_some_and(|m| !m.is_empty()),
                "case {name}"
            );
        }
        let (code, status) = raw(
            &client,
            "PATCH",
            &format!("{path}/x"),
            "application/apply-patch+yaml",
            b"{}".to_vec(),
        )
        .await;
        // Server-side apply is served, and must name its field manager.
        assert_eq!((code, status["reason"].as_str()), (422, Some("Invalid")));
        assert_eq!(
            status["message"],
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
        );
        let (code, _) = raw(
            &client,
            "GET",
            "/api/v1/namespaces/default/configmaps?limit=abc",
            "application/json",
            vec![],
        )
        .await;
        assert_eq!(code, 400);
        let (code, _) = raw(&client, "GET", "/api/v1/bogus", "application/json", vec![]).await;
        assert_eq!(code, 404);
        let (code, _) = raw(&client, "PUT", path, "application/json", b"{}".to_vec()).await;
        assert_eq!(code, 405);
        // The server is still healthy after all that.
        let (code, _) = raw(&client, "GET", path, "application/json", vec![]).await;
        assert_eq!(code, 200);
    })
    .await;
}

#[tokio::test]
async fn kubeconfig_points_at_the_real_port_and_works() {
    timed(async {
        let server = TestServer::start().await;
        let path = server.kubeconfig_path();
        let kubeconfig = kube::config::Kubeconfig::read_from(path).expect("kubeconfig parses");
        let cluster = kubeconfig.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.server.as_deref(), Some(server.url()));
        assert!(!server.url().ends_with(":0"));
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("config");
        let api: Api<Namespace> = Api::all(kube::Client::try_from(config).expect("client"));
        assert_eq!(
            api.list(&ListParams::default())
                .await
                .expect("list")
                .items
                .len(),
            4
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).expect("stat").permissions().mode();
            assert_eq!(mode & 0o077, 0, "kubeconfig holds the token: owner only");
        }
    })
    .await;
}
