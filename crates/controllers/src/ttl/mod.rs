//! The TTL controller: the `node.alpha.kubernetes.io/ttl` annotation on every Node, chosen by cluster size, as kube-controller-manager's `pkg/controller/ttl`.
//!
//! Where to start: [`TtlController`] (upstream `ttl_controller.go`). Kubelets read the
//! annotation as how long they may cache Secrets and ConfigMaps before refetching. Node adds
//! and deletes keep a node count and move between the size intervals of [`TTL_BOUNDARIES`]
//! (which overlap, so a cluster hovering at a boundary does not flap); every Node add or
//! update queues the Node, and a sync patches the annotation when it differs from the desired
//! TTL.
//!
//! - `controller`: constants, the controller, construction, `Run`, the Node event handlers, the
//!   worker wiring and the sync.
//! - [`client`]: the one write (a strategic merge patch of the annotation), with a recording fake.

pub mod client;
mod controller;

pub use client::{ApiTtlNodeClient, FakeTtlNodeClient, TtlNodeClient, ttl_annotation_patch};
pub use controller::{
    CONTROLLER_ALIAS, CONTROLLER_NAME, QUEUE_NAME, TTL_ANNOTATION, TTL_BOUNDARIES, TtlBoundary,
    TtlController, TtlControllerOptions, TtlEventHandlers, WORKERS,
};

use kcm_machinery::controller::api_status::error_message;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why setting a Node's TTL annotation failed; the worker requeues the Node rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The patch failed.
    #[error("patching the ttl annotation of node {node}: {message}", message = error_message(.source))]
    Patch {
        /// The Node's name.
        node: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
