//! One step of a Recreate rollout: every old ReplicaSet to zero, wait until no old pod runs, then the new ReplicaSet to full size (upstream `recreate.go`).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;

use super::Result;
use super::controller::DeploymentController;
use super::sync::{all_of, arcs_of, current, owned_targets, refs};
use super::util::accessors::deployment_replicas;
use super::util::counts::filter_active_replica_sets;
use super::util::progress_plan::deployment_complete;
use super::util::recreate_plan::{old_pods_running, scale_down_old_replica_sets_for_recreate};

impl DeploymentController {
    /// One Recreate step, as upstream's `rolloutRecreate`: scale every active old ReplicaSet
    /// to zero and stop if that changed anything; stop while any old pod may still run;
    /// then create the new ReplicaSet if missing (never before the old pods are gone),
    /// scale it to `spec.replicas`, and trim the history once the rollout is complete. The
    /// status is written in every case.
    pub(super) async fn rollout_recreate(
        &self,
        d: &mut Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
        pod_map: &HashMap<String, Vec<Arc<Pod>>>,
    ) -> Result<()> {
        // Not created yet: scaling up before the old pods are gone is what Recreate avoids.
        let (mut new_rs, mut old_rss) = self
            .get_all_replica_sets_and_sync_revision(d, key, rs_list, false)
            .await?;
        let mut all = all_of(new_rs.as_ref(), &old_rss);
        let active_old = arcs_of(&old_rss, &filter_active_replica_sets(&refs(&old_rss)));

        if self
            .scale_down_old_replica_sets_for_recreate(d, key, rs_list, &active_old)
            .await?
        {
            return self
                .sync_rollout_status(d, key, &all, new_rs.as_deref())
                .await;
        }

        let running = {
            let pods = pod_map
                .iter()
                .flat_map(|(uid, pods)| pods.iter().map(move |p| (uid.as_str(), p.as_ref())));
            old_pods_running(new_rs.as_deref(), &refs(&old_rss), pods)
        };
        if running {
            return self
                .sync_rollout_status(d, key, &all, new_rs.as_deref())
                .await;
        }

        if new_rs.is_none() {
            (new_rs, old_rss) = self
                .get_all_replica_sets_and_sync_revision(d, key, rs_list, true)
                .await?;
            all = all_of(new_rs.as_ref(), &old_rss);
        }

        if let Some(rs) = &new_rs {
            let rs = current(rs_list, rs);
            self.scale_replica_set_and_record_event(d, key, rs_list, &rs, deployment_replicas(d))
                .await?;
        }

        if deployment_complete(d, &d.status.clone().unwrap_or_default()) {
            self.cleanup_deployment(d, &old_rss).await?;
        }

        // As upstream, the status is computed from the ReplicaSets as listed: the new
        // ReplicaSet's scale-up shows in the next pass.
        self.sync_rollout_status(d, key, &all, new_rs.as_deref())
            .await
    }

    /// Scales every given (active) old ReplicaSet to zero; true if any was scaled, as
    /// upstream's `scaleDownOldReplicaSetsForRecreate`.
    async fn scale_down_old_replica_sets_for_recreate(
        &self,
        d: &Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
        old_rss: &[Arc<ReplicaSet>],
    ) -> Result<bool> {
        let targets = {
            let old = refs(old_rss);
            owned_targets(
                old_rss,
                None,
                &scale_down_old_replica_sets_for_recreate(&old),
            )
        };
        let mut scaled = false;
        for (rs, replicas) in targets {
            let rs = current(rs_list, &rs);
            let (changed, _) = self
                .scale_replica_set_and_record_event(d, key, rs_list, &rs, replicas)
                .await?;
            scaled |= changed;
        }
        Ok(scaled)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSetStatus;

    use super::super::test_support::{deployment, fixture, old_rs_for, pod_of, recreate};
    use super::super::util::accessors::{name, rs_replicas};
    use super::*;

    #[tokio::test]
    async fn old_pods_go_before_the_new_replica_set_is_created() {
        let f = fixture();
        let d = recreate(deployment("web", 3, 0, 0));
        let old = old_rs_for(&d, "image:v1", 3, 3, "1", 0);
        f.add_deployment(&d);
        f.add_rs(&old);
        let pods: Vec<Pod> = (0..3)
            .map(|i| pod_of(&old, &format!("old-{i}"), "Running"))
            .collect();
        for pod in &pods {
            f.add_pod(pod);
        }

        // Step 1: the old ReplicaSet goes to zero; nothing new yet.
        f.sync(&d).await.expect("step 1");
        assert_eq!(f.rs_updates(), vec![(name(&old.metadata).to_owned(), 0)]);
        assert!(f.created().is_empty());

        // Step 2: its status still reports 3 pods.
        f.settle(false);
        f.sync(&d).await.expect("step 2");
        assert!(f.created().is_empty(), "old ReplicaSet still reports pods");

        // Step 3: the status says 0 but one pod is still running.
        let mut stored = f
            .client
            .replica_set("default", name(&old.metadata))
            .expect("old");
        stored.status = Some(ReplicaSetStatus::default());
        f.client.insert_replica_set(stored);
        f.settle(false);
        for pod in &pods[..2] {
            f.pod_cache.delete(pod).expect("delete pod");
        }
        f.sync(&d).await.expect("step 3");
        assert!(f.created().is_empty(), "an old pod still runs");

        // Step 4: a finished pod does not count: the new ReplicaSet is created at full size.
        let mut finished = pods[2].clone();
        if let Some(s) = finished.status.as_mut() {
            s.phase = Some("Succeeded".into());
        }
        f.add_pod(&finished);
        f.sync(&d).await.expect("step 4");
        let created = f.created();
        assert_eq!(created.len(), 1);
        assert_eq!(rs_replicas(&created[0]), 3);
        assert_eq!(
            f.event_messages().last().map(String::as_str),
            Some(
                format!(
                    "Scaled up replica set {} from 0 to 3",
                    name(&created[0].metadata)
                )
                .as_str()
            )
        );
    }

    #[tokio::test]
    async fn existing_new_replica_set_is_scaled_up_once_old_pods_are_gone() {
        let f = fixture();
        let d = recreate(deployment("web", 3, 0, 0));
        let old = old_rs_for(&d, "image:v1", 0, 0, "1", 0);
        let mut new = super::super::test_support::rs_for(&d, 0, 0, "2", 10);
        new.status = Some(ReplicaSetStatus::default());
        f.add_deployment(&d);
        f.add_rs(&old);
        f.add_rs(&new);
        f.sync(&d).await.expect("sync");
        assert!(f.created().is_empty());
        assert_eq!(f.rs_updates(), vec![(name(&new.metadata).to_owned(), 3)]);
    }
}
