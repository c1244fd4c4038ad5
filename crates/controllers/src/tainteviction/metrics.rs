//! The taint eviction controller's metrics (`taint_eviction_controller_*`), as upstream's `tainteviction/metrics`.
//!
//! (kube-controller-manager 1.33 multiplies the deletion duration by `time.Second` before
//! observing it, so its histogram only ever fills `+Inf`; upstream has since fixed that, and
//! kcm observes seconds.)

pub use crate::evictionmetrics::POD_DELETION_DURATION_BUCKETS;
use crate::evictionmetrics::{EvictionMetricNames, PodDeletionMetrics};

/// The controller's metric families.
pub type TaintEvictionMetrics = PodDeletionMetrics;

/// Upstream's names and help texts.
pub static NAMES: EvictionMetricNames = EvictionMetricNames {
    subsystem: "taint_eviction_controller",
    deletions_help: "Total number of Pods deleted by TaintEvictionController since its start.",
    duration_help: "Latency, in seconds, between the time when a taint effect has been activated \
                    for the Pod and its deletion via TaintEvictionController.",
};

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn deletions_count_and_latency_land_in_upstream_buckets() {
        let metrics = TaintEvictionMetrics::new(&NAMES);
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
