//! Syncing a Deployment's ReplicaSets and status: the new ReplicaSet and revisions, scaling, history cleanup and the status write (upstream `sync.go`).
//!
//! Every function takes the pass's ReplicaSet list (`rs_list`, claimed at the start of the
//! sync) and replaces each ReplicaSet it writes with the object the server returned, so later
//! steps of the same pass act on the current resourceVersion. (Upstream keeps the listed
//! objects; a second write to the same ReplicaSet in one pass then conflicts and the key is
//! retried.)

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::events::EventType;

use super::controller::DeploymentController;
use super::util::accessors::{is_paused, name, object_key, revision_history_limit, rs_replicas};
use super::util::annotations::next_revision;
use super::util::cleanup::old_replica_sets_to_delete;
use super::util::conditions::{FAILED_RS_CREATE_REASON, SCALING_REPLICA_SET_REASON};
use super::util::find::{find_new_replica_set, find_old_replica_sets};
use super::util::new_replica_set::{
    bump_collision_count, is_own_new_replica_set, new_replica_set, record_found_new_replica_set,
    record_new_replica_set_create_failure, record_new_replica_set_created,
    sync_existing_new_replica_set,
};
use super::util::progress_plan::check_paused_conditions;
use super::util::rollback_plan::rollback_to;
use super::util::scale::{
    ScalePlan, is_scaling_event, scale, scaled_replica_set, scaling_event_message,
};
use super::util::status::{calculate_status, deployment_status_equal};
use super::util::strategy::has_revision_history_limit;
use super::{Error, Operation, Result};

/// The ReplicaSets of `rs` as the borrowed slices the decision layer takes.
pub(super) fn refs(rss: &[Arc<ReplicaSet>]) -> Vec<&ReplicaSet> {
    rss.iter().map(Arc::as_ref).collect()
}

/// The `Arc`s of `rs_list` that `chosen` (borrowed from it) points to, in `chosen`'s order.
pub(super) fn arcs_of(rs_list: &[Arc<ReplicaSet>], chosen: &[&ReplicaSet]) -> Vec<Arc<ReplicaSet>> {
    chosen
        .iter()
        .filter_map(|c| {
            rs_list
                .iter()
                .find(|a| std::ptr::eq(a.as_ref(), *c))
                .cloned()
        })
        .collect()
}

/// Puts `written` in place of the ReplicaSet with its UID (or, without one, its name) in
/// `rs_list`, or appends it.
pub(super) fn replace(rs_list: &mut Vec<Arc<ReplicaSet>>, written: Arc<ReplicaSet>) {
    let same = |rs: &Arc<ReplicaSet>| match (&rs.metadata.uid, &written.metadata.uid) {
        (Some(a), Some(b)) => a == b,
        _ => rs.metadata.name == written.metadata.name,
    };
    match rs_list.iter_mut().find(|rs| same(rs)) {
        Some(slot) => *slot = written,
        None => rs_list.push(written),
    }
}

/// The current version in `rs_list` of `rs` (by UID, else name), or `rs` itself.
pub(super) fn current(rs_list: &[Arc<ReplicaSet>], rs: &Arc<ReplicaSet>) -> Arc<ReplicaSet> {
    rs_list
        .iter()
        .find(|c| match (&c.metadata.uid, &rs.metadata.uid) {
            (Some(a), Some(b)) => a == b,
            _ => c.metadata.name == rs.metadata.name,
        })
        .cloned()
        .unwrap_or_else(|| Arc::clone(rs))
}

/// The old ReplicaSets followed by the new one, if any (upstream's `append(oldRSs, newRS)`).
pub(super) fn all_of(
    new_rs: Option<&Arc<ReplicaSet>>,
    old_rss: &[Arc<ReplicaSet>],
) -> Vec<Arc<ReplicaSet>> {
    let mut all = old_rss.to_vec();
    all.extend(new_rs.cloned());
    all
}

impl DeploymentController {
    /// Writes only the status: the Deployment is being deleted, so nothing is created or
    /// scaled, as upstream's `syncStatusOnly`.
    pub(super) async fn sync_status_only(
        &self,
        d: &mut Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
    ) -> Result<()> {
        let (new_rs, old_rss) = self
            .get_all_replica_sets_and_sync_revision(d, key, rs_list, false)
            .await?;
        let all = all_of(new_rs.as_ref(), &old_rss);
        self.sync_deployment_status(d, key, &all, new_rs.as_deref())
            .await
    }

    /// Scales a paused Deployment or one whose `spec.replicas` changed, cleans up the history
    /// of a paused one, and writes the status, as upstream's `sync`.
    pub(super) async fn sync_scale(
        &self,
        d: &mut Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
    ) -> Result<()> {
        let (new_rs, old_rss) = self
            .get_all_replica_sets_and_sync_revision(d, key, rs_list, false)
            .await?;
        // A failed scale requeues the Deployment; this pass stops here.
        self.scale(d, key, rs_list, new_rs.as_ref(), &old_rss)
            .await?;
        let new_rs = new_rs.map(|rs| current(rs_list, &rs));
        let old_rss: Vec<Arc<ReplicaSet>> = old_rss.iter().map(|rs| current(rs_list, rs)).collect();

        if is_paused(d) && rollback_to(d).is_none() {
            self.cleanup_deployment(d, &old_rss).await?;
        }

        let all = all_of(new_rs.as_ref(), &old_rss);
        self.sync_deployment_status(d, key, &all, new_rs.as_deref())
            .await
    }

    /// Adds `DeploymentPaused` or `DeploymentResumed` to the `Progressing` condition when the
    /// pause state flipped, and writes the status, as upstream's `checkPausedConditions`.
    pub(super) async fn check_paused_conditions(
        &self,
        d: &mut Deployment,
        key: &str,
    ) -> Result<()> {
        if !check_paused_conditions(d, (self.clock)()) {
            return Ok(());
        }
        self.update_status(key, d).await
    }

    /// The new ReplicaSet (created when `create` and missing) and every old one, with the new
    /// one's and the Deployment's revision brought up to date, as upstream's
    /// `getAllReplicaSetsAndSyncRevision`.
    pub(super) async fn get_all_replica_sets_and_sync_revision(
        &self,
        d: &mut Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
        create: bool,
    ) -> Result<(Option<Arc<ReplicaSet>>, Vec<Arc<ReplicaSet>>)> {
        let old_rss = {
            let all = refs(rs_list);
            let (_, old) = find_old_replica_sets(d, &all);
            arcs_of(rs_list, &old)
        };
        let new_rs = self
            .get_new_replica_set(d, key, rs_list, &old_rss, create)
            .await?;
        Ok((new_rs, old_rss))
    }

    /// The ReplicaSet running the Deployment's current template, as upstream's
    /// `getNewReplicaSet`:
    ///
    /// - if it exists, its annotations (revision one above every old ReplicaSet's, the
    ///   Deployment's annotations) and `minReadySeconds` are brought up to date; otherwise the
    ///   Deployment takes its revision and, with a progress deadline and no `Progressing`
    ///   condition yet, `FoundNewReplicaSet`;
    /// - if it does not exist and `create` is set, it is created (`<name>-<hash>`, sized by
    ///   the strategy); a name taken by our own ReplicaSet (a stale cache) is that ReplicaSet,
    ///   one taken by anything else is a hash collision: `collisionCount` goes up and the
    ///   sync fails, to retry with a new name. A failed create is reported as a
    ///   `ReplicaSetCreateError` event and, with a deadline, a `Progressing=False` condition.
    async fn get_new_replica_set(
        &self,
        d: &mut Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
        old_rss: &[Arc<ReplicaSet>],
        create: bool,
    ) -> Result<Option<Arc<ReplicaSet>>> {
        let new_revision = next_revision(&refs(old_rss));
        let existing = {
            let all = refs(rs_list);
            find_new_replica_set(d, &all).map(|rs| arcs_of(rs_list, &[rs]))
        };
        if let Some(existing) = existing.and_then(|mut v| v.pop()) {
            if let Some(updated) = sync_existing_new_replica_set(d, &existing, &new_revision) {
                let written = self.update_replica_set(key, &updated).await?;
                replace(rs_list, Arc::clone(&written));
                return Ok(Some(written));
            }
            if record_found_new_replica_set(d, &existing, (self.clock)()) {
                self.update_status(key, d).await?;
            }
            return Ok(Some(existing));
        }
        if !create {
            return Ok(None);
        }

        let new_rs = new_replica_set(d, &refs(old_rss), &new_revision).map_err(|source| {
            Error::NewReplicaSetSize {
                deployment: key.to_owned(),
                source,
            }
        })?;
        let new_replicas = rs_replicas(&new_rs);
        let rs_key = object_key(&new_rs.metadata);
        let rs_name = name(&new_rs.metadata).to_owned();
        let (created, already_exists) = match self.client.create_replica_set(&new_rs).await {
            Ok(created) => {
                self.record_replica_set_write(key, &created);
                (Arc::new(created), false)
            }
            // A slow cache or a fast resync: the ReplicaSet may be ours already.
            Err(err) if err.is_already_exists() => {
                let namespace = new_rs.metadata.namespace.as_deref().unwrap_or_default();
                let Some(found) = self.rs_lister.get(namespace, &rs_name) else {
                    return Err(Error::Api {
                        operation: Operation::CreateReplicaSet,
                        object: rs_key,
                        source: err,
                    });
                };
                if is_own_new_replica_set(d, &found) {
                    (found, true)
                } else {
                    let (before, after) = bump_collision_count(d);
                    if self.update_status(key, d).await.is_ok() {
                        tracing::info!(
                            deployment = key,
                            old_collision_count = before,
                            new_collision_count = after,
                            "Found a hash collision for deployment - bumping collisionCount to resolve it"
                        );
                    }
                    return Err(Error::HashCollision {
                        deployment: key.to_owned(),
                        replica_set: rs_key,
                        source: err,
                    });
                }
            }
            // Every later create would fail too; nothing to report.
            Err(err) if err.is_namespace_terminating() => {
                return Err(Error::Api {
                    operation: Operation::CreateReplicaSet,
                    object: rs_key,
                    source: err,
                });
            }
            Err(err) => {
                let (message, changed) = record_new_replica_set_create_failure(
                    d,
                    &rs_name,
                    &error_message(&err),
                    (self.clock)(),
                );
                if changed {
                    // The create failure is the bigger problem to report.
                    let _ = self.update_status(key, d).await;
                }
                self.event(d, EventType::Warning, FAILED_RS_CREATE_REASON, message);
                return Err(Error::Api {
                    operation: Operation::CreateReplicaSet,
                    object: rs_key,
                    source: err,
                });
            }
        };
        if !already_exists && new_replicas > 0 {
            self.event(
                d,
                EventType::Normal,
                SCALING_REPLICA_SET_REASON,
                scaling_event_message(name(&created.metadata), 0, new_replicas),
            );
        }
        replace(rs_list, Arc::clone(&created));
        if record_new_replica_set_created(
            d,
            name(&created.metadata),
            &new_revision,
            already_exists,
            (self.clock)(),
        ) {
            self.update_status(key, d).await?;
        }
        Ok(Some(created))
    }

    /// Whether `spec.replicas` changed since the active ReplicaSets were last sized, as
    /// upstream's `isScalingEvent` (which also syncs the revisions).
    pub(super) async fn is_scaling_event(
        &self,
        d: &mut Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
    ) -> Result<bool> {
        let (new_rs, old_rss) = self
            .get_all_replica_sets_and_sync_revision(d, key, rs_list, false)
            .await?;
        let all = all_of(new_rs.as_ref(), &old_rss);
        Ok(is_scaling_event(d, &refs(&all)))
    }

    /// Applies [`scale`]'s plan (the only active ReplicaSet to `spec.replicas`, or the old
    /// ones to zero under a saturated new one, or proportional scaling), stopping at the first
    /// failed write, as upstream's `scale`.
    pub(super) async fn scale(
        &self,
        d: &Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
        new_rs: Option<&Arc<ReplicaSet>>,
        old_rss: &[Arc<ReplicaSet>],
    ) -> Result<()> {
        let (proportional, targets) = {
            let old = refs(old_rss);
            let plan = scale(d, new_rs.map(Arc::as_ref), &old);
            tracing::debug!(deployment = key, plan = ?plan.sizes(), "scaling");
            match plan {
                ScalePlan::Nothing => return Ok(()),
                ScalePlan::Each(targets) => (false, owned_targets(rs_list, new_rs, &targets)),
                ScalePlan::Proportional(targets) => {
                    (true, owned_targets(rs_list, new_rs, &targets))
                }
            }
        };
        for (rs, replicas) in targets {
            let rs = current(rs_list, &rs);
            if proportional {
                self.scale_replica_set(d, key, rs_list, &rs, replicas)
                    .await?;
            } else {
                self.scale_replica_set_and_record_event(d, key, rs_list, &rs, replicas)
                    .await?;
            }
        }
        Ok(())
    }

    /// Scales `rs` to `new_scale` unless it already has that size, as upstream's
    /// `scaleReplicaSetAndRecordEvent`. Returns whether it was scaled and its current version.
    pub(super) async fn scale_replica_set_and_record_event(
        &self,
        d: &Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
        rs: &Arc<ReplicaSet>,
        new_scale: i32,
    ) -> Result<(bool, Arc<ReplicaSet>)> {
        if rs_replicas(rs) == new_scale {
            return Ok((false, Arc::clone(rs)));
        }
        self.scale_replica_set(d, key, rs_list, rs, new_scale).await
    }

    /// Writes `rs` with `new_scale` replicas and up-to-date `desired-replicas`/`max-replicas`
    /// annotations when either differs, recording a `ScalingReplicaSet` event ("Scaled up
    /// replica set web-5d9 from 1 to 3") when the size changed, as upstream's
    /// `scaleReplicaSet`. Returns whether the size changed and the current version.
    pub(super) async fn scale_replica_set(
        &self,
        d: &Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
        rs: &Arc<ReplicaSet>,
        new_scale: i32,
    ) -> Result<(bool, Arc<ReplicaSet>)> {
        let Some(updated) = scaled_replica_set(d, rs, new_scale) else {
            return Ok((false, Arc::clone(rs)));
        };
        let old_scale = rs_replicas(rs);
        let written = self.update_replica_set(key, &updated).await?;
        replace(rs_list, Arc::clone(&written));
        let scaled = old_scale != new_scale;
        if scaled {
            self.event(
                d,
                EventType::Normal,
                SCALING_REPLICA_SET_REASON,
                scaling_event_message(name(&written.metadata), old_scale, new_scale),
            );
        }
        Ok((scaled, written))
    }

    /// Deletes the oldest old ReplicaSets beyond `revisionHistoryLimit` that have no pods,
    /// stopping at the first failure other than NotFound (to avoid hammering an overloaded
    /// server), as upstream's `cleanupDeployment`.
    pub(super) async fn cleanup_deployment(
        &self,
        d: &Deployment,
        old_rss: &[Arc<ReplicaSet>],
    ) -> Result<()> {
        if !has_revision_history_limit(d) {
            return Ok(());
        }
        let old = refs(old_rss);
        let to_delete = old_replica_sets_to_delete(&old, revision_history_limit(d));
        if to_delete.is_empty() {
            return Ok(());
        }
        tracing::debug!(deployment = %object_key(&d.metadata), "Looking to cleanup old replica sets for deployment");
        for rs in to_delete {
            let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
            tracing::debug!(
                replica_set = %object_key(&rs.metadata),
                deployment = %object_key(&d.metadata),
                "Trying to cleanup replica set for deployment"
            );
            match self
                .client
                .delete_replica_set(namespace, name(&rs.metadata))
                .await
            {
                Ok(()) => {}
                Err(err) if err.is_not_found() => {}
                Err(source) => {
                    return Err(Error::Api {
                        operation: Operation::DeleteReplicaSet,
                        object: object_key(&rs.metadata),
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    /// Writes the status computed from the ReplicaSets ([`calculate_status`]) when it differs
    /// from the current one, as upstream's `syncDeploymentStatus`.
    pub(super) async fn sync_deployment_status(
        &self,
        d: &mut Deployment,
        key: &str,
        all_rss: &[Arc<ReplicaSet>],
        new_rs: Option<&ReplicaSet>,
    ) -> Result<()> {
        let new_status = calculate_status(&refs(all_rss), new_rs, d, (self.clock)());
        if deployment_status_equal(d.status.as_ref(), Some(&new_status)) {
            return Ok(());
        }
        d.status = Some(new_status);
        self.update_status(key, d).await
    }
}

/// The targets of a scale plan as owned `(ReplicaSet, size)` pairs, so the pass's list can be
/// updated while they are applied.
pub(super) fn owned_targets(
    rs_list: &[Arc<ReplicaSet>],
    new_rs: Option<&Arc<ReplicaSet>>,
    targets: &[super::util::scale::ScaleTarget<'_>],
) -> Vec<(Arc<ReplicaSet>, i32)> {
    targets
        .iter()
        .map(|t| {
            let arc = rs_list
                .iter()
                .chain(new_rs)
                .find(|a| std::ptr::eq(a.as_ref(), t.rs))
                .cloned()
                .unwrap_or_else(|| Arc::new(t.rs.clone()));
            (arc, t.replicas)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::DeploymentStatus;
    use kcm_machinery::controller::api_status;
    use kcm_machinery::events::EventType;

    use super::super::client::{DeploymentAction, Verb};
    use super::super::test_support::{
        deployment, fixture, key, labels, old_rs_for, rs_for, with_image,
    };
    use super::super::util::accessors::annotation;
    use super::super::util::annotations::{
        DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, REVISION_ANNOTATION,
        REVISION_HISTORY_ANNOTATION,
    };
    use super::super::util::conditions::{
        CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN, DEPLOYMENT_PROGRESSING,
        NEW_REPLICA_SET_REASON, PAUSED_DEPLOY_REASON, RESUMED_DEPLOY_REASON,
        get_deployment_condition, reason,
    };
    use super::super::util::new_replica_set::pod_template_hash;
    use super::super::util::template::DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY;
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

    #[tokio::test]
    async fn creates_the_new_replica_set_with_hash_name_revision_and_event() {
        let f = fixture();
        let d = deployment("web", 3, 1, 0);
        f.add_deployment(&d);
        f.sync(&d).await.expect("sync");

        let created = f.created();
        assert_eq!(created.len(), 1, "one ReplicaSet created");
        let rs = &created[0];
        let hash = pod_template_hash(&d);
        let rs_name = format!("web-{hash}");
        assert_eq!(name(&rs.metadata), rs_name);
        let hash_label = |l: Option<&std::collections::BTreeMap<String, String>>| {
            l.and_then(|l| l.get(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY).cloned())
        };
        let spec = rs.spec.as_ref().expect("spec");
        assert_eq!(hash_label(rs.metadata.labels.as_ref()), Some(hash.clone()));
        assert_eq!(
            hash_label(spec.selector.match_labels.as_ref()),
            Some(hash.clone())
        );
        let template_labels = spec
            .template
            .as_ref()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.as_ref());
        assert_eq!(hash_label(template_labels), Some(hash.clone()));
        assert_eq!(rs_replicas(rs), 3);
        assert_eq!(annotation(&rs.metadata, REVISION_ANNOTATION), Some("1"));
        assert_eq!(
            annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION),
            Some("3")
        );
        assert_eq!(annotation(&rs.metadata, MAX_REPLICAS_ANNOTATION), Some("4"));
        let owner = &rs.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Deployment", "uid-web")
        );

        let events = f.recorder.events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].type_, EventType::Normal);
        assert_eq!(events[0].reason, "ScalingReplicaSet");
        assert_eq!(
            events[0].message,
            format!("Scaled up replica set {rs_name} from 0 to 3")
        );
        assert_eq!(events[0].regarding.kind.as_deref(), Some("Deployment"));
        assert_eq!(events[0].regarding.name.as_deref(), Some("web"));

        let first = &f.status_updates()[0];
        assert_eq!(annotation(&first.metadata, REVISION_ANNOTATION), Some("1"));
        assert_eq!(
            progressing(first),
            Some((
                CONDITION_TRUE.to_owned(),
                NEW_REPLICA_SET_REASON.to_owned(),
                format!("Created new replica set {rs_name:?}")
            ))
        );
        let stored = f.stored(&d);
        assert_eq!(annotation(&stored.metadata, REVISION_ANNOTATION), Some("1"));
    }

    #[tokio::test]
    async fn hash_collision_bumps_collision_count_and_fails() {
        let f = fixture();
        let d = deployment("web", 3, 1, 0);
        f.add_deployment(&d);
        // Someone else's ReplicaSet took the name.
        let mut foreign = rs_for(&with_image(d.clone(), "other:v9"), 1, 1, "1", 0);
        foreign.metadata.name = Some(format!("web-{}", pod_template_hash(&d)));
        foreign.metadata.owner_references = None;
        foreign.metadata.labels = Some(labels(&[("other", "x")]));
        f.add_rs(&foreign);

        let err = f.sync(&d).await.expect_err("collision");
        assert!(matches!(err, Error::HashCollision { .. }), "{err}");
        let last = f.status_updates().pop().expect("status written");
        assert_eq!(last.status.and_then(|s| s.collision_count), Some(1));

        // The next sync (cache updated) picks another name.
        f.settle(false);
        f.sync(&d).await.expect("sync with new hash");
        let created = f.created();
        assert_eq!(created.len(), 2);
        assert_ne!(created[0].metadata.name, created[1].metadata.name);
    }

    #[tokio::test]
    async fn create_failure_is_reported_in_an_event_and_the_progressing_condition() {
        let f = fixture();
        let d = deployment("web", 3, 1, 0);
        f.add_deployment(&d);
        f.client.set_error(
            Verb::CreateReplicaSet,
            Some(api_status::internal_error("quota exceeded")),
        );
        let err = f.sync(&d).await.expect_err("create fails");
        assert!(
            matches!(
                err,
                Error::Api {
                    operation: Operation::CreateReplicaSet,
                    ..
                }
            ),
            "{err}"
        );
        let events = f.recorder.events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].type_, EventType::Warning);
        assert_eq!(events[0].reason, "ReplicaSetCreateError");
        let rs_name = format!("web-{}", pod_template_hash(&d));
        assert!(
            events[0]
                .message
                .starts_with(&format!("Failed to create new replica set {rs_name:?}: ")),
            "{}",
            events[0].message
        );
        let written = f.status_updates().pop().expect("status written");
        let (status, why, _) = progressing(&written).expect("condition");
        assert_eq!(
            (status.as_str(), why.as_str()),
            (CONDITION_FALSE, "ReplicaSetCreateError")
        );
    }

    #[tokio::test]
    async fn existing_new_replica_set_gets_the_next_revision() {
        let f = fixture();
        let d = deployment("web", 3, 1, 0);
        f.add_deployment(&d);
        let old = old_rs_for(&d, "image:v1", 0, 0, "3", 0);
        let new = rs_for(&d, 3, 3, "1", 10);
        f.add_rs(&old);
        f.add_rs(&new);
        f.sync(&d).await.expect("sync");
        let updated = f
            .client
            .replica_set("default", name(&new.metadata))
            .expect("stored");
        assert_eq!(
            annotation(&updated.metadata, REVISION_ANNOTATION),
            Some("4")
        );
        assert_eq!(
            annotation(&updated.metadata, REVISION_HISTORY_ANNOTATION),
            Some("1")
        );
        // The next pass copies the revision onto the Deployment.
        f.settle(false);
        f.sync(&d).await.expect("sync");
        assert_eq!(
            annotation(&f.stored(&d).metadata, REVISION_ANNOTATION),
            Some("4")
        );
    }

    #[tokio::test]
    async fn scaling_event_scales_replica_sets_proportionally() {
        // 5 -> 10 in the middle of a rollout (maxSurge 0): the old ReplicaSet has 3 of 5, the
        // new one 2 of 5; each keeps its share.
        let f = fixture();
        let before = deployment("web", 5, 0, 1);
        let old = old_rs_for(&before, "image:v1", 3, 3, "1", 0);
        let new = rs_for(&before, 2, 2, "2", 10);
        let mut d = before.clone();
        if let Some(s) = d.spec.as_mut() {
            s.replicas = Some(10);
        }
        f.add_deployment(&d);
        f.add_rs(&old);
        f.add_rs(&new);
        f.sync(&d).await.expect("sync");
        assert_eq!(
            f.rs_updates(),
            vec![
                (name(&old.metadata).to_owned(), 6),
                (name(&new.metadata).to_owned(), 4)
            ]
        );
        for rs in [&old, &new] {
            let stored = f
                .client
                .replica_set("default", name(&rs.metadata))
                .expect("stored");
            assert_eq!(
                annotation(&stored.metadata, DESIRED_REPLICAS_ANNOTATION),
                Some("10")
            );
            assert_eq!(
                annotation(&stored.metadata, MAX_REPLICAS_ANNOTATION),
                Some("10")
            );
        }
        assert_eq!(
            f.event_messages(),
            vec![
                format!("Scaled up replica set {} from 3 to 6", name(&old.metadata)),
                format!("Scaled up replica set {} from 2 to 4", name(&new.metadata)),
            ]
        );
        assert!(f.created().is_empty(), "scaling never creates");
    }

    #[tokio::test]
    async fn scaling_event_with_one_active_replica_set_scales_it_whole() {
        let f = fixture();
        let before = deployment("web", 10, 2, 1);
        let current = rs_for(&before, 10, 10, "1", 0);
        let mut d = before.clone();
        if let Some(s) = d.spec.as_mut() {
            s.replicas = Some(4);
        }
        f.add_deployment(&d);
        f.add_rs(&current);
        f.sync(&d).await.expect("sync");
        assert_eq!(
            f.rs_updates(),
            vec![(name(&current.metadata).to_owned(), 4)]
        );
        assert_eq!(
            f.event_messages(),
            vec![format!(
                "Scaled down replica set {} from 10 to 4",
                name(&current.metadata)
            )]
        );
    }

    #[tokio::test]
    async fn paused_deployment_only_scales_and_records_paused_condition() {
        let f = fixture();
        let before = deployment("web", 3, 1, 0);
        let old = old_rs_for(&before, "image:v1", 3, 3, "1", 0);
        let mut d = before.clone();
        if let Some(s) = d.spec.as_mut() {
            s.paused = Some(true);
        }
        f.add_deployment(&d);
        f.add_rs(&old);
        f.sync(&d).await.expect("sync");
        assert!(f.created().is_empty(), "no rollout while paused");
        assert!(f.rs_updates().is_empty());
        let (status, why, message) = progressing(&f.status_updates()[0]).expect("condition");
        assert_eq!(
            (status.as_str(), why.as_str(), message.as_str()),
            (
                CONDITION_UNKNOWN,
                PAUSED_DEPLOY_REASON,
                "Deployment is paused"
            )
        );

        // Scaling still applies while paused.
        f.settle(false);
        let mut scaled = f.stored(&d);
        if let Some(s) = scaled.spec.as_mut() {
            s.replicas = Some(5);
        }
        f.add_deployment(&scaled);
        f.sync(&scaled).await.expect("sync");
        assert_eq!(f.rs_updates(), vec![(name(&old.metadata).to_owned(), 5)]);
        assert!(f.created().is_empty());

        // Resumed: the condition says so and the rollout starts.
        f.settle(false);
        let mut resumed = f.stored(&scaled);
        if let Some(s) = resumed.spec.as_mut() {
            s.paused = Some(false);
        }
        f.add_deployment(&resumed);
        f.sync(&resumed).await.expect("sync");
        let resumed_status = f
            .status_updates()
            .into_iter()
            .find(|u| progressing(u).is_some_and(|(_, r, _)| r == RESUMED_DEPLOY_REASON));
        assert!(resumed_status.is_some(), "DeploymentResumed recorded");
        assert_eq!(f.created().len(), 1, "the rollout starts once resumed");
    }

    #[tokio::test]
    async fn complete_rollout_trims_history_oldest_revision_first() {
        let f = fixture();
        let mut d = deployment("web", 3, 1, 0);
        if let Some(s) = d.spec.as_mut() {
            s.revision_history_limit = Some(2);
        }
        d.status = Some(DeploymentStatus {
            observed_generation: Some(1),
            replicas: Some(3),
            updated_replicas: Some(3),
            ready_replicas: Some(3),
            available_replicas: Some(3),
            ..Default::default()
        });
        f.add_deployment(&d);
        // Created out of revision order, to show the order is by revision.
        let olds: Vec<ReplicaSet> = [("5", 50), ("1", 40), ("4", 30), ("2", 20), ("3", 10)]
            .iter()
            .map(|(rev, secs)| old_rs_for(&d, &format!("image:v1-{rev}"), 0, 0, rev, *secs))
            .collect();
        for rs in &olds {
            f.add_rs(rs);
        }
        f.add_rs(&rs_for(&d, 3, 3, "6", 60));
        f.sync(&d).await.expect("sync");
        let deleted: Vec<String> = f
            .client
            .actions_of(Verb::DeleteReplicaSet)
            .into_iter()
            .filter_map(|a| match a {
                DeploymentAction::DeleteReplicaSet { name, .. } => Some(name),
                _ => None,
            })
            .collect();
        let by_rev = |rev: &str| {
            olds.iter()
                .find(|rs| annotation(&rs.metadata, REVISION_ANNOTATION) == Some(rev))
                .map(|rs| name(&rs.metadata).to_owned())
                .expect("revision")
        };
        assert_eq!(deleted, vec![by_rev("1"), by_rev("2"), by_rev("3")]);
    }

    #[tokio::test]
    async fn incomplete_rollout_keeps_history() {
        let f = fixture();
        let mut d = deployment("web", 3, 1, 0);
        if let Some(s) = d.spec.as_mut() {
            s.revision_history_limit = Some(0);
        }
        f.add_deployment(&d);
        f.add_rs(&old_rs_for(&d, "image:v1", 0, 0, "1", 0));
        f.add_rs(&rs_for(&d, 3, 1, "2", 60));
        f.sync(&d).await.expect("sync");
        assert!(f.client.actions_of(Verb::DeleteReplicaSet).is_empty());
    }

    #[tokio::test]
    async fn status_counts_replica_sets() {
        let f = fixture();
        let mut d = deployment("web", 4, 1, 1);
        d.metadata.generation = Some(2);
        f.add_deployment(&d);
        f.add_rs(&old_rs_for(&d, "image:v1", 2, 2, "1", 0));
        f.add_rs(&rs_for(&d, 3, 1, "2", 10));
        f.sync(&d).await.expect("sync");
        let status = f.stored(&d).status.expect("status");
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(status.replicas, Some(5));
        assert_eq!(status.updated_replicas, Some(3));
        assert_eq!(status.ready_replicas, Some(3));
        assert_eq!(status.available_replicas, Some(3));
        assert_eq!(status.unavailable_replicas, Some(2));
        assert_eq!(key(&d), "default/web");
    }
}
