//! The service-lb controller's own metrics, as upstream's
//! `k8s.io/cloud-provider/controllers/service/metrics.go` (subsystem `service_controller`).

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The counter of load balancer host updates (`_total` is added when encoded).
pub const LOADBALANCER_SYNC: &str = "service_controller_loadbalancer_sync";
/// The counter of failed load balancer host updates (`_total` is added when encoded).
pub const NODESYNC_ERROR: &str = "service_controller_nodesync_error";
/// The full name of the node sync latency histogram.
pub const NODESYNC_LATENCY: &str = "service_controller_nodesync_latency_seconds";
/// The full name of the per-load-balancer host update latency histogram.
pub const UPDATE_LOADBALANCER_HOST_LATENCY: &str =
    "service_controller_update_loadbalancer_host_latency_seconds";

/// Upstream's buckets for both histograms: 1s doubling, fifteen of them (1s to 16384s).
fn buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(1.0, 2.0, 15)
}

/// The controller's metric families. Build one per controller, [`register`](Self::register)
/// it and hand the `Arc` to [`ServiceLbControllerOptions`](super::ServiceLbControllerOptions).
#[derive(Debug)]
pub struct ServiceLbMetrics {
    /// Load balancer host updates (upstream's `loadBalancerSyncCount`).
    loadbalancer_sync: Counter,
    /// Host updates that failed and will be retried (upstream's `nodeSyncErrorCount`).
    nodesync_error: Counter,
    /// Seconds one node sync pass took (upstream's `nodeSyncLatency`).
    nodesync_latency: Histogram,
    /// Seconds one load balancer's host update took (upstream's
    /// `updateLoadBalancerHostLatency`).
    update_loadbalancer_host_latency: Histogram,
}

impl Default for ServiceLbMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ServiceLbMetrics {
    /// Empty histograms with upstream's buckets.
    pub fn new() -> Self {
        Self {
            loadbalancer_sync: Counter::default(),
            nodesync_error: Counter::default(),
            nodesync_latency: Histogram::new(buckets()),
            update_loadbalancer_host_latency: Histogram::new(buckets()),
        }
    }

    /// Registers both histograms under upstream's names and help texts.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            LOADBALANCER_SYNC,
            "A metric counting the amount of times any load balancer has been configured, as an \
             effect of service/node changes on the cluster",
            self.loadbalancer_sync.clone(),
        );
        registry.register(
            NODESYNC_ERROR,
            "A metric counting the amount of times any load balancer has been configured and \
             errored, as an effect of node changes on the cluster",
            self.nodesync_error.clone(),
        );
        registry.register(
            NODESYNC_LATENCY,
            "A metric measuring the latency for nodesync which updates loadbalancer hosts on \
             cluster node updates.",
            self.nodesync_latency.clone(),
        );
        registry.register(
            UPDATE_LOADBALANCER_HOST_LATENCY,
            "A metric measuring the latency for updating each load balancer hosts.",
            self.update_loadbalancer_host_latency.clone(),
        );
    }

    /// A node sync pass took `took`.
    pub fn observe_node_sync(&self, took: Duration) {
        self.nodesync_latency.observe(took.as_secs_f64());
    }

    /// One load balancer's hosts are being updated.
    pub fn count_update_hosts(&self) {
        self.loadbalancer_sync.inc();
    }

    /// One load balancer's host update failed.
    pub fn count_node_sync_error(&self) {
        self.nodesync_error.inc();
    }

    /// Updating one load balancer's hosts took `took`.
    pub fn observe_update_hosts(&self, took: Duration) {
        self.update_loadbalancer_host_latency
            .observe(took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn families_have_upstreams_names_and_buckets() {
        let metrics = ServiceLbMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.observe_node_sync(Duration::from_millis(1500));
        metrics.observe_update_hosts(Duration::from_secs(20000));
        metrics.count_update_hosts();
        metrics.count_node_sync_error();
        let mut text = String::new();
        encode(&mut text, &registry).expect("encode");
        for needle in [
            "# TYPE service_controller_loadbalancer_sync counter",
            "service_controller_loadbalancer_sync_total 1",
            "service_controller_nodesync_error_total 1",
            "# TYPE service_controller_nodesync_latency_seconds histogram",
            "service_controller_nodesync_latency_seconds_bucket{le=\"1.0\"} 0",
            "service_controller_nodesync_latency_seconds_bucket{le=\"2.0\"} 1",
            "service_controller_nodesync_latency_seconds_bucket{le=\"16384.0\"} 1",
            "service_controller_nodesync_latency_seconds_count 1",
            "# TYPE service_controller_update_loadbalancer_host_latency_seconds histogram",
            "service_controller_update_loadbalancer_host_latency_seconds_bucket{le=\"16384.0\"} 0",
            "service_controller_update_loadbalancer_host_latency_seconds_bucket{le=\"+Inf\"} 1",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
