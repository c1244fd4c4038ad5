//! The device taint eviction controller's metrics (`device_taint_eviction_controller_*`), as upstream's `devicetainteviction/metrics`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The metrics' subsystem, the controller's name with underscores (upstream's
/// `controllerSubsystem`).
pub const SUBSYSTEM: &str = "device_taint_eviction_controller";

/// Upstream's buckets for the deletion latency: 5 ms to 4 min.
pub const POD_DELETION_DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0, 120.0, 180.0, 240.0,
];

/// The controller's metric families; cheap to clone (clones share the series).
/// [`register`](Self::register) them once in the process registry.
#[derive(Clone, Debug)]
pub struct DeviceTaintEvictionMetrics {
    /// Pods deleted since the controller started (upstream's `PodDeletionsTotal`).
    pod_deletions: Counter,
    /// Seconds from the moment a pod's eviction was due to its deletion (upstream's
    /// `PodDeletionsLatency`).
    pod_deletion_duration: Histogram,
}

impl Default for DeviceTaintEvictionMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl DeviceTaintEvictionMetrics {
    /// Zeroed series.
    pub fn new() -> Self {
        Self {
            pod_deletions: Counter::default(),
            pod_deletion_duration: Histogram::new(POD_DELETION_DURATION_BUCKETS),
        }
    }

    /// Registers the families under upstream's names.
    pub fn register(&self, registry: &mut Registry) {
        let sub = registry.sub_registry_with_prefix(SUBSYSTEM);
        // The encoder appends `_total` to counters.
        sub.register(
            "pod_deletions",
            "Total number of Pods deleted by DeviceTaintEvictionController since its start.",
            self.pod_deletions.clone(),
        );
        sub.register(
            "pod_deletion_duration_seconds",
            "Latency, in seconds, between the time when a device taint effect has been \
             activated and a Pod's deletion via DeviceTaintEvictionController.",
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

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn deletions_count_and_latency_land_in_upstream_buckets() {
        let metrics = DeviceTaintEvictionMetrics::new();
        metrics.pod_deleted(0.02);
        metrics.pod_deleted(45.0);
        assert_eq!(metrics.pod_deletions(), 2);
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encode");
        for needle in [
            "# HELP device_taint_eviction_controller_pod_deletions Total number of Pods deleted by DeviceTaintEvictionController since its start.",
            "device_taint_eviction_controller_pod_deletions_total 2",
            "device_taint_eviction_controller_pod_deletion_duration_seconds_bucket{le=\"0.005\"} 0",
            "device_taint_eviction_controller_pod_deletion_duration_seconds_bucket{le=\"0.025\"} 1",
            "device_taint_eviction_controller_pod_deletion_duration_seconds_bucket{le=\"30.0\"} 1",
            "device_taint_eviction_controller_pod_deletion_duration_seconds_bucket{le=\"60.0\"} 2",
            "device_taint_eviction_controller_pod_deletion_duration_seconds_count 2",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
    }
}
