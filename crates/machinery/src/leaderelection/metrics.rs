//! Leader election metrics with client-go's names (`leader_election_master_status`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The `name` label: the lease's name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseNameLabel {
    /// The lease name, e.g. `kube-controller-manager`.
    pub name: String,
}

/// Leader election metrics, shared by every elector of a process; register once.
#[derive(Clone, Debug, Default)]
pub struct LeaderElectionMetrics {
    /// `leader_election_master_status{name}`: 1 while this process leads the lease, else 0.
    master_status: Family<LeaseNameLabel, Gauge>,
    /// `leader_election_slowpath_total{name}`: renewals that needed a fresh read of the lease.
    slowpath: Family<LeaseNameLabel, Counter>,
}

impl LeaderElectionMetrics {
    /// New, unregistered metrics.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the metrics in `registry` under client-go's names.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            self.master_status.clone(),
        );
        registry.register(
            "leader_election_slowpath",
            "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
            self.slowpath.clone(),
        );
    }

    /// Sets `leader_election_master_status{name}`.
    pub fn set_leader(&self, name: &str, leading: bool) {
        self.master_status
            .get_or_create(&LeaseNameLabel {
                name: name.to_owned(),
            })
            .set(i64::from(leading));
    }

    /// Current value of `leader_election_master_status{name}` (0 when never set).
    pub fn is_leader(&self, name: &str) -> bool {
        self.master_status
            .get_or_create(&LeaseNameLabel {
                name: name.to_owned(),
            })
            .get()
            == 1
    }

    /// Counts one slow-path renewal.
    pub(crate) fn slowpath_exercised(&self, name: &str) {
        self.slowpath
            .get_or_create(&LeaseNameLabel {
                name: name.to_owned(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn master_status_is_exposed_with_name_label() {
        let metrics = LeaderElectionMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.set_leader("kube-controller-manager", true);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains("leader_election_master_status{name=\"kube-controller-manager\"} 1"),
            "{text}"
        );
        metrics.set_leader("kube-controller-manager", false);
        assert!(!metrics.is_leader("kube-controller-manager"));
    }
}
