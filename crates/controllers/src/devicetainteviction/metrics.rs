//! The device taint eviction controller's metrics (`device_taint_eviction_controller_*`), as upstream's `devicetainteviction/metrics`.

pub use crate::evictionmetrics::POD_DELETION_DURATION_BUCKETS;
use crate::evictionmetrics::{EvictionMetricNames, PodDeletionMetrics};

/// The metrics' subsystem, the controller's name with underscores (upstream's
/// `controllerSubsystem`).
pub const SUBSYSTEM: &str = "device_taint_eviction_controller";

/// The controller's metric families.
pub type DeviceTaintEvictionMetrics = PodDeletionMetrics;

/// Upstream's names and help texts.
pub static NAMES: EvictionMetricNames = EvictionMetricNames {
    subsystem: SUBSYSTEM,
    deletions_help: "Total number of Pods deleted by DeviceTaintEvictionController since its start.",
    duration_help: "Latency, in seconds, between the time when a device taint effect has been \
                    activated and a Pod's deletion via DeviceTaintEvictionController.",
};

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn deletions_count_and_latency_land_in_upstream_buckets() {
        let metrics = DeviceTaintEvictionMetrics::new(&NAMES);
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
