//! An overall token bucket: a steady retry rate with bursts, whatever the item.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::RateLimiter;

/// Limits the overall retry rate to `qps` per second with bursts of `burst`, whatever the
/// item (client-go's `BucketRateLimiter` over `golang.org/x/time/rate`).
///
/// [`when`](RateLimiter::when) *reserves* a token: it always takes one, letting the bucket go
/// into debt, and returns how long until that token exists. So the first `burst` calls return
/// zero and the following ones are spaced `1/qps` apart. Time is `tokio::time::Instant`.
pub struct BucketRateLimiter {
    /// Tokens added per second; infinite means no limit.
    qps: f64,
    /// The bucket's capacity, and its content when the limiter is built.
    burst: f64,
    /// The bucket's content as of its last reservation.
    bucket: Mutex<Bucket>,
}

/// The token count at one instant.
struct Bucket {
    /// Tokens in the bucket at `last`; negative while reservations are in debt.
    /// Invariant: never more than `burst`.
    tokens: f64,
    /// When `tokens` was computed; tokens accrue from here.
    last: Instant,
}

impl BucketRateLimiter {
    /// A bucket refilled at `qps` tokens per second, holding at most `burst`, starting full.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst);
        Self {
            qps,
            burst,
            bucket: Mutex::new(Bucket {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    fn bucket(&self) -> MutexGuard<'_, Bucket> {
        // Two plain numbers are consistent after any panic; take a poisoned lock over.
        self.bucket.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes one token and returns how long until it exists (`Reserve().Delay()`).
    ///
    /// As x/time/rate, a reservation that can never be honoured (a bucket of size zero, or
    /// no refill and no token left) takes nothing and returns [`Duration::MAX`].
    fn reserve(&self) -> Duration {
        if self.qps == f64::INFINITY {
            return Duration::ZERO;
        }
        let now = Instant::now();
        let mut bucket = self.bucket();
        let elapsed = now.saturating_duration_since(bucket.last);
        let refill = if self.qps > 0.0 {
            elapsed.as_secs_f64() * self.qps
        } else {
            0.0
        };
        let tokens = (bucket.tokens + refill).min(self.burst) - 1.0;
        let wait = if tokens >= 0.0 {
            Duration::ZERO
        } else if self.qps > 0.0 {
            let nanos = -tokens / self.qps * 1e9;
            if nanos >= u64::MAX as f64 {
                Duration::MAX
            } else {
                Duration::from_nanos(nanos as u64)
            }
        } else {
            Duration::MAX
        };
        if self.burst < 1.0 || wait == Duration::MAX {
            return Duration::MAX;
        }
        bucket.tokens = tokens;
        bucket.last = now.max(bucket.last);
        wait
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }

    /// The bucket does not track items.
    fn forget(&self, _item: &T) {}

    /// The bucket does not track items: always zero.
    fn num_requeues(&self, _item: &T) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[tokio::test(start_paused = true)]
    async fn burst_then_spaced_by_one_over_qps() {
        let limiter = BucketRateLimiter::new(10.0, 100);
        for i in 0..100 {
            assert_eq!(limiter.when(&i), Duration::ZERO, "burst token {i}");
        }
        // Each further reservation waits one more tenth of a second.
        assert_eq!(limiter.when(&100), 100 * MS);
        assert_eq!(limiter.when(&101), 200 * MS);
        assert_eq!(limiter.when(&102), 300 * MS);
        assert_eq!(RateLimiter::<i32>::num_requeues(&limiter, &100), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn refills_with_time_up_to_burst() {
        let limiter = BucketRateLimiter::new(10.0, 2);
        assert_eq!(limiter.when(&()), Duration::ZERO);
        assert_eq!(limiter.when(&()), Duration::ZERO);
        assert_eq!(limiter.when(&()), 100 * MS);
        // The debt is repaid after 100 ms, and one more token accrues in the next 100 ms.
        tokio::time::advance(200 * MS).await;
        assert_eq!(limiter.when(&()), Duration::ZERO);
        assert_eq!(limiter.when(&()), 100 * MS);
        // A long idle period refills the bucket only up to its burst.
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(limiter.when(&()), Duration::ZERO);
        assert_eq!(limiter.when(&()), Duration::ZERO);
        assert_eq!(limiter.when(&()), 100 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn partial_refill_shortens_the_wait() {
        let limiter = BucketRateLimiter::new(10.0, 1);
        assert_eq!(limiter.when(&()), Duration::ZERO);
        tokio::time::advance(40 * MS).await;
        assert_eq!(limiter.when(&()), 60 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn degenerate_buckets() {
        struct Case {
            name: &'static str,
            qps: f64,
            burst: u32,
            expected: [Duration; 3],
        }
        let cases = [
            Case {
                name: "infinite rate never waits",
                qps: f64::INFINITY,
                burst: 0,
                expected: [Duration::ZERO; 3],
            },
            Case {
                name: "zero burst can never be honoured",
                qps: 10.0,
                burst: 0,
                expected: [Duration::MAX; 3],
            },
            Case {
                name: "zero rate hands out its burst and then nothing",
                qps: 0.0,
                burst: 2,
                expected: [Duration::ZERO, Duration::ZERO, Duration::MAX],
            },
        ];
        for case in cases {
            let limiter = BucketRateLimiter::new(case.qps, case.burst);
            let got = [limiter.when(&()), limiter.when(&()), limiter.when(&())];
            assert_eq!(got, case.expected, "case {}", case.name);
        }
    }
}
