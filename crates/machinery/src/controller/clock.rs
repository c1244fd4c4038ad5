//! The wall clock a controller reads, injectable so that tests fix "now" (upstream's `clock.PassiveClock`).

use std::sync::Arc;

use jiff::Timestamp;

/// A source of the current time.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The system's clock.
pub fn system_clock() -> Clock {
    Arc::new(Timestamp::now)
}

/// A clock stopped at `at` (for tests).
pub fn fixed_clock(at: Timestamp) -> Clock {
    Arc::new(move || at)
}
