//! The API server's request-limit flags, shared by `kcm apiserver` and `kcm up` (kube-apiserver's names and defaults).

use std::time::Duration;

use clap::Args;
use kcm_apiserver::ServerConfig;
use kcm_apiserver::registry::service_ip::ServiceIpRange;

/// Limits on the requests the embedded API server serves.
#[derive(Clone, Debug, Args)]
pub struct LimitArgs {
    /// Request bodies above this many bytes are refused with 413 (kube-apiserver's
    /// MaxRequestBodyBytes, 3 MiB).
    #[arg(long, value_name = "bytes", default_value_t = 3 * 1024 * 1024)]
    pub max_request_bytes: usize,
    /// The most read requests served at once; more get 429 with Retry-After (0: no limit).
    /// Watches, logs and other long-running requests do not count.
    #[arg(long, value_name = "n", default_value_t = 400)]
    pub max_requests_inflight: usize,
    /// The most write requests served at once; more get 429 with Retry-After (0: no limit).
    #[arg(long, value_name = "n", default_value_t = 200)]
    pub max_mutating_requests_inflight: usize,
    /// How long a request that is not long-running may take before it gets 504 (Go duration;
    /// 0 disables the timeout).
    #[arg(long, value_name = "duration", default_value = "1m0s", value_parser = parse_timeout)]
    pub request_timeout: Duration,
    /// The IPv4 range Service cluster IPs come from (kube-apiserver's flag; a mask of 12 to
    /// 30 bits). The first address is the `default/kubernetes` Service's.
    #[arg(
        long,
        value_name = "cidr",
        default_value = kcm_apiserver::registry::service_ip::SERVICE_CIDR
    )]
    pub service_cluster_ip_range: ServiceIpRange,
    /// How long events are kept after their last write (kube-apiserver's flag; 0 keeps them).
    #[arg(long, value_name = "duration", default_value = "1h0m0s", value_parser = parse_timeout)]
    pub event_ttl: Duration,
    /// Bootstrap tokens (`bootstrap.kubernetes.io/token` Secrets in kube-system marked
    /// `usage-bootstrap-authentication`) authenticate as `system:bootstrap:<token-id>`
    /// (kube-apiserver's flag, off by default; kubeadm turns it on for TLS bootstrap).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_bootstrap_token_auth: bool,
    /// The address the `default/kubernetes` Endpoints and EndpointSlice advertise
    /// (kube-apiserver's flag). Unset: the listen address, or for a loopback or wildcard
    /// listener the address of the default route's interface, as kube-apiserver.
    #[arg(long, value_name = "ip")]
    pub advertise_address: Option<std::net::IpAddr>,
}

impl LimitArgs {
    /// Sets these limits on `config`.
    pub fn apply(&self, config: &mut ServerConfig) {
        config.max_request_body_bytes = self.max_request_bytes;
        config.max_requests_inflight = self.max_requests_inflight;
        config.max_mutating_requests_inflight = self.max_mutating_requests_inflight;
        config.request_timeout = self.request_timeout;
        config.service_ip_range = self.service_cluster_ip_range.clone();
        config.event_ttl = self.event_ttl();
        config.enable_bootstrap_token_auth = self.enable_bootstrap_token_auth;
        config.advertise_address = self.advertise_address;
    }

    /// `--event-ttl` as the server takes it: `None` keeps events.
    pub fn event_ttl(&self) -> Option<Duration> {
        (!self.event_ttl.is_zero()).then_some(self.event_ttl)
    }
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    kcm_sim::kubelet::parse_duration(s)
        .ok_or_else(|| format!("invalid duration {s:?} (use e.g. 30s, 1m0s)"))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        limits: LimitArgs,
    }

    #[test]
    fn defaults_are_kube_apiservers() {
        let cli = Cli::parse_from(["kcm"]);
        let mut config = ServerConfig::new("/tmp/unused");
        cli.limits.apply(&mut config);
        let defaults = ServerConfig::new("/tmp/unused");
        assert_eq!(config.max_request_body_bytes, 3_145_728);
        assert_eq!(
            config.max_request_body_bytes,
            defaults.max_request_body_bytes
        );
        assert_eq!(config.max_requests_inflight, 400);
        assert_eq!(config.max_mutating_requests_inflight, 200);
        assert_eq!(config.request_timeout, Duration::from_secs(60));
        assert_eq!(config.request_timeout, defaults.request_timeout);
        assert_eq!(config.service_ip_range.as_str(), "10.96.0.0/12");
        assert_eq!(config.service_ip_range, defaults.service_ip_range);
        assert_eq!(config.event_ttl, Some(Duration::from_secs(3600)));
        assert_eq!(config.event_ttl, defaults.event_ttl);
        assert!(
            !config.enable_bootstrap_token_auth,
            "off, as kube-apiserver's"
        );
        assert_eq!(
            config.enable_bootstrap_token_auth,
            defaults.enable_bootstrap_token_auth
        );
    }

    #[test]
    fn flags() {
        let cli = Cli::parse_from([
            "kcm",
            "--max-request-bytes=1024",
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight=5",
            "--request-timeout=1m30s",
            "--service-cluster-ip-range=172.20.0.0/16",
        ]);
        assert_eq!(
            cli.limits.service_cluster_ip_range.as_str(),
            "172.20.0.0/16"
        );
        assert!(Cli::try_parse_from(["kcm", "--service-cluster-ip-range=10.0.0.0/8"]).is_err());
        assert_eq!(cli.limits.max_request_bytes, 1024);
        assert_eq!(cli.limits.max_requests_inflight, 0);
        assert_eq!(cli.limits.max_mutating_requests_inflight, 5);
        assert_eq!(cli.limits.request_timeout, Duration::from_secs(90));
        let cli = Cli::parse_from(["kcm", "--request-timeout=0"]);
        assert_eq!(cli.limits.request_timeout, Duration::ZERO);
        assert!(Cli::try_parse_from(["kcm", "--request-timeout=soon"]).is_err());
        let mut config = ServerConfig::new("/tmp/unused");
        Cli::parse_from(["kcm", "--event-ttl=0"])
            .limits
            .apply(&mut config);
        assert_eq!(config.event_ttl, None, "0 keeps events");
        Cli::parse_from(["kcm", "--event-ttl=10m"])
            .limits
            .apply(&mut config);
        assert_eq!(config.event_ttl, Some(Duration::from_secs(600)));
        for (args, want) in [
            (&["kcm", "--enable-bootstrap-token-auth"][..], true),
            (&["kcm", "--enable-bootstrap-token-auth=true"][..], true),
            (&["kcm", "--enable-bootstrap-token-auth=false"][..], false),
        ] {
            Cli::parse_from(args).limits.apply(&mut config);
            assert_eq!(config.enable_bootstrap_token_auth, want, "{args:?}");
        }
        Cli::parse_from(["kcm", "--advertise-address=192.0.2.7"])
            .limits
            .apply(&mut config);
        assert_eq!(
            config.advertise_address,
            Some("192.0.2.7".parse().expect("ip"))
        );
        assert!(Cli::try_parse_from(["kcm", "--advertise-address=not-an-ip"]).is_err());
    }
}
