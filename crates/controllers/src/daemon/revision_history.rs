//! DaemonSet revision history: the current ControllerRevision and the old ones, as upstream's `constructHistory`, `controlledHistories`, `dedupCurHistories`, `snapshot`, `cleanupHistory`, `Match` and `getPatch` (`update.go`).

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kcm_machinery::controller::history::{
    RevisionPatcher, compare_by_revision, go_json, max_revision, pod_template_value,
    revision_data_bytes,
};
use kcm_machinery::controller::ref_manager::{ControllerRefManager, recheck_owner};
use kcm_machinery::controller::{ApiStatus, compute_hash, new_controller_ref};
use kube::api::Patch;
use serde_json::{Value, json};

use super::controller::{DaemonSetsController, daemon_set_selector, objects_in_namespace};
use super::util::{DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY, ds_key};
use super::{Error, Result};

/// The strategic-merge patch that restores `ds`'s pod template (`{"spec":{"template":
/// {..., "$patch":"replace"}}}`), the data of its revisions, as upstream's `getPatch`
/// (and kubectl's: `kubectl rollout undo` applies it).
pub fn get_patch(ds: &DaemonSet) -> Value {
    let template = ds
        .spec
        .as_ref()
        .map(|s| pod_template_value(&s.template))
        .unwrap_or_else(|| pod_template_value(&Default::default()));
    let mut template = template;
    if let Some(t) = template.as_object_mut() {
        t.insert("$patch".to_owned(), Value::String("replace".to_owned()));
    }
    json!({"spec": {"template": template}})
}

/// Whether `history` records `ds`'s current template (byte-equal data), as upstream's
/// `Match`.
pub fn daemon_set_matches(ds: &DaemonSet, history: &ControllerRevision) -> bool {
    go_json::marshal(&get_patch(ds)) == revision_data_bytes(history)
}

fn hash_label(revision: &ControllerRevision) -> Option<&str> {
    revision
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY))
        .map(String::as_str)
}

impl DaemonSetsController {
    fn revision_error(
        ds: &DaemonSet,
        verb: &'static str,
        revision: &str,
    ) -> impl FnOnce(kube::Error) -> Error {
        let revision = format!(
            "{}/{revision}",
            ds.metadata.namespace.as_deref().unwrap_or_default()
        );
        move |source| Error::Revision {
            verb,
            revision,
            source,
        }
    }

    /// The current revision of `ds` (created if missing, renumbered to the newest) and the
    /// old ones, as upstream's `constructHistory`. Revisions without the hash label get it
    /// (their name, so a collision cannot bite); duplicate current revisions are merged.
    pub(super) async fn construct_history(
        &self,
        ds: &DaemonSet,
    ) -> Result<(Arc<ControllerRevision>, Vec<Arc<ControllerRevision>>)> {
        let histories = self.controlled_histories(ds).await?;
        let mut current: Vec<Arc<ControllerRevision>> = Vec::new();
        let mut old: Vec<Arc<ControllerRevision>> = Vec::new();
        for history in histories {
            let history = if hash_label(&history).is_none() {
                let name = history.metadata.name.clone().unwrap_or_default();
                let mut to_update = (*history).clone();
                to_update
                    .metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .insert(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY.to_owned(), name.clone());
                Arc::new(
                    self.revision_client
                        .update(&to_update)
                        .await
                        .map_err(Self::revision_error(ds, "update", &name))?,
                )
            } else {
                history
            };
            if daemon_set_matches(ds, &history) {
                current.push(history);
            } else {
                old.push(history);
            }
        }

        let curr_revision = max_revision(&old) + 1;
        let cur = if let Some(first) = current.first() {
            let cur = self.dedup_cur_histories(ds, first, &current).await?;
            if cur.revision < curr_revision {
                let mut to_update = (*cur).clone();
                to_update.revision = curr_revision;
                let name = to_update.metadata.name.clone().unwrap_or_default();
                self.revision_client
                    .update(&to_update)
                    .await
                    .map_err(Self::revision_error(ds, "update", &name))?;
            }
            cur
        } else {
            Arc::new(self.snapshot(ds, curr_revision).await?)
        };
        Ok((cur, old))
    }

    /// The ControllerRevisions `ds` controls after adopting matching orphans and releasing
    /// owned ones that no longer match, as upstream's `controlledHistories`.
    async fn controlled_histories(&self, ds: &DaemonSet) -> Result<Vec<Arc<ControllerRevision>>> {
        let key = ds_key(ds);
        let selector = daemon_set_selector(ds).map_err(|source| Error::Selector {
            daemon_set: key.clone(),
            source,
        })?;
        let namespace = ds.metadata.namespace.clone().unwrap_or_default();
        let histories = objects_in_namespace(&self.history_cache, &namespace);
        let client = Arc::clone(&self.ds_client);
        let name = ds.metadata.name.clone().unwrap_or_default();
        let can_adopt = recheck_owner(
            ds,
            move || async move { client.get(&namespace, &name).await },
        );
        let manager = ControllerRefManager::new(
            RevisionPatcher(Arc::clone(&self.revision_client)),
            &ds.metadata,
            selector,
            self.gvk.clone(),
            Some(can_adopt),
        );
        manager
            .claim(&histories, |_| true)
            .await
            .map_err(|source| Error::ClaimRevisions {
                daemon_set: key,
                source: Box::new(source),
            })
    }

    /// Keeps the current revision with the highest number, relabels the pods of the others
    /// to it and deletes them, as upstream's `dedupCurHistories`.
    async fn dedup_cur_histories(
        &self,
        ds: &DaemonSet,
        first: &Arc<ControllerRevision>,
        current: &[Arc<ControllerRevision>],
    ) -> Result<Arc<ControllerRevision>> {
        // The last of the highest-numbered ones wins, as upstream's `>=` scan.
        let keep = current.iter().fold(Arc::clone(first), |keep, cur| {
            if cur.revision >= keep.revision {
                Arc::clone(cur)
            } else {
                keep
            }
        });
        if current.len() == 1 {
            return Ok(keep);
        }
        let keep_hash = hash_label(&keep).unwrap_or_default().to_owned();
        let namespace = ds.metadata.namespace.as_deref().unwrap_or_default();
        for pod in self.get_daemon_pods(ds).await? {
            let pod_hash = pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY))
                .map(String::as_str)
                .unwrap_or_default();
            if pod_hash == keep_hash {
                continue;
            }
            let patch =
                json!({"metadata": {"labels": {DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY: keep_hash}}});
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            self.pod_control
                .patch_pod(namespace, name, &Patch::Merge(patch))
                .await
                .map_err(|source| Error::RelabelPod {
                    daemon_set: ds_key(ds),
                    source: Box::new(source),
                })?;
        }
        for cur in current {
            if cur.metadata.name == keep.metadata.name {
                continue;
            }
            let name = cur.metadata.name.as_deref().unwrap_or_default();
            self.revision_client
                .delete(namespace, name)
                .await
                .map_err(Self::revision_error(ds, "delete", name))?;
        }
        Ok(keep)
    }

    /// Records `ds`'s template as revision `revision`, named `<ds>-<pod-template hash with the
    /// collision count>`, as upstream's `snapshot`. A name taken by the same template returns
    /// that revision; taken by another, the DaemonSet's `collisionCount` is bumped (unless the
    /// count used was stale) and the AlreadyExists error returned, so the next sync tries the
    /// next name.
    async fn snapshot(&self, ds: &DaemonSet, revision: i64) -> Result<ControllerRevision> {
        let patch = get_patch(ds);
        let collision_count = ds.status.as_ref().and_then(|s| s.collision_count);
        let template = ds
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        let hash = compute_hash(&template, collision_count);
        let ds_name = ds.metadata.name.as_deref().unwrap_or_default();
        let name = format!("{ds_name}-{hash}");
        let namespace = ds.metadata.namespace.as_deref().unwrap_or_default();
        let mut labels = template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        labels.insert(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY.to_owned(), hash);
        let history = ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.to_owned()),
                labels: Some(labels),
                annotations: ds.metadata.annotations.clone(),
                owner_references: Some(vec![new_controller_ref(&ds.metadata, &self.gvk)]),
                ..ObjectMeta::default()
            },
            data: Some(RawExtension(patch)),
            revision,
        };
        let outer = match self.revision_client.create(namespace, &history).await {
            Ok(created) => return Ok(created),
            Err(err) if err.is_already_exists() => err,
            Err(err) => return Err(Self::revision_error(ds, "create", &name)(err)),
        };
        let existing = self
            .revision_client
            .get(namespace, &name)
            .await
            .map_err(Self::revision_error(ds, "get", &name))?;
        if daemon_set_matches(ds, &existing) {
            return Ok(existing);
        }
        // A different template owns the name: bump the collision count on a fresh copy.
        let mut current = self
            .ds_client
            .get(namespace, ds_name)
            .await
            .map_err(|source| Error::Get {
                daemon_set: ds_key(ds),
                source,
            })?;
        let current_count = current.status.as_ref().and_then(|s| s.collision_count);
        if current_count != collision_count {
            return Err(Error::StaleCollisionCount {
                daemon_set: ds_name.to_owned(),
                seen: collision_count.unwrap_or(0),
                current: current_count.unwrap_or(0),
            });
        }
        let status = current.status.get_or_insert_with(Default::default);
        let bumped = status.collision_count.unwrap_or(0).saturating_add(1);
        status.collision_count = Some(bumped);
        self.ds_client
            .update_status(&current)
            .await
            .map_err(|source| Error::UpdateStatus {
                daemon_set: ds_key(ds),
                source,
            })?;
        tracing::info!(daemonset = %ds_key(ds), collision_count = bumped, "Found a hash collision for DaemonSet - bumping collisionCount to resolve it");
        Err(Self::revision_error(ds, "create", &name)(outer))
    }

    /// Deletes the oldest old revisions no pod runs, until at most `revisionHistoryLimit`
    /// old ones remain, as upstream's `cleanupHistory`.
    pub(super) async fn cleanup_history(
        &self,
        ds: &DaemonSet,
        old: &[Arc<ControllerRevision>],
    ) -> Result<()> {
        let node_to_daemon_pods = self.get_nodes_to_daemon_pods(ds, true).await?;
        let to_keep = ds
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(10);
        let mut to_kill = i64::try_from(old.len()).unwrap_or(i64::MAX) - i64::from(to_keep);
        if to_kill <= 0 {
            return Ok(());
        }
        let live_hashes: HashSet<&str> = node_to_daemon_pods
            .values()
            .flatten()
            .filter_map(|pod| {
                pod.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY))
                    .map(String::as_str)
                    .filter(|h| !h.is_empty())
            })
            .collect();
        let mut sorted = old.to_vec();
        sorted.sort_by(|a, b| compare_by_revision(a, b));
        let namespace = ds.metadata.namespace.as_deref().unwrap_or_default();
        for history in sorted {
            if to_kill <= 0 {
                break;
            }
            if hash_label(&history).is_some_and(|h| live_hashes.contains(h)) {
                continue;
            }
            let name = history.metadata.name.as_deref().unwrap_or_default();
            self.revision_client
                .delete(namespace, name)
                .await
                .map_err(Self::revision_error(ds, "delete", name))?;
            to_kill -= 1;
        }
        Ok(())
    }
}
