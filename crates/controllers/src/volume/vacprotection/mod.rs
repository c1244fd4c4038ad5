//! The VolumeAttributesClass protection controller: keeps the `kubernetes.io/vac-protection` finalizer on live classes and removes it from deleted ones once no PersistentVolume or claim names them, as kube-controller-manager's `pkg/controller/volume/vacprotection`.
//!
//! Where to start: [`VacProtectionController`] (upstream `vac_protection_controller.go`). Class
//! events enqueue classes that lack the finalizer or are being deleted with it; volume and claim
//! updates and deletions enqueue the classes they stopped naming.
//! [`VacProtectionController::sync`] (upstream `processVAC`) asks the volume and claim caches,
//! through an index by class name, whether anything still names a deleted class: a volume's
//! `spec.volumeAttributesClassName`, a claim's spec, its
//! `status.currentVolumeAttributesClassName` or the target of its `status.modifyVolumeStatus`.
//! Only caches are read, as upstream: a claim created in the same instant as the class is
//! deleted may see the class go (upstream's documented trade-off against live lists).

mod controller;

pub use controller::{
    CONTROLLER_NAME, QUEUE_NAME, VAC_NAME_INDEX, VacProtectionController,
    VacProtectionControllerOptions, VacProtectionEventHandlers, WORKERS, claim_class_names,
    volume_class_names,
};

use kcm_machinery::controller::api_status::error_message;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a class's finalizer could not be changed; the worker requeues it rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing the class with the finalizer added or removed failed.
    #[error("{action} protection finalizer on VAC {class}: {message}", message = error_message(.source))]
    Update {
        /// `adding` or `removing`.
        action: &'static str,
        /// The class's name.
        class: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
