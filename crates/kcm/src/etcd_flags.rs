//! kube-apiserver's etcd flags (`--etcd-servers` and friends), shared by `kcm apiserver` and `kcm up`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use kcm_apiserver::storage::{EtcdOptions, EtcdTls, etcd};

/// Where to keep objects when they live in etcd instead of the SQLite file.
#[derive(Clone, Debug, Default, Args)]
pub struct EtcdFlags {
    /// etcd client URLs (`http://127.0.0.1:2379`, comma-separated or repeated). Without it
    /// objects are kept in DATA_DIR/state.db (SQLite).
    #[arg(long, value_delimiter = ',', value_name = "URL")]
    pub etcd_servers: Vec<String>,
    /// The key prefix of every object in etcd.
    #[arg(long, default_value = etcd::DEFAULT_ETCD_PREFIX)]
    pub etcd_prefix: String,
    /// CA bundle that signed the etcd servers' certificates (TLS).
    #[arg(long, value_name = "FILE")]
    pub etcd_cafile: Option<PathBuf>,
    /// Client certificate for etcd (TLS), with --etcd-keyfile.
    #[arg(long, value_name = "FILE", requires = "etcd_keyfile")]
    pub etcd_certfile: Option<PathBuf>,
    /// Client key for etcd (TLS), with --etcd-certfile.
    #[arg(long, value_name = "FILE", requires = "etcd_certfile")]
    pub etcd_keyfile: Option<PathBuf>,
    /// How often the store is compacted (Go duration; 0 never), as kube-apiserver's flag: etcd,
    /// or without `--etcd-servers` the SQLite file.
    #[arg(long, value_name = "duration", default_value = "5m0s", value_parser = parse_interval)]
    pub etcd_compaction_interval: Duration,
}

impl EtcdFlags {
    /// `--etcd-compaction-interval`, `None` for 0.
    pub fn compaction_interval(&self) -> Option<Duration> {
        (!self.etcd_compaction_interval.is_zero()).then_some(self.etcd_compaction_interval)
    }

    /// The etcd store these flags ask for; `None` without `--etcd-servers`.
    pub fn options(&self) -> Option<EtcdOptions> {
        let endpoints: Vec<String> = self
            .etcd_servers
            .iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        if endpoints.is_empty() {
            return None;
        }
        Some(EtcdOptions {
            prefix: self.etcd_prefix.clone(),
            tls: EtcdTls {
                ca_file: self.etcd_cafile.clone(),
                cert_file: self.etcd_certfile.clone(),
                key_file: self.etcd_keyfile.clone(),
            },
            compaction_interval: self.compaction_interval(),
            ..EtcdOptions::new(endpoints)
        })
    }
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    kcm_sim::kubelet::parse_duration(s)
        .ok_or_else(|| format!("invalid duration {s:?} (use e.g. 5m0s, 30s, 0)"))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        etcd: EtcdFlags,
    }

    #[test]
    fn without_servers_there_is_no_etcd() {
        let cli = Cli::parse_from(["kcm"]);
        assert_eq!(cli.etcd.options(), None);
        assert_eq!(cli.etcd.etcd_prefix, "/registry");
        assert_eq!(cli.etcd.etcd_compaction_interval, Duration::from_secs(300));
    }

    #[test]
    fn servers_prefix_tls_and_interval() {
        let cli = Cli::parse_from([
            "kcm",
            "--etcd-servers",
            "https://10.0.0.1:2379,https://10.0.0.2:2379",
            "--etcd-servers=https://10.0.0.3:2379",
            "--etcd-prefix",
            "/kcm",
            "--etcd-cafile",
            "/pki/ca.crt",
            "--etcd-certfile",
            "/pki/c.crt",
            "--etcd-keyfile",
            "/pki/c.key",
            "--etcd-compaction-interval",
            "0",
        ]);
        let options = cli.etcd.options().expect("etcd");
        assert_eq!(
            options.endpoints,
            [
                "https://10.0.0.1:2379",
                "https://10.0.0.2:2379",
                "https://10.0.0.3:2379"
            ]
        );
        assert_eq!(options.prefix, "/kcm");
        assert_eq!(options.tls.ca_file, Some(PathBuf::from("/pki/ca.crt")));
        assert_eq!(options.tls.key_file, Some(PathBuf::from("/pki/c.key")));
        assert_eq!(options.compaction_interval, None);
    }

    #[test]
    fn a_certificate_needs_its_key() {
        let err = Cli::try_parse_from(["kcm", "--etcd-certfile", "/c.crt"]).expect_err("no key");
        assert!(err.to_string().contains("etcd-keyfile"), "{err}");
    }
}
