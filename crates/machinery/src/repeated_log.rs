//! Identical log lines under load, summarized: the first line of a kind in each interval is logged at its level with how many like it were held back since the last one; the rest go to debug level with their per-item detail.
//!
//! A controller that cannot keep up (a full event queue, a pod network with no CIDR left, an
//! API server refusing writes) would otherwise print the same ERROR line thousands of times a
//! minute, once per item, burying everything else. A [`RepeatFilter`] decides per line: a line
//! whose *signature* (what makes two lines "the same", e.g. the controller, message and error
//! text, without the item's key) was not logged in the last [`SUMMARY_INTERVAL`] is logged,
//! carrying `repeated = N` for the N lines of that signature held back since the previous one;
//! the others are [`Verdict::Suppress`]ed, and the caller logs them at debug level with the
//! key, so nothing is lost with `KCM_LOG=debug`.
//!
//! The count of a burst's tail rides on the next line of its signature: a burst that stops
//! for good leaves its last count unprinted, as a line that never repeats needs none.
//!
//! Time is passed in, so the filter is tested with made-up instants.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one signature's line is held back after it was logged.
pub const SUMMARY_INTERVAL: Duration = Duration::from_secs(10);
/// Signatures past this many are pruned of those idle for an interval, so the map stays
/// bounded by what repeats now, not by everything that ever failed.
const PRUNE_ABOVE: usize = 1024;

/// Whether to log a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Log it at its level, saying how many lines like it were held back since the last.
    Log {
        /// Lines of this signature suppressed since the previous logged one.
        repeated: u64,
    },
    /// Held back: log it at debug level only.
    Suppress,
}

/// One signature's window: when its line was last logged and how many were held back since.
#[derive(Debug)]
struct Window {
    logged_at: Instant,
    suppressed: u64,
}

/// Per-signature windows. Invariant: every window's `logged_at` is the instant of the last
/// [`Verdict::Log`] for its signature.
#[derive(Debug)]
pub struct RepeatFilter {
    interval: Duration,
    windows: Mutex<HashMap<u64, Window>>,
}

impl Default for RepeatFilter {
    fn default() -> Self {
        Self::new(SUMMARY_INTERVAL)
    }
}

impl RepeatFilter {
    /// A filter that logs each signature at most once per `interval`.
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Decides for a line of `signature` seen at `now`.
    pub fn check(&self, signature: u64, now: Instant) -> Verdict {
        let mut windows = self
            .windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if windows.len() > PRUNE_ABOVE {
            let interval = self.interval;
            windows.retain(|_, w| now.saturating_duration_since(w.logged_at) < interval);
        }
        match windows.get_mut(&signature) {
            Some(w) if now.saturating_duration_since(w.logged_at) < self.interval => {
                w.suppressed += 1;
                Verdict::Suppress
            }
            Some(w) => {
                let repeated = std::mem::take(&mut w.suppressed);
                w.logged_at = now;
                Verdict::Log { repeated }
            }
            None => {
                windows.insert(
                    signature,
                    Window {
                        logged_at: now,
                        suppressed: 0,
                    },
                );
                Verdict::Log { repeated: 0 }
            }
        }
    }

    /// [`check`](Self::check) at the current instant.
    pub fn check_now(&self, signature: u64) -> Verdict {
        self.check(signature, Instant::now())
    }

    /// How many signatures are tracked (tests).
    pub fn tracked(&self) -> usize {
        self.windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }
}

/// The signature of a line from the parts that make two lines the same.
pub fn signature(parts: impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    parts.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, secs: f64) -> Instant {
        start + Duration::from_secs_f64(secs)
    }

    #[test]
    fn a_burst_logs_once_per_interval_with_the_count_held_back() {
        let filter = RepeatFilter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let dropped = signature(("events", "dropped event"));
        assert_eq!(filter.check(dropped, t0), Verdict::Log { repeated: 0 });
        for i in 1..=999 {
            assert_eq!(
                filter.check(dropped, at(t0, f64::from(i) * 0.009)),
                Verdict::Suppress,
                "line {i} inside the first interval"
            );
        }
        // The first line after the interval carries the 999 held back.
        assert_eq!(
            filter.check(dropped, at(t0, 10.0)),
            Verdict::Log { repeated: 999 }
        );
        assert_eq!(filter.check(dropped, at(t0, 12.0)), Verdict::Suppress);
        assert_eq!(
            filter.check(dropped, at(t0, 25.0)),
            Verdict::Log { repeated: 1 }
        );
        // A line that stops repeating logs every time it comes back after a quiet interval.
        assert_eq!(
            filter.check(dropped, at(t0, 100.0)),
            Verdict::Log { repeated: 0 }
        );
    }

    #[test]
    fn different_signatures_do_not_hold_each_other_back() {
        let filter = RepeatFilter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let cidr = signature(("node-ipam", "CIDR allocation failed"));
        let quota = signature(("resourcequota", "exceeded"));
        assert_ne!(cidr, quota);
        assert_eq!(filter.check(cidr, t0), Verdict::Log { repeated: 0 });
        assert_eq!(filter.check(quota, t0), Verdict::Log { repeated: 0 });
        assert_eq!(filter.check(cidr, at(t0, 1.0)), Verdict::Suppress);
        assert_eq!(filter.check(quota, at(t0, 1.0)), Verdict::Suppress);
    }

    #[test]
    fn idle_signatures_are_pruned_once_many_are_tracked() {
        let filter = RepeatFilter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        for i in 0..=PRUNE_ABOVE {
            filter.check(signature(i), t0);
        }
        assert_eq!(filter.tracked(), PRUNE_ABOVE + 1);
        // An interval later, the next check prunes every idle one.
        assert_eq!(
            filter.check(signature("new"), at(t0, 11.0)),
            Verdict::Log { repeated: 0 }
        );
        assert_eq!(filter.tracked(), 1);
    }

    #[test]
    fn signatures_are_stable_for_equal_parts() {
        assert_eq!(signature(("a", 1)), signature(("a", 1)));
        assert_ne!(signature(("a", 1)), signature(("a", 2)));
    }
}
