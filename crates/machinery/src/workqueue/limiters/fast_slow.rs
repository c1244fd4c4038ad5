//! Per-item fast-then-slow retries: a fixed short delay for the first attempts, then a long one.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::RateLimiter;

/// Retries an item after `fast_delay` for its first `max_fast_attempts` failures and after
/// `slow_delay` from then on (client-go's `ItemFastSlowRateLimiter`).
pub struct ItemFastSlowRateLimiter<T> {
    /// Failures per item since it was last forgotten.
    /// Invariant: every value is at least 1 (an item with no failures has no entry).
    failures: Mutex<HashMap<T, usize>>,
    /// How many failures get the fast delay.
    max_fast_attempts: usize,
    /// The delay of the first `max_fast_attempts` failures.
    fast_delay: Duration,
    /// The delay of every later failure.
    slow_delay: Duration,
}

impl<T> ItemFastSlowRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync,
{
    /// A limiter giving `fast_delay` for `max_fast_attempts` failures, then `slow_delay`.
    pub fn new(fast_delay: Duration, slow_delay: Duration, max_fast_attempts: usize) -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
            max_fast_attempts,
            fast_delay,
            slow_delay,
        }
    }

    fn failures(&self) -> MutexGuard<'_, HashMap<T, usize>> {
        // A counter map is consistent after any panic; take a poisoned lock over.
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T> RateLimiter<T> for ItemFastSlowRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync,
{
    fn when(&self, item: &T) -> Duration {
        let attempts = {
            let mut failures = self.failures();
            match failures.get_mut(item) {
                Some(count) => {
                    *count = count.saturating_add(1);
                    *count
                }
                None => {
                    failures.insert(item.clone(), 1);
                    1
                }
            }
        };
        if attempts <= self.max_fast_attempts {
            self.fast_delay
        } else {
            self.slow_delay
        }
    }

    fn forget(&self, item: &T) {
        self.failures().remove(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.failures().get(item).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's `TestItemFastSlowRateLimiter`.
    #[test]
    fn fast_then_slow_per_item() {
        let fast = Duration::from_millis(5);
        let slow = Duration::from_secs(10);
        let limiter = ItemFastSlowRateLimiter::new(fast, slow, 3);

        let got: Vec<_> = (0..5).map(|_| limiter.when(&"one")).collect();
        assert_eq!(got, [fast, fast, fast, slow, slow]);
        assert_eq!(limiter.num_requeues(&"one"), 5);

        assert_eq!(limiter.when(&"two"), fast);
        assert_eq!(limiter.when(&"two"), fast);
        assert_eq!(limiter.num_requeues(&"two"), 2);

        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), fast);
    }

    #[test]
    fn forgetting_every_item_empties_the_failure_map() {
        let limiter = ItemFastSlowRateLimiter::new(Duration::ZERO, Duration::from_secs(1), 2);
        for i in 0..1000 {
            limiter.when(&i);
        }
        assert_eq!(limiter.failures().len(), 1000);
        for i in 0..1000 {
            limiter.forget(&i);
        }
        assert!(limiter.failures().is_empty());
        assert_eq!(limiter.num_requeues(&1), 0);
        assert!(limiter.failures().is_empty(), "asking adds nothing");
    }

    #[test]
    fn zero_fast_attempts_is_always_slow() {
        let limiter = ItemFastSlowRateLimiter::new(Duration::ZERO, Duration::from_secs(1), 0);
        assert_eq!(limiter.when(&1), Duration::from_secs(1));
    }
}
