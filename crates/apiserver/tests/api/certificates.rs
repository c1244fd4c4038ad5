//! certificates.k8s.io/v1 over HTTP: a CSR records its requestor, is approved through `/approval` only, gets its certificate through `/status` only.

use base64::Engine;
use kcm_apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::common::{raw, timed};
use crate::lifecycle::{self, Lifecycle};

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const MERGE: &str = "application/merge-patch+json";

/// A base64 PEM PKCS#10 request for `cn`, signed by a fresh key.
fn request(cn: &str) -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    let pem = params
        .serialize_request(&key)
        .expect("csr")
        .pem()
        .expect("pem");
    base64::engine::general_purpose::STANDARD.encode(pem)
}

fn csr(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"request": request(name),
        "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"], "expirationSeconds": 3600,
        "username": "mallory"}, "status": {"conditions": [{"type": "Approved", "status": "True"}]}})
}

#[tokio::test]
async fn csrs_record_the_requestor_and_split_approval_from_status() {
    timed(async {
        let server = TestServer::start().await;
        let client = server.client();
        let out = lifecycle::run(
            &client,
            Lifecycle {
                collection: CSRS,
                object: csr("alice"),
                patch: json!({"metadata": {"labels": {"team": "a"}}, "spec": {"usages": ["server auth"]}}),
                apply: json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                    "metadata": {"name": "alice", "annotations": {"note": "x"}}}),
            },
        )
        .await;
        assert_eq!(out.created["spec"]["username"], "kubernetes-admin", "the requestor, not the body's");
        assert_eq!(out.created["spec"]["groups"], json!(["system:masters", "system:authenticated"]));
        assert_eq!(out.created["status"], json!({}), "no pre-approved requests");
        assert_eq!(out.patched["spec"]["usages"], json!(["client auth"]), "the spec is immutable");

        let body = |v: Value| serde_json::to_vec(&v).expect("json");
        let (code, _) = raw(&client, "POST", CSRS, "application/json", body(csr("bob"))).await;
        assert_eq!(code, 201);
        let approval = json!({"status": {"conditions": [{"type": "Approved", "status": "True",
            "reason": "Test", "message": "approved by the test"}]}});
        let (code, status) = raw(&client, "PATCH", &format!("{CSRS}/bob/status"), MERGE, body(approval.clone())).await;
        assert_eq!(code, 422, "{status}");
        assert!(status["message"].as_str().is_some_and(|m| m.contains(r#"updates may not add a condition of type "Approved""#)));
        let (code, approved) = raw(&client, "PATCH", &format!("{CSRS}/bob/approval"), MERGE, body(approval)).await;
        assert_eq!(code, 200, "{approved}");
        assert_eq!(approved["status"]["conditions"][0]["type"], "Approved");
        assert!(approved["status"]["conditions"][0]["lastUpdateTime"].is_string());
        let (code, got) = raw(&client, "GET", &format!("{CSRS}/bob/approval"), "application/json", Vec::new()).await;
        assert_eq!((code, &got["metadata"]["name"]), (200, &json!("bob")));

        let (code, status) = raw(&client, "PATCH", &format!("{CSRS}/bob/status"), MERGE,
            body(json!({"status": {"certificate": base64::engine::general_purpose::STANDARD.encode("not a certificate")}}))).await;
        assert_eq!(code, 422, "{status}");
        assert!(status["message"].as_str().is_some_and(|m| m.contains("status.certificate")), "{status}");

        let (code, status) = raw(&client, "POST", CSRS, "application/json",
            body(json!({"metadata": {"name": "carol"}, "spec": {"request": "aGk=", "signerName": "example", "usages": []}}))).await;
        assert_eq!(code, 422);
        let fields: Vec<&str> = status["details"]["causes"].as_array().expect("causes").iter()
            .filter_map(|c| c["field"].as_str()).collect();
        assert_eq!(fields, ["spec.request", "spec.usages", "spec.signerName"]);
    })
    .await;
}
