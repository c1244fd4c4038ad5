//! The root CA publisher's metrics (`root_ca_cert_publisher_*`), as upstream's `rootcacertpublisher/metrics.go`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `code` label: the HTTP status of the sync's outcome (`200` on success).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    /// `200`, the API error's code, or `500`.
    pub code: String,
}

/// The publisher's metric families.
#[derive(Debug)]
pub struct PublisherMetrics {
    syncs: Family<CodeLabel, Counter>,
    sync_duration: Family<CodeLabel, Histogram>,
}

impl Default for PublisherMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl PublisherMetrics {
    /// Empty families with upstream's buckets (1 ms × 2ⁿ, fifteen of them).
    pub fn new() -> Self {
        Self {
            syncs: Family::default(),
            sync_duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 15))
            }),
        }
    }

    /// Registers the families under upstream's names (the counter gets `_total`).
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("root_ca_cert_publisher");
        r.register(
            "sync",
            "Number of namespace syncs happened in root ca cert publisher.",
            self.syncs.clone(),
        );
        r.register(
            "sync_duration_seconds",
            "Number of namespace syncs happened in root ca cert publisher.",
            self.sync_duration.clone(),
        );
    }

    /// Records one sync that ended with `code` after `seconds`, as upstream's
    /// `recordMetrics`.
    pub fn record(&self, code: u16, seconds: f64) {
        let label = CodeLabel {
            code: code.to_string(),
        };
        self.syncs.get_or_create(&label).inc();
        self.sync_duration.get_or_create(&label).observe(seconds);
    }

    /// Syncs counted under `code` (tests).
    pub fn syncs(&self, code: u16) -> u64 {
        self.syncs
            .get_or_create(&CodeLabel {
                code: code.to_string(),
            })
            .get()
    }
}
