//! Ages as kubectl shows them: upstream's `duration.HumanDuration`.

use jiff::Timestamp;

const SECOND: i128 = 1_000_000_000;
const MINUTE: i128 = 60 * SECOND;
const HOUR: i128 = 60 * MINUTE;

/// A succinct representation of a duration given in nanoseconds, with ~2-3 significant
/// figures: `5s`, `119s`, `3m10s`, `70m`, `3h4m`, `47h`, `2d5h`, `367d`, `2y1d`, `8y`.
/// Up to a second in the future reads `0s` (clock skew); more reads `<invalid>`.
pub fn human_duration(nanos: i128) -> String {
    // Go's int(d.Seconds()) truncates toward zero, as Rust's integer division does.
    let seconds = nanos / SECOND;
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = nanos / MINUTE;
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = nanos / HOUR;
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        return format!("{hours}h{m}m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        return format!("{}d{h}h", hours / 24);
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        return format!("{}y{dy}d", hours / 24 / 365);
    }
    format!("{}y", hours / 24 / 365)
}

/// The time elapsed from `timestamp` to `now`, or `<unknown>` when unset (upstream's
/// `translateTimestampSince`).
pub fn since(timestamp: Option<Timestamp>, now: Timestamp) -> String {
    match timestamp {
        Some(t) => human_duration(now.as_nanosecond() - t.as_nanosecond()),
        None => "<unknown>".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i128 = 1_000_000;
    const DAY: i128 = 24 * HOUR;
    const YEAR: i128 = 365 * DAY;

    /// Upstream's `TestHumanDuration` and `TestHumanDurationBoundaries`.
    #[test]
    fn human_duration_matches_upstream() {
        let cases: &[(i128, &str)] = &[
            (SECOND, "1s"),
            (70 * SECOND, "70s"),
            (190 * SECOND, "3m10s"),
            (70 * MINUTE, "70m"),
            (47 * HOUR, "47h"),
            (49 * HOUR, "2d1h"),
            ((8 * 24 + 2) * HOUR, "8d"),
            (367 * DAY, "367d"),
            ((365 * 2 * 24 + 25) * HOUR, "2y1d"),
            ((365 * 8 * 24 + 2) * HOUR, "8y"),
            // Boundaries.
            (-2 * SECOND, "<invalid>"),
            (-2 * SECOND + 1, "0s"),
            (0, "0s"),
            (SECOND - MS, "0s"),
            (2 * MINUTE - MS, "119s"),
            (2 * MINUTE, "2m"),
            (2 * MINUTE + SECOND, "2m1s"),
            (10 * MINUTE - MS, "9m59s"),
            (10 * MINUTE, "10m"),
            (10 * MINUTE + SECOND, "10m"),
            (3 * HOUR - MS, "179m"),
            (3 * HOUR, "3h"),
            (3 * HOUR + MINUTE, "3h1m"),
            (8 * HOUR - MS, "7h59m"),
            (8 * HOUR, "8h"),
            (8 * HOUR + 59 * MINUTE, "8h"),
            (2 * DAY - MS, "47h"),
            (2 * DAY, "2d"),
            (2 * DAY + HOUR, "2d1h"),
            (8 * DAY - MS, "7d23h"),
            (8 * DAY, "8d"),
            (8 * DAY + 23 * HOUR, "8d"),
            (2 * YEAR - MS, "729d"),
            (2 * YEAR, "2y"),
            (2 * YEAR + 23 * HOUR, "2y"),
            (2 * YEAR + 23 * HOUR + 59 * MINUTE, "2y"),
            (2 * YEAR + DAY - MS, "2y"),
            (2 * YEAR + DAY, "2y1d"),
            (3 * YEAR, "3y"),
            (4 * YEAR, "4y"),
            (5 * YEAR, "5y"),
            (6 * YEAR, "6y"),
            (7 * YEAR, "7y"),
            (8 * YEAR - MS, "7y364d"),
            (8 * YEAR, "8y"),
            (8 * YEAR + 364 * DAY, "8y"),
            (9 * YEAR, "9y"),
        ];
        for (nanos, want) in cases {
            assert_eq!(human_duration(*nanos), *want, "{nanos}ns");
        }
    }

    #[test]
    fn since_an_unset_time_is_unknown() {
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().expect("now");
        let then: Timestamp = "2024-05-01T11:57:00Z".parse().expect("then");
        assert_eq!(since(Some(then), now), "3m");
        assert_eq!(since(None, now), "<unknown>");
    }
}
