//! The seam through which `metrics.k8s.io` reads resource usage: a [`UsageSource`] the process embedding the server registers (`kcm up` registers the simulator's usage model).

use std::sync::{Arc, RwLock};

use serde_json::Value;

/// What one container (or a node's system overhead) uses at an instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// CPU in millicores.
    pub cpu_millis: u64,
    /// Memory (working set) in bytes.
    pub memory_bytes: u64,
}

/// Reports the usage of pods and nodes, as metrics-server scrapes it from kubelets.
pub trait UsageSource: Send + Sync + 'static {
    /// The usage of each container of `pod` (the stored object) at `now`, in spec order;
    /// `None` when the pod reports no metrics (not running).
    fn pod(&self, pod: &Value, now: jiff::Timestamp) -> Option<Vec<(String, Usage)>>;
    /// What `node` uses beyond its pods (system daemons).
    fn node_overhead(&self, node: &Value) -> Usage;
}

/// The registered source, if any. Held only to swap or clone the `Arc`.
#[derive(Default)]
pub struct UsageSlot(RwLock<Option<Arc<dyn UsageSource>>>);

impl std::fmt::Debug for UsageSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("UsageSlot")
            .field(&self.get().is_some())
            .finish()
    }
}

impl UsageSlot {
    /// Registers `source` (replacing any earlier one).
    pub fn set(&self, source: Arc<dyn UsageSource>) {
        if let Ok(mut slot) = self.0.write() {
            *slot = Some(source);
        }
    }

    /// The registered source.
    pub fn get(&self) -> Option<Arc<dyn UsageSource>> {
        self.0.read().ok().and_then(|slot| slot.clone())
    }
}
