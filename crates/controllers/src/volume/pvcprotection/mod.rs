//! The PersistentVolumeClaim protection controller: keeps the `kubernetes.io/pvc-protection` finalizer on live claims and removes it from deleted ones once no pod uses them, as kube-controller-manager's `pkg/controller/volume/pvcprotection`.
//!
//! Where to start: [`PvcProtectionController`] (upstream `pvc_protection_controller.go`).
//! Claim events enqueue claims that lack the finalizer or are being deleted with it; pod events
//! enqueue the claims of pods that can no longer hold them (deleted, terminated, or never
//! scheduled). One main worker moves claim keys from the rate-limited queue into per-namespace
//! batches ([`batches`], upstream's `pvcProcessingStore`); the namespace workers take a batch
//! at a time and [`PvcProtectionController::process_claim`] (upstream `processPVC`) each claim
//! of it.
//!
//! A deleted claim keeps its finalizer while a scheduled pod uses it, directly or as the claim
//! of a generic ephemeral volume the pod controls (a pod force-deleted or done with its
//! volumes, `deletionGracePeriodSeconds` 0, no longer holds its ephemeral claim). The pod
//! cache, through the pod-to-claim index, is asked first; when it finds no user, the API
//! server's pods of the namespace are listed once per batch (a pod may not have reached the
//! cache yet) and asked too: only then does the finalizer go.
//!
//! - `controller`: constants, the controller, `Run`, the workers and the event handlers.
//! - [`batches`]: claim keys grouped by namespace, so a batch shares one live pod list.
//! - `sync`: `processPVC`, `isBeingUsed`, `askInformer`, `askAPIServer`, `podUsesPVC`.

pub mod batches;
mod controller;
mod sync;

pub use batches::{ClaimBatches, QueuedClaim};
pub use controller::{
    CONTROLLER_NAME, PvcProtectionController, PvcProtectionControllerOptions,
    PvcProtectionEventHandlers, QUEUE_NAME, WORKERS,
};
pub use sync::{LivePodList, pod_is_shut_down, pod_uses_claim};

use kcm_machinery::controller::api_status::error_message;

/// `pvc-protection` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "pvc-protection";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a claim could not be processed; its key is requeued rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The live list of the namespace's pods failed (upstream's `live list of pods failed`).
    #[error("live list of pods failed: {message}", message = error_message(.source))]
    ListPods {
        /// The namespace.
        namespace: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Writing the claim with the finalizer added or removed failed.
    #[error("{action} protection finalizer on PVC {claim}: {message}", message = error_message(.source))]
    Update {
        /// `adding` or `removing`.
        action: &'static str,
        /// The claim, `namespace/name`.
        claim: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
