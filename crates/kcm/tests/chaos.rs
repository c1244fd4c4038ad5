//! Chaos tests of the control loop: Deployments scale up and roll out while writes fail, watches expire, the API server restarts, `kcm up` is SIGKILLed and the leading `kcm run` dies — and never over-create.
//!
//! Each scenario prints its seed (`CHAOS_SEED=N` replays it). Waits are polls with deadlines;
//! the only sleeps choose when a fault happens. Sizes are scaled down from the issue's
//! 50 × 20 so that the whole binary stays within a few minutes on a debug build;
//! `CHAOS_DEPLOYMENTS=50` runs every scenario with that many Deployments.

mod chaos_support;
#[path = "kcm_up/mod.rs"]
mod kcm_up;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chaos_support::census::Census;
use chaos_support::proxy::{FaultProxy, Faults};
use chaos_support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kcm_apiserver::StorageBackend;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{ListParams, PostParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

const OLD_IMAGE: &str = "registry.k8s.io/pause:3.10";
const NEW_IMAGE: &str = "registry.k8s.io/pause:3.9";
/// API server restarts armed for each phase (scale-up, rollout) of the restart scenario.
const RESTARTS_PER_PHASE: usize = 3;

/// A Deployment fleet: `count` Deployments of `replicas`, rolling with `surge`/`unavailable`.
struct Fleet {
    names: Vec<String>,
    replicas: i32,
    surge: i32,
    unavailable: i32,
}

impl Fleet {
    /// `count` Deployments unless `CHAOS_DEPLOYMENTS` says how many.
    fn new(prefix: &str, count: usize, replicas: i32, surge: i32, unavailable: i32) -> Self {
        let count = std::env::var("CHAOS_DEPLOYMENTS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(count);
        Self {
            names: (0..count).map(|i| format!("{prefix}-{i}")).collect(),
            replicas,
            surge,
            unavailable,
        }
    }

    fn pods(&self) -> u64 {
        self.names.len() as u64 * self.replicas as u64
    }

    /// Creates the Deployments (a scale-up from nothing), bounding each in `census`.
    async fn create(&self, client: &kube::Client, census: &Census) {
        for name in &self.names {
            census.bound(name, (self.replicas + self.surge) as usize);
            let d = deployment(name, self.replicas, self.surge, self.unavailable);
            create_deployment(client, &d).await;
        }
    }

    /// Changes every Deployment's image (a rolling update).
    async fn roll(&self, client: &kube::Client, image: &str) {
        for name in &self.names {
            set_image(client, name, image).await;
        }
    }

    async fn wait(&self, client: &kube::Client, image: &str) {
        let started = std::time::Instant::now();
        wait_rolled_out(client, &self.names, image, self.replicas as usize).await;
        println!(
            "{}: rolled out to {image} in {:?}",
            self.names.first().map(String::as_str).unwrap_or_default(),
            started.elapsed()
        );
    }
}

/// A memory-backed API server on plain HTTP (so a proxy can sit in front), the controllers
/// behind `proxy`, the scheduler and nodes talking to the server directly.
struct ProxiedCluster {
    server: kcm_apiserver::RunningServer,
    proxy: FaultProxy,
    direct: kube::Client,
    cancel: CancellationToken,
    manager: kcm_controllers::manager::RunningManager,
    _dir: tempfile::TempDir,
}

impl ProxiedCluster {
    async fn start(faults: Faults, seed: u64, nodes: usize) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = start_server(&server_config(dir.path(), StorageBackend::Memory, false)).await;
        let proxy = FaultProxy::start(server.url(), faults, seed).await;
        let direct = server.client().expect("client");
        let cancel = CancellationToken::new();
        start_nodes(direct.clone(), nodes, &cancel);
        let manager = start_manager(kube_config_via(&server, &proxy.url()), &cancel).await;
        Self {
            server,
            proxy,
            direct,
            cancel,
            manager,
            _dir: dir,
        }
    }

    async fn stop(self) {
        self.cancel.cancel();
        let _ = self.manager.wait().await;
        self.server.shutdown().await;
    }
}

/// Scenario 1: a fifth of the controllers' writes fail (409 Conflict, 500, 429 with
/// Retry-After) → the fleet scales up and rolls out, creating each pod exactly once and
/// retrying at a bounded rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_converge_through_failing_writes_without_a_hot_loop() {
    support::init_logging();
    let seed = seed("failing_writes");
    let faults = Faults {
        write_fault_rate: std::env::var("CHAOS_RATE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.2),
        ..Faults::default()
    };
    let cluster = ProxiedCluster::start(faults, seed, 4).await;
    let client = cluster.direct.clone();
    let census = Census::start(client.clone(), NS);
    let fleet = Fleet::new("writes", 6, 20, 5, 5);

    fleet.create(&client, &census).await;
    fleet.wait(&client, OLD_IMAGE).await;
    fleet.roll(&client, NEW_IMAGE).await;
    fleet.wait(&client, NEW_IMAGE).await;

    let proxy = &cluster.proxy;
    println!(
        "failing_writes: requests through the proxy\n{}",
        proxy.summary()
    );
    let creates = proxy.tally("create", "pods");
    let writes = proxy.writes();
    // Every pod the fleet needs, once: the scale-up's and the new ReplicaSets'.
    assert_eq!(creates.succeeded, 2 * fleet.pods(), "pods created");
    assert_eq!(
        proxy.tally("create", "replicasets").succeeded,
        2 * fleet.names.len() as u64,
        "ReplicaSets created"
    );
    assert!(writes.faulted > 0, "the proxy injected no fault");
    // No hot loop: at a 20 % fault rate a write takes 1.25 attempts on average; a retry loop
    // that ignores its rate limiter or re-writes unchanged objects would be far above these.
    assert!(
        creates.requests <= 2 * creates.succeeded,
        "pod creates: {creates:?}"
    );
    // The ideal: per pod a create, a delete (the old ones) and about two status updates of
    // its ReplicaSet and of its Deployment; the bound leaves room for retries and events.
    let ideal = 6 * 2 * fleet.pods();
    assert!(
        writes.requests <= 2 * ideal,
        "{} writes for an ideal of about {ideal}",
        writes.requests
    );
    census.finish().await;
    cluster.stop().await;
}

/// Scenario 2: the controllers' watches are refused with 410 Gone or end with an ERROR 410
/// event every second or so → the informers relist and the fleet converges with no
/// duplicate create.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_watches_relist_without_duplicate_creates() {
    support::init_logging();
    let seed = seed("expired_watches");
    let faults = Faults {
        watch_gone_rate: 0.3,
        watch_expire_after: Some(Duration::from_millis(1500)),
        watch_fault_budget: 2,
        ..Faults::default()
    };
    let cluster = ProxiedCluster::start(faults, seed, 3).await;
    let client = cluster.direct.clone();
    let census = Census::start(client.clone(), NS);
    let fleet = Fleet::new("watches", 4, 20, 5, 5);

    fleet.create(&client, &census).await;
    fleet.wait(&client, OLD_IMAGE).await;
    cluster.proxy.rearm_watch_faults();
    fleet.roll(&client, NEW_IMAGE).await;
    fleet.wait(&client, NEW_IMAGE).await;

    let proxy = &cluster.proxy;
    println!(
        "expired_watches: requests through the proxy\n{}",
        proxy.summary()
    );
    let creates = proxy.tally("create", "pods");
    assert_eq!(
        creates.requests,
        2 * fleet.pods(),
        "pod creates: {creates:?}"
    );
    assert_eq!(
        creates.succeeded,
        2 * fleet.pods(),
        "pod creates: {creates:?}"
    );
    // A ReplicaSet create may be repeated while the informer sleeps off a 410 (its name is
    // the template hash, so the server answers AlreadyExists): only one ever succeeds.
    assert_eq!(
        proxy.tally("create", "replicasets").succeeded,
        2 * fleet.names.len() as u64,
        "ReplicaSet creates"
    );
    for resource in ["pods", "replicasets", "deployments"] {
        // Every informer's first watch fails within 1.5 s, long before the rollout is done:
        // at least one relist each (how many more depends on the backoff's jitter).
        let lists = proxy.tally("list", resource);
        assert!(lists.requests >= 2, "{resource} relisted: {lists:?}");
    }
    census.finish().await;
    cluster.stop().await;
}

/// Scenario 3: the API server (SQLite, TLS) restarts on its port every one to three seconds
/// during a scale-up and a rolling update → the fleet converges, and a census that relists
/// after every restart never sees more than `replicas + maxSurge` live pods of a Deployment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_restarts_during_a_rollout_never_over_create() {
    support::init_logging();
    let seed = seed("restarts");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = server_config(dir.path(), StorageBackend::Sqlite, true);
    let server = start_server(&config).await;
    // Every later start binds the same port, so that the clients find it again.
    config.listen = server.addr();
    let kube_config = server.kube_config();
    let client = server.client().expect("client");
    let cancel = CancellationToken::new();
    start_nodes(client.clone(), 3, &cancel);
    let manager = start_manager(kube_config, &cancel).await;
    let census = Census::start(client.clone(), NS);

    // Restarts are armed per phase: each one makes every reflector back off before it
    // relists (800 ms doubling, reset after two quiet minutes, as client-go's), so an
    // unbounded series would leave the informers asleep for most of a minute.
    let armed = Arc::new(std::sync::atomic::AtomicUsize::new(RESTARTS_PER_PHASE));
    let stop_restarts = CancellationToken::new();
    let restarts = tokio::spawn({
        let stop = stop_restarts.clone();
        let armed = Arc::clone(&armed);
        let mut rng = StdRng::seed_from_u64(seed);
        async move {
            let mut server = server;
            let mut count = 0u32;
            loop {
                let pause = Duration::from_millis(rng.random_range(300..1500));
                tokio::select! {
                    () = stop.cancelled() => return (server, count),
                    () = tokio::time::sleep(pause) => {}
                }
                let take =
                    armed.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
                if take.is_ok() {
                    server.shutdown().await;
                    server = start_server(&config).await;
                    count += 1;
                }
            }
        }
    });

    // Each phase waits for its restarts before waiting for convergence, so a machine fast
    // enough to converge before the first restart still sees every restart (the count is then
    // exact, not a race with the rollout).
    let restarted = |armed: Arc<std::sync::atomic::AtomicUsize>| async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while armed.load(Ordering::SeqCst) > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "restarts never happened"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let fleet = Fleet::new("restarts", 4, 20, 5, 5);
    fleet.create(&client, &census).await;
    restarted(Arc::clone(&armed)).await;
    fleet.wait(&client, OLD_IMAGE).await;
    armed.store(RESTARTS_PER_PHASE, Ordering::SeqCst);
    fleet.roll(&client, NEW_IMAGE).await;
    restarted(Arc::clone(&armed)).await;
    fleet.wait(&client, NEW_IMAGE).await;

    stop_restarts.cancel();
    let (server, count) = restarts.await.expect("restarts");
    println!(
        "restarts: {count} restarts, the census listed {} times",
        census.lists()
    );
    assert!(count >= 2, "only {count} restarts happened");
    for name in &fleet.names {
        // Each Deployment created its scale-up's pods and its rollout's, no more.
        assert_eq!(
            census.ever(name),
            2 * fleet.replicas as usize,
            "pods ever seen of {name}"
        );
    }
    census.finish().await;
    cancel.cancel();
    let _ = manager.wait().await;
    server.shutdown().await;
}

/// A kube client from a kubeconfig file.
async fn client_from(kubeconfig: &Path) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    kube::Client::try_from(config).expect("client")
}

/// Scenario 4: `kcm up` is SIGKILLed mid-rollout while a writer creates ConfigMaps, and
/// started again on the same data dir → the rollout completes, and every ConfigMap the
/// writer got a 2xx for is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcm_up_killed_mid_rollout_resumes_and_keeps_every_acknowledged_object() {
    support::init_logging();
    let seed = seed("kcm_up_kill");
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = kcm_up::Backend::sqlite();
    let up = kcm_up::Up::start(&backend, dir.path(), &["--nodes", "2"], "warn");
    let client = client_from(&up.kubeconfig).await;
    let fleet = Fleet::new("up", 2, 20, 5, 5);
    let census = Census::start(client.clone(), NS);
    fleet.create(&client, &census).await;
    fleet.wait(&client, OLD_IMAGE).await;

    // The writer: ConfigMaps one after another, remembering each acknowledged name.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop_writer = CancellationToken::new();
    let writer = tokio::spawn({
        let acked = Arc::clone(&acked);
        let stop = stop_writer.clone();
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
        async move {
            for i in 0u32.. {
                if stop.is_cancelled() {
                    return;
                }
                let name = format!("acked-{i}");
                let mut cm = ConfigMap::default();
                cm.metadata.name = Some(name.clone());
                let params = PostParams::default();
                let create = tokio::time::timeout(Duration::from_secs(5), cms.create(&params, &cm));
                if let Ok(Ok(_)) = create.await {
                    acked.lock().expect("acked").push(name);
                }
            }
        }
    });

    fleet.roll(&client, NEW_IMAGE).await;
    // Mid-rollout: some new pods exist, the rollout is not complete.
    let mut rng = StdRng::seed_from_u64(seed);
    let new_pods_before_kill = rng.random_range(2..10);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), NS);
    wait_for("the rollout under way", CONVERGE, || async {
        let list = pods.list(&ListParams::default().labels("app")).await.ok()?;
        let new = list
            .items
            .iter()
            .filter(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.containers.first())
                    .and_then(|c| c.image.as_deref())
                    == Some(NEW_IMAGE)
            })
            .count();
        (new >= new_pods_before_kill).then_some(())
    })
    .await;
    drop(census);
    drop(up); // SIGKILL
    stop_writer.cancel();
    writer.await.expect("writer");
    let acked = acked.lock().expect("acked").clone();
    println!(
        "kcm_up_kill: killed after {new_pods_before_kill}+ new pods and {} acknowledged ConfigMaps",
        acked.len()
    );
    assert!(!acked.is_empty(), "the writer got no acknowledgement");

    let up = kcm_up::Up::start(&backend, dir.path(), &["--nodes", "2"], "warn");
    let client = client_from(&up.kubeconfig).await;
    fleet.wait(&client, NEW_IMAGE).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let stored: std::collections::HashSet<String> = cms
        .list(&ListParams::default())
        .await
        .expect("list ConfigMaps")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let lost: Vec<&String> = acked.iter().filter(|n| !stored.contains(*n)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged ConfigMaps lost: {lost:?}\n{}",
        lost.len(),
        acked.len(),
        up.logs()
    );
    for name in &fleet.names {
        let sets = replica_sets_of(&client, name).await;
        assert_eq!(sets.len(), 2, "ReplicaSets of {name}");
    }
}

/// A `kcm run` process logging at info to `log`; SIGKILLed when dropped.
struct KcmRun {
    child: Child,
    log: PathBuf,
}

impl KcmRun {
    fn spawn(kubeconfig: &Path, log: PathBuf) -> Self {
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_kcm"))
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "--secure-port=0",
                "--controllers=deployment-controller,replicaset-controller",
                // Slow creates, so that the leader dies mid scale-up.
                "--kube-api-qps=10",
                "--kube-api-burst=10",
                "--leader-elect-lease-duration=2s",
                "--leader-elect-renew-deadline=1500ms",
                "--leader-elect-retry-period=250ms",
            ])
            .env("KCM_LOG", "info")
            .env_remove("RUST_BACKTRACE")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn kcm run");
        Self { child, log }
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn leads(&self) -> bool {
        self.logs().contains("successfully acquired lease")
    }
}

impl Drop for KcmRun {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let logs = self.logs();
            let tail: Vec<&str> = logs.lines().rev().take(80).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            eprintln!("--- {} tail ---\n{}", self.log.display(), tail.join("\n"));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Scenario 5: two `kcm run` processes elect a leader; it is SIGKILLed during a scale-up →
/// the other takes the lease and finishes the scale-up, never over-creating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_during_a_scale_up_the_new_leader_finishes_without_over_creating() {
    support::init_logging();
    let seed = seed("leader_failover");
    let server = TestServer::start().await;
    let client = server.client();
    let cancel = CancellationToken::new();
    start_nodes(client.clone(), 2, &cancel);
    let logs = tempfile::tempdir().expect("tempdir");
    let mut managers = [
        Some(KcmRun::spawn(
            server.kubeconfig_path(),
            logs.path().join("a.log"),
        )),
        Some(KcmRun::spawn(
            server.kubeconfig_path(),
            logs.path().join("b.log"),
        )),
    ];
    let leader = wait_for("a leader", CONVERGE, || async {
        managers
            .iter()
            .position(|m| m.as_ref().is_some_and(KcmRun::leads))
    })
    .await;

    let census = Census::start(client.clone(), NS);
    let fleet = Fleet::new("failover", 2, 30, 5, 5);
    fleet.create(&client, &census).await;
    for name in &fleet.names {
        // A scale-up has no surge: never more than the replicas.
        census.bound(name, fleet.replicas as usize);
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let kill_after = rng.random_range(5..25);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), NS);
    let created = wait_for("the scale-up under way", CONVERGE, || async {
        let n = pods
            .list(&ListParams::default().labels("app"))
            .await
            .ok()?
            .items
            .len();
        (n >= kill_after).then_some(n)
    })
    .await;
    let killed = managers[leader].take().expect("leader");
    drop(killed); // SIGKILL
    let standby = managers[1 - leader].as_ref().expect("standby");
    wait_for("the standby to lead", CONVERGE, || async {
        standby.leads().then_some(())
    })
    .await;
    println!(
        "leader_failover: leader killed with {created} of {} pods created",
        fleet.pods()
    );

    fleet.wait(&client, OLD_IMAGE).await;
    for name in &fleet.names {
        assert_eq!(
            census.ever(name),
            fleet.replicas as usize,
            "pods ever created for {name}"
        );
        assert_eq!(
            census.max_live(name),
            fleet.replicas as usize,
            "most live pods of {name}"
        );
    }
    census.finish().await;
    cancel.cancel();
}
