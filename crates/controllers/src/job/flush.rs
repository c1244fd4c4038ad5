//! Writing a Job's status: recording finished pods in `status.uncountedTerminatedPods`, removing their finalizers, moving them into the counters, and the terminal condition with its events (upstream `trackJobStatusAndRemoveFinalizers`, `flushUncountedAndRemoveFinalizers`, `recordJobFinished`).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::events::EventType;

use super::conditions::JOB_COMPLETE;
use super::controller::JobController;
use super::indexed::{completion_mode_str, has_backoff_limit_per_index, is_indexed_job};
use super::intervals::OrderedIntervals;
use super::job_ctx::SyncJobCtx;
use super::metrics::{FAILED, SUCCEEDED};
use super::track_status::{TrackInput, enact_job_finished, track_finished_pods};
use super::tracking::clean_uncounted_pods_without_finalizers;
use super::{Error, Result, completions, completions_or_zero};

impl JobController {
    /// Records finished pods in the status, removes their finalizers, counts them, and sets
    /// the terminal condition once nothing is uncounted or terminating, as upstream's
    /// `trackJobStatusAndRemoveFinalizers`. At most `MAX_UNCOUNTED_PODS` pods per sync, so
    /// the status stays small and big Jobs do not starve others. Writes the status when
    /// `needs_flush` or anything changed.
    pub(super) async fn track_job_status_and_remove_finalizers(
        &self,
        ctx: &mut SyncJobCtx,
        needs_flush: bool,
    ) -> Result<()> {
        let now = (self.clock)();
        // Only the counters are compared later, so the status before this pass is enough.
        let mut old_counters = ctx.job.status.clone().unwrap_or_default();
        let outcome = track_finished_pods(
            &mut ctx.job,
            &TrackInput {
                pods: &ctx.pods,
                uncounted: &ctx.uncounted,
                expected_rm_finalizers: &ctx.expected_rm_finalizers,
                prev_succeeded_indexes: &ctx.prev_succeeded_indexes,
                succeeded_indexes: &ctx.succeeded_indexes,
                failed_indexes: ctx.failed_indexes.as_ref(),
                pods_with_delayed_deletion_per_index: &ctx.pods_with_delayed_deletion_per_index,
                finished_condition: ctx.finished_condition.as_ref(),
                now,
            },
            needs_flush,
        );
        ctx.succeeded_indexes = outcome.succeeded_indexes.clone();
        ctx.finished_condition = outcome.finished_condition.clone();
        let mut needs_flush = self
            .flush_uncounted_and_remove_finalizers(
                ctx,
                &outcome.pods_to_remove_finalizer,
                outcome.uids_with_finalizer,
                &mut old_counters,
                &outcome.pod_failures_by_policy_action,
                outcome.needs_flush,
            )
            .await?;
        let job_finished = !outcome.reached_max_uncounted_pods
            && enact_job_finished(
                &mut ctx.job,
                ctx.finished_condition.as_ref(),
                ctx.terminating,
                now,
            );
        needs_flush |= job_finished;
        if needs_flush {
            ctx.job = self
                .update_status(&ctx.key, &ctx.job)
                .await
                .map_err(|source| Error::UpdateStatus {
                    job: ctx.key.clone(),
                    step: "removing uncounted pods from status",
                    source,
                })?;
            if job_finished && let Some(condition) = &ctx.finished_condition {
                self.record_job_finished(&ctx.job, condition);
            }
            self.record_job_pod_finished(&ctx.job, &old_counters);
        }
        Ok(())
    }

    /// Writes the status holding the new uncounted pods (and any interim condition), removes
    /// the finalizers of `pods_to_remove_finalizer`, moves their UIDs into the counters, and
    /// when some removal failed writes that partial progress, as upstream's
    /// `flushUncountedAndRemoveFinalizers`. Returns whether changes are left to write.
    async fn flush_uncounted_and_remove_finalizers(
        &self,
        ctx: &mut SyncJobCtx,
        pods_to_remove_finalizer: &[Arc<Pod>],
        mut uids_with_finalizer: HashSet<String>,
        old_counters: &mut JobStatus,
        pod_failures_by_policy_action: &BTreeMap<&'static str, u64>,
        mut needs_flush: bool,
    ) -> Result<bool> {
        if needs_flush {
            ctx.job = self
                .update_status(&ctx.key, &ctx.job)
                .await
                .map_err(|source| Error::UpdateStatus {
                    job: ctx.key.clone(),
                    step: "adding uncounted pods to status",
                    source,
                })?;
            // Only now are the failures this record counts in the stored status.
            self.backoff_store
                .update_backoff_record(ctx.new_backoff_record.clone());
            self.record_job_pod_finished(&ctx.job, old_counters);
            *old_counters = ctx.job.status.clone().unwrap_or_default();
            needs_flush = false;
        }
        if let Some(metrics) = &self.metrics {
            for (action, count) in pod_failures_by_policy_action {
                metrics.failures_handled_by_policy(action, *count);
            }
        }
        let mut rm_err = None;
        if !pods_to_remove_finalizer.is_empty() {
            let (removed, err) = self
                .remove_tracking_finalizer_from_pods(&ctx.key, pods_to_remove_finalizer)
                .await;
            for (pod, removed) in pods_to_remove_finalizer.iter().zip(removed) {
                if removed {
                    uids_with_finalizer.remove(pod.metadata.uid.as_deref().unwrap_or_default());
                }
            }
            rm_err = err;
        }
        let status = ctx.job.status.get_or_insert_with(Default::default);
        if clean_uncounted_pods_without_finalizers(status, &uids_with_finalizer) {
            needs_flush = true;
        }
        if let Some(err) = rm_err {
            // Keep what did succeed.
            if needs_flush {
                self.update_status(&ctx.key, &ctx.job)
                    .await
                    .map_err(|source| Error::UpdateStatus {
                        job: ctx.key.clone(),
                        step: "removing uncounted pods from status",
                        source,
                    })?;
            }
            return Err(err);
        }
        Ok(needs_flush)
    }

    /// Writes the Job's status and remembers the write for the next sync's own-write wait.
    async fn update_status(&self, key: &str, job: &Job) -> std::result::Result<Job, kube::Error> {
        let stored = self.job_client.update_status(job).await?;
        self.record_own_write(key, &stored);
        Ok(stored)
    }

    /// The events and `jobs_finished_total` of a finished Job, as upstream's
    /// `recordJobFinished`.
    fn record_job_finished(&self, job: &Job, condition: &JobCondition) {
        let mode = completion_mode_str(job);
        let reason = condition.reason.as_deref().unwrap_or_default();
        if condition.type_ == JOB_COMPLETE {
            let succeeded = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
            if completions(job).is_some_and(|c| succeeded > c) {
                self.event(
                    job,
                    EventType::Warning,
                    "TooManySucceededPods",
                    "Too many succeeded pods running after completion count reached",
                );
            }
            self.event(job, EventType::Normal, "Completed", "Job completed");
            if let Some(metrics) = &self.metrics {
                metrics.job_finished(mode, SUCCEEDED, reason);
            }
        } else {
            let message = condition.message.as_deref().unwrap_or_default();
            self.event(job, EventType::Warning, reason, message);
            if let Some(metrics) = &self.metrics {
                metrics.job_finished(mode, FAILED, reason);
            }
        }
    }

    /// Counts the pods (and indexes) whose tracking finished since `old`, as upstream's
    /// `recordJobPodFinished`.
    fn record_job_pod_finished(&self, job: &Job, old: &JobStatus) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let mode = completion_mode_str(job);
        let status = job.status.clone().unwrap_or_default();
        let succeeded_diff = if is_indexed_job(job) {
            // Indexes out of range after a scale-down do not count.
            let completions = completions_or_zero(job);
            let total =
                |s: Option<&str>| s.map_or(0, |s| OrderedIntervals::parse(s, completions).total());
            let diff = if status.completed_indexes != old.completed_indexes {
                total(status.completed_indexes.as_deref()) - total(old.completed_indexes.as_deref())
            } else {
                0
            };
            let limit = if has_backoff_limit_per_index(job) {
                "perIndex"
            } else {
                "global"
            };
            metrics.finished_indexes(SUCCEEDED, limit, u64::try_from(diff).unwrap_or(0));
            if has_backoff_limit_per_index(job) && status.failed_indexes != old.failed_indexes {
                let failed_diff =
                    total(status.failed_indexes.as_deref()) - total(old.failed_indexes.as_deref());
                if failed_diff > 0 {
                    metrics.finished_indexes(
                        FAILED,
                        limit,
                        u64::try_from(failed_diff).unwrap_or(0),
                    );
                }
            }
            diff
        } else {
            i64::from(status.succeeded.unwrap_or(0)) - i64::from(old.succeeded.unwrap_or(0))
        };
        metrics.pods_finished(mode, SUCCEEDED, u64::try_from(succeeded_diff).unwrap_or(0));
        let failed_diff =
            i64::from(status.failed.unwrap_or(0)) - i64::from(old.failed.unwrap_or(0));
        metrics.pods_finished(mode, FAILED, u64::try_from(failed_diff).unwrap_or(0));
    }
}
