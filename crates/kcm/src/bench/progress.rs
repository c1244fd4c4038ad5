//! The progress line `kcm bench` keeps on stderr while it runs (redrawn on a terminal, every few seconds otherwise).

use std::io::{IsTerminal, Write};
use std::time::Duration;

/// Width of the bar, in cells.
const BAR: usize = 30;
/// How often a line is printed when stderr is not a terminal (logs, CI).
const PLAIN_EVERY: Duration = Duration::from_secs(2);

/// The line for `available` of `expected` pods after `elapsed`, with the work-queue depth when
/// known.
pub fn line(available: u64, expected: u64, elapsed: Duration, depth: Option<u64>) -> String {
    let done = if expected == 0 {
        BAR
    } else {
        ((available.min(expected) as u128 * BAR as u128) / expected as u128) as usize
    };
    let depth = depth
        .map(|d| format!("  queue depth {d}"))
        .unwrap_or_default();
    format!(
        "[{}{}] {available}/{expected} pods available  {:.1} s{depth}",
        "#".repeat(done),
        " ".repeat(BAR - done),
        elapsed.as_secs_f64()
    )
}

/// Draws [`line()`]s on stderr.
#[derive(Debug)]
pub struct Progress {
    terminal: bool,
    /// When the last plain line was printed.
    last_plain: Option<Duration>,
}

impl Progress {
    /// Redraws in place when stderr is a terminal.
    pub fn new() -> Self {
        Self {
            terminal: std::io::stderr().is_terminal(),
            last_plain: None,
        }
    }

    /// Shows the state at `elapsed`.
    pub fn update(&mut self, available: u64, expected: u64, elapsed: Duration, depth: Option<u64>) {
        let text = line(available, expected, elapsed, depth);
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{text}");
            let _ = err.flush();
        } else if self
            .last_plain
            .is_none_or(|last| elapsed.saturating_sub(last) >= PLAIN_EVERY)
        {
            self.last_plain = Some(elapsed);
            let _ = writeln!(err, "{text}");
        }
    }

    /// Ends the line.
    pub fn finish(&mut self) {
        if self.terminal {
            let _ = writeln!(std::io::stderr());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_fills_with_available_pods() {
        let cases = [
            ("none", 0, 500, "[                              ] 0/500"),
            ("half", 250, 500, "[###############               ] 250/500"),
            ("all", 500, 500, "[##############################] 500/500"),
            (
                "more than expected",
                600,
                500,
                "[##############################] 600/500",
            ),
            (
                "nothing expected",
                0,
                0,
                "[##############################] 0/0",
            ),
        ];
        for (name, available, expected, want) in cases {
            let got = line(available, expected, Duration::from_millis(1500), None);
            assert!(got.starts_with(want), "{name}: {got}");
            assert!(got.ends_with("pods available  1.5 s"), "{name}: {got}");
        }
        assert!(line(1, 2, Duration::ZERO, Some(42)).ends_with("queue depth 42"));
    }
}
