//! Rate limiters deciding how long a failed item waits before it is queued again.
//!
//! As client-go's `default_rate_limiters.go`: a [`RateLimiter`] is asked [`when`](RateLimiter::when)
//! an item may be retried each time it fails, and told to [`forget`](RateLimiter::forget) it
//! when it succeeds. Per-item limiters count failures by item; the token bucket limits the
//! overall retry rate; [`MaxOfRateLimiter`] combines them. Delays are measured on
//! `tokio::time`, never the wall clock.

mod bucket;
mod exponential;
mod fast_slow;
mod max_of;
mod max_wait;

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

pub use bucket::BucketRateLimiter;
pub use exponential::ItemExponentialFailureRateLimiter;
pub use fast_slow::ItemFastSlowRateLimiter;
pub use max_of::MaxOfRateLimiter;
pub use max_wait::WithMaxWaitRateLimiter;

/// Decides how long an item waits before it is retried (client-go's `TypedRateLimiter`).
///
/// Implementations are shared by every worker of a queue, hence `Send + Sync` and `&self`.
pub trait RateLimiter<T>: Send + Sync {
    /// How long `item` should wait before its next attempt. Each call counts as one more
    /// failure of the item (or, for the token bucket, takes one token).
    fn when(&self, item: &T) -> Duration;

    /// Stops tracking `item`, whether it finally succeeded or was given up on; its next
    /// failure starts from the first delay again.
    fn forget(&self, item: &T);

    /// How many times `item` has failed since it was last forgotten.
    fn num_requeues(&self, item: &T) -> usize;
}

impl<T, L: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<L> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }

    fn forget(&self, item: &T) {
        (**self).forget(item)
    }

    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

impl<T, L: RateLimiter<T> + ?Sized> RateLimiter<T> for Arc<L> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }

    fn forget(&self, item: &T) {
        (**self).forget(item)
    }

    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

/// The limiter controllers use (client-go's `DefaultControllerRateLimiter`): the larger of a
/// per-item exponential back-off (5 ms doubling up to 1000 s) and an overall token bucket
/// (10 retries per second, bursts of 100).
pub fn default_controller_rate_limiter<T>() -> MaxOfRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::new(10.0, 100)),
    ])
}

/// A per-item exponential back-off from 1 ms up to 1000 s (client-go's
/// `DefaultItemBasedRateLimiter`).
pub fn default_item_based_rate_limiter<T>() -> ItemExponentialFailureRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn default_controller_rate_limiter_is_max_of_exponential_and_bucket() {
        let limiter = default_controller_rate_limiter::<String>();
        let key = "ns/name".to_string();
        // The bucket is full, so the per-item back-off decides.
        assert_eq!(limiter.when(&key), Duration::from_millis(5));
        assert_eq!(limiter.when(&key), Duration::from_millis(10));
        assert_eq!(limiter.when(&key), Duration::from_millis(20));
        assert_eq!(limiter.num_requeues(&key), 3);
        // Drain the rest of the burst with other keys: 3 + 97 = 100 tokens taken.
        for i in 0..97 {
            assert_eq!(
                limiter.when(&format!("other/{i}")),
                Duration::from_millis(5)
            );
        }
        // The bucket is empty: the 101st retry waits 100 ms for its token although the
        // item's own back-off is only 5 ms.
        assert_eq!(
            limiter.when(&"fresh/key".to_string()),
            Duration::from_millis(100)
        );
        limiter.forget(&key);
        assert_eq!(limiter.num_requeues(&key), 0);
    }

    #[test]
    fn default_item_based_rate_limiter_starts_at_one_millisecond() {
        let limiter = default_item_based_rate_limiter::<&str>();
        assert_eq!(limiter.when(&"a"), Duration::from_millis(1));
        assert_eq!(limiter.when(&"a"), Duration::from_millis(2));
    }

    #[test]
    fn boxed_and_shared_limiters_delegate() {
        let shared: Arc<dyn RateLimiter<&str>> = Arc::new(default_item_based_rate_limiter());
        let boxed: Box<dyn RateLimiter<&str>> = Box::new(Arc::clone(&shared));
        assert_eq!(boxed.when(&"a"), Duration::from_millis(1));
        assert_eq!(shared.num_requeues(&"a"), 1);
        boxed.forget(&"a");
        assert_eq!(shared.num_requeues(&"a"), 0);
    }
}
