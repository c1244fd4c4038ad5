//! A bounded least-recently-used map, for the correlator's caches (client-go uses groupcache's LRU).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// A map holding at most `capacity` entries; inserting into a full map evicts the entry used
/// least recently. `get_mut` and `insert` count as uses. Operations are O(log n).
#[derive(Debug)]
pub(crate) struct Lru<K, V> {
    /// Most entries kept; at least 1.
    capacity: usize,
    /// Entries with the tick of their last use. Every tick here is a key of `order`.
    entries: HashMap<K, (V, u64)>,
    /// Keys by last-use tick, oldest first. Same keys as `entries`.
    order: BTreeMap<u64, K>,
    /// The next tick to hand out; strictly increasing.
    next_tick: u64,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    /// An empty map keeping at most `capacity` (at least 1) entries.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            entries: HashMap::new(),
            order: BTreeMap::new(),
            next_tick: 0,
        }
    }

    /// The value for `key`, marked as just used.
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let tick = self.take_tick();
        let (value, last) = self.entries.get_mut(key)?;
        if let Some(k) = self.order.remove(last) {
            self.order.insert(tick, k);
        }
        *last = tick;
        Some(value)
    }

    /// Inserts or replaces the value for `key`, evicting the least recently used entry if full.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        let tick = self.take_tick();
        if let Some((old, last)) = self.entries.get_mut(&key) {
            *old = value;
            if let Some(k) = self.order.remove(last) {
                self.order.insert(tick, k);
            }
            *last = tick;
            return;
        }
        if self.entries.len() >= self.capacity
            && let Some((_, oldest)) = self.order.pop_first()
        {
            self.entries.remove(&oldest);
        }
        self.order.insert(tick, key.clone());
        self.entries.insert(key, (value, tick));
    }

    /// The value for `key`, inserting `make()` first when absent (evicting the least recently
    /// used entry if full); marked as just used.
    pub(crate) fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let tick = self.take_tick();
        if !self.entries.contains_key(&key)
            && self.entries.len() >= self.capacity
            && let Some((_, oldest)) = self.order.pop_first()
        {
            self.entries.remove(&oldest);
        }
        match self.entries.entry(key) {
            Entry::Occupied(entry) => {
                let (value, last) = entry.into_mut();
                if let Some(k) = self.order.remove(last) {
                    self.order.insert(tick, k);
                }
                *last = tick;
                value
            }
            Entry::Vacant(entry) => {
                self.order.insert(tick, entry.key().clone());
                &mut entry.insert((make(), tick)).0
            }
        }
    }

    /// Number of entries.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    fn take_tick(&mut self) -> u64 {
        let tick = self.next_tick;
        self.next_tick += 1;
        tick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut lru = Lru::new(2);
        lru.insert("a", 1);
        lru.insert("b", 2);
        assert_eq!(lru.get_mut(&"a"), Some(&mut 1));
        lru.insert("c", 3);
        assert_eq!(lru.len(), 2);
        assert!(lru.get_mut(&"b").is_none(), "b was least recently used");
        assert_eq!(lru.get_mut(&"a"), Some(&mut 1));
        assert_eq!(lru.get_mut(&"c"), Some(&mut 3));
        *lru.get_or_insert_with("d", || 4) += 10;
        assert_eq!(lru.get_mut(&"d"), Some(&mut 14));
        assert!(lru.get_mut(&"a").is_none());
    }

    #[test]
    fn replacing_a_value_keeps_one_entry() {
        let mut lru = Lru::new(3);
        lru.insert("a", 1);
        lru.insert("a", 2);
        assert_eq!(lru.len(), 1);
        assert_eq!(lru.get_mut(&"a"), Some(&mut 2));
        assert_eq!(*lru.get_or_insert_with("a", || 9), 2);
    }
}
