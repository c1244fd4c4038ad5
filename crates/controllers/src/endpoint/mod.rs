//! The endpoints controller: keeps the core/v1 Endpoints of every Service with a selector listing the Service's pods, as kube-controller-manager's.
//!
//! Where to start: [`EndpointController`] (kubernetes `pkg/controller/endpoint`). Services,
//! pods and Endpoints feed one work queue of Service keys ([`QUEUE_NAME`]); a worker syncs a
//! key with [`EndpointController::sync`]: list the pods the selector matches, turn each into
//! a ready or not-ready address (its IP of the Service's family, node, target pod, hostname
//! for a headless subdomain) per resolved port, repack into canonical subsets, truncate at
//! [`MAX_CAPACITY`], and write only when something changed. Services of type ExternalName or
//! without a selector are left alone (their Endpoints belong to someone else); the Endpoints of
//! a deleted Service are deleted.
//!
//! The files follow upstream's package:
//!
//! - `controller`: constants, [`EndpointController`], construction, `Run` (with the startup
//!   sweep of leftover Endpoints), the event handlers and the worker wiring
//!   (`endpoints_controller.go` up to `processNextWorkItem`).
//! - `sync`: `syncService`.
//! - [`subsets`] — addresses and ports per pod, `RepackSubsets`, truncation, comparison.
//! - [`tracker`] — `staleEndpointsTracker`.
//! - [`client`] — the seam for the Endpoints writes, with a recording fake.

pub mod client;
mod controller;
pub mod subsets;
mod sync;
pub mod tracker;

pub use client::{ApiEndpointsClient, EndpointsAction, EndpointsClient, FakeEndpointsClient};
pub use controller::{
    CONTROLLER_ALIAS, CONTROLLER_NAME, DEFAULT_CONCURRENT_ENDPOINT_SYNCS, EVENT_COMPONENT,
    EndpointController, EndpointControllerOptions, EndpointEventHandlers, MAX_RETRIES, QUEUE_NAME,
};
pub use subsets::{MAX_CAPACITY, TRUNCATED};

use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::informer::keys;
use kube::core::Status;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why syncing a Service's Endpoints failed; the worker requeues the key rate-limited, up to
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
    /// Deleting the Endpoints of a deleted Service failed.
    #[error("deleting endpoints {key}: {message}", message = error_message(.source))]
    Delete {
        /// `namespace/name`.
        key: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The cached Endpoints is a version this controller already replaced.
    #[error(
        "endpoints informer cache is out of date, resource version {resource_version} already processed for endpoints {key}"
    )]
    StaleCache {
        /// `namespace/name`.
        key: String,
        /// The replaced resourceVersion still in the cache.
        resource_version: String,
    },
    /// Creating the Endpoints failed.
    #[error("creating endpoints {key}: {message}", message = error_message(.source))]
    Create {
        /// `namespace/name`.
        key: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Updating the Endpoints failed.
    #[error("updating endpoints {key}: {message}", message = error_message(.source))]
    Update {
        /// `namespace/name`.
        key: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::Delete { source, .. }
            | Error::Create { source, .. }
            | Error::Update { source, .. } => source.api_status(),
            Error::InvalidKey { .. } | Error::StaleCache { .. } => None,
        }
    }
}
