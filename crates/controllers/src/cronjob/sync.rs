//! The CronJob sync pass: `sync`, `syncCronJob`, `cleanupFinishedJobs` and `deleteJob` (upstream `cronjob_controllerv2.go`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::controller::{ApiStatus, get_controller_of};
use kcm_machinery::events::EventType;
use kcm_machinery::informer::index::NAMESPACE_INDEX;
use kcm_machinery::informer::keys::split_meta_namespace_key;
use kube::Resource;

use super::controller::{CronJobController, OWN_WRITE_WAIT, requeue_delay};
use super::history::jobs_to_delete_for_history;
use super::utils::{
    MissedSchedules, delete_from_active_list, format_schedule, in_active_list,
    in_active_list_by_name, is_too_late, job_from_template, job_name, next_schedule_time,
    next_schedule_time_duration, unsupported_schedule_message,
};
use super::{Error, Result, TOO_MANY_MISSED_TIMES_MESSAGE};
use crate::jobutil::{JOB_COMPLETE, finished_condition, is_job_finished};
use kcm_machinery::cron::Schedule;
use kcm_machinery::cron::go_time::load_location;

/// What `syncCronJob` decided: when to sync again, whether the status changed, and the error
/// that ended it early.
pub(super) struct SyncOutcome {
    /// Sync again after this long (the next schedule); `None` waits for a change.
    pub requeue_after: Option<Duration>,
    /// The CronJob's status changed and must be written.
    pub update_status: bool,
    /// What ended the pass early.
    pub error: Option<Error>,
}

impl CronJobController {
    /// Syncs the CronJob with key `namespace/name`, as upstream's `sync`: deletes finished
    /// Jobs beyond the history limits, reconciles the active list, starts the Job of a due
    /// schedule, writes the status once, and requeues the key for its next schedule.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let (namespace, name) =
            split_meta_namespace_key(key).map_err(|source| Error::InvalidKey {
                key: key.to_owned(),
                source,
            })?;
        if let Some(writes) = &self.own_writes {
            writes.wait(key, OWN_WRITE_WAIT).await;
        }
        let Some(cron_job) = self.cron_job_cache.get_by_key(key) else {
            tracing::debug!(cronjob = key, "CronJob not found, may be it is deleted");
            return Ok(());
        };
        let jobs = self.jobs_to_be_reconciled(&cron_job, namespace.unwrap_or_default());
        // One copy collects every change, so the status is written once.
        let mut copy = (*cron_job).clone();
        let cleaned_up = self.cleanup_finished_jobs(&mut copy, &jobs).await;
        let outcome = self.sync_cron_job(&mut copy, &jobs).await;
        if let Some(err) = &outcome.error {
            tracing::debug!(cronjob = key, %err, "Error reconciling cronjob");
        }
        if cleaned_up || outcome.update_status {
            let written = self
                .cron_job_control
                .update_status(&copy)
                .await
                .map_err(|source| Error::UpdateStatus {
                    cron_job: key.to_owned(),
                    source,
                })?;
            if let Some(writes) = &self.own_writes {
                writes.record(key, written.metadata.resource_version.as_deref());
            }
        }
        if let Some(delay) = outcome.requeue_after {
            tracing::trace!(cronjob = key, name, ?delay, "Re-queuing cronjob");
            self.queue.add_after(key.to_owned(), delay);
            return Ok(());
        }
        // Suspended, or an invalid spec: nothing until the CronJob changes.
        outcome.error.map_or(Ok(()), Err)
    }

    /// The cached Jobs of the namespace whose controller reference names this CronJob (Jobs
    /// whose labels no longer match the template included), as upstream's
    /// `getJobsToBeReconciled`.
    fn jobs_to_be_reconciled(&self, cron_job: &CronJob, namespace: &str) -> Vec<Arc<Job>> {
        let name = cron_job.metadata.name.as_deref().unwrap_or_default();
        let jobs = match self.job_cache.by_index(NAMESPACE_INDEX, namespace) {
            Ok(jobs) => jobs,
            Err(_) => self
                .job_cache
                .list()
                .into_iter()
                .filter(|j| j.metadata.namespace.as_deref() == Some(namespace))
                .collect(),
        };
        jobs.into_iter()
            .filter(|j| get_controller_of(&j.metadata).is_some_and(|r| r.name == name))
            .collect()
    }

    /// Deletes the oldest finished Jobs beyond `successfulJobsHistoryLimit` and
    /// `failedJobsHistoryLimit`, as upstream's `cleanupFinishedJobs`. Returns whether the
    /// status changed.
    async fn cleanup_finished_jobs(&self, cron_job: &mut CronJob, jobs: &[Arc<Job>]) -> bool {
        let spec = Some(&cron_job.spec);
        if spec.is_none_or(|s| {
            s.successful_jobs_history_limit.is_none() && s.failed_jobs_history_limit.is_none()
        }) {
            return false;
        }
        let mut update_status = false;
        for job in jobs_to_delete_for_history(cron_job, jobs) {
            tracing::debug!(job = ?job.metadata.name, "Removing job from CronJob list");
            if self.delete_job(cron_job, &job).await {
                update_status = true;
            }
        }
        update_status
    }

    /// Deletes `job` (its pods follow in the background) and its active-list entry, with an
    /// event either way, as upstream's `deleteJob`. True when deleted.
    async fn delete_job(&self, cron_job: &mut CronJob, job: &Job) -> bool {
        let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
        let name = job.metadata.name.as_deref().unwrap_or_default();
        if let Err(err) = self.job_control.delete_job(namespace, name).await {
            self.event(
                cron_job,
                EventType::Warning,
                "FailedDelete",
                format!("Deleted job: {}", error_message(&err)),
            );
            tracing::error!(job = name, %err, "Error deleting job from cronjob");
            return false;
        }
        delete_from_active_list(cron_job, job.metadata.uid.as_deref().unwrap_or_default());
        self.event(
            cron_job,
            EventType::Normal,
            "SuccessfulDelete",
            format!("Deleted job {name}"),
        );
        true
    }

    /// Reconciles the active list with the CronJob's Jobs and starts the Job of a due
    /// schedule, as upstream's `syncCronJob`.
    pub(super) async fn sync_cron_job(
        &self,
        cron_job: &mut CronJob,
        jobs: &[Arc<Job>],
    ) -> SyncOutcome {
        let now = (self.clock)();
        let mut outcome = SyncOutcome {
            requeue_after: None,
            update_status: false,
            error: None,
        };
        let mut children: HashSet<String> = HashSet::new();
        for job in jobs {
            let uid = job.metadata.uid.clone().unwrap_or_default();
            children.insert(uid.clone());
            let found = in_active_list(cron_job, &uid);
            if !found && !is_job_finished(job) {
                let namespace = cron_job.metadata.namespace.clone().unwrap_or_default();
                let name = cron_job.metadata.name.clone().unwrap_or_default();
                let fresh = match self.cron_job_control.get_cron_job(&namespace, &name).await {
                    Ok(fresh) => fresh,
                    Err(source) => {
                        outcome.error = Some(Error::GetCronJob {
                            cron_job: format!("{namespace}/{name}"),
                            source,
                        });
                        return outcome;
                    }
                };
                if in_active_list(&fresh, &uid) {
                    *cron_job = fresh;
                    continue;
                }
                // Created just before a crash, a relist newer than the status, or a Job
                // someone wanted adopted.
                let job_name = job.metadata.name.as_deref().unwrap_or_default();
                self.event(
                    cron_job,
                    EventType::Warning,
                    "UnexpectedJob",
                    format!("Saw a job that the controller did not create or forgot: {job_name}"),
                );
            } else if is_job_finished(job) {
                let condition = finished_condition(job).unwrap_or_default();
                if found {
                    delete_from_active_list(cron_job, &uid);
                    let job_name = job.metadata.name.as_deref().unwrap_or_default();
                    self.event(
                        cron_job,
                        EventType::Normal,
                        "SawCompletedJob",
                        format!("Saw completed job: {job_name}, condition: {condition}"),
                    );
                    outcome.update_status = true;
                }
                if condition == JOB_COMPLETE {
                    // A successful Job needs not be active to record when it finished.
                    let finished = job.status.as_ref().and_then(|s| s.completion_time.clone());
                    let status = cron_job.status.get_or_insert_with(Default::default);
                    if let Some(finished) = finished
                        && status
                            .last_successful_time
                            .as_ref()
                            .is_none_or(|last| finished.0 > last.0)
                    {
                        status.last_successful_time = Some(finished);
                        outcome.update_status = true;
                    }
                }
            }
        }

        // An active entry whose Job is gone would keep the CronJob active forever; the API
        // server (not a possibly slow cache) says whether it is gone.
        let active = cron_job
            .status
            .as_ref()
            .and_then(|s| s.active.clone())
            .unwrap_or_default();
        for reference in active {
            let uid = reference.uid.clone().unwrap_or_default();
            if children.contains(&uid) {
                continue;
            }
            let namespace = reference.namespace.as_deref().unwrap_or_default();
            let name = reference.name.as_deref().unwrap_or_default();
            match self.job_control.get_job(namespace, name).await {
                Err(err) if err.is_not_found() => {
                    self.event(
                        cron_job,
                        EventType::Normal,
                        "MissingJob",
                        format!("Active job went missing: {name}"),
                    );
                    delete_from_active_list(cron_job, &uid);
                    outcome.update_status = true;
                }
                Err(source) => {
                    outcome.error = Some(Error::GetJob {
                        job: format!("{namespace}/{name}"),
                        source,
                    });
                    return outcome;
                }
                Ok(_) => {}
            }
        }

        if cron_job.metadata.deletion_timestamp.is_some() {
            // Being deleted: only the status.
            return outcome;
        }
        let spec = cron_job.spec.clone();
        if let Some(zone) = &spec.time_zone
            && let Err(err) = load_location(zone)
        {
            tracing::debug!(time_zone = zone, %err, "Not starting job because timeZone is invalid");
            self.event(
                cron_job,
                EventType::Warning,
                "UnknownTimeZone",
                format!("invalid timeZone: {zone:?}: {err}"),
            );
            return outcome;
        }
        if spec.suspend == Some(true) {
            tracing::trace!("Not starting job because the cron is suspended");
            return outcome;
        }
        let formatted = format_schedule(cron_job);
        if formatted.tz_in_schedule {
            self.event(
                cron_job,
                EventType::Warning,
                "UnsupportedSchedule",
                unsupported_schedule_message(&spec.schedule),
            );
        }
        let schedule = match Schedule::parse_standard(&formatted.schedule) {
            Ok(schedule) => schedule,
            Err(err) => {
                self.event(
                    cron_job,
                    EventType::Warning,
                    "UnparseableSchedule",
                    format!("unparseable schedule: {:?} : {err}", spec.schedule),
                );
                return outcome;
            }
        };
        let requeue = |cron_job: &CronJob| {
            next_schedule_time_duration(cron_job, now, &schedule, &self.local).map(requeue_delay)
        };
        let scheduled = match next_schedule_time(cron_job, now, &schedule, &self.local) {
            Err(err) => {
                self.event(
                    cron_job,
                    EventType::Warning,
                    "InvalidSchedule",
                    format!("invalid schedule: {} : {err}", spec.schedule),
                );
                return outcome;
            }
            Ok(None) => {
                // Only after a restart: otherwise the queue wakes the CronJob at a schedule.
                tracing::trace!("No unmet start times");
                outcome.requeue_after = requeue(cron_job);
                return outcome;
            }
            Ok(Some((scheduled, missed))) => {
                if missed == MissedSchedules::Many {
                    self.event(
                        cron_job,
                        EventType::Warning,
                        "TooManyMissedTimes",
                        TOO_MANY_MISSED_TIMES_MESSAGE.to_owned(),
                    );
                }
                scheduled
            }
        };

        if is_too_late(cron_job, scheduled, now) {
            self.event(
                cron_job,
                EventType::Warning,
                "MissSchedule",
                format!(
                    "Missed scheduled time to start a job: {}",
                    rfc1123z(scheduled)
                ),
            );
            outcome.requeue_after = requeue(cron_job);
            return outcome;
        }
        let namespace = cron_job.metadata.namespace.clone().unwrap_or_default();
        let last_schedule = cron_job
            .status
            .as_ref()
            .and_then(|s| s.last_schedule_time.as_ref())
            .map(|t| t.0);
        if in_active_list_by_name(cron_job, &namespace, &job_name(cron_job, scheduled))
            || last_schedule == Some(scheduled)
        {
            tracing::trace!(schedule = %scheduled, "Not starting job because the scheduled time is already processed");
            outcome.requeue_after = requeue(cron_job);
            return outcome;
        }
        let active_count = cron_job
            .status
            .as_ref()
            .and_then(|s| s.active.as_ref())
            .map_or(0, Vec::len);
        let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
        if policy == "Forbid" && active_count > 0 {
            // There is some risk of missing an active Job (a status or pod not seen yet); far
            // enough apart in time, it does not happen.
            self.event(
                cron_job,
                EventType::Normal,
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is \
                 Forbid"
                    .to_owned(),
            );
            outcome.requeue_after = requeue(cron_job);
            return outcome;
        }
        if policy == "Replace" {
            let active = cron_job
                .status
                .as_ref()
                .and_then(|s| s.active.clone())
                .unwrap_or_default();
            for reference in active {
                let job_namespace = reference.namespace.as_deref().unwrap_or_default();
                let job_name = reference.name.as_deref().unwrap_or_default();
                tracing::debug!(
                    job = job_name,
                    "Deleting job that was still running at next scheduled start time"
                );
                let job = match self.job_control.get_job(job_namespace, job_name).await {
                    Ok(job) => job,
                    Err(source) => {
                        self.event(
                            cron_job,
                            EventType::Warning,
                            "FailedGet",
                            format!("Get job: {}", error_message(&source)),
                        );
                        outcome.error = Some(Error::GetJob {
                            job: format!("{job_namespace}/{job_name}"),
                            source,
                        });
                        return outcome;
                    }
                };
                if !self.delete_job(cron_job, &job).await {
                    outcome.error = Some(Error::Replace {
                        job: format!("{job_namespace}/{job_name}"),
                    });
                    return outcome;
                }
                outcome.update_status = true;
            }
        }

        let request = match job_from_template(cron_job, scheduled) {
            Ok(request) => request,
            Err(err) => {
                tracing::error!(%err, "Unable to make Job from template");
                outcome.error = Some(err);
                return outcome;
            }
        };
        let request_name = request.metadata.name.clone().unwrap_or_default();
        let (created, already_existed) =
            match self.job_control.create_job(&namespace, &request).await {
                Ok(created) => (created, false),
                Err(source) if source.is_namespace_terminating() => {
                    // Every creation will fail: nothing to do.
                    outcome.error = Some(Error::CreateJob {
                        job: format!("{namespace}/{request_name}"),
                        source,
                    });
                    return outcome;
                }
                Err(err) if err.is_already_exists() => {
                    // Created earlier without the status recording it, or by someone else.
                    let job = match self.job_control.get_job(&namespace, &request_name).await {
                        Ok(job) => job,
                        Err(source) => {
                            outcome.error = Some(Error::GetJob {
                                job: format!("{namespace}/{request_name}"),
                                source,
                            });
                            return outcome;
                        }
                    };
                    let ours = get_controller_of(&job.metadata)
                        .is_some_and(|r| Some(r.uid.as_str()) == cron_job.metadata.uid.as_deref());
                    let uid = job.metadata.uid.clone().unwrap_or_default();
                    if !ours || in_active_list(cron_job, &uid) {
                        return outcome;
                    }
                    (job, true)
                }
                Err(source) => {
                    self.event(
                        cron_job,
                        EventType::Warning,
                        "FailedCreate",
                        format!("Error creating job: {}", error_message(&source)),
                    );
                    outcome.error = Some(Error::CreateJob {
                        job: format!("{namespace}/{request_name}"),
                        source,
                    });
                    return outcome;
                }
            };
        if already_existed {
            tracing::info!(job = request_name, "Job already exists");
        } else {
            if let (Some(metrics), Some(created_at)) =
                (&self.metrics, created.metadata.creation_timestamp.as_ref())
            {
                metrics.observe_creation_skew(created_at.0.duration_since(scheduled));
            }
            self.event(
                cron_job,
                EventType::Normal,
                "SuccessfulCreate",
                format!(
                    "Created job {}",
                    created.metadata.name.as_deref().unwrap_or_default()
                ),
            );
        }

        // Were the process to stop here, the next sync would find the Job by its name (the
        // schedule's minute) rather than run the schedule twice.
        let status = cron_job.status.get_or_insert_with(Default::default);
        status
            .active
            .get_or_insert_with(Vec::new)
            .push(created.object_ref(&()));
        status.last_schedule_time = Some(Time(scheduled));
        outcome.update_status = true;
        outcome.requeue_after = requeue(cron_job);
        outcome
    }

    /// Records an event about the CronJob.
    fn event(&self, cron_job: &CronJob, type_: EventType, reason: &str, message: String) {
        self.recorder
            .event(&cron_job.object_ref(&()), type_, reason, message);
    }
}

/// Go's `time.RFC1123Z` of `t` in UTC (`Mon, 02 Jan 2006 15:04:05 -0700`).
fn rfc1123z(t: Timestamp) -> String {
    t.to_zoned(TimeZone::UTC)
        .strftime("%a, %d %b %Y %H:%M:%S %z")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1123z_as_go() {
        let t: Timestamp = "2016-05-19T10:00:00Z".parse().expect("timestamp");
        assert_eq!(rfc1123z(t), "Thu, 19 May 2016 10:00:00 +0000");
    }
}
