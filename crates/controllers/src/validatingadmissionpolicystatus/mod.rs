//! The ValidatingAdmissionPolicy status controller: type-checks each policy's CEL expressions against the schemas of the kinds it matches and writes the result to `status.typeChecking`, as kube-controller-manager's `pkg/controller/validatingadmissionpolicystatus`.
//!
//! Where to start: [`ValidatingAdmissionPolicyStatusController`] (upstream `controller.go`).
//! A policy added or updated is enqueued; [`ValidatingAdmissionPolicyStatusController::sync`]
//! skips a generation already checked, type-checks ([`typecheck`]) and server-side applies
//! `observedGeneration` and `typeChecking` (empty when every expression checks: its presence
//! says the check ran).
//!
//! - `controller`: constants, the controller, construction, `Run`, the event handlers and
//!   `reconcile`.
//! - [`typecheck`]: which kinds a policy is checked against, their schemas as CEL types, and
//!   the checker of one expression.
//! - [`client`]: discovery and `/openapi/v3` reads, the status apply, and fakes.

pub mod client;
mod controller;
pub mod typecheck;

pub use client::{
    ApiSchemaSource, ApiStatusClient, FakeSchemaSource, FakeStatusClient, StatusClient,
};
pub use controller::{
    CONTROLLER_NAME, DEFAULT_WORKERS, PolicyEventHandlers, QUEUE_NAME,
    ValidatingAdmissionPolicyStatusController,
};

use kcm_machinery::controller::api_status::error_message;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why writing a policy's status failed; the worker requeues the key rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Applying the status failed.
    #[error("applying the status of ValidatingAdmissionPolicy {policy}: {message}", message = error_message(.source))]
    Apply {
        /// The policy.
        policy: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}
