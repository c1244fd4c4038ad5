//! An in-memory [`Storage`] with the same semantics as the SQLite backend, for tests.
//!
//! All state sits behind one `std::sync::Mutex`: every operation is a short, non-blocking
//! critical section (no I/O, no `.await` inside), which makes writes trivially linearizable and
//! lets a watch read its backlog and register for live events atomically. Each key keeps its
//! versions back to the compaction point (so lists at older revisions work) and a log of every
//! event since the compaction point serves watches from any revision in the window.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;

use super::hub::{Backlog, DEFAULT_WATCHER_BUFFER, WatchHub};
use super::{
    Error, Event, KeyValue, ListOptions, ListResult, Result, Revision, Storage, StorageStats,
    WatchStream,
};

/// A revisioned key-value store held entirely in memory.
pub struct MemoryStorage {
    state: Mutex<State>,
    /// Live fan-out. Published to only while `state` is locked, so events reach watchers in
    /// revision order and a watch registers atomically with reading its backlog. The hub
    /// keeps no ring: `State::log` is the backlog source.
    hub: WatchHub,
}

struct State {
    /// The revision of the latest write (0 for an empty store).
    revision: Revision,
    /// Reads below this revision fail; `compacted <= revision`.
    compacted: Revision,
    /// Each key's versions in increasing `mod_revision` order; never empty. The versions kept
    /// are the one current as of `compacted` (unless it is a tombstone) and every later one.
    keys: BTreeMap<Arc<str>, Vec<Version>>,
    /// Every event with a revision in `(compacted, revision]`, in revision order.
    log: VecDeque<Event>,
}

/// One version of a key.
#[derive(Clone)]
struct Version {
    mod_revision: Revision,
    create_revision: Revision,
    /// `None` marks a deletion (a tombstone).
    value: Option<Bytes>,
}

impl Version {
    fn to_kv(&self, key: &Arc<str>) -> Option<KeyValue> {
        self.value.as_ref().map(|value| KeyValue {
            key: Arc::clone(key),
            value: value.clone(),
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
        })
    }
}

impl Default for MemoryStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStorage {
    /// An empty store at revision 0.
    pub fn new() -> Self {
        Self::with_watcher_buffer(DEFAULT_WATCHER_BUFFER)
    }

    /// An empty store whose watchers may each fall up to `watcher_buffer` events behind before
    /// they are cut off with [`Error::Compacted`].
    pub fn with_watcher_buffer(watcher_buffer: usize) -> Self {
        MemoryStorage {
            state: Mutex::new(State {
                revision: 0,
                compacted: 0,
                keys: BTreeMap::new(),
                log: VecDeque::new(),
            }),
            hub: WatchHub::new(0, 0, watcher_buffer),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every mutation below completes or returns before touching state, so a poisoned
        // lock (a panic elsewhere while holding it) still guards consistent data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends the event of a write that was given revision `state.revision`, and publishes it.
    fn record_locked(&self, state: &mut State, event: Event) {
        state.log.push_back(event.clone());
        self.hub.publish(event);
    }

    /// The current live version of `key` with its versions, or NotFound / Conflict.
    fn guard_locked<'a>(
        state: &'a mut State,
        key: &str,
        expected: Revision,
    ) -> Result<(Arc<str>, &'a mut Vec<Version>)> {
        let not_found = || Error::NotFound { key: key.into() };
        let name = state
            .keys
            .get_key_value(key)
            .map(|(name, _)| Arc::clone(name))
            .ok_or_else(not_found)?;
        let versions = state.keys.get_mut(key).ok_or_else(not_found)?;
        let latest = versions.last().ok_or_else(not_found)?;
        if latest.value.is_none() {
            return Err(not_found());
        }
        if latest.mod_revision != expected {
            return Err(Error::Conflict {
                key: key.into(),
                expected,
                actual: latest.mod_revision,
            });
        }
        Ok((name, versions))
    }
}

/// The version of a key current as of `rev`, if any.
fn version_at(versions: &[Version], rev: Revision) -> Option<&Version> {
    let idx = versions.partition_point(|v| v.mod_revision <= rev);
    idx.checked_sub(1).and_then(|i| versions.get(i))
}

/// The revision a read at `requested` (0 = current) happens at, checked against the window.
pub(crate) fn read_revision(
    requested: Option<Revision>,
    current: Revision,
    compacted: Revision,
) -> Result<Revision> {
    match requested {
        None | Some(0) => Ok(current),
        Some(rev) if rev < compacted => Err(Error::Compacted {
            requested: rev,
            compacted,
        }),
        Some(rev) if rev > current => Err(Error::FutureRevision {
            requested: rev,
            current,
        }),
        Some(rev) => Ok(rev),
    }
}

#[async_trait]
impl Storage for MemoryStorage {
    fn backend(&self) -> &'static str {
        "memory"
    }

    /// Counted under the lock: one pass over every kept version.
    async fn stats(&self) -> Result<Option<StorageStats>> {
        let state = self.lock();
        let (mut live, mut rows, mut bytes) = (0u64, 0u64, 0u64);
        for versions in state.keys.values() {
            if versions.last().is_some_and(|v| v.value.is_some()) {
                live += 1;
            }
            rows += versions.len() as u64;
            bytes += versions
                .iter()
                .filter_map(|v| v.value.as_ref())
                .map(|v| v.len() as u64)
                .sum::<u64>();
        }
        Ok(Some(StorageStats {
            live_keys: Some(live),
            stored_rows: Some(rows),
            stored_value_bytes: Some(bytes),
            ..StorageStats::default()
        }))
    }

    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.lock().revision)
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        Ok(self.lock().compacted)
    }

    async fn progress_revision(&self) -> Result<Revision> {
        // Events are dispatched to the watchers under the same lock that assigns revisions.
        Ok(self.lock().revision)
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        let mut state = self.lock();
        let state = &mut *state;
        let rev = state.revision + 1;
        let version = Version {
            mod_revision: rev,
            create_revision: rev,
            value: Some(value),
        };
        let name = match state.keys.get_key_value(key) {
            Some((name, versions)) => {
                if versions.last().is_some_and(|v| v.value.is_some()) {
                    return Err(Error::AlreadyExists { key: key.into() });
                }
                Arc::clone(name)
            }
            None => Arc::from(key),
        };
        let kv = version.to_kv(&name);
        state
            .keys
            .entry(Arc::clone(&name))
            .or_default()
            .push(version);
        state.revision = rev;
        if let Some(kv) = kv {
            self.record_locked(state, Event::Put { kv, prev: None });
        }
        Ok(rev)
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let state = self.lock();
        Ok(state
            .keys
            .get_key_value(key)
            .and_then(|(name, versions)| versions.last().and_then(|v| v.to_kv(name))))
    }

    async fn list(&self, opts: ListOptions) -> Result<ListResult> {
        let state = self.lock();
        let rev = read_revision(opts.revision, state.revision, state.compacted)?;
        let start = match &opts.start_after {
            Some(after) if after.as_str() >= opts.prefix.as_str() => {
                Bound::Excluded(after.as_str())
            }
            _ => Bound::Included(opts.prefix.as_str()),
        };
        let limit = opts.limit.filter(|&l| l > 0).unwrap_or(usize::MAX);
        let mut matches = state
            .keys
            .range::<str, _>((start, Bound::Unbounded))
            .take_while(|(name, _)| name.starts_with(&opts.prefix))
            .filter_map(|(name, versions)| version_at(versions, rev).and_then(|v| v.to_kv(name)));
        let kvs: Vec<KeyValue> = matches.by_ref().take(limit).collect();
        let remaining = if kvs.len() == limit {
            matches.count() as u64
        } else {
            0
        };
        Ok(ListResult {
            kvs,
            revision: rev,
            more: remaining > 0,
            remaining,
        })
    }

    async fn update(&self, key: &str, expected: Revision, value: Bytes) -> Result<Revision> {
        let mut state = self.lock();
        let state = &mut *state;
        let rev = state.revision + 1;
        let (name, versions) = Self::guard_locked(state, key, expected)?;
        let prev = versions.last().and_then(|v| v.to_kv(&name));
        let Some(prev) = prev else {
            return Err(Error::NotFound { key: key.into() });
        };
        let version = Version {
            mod_revision: rev,
            create_revision: prev.create_revision,
            value: Some(value),
        };
        let kv = version.to_kv(&name);
        versions.push(version);
        state.revision = rev;
        if let Some(kv) = kv {
            self.record_locked(
                state,
                Event::Put {
                    kv,
                    prev: Some(prev),
                },
            );
        }
        Ok(rev)
    }

    async fn delete(&self, key: &str, expected: Revision) -> Result<(Revision, KeyValue)> {
        let mut state = self.lock();
        let state = &mut *state;
        let rev = state.revision + 1;
        let (name, versions) = Self::guard_locked(state, key, expected)?;
        let Some(prev) = versions.last().and_then(|v| v.to_kv(&name)) else {
            return Err(Error::NotFound { key: key.into() });
        };
        versions.push(Version {
            mod_revision: rev,
            create_revision: prev.create_revision,
            value: None,
        });
        state.revision = rev;
        self.record_locked(
            state,
            Event::Delete {
                revision: rev,
                prev: prev.clone(),
            },
        );
        Ok((rev, prev))
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        let state = self.lock();
        if after < state.compacted {
            return Err(Error::Compacted {
                requested: after,
                compacted: state.compacted,
            });
        }
        let (backlog, subscription) = self.hub.subscribe(prefix, after);
        let backlog = match backlog {
            Backlog::Ready(events) => events,
            Backlog::Missing { upto } => {
                debug_assert_eq!(upto, state.revision);
                let start = state.log.partition_point(|e| e.revision() <= after);
                state
                    .log
                    .range(start..)
                    .filter(|e| e.is_under(prefix))
                    .cloned()
                    .collect()
            }
        };
        drop(state);
        Ok(subscription.into_stream(backlog))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let mut state = self.lock();
        if revision <= state.compacted {
            return Ok(());
        }
        if revision > state.revision {
            return Err(Error::FutureRevision {
                requested: revision,
                current: state.revision,
            });
        }
        state.keys.retain(|_, versions| {
            let idx = versions.partition_point(|v| v.mod_revision <= revision);
            // Keep the version current as of `revision` unless it is a tombstone.
            let keep_from = match idx.checked_sub(1).and_then(|i| versions.get(i)) {
                Some(v) if v.value.is_some() => idx - 1,
                _ => idx,
            };
            versions.drain(..keep_from);
            !versions.is_empty()
        });
        let drop_events = state.log.partition_point(|e| e.revision() <= revision);
        state.log.drain(..drop_events);
        state.compacted = revision;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::conformance;

    conformance::suite!(async { ((), Arc::new(MemoryStorage::new()) as Arc<dyn Storage>) });

    #[tokio::test]
    async fn compaction_drops_superseded_versions_and_tombstones() {
        let store = MemoryStorage::new();
        let r1 = store
            .create("/a", Bytes::from_static(b"1"))
            .await
            .expect("create");
        let r2 = store
            .update("/a", r1, Bytes::from_static(b"2"))
            .await
            .expect("update");
        let r3 = store
            .create("/b", Bytes::from_static(b"1"))
            .await
            .expect("create");
        store.delete("/b", r3).await.expect("delete");
        store.compact(r2 + 2).await.expect("compact");
        let state = store.lock();
        assert_eq!(state.keys.len(), 1, "the deleted key is gone entirely");
        assert_eq!(state.keys.get("/a").map(Vec::len), Some(1));
        assert!(state.log.is_empty());
    }

    #[tokio::test]
    async fn slow_watcher_is_cut_off_with_compacted() {
        let store = MemoryStorage::with_watcher_buffer(4);
        let mut watch = store.watch("/", 0).await.expect("watch");
        for i in 0..10 {
            store
                .create(&format!("/k{i}"), Bytes::from_static(b"v"))
                .await
                .expect("create");
        }
        use futures::StreamExt;
        let items: Vec<_> = watch.by_ref().collect().await;
        assert_eq!(items.len(), 5, "4 queued events then the error");
        assert!(matches!(
            items.last(),
            Some(Err(Error::Compacted {
                requested: 4,
                compacted: 5
            }))
        ));
    }
}
