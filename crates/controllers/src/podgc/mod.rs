//! The pod garbage collector: force-deletes terminated pods beyond `--terminated-pod-gc-threshold` (oldest first), pods bound to nodes that no longer exist, terminating pods on out-of-service nodes, and terminating pods never scheduled, as kube-controller-manager's `pkg/controller/podgc`.
//!
//! Where to start: [`PodGcController`] (upstream `gc_controller.go`). Every
//! [`GC_CHECK_PERIOD`] (20 s) [`PodGcController::gc`] runs the four passes over the pod and node
//! caches. A pod whose node is missing from the cache is quarantined first: its node name
//! waits [`QUARANTINE_TIME`] (40 s) in a delaying queue, then a GET to the API server decides
//! whether the node is really gone. Pods not yet terminal are patched to `Failed` first (with
//! `DisruptionTarget` for orphans, reason `DeletionByPodGC`), as upstream does, so that a Job
//! counts them; then they are deleted with grace period 0.
//!
//! - `controller`: constants, the controller, construction and `Run`.
//! - `gc`: the passes (`gcTerminated`, `gcTerminating`, `gcOrphaned`,
//!   `gcUnscheduledTerminating`) and `markFailedAndDeletePod`.
//! - [`client`]: the node GET, the pod status patch and the force delete, with a recording
//!   fake.
//! - [`metrics`]: `pod_gc_collector_force_delete_pods_total` and
//!   `pod_gc_collector_force_delete_pod_errors_total`.

pub mod client;
mod controller;
mod gc;
pub mod metrics;

pub use client::{ApiPodGcClient, FakePodGcClient, PodGcClient};
pub use controller::{
    CONTROLLER_NAME, Clock, DEFAULT_TERMINATED_POD_GC_THRESHOLD, GC_CHECK_PERIOD,
    ORPHANED_NODES_QUEUE_NAME, PodGcController, PodGcControllerOptions, QUARANTINE_TIME,
};
pub use gc::{is_pod_terminated, is_pod_terminating};
pub use metrics::PodGcMetrics;

/// `podgc` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "podgc";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a pod could not be collected; the pass logs it and the next pass tries again.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Patching the pod's status to `Failed` failed.
    #[error("marking pod {pod} failed: {message}", message = kcm_machinery::controller::api_status::error_message(.source))]
    MarkFailed {
        /// The pod, `namespace/name`.
        pod: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Deleting the pod failed.
    #[error("deleting pod {pod}: {message}", message = kcm_machinery::controller::api_status::error_message(.source))]
    Delete {
        /// The pod, `namespace/name`.
        pod: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
