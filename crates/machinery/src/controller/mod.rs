//! Controller utilities from kubernetes `pkg/controller`: expectations, ref manager, pod control, ranking, slow start.
//!
//! Where to start:
//! - [`expectations`]: [`ControllerExpectations`] and [`UidTrackingControllerExpectations`], which
//!   keep a controller from acting again before the informer has seen its last writes.
//! - [`ranking`]: which pods to delete first on scale-down ([`ActivePodsWithRanks`]), pod
//!   readiness and availability.
//! - [`slow_start`]: [`slow_start_batch`], batches of 1, 2, 4, … that stop at the first failure.
//! - [`controller_ref`]: owner-reference helpers ([`get_controller_of`], [`new_controller_ref`]).
//! - [`api_status`]: classifying API errors (NotFound, Invalid, NamespaceTerminating, …).

pub mod api_status;
pub mod controller_ref;
pub mod expectations;
pub mod ranking;
pub mod slow_start;

pub use api_status::ApiStatus;
pub use controller_ref::{get_controller_of, new_controller_ref};
pub use expectations::{
    ControllerExpectations, EXPECTATIONS_TIMEOUT, UidTrackingControllerExpectations, pod_key,
};
pub use ranking::{
    ActivePodsWithRanks, filter_active_pods, get_pods_to_delete, is_pod_active, is_pod_available,
    is_pod_ready,
};
pub use slow_start::{SLOW_START_INITIAL_BATCH_SIZE, slow_start_batch};
