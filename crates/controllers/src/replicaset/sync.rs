//! The ReplicaSet sync pass: `syncReplicaSet`, `claimPods`, `manageReplicas` and the related-pod lookups (upstream `replica_set.go` from `manageReplicas` on).

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::join_all;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::controller::expectations::pod_keys;
use kcm_machinery::controller::ref_manager::recheck_owner;
use kcm_machinery::controller::{
    ApiStatus, PodControllerRefManager, SLOW_START_INITIAL_BATCH_SIZE, filter_active_pods,
    get_controller_of, get_pods_to_delete, is_pod_terminating, new_controller_ref, pod_key,
    slow_start_batch,
};
use kcm_machinery::informer::keys::split_meta_namespace_key;
use kcm_machinery::labels::Selector;

use super::controller::{
    CONTROLLER_UID_INDEX, OWN_WRITE_WAIT, ReplicaSetController, objects_in_namespace,
    replica_set_selector, seconds,
};
use super::status::{
    calculate_status, desired_replicas, min_ready_seconds, update_replica_set_status,
};
use super::{Error, Result};

impl ReplicaSetController {
    /// Syncs the ReplicaSet with key `namespace/name`, as upstream's `syncReplicaSet`: claims
    /// its pods, creates or deletes pods when its expectations are satisfied and it is not
    /// being deleted, and writes its status. Never run concurrently for one key.
    ///
    /// A ReplicaSet gone from the cache drops its expectations; an unusable selector is
    /// logged and not retried. The error returned (claim, status write, or the pod
    /// creations/deletions) makes the worker requeue the key rate-limited.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = self.sync_replica_set(key).await;
        tracing::debug!(kind = %self.gvk.kind, key, duration = ?start.elapsed(), "Finished syncing");
        result
    }

    async fn sync_replica_set(&self, key: &str) -> Result<()> {
        split_meta_namespace_key(key).map_err(|source| Error::InvalidKey {
            key: key.to_owned(),
            source,
        })?;
        self.wait_for_own_write(key).await;
        let Some(rs) = self.rs_cache.get_by_key(key) else {
            tracing::debug!(kind = %self.gvk.kind, key, "deleted");
            self.expectations.delete_expectations(key);
            return Ok(());
        };

        // Checked before listing pods: a pod observed in between can only make the list
        // fresher than the expectations, never staler.
        let rs_needs_sync = self.expectations.satisfied_expectations(key);
        let selector = match replica_set_selector(&rs) {
            Ok(selector) => selector,
            Err(err) => {
                tracing::error!(replica_set = key, %err, "error converting pod selector to selector");
                return Ok(());
            }
        };

        // Every pod of the namespace, so owned pods that no longer match are released.
        let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
        let all_pods = self.pods_in_namespace(namespace);
        let filtered_pods = filter_active_pods(&all_pods);
        let terminating = self
            .status_terminating_replicas
            .then(|| count_terminating_pods(&rs, &selector, &all_pods));
        let filtered_pods = self.claim_pods(&rs, key, selector, filtered_pods).await?;

        let manage_replicas_err = if rs_needs_sync && rs.metadata.deletion_timestamp.is_none() {
            self.manage_replicas(&filtered_pods, &rs, key).await.err()
        } else {
            None
        };

        let now = (self.clock)();
        let message = manage_replicas_err.as_ref().map(Error::condition_message);
        let new_status =
            calculate_status(&rs, &filtered_pods, terminating, message.as_deref(), now);
        let updated = update_replica_set_status(self.rs_client.as_ref(), &rs, new_status).await?;
        if let Some(updated) = &updated {
            self.record_own_write(key, updated);
        }
        let current = updated.as_ref().unwrap_or(&rs);

        // A last line of defence against clock skew: look again once the ready pods should
        // have become available.
        let min_ready = min_ready_seconds(current);
        let desired = desired_replicas(current);
        let (ready, available) = current.status.as_ref().map_or((0, 0), |s| {
            (
                s.ready_replicas.unwrap_or(0),
                s.available_replicas.unwrap_or(0),
            )
        });
        if manage_replicas_err.is_none()
            && min_ready > 0
            && ready == desired
            && available != desired
        {
            self.queue
                .add_after(key.to_owned(), seconds(i64::from(min_ready)));
        }
        manage_replicas_err.map_or(Ok(()), Err)
    }

    /// Waits, at most [`OWN_WRITE_WAIT`], until the ReplicaSet cache holds this controller's
    /// last status write to `key`: a pass over an older copy would compute a status against
    /// stale numbers and rewrite it with a stale resourceVersion (a conflict, a re-read and a
    /// second write). Past the bound the pass goes ahead, as upstream always does.
    async fn wait_for_own_write(&self, key: &str) {
        if let Some(writes) = &self.own_writes {
            writes.wait(key, OWN_WRITE_WAIT).await;
        }
    }

    /// Remembers the resourceVersion of a status write to `key` (when there is a cache to
    /// compare it with).
    fn record_own_write(&self, key: &str, written: &ReplicaSet) {
        if let Some(writes) = &self.own_writes {
            writes.record(key, written.metadata.resource_version.as_deref());
        }
    }

    /// Adopts the orphans `rs` selects and releases the pods it owns but no longer selects,
    /// returning the pods it owns afterwards, as upstream's `claimPods`. Before the first
    /// adoption the ReplicaSet is re-read from the API server: a ReplicaSet that is being
    /// deleted (or was replaced by a namesake) adopts nothing.
    async fn claim_pods(
        &self,
        rs: &ReplicaSet,
        key: &str,
        selector: Selector,
        filtered_pods: Vec<Arc<Pod>>,
    ) -> Result<Vec<Arc<Pod>>> {
        let client = Arc::clone(&self.rs_client);
        let namespace = rs.metadata.namespace.clone().unwrap_or_default();
        let name = rs.metadata.name.clone().unwrap_or_default();
        let can_adopt = recheck_owner(
            rs,
            move || async move { client.get(&namespace, &name).await },
        );
        let manager = PodControllerRefManager::for_pods(
            Arc::clone(&self.pod_control),
            &rs.metadata,
            selector,
            self.gvk.clone(),
            Some(can_adopt),
        );
        manager
            .claim_pods(&filtered_pods, |_| true)
            .await
            .map_err(|source| Error::ClaimPods {
                replica_set: key.to_owned(),
                source,
            })
    }

    /// Creates or deletes pods so that `filtered_pods` moves toward `spec.replicas`, at most
    /// `burst_replicas` of them, as upstream's `manageReplicas`.
    ///
    /// Expectations are raised before acting. Creations go in slow-start batches; the ones
    /// never attempted after a failing batch are taken off the expectations, and a creation
    /// refused because the namespace is terminating counts as done (the namespace will
    /// never take it). Deletions pick victims by [`get_pods_to_delete`], run concurrently,
    /// and take each failed one off the expectations; NotFound is not an error.
    async fn manage_replicas(
        &self,
        filtered_pods: &[Arc<Pod>],
        rs: &ReplicaSet,
        key: &str,
    ) -> Result<()> {
        let desired = usize::try_from(desired_replicas(rs)).unwrap_or(0);
        let current = filtered_pods.len();
        let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
        // Events name the managed kind (an RC behind the adapter), as upstream's
        // `podControlAdapter` converts the object back before recording.
        let controller = ObjectReference {
            api_version: Some(self.gvk.api_version()),
            kind: Some(self.gvk.kind.clone()),
            name: rs.metadata.name.clone(),
            namespace: rs.metadata.namespace.clone(),
            uid: rs.metadata.uid.clone(),
            resource_version: rs.metadata.resource_version.clone(),
            ..ObjectReference::default()
        };

        if current < desired {
            let diff = (desired - current).min(self.burst_replicas);
            // Raised before the first request, or a fast watch could observe a pod before
            // the expectation exists.
            self.expectations.expect_creations(key, as_i64(diff));
            tracing::info!(
                replica_set = key,
                need = desired,
                creating = diff,
                "Too few replicas"
            );
            let default_template = PodTemplateSpec::default();
            let template = rs
                .spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .unwrap_or(&default_template);
            let controller_ref = new_controller_ref(&rs.metadata, &self.gvk);
            let (successes, err) = slow_start_batch(diff, SLOW_START_INITIAL_BATCH_SIZE, || {
                self.create_pod(namespace, template, &controller, &controller_ref)
            })
            .await;
            let skipped = diff - successes;
            if skipped > 0 {
                tracing::info!(
                    replica_set = key,
                    pods_skipped = skipped,
                    "Slow-start failure. Skipping creation of pods, decrementing expectations"
                );
                self.expectations
                    .lower_expectations(key, as_i64(skipped), 0);
            }
            return match err {
                Some(source) => Err(Error::CreatePods {
                    replica_set: key.to_owned(),
                    source,
                }),
                None => Ok(()),
            };
        }

        if current > desired {
            let diff = (current - desired).min(self.burst_replicas);
            tracing::info!(
                replica_set = key,
                need = desired,
                deleting = diff,
                "Too many replicas"
            );
            let related_pods = self.get_indirectly_related_pods(rs);
            let now = (self.clock)();
            let pods_to_delete =
                get_pods_to_delete(filtered_pods.to_vec(), &related_pods, diff, now);
            if diff < filtered_pods.len()
                && let Some(metrics) = &self.metrics
            {
                metrics.report_sorting_deletion_age_ratio(filtered_pods, &pods_to_delete, now);
            }
            // Keys, not a count: each deletion is observed exactly once, whether seen as a
            // deletionTimestamp update or as the delete itself.
            self.expectations
                .expect_deletions(key, pod_keys(pods_to_delete.iter().map(Arc::as_ref)));
            let deletions = pods_to_delete.iter().map(|pod| {
                let controller = &controller;
                async move {
                    let name = pod.metadata.name.as_deref().unwrap_or_default();
                    let err = self
                        .pod_control
                        .delete_pod(namespace, name, controller)
                        .await
                        .err()?;
                    // The informer will never see this deletion.
                    let pod_key = pod_key(pod);
                    self.expectations.deletion_observed(key, &pod_key);
                    if err.is_not_found() {
                        return None;
                    }
                    tracing::info!(
                        replica_set = key,
                        pod = %pod_key,
                        "Failed to delete pod, decremented expectations"
                    );
                    Some(err)
                }
            });
            let first_error = join_all(deletions).await.into_iter().flatten().next();
            if let Some(source) = first_error {
                return Err(Error::DeletePods {
                    replica_set: key.to_owned(),
                    source,
                });
            }
        }
        Ok(())
    }

    /// One creation of a slow-start batch: a refusal because the namespace is terminating
    /// counts as success, as upstream's closure passed to `slowStartBatch`.
    async fn create_pod(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        controller: &k8s_openapi::api::core::v1::ObjectReference,
        controller_ref: &OwnerReference,
    ) -> std::result::Result<(), kcm_machinery::controller::pod_control::Error> {
        match self
            .pod_control
            .create_pods(namespace, template, controller, controller_ref)
            .await
        {
            Err(err) if err.is_namespace_terminating() => Ok(()),
            other => other,
        }
    }

    // -----------------------------------------------------------------------------------------
    // Helpers
    // -----------------------------------------------------------------------------------------

    /// Every cached pod of `namespace`.
    fn pods_in_namespace(&self, namespace: &str) -> Vec<Arc<Pod>> {
        objects_in_namespace(&self.pod_cache, namespace)
    }

    /// The ReplicaSets with the same controller (Deployment) as `rs`, `rs` included, as
    /// upstream's `getReplicaSetsWithSameController`. Empty when `rs` has no controller.
    pub fn get_replica_sets_with_same_controller(&self, rs: &ReplicaSet) -> Vec<Arc<ReplicaSet>> {
        let Some(controller_ref) = get_controller_of(&rs.metadata) else {
            tracing::error!(
                replica_set = ?rs.metadata.name,
                "ReplicaSet has no controller"
            );
            return Vec::new();
        };
        match self
            .rs_cache
            .by_index(CONTROLLER_UID_INDEX, &controller_ref.uid)
        {
            Ok(related) => related,
            Err(err) => {
                tracing::error!(%err, "listing ReplicaSets by controller UID");
                Vec::new()
            }
        }
    }

    /// The pods selected by any ReplicaSet with the same controller as `rs` (each once), as
    /// upstream's `getIndirectlyRelatedPods`: the co-location context for scale-down ranking.
    pub fn get_indirectly_related_pods(&self, rs: &ReplicaSet) -> Vec<Arc<Pod>> {
        let mut seen: HashSet<String> = HashSet::new();
        let mut related = Vec::new();
        for related_rs in self.get_replica_sets_with_same_controller(rs) {
            // An invalid selector matches no pods.
            let Ok(selector) = replica_set_selector(&related_rs) else {
                continue;
            };
            let namespace = related_rs.metadata.namespace.as_deref().unwrap_or_default();
            for pod in self.pods_in_namespace(namespace) {
                if !selector.matches_opt(pod.metadata.labels.as_ref()) {
                    continue;
                }
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                if seen.insert(uid) {
                    related.push(pod);
                }
            }
        }
        related
    }
}

/// How many of `pods` are terminating (being deleted, not yet terminal) with `rs` as their
/// controller and labels its selector matches, as upstream's `FilterTerminatingPods` then
/// `FilterClaimedPods`.
fn count_terminating_pods(rs: &ReplicaSet, selector: &Selector, pods: &[Arc<Pod>]) -> i32 {
    let n = pods
        .iter()
        .filter(|pod| is_pod_terminating(pod))
        .filter(|pod| {
            get_controller_of(&pod.metadata)
                .is_some_and(|r| Some(r.uid.as_str()) == rs.metadata.uid.as_deref())
        })
        .filter(|pod| selector.matches_opt(pod.metadata.labels.as_ref()))
        .count();
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn as_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
