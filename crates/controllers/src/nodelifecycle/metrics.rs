//! The node lifecycle controller's metrics (`node_collector_*`), as upstream's `nodelifecycle/metrics.go`.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `zone` label: upstream's zone key (`region:\x00:zone`, empty for nodes without
/// topology labels).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ZoneLabel {
    /// The zone key.
    pub zone: String,
}

/// A gauge holding a float (percentages).
type FloatGauge = Gauge<f64, AtomicU64>;

/// The controller's metric families. One per controller; [`register`](Self::register) them
/// once in the process registry.
///
/// Upstream's `node_collector_evictions_number` (deprecated in 1.24 and hidden since) is not
/// served, as kube-controller-manager 1.33 does not serve it without
/// `--show-hidden-metrics-for-version`.
#[derive(Clone, Debug)]
pub struct NodeLifecycleMetrics {
    /// Percentage of Ready nodes per zone (100 for a zone that lost all its nodes).
    zone_health: Family<ZoneLabel, FloatGauge>,
    /// Nodes per zone, counting only nodes not excluded from disruption checks.
    zone_size: Family<ZoneLabel, Gauge>,
    /// Nodes per zone that are not Ready.
    unhealthy_nodes: Family<ZoneLabel, Gauge>,
    /// NoExecute taints placed per zone (created at 0 when a zone is first seen).
    evictions: Family<ZoneLabel, Counter>,
    /// Seconds one node's health update took in a monitor pass.
    update_node_health: Histogram,
    /// Seconds a whole monitor pass took.
    update_all_nodes_health: Histogram,
}

impl Default for NodeLifecycleMetrics {
    fn default() -> Self {
        Self::new()
    }
}

fn zone(zone: &str) -> ZoneLabel {
    ZoneLabel {
        zone: zone.to_owned(),
    }
}

impl NodeLifecycleMetrics {
    /// Empty families with upstream's buckets (1 ms × 4ⁿ and 10 ms × 4ⁿ, eight each).
    pub fn new() -> Self {
        Self {
            zone_health: Family::default(),
            zone_size: Family::default(),
            unhealthy_nodes: Family::default(),
            evictions: Family::default(),
            update_node_health: Histogram::new(exponential_buckets(0.001, 4.0, 8)),
            update_all_nodes_health: Histogram::new(exponential_buckets(0.01, 4.0, 8)),
        }
    }

    /// Registers the families under upstream's names.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "node_collector_zone_health",
            "Gauge measuring percentage of healthy nodes per zone.",
            self.zone_health.clone(),
        );
        registry.register(
            "node_collector_zone_size",
            "Gauge measuring number of registered Nodes per zones.",
            self.zone_size.clone(),
        );
        registry.register(
            "node_collector_unhealthy_nodes_in_zone",
            "Gauge measuring number of not Ready Nodes per zones.",
            self.unhealthy_nodes.clone(),
        );
        // The encoder appends `_total` to counters.
        registry.register(
            "node_collector_evictions",
            "Number of Node evictions that happened since current instance of NodeController \
             started.",
            self.evictions.clone(),
        );
        registry.register(
            "node_collector_update_node_health_duration_seconds",
            "Duration in seconds for NodeController to update the health of a single node.",
            self.update_node_health.clone(),
        );
        registry.register(
            "node_collector_update_all_nodes_health_duration_seconds",
            "Duration in seconds for NodeController to update the health of all nodes.",
            self.update_all_nodes_health.clone(),
        );
    }

    /// A zone's statistics after a monitor pass: `size` nodes of which `unhealthy` are not
    /// Ready (`size` is never 0 for an observed zone).
    pub fn set_zone(&self, name: &str, size: usize, unhealthy: usize) {
        let label = zone(name);
        let health = if size == 0 {
            100.0
        } else {
            // Node counts are far below 2^52: exact as floats.
            #[allow(clippy::cast_precision_loss)]
            let ratio = (100 * (size - unhealthy.min(size))) as f64 / size as f64;
            ratio
        };
        self.zone_size
            .get_or_create(&label)
            .set(i64::try_from(size).unwrap_or(i64::MAX));
        self.zone_health.get_or_create(&label).set(health);
        self.unhealthy_nodes
            .get_or_create(&label)
            .set(i64::try_from(unhealthy).unwrap_or(i64::MAX));
    }

    /// A zone that no longer has nodes: size 0, health 100, nobody unhealthy.
    pub fn clear_zone(&self, name: &str) {
        self.set_zone(name, 0, 0);
    }

    /// Creates the zone's eviction counter at 0 (upstream's "Initializing eviction metric").
    pub fn init_zone_evictions(&self, name: &str) {
        let _ = self.evictions.get_or_create(&zone(name));
    }

    /// A node of the zone got its NoExecute taint.
    pub fn eviction(&self, name: &str) {
        self.evictions.get_or_create(&zone(name)).inc();
    }

    /// One node's health update took `seconds`.
    pub fn observe_update_node_health(&self, seconds: f64) {
        self.update_node_health.observe(seconds);
    }

    /// A monitor pass took `seconds`.
    pub fn observe_update_all_nodes_health(&self, seconds: f64) {
        self.update_all_nodes_health.observe(seconds);
    }

    /// `(size, health, unhealthy)` of a zone, if it was ever set.
    pub fn zone(&self, name: &str) -> Option<(i64, f64, i64)> {
        let label = zone(name);
        let size = self.zone_size.get(&label)?.get();
        let health = self.zone_health.get(&label)?.get();
        let unhealthy = self.unhealthy_nodes.get(&label)?.get();
        Some((size, health, unhealthy))
    }

    /// The zone's eviction count, if the zone was ever seen.
    pub fn evictions(&self, name: &str) -> Option<u64> {
        self.evictions.get(&zone(name)).map(|c| c.get())
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    fn render(metrics: &NodeLifecycleMetrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut out = String::new();
        encode(&mut out, &registry).expect("encode");
        out
    }

    #[test]
    fn zone_statistics_as_upstream() {
        struct Case {
            name: &'static str,
            size: usize,
            unhealthy: usize,
            health: f64,
        }
        let cases = [
            Case {
                name: "all ready",
                size: 4,
                unhealthy: 0,
                health: 100.0,
            },
            Case {
                name: "one of three down",
                size: 3,
                unhealthy: 1,
                health: 200.0 / 3.0,
            },
            Case {
                name: "all down",
                size: 2,
                unhealthy: 2,
                health: 0.0,
            },
            Case {
                name: "zone gone",
                size: 0,
                unhealthy: 0,
                health: 100.0,
            },
        ];
        for case in cases {
            let metrics = NodeLifecycleMetrics::new();
            metrics.set_zone("z", case.size, case.unhealthy);
            let (size, health, unhealthy) = metrics.zone("z").expect("set");
            assert_eq!(size, case.size as i64, "{}", case.name);
            assert_eq!(unhealthy, case.unhealthy as i64, "{}", case.name);
            assert!(
                (health - case.health).abs() < 1e-9,
                "{}: {health}",
                case.name
            );
        }
    }

    #[test]
    fn evictions_start_at_zero_per_zone_and_count() {
        let metrics = NodeLifecycleMetrics::new();
        assert_eq!(metrics.evictions("a"), None);
        metrics.init_zone_evictions("a");
        assert_eq!(metrics.evictions("a"), Some(0));
        metrics.eviction("a");
        metrics.eviction("a");
        metrics.init_zone_evictions("a");
        assert_eq!(metrics.evictions("a"), Some(2));
        let text = render(&metrics);
        assert!(
            text.contains("node_collector_evictions_total{zone=\"a\"} 2"),
            "{text}"
        );
    }

    #[test]
    fn families_render_under_upstream_names() {
        let metrics = NodeLifecycleMetrics::new();
        metrics.set_zone("r:\0:z", 2, 1);
        metrics.observe_update_node_health(0.002);
        metrics.observe_update_all_nodes_health(0.02);
        let text = render(&metrics);
        for needle in [
            "node_collector_zone_health{zone=\"r:\0:z\"} 50.0",
            "node_collector_zone_size{zone=\"r:\0:z\"} 2",
            "node_collector_unhealthy_nodes_in_zone{zone=\"r:\0:z\"} 1",
            "node_collector_update_node_health_duration_seconds_bucket{le=\"0.004\"} 1",
            "node_collector_update_all_nodes_health_duration_seconds_count 1",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
    }
}
