//! The ReplicaSet controller: keeps `spec.replicas` pods of each ReplicaSet alive, as kube-controller-manager's.
//!
//! Where to start: [`ReplicaSetController`] (kubernetes `pkg/controller/replicaset/replica_set.go`).
//! [`ReplicaSetController::new`] wires it to a `SharedInformerFactory` as
//! kube-controller-manager does; [`ReplicaSetController::run`] runs its workers
//! (`--concurrent-replicaset-syncs`, default 5). Each ReplicaSet key taken from the work queue
//! (named [`QUEUE_NAME`] in the `workqueue_*` metrics) is synced by
//! [`ReplicaSetController::sync`]: claim the namespace's active pods (adopt matching orphans,
//! release owned pods that no longer match), create or delete pods toward `spec.replicas`
//! (at most [`BURST_REPLICAS`] per pass, gated by expectations so a pass never acts on a cache
//! that has not seen its previous pass's writes), then write the status.
//!
//! The files follow upstream's `pkg/controller/replicaset`:
//!
//! - `controller`: constants, [`ReplicaSetController`] with its test seams, construction
//!   (handlers, the controller-UID index), `Run`, the event handlers
//!   ([`ReplicaSetEventHandlers`]) and the worker wiring (`replica_set.go` up to
//!   `processNextWorkItem`).
//! - `sync`: `syncReplicaSet`, `claimPods`, `manageReplicas` (the rest of `replica_set.go`).
//! - [`status`]: `calculateStatus`, the `ReplicaFailure` condition and the `/status` update
//!   (upstream's `replica_set_utils.go`).
//! - [`metrics`]: the `replicaset_controller_sorting_deletion_age_ratio` histogram.
//! - [`client`]: the seam for the controller's direct ReplicaSet API calls (uncached GET, status
//!   update), with a recording fake for tests.

pub mod client;
mod controller;
pub mod metrics;
pub mod status;
mod sync;

pub use client::{ApiReplicaSetClient, FakeReplicaSetClient, ReplicaSetAction, ReplicaSetClient};
pub use controller::{
    BURST_REPLICAS, CONTROLLER_NAME, CONTROLLER_UID_INDEX, Clock, ManagedKind, OWN_WRITE_WAIT,
    QUEUE_NAME, ReplicaSetController, ReplicaSetControllerOptions, ReplicaSetEventHandlers,
    SyncHandler,
};
pub use metrics::ReplicaSetMetrics;
pub use status::STATUS_UPDATE_RETRIES;

use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::controller::{pod_control, ref_manager};
use kcm_machinery::informer::keys;
use kube::core::Status;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why syncing a ReplicaSet failed. Every error but [`Error::InvalidKey`] makes the worker
/// requeue the key with rate limiting.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid ReplicaSet key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// Claiming the namespace's pods (adopting or releasing) failed for some pods.
    #[error("claiming pods for ReplicaSet {replica_set}: {source}")]
    ClaimPods {
        /// The ReplicaSet, `namespace/name`.
        replica_set: String,
        /// The ref manager's (possibly aggregated) error.
        #[source]
        source: ref_manager::Error,
    },
    /// A pod creation failed; the slow start stopped after that batch.
    #[error("creating pods for ReplicaSet {replica_set}: {source}")]
    CreatePods {
        /// The ReplicaSet, `namespace/name`.
        replica_set: String,
        /// The first failure of the failing batch.
        #[source]
        source: pod_control::Error,
    },
    /// A pod deletion failed (other than NotFound).
    #[error("deleting pods for ReplicaSet {replica_set}: {source}")]
    DeletePods {
        /// The ReplicaSet, `namespace/name`.
        replica_set: String,
        /// The first failure.
        #[source]
        source: pod_control::Error,
    },
    /// Writing `/status` failed, also after the one retry.
    #[error("updating status of ReplicaSet {replica_set}: {message}", message = error_message(.source))]
    UpdateStatus {
        /// The ReplicaSet, `namespace/name`.
        replica_set: String,
        /// The client error of the last attempt.
        #[source]
        source: kube::Error,
    },
    /// Re-reading the ReplicaSet between two status update attempts failed.
    #[error("getting ReplicaSet {replica_set} to retry its status update: {message}", message = error_message(.source))]
    GetForStatusUpdate {
        /// The ReplicaSet, `namespace/name`.
        replica_set: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// The message upstream puts in the `ReplicaFailure` condition: the failed request's own
    /// error (for API errors, the server's message), without this controller's context.
    pub fn condition_message(&self) -> String {
        let pod_error = |e: &pod_control::Error| match e {
            pod_control::Error::Create { source, .. }
            | pod_control::Error::Delete { source, .. }
            | pod_control::Error::Patch { source, .. } => error_message(source),
            other => other.to_string(),
        };
        match self {
            Error::CreatePods { source, .. } | Error::DeletePods { source, .. } => {
                pod_error(source)
            }
            other => other.to_string(),
        }
    }
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::ClaimPods { source, .. } => source.api_status(),
            Error::CreatePods { source, .. } | Error::DeletePods { source, .. } => {
                source.api_status()
            }
            Error::UpdateStatus { source, .. } | Error::GetForStatusUpdate { source, .. } => {
                source.api_status()
            }
            Error::InvalidKey { .. } => None,
        }
    }
}
