//! `kcm up`: the embedded cluster in one process — API server, controllers, scheduler, nodes.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser};
use kcm_apiserver::registry::components::ComponentHealth;
use kcm_apiserver::registry::service_ip::ServiceIpRange;
use kcm_apiserver::{RunningServer, Server, ServerConfig, StorageBackend};

use crate::admission_flags::AdmissionFlags;
use kcm_controllers::cloud::simulated::{IpPool, SimulatedCloud, SimulatedProvider};
use kcm_controllers::manager::{
    ControllerManager, ControllerRegistry, ManagerOptions, RunningManager, install_signal_handler,
};
use kcm_machinery::events::{EventBroadcaster, KubeEventSink};
use kcm_machinery::informer::SharedInformerFactory;
use kcm_sim::scheduler::DEFAULT_SCHEDULER_NAME;
use kcm_sim::storage::{
    Attacher, KubeVolumeClient, Provisioner, Resizer, default_storage_class, resizer,
};
use kcm_sim::{Scheduler, Simulator, SimulatorConfig};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// The data directory's name under the per-user data directory.
const APP_DIR: &str = "kcm";
/// Held (locked) while a `kcm up` uses the data directory, so a second one refuses it.
const LOCK_FILE: &str = "kcm-up.lock";
/// The pod network the node IPAM controller splits among the nodes: at the default
/// `--node-cidr-mask-size` of 24, 8,192 nodes' worth (Kubernetes' scalability limit is 5,000
/// nodes). It holds flannel's and kind's `10.244.0.0/16` and overlaps no Service network.
pub const DEFAULT_CLUSTER_CIDR: &str = "10.224.0.0/11";
/// Each node's pod CIDR prefix length (kube-controller-manager's IPv4 default): 254 pod IPs,
/// above the kubelet's 110-pod limit.
pub const DEFAULT_NODE_CIDR_MASK_SIZE: u8 = 24;

/// Flags of `kcm up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Where the cluster's state (SQLite store), CA, token and kubeconfig live; restarting on
    /// the same directory resumes the cluster. Default: `$XDG_DATA_HOME/kcm`, else
    /// `~/.local/share/kcm`.
    #[arg(long, env = "KCM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address of the API server; port 0 picks a free port (the kubeconfig holds the real one).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// How many simulated nodes (`kcm-node-0` ..) to run.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// The pod network the node IPAM controller splits into one pod CIDR per node
    /// (kube-controller-manager's flag); it must hold a block for every node.
    #[arg(long, value_name = "cidr", default_value = DEFAULT_CLUSTER_CIDR)]
    pub cluster_cidr: String,
    /// The prefix length of each node's pod CIDR (kube-controller-manager's flag).
    #[arg(long, value_name = "bits", default_value_t = DEFAULT_NODE_CIDR_MASK_SIZE)]
    pub node_cidr_mask_size: u8,
    /// How long a scheduled pod stays Pending before it runs (Go duration: 500ms, 2s, 1m).
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub pod_ready_delay: Duration,
    /// Devices the simulated DRA driver `gpu.sim.kcm.io` publishes on each node (one
    /// ResourceSlice per node, allocatable through the DeviceClass `gpu.sim.kcm.io`); 0
    /// publishes none.
    #[arg(long, value_name = "n", default_value_t = kcm_sim::dra::DEFAULT_DEVICES_PER_NODE)]
    pub dra_devices_per_node: usize,
    /// The share of its requests a simulated container uses, as `kubectl top` and the
    /// HorizontalPodAutoscaler see it, unless its pod's `sim.kcm.io/cpu-usage` /
    /// `sim.kcm.io/memory-usage` annotations say otherwise.
    #[arg(long, default_value_t = kcm_sim::usage::DEFAULT_USAGE_SHARE, value_parser = parse_share)]
    pub pod_usage_share: f64,
    /// The HorizontalPodAutoscaler controller's period (kube-controller-manager's flag).
    #[arg(long, value_name = "duration", default_value = "15s")]
    pub horizontal_pod_autoscaler_sync_period: String,
    /// How long the HorizontalPodAutoscaler controller waits before scaling down
    /// (kube-controller-manager's flag).
    #[arg(long, value_name = "duration", default_value = "5m0s")]
    pub horizontal_pod_autoscaler_downscale_stabilization: String,
    /// How long after a pod's start the HorizontalPodAutoscaler controller may skip its CPU
    /// samples (kube-controller-manager's flag).
    #[arg(long, value_name = "duration", default_value = "5m0s")]
    pub horizontal_pod_autoscaler_cpu_initialization_period: String,
    /// How long a legacy service account token Secret may go unused before it is marked
    /// invalid, and then stay invalid before it is deleted (kube-controller-manager's flag).
    #[arg(long, value_name = "duration", default_value = "8760h0m0s")]
    pub legacy_service_account_token_clean_up_period: String,
    /// The API server's request limits.
    #[command(flatten)]
    pub limits: crate::server_limits::LimitArgs,
    /// Keep the cluster's objects in etcd instead of DATA_DIR/state.db.
    #[command(flatten)]
    pub etcd: crate::etcd_flags::EtcdFlags,
    /// The API server's admission plugins.
    #[command(flatten)]
    pub admission: AdmissionFlags,
    /// QPS of the embedded controllers' client (kube-controller-manager's flag; a negative
    /// value disables the limit). Higher than upstream's 20: the API server is in this process.
    #[arg(long, default_value_t = UP_KUBE_API_QPS, allow_negative_numbers = true)]
    pub kube_api_qps: f32,
    /// Burst of the embedded controllers' client (kube-controller-manager's flag).
    #[arg(long, default_value_t = UP_KUBE_API_BURST)]
    pub kube_api_burst: u32,
    /// The addresses the simulated cloud gives `LoadBalancer` Services (an IPv4 CIDR; the
    /// default is TEST-NET-1, RFC 5737, which routes nowhere).
    #[arg(
        long,
        value_name = "cidr",
        default_value = kcm_controllers::cloud::simulated::DEFAULT_POOL,
        value_parser = parse_pool
    )]
    pub load_balancer_ip_pool: IpPool,
}

fn parse_pool(s: &str) -> Result<IpPool, String> {
    IpPool::parse(s).map_err(|err| err.to_string())
}

/// `kcm up`'s `--kube-api-qps`: kube-controller-manager's 20 throttles a cluster whose API
/// server shares the process (BENCHMARKS.md, "`kcm bench`"); `kcm run` keeps 20.
pub const UP_KUBE_API_QPS: f32 = 1000.0;
/// `kcm up`'s `--kube-api-burst` (`kcm run` keeps upstream's 30).
pub const UP_KUBE_API_BURST: u32 = 2000;

fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "invalid share {s:?} (a number such as 0.25 or 1.5)"
        )),
    }
}

pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    kcm_sim::kubelet::parse_duration(s)
        .ok_or_else(|| format!("invalid duration {s:?} (use e.g. 500ms, 2s, 1m30s)"))
}

impl UpArgs {
    /// Checks that `--cluster-cidr` split at `--node-cidr-mask-size` holds a pod CIDR for
    /// every node (blocks overlapping the Service network are never handed out, as the node
    /// IPAM controller's), so that a cluster too big for its pod network fails at once with
    /// the numbers instead of nodes waiting for CIDRs that never come.
    pub(crate) fn check_pod_network(&self) -> anyhow::Result<()> {
        let services = &self.limits.service_cluster_ip_range;
        let capacity = pod_cidr_capacity(&self.cluster_cidr, self.node_cidr_mask_size, services)?;
        if capacity < self.nodes {
            anyhow::bail!(
                "--nodes {} needs {} pod CIDRs, but --cluster-cidr {} split into /{} blocks \
                 holds {capacity} (outside the Service network {services}): \
                 give a wider --cluster-cidr or a longer --node-cidr-mask-size",
                self.nodes,
                self.nodes,
                self.cluster_cidr,
                self.node_cidr_mask_size,
            );
        }
        Ok(())
    }

    /// The simulated nodes these flags describe (everything else is `kcm sim`'s default).
    fn simulator_config(&self) -> SimulatorConfig {
        SimulatorConfig {
            nodes: self.nodes,
            pod_ready_delay: self.pod_ready_delay,
            dra_devices_per_node: self.dra_devices_per_node,
            ..SimulatorConfig::default()
        }
    }
}

/// How many node pod CIDRs `cluster_cidr` split at `mask` holds outside the Service network,
/// with the node IPAM controller's own checks of the two flags (upstream's messages).
fn pod_cidr_capacity(
    cluster_cidr: &str,
    mask: u8,
    services: &ServiceIpRange,
) -> anyhow::Result<usize> {
    use kcm_controllers::nodeipam::{Cidr, CidrSet, NodeIpamFlags};
    let flags = NodeIpamFlags {
        cluster_cidr: cluster_cidr.to_owned(),
        node_cidr_mask_size: i32::from(mask),
        service_cluster_ip_range: services.to_string(),
        ..NodeIpamFlags::default()
    };
    let config = flags
        .config()
        .context("--cluster-cidr / --node-cidr-mask-size")?;
    let mut capacity = usize::MAX;
    for (cidr, size) in config.cluster_cidrs.iter().zip(&config.node_mask_sizes) {
        let mut set = CidrSet::new(*cidr, *size)
            .with_context(|| format!("--cluster-cidr {cidr} at /{size}"))?;
        if let Some(service) = config.service_cidr.filter(|s: &Cidr| s.overlaps(cidr)) {
            // The Service network's blocks, occupied as the controller does at its start;
            // a Service network of the other family covers none.
            let _ = set.occupy(&service);
        }
        // A dual-stack node needs a block of each family.
        capacity = capacity.min(set.max_cidrs() - set.allocated());
    }
    Ok(capacity)
}

/// The per-user data directory for kcm, from the environment variables `get` returns:
/// `$XDG_DATA_HOME/kcm` (when absolute, as the XDG spec requires), else
/// `$HOME/.local/share/kcm` (`$HOME/Library/Application Support/kcm` on macOS,
/// `%LOCALAPPDATA%\kcm` on Windows). `None` when none of them is set.
fn default_data_dir(get: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| get(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if cfg!(windows) {
        return set("LOCALAPPDATA").map(|d| d.join(APP_DIR));
    }
    if !cfg!(target_os = "macos")
        && let Some(xdg) = set("XDG_DATA_HOME").filter(|p| p.is_absolute())
    {
        return Some(xdg.join(APP_DIR));
    }
    let home = set("HOME")?;
    Some(if cfg!(target_os = "macos") {
        home.join("Library/Application Support").join(APP_DIR)
    } else {
        home.join(".local/share").join(APP_DIR)
    })
}

/// The controller manager's options inside `kcm up`: kube-controller-manager's defaults for
/// everything, but no leader election (one process owns the cluster), no HTTPS endpoint
/// (nothing probes it; `kcm run` serves one), pod CIDRs allocated from `--cluster-cidr`, and
/// each controller running as its own service account with its `system:controller:*` role
/// (`--use-service-account-credentials`, as kubeadm runs kube-controller-manager); the HPA
/// and client-limit flags `kcm up` takes are passed on, and the cluster CA's files, when
/// given, as `--cluster-signing-{cert,key}-file` (as kubeadm does), so that approved CSRs
/// are issued certificates the API server accepts, and the CA certificate as `--root-ca-file`;
/// the API server's service account key, when given, as
/// `--service-account-private-key-file` (the token controller signs legacy tokens with it).
fn manager_options(
    args: Option<&UpArgs>,
    signing_files: Option<(&Path, &Path)>,
    service_account_key: Option<&Path>,
) -> anyhow::Result<ManagerOptions> {
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        options: ManagerOptions,
    }
    let mut argv = vec![
        "kcm-up".to_owned(),
        "--leader-elect=false".to_owned(),
        "--secure-port=0".to_owned(),
        // Pod CIDRs come from the node IPAM controller; the simulated nodes wait for theirs.
        "--allocate-node-cidrs=true".to_owned(),
        "--use-service-account-credentials=true".to_owned(),
    ];
    let default_services = ServiceIpRange::default();
    let (cluster_cidr, mask, services) = args.map_or(
        (
            DEFAULT_CLUSTER_CIDR,
            DEFAULT_NODE_CIDR_MASK_SIZE,
            &default_services,
        ),
        |a| {
            (
                a.cluster_cidr.as_str(),
                a.node_cidr_mask_size,
                &a.limits.service_cluster_ip_range,
            )
        },
    );
    argv.push(format!("--cluster-cidr={cluster_cidr}"));
    argv.push(format!("--node-cidr-mask-size={mask}"));
    // The Service network (the embedded API server's), never handed out to nodes.
    argv.push(format!("--service-cluster-ip-range={services}"));
    if let Some(args) = args {
        argv.push(format!("--kube-api-qps={}", args.kube_api_qps));
        argv.push(format!("--kube-api-burst={}", args.kube_api_burst));
        argv.push(format!(
            "--horizontal-pod-autoscaler-sync-period={}",
            args.horizontal_pod_autoscaler_sync_period
        ));
        argv.push(format!(
            "--horizontal-pod-autoscaler-downscale-stabilization={}",
            args.horizontal_pod_autoscaler_downscale_stabilization
        ));
        argv.push(format!(
            "--horizontal-pod-autoscaler-cpu-initialization-period={}",
            args.horizontal_pod_autoscaler_cpu_initialization_period
        ));
        argv.push(format!(
            "--legacy-service-account-token-clean-up-period={}",
            args.legacy_service_account_token_clean_up_period
        ));
    }
    if let Some((cert, key)) = signing_files {
        argv.push(format!("--cluster-signing-cert-file={}", cert.display()));
        argv.push(format!("--cluster-signing-key-file={}", key.display()));
        argv.push(format!("--root-ca-file={}", cert.display()));
    }
    if let Some(key) = service_account_key {
        argv.push(format!(
            "--service-account-private-key-file={}",
            key.display()
        ));
    }
    let flags = Flags::try_parse_from(argv).context("the controller manager's options")?;
    Ok(flags.options)
}

/// Quotes `s` for a POSIX shell when it has anything but plainly safe characters.
fn shell_quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The block `kcm up` prints once the API server serves.
fn ready_banner(url: &str, kubeconfig: &Path, nodes: usize) -> String {
    let kubeconfig = kubeconfig.display().to_string();
    format!(
        "kcm up: cluster running with {nodes} simulated node{s} (Ctrl-C stops it)\n  \
         API server: {url}\n  kubeconfig: {kubeconfig}\n\n  export KUBECONFIG={quoted}\n",
        s = if nodes == 1 { "" } else { "s" },
        quoted = shell_quote(&kubeconfig),
    )
}

/// Logs to stderr: warnings and errors only, so the banner stays readable; `KCM_LOG` (a
/// tracing filter such as `info` or `info,kcm_sim=debug`) shows more.
pub(crate) fn init_logging() -> anyhow::Result<()> {
    init_logging_with("warn")
}

/// [`init_logging`] with another filter than `warn` when `KCM_LOG` is not set.
pub(crate) fn init_logging_with(default: &str) -> anyhow::Result<()> {
    let filter = match std::env::var("KCM_LOG") {
        Ok(spec) if !spec.is_empty() => {
            EnvFilter::try_new(&spec).with_context(|| format!("KCM_LOG={spec:?}"))?
        }
        _ => EnvFilter::try_new(default).with_context(|| format!("log filter {default:?}"))?,
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init()
        .map_err(|e| anyhow::anyhow!("install the logger: {e}"))
}

/// Takes the data directory's lock file, so that two `kcm up` never share one store. The
/// lock lives as long as the returned file.
fn lock_data_dir(data_dir: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating the data directory {}", data_dir.display()))?;
    let path = data_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "another kcm up is using {} (stop it, or pass a different --data-dir)",
            data_dir.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

/// The scheduler, the simulated nodes and the storage provisioner, as `kcm sim` runs them but
/// on the controller manager's informer factory: in one process, one watch and one cache per
/// resource serve both (a second factory cached every pod twice: BENCHMARKS.md, "Memory of the
/// 10k run"). Their writes still go through their own client.
struct SimulatedNodes {
    /// Writes the scheduler's events; flushed on stop.
    events: EventBroadcaster,
    /// The scheduler's and the simulator's run loops; they end when the token is cancelled.
    tasks: Vec<JoinHandle<()>>,
    /// Set while the scheduler's run loop runs (what `componentstatuses` reports).
    scheduler_running: Arc<AtomicBool>,
}

impl SimulatedNodes {
    /// Starts them on `factory` (the controller manager's, already started): the informers only
    /// they use are started here under `informers_cancel` (the manager's, so that its shutdown
    /// of the factory never waits for them); the run loops stop with `cancel`.
    fn start(
        client: kube::Client,
        factory: &SharedInformerFactory,
        informers_cancel: &CancellationToken,
        config: SimulatorConfig,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Self> {
        let events = EventBroadcaster::new(Arc::new(KubeEventSink::new(client.clone())));
        let recorder = events.recorder(DEFAULT_SCHEDULER_NAME, None);
        let scheduler =
            Scheduler::new(client.clone(), factory, recorder).context("starting the scheduler")?;
        let provisioner = Arc::new(Provisioner::new(
            factory,
            Arc::new(KubeVolumeClient::new(client.clone())),
        ));
        let attacher = Arc::new(Attacher::new(
            factory,
            Arc::new(KubeVolumeClient::new(client.clone())),
        ));
        let resizer = Arc::new(Resizer::new(
            factory,
            Arc::new(KubeVolumeClient::new(client.clone())),
            events.recorder(&resizer::event_component(), None),
        ));
        let simulator = Simulator::new(client, factory, &events, config)
            .context("starting the simulated nodes")?;
        let scheduler_running = Arc::new(AtomicBool::new(true));
        let tasks = vec![
            tokio::spawn({
                let cancel = cancel.clone();
                async move { provisioner.run(Some(default_storage_class()), cancel).await }
            }),
            tokio::spawn({
                let cancel = cancel.clone();
                async move { attacher.run(cancel).await }
            }),
            tokio::spawn({
                let cancel = cancel.clone();
                async move { resizer.run(cancel).await }
            }),
            tokio::spawn({
                let cancel = cancel.clone();
                let running = Arc::clone(&scheduler_running);
                async move {
                    scheduler.run(cancel).await;
                    running.store(false, Ordering::SeqCst);
                }
            }),
            tokio::spawn({
                let cancel = cancel.clone();
                async move { simulator.run(cancel).await }
            }),
        ];
        factory.start(informers_cancel);
        Ok(Self {
            events,
            tasks,
            scheduler_running,
        })
    }

    /// Waits for the run loops (cancel their token first), then flushes the events. Their
    /// informers stop with the token and the controller manager's factory.
    async fn stopped(self) {
        for task in self.tasks {
            if let Err(err) = task.await {
                tracing::error!(%err, "a scheduler or simulator task failed");
            }
        }
        self.events.shutdown().await;
    }
}

/// Tells the API server how the in-process controller manager and scheduler are, for
/// `kubectl get componentstatuses` (upstream probes their `/healthz` ports, which `kcm up`
/// does not open).
fn register_component_probes(
    server: &RunningServer,
    manager: &RunningManager,
    nodes: &SimulatedNodes,
) {
    let components = server.registry().components();
    let health = manager.health().clone();
    components.register(
        "controller-manager",
        Arc::new(move || {
            let answer = health.healthz.respond("healthz", None);
            if answer.status == 200 {
                ComponentHealth::healthy("ok")
            } else {
                ComponentHealth::unhealthy(answer.body.trim().to_owned())
            }
        }),
    );
    let running = Arc::clone(&nodes.scheduler_running);
    components.register(
        "scheduler",
        Arc::new(move || {
            if running.load(Ordering::SeqCst) {
                ComponentHealth::healthy("ok")
            } else {
                ComponentHealth::unhealthy("the scheduler stopped")
            }
        }),
    );
}

/// Runs the cluster until SIGINT/SIGTERM (exit 0 after a graceful stop; a second signal exits
/// 1 at once). Fails when the data directory, the port or a controller cannot be set up.
pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let started = tokio::time::Instant::now();
    init_logging()?;
    let data_dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => default_data_dir(|name| std::env::var_os(name))
            .context("no per-user data directory (HOME is not set): pass --data-dir")?,
    };
    // Absolute, so that the printed `export KUBECONFIG=...` works from any directory.
    let data_dir = std::path::absolute(&data_dir)
        .with_context(|| format!("resolving {}", data_dir.display()))?;
    args.check_pod_network()?;
    let _lock = lock_data_dir(&data_dir)?;

    let cancel = CancellationToken::new();
    install_signal_handler(cancel.clone()).context("installing the signal handler")?;

    let mut config = ServerConfig::new(&data_dir);
    config.listen = args.listen;
    config.storage = match args.etcd.options() {
        Some(etcd) => StorageBackend::Etcd(etcd),
        None => StorageBackend::Sqlite,
    };
    config.compaction_interval = args.etcd.compaction_interval();
    args.limits.apply(&mut config);
    config.admission = args.admission.config();
    let server = Server::start(config).await.with_context(|| {
        format!(
            "starting the API server on {} with data in {} (is another cluster listening? \
             --listen 127.0.0.1:0 picks a free port)",
            args.listen,
            data_dir.display()
        )
    })?;
    tracing::info!(elapsed = ?started.elapsed(), url = server.url(), "API server ready");

    let result = run_cluster(&server, &args, &cancel).await;
    cancel.cancel();
    // Last, so that the controllers' and nodes' final writes (events, statuses) land.
    server.shutdown().await;
    if result.is_ok() {
        eprintln!("kcm up: stopped");
    }
    result
}

/// The controllers and the simulated nodes of a `kcm up`, running against its API server
/// (`kcm bench` starts one too).
pub(crate) struct EmbeddedCluster {
    /// The controller manager.
    pub(crate) manager: RunningManager,
    /// The scheduler, the simulated nodes and the provisioner.
    nodes: SimulatedNodes,
    /// Whether the service account controller runs, creating each namespace's `default`
    /// ServiceAccount.
    mints_service_accounts: bool,
}

impl EmbeddedCluster {
    /// Starts the controllers (with the client limits of `args`) and, with `node_client`, the
    /// scheduler and simulated nodes against `server`; wires the API server's component
    /// statuses, logs and usage to them.
    pub(crate) async fn start(
        server: &RunningServer,
        args: &UpArgs,
        node_client: kube::Client,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Self> {
        let manager = ControllerManager::new(
            manager_options(
                Some(args),
                server.cluster_signing_files(),
                Some(server.service_account_key_file()),
            )?,
            ControllerRegistry::builtin(),
        )
        .context("configuring the controller manager")?
        .with_kube_config(server.kube_config())
        .with_cloud(Arc::new(SimulatedProvider(SimulatedCloud::new(
            args.load_balancer_ip_pool,
        ))));
        let enabled = manager.enabled_controllers();
        tracing::info!(controllers = ?enabled, "Controllers enabled");
        let mints_service_accounts = enabled
            .iter()
            .any(|c| c == kcm_controllers::serviceaccount::CONTROLLER_NAME);
        let manager = manager
            .start(cancel.child_token())
            .await
            .context("starting the controller manager")?;
        let nodes = match manager.informer_factory().await {
            Some(informers) => SimulatedNodes::start(
                node_client,
                &informers.factory,
                &informers.cancel,
                args.simulator_config(),
                cancel,
            ),
            None => Err(anyhow::anyhow!(
                "the controller manager stopped before building its informers"
            )),
        };
        let nodes = match nodes {
            Ok(nodes) => nodes,
            Err(err) => {
                cancel.cancel();
                let _ = manager.wait().await;
                return Err(err);
            }
        };

        register_component_probes(server, &manager, &nodes);
        server
            .registry()
            .logs()
            .set(Arc::new(crate::sim_logs::SimLogs));
        server
            .registry()
            .usage()
            .set(Arc::new(crate::sim_usage::SimUsage {
                config: kcm_sim::usage::UsageConfig {
                    default_share: args.pod_usage_share,
                    ..kcm_sim::usage::UsageConfig::default()
                },
            }));
        Ok(Self {
            manager,
            nodes,
            mints_service_accounts,
        })
    }

    /// Cancels `cancel`, then waits for the controllers and the nodes to stop.
    pub(crate) async fn stop(self, cancel: &CancellationToken) -> anyhow::Result<()> {
        cancel.cancel();
        let result = self.manager.wait().await.context("the controller manager");
        self.nodes.stopped().await;
        result
    }
}

/// How long `kcm up` waits for `default/default` before printing its banner anyway.
const DEFAULT_SERVICE_ACCOUNT_WAIT: Duration = Duration::from_secs(30);

/// Waits until the `default` ServiceAccount of the `default` namespace exists, for at most
/// `limit`. Until it does, the ServiceAccount admission plugin refuses every pod there
/// ("error looking up service account default/default"), so a `kubectl apply` straight after
/// the banner could fail. Gives up with a warning rather than never printing the banner.
async fn wait_for_default_service_account(client: &kube::Client, limit: Duration) {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), "default");
    let found = tokio::time::timeout(limit, async {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            tick.tick().await;
            if let Ok(Some(_)) = accounts
                .get_opt(kcm_controllers::serviceaccount::DEFAULT_SERVICE_ACCOUNT)
                .await
            {
                return;
            }
        }
    })
    .await;
    if found.is_err() {
        tracing::warn!(
            waited = ?limit,
            "the default ServiceAccount of namespace default does not exist yet; pods there are refused until it does"
        );
    }
}

/// Starts the controllers and the simulated nodes against `server`, prints the banner, and
/// runs until `cancel` fires or the controller manager fails; stops both before returning.
async fn run_cluster(
    server: &RunningServer,
    args: &UpArgs,
    cancel: &CancellationToken,
) -> anyhow::Result<()> {
    let client = server
        .client()
        .context("a client for the scheduler and nodes")?;
    let EmbeddedCluster {
        manager,
        nodes,
        mints_service_accounts,
    } = EmbeddedCluster::start(server, args, client.clone(), cancel).await?;
    if mints_service_accounts {
        wait_for_default_service_account(&client, DEFAULT_SERVICE_ACCOUNT_WAIT).await;
    }
    print!(
        "{}",
        ready_banner(server.url(), server.kubeconfig_path(), args.nodes)
    );

    let manager_done = manager.wait();
    tokio::pin!(manager_done);
    let ended = tokio::select! {
        biased;
        _ = cancel.cancelled() => {
            eprintln!("kcm up: stopping (Ctrl-C again exits at once)");
            manager_done.await
        }
        ended = &mut manager_done => ended,
    };
    // The manager may have stopped on the signal before this task saw the token: only a
    // stop nobody asked for is an error.
    let result = match ended {
        Ok(()) if cancel.is_cancelled() => Ok(()),
        Ok(()) => Err(anyhow::anyhow!(
            "the controller manager stopped unexpectedly"
        )),
        Err(err) => Err(err).context("the controller manager"),
    };
    cancel.cancel();
    nodes.stopped().await;
    result
}

#[cfg(test)]
mod tests {
    use kcm_sim::simulator::DEFAULT_POD_READY_DELAY;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: UpArgs,
    }

    #[test]
    fn flags_and_defaults() {
        let cli = Cli::try_parse_from(["kcm"]).expect("defaults");
        assert_eq!(cli.args.listen, "127.0.0.1:6443".parse().expect("addr"));
        assert_eq!(cli.args.nodes, 3);
        assert_eq!(cli.args.pod_ready_delay, DEFAULT_POD_READY_DELAY);
        assert_eq!(cli.args.kube_api_qps, UP_KUBE_API_QPS);
        assert_eq!(cli.args.kube_api_burst, UP_KUBE_API_BURST);

        let cli = Cli::try_parse_from([
            "kcm",
            "--data-dir",
            "/tmp/x",
            "--listen",
            "127.0.0.1:0",
            "--nodes",
            "5",
            "--pod-ready-delay",
            "2s",
            "--dra-devices-per-node",
            "4",
        ])
        .expect("all flags");
        assert_eq!(cli.args.data_dir, Some(PathBuf::from("/tmp/x")));
        assert_eq!(cli.args.listen.port(), 0);
        let config = cli.args.simulator_config();
        assert_eq!(config.nodes, 5);
        assert_eq!(config.pod_ready_delay, Duration::from_secs(2));
        assert_eq!(config.dra_devices_per_node, 4);
        assert_eq!(config.template.node_name(0), "kcm-node-0");

        for (name, args) in [
            ("bad duration", ["kcm", "--pod-ready-delay", "soon"]),
            ("listen without port", ["kcm", "--listen", "127.0.0.1"]),
            ("negative nodes", ["kcm", "--nodes", "-1"]),
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{name}");
        }
    }

    #[test]
    fn manager_runs_every_controller_without_election_or_endpoint() {
        let options = manager_options(None, None, None).expect("options");
        assert!(!options.leader_election.leader_elect);
        assert_eq!(options.secure_serving.secure_port, 0);
        assert_eq!(options.generic.controllers, ["*"]);
        assert!(options.kube_cloud_shared.allocate_node_cidrs);
        assert!(options.kube_cloud_shared.use_service_account_credentials);
        assert_eq!(
            options
                .node_ipam_flags()
                .config()
                .map(|c| c.node_mask_sizes)
                .ok(),
            Some(vec![24])
        );
        // Everything else is kube-controller-manager's default.
        assert_eq!(options.replicaset.concurrent_replicaset_syncs, 5);
        assert_eq!(options.generic.kube_api_qps, 20.0);
        let manager =
            ControllerManager::new(options, ControllerRegistry::builtin()).expect("valid options");
        assert!(
            manager
                .enabled_controllers()
                .contains(&"replicaset-controller".to_owned()),
            "{:?}",
            manager.enabled_controllers()
        );
    }

    /// The default pod network holds Kubernetes' 5,000-node limit; one too small for the
    /// nodes is refused with the numbers before anything starts, and the flags reach the
    /// node IPAM controller.
    #[test]
    fn the_pod_network_holds_every_node() {
        let cli = Cli::try_parse_from(["kcm", "--nodes", "5000"]).expect("defaults");
        assert_eq!(
            pod_cidr_capacity(
                &cli.args.cluster_cidr,
                cli.args.node_cidr_mask_size,
                &cli.args.limits.service_cluster_ip_range
            )
            .ok(),
            Some(8192)
        );
        cli.args.check_pod_network().expect("5,000 nodes fit");
        let options = manager_options(Some(&cli.args), None, None).expect("options");
        let config = options.node_ipam_flags().config().expect("valid");
        assert_eq!(config.cluster_cidrs[0].to_string(), DEFAULT_CLUSTER_CIDR);
        assert_eq!(
            config.service_cidr.map(|c| c.to_string()).as_deref(),
            Some("10.96.0.0/12")
        );
        assert_eq!(config.node_mask_sizes, [24]);

        let cli = Cli::try_parse_from(["kcm", "--nodes=1000", "--cluster-cidr=10.244.0.0/16"])
            .expect("flags");
        let err = cli
            .args
            .check_pod_network()
            .expect_err("256 blocks")
            .to_string();
        assert_eq!(
            err,
            "--nodes 1000 needs 1000 pod CIDRs, but --cluster-cidr 10.244.0.0/16 split into \
             /24 blocks holds 256 (outside the Service network 10.96.0.0/12): give a wider \
             --cluster-cidr or a longer --node-cidr-mask-size"
        );
        let cli = Cli::try_parse_from([
            "kcm",
            "--nodes=1000",
            "--cluster-cidr=10.244.0.0/16",
            "--node-cidr-mask-size=26",
        ])
        .expect("flags");
        cli.args.check_pod_network().expect("1,024 /26 blocks");
        let options = manager_options(Some(&cli.args), None, None).expect("options");
        assert_eq!(
            options
                .node_ipam_flags()
                .config()
                .map(|c| c.node_mask_sizes)
                .ok(),
            Some(vec![26])
        );

        // Blocks inside the Service network are never handed out.
        let services = ServiceIpRange::default();
        assert_eq!(
            pod_cidr_capacity("10.96.0.0/11", 24, &services).ok(),
            Some(4096)
        );
        let elsewhere: ServiceIpRange = "172.20.0.0/16".parse().expect("range");
        assert_eq!(
            pod_cidr_capacity("10.96.0.0/11", 24, &elsewhere).ok(),
            Some(8192)
        );
        // The node IPAM controller's own checks, in its words.
        let err = pod_cidr_capacity("10.244.0.0/16", 8, &services).expect_err("mask shorter");
        assert!(
            format!("{err:#}").contains("mask size of cluster CIDR must be less than or equal"),
            "{err:#}"
        );
        assert!(pod_cidr_capacity("not-a-cidr", 24, &services).is_err());
    }

    #[test]
    fn the_cluster_ca_becomes_the_csr_signing_ca() {
        let options = manager_options(
            None,
            Some((Path::new("/d/pki/ca.crt"), Path::new("/d/pki/ca.key"))),
            Some(Path::new("/d/pki/sa.key")),
        )
        .expect("options");
        assert_eq!(
            options.sa_controller.root_ca_file.as_deref(),
            Some(Path::new("/d/pki/ca.crt"))
        );
        assert_eq!(
            options
                .sa_controller
                .service_account_private_key_file
                .as_deref(),
            Some(Path::new("/d/pki/sa.key"))
        );
        assert_eq!(
            options.csr_signing.cluster_signing_cert_file.as_deref(),
            Some(Path::new("/d/pki/ca.crt"))
        );
        assert_eq!(
            options.csr_signing.cluster_signing_key_file.as_deref(),
            Some(Path::new("/d/pki/ca.key"))
        );
    }

    #[test]
    fn the_legacy_token_clean_up_period_reaches_the_controller_manager() {
        let cli = Cli::try_parse_from(["kcm"]).expect("defaults");
        let options = manager_options(Some(&cli.args), None, None).expect("options");
        let default = options
            .legacy_sa_token_cleaner
            .legacy_service_account_token_clean_up_period;
        let cli = Cli::try_parse_from(["kcm", "--legacy-service-account-token-clean-up-period=1h"])
            .expect("flag");
        let options = manager_options(Some(&cli.args), None, None).expect("options");
        let set = &options
            .legacy_sa_token_cleaner
            .legacy_service_account_token_clean_up_period;
        assert_ne!(*set, default);
        assert_eq!(set.0, Duration::from_secs(3600));
        assert!(
            Cli::try_parse_from(["kcm", "--legacy-service-account-token-clean-up-period=soon"])
                .ok()
                .and_then(|c| manager_options(Some(&c.args), None, None).ok())
                .is_none()
        );
    }

    #[test]
    fn client_limits_reach_the_controller_manager() {
        for (name, argv, qps, burst) in [
            (
                "kcm up's defaults",
                vec!["kcm"],
                UP_KUBE_API_QPS,
                UP_KUBE_API_BURST,
            ),
            (
                "upstream's limits",
                vec!["kcm", "--kube-api-qps", "20", "--kube-api-burst", "30"],
                20.0,
                30,
            ),
            (
                "no limit",
                vec!["kcm", "--kube-api-qps", "-1"],
                -1.0,
                UP_KUBE_API_BURST,
            ),
        ] {
            let cli = Cli::try_parse_from(argv).expect(name);
            let options = manager_options(Some(&cli.args), None, None).expect(name);
            assert_eq!(options.generic.kube_api_qps, qps, "{name}");
            assert_eq!(options.generic.kube_api_burst, burst, "{name}");
        }
    }

    #[cfg(all(unix, not(target_os = "macos")))]
    #[test]
    fn default_data_dir_follows_xdg() {
        struct Case {
            name: &'static str,
            env: &'static [(&'static str, &'static str)],
            want: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "XDG_DATA_HOME wins",
                env: &[("XDG_DATA_HOME", "/data"), ("HOME", "/home/u")],
                want: Some("/data/kcm"),
            },
            Case {
                name: "HOME fallback",
                env: &[("HOME", "/home/u")],
                want: Some("/home/u/.local/share/kcm"),
            },
            Case {
                name: "relative XDG_DATA_HOME is ignored",
                env: &[("XDG_DATA_HOME", "data"), ("HOME", "/home/u")],
                want: Some("/home/u/.local/share/kcm"),
            },
            Case {
                name: "empty values are unset",
                env: &[("XDG_DATA_HOME", ""), ("HOME", "")],
                want: None,
            },
            Case {
                name: "nothing set",
                env: &[],
                want: None,
            },
        ];
        for case in cases {
            let got = default_data_dir(|name| {
                case.env
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            });
            assert_eq!(got, case.want.map(PathBuf::from), "{}", case.name);
        }
    }

    #[test]
    fn shell_quoting() {
        let cases = [
            (
                "plain path",
                "/home/u/.local/share/kcm/kubeconfig",
                "/home/u/.local/share/kcm/kubeconfig",
            ),
            (
                "space",
                "/tmp/my dir/kubeconfig",
                "'/tmp/my dir/kubeconfig'",
            ),
            ("single quote", "/tmp/it's", r"'/tmp/it'\''s'"),
            ("dollar", "/tmp/$x", "'/tmp/$x'"),
            ("empty", "", "''"),
        ];
        for (name, input, want) in cases {
            assert_eq!(shell_quote(input), want, "{name}");
        }
    }

    #[test]
    fn banner_names_address_and_kubeconfig() {
        let banner = ready_banner(
            "https://127.0.0.1:6443",
            Path::new("/home/u/.local/share/kcm/kubeconfig"),
            3,
        );
        assert_eq!(
            banner,
            "kcm up: cluster running with 3 simulated nodes (Ctrl-C stops it)\n  \
             API server: https://127.0.0.1:6443\n  \
             kubeconfig: /home/u/.local/share/kcm/kubeconfig\n\n  \
             export KUBECONFIG=/home/u/.local/share/kcm/kubeconfig\n"
        );
        assert!(ready_banner("u", Path::new("/k"), 1).contains("1 simulated node ("));
    }

    /// Pod watches the API server has served (`apiserver_request_total`).
    async fn pod_watches(client: &kube::Client) -> f64 {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .expect("request");
        let text = client.request_text(request).await.expect("/metrics");
        text.lines()
            .filter(|l| l.starts_with("apiserver_request_total{"))
            .filter(|l| l.contains("verb=\"WATCH\"") && l.contains("resource=\"pods\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// An API server on a free port with objects kept in memory, its data dir in `dir`.
    async fn memory_server(dir: &Path) -> RunningServer {
        let mut config = ServerConfig::new(dir);
        config.listen = "127.0.0.1:0".parse().expect("addr");
        config.storage = StorageBackend::Memory;
        Server::start(config).await.expect("API server")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_banner_waits_for_the_default_service_account() {
        use k8s_openapi::api::core::v1::ServiceAccount;
        use kube::Api;
        use kube::api::{DeleteParams, PostParams};

        let dir = tempfile::tempdir().expect("tempdir");
        let server = memory_server(dir.path()).await;
        let client = server.client().expect("client");
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        // No controllers run here: the account is only there if something created it.
        if accounts.get_opt("default").await.expect("get").is_some() {
            accounts
                .delete("default", &DeleteParams::default())
                .await
                .expect("delete");
        }

        // Absent: the wait gives up after its limit.
        wait_for_default_service_account(&client, Duration::from_millis(200)).await;
        assert!(accounts.get_opt("default").await.expect("get").is_none());

        // Created while waiting: the wait returns once it exists, well before its limit. (The
        // pause only makes a wait that returned at once likely to be caught; a right one
        // passes whatever the timing.)
        let creator = {
            let accounts = accounts.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let account: ServiceAccount =
                    serde_json::from_value(serde_json::json!({"metadata": {"name": "default"}}))
                        .expect("account");
                accounts
                    .create(&PostParams::default(), &account)
                    .await
                    .expect("create");
            })
        };
        let limit = Duration::from_secs(60);
        let started = std::time::Instant::now();
        wait_for_default_service_account(&client, limit).await;
        assert!(started.elapsed() < limit, "gave up instead of seeing it");
        assert!(accounts.get_opt("default").await.expect("get").is_some());
        creator.await.expect("creator");
        server.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_simulated_nodes_see_pods_through_the_controllers_informers() {
        use k8s_openapi::api::core::v1::Pod;
        use kube::Api;
        use kube::api::PostParams;

        let dir = tempfile::tempdir().expect("tempdir");
        let server = memory_server(dir.path()).await;
        let client = server.client().expect("client");
        let cli =
            Cli::try_parse_from(["kcm", "--nodes", "1", "--pod-ready-delay", "0s"]).expect("flags");
        let cancel = CancellationToken::new();
        let cluster = EmbeddedCluster::start(&server, &cli.args, client.clone(), &cancel)
            .await
            .expect("cluster");

        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "pause"}]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create");
        // Scheduled and started: the scheduler and the kubelets see the pod.
        let running = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let phase = pods.get("p").await.ok().and_then(|p| p.status?.phase);
                if phase.as_deref() == Some("Running") {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        let watches = pod_watches(&client).await;
        cluster.stop(&cancel).await.expect("stop");
        server.shutdown().await;
        running.expect("the pod runs");
        assert_eq!(
            watches, 1.0,
            "one pod watch serves the controllers, the scheduler and the nodes"
        );
    }

    /// `kcm up` signs with its cluster CA: an approved `kubernetes.io/kube-apiserver-client`
    /// CSR is issued a certificate that authenticates to the API server as its subject.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_approved_client_csr_gets_a_certificate_the_api_server_accepts() {
        use k8s_openapi::ByteString;
        use k8s_openapi::api::authentication::v1::SelfSubjectReview;
        use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
        use kube::Api;
        use kube::api::PostParams;

        let dir = tempfile::tempdir().expect("tempdir");
        let server = memory_server(dir.path()).await;
        let client = server.client().expect("client");
        let cli = Cli::try_parse_from(["kcm", "--nodes", "0"]).expect("flags");
        let cancel = CancellationToken::new();
        let cluster = EmbeddedCluster::start(&server, &cli.args, client.clone(), &cancel)
            .await
            .expect("cluster");

        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "devs");
        let request = params
            .serialize_request(&key)
            .expect("csr")
            .pem()
            .expect("pem");
        let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
        let mut csr: CertificateSigningRequest = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "alice"},
            "spec": {
                "signerName": "kubernetes.io/kube-apiserver-client",
                "usages": ["client auth"],
            }
        }))
        .expect("csr");
        csr.spec.request = ByteString(request.into_bytes());
        let mut csr = csrs
            .create(&PostParams::default(), &csr)
            .await
            .expect("create");
        csr.status.get_or_insert_default().conditions = Some(vec![
            serde_json::from_value(serde_json::json!({
                "type": "Approved", "status": "True", "reason": "Test", "message": "approved"
            }))
            .expect("condition"),
        ]);
        csrs.replace_subresource("approval", "alice", &PostParams::default(), &csr)
            .await
            .expect("approve");
        let issued = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let certificate = csrs
                    .get("alice")
                    .await
                    .ok()
                    .and_then(|c| c.status?.certificate);
                if let Some(certificate) = certificate {
                    return certificate;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        let whoami = match &issued {
            Ok(certificate) => {
                let mut as_alice = server.kube_config();
                as_alice.auth_info = serde_json::from_value(serde_json::json!({
                    "client-certificate-data": base64_pem(&certificate.0),
                    "client-key-data": base64_pem(key.serialize_pem().as_bytes()),
                }))
                .expect("auth info");
                let alice = kube::Client::try_from(as_alice).expect("client");
                let reviews: Api<SelfSubjectReview> = Api::all(alice);
                let review: SelfSubjectReview =
                    serde_json::from_value(serde_json::json!({})).expect("review");
                Some(reviews.create(&PostParams::default(), &review).await)
            }
            Err(_) => None,
        };
        cluster.stop(&cancel).await.expect("stop");
        server.shutdown().await;
        issued.expect("the CSR is issued a certificate");
        let user = whoami
            .expect("reviewed")
            .expect("the certificate authenticates")
            .status
            .and_then(|s| s.user_info)
            .expect("user info");
        assert_eq!(user.username.as_deref(), Some("alice"));
        assert!(
            user.groups.iter().flatten().any(|g| g == "devs"),
            "{:?}",
            user.groups
        );
    }

    fn base64_pem(pem: &[u8]) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    #[test]
    fn a_second_lock_on_the_data_dir_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("nested/kcm");
        let held = lock_data_dir(&data).expect("first lock creates the directory");
        let err = lock_data_dir(&data).expect_err("second lock");
        assert!(err.to_string().contains("another kcm up is using"), "{err}");
        drop(held);
        lock_data_dir(&data).expect("free again once the first is released");
    }
}
