//! The worst case of several limiters.

use std::time::Duration;

use super::RateLimiter;

/// Asks every limiter and returns the longest delay (client-go's `MaxOfRateLimiter`).
///
/// Every limiter is asked on every call, so each keeps counting. Combined with a token bucket,
/// the burst may appear exceeded when particular items were delayed longer by another limiter.
pub struct MaxOfRateLimiter<T> {
    /// The combined limiters, asked in order.
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// Combines `limiters`. With none, every delay is zero.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|limiter| limiter.when(item))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiters
            .iter()
            .map(|limiter| limiter.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter};
    use super::*;

    /// Upstream's `TestMaxOfRateLimiter`.
    #[test]
    fn takes_the_worst_of_each_limiter() {
        let fast = Duration::from_millis(5);
        let slow = Duration::from_secs(3);
        let limiter = MaxOfRateLimiter::new(vec![
            Box::new(ItemFastSlowRateLimiter::new(fast, slow, 3)),
            Box::new(ItemExponentialFailureRateLimiter::new(
                Duration::from_millis(1),
                Duration::from_secs(1),
            )),
        ]);

        // fast-slow: 5, 5, 5, 3000, 3000 ms; exponential: 1, 2, 4, 8, 16 ms.
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
    fn exponential_overtakes_when_it_grows_past_the_other() {
        let limiter = MaxOfRateLimiter::new(vec![
            Box::new(ItemFastSlowRateLimiter::new(
                Duration::from_millis(5),
                Duration::from_millis(5),
                1,
            )),
            Box::new(ItemExponentialFailureRateLimiter::new(
                Duration::from_millis(1),
                Duration::from_secs(1),
            )),
        ]);
        let got: Vec<_> = (0..5).map(|_| limiter.when(&"x").as_millis()).collect();
        assert_eq!(got, [5, 5, 5, 8, 16]);
    }

    #[test]
    fn empty_is_zero() {
        let limiter: MaxOfRateLimiter<u8> = MaxOfRateLimiter::new(Vec::new());
        assert_eq!(limiter.when(&0), Duration::ZERO);
        assert_eq!(limiter.num_requeues(&0), 0);
    }
}
