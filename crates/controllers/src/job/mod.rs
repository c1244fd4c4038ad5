//! The Job controller: runs the pods of every Job to completion, counting each finished pod exactly once, as kube-controller-manager's `pkg/controller/job`.
//!
//! Where to start: [`JobController`] (upstream `job_controller.go`). [`JobController::new`]
//! wires it to a `SharedInformerFactory`; [`JobController::run`] runs its workers
//! (`--concurrent-job-syncs`, default 5) and one orphan-pod worker. Each Job key taken from the
//! work queue (named [`QUEUE_NAME`] in the `workqueue_*` metrics) is synced by
//! [`JobController::sync`] (upstream `syncJob`): claim the Job's pods, decide from the pure
//! modules below whether it failed or succeeded, create or delete pods toward its parallelism
//! and completions (gated by expectations, delayed by the pod-failure back-off), and track
//! finished pods through the `batch.kubernetes.io/job-tracking` finalizer and
//! `status.uncountedTerminatedPods`, so that no finished pod is counted twice or lost.
//!
//! The files follow upstream's `pkg/controller/job`:
//!
//! - `controller`: constants, [`JobController`] with its test seams, construction, `Run`, the
//!   event handlers ([`JobEventHandlers`]) and the worker wiring (`job_controller.go` up to
//!   `processNextWorkItem`, and `processNextOrphanPod`).
//! - `sync`: `syncJob`, `getPodsForJob`, `syncOrphanPod`.
//! - `pod_actions`: `manageJob`'s pod creations and deletions, `deleteJobPods`,
//!   `deleteActivePods`, `removeTrackingFinalizerFromPods`.
//! - `flush`: `trackJobStatusAndRemoveFinalizers`, `flushUncountedAndRemoveFinalizers`,
//!   `recordJobFinished` (the status writes and the terminal events).
//! - `job_ctx`: `syncJobCtx`, the state one sync passes between those steps.
//! - [`client`]: the seam for the direct Job API calls (uncached GET, `/status` update).
//! - [`metrics`]: the `job_controller_*` metrics (`metrics/metrics.go`).
//!
//! The decision layer, pure functions over the Job and its pods (times passed in):
//!
//! - [`intervals`]: `status.completedIndexes`/`failedIndexes` as ordered intervals, parsed
//!   from and formatted to the compressed `"1,3-5"` form.
//! - [`indexed`]: Indexed Jobs: a pod's completion index, succeeded and failed indexes, the
//!   first pending indexes to create, duplicated indexes to remove, per-index failure counts,
//!   pod names and hostnames (`indexed_job_utils.go`).
//! - [`tracking`]: the `batch.kubernetes.io/job-tracking` finalizer, the
//!   `status.uncountedTerminatedPods` bookkeeping and the finalizer-removal expectations
//!   (`tracking_utils.go`).
//! - [`finished_pods`]: which finished pods are new since the last sync and which finalizers
//!   may be removed.
//! - [`backoff`]: the pod-failure back-off record (10 s doubling, capped at upstream's
//!   `MaxJobPodFailureBackOff`, 10 minutes) and pod finish times (`backoff_utils.go`).
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
//! Feature gates are those of Kubernetes 1.36, all on and locked: `JobBackoffLimitPerIndex`
//! and `JobSuccessPolicy` (GA in 1.33, removed in 1.36), `JobPodReplacementPolicy` (GA in
//! 1.34), `JobManagedBy` (GA in 1.35), `PodIndexLabel` and `SidecarContainers`. Where
//! upstream branches on a gate, only the enabled branch is kept.

pub mod backoff;
pub mod client;
pub mod conditions;
mod controller;
pub mod finished_pods;
mod flush;
pub mod indexed;
pub mod intervals;
mod job_ctx;
pub mod manage;
pub mod metrics;
mod pod_actions;
pub mod pod_failure_policy;
pub mod status;
pub mod success_policy;
mod sync;
pub mod track_status;
pub mod tracking;

use k8s_openapi::api::batch::v1::Job;
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::controller::{ApiStatus, pod_control, ref_manager};
use kcm_machinery::informer::keys;
use kube::core::Status;

pub use backoff::{BackoffRecord, BackoffStore};
pub use client::{ApiJobClient, FakeJobClient, JobAction, JobClient};
pub use conditions::{finished_condition, is_job_finished, is_job_succeeded};
pub use controller::{
    CONTROLLER_NAME, Clock, DEFAULT_CONCURRENT_JOB_SYNCS, DEFAULT_JOB_API_BACKOFF, JobController,
    JobControllerOptions, JobEventHandlers, MAX_JOB_API_BACKOFF, ORPHAN_QUEUE_NAME, OWN_WRITE_WAIT,
    QUEUE_NAME, SyncHandler,
};
pub use intervals::{Interval, OrderedIntervals};
pub use manage::{ManagePlan, plan_manage_job};
pub use metrics::JobMetrics;
pub use pod_failure_policy::{PodFailurePolicyAction, PodFailurePolicyMatch};
pub use tracking::{JOB_TRACKING_FINALIZER, UidTrackingExpectations, UncountedTerminatedPods};

/// The name the Job controller goes by in `spec.managedBy`, as batch/v1 `JobControllerName`.
pub const JOB_CONTROLLER_NAME: &str = "kubernetes.io/job-controller";

/// The component name on the controller's events.
pub const CONTROLLER_COMPONENT: &str = CONTROLLER_NAME;

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

pub(crate) use crate::jobutil::job_key;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why syncing a Job (or cleaning an orphan pod) failed. The worker requeues the key with the
/// queue's back-off (1 s doubling to a minute) for every one of them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid job key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// The key lacks a namespace or a name.
    #[error("invalid job key {key:?}: either namespace or name is missing")]
    IncompleteKey {
        /// The offending key.
        key: String,
    },
    /// `spec.selector` does not convert to a selector.
    #[error("couldn't convert Job {job} selector: {source}")]
    Selector {
        /// The Job, `namespace/name`.
        job: String,
        /// The conversion error.
        #[source]
        source: kcm_machinery::labels::Error,
    },
    /// Claiming the Job's pods (adopting or releasing) failed for some pods.
    #[error("claiming pods for job {job}: {source}")]
    ClaimPods {
        /// The Job, `namespace/name`.
        job: String,
        /// The ref manager's (possibly aggregated) error.
        #[source]
        source: ref_manager::Error,
    },
    /// A pod creation failed; the slow start stopped after that batch.
    #[error("creating pods for job {job}: {source}")]
    CreatePods {
        /// The Job, `namespace/name`.
        job: String,
        /// The first failure of the failing batch.
        #[source]
        source: pod_control::Error,
    },
    /// A pod deletion (or the finalizer removal before it) failed, other than NotFound.
    #[error("deleting pods of job {job}: {source}")]
    DeletePods {
        /// The Job, `namespace/name`.
        job: String,
        /// The first failure.
        #[source]
        source: pod_control::Error,
    },
    /// Removing a tracking finalizer failed, other than NotFound.
    #[error("removing tracking finalizer ({job}): {source}")]
    RemoveFinalizers {
        /// The Job (or, for an orphan, the pod), `namespace/name`.
        job: String,
        /// The first failure.
        #[source]
        source: pod_control::Error,
    },
    /// Writing `/status` failed.
    #[error("tracking status of job {job}: {step}: {message}", message = error_message(.source))]
    UpdateStatus {
        /// The Job, `namespace/name`.
        job: String,
        /// Which write (upstream's wording).
        step: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::ClaimPods { source, .. } => source.api_status(),
            Error::CreatePods { source, .. }
            | Error::DeletePods { source, .. }
            | Error::RemoveFinalizers { source, .. } => source.api_status(),
            Error::UpdateStatus { source, .. } => source.api_status(),
            Error::InvalidKey { .. } | Error::IncompleteKey { .. } | Error::Selector { .. } => None,
        }
    }
}
