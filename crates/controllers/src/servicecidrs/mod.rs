//! The ServiceCIDR controller: the `networking.k8s.io/service-cidr-finalizer` and the `Ready` condition on every ServiceCIDR, and a deleted ServiceCIDR kept until no allocated Service IP would be left outside every range, as kube-controller-manager's `service-cidr-controller` (`pkg/controller/servicecidrs`).
//!
//! Where to start: [`ServiceCidrController::sync`]. The API server records each allocated
//! cluster IP as an IPAddress (labelled `ipaddress.kubernetes.io/managed-by:
//! ipallocator.k8s.io`); [`ServiceCidrController::can_delete`] lets a ServiceCIDR go when
//! another one contains it, or when no such address lies in it alone. IPAddress events queue
//! the ServiceCIDRs containing the address, so a blocked deletion completes once the last
//! Service in the range is gone.
//!
//! - `controller`: constants, the controller, `Run`, the handlers and `sync`.
//! - [`prefix`]: prefix containment and overlap.
//! - [`client`]: the merge patches, with a recording fake.

pub mod client;
mod controller;
pub mod prefix;

pub use client::{ApiServiceCidrClient, FakeServiceCidrClient, ServiceCidrClient};
pub use controller::{
    CONTROLLER_NAME, Clock, DELETION_GRACE_PERIOD, QUEUE_NAME, READY_MESSAGE,
    SERVICE_CIDR_PROTECTION_FINALIZER, ServiceCidrController, ServiceCidrControllerOptions,
    ServiceCidrEventHandlers, TERMINATING_MESSAGE, WORKERS,
};

use kcm_machinery::controller::api_status::error_message;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a ServiceCIDR could not be synced; the worker requeues it rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Adding or removing the protection finalizer failed.
    #[error("{action} the protection finalizer of ServiceCIDR {name}: {message}", message = error_message(.source))]
    Finalizer {
        /// `adding` or `removing`.
        action: &'static str,
        /// The ServiceCIDR.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Writing the `Ready` condition failed.
    #[error("updating the status of ServiceCIDR {name}: {message}", message = error_message(.source))]
    Status {
        /// The ServiceCIDR.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
