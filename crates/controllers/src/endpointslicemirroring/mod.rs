//! The EndpointSlice mirroring controller: mirrors the custom Endpoints of Services without a selector into EndpointSlices, as kube-controller-manager's.
//!
//! Where to start: [`EndpointSliceMirroringController`] (kubernetes
//! `pkg/controller/endpointslicemirroring`). Endpoints, Services and EndpointSlices feed one
//! work queue of Endpoints keys ([`QUEUE_NAME`]). An Endpoints is mirrored when its Service
//! exists without a selector and it is neither labelled `endpointslice.kubernetes.io/
//! skip-mirror: "true"` nor a leader-election lock; otherwise its mirrored slices are
//! deleted. Each subset's addresses (at most `--mirroring-max-endpoints-per-subset`) go into
//! one slice per port list and address type, labelled `endpointslice.kubernetes.io/
//! managed-by: endpointslicemirroring-controller.k8s.io` and owned by the Endpoints.
//!
//! - `controller`: constants, the controller, construction, `Run`, handlers, worker wiring
//!   (`endpointslicemirroring_controller.go`).
//! - `sync`: `syncEndpoints` and `deleteMirroredSlices`.
//! - [`reconciler`] and [`reconciler_helpers`] — `reconciler.go`, `reconciler_helpers.go`.
//! - [`utils`] — `utils.go`.
//! - [`metrics`] — `endpoint_slice_mirroring_controller_*`.

mod controller;
pub mod metrics;
pub mod reconciler;
pub mod reconciler_helpers;
mod sync;
pub mod utils;

pub use controller::{
    CONTROLLER_ALIAS, CONTROLLER_NAME, DEFAULT_MIRRORING_CONCURRENT_SERVICE_ENDPOINT_SYNCS,
    DEFAULT_MIRRORING_MAX_ENDPOINTS_PER_SUBSET, EVENT_COMPONENT, EndpointSliceMirroringController,
    EndpointSliceMirroringOptions, MAX_RETRIES, MirroringEventHandlers, QUEUE_NAME,
};
pub use metrics::MirroringMetrics;
pub use reconciler::{INVALID_IP_ADDRESS, MirroringReconciler, TOO_MANY_ADDRESSES_TO_MIRROR};
pub use utils::MANAGED_BY;

use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::informer::keys;
use kube::core::Status;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why mirroring an Endpoints failed; the worker requeues the key rate-limited, up to
/// [`MAX_RETRIES`] times.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid Endpoints key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// The slice cache is older than this controller's writes.
    #[error("EndpointSlice informer cache is out of date")]
    StaleCache,
    /// Creating a slice failed.
    #[error("failed to create EndpointSlice for Endpoints {endpoints}: {message}", message = error_message(.source))]
    CreateSlice {
        /// The Endpoints, `namespace/name`.
        endpoints: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Updating a slice failed.
    #[error("failed to update {slice} EndpointSlice for Endpoints {endpoints}: {message}", message = error_message(.source))]
    UpdateSlice {
        /// The slice.
        slice: String,
        /// The Endpoints, `namespace/name`.
        endpoints: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Deleting a slice failed.
    #[error("failed to delete {slice} EndpointSlice for Endpoints {endpoints}: {message}", message = error_message(.source))]
    DeleteSlice {
        /// The slice.
        slice: String,
        /// The Endpoints, `namespace/name`.
        endpoints: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Deleting the mirrored slices of an Endpoints no longer mirrored failed.
    #[error("Error(s) deleting EndpointSlices (of {failed}) for {endpoints} Endpoints, including: {message}", message = error_message(.source))]
    DeleteMirrored {
        /// The Endpoints, `namespace/name`.
        endpoints: String,
        /// How many slices were to be deleted.
        failed: usize,
        /// The first client error.
        #[source]
        source: kube::Error,
    },
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::CreateSlice { source, .. }
            | Error::UpdateSlice { source, .. }
            | Error::DeleteSlice { source, .. }
            | Error::DeleteMirrored { source, .. } => source.api_status(),
            Error::InvalidKey { .. } | Error::StaleCache => None,
        }
    }
}
