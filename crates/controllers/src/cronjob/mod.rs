//! The CronJob controller: starts the Jobs of every CronJob on its schedule and keeps its history, as kube-controller-manager's `pkg/controller/cronjob` (v2).
//!
//! Where to start: [`CronJobController`] (upstream `cronjob_controllerv2.go`).
//! [`CronJobController::new`] wires it to a `SharedInformerFactory`; [`CronJobController::run`]
//! runs its workers (`--concurrent-cron-job-syncs`, default 5). Each CronJob key taken from the
//! work queue (named [`QUEUE_NAME`]) is synced by [`CronJobController::sync`]: finished Jobs
//! beyond the history limits are deleted, the active list is reconciled with the Jobs, the
//! Job of a due schedule is created (honouring `startingDeadlineSeconds`, `suspend`,
//! `concurrencyPolicy` and `timeZone`), the status is written once, and the key is requeued
//! for the next schedule through the delaying queue rather than polled.
//!
//! The files follow upstream's `pkg/controller/cronjob`:
//!
//! - `controller`: constants, [`CronJobController`], construction, `Run`, the event handlers
//!   ([`CronJobEventHandlers`]) and the worker wiring (`cronjob_controllerv2.go` up to
//!   `processNextWorkItem`).
//! - `sync`: `sync`, `syncCronJob`, `cleanupFinishedJobs`, `deleteJob`.
//! - [`client`]: the CronJob and Job calls and their fakes (`injection.go`).
//! - [`metrics`]: the `cronjob_controller_job_creation_skew_duration_seconds` histogram.
//!
//! The decision layer, pure functions (times passed in): [`Schedule::parse_standard`]
//! and [`utils::format_schedule`] parse the schedule, [`utils::next_schedule_time`] says whether
//! a run is due, [`utils::is_too_late`] checks the starting deadline,
//! [`utils::job_from_template`] builds the Job (named `NAME-<minutes since the epoch>`),
//! [`utils::next_schedule_time_duration`] gives the requeue delay, and
//! [`history::jobs_to_delete_for_history`] the finished Jobs beyond the history limits.
//!
//! - `kcm_machinery::cron`: robfig/cron's standard parser and `Next` (DST included), and
//!   Go's `time.Date`, `LoadLocation`, `ParseDuration` and RFC 3339 on jiff, shared with the
//!   API server's schedule validation.
//! - [`utils`]: missed schedules, next schedule, requeue delay, job names, active list.
//! - [`history`]: `successfulJobsHistoryLimit`/`failedJobsHistoryLimit` clean-up.
//! - [`validation`]: the API server's `schedule` and `timeZone` checks.
//!
//! Time zones: a schedule without `TZ=` (and a CronJob without `spec.timeZone`) runs in the
//! controller's local zone ([`CronJobControllerOptions::local`], `jiff::tz::TimeZone::system()`
//! in production, a fixed zone in tests). Zone data comes from the host's tz database;
//! kube-controller-manager additionally embeds Go's copy as a fallback.

pub mod client;
mod controller;
pub mod history;
pub mod metrics;
mod sync;
pub mod utils;
pub mod validation;

pub use client::{
    ApiCronJobControl, CronJobControl, FakeCronJobControl, FakeJobControl, JobControl,
};
pub use controller::{
    CONTROLLER_NAME, Clock, CronJobController, CronJobControllerOptions, CronJobEventHandlers,
    DEFAULT_CONCURRENT_CRON_JOB_SYNCS, OWN_WRITE_WAIT, QUEUE_NAME, SyncHandler,
};
pub use history::jobs_to_delete_for_history;
pub use kcm_machinery::cron::{ParseError, Schedule, go_time};
pub use metrics::CronJobMetrics;
pub use utils::{MissedSchedules, MostRecentSchedule};

use kcm_machinery::controller::api_status::error_message;
pub(crate) use kcm_machinery::cron::go_time::GO_ZERO_TIME;

/// The annotation on a CronJob's Job holding its scheduled time (RFC 3339, in the CronJob's
/// time zone), as batch/v1 `CronJobScheduledTimestampAnnotation`.
pub const CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION: &str =
    "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The message of the `TooManyMissedTimes` warning.
pub const TOO_MANY_MISSED_TIMES_MESSAGE: &str = "too many missed start times. Set or decrease \
     .spec.startingDeadlineSeconds or check clock skew";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a CronJob decision or sync failed. The worker requeues the key rate-limited for each.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid CronJob key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: kcm_machinery::informer::keys::Error,
    },
    /// Re-reading the CronJob from the API server failed.
    #[error("getting CronJob {cron_job}: {message}", message = error_message(.source))]
    GetCronJob {
        /// The CronJob, `namespace/name`.
        cron_job: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Reading a Job from the API server failed.
    #[error("getting Job {job}: {message}", message = error_message(.source))]
    GetJob {
        /// The Job, `namespace/name`.
        job: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Creating the scheduled Job failed.
    #[error("creating Job {job}: {message}", message = error_message(.source))]
    CreateJob {
        /// The Job, `namespace/name`.
        job: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// `concurrencyPolicy: Replace` could not delete the running Job.
    #[error("could not replace job {job}")]
    Replace {
        /// The Job, `namespace/name`.
        job: String,
    },
    /// Writing `/status` failed.
    #[error("updating status of CronJob {cron_job}: {message}", message = error_message(.source))]
    UpdateStatus {
        /// The CronJob, `namespace/name`.
        cron_job: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The schedule fires never or more than once a second (e.g. `59 23 31 2 *`); upstream
    /// reports it as an `InvalidSchedule` event.
    #[error("time difference between two schedules is less than 1 second")]
    ScheduleTooFrequent,
    /// `spec.timeZone` does not load.
    #[error("time zone {name:?}: {source}")]
    TimeZone {
        /// The zone name.
        name: String,
        /// Why it did not load.
        #[source]
        source: go_time::LocationError,
    },
}
