//! A test admission webhook: HTTPS (rustls, a fresh rcgen CA-less self-signed certificate for `127.0.0.1` and `hook.default.svc`) on a free port, answering each `AdmissionReview` with what the test's function decides and recording the reviews it got.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// What the webhook answers for a request path and review: the `response` object (its `uid`
/// is filled in), or `None` to never answer (a hung webhook).
pub type Respond = dyn Fn(&str, &Value) -> Option<Value> + Send + Sync;

/// A running test webhook; stops when dropped.
pub struct WebhookServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its certificate, base64 PEM: the `caBundle` that trusts it.
    pub ca_bundle: String,
    /// Every review received, in order.
    pub seen: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WebhookServer {
    /// Starts a webhook on `127.0.0.1` answering with `respond`.
    pub async fn start(
        respond: impl Fn(&str, &Value) -> Option<Value> + Send + Sync + 'static,
    ) -> Self {
        Self::start_on("127.0.0.1".parse().expect("ip"), respond).await
    }

    /// Starts a webhook on `ip` answering with `respond`.
    pub async fn start_on(
        ip: std::net::IpAddr,
        respond: impl Fn(&str, &Value) -> Option<Value> + Send + Sync + 'static,
    ) -> Self {
        let respond: Arc<Respond> = Arc::new(respond);
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params =
            rcgen::CertificateParams::new(vec!["hook.default.svc".to_owned()]).expect("params");
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress("127.0.0.1".parse().expect("ip")));
        let cert = params.self_signed(&key).expect("cert");
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(cert.pem());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).expect("key der");
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], der)
            .expect("server config");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind((ip, 0)).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                let respond = Arc::clone(&respond);
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let respond = Arc::clone(&respond);
                        let recorded = Arc::clone(&recorded);
                        async move {
                            let path = req.uri().path().to_owned();
                            let bytes = req
                                .into_body()
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let review: Value =
                                serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                            recorded.lock().expect("seen").push(review.clone());
                            let Some(mut response) = respond(&path, &review) else {
                                std::future::pending::<()>().await;
                                unreachable!("a hung webhook never answers");
                            };
                            response["uid"] = review["request"]["uid"].clone();
                            let body = json!({"apiVersion": "admission.k8s.io/v1",
                                "kind": "AdmissionReview", "response": response});
                            let body = serde_json::to_vec(&body).expect("json");
                            Ok::<_, Infallible>(
                                http::Response::builder()
                                    .header("content-type", "application/json")
                                    .body(Full::new(Bytes::from(body)))
                                    .expect("response"),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            ca_bundle,
            seen,
            task,
        }
    }

    /// The `https://127.0.0.1:<port><path>` URL of one of its paths.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// The reviews received so far.
    pub fn reviews(&self) -> Vec<Value> {
        self.seen.lock().expect("seen").clone()
    }
}

/// A non-loopback address of this machine (the one it would route outward from), for
/// endpoints, which may not be loopback addresses; `None` on a machine without one.
pub fn local_address() -> Option<std::net::IpAddr> {
    // Connecting a UDP socket sends nothing; it only picks the outward interface.
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// A JSON patch as the `patch` field carries it (base64).
pub fn patch(ops: Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&ops).expect("json"))
}
