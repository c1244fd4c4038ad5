//! The taint eviction controller's metrics (`taint_eviction_controller_*`), as upstream's `tainteviction/metrics`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Upstream's buckets for the deletion latency: 5 ms to 4 min.
pub const POD_DELETION_DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0, 120.0, 180.0, 240.0,
];

/// The controller's metric families; cheap to clone (clones share the series).
/// [`register`](Self::register) them once in the process registry.
#[derive(Clone, Debug)]
pub struct TaintEvictionMetrics {
    /// Pods deleted since the controller started.
    pod_deletions: Counter,
    /// Seconds from the moment a pod's eviction was due to its deletion.
    pod_deletion_duration: Histogram,
}

impl Default for TaintEvictionMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl TaintEvictionMetrics {
    /// Zeroed series.
    pub fn new() -> Self {
        Self {
            pod_deletions: Counter::default(),
            pod_deletion_duration: Histogram::new(POD_DELETION_DURATION_BUCKETS),
        }
    }

    /// Registers the families under upstream's names.
    pub fn register(&self, registry: &mut Registry) {
        // The encoder appends `_total` to counters.
        registry.register(
            "taint_eviction_controller_pod_deletions",
            "Total number of Pods deleted by TaintEvictionController since its start.",
            self.pod_deletions.clone(),
        );
        registry.register(
            "taint_eviction_controller_pod_deletion_duration_seconds",
            "Latency, in seconds, between the time when a taint effect has been activated for \
             the Pod and its deletion via TaintEvictionController.",
            self.pod_deletion_duration.clone(),
        );
    }

    /// A pod was deleted `seconds` after its eviction was due. (kube-controller-manager 1.33
    /// multiplies the duration by `time.Second` before observing it, so its histogram only
    /// ever fills `+Inf`; upstream has since fixed that, and kcm observes seconds.)
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
        let metrics = TaintEvictionMetrics::new();
        metrics.pod_deleted(0.02);
        metrics.pod_deleted(3.0);
        assert_eq!(metrics.pod_deletions(), 2);
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encode");
        for needle in [
            "taint_eviction_controller_pod_deletions_total 2",
            "taint_eviction_controller_pod_deletion_duration_seconds_bucket{le=\"0.005\"} 0",
            "taint_eviction_controller_pod_deletion_duration_seconds_bucket{le=\"0.025\"} 1",
            "taint_eviction_controller_pod_deletion_duration_seconds_bucket{le=\"2.5\"} 1",
            "taint_eviction_controller_pod_deletion_duration_seconds_bucket{le=\"10.0\"} 2",
            "taint_eviction_controller_pod_deletion_duration_seconds_count 2",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
    }
}
