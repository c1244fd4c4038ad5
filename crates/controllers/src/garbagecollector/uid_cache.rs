//! The absent-owner cache: a small LRU set of owners known not to exist (upstream `uid_cache.go`, `ReferenceCache`).
//!
//! When a live GET shows an owner is gone (404, or another object under its name), or an
//! informer reports its deletion, the garbage collector remembers its identity here, so the
//! many dependents of one deleted owner cost one GET, not one each.

use std::sync::{Mutex, PoisonError};

use kcm_machinery::lru::Lru;

use super::graph::ObjectIdentity;

/// Upstream's capacity of the garbage collector's absent-owner cache.
pub const ABSENT_OWNER_CACHE_SIZE: usize = 500;

/// A thread-safe least-recently-used set of object identities, as upstream's `ReferenceCache`.
#[derive(Debug)]
pub struct ReferenceCache {
    /// At most its capacity of entries.
    inner: Mutex<Lru<ObjectIdentity, ()>>,
}

impl ReferenceCache {
    /// An empty cache holding at most `capacity` identities (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: Mutex::new(Lru::new(capacity)),
        }
    }

    fn lru(&self) -> std::sync::MutexGuard<'_, Lru<ObjectIdentity, ()>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers `reference` (or marks it most recently used), evicting the least recently
    /// used entry when full, as upstream's `ReferenceCache.Add`.
    pub fn add(&self, reference: ObjectIdentity) {
        self.lru().insert(reference, ());
    }

    /// Whether `reference` is remembered; a hit marks it most recently used, as upstream's
    /// `ReferenceCache.Has` (an LRU `Get`).
    pub fn has(&self, reference: &ObjectIdentity) -> bool {
        self.lru().get_mut(reference).is_some()
    }

    /// How many identities are remembered.
    pub fn len(&self) -> usize {
        self.lru().len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every remembered identity, least recently used first (for tests and debugging).
    pub fn entries(&self) -> Vec<ObjectIdentity> {
        self.lru().keys_oldest_first().cloned().collect()
    }
}

impl Default for ReferenceCache {
    fn default() -> Self {
        Self::new(ABSENT_OWNER_CACHE_SIZE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> ObjectIdentity {
        ObjectIdentity {
            kind: "ReplicationController".into(),
            api_version: "v1".into(),
            namespace: "ns1".into(),
            name: name.into(),
            uid: name.into(),
        }
    }

    #[test]
    fn a_hit_promotes_and_the_least_recently_used_is_evicted() {
        // As upstream's TestAbsentOwnerCache: capacity 2, rc1 and rc2 added, rc1 read (so
        // promoted), rc3 added: rc2 is evicted.
        let cache = ReferenceCache::new(2);
        cache.add(id("rc1"));
        cache.add(id("rc2"));
        assert!(cache.has(&id("rc1")));
        cache.add(id("rc3"));
        assert!(cache.has(&id("rc1")));
        assert!(!cache.has(&id("rc2")));
        assert!(cache.has(&id("rc3")));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn adding_twice_keeps_one_entry() {
        let cache = ReferenceCache::new(3);
        cache.add(id("a"));
        cache.add(id("b"));
        cache.add(id("a"));
        assert_eq!(cache.entries(), vec![id("b"), id("a")]);
    }

    #[test]
    fn the_namespace_is_part_of_the_key() {
        let cache = ReferenceCache::default();
        cache.add(id("a"));
        let mut cluster = id("a");
        cluster.namespace.clear();
        assert!(!cache.has(&cluster));
    }
}
