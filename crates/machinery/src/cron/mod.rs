//! Cron schedules and the parts of Go's `time` package their results depend on: what both the CronJob controller (next activation) and the API server (`spec.schedule` validation) parse with, so the two never disagree.
//!
//! - [`schedule`]: robfig/cron v3's standard parser (`ParseStandard`) and `Next`, DST
//!   included, with its error messages.
//! - [`go_time`]: Go's `time.Date`, `LoadLocation`, `ParseDuration`, RFC 3339 and zero time
//!   on jiff.

pub mod go_time;
pub mod schedule;

pub use schedule::{ParseError, Schedule};
