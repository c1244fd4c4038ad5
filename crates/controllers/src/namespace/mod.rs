//! The namespace controller: empties namespaces being deleted and releases their `kubernetes` finalizer, as kube-controller-manager's.
//!
//! Where to start: [`NamespaceController`] (kubernetes `pkg/controller/namespace`).
//! `kubectl delete namespace X` only marks X `Terminating` (the API server sets its
//! `deletionTimestamp`); this controller, told by the namespace informer, waits
//! [`NAMESPACE_DELETION_GRACE_PERIOD`], then runs a [`NamespacedResourcesDeleter`] pass:
//! deletes every object of every namespaced resource found by discovery (pods first: nothing
//! else is deleted while a pod remains, as upstream's `OrderedNamespaceDeletion`), records
//! progress in the namespace's status conditions ([`conditions`]), looks again after the
//! estimated graceful-termination time while content remains, and finally removes `kubernetes` from
//! `spec.finalizers` through `/finalize`. The API server then deletes the namespace itself, as
//! soon as neither `spec.finalizers` nor `metadata.finalizers` holds it.
//!
//! - [`controller`](NamespaceController): informer handlers, the `namespace` work queue and
//!   its rate limiter, the workers.
//! - [`deleter`]: one deletion pass (upstream's `namespacedResourcesDeleter`).
//! - [`conditions`]: the five `NamespaceDeletion*`/`Namespace*Remaining` conditions.
//! - [`client`]: the seam for every API call, with a recording fake for unit tests.

pub mod client;
pub mod conditions;
mod controller;
pub mod deleter;

pub use client::{ApiNamespaceClient, FakeNamespaceClient, NamespaceAction, NamespaceClient};
pub use controller::{
    CONTROLLER_ALIAS, CONTROLLER_NAME, DEFAULT_CONCURRENT_NAMESPACE_SYNCS,
    DEFAULT_NAMESPACE_SYNC_PERIOD, NAMESPACE_DELETION_GRACE_PERIOD, NamespaceController,
    NamespaceControllerOptions, NamespaceEventHandlers, QUEUE_NAME, ns_controller_rate_limiter,
};
pub use deleter::{
    Clock, FINALIZER_ESTIMATE_SECONDS, FINALIZER_KUBERNETES, NamespacedResourcesDeleter,
};

use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;
use kube::core::Status;

use kcm_machinery::discovery::GroupVersionResource;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a namespace deletion pass did not finish. [`Error::ResourcesRemaining`] makes the worker
/// look again after the estimate; every other error requeues the namespace with rate limiting.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Content was deleted but some remains, expected to go within `estimate` seconds.
    #[error(
        "some content remains in the namespace, estimate {estimate} seconds before it is removed"
    )]
    ResourcesRemaining {
        /// The namespace.
        namespace: String,
        /// Seconds until the remaining content should be gone.
        estimate: i64,
    },
    /// A request on the namespace itself failed.
    #[error("{operation} namespace {namespace}: {message}", message = error_message(.source))]
    Namespace {
        /// `get`, `update status of` or `finalize`.
        operation: &'static str,
        /// The namespace.
        namespace: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The namespace was replaced by a namesake between two attempts of a write.
    #[error("namespace uid has changed across retries")]
    UidChanged {
        /// The namespace.
        namespace: String,
    },
    /// Discovery of the served resources failed, partly or wholly.
    #[error("{message}")]
    Discovery {
        /// client-go's message for the failure.
        message: String,
    },
    /// Listing or deleting one resource's objects failed.
    #[error("{operation} {gvr} in namespace {namespace}: {message}", message = error_message(.source))]
    Content {
        /// What was attempted.
        operation: &'static str,
        /// The namespace.
        namespace: String,
        /// The resource.
        gvr: GroupVersionResource,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Objects without finalizers survived deletion.
    #[error("unexpected items still remain in namespace: {namespace} for gvr: {}", go_gvr(.gvr))]
    ContentRemaining {
        /// The namespace.
        namespace: String,
        /// The resource.
        gvr: GroupVersionResource,
    },
    /// Several of the above, from one pass (upstream's `utilerrors.NewAggregate`).
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Aggregate(Vec<Error>),
}

/// Go's `%v` of a `GroupVersionResource`: `{group version resource}`.
fn go_gvr(gvr: &GroupVersionResource) -> String {
    format!("{{{} {} {}}}", gvr.group, gvr.version, gvr.resource)
}

impl Error {
    /// `errors` as one error: none, the only one, or an [`Error::Aggregate`].
    pub fn aggregate(mut errors: Vec<Error>) -> Option<Error> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(Error::Aggregate(errors)),
        }
    }

    /// The text upstream puts in the `NamespaceDeletionContentFailure` condition: the failed
    /// request's own error (for API errors, the server's message).
    pub fn condition_message(&self) -> String {
        match self {
            Error::Content { source, .. } => error_message(source),
            other => other.to_string(),
        }
    }
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::Namespace { source, .. } | Error::Content { source, .. } => source.api_status(),
            _ => None,
        }
    }
}
