//! `kcm sim`: simulated nodes (and, by default, a scheduler) against any cluster.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{ArgAction, Args};
use kcm_machinery::events::{EventBroadcaster, KubeEventSink};
use kcm_machinery::informer::SharedInformerFactory;
use kcm_sim::node::{DEFAULT_NODE_PREFIX, NodeTemplate};
use kcm_sim::storage::{
    Attacher, KubeVolumeClient, Provisioner, Resizer, default_storage_class, resizer,
};
use kcm_sim::{Scheduler, Simulator, SimulatorConfig};
use tokio_util::sync::CancellationToken;

/// Flags of `kcm sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// The cluster to join; without it, `KUBECONFIG`, `~/.kube/config` or the in-cluster
    /// service account, as kubectl finds them.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// How many nodes to simulate.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Node names are PREFIX-0 .. PREFIX-(N-1); a restart with the same prefix adopts them.
    #[arg(long, default_value = DEFAULT_NODE_PREFIX)]
    pub node_prefix: String,
    /// CPU capacity of each node.
    #[arg(long, default_value = "8")]
    pub node_cpu: String,
    /// Memory capacity of each node.
    #[arg(long, default_value = "32Gi")]
    pub node_memory: String,
    /// Pod capacity of each node (at most 253: one /24 of pod IPs per node).
    #[arg(long, default_value = "110")]
    pub node_pods: String,
    /// How long a bound pod stays Pending before it runs (Go duration: 500ms, 2s, 1m).
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub pod_ready_delay: Duration,
    /// How often each node renews its Lease in kube-node-lease.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub node_lease_renew_interval: Duration,
    /// How often each node posts its status when nothing changed (the kubelet's
    /// nodeStatusReportFrequency is 5m; changes are posted at once).
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub node_status_update_period: Duration,
    /// Register nodes with their own pod CIDR (`10.244.<index>.0/24`) instead of waiting for
    /// the node IPAM controller (`--allocate-node-cidrs`) to set one: for clusters that do not
    /// allocate node CIDRs.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub assign_pod_cidrs: bool,
    /// Devices the simulated DRA driver `gpu.sim.kcm.io` publishes on each node (one
    /// ResourceSlice per node, allocatable through the DeviceClass `gpu.sim.kcm.io`); 0
    /// publishes none.
    #[arg(long, value_name = "n", default_value_t = kcm_sim::dra::DEFAULT_DEVICES_PER_NODE)]
    pub dra_devices_per_node: usize,
    /// Also run a scheduler for pods of `default-scheduler` (turn off with
    /// `--scheduler=false` on a cluster that runs kube-scheduler).
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub scheduler: bool,
    /// Create the default StorageClass `standard` (provisioner `sim.kcm.io/hostpath`) and bind
    /// every PersistentVolumeClaim of it to a new PersistentVolume (turn off with
    /// `--provisioner=false` on a cluster that has its own storage).
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub provisioner: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    kcm_sim::kubelet::parse_duration(s)
        .ok_or_else(|| format!("invalid duration {s:?} (use e.g. 500ms, 2s, 1m30s)"))
}

impl SimArgs {
    /// The simulator configuration these flags describe.
    pub fn simulator_config(&self) -> SimulatorConfig {
        SimulatorConfig {
            nodes: self.nodes,
            template: NodeTemplate {
                name_prefix: self.node_prefix.clone(),
                cpu: self.node_cpu.clone(),
                memory: self.node_memory.clone(),
                pods: self.node_pods.clone(),
                ..NodeTemplate::default()
            },
            pod_ready_delay: self.pod_ready_delay,
            lease_renew_interval: self.node_lease_renew_interval,
            node_status_update_period: self.node_status_update_period,
            assign_pod_cidrs: self.assign_pod_cidrs,
            dra_devices_per_node: self.dra_devices_per_node,
            ..SimulatorConfig::default()
        }
    }
}

async fn client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("finding a kubeconfig (pass --kubeconfig)")?,
    };
    kube::Client::try_from(config).context("building the API client")
}

/// Runs the simulated nodes (and the scheduler) until SIGINT or SIGTERM.
pub async fn run(args: SimArgs) -> anyhow::Result<()> {
    let client = client(args.kubeconfig.as_ref()).await?;
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let cancel = CancellationToken::new();
    let mut tasks = Vec::new();
    // One broadcaster for the scheduler's events and the simulated kubelets'.
    let broadcaster = EventBroadcaster::new(Arc::new(KubeEventSink::new(client.clone())));
    if args.scheduler {
        let recorder = broadcaster.recorder(kcm_sim::scheduler::DEFAULT_SCHEDULER_NAME, None);
        let scheduler =
            Scheduler::new(client.clone(), &factory, recorder).context("starting the scheduler")?;
        let cancel = cancel.clone();
        tasks.push(tokio::spawn(async move { scheduler.run(cancel).await }));
    }
    if args.provisioner {
        let provisioner = Arc::new(Provisioner::new(
            &factory,
            Arc::new(KubeVolumeClient::new(client.clone())),
        ));
        let attacher = Arc::new(Attacher::new(
            &factory,
            Arc::new(KubeVolumeClient::new(client.clone())),
        ));
        let resizer = Arc::new(Resizer::new(
            &factory,
            Arc::new(KubeVolumeClient::new(client.clone())),
            broadcaster.recorder(&resizer::event_component(), None),
        ));
        let cancel = cancel.clone();
        let attacher_cancel = cancel.clone();
        let resizer_cancel = cancel.clone();
        tasks.push(tokio::spawn(async move {
            provisioner.run(Some(default_storage_class()), cancel).await
        }));
        tasks.push(tokio::spawn(
            async move { attacher.run(attacher_cancel).await },
        ));
        tasks.push(tokio::spawn(
            async move { resizer.run(resizer_cancel).await },
        ));
    }
    let simulator = Simulator::new(client, &factory, &broadcaster, args.simulator_config())
        .context("starting the simulator")?;
    tasks.push(tokio::spawn({
        let cancel = cancel.clone();
        async move { simulator.run(cancel).await }
    }));
    factory.start(&cancel);
    println!(
        "kcm sim: {} nodes ({}-0..){}",
        args.nodes,
        args.node_prefix,
        match (args.scheduler, args.provisioner) {
            (true, true) => ", scheduler and provisioner on",
            (true, false) => ", scheduler on",
            (false, true) => ", provisioner on",
            (false, false) => "",
        }
    );
    wait_for_signal().await?;
    tracing::info!("shutting down");
    cancel.cancel();
    for task in tasks {
        if let Err(err) = task.await {
            tracing::error!(%err, "a simulator task failed");
        }
    }
    factory.shutdown().await;
    broadcaster.shutdown().await;
    Ok(())
}

async fn wait_for_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.context("waiting for SIGINT")?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use kcm_sim::simulator::{
        DEFAULT_LEASE_RENEW_INTERVAL, DEFAULT_NODE_STATUS_UPDATE_PERIOD, DEFAULT_POD_READY_DELAY,
    };

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: SimArgs,
    }

    #[test]
    fn flags_and_defaults() {
        let cli = Cli::parse_from(["kcm"]);
        assert_eq!(cli.args.nodes, 3);
        assert!(cli.args.scheduler);
        let config = cli.args.simulator_config();
        // The flag defaults are the library's.
        assert_eq!(config.pod_ready_delay, DEFAULT_POD_READY_DELAY);
        assert_eq!(config.lease_renew_interval, DEFAULT_LEASE_RENEW_INTERVAL);
        assert_eq!(
            config.node_status_update_period,
            DEFAULT_NODE_STATUS_UPDATE_PERIOD
        );
        assert_eq!(config.template.node_name(2), "kcm-node-2");
        assert_eq!(
            config.dra_devices_per_node,
            kcm_sim::dra::DEFAULT_DEVICES_PER_NODE
        );

        let cli = Cli::parse_from([
            "kcm",
            "--kubeconfig",
            "/tmp/kc",
            "--nodes",
            "1000",
            "--node-prefix",
            "sim",
            "--pod-ready-delay",
            "500ms",
            "--node-cpu",
            "16",
            "--scheduler=false",
            "--dra-devices-per-node",
            "0",
        ]);
        assert_eq!(cli.args.kubeconfig, Some(PathBuf::from("/tmp/kc")));
        assert!(!cli.args.scheduler);
        let config = cli.args.simulator_config();
        assert_eq!(config.nodes, 1000);
        assert_eq!(config.pod_ready_delay, Duration::from_millis(500));
        assert_eq!(config.template.cpu, "16");
        assert_eq!(config.template.node_name(0), "sim-0");
        assert_eq!(config.dra_devices_per_node, 0);
        assert!(Cli::try_parse_from(["kcm", "--pod-ready-delay", "soon"]).is_err());
    }
}
