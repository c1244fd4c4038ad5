//! CronJobs: [`cron_job`] and the [`CronJobBuilder`] spec and status setters.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, CronJobStatus, Job, JobTemplateSpec};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::meta::MetaBuilder;

/// Builds a [`CronJob`]. Start with [`cron_job`]. Spec setters create the spec (schedule
/// empty) on first use; status setters create the status.
#[derive(Clone, Debug, Default)]
pub struct CronJobBuilder {
    cron_job: CronJob,
}

/// A CronJob named `name`; no namespace, spec or status.
pub fn cron_job(name: &str) -> CronJobBuilder {
    CronJobBuilder::default().name(name)
}

impl CronJobBuilder {
    /// Sets `spec.schedule`.
    pub fn schedule(mut self, schedule: &str) -> Self {
        schedule.clone_into(&mut self.spec_mut().schedule);
        self
    }

    /// Sets `spec.timeZone`.
    pub fn time_zone(mut self, zone: &str) -> Self {
        self.spec_mut().time_zone = Some(zone.to_owned());
        self
    }

    /// Sets `spec.startingDeadlineSeconds`.
    pub fn starting_deadline_seconds(mut self, seconds: i64) -> Self {
        self.spec_mut().starting_deadline_seconds = Some(seconds);
        self
    }

    /// Sets `spec.concurrencyPolicy` (`"Allow"`, `"Forbid"`, `"Replace"`).
    pub fn concurrency_policy(mut self, policy: &str) -> Self {
        self.spec_mut().concurrency_policy = Some(policy.to_owned());
        self
    }

    /// Sets `spec.suspend`.
    pub fn suspend(mut self, suspend: bool) -> Self {
        self.spec_mut().suspend = Some(suspend);
        self
    }

    /// Sets `spec.successfulJobsHistoryLimit`.
    pub fn successful_jobs_history_limit(mut self, limit: i32) -> Self {
        self.spec_mut().successful_jobs_history_limit = Some(limit);
        self
    }

    /// Sets `spec.failedJobsHistoryLimit`.
    pub fn failed_jobs_history_limit(mut self, limit: i32) -> Self {
        self.spec_mut().failed_jobs_history_limit = Some(limit);
        self
    }

    /// Sets `spec.jobTemplate` from a Job's labels, annotations and spec, e.g. one built with
    /// [`crate::job`] (its name and the rest of its metadata are dropped).
    pub fn job_template(mut self, job: impl Into<Job>) -> Self {
        let job = job.into();
        let (labels, annotations) = (job.metadata.labels, job.metadata.annotations);
        let metadata = (labels.is_some() || annotations.is_some()).then(|| ObjectMeta {
            labels,
            annotations,
            ..ObjectMeta::default()
        });
        self.spec_mut().job_template = JobTemplateSpec {
            metadata,
            spec: job.spec,
        };
        self
    }

    /// Makes `status` present even if no setter fills it.
    pub fn default_status(mut self) -> Self {
        self.status_mut();
        self
    }

    /// Appends a reference to `status.active` (see [`crate::object_ref_of`]).
    pub fn active_job(mut self, job: ObjectReference) -> Self {
        self.status_mut().active.get_or_insert_default().push(job);
        self
    }

    /// Sets `status.lastScheduleTime`.
    pub fn last_schedule_time(mut self, at: Timestamp) -> Self {
        self.status_mut().last_schedule_time = Some(Time(at));
        self
    }

    /// Sets `status.lastSuccessfulTime`.
    pub fn last_successful_time(mut self, at: Timestamp) -> Self {
        self.status_mut().last_successful_time = Some(Time(at));
        self
    }

    /// Changes anything no setter names.
    pub fn with(mut self, f: impl FnOnce(&mut CronJob)) -> Self {
        f(&mut self.cron_job);
        self
    }

    /// The CronJob.
    pub fn build(self) -> CronJob {
        self.cron_job
    }

    /// The CronJob, shared as caches hand it out.
    pub fn arc(self) -> Arc<CronJob> {
        Arc::new(self.build())
    }

    fn spec_mut(&mut self) -> &mut CronJobSpec {
        &mut self.cron_job.spec
    }

    fn status_mut(&mut self) -> &mut CronJobStatus {
        self.cron_job.status.get_or_insert_default()
    }
}

meta_builder!(CronJobBuilder => cron_job);
from_builder!(CronJobBuilder => CronJob);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{job, object_ref_of};

    #[test]
    fn spec_setters() {
        let spec = cron_job("cj")
            .schedule("*/1 * * * *")
            .time_zone("Europe/Paris")
            .starting_deadline_seconds(30)
            .concurrency_policy("Forbid")
            .suspend(false)
            .successful_jobs_history_limit(3)
            .failed_jobs_history_limit(1)
            .job_template(job("ignored").label("app", "x").completions(2))
            .build()
            .spec;
        assert_eq!(spec.schedule, "*/1 * * * *");
        assert_eq!(spec.time_zone.as_deref(), Some("Europe/Paris"));
        assert_eq!(spec.starting_deadline_seconds, Some(30));
        assert_eq!(spec.concurrency_policy.as_deref(), Some("Forbid"));
        assert_eq!(spec.suspend, Some(false));
        assert_eq!(spec.successful_jobs_history_limit, Some(3));
        assert_eq!(spec.failed_jobs_history_limit, Some(1));
        let template = spec.job_template;
        assert_eq!(
            template.metadata.and_then(|m| m.labels),
            Some(crate::labels(&[("app", "x")]))
        );
        assert_eq!(template.spec.and_then(|s| s.completions), Some(2));
    }

    #[test]
    fn status_setters() {
        let at = Timestamp::UNIX_EPOCH;
        let j = job("cj-1").namespace("ns").uid("u").build();
        let status = cron_job("cj")
            .active_job(object_ref_of(&j))
            .last_schedule_time(at)
            .last_successful_time(at)
            .build()
            .status
            .unwrap_or_default();
        assert_eq!(status.active.map(|a| a.len()), Some(1));
        assert_eq!(status.last_schedule_time, Some(Time(at)));
        assert_eq!(status.last_successful_time, Some(Time(at)));
    }
}
