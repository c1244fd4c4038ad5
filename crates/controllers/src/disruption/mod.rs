//! The disruption controller: keeps each PodDisruptionBudget's status (`currentHealthy`, `desiredHealthy`, `expectedPods`, `disruptionsAllowed`, `disruptedPods`, the `DisruptionAllowed` condition) current, so the eviction subresource can refuse disruptions, as kube-controller-manager's `pkg/controller/disruption`.
//!
//! Where to start: [`DisruptionController`] (upstream `disruption.go`). PDB and pod events
//! enqueue the budget; [`DisruptionController::sync`] (upstream `sync`/`trySync`) selects
//! the budget's pods, finds the expected count from their controllers' scale for
//! `maxUnavailable` and percentage `minAvailable` (Deployments through their ReplicaSets,
//! ReplicaSets, ReplicationControllers, StatefulSets, else any owner's `scale`
//! subresource), drops expired entries of `disruptedPods` (two minutes after an eviction the
//! pod should be gone) and writes the status when it changed. A failed sync writes the
//! fail-safe status (no disruption allowed, reason `SyncFailed`).
//!
//! - `controller`: constants, the controller, construction, `Run`, handlers, worker wiring.
//! - `sync`: `trySync`, `getExpectedPodCount`, the controller finders,
//!   `buildDisruptedPodMap`, `countHealthyPods`, `updatePdbStatus`, `failSafe`.
//! - [`client`]: the status write and the scale read, with a recording fake.
//!
//! Not ported: the stale `DisruptionTarget` pod-condition worker (the eviction subresource
//! here does not set that condition).

pub mod client;
mod controller;
mod sync;

pub use client::{ApiDisruptionClient, DisruptionClient, FakeDisruptionClient, ScaleOf};
pub use controller::{
    CONTROLLER_NAME, DELETION_TIMEOUT, DisruptionCaches, DisruptionController,
    DisruptionControllerOptions, DisruptionEventHandlers, QUEUE_NAME,
};

use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::informer::keys;

/// `disruption` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "disruption";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a budget's sync failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid PodDisruptionBudget key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// The budget's selector does not parse.
    #[error("invalid selector of PodDisruptionBudget {pdb}: {message}")]
    Selector {
        /// The budget, `namespace/name`.
        pdb: String,
        /// Why.
        message: String,
    },
    /// A selected pod has a controller that none of the finders knows.
    #[error("found no controllers for pod {pod:?}")]
    NoController {
        /// The pod's name.
        pod: String,
    },
    /// Reading an owner's `scale` subresource failed.
    #[error("{message}")]
    Scale {
        /// Why, as upstream words it.
        message: String,
    },
    /// `minAvailable`/`maxUnavailable` is not an integer or a percentage.
    #[error("{0}")]
    IntOrPercent(#[from] kcm_machinery::intstr::Error),
    /// Writing the budget's status failed.
    #[error("updating the status of PodDisruptionBudget {pdb}: {message}", message = error_message(.source))]
    UpdateStatus {
        /// The budget, `namespace/name`.
        pdb: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// A 409 on the status write: retried without the fail-safe status, as upstream.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::UpdateStatus { source: kube::Error::Api(s), .. } if s.code == 409)
    }
}
