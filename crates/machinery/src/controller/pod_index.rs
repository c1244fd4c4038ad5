//! The pod cache's index by controller UID (orphans under a per-namespace key) and the owner lookup through it, as upstream's `AddPodControllerUIDIndexer` and `FilterPodsByOwner`.
//!
//! A controller that claims pods needs the pods it controls and the orphans of its namespace
//! it might adopt. Listing the whole namespace for that is linear in the namespace's pods per
//! sync; the index makes it linear in the owner's own pods.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::controller_ref::get_controller_of;
use crate::informer::index::{IndexFunc, Indexers};
use crate::informer::store::Indexer;

/// The name of the index, as upstream's `PodControllerUIDIndex`.
pub const POD_CONTROLLER_UID_INDEX: &str = "podControllerUID";

/// The prefix of the key orphans are indexed under, as upstream's `OrphanPodIndexKey`.
pub const ORPHAN_POD_INDEX_KEY: &str = "_ORPHAN_POD";

/// The key the orphan pods of `namespace` are indexed under, as upstream's
/// `OrphanPodIndexKeyForNamespace`.
pub fn orphan_pod_index_key_for_namespace(namespace: &str) -> String {
    format!("{ORPHAN_POD_INDEX_KEY}/{namespace}")
}

/// The index values of a pod: its controller's UID, or the orphan key of its namespace.
pub fn pod_controller_uid_index(pod: &Pod) -> Vec<String> {
    match get_controller_of(&pod.metadata) {
        Some(controller) => vec![controller.uid.clone()],
        None => vec![orphan_pod_index_key_for_namespace(
            pod.metadata.namespace.as_deref().unwrap_or_default(),
        )],
    }
}

/// Adds [`POD_CONTROLLER_UID_INDEX`] to `pods` unless it is there already (another controller
/// sharing the informer added it), as upstream's `AddPodControllerUIDIndexer`.
pub fn add_pod_controller_uid_indexer(pods: &Indexer<Pod>) -> crate::informer::store::Result<()> {
    if pods
        .index_names()
        .iter()
        .any(|name| name == POD_CONTROLLER_UID_INDEX)
    {
        return Ok(());
    }
    let mut indexers: Indexers<Pod> = Indexers::new();
    let index: IndexFunc<Pod> = Arc::new(pod_controller_uid_index);
    indexers.insert(POD_CONTROLLER_UID_INDEX.to_owned(), index);
    pods.add_indexers(indexers)
}

/// The pods of `owner`'s namespace that `owner` (of kind `owner_kind`) controls, and with
/// `include_orphans` the namespace's orphans, as upstream's `FilterPodsByOwner`. Without the
/// index (a cache nobody indexed), the namespace's pods are filtered instead.
pub fn filter_pods_by_owner(
    pods: &Indexer<Pod>,
    owner: &ObjectMeta,
    owner_kind: &str,
    include_orphans: bool,
) -> Vec<Arc<Pod>> {
    let namespace = owner.namespace.as_deref().unwrap_or_default();
    let uid = owner.uid.as_deref().unwrap_or_default();
    let wanted = |pod: &Pod| {
        if pod.metadata.namespace.as_deref().unwrap_or_default() != namespace {
            return false;
        }
        match get_controller_of(&pod.metadata) {
            Some(controller) => controller.uid == uid && controller.kind == owner_kind,
            None => include_orphans,
        }
    };
    let mut keys = vec![uid.to_owned()];
    if include_orphans {
        keys.push(orphan_pod_index_key_for_namespace(namespace));
    }
    let mut result = Vec::new();
    for key in &keys {
        match pods.by_index(POD_CONTROLLER_UID_INDEX, key) {
            Ok(found) => result.extend(found.into_iter().filter(|p| wanted(p))),
            Err(_) => {
                return pods.list().into_iter().filter(|p| wanted(p)).collect();
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcm_testing::{MetaBuilder, OwnerRefBuilder, pod};

    fn owned(name: &str, ns: &str, kind: &str, uid: &str) -> Arc<Pod> {
        pod(name)
            .namespace(ns)
            .owner(
                OwnerRefBuilder::default()
                    .kind(kind)
                    .uid(uid)
                    .controller(true),
            )
            .arc()
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        let mut names: Vec<String> = pods
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        names.sort();
        names
    }

    fn owner() -> ObjectMeta {
        kcm_testing::meta("job").namespace("ns").uid("u1").build()
    }

    fn cache() -> Indexer<Pod> {
        let cache = Indexer::new();
        for p in [
            owned("mine", "ns", "Job", "u1"),
            owned("other-uid", "ns", "Job", "u2"),
            owned("other-kind", "ns", "ReplicaSet", "u1"),
            pod("orphan").namespace("ns").arc(),
            pod("orphan-elsewhere").namespace("other").arc(),
        ] {
            cache.add(p).expect("add");
        }
        cache
    }

    #[test]
    fn controlled_pods_and_the_namespace_orphans() {
        let cache = cache();
        add_pod_controller_uid_indexer(&cache).expect("index");
        // A second registration (another controller on the same informer) is a no-op.
        add_pod_controller_uid_indexer(&cache).expect("idempotent");
        assert_eq!(
            names(&filter_pods_by_owner(&cache, &owner(), "Job", true)),
            ["mine", "orphan"]
        );
        assert_eq!(
            names(&filter_pods_by_owner(&cache, &owner(), "Job", false)),
            ["mine"]
        );
    }

    #[test]
    fn without_the_index_the_namespace_is_filtered() {
        let cache = cache();
        assert_eq!(
            names(&filter_pods_by_owner(&cache, &owner(), "Job", true)),
            ["mine", "orphan"]
        );
    }

    #[test]
    fn index_values() {
        assert_eq!(
            pod_controller_uid_index(&owned("p", "ns", "Job", "u9")),
            ["u9"]
        );
        assert_eq!(
            pod_controller_uid_index(&pod("p").namespace("ns").build()),
            ["_ORPHAN_POD/ns"]
        );
    }
}
