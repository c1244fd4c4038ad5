//! The Job sync pass: `syncJob`, `getPodsForJob` and `syncOrphanPod` (upstream `job_controller.go`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::controller::ref_manager::recheck_owner;
use kcm_machinery::controller::{
    ApiStatus, PodControllerRefManager, filter_active_pods, filter_pods_by_owner, get_controller_of,
};
use kcm_machinery::events::EventType;
use kcm_machinery::informer::keys::split_meta_namespace_key;
use kube::Resource;
use kube::api::Patch;

use super::conditions::{
    CONDITION_FALSE, CONDITION_TRUE, JOB_FAILURE_TARGET, JOB_SUSPENDED,
    MESSAGE_BACKOFF_LIMIT_EXCEEDED, MESSAGE_DEADLINE_EXCEEDED, MESSAGE_FAILED_INDEXES,
    MESSAGE_JOB_RESUMED, MESSAGE_JOB_SUSPENDED, MESSAGE_MAX_FAILED_INDEXES_EXCEEDED,
    REASON_BACKOFF_LIMIT_EXCEEDED, REASON_DEADLINE_EXCEEDED, REASON_FAILED_INDEXES,
    REASON_JOB_RESUMED, REASON_JOB_SUSPENDED, REASON_MAX_FAILED_INDEXES_EXCEEDED,
    REASON_POD_FAILURE_POLICY, ensure_job_condition_status, failure_target_condition,
    new_condition, new_failed_condition_for_failure_target, new_failure_condition,
    new_success_condition, success_criteria_met_condition,
};
use super::controller::{JobController, KIND, OWN_WRITE_WAIT, job_selector};
use super::finished_pods::{new_finished_pods, non_ignored_failed_pods_count};
use super::indexed::{
    calculate_failed_indexes, calculate_succeeded_indexes, completion_mode_str,
    has_backoff_limit_per_index, is_indexed_job,
};
use super::job_ctx::SyncJobCtx;
use super::manage::SYNC_ACTION_RECONCILING;
use super::status::{
    active_deadline_remaining, count, count_ready_pods, count_terminating_pods, fail_job_message,
    job_suspended, managed_by_external_controller, past_active_deadline,
    past_backoff_limit_on_failure,
};
use super::success_policy::{match_success_policy, success_policy_condition};
use super::tracking::{
    JOB_TRACKING_FINALIZER, has_job_tracking_finalizer, remove_tracking_finalizer_patch,
};
use super::{
    Error, OrderedIntervals, Result, UncountedTerminatedPods, backoff_limit, completions,
    completions_or_zero,
};
use crate::job::backoff::pods_with_delayed_deletion_per_index;
use crate::job::conditions::is_job_finished;

impl JobController {
    /// Syncs the Job with key `namespace/name`, as upstream's `syncJob`: counts its finished
    /// pods, decides whether it failed or succeeded, creates or deletes pods (unless it is
    /// finishing, its expectations are pending or it is being deleted), tracks finished pods
    /// through `status.uncountedTerminatedPods`, and writes its status. Never run
    /// concurrently for one key. Records `job_controller_job_sync*` when the Job exists.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = self.sync_job(key).await;
        let elapsed = start.elapsed();
        tracing::debug!(key, ?elapsed, "Finished syncing job");
        match result {
            Ok(None) => Ok(()),
            Ok(Some(outcome)) => {
                self.observe_sync(&outcome.completion_mode, "success", outcome.action, elapsed);
                Ok(())
            }
            Err((outcome, err)) => {
                if let Some(outcome) = outcome {
                    self.observe_sync(&outcome.completion_mode, "error", outcome.action, elapsed);
                }
                Err(err)
            }
        }
    }

    fn observe_sync(&self, mode: &str, result: &str, action: &str, elapsed: Duration) {
        if let Some(metrics) = &self.metrics {
            metrics.observe_sync(mode, result, action, elapsed);
        }
    }

    /// The sync proper; `None` when no sync metrics apply (Job gone, finished, external).
    async fn sync_job(
        &self,
        key: &str,
    ) -> std::result::Result<Option<SyncOutcome>, (Option<SyncOutcome>, Error)> {
        let (namespace, name) = split_meta_namespace_key(key).map_err(|source| {
            (
                None,
                Error::InvalidKey {
                    key: key.to_owned(),
                    source,
                },
            )
        })?;
        if namespace.is_none_or(str::is_empty) || name.is_empty() {
            return Err((
                None,
                Error::IncompleteKey {
                    key: key.to_owned(),
                },
            ));
        }
        self.wait_for_own_write(key).await;
        let Some(shared) = self.job_cache.get_by_key(key) else {
            tracing::debug!(key, "Job has been deleted");
            self.expectations.delete_expectations(key);
            self.finalizer_expectations.delete_expectations(key);
            self.backoff_store.remove_backoff_record(key);
            return Ok(None);
        };
        // A sync may have been queued for a namesake without `managedBy`.
        if let Some(controller) = managed_by_external_controller(&shared) {
            tracing::debug!(
                key,
                controller,
                "Skip syncing the job as it is managed by an external controller"
            );
            return Ok(None);
        }
        if is_job_finished(&shared) {
            // Never redo the termination of a finished Job.
            self.backoff_store.remove_backoff_record(key);
            return Ok(None);
        }
        let mode = shared
            .spec
            .as_ref()
            .and_then(|s| s.completion_mode.as_deref());
        if mode.is_some_and(|m| m != "NonIndexed" && m != "Indexed") {
            self.recorder.event(
                &shared.object_ref(&()),
                EventType::Warning,
                "UnknownCompletionMode",
                "Skipped Job sync because completion mode is unknown".to_owned(),
            );
            return Ok(None);
        }
        let mut outcome = SyncOutcome {
            completion_mode: completion_mode_str(&shared).to_owned(),
            action: SYNC_ACTION_RECONCILING,
        };
        match self.sync_job_pass(key, &shared, &mut outcome).await {
            Ok(()) => Ok(Some(outcome)),
            Err(err) => Err((Some(outcome), err)),
        }
    }

    /// `syncJob` from the expectations check on.
    async fn sync_job_pass(
        &self,
        key: &str,
        shared: &Job,
        outcome: &mut SyncOutcome,
    ) -> Result<()> {
        // A private copy: the cache's object is shared.
        let mut job = shared.clone();
        let status = job.status.get_or_insert_with(Default::default);
        status
            .uncounted_terminated_pods
            .get_or_insert_with(Default::default);

        // Checked before listing pods: a pod observed in between can only make the list
        // fresher than the expectations, never staler.
        let satisfied_expectations = self.expectations.satisfied_expectations(key);

        let pods = self.get_pods_for_job(&job, key).await?;
        let active_pods = filter_active_pods(&pods);
        let uncounted = UncountedTerminatedPods::new(
            job.status
                .as_ref()
                .and_then(|s| s.uncounted_terminated_pods.as_ref()),
        );
        let expected_rm_finalizers = self
            .finalizer_expectations
            .get_expected_uids(key)
            .unwrap_or_default();
        let now = (self.clock)();
        let mut ctx = SyncJobCtx {
            key: key.to_owned(),
            ready: count_ready_pods(&active_pods),
            terminating: count_terminating_pods(&pods),
            finished_condition: None,
            succeeded: 0,
            failed: 0,
            prev_succeeded_indexes: OrderedIntervals::default(),
            succeeded_indexes: OrderedIntervals::default(),
            failed_indexes: None,
            new_backoff_record: Default::default(),
            expected_rm_finalizers,
            uncounted,
            pods_with_delayed_deletion_per_index: Default::default(),
            pods,
            active_pods,
            job,
        };
        let mut active = count(ctx.active_pods.len());
        let (new_succeeded, new_failed) = new_finished_pods(
            &ctx.job,
            &ctx.pods,
            &ctx.uncounted,
            &ctx.expected_rm_finalizers,
        );
        let status = ctx.job.status.clone().unwrap_or_default();
        ctx.succeeded = status
            .succeeded
            .unwrap_or(0)
            .saturating_add(count(new_succeeded.len()))
            .saturating_add(count(ctx.uncounted.succeeded.len()));
        ctx.failed = status
            .failed
            .unwrap_or(0)
            .saturating_add(non_ignored_failed_pods_count(&ctx.job, &new_failed))
            .saturating_add(count(ctx.uncounted.failed.len()));

        // First start: the clock of activeDeadlineSeconds starts unless suspended.
        if status.start_time.is_none() && !job_suspended(&ctx.job) {
            ctx.job
                .status
                .get_or_insert_with(Default::default)
                .start_time = Some(Time(now));
        }
        ctx.new_backoff_record =
            self.backoff_store
                .new_backoff_record(key, &new_succeeded, &new_failed);

        let exceeds_backoff_limit = ctx.failed > backoff_limit(&ctx.job);
        ctx.finished_condition = success_criteria_met_condition(&ctx.job).cloned();
        // With SuccessCriteriaMet already set the outcome was decided in an earlier sync; the
        // pod failure policy is only evaluated without it.
        if ctx.finished_condition.is_none() {
            if let Some(target) = failure_target_condition(&ctx.job) {
                ctx.finished_condition = Some(new_failed_condition_for_failure_target(target, now));
            } else if let Some(message) = fail_job_message(&ctx.job, &ctx.pods) {
                // The interim FailureTarget records the message before the finalizers go.
                ctx.finished_condition = Some(new_condition(
                    JOB_FAILURE_TARGET,
                    CONDITION_TRUE,
                    REASON_POD_FAILURE_POLICY,
                    &message,
                    now,
                ));
            }
        }
        if ctx.finished_condition.is_none() {
            if exceeds_backoff_limit || past_backoff_limit_on_failure(&ctx.job, &ctx.pods) {
                ctx.finished_condition = Some(new_failure_condition(
                    REASON_BACKOFF_LIMIT_EXCEEDED,
                    MESSAGE_BACKOFF_LIMIT_EXCEEDED,
                    now,
                ));
            } else if past_active_deadline(&ctx.job, now) {
                ctx.finished_condition = Some(new_failure_condition(
                    REASON_DEADLINE_EXCEEDED,
                    MESSAGE_DEADLINE_EXCEEDED,
                    now,
                ));
            } else if let Some(left) = active_deadline_remaining(&ctx.job, now) {
                let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
                tracing::debug!(key, next_sync_in = ?left, "Job has activeDeadlineSeconds configuration. Will sync this job again");
                self.queue.add_after(key.to_owned(), left);
            }
        }

        if is_indexed_job(&ctx.job) {
            let (prev, all) = calculate_succeeded_indexes(&ctx.job, &ctx.pods);
            ctx.succeeded = i32::try_from(all.total()).unwrap_or(i32::MAX);
            ctx.prev_succeeded_indexes = prev;
            ctx.succeeded_indexes = all;
            let completions = completions_or_zero(&ctx.job);
            if has_backoff_limit_per_index(&ctx.job) {
                let failed_indexes = calculate_failed_indexes(&ctx.job, &ctx.pods);
                if ctx.finished_condition.is_none() {
                    let failed_total = failed_indexes.total();
                    let max_failed = ctx.job.spec.as_ref().and_then(|s| s.max_failed_indexes);
                    if max_failed.is_some_and(|max| failed_total > i64::from(max)) {
                        ctx.finished_condition = Some(new_failure_condition(
                            REASON_MAX_FAILED_INDEXES_EXCEEDED,
                            MESSAGE_MAX_FAILED_INDEXES_EXCEEDED,
                            now,
                        ));
                    } else if failed_total > 0
                        && failed_total + ctx.succeeded_indexes.total() >= i64::from(completions)
                    {
                        ctx.finished_condition = Some(new_failure_condition(
                            REASON_FAILED_INDEXES,
                            MESSAGE_FAILED_INDEXES,
                            now,
                        ));
                    }
                }
                ctx.pods_with_delayed_deletion_per_index = pods_with_delayed_deletion_per_index(
                    &ctx.job,
                    &ctx.pods,
                    &ctx.active_pods,
                    &ctx.succeeded_indexes,
                    Some(&failed_indexes),
                    &ctx.expected_rm_finalizers,
                );
                ctx.failed_indexes = Some(failed_indexes);
            }
            if ctx.finished_condition.is_none() {
                let policy = ctx
                    .job
                    .spec
                    .as_ref()
                    .and_then(|s| s.success_policy.as_ref());
                if let Some(message) =
                    match_success_policy(policy, completions, &ctx.succeeded_indexes)
                {
                    ctx.finished_condition = Some(success_policy_condition(&message, now));
                }
            }
        }

        let mut suspend_cond_changed = false;
        let mut manage_job_err = None;
        if ctx.finished_condition.is_some() {
            // Finishing: every active pod goes (finalizers kept; the tracking removes them).
            let (deleted_ready, deleted, err) = self.delete_active_pods(&ctx).await;
            if deleted != active || !satisfied_expectations {
                // Pods may remain, or not be in the cache yet: not finished yet.
                ctx.finished_condition = None;
            }
            active -= deleted;
            ctx.terminating = ctx.terminating.saturating_add(deleted);
            ctx.ready -= deleted_ready;
            manage_job_err = err;
        } else {
            let mut manage_job_called = false;
            if satisfied_expectations && ctx.job.metadata.deletion_timestamp.is_none() {
                let (new_active, action, err) = self.manage_job(&mut ctx).await;
                active = new_active;
                outcome.action = action;
                manage_job_err = err;
                manage_job_called = true;
            }
            // Without completions the first success completes the Job once nothing runs;
            // with completions, that many successes do.
            let complete = match completions(&ctx.job) {
                None => ctx.succeeded > 0 && active == 0,
                Some(completions) => ctx.succeeded >= completions && active == 0,
            };
            if complete {
                ctx.finished_condition = Some(new_success_condition(now));
            } else if manage_job_called {
                // Conditions and events only from the sync that managed the pods.
                let suspended = job_suspended(&ctx.job);
                let conditions = ctx
                    .job
                    .status
                    .get_or_insert_with(Default::default)
                    .conditions
                    .get_or_insert_with(Vec::new);
                if suspended {
                    if ensure_job_condition_status(
                        conditions,
                        JOB_SUSPENDED,
                        CONDITION_TRUE,
                        REASON_JOB_SUSPENDED,
                        MESSAGE_JOB_SUSPENDED,
                        now,
                    ) {
                        suspend_cond_changed = true;
                        self.event(&ctx.job, EventType::Normal, "Suspended", "Job suspended");
                    }
                } else if ensure_job_condition_status(
                    conditions,
                    JOB_SUSPENDED,
                    CONDITION_FALSE,
                    REASON_JOB_RESUMED,
                    MESSAGE_JOB_RESUMED,
                    now,
                ) {
                    suspend_cond_changed = true;
                    self.event(&ctx.job, EventType::Normal, "Resumed", "Job resumed");
                    // activeDeadlineSeconds counts continuous activity: a resumed Job starts
                    // its clock again, as one created suspended does.
                    ctx.job
                        .status
                        .get_or_insert_with(Default::default)
                        .start_time = Some(Time(now));
                }
            }
        }

        let status = ctx.job.status.get_or_insert_with(Default::default);
        let needs_status_update = suspend_cond_changed
            || active != status.active.unwrap_or(0)
            || status.ready != Some(ctx.ready)
            || status.terminating != Some(ctx.terminating);
        // `active` is an `omitempty` int32; `ready` and `terminating` are pointers.
        status.active = (active != 0).then_some(active);
        status.ready = Some(ctx.ready);
        status.terminating = Some(ctx.terminating);
        self.track_job_status_and_remove_finalizers(&mut ctx, needs_status_update)
            .await?;
        manage_job_err.map_or(Ok(()), Err)
    }

    /// Waits, at most [`OWN_WRITE_WAIT`], until the Job cache holds this controller's last
    /// status write to `key`, so the pass does not count pods against a stale status and
    /// then conflict on its write.
    async fn wait_for_own_write(&self, key: &str) {
        if let Some(writes) = &self.own_writes {
            writes.wait(key, OWN_WRITE_WAIT).await;
        }
    }

    /// Remembers the resourceVersion of a status write to `key`.
    pub(super) fn record_own_write(&self, key: &str, written: &Job) {
        if let Some(writes) = &self.own_writes {
            writes.record(key, written.metadata.resource_version.as_deref());
        }
    }

    /// Records an event about `job`.
    pub(super) fn event(&self, job: &Job, type_: EventType, reason: &str, message: &str) {
        self.recorder
            .event(&job.object_ref(&()), type_, reason, message.to_owned());
    }

    /// The pods the Job owns: its controlled pods and the namespace's orphans it selects
    /// (adopted, with the tracking finalizer), minus those it releases, as upstream's
    /// `getPodsForJob`. Before the first adoption the Job is re-read from the API server.
    async fn get_pods_for_job(&self, job: &Job, key: &str) -> Result<Vec<Arc<Pod>>> {
        let selector = job_selector(job).map_err(|source| Error::Selector {
            job: key.to_owned(),
            source,
        })?;
        // Owned pods that no longer match are included so they can be released.
        let pods = filter_pods_by_owner(&self.pod_cache, &job.metadata, KIND, true);
        let client = Arc::clone(&self.job_client);
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        let can_adopt = recheck_owner(
            job,
            move || async move { client.get(&namespace, &name).await },
        );
        let manager = PodControllerRefManager::for_pods(
            Arc::clone(&self.pod_control),
            &job.metadata,
            selector,
            self.gvk.clone(),
            Some(can_adopt),
        )
        .with_finalizers(vec![JOB_TRACKING_FINALIZER.to_owned()]);
        let mut claimed = manager
            .claim_pods(&pods, |_| true)
            .await
            .map_err(|source| Error::ClaimPods {
                job: key.to_owned(),
                source,
            })?;
        // Adopted pods got the finalizer through the adoption patch; count on it here too.
        let uid = job.metadata.uid.as_deref().unwrap_or_default();
        for pod in &mut claimed {
            let adopted = !pod
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid);
            if adopted && !has_job_tracking_finalizer(pod) {
                let mut copy = (**pod).clone();
                copy.metadata
                    .finalizers
                    .get_or_insert_with(Vec::new)
                    .push(JOB_TRACKING_FINALIZER.to_owned());
                *pod = Arc::new(copy);
            }
        }
        Ok(claimed)
    }

    /// Removes the tracking finalizer from the orphan pod `key` unless it was adopted since,
    /// as upstream's `syncOrphanPod`. Pods controlled by something other than a batch/v1 Job,
    /// by an unfinished Job, or by a Job another controller manages keep it.
    pub(super) async fn sync_orphan_pod(&self, key: &str) -> Result<()> {
        let (namespace, name) =
            split_meta_namespace_key(key).map_err(|source| Error::InvalidKey {
                key: key.to_owned(),
                source,
            })?;
        let Some(pod) = self.pod_cache.get_by_key(key) else {
            tracing::debug!(pod = key, "Orphan pod has been deleted");
            return Ok(());
        };
        if let Some(controller_ref) = get_controller_of(&pod.metadata) {
            if controller_ref.kind != KIND || controller_ref.api_version != "batch/v1" {
                return Ok(());
            }
            let job = self.handlers.resolve_controller_ref(
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                controller_ref,
            );
            if let Some(job) = &job {
                if let Some(controller) = managed_by_external_controller(job) {
                    tracing::debug!(
                        pod = key,
                        controller,
                        "Skip cleanup of the job finalizer for a pod owned by a job that is managed by an external controller"
                    );
                    return Ok(());
                }
                if !is_job_finished(job) {
                    // Adopted: the Job's own sync removes the finalizer.
                    return Ok(());
                }
            }
        }
        if let Some(patch) = remove_tracking_finalizer_patch(&pod) {
            match self
                .pod_control
                .patch_pod(
                    namespace.unwrap_or_default(),
                    name,
                    &Patch::Strategic(patch),
                )
                .await
            {
                Err(err) if !err.is_not_found() => {
                    return Err(Error::RemoveFinalizers {
                        job: key.to_owned(),
                        source: err,
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// What a sync reports in `job_controller_job_sync*`.
struct SyncOutcome {
    /// `Indexed` or `NonIndexed`.
    completion_mode: String,
    /// What the sync did (`reconciling` until `manageJob` says otherwise).
    action: &'static str,
}
