//! `kcm bench`: Deployments × replicas on simulated nodes, timed to all available, with CPU, memory, API requests and work queues measured.
//!
//! Without `--kubeconfig` it starts a `kcm up` in this process (a fresh temporary data dir,
//! SQLite as `kcm up` uses, port 0), so the CPU and memory it reports are the whole cluster's
//! and the controllers' work-queue and client metrics are read directly. With `--kubeconfig`
//! it drives any cluster (`kcm apiserver` + `kcm run` + `kcm sim`, or a real one) and measures
//! the time only; it deletes the namespace it created at the end. `--soak --kill-every` runs
//! the `kcm up` as a child process instead, to `kill -9` and restart it.

mod child;
mod heap;
mod plot;
mod process;
mod progress;
mod prometheus;
mod quantile;
mod report;
mod soak;
mod soak_report;
mod workload;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser};
use k8s_openapi::api::core::v1::Node;
use kcm_apiserver::{Server, ServerConfig, StorageBackend};
use kcm_controllers::manager::{ManagerMetrics, install_signal_handler};
use kcm_machinery::client::{ClientMetrics, build_client};
use kube::Api;
use kube::api::ListParams;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::up_cmd::{EmbeddedCluster, UP_KUBE_API_BURST, UP_KUBE_API_QPS, UpArgs};
use process::Process;
use progress::Progress;
use report::{Config, ProcessReport, Report, TimelineSample};
use workload::Observer;

/// How often the timeline is sampled (and convergence checked).
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// Every how many samples the work-queue depths are read: reading them encodes and parses the
/// controllers' whole metrics registry, which at every sample was 13 % of a 500-pod run's CPU.
const QUEUE_DEPTH_EVERY: usize = 10;
/// How long the simulated nodes may take to register and turn Ready.
const NODES_READY_TIMEOUT: Duration = Duration::from_secs(120);
/// The namespace of the workload in an embedded cluster (fresh, so a fixed name is safe).
const EMBEDDED_NAMESPACE: &str = "kcm-bench";

/// Flags of `kcm bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// How many Deployments to create.
    #[arg(long, default_value_t = 20)]
    pub deployments: u32,
    /// Replicas of each Deployment.
    #[arg(long, default_value_t = 25)]
    pub replicas: u32,
    /// Simulated nodes of the embedded cluster (110 pods each).
    #[arg(long, default_value_t = 20)]
    pub nodes: usize,
    /// The embedded cluster's pod network (`kcm up --cluster-cidr`).
    #[arg(long, value_name = "cidr", default_value = crate::up_cmd::DEFAULT_CLUSTER_CIDR)]
    pub cluster_cidr: String,
    /// The prefix length of each embedded node's pod CIDR (`kcm up --node-cidr-mask-size`).
    #[arg(long, value_name = "bits", default_value_t = crate::up_cmd::DEFAULT_NODE_CIDR_MASK_SIZE)]
    pub node_cidr_mask_size: u8,
    /// `--kube-api-qps` of the embedded controllers (negative: unlimited).
    #[arg(long, default_value_t = UP_KUBE_API_QPS, allow_negative_numbers = true)]
    pub qps: f32,
    /// `--kube-api-burst` of the embedded controllers.
    #[arg(long, default_value_t = UP_KUBE_API_BURST)]
    pub burst: u32,
    /// How long a scheduled pod stays Pending before it runs, in the embedded cluster.
    #[arg(long, value_parser = crate::up_cmd::parse_duration, default_value = "1s")]
    pub pod_ready_delay: Duration,
    /// Drive this cluster instead of an embedded one.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Where to write the results as JSON.
    #[arg(long, default_value = "kcm-bench.json")]
    pub json: PathBuf,
    /// Where to write the plot (pods available and work-queue depth over time) as SVG.
    #[arg(long, default_value = "kcm-bench.svg")]
    pub svg: PathBuf,
    /// Give up when not every pod is available after this long.
    #[arg(long, value_parser = crate::up_cmd::parse_duration, default_value = "10m")]
    pub timeout: Duration,
    /// Instead of the Deployments, soak for this long: a steady churn of writes (ConfigMaps,
    /// Secrets, Deployments' lives, Jobs, a CronJob, failing pods, node flaps, watches)
    /// sampled for memory, database and WAL size, write latency and watch lag.
    #[arg(long, value_parser = crate::up_cmd::parse_duration, value_name = "duration")]
    pub soak: Option<Duration>,
    /// The soak's own writes per second.
    #[arg(long, default_value_t = 50.0, value_name = "writes/s")]
    pub write_rate: f64,
    /// How often the soak samples.
    #[arg(long, value_parser = crate::up_cmd::parse_duration, default_value = "10s")]
    pub sample_every: Duration,
    /// With --soak: `kill -9` the cluster this often and start it again on the same data
    /// (the cluster runs as a child `kcm up`).
    #[arg(long, value_parser = crate::up_cmd::parse_duration, value_name = "duration",
          requires = "soak", conflicts_with = "kubeconfig")]
    pub kill_every: Option<Duration>,
    /// The embedded cluster's store: `--etcd-servers` for etcd (under a fresh prefix unless
    /// `--etcd-prefix` is given), else SQLite; `--etcd-compaction-interval` (5m0s) shorter to
    /// compress a soak's time.
    #[command(flatten)]
    pub etcd: crate::etcd_flags::EtcdFlags,
    /// How long the cluster keeps events after their last write (`kcm up`'s flag); shorter
    /// to compress a soak's time, as `--etcd-compaction-interval`.
    #[arg(long, value_name = "duration", default_value = "1h0m0s",
          value_parser = crate::up_cmd::parse_duration)]
    pub event_ttl: Duration,
}

/// What one run produced.
enum Outcome {
    Bench(Box<Report>),
    Soak(Box<soak_report::SoakReport>),
}

/// Where the controllers' and the nodes' metrics come from (embedded runs only).
#[derive(Default)]
struct MetricSources {
    /// The controller manager's registry (work queues, its REST client).
    controllers: Option<ManagerMetrics>,
    /// The REST client metrics of the scheduler and the simulated nodes.
    nodes: Option<prometheus_client::registry::Registry>,
}

impl MetricSources {
    fn controllers(&self) -> Vec<prometheus::Sample> {
        self.controllers
            .as_ref()
            .and_then(|m| m.encode().ok())
            .map(|text| prometheus::parse(&text))
            .unwrap_or_default()
    }

    fn nodes(&self) -> Vec<prometheus::Sample> {
        let mut text = String::new();
        match &self.nodes {
            Some(registry)
                if prometheus_client::encoding::text::encode(&mut text, registry).is_ok() =>
            {
                prometheus::parse(&text)
            }
            _ => Vec::new(),
        }
    }
}

/// Runs the bench; fails when the cluster cannot be set up or the pods do not all become
/// available in time (the JSON and SVG are written either way).
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    // Killing the child cluster fails every request in flight, and kube's client logs each
    // as an error; the soak counts those writes itself ("cut off by a kill").
    crate::up_cmd::init_logging_with(if args.kill_every.is_some() {
        "warn,kube_client=off"
    } else {
        "warn"
    })?;
    let cancel = CancellationToken::new();
    install_signal_handler(cancel.clone()).context("installing the signal handler")?;
    let outcome = match (&args.kubeconfig, args.soak.zip(args.kill_every)) {
        (Some(path), _) => run_against(&args, path, &cancel).await?,
        (None, Some((duration, every))) => run_child(&args, duration, every, &cancel).await?,
        (None, None) => run_embedded(&args, &cancel).await?,
    };
    let report = match outcome {
        Outcome::Bench(report) => report,
        Outcome::Soak(report) => {
            print!("{}", report.summary.table());
            let text = serde_json::to_string_pretty(&report).context("encoding the results")?;
            std::fs::write(&args.json, text + "\n")
                .with_context(|| format!("writing {}", args.json.display()))?;
            std::fs::write(&args.svg, soak_report::svg(&report)?)
                .with_context(|| format!("writing {}", args.svg.display()))?;
            println!(
                "\n  wrote {} and {}",
                args.json.display(),
                args.svg.display()
            );
            return Ok(());
        }
    };
    print!("{}", report.table());
    write_outputs(&report, &args.json, &args.svg)?;
    println!(
        "\n  wrote {} and {}",
        args.json.display(),
        args.svg.display()
    );
    if !report.converged {
        anyhow::bail!(
            "{} of {} pods available when the bench stopped",
            report.pods_available,
            report.pods_expected
        );
    }
    Ok(())
}

fn write_outputs(report: &Report, json: &Path, svg: &Path) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(report).context("encoding the results")?;
    std::fs::write(json, text + "\n").with_context(|| format!("writing {}", json.display()))?;
    std::fs::write(svg, plot::svg(report)?)
        .with_context(|| format!("writing {}", svg.display()))?;
    Ok(())
}

/// An in-process `kcm up` in a fresh temporary data dir, removed afterwards.
async fn run_embedded(args: &BenchArgs, cancel: &CancellationToken) -> anyhow::Result<Outcome> {
    let up = up_args(args)?;
    up.check_pod_network()?;
    let dir = tempfile::Builder::new()
        .prefix("kcm-bench-")
        .tempdir()
        .context("creating a temporary data dir")?;
    let mut config = ServerConfig::new(dir.path());
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let etcd = etcd_options(args);
    config.storage = match &etcd {
        Some(options) => StorageBackend::Etcd(options.clone()),
        None => StorageBackend::Sqlite,
    };
    config.compaction_interval = args.etcd.compaction_interval();
    config.event_ttl = up.limits.event_ttl();
    let server = Server::start(config)
        .await
        .context("starting the API server")?;

    let node_metrics = Arc::new(ClientMetrics::new());
    let mut node_registry = prometheus_client::registry::Registry::default();
    node_metrics.register(&mut node_registry);
    // Unlimited, as `kcm up`'s scheduler and nodes; with metrics, to count their requests.
    let node_client = build_client(server.kube_config(), -1.0, 0, Some(node_metrics))
        .context("a client for the scheduler and nodes")?;
    let cluster = EmbeddedCluster::start(&server, &up, node_client, cancel).await?;
    let sources = MetricSources {
        controllers: Some(cluster.manager.metrics().clone()),
        nodes: Some(node_registry),
    };
    let config = Config {
        mode: "embedded".to_owned(),
        deployments: args.deployments,
        replicas: args.replicas,
        nodes: Some(args.nodes),
        kube_api_qps: Some(args.qps),
        kube_api_burst: Some(args.burst),
        pod_ready_delay_seconds: Some(args.pod_ready_delay.as_secs_f64()),
    };
    let result = async {
        let client = server.client().context("the bench's client")?;
        wait_for_nodes(&client, args.nodes, cancel).await?;
        workload::create_namespace(&client, EMBEDDED_NAMESPACE).await?;
        if let Some(duration) = args.soak {
            let mut probes = soak::Probes {
                process: Some(Process::current()),
                database: etcd.is_none().then(|| dir.path().join("state.db")),
                store: Some(soak::StoreProbe::InProcess(Arc::clone(server.storage()))),
            };
            let config = soak_config(args, duration, true);
            return soak::run(
                &client,
                EMBEDDED_NAMESPACE,
                &soak_options(args, duration),
                config,
                &mut probes,
                None,
                cancel,
            )
            .await
            .map(|r| Outcome::Soak(Box::new(r)));
        }
        measure(&client, EMBEDDED_NAMESPACE, args, config, &sources, cancel)
            .await
            .map(|r| Outcome::Bench(Box::new(r)))
    }
    .await;
    let stopped = cluster.stop(cancel).await;
    server.shutdown().await;
    drop(dir);
    let report = result?;
    stopped?;
    Ok(report)
}

fn soak_options(args: &BenchArgs, duration: Duration) -> soak::SoakOptions {
    soak::SoakOptions {
        duration,
        rate: args.write_rate,
        sample_every: args.sample_every,
    }
}

/// The soak's configuration as recorded; `embedded` runs also record the cluster's shape.
fn soak_config(args: &BenchArgs, duration: Duration, embedded: bool) -> soak_report::SoakConfig {
    let storage = if args.etcd.options().is_some() {
        "etcd"
    } else {
        "sqlite"
    };
    soak_report::SoakConfig {
        mode: match (embedded, args.kill_every) {
            (false, _) => "kubeconfig",
            (true, None) => "embedded",
            (true, Some(_)) => "child",
        }
        .to_owned(),
        duration_seconds: duration.as_secs_f64(),
        writes_per_second: args.write_rate,
        sample_seconds: args.sample_every.as_secs_f64(),
        compaction_interval_seconds: embedded
            .then_some(args.etcd.etcd_compaction_interval.as_secs_f64()),
        nodes: embedded.then_some(args.nodes),
        storage: embedded.then(|| storage.to_owned()),
        kill_every_seconds: args.kill_every.map(|d| d.as_secs_f64()),
        event_ttl_seconds: embedded.then_some(args.event_ttl.as_secs_f64()),
    }
}

/// `--etcd-servers` as the embedded cluster's store, under a prefix of its own unless
/// `--etcd-prefix` names one: a bench never writes into a cluster's `/registry`.
fn etcd_options(args: &BenchArgs) -> Option<kcm_apiserver::storage::EtcdOptions> {
    let mut options = args.etcd.options()?;
    if args.etcd.etcd_prefix == kcm_apiserver::storage::etcd::DEFAULT_ETCD_PREFIX {
        options.prefix = bench_prefix();
    }
    Some(options)
}

fn bench_prefix() -> String {
    format!(
        "/kcm-bench-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// The `kcm up` flags of a child cluster: the embedded cluster's, and its store's.
fn child_up_args(args: &BenchArgs) -> Vec<String> {
    let mut out = cluster_flags(args);
    out.push(format!(
        "--etcd-compaction-interval={}s",
        args.etcd.etcd_compaction_interval.as_secs()
    ));
    if let Some(options) = etcd_options(args) {
        out.push(format!(
            "--etcd-servers={}",
            args.etcd.etcd_servers.join(",")
        ));
        // One prefix for every restart: the child comes back to its own data.
        out.push(format!("--etcd-prefix={}", options.prefix));
        let files = [
            ("--etcd-cafile", &args.etcd.etcd_cafile),
            ("--etcd-certfile", &args.etcd.etcd_certfile),
            ("--etcd-keyfile", &args.etcd.etcd_keyfile),
        ];
        for (flag, file) in files {
            if let Some(file) = file {
                out.push(format!("{flag}={}", file.display()));
            }
        }
    }
    out
}

/// A soak against a child `kcm up` that is `kill -9`ed and restarted every `every`.
async fn run_child(
    args: &BenchArgs,
    duration: Duration,
    every: Duration,
    cancel: &CancellationToken,
) -> anyhow::Result<Outcome> {
    let up_args = child_up_args(args);
    let etcd = up_args.iter().any(|a| a.starts_with("--etcd-servers="));
    let (mut child, client) = child::ChildCluster::start(up_args, cancel).await?;
    wait_for_nodes(&client, args.nodes, cancel).await?;
    workload::create_namespace(&client, EMBEDDED_NAMESPACE).await?;
    let mut probes = soak::Probes {
        process: child.process(),
        database: (!etcd).then(|| child.database()),
        store: (!etcd).then(|| soak::StoreProbe::SqliteFile(child.database())),
    };
    let killer = soak::Killer {
        every,
        child: &mut child,
    };
    soak::run(
        &client,
        EMBEDDED_NAMESPACE,
        &soak_options(args, duration),
        soak_config(args, duration, true),
        &mut probes,
        Some(killer),
        cancel,
    )
    .await
    .map(|r| Outcome::Soak(Box::new(r)))
}

/// The `kcm up` flags of an embedded bench.
fn up_args(args: &BenchArgs) -> anyhow::Result<UpArgs> {
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        up: UpArgs,
    }
    let argv = std::iter::once("kcm-bench".to_owned()).chain(cluster_flags(args));
    let flags = Flags::try_parse_from(argv).context("the embedded cluster's flags")?;
    Ok(flags.up)
}

/// The `kcm up` flags that shape the embedded cluster, as the bench's flags set them.
fn cluster_flags(args: &BenchArgs) -> Vec<String> {
    vec![
        format!("--nodes={}", args.nodes),
        format!("--cluster-cidr={}", args.cluster_cidr),
        format!("--node-cidr-mask-size={}", args.node_cidr_mask_size),
        format!("--pod-ready-delay={}ms", args.pod_ready_delay.as_millis()),
        format!("--kube-api-qps={}", args.qps),
        format!("--kube-api-burst={}", args.burst),
        format!("--event-ttl={}s", args.event_ttl.as_secs()),
    ]
}

/// Waits until `nodes` Nodes are Ready and have a pod CIDR (pods bound earlier would wait).
async fn wait_for_nodes(
    client: &kube::Client,
    nodes: usize,
    cancel: &CancellationToken,
) -> anyhow::Result<()> {
    let api = Api::<Node>::all(client.clone());
    let deadline = Instant::now() + NODES_READY_TIMEOUT;
    loop {
        let list = api
            .list(&ListParams::default())
            .await
            .context("listing nodes")?;
        let ready = list.items.iter().filter(|n| node_ready(n)).count();
        if ready >= nodes {
            return Ok(());
        }
        if Instant::now() >= deadline || cancel.is_cancelled() {
            let without_cidr = list.items.iter().filter(|n| !has_pod_cidr(n)).count();
            anyhow::bail!(
                "{ready} of {nodes} simulated nodes ready after {}s ({} registered, {without_cidr} \
                 without a pod CIDR)",
                NODES_READY_TIMEOUT.as_secs(),
                list.items.len()
            );
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
}

fn has_pod_cidr(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.pod_cidr.as_deref())
        .is_some_and(|c| !c.is_empty())
}

fn node_ready(node: &Node) -> bool {
    let has_cidr = has_pod_cidr(node);
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    has_cidr && ready
}

/// A client for the cluster `kubeconfig` names.
async fn client_from(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let file = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading kubeconfig {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .with_context(|| format!("loading kubeconfig {}", kubeconfig.display()))?;
    kube::Client::try_from(config).context("building the client")
}

/// Any cluster, through `kubeconfig`: a fresh namespace, deleted afterwards.
async fn run_against(
    args: &BenchArgs,
    kubeconfig: &Path,
    cancel: &CancellationToken,
) -> anyhow::Result<Outcome> {
    let client = client_from(kubeconfig).await?;
    let namespace = format!(
        "kcm-bench-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    workload::create_namespace(&client, &namespace).await?;
    let config = Config {
        mode: "kubeconfig".to_owned(),
        deployments: args.deployments,
        replicas: args.replicas,
        nodes: None,
        kube_api_qps: None,
        kube_api_burst: None,
        pod_ready_delay_seconds: None,
    };
    let result = match args.soak {
        Some(duration) => soak::run(
            &client,
            &namespace,
            &soak_options(args, duration),
            soak_config(args, duration, false),
            &mut soak::Probes::default(),
            None,
            cancel,
        )
        .await
        .map(|r| Outcome::Soak(Box::new(r))),
        None => measure(
            &client,
            &namespace,
            args,
            config,
            &MetricSources::default(),
            cancel,
        )
        .await
        .map(|r| Outcome::Bench(Box::new(r))),
    };
    if let Err(err) = workload::delete_namespace(&client, &namespace).await {
        eprintln!("kcm bench: cleaning up: {err:#}");
    }
    result
}

/// Creates the workload in `namespace` and samples until every pod is available, the
/// timeout passes or `cancel` fires.
async fn measure(
    client: &kube::Client,
    namespace: &str,
    args: &BenchArgs,
    config: Config,
    sources: &MetricSources,
    cancel: &CancellationToken,
) -> anyhow::Result<Report> {
    let expected = u64::from(args.deployments) * u64::from(args.replicas);
    let observer = Observer::start(client.clone(), namespace, cancel).await?;
    let me = Process::current();
    let before = me.usage().unwrap_or_default();

    let start = Instant::now();
    let mut create = tokio::spawn({
        let client = client.clone();
        let namespace = namespace.to_owned();
        let (deployments, replicas) = (args.deployments, args.replicas);
        async move { workload::create_deployments(&client, &namespace, deployments, replicas).await }
    });
    let mut create_seconds = None;
    let mut samples = Vec::new();
    let mut max_depth: BTreeMap<String, u64> = BTreeMap::new();
    let mut progress = Progress::new();
    let mut converged_at = None;
    // The progress line shows the last depth read.
    let mut last_depth = None;
    let mut ticks = tokio::time::interval(SAMPLE_EVERY);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            created = &mut create, if create_seconds.is_none() => {
                created.context("the create task")??;
                create_seconds = Some(start.elapsed().as_secs_f64());
                continue;
            }
            _ = cancel.cancelled() => break,
        }
        let elapsed = start.elapsed();
        let available = observer.available();
        let read_depths = samples.len() % QUEUE_DEPTH_EVERY == 0;
        let queue_depth = sources
            .controllers
            .as_ref()
            .filter(|_| read_depths)
            .map(|_| {
                let samples = sources.controllers();
                let depths = prometheus::sum_by(&samples, "workqueue_depth", "name");
                for (name, depth) in &depths {
                    let depth = *depth as u64;
                    let max = max_depth.entry(name.clone()).or_insert(0);
                    *max = (*max).max(depth);
                }
                depths.values().sum::<f64>() as u64
            });
        samples.push(TimelineSample {
            t: elapsed.as_secs_f64(),
            available,
            queue_depth,
            rss_bytes: me.usage().map(|u| u.rss_bytes),
        });
        last_depth = queue_depth.or(last_depth);
        progress.update(available, expected, elapsed, last_depth);
        if available >= expected && create_seconds.is_some() {
            converged_at = Some(elapsed.as_secs_f64());
            break;
        }
        if elapsed >= args.timeout {
            break;
        }
    }
    progress.finish();
    if create_seconds.is_none() {
        create.abort();
    }
    let after = me.usage().unwrap_or_default();
    let pods_available = observer.available();
    observer.shutdown().await;

    let controller_samples = sources.controllers();
    let mut requests = BTreeMap::new();
    if sources.controllers.is_some() {
        requests.insert(
            "controllers".to_owned(),
            report::requests_by_method(&controller_samples),
        );
    }
    if sources.nodes.is_some() {
        requests.insert(
            "nodes".to_owned(),
            report::requests_by_method(&sources.nodes()),
        );
    }
    // Server side, every request since the API server started, by upstream's verb (`LIST`,
    // `WATCH`, `POST`, …); absent when the server does not let this user read `/metrics`.
    if let Some(by_verb) = apiserver_requests(client).await {
        requests.insert("apiserver".to_owned(), by_verb);
    }
    Ok(Report {
        config,
        converged: converged_at.is_some(),
        time_to_available_seconds: converged_at,
        create_seconds: create_seconds.unwrap_or(f64::NAN),
        pods_available,
        pods_expected: expected,
        pods_per_second: converged_at
            .filter(|t| *t > 0.0)
            .map(|t| expected as f64 / t),
        samples,
        process: ProcessReport {
            cpu_seconds: after.cpu_seconds - before.cpu_seconds,
            rss_before_bytes: before.rss_bytes,
            rss_after_bytes: after.rss_bytes,
            peak_rss_bytes: after.peak_rss_bytes,
        },
        requests,
        workqueues: report::queues(&controller_samples, &max_depth),
    })
}

/// `apiserver_request_total` by verb, read from the API server's `/metrics`.
async fn apiserver_requests(client: &kube::Client) -> Option<BTreeMap<String, u64>> {
    let request = axum::http::Request::get("/metrics").body(Vec::new()).ok()?;
    let text = client.request_text(request).await.ok()?;
    let by_verb: BTreeMap<String, u64> =
        prometheus::sum_by(&prometheus::parse(&text), "apiserver_request_total", "verb")
            .into_iter()
            .filter(|(_, n)| *n > 0.0)
            .map(|(verb, n)| (verb, n as u64))
            .collect();
    (!by_verb.is_empty()).then_some(by_verb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }

    #[test]
    fn flags_reach_the_embedded_cluster() {
        let cli = Cli::try_parse_from(["kcm"]).expect("defaults");
        assert_eq!(
            (cli.args.deployments, cli.args.replicas, cli.args.nodes),
            (20, 25, 20)
        );
        assert_eq!(cli.args.qps, UP_KUBE_API_QPS);
        let up = up_args(&cli.args).expect("up flags");
        assert_eq!(up.nodes, 20);
        assert_eq!(up.kube_api_qps, UP_KUBE_API_QPS);
        assert_eq!(up.pod_ready_delay, Duration::from_secs(1));

        let cli = Cli::try_parse_from([
            "kcm",
            "--deployments=100",
            "--replicas=100",
            "--nodes=100",
            "--qps",
            "-1",
            "--burst=5",
            "--pod-ready-delay=250ms",
        ])
        .expect("flags");
        let up = up_args(&cli.args).expect("up flags");
        assert_eq!(
            (up.nodes, up.kube_api_qps, up.kube_api_burst),
            (100, -1.0, 5)
        );
        assert_eq!(up.pod_ready_delay, Duration::from_millis(250));
    }

    #[test]
    fn a_killed_soak_runs_kcm_up_with_the_same_cluster_and_store() {
        #[derive(Parser)]
        struct Up {
            #[command(flatten)]
            up: UpArgs,
        }
        let parse_up = |args: Vec<String>| {
            let argv = std::iter::once("kcm-up".to_owned()).chain(args);
            Up::try_parse_from(argv)
                .expect("kcm up takes the child's flags")
                .up
        };
        assert!(
            Cli::try_parse_from(["kcm", "--kill-every=10m"]).is_err(),
            "only with --soak"
        );
        let cli = Cli::try_parse_from([
            "kcm",
            "--soak=20m",
            "--kill-every=10m",
            "--nodes=4",
            "--etcd-compaction-interval=1m",
        ])
        .expect("flags");
        assert_eq!(cli.args.kill_every, Some(Duration::from_secs(600)));
        let up = parse_up(child_up_args(&cli.args));
        assert_eq!(up.nodes, 4);
        assert_eq!(up.etcd.compaction_interval(), Some(Duration::from_secs(60)));
        assert!(up.etcd.options().is_none(), "SQLite");

        let cli = Cli::try_parse_from([
            "kcm",
            "--soak=20m",
            "--kill-every=10m",
            "--etcd-servers=http://127.0.0.1:2379",
        ])
        .expect("flags");
        let up = parse_up(child_up_args(&cli.args));
        let etcd = up.etcd.options().expect("etcd");
        assert_eq!(etcd.endpoints, ["http://127.0.0.1:2379"]);
        assert!(
            etcd.prefix.starts_with("/kcm-bench-"),
            "never /registry: {}",
            etcd.prefix
        );
        let cli = Cli::try_parse_from([
            "kcm",
            "--soak=1m",
            "--etcd-servers=http://127.0.0.1:2379",
            "--etcd-prefix=/mine",
        ])
        .expect("flags");
        assert_eq!(etcd_options(&cli.args).expect("etcd").prefix, "/mine");
    }

    #[test]
    fn outputs_written_as_json_and_svg() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (json, svg) = (dir.path().join("r.json"), dir.path().join("r.svg"));
        write_outputs(&report::tests::sample_report(), &json, &svg).expect("written");
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid");
        assert_eq!(value["pods_expected"], 6);
        assert!(
            std::fs::read_to_string(&svg)
                .expect("svg")
                .contains("</svg>")
        );
    }
}
