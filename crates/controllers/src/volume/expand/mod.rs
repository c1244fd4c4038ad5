//! The volume expand controller: claims whose request grew past their capacity are handed to the external resizer of their volume, as kube-controller-manager's `pkg/controller/volume/expand`.
//!
//! Where to start: [`ExpandController`] (upstream `expand_controller.go`). Claim events enqueue
//! bound claims whose request or status capacity grew; [`ExpandController::sync`] (upstream
//! `syncHandler`) reads the claim's volume, checks that the volume is bound to that claim and
//! that the request exceeds the capacity, and records the `ExternalExpanding` event ("waiting
//! for an external controller to expand this PVC").
//!
//! kcm models no in-tree volume plugins and no CSI migration: every volume is expanded by an
//! external resizer (for a CSI volume, the one named by `spec.csi.driver`; upstream's
//! `FindExpandablePluginBySpec` finds no in-tree plugin for it either). So the controller never
//! writes the claim or volume; `volume.kubernetes.io/storage-resizer` is set upstream only for
//! in-tree and migrated volumes, and `AnnPreResizeCapacity` only by in-tree plugins.

mod controller;

pub use controller::{
    CONTROLLER_NAME, EVENT_COMPONENT, ExpandController, ExpandControllerOptions,
    ExpandEventHandlers, QUEUE_NAME, WORKERS,
};

use kcm_machinery::controller::api_status::error_message;

/// `persistentvolume-expander` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "persistentvolume-expander";

/// The claim annotation naming the resizer of an in-tree or migrated volume, as upstream's
/// `volumetypes.VolumeResizerKey`.
pub const ANN_STORAGE_RESIZER: &str = "volume.kubernetes.io/storage-resizer";

/// The event reason upstream's `events.ExternalExpanding`.
pub const EXTERNAL_EXPANDING: &str = "ExternalExpanding";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a claim could not be synced; the worker requeues it rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The claim's key is not `namespace/name`.
    #[error("invalid claim key {0:?}")]
    InvalidKey(String),
    /// Reading the claim's volume failed, as upstream's `getPersistentVolume`.
    #[error("failed to get PV {volume:?}: {message}", message = error_message(.source))]
    GetVolume {
        /// The volume's name (`spec.volumeName`).
        volume: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The volume's `claimRef` names another claim (or none).
    #[error("persistent Volume is not bound to PVC being updated : {0}")]
    NotBound(String),
}
