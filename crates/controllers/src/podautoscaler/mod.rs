//! The HorizontalPodAutoscaler controller: scales a target's `scale` subresource to the replica count its pods' resource metrics call for, as kube-controller-manager's `pkg/controller/podautoscaler`.
//!
//! Where to start: [`HorizontalController`] (upstream `horizontal.go` up to
//! `processNextWorkItem`). Every HPA is reconciled once per `--horizontal-pod-autoscaler-sync-period`
//! (the key is re-added with that delay after each pass, as upstream's fixed-interval rate
//! limiter does). A pass (`sync`, upstream `reconcileAutoscaler`) reads the target's scale,
//! computes a replica count per metric from the metrics API and the pods' requests
//! ([`replica_calculator`]), takes the largest, normalizes it (stabilization windows, scaling
//! policies, min/max: [`normalize`]), writes the scale, records `SuccessfulRescale`, and
//! writes the status with the `AbleToScale`, `ScalingActive` and `ScalingLimited` conditions.
//!
//! - `controller`: constants, the controller, construction, `Run`, the event handlers.
//! - `sync`: `reconcileAutoscaler`, `computeReplicasForMetrics`, the status.
//! - [`replica_calculator`] mirrors `replica_calculator.go`.
//! - [`normalize`] mirrors `normalizeDesiredReplicas*`, `stabilizeRecommendation*`, the scale limits.
//! - [`metrics_client`] mirrors `metrics/client.go` (resource metrics only).
//! - [`client`] holds the scale subresource and the status write, with a recording fake.
//! - `quantity`: `Quantity.MilliValue`.
//!
//! Only Resource and ContainerResource metrics are computed: kcm serves no custom or
//! external metrics API, so a Pods, Object or External metric sets `ScalingActive=False`
//! saying so (and counts as invalid, as upstream treats a metric it cannot read).

pub mod client;
mod controller;
pub mod metrics_client;
pub mod normalize;
mod quantity;
pub mod replica_calculator;
mod sync;

pub use client::{ApiHpaClient, ClientError, FakeHpaClient, HpaClient};
pub use controller::{
    CONTROLLER_NAME, Clock, DEFAULT_CONCURRENT_HORIZONTAL_POD_AUTOSCALER_SYNCS,
    DEFAULT_DOWNSCALE_STABILIZATION, DEFAULT_SYNC_PERIOD, HorizontalController,
    HorizontalControllerOptions, HpaEventHandlers, QUEUE_NAME,
};
pub use metrics_client::{ApiMetricsClient, FakeMetricsClient, MetricsClient, MetricsError};
pub use replica_calculator::ReplicaCalculator;

use kcm_machinery::informer::keys;

/// `horizontalpodautoscaling` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "horizontalpodautoscaling";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a pass over an HPA failed; logged, and the HPA is retried next period.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid HPA key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// The target's scale could not be read.
    #[error("failed to query scale subresource for {reference}: {source}")]
    GetScale {
        /// `Kind/namespace/name` of the target.
        reference: String,
        /// Why.
        #[source]
        source: ClientError,
    },
    /// No metric gave a replica count.
    #[error(
        "failed to compute desired number of replicas based on listed metrics for {reference}: {message}"
    )]
    ComputeReplicas {
        /// `Kind/namespace/name` of the target.
        reference: String,
        /// The first metric's error.
        message: String,
    },
    /// Writing the scale failed.
    #[error("failed to rescale {reference}: {source}")]
    Rescale {
        /// `Kind/namespace/name` of the target.
        reference: String,
        /// Why.
        #[source]
        source: ClientError,
    },
    /// Writing the HPA's status failed.
    #[error("failed to update status for {hpa}: {source}")]
    UpdateStatus {
        /// The HPA, `namespace/name`.
        hpa: String,
        /// Why.
        #[source]
        source: ClientError,
    },
}
