//! Whether a Job needs clean-up, and when it finished and when its TTL expires, as upstream's `needsCleanup`, `getFinishAndExpireTime` and `jobFinishTime`.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;

use super::{Error, Result};
use crate::jobutil::{CONDITION_TRUE, JOB_COMPLETE, JOB_FAILED, is_job_finished, job_conditions};

/// Whether the Job finished and has `spec.ttlSecondsAfterFinished`, as upstream's
/// `needsCleanup`.
pub fn needs_cleanup(job: &Job) -> bool {
    job.spec
        .as_ref()
        .and_then(|s| s.ttl_seconds_after_finished)
        .is_some()
        && is_job_finished(job)
}

/// When the Job finished (its `Complete`/`Failed` condition's transition) and when its TTL
/// expires, as upstream's `getFinishAndExpireTime`; `None` for a Job that needs no clean-up.
pub fn finish_and_expire_time(job: &Job) -> Option<Result<(Timestamp, Timestamp)>> {
    if !needs_cleanup(job) {
        return None;
    }
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let finished = job_conditions(job)
        .iter()
        .find(|c| (c.type_ == JOB_COMPLETE || c.type_ == JOB_FAILED) && c.status == CONDITION_TRUE)
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    let Some(finished) = finished else {
        return Some(Err(Error::NoFinishTime {
            job: crate::jobutil::job_key(job),
        }));
    };
    let expire = finished
        .checked_add(SignedDuration::from_secs(i64::from(ttl)))
        .unwrap_or(Timestamp::MAX);
    Some(Ok((finished, expire)))
}
