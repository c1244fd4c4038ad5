//! Leader election configuration with kube-controller-manager's defaults, and the identity helper.

use std::time::Duration;

use super::error::{Error, Result};

/// Default `--leader-elect-lease-duration`.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Default `--leader-elect-renew-deadline`.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Default `--leader-elect-retry-period`.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);
/// Retries wait `retry_period * (1 + rand * JITTER_FACTOR)` while not leading, as client-go.
pub const JITTER_FACTOR: f64 = 1.2;

/// How an elector competes for its lease, as client-go's `LeaderElectionConfig`.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease (`--leader-elect-resource-namespace`, `kube-system`).
    pub namespace: String,
    /// Name of the Lease (`--leader-elect-resource-name`); also the `name` label of the metrics.
    pub name: String,
    /// Who we are; written as `holderIdentity`. Must be unique per process: see [`new_identity`].
    pub identity: String,
    /// How long candidates wait, after last observing a change of the record, before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a renewal before giving up leadership.
    pub renew_deadline: Duration,
    /// Time between attempts (acquire or renew).
    pub retry_period: Duration,
    /// Release the lease when the run is cancelled, so a standby takes over at once.
    /// Only set it when everything the lease guards has stopped by then; the elector waits for
    /// the leading task to finish (and keeps renewing meanwhile) before releasing.
    pub release_on_cancel: bool,
}

impl LeaderElectionConfig {
    /// A config for the Lease `namespace/name` with kube-controller-manager's default timings
    /// (15s / 10s / 2s) and `release_on_cancel` off, as client-go's zero value.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            release_on_cancel: false,
        }
    }

    /// Checks client-go's rules (`NewLeaderElector`): lease duration > renew deadline >
    /// retry period × jitter factor, all positive, and a non-empty identity.
    pub fn validate(&self) -> Result<()> {
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::InvalidConfig(
                "leaseDuration must be greater than renewDeadline",
            ));
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(Error::InvalidConfig(
                "renewDeadline must be greater than retryPeriod*JitterFactor",
            ));
        }
        if self.lease_duration.is_zero() {
            return Err(Error::InvalidConfig(
                "leaseDuration must be greater than zero",
            ));
        }
        if self.renew_deadline.is_zero() {
            return Err(Error::InvalidConfig(
                "renewDeadline must be greater than zero",
            ));
        }
        if self.retry_period.is_zero() {
            return Err(Error::InvalidConfig(
                "retryPeriod must be greater than zero",
            ));
        }
        if self.identity.is_empty() {
            return Err(Error::InvalidConfig("Lock identity is empty"));
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as written into the Lease (whole seconds, at least 1).
    pub(crate) fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs())
            .unwrap_or(i32::MAX)
            .max(1)
    }
}

/// A unique identity `hostname_<uuid>`, as kube-controller-manager builds it.
pub fn new_identity() -> String {
    identity_for_host(&hostname())
}

/// `host_<uuid v4>`.
pub fn identity_for_host(host: &str) -> String {
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// The machine's host name: the kernel's, else `$HOSTNAME`, else `localhost`.
fn hostname() -> String {
    let from_kernel = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    from_kernel
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kube_controller_managers() {
        let config = LeaderElectionConfig::new("kube-system", "kube-controller-manager", "me");
        assert_eq!(config.lease_duration, Duration::from_secs(15));
        assert_eq!(config.renew_deadline, Duration::from_secs(10));
        assert_eq!(config.retry_period, Duration::from_secs(2));
        assert_eq!(config.lease_duration_seconds(), 15);
        config.validate().expect("defaults are valid");
    }

    #[test]
    fn validation_rejects_what_client_go_rejects() {
        struct Case {
            name: &'static str,
            lease: u64,
            renew: u64,
            retry: u64,
            identity: &'static str,
            want: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "valid",
                lease: 15,
                renew: 2,
                retry: 1,
                identity: "baz",
                want: None,
            },
            Case {
                name: "lease not above renew",
                lease: 10,
                renew: 10,
                retry: 2,
                identity: "baz",
                want: Some("leaseDuration must be greater than renewDeadline"),
            },
            Case {
                name: "renew not above jittered retry",
                lease: 15,
                renew: 2,
                retry: 2,
                identity: "baz",
                want: Some("renewDeadline must be greater than retryPeriod*JitterFactor"),
            },
            Case {
                name: "empty identity",
                lease: 15,
                renew: 10,
                retry: 2,
                identity: "",
                want: Some("Lock identity is empty"),
            },
        ];
        for case in cases {
            let mut config = LeaderElectionConfig::new("ns", "name", case.identity);
            config.lease_duration = Duration::from_secs(case.lease);
            config.renew_deadline = Duration::from_secs(case.renew);
            config.retry_period = Duration::from_secs(case.retry);
            let got = config.validate().err().map(|e| match e {
                Error::InvalidConfig(msg) => msg,
                other => panic!("{}: unexpected error {other}", case.name),
            });
            assert_eq!(got, case.want, "{}", case.name);
        }
    }

    #[test]
    fn identity_is_host_underscore_uuid_and_unique() {
        let a = identity_for_host("node-1");
        let b = identity_for_host("node-1");
        assert_ne!(a, b);
        let (host, id) = a.split_once('_').expect("underscore");
        assert_eq!(host, "node-1");
        uuid::Uuid::parse_str(id).expect("uuid suffix");
        assert!(!new_identity().is_empty());
    }
}
