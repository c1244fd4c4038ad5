//! Helpers for the controller manager's integration tests: flags, an HTTPS GET that trusts the
//! served certificate, polling real processes with a timeout, ReplicaSet and pod fixtures.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kcm_controllers::manager::ManagerOptions;
use kcm_testing::{MetaBuilder, WorkloadBuilder, container};
use kube::Api;
use kube::api::{ListParams, PostParams};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The manager's flags, parsed as `kcm run` parses them.
#[derive(Parser, Debug)]
#[command(args_override_self = true)]
struct Cli {
    #[command(flatten)]
    options: ManagerOptions,
}

/// Flags for in-process tests: no HTTPS unless a listener is given, short leases
/// (lease 2s, renew 1.5s, retry 250ms).
pub fn options(extra: &[&str]) -> ManagerOptions {
    let base = [
        "kcm-run",
        "--secure-port=0",
        "--leader-elect-lease-duration=2s",
        "--leader-elect-renew-deadline=1500ms",
        "--leader-elect-retry-period=250ms",
    ];
    Cli::try_parse_from(base.iter().chain(extra))
        .expect("flags")
        .options
}

/// A listener on a free loopback port.
pub fn loopback_listener() -> std::net::TcpListener {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind")
}

/// Polls `check` every 50ms until it returns `Some` or `limit` passes (real time: the
/// managers and the API server run for real).
pub async fn poll<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `GET path` over HTTPS, trusting `ca_pem`, with SNI `localhost`. Returns status and body.
pub async fn https_get(addr: SocketAddr, ca_pem: &str, path: &str) -> (u16, String) {
    https_get_as(addr, ca_pem, path, None).await
}

/// [`https_get`] with `Authorization: Bearer <token>` when `token` is given.
pub async fn https_get_as(
    addr: SocketAddr,
    ca_pem: &str,
    path: &str,
    token: Option<&str>,
) -> (u16, String) {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(cert.expect("pem")).expect("root");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let server_name = ServerName::try_from("localhost").expect("name");
    let mut tls = connector
        .connect(server_name, tcp)
        .await
        .expect("TLS handshake");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    match tls.read_to_end(&mut raw).await {
        Ok(_) => {}
        // Servers may close without close_notify after `Connection: close`.
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => {}
        Err(err) => panic!("read: {err}"),
    }
    let raw = String::from_utf8(raw).expect("utf-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("headers");
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (status, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).expect("chunk size");
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

/// A ReplicaSet `name` in `default` with `replicas` pods labelled `app=name`.
pub fn replica_set(name: &str, replicas: i32) -> ReplicaSet {
    kcm_testing::replica_set(name)
        .namespace("default")
        .replicas(replicas)
        .selecting(&[("app", name)])
        .container(container("app").image("registry.k8s.io/pause:3.10"))
        .build()
}

/// Creates `rs` in `default`.
pub async fn create_replica_set(client: &kube::Client, rs: &ReplicaSet) -> ReplicaSet {
    Api::<ReplicaSet>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), rs)
        .await
        .expect("create ReplicaSet")
}

/// The live (not terminating) pods labelled `app=name` in `default`.
pub async fn pods_of(client: &kube::Client, name: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// The holder of the Lease `kube-system/kube-controller-manager` ("" when free or missing).
pub async fn lease_holder(client: &kube::Client) -> String {
    lease(client)
        .await
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .unwrap_or_default()
}

/// The Lease `kube-system/kube-controller-manager`, if it exists.
pub async fn lease(client: &kube::Client) -> Option<Lease> {
    Api::<Lease>::namespaced(client.clone(), "kube-system")
        .get_opt("kube-controller-manager")
        .await
        .expect("get lease")
}

/// Sum of every `rest_client_requests_total` series in a metrics exposition.
pub fn total_requests(metrics_text: &str) -> u64 {
    metrics_text
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next())
        .filter_map(|v| v.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// Runs a test body under `limit`, so a stuck controller fails the test instead of hanging CI.
pub async fn timed<F: std::future::Future>(limit: Duration, f: F) -> F::Output {
    tokio::time::timeout(limit, f)
        .await
        .expect("test timed out")
}

/// How long [`wait_until`] polls before failing.
pub const WAIT: Duration = Duration::from_secs(60);

/// Polls `check` every 100 ms until it holds; panics with `what` after [`WAIT`].
pub async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
