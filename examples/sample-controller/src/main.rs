//! `sample-controller --kubeconfig FILE`: runs the Foo controller until SIGTERM or Ctrl-C.

use anyhow::Context;
use clap::Parser;
use tokio_util::sync::CancellationToken;

/// Flags, as upstream's `main.go`.
#[derive(Debug, Parser)]
#[command(name = "sample-controller", about = "Runs the Foo controller")]
struct Flags {
    /// Path to a kubeconfig. Only required if out-of-cluster.
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// The address of the Kubernetes API server. Overrides any value in kubeconfig. Only
    /// required if out-of-cluster.
    #[arg(long)]
    master: Option<String>,
    /// How many Foos are synced at once.
    #[arg(long, default_value_t = sample_controller::controller::DEFAULT_WORKERS)]
    workers: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let flags = Flags::parse();
    let mut config = match &flags.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .context("building the client config")?
        }
        None => kube::Config::infer()
            .await
            .context("inferring the client config")?,
    };
    if let Some(master) = &flags.master {
        config.cluster_url = master.parse().context("parsing --master")?;
    }
    let client = kube::Client::try_from(config).context("building the client")?;
    let cancel = CancellationToken::new();
    let signals = cancel.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("signal received, shutting down");
        signals.cancel();
    });
    sample_controller::run(client, flags.workers, cancel).await;
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT), as upstream's `signals.SetupSignalHandler`.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
