//! The revisioned key-value store under the API server, with etcd's semantics.
//!
//! One global revision counter, strictly increasing, shared by every key: each create, update
//! and delete gets the next revision, and that revision is the object's `resourceVersion`.
//! Writes are guarded by the key's current mod revision (optimistic concurrency), lists can be
//! read at an older revision (for consistent pagination), and watches deliver every change
//! after a revision, in revision order. Old revisions are compacted away; reading or watching
//! below the compacted revision fails with [`Error::Compacted`] (the API server's 410 Gone).
//!
//! Backends: `sqlite` (kine's append-only log, the default), `etcd` (an etcd v3 cluster, for
//! several API servers) and `memory` (tests), all behind [`Storage`]; `watch_cache` sits in front so recent watches never touch the database.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;

#[cfg(test)]
mod conformance;
pub mod etcd;
mod hub;
pub mod memory;
pub mod size_limit;
pub mod sqlite;
pub mod watch_cache;

pub use etcd::{EtcdOptions, EtcdStorage, EtcdTls};
pub use hub::DEFAULT_WATCHER_BUFFER;
pub use memory::MemoryStorage;
pub use sqlite::{SqliteMaintenance, SqliteOptions, SqliteStats, SqliteStorage, Synchronous};
pub use watch_cache::{DEFAULT_WATCH_CACHE_BYTES, DEFAULT_WATCH_CACHE_CAPACITY, WatchCache};

/// A revision: the store's global logical clock, and every object's `resourceVersion`.
pub type Revision = i64;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors a store reports. The API server maps them to Kubernetes `Status` codes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A create found the key already present (409 AlreadyExists).
    #[error("key {key:?} already exists")]
    AlreadyExists {
        /// The key that exists.
        key: String,
    },
    /// The key does not exist (404 NotFound).
    #[error("key {key:?} not found")]
    NotFound {
        /// The missing key.
        key: String,
    },
    /// A guarded update or delete saw a different mod revision (409 Conflict).
    #[error("key {key:?} was modified: expected revision {expected}, found {actual}")]
    Conflict {
        /// The key written.
        key: String,
        /// The revision the writer based its change on.
        expected: Revision,
        /// The key's current mod revision (0 if it no longer exists).
        actual: Revision,
    },
    /// The requested revision is older than the compaction point (410 Gone / Expired).
    #[error("revision {requested} has been compacted (oldest available is {compacted})")]
    Compacted {
        /// The revision asked for.
        requested: Revision,
        /// The compacted revision: reads below it are not possible.
        compacted: Revision,
    },
    /// The requested revision is newer than the store's current revision (etcd's
    /// "future revision"; the API server answers 504 Timeout "Too large resource version").
    #[error("revision {requested} is newer than the current revision {current}")]
    FutureRevision {
        /// The revision asked for.
        requested: Revision,
        /// The store's current revision.
        current: Revision,
    },
    /// The backend failed (I/O, SQLite, a closed store).
    #[error("storage backend error: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// One stored version of a key.
///
/// `value` is the serialized object (JSON) exactly as the API server handed it to the store;
/// the store never parses it. Cloning is cheap: the bytes are shared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The full key, e.g. `/registry/pods/default/nginx-1`.
    pub key: Arc<str>,
    /// The serialized object.
    pub value: Bytes,
    /// The revision at which the key was created (stays fixed across updates).
    pub create_revision: Revision,
    /// The revision of the last write to this key; the object's `resourceVersion`.
    pub mod_revision: Revision,
}

/// One change delivered by a watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The key was created (`prev` is `None`) or updated (`prev` is the version it replaced).
    Put {
        /// The new version; `kv.mod_revision` is the event's revision.
        kv: KeyValue,
        /// The version replaced by an update; `None` for a create.
        prev: Option<KeyValue>,
    },
    /// The key was deleted at `revision`; `prev` is the last stored version (its value is the
    /// object's final state, as the API server's DELETED watch event needs).
    Delete {
        /// The revision of the delete.
        revision: Revision,
        /// The version that was deleted.
        prev: KeyValue,
    },
    /// Nothing in the watched range changed after the last event up to `revision`: every
    /// change at or below it has been delivered. etcd's progress notification (kube-apiserver's
    /// `etcd3/watcher.go` turns it into a bookmark); it lets a watcher's revision, and the
    /// BOOKMARKs the API server sends, advance while writes happen only elsewhere in the store.
    /// Only the etcd backend sends them; the watch cache absorbs them (see
    /// [`Storage::progress_revision`]) instead of passing them to its watchers.
    Progress {
        /// The store's revision when the notification was sent.
        revision: Revision,
    },
}

impl Event {
    /// The revision at which this change happened.
    pub fn revision(&self) -> Revision {
        match self {
            Event::Put { kv, .. } => kv.mod_revision,
            Event::Delete { revision, .. } | Event::Progress { revision } => *revision,
        }
    }

    /// The key this change is about; `None` for a progress notification.
    pub fn key(&self) -> Option<&Arc<str>> {
        match self {
            Event::Put { kv, .. } => Some(&kv.key),
            Event::Delete { prev, .. } => Some(&prev.key),
            Event::Progress { .. } => None,
        }
    }

    /// Whether this is a change to a key under `prefix` (never a progress notification).
    pub fn is_under(&self, prefix: &str) -> bool {
        self.key().is_some_and(|key| key.starts_with(prefix))
    }
}

/// A page of a list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListResult {
    /// Matching keys in key order, as of `revision`.
    pub kvs: Vec<KeyValue>,
    /// The revision the list was read at (the list's `resourceVersion`). For a paginated list
    /// every page is read at the first page's revision.
    pub revision: Revision,
    /// True when more keys match after the last one returned (`limit` cut the list).
    pub more: bool,
    /// How many keys match after the last one returned, as of `revision` (etcd's range
    /// `count` less the page); 0 unless `more`. The API server's `remainingItemCount`.
    pub remaining: u64,
}

/// What a list asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// Only keys starting with this prefix.
    pub prefix: String,
    /// Only keys strictly greater than this one (for `continue`); `None` starts at the prefix.
    pub start_after: Option<String>,
    /// Read as of this revision; `None` or `Some(0)` reads the current state.
    pub revision: Option<Revision>,
    /// Return at most this many keys; `None` returns all.
    pub limit: Option<usize>,
}

/// A stream of watch events, in strictly increasing revision order. An `Err` item ends the
/// stream (for example [`Error::Compacted`] when a slow watcher fell out of the window).
pub type WatchStream = BoxStream<'static, Result<Event>>;

/// A revisioned key-value store with etcd's semantics. Every method is safe to call
/// concurrently; writes are linearizable and each gets a fresh revision.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// What the store is, for people reading health reports (`SQLite`, `memory`).
    fn backend(&self) -> &'static str {
        "a custom store"
    }

    /// The current revision: the revision of the latest write (0 for an empty store).
    async fn current_revision(&self) -> Result<Revision>;

    /// The compacted revision C: the state as of C and every later change are kept; lists at
    /// a revision below C, and watches from `after < C`, fail with [`Error::Compacted`]
    /// (0 when nothing was compacted).
    async fn compacted_revision(&self) -> Result<Revision>;

    /// Creates `key` with `value`; fails with [`Error::AlreadyExists`] if it exists.
    /// Returns the new revision.
    async fn create(&self, key: &str, value: Bytes) -> Result<Revision>;

    /// The current version of `key`, or `None`.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// Lists keys by prefix, optionally at an older revision and paginated.
    async fn list(&self, opts: ListOptions) -> Result<ListResult>;

    /// Replaces `key`'s value if its mod revision is still `expected`; otherwise fails with
    /// [`Error::Conflict`] (or [`Error::NotFound`] if it no longer exists). Returns the new
    /// revision.
    async fn update(&self, key: &str, expected: Revision, value: Bytes) -> Result<Revision>;

    /// Deletes `key` if its mod revision is still `expected` (same errors as `update`).
    /// Returns the deletion's revision and the deleted version.
    async fn delete(&self, key: &str, expected: Revision) -> Result<(Revision, KeyValue)>;

    /// Every change to keys under `prefix` with a revision strictly greater than `after`, in
    /// revision order, then live changes as they happen. Fails (immediately or as the
    /// stream's first item) with [`Error::Compacted`] if `after` is below the compacted
    /// revision.
    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream>;

    /// A revision R such that every event at or below R has already been handed (queued, if
    /// not yet read) to every watch stream this store opened from a revision at or after the
    /// progress revision of its opening; 0 when the store cannot tell. Watches use it for
    /// bookmarks that advance while nothing they watch changes, as kube-apiserver uses etcd's
    /// progress notifications.
    async fn progress_revision(&self) -> Result<Revision> {
        Ok(0)
    }

    /// Forgets history older than `revision`: afterwards the state as of `revision` and all
    /// later changes are still readable, and [`Storage::compacted_revision`] is `revision`.
    /// Current values are always kept.
    async fn compact(&self, revision: Revision) -> Result<()>;

    /// The store's size figures, for operators and the soak harness; `None` when the store
    /// cannot tell. Reading them may walk the whole store: not for hot paths.
    async fn stats(&self) -> Result<Option<StorageStats>> {
        Ok(None)
    }
}

/// How big a store is. Each figure is `None` where the backend cannot tell it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StorageStats {
    /// Bytes the store takes on disk: the SQLite file (without its WAL), etcd's database
    /// (`dbSize`, what kube-apiserver reports as `apiserver_storage_size_bytes`).
    pub db_bytes: Option<u64>,
    /// Bytes of the write-ahead log next to the database (SQLite's `-wal` file).
    pub wal_bytes: Option<u64>,
    /// Bytes the database holds in use (etcd's `dbSizeInUse`; SQLite's pages less its
    /// free pages).
    pub db_in_use_bytes: Option<u64>,
    /// Keys that exist now (the objects stored).
    pub live_keys: Option<u64>,
    /// Versions kept: every key's current version plus history not yet compacted away.
    pub stored_rows: Option<u64>,
    /// Bytes of the values of every kept version: the live data plus the retained revisions.
    pub stored_value_bytes: Option<u64>,
}
