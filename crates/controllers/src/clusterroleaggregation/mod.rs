//! The ClusterRole aggregation controller: fills the rules of every ClusterRole with an `aggregationRule` from the ClusterRoles its selectors match (so `admin`/`edit`/`view` pick up rules labelled for aggregation, e.g. a CRD's), as kube-controller-manager's `pkg/controller/clusterroleaggregation`.
//!
//! Where to start: [`ClusterRoleAggregationController`] (upstream
//! `clusterroleaggregation_controller.go`). Any ClusterRole event enqueues every aggregated
//! ClusterRole (the set is small and the dependency graph unknown, as upstream);
//! [`ClusterRoleAggregationController::sync`] (upstream `syncClusterRole`) computes the union
//! of the selected roles' rules, in name order without duplicates, and server-side applies
//! it when it differs.
//!
//! - `controller`: constants, the controller, construction, `Run`, the event handlers and the
//!   worker wiring.
//! - `sync`: `syncClusterRole` and the rule union.
//! - [`client`]: the apply of a ClusterRole's rules, with a recording fake.

pub mod client;
mod controller;
mod sync;

pub use client::{AggregationClient, ApiAggregationClient, FakeAggregationClient};
pub use controller::{
    AggregationEventHandlers, CONTROLLER_NAME, ClusterRoleAggregationController, QUEUE_NAME,
    WORKERS,
};
pub use sync::aggregated_rules;

use kcm_machinery::controller::api_status::error_message;

/// `clusterrole-aggregation` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "clusterrole-aggregation";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why aggregating a ClusterRole failed; the worker requeues the key rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A selector of the role's `aggregationRule` is invalid.
    #[error("ClusterRole {role}: invalid clusterRoleSelector: {source}")]
    Selector {
        /// The aggregated ClusterRole.
        role: String,
        /// Why the selector does not convert.
        #[source]
        source: kcm_machinery::labels::Error,
    },
    /// Applying the aggregated rules failed.
    #[error("applying the aggregated rules of ClusterRole {role}: {message}", message = error_message(.source))]
    Apply {
        /// The aggregated ClusterRole.
        role: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}
