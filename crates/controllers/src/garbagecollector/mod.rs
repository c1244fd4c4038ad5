//! The garbage collector: cascading deletion by owner references (background, foreground, orphan), as kube-controller-manager's.
//!
//! Where to start: [`GarbageCollector`] (kubernetes `pkg/controller/garbagecollector`).
//! [`GarbageCollector::run`] discovers every resource that can be listed, watched and deleted,
//! monitors each with an informer, and runs the workers.
//!
//! ```text
//! informers ─► GraphEventHandler ─► graph_changes ─► GraphBuilder ─► Graph (uid → node)
//!                                                          │
//!                            attemptToDelete ◄─────────────┤ (maybe garbage, or unblocked)
//!                            attemptToOrphan ◄─────────────┘ (owner with the orphan finalizer)
//!                                   │
//!                     workers: live GET of owners, DELETE / PATCH through the API
//! ```
//!
//! - [`graph`]: the nodes and edges ([`Graph`], [`ObjectIdentity`]).
//! - [`graph_builder`]: informer events → graph edits → queue work ([`GraphBuilder`],
//!   [`apply_event`](graph_builder::apply_event)).
//! - [`garbagecollector`](mod@garbagecollector): the workers' decisions (`attemptToDeleteItem`,
//!   orphaning, foreground bookkeeping).
//! - [`operations`]: the API calls, behind the [`MetadataClient`] seam;
//!   [`fake`] has an in-memory one for unit tests.
//! - [`monitors`]: one informer per deletable resource (shared typed informers where the
//!   process already has them, metadata-only informers otherwise).
//! - [`discovery`]: the REST mapper and the deletable resources (machinery's, shared with
//!   the namespace controller), and [`default_ignored_resources`].
//! - [`patch`], [`uid_cache`]: patch bodies and the absent-owner cache.

pub use kcm_machinery::discovery;
pub mod fake;
#[allow(clippy::module_inception)]
pub mod garbagecollector;
pub mod graph;
pub mod graph_builder;
pub mod monitors;
pub mod operations;
pub mod patch;
pub mod uid_cache;

pub use discovery::{GroupResource, GroupVersionResource, RestMapper, RestMapping};
pub use fake::{FakeAction, FakeMetadataClient};
pub use garbagecollector::{
    ATTEMPT_TO_DELETE_QUEUE, ATTEMPT_TO_ORPHAN_QUEUE, CONTROLLER_ALIAS, CONTROLLER_NAME,
    DEFAULT_CONCURRENT_GC_SYNCS, DeleteOutcome, GRAPH_CHANGES_QUEUE, GarbageCollector,
    GarbageCollectorOptions, SYNC_PERIOD, default_ignored_resources,
};
pub use graph::{Graph, NodeSnapshot, ObjectIdentity};
pub use graph_builder::{
    FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN_DEPENDENTS, GraphBuilder, GraphEvent, NodeKey,
    REASON_OWNER_REF_INVALID_NAMESPACE,
};
pub use operations::{ApiMetadataClient, MetadataClient, PatchBody};
pub use uid_cache::ReferenceCache;

use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;
use kube::core::Status;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a garbage-collector operation failed. Every error makes the worker requeue the item
/// with rate limiting, except [`Error::NamespacedOwnerOfClusterScopedObject`], which cannot
/// resolve by retrying.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No served resource has this apiVersion/kind (yet): a custom resource not discovered
    /// yet, or a version no longer served. Retried: discovery may learn it.
    #[error("unable to get REST mapping for {api_version}/{kind}.")]
    RestMapping {
        /// The apiVersion of the reference.
        api_version: String,
        /// The kind of the reference.
        kind: String,
    },
    /// A cluster-scoped object names a namespaced owner, which cannot be valid.
    #[error("cluster-scoped objects cannot refer to namespaced owners: {item} refers to {owner}")]
    NamespacedOwnerOfClusterScopedObject {
        /// The cluster-scoped dependent.
        item: String,
        /// The namespaced owner it names.
        owner: String,
    },
    /// A request to the API server failed.
    #[error("{operation} {object}: {message}", message = error_message(.source))]
    Api {
        /// What was attempted (`get`, `delete`, `patch`, ...).
        operation: &'static str,
        /// The object, as `[apiVersion/kind, namespace: ns, name: n, uid: u]`.
        object: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Removing a finalizer kept conflicting with other writers.
    #[error(
        "updateMaxRetries({retries}) has reached. The garbage collector will retry later for owner {owner}"
    )]
    FinalizerConflicts {
        /// The attempts made.
        retries: usize,
        /// The owner.
        owner: String,
    },
    /// Some dependents could not be orphaned.
    #[error("failed to orphan dependents of owner {owner}, got errors: {errors}")]
    OrphanDependents {
        /// The owner.
        owner: String,
        /// Each dependent's failure, `; `-separated.
        errors: String,
    },
    /// Discovery of the served resources failed.
    #[error("discovering the served resources: {message}", message = error_message(.source))]
    Discovery {
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Some resources could not be monitored.
    #[error("failed to sync resource monitors: {0}")]
    Monitors(String),
}

impl Error {
    /// An API error about `object` during `operation`.
    pub fn api(operation: &'static str, object: &ObjectIdentity, source: kube::Error) -> Self {
        Self::Api {
            operation,
            object: object.to_string(),
            source,
        }
    }
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::Api { source, .. } | Error::Discovery { source } => source.api_status(),
            _ => None,
        }
    }
}
