//! `kcm apiserver`: serves the embedded API server until interrupted.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args as ClapArgs, ValueEnum};
use kcm_apiserver::{Server, ServerConfig, StorageBackend};

use crate::admission_flags::AdmissionFlags;
use crate::etcd_flags::EtcdFlags;

/// Flags of `kcm apiserver`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Where the store, the generated CA and token, and the kubeconfig live.
    #[arg(long, env = "KCM_DATA_DIR", default_value = "kcm-data")]
    pub data_dir: PathBuf,
    /// Address to listen on; port 0 picks a free port (the kubeconfig holds the real one).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Where objects are stored (ignored with --etcd-servers).
    #[arg(long, value_enum, default_value_t = StorageKind::Sqlite)]
    pub storage: StorageKind,
    /// Request limits.
    #[command(flatten)]
    pub limits: crate::server_limits::LimitArgs,
    /// Keep objects in etcd instead (several API servers may share it).
    #[command(flatten)]
    pub etcd: EtcdFlags,
    /// The admission plugins.
    #[command(flatten)]
    pub admission: AdmissionFlags,
}

/// The `--storage` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StorageKind {
    /// kine-style SQLite log in DATA_DIR/state.db (durable).
    Sqlite,
    /// In memory (lost on exit).
    Memory,
}

/// Starts the server, prints where it is, and serves until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let mut config = ServerConfig::new(&args.data_dir);
    config.listen = args.listen;
    config.storage = match (args.etcd.options(), args.storage) {
        (Some(etcd), _) => StorageBackend::Etcd(etcd),
        (None, StorageKind::Sqlite) => StorageBackend::Sqlite,
        (None, StorageKind::Memory) => StorageBackend::Memory,
    };
    config.compaction_interval = args.etcd.compaction_interval();
    args.limits.apply(&mut config);
    config.admission = args.admission.config();
    let server = Server::start(config)
        .await
        .with_context(|| format!("starting the API server in {}", args.data_dir.display()))?;
    println!("kcm apiserver listening on {}", server.url());
    println!("kubeconfig: {}", server.kubeconfig_path().display());
    wait_for_signal().await?;
    tracing::info!("shutting down");
    server.shutdown().await;
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

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn flags_and_defaults() {
        let cli = Cli::parse_from(["kcm"]);
        assert_eq!(cli.args.listen, "127.0.0.1:6443".parse().expect("addr"));
        assert_eq!(cli.args.storage, StorageKind::Sqlite);
        let cli = Cli::parse_from([
            "kcm",
            "--data-dir",
            "/tmp/x",
            "--listen",
            "127.0.0.1:0",
            "--storage",
            "memory",
        ]);
        assert_eq!(cli.args.data_dir, PathBuf::from("/tmp/x"));
        assert_eq!(cli.args.listen.port(), 0);
        assert_eq!(cli.args.storage, StorageKind::Memory);
    }
}
