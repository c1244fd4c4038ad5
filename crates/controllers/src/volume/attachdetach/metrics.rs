//! The attach/detach controller's metrics: forced detaches by reason, and, computed on each scrape from the desired and actual states and the pod cache, the volumes in each state and in use on each node (upstream `attachdetach/metrics`).

use std::collections::BTreeMap;
use std::sync::Weak;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::AttachDetachController;
use super::reconciler::ForceDetachReason;

/// The forced detach counter's name. Upstream gives the counter both a subsystem and a name
/// that repeat `attachdetach_controller`, so this is its exposed name (the OpenMetrics
/// exposition adds `_total` to the sample).
pub const FORCED_DETACHES: &str =
    "attach_detach_controller_attachdetach_controller_forced_detaches";

/// `attachdetach_controller_total_volumes`, a gauge by `plugin_name` and `state`.
pub const TOTAL_VOLUMES: &str = "attachdetach_controller_total_volumes";

/// `storage_count_attachable_volumes_in_use`, a gauge by `node` and `volume_plugin`.
pub const ATTACHABLE_VOLUMES_IN_USE: &str = "storage_count_attachable_volumes_in_use";

/// The `state` of volumes pods need.
pub const DESIRED_STATE_OF_WORLD: &str = "desired_state_of_world";

/// The `state` of volumes attached.
pub const ACTUAL_STATE_OF_WORLD: &str = "actual_state_of_world";

/// The `reason` label of the forced detach counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

/// The controller's counters. Build one per process, [`register`](Self::register) it and hand
/// the `Arc` to the controller's options.
#[derive(Debug, Default)]
pub struct AttachDetachMetrics {
    /// Detaches started without waiting for the node to unmount, by reason.
    forced_detaches: Family<ReasonLabels, Counter>,
}

impl AttachDetachMetrics {
    /// No detach counted yet (and, as upstream's counter vector, no series until one is).
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the counter under upstream's name and help.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            FORCED_DETACHES,
            "Number of times the A/D Controller performed a forced detach",
            self.forced_detaches.clone(),
        );
    }

    /// A forced detach started, as upstream's `RecordForcedDetachMetric`.
    pub fn forced_detach(&self, reason: ForceDetachReason) {
        self.forced_detaches
            .get_or_create(&ReasonLabels {
                reason: reason.as_str().to_owned(),
            })
            .inc();
    }

    /// The forced detaches counted for `reason`.
    pub fn forced_detaches(&self, reason: ForceDetachReason) -> u64 {
        self.forced_detaches
            .get_or_create(&ReasonLabels {
                reason: reason.as_str().to_owned(),
            })
            .get()
    }
}

/// Volume counts keyed by two label values (state or node, then plugin).
pub type VolumeCount = BTreeMap<(String, String), u64>;

/// Computes `attachdetach_controller_total_volumes` and
/// `storage_count_attachable_volumes_in_use` on each scrape, as upstream's
/// `attachDetachStateCollector`. It holds the controller weakly: once the controller is gone
/// it reports nothing.
#[derive(Debug)]
pub struct AttachDetachStateCollector {
    /// The controller whose worlds and caches are counted.
    controller: Weak<AttachDetachController>,
}

impl AttachDetachStateCollector {
    /// A collector of `controller`'s state.
    pub fn new(controller: Weak<AttachDetachController>) -> Self {
        Self { controller }
    }
}

impl Collector for AttachDetachStateCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(controller) = self.controller.upgrade() else {
            return Ok(());
        };
        encode_gauges(
            &mut encoder,
            ATTACHABLE_VOLUMES_IN_USE,
            "Measure number of volumes in use",
            ["node", "volume_plugin"],
            &controller.volumes_in_use_count(),
        )?;
        // Upstream's labels are (plugin_name, state); the count is keyed (state, plugin).
        let totals: VolumeCount = controller
            .total_volumes_count()
            .into_iter()
            .map(|((state, plugin), n)| ((plugin, state), n))
            .collect();
        encode_gauges(
            &mut encoder,
            TOTAL_VOLUMES,
            "Number of volumes in A/D Controller",
            ["plugin_name", "state"],
            &totals,
        )
    }
}

/// Writes one gauge family with a sample per key; nothing at all when there is no sample, as a
/// Go collector sending no metric.
pub(crate) fn encode_gauges(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    labels: [&str; 2],
    counts: &VolumeCount,
) -> Result<(), std::fmt::Error> {
    if counts.is_empty() {
        return Ok(());
    }
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for ((a, b), n) in counts {
        let label_set = [(labels[0], a.as_str()), (labels[1], b.as_str())];
        let sample = family.encode_family(&label_set)?;
        ConstGauge::new(i64::try_from(*n).unwrap_or(i64::MAX)).encode(sample)?;
    }
    Ok(())
}
