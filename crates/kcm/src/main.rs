//! The `kcm` binary: one subcommand per component (`apiserver` today; `run`, `up`, `sim` join it).

mod apiserver_cmd;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// kcm: the Kubernetes controller manager in Rust, with an embedded control plane.
#[derive(Debug, Parser)]
#[command(name = "kcm", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the embedded Kubernetes API server alone.
    Apiserver(apiserver_cmd::Args),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("KCM_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Apiserver(args) => apiserver_cmd::run(args).await,
    }
}
