//! The CronJob controller's decision layer: the cron schedule and the pure functions that decide when to start a Job and which finished Jobs to delete, as kube-controller-manager's `pkg/controller/cronjob` (v2).
//!
//! Where to start: a sync of one CronJob (upstream's `syncCronJob`) formats and parses the
//! schedule ([`utils::format_schedule`], [`schedule::Schedule::parse_standard`]), asks
//! [`utils::next_schedule_time`] whether a run is due, checks [`utils::is_too_late`] and the
//! active list, builds the Job with [`utils::job_from_template`], and requeues after
//! [`utils::next_schedule_time_duration`]. Finished Jobs beyond the history limits come from
//! [`history::jobs_to_delete_for_history`]. Nothing here talks to the API server or reads
//! the clock; the controller that wires it comes later.
//!
//! - [`schedule`]: robfig/cron's standard parser and `Next`, DST included.
//! - [`go_time`]: Go's `time.Date`, `LoadLocation`, `ParseDuration`, RFC 3339 on jiff.
//! - [`utils`]: missed schedules, next schedule, requeue delay, job names, active list.
//! - [`history`]: `successfulJobsHistoryLimit`/`failedJobsHistoryLimit` clean-up.
//! - [`validation`]: the API server's `schedule` and `timeZone` checks.
//!
//! Time zones: a schedule without `TZ=` (and a CronJob without `spec.timeZone`) runs in the
//! controller's local zone, which callers pass in (`jiff::tz::TimeZone::system()` in
//! production, a fixed zone in tests). Zone data comes from the host's tz database;
//! kube-controller-manager additionally embeds Go's copy as a fallback.

pub mod go_time;
pub mod history;
pub mod schedule;
pub mod utils;
pub mod validation;

pub use history::jobs_to_delete_for_history;
pub use schedule::{ParseError, Schedule};
pub use utils::{MissedSchedules, MostRecentSchedule};

pub(crate) use crate::job::backoff::GO_ZERO_TIME;

/// The annotation on a CronJob's Job holding its scheduled time (RFC 3339, in the CronJob's
/// time zone), as batch/v1 `CronJobScheduledTimestampAnnotation`.
pub const CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION: &str =
    "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The message of the `TooManyMissedTimes` warning.
pub const TOO_MANY_MISSED_TIMES_MESSAGE: &str = "too many missed start times. Set or decrease \
     .spec.startingDeadlineSeconds or check clock skew";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a CronJob decision could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
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
    /// The CronJob has no spec.
    #[error("cronjob {name} has no spec")]
    MissingSpec {
        /// `namespace/name`.
        name: String,
    },
}
