//! The Job controller's pod writes: carrying out `manageJob`'s plan (slow-start creations, deletions), deleting active pods of a finishing Job, and removing tracking finalizers (upstream `job_controller.go`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::join_all;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use kcm_machinery::controller::{
    ApiStatus, SLOW_START_INITIAL_BATCH_SIZE, is_pod_ready, new_controller_ref, pod_control,
    slow_start_batch,
};
use kube::Resource;
use kube::api::Patch;

use super::Error;
use super::controller::JobController;
use super::indexed::{add_completion_index_env_variables, is_indexed_job, pod_template_for_index};
use super::job_ctx::SyncJobCtx;
use super::manage::{ManageInput, ManagePlan, plan_manage_job};
use super::metrics::{
    FAILED, POD_CREATE_NEW, POD_RECREATE_FAILED, POD_RECREATE_TERMINATING_OR_FAILED, SUCCEEDED,
};
use super::status::count;
use super::tracking::{
    append_job_completion_finalizer_if_not_found, remove_tracking_finalizer_patch,
};

impl JobController {
    /// Creates or deletes pods toward the Job's wanted number of active pods, or backs off,
    /// as upstream's `manageJob`. Returns the number of active pods afterwards, the sync
    /// action for the metrics, and the first failure.
    pub(super) async fn manage_job(
        &self,
        ctx: &mut SyncJobCtx,
    ) -> (i32, &'static str, Option<Error>) {
        let active = count(ctx.active_pods.len());
        let now = (self.clock)();
        let plan = plan_manage_job(&ManageInput {
            job: &ctx.job,
            pods: &ctx.pods,
            active_pods: &ctx.active_pods,
            succeeded: ctx.succeeded,
            terminating: ctx.terminating,
            succeeded_indexes: &ctx.succeeded_indexes,
            failed_indexes: ctx.failed_indexes.as_ref(),
            pods_with_delayed_deletion_per_index: &ctx.pods_with_delayed_deletion_per_index,
            backoff: &ctx.new_backoff_record,
            now,
        });
        let action = plan.sync_action();
        match plan {
            ManagePlan::Delete { pods } => {
                tracing::debug!(
                    job = ctx.key,
                    deleting = pods.len(),
                    "Too many pods running for job"
                );
                self.expectations
                    .expect_deletions(&ctx.key, i64::try_from(pods.len()).unwrap_or(i64::MAX));
                let (removed_ready, removed, err) =
                    self.delete_job_pods(&ctx.job, &ctx.key, &pods).await;
                ctx.terminating = ctx.terminating.saturating_add(removed);
                ctx.ready -= removed_ready;
                (active - removed, action, err)
            }
            ManagePlan::Backoff { delay } => {
                tracing::debug!(
                    job = ctx.key,
                    ?delay,
                    "pod creation backed off after failures"
                );
                self.queue.add_after(ctx.key.clone(), delay);
                // Upstream reports no active pods for a backed-off pass.
                (0, action, None)
            }
            ManagePlan::Create {
                count: want,
                indexes,
            } => {
                let (created, err) = self.create_pods(ctx, want, indexes).await;
                (active.saturating_add(created), action, err)
            }
            ManagePlan::Nothing => (active, action, None),
        }
    }

    /// Creates `want` pods (one per index of `indexes` for an Indexed Job) in slow-start
    /// batches, each with the tracking finalizer. Raises the creation expectations first and
    /// lowers them for failed and skipped creations. Returns how many creations count as
    /// active (a refusal because the namespace is terminating counts: nothing will follow).
    async fn create_pods(
        &self,
        ctx: &SyncJobCtx,
        want: usize,
        indexes: Vec<i32>,
    ) -> (i32, Option<Error>) {
        let job = &ctx.job;
        let key = ctx.key.as_str();
        let want_i64 = i64::try_from(want).unwrap_or(i64::MAX);
        self.expectations.expect_creations(key, want_i64);
        tracing::debug!(key, creating = want, "Too few pods running");
        let mut template: PodTemplateSpec = job
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        if is_indexed_job(job) {
            add_completion_index_env_variables(&mut template);
        }
        let meta = template.metadata.get_or_insert_with(Default::default);
        append_job_completion_finalizer_if_not_found(meta.finalizers.get_or_insert_with(Vec::new));

        let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
        let controller = job.object_ref(&());
        let controller_ref = new_controller_ref(&job.metadata, &self.gvk);
        let mut pending: VecDeque<i32> = indexes.into();
        let attempts = AtomicUsize::new(0);
        let failures = AtomicUsize::new(0);
        let (_, first_error) = slow_start_batch(want, SLOW_START_INITIAL_BATCH_SIZE, || {
            attempts.fetch_add(1, Ordering::Relaxed);
            let index = pending.pop_front();
            let (template, controller, controller_ref, failures) =
                (&template, &controller, &controller_ref, &failures);
            async move {
                let result = self
                    .create_pod(
                        job,
                        ctx,
                        namespace,
                        template,
                        controller,
                        controller_ref,
                        index,
                    )
                    .await;
                match result {
                    Err(err) if err.is_namespace_terminating() => Ok(()),
                    Err(err) => {
                        // The informer will never see this pod.
                        tracing::debug!(key, %err, "Failed creation, decrementing expectations");
                        self.expectations.creation_observed(key);
                        failures.fetch_add(1, Ordering::Relaxed);
                        Err(err)
                    }
                    Ok(()) => Ok(()),
                }
            }
        })
        .await;
        let attempted = attempts.load(Ordering::Relaxed);
        let failed = failures.load(Ordering::Relaxed);
        let skipped = want.saturating_sub(attempted);
        if skipped > 0 {
            tracing::debug!(
                key,
                skipped,
                "Slow-start failure. Skipping creating pods, decrementing expectations"
            );
            for _ in 0..skipped {
                self.expectations.creation_observed(key);
            }
        }
        self.record_pods_creation(ctx, attempted - failed, failed);
        let created = count(want - failed - skipped);
        let err = first_error.map(|source| Error::CreatePods {
            job: key.to_owned(),
            source,
        });
        (created, err)
    }

    /// One creation: for an Indexed Job the index annotation and label, hostname and
    /// generate name (and with `backoffLimitPerIndex` the carried-over failure counts).
    #[allow(clippy::too_many_arguments)]
    async fn create_pod(
        &self,
        job: &Job,
        ctx: &SyncJobCtx,
        namespace: &str,
        template: &PodTemplateSpec,
        controller: &ObjectReference,
        controller_ref: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
        index: Option<i32>,
    ) -> Result<(), pod_control::Error> {
        match index {
            Some(index) => {
                let replaced = ctx
                    .pods_with_delayed_deletion_per_index
                    .get(&index)
                    .map(|p| &**p);
                let (template, generate_name) =
                    pod_template_for_index(job, template, index, replaced);
                self.pod_control
                    .create_pods_with_generate_name(
                        namespace,
                        &template,
                        controller,
                        controller_ref,
                        &generate_name,
                    )
                    .await
            }
            None => {
                self.pod_control
                    .create_pods_with_generate_name(
                        namespace,
                        template,
                        controller,
                        controller_ref,
                        "",
                    )
                    .await
            }
        }
    }

    /// Counts creations in `job_pods_creation_total` by why they were made, as upstream's
    /// `recordJobPodsCreationTotal`.
    fn record_pods_creation(&self, ctx: &SyncJobCtx, succeeded: usize, failed: usize) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let replace_failed_only = ctx
            .job
            .spec
            .as_ref()
            .and_then(|s| s.pod_replacement_policy.as_deref())
            == Some("Failed");
        let reason = if replace_failed_only && ctx.failed > 0 {
            POD_RECREATE_FAILED
        } else if ctx.failed > 0 || ctx.terminating > 0 {
            POD_RECREATE_TERMINATING_OR_FAILED
        } else {
            POD_CREATE_NEW
        };
        metrics.pods_created(reason, SUCCEEDED, succeeded as u64);
        metrics.pods_created(reason, FAILED, failed as u64);
    }

    /// Deletes `pods` of the Job (removing each one's tracking finalizer first, so it is gone
    /// for good), as upstream's `deleteJobPods`. Deletions that fail are taken off the
    /// expectations; NotFound counts as done. Returns the ready pods deleted, the pods
    /// deleted, and the first failure.
    pub(super) async fn delete_job_pods(
        &self,
        job: &Job,
        key: &str,
        pods: &[Arc<Pod>],
    ) -> (i32, i32, Option<Error>) {
        let controller = job.object_ref(&());
        let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
        let results = join_all(pods.iter().map(|pod| {
            let controller = &controller;
            async move {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let pod_namespace = pod.metadata.namespace.as_deref().unwrap_or(namespace);
                let fail = |err: pod_control::Error| {
                    // The informer will never see this deletion.
                    self.expectations.deletion_observed(key);
                    if err.is_not_found() {
                        return None;
                    }
                    tracing::debug!(job = key, pod = name, %err, "Failed to delete Pod");
                    Some(err)
                };
                if let Some(patch) = remove_tracking_finalizer_patch(pod)
                    && let Err(err) = self
                        .pod_control
                        .patch_pod(pod_namespace, name, &Patch::Strategic(patch))
                        .await
                {
                    return (false, fail(err));
                }
                let err = match self
                    .pod_control
                    .delete_pod(namespace, name, controller)
                    .await
                {
                    Ok(()) => None,
                    Err(err) => fail(err),
                };
                (is_pod_ready(pod), err)
            }
        }))
        .await;
        tally(results, key)
    }

    /// Deletes the active pods of a finishing Job, keeping their finalizers (the status
    /// tracking removes them once they are counted), as upstream's `deleteActivePods`. No
    /// expectations: the Job will not create pods again. Returns the ready pods deleted,
    /// the pods deleted, and the first failure.
    pub(super) async fn delete_active_pods(&self, ctx: &SyncJobCtx) -> (i32, i32, Option<Error>) {
        let job = &ctx.job;
        let controller = job.object_ref(&());
        let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
        let results = join_all(ctx.active_pods.iter().map(|pod| {
            let controller = &controller;
            async move {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let err = match self
                    .pod_control
                    .delete_pod(namespace, name, controller)
                    .await
                {
                    Err(err) if !err.is_not_found() => Some(err),
                    _ => None,
                };
                (is_pod_ready(pod), err)
            }
        }))
        .await;
        tally(results, &ctx.key)
    }

    /// Removes the tracking finalizer from `pods`, expecting each removal to be observed, as
    /// upstream's `removeTrackingFinalizerFromPods`. A failed patch is no longer expected; a
    /// pod already gone counts as done. Returns, per pod, whether its finalizer is gone, and
    /// the first failure.
    pub(super) async fn remove_tracking_finalizer_from_pods(
        &self,
        key: &str,
        pods: &[Arc<Pod>],
    ) -> (Vec<bool>, Option<Error>) {
        let uids = pods
            .iter()
            .map(|p| p.metadata.uid.clone().unwrap_or_default());
        self.finalizer_expectations
            .expect_finalizers_removed(key, uids);
        let results = join_all(pods.iter().map(|pod| async move {
            let Some(patch) = remove_tracking_finalizer_patch(pod) else {
                return (false, None);
            };
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            match self
                .pod_control
                .patch_pod(namespace, name, &Patch::Strategic(patch))
                .await
            {
                Ok(()) => (true, None),
                Err(err) => {
                    // No update with the finalizer removed will come.
                    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                    self.finalizer_expectations
                        .finalizer_removal_observed(key, uid);
                    if err.is_not_found() {
                        (true, None)
                    } else {
                        tracing::warn!(job = key, %err, "removing tracking finalizer");
                        (false, Some(err))
                    }
                }
            }
        }))
        .await;
        let mut removed = Vec::with_capacity(results.len());
        let mut first_error = None;
        for (ok, err) in results {
            removed.push(ok);
            if first_error.is_none() {
                first_error = err;
            }
        }
        let err = first_error.map(|source| Error::RemoveFinalizers {
            job: key.to_owned(),
            source,
        });
        (removed, err)
    }
}

/// Sums per-pod deletion results `(was ready, failure)` into (ready deleted, deleted, first
/// failure); a failed deletion is not counted, its readiness is (as upstream counts it).
fn tally(results: Vec<(bool, Option<pod_control::Error>)>, key: &str) -> (i32, i32, Option<Error>) {
    let mut ready = 0;
    let mut deleted = 0;
    let mut first_error = None;
    for (was_ready, err) in results {
        if was_ready {
            ready += 1;
        }
        match err {
            None => deleted += 1,
            Some(err) => {
                if first_error.is_none() {
                    first_error = Some(err);
                }
            }
        }
    }
    let err = first_error.map(|source| Error::DeletePods {
        job: key.to_owned(),
        source,
    });
    (ready, deleted, err)
}
