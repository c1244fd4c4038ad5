//! The EndpointSlice controller: keeps the EndpointSlices of every Service with a selector listing its pods, with as few slice writes as it can, as kube-controller-manager's.
//!
//! Where to start: [`EndpointSliceController`] (kubernetes `pkg/controller/endpointslice`, on
//! the reconciler of `staging/src/k8s.io/endpointslice`). Services, pods and EndpointSlices
//! feed one work queue of Service keys ([`QUEUE_NAME`]). A sync lists the selected pods and the
//! Service's slices (labelled `kubernetes.io/service-name` and `endpointslice.kubernetes.io/
//! managed-by: endpointslice-controller.k8s.io`), refuses to act on a slice cache older than
//! its own writes (the [`EndpointSliceTracker`](crate::endpointsliceutil::EndpointSliceTracker)),
//! and hands both to the [`Reconciler`], which computes and performs the minimal creates,
//! updates and deletes.
//!
//! The files follow upstream:
//!
//! - `controller`: constants, [`EndpointSliceController`], construction, `Run`, the event
//!   handlers and the worker wiring (`endpointslice_controller.go` up to
//!   `processNextServiceWorkItem`).
//! - `sync`: `syncService`.
//! - [`reconciler`]: `reconciler.go` (`Reconcile`, `reconcileByAddressType`,
//!   `reconcileByPortMapping`, `finalize`).
//! - [`utils`]: `utils.go` (pod to endpoint, ports, new slices, labels, address types).
//! - [`metrics`]: the `endpoint_slice_controller_*` metrics and their cache.
//!
//! Topology-aware hints and `trafficDistribution` are not implemented: hints left on slices
//! are removed, as upstream does for Services that ask for neither.

mod controller;
pub mod metrics;
pub mod reconciler;
mod sync;
pub mod utils;

pub use controller::{
    CONTROLLER_ALIAS, CONTROLLER_NAME, DEFAULT_CONCURRENT_SERVICE_ENDPOINT_SYNCS,
    DEFAULT_MAX_ENDPOINTS_PER_SLICE, ENDPOINT_SLICE_CHANGE_MIN_SYNC_DELAY, EVENT_COMPONENT,
    EndpointSliceController, EndpointSliceControllerOptions, EndpointSliceEventHandlers,
    MANAGED_BY, MAX_RETRIES, QUEUE_NAME, SERVICE_NAME_INDEX,
};
pub use metrics::EndpointSliceMetrics;
pub use reconciler::Reconciler;

use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::informer::keys;
use kube::core::Status;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why syncing a Service's slices failed; the worker requeues the key rate-limited, up to
/// [`MAX_RETRIES`] times.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid Service key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// The slice cache is older than this controller's writes (upstream's
    /// `StaleInformerCache`).
    #[error("EndpointSlice informer cache is out of date")]
    StaleCache,
    /// A selected pod names a node the cache does not have; its endpoint was left out.
    #[error("skipping Pod {pod} for Service {service}: Node {node} Not Found")]
    NodeNotFound {
        /// The pod's name.
        pod: String,
        /// The Service, `namespace/name`.
        service: String,
        /// The missing node.
        node: String,
    },
    /// Creating a slice failed.
    #[error("failed to create EndpointSlice for Service {service}: {message}", message = error_message(.source))]
    CreateSlice {
        /// The Service, `namespace/name`.
        service: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Updating a slice failed.
    #[error("failed to update {slice} EndpointSlice for Service {service}: {message}", message = error_message(.source))]
    UpdateSlice {
        /// The slice's name.
        slice: String,
        /// The Service, `namespace/name`.
        service: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Deleting a slice failed.
    #[error("failed to delete {slice} EndpointSlice for Service {service}: {message}", message = error_message(.source))]
    DeleteSlice {
        /// The slice's name.
        slice: String,
        /// The Service, `namespace/name`.
        service: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Several failures in one sync (upstream's flattened `NewAggregate`).
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Aggregate(Vec<Error>),
}

impl Error {
    /// `errors` as one error: none, the only one, or an [`Error::Aggregate`] (flattened).
    pub fn aggregate(errors: Vec<Error>) -> Option<Error> {
        let mut flat = Vec::with_capacity(errors.len());
        for err in errors {
            match err {
                Error::Aggregate(inner) => flat.extend(inner),
                other => flat.push(other),
            }
        }
        match flat.len() {
            0 => None,
            1 => flat.pop(),
            _ => Some(Error::Aggregate(flat)),
        }
    }

    /// Whether this is the stale-cache error (counted as `stale`, not `error`, in
    /// `endpoint_slice_controller_syncs`).
    pub fn is_stale_cache(&self) -> bool {
        matches!(self, Error::StaleCache)
    }
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::CreateSlice { source, .. }
            | Error::UpdateSlice { source, .. }
            | Error::DeleteSlice { source, .. } => source.api_status(),
            _ => None,
        }
    }
}
