//! Health probes of the components running beside the API server (scheduler, controller manager), registered by the process that embeds them and read by `componentstatuses`.
//!
//! Upstream's API server probes each component's `/healthz` on its well-known port. kcm runs
//! them in-process (`kcm up`) or as separate processes (`kcm run`, `kcm sim`), so the process
//! that starts a component registers a [`Probe`] here; a component without one is judged
//! by its leader-election Lease (see `resources::component_status`).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// One component's health, as a `ComponentStatus` condition reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentHealth {
    /// Whether the `Healthy` condition is `True`.
    pub healthy: bool,
    /// The condition's `message` (upstream: `ok` when healthy).
    pub message: String,
    /// The condition's `error` (why it is unhealthy).
    pub error: String,
}

impl ComponentHealth {
    /// Healthy, with `message`.
    pub fn healthy(message: impl Into<String>) -> Self {
        Self {
            healthy: true,
            message: message.into(),
            error: String::new(),
        }
    }

    /// Unhealthy, because of `error`.
    pub fn unhealthy(error: impl Into<String>) -> Self {
        Self {
            healthy: false,
            message: String::new(),
            error: error.into(),
        }
    }
}

/// Says how a component is, now. Called on every read of `componentstatuses`: cheap, never
/// blocking.
pub type Probe = Arc<dyn Fn() -> ComponentHealth + Send + Sync>;

/// The registered probes, by component name (`scheduler`, `controller-manager`).
#[derive(Default)]
pub struct ComponentProbes {
    /// Held only to insert or clone a probe, never while a probe runs.
    probes: RwLock<BTreeMap<String, Probe>>,
}

impl std::fmt::Debug for ComponentProbes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .probes
            .read()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        f.debug_struct("ComponentProbes")
            .field("components", &names)
            .finish()
    }
}

impl ComponentProbes {
    /// Registers (or replaces) the probe of component `name`.
    pub fn register(&self, name: &str, probe: Probe) {
        if let Ok(mut probes) = self.probes.write() {
            probes.insert(name.to_owned(), probe);
        }
    }

    /// Removes the probe of component `name` (it stopped).
    pub fn unregister(&self, name: &str) {
        if let Ok(mut probes) = self.probes.write() {
            probes.remove(name);
        }
    }

    /// Runs the probe of `name`, if one is registered.
    pub fn probe(&self, name: &str) -> Option<ComponentHealth> {
        let probe = self.probes.read().ok()?.get(name).cloned()?;
        Some(probe())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn probes_answer_until_unregistered() {
        let probes = ComponentProbes::default();
        assert_eq!(probes.probe("scheduler"), None);
        let up = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&up);
        probes.register(
            "scheduler",
            Arc::new(move || {
                if flag.load(Ordering::SeqCst) {
                    ComponentHealth::healthy("ok")
                } else {
                    ComponentHealth::unhealthy("stopped")
                }
            }),
        );
        assert_eq!(
            probes.probe("scheduler"),
            Some(ComponentHealth::healthy("ok"))
        );
        up.store(false, Ordering::SeqCst);
        assert_eq!(probes.probe("scheduler").map(|h| h.healthy), Some(false));
        probes.unregister("scheduler");
        assert_eq!(probes.probe("scheduler"), None);
    }
}
