//! The UIDs of pods known to be evicted, least recently used forgotten first (upstream's `uidCache` over `k8s.io/utils/lru`).

use kcm_machinery::lru::Lru;

/// An LRU set of UIDs: [`add`](Self::add) and a hit in [`has`](Self::has) make a UID the most
/// recently used; beyond `capacity` the least recently used one is dropped.
#[derive(Debug)]
pub struct UidCache {
    uids: Lru<String, ()>,
}

impl UidCache {
    /// An empty cache of at most `capacity` UIDs (upstream's `newUIDCache`).
    pub fn new(capacity: usize) -> Self {
        Self {
            uids: Lru::new(capacity),
        }
    }

    /// Remembers `uid` as the most recently used, forgetting the oldest beyond capacity.
    pub fn add(&mut self, uid: &str) {
        if self.uids.get_mut(uid).is_none() {
            self.uids.insert(uid.to_owned(), ());
        }
    }

    /// Whether `uid` is remembered; a hit makes it the most recently used (as an LRU `Get`).
    pub fn has(&mut self, uid: &str) -> bool {
        self.uids.get_mut(uid).is_some()
    }

    /// How many UIDs are remembered.
    pub fn len(&self) -> usize {
        self.uids.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.uids.is_empty()
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
