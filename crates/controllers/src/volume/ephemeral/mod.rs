//! The ephemeral volume controller: for each generic ephemeral volume of a pod, the claim `<pod>-<volume>` made from the volume's template and owned by the pod, as kube-controller-manager's `pkg/controller/volume/ephemeral`.
//!
//! Where to start: [`EphemeralController`] (upstream `controller.go`). New pods with an
//! ephemeral volume are enqueued (a pod's spec cannot change, so updates are ignored; the claim
//! goes with its pod through the garbage collector, so deletions are too), and so are the pods
//! whose claim was deleted, so it is made again. [`EphemeralController::sync`] (upstream
//! `syncHandler`) creates each missing claim with the pod as its controller
//! (`blockOwnerDeletion`), and refuses, with a `FailedBinding` warning on the pod, a claim of
//! that name the pod does not control.
//!
//! - `controller`: constants, the controller, `Run`, the handlers, `syncHandler`, `handleVolume`.
//! - [`metrics`]: `ephemeral_volume_controller_create_total` and `..._create_failures_total`.

mod controller;
pub mod metrics;

pub use controller::{
    CONTROLLER_NAME, DEFAULT_CONCURRENT_EPHEMERAL_VOLUME_SYNCS, EVENT_COMPONENT,
    EphemeralController, EphemeralControllerOptions, EphemeralEventHandlers, QUEUE_NAME,
};
pub use metrics::EphemeralVolumeMetrics;

use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::informer::keys;

use crate::volume::common::NotOwnedByPod;

/// `ephemeral-volume` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "ephemeral-volume";

/// The event reason of a volume whose claim cannot be made (upstream's `events.FailedBinding`).
pub const FAILED_BINDING: &str = "FailedBinding";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a pod's claims could not all be made; the worker requeues it rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid pod key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// One ephemeral volume's claim failed (upstream's `pod %s, ephemeral volume %s: %v`).
    #[error("pod {pod}, ephemeral volume {volume}: {source}")]
    Volume {
        /// The pod, `namespace/name`.
        pod: String,
        /// The volume's name in the pod.
        volume: String,
        /// What went wrong with it.
        #[source]
        source: VolumeError,
    },
}

/// What went wrong with one ephemeral volume; also the `FailedBinding` event's message, after
/// `ephemeral volume <name>: `.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A claim of the volume's name exists and the pod does not control it.
    #[error(transparent)]
    NotOwned(#[from] NotOwnedByPod),
    /// Creating the claim failed.
    #[error("create PVC {claim}: {message}", message = error_message(.source))]
    Create {
        /// The claim's name.
        claim: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
