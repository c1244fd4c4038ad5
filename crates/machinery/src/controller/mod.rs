//! Controller utilities from kubernetes `pkg/controller`: expectations, ref manager, pod control, ranking, slow start, the shared worker.
//!
//! Where to start:
//! - [`expectations`]: [`ControllerExpectations`] and [`UidTrackingControllerExpectations`], which
//!   keep a controller from acting again before the informer has seen its last writes.
//! - [`pod_control`]: the [`PodControl`] seam (create from a template, delete, patch) with the
//!   real implementation over `kube::Client` and a recording [`FakePodControl`] for tests.
//! - [`ref_manager`]: adoption and release of owned objects ([`PodControllerRefManager`], and
//!   the generic [`ControllerRefManager`] for other kinds).
//! - [`pod_index`]: the pod cache's index by controller UID and [`filter_pods_by_owner`]
//!   (upstream's `FilterPodsByOwner`): a controller's pods and its namespace's orphans.
//! - [`ranking`]: which pods to delete first on scale-down ([`ActivePodsWithRanks`]), pod
//!   readiness and availability.
//! - [`slow_start`]: [`slow_start_batch`], batches of 1, 2, 4, … that stop at the first failure.
//! - [`controller_ref`]: owner-reference helpers ([`get_controller_of`], [`new_controller_ref`]).
//! - [`hash`]: the pod-template hash ([`compute_hash`], upstream's `controller.ComputeHash`,
//!   go-spew compatible) that names ReplicaSets and labels DaemonSet pods.
//! - [`history`]: ControllerRevision naming and hashing ([`hash_controller_revision`]), as
//!   upstream's `pkg/controller/history`.
//! - [`api_status`]: classifying API errors (NotFound, Invalid, NamespaceTerminating, …).
//! - [`clock`]: the injectable wall clock ([`clock::Clock`]).
//! - [`workers`]: the worker loop every queue-driven controller shares ([`run_workers`]): sync
//!   each key under `catch_unwind`, then forget, requeue or drop it by an [`ErrorPolicy`].

pub mod api_status;
pub mod clock;
pub mod controller_ref;
pub mod expectations;
pub mod hash;
pub mod history;
pub mod pod_control;
pub mod pod_index;
pub mod ranking;
pub mod ref_manager;
pub mod slow_start;
pub mod workers;

pub use api_status::ApiStatus;
pub use controller_ref::{get_controller_of, new_controller_ref};
pub use expectations::{
    ControllerExpectations, EXPECTATIONS_TIMEOUT, UidTrackingControllerExpectations, pod_key,
};
pub use hash::compute_hash;
pub use history::{
    CONTROLLER_REVISION_HASH_LABEL, controller_revision_name, hash_controller_revision,
    hash_controller_revision_raw,
};
pub use pod_control::{FakePodControl, PodControl, RealPodControl};
pub use pod_index::{
    POD_CONTROLLER_UID_INDEX, add_pod_controller_uid_indexer, filter_pods_by_owner,
};
pub use ranking::{
    ActivePodsWithRanks, filter_active_pods, get_pods_to_delete, is_pod_active, is_pod_available,
    is_pod_ready, is_pod_terminating,
};
pub use ref_manager::{ControllerRefManager, PodControllerRefManager};
pub use slow_start::{SLOW_START_INITIAL_BATCH_SIZE, slow_start_batch};
pub use workers::{ErrorPolicy, Retry, process_next_work_item, run_controller, run_workers};
