//! One step of a rolling update: grow the new ReplicaSet within `maxSurge`, shrink the old ones within `maxUnavailable` (upstream `rolling.go`).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::controller::DeploymentController;
use super::sync::{all_of, arcs_of, current, owned_targets, refs};
use super::util::accessors::{deployment_replicas, rs_replicas, rs_status_replicas};
use super::util::counts::filter_active_replica_sets;
use super::util::progress_plan::deployment_complete;
use super::util::rolling_plan::{reconcile_new_replica_set, reconcile_old_replica_sets};
use super::util::strategy::max_surge;
use super::{Error, Result};

impl DeploymentController {
    /// One rolling-update step, as upstream's `rolloutRolling`: create the new ReplicaSet if
    /// needed; scale it up (or down to `spec.replicas`) as far as allowed, and if that changed
    /// anything stop there; otherwise scale the old ones down as far as allowed, and if that
    /// changed nothing and the rollout is complete, trim the history. The status is written in
    /// every case.
    pub(super) async fn rollout_rolling(
        &self,
        d: &mut Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
    ) -> Result<()> {
        let (new_rs, old_rss) = self
            .get_all_replica_sets_and_sync_revision(d, key, rs_list, true)
            .await?;
        let Some(new_rs) = new_rs else {
            // Creation either succeeds or fails the pass; kept for robustness.
            let all = all_of(None, &old_rss);
            return self.sync_rollout_status(d, key, &all, None).await;
        };
        let all = all_of(Some(&new_rs), &old_rss);

        if self
            .reconcile_new_replica_set(d, key, rs_list, &all, &new_rs)
            .await?
        {
            return self
                .sync_current_rollout_status(d, key, rs_list, &new_rs, &old_rss)
                .await;
        }

        let active_old = arcs_of(&old_rss, &filter_active_replica_sets(&refs(&old_rss)));
        match self
            .reconcile_old_replica_sets(d, key, rs_list, &all, &active_old, &new_rs)
            .await
        {
            OldScaled::Yes => {
                return self
                    .sync_current_rollout_status(d, key, rs_list, &new_rs, &old_rss)
                    .await;
            }
            OldScaled::Failed(err) => {
                self.sync_current_rollout_status(d, key, rs_list, &new_rs, &old_rss)
                    .await?;
                return Err(err);
            }
            OldScaled::No => {}
        }

        let complete = deployment_complete(d, &d.status.clone().unwrap_or_default());
        if complete {
            self.cleanup_deployment(d, &old_rss).await?;
        }
        self.sync_current_rollout_status(d, key, rs_list, &new_rs, &old_rss)
            .await
    }

    /// [`Self::sync_rollout_status`] over the current versions of the pass's ReplicaSets.
    async fn sync_current_rollout_status(
        &self,
        d: &mut Deployment,
        key: &str,
        rs_list: &[Arc<ReplicaSet>],
        new_rs: &Arc<ReplicaSet>,
        old_rss: &[Arc<ReplicaSet>],
    ) -> Result<()> {
        let new_rs = current(rs_list, new_rs);
        let old_rss: Vec<Arc<ReplicaSet>> = old_rss.iter().map(|rs| current(rs_list, rs)).collect();
        let all = all_of(Some(&new_rs), &old_rss);
        self.sync_rollout_status(d, key, &all, Some(&new_rs)).await
    }

    /// Scales the new ReplicaSet toward `spec.replicas` within `maxSurge`; true if its size
    /// changed, as upstream's `reconcileNewReplicaSet` (with the surge budget also counting
    /// pods not yet removed, see [`cap_surge_by_existing_pods`]).
    async fn reconcile_new_replica_set(
        &self,
        d: &Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
        all_rss: &[Arc<ReplicaSet>],
        new_rs: &Arc<ReplicaSet>,
    ) -> Result<bool> {
        let next = reconcile_new_replica_set(d, &refs(all_rss), new_rs).map_err(|source| {
            Error::Rolling {
                deployment: key.to_owned(),
                source,
            }
        })?;
        let Some(next) = next.map(|n| cap_surge_by_existing_pods(d, all_rss, new_rs, n)) else {
            return Ok(false);
        };
        if next == rs_replicas(new_rs) {
            return Ok(false);
        }
        let (scaled, _) = self
            .scale_replica_set_and_record_event(d, key, rs_list, new_rs, next)
            .await?;
        Ok(scaled)
    }

    /// Scales the active old ReplicaSets down: first by their unhealthy replicas, then while
    /// more than `spec.replicas - maxUnavailable` pods stay available; true if anything was
    /// scaled down, as upstream's `reconcileOldReplicaSets`.
    ///
    /// As upstream, a failed write here does not stop the pass: the status is still written.
    /// Unlike upstream (which reports "nothing scaled" and forgets the key, so a 500 or 429
    /// that no later change of the Deployment follows stalls the rollout until the informer's
    /// resync, 12 to 24 hours later), the error is then returned and the key retried with
    /// the queue's backoff.
    async fn reconcile_old_replica_sets(
        &self,
        d: &Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
        all_rss: &[Arc<ReplicaSet>],
        old_rss: &[Arc<ReplicaSet>],
        new_rs: &Arc<ReplicaSet>,
    ) -> OldScaled {
        let (cleanup, scale_down, cleanup_count, scale_down_count, aborted) = {
            let all = refs(all_rss);
            let old = refs(old_rss);
            let plan = reconcile_old_replica_sets(d, &all, &old, new_rs);
            (
                owned_targets(old_rss, None, &plan.cleanup),
                owned_targets(old_rss, None, &plan.scale_down),
                plan.cleanup_count,
                plan.scale_down_count,
                plan.aborted,
            )
        };
        for (rs, replicas) in cleanup {
            let rs = current(rs_list, &rs);
            if let Err(err) = self
                .scale_replica_set_and_record_event(d, key, rs_list, &rs, replicas)
                .await
            {
                tracing::info!(deployment = key, %err, "cleaning up unhealthy replicas");
                return OldScaled::Failed(err);
            }
        }
        tracing::debug!(
            deployment = key,
            count = cleanup_count,
            "Cleaned up unhealthy replicas from old RSes"
        );
        if let Some(err) = aborted {
            tracing::info!(deployment = key, %err, "not scaling down old replica sets");
            return OldScaled::No;
        }
        for (rs, replicas) in scale_down {
            let rs = current(rs_list, &rs);
            if let Err(err) = self
                .scale_replica_set_and_record_event(d, key, rs_list, &rs, replicas)
                .await
            {
                tracing::info!(deployment = key, %err, "scaling down old replica sets");
                return OldScaled::Failed(err);
            }
        }
        tracing::debug!(
            deployment = key,
            count = scale_down_count,
            "Scaled down old RSes"
        );
        if cleanup_count + scale_down_count > 0 {
            OldScaled::Yes
        } else {
            OldScaled::No
        }
    }
}

/// What [`DeploymentController::reconcile_old_replica_sets`] did to the old ReplicaSets.
enum OldScaled {
    /// At least one was scaled down.
    Yes,
    /// Nothing needed (or was allowed) to change.
    No,
    /// A scale-down write failed; the pass still writes the status, then retries.
    Failed(Error),
}

/// Limits a scale-up of the new ReplicaSet to `next` so that the pods that exist, not only
/// the pods asked for, stay within `spec.replicas + maxSurge`.
///
/// A deliberate difference from upstream, whose surge budget counts only `spec.replicas` of
/// the ReplicaSets: right after an old ReplicaSet is scaled down, its ReplicaSet controller
/// has not yet deleted the pod, and upstream may already grow the new ReplicaSet into the
/// freed slot, so for a moment one pod too many runs. Here a ReplicaSet whose status still
/// reports more pods than its spec counts with those pods; the new ReplicaSet grows on the
/// sync that follows the old one's status update. A scale-down is never limited.
fn cap_surge_by_existing_pods(
    d: &Deployment,
    all_rss: &[Arc<ReplicaSet>],
    new_rs: &ReplicaSet,
    next: i32,
) -> i32 {
    let current = rs_replicas(new_rs);
    if next <= current {
        return next;
    }
    let max_total = deployment_replicas(d).saturating_add(max_surge(d));
    let existing: i32 = all_rss
        .iter()
        .map(|rs| rs_replicas(rs).max(rs_status_replicas(rs)))
        .sum();
    let room = max_total.saturating_sub(existing).max(0);
    next.min(current.saturating_add(room))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSetStatus;
    use kcm_machinery::controller::api_status;

    use super::super::client::Verb;
    use super::super::{Error, Operation};

    use super::super::test_support::{deployment, fixture, old_rs_for};
    use super::super::util::accessors::{name, rs_available_replicas, rs_replicas};
    use super::super::util::conditions::{
        DEPLOYMENT_AVAILABLE, DEPLOYMENT_PROGRESSING, NEW_RS_AVAILABLE_REASON,
        get_deployment_condition, reason,
    };

    #[tokio::test]
    async fn failed_scale_down_still_writes_the_status_and_is_retried() {
        // 10 replicas, maxSurge 2, maxUnavailable 1: the first pass creates the new
        // ReplicaSet at 2 and scales the old one to 9; that update fails with a 500.
        let f = fixture();
        let d = deployment("web", 10, 2, 1);
        let old = old_rs_for(&d, "image:v1", 10, 10, "1", 0);
        f.add_deployment(&d);
        f.add_rs(&old);
        f.client.set_error(
            Verb::UpdateReplicaSet,
            Some(api_status::internal_error("etcdserver: request timed out")),
        );

        let err = f.sync(&d).await.expect_err("the scale-down failed");
        assert!(
            matches!(
                err,
                Error::Api {
                    operation: Operation::UpdateReplicaSet,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(f.created().len(), 1, "the new ReplicaSet was created");
        let stored_old = f
            .client
            .replica_set("default", name(&old.metadata))
            .expect("the old ReplicaSet");
        assert_eq!(rs_replicas(&stored_old), 10, "no scale went through");
        // The creation's Progressing condition, then the pass's counts.
        let status = f.status_updates();
        assert_eq!(status.len(), 2, "the status is written before the retry");
        let written = status[1].status.clone().unwrap_or_default();
        // The new ReplicaSet has no pods yet: the old one's 10 are all there are.
        assert_eq!(written.replicas, Some(10));
        assert_eq!(written.observed_generation, d.metadata.generation);

        // The retry, with the server healthy again, finishes the step.
        f.client.set_error(Verb::UpdateReplicaSet, None);
        f.settle(false);
        f.client.clear_actions();
        f.sync(&d).await.expect("the retry");
        assert_eq!(f.rs_updates(), vec![(name(&old.metadata).to_owned(), 9)]);
    }

    #[tokio::test]
    async fn first_steps_surge_then_scale_down_within_max_unavailable() {
        // Upstream's rolling-update arithmetic for 10 replicas, maxSurge 2, maxUnavailable 1.
        let f = fixture();
        let d = deployment("web", 10, 2, 1);
        let old = old_rs_for(&d, "image:v1", 10, 10, "1", 0);
        f.add_deployment(&d);
        f.add_rs(&old);

        // Step 1: the new ReplicaSet starts at maxSurge; its 2 pods are not available, so
        // 12 - 9 - 2 = 1 old pod may go in the same pass.
        f.sync(&d).await.expect("step 1");
        let created = f.created();
        assert_eq!(created.len(), 1);
        assert_eq!(rs_replicas(&created[0]), 2);
        let new_name = name(&created[0].metadata).to_owned();
        assert_eq!(f.rs_updates(), vec![(name(&old.metadata).to_owned(), 9)]);

        // Step 2: the old pod is gone; one slot under the surge limit: the new ReplicaSet
        // grows by one, and the pass stops there.
        settle_with_lag(&f);
        f.client.clear_actions();
        f.sync(&d).await.expect("step 2");
        assert_eq!(f.rs_updates(), vec![(new_name.clone(), 3)]);

        // Step 3: 12 pods, 9 available, 3 new unavailable: nothing may go.
        f.settle(false);
        f.client.clear_actions();
        f.sync(&d).await.expect("step 3");
        assert!(f.rs_updates().is_empty());
        assert_eq!(
            f.event_messages(),
            vec![
                format!("Scaled up replica set {new_name} from 0 to 2"),
                format!(
                    "Scaled down replica set {} from 10 to 9",
                    name(&old.metadata)
                ),
                format!("Scaled up replica set {new_name} from 2 to 3"),
            ]
        );
    }

    #[tokio::test]
    async fn unhealthy_old_replicas_are_cleaned_up_first() {
        // Old ReplicaSet: 10 wanted, only 4 available. Availability (4) is already below
        // the floor (9), so a plain scale-down would never happen; the unavailable old pods
        // are removed first instead, within allPods - minAvailable - newUnavailable.
        let f = fixture();
        let d = deployment("web", 10, 2, 1);
        let old = old_rs_for(&d, "image:v1", 10, 4, "1", 0);
        f.add_deployment(&d);
        f.add_rs(&old);
        let mut new = super::super::test_support::rs_for(&d, 0, 0, "2", 10);
        if let Some(s) = new.spec.as_mut() {
            s.replicas = Some(0);
        }
        new.status = Some(ReplicaSetStatus::default());
        f.add_rs(&new);
        f.sync(&d).await.expect("scale up");
        // 10 old pods of 12 allowed: the new one goes to 2.
        assert_eq!(f.rs_updates(), vec![(name(&new.metadata).to_owned(), 2)]);
        f.settle(false);
        f.client.clear_actions();
        f.sync(&d).await.expect("clean up");
        // 12 - 9 - 2 = 1 pod may go: an unhealthy one.
        assert_eq!(f.rs_updates(), vec![(name(&old.metadata).to_owned(), 9)]);
    }

    #[tokio::test]
    async fn surge_counts_pods_the_old_replica_set_has_not_removed_yet() {
        let f = fixture();
        let d = deployment("web", 10, 2, 1);
        // Scaled down to 9 by the last step, but its status still reports 10 pods.
        let mut old = old_rs_for(&d, "image:v1", 9, 9, "1", 0);
        if let Some(s) = old.status.as_mut() {
            s.replicas = 10;
        }
        let new = super::super::test_support::rs_for(&d, 2, 0, "2", 10);
        f.add_deployment(&d);
        f.add_rs(&old);
        f.add_rs(&new);
        f.sync(&d).await.expect("sync");
        assert!(f.rs_updates().is_empty(), "12 pods exist: no room");

        // The pod is gone: the new ReplicaSet takes the slot.
        let mut gone = f
            .client
            .replica_set("default", name(&old.metadata))
            .expect("old");
        if let Some(s) = gone.status.as_mut() {
            s.replicas = 9;
        }
        f.client.insert_replica_set(gone);
        f.settle(false);
        f.sync(&d).await.expect("sync");
        assert_eq!(f.rs_updates(), vec![(name(&new.metadata).to_owned(), 3)]);
    }

    /// Plays the ReplicaSet controller with a lag: pods created by the last step become
    /// available at the next one; pods of a scaled-down ReplicaSet go at once.
    fn settle_with_lag(f: &super::super::test_support::Fixture) {
        for mut rs in f.client.replica_sets() {
            let spec = rs_replicas(&rs);
            let had = rs.status.as_ref().map_or(0, |s| s.replicas);
            let available = spec.min(had);
            rs.status = Some(ReplicaSetStatus {
                replicas: spec,
                ready_replicas: Some(available),
                available_replicas: Some(available),
                observed_generation: rs.metadata.generation,
                ..Default::default()
            });
            f.client.insert_replica_set(rs);
        }
        f.settle(false);
    }

    #[tokio::test]
    async fn rollout_never_exceeds_surge_nor_drops_below_min_available() {
        let f = fixture();
        let d = deployment("web", 10, 2, 1);
        f.add_deployment(&d);
        f.add_rs(&old_rs_for(&d, "image:v1", 10, 10, "1", 0));
        let mut done = false;
        for step in 0..60 {
            f.sync(&d).await.expect("sync");
            let rss = f.client.replica_sets();
            let wanted: i32 = rss.iter().map(rs_replicas).sum();
            assert!(wanted <= 12, "step {step}: {wanted} pods wanted");
            settle_with_lag(&f);
            let rss = f.client.replica_sets();
            let available: i32 = rss.iter().map(rs_available_replicas).sum();
            assert!(available >= 9, "step {step}: only {available} available");
            let status = f.stored(&d).status.unwrap_or_default();
            let complete = get_deployment_condition(&status, DEPLOYMENT_PROGRESSING)
                .is_some_and(|c| reason(c) == NEW_RS_AVAILABLE_REASON);
            if complete {
                done = true;
                break;
            }
        }
        assert!(done, "the rollout completes");
        let rss = f.client.replica_sets();
        let mut sizes: Vec<(i32, i32)> = rss
            .iter()
            .map(|rs| (rs_replicas(rs), rs_available_replicas(rs)))
            .collect();
        sizes.sort_unstable();
        assert_eq!(sizes, vec![(0, 0), (10, 10)]);
        let status = f.stored(&d).status.unwrap_or_default();
        assert_eq!(status.updated_replicas, Some(10));
        assert_eq!(status.available_replicas, Some(10));
        assert_eq!(status.replicas, Some(10));
        let available = get_deployment_condition(&status, DEPLOYMENT_AVAILABLE).expect("Available");
        assert_eq!(available.status, "True");
    }
}
