//! The PV controller's metrics: volumes and claims bound and unbound (`pv_collector_*`, computed on each scrape from the controller's caches), provision and delete latencies and errors (`volume_operation_total_*`), and retroactive default StorageClass assignments (upstream `persistentvolume/metrics` and `pkg/volume/util`'s `volume_operation_total_seconds`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError, Weak};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

use super::PersistentVolumeController;

/// The `plugin_name` of an operation or volume whose plugin is unknown, upstream's
/// `pluginNameNotAvailable`.
pub const PLUGIN_NAME_NOT_AVAILABLE: &str = "N/A";

/// The `operation_name` of a provisioning, from the claim's first provisioning attempt until
/// it is bound.
pub const OPERATION_PROVISION: &str = "provision";

/// The `operation_name` of a deletion, from the first attempt until the volume is gone.
pub const OPERATION_DELETE: &str = "delete";

/// `volume_operation_total_seconds`' buckets, upstream's.
pub const OPERATION_SECONDS_BUCKETS: [f64; 13] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0,
];

/// The labels of the operation families, in upstream's order.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    plugin_name: String,
    operation_name: String,
}

/// When an operation started, and for which plugin (upstream's `operationTimestamp`).
#[derive(Clone, Debug)]
struct OperationTimestamp {
    plugin_name: String,
    operation: &'static str,
    start: Instant,
}

type HistogramFamily = Family<OperationLabels, Histogram, fn() -> Histogram>;

fn operation_histogram() -> Histogram {
    Histogram::new(OPERATION_SECONDS_BUCKETS)
}

/// The controller's counters, histogram and operation start times. Build one per process,
/// [`register`](Self::register) it and hand the `Arc` to the controller's options.
#[derive(Debug)]
pub struct PvMetrics {
    /// `volume_operation_total_errors`: failed provision and delete attempts.
    operation_errors: Family<OperationLabels, Counter>,
    /// `volume_operation_total_seconds`: provisions and deletes, start to end.
    operation_seconds: HistogramFamily,
    /// `retroactive_storageclass_total`: default class assignments tried.
    retroactive: Counter,
    /// `retroactive_storageclass_errors_total`: default class assignments that failed.
    retroactive_errors: Counter,
    /// Operations started and not finished, by claim key (provision) or volume name (delete),
    /// as upstream's `OperationStartTimeCache`.
    timestamps: Mutex<HashMap<String, OperationTimestamp>>,
}

impl Default for PvMetrics {
    fn default() -> Self {
        Self {
            operation_errors: Family::default(),
            operation_seconds: Family::new_with_constructor(operation_histogram),
            retroactive: Counter::default(),
            retroactive_errors: Counter::default(),
            timestamps: Mutex::new(HashMap::new()),
        }
    }
}

impl PvMetrics {
    /// Nothing counted yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the families under upstream's names and help (counters are registered
    /// without `_total`: the OpenMetrics exposition adds it to the sample).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "volume_operation_total_errors",
            "Total volume operation errors",
            self.operation_errors.clone(),
        );
        registry.register(
            "volume_operation_total_seconds",
            "Storage operation end to end duration in seconds",
            self.operation_seconds.clone(),
        );
        registry.register(
            "retroactive_storageclass",
            "Total number of retroactive StorageClass assignments to persistent volume claim",
            self.retroactive.clone(),
        );
        registry.register(
            "retroactive_storageclass_errors",
            "Total number of failed retroactive StorageClass assignments to persistent volume claim",
            self.retroactive_errors.clone(),
        );
    }

    fn timestamps(&self) -> MutexGuard<'_, HashMap<String, OperationTimestamp>> {
        self.timestamps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that `operation` of `plugin_name` started for `key`, unless one already did
    /// (upstream `AddIfNotExist`): retries keep the first start.
    pub fn operation_started(&self, key: &str, plugin_name: &str, operation: &'static str) {
        self.timestamps()
            .entry(key.to_owned())
            .or_insert_with(|| OperationTimestamp {
                plugin_name: plugin_name.to_owned(),
                operation,
                start: Instant::now(),
            });
    }

    /// Forgets the operation of `key` (a claim deleted before it was bound).
    pub fn operation_forgotten(&self, key: &str) {
        self.timestamps().remove(key);
    }

    /// Whether an operation of `key` is being timed.
    pub fn operation_pending(&self, key: &str) -> bool {
        self.timestamps().contains_key(key)
    }

    /// Records the operation of `key`, if one is timed, as upstream's `RecordMetric`: a failed
    /// attempt counts an error and keeps timing; a success observes the time since the first
    /// attempt and forgets the operation.
    pub fn record_operation(&self, key: &str, failed: bool) {
        let mut timestamps = self.timestamps();
        let Some(ts) = timestamps.get(key).cloned() else {
            return;
        };
        let plugin_name = if ts.plugin_name.is_empty() {
            PLUGIN_NAME_NOT_AVAILABLE.to_owned()
        } else {
            ts.plugin_name.clone()
        };
        let labels = OperationLabels {
            plugin_name,
            operation_name: ts.operation.to_owned(),
        };
        if failed {
            self.operation_errors.get_or_create(&labels).inc();
        } else {
            timestamps.remove(key);
            drop(timestamps);
            self.operation_seconds
                .get_or_create(&labels)
                .observe(ts.start.elapsed().as_secs_f64());
        }
    }

    /// A retroactive default StorageClass assignment was tried, as upstream's
    /// `RecordRetroactiveStorageClassMetric`.
    pub fn retroactive_storage_class(&self, success: bool) {
        self.retroactive.inc();
        if !success {
            self.retroactive_errors.inc();
        }
    }

    /// `(retroactive_storageclass_total, retroactive_storageclass_errors_total)`.
    pub fn retroactive_counts(&self) -> (u64, u64) {
        (self.retroactive.get(), self.retroactive_errors.get())
    }

    /// `volume_operation_total_errors` of (plugin, operation).
    pub fn operation_errors(&self, plugin_name: &str, operation: &str) -> u64 {
        self.operation_errors
            .get_or_create(&OperationLabels {
                plugin_name: plugin_name.to_owned(),
                operation_name: operation.to_owned(),
            })
            .get()
    }
}

/// The plugin that handles a PersistentVolume for `pv_collector_total_pv_count`: the
/// controller's plugins are hostPath, NFS, local and CSI (whose name carries the driver, as
/// upstream's `GetFullQualifiedPluginNameForVolume`); any other source is `N/A`.
pub fn volume_plugin_name(volume: &PersistentVolume) -> String {
    let Some(spec) = volume.spec.as_ref() else {
        return PLUGIN_NAME_NOT_AVAILABLE.to_owned();
    };
    if let Some(csi) = &spec.csi {
        return format!("kubernetes.io/csi:{}", csi.driver);
    }
    if spec.host_path.is_some() {
        return "kubernetes.io/host-path".to_owned();
    }
    if spec.nfs.is_some() {
        return "kubernetes.io/nfs".to_owned();
    }
    if spec.local.is_some() {
        return "kubernetes.io/local-volume".to_owned();
    }
    PLUGIN_NAME_NOT_AVAILABLE.to_owned()
}

/// One gauge sample: its label values in the family's label order, and its value.
type Samples = BTreeMap<Vec<String>, u64>;

/// The five `pv_collector_*` gauges over `volumes` and `claims`, as upstream's `pvCollect` and
/// `pvcCollect`: (total by plugin and mode, bound and unbound volumes by class, bound and
/// unbound claims by namespace, class and attributes class).
pub fn pv_and_pvc_counts(
    volumes: &[std::sync::Arc<PersistentVolume>],
    claims: &[std::sync::Arc<PersistentVolumeClaim>],
) -> [Samples; 5] {
    let mut counts: [Samples; 5] = Default::default();
    for volume in volumes {
        let spec = volume.spec.as_ref();
        let mode = spec
            .and_then(|s| s.volume_mode.clone())
            .unwrap_or_else(|| "Filesystem".to_owned());
        *counts[0]
            .entry(vec![volume_plugin_name(volume), mode])
            .or_default() += 1;
        let class = spec
            .and_then(|s| s.storage_class_name.clone())
            .unwrap_or_default();
        let bound = volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        *counts[if bound { 1 } else { 2 }]
            .entry(vec![class])
            .or_default() += 1;
    }
    for claim in claims {
        let spec = claim.spec.as_ref();
        let dimensions = vec![
            claim.metadata.namespace.clone().unwrap_or_default(),
            spec.and_then(|s| s.storage_class_name.clone())
                .unwrap_or_default(),
            spec.and_then(|s| s.volume_attributes_class_name.clone())
                .unwrap_or_default(),
        ];
        let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        *counts[if bound { 3 } else { 4 }]
            .entry(dimensions)
            .or_default() += 1;
    }
    counts
}

/// The `pv_collector_*` families: name, help and label names, in [`pv_and_pvc_counts`]' order.
const PV_COLLECTOR_FAMILIES: [(&str, &str, &[&str]); 5] = [
    (
        "pv_collector_total_pv_count",
        "Gauge measuring total number of persistent volumes",
        &["plugin_name", "volume_mode"],
    ),
    (
        "pv_collector_bound_pv_count",
        "Gauge measuring number of persistent volume currently bound",
        &["storage_class"],
    ),
    (
        "pv_collector_unbound_pv_count",
        "Gauge measuring number of persistent volume currently unbound",
        &["storage_class"],
    ),
    (
        "pv_collector_bound_pvc_count",
        "Gauge measuring number of persistent volume claim currently bound",
        &["namespace", "storage_class", "volume_attributes_class"],
    ),
    (
        "pv_collector_unbound_pvc_count",
        "Gauge measuring number of persistent volume claim currently unbound",
        &["namespace", "storage_class", "volume_attributes_class"],
    ),
];

/// Computes the `pv_collector_*` gauges on each scrape from the controller's own volume and
/// claim caches, as upstream's `pvAndPVCCountCollector`. It holds the controller weakly: once
/// the controller is gone it reports nothing.
#[derive(Debug)]
pub struct PvStateCollector {
    /// The controller whose caches are counted.
    controller: Weak<PersistentVolumeController>,
}

impl PvStateCollector {
    /// A collector of `controller`'s caches.
    pub fn new(controller: Weak<PersistentVolumeController>) -> Self {
        Self { controller }
    }
}

impl Collector for PvStateCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(controller) = self.controller.upgrade() else {
            return Ok(());
        };
        let counts = pv_and_pvc_counts(&controller.volumes.list(), &controller.claims.list());
        for ((name, help, labels), samples) in PV_COLLECTOR_FAMILIES.iter().zip(counts.iter()) {
            if samples.is_empty() {
                continue;
            }
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (values, n) in samples {
                let label_set: Vec<(&str, &str)> = labels
                    .iter()
                    .copied()
                    .zip(values.iter().map(String::as_str))
                    .collect();
                let sample = family.encode_family(&label_set)?;
                ConstGauge::new(i64::try_from(*n).unwrap_or(i64::MAX)).encode(sample)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use tokio::time::Duration;

    use super::*;

    fn from<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Arc<T> {
        Arc::new(serde_json::from_value(value).expect("valid object"))
    }

    #[test]
    fn volumes_and_claims_are_counted_by_upstream_dimensions() {
        let volumes: Vec<Arc<PersistentVolume>> = vec![
            from(
                json!({"metadata": {"name": "a"}, "spec": {"storageClassName": "fast",
                "csi": {"driver": "d.example", "volumeHandle": "h"}, "volumeMode": "Block"},
                "status": {"phase": "Bound"}}),
            ),
            from(
                json!({"metadata": {"name": "b"}, "spec": {"hostPath": {"path": "/tmp/x"}},
                "status": {"phase": "Available"}}),
            ),
            from(
                json!({"metadata": {"name": "c"}, "spec": {"storageClassName": "fast",
                "csi": {"driver": "d.example", "volumeHandle": "h2"}, "volumeMode": "Block"},
                "status": {"phase": "Released"}}),
            ),
        ];
        let claims: Vec<Arc<PersistentVolumeClaim>> = vec![
            from(json!({"metadata": {"name": "x", "namespace": "ns",
                "annotations": {"volume.beta.kubernetes.io/storage-class": "legacy"}},
                "spec": {"storageClassName": "fast"}, "status": {"phase": "Pending"}})),
            from(json!({"metadata": {"name": "y", "namespace": "ns"},
                "spec": {"storageClassName": "fast", "volumeAttributesClassName": "gold"},
                "status": {"phase": "Bound"}})),
            from(json!({"metadata": {"name": "z", "namespace": "other"}, "spec": {}})),
        ];
        let [total, bound_pv, unbound_pv, bound_pvc, unbound_pvc] =
            pv_and_pvc_counts(&volumes, &claims);
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            total,
            BTreeMap::from([
                (s(&["kubernetes.io/csi:d.example", "Block"]), 2),
                (s(&["kubernetes.io/host-path", "Filesystem"]), 1),
            ])
        );
        assert_eq!(bound_pv, BTreeMap::from([(s(&["fast"]), 1)]));
        assert_eq!(
            unbound_pv,
            BTreeMap::from([(s(&["fast"]), 1), (s(&[""]), 1)]),
            "Released counts as unbound"
        );
        assert_eq!(bound_pvc, BTreeMap::from([(s(&["ns", "fast", "gold"]), 1)]));
        assert_eq!(
            unbound_pvc,
            BTreeMap::from([(s(&["ns", "fast", ""]), 1), (s(&["other", "", ""]), 1)]),
            "the class is spec.storageClassName, not the beta annotation"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_operation_counts_errors_until_it_succeeds_and_observes_time_from_its_first_start() {
        let metrics = PvMetrics::new();
        metrics.record_operation("ns/c", true);
        assert_eq!(
            metrics.operation_errors("p.example", OPERATION_PROVISION),
            0,
            "not timed"
        );
        metrics.operation_started("ns/c", "p.example", OPERATION_PROVISION);
        tokio::time::advance(Duration::from_secs(2)).await;
        metrics.operation_started("ns/c", "other", OPERATION_PROVISION);
        metrics.record_operation("ns/c", true);
        metrics.record_operation("ns/c", true);
        assert_eq!(
            metrics.operation_errors("p.example", OPERATION_PROVISION),
            2
        );
        assert!(metrics.operation_pending("ns/c"));
        tokio::time::advance(Duration::from_secs(1)).await;
        metrics.record_operation("ns/c", false);
        assert!(!metrics.operation_pending("ns/c"));
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for line in [
            "volume_operation_total_seconds_sum{plugin_name=\"p.example\",operation_name=\"provision\"} 3.0",
            "volume_operation_total_seconds_count{plugin_name=\"p.example\",operation_name=\"provision\"} 1",
            "volume_operation_total_seconds_bucket{le=\"5.0\",plugin_name=\"p.example\",operation_name=\"provision\"} 1",
            "volume_operation_total_seconds_bucket{le=\"2.5\",plugin_name=\"p.example\",operation_name=\"provision\"} 0",
            "volume_operation_total_errors_total{plugin_name=\"p.example\",operation_name=\"provision\"} 2",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        metrics.operation_started("vol", "", OPERATION_DELETE);
        metrics.record_operation("vol", true);
        assert_eq!(metrics.operation_errors("N/A", OPERATION_DELETE), 1);
        metrics.operation_forgotten("vol");
        metrics.record_operation("vol", false);
        assert!(!text.contains("operation_name=\"delete\""));
    }

    #[test]
    fn retroactive_assignments_count_failures_in_both_counters() {
        let metrics = PvMetrics::new();
        metrics.retroactive_storage_class(true);
        metrics.retroactive_storage_class(false);
        assert_eq!(metrics.retroactive_counts(), (2, 1));
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(text.contains("retroactive_storageclass_total 2"), "{text}");
        assert!(
            text.contains("retroactive_storageclass_errors_total 1"),
            "{text}"
        );
    }
}
