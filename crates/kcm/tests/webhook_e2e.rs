//! Admission webhooks on `kcm up`, driven by the installed `kubectl`: `kubectl apply` a ValidatingWebhookConfiguration whose `url` is a webhook served by this test (HTTPS, an rcgen certificate), `kubectl run` of a labelled pod is refused with the webhook's message; with the webhook down, `failurePolicy: Fail` refuses with upstream's call error and `Ignore` lets the pod through. Skipped (with a note) when `kubectl` is missing.

mod kcm_up;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use kcm_up::{Backend, Up};
use serde_json::{Value, json};
use tokio_rustls::TlsAcceptor;

/// Starts, on `runtime`, a webhook denying pods labelled `deny`; returns its address and its
/// certificate (base64 PEM, the `caBundle`).
fn start_webhook(runtime: &tokio::runtime::Runtime) -> (SocketAddr, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress("127.0.0.1".parse().expect("ip")));
    let cert = params.self_signed(&key).expect("cert");
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(cert.pem());
    let der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], der)
    .expect("server config");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    runtime.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(|req: http::Request<hyper::body::Incoming>| async move {
                    let bytes = req
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let review: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                    let request = &review["request"];
                    let denied = request["object"]["metadata"]["labels"]
                        .get("deny")
                        .is_some();
                    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                        "response": {"uid": request["uid"], "allowed": !denied,
                            "status": {"code": 403, "message": "pods with the deny label are not allowed"}}});
                    Ok::<_, Infallible>(http::Response::new(Full::<hyper::body::Bytes>::from(
                        serde_json::to_vec(&body).unwrap_or_default(),
                    )))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (addr, ca_bundle)
}

/// The configuration: pod creates go to `addr` with `policy`.
fn configuration(addr: SocketAddr, ca_bundle: &str, policy: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: deny-label\nwebhooks:\n- name: deny.kcm.test\n  failurePolicy: {policy}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n  clientConfig:\n    url: https://{addr}/validate\n    caBundle: {ca_bundle}\n  rules:\n  - operations: [CREATE]\n    apiGroups: [\"\"]\n    apiVersions: [v1]\n    resources: [pods]\n"
    )
}

kcm_up::on_each_backend!(
    a_webhook_blocks_labelled_pods_and_fails_open_when_told:
        a_webhook_blocks_labelled_pods_and_fails_open_when_told_sqlite,
        a_webhook_blocks_labelled_pods_and_fails_open_when_told_etcd
);

fn a_webhook_blocks_labelled_pods_and_fails_open_when_told(backend: &Backend) {
    let dir = tempfile::tempdir().expect("data dir");
    let up = Up::start(backend, dir.path(), &["--nodes", "1"], "info");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let (addr, ca_bundle) = start_webhook(&runtime);
    let manifest = dir.path().join("webhook.yaml");
    std::fs::write(&manifest, configuration(addr, &ca_bundle, "Fail")).expect("manifest");
    let manifest = manifest.display().to_string();
    up.kubectl_ok(&["apply", "-f", &manifest]);
    up.wait_for("the default service account", || {
        up.kubectl(&["get", "serviceaccount", "default"])
            .0
            .then_some(())
    });

    // The webhook's denial, with its message.
    let (ok, _, stderr) = up.kubectl(&["run", "denied", "--image=nginx", "--labels=deny=yes"]);
    assert!(!ok, "a denied pod was created");
    assert!(
        stderr.contains(
            "admission webhook \"deny.kcm.test\" denied the request: pods with the deny label are not allowed"
        ),
        "{stderr}\n{}",
        up.logs()
    );
    up.kubectl_ok(&["run", "allowed", "--image=nginx"]);

    // The webhook goes away: Fail refuses every matching create with the call error ...
    drop(runtime);
    let (ok, _, stderr) = up.kubectl(&["run", "closed", "--image=nginx"]);
    assert!(!ok, "created with the webhook down and failurePolicy Fail");
    assert!(
        stderr.contains("failed calling webhook \"deny.kcm.test\": failed to call webhook: Post"),
        "{stderr}"
    );

    // ... and Ignore lets even a labelled pod through.
    let manifest_ignore = dir.path().join("webhook-ignore.yaml");
    std::fs::write(&manifest_ignore, configuration(addr, &ca_bundle, "Ignore")).expect("manifest");
    up.kubectl_ok(&["apply", "-f", &manifest_ignore.display().to_string()]);
    up.wait_for("the create to fail open", || {
        up.kubectl(&["run", "open", "--image=nginx", "--labels=deny=yes"])
            .0
            .then_some(())
    });
    let got = up.kubectl_ok(&[
        "get",
        "pod",
        "open",
        "-o",
        "jsonpath={.metadata.labels.deny}",
    ]);
    assert_eq!(got, "yes");
}
