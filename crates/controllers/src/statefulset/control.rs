//! The StatefulSet update logic: revisions, ordered (or parallel) creation and deletion, rolling updates and status, as upstream's `stateful_set_control.go` (`defaultStatefulSetControl`).

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;

use futures::future::join_all;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::history::{
    History, equal_revision, find_equal_revisions, next_revision, sort_controller_revisions,
};
use kcm_machinery::labels::Selector;

use super::pod_control::StatefulPodControl;
use super::status_updater::StatusUpdater;
use super::utils::{
    allows_burst, apply_revision, complete_rolling_update, controller_kind, end_ordinal,
    identity_matches, inconsistent_status, is_created, is_failed, is_pending,
    is_running_and_available, is_running_and_ready, is_succeeded, is_terminating, is_unavailable,
    max_unavailable, min_ready_seconds, new_revision, new_versioned_stateful_set_pod, ordinal,
    pod_in_ordinal_range, pod_revision, replicas, revision_history_limit, rolling_update,
    sort_descending_ordinal, start_ordinal, storage_matches, strategy_type,
};
use super::{Error, Result};

/// The largest parallel batch of pod operations, as upstream's `MaxBatchSize`.
pub const MAX_BATCH_SIZE: usize = 500;

/// The wall clock used for pod availability; injectable so tests are deterministic.
pub use kcm_machinery::controller::clock::Clock;

/// The StatefulSet update logic over its seams, as upstream's `defaultStatefulSetControl`.
#[derive(Clone)]
pub struct StatefulSetControl {
    pod_control: StatefulPodControl,
    status_updater: StatusUpdater,
    history: History,
    clock: Clock,
    /// The `MaxUnavailableStatefulSet` gate: rolling updates replace up to `maxUnavailable`
    /// pods at once; off, one at a time (v1.36's default).
    max_unavailable: bool,
}

impl std::fmt::Debug for StatefulSetControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatefulSetControl").finish_non_exhaustive()
    }
}

/// Replica counts of one list of pods, as upstream's `replicaStatus`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ReplicaCounts {
    replicas: i32,
    ready: i32,
    available: i32,
    current: i32,
    updated: i32,
}

fn non_zero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

fn name_of(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// Runs `f` over indexes `0..count`: in order, stopping at the first that asks to exit or
/// fails, when `monotonic`; else in slow-start batches (1, 2, 4, ... up to
/// [`MAX_BATCH_SIZE`]), stopping after a batch with failures, as upstream's `runForAll` and
/// `slowStartBatch`. Returns whether the caller should stop, and the error.
async fn run_for_all<F, Fut>(count: usize, f: F, monotonic: bool) -> (bool, Result<()>)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    if monotonic {
        for i in 0..count {
            match f(i).await {
                Ok(false) => {}
                Ok(true) => return (true, Ok(())),
                Err(err) => return (true, Err(err)),
            }
        }
        return (false, Ok(()));
    }
    let mut next = 0;
    let mut remaining = count;
    let mut batch = remaining.min(1);
    while batch > 0 {
        let results = join_all((next..next + batch).map(&f)).await;
        next += batch;
        let errors: Vec<Error> = results.into_iter().filter_map(Result::err).collect();
        if !errors.is_empty() {
            return (true, Error::aggregate(errors));
        }
        remaining -= batch;
        batch = (2 * batch).min(remaining).min(MAX_BATCH_SIZE);
    }
    (false, Ok(()))
}

impl StatefulSetControl {
    /// The control over `pod_control`, `status_updater` and `history`, reading time from
    /// `clock`.
    pub fn new(
        pod_control: StatefulPodControl,
        status_updater: StatusUpdater,
        history: History,
        clock: Clock,
    ) -> Self {
        Self {
            pod_control,
            status_updater,
            history,
            clock,
            max_unavailable: false,
        }
    }

    /// The same control with the `MaxUnavailableStatefulSet` gate set to `enabled`.
    pub fn with_max_unavailable(mut self, enabled: bool) -> Self {
        self.max_unavailable = enabled;
        self
    }

    /// The pod control (tests inspect its object manager).
    pub fn pod_control(&self) -> &StatefulPodControl {
        &self.pod_control
    }

    /// The set's revisions: those its selector matches that it controls or no one does, as
    /// `ListRevisions`.
    pub fn list_revisions(&self, set: &StatefulSet) -> Result<Vec<Arc<ControllerRevision>>> {
        let selector = set_selector(set)?;
        Ok(self
            .history
            .list_controller_revisions(&set.metadata, &selector))
    }

    /// Adopts `revisions` (orphans), as `AdoptOrphanRevisions`.
    pub async fn adopt_orphan_revisions(
        &self,
        set: &StatefulSet,
        revisions: &[Arc<ControllerRevision>],
    ) -> Result<()> {
        for revision in revisions {
            self.history
                .adopt_controller_revision(&set.metadata, &controller_kind(), revision)
                .await?;
        }
        Ok(())
    }

    /// One pass over a set and its pods, as upstream's `UpdateStatefulSet`: find or create
    /// the current and update revisions, create, fix, delete and roll pods, write the
    /// status, then prune the history. Returns the status written (or computed).
    pub async fn update_stateful_set(
        &self,
        set: &StatefulSet,
        pods: &[Arc<Pod>],
    ) -> Result<Option<StatefulSetStatus>> {
        let mut revisions = self.list_revisions(set)?;
        sort_controller_revisions(&mut revisions);
        let (current, update, outcome) = self.perform_update(set, pods, &revisions).await;
        let truncated = self
            .truncate_history(set, pods, &revisions, current.as_deref(), update.as_deref())
            .await;
        match outcome {
            Ok(status) => truncated.map(|()| status),
            Err(err) => Err(match truncated {
                Ok(()) => err,
                Err(truncate_err) => Error::Aggregate(vec![err, truncate_err]),
            }),
        }
    }

    /// Revisions, the pod pass and the status write, as upstream's `performUpdate`; the
    /// revisions found are returned even when the pass fails, so history pruning knows them.
    async fn perform_update(
        &self,
        set: &StatefulSet,
        pods: &[Arc<Pod>],
        revisions: &[Arc<ControllerRevision>],
    ) -> (
        Option<Arc<ControllerRevision>>,
        Option<Arc<ControllerRevision>>,
        Result<Option<StatefulSetStatus>>,
    ) {
        let (current, update, collision_count) =
            match self.get_stateful_set_revisions(set, revisions).await {
                Ok(found) => found,
                Err(err) => return (None, None, Err(err)),
            };
        let (mut status, err) = match self
            .update_stateful_set_pods(set, &current, &update, collision_count, pods)
            .await
        {
            Ok(pass) => pass,
            Err(err) => return (Some(current), Some(update), Err(err)),
        };
        // The status is written even when the pass failed.
        let status_result = self.update_stateful_set_status(set, &mut status).await;
        let key = set_key(set);
        let outcome = match (err, status_result) {
            (Err(err), Err(status_err)) => {
                tracing::error!(statefulset = %key, err = %status_err, "Could not update status");
                Err(err)
            }
            (Err(err), Ok(())) | (Ok(()), Err(err)) => Err(err),
            (Ok(()), Ok(())) => {
                tracing::debug!(
                    statefulset = %key,
                    current_revision = ?status.current_revision,
                    update_revision = ?status.update_revision,
                    "StatefulSet revisions"
                );
                Ok(Some(status))
            }
        };
        (Some(current), Some(update), outcome)
    }

    /// Deletes the oldest revisions that no pod runs and that are neither current nor update,
    /// keeping `revisionHistoryLimit`, as `truncateHistory`.
    async fn truncate_history(
        &self,
        set: &StatefulSet,
        pods: &[Arc<Pod>],
        revisions: &[Arc<ControllerRevision>],
        current: Option<&ControllerRevision>,
        update: Option<&ControllerRevision>,
    ) -> Result<()> {
        let mut live: HashSet<&str> = HashSet::new();
        for r in [current, update].into_iter().flatten() {
            live.insert(r.metadata.name.as_deref().unwrap_or_default());
        }
        for pod in pods {
            live.insert(pod_revision(pod));
        }
        let history: Vec<&Arc<ControllerRevision>> = revisions
            .iter()
            .filter(|r| !live.contains(r.metadata.name.as_deref().unwrap_or_default()))
            .collect();
        let limit = revision_history_limit(set);
        let Ok(limit) = usize::try_from(limit) else {
            return Ok(());
        };
        if history.len() <= limit {
            return Ok(());
        }
        for revision in &history[..history.len() - limit] {
            self.history.delete_controller_revision(revision).await?;
        }
        Ok(())
    }

    /// The current and update revisions of `set` and its collision count, as upstream's
    /// `getStatefulSetRevisions`: the update revision is the latest one when it holds the
    /// set's template, an older equal one renumbered to come last (a rollback), or a new one;
    /// the current revision is `status.currentRevision`, or the update revision at first.
    async fn get_stateful_set_revisions(
        &self,
        set: &StatefulSet,
        revisions: &[Arc<ControllerRevision>],
    ) -> Result<(Arc<ControllerRevision>, Arc<ControllerRevision>, i32)> {
        let mut collision_count = set
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0);
        let candidate = new_revision(set, next_revision(revisions), collision_count);
        let equal = find_equal_revisions(revisions, &candidate);
        let update = match (equal.last(), revisions.last()) {
            (Some(eq), Some(latest)) if equal_revision(latest, eq) => Arc::clone(latest),
            (Some(eq), _) => Arc::new(
                self.history
                    .update_controller_revision(eq, candidate.revision)
                    .await?,
            ),
            (None, _) => Arc::new(
                self.history
                    .create_controller_revision(&set.metadata, &candidate, &mut collision_count)
                    .await?,
            ),
        };
        let current_name = set
            .status
            .as_ref()
            .and_then(|s| s.current_revision.as_deref());
        let current = revisions
            .iter()
            .find(|r| current_name.is_some() && r.metadata.name.as_deref() == current_name)
            .cloned()
            .unwrap_or_else(|| Arc::clone(&update));
        Ok((current, update, collision_count))
    }

    fn counts(
        &self,
        pods: &[Arc<Pod>],
        min_ready: i32,
        current: &str,
        update: &str,
    ) -> ReplicaCounts {
        let now = (self.clock)();
        let mut c = ReplicaCounts::default();
        for pod in pods {
            if is_created(pod) {
                c.replicas += 1;
            }
            if is_running_and_ready(pod) {
                c.ready += 1;
                if is_running_and_available(pod, min_ready, now) {
                    c.available += 1;
                }
            }
            if is_created(pod) && !is_terminating(pod) {
                let revision = pod_revision(pod);
                if revision == current {
                    c.current += 1;
                }
                if revision == update {
                    c.updated += 1;
                }
            }
        }
        c
    }

    /// Recounts `status` over the pod lists, as upstream's `updateStatus`.
    fn update_status(&self, status: &mut StatefulSetStatus, min_ready: i32, lists: &[&[Arc<Pod>]]) {
        let current = status.current_revision.clone().unwrap_or_default();
        let update = status.update_revision.clone().unwrap_or_default();
        let mut total = ReplicaCounts::default();
        for list in lists {
            let c = self.counts(list, min_ready, &current, &update);
            total.replicas += c.replicas;
            total.ready += c.ready;
            total.available += c.available;
            total.current += c.current;
            total.updated += c.updated;
        }
        status.replicas = total.replicas;
        status.ready_replicas = non_zero(total.ready);
        status.available_replicas = Some(total.available);
        status.current_replicas = non_zero(total.current);
        status.updated_replicas = non_zero(total.updated);
    }

    /// The pod pass, as upstream's `updateStatefulSet`: every wanted ordinal gets a pod at
    /// the right revision (created, or fixed up), unwanted ordinals are deleted highest first,
    /// then the rolling update deletes pods not at the update revision, highest ordinal first,
    /// down to the partition, within `maxUnavailable`. `OrderedReady` does one step at a time
    /// and waits for each pod to be Running, Ready and available; `Parallel` does them all.
    /// Returns the computed status with the pass's error (the status is written either way);
    /// an outer error means no status could be computed.
    async fn update_stateful_set_pods(
        &self,
        set: &StatefulSet,
        current_revision: &ControllerRevision,
        update_revision: &ControllerRevision,
        collision_count: i32,
        pods: &[Arc<Pod>],
    ) -> Result<(StatefulSetStatus, Result<()>)> {
        let current_set = apply_revision(set, current_revision)?;
        let update_set = apply_revision(set, update_revision)?;
        let current_name = current_revision.metadata.name.clone().unwrap_or_default();
        let update_name = update_revision.metadata.name.clone().unwrap_or_default();
        let min_ready = min_ready_seconds(set);
        let mut status = StatefulSetStatus {
            observed_generation: set.metadata.generation,
            current_revision: Some(current_name.clone()),
            update_revision: Some(update_name.clone()),
            collision_count: Some(collision_count),
            ..StatefulSetStatus::default()
        };
        self.update_status(&mut status, min_ready, &[pods]);

        let start = start_ordinal(set);
        let replica_count = usize::try_from(replicas(set)).unwrap_or(0);
        let mut slots: Vec<Option<Arc<Pod>>> = vec![None; replica_count];
        let mut condemned: Vec<Arc<Pod>> = Vec::new();
        for pod in pods {
            if pod_in_ordinal_range(pod, set) {
                if let Some(slot) = usize::try_from(ordinal(pod) - start)
                    .ok()
                    .and_then(|i| slots.get_mut(i))
                {
                    *slot = Some(Arc::clone(pod));
                }
            } else if ordinal(pod) >= 0 {
                condemned.push(Arc::clone(pod));
            }
            // Pods whose ordinal does not parse are ignored.
        }
        let replicas_list: Vec<Arc<Pod>> = (start..=end_ordinal(set))
            .zip(slots)
            .map(|(ord, slot)| {
                slot.unwrap_or_else(|| {
                    Arc::new(new_versioned_stateful_set_pod(
                        &current_set,
                        &update_set,
                        &current_name,
                        &update_name,
                        ord,
                    ))
                })
            })
            .collect();
        sort_descending_ordinal(&mut condemned);

        let now = (self.clock)();
        let first_unavailable: Option<String> = replicas_list
            .iter()
            .chain(condemned.iter().rev())
            .find(|p| is_unavailable(p, min_ready, now))
            .map(|p| name_of(p).to_owned());
        let unavailable = replicas_list
            .iter()
            .chain(condemned.iter())
            .filter(|p| is_unavailable(p, min_ready, now))
            .count();
        if unavailable > 0 {
            tracing::debug!(statefulset = %set_key(set), unavailable, pod = ?first_unavailable, "StatefulSet has unavailable Pods");
        }

        if set.metadata.deletion_timestamp.is_some() {
            return Ok((status, Ok(())));
        }
        let monotonic = !allows_burst(set);

        let (exit, result) = run_for_all(
            replicas_list.len(),
            |i| self.process_replica(set, &update_set, monotonic, &replicas_list[i]),
            monotonic,
        )
        .await;
        if exit || result.is_err() {
            self.update_status(&mut status, min_ready, &[&replicas_list, &condemned]);
            return Ok((status, result));
        }

        // Claims of condemned pods get the owners the retention policy asks for.
        let (exit, result) = run_for_all(
            condemned.len(),
            |i| self.fix_pod_claim(&update_set, &condemned[i]),
            monotonic,
        )
        .await;
        if exit || result.is_err() {
            self.update_status(&mut status, min_ready, &[&replicas_list, &condemned]);
            return Ok((status, result));
        }

        let (exit, result) = run_for_all(
            condemned.len(),
            |i| self.process_condemned(set, first_unavailable.as_deref(), monotonic, &condemned[i]),
            monotonic,
        )
        .await;
        if exit || result.is_err() {
            self.update_status(&mut status, min_ready, &[&replicas_list, &condemned]);
            return Ok((status, result));
        }
        self.update_status(&mut status, min_ready, &[&replicas_list, &condemned]);

        if strategy_type(set) == "OnDelete" {
            return Ok((status, Ok(())));
        }
        let result = if self.max_unavailable {
            self.rolling_update(set, &replicas_list, &update_name, &mut status)
                .await
        } else {
            self.rolling_update_one_at_a_time(set, &replicas_list, &update_name, &mut status)
                .await
        };
        Ok((status, result))
    }

    /// One wanted ordinal's step, as upstream's `processReplica`: a finished (failed or
    /// succeeded) pod is deleted to be recreated; a missing pod is created (after its claims);
    /// a pending one gets any missing claims; in `OrderedReady` mode a pod that is terminating,
    /// not yet Running and Ready, or not yet available stops the pass; finally identity,
    /// storage and claim ownership are fixed. `Ok(true)` stops a monotonic pass.
    async fn process_replica(
        &self,
        set: &StatefulSet,
        update_set: &StatefulSet,
        monotonic: bool,
        pod: &Pod,
    ) -> Result<bool> {
        let key = set_key(set);
        if is_failed(pod) || is_succeeded(pod) {
            if pod.metadata.deletion_timestamp.is_none() {
                self.pod_control.delete_stateful_pod(set, pod).await?;
            }
            // The replacement is made on a later pass, once this one is gone.
            return Ok(true);
        }
        if !is_created(pod) {
            if self.pod_control.pod_claim_is_stale(set, pod)? {
                // A claim still belongs to an earlier pod of this name: wait.
                return Ok(true);
            }
            self.pod_control.create_stateful_pod(set, pod).await?;
            if monotonic {
                return Ok(true);
            }
        }
        if is_pending(pod) {
            tracing::debug!(statefulset = %key, pod = name_of(pod), "StatefulSet is triggering PVC creation for pending Pod");
            self.pod_control
                .create_missing_persistent_volume_claims(set, pod)
                .await?;
        }
        if is_terminating(pod) && monotonic {
            tracing::debug!(statefulset = %key, pod = name_of(pod), "StatefulSet is waiting for Pod to Terminate");
            return Ok(true);
        }
        if !is_running_and_ready(pod) && monotonic {
            tracing::debug!(statefulset = %key, pod = name_of(pod), "StatefulSet is waiting for Pod to be Running and Ready");
            return Ok(true);
        }
        if !is_running_and_available(pod, min_ready_seconds(set), (self.clock)()) && monotonic {
            tracing::debug!(statefulset = %key, pod = name_of(pod), "StatefulSet is waiting for Pod to be Available");
            return Ok(true);
        }
        // A pod not fully updated yet fails the check; that counts as matching.
        let retention_match = self
            .pod_control
            .claims_match_retention_policy(update_set, pod)
            .unwrap_or(true);
        if identity_matches(set, pod) && storage_matches(set, pod) && retention_match {
            return Ok(false);
        }
        self.pod_control
            .update_stateful_pod(update_set, pod)
            .await?;
        Ok(false)
    }

    /// Sets the owners of a condemned pod's claims for the retention policy.
    async fn fix_pod_claim(&self, update_set: &StatefulSet, pod: &Pod) -> Result<bool> {
        if !self
            .pod_control
            .claims_match_retention_policy(update_set, pod)?
        {
            self.pod_control
                .update_pod_claim_for_retention_policy(update_set, pod)
                .await?;
        }
        Ok(false)
    }

    /// One unwanted ordinal's step, as upstream's `processCondemned`: wait for a terminating
    /// pod (monotonic), wait while a pod other than the first unhealthy one is not Running,
    /// Ready and available (monotonic), else delete it. Always stops a monotonic pass.
    async fn process_condemned(
        &self,
        set: &StatefulSet,
        first_unavailable: Option<&str>,
        monotonic: bool,
        pod: &Pod,
    ) -> Result<bool> {
        let key = set_key(set);
        if is_terminating(pod) {
            if monotonic {
                tracing::debug!(statefulset = %key, pod = name_of(pod), "StatefulSet is waiting for Pod to Terminate prior to scale down");
                return Ok(true);
            }
            return Ok(false);
        }
        let is_first_unhealthy = first_unavailable == Some(name_of(pod));
        if !is_running_and_ready(pod) && monotonic && !is_first_unhealthy {
            tracing::debug!(statefulset = %key, pod = ?first_unavailable, "StatefulSet is waiting for Pod to be Running and Ready prior to scale down");
            return Ok(true);
        }
        if !is_running_and_available(pod, min_ready_seconds(set), (self.clock)())
            && monotonic
            && !is_first_unhealthy
        {
            tracing::debug!(statefulset = %key, pod = ?first_unavailable, "StatefulSet is waiting for Pod to be Available prior to scale down");
            return Ok(true);
        }
        tracing::info!(statefulset = %key, pod = name_of(pod), "Pod of StatefulSet is terminating for scale down");
        self.pod_control.delete_stateful_pod(set, pod).await?;
        Ok(true)
    }

    /// The destructive part of a rolling update without the `MaxUnavailableStatefulSet` gate,
    /// as upstream's `updateStatefulSet`: from the highest ordinal down to the partition, the
    /// first pod not at the update revision (and not terminating) is deleted; an unavailable
    /// pod on the way waits for it.
    async fn rolling_update_one_at_a_time(
        &self,
        set: &StatefulSet,
        replicas_list: &[Arc<Pod>],
        update_revision: &str,
        status: &mut StatefulSetStatus,
    ) -> Result<()> {
        let update_min = rolling_update(set)
            .and_then(|r| r.partition)
            .and_then(|p| usize::try_from(p).ok())
            .unwrap_or(0);
        let now = (self.clock)();
        let min_ready = min_ready_seconds(set);
        for (target, pod) in replicas_list.iter().enumerate().rev() {
            if target < update_min {
                break;
            }
            if pod_revision(pod) != update_revision && !is_terminating(pod) {
                tracing::info!(statefulset = %set_key(set), pod = name_of(pod), "Pod of StatefulSet is terminating for update");
                let deleted = self.pod_control.delete_stateful_pod(set, pod).await;
                status.current_replicas = non_zero(status.current_replicas.unwrap_or(0) - 1);
                return match deleted {
                    Err(err) if !err.is_not_found() => Err(err),
                    _ => Ok(()),
                };
            }
            if is_unavailable(pod, min_ready, now) {
                tracing::debug!(statefulset = %set_key(set), pod = name_of(pod), "StatefulSet is waiting for Pod to update");
                return Ok(());
            }
        }
        Ok(())
    }

    /// The destructive part of a rolling update, as upstream's
    /// `updateStatefulSetAfterInvariantEstablished` (`MaxUnavailableStatefulSet`): with fewer
    /// than `maxUnavailable` unavailable pods, delete pods not at the update revision from the
    /// highest ordinal down to the partition, up to the difference.
    async fn rolling_update(
        &self,
        set: &StatefulSet,
        replicas_list: &[Arc<Pod>],
        update_revision: &str,
        status: &mut StatefulSetStatus,
    ) -> Result<()> {
        let replica_count = replicas(set);
        let (update_min, max_unavailable) = match rolling_update(set) {
            Some(r) => (
                r.partition.unwrap_or(0),
                max_unavailable(r.max_unavailable.as_ref(), replica_count)?,
            ),
            None => (0, 1),
        };
        let now = (self.clock)();
        let min_ready = min_ready_seconds(set);
        let unavailable = i32::try_from(
            replicas_list
                .iter()
                .filter(|p| is_unavailable(p, min_ready, now))
                .count(),
        )
        .unwrap_or(i32::MAX);
        if unavailable >= max_unavailable {
            tracing::info!(statefulset = %set_key(set), unavailable, max_unavailable, "StatefulSet found unavailablePods, more than or equal to allowed maxUnavailable");
            return Ok(());
        }
        let to_delete = max_unavailable - unavailable;
        let mut deleted = 0;
        let update_min = usize::try_from(update_min).unwrap_or(0);
        for (target, pod) in replicas_list.iter().enumerate().rev() {
            if target < update_min || deleted >= to_delete {
                break;
            }
            if pod_revision(pod) == update_revision || is_terminating(pod) {
                continue;
            }
            tracing::info!(statefulset = %set_key(set), pod = name_of(pod), "StatefulSet terminating Pod for update");
            match self.pod_control.delete_stateful_pod(set, pod).await {
                Ok(()) => {}
                Err(err) if err.is_not_found() => {}
                Err(err) => return Err(err),
            }
            deleted += 1;
            status.current_replicas = non_zero(status.current_replicas.unwrap_or(0) - 1);
        }
        Ok(())
    }

    /// Completes a finished rolling update in `status` and writes it when it differs from the
    /// set's, as upstream's `updateStatefulSetStatus`.
    async fn update_stateful_set_status(
        &self,
        set: &StatefulSet,
        status: &mut StatefulSetStatus,
    ) -> Result<()> {
        complete_rolling_update(set, status);
        if !inconsistent_status(set, status) {
            return Ok(());
        }
        self.status_updater
            .update_stateful_set_status(set, status)
            .await
            .map(drop)
    }
}

/// The set's selector; an unparsable one is an error.
pub(super) fn set_selector(set: &StatefulSet) -> Result<Selector> {
    match &set.spec {
        Some(spec) => {
            Selector::from_label_selector(&spec.selector).map_err(|source| Error::Selector {
                stateful_set: set_key(set),
                source,
            })
        }
        None => Ok(Selector::nothing()),
    }
}

/// `namespace/name` of `set`.
pub(super) fn set_key(set: &StatefulSet) -> String {
    format!(
        "{}/{}",
        set.metadata.namespace.as_deref().unwrap_or_default(),
        set.metadata.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
#[path = "control_tests.rs"]
mod tests;
