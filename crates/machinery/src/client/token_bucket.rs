//! A token bucket with reservations, as client-go's `flowcontrol.NewTokenBucketRateLimiter`.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

/// The longest a reservation is ever pushed out (guards against a zero or absurd refill rate).
const MAX_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// A token bucket: it holds up to `burst` tokens, refilled at `qps` tokens per second, and
/// starts full (golang.org/x/time/rate semantics, which client-go's limiter wraps).
///
/// [`TokenBucket::reserve`] always succeeds and returns when the reserved token may be used;
/// reservations are served strictly in the order they were made, so waiters proceed FIFO.
/// [`TokenBucket::try_accept`] takes a token only if one is available now.
///
/// Time is `tokio::time::Instant`, so tests control it with paused time.
#[derive(Debug)]
pub struct TokenBucket {
    /// Refill rate in tokens per second; positive.
    qps: f64,
    /// Capacity; at least 1.
    burst: f64,
    /// Tokens and when they were last counted.
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    /// Tokens available at `last`; never above `burst`, negative when reservations are queued
    /// (each queued reservation is one token owed).
    tokens: f64,
    /// When `tokens` was last brought up to date.
    last: Instant,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens (at least 1) refilled at `qps` per second. A `qps` that is
    /// not positive and finite never refills.
    pub fn new(qps: f32, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps: f64::from(qps),
            burst,
            state: Mutex::new(BucketState {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    /// Refill rate, tokens per second.
    pub fn qps(&self) -> f64 {
        self.qps
    }

    /// Capacity.
    pub fn burst(&self) -> f64 {
        self.burst
    }

    /// Takes one token and returns the instant from which it may be used (now when one was
    /// available). Later reservations get later instants.
    pub fn reserve(&self) -> Instant {
        let now = Instant::now();
        let mut state = self.locked();
        self.refill_locked(&mut state, now);
        state.tokens -= 1.0;
        if state.tokens >= 0.0 {
            return now;
        }
        let wait = if self.refills() {
            Duration::try_from_secs_f64(-state.tokens / self.qps).unwrap_or(MAX_WAIT)
        } else {
            MAX_WAIT
        };
        now + wait.min(MAX_WAIT)
    }

    /// Takes one token if one is available now (client-go's `TryAccept`).
    pub fn try_accept(&self) -> bool {
        let now = Instant::now();
        let mut state = self.locked();
        self.refill_locked(&mut state, now);
        if state.tokens >= 1.0 {
            state.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Waits for a token (client-go's `Accept` / `Wait`).
    pub async fn acquire(&self) {
        let at = self.reserve();
        sleep_until(at).await;
    }

    fn refills(&self) -> bool {
        self.qps.is_finite() && self.qps > 0.0
    }

    /// Adds the tokens earned since `state.last`, capped at `burst`.
    fn refill_locked(&self, state: &mut BucketState, now: Instant) {
        if now > state.last {
            if self.refills() {
                let earned = (now - state.last).as_secs_f64() * self.qps;
                state.tokens = (state.tokens + earned).min(self.burst);
            }
            state.last = now;
        }
    }

    fn locked(&self) -> MutexGuard<'_, BucketState> {
        match self.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::advance;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_is_immediate_then_tokens_come_at_qps() {
        let bucket = TokenBucket::new(5.0, 3);
        let start = Instant::now();
        let reservations: Vec<Duration> = (0..6).map(|_| bucket.reserve() - start).collect();
        assert_eq!(
            reservations,
            vec![
                Duration::ZERO,
                Duration::ZERO,
                Duration::ZERO,
                Duration::from_millis(200),
                Duration::from_millis(400),
                Duration::from_millis(600),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn idle_time_refills_up_to_burst_only() {
        let bucket = TokenBucket::new(10.0, 2);
        assert!(bucket.try_accept());
        assert!(bucket.try_accept());
        assert!(!bucket.try_accept());
        advance(Duration::from_millis(100)).await;
        assert!(bucket.try_accept());
        assert!(!bucket.try_accept());
        advance(Duration::from_secs(60)).await;
        assert!(bucket.try_accept());
        assert!(bucket.try_accept());
        assert!(!bucket.try_accept(), "never more than burst");
    }

    #[tokio::test(start_paused = true)]
    async fn try_accept_does_not_jump_queued_reservations() {
        let bucket = TokenBucket::new(1.0, 1);
        let start = Instant::now();
        assert_eq!(bucket.reserve(), start);
        assert_eq!(bucket.reserve(), start + Duration::from_secs(1));
        advance(Duration::from_secs(1)).await;
        // The token earned during that second belongs to the queued reservation.
        assert!(!bucket.try_accept());
    }

    #[tokio::test(start_paused = true)]
    async fn non_positive_qps_never_refills() {
        let bucket = TokenBucket::new(0.0, 1);
        assert!(bucket.try_accept());
        advance(Duration::from_secs(3600)).await;
        assert!(!bucket.try_accept());
        assert!(bucket.reserve() >= Instant::now() + Duration::from_secs(3600));
    }
}
