//! A cap on another limiter's delay.

use std::time::Duration;

use super::RateLimiter;

/// Returns the wrapped limiter's delay, but never more than `max_delay` (client-go's
/// `WithMaxWaitRateLimiter`).
pub struct WithMaxWaitRateLimiter<L> {
    /// The limiter whose delays are capped.
    limiter: L,
    /// The longest delay ever returned.
    max_delay: Duration,
}

impl<L> WithMaxWaitRateLimiter<L> {
    /// Caps `limiter`'s delays at `max_delay`.
    pub fn new(limiter: L, max_delay: Duration) -> Self {
        Self { limiter, max_delay }
    }
}

impl<T, L: RateLimiter<T>> RateLimiter<T> for WithMaxWaitRateLimiter<L> {
    fn when(&self, item: &T) -> Duration {
        self.limiter.when(item).min(self.max_delay)
    }

    fn forget(&self, item: &T) {
        self.limiter.forget(item)
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Upstream's test limiter: `base` for the first `threshold` calls overall, then `max`.
    struct StepRateLimiter {
        count: AtomicUsize,
        threshold: usize,
        base: Duration,
        max: Duration,
    }

    impl RateLimiter<usize> for StepRateLimiter {
        fn when(&self, _item: &usize) -> Duration {
            if self.count.fetch_add(1, Ordering::Relaxed) < self.threshold {
                self.base
            } else {
                self.max
            }
        }

        fn forget(&self, _item: &usize) {}

        fn num_requeues(&self, _item: &usize) -> usize {
            0
        }
    }

    /// Upstream's `TestWithMaxWaitRateLimiter`.
    #[test]
    fn caps_the_wrapped_delay() {
        let limiter = WithMaxWaitRateLimiter::new(
            StepRateLimiter {
                count: AtomicUsize::new(0),
                threshold: 100,
                base: Duration::from_millis(5),
                max: Duration::from_secs(1000),
            },
            Duration::from_secs(500),
        );
        for i in 0..100 {
            assert_eq!(limiter.when(&i), Duration::from_millis(5), "call {i}");
        }
        for i in 100..200 {
            assert_eq!(limiter.when(&i), Duration::from_secs(500), "call {i}");
        }
    }
}
