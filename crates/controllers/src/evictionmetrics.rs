//! The pod deletion metrics both taint managers keep (`<subsystem>_pod_deletions_total` and `<subsystem>_pod_deletion_duration_seconds`), as upstream's `tainteviction/metrics` and `devicetainteviction/metrics`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Upstream's buckets for the deletion latency: 5 ms to 4 min.
pub const POD_DELETION_DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0, 120.0, 180.0, 240.0,
];

/// What one controller calls its families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvictionMetricNames {
    /// The prefix of both names (upstream's subsystem, e.g. `taint_eviction_controller`).
    pub subsystem: &'static str,
    /// The help of `<subsystem>_pod_deletions`.
    pub deletions_help: &'static str,
    /// The help of `<subsystem>_pod_deletion_duration_seconds`.
    pub duration_help: &'static str,
}

/// A taint manager's metric families; cheap to clone (clones share the series).
/// [`register`](Self::register) them once in the process registry.
#[derive(Clone, Debug)]
pub struct PodDeletionMetrics {
    names: &'static EvictionMetricNames,
    /// Pods deleted since the controller started (upstream's `PodDeletionsTotal`).
    pod_deletions: Counter,
    /// Seconds from the moment a pod's eviction was due to its deletion (upstream's
    /// `PodDeletionsLatency`).
    pod_deletion_duration: Histogram,
}

impl PodDeletionMetrics {
    /// Zeroed series, to be registered under `names`.
    pub fn new(names: &'static EvictionMetricNames) -> Self {
        Self {
            names,
            pod_deletions: Counter::default(),
            pod_deletion_duration: Histogram::new(POD_DELETION_DURATION_BUCKETS),
        }
    }

    /// Registers the families under upstream's names.
    pub fn register(&self, registry: &mut Registry) {
        let sub = registry.sub_registry_with_prefix(self.names.subsystem);
        // The encoder appends `_total` to counters.
        sub.register(
            "pod_deletions",
            self.names.deletions_help,
            self.pod_deletions.clone(),
        );
        sub.register(
            "pod_deletion_duration_seconds",
            self.names.duration_help,
            self.pod_deletion_duration.clone(),
        );
    }

    /// A pod was deleted `seconds` after its eviction was due.
    pub fn pod_deleted(&self, seconds: f64) {
        self.pod_deletions.inc();
        self.pod_deletion_duration.observe(seconds);
    }

    /// Pods deleted so far.
    pub fn pod_deletions(&self) -> u64 {
        self.pod_deletions.get()
    }
}
