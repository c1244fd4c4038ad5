//! The StatefulSet sync pass: `sync`, `adoptOrphanRevisions`, `getPodsForStatefulSet` and `syncStatefulSet` (the rest of upstream's `stateful_set.go`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::controller::ref_manager::recheck_owner;
use kcm_machinery::controller::{PodControllerRefManager, get_controller_of};
use kcm_machinery::informer::index::NAMESPACE_INDEX;
use kcm_machinery::informer::keys::split_meta_namespace_key;
use kcm_machinery::labels::Selector;

use super::control::{set_key, set_selector};
use super::controller::StatefulSetController;
use super::utils::{is_member_of, min_ready_seconds, replicas};
use super::{Error, Result};

impl StatefulSetController {
    /// Syncs the StatefulSet with key `namespace/name`, as upstream's `sync`: adopts orphaned
    /// revisions, claims its pods (only pods named as its members), and runs one pass of the
    /// update logic. A set gone from the cache, or with an unusable selector, is not retried.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = self.sync_set(key).await;
        tracing::debug!(statefulset = key, duration = ?start.elapsed(), "Finished syncing statefulset");
        result
    }

    async fn sync_set(&self, key: &str) -> Result<()> {
        split_meta_namespace_key(key).map_err(|source| Error::InvalidKey {
            key: key.to_owned(),
            source,
        })?;
        let Some(set) = self.caches.sets.get_by_key(key) else {
            tracing::info!(statefulset = key, "StatefulSet has been deleted");
            return Ok(());
        };
        let selector = match set_selector(&set) {
            Ok(selector) => selector,
            Err(err) => {
                // Not transient: retrying cannot fix it.
                tracing::error!(statefulset = key, %err, "error converting StatefulSet selector");
                return Ok(());
            }
        };
        self.adopt_orphan_revisions(&set).await?;
        let pods = self.get_pods_for_stateful_set(&set, selector).await?;
        self.sync_stateful_set(&set, &pods).await
    }

    /// Adopts the orphaned revisions the set selects, after an uncached check that the set
    /// is still there, unchanged and not being deleted, as upstream's `adoptOrphanRevisions`.
    async fn adopt_orphan_revisions(&self, set: &StatefulSet) -> Result<()> {
        let orphans: Vec<_> = self
            .control
            .list_revisions(set)?
            .into_iter()
            .filter(|r| get_controller_of(&r.metadata).is_none())
            .collect();
        if orphans.is_empty() {
            return Ok(());
        }
        let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
        let name = set.metadata.name.as_deref().unwrap_or_default();
        let fresh =
            self.set_client
                .get(namespace, name)
                .await
                .map_err(|err| Error::CannotAdopt {
                    reason: err.to_string(),
                })?;
        if fresh.metadata.uid != set.metadata.uid {
            return Err(Error::CannotAdopt {
                reason: format!(
                    "original StatefulSet {namespace}/{name} is gone: got uid {}, wanted {}",
                    fresh.metadata.uid.unwrap_or_default(),
                    set.metadata.uid.clone().unwrap_or_default()
                ),
            });
        }
        if fresh.metadata.deletion_timestamp.is_some() {
            return Err(Error::CannotAdopt {
                reason: format!("{namespace}/{name} has just been deleted"),
            });
        }
        self.control.adopt_orphan_revisions(set, &orphans).await
    }

    /// The pods the set owns after adopting orphans named as its members and releasing owned
    /// pods that no longer match, as upstream's `getPodsForStatefulSet`.
    async fn get_pods_for_stateful_set(
        &self,
        set: &StatefulSet,
        selector: Selector,
    ) -> Result<Vec<Arc<Pod>>> {
        let namespace = set.metadata.namespace.clone().unwrap_or_default();
        let pods = self
            .caches
            .pods
            .by_index(NAMESPACE_INDEX, &namespace)
            .unwrap_or_else(|_| {
                self.caches
                    .pods
                    .list()
                    .into_iter()
                    .filter(|p| p.metadata.namespace.as_deref() == Some(namespace.as_str()))
                    .collect()
            });
        let client = Arc::clone(&self.set_client);
        let name = set.metadata.name.clone().unwrap_or_default();
        let can_adopt = recheck_owner(
            set,
            move || async move { client.get(&namespace, &name).await },
        );
        let manager = PodControllerRefManager::for_pods(
            Arc::clone(&self.pod_control),
            &set.metadata,
            selector,
            self.gvk.clone(),
            Some(can_adopt),
        );
        manager
            .claim_pods(&pods, |pod| is_member_of(set, pod))
            .await
            .map_err(|source| Error::ClaimPods {
                stateful_set: set_key(set),
                source: Box::new(source),
            })
    }

    /// One pass of the update logic; a set with `minReadySeconds` whose pods are not all
    /// available yet is looked at again after that long, as upstream's `syncStatefulSet`.
    async fn sync_stateful_set(&self, set: &StatefulSet, pods: &[Arc<Pod>]) -> Result<()> {
        tracing::debug!(statefulset = %set_key(set), pods = pods.len(), "Syncing StatefulSet");
        let status = self.control.update_stateful_set(set, pods).await?;
        let min_ready = min_ready_seconds(set);
        if let Some(status) = status
            && min_ready > 0
            && status.available_replicas.unwrap_or(0) != replicas(set)
        {
            self.handlers_enqueue_after(
                set,
                Duration::from_secs(u64::from(min_ready.unsigned_abs())),
            );
        }
        Ok(())
    }

    fn handlers_enqueue_after(&self, set: &StatefulSet, delay: Duration) {
        if let Ok(key) = kcm_machinery::informer::keys::meta_namespace_key(set) {
            self.queue.add_after(key, delay);
        }
    }
}
