//! The `kcm` binary: `up` (the whole embedded cluster) and one subcommand per component.

mod admission_flags;
mod apiserver_cmd;
mod bench;
mod etcd_flags;
mod run_cmd;
mod server_limits;
mod sim_cmd;
mod sim_logs;
mod sim_usage;
mod up_cmd;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// jemalloc instead of glibc's malloc, with background purge threads, and with the unprefixed
/// `malloc` symbols so that SQLite's C allocations use it too. In the 2-hour soak glibc's
/// per-thread arenas kept freed memory: RSS grew 40 % after the first 10 minutes, the live
/// heap 4 % over the last 80. Paired against glibc, jemalloc grew less and took 16 % less CPU
/// (BENCHMARKS.md, "jemalloc instead of glibc's malloc").
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// kcm: the Kubernetes controller manager in Rust, with an embedded control plane.
#[derive(Debug, Parser)]
#[command(name = "kcm", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a whole cluster in one process: API server, controllers, scheduler, simulated nodes.
    Up(up_cmd::UpArgs),
    /// Run the embedded Kubernetes API server alone.
    Apiserver(apiserver_cmd::Args),
    /// Run the controllers against a cluster, in place of kube-controller-manager's.
    #[command(long_about = run_cmd::LONG_ABOUT, args_override_self = true)]
    Run(run_cmd::RunArgs),
    /// Run simulated nodes (and a scheduler) against a cluster.
    Sim(sim_cmd::SimArgs),
    /// Create Deployments on simulated nodes and measure the time to all available, CPU,
    /// memory, API requests and work queues (an embedded cluster unless --kubeconfig).
    Bench(bench::BenchArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        // `kcm up` logs warnings only, unless KCM_LOG says otherwise.
        Command::Up(args) => up_cmd::run(args).await,
        Command::Apiserver(args) => {
            init_default_logging();
            apiserver_cmd::run(args).await
        }
        // `kcm run` configures logging from its own flags (-v, --logging-format).
        Command::Run(args) => run_cmd::run(args).await,
        Command::Sim(args) => {
            init_default_logging();
            sim_cmd::run(args).await
        }
        // Like `kcm up`: warnings only, unless KCM_LOG says otherwise.
        Command::Bench(args) => bench::run(args).await,
    }
}

fn init_default_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("KCM_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
}
