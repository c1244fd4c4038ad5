//! Per-key exponential back-off, as client-go's `util/flowcontrol.Backoff` (the DaemonSet controller's failed-pods back-off).
//!
//! Each key has a delay that starts at `initial`, doubles on every [`Backoff::next`] up to
//! `max`, and is forgotten once nothing happened for twice `max`. Time is
//! `tokio::time::Instant`, so tests pause and advance it.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// One key's state.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The current delay; never above `max`.
    backoff: Duration,
    /// When [`Backoff::next`] last moved it.
    last_update: Instant,
}

/// Exponential back-off per key, as client-go's `flowcontrol.Backoff` (without jitter, as
/// `NewBackOff`).
#[derive(Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    /// Locked only for map operations, never across an await.
    entries: Mutex<HashMap<String, Entry>>,
}

impl Backoff {
    /// A back-off starting at `initial` and capped at `max`, as `flowcontrol.NewBackOff`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether an entry last updated at `last_update` is stale at `at` (older than twice
    /// the cap), as client-go's `hasExpired`.
    fn expired(&self, at: Instant, last_update: Instant) -> bool {
        at.saturating_duration_since(last_update) > self.max * 2
    }

    /// The current delay of `id` (zero when it has none), as `Backoff.Get`.
    pub fn get(&self, id: &str) -> Duration {
        self.entries().get(id).map_or(Duration::ZERO, |e| e.backoff)
    }

    /// Moves `id` one step: to `initial` when new or expired at `at`, else doubled (capped);
    /// stamped now, as `Backoff.Next`.
    pub fn next(&self, id: &str, at: Instant) {
        let now = Instant::now();
        let mut entries = self.entries();
        let backoff = match entries.get(id) {
            Some(e) if !self.expired(at, e.last_update) => (e.backoff * 2).min(self.max),
            _ => self.initial,
        };
        entries.insert(
            id.to_owned(),
            Entry {
                backoff,
                last_update: now,
            },
        );
    }

    /// Forgets `id`, as `Backoff.Reset`.
    pub fn reset(&self, id: &str) {
        self.entries().remove(id);
    }

    /// Whether `at` falls within `id`'s delay since its last update, as
    /// `Backoff.IsInBackOffSinceUpdate`.
    pub fn is_in_back_off_since_update(&self, id: &str, at: Instant) -> bool {
        let entries = self.entries();
        let Some(e) = entries.get(id) else {
            return false;
        };
        if self.expired(at, e.last_update) {
            return false;
        }
        at.saturating_duration_since(e.last_update) < e.backoff
    }

    /// Drops the entries untouched for twice the cap, as `Backoff.GC`.
    pub fn gc(&self) {
        let now = Instant::now();
        self.entries()
            .retain(|_, e| now.saturating_duration_since(e.last_update) <= self.max * 2);
    }

    /// How many keys have a delay.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether no key has a delay.
    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's `TestSlowBackoff` and `TestBackoffHighWaterMark`: 1s, 2s, 4s, ... capped.
    #[tokio::test(start_paused = true)]
    async fn doubles_up_to_the_cap() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let mut seen = Vec::new();
        for _ in 0..5 {
            b.next("k", Instant::now());
            seen.push(b.get("k").as_secs());
        }
        assert_eq!(seen, [1, 2, 4, 5, 5]);
        assert_eq!(b.get("other"), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn in_back_off_until_the_delay_passed() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        assert!(!b.is_in_back_off_since_update("k", Instant::now()));
        b.next("k", Instant::now());
        assert!(b.is_in_back_off_since_update("k", Instant::now()));
        tokio::time::advance(Duration::from_millis(1001)).await;
        assert!(!b.is_in_back_off_since_update("k", Instant::now()));
        b.next("k", Instant::now());
        assert_eq!(b.get("k"), Duration::from_secs(2));
    }

    /// Upstream's `TestBackoffGC` and `TestIsInBackOffSinceUpdate` expiry: an entry idle for
    /// twice the cap starts over and is collected.
    #[tokio::test(start_paused = true)]
    async fn expired_entries_start_over_and_are_collected() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
        b.next("k", Instant::now());
        b.next("k", Instant::now());
        assert_eq!(b.get("k"), Duration::from_secs(2));
        tokio::time::advance(Duration::from_secs(21)).await;
        assert!(!b.is_in_back_off_since_update("k", Instant::now()));
        b.next("k", Instant::now());
        assert_eq!(b.get("k"), Duration::from_secs(1), "expired: starts over");
        tokio::time::advance(Duration::from_secs(21)).await;
        b.gc();
        assert!(b.is_empty());
    }
}
