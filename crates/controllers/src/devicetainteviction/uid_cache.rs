//! The UIDs of pods known to be evicted, least recently used forgotten first (upstream's `uidCache` over `k8s.io/utils/lru`).

use std::collections::{BTreeMap, HashMap};

/// An LRU set of UIDs: [`add`](Self::add) and a hit in [`has`](Self::has) make a UID the most
/// recently used; beyond `capacity` the least recently used one is dropped.
#[derive(Debug)]
pub struct UidCache {
    /// Most entries kept; at least 1.
    capacity: usize,
    /// Each UID's last use. Every value is a key of `by_tick` naming that UID, and back.
    ticks: HashMap<String, u64>,
    /// UIDs by last use, oldest first.
    by_tick: BTreeMap<u64, String>,
    /// The next use's tick (strictly increasing).
    next_tick: u64,
}

impl UidCache {
    /// An empty cache of at most `capacity` UIDs (upstream's `newUIDCache`).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            ticks: HashMap::new(),
            by_tick: BTreeMap::new(),
            next_tick: 0,
        }
    }

    fn touch(&mut self, uid: &str) {
        let tick = self.next_tick;
        self.next_tick += 1;
        if let Some(old) = self.ticks.insert(uid.to_owned(), tick) {
            self.by_tick.remove(&old);
        }
        self.by_tick.insert(tick, uid.to_owned());
        debug_assert_eq!(self.ticks.len(), self.by_tick.len());
    }

    /// Remembers `uid` as the most recently used, forgetting the oldest beyond capacity.
    pub fn add(&mut self, uid: &str) {
        self.touch(uid);
        while self.ticks.len() > self.capacity {
            let Some((_, oldest)) = self.by_tick.pop_first() else {
                break;
            };
            self.ticks.remove(&oldest);
        }
    }

    /// Whether `uid` is remembered; a hit makes it the most recently used (as an LRU `Get`).
    pub fn has(&mut self, uid: &str) -> bool {
        if self.ticks.contains_key(uid) {
            self.touch(uid);
            true
        } else {
            false
        }
    }

    /// How many UIDs are remembered.
    pub fn len(&self) -> usize {
        self.ticks.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.ticks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_least_recently_used() {
        let mut cache = UidCache::new(2);
        cache.add("a");
        cache.add("b");
        assert!(cache.has("a"), "a hit refreshes a");
        cache.add("c");
        assert!(cache.has("a"));
        assert!(!cache.has("b"), "b was the least recently used");
        assert!(cache.has("c"));
        assert_eq!(cache.len(), 2);
        cache.add("c");
        assert_eq!(cache.len(), 2, "adding twice keeps one entry");
    }
}
