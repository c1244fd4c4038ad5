//! The Job controller's own metrics (`job_controller_*`), as upstream's `job/metrics`.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// `result` label value (and `status` of `job_pods_creation_total`): it worked.
pub const SUCCEEDED: &str = "succeeded";
/// `result` label value: it did not.
pub const FAILED: &str = "failed";
/// `reason` of `job_pods_creation_total`: a first pod for its slot.
pub const POD_CREATE_NEW: &str = "new";
/// `reason`: replacing terminating or failed pods.
pub const POD_RECREATE_TERMINATING_OR_FAILED: &str = "recreate_terminating_or_failed";
/// `reason`: replacing failed pods (`podReplacementPolicy: Failed`).
pub const POD_RECREATE_FAILED: &str = "recreate_failed";

/// Labels of the sync metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SyncLabels {
    completion_mode: String,
    result: String,
    action: String,
}

/// Labels of `jobs_finished_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FinishedLabels {
    completion_mode: String,
    result: String,
    reason: String,
}

/// Labels of `job_pods_finished_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PodsFinishedLabels {
    completion_mode: String,
    result: String,
}

/// Labels of `job_finished_indexes_total`; upstream's label is camel-case `backoffLimit`, and
/// the derive names labels after fields.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
struct IndexesLabels {
    status: String,
    backoffLimit: String,
}

/// Labels of `job_pods_creation_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CreationLabels {
    reason: String,
    status: String,
}

/// One label named `action`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabel {
    action: String,
}

/// One label named `event`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabel {
    event: String,
}

/// One label named `controller_name`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerNameLabel {
    controller_name: String,
}

fn sync_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.004, 2.0, 15))
}

/// The controller's metric families. Build one per process, [`register`](Self::register) it
/// and hand the `Arc` to the controller's options.
#[derive(Debug)]
pub struct JobMetrics {
    sync_duration: Family<SyncLabels, Histogram, fn() -> Histogram>,
    syncs: Family<SyncLabels, Counter>,
    finished: Family<FinishedLabels, Counter>,
    by_external_controller: Family<ControllerNameLabel, Counter>,
    pods_finished: Family<PodsFinishedLabels, Counter>,
    failures_by_policy: Family<ActionLabel, Counter>,
    tracking_finalizer: Family<EventLabel, Counter>,
    finished_indexes: Family<IndexesLabels, Counter>,
    pods_creation: Family<CreationLabels, Counter>,
}

impl Default for JobMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl JobMetrics {
    /// Empty families with upstream's buckets.
    pub fn new() -> Self {
        Self {
            sync_duration: Family::new_with_constructor(sync_histogram),
            syncs: Family::default(),
            finished: Family::default(),
            by_external_controller: Family::default(),
            pods_finished: Family::default(),
            failures_by_policy: Family::default(),
            tracking_finalizer: Family::default(),
            finished_indexes: Family::default(),
            pods_creation: Family::default(),
        }
    }

    /// Registers the families under upstream's names (`job_controller_*`).
    pub fn register(&self, registry: &mut Registry) {
        let sub = registry.sub_registry_with_prefix("job_controller");
        sub.register(
            "job_sync_duration_seconds",
            "The time it took to sync a job",
            self.sync_duration.clone(),
        );
        sub.register("job_syncs", "The number of job syncs", self.syncs.clone());
        sub.register(
            "jobs_finished",
            "The number of finished jobs",
            self.finished.clone(),
        );
        sub.register(
            "jobs_by_external_controller",
            "The number of Jobs managed by an external controller",
            self.by_external_controller.clone(),
        );
        sub.register(
            "job_pods_finished",
            "The number of finished Pods that are fully tracked",
            self.pods_finished.clone(),
        );
        sub.register(
            "pod_failures_handled_by_failure_policy",
            "The number of failed Pods handled by failure policy with respect to the failure \
             policy action applied based on the matched rule.",
            self.failures_by_policy.clone(),
        );
        sub.register(
            "terminated_pods_tracking_finalizer",
            "The number of terminated pods (phase=Failed|Succeeded) that have the finalizer \
             batch.kubernetes.io/job-tracking. The event label can be \"add\" or \"delete\".",
            self.tracking_finalizer.clone(),
        );
        sub.register(
            "job_finished_indexes",
            "The number of finished indexes.",
            self.finished_indexes.clone(),
        );
        sub.register(
            "job_pods_creation",
            "The number of Pods created by the Job controller labelled with a reason for the \
             Pod creation.",
            self.pods_creation.clone(),
        );
    }

    /// One sync of a Job in `completion_mode` that ended with `result` after doing `action`.
    pub fn observe_sync(
        &self,
        completion_mode: &str,
        result: &str,
        action: &str,
        elapsed: Duration,
    ) {
        let labels = SyncLabels {
            completion_mode: completion_mode.to_owned(),
            result: result.to_owned(),
            action: action.to_owned(),
        };
        self.sync_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        self.syncs.get_or_create(&labels).inc();
    }

    /// A Job finished (`succeeded` or `failed`) with `reason`.
    pub fn job_finished(&self, completion_mode: &str, result: &str, reason: &str) {
        self.finished
            .get_or_create(&FinishedLabels {
                completion_mode: completion_mode.to_owned(),
                result: result.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// A Job managed by another controller appeared.
    pub fn job_by_external_controller(&self, controller_name: &str) {
        self.by_external_controller
            .get_or_create(&ControllerNameLabel {
                controller_name: controller_name.to_owned(),
            })
            .inc();
    }

    /// `count` pods of a Job finished being tracked with `result`.
    pub fn pods_finished(&self, completion_mode: &str, result: &str, count: u64) {
        if count == 0 {
            return;
        }
        self.pods_finished
            .get_or_create(&PodsFinishedLabels {
                completion_mode: completion_mode.to_owned(),
                result: result.to_owned(),
            })
            .inc_by(count);
    }

    /// `count` failed pods matched a pod-failure-policy rule with `action`.
    pub fn failures_handled_by_policy(&self, action: &str, count: u64) {
        self.failures_by_policy
            .get_or_create(&ActionLabel {
                action: action.to_owned(),
            })
            .inc_by(count);
    }

    /// A terminated pod with the tracking finalizer appeared (`add`) or went away (`delete`).
    pub fn tracking_finalizer(&self, event: &str) {
        self.tracking_finalizer
            .get_or_create(&EventLabel {
                event: event.to_owned(),
            })
            .inc();
    }

    /// `count` indexes finished with `status` under a `perIndex` or `global` backoff limit.
    pub fn finished_indexes(&self, status: &str, backoff_limit: &str, count: u64) {
        self.finished_indexes
            .get_or_create(&IndexesLabels {
                status: status.to_owned(),
                backoffLimit: backoff_limit.to_owned(),
            })
            .inc_by(count);
    }

    /// `count` pod creations for `reason` ended with `status`.
    pub fn pods_created(&self, reason: &str, status: &str, count: u64) {
        if count == 0 {
            return;
        }
        self.pods_creation
            .get_or_create(&CreationLabels {
                reason: reason.to_owned(),
                status: status.to_owned(),
            })
            .inc_by(count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_named_as_upstream() {
        let metrics = JobMetrics::new();
        metrics.observe_sync(
            "NonIndexed",
            "success",
            "pods_created",
            Duration::from_millis(5),
        );
        metrics.job_finished("Indexed", "failed", "BackoffLimitExceeded");
        metrics.job_by_external_controller("example.com/x");
        metrics.pods_finished("NonIndexed", SUCCEEDED, 2);
        metrics.failures_handled_by_policy("Ignore", 1);
        metrics.tracking_finalizer("add");
        metrics.finished_indexes(SUCCEEDED, "global", 3);
        metrics.pods_created(POD_CREATE_NEW, SUCCEEDED, 4);
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for line in [
            r#"job_controller_job_syncs_total{completion_mode="NonIndexed",result="success",action="pods_created"} 1"#,
            r#"job_controller_job_sync_duration_seconds_count{completion_mode="NonIndexed",result="success",action="pods_created"} 1"#,
            r#"job_controller_jobs_finished_total{completion_mode="Indexed",result="failed",reason="BackoffLimitExceeded"} 1"#,
            r#"job_controller_jobs_by_external_controller_total{controller_name="example.com/x"} 1"#,
            r#"job_controller_job_pods_finished_total{completion_mode="NonIndexed",result="succeeded"} 2"#,
            r#"job_controller_pod_failures_handled_by_failure_policy_total{action="Ignore"} 1"#,
            r#"job_controller_terminated_pods_tracking_finalizer_total{event="add"} 1"#,
            r#"job_controller_job_finished_indexes_total{status="succeeded",backoffLimit="global"} 3"#,
            r#"job_controller_job_pods_creation_total{reason="new",status="succeeded"} 4"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }
}
