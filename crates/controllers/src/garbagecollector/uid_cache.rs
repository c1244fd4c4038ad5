//! The absent-owner cache: a small LRU set of owners known not to exist (upstream `uid_cache.go`, `ReferenceCache`).
//!
//! When a live GET shows an owner is gone (404, or another object under its name), or an
//! informer reports its deletion, the garbage collector remembers its identity here, so the
//! many dependents of one deleted owner cost one GET, not one each.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use super::graph::ObjectIdentity;

/// Upstream's capacity of the garbage collector's absent-owner cache.
pub const ABSENT_OWNER_CACHE_SIZE: usize = 500;

/// A thread-safe least-recently-used set of object identities, as upstream's `ReferenceCache`.
#[derive(Debug)]
pub struct ReferenceCache {
    /// At most `capacity` entries.
    capacity: usize,
    inner: Mutex<Lru>,
}

#[derive(Debug, Default)]
struct Lru {
    /// Each entry's last-use tick. Invariant: `by_tick` holds exactly the same entries, keyed
    /// by these ticks.
    ticks: HashMap<ObjectIdentity, u64>,
    /// The entries by last-use tick, least recently used first.
    by_tick: BTreeMap<u64, ObjectIdentity>,
    /// The next tick to hand out; strictly increasing.
    next_tick: u64,
}

impl Lru {
    fn touch(&mut self, key: &ObjectIdentity) -> bool {
        let Some(tick) = self.ticks.get_mut(key) else {
            return false;
        };
        self.by_tick.remove(tick);
        *tick = self.next_tick;
        self.by_tick.insert(self.next_tick, key.clone());
        self.next_tick += 1;
        true
    }
}

impl ReferenceCache {
    /// An empty cache holding at most `capacity` identities (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            inner: Mutex::new(Lru::default()),
        }
    }

    /// Remembers `reference` (or marks it most recently used), evicting the least recently
    /// used entry when full, as upstream's `ReferenceCache.Add`.
    pub fn add(&self, reference: ObjectIdentity) {
        let mut lru = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if lru.touch(&reference) {
            return;
        }
        if lru.ticks.len() >= self.capacity
            && let Some((_, oldest)) = lru.by_tick.pop_first()
        {
            lru.ticks.remove(&oldest);
        }
        let tick = lru.next_tick;
        lru.next_tick += 1;
        lru.by_tick.insert(tick, reference.clone());
        lru.ticks.insert(reference, tick);
    }

    /// Whether `reference` is remembered; a hit marks it most recently used, as upstream's
    /// `ReferenceCache.Has` (an LRU `Get`).
    pub fn has(&self, reference: &ObjectIdentity) -> bool {
        let mut lru = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        lru.touch(reference)
    }

    /// How many identities are remembered.
    pub fn len(&self) -> usize {
        let lru = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        lru.ticks.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every remembered identity, least recently used first (for tests and debugging).
    pub fn entries(&self) -> Vec<ObjectIdentity> {
        let lru = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        lru.by_tick.values().cloned().collect()
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
