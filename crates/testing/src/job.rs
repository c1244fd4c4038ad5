//! Jobs: [`job`] and the [`JobBuilder`] spec and status setters.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{
    Job, JobCondition, JobSpec, JobStatus, PodFailurePolicy, PodFailurePolicyRule, SuccessPolicy,
    SuccessPolicyRule, UncountedTerminatedPods,
};
use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};

use crate::meta::{MetaBuilder, labels};
use crate::selector::selector;

/// Builds a [`Job`]. Start with [`job`]. Spec setters create the spec (with an empty pod
/// template) on first use; status setters create the status.
#[derive(Clone, Debug, Default)]
pub struct JobBuilder {
    job: Job,
    /// Labels [`Self::selecting`] adds to the template at `build`, so that `selecting` and
    /// `template` may come in either order.
    stamped_labels: BTreeMap<String, String>,
}

/// A Job named `name`; no namespace, spec or status.
pub fn job(name: &str) -> JobBuilder {
    JobBuilder::default().name(name)
}

impl JobBuilder {
    /// Starts from an existing Job (one a test read back, to change and feed in again).
    pub fn from_job(job: Job) -> Self {
        Self {
            job,
            stamped_labels: BTreeMap::new(),
        }
    }

    /// Makes `spec` present even if no setter fills it.
    pub fn default_spec(mut self) -> Self {
        self.spec_mut();
        self
    }

    /// Sets `spec.completions`.
    pub fn completions(mut self, completions: i32) -> Self {
        self.spec_mut().completions = Some(completions);
        self
    }

    /// Sets `spec.parallelism`.
    pub fn parallelism(mut self, parallelism: i32) -> Self {
        self.spec_mut().parallelism = Some(parallelism);
        self
    }

    /// Sets `spec.backoffLimit`.
    pub fn backoff_limit(mut self, limit: i32) -> Self {
        self.spec_mut().backoff_limit = Some(limit);
        self
    }

    /// Sets `spec.backoffLimitPerIndex`.
    pub fn backoff_limit_per_index(mut self, limit: i32) -> Self {
        self.spec_mut().backoff_limit_per_index = Some(limit);
        self
    }

    /// Sets `spec.maxFailedIndexes`.
    pub fn max_failed_indexes(mut self, max: i32) -> Self {
        self.spec_mut().max_failed_indexes = Some(max);
        self
    }

    /// Sets `spec.activeDeadlineSeconds`.
    pub fn active_deadline_seconds(mut self, seconds: i64) -> Self {
        self.spec_mut().active_deadline_seconds = Some(seconds);
        self
    }

    /// Sets `spec.ttlSecondsAfterFinished`.
    pub fn ttl_seconds_after_finished(mut self, seconds: i32) -> Self {
        self.spec_mut().ttl_seconds_after_finished = Some(seconds);
        self
    }

    /// Sets `spec.completionMode` (`"NonIndexed"`, `"Indexed"`).
    pub fn completion_mode(mut self, mode: &str) -> Self {
        self.spec_mut().completion_mode = Some(mode.to_owned());
        self
    }

    /// Sets `spec.completionMode: Indexed`.
    pub fn indexed(self) -> Self {
        self.completion_mode("Indexed")
    }

    /// Sets `spec.suspend`.
    pub fn suspend(mut self, suspend: bool) -> Self {
        self.spec_mut().suspend = Some(suspend);
        self
    }

    /// Sets `spec.podReplacementPolicy` (`"TerminatingOrFailed"`, `"Failed"`).
    pub fn pod_replacement_policy(mut self, policy: &str) -> Self {
        self.spec_mut().pod_replacement_policy = Some(policy.to_owned());
        self
    }

    /// Sets `spec.manualSelector`.
    pub fn manual_selector(mut self, manual: bool) -> Self {
        self.spec_mut().manual_selector = Some(manual);
        self
    }

    /// Sets `spec.managedBy`.
    pub fn managed_by(mut self, controller: &str) -> Self {
        self.spec_mut().managed_by = Some(controller.to_owned());
        self
    }

    /// Sets `spec.podFailurePolicy` to these rules.
    pub fn pod_failure_policy(mut self, rules: Vec<PodFailurePolicyRule>) -> Self {
        self.spec_mut().pod_failure_policy = Some(PodFailurePolicy { rules });
        self
    }

    /// Sets `spec.successPolicy` to these rules.
    pub fn success_policy(mut self, rules: Vec<SuccessPolicyRule>) -> Self {
        self.spec_mut().success_policy = Some(SuccessPolicy { rules });
        self
    }

    /// Sets `spec.selector` (see [`crate::selector`]).
    pub fn selector(mut self, selector: impl Into<LabelSelector>) -> Self {
        self.spec_mut().selector = Some(selector.into());
        self
    }

    /// Selects pods labelled `pairs` and, at `build`, adds those labels to the template: the
    /// consistent pair the API server generates for a Job.
    pub fn selecting(mut self, pairs: &[(&str, &str)]) -> Self {
        self.spec_mut().selector = Some(selector(pairs));
        self.stamped_labels.extend(labels(pairs));
        self
    }

    /// Sets `spec.template` (see [`crate::pod_template`]).
    pub fn template(mut self, template: impl Into<PodTemplateSpec>) -> Self {
        self.spec_mut().template = template.into();
        self
    }

    /// Appends a container to the template's pod spec.
    pub fn container(mut self, container: impl Into<Container>) -> Self {
        self.spec_mut()
            .template
            .spec
            .get_or_insert_default()
            .containers
            .push(container.into());
        self
    }

    /// Sets the template's `restartPolicy` (`"Never"`, `"OnFailure"`).
    pub fn restart_policy(mut self, policy: &str) -> Self {
        self.spec_mut()
            .template
            .spec
            .get_or_insert_default()
            .restart_policy = Some(policy.to_owned());
        self
    }

    /// Makes `status` present even if no setter fills it.
    pub fn default_status(mut self) -> Self {
        self.status_mut();
        self
    }

    /// Sets `status.active`.
    pub fn active(mut self, active: i32) -> Self {
        self.status_mut().active = Some(active);
        self
    }

    /// Sets `status.ready`.
    pub fn ready(mut self, ready: i32) -> Self {
        self.status_mut().ready = Some(ready);
        self
    }

    /// Sets `status.succeeded`.
    pub fn succeeded(mut self, succeeded: i32) -> Self {
        self.status_mut().succeeded = Some(succeeded);
        self
    }

    /// Sets `status.failed`.
    pub fn failed(mut self, failed: i32) -> Self {
        self.status_mut().failed = Some(failed);
        self
    }

    /// Sets `status.terminating`.
    pub fn terminating(mut self, terminating: i32) -> Self {
        self.status_mut().terminating = Some(terminating);
        self
    }

    /// Sets `status.startTime`.
    pub fn start_time(mut self, at: Timestamp) -> Self {
        self.status_mut().start_time = Some(Time(at));
        self
    }

    /// Sets `status.completionTime`.
    pub fn completion_time(mut self, at: Timestamp) -> Self {
        self.status_mut().completion_time = Some(Time(at));
        self
    }

    /// Sets `status.completedIndexes`.
    pub fn completed_indexes(mut self, indexes: &str) -> Self {
        self.status_mut().completed_indexes = Some(indexes.to_owned());
        self
    }

    /// Sets `status.failedIndexes`.
    pub fn failed_indexes(mut self, indexes: &str) -> Self {
        self.status_mut().failed_indexes = Some(indexes.to_owned());
        self
    }

    /// Sets `status.uncountedTerminatedPods` (an empty list is left unset, as the API
    /// server's `omitempty` writes it).
    pub fn uncounted(mut self, succeeded: &[&str], failed: &[&str]) -> Self {
        let list = |uids: &[&str]| {
            (!uids.is_empty()).then(|| uids.iter().map(|u| (*u).to_owned()).collect())
        };
        self.status_mut().uncounted_terminated_pods = Some(UncountedTerminatedPods {
            succeeded: list(succeeded),
            failed: list(failed),
        });
        self
    }

    /// Appends a condition (see [`crate::job_condition`]).
    pub fn condition(mut self, condition: impl Into<JobCondition>) -> Self {
        self.status_mut()
            .conditions
            .get_or_insert_default()
            .push(condition.into());
        self
    }

    /// Changes anything no setter names (before `selecting`'s template labels are added).
    pub fn with(mut self, f: impl FnOnce(&mut Job)) -> Self {
        f(&mut self.job);
        self
    }

    /// The Job.
    pub fn build(mut self) -> Job {
        let stamped = std::mem::take(&mut self.stamped_labels);
        if !stamped.is_empty() {
            self.spec_mut()
                .template
                .metadata
                .get_or_insert_default()
                .labels
                .get_or_insert_default()
                .extend(stamped);
        }
        self.job
    }

    /// The Job, shared as caches hand it out.
    pub fn arc(self) -> Arc<Job> {
        Arc::new(self.build())
    }

    fn spec_mut(&mut self) -> &mut JobSpec {
        self.job.spec.get_or_insert_default()
    }

    fn status_mut(&mut self) -> &mut JobStatus {
        self.job.status.get_or_insert_default()
    }
}

meta_builder!(JobBuilder => job);
from_builder!(JobBuilder => Job);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{container, job_condition, pod_template};

    #[test]
    fn spec_setters() {
        let spec = job("pi")
            .completions(5)
            .parallelism(2)
            .backoff_limit(3)
            .backoff_limit_per_index(1)
            .max_failed_indexes(2)
            .active_deadline_seconds(60)
            .ttl_seconds_after_finished(5)
            .indexed()
            .suspend(true)
            .pod_replacement_policy("Failed")
            .manual_selector(true)
            .managed_by("example.com/other")
            .build()
            .spec
            .unwrap_or_default();
        assert_eq!(spec.completions, Some(5));
        assert_eq!(spec.parallelism, Some(2));
        assert_eq!(spec.backoff_limit, Some(3));
        assert_eq!(spec.backoff_limit_per_index, Some(1));
        assert_eq!(spec.max_failed_indexes, Some(2));
        assert_eq!(spec.active_deadline_seconds, Some(60));
        assert_eq!(spec.ttl_seconds_after_finished, Some(5));
        assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
        assert_eq!(spec.suspend, Some(true));
        assert_eq!(spec.pod_replacement_policy.as_deref(), Some("Failed"));
        assert_eq!(spec.manual_selector, Some(true));
        assert_eq!(spec.managed_by.as_deref(), Some("example.com/other"));
    }

    #[test]
    fn selecting_labels_the_template_in_either_order() {
        for j in [
            job("j")
                .selecting(&[("job-name", "j")])
                .template(pod_template().labels(&[("tier", "batch")]))
                .build(),
            job("j")
                .template(pod_template().labels(&[("tier", "batch")]))
                .selecting(&[("job-name", "j")])
                .build(),
        ] {
            let spec = j.spec.unwrap_or_default();
            assert_eq!(spec.selector, Some(selector(&[("job-name", "j")])));
            assert_eq!(
                spec.template.metadata.and_then(|m| m.labels),
                Some(labels(&[("job-name", "j"), ("tier", "batch")]))
            );
        }
    }

    #[test]
    fn container_and_restart_policy_fill_the_template() {
        let spec = job("j")
            .container(container("c").image("perl"))
            .restart_policy("Never")
            .build()
            .spec
            .and_then(|s| s.template.spec)
            .unwrap_or_default();
        assert_eq!(spec.containers.len(), 1);
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    }

    #[test]
    fn status_setters() {
        let at = Timestamp::UNIX_EPOCH;
        let status = job("j")
            .active(1)
            .ready(1)
            .succeeded(2)
            .failed(3)
            .terminating(0)
            .start_time(at)
            .completion_time(at)
            .completed_indexes("0-1")
            .failed_indexes("2")
            .uncounted(&["a"], &[])
            .condition(job_condition("Complete", "True"))
            .build()
            .status
            .unwrap_or_default();
        assert_eq!(status.active, Some(1));
        assert_eq!(status.ready, Some(1));
        assert_eq!(status.succeeded, Some(2));
        assert_eq!(status.failed, Some(3));
        assert_eq!(status.terminating, Some(0));
        assert_eq!(status.start_time, Some(Time(at)));
        assert_eq!(status.completion_time, Some(Time(at)));
        assert_eq!(status.completed_indexes.as_deref(), Some("0-1"));
        assert_eq!(status.failed_indexes.as_deref(), Some("2"));
        let uncounted = status.uncounted_terminated_pods.unwrap_or_default();
        assert_eq!(uncounted.succeeded, Some(vec!["a".to_owned()]));
        assert_eq!(uncounted.failed, None);
        assert_eq!(status.conditions.map(|c| c.len()), Some(1));
    }
}
