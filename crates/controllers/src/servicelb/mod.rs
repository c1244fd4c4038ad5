//! The service-lb controller: a cloud load balancer for every `LoadBalancer` Service, its address in the Service's status, and cleanup on deletion or a type change, as the `service-lb-controller` kube-controller-manager runs (`k8s.io/cloud-provider/controllers/service`).
//!
//! Where to start: [`ServiceLbController`]. It runs only with a cloud
//! ([`crate::cloud::CloudProvider`]); `kcm run` has none, as kube-controller-manager v1.36
//! without `--cloud-provider`, and skips it; `kcm up` gives it the simulated cloud.
//! [`ServiceLbController::sync_load_balancer_if_needed`] puts the
//! `service.kubernetes.io/load-balancer-cleanup` finalizer on a Service before its load
//! balancer exists and takes it off once the load balancer is gone, so a Service is not
//! removed before its load balancer. A Service with `spec.loadBalancerClass` belongs to another
//! implementation and is left alone. [`ServiceLbController::node_sync`] points every load
//! balancer at the ready nodes when they change.
//!
//! - `controller`: constants, the controller, `Run`, `syncService` and the node sync.
//! - [`metrics`]: the `service_controller_*` latency histograms.
//! - [`predicates`]: which Services and changes matter, which nodes are backends.
//! - [`client`]: the `/status` merge patch, with a recording fake.

pub mod client;
mod controller;
pub mod metrics;
pub mod predicates;

pub use client::{ApiServiceLbClient, FakeServiceLbClient, ServiceLbClient};
pub use controller::{
    CONTROLLER_NAME, EVENT_COMPONENT, MAX_RETRY_DELAY, MIN_RETRY_DELAY, NODE_SYNC_PERIOD,
    Operation, QUEUE_NAME, SERVICE_SYNC_PERIOD, ServiceLbController, ServiceLbControllerOptions,
    ServiceLbEventHandlers,
};
pub use metrics::ServiceLbMetrics;

use kcm_machinery::controller::api_status::error_message;

/// `service` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "service";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a Service's load balancer could not be synced; the worker records
/// `SyncLoadBalancerFailed` and requeues it rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A cloud call failed (the message says which).
    #[error("{0}")]
    Cloud(String),
    /// A patch of the Service failed.
    #[error("{what}: {message}", message = error_message(.source))]
    Patch {
        /// What the patch was for, as upstream words it.
        what: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
