//! `kcm run` as a process against the embedded API server: `--help`, bad flags, two
//! instances with leader election (SIGKILL and SIGTERM of the leader), and the second signal.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kcm_apiserver::testing::TestServer;
use kcm_testing::{MetaBuilder, WorkloadBuilder, container};
use kube::Api;
use kube::api::{ListParams, PostParams};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsConnector;

const KCM: &str = env!("CARGO_BIN_EXE_kcm");
/// Lease 2s, retry 250ms jittered up to ×2.2.
const LEASE: Duration = Duration::from_secs(2);
const JITTERED_RETRY: Duration = Duration::from_millis(550);
/// Allowance for process start-up and scheduling on a loaded machine.
const SLACK: Duration = Duration::from_secs(2);

/// A serving certificate for `localhost`, written for `--tls-cert-file`/`--tls-private-key-file`.
struct Cert {
    dir: tempfile::TempDir,
    pem: String,
}

impl Cert {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
        std::fs::write(dir.path().join("tls.crt"), key.cert.pem()).expect("write");
        std::fs::write(dir.path().join("tls.key"), key.signing_key.serialize_pem()).expect("write");
        Self {
            pem: key.cert.pem(),
            dir,
        }
    }
    fn cert_file(&self) -> PathBuf {
        self.dir.path().join("tls.crt")
    }
    fn key_file(&self) -> PathBuf {
        self.dir.path().join("tls.key")
    }
}

/// A free loopback port (bound then released; the process binds it right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// A `kcm run` child process, its HTTPS address and its log file.
struct Kcm {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Kcm {
    fn spawn(kubeconfig: &Path, cert: &Cert, logs: &Path, name: &str, extra: &[&str]) -> Self {
        let port = free_port();
        let log = logs.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(KCM)
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg("--tls-cert-file")
            .arg(cert.cert_file())
            .arg("--tls-private-key-file")
            .arg(cert.key_file())
            .args([
                "--leader-elect-lease-duration=2s",
                "--leader-elect-renew-deadline=1500ms",
                "--leader-elect-retry-period=250ms",
            ])
            .args(extra)
            .env_remove("RUST_BACKTRACE")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn kcm run");
        Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log,
        }
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal}");
    }

    /// Waits for the process to exit, up to `limit`.
    async fn exit_within(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running after {limit:?}; logs:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `/readyz?verbose` if the endpoint answers.
    async fn readyz(&self, cert: &Cert) -> Option<(u16, String)> {
        https_get(self.addr, &cert.pem, "/readyz?verbose").await
    }

    async fn is_leading(&self, cert: &Cert) -> bool {
        self.readyz(cert)
            .await
            .is_some_and(|(_, body)| body.contains("[+]leader-election ok: leading\n"))
    }
}

impl Drop for Kcm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` every 50ms until it returns `Some` or `limit` passes (real processes).
async fn poll<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
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

/// `GET path` over HTTPS trusting `ca_pem`; `None` when nothing answers.
async fn https_get(addr: SocketAddr, ca_pem: &str, path: &str) -> Option<(u16, String)> {
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
    let tcp = TcpStream::connect(addr).await.ok()?;
    let name = ServerName::try_from("localhost").expect("name");
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await.ok()?;
    let mut raw = Vec::new();
    let _ = tls.read_to_end(&mut raw).await;
    let raw = String::from_utf8(raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

fn replica_set(name: &str, replicas: i32) -> ReplicaSet {
    kcm_testing::replica_set(name)
        .namespace("default")
        .replicas(replicas)
        .selecting(&[("app", name)])
        .container(container("app").image("registry.k8s.io/pause:3.10"))
        .build()
}

async fn live_pods(client: &kube::Client, app: &str) -> usize {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list pods")
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count()
}

async fn lease_holder(client: &kube::Client) -> String {
    Api::<Lease>::namespaced(client.clone(), "kube-system")
        .get_opt("kube-controller-manager")
        .await
        .expect("get lease")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .unwrap_or_default()
}

#[test]
fn help_reads_like_kube_controller_managers() {
    let out = Command::new(KCM)
        .args(["run", "--help"])
        .output()
        .expect("kcm run --help");
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).expect("utf-8");
    for needle in [
        "The Kubernetes controller manager is a daemon",
        "Generic flags:",
        "--controllers <strings>",
        "All controllers: bootstrap-signer-controller, certificatesigningrequest-approving-controller, certificatesigningrequest-cleaner-controller, certificatesigningrequest-signing-controller, cloud-node-lifecycle-controller, clusterrole-aggregation-controller, cronjob-controller, daemonset-controller, deployment-controller, device-taint-eviction-controller, disruption-controller, endpoints-controller, endpointslice-controller, endpointslice-mirroring-controller, ephemeral-volume-controller, garbage-collector-controller, horizontal-pod-autoscaler-controller, job-controller, kube-apiserver-serving-clustertrustbundle-publisher-controller, legacy-serviceaccount-token-cleaner-controller, namespace-controller, node-ipam-controller, node-lifecycle-controller, node-route-controller, persistentvolume-attach-detach-controller, persistentvolume-binder-controller, persistentvolume-expander-controller, persistentvolume-protection-controller, persistentvolumeclaim-protection-controller, pod-garbage-collector-controller, podcertificaterequest-cleaner-controller, podgroup-protection-controller, replicaset-controller, replicationcontroller-controller, resourceclaim-controller, resourcepoolstatusrequest-controller, resourcequota-controller, root-ca-certificate-publisher-controller, selinux-warning-controller, service-cidr-controller, service-lb-controller, serviceaccount-controller, serviceaccount-token-controller, statefulset-controller, storage-version-migrator-controller, storageversion-garbage-collector-controller, taint-eviction-controller, token-cleaner-controller, ttl-after-finished-controller, ttl-controller, validatingadmissionpolicy-status-controller, volumeattributesclass-protection-controller",
        "Disabled-by-default controllers: bootstrap-signer-controller, selinux-warning-controller, token-cleaner-controller",
        "--feature-gates <colonSeparatedMultimapStringString>",
        "DaemonSet controller flags:",
        "--concurrent-daemonset-syncs <int32>",
        "StatefulSet controller flags:",
        "--concurrent-statefulset-syncs <int32>",
        "--concurrent-rc-syncs <int32>",
        "--leader-elect-lease-duration <duration>",
        "[default: 15s]",
        "[default: 12h0m0s]",
        "Secure serving flags:",
        "[default: 10257]",
        "ReplicaSet controller flags:",
        "--concurrent-replicaset-syncs <int32>",
        "Job controller flags:",
        "--concurrent-job-syncs <int32>",
        "--terminated-pod-gc-threshold <int32>",
        "Misc flags:",
        "--kubeconfig <string>",
        "Logs flags:",
        "-v, --v <Level>",
    ] {
        assert!(help.contains(needle), "missing {needle:?} in\n{help}");
    }
}

#[test]
fn unknown_controllers_are_refused_listing_the_known_ones() {
    let out = Command::new(KCM)
        .args(["run", "--secure-port=0", "--controllers=*,-frobnicator"])
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("kcm run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "\"frobnicator\" is not in the list of known controllers; known controllers: \
             bootstrap-signer-controller, \
             certificatesigningrequest-approving-controller, \
             certificatesigningrequest-cleaner-controller, \
             certificatesigningrequest-signing-controller, \
             cloud-node-lifecycle-controller, \
             clusterrole-aggregation-controller, \
             cronjob-controller, \
             daemonset-controller, \
             deployment-controller, \
             device-taint-eviction-controller, \
             disruption-controller, \
             endpoints-controller, \
             endpointslice-controller, \
             endpointslice-mirroring-controller, \
             ephemeral-volume-controller, \
             garbage-collector-controller, \
             horizontal-pod-autoscaler-controller, \
             job-controller, \
             kube-apiserver-serving-clustertrustbundle-publisher-controller, \
             legacy-serviceaccount-token-cleaner-controller, \
             namespace-controller, \
             node-ipam-controller, \
             node-lifecycle-controller, \
             node-route-controller, \
             persistentvolume-attach-detach-controller, \
             persistentvolume-binder-controller, \
             persistentvolume-expander-controller, \
             persistentvolume-protection-controller, \
             persistentvolumeclaim-protection-controller, \
             pod-garbage-collector-controller, \
             podcertificaterequest-cleaner-controller, \
             podgroup-protection-controller, \
             replicaset-controller, \
             replicationcontroller-controller, \
             resourceclaim-controller, \
             resourcepoolstatusrequest-controller, \
             resourcequota-controller, \
             root-ca-certificate-publisher-controller, \
             selinux-warning-controller, \
             service-cidr-controller, \
             service-lb-controller, \
             serviceaccount-controller, \
             serviceaccount-token-controller, \
             statefulset-controller, \
             storage-version-migrator-controller, \
             storageversion-garbage-collector-controller, \
             taint-eviction-controller, \
             token-cleaner-controller, \
             ttl-after-finished-controller, \
             ttl-controller, \
             validatingadmissionpolicy-status-controller, \
             volumeattributesclass-protection-controller"
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_dies_by_sigkill_then_hands_over_on_sigterm() {
    let server = TestServer::start().await;
    let client = server.client();
    let kubeconfig = server.kubeconfig_path().to_owned();
    let cert = Cert::new();
    let logs = tempfile::tempdir().expect("logs");
    Api::<ReplicaSet>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &replica_set("web", 2))
        .await
        .expect("create rs");

    let mut procs = vec![
        Kcm::spawn(&kubeconfig, &cert, logs.path(), "a", &[]),
        Kcm::spawn(&kubeconfig, &cert, logs.path(), "b", &[]),
    ];
    // Both serve; exactly one leads, and both are ready (a standby must not block rollouts).
    let leader = poll(Duration::from_secs(30), "one leader", || async {
        let mut leading = Vec::new();
        for (i, p) in procs.iter().enumerate() {
            if p.is_leading(&cert).await {
                leading.push(i);
            }
        }
        (leading.len() == 1).then(|| leading[0])
    })
    .await;
    let standby = 1 - leader;
    for p in &procs {
        poll(Duration::from_secs(30), "/readyz to pass", || async {
            p.readyz(&cert)
                .await
                .filter(|(code, _)| *code == 200)
                .map(|_| ())
        })
        .await;
    }
    assert!(!lease_holder(&client).await.is_empty());
    poll(Duration::from_secs(30), "2 pods", || async {
        (live_pods(&client, "web").await == 2).then_some(())
    })
    .await;

    // SIGKILL: no release; the standby takes over once the lease expires.
    let dead_holder = lease_holder(&client).await;
    procs[leader].child.kill().expect("SIGKILL");
    let killed = Instant::now();
    procs[leader].child.wait().expect("reap");
    poll(Duration::from_secs(20), "the standby to lead", || async {
        procs[standby].is_leading(&cert).await.then_some(())
    })
    .await;
    let took = killed.elapsed();
    assert!(
        took <= LEASE + 2 * JITTERED_RETRY + SLACK,
        "took {took:?} to replace a killed leader"
    );
    let holder = lease_holder(&client).await;
    assert!(!holder.is_empty() && holder != dead_holder);
    assert_eq!(live_pods(&client, "web").await, 2, "no duplicate pods");

    // A third instance becomes the standby; SIGTERM the leader: exit 0, lease released,
    // the standby leads within about two retry periods.
    procs.push(Kcm::spawn(&kubeconfig, &cert, logs.path(), "c", &[]));
    poll(
        Duration::from_secs(30),
        "the third instance to observe the leader",
        || async {
            procs[2]
                .readyz(&cert)
                .await
                .filter(|(_, body)| body.contains(&format!("standby, leader is {holder}")))
                .map(|_| ())
        },
    )
    .await;
    procs[standby].signal("TERM");
    let status = procs[standby].exit_within(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "logs:\n{}", procs[standby].logs());
    let exited = Instant::now();
    poll(
        Duration::from_secs(10),
        "the third instance to lead",
        || async { procs[2].is_leading(&cert).await.then_some(()) },
    )
    .await;
    let took = exited.elapsed();
    assert!(
        took <= 2 * JITTERED_RETRY + SLACK,
        "took {took:?} after a graceful stop"
    );
    let logs_b = procs[standby].logs();
    assert!(logs_b.contains("released leader lease"), "{logs_b}");

    // The last one stops gracefully too and leaves the lease free.
    procs[2].signal("INT");
    let status = procs[2].exit_within(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "logs:\n{}", procs[2].logs());
    assert_eq!(lease_holder(&client).await, "", "released on exit");
}

/// A TCP proxy that can stop forwarding (a frozen network) without closing connections.
async fn freezable_proxy(upstream: SocketAddr) -> (SocketAddr, watch::Sender<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (frozen_tx, frozen_rx) = watch::channel(false);
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let Ok(outbound) = TcpStream::connect(upstream).await else {
                continue;
            };
            let (ri, wi) = inbound.into_split();
            let (ro, wo) = outbound.into_split();
            tokio::spawn(pipe(ri, wo, frozen_rx.clone()));
            tokio::spawn(pipe(ro, wi, frozen_rx.clone()));
        }
    });
    (addr, frozen_tx)
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if frozen.wait_for(|f| !*f).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once_with_status_1() {
    let server = TestServer::start().await;
    let client = server.client();
    let upstream: SocketAddr = server
        .url()
        .trim_start_matches("https://")
        .parse()
        .expect("server address");
    let (proxy, freeze) = freezable_proxy(upstream).await;
    let cert = Cert::new();
    let logs = tempfile::tempdir().expect("logs");
    // Long timings: releasing the lease through a frozen network blocks the graceful stop
    // for up to the renew deadline (20s).
    let mut kcm = Kcm::spawn(
        server.kubeconfig_path(),
        &cert,
        logs.path(),
        "solo",
        &[
            &format!("--master=https://{proxy}"),
            "--leader-elect-lease-duration=30s",
            "--leader-elect-renew-deadline=20s",
            "--leader-elect-retry-period=1s",
        ],
    );
    poll(Duration::from_secs(30), "kcm to lead", || async {
        kcm.is_leading(&cert).await.then_some(())
    })
    .await;
    assert!(!lease_holder(&client).await.is_empty());

    freeze.send_replace(true);
    kcm.signal("TERM");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        kcm.child.try_wait().expect("try_wait").is_none(),
        "the graceful stop should still be waiting on the frozen API server; logs:\n{}",
        kcm.logs()
    );
    kcm.signal("INT");
    let status = kcm.exit_within(Duration::from_secs(3)).await;
    assert_eq!(status.code(), Some(1), "logs:\n{}", kcm.logs());
    assert!(
        kcm.logs().contains("second shutdown signal"),
        "{}",
        kcm.logs()
    );
}
