//! PodSecurity over HTTP: a namespace's enforce labels refuse pods with upstream's message, its version label pins the checks.

use kcm_apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::common::{raw, send, timed};

/// Creates namespace `name` with `labels` and its `default` ServiceAccount (which the
/// ServiceAccount plugin looks up before PodSecurity judges a pod).
async fn namespace(client: &kube::Client, name: &str, labels: Value) {
    let ns = json!({"metadata": {"name": name, "labels": labels}});
    let (code, body) = raw(
        client,
        "POST",
        "/api/v1/namespaces",
        "application/json",
        serde_json::to_vec(&ns).expect("json"),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let sa = json!({"metadata": {"name": "default"}});
    let (code, body) = raw(
        client,
        "POST",
        &format!("/api/v1/namespaces/{name}/serviceaccounts"),
        "application/json",
        serde_json::to_vec(&sa).expect("json"),
    )
    .await;
    assert_eq!(code, 201, "{body}");
}

/// A pod whose readiness probe names a host, which baseline refuses from v1.34.
fn probe_host_pod(name: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"metadata": {"name": name}, "spec": {"containers": [{
        "name": "c", "image": "nginx",
        "readinessProbe": {"httpGet": {"host": "1.2.3.4", "port": 80}}}]}}),
    )
    .expect("json")
}

#[tokio::test]
async fn baseline_refuses_a_probe_host_unless_the_namespace_pins_v1_33() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let cases = [
            ("latest", json!({"pod-security.kubernetes.io/enforce": "baseline"}), "baseline:latest"),
            ("pinned-36", json!({"pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/enforce-version": "v1.36"}), "baseline:v1.36"),
        ];
        for (ns, labels, policy) in cases {
            namespace(&client, ns, labels).await;
            let (code, status) = raw(&client, "POST", &format!("/api/v1/namespaces/{ns}/pods"),
                "application/json", probe_host_pod("probe")).await;
            assert_eq!(code, 403, "{ns}: {status}");
            assert_eq!(status["reason"], "Forbidden");
            assert_eq!(
                status["message"],
                format!("pods \"probe\" is forbidden: violates PodSecurity \"{policy}\": probe or lifecycle host (container \"c\" uses probe or lifecycle host \"1.2.3.4\")"),
            );
        }

        // Pinned to v1.33, the namespace keeps v1.33's checks: no probe host check, no warning.
        namespace(&client, "pinned-33", json!({"pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/enforce-version": "v1.33"})).await;
        let (code, pod, warnings) = send(&client, "POST", "/api/v1/namespaces/pinned-33/pods",
            Some("application/json"), probe_host_pod("probe")).await;
        assert_eq!(code, 201, "{pod}");
        assert!(warnings.is_empty(), "{warnings:?}");
        // A warn level without a version warns at the newest checks beside the pinned enforce.
        let (code, _) = raw(&client, "PATCH", "/api/v1/namespaces/pinned-33",
            "application/merge-patch+json",
            br#"{"metadata": {"labels": {"pod-security.kubernetes.io/warn": "baseline"}}}"#.to_vec()).await;
        assert_eq!(code, 200);
        let (code, pod, warnings) = send(&client, "POST", "/api/v1/namespaces/pinned-33/pods",
            Some("application/json"), probe_host_pod("warned")).await;
        assert_eq!(code, 201, "{pod}");
        // The Warning header quotes the text, its own quotes escaped.
        assert_eq!(
            warnings,
            [r#"299 - "would violate PodSecurity \"baseline:latest\": probe or lifecycle host (container \"c\" uses probe or lifecycle host \"1.2.3.4\")""#]
        );
    })
    .await;
}
