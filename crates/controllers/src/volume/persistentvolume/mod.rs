//! The PersistentVolume controller (`persistentvolume-binder-controller`): binds claims to volumes, asks external provisioners for new ones, and reclaims released volumes, as kube-controller-manager's `pkg/controller/volume/persistentvolume`.
//!
//! Where to start: [`PersistentVolumeController`] (upstream `pv_controller_base.go`: caches,
//! two queues with one worker each, a periodic resync), whose `sync.rs` holds upstream's
//! `pv_controller.go` state machine: `sync_claim` (unbound claims find the smallest matching
//! volume or are provisioned; bound claims are checked and go `Lost` when their volume is
//! gone) and `sync_volume` (volumes go `Available`, `Bound` or `Released`, and released ones
//! are reclaimed by their policy). [`util`] holds the matching rules (`FindMatchingVolume`),
//! [`index`] the controller's own caches, newer than the informers'; [`metrics`] upstream's
//! `pv_collector_*`, `volume_operation_total_*` and `retroactive_storageclass_*` families.
//!
//! kcm has no in-tree volume plugins: a class whose provisioner is not `kubernetes.io/...` is
//! left to its external provisioner (the claim is annotated
//! `volume.kubernetes.io/storage-provisioner`), as are released volumes it provisioned; a
//! recycled volume fails with `VolumeFailedRecycle` as upstream's does when no recycler plugin
//! matches; of the deleters only hostPath's (paths under `/tmp/`) is modelled, without touching
//! the host.

mod controller;
pub mod index;
pub mod metrics;
mod sync;
/// The matching rules, shared with the scheduler (upstream `component-helpers/storage/volume`).
pub use kcm_machinery::storage::volume as util;

pub use controller::{
    CLAIM_QUEUE_NAME, CONTROLLER_NAME, DEFAULT_PV_CLAIM_BINDER_SYNC_PERIOD, EVENT_COMPONENT,
    PersistentVolumeController, PersistentVolumeControllerOptions, PvEventHandlers, PvListers,
    VOLUME_QUEUE_NAME,
};

use kcm_machinery::controller::api_status::error_message;

/// `persistentvolume-binder` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "persistentvolume-binder";

/// Event reasons, as upstream's `pkg/controller/volume/events`.
pub mod events {
    /// A claim found no volume and has no class to provision one.
    pub const FAILED_BINDING: &str = "FailedBinding";
    /// A delayed-binding claim waits for a consumer.
    pub const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";
    /// A delayed-binding claim waits for its pods to be scheduled.
    pub const WAIT_FOR_POD_SCHEDULED: &str = "WaitForPodScheduled";
    /// A claim's requested volume does not fit it.
    pub const VOLUME_MISMATCH: &str = "VolumeMismatch";
    /// An external provisioner was asked for a volume.
    pub const EXTERNAL_PROVISIONING: &str = "ExternalProvisioning";
    /// Provisioning could not start.
    pub const PROVISIONING_FAILED: &str = "ProvisioningFailed";
    /// A released volume could not be recycled.
    pub const VOLUME_FAILED_RECYCLE: &str = "VolumeFailedRecycle";
    /// A released volume could not be deleted.
    pub const VOLUME_FAILED_DELETE: &str = "VolumeFailedDelete";
    /// A bound claim's volume is gone.
    pub const CLAIM_LOST: &str = "ClaimLost";
    /// Two claims are bound to the same volume.
    pub const CLAIM_MISBOUND: &str = "ClaimMisbound";
    /// A volume's reclaim policy is unknown.
    pub const VOLUME_UNKNOWN_RECLAIM_POLICY: &str = "VolumeUnknownReclaimPolicy";
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a claim or volume sync stopped; upstream logs it and the next resync tries again.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{operation} {object}: {message}", message = error_message(.source))]
    Api {
        /// What was being written or read (`updating claim`, `deleting volume`, ...).
        operation: &'static str,
        /// The claim (`namespace/name`) or volume.
        object: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The claim's selector does not parse.
    #[error("error finding PV for claim {claim:?}: {message}")]
    FindVolume {
        /// The claim, `namespace/name`.
        claim: String,
        /// Why.
        message: String,
    },
    /// The claim names a volume that the controller bound to another claim.
    #[error(
        "invalid binding of claim {claim:?} to volume {volume:?}: volume already claimed by {other:?}"
    )]
    InvalidBinding {
        /// The claim, `namespace/name`.
        claim: String,
        /// The volume it names.
        volume: String,
        /// The claim the volume is bound to.
        other: String,
    },
    /// A volume about to be bound has no `storage` capacity.
    #[error("PersistentVolume {volume:?} is without a storage capacity")]
    NoCapacity {
        /// The volume.
        volume: String,
    },
    /// The claim's class has no binding mode.
    #[error("VolumeBindingMode not set for StorageClass {class:?}")]
    NoBindingMode {
        /// The class.
        class: String,
    },
    /// A released volume could not be deleted (the event says why too).
    #[error("deleting volume {volume:?}: {message}")]
    Delete {
        /// The volume.
        volume: String,
        /// Why.
        message: String,
    },
}

impl Error {
    /// Whether the error is a write conflict (logged quietly, as upstream does).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Api { source: kube::Error::Api(status), .. } if status.code == 409)
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
