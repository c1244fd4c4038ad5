//! A watch cache in front of any [`Storage`]: recent events in memory, fanned out to watchers.
//!
//! As kube-apiserver's cacher does in front of etcd, the cache keeps one watch on the whole
//! backend open and puts every event into a ring of the last `capacity` events. A watch from a
//! revision inside that window is served entirely from memory: its backlog is read from the
//! ring and its live events come from the same fan-out, filtered by the watcher's prefix, each
//! one a cheap clone (`Arc<str>` key, `Bytes` value). A watch from older than the window goes
//! to the backend, which replays it from its own history; below the backend's compacted
//! revision it fails with [`Error::Compacted`] (410 Gone). Reads and writes are passed through.
//!
//! The cache lags the backend by the time the feeding watch takes to deliver an event; that is
//! harmless because a watch registers at `max(after, last event seen)` and so receives every
//! event after `after` exactly once, whenever it arrives. If the feeding watch ends (the cache
//! fell behind the backend's per-watcher buffer), it is reopened from the last event seen; if
//! that revision was compacted in the meantime the cache cannot know what it missed, so it
//! cuts off its watchers with [`Error::Compacted`] (they relist) and restarts at the backend's
//! current revision.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;

use super::hub::{Backlog, DEFAULT_WATCHER_BUFFER, WatchHub};
use super::{
    Error, KeyValue, ListOptions, ListResult, Result, Revision, Storage, StorageStats, WatchStream,
};

/// How many recent events a watch cache keeps unless told otherwise.
pub const DEFAULT_WATCH_CACHE_CAPACITY: usize = 10_000;

/// How many bytes of stored values a watch cache keeps at most: ten thousand events of ~3 KB
/// pods held 30 MB (BENCHMARKS.md, "Memory of the 10k run"); older backlogs come from the
/// backend, which keeps its own history.
pub const DEFAULT_WATCH_CACHE_BYTES: usize = 8 << 20;

/// How long the feeder waits before reopening its backend watch after a backend error.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// A [`Storage`] that serves recent watches from memory and passes everything else through.
pub struct WatchCache {
    inner: Arc<dyn Storage>,
    /// Fed, in revision order, only by the feeder task.
    hub: Arc<WatchHub>,
    /// The feeder task, stopped on drop.
    feeder: tokio::task::AbortHandle,
}

impl WatchCache {
    /// A cache of the last `capacity` events of `inner` (at most [`DEFAULT_WATCH_CACHE_BYTES`]
    /// of values), starting at its current revision.
    /// Must be called within a tokio runtime (it spawns the task that feeds the cache).
    pub async fn new(inner: Arc<dyn Storage>, capacity: usize) -> Result<Self> {
        Self::with_watcher_buffer(inner, capacity, DEFAULT_WATCHER_BUFFER).await
    }

    /// As [`WatchCache::new`], with each watcher allowed to fall up to `watcher_buffer` events
    /// behind before it is cut off with [`Error::Compacted`].
    pub async fn with_watcher_buffer(
        inner: Arc<dyn Storage>,
        capacity: usize,
        watcher_buffer: usize,
    ) -> Result<Self> {
        let start = inner.current_revision().await?;
        let source = inner.watch("", start).await?;
        let hub = Arc::new(
            WatchHub::new(start, capacity, watcher_buffer)
                .with_ring_byte_limit(DEFAULT_WATCH_CACHE_BYTES),
        );
        let feeder =
            tokio::spawn(feed(Arc::clone(&inner), Arc::clone(&hub), source)).abort_handle();
        Ok(WatchCache { inner, hub, feeder })
    }

    /// The revision of the newest event the cache has seen.
    pub fn cached_revision(&self) -> Revision {
        self.hub.last_revision()
    }
}

impl Drop for WatchCache {
    fn drop(&mut self) {
        self.feeder.abort();
    }
}

/// Moves every backend event into the hub, reopening the backend watch when it ends.
async fn feed(inner: Arc<dyn Storage>, hub: Arc<WatchHub>, mut source: WatchStream) {
    loop {
        while let Some(Ok(event)) = source.next().await {
            hub.publish(event);
        }
        source = loop {
            let from = hub.last_revision();
            match inner.watch("", from).await {
                Ok(stream) => break stream,
                Err(Error::Compacted { .. }) => {
                    // Events after `from` are gone: nobody can be told what changed, so every
                    // watcher must relist. Restart the window at the backend's present.
                    match inner.current_revision().await {
                        Ok(now) => {
                            tracing::warn!(
                                from,
                                now,
                                "watch cache lost events; cutting off its watchers"
                            );
                            hub.reset(now);
                        }
                        Err(err) => {
                            tracing::warn!(error = %err, "watch cache cannot read the current revision");
                            tokio::time::sleep(RETRY_DELAY).await;
                        }
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, from, "watch cache cannot reopen its backend watch");
                    tokio::time::sleep(RETRY_DELAY).await;
                }
            }
        };
    }
}

#[async_trait]
impl Storage for WatchCache {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn stats(&self) -> Result<Option<StorageStats>> {
        self.inner.stats().await
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        self.inner.compacted_revision().await
    }

    async fn progress_revision(&self) -> Result<Revision> {
        // The cache's own watchers have been handed every event the hub published, and the
        // backend's progress notifications say nothing changed after that up to theirs.
        Ok(self.hub.progress_revision())
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        self.inner.create(key, value).await
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.inner.get(key).await
    }

    async fn list(&self, opts: ListOptions) -> Result<ListResult> {
        self.inner.list(opts).await
    }

    async fn update(&self, key: &str, expected: Revision, value: Bytes) -> Result<Revision> {
        self.inner.update(key, expected, value).await
    }

    async fn delete(&self, key: &str, expected: Revision) -> Result<(Revision, KeyValue)> {
        self.inner.delete(key, expected).await
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        let compacted = self.inner.compacted_revision().await?;
        if after < compacted {
            return Err(Error::Compacted {
                requested: after,
                compacted,
            });
        }
        let (backlog, subscription) = self.hub.subscribe(prefix, after);
        match backlog {
            Backlog::Ready(events) => Ok(subscription.into_stream(events)),
            // Older than the window: the backend replays its own history (and fails with
            // Compacted if that is gone too).
            Backlog::Missing { .. } => {
                drop(subscription);
                self.inner.watch(prefix, after).await
            }
        }
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::storage::conformance::{self, next_event};
    use crate::storage::{Event, MemoryStorage};

    conformance::suite!(async {
        let inner = Arc::new(MemoryStorage::new()) as Arc<dyn Storage>;
        let cache = WatchCache::new(inner, 8).await.expect("cache");
        ((), Arc::new(cache) as Arc<dyn Storage>)
    });

    /// The suite over the SQLite backend, with a window small enough that some watches go to
    /// the backend.
    mod over_sqlite {
        use super::*;
        use crate::storage::{SqliteOptions, SqliteStorage, Synchronous};

        conformance::suite!(async {
            let dir = tempfile::tempdir().expect("tempdir");
            let inner = SqliteStorage::open(
                dir.path().join("state.db"),
                SqliteOptions {
                    synchronous: Synchronous::Normal,
                    ..SqliteOptions::default()
                },
            )
            .await
            .expect("open");
            let cache = WatchCache::new(Arc::new(inner), 8).await.expect("cache");
            (dir, Arc::new(cache) as Arc<dyn Storage>)
        });
    }

    /// Counts the watches that reach the backend.
    struct CountingStore {
        inner: MemoryStorage,
        watches: AtomicUsize,
    }

    #[async_trait]
    impl Storage for CountingStore {
        async fn current_revision(&self) -> Result<Revision> {
            self.inner.current_revision().await
        }
        async fn compacted_revision(&self) -> Result<Revision> {
            self.inner.compacted_revision().await
        }
        async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
            self.inner.create(key, value).await
        }
        async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
            self.inner.get(key).await
        }
        async fn list(&self, opts: ListOptions) -> Result<ListResult> {
            self.inner.list(opts).await
        }
        async fn update(&self, key: &str, expected: Revision, value: Bytes) -> Result<Revision> {
            self.inner.update(key, expected, value).await
        }
        async fn delete(&self, key: &str, expected: Revision) -> Result<(Revision, KeyValue)> {
            self.inner.delete(key, expected).await
        }
        async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
            self.watches.fetch_add(1, Ordering::SeqCst);
            self.inner.watch(prefix, after).await
        }
        async fn compact(&self, revision: Revision) -> Result<()> {
            self.inner.compact(revision).await
        }
    }

    fn counting(inner: MemoryStorage) -> Arc<CountingStore> {
        Arc::new(CountingStore {
            inner,
            watches: AtomicUsize::new(0),
        })
    }

    async fn create_n(store: &dyn Storage, prefix: &str, n: usize) -> Vec<Revision> {
        let mut revs = Vec::new();
        for i in 0..n {
            revs.push(
                store
                    .create(&format!("{prefix}{i}"), Bytes::from_static(b"v"))
                    .await
                    .expect("create"),
            );
        }
        revs
    }

    /// Lets the feeder task catch up with everything written so far.
    async fn settle(cache: &WatchCache, store: &dyn Storage) {
        let want = store.current_revision().await.expect("rev");
        while cache.cached_revision() < want {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn recent_watches_never_reach_the_backend() {
        let backend = counting(MemoryStorage::new());
        let cache = WatchCache::new(backend.clone(), 100).await.expect("cache");
        assert_eq!(
            backend.watches.load(Ordering::SeqCst),
            1,
            "the cache's own watch"
        );
        let revs = create_n(&cache, "/a/", 5).await;
        settle(&cache, &cache).await;
        let mut watches = Vec::new();
        for &after in &revs {
            watches.push((after, cache.watch("/a/", after).await.expect("watch")));
        }
        let live = create_n(&cache, "/a/x", 1).await[0];
        for (after, mut watch) in watches {
            for want in revs.iter().copied().filter(|&r| r > after).chain([live]) {
                assert_eq!(next_event(&mut watch).await.revision(), want);
            }
        }
        assert_eq!(
            backend.watches.load(Ordering::SeqCst),
            1,
            "all served from memory"
        );
    }

    #[tokio::test]
    async fn watch_older_than_the_window_goes_to_the_backend() {
        let backend = counting(MemoryStorage::new());
        let cache = WatchCache::new(backend.clone(), 3).await.expect("cache");
        let revs = create_n(&cache, "/a/", 6).await;
        settle(&cache, &cache).await;
        let mut watch = cache.watch("/a/", revs[0]).await.expect("watch");
        assert_eq!(backend.watches.load(Ordering::SeqCst), 2);
        for &want in &revs[1..] {
            assert_eq!(next_event(&mut watch).await.revision(), want);
        }
        cache.compact(revs[2]).await.expect("compact");
        assert!(matches!(
            cache.watch("/a/", revs[1]).await,
            Err(Error::Compacted { requested, compacted }) if requested == revs[1] && compacted == revs[2]
        ));
    }

    #[tokio::test]
    async fn fan_out_filters_each_watcher_by_prefix() {
        let inner = Arc::new(MemoryStorage::new());
        let cache = WatchCache::new(inner, 100).await.expect("cache");
        let mut watches = Vec::new();
        for ns in 0..10 {
            watches.push(
                cache
                    .watch(&format!("/pods/ns{ns}/"), 0)
                    .await
                    .expect("watch"),
            );
        }
        let mut all = cache.watch("/pods/", 0).await.expect("watch");
        let mut written = Vec::new();
        for i in 0..30 {
            let key = format!("/pods/ns{}/p{i}", i % 10);
            let rev = cache
                .create(&key, Bytes::from_static(b"v"))
                .await
                .expect("create");
            written.push((key, rev));
        }
        for (ns, watch) in watches.iter_mut().enumerate() {
            for (key, rev) in written
                .iter()
                .filter(|(k, _)| k.starts_with(&format!("/pods/ns{ns}/")))
            {
                let event = next_event(watch).await;
                assert_eq!(
                    (event.key().map(|k| &**k), event.revision()),
                    (Some(key.as_str()), *rev)
                );
            }
        }
        for (key, rev) in &written {
            let event = next_event(&mut all).await;
            assert_eq!(
                (event.key().map(|k| &**k), event.revision()),
                (Some(key.as_str()), *rev)
            );
        }
    }

    #[tokio::test]
    async fn feeder_cut_off_by_the_backend_resumes_without_a_gap() {
        // The backend lets its watchers fall only 2 events behind; the current-thread runtime
        // does not run the feeder while the test writes, so the feeder is cut off.
        let inner = Arc::new(MemoryStorage::with_watcher_buffer(2));
        let cache = WatchCache::new(inner, 100).await.expect("cache");
        let mut watch = cache.watch("/", 0).await.expect("watch");
        let revs = create_n(&cache, "/k", 10).await;
        for want in revs {
            assert_eq!(next_event(&mut watch).await.revision(), want);
        }
    }

    #[tokio::test]
    async fn feeder_gap_past_compaction_cuts_off_watchers() {
        let inner = Arc::new(MemoryStorage::with_watcher_buffer(2));
        let cache = WatchCache::new(inner.clone(), 100).await.expect("cache");
        let mut watch = cache.watch("/", 0).await.expect("watch");
        let revs = create_n(&cache, "/k", 10).await;
        // The feeder has not run: it saw nothing, and its position is now compacted away.
        cache.compact(revs[9]).await.expect("compact");
        assert_eq!(next_event(&mut watch).await.revision(), revs[0]);
        assert_eq!(next_event(&mut watch).await.revision(), revs[1]);
        assert!(matches!(
            watch.next().await,
            Some(Err(Error::Compacted { requested, .. })) if requested == revs[1]
        ));
        assert!(watch.next().await.is_none());

        // The cache restarted at the backend's present and serves new watches from there.
        settle(&cache, &*inner).await;
        let mut fresh = cache.watch("/", revs[9]).await.expect("watch");
        let rev = cache
            .create("/new", Bytes::from_static(b"v"))
            .await
            .expect("create");
        match next_event(&mut fresh).await {
            Event::Put { kv, prev: None } => assert_eq!((&*kv.key, kv.mod_revision), ("/new", rev)),
            other => panic!("unexpected {other:?}"),
        }
    }
}
