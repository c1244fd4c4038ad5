//! Wall-clock time for the timestamps written into API objects (Event, Lease), behind a trait.
//!
//! Durations and deadlines inside the machinery are measured with `tokio::time::Instant`
//! (monotonic, pausable in tests). Wall-clock timestamps are only ever *written* (an Event's
//! `firstTimestamp`, a Lease's `renewTime`); they are read through [`WallClock`] so tests can
//! pin them and make them advance with tokio's paused clock.

use std::fmt;

use jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

/// A source of wall-clock timestamps.
pub trait WallClock: Send + Sync + fmt::Debug {
    /// The current wall-clock time.
    fn now(&self) -> Timestamp;
}

/// The system's real-time clock (`jiff::Timestamp::now()`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl WallClock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A wall clock that starts at a fixed timestamp and advances with tokio's clock.
///
/// Under `#[tokio::test(start_paused = true)]` it only moves when tokio time is advanced, so
/// timestamps in tests are deterministic yet still strictly increase as simulated time passes.
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    /// The wall time reported at `anchor`.
    anchor_wall: Timestamp,
    /// The tokio instant at which the clock read `anchor_wall`.
    anchor: Instant,
}

impl TokioClock {
    /// A clock that reads `start` now and advances with `tokio::time::Instant`.
    pub fn starting_at(start: Timestamp) -> Self {
        Self {
            anchor_wall: start,
            anchor: Instant::now(),
        }
    }
}

impl WallClock for TokioClock {
    fn now(&self) -> Timestamp {
        let elapsed = Instant::now().saturating_duration_since(self.anchor);
        let elapsed = SignedDuration::try_from(elapsed).unwrap_or(SignedDuration::MAX);
        self.anchor_wall
            .checked_add(elapsed)
            .unwrap_or(Timestamp::MAX)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_time() {
        let start: Timestamp = "2024-01-01T00:00:00Z".parse().expect("timestamp");
        let clock = TokioClock::starting_at(start);
        assert_eq!(clock.now(), start);
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(
            clock.now(),
            "2024-01-01T00:00:01.5Z"
                .parse::<Timestamp>()
                .expect("timestamp")
        );
    }
}
