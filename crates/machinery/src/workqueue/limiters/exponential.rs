//! Per-item exponential back-off: `base * 2^failures`, capped.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::RateLimiter;

/// Waits `base_delay * 2^n` before the `n+1`-th retry of an item, never more than
/// `max_delay` (client-go's `ItemExponentialFailureRateLimiter`). Giving up after some number
/// of failures is the caller's business (see [`num_requeues`](RateLimiter::num_requeues)).
pub struct ItemExponentialFailureRateLimiter<T> {
    /// Failures per item since it was last forgotten.
    /// Invariant: every value is at least 1 (an item with no failures has no entry).
    failures: Mutex<HashMap<T, usize>>,
    /// The delay after the first failure.
    base_delay: Duration,
    /// The largest delay ever returned.
    max_delay: Duration,
}

impl<T> ItemExponentialFailureRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync,
{
    /// A limiter starting at `base_delay` and doubling up to `max_delay`.
    pub fn new(base_delay: Duration, max_delay: Duration) -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
            base_delay,
            max_delay,
        }
    }

    fn failures(&self) -> MutexGuard<'_, HashMap<T, usize>> {
        // A counter map is consistent after any panic; take a poisoned lock over.
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `base * 2^exp`, or `max_delay` when that exceeds it or overflows a duration.
    fn backoff(&self, exp: usize) -> Duration {
        // In floating point, as client-go, so that huge exponents saturate instead of
        // wrapping; 2^exp is infinite beyond exponent 1023, which also saturates.
        let exp = i32::try_from(exp).unwrap_or(i32::MAX);
        let nanos = self.base_delay.as_nanos() as f64 * 2f64.powi(exp);
        if !nanos.is_finite() || nanos >= u64::MAX as f64 {
            return self.max_delay;
        }
        Duration::from_nanos(nanos as u64).min(self.max_delay)
    }
}

impl<T> RateLimiter<T> for ItemExponentialFailureRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync,
{
    fn when(&self, item: &T) -> Duration {
        let exp = {
            let mut failures = self.failures();
            match failures.get_mut(item) {
                Some(count) => {
                    let exp = *count;
                    *count = count.saturating_add(1);
                    exp
                }
                None => {
                    failures.insert(item.clone(), 1);
                    0
                }
            }
        };
        self.backoff(exp)
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

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn doubles_per_item_and_forget_resets() {
        let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));
        for expected in [1, 2, 4, 8, 16] {
            assert_eq!(limiter.when(&"one"), expected * MS);
        }
        assert_eq!(limiter.num_requeues(&"one"), 5);

        assert_eq!(limiter.when(&"two"), MS);
        assert_eq!(limiter.when(&"two"), 2 * MS);
        assert_eq!(limiter.num_requeues(&"two"), 2);

        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), MS);
        assert_eq!(limiter.num_requeues(&"two"), 2, "forget is per item");
    }

    /// The per-item map holds only items that failed since they were last forgotten, so a
    /// controller that forgets every key it syncs keeps it empty however many keys it sees.
    #[test]
    fn forgetting_every_item_empties_the_failure_map() {
        let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));
        for i in 0..1000 {
            limiter.when(&i);
            limiter.when(&i);
        }
        assert_eq!(limiter.failures().len(), 1000);
        for i in 0..1000 {
            limiter.forget(&i);
        }
        assert!(limiter.failures().is_empty());
        limiter.forget(&7);
        assert!(
            limiter.failures().is_empty(),
            "forgetting an unknown item adds nothing"
        );
        assert_eq!(limiter.num_requeues(&7), 0);
        assert!(limiter.failures().is_empty(), "asking adds nothing");
    }

    #[test]
    fn controller_default_sequence_is_5ms_10ms_20ms() {
        let limiter = ItemExponentialFailureRateLimiter::new(5 * MS, Duration::from_secs(1000));
        let got: Vec<_> = (0..5).map(|_| limiter.when(&"key")).collect();
        assert_eq!(got, [5 * MS, 10 * MS, 20 * MS, 40 * MS, 80 * MS]);
    }

    #[test]
    fn caps_at_max_delay() {
        let limiter = ItemExponentialFailureRateLimiter::new(5 * MS, Duration::from_secs(1000));
        // 5 ms * 2^17 = 655.36 s, 2^18 = 1310.72 s > cap.
        for _ in 0..17 {
            limiter.when(&"key");
        }
        assert_eq!(limiter.when(&"key"), Duration::from_millis(655_360));
        assert_eq!(limiter.when(&"key"), Duration::from_secs(1000));
        assert_eq!(limiter.when(&"key"), Duration::from_secs(1000));
    }

    /// Upstream's `TestItemExponentialFailureRateLimiterOverFlow`.
    #[test]
    fn saturates_instead_of_overflowing() {
        struct Case {
            name: &'static str,
            base: Duration,
            max: Duration,
            warmup: usize,
            expected: Duration,
        }
        let cases = [
            Case {
                name: "small exponent",
                base: MS,
                max: Duration::from_secs(1000),
                warmup: 5,
                expected: 32 * MS,
            },
            Case {
                name: "thousand failures, ms base",
                base: MS,
                max: Duration::from_secs(1000),
                warmup: 1000,
                expected: Duration::from_secs(1000),
            },
            Case {
                name: "minute base",
                base: Duration::from_secs(60),
                max: Duration::from_secs(1000 * 3600),
                warmup: 2,
                expected: Duration::from_secs(4 * 60),
            },
            Case {
                name: "thousand failures, minute base",
                base: Duration::from_secs(60),
                max: Duration::from_secs(1000 * 3600),
                warmup: 1000,
                expected: Duration::from_secs(1000 * 3600),
            },
            Case {
                name: "max above any representable backoff",
                base: Duration::from_secs(60),
                max: Duration::MAX,
                warmup: 5000,
                expected: Duration::MAX,
            },
        ];
        for case in cases {
            let limiter = ItemExponentialFailureRateLimiter::new(case.base, case.max);
            for _ in 0..case.warmup {
                limiter.when(&"item");
            }
            assert_eq!(limiter.when(&"item"), case.expected, "case {}", case.name);
        }
    }
}
