//! The StatefulSet controller: ordered pods with stable identities and storage, rolling updates, revision history, as kube-controller-manager's.
//!
//! Where to start: [`StatefulSetController`] (kubernetes `pkg/controller/statefulset`).
//! [`StatefulSetController::new`] wires it to a `SharedInformerFactory` (StatefulSets, pods,
//! PersistentVolumeClaims, ControllerRevisions); [`StatefulSetController::run`] runs its
//! workers (`--concurrent-statefulset-syncs`, default 5). Each key is synced by
//! [`StatefulSetController::sync`]: adopt orphaned revisions and pods, then one pass of
//! [`StatefulSetControl::update_stateful_set`]: pods `NAME-<ordinal>` for every ordinal from
//! `spec.ordinals.start`, each with its claims (`TEMPLATE-NAME-ORDINAL`, created first and owned
//! per `persistentVolumeClaimRetentionPolicy`), hostname and subdomain from `serviceName`, and
//! the `statefulset.kubernetes.io/pod-name` and `apps.kubernetes.io/pod-index` labels; with
//! `OrderedReady` one at a time in order (each Running, Ready and available before the next,
//! scale-down in reverse), with `Parallel` all at once; a rolling update deletes pods that are
//! not at the update revision from the highest ordinal down to the partition, within
//! `maxUnavailable`; `OnDelete` leaves that to the user.
//!
//! The files follow upstream's package:
//!
//! - `controller`: constants, [`StatefulSetController`], construction, `Run`, the event
//!   handlers ([`StatefulSetEventHandlers`]) and the worker wiring (`stateful_set.go` up to
//!   `processNextWorkItem`).
//! - `sync`: `sync`, `adoptOrphanRevisions`, `getPodsForStatefulSet`, `syncStatefulSet` (the
//!   rest of `stateful_set.go`).
//! - [`control`]: [`StatefulSetControl`] (`stateful_set_control.go`).
//! - [`pod_control`]: [`StatefulPodControl`], pods and claims with events
//!   (`stateful_pod_control.go`).
//! - [`status_updater`]: the `/status` write (`stateful_set_status_updater.go`).
//! - [`utils`]: identities, storage, retention, revisions, status helpers
//!   (`stateful_set_utils.go`).
//! - [`client`]: the seams for the set's API calls and the pod/claim writes, with fakes.

pub mod client;
pub mod control;
mod controller;
pub mod pod_control;
pub mod status_updater;
mod sync;
#[cfg(test)]
mod test_support;
pub mod utils;

pub use client::{
    ApiObjectManager, ApiStatefulSetClient, FakeObjectManager, FakeStatefulSetClient,
    StatefulPodObjectManager, StatefulSetClient,
};
pub use control::{Clock, StatefulSetControl};
pub use controller::{
    CONTROLLER_NAME, QUEUE_NAME, StatefulSetCaches, StatefulSetController,
    StatefulSetControllerOptions, StatefulSetEventHandlers, SyncHandler,
};
pub use pod_control::StatefulPodControl;

use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::controller::history::controller_history;
use kcm_machinery::controller::{ApiStatus, ref_manager};
use kcm_machinery::informer::keys;
use kube::core::Status;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why syncing a StatefulSet failed. Every error but [`Error::InvalidKey`] makes the worker
/// requeue the key rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid StatefulSet key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// The set's selector does not parse.
    #[error("error converting StatefulSet {stateful_set} selector: {source}")]
    Selector {
        /// The set, `namespace/name`.
        stateful_set: String,
        /// The selector error.
        #[source]
        source: kcm_machinery::labels::Error,
    },
    /// Claiming pods failed for some pods.
    #[error("claiming pods for StatefulSet {stateful_set}: {source}")]
    ClaimPods {
        /// The set, `namespace/name`.
        stateful_set: String,
        /// The ref manager's error.
        #[source]
        source: Box<ref_manager::Error>,
    },
    /// The uncached re-check before adopting revisions refused.
    #[error("can't adopt ControllerRevisions: {reason}")]
    CannotAdopt {
        /// Why (the set is gone, replaced or being deleted, or the read failed).
        reason: String,
    },
    /// A ControllerRevision operation failed.
    #[error(transparent)]
    History(#[from] controller_history::Error),
    /// A revision's data is not a template.
    #[error(transparent)]
    ApplyRevision(#[from] utils::ApplyRevisionError),
    /// `maxUnavailable` does not resolve.
    #[error("invalid maxUnavailable: {0}")]
    MaxUnavailable(#[from] kcm_machinery::intstr::Error),
    /// A pod write failed.
    #[error("{verb} Pod {pod}: {message}", message = error_message(.source))]
    Pod {
        /// `create`, `update` or `delete`.
        verb: &'static str,
        /// The pod's name.
        pod: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A claim read or write failed.
    #[error("failed to {verb} PVC {claim}: {message}", message = error_message(.source))]
    Claim {
        /// `get`, `create` or `update`.
        verb: &'static str,
        /// The claim's name.
        claim: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A claim the pod needs is being deleted: the pod must wait.
    #[error("pvc {claim} is being deleted")]
    ClaimBeingDeleted {
        /// The claim's name.
        claim: String,
    },
    /// Writing `/status` failed after the retries.
    #[error("updating status of StatefulSet {stateful_set}: {message}", message = error_message(.source))]
    UpdateStatus {
        /// The set, `namespace/name`.
        stateful_set: String,
        /// The client error of the last attempt.
        #[source]
        source: kube::Error,
    },
    /// Several failures of one pass, as apimachinery's aggregate error.
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Aggregate(Vec<Error>),
}

impl Error {
    /// None is `Ok`, one is itself, more are [`Error::Aggregate`], as `NewAggregate`.
    pub fn aggregate(mut errors: Vec<Error>) -> Result<()> {
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(Error::Aggregate(errors)),
        }
    }
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::ClaimPods { source, .. } => source.api_status(),
            Error::History(source) => source.api_status(),
            Error::Pod { source, .. }
            | Error::Claim { source, .. }
            | Error::UpdateStatus { source, .. } => source.api_status(),
            Error::Aggregate(errors) => errors.first().and_then(ApiStatus::api_status),
            Error::InvalidKey { .. }
            | Error::Selector { .. }
            | Error::CannotAdopt { .. }
            | Error::ApplyRevision(_)
            | Error::MaxUnavailable(_)
            | Error::ClaimBeingDeleted { .. } => None,
        }
    }
}
