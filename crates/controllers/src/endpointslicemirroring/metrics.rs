//! The EndpointSlice mirroring controller's metrics (`endpoint_slice_mirroring_controller_*`), as upstream's `endpointslicemirroring/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::reconciler_helpers::TotalsByAction;

/// The `operation` label of the changes counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabel {
    /// `create`, `update` or `delete`.
    pub operation: String,
}

/// The controller's metric families.
#[derive(Debug)]
pub struct MirroringMetrics {
    endpoints_added_per_sync: Histogram,
    endpoints_updated_per_sync: Histogram,
    endpoints_removed_per_sync: Histogram,
    addresses_skipped_per_sync: Histogram,
    endpoints_sync_duration: Histogram,
    changes: Family<OperationLabel, Counter>,
}

impl Default for MirroringMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl MirroringMetrics {
    /// Empty families with upstream's buckets.
    pub fn new() -> Self {
        Self {
            endpoints_added_per_sync: Histogram::new(exponential_buckets(2.0, 2.0, 15)),
            endpoints_updated_per_sync: Histogram::new(exponential_buckets(2.0, 2.0, 15)),
            endpoints_removed_per_sync: Histogram::new(exponential_buckets(2.0, 2.0, 15)),
            addresses_skipped_per_sync: Histogram::new(exponential_buckets(2.0, 2.0, 15)),
            endpoints_sync_duration: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            changes: Family::default(),
        }
    }

    /// Registers the families under upstream's names.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("endpoint_slice_mirroring_controller");
        r.register(
            "endpoints_added_per_sync",
            "Number of endpoints added on each Endpoints sync",
            self.endpoints_added_per_sync.clone(),
        );
        r.register(
            "endpoints_updated_per_sync",
            "Number of endpoints updated on each Endpoints sync",
            self.endpoints_updated_per_sync.clone(),
        );
        r.register(
            "endpoints_removed_per_sync",
            "Number of endpoints removed on each Endpoints sync",
            self.endpoints_removed_per_sync.clone(),
        );
        r.register(
            "addresses_skipped_per_sync",
            "Number of addresses skipped on each Endpoints sync due to being invalid or exceeding MaxEndpointsPerSubset",
            self.addresses_skipped_per_sync.clone(),
        );
        r.register(
            "endpoints_sync_duration",
            "Duration of syncEndpoints() in seconds",
            self.endpoints_sync_duration.clone(),
        );
        r.register(
            "changes",
            "Number of EndpointSlice changes",
            self.changes.clone(),
        );
    }

    /// One slice created, updated or deleted.
    pub fn slice_changed(&self, operation: &str) {
        self.changes
            .get_or_create(&OperationLabel {
                operation: operation.to_owned(),
            })
            .inc();
    }

    /// Slice writes of `operation` so far (tests).
    pub fn changes(&self, operation: &str) -> u64 {
        self.changes
            .get_or_create(&OperationLabel {
                operation: operation.to_owned(),
            })
            .get()
    }

    /// Addresses not mirrored by one sync.
    pub fn addresses_skipped(&self, n: usize) {
        self.addresses_skipped_per_sync.observe(as_f64(n));
    }

    /// Endpoints added, updated and removed by one sync.
    pub fn endpoints_changed(&self, totals: TotalsByAction) {
        self.endpoints_added_per_sync.observe(as_f64(totals.added));
        self.endpoints_updated_per_sync
            .observe(as_f64(totals.updated));
        self.endpoints_removed_per_sync
            .observe(as_f64(totals.removed));
    }

    /// One sync's duration.
    pub fn sync_duration(&self, seconds: f64) {
        self.endpoints_sync_duration.observe(seconds);
    }
}

/// Counts are far below 2^52: exact as floats.
#[allow(clippy::cast_precision_loss)]
fn as_f64(n: usize) -> f64 {
    n as f64
}
