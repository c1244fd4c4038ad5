//! The Job controller's decision layer: pure functions and small stores that decide what a Job sync does, as kube-controller-manager's `pkg/controller/job`.
//!
//! Where to start: a sync of one Job (upstream's `syncJob`) reads the Job and its pods from
//! the caches, then asks these modules what to do. Nothing here talks to the API server or
//! reads the wall clock: times are passed in, so every decision is testable with fixed
//! timestamps. The controller that wires them to informers and a work queue comes later.
//!
//! - [`intervals`]: `status.completedIndexes`/`failedIndexes` as ordered intervals, parsed
//!   from and formatted to the compressed `"1,3-5"` form.
//! - [`indexed`]: Indexed Jobs: a pod's completion index, succeeded and failed indexes, the
//!   first pending indexes to create, duplicated indexes to remove, per-index failure counts,
//!   pod names and hostnames.
//! - [`tracking`]: the `batch.kubernetes.io/job-tracking` finalizer, the
//!   `status.uncountedTerminatedPods` bookkeeping and the finalizer-removal expectations.
//! - [`finished_pods`]: which finished pods are new since the last sync and which finalizers
//!   may be removed.
//! - [`backoff`]: the pod-failure back-off record (10 s doubling, capped) and pod finish times.
//! - [`pod_failure_policy`]: `spec.podFailurePolicy` rules matched against a failed pod.
//! - [`success_policy`]: `spec.successPolicy` rules matched against the succeeded indexes.
//! - [`conditions`]: condition types, reasons and messages; creating and updating conditions;
//!   whether a Job is finished.
//! - [`status`]: pod predicates and counters (failed, ready, terminating), the backoff-limit
//!   and active-deadline checks, external management.
//! - [`manage`]: the parallelism/completions arithmetic of `manageJob` as a plan of pods to
//!   delete or create.
//! - [`track_status`]: recording finished pods in `status.uncountedTerminatedPods`, picking
//!   the finalizers to remove, and setting the terminal condition (`enactJobFinished`).
//!
//! Feature gates are those of Kubernetes 1.33 with their defaults: `JobBackoffLimitPerIndex`,
//! `JobSuccessPolicy` and `JobPodReplacementPolicy` on, `JobManagedBy` on (beta),
//! `PodIndexLabel` on, `SidecarContainers` on. Where upstream branches on a gate, only the
//! enabled branch is kept.

pub mod backoff;
pub mod conditions;
pub mod finished_pods;
pub mod indexed;
pub mod intervals;
pub mod manage;
pub mod pod_failure_policy;
pub mod status;
pub mod success_policy;
pub mod track_status;
pub mod tracking;

use k8s_openapi::api::batch::v1::Job;

pub use backoff::{BackoffRecord, BackoffStore};
pub use conditions::{finished_condition, is_job_finished, is_job_succeeded};
pub use intervals::{Interval, OrderedIntervals};
pub use manage::{ManagePlan, plan_manage_job};
pub use pod_failure_policy::{PodFailurePolicyAction, PodFailurePolicyMatch};
pub use tracking::{JOB_TRACKING_FINALIZER, UidTrackingExpectations, UncountedTerminatedPods};

/// The name the Job controller goes by in `spec.managedBy`, as batch/v1 `JobControllerName`.
pub const JOB_CONTROLLER_NAME: &str = "kubernetes.io/job-controller";

/// The component name on the controller's events.
pub const CONTROLLER_COMPONENT: &str = "job-controller";

/// `spec.backoffLimit` when the API server did not default it (its default).
pub const DEFAULT_BACKOFF_LIMIT: i32 = 6;

/// `spec.completions` of the Job; `None` means "any single success completes the Job".
pub(crate) fn completions(job: &Job) -> Option<i32> {
    job.spec.as_ref().and_then(|s| s.completions)
}

/// `spec.completions` for code paths where upstream dereferences it unconditionally (Indexed
/// Jobs, whose completions the API server requires); 0 when a malformed Job lacks it, so such
/// a Job has no valid index rather than crashing the controller.
pub(crate) fn completions_or_zero(job: &Job) -> i32 {
    completions(job).unwrap_or(0)
}

/// `spec.parallelism`, 1 when unset (the API server's default).
pub(crate) fn parallelism(job: &Job) -> i32 {
    job.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1)
}

/// `spec.backoffLimit`, [`DEFAULT_BACKOFF_LIMIT`] when unset (the API server's default).
pub(crate) fn backoff_limit(job: &Job) -> i32 {
    job.spec
        .as_ref()
        .and_then(|s| s.backoff_limit)
        .unwrap_or(DEFAULT_BACKOFF_LIMIT)
}

/// `namespace/name` of a Job, for log lines.
pub(crate) fn job_key(job: &Job) -> String {
    format!(
        "{}/{}",
        job.metadata.namespace.as_deref().unwrap_or_default(),
        job.metadata.name.as_deref().unwrap_or_default()
    )
}
