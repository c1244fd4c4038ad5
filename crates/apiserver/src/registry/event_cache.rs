//! Recent watch events decoded and encoded once, shared by every watcher (an event is not parsed once per watcher).
//!
//! Fifty informers watching pods all receive the same store event: without sharing, each
//! would parse the stored JSON and serialize the watch line again. The cache keys decoded
//! objects by (resource version served, key, revision) and encoded lines additionally by
//! event type, and forgets the oldest entries beyond its capacity. Decoding and encoding
//! happen outside the lock; two watchers racing on a miss both do the work once.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde_json::Value;

use crate::registry::decode_stored;
use crate::registry::resource::ResourceDef;
use crate::storage::{KeyValue, Revision};

/// Entries kept (objects and lines together) before the oldest are forgotten. The cache only
/// has to span the moments in which the watchers of one resource take the same event, a
/// fraction of a second even at a thousand writes a second; 4,096 lines of ~2.5 KB pods held
/// 10 MB for nothing (BENCHMARKS.md, "Memory of the 10k run").
pub const DEFAULT_EVENT_CACHE_CAPACITY: usize = 1024;

/// Which served version of which key at which revision.
type ObjectKey = (usize, Arc<str>, Revision);
/// An object key plus the watch event type.
type LineKey = (usize, Arc<str>, Revision, &'static str);

enum Entry {
    Object(ObjectKey),
    Line(LineKey),
}

#[derive(Default)]
struct State {
    objects: HashMap<ObjectKey, Arc<Value>>,
    lines: HashMap<LineKey, Bytes>,
    /// Insertion order of every entry in `objects` and `lines` (each key appears once).
    order: VecDeque<Entry>,
}

/// The shared cache of decoded objects and encoded watch lines.
pub struct EventCache {
    state: Mutex<State>,
    capacity: usize,
}

impl std::fmt::Debug for EventCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventCache")
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// Identifies the served version: resources sharing storage (events) decode differently.
fn version_id(def: &ResourceDef) -> usize {
    def.id()
}

impl EventCache {
    /// A cache of about `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(State::default()),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn evict_locked(&self, state: &mut State) {
        while state.order.len() > self.capacity {
            match state.order.pop_front() {
                Some(Entry::Object(k)) => {
                    state.objects.remove(&k);
                }
                Some(Entry::Line(k)) => {
                    state.lines.remove(&k);
                }
                None => break,
            }
        }
    }

    /// The stored version `kv` decoded for `s` (with `resourceVersion` set), or `None` if the
    /// stored bytes do not decode.
    pub fn object(&self, def: &ResourceDef, kv: &KeyValue) -> Option<Arc<Value>> {
        let key = (version_id(def), Arc::clone(&kv.key), kv.mod_revision);
        if let Some(v) = self.lock().objects.get(&key) {
            return Some(Arc::clone(v));
        }
        let decoded = Arc::new(decode_stored(def, kv).ok()?);
        let mut state = self.lock();
        if !state.objects.contains_key(&key) {
            state.objects.insert(key.clone(), Arc::clone(&decoded));
            state.order.push_back(Entry::Object(key));
            self.evict_locked(&mut state);
        }
        Some(decoded)
    }

    /// The encoded line of event `kind` for `key` at `revision`, made by `make` on a miss.
    pub fn line(
        &self,
        def: &ResourceDef,
        key: &Arc<str>,
        revision: Revision,
        kind: &'static str,
        make: impl FnOnce() -> Bytes,
    ) -> Bytes {
        self.try_line(def, key, revision, kind, || Some(make()))
            .unwrap_or_default()
    }

    /// As [`EventCache::line`], with a `make` that may fail (`None`, not cached).
    pub fn try_line(
        &self,
        def: &ResourceDef,
        key: &Arc<str>,
        revision: Revision,
        kind: &'static str,
        make: impl FnOnce() -> Option<Bytes>,
    ) -> Option<Bytes> {
        let line_key = (version_id(def), Arc::clone(key), revision, kind);
        if let Some(line) = self.lock().lines.get(&line_key) {
            return Some(line.clone());
        }
        let line = make()?;
        let mut state = self.lock();
        if !state.lines.contains_key(&line_key) {
            state.lines.insert(line_key.clone(), line.clone());
            state.order.push_back(Entry::Line(line_key));
            self.evict_locked(&mut state);
        }
        Some(line)
    }

    /// How many decoded objects the cache holds (each one is many times its stored size).
    pub fn objects_len(&self) -> usize {
        self.lock().objects.len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::pod::PODS;

    fn kv(rev: Revision) -> KeyValue {
        KeyValue {
            key: Arc::from("/registry/core/pods/ns/a"),
            value: Bytes::from(
                serde_json::to_vec(&json!({"metadata": {"name": "a"}})).expect("json"),
            ),
            create_revision: 1,
            mod_revision: rev,
        }
    }

    #[test]
    fn decodes_once_and_evicts_oldest() {
        let cache = EventCache::new(2);
        let first = cache.object(&PODS, &kv(1)).expect("decodes");
        let again = cache.object(&PODS, &kv(1)).expect("cached");
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(first["metadata"]["resourceVersion"], "1");
        cache.object(&PODS, &kv(2));
        cache.object(&PODS, &kv(3));
        let evicted = cache.object(&PODS, &kv(1)).expect("decodes again");
        assert!(!Arc::ptr_eq(&first, &evicted));
    }

    #[test]
    fn lines_are_made_once() {
        let cache = EventCache::new(8);
        let key: Arc<str> = Arc::from("k");
        let mut made = 0;
        for _ in 0..3 {
            cache.line(&PODS, &key, 5, "ADDED", || {
                made += 1;
                Bytes::from_static(b"x")
            });
        }
        assert_eq!(made, 1);
    }

    #[test]
    fn failed_lines_are_not_cached() {
        let cache = EventCache::new(8);
        let key: Arc<str> = Arc::from("k");
        assert_eq!(cache.try_line(&PODS, &key, 5, "ADDED", || None), None);
        let line = cache.try_line(&PODS, &key, 5, "ADDED", || Some(Bytes::from_static(b"x")));
        assert_eq!(line, Some(Bytes::from_static(b"x")));
    }

    #[test]
    fn undecodable_values_are_none() {
        let cache = EventCache::new(8);
        let mut bad = kv(1);
        bad.value = Bytes::from_static(b"{nope");
        assert!(cache.object(&PODS, &bad).is_none());
    }
}
