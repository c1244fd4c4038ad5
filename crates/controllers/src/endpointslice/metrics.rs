//! The EndpointSlice controller's metrics (`endpoint_slice_controller_*`), as upstream's `k8s.io/endpointslice/metrics`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::endpointsliceutil::PortMapKey;

/// The `operation` label of the changes counter (`create`, `update`, `delete`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabel {
    /// The operation.
    pub operation: String,
}

/// The `result` label of the syncs counter (`success`, `stale`, `error`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// The result.
    pub result: String,
}

/// The labels of the slices-changed histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChangedLabels {
    /// `Auto` or `Disabled` (always `Disabled` here: no topology hints).
    pub topology: String,
    /// The Service's trafficDistribution, empty when unused.
    pub traffic_distribution: String,
}

/// Endpoints and slices of one port list of one Service (upstream's `EfficiencyInfo`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EfficiencyInfo {
    /// Desired endpoints.
    pub endpoints: usize,
    /// Slices after the sync.
    pub slices: usize,
}

/// Per Service (and address type), per port list, the efficiency info; the gauges are the
/// sums (upstream's metrics `Cache`).
type ServiceCache = HashMap<(String, String, String), BTreeMap<PortMapKey, EfficiencyInfo>>;

/// The controller's metric families and the per-Service cache the gauges are computed from.
#[derive(Debug)]
pub struct EndpointSliceMetrics {
    endpoints_added_per_sync: Histogram,
    endpoints_removed_per_sync: Histogram,
    endpoints_desired: Gauge,
    num_endpoint_slices: Gauge,
    desired_endpoint_slices: Gauge,
    changes: Family<OperationLabel, Counter>,
    slices_changed_per_sync: Family<ChangedLabels, Histogram>,
    syncs: Family<ResultLabel, Counter>,
    cache: Mutex<ServiceCache>,
}

impl Default for EndpointSliceMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl EndpointSliceMetrics {
    /// Empty families with upstream's buckets (2 × 2ⁿ, fifteen of them, for the per-sync
    /// endpoint counts; Prometheus' defaults for slices changed).
    pub fn new() -> Self {
        Self {
            endpoints_added_per_sync: Histogram::new(exponential_buckets(2.0, 2.0, 15)),
            endpoints_removed_per_sync: Histogram::new(exponential_buckets(2.0, 2.0, 15)),
            endpoints_desired: Gauge::default(),
            num_endpoint_slices: Gauge::default(),
            desired_endpoint_slices: Gauge::default(),
            changes: Family::default(),
            slices_changed_per_sync: Family::new_with_constructor(|| {
                Histogram::new([
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ])
            }),
            syncs: Family::default(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Registers the families under upstream's names (the encoder appends `_total` to the
    /// counters, which gives upstream's `changes_total`).
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("endpoint_slice_controller");
        r.register(
            "endpoints_added_per_sync",
            "Number of endpoints added on each Service sync",
            self.endpoints_added_per_sync.clone(),
        );
        r.register(
            "endpoints_removed_per_sync",
            "Number of endpoints removed on each Service sync",
            self.endpoints_removed_per_sync.clone(),
        );
        r.register(
            "endpoints_desired",
            "Number of endpoints desired",
            self.endpoints_desired.clone(),
        );
        r.register(
            "num_endpoint_slices",
            "Number of EndpointSlices",
            self.num_endpoint_slices.clone(),
        );
        r.register(
            "desired_endpoint_slices",
            "Number of EndpointSlices that would exist with perfect endpoint allocation",
            self.desired_endpoint_slices.clone(),
        );
        r.register(
            "changes",
            "Number of EndpointSlice changes",
            self.changes.clone(),
        );
        r.register(
            "endpointslices_changed_per_sync",
            "Number of EndpointSlices changed on each Service sync",
            self.slices_changed_per_sync.clone(),
        );
        r.register("syncs", "Number of EndpointSlice syncs", self.syncs.clone());
    }

    fn cache(&self) -> MutexGuard<'_, ServiceCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One slice created, updated or deleted.
    pub fn slice_changed(&self, operation: &str) {
        self.changes
            .get_or_create(&OperationLabel {
                operation: operation.to_owned(),
            })
            .inc();
    }

    /// How many slices of `operation` were written so far (tests, benchmarks).
    pub fn changes(&self, operation: &str) -> u64 {
        self.changes
            .get_or_create(&OperationLabel {
                operation: operation.to_owned(),
            })
            .get()
    }

    /// A sync ended with `result` (`success`, `stale` or `error`).
    pub fn sync(&self, result: &str) {
        self.syncs
            .get_or_create(&ResultLabel {
                result: result.to_owned(),
            })
            .inc();
    }

    /// Endpoints added by one sync.
    pub fn endpoints_added(&self, n: usize) {
        self.endpoints_added_per_sync.observe(as_f64(n));
    }

    /// Endpoints removed by one sync.
    pub fn endpoints_removed(&self, n: usize) {
        self.endpoints_removed_per_sync.observe(as_f64(n));
    }

    /// Slices written by one sync.
    pub fn slices_changed_per_sync(&self, n: usize) {
        self.slices_changed_per_sync
            .get_or_create(&ChangedLabels {
                topology: "Disabled".to_owned(),
                traffic_distribution: String::new(),
            })
            .observe(as_f64(n));
    }

    /// Replaces a Service's efficiency info for one address type and refreshes the gauges,
    /// as upstream's `UpdateServicePortCache`.
    pub fn update_service(
        &self,
        namespace: &str,
        name: &str,
        address_type: &str,
        info: BTreeMap<PortMapKey, EfficiencyInfo>,
        max_endpoints_per_slice: usize,
    ) {
        let mut cache = self.cache();
        cache.insert(
            (
                namespace.to_owned(),
                name.to_owned(),
                address_type.to_owned(),
            ),
            info,
        );
        self.refresh_locked(&cache, max_endpoints_per_slice);
    }

    /// Drops a deleted Service from the gauges, as upstream's `DeleteService`.
    pub fn delete_service(&self, namespace: &str, name: &str) {
        let mut cache = self.cache();
        cache.retain(|(ns, n, _), _| !(ns == namespace && n == name));
        // The divisor only shapes "desired"; recompute with the common default when unknown.
        self.refresh_locked(&cache, 100);
    }

    /// Recomputes the gauges from the cache (lock held by the caller).
    fn refresh_locked(&self, cache: &ServiceCache, max: usize) {
        let (mut endpoints, mut actual, mut desired) = (0usize, 0usize, 0usize);
        for ports in cache.values() {
            let mut service_desired = 0;
            for info in ports.values() {
                endpoints += info.endpoints;
                actual += info.slices;
                service_desired += info.endpoints.div_ceil(max.max(1));
            }
            // There is always a placeholder slice.
            desired += service_desired.max(1);
        }
        self.endpoints_desired
            .set(i64::try_from(endpoints).unwrap_or(i64::MAX));
        self.num_endpoint_slices
            .set(i64::try_from(actual).unwrap_or(i64::MAX));
        self.desired_endpoint_slices
            .set(i64::try_from(desired).unwrap_or(i64::MAX));
    }

    /// The `(endpoints_desired, num_endpoint_slices, desired_endpoint_slices)` gauges (tests).
    pub fn gauges(&self) -> (i64, i64, i64) {
        (
            self.endpoints_desired.get(),
            self.num_endpoint_slices.get(),
            self.desired_endpoint_slices.get(),
        )
    }
}

/// Counts are far below 2^52: exact as floats.
#[allow(clippy::cast_precision_loss)]
fn as_f64(n: usize) -> f64 {
    n as f64
}
