//! The TTL-after-finished controller: deletes finished Jobs (and, through the garbage collector, their pods) once `spec.ttlSecondsAfterFinished` has passed, as kube-controller-manager's `pkg/controller/ttlafterfinished`.
//!
//! Where to start: [`TtlAfterFinishedController`] (upstream `ttlafterfinished_controller.go`).
//! Job events enqueue finished Jobs with a TTL; [`TtlAfterFinishedController::sync`] (upstream
//! `processJob`) requeues a Job for the moment its TTL expires (the delaying queue, no
//! polling), and once it has, re-reads the Job from the API server — the TTL may have been
//! changed, or the Job replaced — and deletes it with foreground propagation and a UID
//! precondition, as upstream does.
//!
//! - `controller`: constants, the controller, construction, `Run`, the event handlers and the
//!   worker wiring.
//! - `sync`: `processJob`, `processTTL`, `timeLeft`.
//! - `expiry`: `needsCleanup` and the finish and expiry times of a Job.
//! - [`client`]: the uncached GET and the DELETE, with a recording fake.
//! - [`metrics`]: the `ttl_after_finished_controller_job_deletion_duration_seconds` histogram.

pub mod client;
mod controller;
mod expiry;
pub mod metrics;
mod sync;

pub use client::{ApiTtlJobClient, FakeTtlJobClient, TtlJobClient};
pub use controller::{
    CONTROLLER_NAME, Clock, DEFAULT_CONCURRENT_TTL_AFTER_FINISHED_SYNCS, QUEUE_NAME, SyncHandler,
    TtlAfterFinishedController, TtlAfterFinishedControllerOptions, TtlEventHandlers,
};
pub use expiry::{finish_and_expire_time, needs_cleanup};
pub use metrics::TtlAfterFinishedMetrics;

use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::informer::keys;

/// `ttl-after-finished` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "ttl-after-finished";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why cleaning up a Job failed; the worker requeues the key rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid Job key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// The Job is finished with a TTL but has no time it finished at.
    #[error("unable to find the time when the Job {job} finished")]
    NoFinishTime {
        /// The Job, `namespace/name`.
        job: String,
    },
    /// Re-reading the Job from the API server failed.
    #[error("getting Job {job}: {message}", message = error_message(.source))]
    Get {
        /// The Job, `namespace/name`.
        job: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Deleting the Job failed.
    #[error("deleting Job {job}: {message}", message = error_message(.source))]
    Delete {
        /// The Job, `namespace/name`.
        job: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
