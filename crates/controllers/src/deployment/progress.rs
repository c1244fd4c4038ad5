//! Writing the rollout status with its `Progressing` condition, and requeueing a Deployment to check its progress deadline (upstream `progress.go`).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};

use super::Result;
use super::controller::DeploymentController;
use super::sync::refs;
use super::util::progress_plan::{StuckCheck, requeue_stuck_deployment, sync_rollout_status};
use super::util::status::deployment_status_equal;

impl DeploymentController {
    /// Writes the status with the `Progressing` transitions of a rollout (complete,
    /// progressing, timed out) and the `ReplicaFailure` condition when it differs from the
    /// current one; otherwise requeues the Deployment to check its progress deadline, as
    /// upstream's `syncRolloutStatus`.
    pub(super) async fn sync_rollout_status(
        &self,
        d: &mut Deployment,
        key: &str,
        all_rss: &[Arc<ReplicaSet>],
        new_rs: Option<&ReplicaSet>,
    ) -> Result<()> {
        let now = (self.clock)();
        let new_status = sync_rollout_status(d, &refs(all_rss), new_rs, now);
        if deployment_status_equal(d.status.as_ref(), Some(&new_status)) {
            self.requeue_stuck_deployment(d, key, &new_status, now);
            return Ok(());
        }
        d.status = Some(new_status);
        self.update_status(key, d).await
    }

    /// Requeues a rollout whose status did not change so that it is looked at again when its
    /// progress deadline passes: rate limited when that is less than a second away, else
    /// after the remaining time plus a second, as upstream's `requeueStuckDeployment`.
    pub(super) fn requeue_stuck_deployment(
        &self,
        d: &Deployment,
        key: &str,
        new_status: &DeploymentStatus,
        now: Timestamp,
    ) -> StuckCheck {
        let check = requeue_stuck_deployment(d, new_status, now);
        match check {
            StuckCheck::NotNeeded => {}
            StuckCheck::Now => {
                tracing::debug!(
                    deployment = key,
                    "Queueing up deployment for a progress check now"
                );
                self.queue.add_rate_limited(key.to_owned());
            }
            StuckCheck::After(after) => {
                tracing::debug!(
                    deployment = key,
                    queue_after_secs = after.as_secs(),
                    "Queueing up deployment for a progress check"
                );
                if let Some(delay) = check.queue_delay() {
                    self.queue.add_after(key.to_owned(), delay);
                }
            }
        }
        check
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::test_support::{at, deployment, fixture, rs_for};
    use super::super::util::accessors::name;
    use super::super::util::conditions::{
        CONDITION_FALSE, DEPLOYMENT_PROGRESSING, REPLICA_SET_UPDATED_REASON, TIMED_OUT_REASON,
        get_deployment_condition, reason,
    };
    use super::*;

    fn progressing(d: &Deployment) -> Option<(String, String, String)> {
        let status = d.status.clone().unwrap_or_default();
        get_deployment_condition(&status, DEPLOYMENT_PROGRESSING).map(|c| {
            (
                c.status.clone(),
                reason(c).to_owned(),
                c.message.clone().unwrap_or_default(),
            )
        })
    }

    #[tokio::test(start_paused = true)]
    async fn stuck_rollout_is_requeued_for_its_deadline_then_times_out() {
        let f = fixture();
        let mut d = deployment("web", 1, 1, 0);
        if let Some(s) = d.spec.as_mut() {
            s.progress_deadline_seconds = Some(60);
        }
        let new = rs_for(&d, 1, 0, "1", 0);
        f.add_deployment(&d);
        f.add_rs(&new);

        // t=0: the new ReplicaSet's pod exists: progress.
        f.sync(&d).await.expect("sync at 0");
        let written = f.stored(&d);
        assert_eq!(
            progressing(&written).map(|(_, r, _)| r),
            Some(REPLICA_SET_UPDATED_REASON.to_owned())
        );

        // t=30: nothing changed: no write, a check is queued for the deadline (+1 s).
        f.settle(false);
        f.set_time(at(30));
        let writes_before = f.status_updates().len();
        f.sync(&d).await.expect("sync at 30");
        assert_eq!(f.status_updates().len(), writes_before, "no write");
        assert!(f.controller.queue().is_empty());
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(f.controller.queue().is_empty(), "not before the deadline");
        tokio::time::advance(Duration::from_secs(1)).await;
        tokio::task::yield_now().await;
        assert_eq!(f.controller.queue().len(), 1, "queued at the deadline");

        // t=61: past the deadline: ProgressDeadlineExceeded.
        f.set_time(at(61));
        f.sync(&d).await.expect("sync at 61");
        let timed_out = f.stored(&d);
        assert_eq!(
            progressing(&timed_out),
            Some((
                CONDITION_FALSE.to_owned(),
                TIMED_OUT_REASON.to_owned(),
                format!(
                    "ReplicaSet {:?} has timed out progressing.",
                    name(&new.metadata)
                )
            ))
        );

        // Timed out: no further checks are queued.
        f.settle(false);
        let queued = f.controller.queue().len();
        f.set_time(at(200));
        f.sync(&d).await.expect("sync at 200");
        tokio::time::advance(Duration::from_secs(3600)).await;
        tokio::task::yield_now().await;
        assert_eq!(f.controller.queue().len(), queued);
    }
}
