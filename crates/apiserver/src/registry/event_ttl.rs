//! Events expire `--event-ttl` (1h) after their last write, as kube-apiserver stores them: it
//! puts each event's key under an etcd lease of that TTL, renewed by every create and update
//! (`pkg/registry/core/event/storage`'s TTLFunc). kcm's stores have no leases, so one task
//! follows the events' keys and deletes those written longer ago than the TTL. Each delete is
//! conditional on the revision seen, so an event written again meanwhile is kept, and watchers
//! see a DELETED event as they do when etcd revokes a lease.
//!
//! After a restart every stored event counts as written at start-up: an event lives at most
//! one TTL past a restart, never less than one after its last write.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::storage::{Error, Event, ListOptions, Revision, Storage};

/// kube-apiserver's `--event-ttl` default.
pub const DEFAULT_EVENT_TTL: Duration = Duration::from_secs(3600);
/// Where core/v1 (and events.k8s.io/v1) events are stored.
pub const EVENTS_PREFIX: &str = "/registry/core/events/";
/// The most often expired events are looked for.
const SWEEP_AT_MOST_EVERY: Duration = Duration::from_secs(10);
/// Keys listed per page when the task (re)starts.
const PAGE: usize = 1000;

/// When each event key was last written, oldest first.
///
/// Invariant: `revisions` holds every key followed, with its latest revision; `queue` holds a
/// `(deadline, key, revision)` per write, in deadline order (deadlines are now + TTL, so
/// pushing in time order keeps them sorted). An entry whose revision is not the key's latest
/// is stale and skipped.
#[derive(Debug, Default)]
pub struct Expiry {
    revisions: HashMap<Arc<str>, Revision>,
    queue: VecDeque<(Instant, Arc<str>, Revision)>,
}

impl Expiry {
    /// `key` was written at `revision` and expires at `deadline`.
    pub fn written(&mut self, key: &str, revision: Revision, deadline: Instant) {
        // A key written again shares the string it is followed by: no allocation per write.
        let key: Arc<str> = match self.revisions.get_key_value(key) {
            Some((followed, _)) => Arc::clone(followed),
            None => Arc::from(key),
        };
        self.revisions.insert(Arc::clone(&key), revision);
        self.queue.push_back((deadline, key, revision));
        // Rewrites of the same keys leave stale entries: drop them once they outnumber the
        // live ones, so the queue stays within twice the keys followed.
        if self.queue.len() > 2 * self.revisions.len() + 64 {
            let revisions = &self.revisions;
            self.queue
                .retain(|(_, k, r)| revisions.get(k).is_some_and(|latest| latest == r));
        }
    }

    /// `key` was deleted.
    pub fn deleted(&mut self, key: &str) {
        self.revisions.remove(key);
    }

    /// The keys (with the revision to delete them at) whose deadline is at or before `now`;
    /// they are no longer followed.
    pub fn expired(&mut self, now: Instant) -> Vec<(Arc<str>, Revision)> {
        let mut out = Vec::new();
        while let Some((deadline, _, _)) = self.queue.front() {
            if *deadline > now {
                break;
            }
            let Some((_, key, revision)) = self.queue.pop_front() else {
                break;
            };
            if self.revisions.get(&key) == Some(&revision) {
                self.revisions.remove(&key);
                out.push((key, revision));
            }
        }
        out
    }

    /// Keys followed.
    pub fn len(&self) -> usize {
        self.revisions.len()
    }

    /// Whether no key is followed.
    pub fn is_empty(&self) -> bool {
        self.revisions.is_empty()
    }
}

/// Deletes events `ttl` after their last write until `shutdown`; restarts from a fresh list
/// when its watch ends (a compaction, a store error).
pub async fn expire_events(storage: Arc<dyn Storage>, ttl: Duration, shutdown: CancellationToken) {
    let every = (ttl / 10).clamp(Duration::from_millis(100), SWEEP_AT_MOST_EVERY);
    while !shutdown.is_cancelled() {
        if let Err(e) = follow(&*storage, ttl, every, &shutdown).await {
            tracing::warn!(error = %e, "expiring events: restarting from a fresh list");
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }
}

/// One life of the task: a list, then its watch, sweeping every `every`.
async fn follow(
    storage: &dyn Storage,
    ttl: Duration,
    every: Duration,
    shutdown: &CancellationToken,
) -> Result<(), Error> {
    let mut expiry = Expiry::default();
    let mut opts = ListOptions {
        prefix: EVENTS_PREFIX.to_owned(),
        limit: Some(PAGE),
        ..ListOptions::default()
    };
    let started = Instant::now();
    let revision = loop {
        let page = storage.list(opts.clone()).await?;
        for kv in &page.kvs {
            expiry.written(&kv.key, kv.mod_revision, started + ttl);
        }
        opts.revision = Some(page.revision);
        match (page.more, page.kvs.last()) {
            (true, Some(last)) => opts.start_after = Some(last.key.to_string()),
            _ => break page.revision,
        }
    };
    let mut watch = storage.watch(EVENTS_PREFIX, revision).await?;
    let mut sweep = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            event = watch.next() => match event {
                Some(Ok(Event::Put { kv, .. })) => {
                    expiry.written(&kv.key, kv.mod_revision, Instant::now() + ttl);
                }
                Some(Ok(Event::Delete { prev, .. })) => expiry.deleted(&prev.key),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Err(Error::Backend("the events' watch ended".into())),
            },
            _ = sweep.tick() => {
                for (key, revision) in expiry.expired(Instant::now()) {
                    match storage.delete(&key, revision).await {
                        // Written again (its watch event is on its way) or already gone.
                        Ok(_) | Err(Error::Conflict { .. } | Error::NotFound { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::storage::MemoryStorage;

    fn at(t0: Instant, secs: u64) -> Instant {
        t0 + Duration::from_secs(secs)
    }

    #[test]
    fn an_event_expires_a_ttl_after_its_last_write() {
        let t0 = Instant::now();
        let mut e = Expiry::default();
        e.written("/e/a", 1, at(t0, 10));
        e.written("/e/b", 2, at(t0, 11));
        e.written("/e/a", 3, at(t0, 12)); // renewed
        assert!(e.expired(at(t0, 10)).is_empty(), "a was written again");
        assert_eq!(e.expired(at(t0, 11)), [(Arc::from("/e/b"), 2)]);
        assert_eq!(e.expired(at(t0, 12)), [(Arc::from("/e/a"), 3)]);
        assert!(e.is_empty());
    }

    #[test]
    fn a_deleted_event_is_not_expired_and_the_queue_stays_bounded() {
        let t0 = Instant::now();
        let mut e = Expiry::default();
        e.written("/e/a", 1, at(t0, 1));
        e.deleted("/e/a");
        assert!(e.expired(at(t0, 5)).is_empty());
        for r in 0..10_000 {
            e.written("/e/hot", r, at(t0, 10));
        }
        assert_eq!(e.len(), 1);
        assert!(e.queue.len() <= 2 + 64 + 1, "{}", e.queue.len());
        let (followed, _) = e.revisions.get_key_value("/e/hot").expect("followed");
        assert!(
            e.queue
                .iter()
                .filter(|(_, k, _)| &**k == "/e/hot")
                .all(|(_, k, _)| Arc::ptr_eq(k, followed)),
            "every write of a key shares one string"
        );
        assert_eq!(e.expired(at(t0, 10)), [(Arc::from("/e/hot"), 9_999)]);
    }

    async fn settle() {
        for _ in 0..32 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn events_are_deleted_after_the_ttl_and_others_kept() {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let v = || Bytes::from_static(b"{}");
        let old = storage
            .create("/registry/core/events/ns/old.1", v())
            .await
            .expect("create");
        storage
            .create("/registry/core/pods/ns/p", v())
            .await
            .expect("a pod");
        let ttl = Duration::from_secs(60);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(expire_events(Arc::clone(&storage), ttl, shutdown.clone()));
        settle().await;
        tokio::time::advance(Duration::from_secs(30)).await;
        settle().await;
        let renewed = storage
            .update("/registry/core/events/ns/old.1", old, v())
            .await
            .expect("update");
        storage
            .create("/registry/core/events/ns/new.1", v())
            .await
            .expect("create");
        settle().await;
        tokio::time::advance(Duration::from_secs(40)).await; // 70 s: past the first write's TTL
        settle().await;
        let still = storage
            .get("/registry/core/events/ns/old.1")
            .await
            .expect("get");
        assert_eq!(
            still.map(|kv| kv.mod_revision),
            Some(renewed),
            "renewed at 30 s"
        );
        tokio::time::advance(Duration::from_secs(30)).await; // 100 s: 70 s after both writes
        settle().await;
        for key in [
            "/registry/core/events/ns/old.1",
            "/registry/core/events/ns/new.1",
        ] {
            assert!(
                storage.get(key).await.expect("get").is_none(),
                "{key} expired"
            );
        }
        assert!(
            storage
                .get("/registry/core/pods/ns/p")
                .await
                .expect("get")
                .is_some(),
            "only events expire"
        );
        shutdown.cancel();
        task.await.expect("task");
    }
}
