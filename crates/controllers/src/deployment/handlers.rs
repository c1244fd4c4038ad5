//! The Deployment controller's event handlers: which Deployment to sync when a Deployment, ReplicaSet or pod changes (upstream `addDeployment` … `deletePod`).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::controller::get_controller_of;
use kcm_machinery::informer::ResourceEventHandler;
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::meta_namespace_key;
use kcm_machinery::informer::lister::Lister;
use kcm_machinery::labels::Selector;
use kcm_machinery::workqueue::RateLimitingQueue;

use super::controller::{deployment_selector, pod_map};
use super::util::accessors::{RECREATE_STRATEGY, object_key, strategy_type};
use super::util::find::deployments_for_replica_set;
use super::util::new_replica_set::DEPLOYMENT_KIND;

/// The kind of the pods' controllers this controller cares about.
const REPLICA_SET_KIND: &str = "ReplicaSet";

/// The Deployment, ReplicaSet and pod event handlers. Cheap to clone; every clone shares the
/// controller's queue and listers. They only look at the caches and enqueue Deployment keys:
/// they never block.
#[derive(Clone)]
pub struct DeploymentEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
    /// The Deployment cache, to resolve owners and find the Deployments selecting an orphan.
    d_lister: Lister<Deployment>,
    /// The ReplicaSet cache, to find a deleted pod's ReplicaSet and a Deployment's ReplicaSets.
    rs_lister: Lister<ReplicaSet>,
    /// The pod cache, to tell whether a Recreate Deployment has pods left.
    pod_lister: Lister<Pod>,
}

impl std::fmt::Debug for DeploymentEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentEventHandlers")
            .finish_non_exhaustive()
    }
}

impl DeploymentEventHandlers {
    /// Handlers feeding `queue`, reading the three caches.
    pub(super) fn new(
        queue: RateLimitingQueue<String>,
        d_lister: Lister<Deployment>,
        rs_lister: Lister<ReplicaSet>,
        pod_lister: Lister<Pod>,
    ) -> Self {
        Self {
            queue,
            d_lister,
            rs_lister,
            pod_lister,
        }
    }

    /// A Deployment appeared: sync it.
    pub fn add_deployment(&self, d: &Deployment) {
        tracing::trace!(deployment = %object_key(&d.metadata), "Adding deployment");
        self.enqueue(d);
    }

    /// A Deployment changed (or was resynced): sync it.
    pub fn update_deployment(&self, _old: &Deployment, cur: &Deployment) {
        tracing::trace!(deployment = %object_key(&cur.metadata), "Updating deployment");
        self.enqueue(cur);
    }

    /// A Deployment was deleted (possibly seen only as a tombstone): sync the key, which finds
    /// nothing and stops.
    pub fn delete_deployment(&self, obj: &DeletedObject<Deployment>) {
        match obj.key() {
            Ok(key) => {
                tracing::trace!(deployment = %key, "Deleting deployment");
                self.queue.add(key);
            }
            Err(err) => tracing::error!(%err, "couldn't get key for Deployment"),
        }
    }

    /// A ReplicaSet appeared. Already being deleted (seen after a restart): handled as a
    /// deletion. Controlled by a Deployment we know: that one is synced. An orphan: every
    /// Deployment selecting it is synced, so one may adopt it.
    pub fn add_replica_set(&self, rs: &ReplicaSet) {
        if rs.metadata.deletion_timestamp.is_some() {
            self.delete_replica_set_object(rs);
            return;
        }
        if let Some(controller_ref) = get_controller_of(&rs.metadata) {
            let Some(d) = self.resolve_controller_ref(namespace_of(&rs.metadata), controller_ref)
            else {
                return;
            };
            tracing::trace!(replica_set = %object_key(&rs.metadata), "ReplicaSet added");
            self.enqueue(&d);
            return;
        }
        let ds = self.get_deployments_for_replica_set(rs);
        if ds.is_empty() {
            return;
        }
        tracing::trace!(replica_set = %object_key(&rs.metadata), "Orphan ReplicaSet added");
        for d in &ds {
            self.enqueue(d);
        }
    }

    /// A ReplicaSet changed. Same resourceVersion (a resync): ignored. A changed controller
    /// reference syncs the old owner; the current owner is synced; an orphan whose labels or
    /// reference changed syncs every Deployment selecting it.
    pub fn update_replica_set(&self, old: &ReplicaSet, cur: &ReplicaSet) {
        if cur.metadata.resource_version == old.metadata.resource_version {
            return;
        }
        let cur_ref = get_controller_of(&cur.metadata);
        let old_ref = get_controller_of(&old.metadata);
        let controller_ref_changed = cur_ref != old_ref;
        if controller_ref_changed
            && let Some(old_ref) = old_ref
            && let Some(d) = self.resolve_controller_ref(namespace_of(&old.metadata), old_ref)
        {
            self.enqueue(&d);
        }
        if let Some(cur_ref) = cur_ref {
            let Some(d) = self.resolve_controller_ref(namespace_of(&cur.metadata), cur_ref) else {
                return;
            };
            tracing::trace!(replica_set = %object_key(&cur.metadata), "ReplicaSet updated");
            self.enqueue(&d);
            return;
        }
        let labels_changed = cur.metadata.labels != old.metadata.labels;
        if labels_changed || controller_ref_changed {
            let ds = self.get_deployments_for_replica_set(cur);
            if ds.is_empty() {
                return;
            }
            tracing::trace!(replica_set = %object_key(&cur.metadata), "Orphan ReplicaSet updated");
            for d in &ds {
                self.enqueue(d);
            }
        }
    }

    /// A ReplicaSet was deleted (possibly seen only as a tombstone, whose state may be stale):
    /// its owner is synced. Nobody cares about an orphan's deletion.
    pub fn delete_replica_set(&self, obj: &DeletedObject<ReplicaSet>) {
        self.delete_replica_set_object(obj.object());
    }

    fn delete_replica_set_object(&self, rs: &ReplicaSet) {
        let Some(controller_ref) = get_controller_of(&rs.metadata) else {
            return;
        };
        let Some(d) = self.resolve_controller_ref(namespace_of(&rs.metadata), controller_ref)
        else {
            return;
        };
        tracing::trace!(replica_set = %object_key(&rs.metadata), "ReplicaSet deleted");
        self.enqueue(&d);
    }

    /// A pod was deleted: a Recreate Deployment waiting for its old pods to go is synced once
    /// it has no pod left, as upstream's `deletePod`. (Upstream lists the Deployment's
    /// ReplicaSets from the API server here; this reads the cache, so the handler never
    /// blocks.)
    pub fn delete_pod(&self, obj: &DeletedObject<Pod>) {
        let pod = obj.object();
        let Some(d) = self.get_deployment_for_pod(pod) else {
            return;
        };
        tracing::trace!(pod = %object_key(&pod.metadata), "Pod deleted");
        if strategy_type(&d) != RECREATE_STRATEGY {
            return;
        }
        let rs_list = self.owned_replica_sets(&d);
        let key = object_key(&d.metadata);
        let Ok(selector) = deployment_selector(&d, &key) else {
            return;
        };
        let pods = self.pod_lister.list(namespace_of(&d.metadata), &selector);
        let remaining: usize = pod_map(pods, &rs_list).values().map(Vec::len).sum();
        if remaining == 0 {
            self.enqueue(&d);
        }
    }

    /// The cached Deployment `controller_ref` points to in `namespace`: same kind, same name,
    /// same UID (a namesake is not it), as upstream's `resolveControllerRef`.
    pub fn resolve_controller_ref(
        &self,
        namespace: &str,
        controller_ref: &OwnerReference,
    ) -> Option<Arc<Deployment>> {
        if controller_ref.kind != DEPLOYMENT_KIND {
            return None;
        }
        self.d_lister
            .get(namespace, &controller_ref.name)
            .filter(|d| d.metadata.uid.as_deref() == Some(controller_ref.uid.as_str()))
    }

    /// The cached Deployments whose selector matches the ReplicaSet, as upstream's
    /// `getDeploymentsForReplicaSet`. More than one is a user error (logged).
    pub fn get_deployments_for_replica_set(&self, rs: &ReplicaSet) -> Vec<Arc<Deployment>> {
        let all = self
            .d_lister
            .list(namespace_of(&rs.metadata), &Selector::everything());
        let refs: Vec<&Deployment> = all.iter().map(Arc::as_ref).collect();
        let matching: Vec<Arc<Deployment>> = deployments_for_replica_set(&refs, rs)
            .into_iter()
            .filter_map(|d| all.iter().find(|a| std::ptr::eq(a.as_ref(), d)).cloned())
            .collect();
        if matching.len() > 1 {
            tracing::debug!(
                replica_set = %object_key(&rs.metadata),
                labels = ?rs.metadata.labels,
                "user error! more than one deployment is selecting replica set"
            );
        }
        matching
    }

    /// The Deployment controlling the ReplicaSet controlling `pod`, as upstream's
    /// `getDeploymentForPod`.
    pub fn get_deployment_for_pod(&self, pod: &Pod) -> Option<Arc<Deployment>> {
        let controller_ref = get_controller_of(&pod.metadata)?;
        if controller_ref.kind != REPLICA_SET_KIND {
            return None;
        }
        let rs = self
            .rs_lister
            .get(namespace_of(&pod.metadata), &controller_ref.name)
            .filter(|rs| rs.metadata.uid.as_deref() == Some(controller_ref.uid.as_str()))?;
        let rs_ref = get_controller_of(&rs.metadata)?;
        self.resolve_controller_ref(namespace_of(&rs.metadata), rs_ref)
    }

    /// The cached ReplicaSets the Deployment's selector matches and that it controls, as
    /// upstream's `ListReplicaSets`.
    fn owned_replica_sets(&self, d: &Deployment) -> Vec<Arc<ReplicaSet>> {
        let key = object_key(&d.metadata);
        let Ok(selector) = deployment_selector(d, &key) else {
            return Vec::new();
        };
        let uid = d.metadata.uid.as_deref();
        self.rs_lister
            .list(namespace_of(&d.metadata), &selector)
            .into_iter()
            .filter(|rs| {
                get_controller_of(&rs.metadata).is_some_and(|r| Some(r.uid.as_str()) == uid)
            })
            .collect()
    }

    fn enqueue(&self, d: &Deployment) {
        match meta_namespace_key(d) {
            Ok(key) => self.queue.add(key),
            Err(err) => tracing::error!(%err, "couldn't get key for Deployment"),
        }
    }
}

fn namespace_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or_default()
}

/// The informer side: Deployment notifications.
impl ResourceEventHandler<Deployment> for DeploymentEventHandlers {
    fn on_add(&self, d: Arc<Deployment>, _is_in_initial_list: bool) {
        self.add_deployment(&d);
    }

    fn on_update(&self, old: Arc<Deployment>, new: Arc<Deployment>) {
        self.update_deployment(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<Deployment>) {
        self.delete_deployment(&obj);
    }
}

/// The informer side: ReplicaSet notifications.
impl ResourceEventHandler<ReplicaSet> for DeploymentEventHandlers {
    fn on_add(&self, rs: Arc<ReplicaSet>, _is_in_initial_list: bool) {
        self.add_replica_set(&rs);
    }

    fn on_update(&self, old: Arc<ReplicaSet>, new: Arc<ReplicaSet>) {
        self.update_replica_set(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<ReplicaSet>) {
        self.delete_replica_set(&obj);
    }
}

/// The informer side: pod notifications (only deletions matter).
impl ResourceEventHandler<Pod> for DeploymentEventHandlers {
    fn on_delete(&self, obj: DeletedObject<Pod>) {
        self.delete_pod(&obj);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use kcm_machinery::informer::delta::DeletedFinalStateUnknown;

    use super::super::test_support::{
        Fixture, deployment, fixture, key, labels, old_rs_for, pod_of, recreate, rs_for,
    };
    use super::*;

    /// Drains the queue's keys (they are all immediately available).
    async fn drain(f: &Fixture) -> Vec<String> {
        let mut keys = Vec::new();
        while !f.controller.queue().is_empty() {
            if let Some(k) = f.controller.queue().get().await {
                f.controller.queue().done(&k);
                keys.push(k);
            }
        }
        keys.sort();
        keys
    }

    fn orphan(mut rs: ReplicaSet) -> ReplicaSet {
        rs.metadata.owner_references = None;
        rs
    }

    #[tokio::test]
    async fn replica_set_events_wake_their_owner_or_matching_deployments() {
        let f = fixture();
        let web = deployment("web", 1, 1, 0);
        let api = deployment("api", 1, 1, 0);
        f.add_deployment(&web);
        f.add_deployment(&api);
        let handlers = f.controller.event_handlers();

        let owned = rs_for(&web, 1, 1, "1", 0);
        handlers.add_replica_set(&owned);
        assert_eq!(drain(&f).await, vec![key(&web)]);

        // An orphan wakes every Deployment selecting it.
        handlers.add_replica_set(&orphan(rs_for(&api, 1, 1, "1", 0)));
        assert_eq!(drain(&f).await, vec![key(&api)]);

        // An owner reference to a namesake (other UID) is not ours.
        let mut stranger = owned.clone();
        if let Some(r) = stranger.metadata.owner_references.as_mut() {
            r[0].uid = "other".into();
        }
        handlers.add_replica_set(&stranger);
        assert!(drain(&f).await.is_empty());

        // A resync (same resourceVersion) is ignored.
        handlers.update_replica_set(&owned, &owned);
        assert!(drain(&f).await.is_empty());

        // Ownership moved from web to api: both are synced.
        let mut moved = owned.clone();
        moved.metadata.resource_version = Some("2".into());
        if let Some(r) = moved.metadata.owner_references.as_mut() {
            r[0].name = "api".into();
            r[0].uid = "uid-api".into();
        }
        handlers.update_replica_set(&owned, &moved);
        assert_eq!(drain(&f).await, vec![key(&api), key(&web)]);

        // An orphan whose labels changed wakes the Deployments now selecting it.
        let before = orphan(rs_for(&web, 1, 1, "1", 0));
        let mut relabelled = before.clone();
        relabelled.metadata.resource_version = Some("2".into());
        relabelled.metadata.labels = Some(labels(&[("app", "api")]));
        handlers.update_replica_set(&before, &relabelled);
        assert_eq!(drain(&f).await, vec![key(&api)]);

        // Deletions (also as tombstones) wake the owner; an orphan's wakes nobody.
        handlers.delete_replica_set(&DeletedObject::Tombstone(DeletedFinalStateUnknown {
            key: "default/x".into(),
            obj: Arc::new(owned.clone()),
        }));
        assert_eq!(drain(&f).await, vec![key(&web)]);
        handlers.delete_replica_set(&DeletedObject::Object(Arc::new(before)));
        assert!(drain(&f).await.is_empty());

        // A ReplicaSet seen for the first time while being deleted counts as deleted.
        let mut deleting = owned;
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(super::super::test_support::now()),
        );
        handlers.add_replica_set(&deleting);
        assert_eq!(drain(&f).await, vec![key(&web)]);
    }

    #[tokio::test]
    async fn deployment_events_enqueue_their_key() {
        let f = fixture();
        let web = deployment("web", 1, 1, 0);
        let handlers = f.controller.event_handlers();
        handlers.add_deployment(&web);
        handlers.update_deployment(&web, &web);
        assert_eq!(
            drain(&f).await,
            vec![key(&web)],
            "deduplicated by the queue"
        );
        handlers.delete_deployment(&DeletedObject::Tombstone(DeletedFinalStateUnknown {
            key: "default/gone".into(),
            obj: Arc::new(web),
        }));
        assert_eq!(drain(&f).await, vec!["default/gone".to_owned()]);
    }

    #[tokio::test]
    async fn pod_deletion_wakes_a_recreate_deployment_once_its_pods_are_gone() {
        let f = fixture();
        let d = recreate(deployment("web", 2, 0, 0));
        f.add_deployment(&d);
        let old = old_rs_for(&d, "image:v1", 0, 2, "1", 0);
        f.rs_cache.add(Arc::new(old.clone())).expect("cache rs");
        let a = pod_of(&old, "a", "Running");
        let b = pod_of(&old, "b", "Running");
        f.add_pod(&a);
        f.add_pod(&b);
        let handlers = f.controller.event_handlers();

        f.pod_cache.delete(&a).expect("gone from cache");
        handlers.delete_pod(&DeletedObject::Object(Arc::new(a)));
        assert!(drain(&f).await.is_empty(), "one pod left");

        f.pod_cache.delete(&b).expect("gone from cache");
        handlers.delete_pod(&DeletedObject::Object(Arc::new(b.clone())));
        assert_eq!(drain(&f).await, vec![key(&d)]);

        // A rolling Deployment does not care.
        let rolling = deployment("api", 2, 1, 0);
        f.add_deployment(&rolling);
        let rs = rs_for(&rolling, 1, 1, "1", 0);
        f.rs_cache.add(Arc::new(rs.clone())).expect("cache rs");
        handlers.delete_pod(&DeletedObject::Object(Arc::new(pod_of(
            &rs, "c", "Running",
        ))));
        assert!(drain(&f).await.is_empty());
    }
}
