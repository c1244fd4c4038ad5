//! A bounded least-recently-used map (client-go's event correlator uses groupcache's LRU, the garbage collector and the device taint eviction controller `k8s.io/utils/lru`).
//!
//! Entries live in a slab of at most `capacity` slots, linked most recent first; the hash map
//! holds only each key's slot. A full map evicts by reusing the least recent slot in place, so
//! it allocates nothing once full, and its memory is the slab plus a table of small entries.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

/// No slot: the end of the recency list.
const NIL: u32 = u32::MAX;

/// One entry and its neighbours in recency order.
#[derive(Debug)]
struct Slot<K, V> {
    key: K,
    value: V,
    /// The slot used just more recently, or [`NIL`] for the most recent.
    newer: u32,
    /// The slot used just less recently, or [`NIL`] for the least recent.
    older: u32,
}

/// A map holding at most `capacity` entries; inserting into a full map evicts the entry used
/// least recently. `get_mut`, `insert` and `get_or_insert_with` count as uses. Operations
/// are O(1).
#[derive(Debug)]
pub struct Lru<K, V> {
    /// Most entries kept; at least 1 and below [`NIL`].
    capacity: usize,
    /// The slot of every key; the same keys as `slots`.
    index: HashMap<K, u32>,
    /// The entries; never more than `capacity`. Every slot is on the recency list.
    slots: Vec<Slot<K, V>>,
    /// The most recently used slot, or [`NIL`] when empty.
    newest: u32,
    /// The least recently used slot, or [`NIL`] when empty.
    oldest: u32,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    /// An empty map keeping at most `capacity` (at least 1) entries.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.clamp(1, NIL as usize - 1),
            index: HashMap::new(),
            slots: Vec::new(),
            newest: NIL,
            oldest: NIL,
        }
    }

    /// The value for `key`, marked as just used.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = *self.index.get(key)?;
        self.touch(slot);
        Some(&mut self.slots[slot as usize].value)
    }

    /// Inserts or replaces the value for `key`, evicting the least recently used entry if full.
    pub fn insert(&mut self, key: K, value: V) {
        if let Some(&slot) = self.index.get(&key) {
            self.touch(slot);
            self.slots[slot as usize].value = value;
        } else {
            self.insert_new(key, value);
        }
    }

    /// The value for `key`, inserting `make()` first when absent (evicting the least recently
    /// used entry if full); marked as just used.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let slot = match self.index.get(&key) {
            Some(&slot) => {
                self.touch(slot);
                slot
            }
            None => self.insert_new(key, make()),
        };
        &mut self.slots[slot as usize].value
    }

    /// Stores an absent `key` as the most recent entry, in a new slot while there is room,
    /// else in the least recent one's; returns its slot.
    fn insert_new(&mut self, key: K, value: V) -> u32 {
        let slot = if self.slots.len() < self.capacity {
            self.slots.push(Slot {
                key: key.clone(),
                value,
                newer: NIL,
                older: NIL,
            });
            (self.slots.len() - 1) as u32
        } else {
            let slot = self.oldest;
            self.unlink(slot);
            let entry = &mut self.slots[slot as usize];
            self.index.remove(&entry.key);
            entry.key = key.clone();
            entry.value = value;
            slot
        };
        self.index.insert(key, slot);
        self.push_newest(slot);
        slot
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The keys, least recently used first; not a use.
    pub fn keys_oldest_first(&self) -> impl Iterator<Item = &K> + '_ {
        let mut next = self.oldest;
        std::iter::from_fn(move || {
            let slot = self.slots.get(next as usize)?;
            next = slot.newer;
            Some(&slot.key)
        })
    }

    /// Moves `slot` to the front of the recency list.
    fn touch(&mut self, slot: u32) {
        if self.newest != slot {
            self.unlink(slot);
            self.push_newest(slot);
        }
    }

    /// Takes `slot` off the recency list.
    fn unlink(&mut self, slot: u32) {
        let (newer, older) = {
            let s = &self.slots[slot as usize];
            (s.newer, s.older)
        };
        match newer {
            NIL => self.newest = older,
            n => self.slots[n as usize].older = older,
        }
        match older {
            NIL => self.oldest = newer,
            o => self.slots[o as usize].newer = newer,
        }
    }

    /// Puts `slot`, off the list, at its front.
    fn push_newest(&mut self, slot: u32) {
        let old_newest = self.newest;
        {
            let s = &mut self.slots[slot as usize];
            s.newer = NIL;
            s.older = old_newest;
        }
        match old_newest {
            NIL => self.oldest = slot,
            n => self.slots[n as usize].newer = slot,
        }
        self.newest = slot;
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

    /// Against a plain model (a list, most recent first), over a long mixed sequence: the
    /// same entries, in the same order of eviction, and never more than the capacity.
    #[test]
    fn matches_a_model_over_a_long_sequence() {
        let capacity = 7;
        let mut lru = Lru::new(capacity);
        let mut model: Vec<(u32, u64)> = Vec::new();
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for step in 0..20_000u64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let key = (state % 13) as u32;
            let found = model.iter().position(|(k, _)| *k == key);
            match state % 3 {
                0 => {
                    let got = lru.get_mut(&key).map(|v| *v);
                    assert_eq!(got, found.map(|i| model[i].1), "get {key} at {step}");
                    if let Some(i) = found {
                        let entry = model.remove(i);
                        model.insert(0, entry);
                    }
                }
                1 => {
                    lru.insert(key, step);
                    if let Some(i) = found {
                        model.remove(i);
                    }
                    model.insert(0, (key, step));
                }
                _ => {
                    let got = *lru.get_or_insert_with(key, || step);
                    let want = found.map_or(step, |i| model[i].1);
                    assert_eq!(got, want, "get_or_insert {key} at {step}");
                    let entry = found.map_or((key, step), |i| model.remove(i));
                    model.insert(0, entry);
                }
            }
            model.truncate(capacity);
            assert_eq!(lru.len(), model.len());
        }
        for (key, value) in model {
            assert_eq!(lru.get_mut(&key).map(|v| *v), Some(value));
        }
    }

    /// A full map reuses its slots: its slab never grows past the capacity.
    #[test]
    fn a_full_map_allocates_no_new_slots() {
        let mut lru = Lru::new(4);
        for i in 0..1_000 {
            lru.insert(i, i);
        }
        assert_eq!(lru.slots.len(), 4);
        assert_eq!(lru.slots.capacity(), 4);
        assert_eq!(lru.len(), 4);
        assert!((996..1_000).all(|i| lru.get_mut(&i).copied() == Some(i)));
    }
}
