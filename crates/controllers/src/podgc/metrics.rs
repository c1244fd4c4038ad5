//! The pod garbage collector's own metrics (`pod_gc_collector_*`), as upstream's `podgc/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// `reason`: a terminated pod beyond the threshold.
pub const REASON_TERMINATED: &str = "terminated";
/// `reason`: a terminating pod on a not-ready node tainted `node.kubernetes.io/out-of-service`.
pub const REASON_TERMINATING_OUT_OF_SERVICE: &str = "out-of-service";
/// `reason`: a pod bound to a node that no longer exists.
pub const REASON_ORPHANED: &str = "orphaned";
/// `reason`: a terminating pod never scheduled.
pub const REASON_TERMINATING_UNSCHEDULED: &str = "unscheduled";

/// The labels of both counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    namespace: String,
    reason: String,
}

/// The collector's counters. Build one per process, [`register`](Self::register) it and hand
/// the `Arc` to the controller's options.
#[derive(Debug, Default)]
pub struct PodGcMetrics {
    /// Pods force-deleted, by namespace and reason.
    deleting: Family<Labels, Counter>,
    /// Force deletions that failed, by namespace and reason.
    errors: Family<Labels, Counter>,
}

impl PodGcMetrics {
    /// Empty counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the counters under upstream's names.
    pub fn register(&self, registry: &mut Registry) {
        let sub = registry.sub_registry_with_prefix("pod_gc_collector");
        sub.register(
            "force_delete_pods",
            "Number of pods that are being forcefully deleted since the Pod GC Controller started.",
            self.deleting.clone(),
        );
        sub.register(
            "force_delete_pod_errors",
            "Number of errors encountered when forcefully deleting the pods since the Pod GC \
             Controller started.",
            self.errors.clone(),
        );
    }

    /// A pod of `namespace` is being force-deleted for `reason`.
    pub fn deleting(&self, namespace: &str, reason: &str) {
        self.deleting
            .get_or_create(&labels(namespace, reason))
            .inc();
    }

    /// Force-deleting a pod of `namespace` for `reason` failed.
    pub fn error(&self, namespace: &str, reason: &str) {
        self.errors.get_or_create(&labels(namespace, reason)).inc();
    }
}

fn labels(namespace: &str, reason: &str) -> Labels {
    Labels {
        namespace: namespace.to_owned(),
        reason: reason.to_owned(),
    }
}
