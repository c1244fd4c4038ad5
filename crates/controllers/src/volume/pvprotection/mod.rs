//! The PersistentVolume protection controller: keeps the `kubernetes.io/pv-protection` finalizer on live volumes and removes it from deleted ones once they are not `Bound`, as kube-controller-manager's `pkg/controller/volume/pvprotection`.
//!
//! Where to start: [`PvProtectionController`] (upstream `pv_protection_controller.go`). Volume
//! events enqueue volumes that lack the finalizer or are being deleted with it;
//! [`PvProtectionController::sync`] (upstream `processPV`) removes the finalizer from a deleted
//! volume unless its phase is `Bound` (the PV controller moves a volume whose claim is gone to
//! `Released`), and adds it to a live volume created without it.

mod controller;

pub use controller::{
    CONTROLLER_NAME, PvProtectionController, PvProtectionControllerOptions,
    PvProtectionEventHandlers, QUEUE_NAME, WORKERS,
};

use kcm_machinery::controller::api_status::error_message;

/// `pv-protection` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "pv-protection";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a volume's finalizer could not be changed; the worker requeues it rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing the volume with the finalizer added or removed failed.
    #[error("{action} protection finalizer on PV {volume}: {message}", message = error_message(.source))]
    Update {
        /// `adding` or `removing`.
        action: &'static str,
        /// The volume's name.
        volume: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
