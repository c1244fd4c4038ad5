//! Remembering a controller's own writes per work-queue key so a sync can wait, briefly, for the informer cache to show them.
//!
//! Upstream lets a sync run over caches that have not yet seen the previous sync's writes; the
//! stale resourceVersions then fail the writes with 409 Conflict and the key is retried. Waiting
//! a bounded time for the caches to catch up with our own last writes avoids most of those
//! round trips; past the bound the sync goes ahead exactly as upstream's would.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::freshness::{Freshness, parse_resource_version};

/// The highest resourceVersion written per key into one informer's resource, and that
/// informer's progress.
#[derive(Debug)]
pub struct OwnWrites {
    /// How far the informer's cache has got.
    freshness: Freshness,
    /// Per work-queue key, the highest resourceVersion this controller wrote and has not yet
    /// seen the cache reach. Locked only for map operations, never across an await.
    pending: Mutex<HashMap<String, u64>>,
}

impl OwnWrites {
    /// Tracks writes against the cache behind `freshness`.
    pub fn new(freshness: Freshness) -> Self {
        Self {
            freshness,
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn pending(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that a write on behalf of `key` produced `resource_version` (ignored when it
    /// does not parse).
    pub fn record(&self, key: &str, resource_version: Option<&str>) {
        let Some(rv) = resource_version.and_then(|rv| parse_resource_version(rv).ok()) else {
            return;
        };
        let mut pending = self.pending();
        let entry = pending.entry(key.to_owned()).or_insert(rv);
        *entry = (*entry).max(rv);
    }

    /// Waits, at most `bound`, until the cache has reached the last write recorded for `key`,
    /// and forgets it.
    pub async fn wait(&self, key: &str, bound: Duration) {
        let Some(target) = self.pending().remove(key) else {
            return;
        };
        if self
            .freshness
            .resource_version()
            .is_some_and(|rv| rv >= target)
        {
            return;
        }
        match tokio::time::timeout(bound, self.freshness.wait_for(target)).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => tracing::debug!(key, %err, "not waiting for own write"),
            Err(_) => tracing::debug!(
                key,
                resource_version = target,
                "the cache has not caught up with our write; going ahead"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn wait_is_bounded_and_forgets() {
        let writes = OwnWrites::new(Freshness::new());
        writes.record("ns/a", Some("7"));
        writes.record("ns/a", Some("5"));
        writes.record("ns/a", Some("not-a-number"));
        assert_eq!(writes.pending().get("ns/a"), Some(&7));
        let start = tokio::time::Instant::now();
        writes.wait("ns/a", Duration::from_secs(2)).await;
        assert_eq!(start.elapsed(), Duration::from_secs(2), "waited the bound");
        assert!(writes.pending().is_empty(), "forgotten after the wait");
        let start = tokio::time::Instant::now();
        writes.wait("ns/a", Duration::from_secs(2)).await;
        assert_eq!(start.elapsed(), Duration::ZERO, "nothing pending: no wait");
    }
}
