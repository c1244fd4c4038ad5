//! The Deployment controller, as kube-controller-manager's `pkg/controller/deployment`.
//!
//! Where to start: [`DeploymentController`] (upstream `deployment_controller.go`). Each
//! Deployment key taken from the work queue is synced by [`DeploymentController::sync`]:
//! claim the namespace's ReplicaSets (adopt matching orphans, release owned ones that no
//! longer match), then, in upstream's order of precedence, only write the status of a
//! Deployment being deleted, record paused/resumed conditions, scale a paused Deployment,
//! roll back a Deployment asking for it, scale on a scaling event, or take one step of its
//! rollout (`RollingUpdate` or `Recreate`), and finally write the status.
//!
//! The files follow upstream's:
//!
//! | upstream | here |
//! |---|---|
//! | `deployment_controller.go` | `controller` ([`DeploymentController`]): constants, construction, `Run`, event handlers ([`DeploymentEventHandlers`]), worker wiring, `syncDeployment` |
//! | `sync.go` | `sync`: the new ReplicaSet, scaling, cleanup, status |
//! | `rolling.go` | `rolling`: one step of a rolling update (its arithmetic: [`util::rolling_plan`]) |
//! | `recreate.go` | `recreate`: one step of a recreate rollout ([`util::recreate_plan`]) |
//! | `rollback.go` | `rollback`: the deprecated rollback annotation ([`util::rollback_plan`]) |
//! | `progress.go` | `progress`: progress conditions and the deadline requeue ([`util::progress_plan`]) |
//! | `util/deployment_util.go` | [`util`]: the pure decision layer |
//!
//! Every number, name, annotation and condition comes from the pure decision layer in
//! [`util`]; this module reads the caches, applies those decisions through the API
//! ([`DeploymentClient`]) and records events.
//!
//! # Deliberate differences from upstream
//!
//! - The surge budget of a rolling update also counts pods an old ReplicaSet still reports
//!   above its spec (the ReplicaSet controller has not removed them yet), so the pods that
//!   exist, not only those asked for, stay within `replicas + maxSurge`.
//! - Within one sync pass, each written object replaces the cached copy, so a second write to
//!   the same object does not fail with a stale resourceVersion; and a sync first waits
//!   (at most [`OWN_WRITE_WAIT`]) for the caches to show the previous pass's writes.
//! - The pod-deletion handler counts a Recreate Deployment's remaining pods from the caches
//!   (upstream lists its ReplicaSets from the API server inside the handler).

mod client;
mod controller;
mod progress;
mod recreate;
mod rollback;
mod rolling;
mod sync;
pub mod util;

#[cfg(test)]
mod test_support;

pub use client::{
    ApiDeploymentClient, ClientPatcher, DeploymentAction, DeploymentClient, FakeDeploymentClient,
    Verb,
};
pub use controller::{
    CONTROLLER_NAME, Clock, DEFAULT_CONCURRENT_DEPLOYMENT_SYNCS, DeploymentController,
    DeploymentControllerOptions, DeploymentEventHandlers, ERROR_POLICY, MAX_RETRIES,
    OWN_WRITE_WAIT, QUEUE_NAME, SyncHandler,
};

use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::controller::ref_manager;
use kcm_machinery::informer::keys;
use kube::core::Status;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The API write a failed request was making (for error messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// `PUT` of a Deployment (a rollback).
    UpdateDeployment,
    /// `PUT` of a Deployment's `/status`.
    UpdateDeploymentStatus,
    /// `POST` of the new ReplicaSet.
    CreateReplicaSet,
    /// `PUT` of a ReplicaSet (scale, annotations, `minReadySeconds`).
    UpdateReplicaSet,
    /// `DELETE` of an old ReplicaSet (history cleanup).
    DeleteReplicaSet,
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Operation::UpdateDeployment => "updating Deployment",
            Operation::UpdateDeploymentStatus => "updating status of Deployment",
            Operation::CreateReplicaSet => "creating ReplicaSet",
            Operation::UpdateReplicaSet => "updating ReplicaSet",
            Operation::DeleteReplicaSet => "deleting ReplicaSet",
        })
    }
}

/// Why syncing a Deployment failed. The worker requeues the key rate-limited (at most
/// [`MAX_RETRIES`] times), except for API failures of a namespace being deleted, which are
/// forgotten as upstream's `handleErr` does ([`ERROR_POLICY`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid Deployment key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// The Deployment's selector does not parse.
    #[error("Deployment {deployment} has invalid label selector: {source}")]
    InvalidSelector {
        /// The Deployment, `namespace/name`.
        deployment: String,
        /// The parse error.
        #[source]
        source: kcm_machinery::labels::Error,
    },
    /// Claiming the namespace's ReplicaSets (adopting or releasing) failed for some.
    #[error("claiming ReplicaSets for Deployment {deployment}: {source}")]
    ClaimReplicaSets {
        /// The Deployment, `namespace/name`.
        deployment: String,
        /// The ref manager's (possibly aggregated) error.
        #[source]
        source: Box<ref_manager::Error>,
    },
    /// An API write failed.
    #[error("{operation} {object}: {message}", message = error_message(.source))]
    Api {
        /// What the request was doing.
        operation: Operation,
        /// The object written, `namespace/name`.
        object: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The new ReplicaSet exists under the hashed name but is not this Deployment's (a hash
    /// collision); `status.collisionCount` was raised so the next sync picks another name.
    #[error("ReplicaSet {replica_set} already exists and is not Deployment {deployment}'s: {message}", message = error_message(.source))]
    HashCollision {
        /// The Deployment, `namespace/name`.
        deployment: String,
        /// The colliding ReplicaSet, `namespace/name`.
        replica_set: String,
        /// The AlreadyExists error of the create.
        #[source]
        source: kube::Error,
    },
    /// The size of the new ReplicaSet could not be computed (an invalid `maxSurge` or
    /// `maxUnavailable`).
    #[error("sizing the new ReplicaSet of Deployment {deployment}: {source}")]
    NewReplicaSetSize {
        /// The Deployment, `namespace/name`.
        deployment: String,
        /// The strategy error.
        #[source]
        source: util::strategy::Error,
    },
    /// A rolling-update step could not be computed.
    #[error("rolling update of Deployment {deployment}: {source}")]
    Rolling {
        /// The Deployment, `namespace/name`.
        deployment: String,
        /// The planning error.
        #[source]
        source: util::rolling_plan::Error,
    },
    /// `spec.strategy.type` is neither `RollingUpdate` nor `Recreate`.
    #[error("unexpected deployment strategy type: {strategy}")]
    UnexpectedStrategy {
        /// The strategy type found.
        strategy: String,
    },
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::ClaimReplicaSets { source, .. } => source.api_status(),
            Error::Api { source, .. } | Error::HashCollision { source, .. } => source.api_status(),
            _ => None,
        }
    }
}
