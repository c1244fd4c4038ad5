//! The rate-limited queue: failed items come back after a delay their rate limiter decides.

use std::hash::Hash;
use std::ops::Deref;
use std::sync::Arc;

use super::delaying::DelayingQueue;
use super::limiters::RateLimiter;
use super::queue::QueueConfig;

/// A [`DelayingQueue`] whose retries are spaced by a [`RateLimiter`] (client-go's
/// `TypedRateLimitingInterface`). This is the queue controllers use.
///
/// Dereferences to the [`DelayingQueue`] (and through it to the [`Queue`](super::Queue)).
/// Cloning is cheap and every clone is the same queue, with the same limiter.
///
/// Remember to [`forget`](Self::forget) an item once it succeeds (or is given up on), or the
/// limiter keeps counting its failures forever.
pub struct RateLimitingQueue<T> {
    /// The queue items are delayed into.
    queue: DelayingQueue<T>,
    /// Decides each retry's delay; shared by every handle.
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            limiter: Arc::clone(&self.limiter),
        }
    }
}

impl<T> Deref for RateLimitingQueue<T> {
    type Target = DelayingQueue<T>;

    fn deref(&self) -> &DelayingQueue<T> {
        &self.queue
    }
}

impl<T> RateLimitingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An unnamed queue, recording no metrics, limited by `limiter` (client-go's
    /// `NewTypedRateLimitingQueue`).
    ///
    /// # Panics
    ///
    /// Spawns the delaying queue's timer task: must be called inside a Tokio runtime.
    pub fn new(limiter: impl RateLimiter<T> + 'static) -> Self {
        Self::with_config(limiter, QueueConfig::default())
    }

    /// A queue built from `config`, limited by `limiter` (client-go's
    /// `NewTypedRateLimitingQueueWithConfig`).
    ///
    /// # Panics
    ///
    /// Spawns the delaying queue's timer task: must be called inside a Tokio runtime.
    pub fn with_config(limiter: impl RateLimiter<T> + 'static, config: QueueConfig) -> Self {
        Self {
            queue: DelayingQueue::with_config(config),
            limiter: Arc::new(limiter),
        }
    }

    /// Adds `item` after the delay the limiter gives it, counting one more failure
    /// (client-go's `AddRateLimited`).
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.limiter.when(&item);
        self.queue.add_after(item, delay);
    }

    /// Stops the limiter tracking `item` (client-go's `Forget`); its next failure starts from
    /// the first delay again. Call it when the item succeeds or is given up on. This only
    /// clears the limiter: [`done`](super::Queue::done) must still be called.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` has been requeued since it was last forgotten (client-go's
    /// `NumRequeues`).
    pub fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

#[cfg(test)]
mod tests {
    use super::super::limiters::{
        ItemExponentialFailureRateLimiter, default_controller_rate_limiter,
    };
    use super::*;
    use std::time::Duration;
    use tokio::time::Instant;

    const MS: Duration = Duration::from_millis(1);

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    /// How long until `q` hands out its next item, on paused time.
    async fn delay_of_next(q: &RateLimitingQueue<&'static str>) -> (Duration, &'static str) {
        let start = Instant::now();
        let item = q.get().await.expect("item");
        q.done(&item);
        (start.elapsed(), item)
    }

    /// Upstream's `TestRateLimitingQueue`: each `add_rate_limited` waits the limiter's delay.
    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_waits_the_limiters_delay() {
        let q = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
            MS,
            Duration::from_secs(1),
        ));

        q.add_rate_limited("one");
        assert_eq!(delay_of_next(&q).await, (MS, "one"));
        q.add_rate_limited("one");
        assert_eq!(delay_of_next(&q).await, (2 * MS, "one"));
        assert_eq!(q.num_requeues(&"one"), 2);

        q.add_rate_limited("two");
        assert_eq!(delay_of_next(&q).await, (MS, "two"));
        q.add_rate_limited("two");
        assert_eq!(delay_of_next(&q).await, (2 * MS, "two"));

        q.forget(&"one");
        assert_eq!(q.num_requeues(&"one"), 0);
        q.add_rate_limited("one");
        assert_eq!(delay_of_next(&q).await, (MS, "one"));
        assert_eq!(q.num_requeues(&"two"), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_while_waiting_keeps_the_earlier_retry() {
        let q = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
            10 * MS,
            Duration::from_secs(1),
        ));
        q.add_rate_limited("key"); // 10 ms
        q.add_rate_limited("key"); // 20 ms, merged: the 10 ms deadline stays
        assert_eq!(q.num_requeues(&"key"), 2);
        settle().await;
        assert_eq!(q.waiting_len(), 1);
        assert_eq!(delay_of_next(&q).await, (10 * MS, "key"));
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        assert_eq!(q.len(), 0, "the merged retry must not fire a second time");
    }

    #[tokio::test(start_paused = true)]
    async fn controller_queue_spaces_retries_of_one_key_exponentially() {
        let q = RateLimitingQueue::new(default_controller_rate_limiter());
        let mut delays = Vec::new();
        for _ in 0..4 {
            q.add_rate_limited("ns/name");
            delays.push(delay_of_next(&q).await.0);
        }
        assert_eq!(delays, [5 * MS, 10 * MS, 20 * MS, 40 * MS]);
        q.forget(&"ns/name");
        q.add_rate_limited("ns/name");
        assert_eq!(delay_of_next(&q).await.0, 5 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn clones_share_the_queue_and_the_limiter() {
        let q = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
            MS,
            Duration::from_secs(1),
        ));
        let other = q.clone();
        other.add_rate_limited("a");
        assert_eq!(q.num_requeues(&"a"), 1);
        assert_eq!(delay_of_next(&q).await, (MS, "a"));
        q.shut_down();
        assert!(other.shutting_down());
    }
}
