//! The ephemeral volume controller's counters (`ephemeral_volume_controller_*`), as upstream's `ephemeral/metrics`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

/// Claim creations attempted and failed. Build one per process,
/// [`register`](Self::register) it and hand the `Arc` to the controller's options.
#[derive(Debug, Default)]
pub struct EphemeralVolumeMetrics {
    /// Every create request, successful or not.
    created: Counter,
    /// The create requests that failed.
    failed: Counter,
}

impl EphemeralVolumeMetrics {
    /// Zeroed counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the counters under upstream's names (and, as upstream, the same help text
    /// for both).
    pub fn register(&self, registry: &mut Registry) {
        let sub = registry.sub_registry_with_prefix("ephemeral_volume_controller");
        sub.register(
            "create",
            "Number of PersistenVolumeClaims creation requests",
            self.created.clone(),
        );
        sub.register(
            "create_failures",
            "Number of PersistenVolumeClaims creation requests",
            self.failed.clone(),
        );
    }

    /// A create request is about to be sent.
    pub fn create_attempt(&self) {
        self.created.inc();
    }

    /// A create request failed.
    pub fn create_failure(&self) {
        self.failed.inc();
    }

    /// `(attempts, failures)` so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.created.get(), self.failed.get())
    }
}
