//! Exponential backoff with jitter, a cap and a reset after a healthy spell, as apimachinery's
//! `wait.Backoff` driven by `DelayWithReset` (the Reflector's `backoffManager`).

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// The Reflector's backoff parameters, as client-go's `NewReflectorWithOptions`: 800ms
/// doubling up to 30s, each delay jittered up to +100% (so capped delays fall in [30s, 60s)),
/// reset once no backoff was needed for 2 minutes.
pub const REFLECTOR_INITIAL: Duration = Duration::from_millis(800);
/// See [`REFLECTOR_INITIAL`].
pub const REFLECTOR_CAP: Duration = Duration::from_secs(30);
/// See [`REFLECTOR_INITIAL`].
pub const REFLECTOR_RESET_AFTER: Duration = Duration::from_secs(120);

/// Exponential backoff state. Reads time from `tokio::time` so tests can pause it.
#[derive(Debug)]
pub struct Backoff {
    initial: Duration,
    cap: Duration,
    reset_after: Duration,
    factor: f64,
    jitter: f64,
    /// The next un-jittered delay; never above `cap`.
    current: Duration,
    /// When [`Self::next_delay`] was last called.
    last_backoff: Option<Instant>,
    rng: StdRng,
}

impl Backoff {
    /// A backoff starting at `initial`, multiplied by `factor` each step up to `cap`, each
    /// delay increased by a random fraction up to `jitter` of itself, and reset to `initial`
    /// when more than `reset_after` passed since the previous delay was handed out.
    pub fn new(
        initial: Duration,
        cap: Duration,
        reset_after: Duration,
        factor: f64,
        jitter: f64,
    ) -> Self {
        Self {
            initial,
            cap,
            reset_after,
            factor,
            jitter,
            current: initial.min(cap),
            last_backoff: None,
            rng: StdRng::from_rng(&mut rand::rng()),
        }
    }

    /// The Reflector's backoff (see [`REFLECTOR_INITIAL`]).
    pub fn reflector() -> Self {
        Self::new(
            REFLECTOR_INITIAL,
            REFLECTOR_CAP,
            REFLECTOR_RESET_AFTER,
            2.0,
            1.0,
        )
    }

    /// Makes the jitter reproducible.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.rng = StdRng::seed_from_u64(seed);
        self
    }

    /// The delay to wait now, advancing the sequence.
    pub fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        if let Some(last) = self.last_backoff
            && now.duration_since(last) > self.reset_after
        {
            self.current = self.initial.min(self.cap);
        }
        self.last_backoff = Some(now);
        let delay = self.current;
        self.current = self.current.mul_f64(self.factor).min(self.cap);
        if self.jitter > 0.0 {
            delay + delay.mul_f64(self.rng.random::<f64>() * self.jitter)
        } else {
            delay
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn doubles_up_to_the_cap_with_jitter_below_double() {
        let mut b = Backoff::reflector().with_seed(7);
        let mut base = REFLECTOR_INITIAL;
        for _ in 0..12 {
            let d = b.next_delay();
            assert!(d >= base && d < base * 2, "{d:?} not in [{base:?}, 2×)");
            base = (base * 2).min(REFLECTOR_CAP);
        }
        // Capped delays fall in [30s, 60s).
        let d = b.next_delay();
        assert!(d >= REFLECTOR_CAP && d < REFLECTOR_CAP * 2);
    }

    #[tokio::test(start_paused = true)]
    async fn resets_after_a_healthy_spell() {
        let mut b = Backoff::new(
            Duration::from_secs(1),
            Duration::from_secs(30),
            Duration::from_secs(120),
            2.0,
            0.0,
        );
        assert_eq!(b.next_delay(), Duration::from_secs(1));
        assert_eq!(b.next_delay(), Duration::from_secs(2));
        tokio::time::advance(Duration::from_secs(100)).await;
        assert_eq!(b.next_delay(), Duration::from_secs(4));
        tokio::time::advance(Duration::from_secs(121)).await;
        assert_eq!(b.next_delay(), Duration::from_secs(1));
    }
}
