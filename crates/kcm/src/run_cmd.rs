//! `kcm run`: the controller manager, with kube-controller-manager's flags.

use std::io::IsTerminal;

use anyhow::Context;
use clap::{Args, ValueEnum};
use kcm_controllers::manager::{
    ControllerManager, ControllerRegistry, ManagerOptions, install_signal_handler,
};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// What `kcm run --help` says first, as kube-controller-manager's description (set on the
/// `run` subcommand in `main.rs`).
pub const LONG_ABOUT: &str = "\
The Kubernetes controller manager is a daemon that embeds the core control loops of
Kubernetes. A control loop is a non-terminating loop that regulates the state of the
system: a controller watches the shared state of the cluster through the API server and
makes changes attempting to move the current state towards the desired state.

kcm runs kube-controller-manager's controllers (see --controllers) against any cluster,
with the same flags, leader election on a Lease, and /healthz, /livez, /readyz and
/metrics served over HTTPS.";

/// The flags of `kcm run`.
#[derive(Debug, Args)]
#[command(next_line_help = true)]
pub struct RunArgs {
    /// The controller manager's flags.
    #[command(flatten)]
    pub options: ManagerOptions,
    /// Logging.
    #[command(flatten)]
    pub logs: LogFlags,
}

/// `--logging-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines with `key=value` fields.
    Text,
    /// One JSON object per line.
    Json,
}

/// Logging flags, as component-base's (`-v`, `--logging-format`).
#[derive(Debug, Args)]
#[command(next_help_heading = "Logs flags")]
pub struct LogFlags {
    /// Log verbosity: 0–2 info, 3–4 debug, 5 and more trace. `KCM_LOG` (a tracing filter such
    /// as `info,kcm_controllers=debug`) overrides it.
    #[arg(
        short = 'v',
        long = "v",
        value_name = "Level",
        default_value_t = 0,
        help = "Number for the log level verbosity (0-2 info, 3-4 debug, 5+ trace). The \
                KCM_LOG environment variable, a tracing filter, overrides it."
    )]
    pub verbosity: u8,

    /// Log line format.
    #[arg(
        long = "logging-format",
        alias = "log-format",
        value_enum,
        default_value_t = LogFormat::Text,
        help = "Sets the log format (--log-format is accepted too)."
    )]
    pub format: LogFormat,
}

/// The tracing filter for `-v`: klog's levels 0–2 are routine information, 3–4 debugging,
/// 5 and above tracing. Chatty transport crates stay at info below trace.
pub fn verbosity_filter(verbosity: u8) -> String {
    match verbosity {
        0..=2 => "info".to_owned(),
        3..=4 => "debug,hyper=info,hyper_util=info,h2=info,rustls=info,tower=info".to_owned(),
        _ => "trace".to_owned(),
    }
}

fn init_logging(flags: &LogFlags) -> anyhow::Result<()> {
    let filter = match std::env::var("KCM_LOG") {
        Ok(spec) if !spec.is_empty() => {
            EnvFilter::try_new(&spec).with_context(|| format!("KCM_LOG={spec:?}"))?
        }
        _ => EnvFilter::new(verbosity_filter(flags.verbosity)),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let installed = match flags.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("install the logger: {e}"))
}

/// Runs the controller manager until SIGINT/SIGTERM (exit 0 after a graceful stop; a second
/// signal exits 1 at once). Fails (exit 1) on invalid flags, when leadership is lost, or when
/// a controller cannot start.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    init_logging(&args.logs)?;
    let manager = ControllerManager::new(args.options, ControllerRegistry::builtin())?;
    let cancel = CancellationToken::new();
    install_signal_handler(cancel.clone()).context("install the signal handler")?;
    tracing::info!(controllers = ?manager.enabled_controllers(), "Controllers enabled");
    manager.run(cancel).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[derive(Debug, Parser)]
    #[command(name = "kcm-run")]
    struct Cli {
        #[command(flatten)]
        args: RunArgs,
    }

    #[test]
    fn log_flags_parse_as_kube_controller_managers() {
        let cases: [(&str, &[&str], u8, LogFormat); 5] = [
            ("defaults", &[], 0, LogFormat::Text),
            ("short v", &["-v", "4"], 4, LogFormat::Text),
            ("long v with equals", &["--v=2"], 2, LogFormat::Text),
            (
                "logging-format",
                &["--logging-format=json"],
                0,
                LogFormat::Json,
            ),
            (
                "log-format alias",
                &["--log-format", "json"],
                0,
                LogFormat::Json,
            ),
        ];
        for (name, args, verbosity, format) in cases {
            let cli = Cli::try_parse_from(std::iter::once("kcm-run").chain(args.iter().copied()))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(cli.args.logs.verbosity, verbosity, "{name}");
            assert_eq!(cli.args.logs.format, format, "{name}");
        }
        assert!(Cli::try_parse_from(["kcm-run", "--logging-format=xml"]).is_err());
    }

    #[test]
    fn verbosity_maps_onto_tracing_levels() {
        assert_eq!(verbosity_filter(0), "info");
        assert_eq!(verbosity_filter(2), "info");
        assert!(verbosity_filter(4).starts_with("debug,"));
        assert_eq!(verbosity_filter(9), "trace");
        for v in [0, 3, 5] {
            EnvFilter::try_new(verbosity_filter(v)).expect("valid filter");
        }
    }

    #[test]
    fn help_lists_logs_after_the_manager_groups() {
        let help = Cli::command().render_long_help().to_string();
        let misc = help.find("Misc flags:").expect("misc");
        let logs = help.find("Logs flags:").expect("logs");
        assert!(misc < logs, "{help}");
    }
}
