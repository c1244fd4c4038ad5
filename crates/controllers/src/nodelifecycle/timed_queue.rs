//! A rate-limited queue of nodes to taint, processed in order of due time (upstream's
//! `RateLimitedTimedQueue` over a `UniqueQueue`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use kcm_machinery::client::TokenBucket;
use tokio::time::Instant;

/// How often the NoExecute tainting pass runs (upstream's `NodeEvictionPeriod`).
pub const NODE_EVICTION_PERIOD: Duration = Duration::from_millis(100);
/// Burst of each zone's limiter (upstream's `EvictionRateLimiterBurst`).
pub const EVICTION_RATE_LIMITER_BURST: u32 = 1;

/// One queued node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedValue {
    /// The node name.
    pub value: String,
    /// The node's UID when queued.
    pub uid: String,
    /// When it was queued.
    pub added_at: Instant,
    /// When it may be processed.
    pub process_at: Instant,
}

/// The tainting rate: a token bucket, or nothing ever (rate 0).
#[derive(Debug)]
enum Limiter {
    /// Tokens at `qps`, burst [`EVICTION_RATE_LIMITER_BURST`].
    Bucket { qps: f32, bucket: TokenBucket },
    /// Rate 0: never accepts.
    Never,
}

impl Limiter {
    fn new(qps: f32) -> Self {
        if qps > 0.0 && qps.is_finite() {
            Limiter::Bucket {
                qps,
                bucket: TokenBucket::new(qps, EVICTION_RATE_LIMITER_BURST),
            }
        } else {
            Limiter::Never
        }
    }

    fn qps(&self) -> f32 {
        match self {
            Limiter::Bucket { qps, .. } => *qps,
            Limiter::Never => 0.0,
        }
    }

    fn try_accept(&self) -> bool {
        match self {
            Limiter::Bucket { bucket, .. } => bucket.try_accept(),
            Limiter::Never => false,
        }
    }
}

/// Queue contents. Invariants: every value in `queue` is in `set` and in `by_value` with the
/// same entry; `set` may hold values no longer queued (processed successfully: they stay
/// "known" until [`RateLimitedTimedQueue::remove`], so a pass does not re-add them).
#[derive(Debug, Default)]
struct Inner {
    /// Ordered by `(process_at, value)`.
    queue: BTreeSet<(Instant, String)>,
    /// The queued entries by value.
    by_value: HashMap<String, TimedValue>,
    /// Every value added and not removed.
    set: HashSet<String>,
}

/// A per-zone queue of nodes waiting for their NoExecute taint, drained no faster than its
/// rate, as upstream's `RateLimitedTimedQueue`. Time is tokio's.
#[derive(Debug)]
pub struct RateLimitedTimedQueue {
    inner: Mutex<Inner>,
    limiter: Mutex<Limiter>,
}

impl RateLimitedTimedQueue {
    /// An empty queue draining at `qps` (0: never).
    pub fn new(qps: f32) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            limiter: Mutex::new(Limiter::new(qps)),
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn limiter(&self) -> MutexGuard<'_, Limiter> {
        self.limiter.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `value` due now unless it is already known; returns whether it was added.
    pub fn add(&self, value: &str, uid: &str) -> bool {
        let now = Instant::now();
        let mut inner = self.inner();
        if !inner.set.insert(value.to_owned()) {
            return false;
        }
        inner.queue.insert((now, value.to_owned()));
        inner.by_value.insert(
            value.to_owned(),
            TimedValue {
                value: value.to_owned(),
                uid: uid.to_owned(),
                added_at: now,
                process_at: now,
            },
        );
        true
    }

    /// Forgets `value` (queued or processed); returns whether it was known.
    pub fn remove(&self, value: &str) -> bool {
        let mut inner = self.inner();
        if let Some(v) = inner.by_value.remove(value) {
            inner.queue.remove(&(v.process_at, v.value));
        }
        inner.set.remove(value)
    }

    /// Empties the queue.
    pub fn clear(&self) {
        *self.inner() = Inner::default();
    }

    /// Number of values waiting.
    pub fn len(&self) -> usize {
        self.inner().queue.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The current rate.
    pub fn qps(&self) -> f32 {
        self.limiter().qps()
    }

    /// Replaces the rate, as upstream's `SwapLimiter`: a no-op for the same rate; a new
    /// bucket starts drained when the old one had no token left, so a rate change does not
    /// grant an extra token.
    pub fn swap_limiter(&self, qps: f32) {
        let mut limiter = self.limiter();
        if limiter.qps() == qps {
            return;
        }
        let saturated = !limiter.try_accept();
        let new = Limiter::new(qps);
        if saturated {
            new.try_accept();
        }
        *limiter = new;
    }

    /// Processes due values in order while the limiter grants tokens, as upstream's `Try`:
    /// `f` returns `(true, _)` when done (the value stays known but leaves the queue) or
    /// `(false, wait)` to retry after `wait`. The lock is not held while `f` runs.
    pub async fn try_process<F, Fut>(&self, mut f: F)
    where
        F: FnMut(TimedValue) -> Fut,
        Fut: Future<Output = (bool, Duration)>,
    {
        loop {
            let head = {
                let inner = self.inner();
                let Some((_, value)) = inner.queue.first() else {
                    return;
                };
                inner.by_value.get(value).cloned()
            };
            let Some(head) = head else { return };
            if !self.limiter().try_accept() {
                return;
            }
            let now = Instant::now();
            if now < head.process_at {
                return;
            }
            let (done, wait) = f(head.clone()).await;
            let mut inner = self.inner();
            // Removed (or re-added) while `f` ran: leave it as it is now.
            if inner.by_value.get(&head.value) != Some(&head) {
                continue;
            }
            inner.queue.remove(&(head.process_at, head.value.clone()));
            if done {
                inner.by_value.remove(&head.value);
            } else {
                let process_at = now + wait + Duration::from_nanos(1);
                inner.queue.insert((process_at, head.value.clone()));
                if let Some(v) = inner.by_value.get_mut(&head.value) {
                    v.process_at = process_at;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    async fn drain(q: &RateLimitedTimedQueue) -> Vec<String> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        q.try_process(move |v| {
            let s = s.clone();
            async move {
                s.lock().expect("lock").push(v.value);
                (true, Duration::ZERO)
            }
        })
        .await;
        seen.lock().expect("lock").clone()
    }

    #[tokio::test(start_paused = true)]
    async fn drains_at_its_rate_in_order() {
        let q = RateLimitedTimedQueue::new(0.1);
        assert!(q.add("a", "1"));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(q.add("b", "2"));
        assert!(!q.add("a", "1"), "unique");
        assert_eq!(drain(&q).await, ["a"], "burst of one");
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(drain(&q).await.is_empty(), "0.1 qps: next token after 10s");
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(drain(&q).await, ["b"]);
        assert!(
            !q.add("a", "1"),
            "processed values stay known until removed"
        );
        assert!(q.remove("a"));
        assert!(q.add("a", "1"));
    }

    #[tokio::test(start_paused = true)]
    async fn zero_rate_never_processes_and_swap_resumes() {
        let q = RateLimitedTimedQueue::new(0.0);
        q.add("a", "1");
        assert!(drain(&q).await.is_empty());
        q.swap_limiter(1.0);
        // The old limiter was saturated: the new bucket starts drained.
        assert!(drain(&q).await.is_empty());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(drain(&q).await, ["a"]);
        assert_eq!(q.qps(), 1.0);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_values_are_retried_after_their_wait() {
        let q = RateLimitedTimedQueue::new(100.0);
        q.add("a", "1");
        q.try_process(|_| async { (false, Duration::from_secs(1)) })
            .await;
        assert_eq!(q.len(), 1);
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(drain(&q).await.is_empty(), "not due yet");
        tokio::time::advance(Duration::from_millis(600)).await;
        assert_eq!(drain(&q).await, ["a"]);
        assert!(q.is_empty());
    }
}
