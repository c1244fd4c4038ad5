//! The controller's own caches of volumes and claims, newer than the informers' (each write's result is stored at once), and the search for a claim's volume by access modes, as upstream's `index.go` and `storeObjectUpdate`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::util::{access_modes_key, find_matching_volume};

/// Objects by key, each replaced only by a copy at least as new (by `resourceVersion`), as
/// upstream's `storeObjectUpdate` over a `cache.Store`.
#[derive(Debug)]
pub struct ObjectCache<T> {
    /// Invariant: each value's key is its `namespace/name` (the name alone for volumes).
    objects: Mutex<BTreeMap<String, Arc<T>>>,
}

impl<T> Default for ObjectCache<T> {
    fn default() -> Self {
        Self {
            objects: Mutex::new(BTreeMap::new()),
        }
    }
}

/// The `resourceVersion` as a number; one that is not a number counts as newest.
fn resource_version(meta: &ObjectMeta) -> Option<u64> {
    meta.resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
}

impl<T> ObjectCache<T> {
    fn locked(&self) -> MutexGuard<'_, BTreeMap<String, Arc<T>>> {
        self.objects.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `object` under `key` unless the cached copy is newer; true when stored (the
    /// same version passes, so periodic resyncs sync again), as `storeObjectUpdate`.
    pub fn store_update(&self, key: String, object: Arc<T>, meta: fn(&T) -> &ObjectMeta) -> bool {
        let mut objects = self.locked();
        if let Some(old) = objects.get(&key)
            && let (Some(old_rv), Some(new_rv)) =
                (resource_version(meta(old)), resource_version(meta(&object)))
            && old_rv > new_rv
        {
            return false;
        }
        objects.insert(key, object);
        true
    }

    /// The cached copy of `key`.
    pub fn get(&self, key: &str) -> Option<Arc<T>> {
        self.locked().get(key).cloned()
    }

    /// Forgets `key`.
    pub fn delete(&self, key: &str) {
        self.locked().remove(key);
    }

    /// Every cached object, by key.
    pub fn list(&self) -> Vec<Arc<T>> {
        self.locked().values().cloned().collect()
    }
}

/// The claims' cache.
pub type ClaimCache = ObjectCache<PersistentVolumeClaim>;

/// The volumes' cache, searched by access modes.
pub type VolumeIndex = ObjectCache<PersistentVolume>;

impl VolumeIndex {
    /// The best volume for `claim`, as `persistentVolumeOrderedIndex.findByClaim`: the volumes
    /// are grouped by their set of access modes; the groups offering every mode the claim
    /// asks for are searched fewest modes first, and the first group with a match
    /// ([`find_matching_volume`]) gives the answer, so a claim gets the closest modes before
    /// the smallest size.
    pub fn find_by_claim(
        &self,
        claim: &PersistentVolumeClaim,
        node: Option<&Node>,
        delay_binding: bool,
    ) -> Result<Option<Arc<PersistentVolume>>, String> {
        let requested = claim
            .spec
            .as_ref()
            .and_then(|s| s.access_modes.clone())
            .unwrap_or_default();
        let mut groups: BTreeMap<String, (usize, Vec<Arc<PersistentVolume>>)> = BTreeMap::new();
        for volume in self.list() {
            let modes = volume
                .spec
                .as_ref()
                .and_then(|s| s.access_modes.clone())
                .unwrap_or_default();
            if !requested.iter().all(|m| modes.contains(m)) {
                continue;
            }
            let key = access_modes_key(&modes);
            let count = if key.is_empty() {
                0
            } else {
                key.split(',').count()
            };
            groups
                .entry(key)
                .or_insert_with(|| (count, Vec::new()))
                .1
                .push(volume);
        }
        let mut groups: Vec<_> = groups.into_values().collect();
        groups.sort_by_key(|(count, _)| *count);
        for (_, volumes) in &groups {
            if let Some(volume) = find_matching_volume(claim, volumes, node, delay_binding)? {
                return Ok(Some(volume));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
