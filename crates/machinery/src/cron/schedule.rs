//! The cron schedule of a CronJob: parsing a standard 5-field spec and finding its next activation, as `github.com/robfig/cron/v3` (`ParseStandard`, `SpecSchedule.Next`, `ConstantDelaySchedule`) which kube-controller-manager uses.
//!
//! Accepted, exactly as robfig's standard parser: `minute hour day-of-month month
//! day-of-week`, each a comma list of `*`, `?`, `N`, `N-M`, with `/step`; month (`jan`…`dec`)
//! and weekday (`sun`…`sat`) names in any case; the descriptors `@yearly`, `@annually`,
//! `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly` and `@every <duration>`; and a
//! leading `TZ=<zone>` or `CRON_TZ=<zone>`. Day-of-month and day-of-week combine as in
//! classic cron: if either is `*` (or `?`) both must match, otherwise either may.
//!
//! No crate has these semantics (the `cron` and `croner` crates differ on 6/7-field specs,
//! `?`, day matching and DST), so the parser is ours. [`Schedule::next`] walks wall-clock
//! fields in the schedule's zone the way robfig does, with Go's resolution of DST gaps and
//! folds (see [`super::go_time`]): a time skipped by spring-forward does not run that day
//! (an hourly job skips the missing hour), a repeated hour runs twice, and a daily job at a
//! time that does not exist runs the next day it does.

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::go_time::{
    DurationError, Location, LocationError, civil, go_add_date, go_date, load_location,
    parse_go_duration,
};

/// Why a schedule did not parse, with robfig/cron's messages (what the API server returns
/// and the `UnparseableSchedule` event shows).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Nothing to parse.
    #[error("empty spec string")]
    Empty,
    /// The `TZ=`/`CRON_TZ=` zone does not load.
    #[error("provided bad location {name}: {source}")]
    BadLocation {
        /// The zone name.
        name: String,
        /// Why it did not load.
        #[source]
        source: LocationError,
    },
    /// `TZ=zone` with nothing after it (robfig panics on this; we refuse it).
    #[error("provided bad location {0}: missing schedule after the time zone")]
    MissingScheduleAfterLocation(String),
    /// An `@` word that is not a descriptor.
    #[error("unrecognized descriptor: {0}")]
    UnrecognizedDescriptor(String),
    /// `@every` with a bad duration.
    #[error("failed to parse duration {descriptor}: {source}")]
    BadDuration {
        /// The whole descriptor.
        descriptor: String,
        /// Why the duration did not parse.
        #[source]
        source: DurationError,
    },
    /// Not five fields.
    #[error("expected exactly 5 fields, found {found}: [{fields}]")]
    FieldCount {
        /// How many fields there were.
        found: usize,
        /// The fields, space-separated.
        fields: String,
    },
    /// `a-b-c`.
    #[error("too many hyphens: {0}")]
    TooManyHyphens(String),
    /// `a/b/c`.
    #[error("too many slashes: {0}")]
    TooManySlashes(String),
    /// Not a number (nor a name).
    #[error("failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: {reason}")]
    NotANumber {
        /// The text.
        expr: String,
        /// `invalid syntax` or `value out of range`.
        reason: &'static str,
    },
    /// A negative step.
    #[error("negative number ({number}) not allowed: {expr}")]
    Negative {
        /// The number.
        number: i64,
        /// The text.
        expr: String,
    },
    /// A range starting below the field's minimum.
    #[error("beginning of range ({start}) below minimum ({min}): {expr}")]
    BelowMinimum {
        /// Start of the range.
        start: u64,
        /// The field's minimum.
        min: u64,
        /// The range text.
        expr: String,
    },
    /// A range ending above the field's maximum.
    #[error("end of range ({end}) above maximum ({max}): {expr}")]
    AboveMaximum {
        /// End of the range.
        end: u64,
        /// The field's maximum.
        max: u64,
        /// The range text.
        expr: String,
    },
    /// A range whose start is after its end.
    #[error("beginning of range ({start}) beyond end of range ({end}): {expr}")]
    StartBeyondEnd {
        /// Start of the range.
        start: u64,
        /// End of the range.
        end: u64,
        /// The range text.
        expr: String,
    },
    /// A zero step.
    #[error("step of range should be a positive number: {0}")]
    ZeroStep(String),
}

/// The bit set in a field when it was written as `*` or `?` (which matters for day matching).
const STAR_BIT: u64 = 1 << 63;

/// The range of a field and its names.
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

const SECONDS: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// A crontab schedule as bit sets (bit `n` set: value `n` matches; `STAR_BIT`: written as
/// `*`), as robfig's `SpecSchedule`. The standard parser always sets `second` to bit 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecSchedule {
    /// Seconds 0–59.
    pub second: u64,
    /// Minutes 0–59.
    pub minute: u64,
    /// Hours 0–23.
    pub hour: u64,
    /// Days of the month 1–31.
    pub dom: u64,
    /// Months 1–12.
    pub month: u64,
    /// Days of the week 0–6, Sunday 0.
    pub dow: u64,
    /// The zone the fields are read in.
    pub location: Location,
}

/// A parsed schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// A crontab spec or a calendar descriptor.
    Spec(SpecSchedule),
    /// `@every <duration>`: a fixed delay, whole seconds, at least one, as robfig's
    /// `ConstantDelaySchedule` (the zone is irrelevant).
    ConstantDelay(SignedDuration),
}

impl Schedule {
    /// Parses a standard spec, as robfig's `ParseStandard`.
    pub fn parse_standard(spec: &str) -> Result<Self, ParseError> {
        if spec.is_empty() {
            return Err(ParseError::Empty);
        }
        let mut spec = spec;
        let mut location = Location::Local;
        if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
            let (Some(space), Some(eq)) = (spec.find(' '), spec.find('=')) else {
                return Err(ParseError::MissingScheduleAfterLocation(spec.to_owned()));
            };
            let name = spec.get(eq + 1..space).unwrap_or_default();
            location = load_location(name).map_err(|source| ParseError::BadLocation {
                name: name.to_owned(),
                source,
            })?;
            spec = spec[space..].trim();
        }
        if spec.starts_with('@') {
            return parse_descriptor(spec, location);
        }
        let fields: Vec<&str> = spec.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(ParseError::FieldCount {
                found: fields.len(),
                fields: fields.join(" "),
            });
        }
        Ok(Self::Spec(SpecSchedule {
            second: 1 << SECONDS.min,
            minute: field_bits(fields[0], &MINUTES)?,
            hour: field_bits(fields[1], &HOURS)?,
            dom: field_bits(fields[2], &DOM)?,
            month: field_bits(fields[3], &MONTHS)?,
            dow: field_bits(fields[4], &DOW)?,
            location,
        }))
    }

    /// The first activation strictly after `after` (from the next whole second), `None` when
    /// there is none within five years (an impossible date such as `30 2 *`), as robfig's
    /// `Next`. A schedule without `TZ=` is read in `local`, the zone kube-controller-manager
    /// runs in.
    pub fn next(&self, after: Timestamp, local: &TimeZone) -> Option<Timestamp> {
        let floor = after.as_second() - i64::from(after.subsec_nanosecond() < 0);
        match self {
            Self::ConstantDelay(delay) => {
                Timestamp::from_second(floor.checked_add(delay.as_secs())?).ok()
            }
            Self::Spec(spec) => {
                let tz = spec.location.resolve(local);
                next_spec(spec, floor.checked_add(1)?, tz)
                    .and_then(|t| Timestamp::from_second(t).ok())
            }
        }
    }
}

/// robfig's `SpecSchedule.Next` from `t` (whole Unix seconds, already the next second):
/// for month, day, hour, minute, second in turn, advance the field until it matches,
/// resetting the finer fields the first time; a field wrapping around restarts from the
/// month.
fn next_spec(spec: &SpecSchedule, start: i64, tz: &TimeZone) -> Option<i64> {
    let bit = |set: u64, value: i8| set & (1u64 << u8::try_from(value).unwrap_or(0)) != 0;
    let mut t = start;
    let mut added = false;
    let year_limit = i64::from(civil(t, tz)?.year()) + 5;
    'wrap: loop {
        let c = civil(t, tz)?;
        if i64::from(c.year()) > year_limit {
            return None;
        }
        // Month.
        while !bit(spec.month, civil(t, tz)?.month()) {
            let c = civil(t, tz)?;
            if !added {
                added = true;
                t = go_date(c.year().into(), c.month().into(), 1, 0, 0, 0, tz)?;
            }
            t = go_add_date(t, 0, 1, 0, tz)?;
            if civil(t, tz)?.month() == 1 {
                continue 'wrap;
            }
        }
        // Day. Midnight may not exist on a DST day (e.g. America/Sao_Paulo), so the hour is
        // put back to 0 when the day's midnight lands elsewhere.
        while !day_matches(spec, civil(t, tz)?) {
            let c = civil(t, tz)?;
            if !added {
                added = true;
                t = go_date(
                    c.year().into(),
                    c.month().into(),
                    c.day().into(),
                    0,
                    0,
                    0,
                    tz,
                )?;
            }
            t = go_add_date(t, 0, 0, 1, tz)?;
            let hour = i64::from(civil(t, tz)?.hour());
            if hour != 0 {
                t += if hour > 12 {
                    (24 - hour) * 3600
                } else {
                    -hour * 3600
                };
            }
            if civil(t, tz)?.day() == 1 {
                continue 'wrap;
            }
        }
        // Hour.
        while !bit(spec.hour, civil(t, tz)?.hour()) {
            let c = civil(t, tz)?;
            if !added {
                added = true;
                let (y, mo, d, h) = (c.year(), c.month(), c.day(), c.hour());
                t = go_date(y.into(), mo.into(), d.into(), h.into(), 0, 0, tz)?;
            }
            t += 3600;
            if civil(t, tz)?.hour() == 0 {
                continue 'wrap;
            }
        }
        // Minute (truncation is on the absolute time, as Go's `Truncate`).
        while !bit(spec.minute, civil(t, tz)?.minute()) {
            if !added {
                added = true;
                t -= t.rem_euclid(60);
            }
            t += 60;
            if civil(t, tz)?.minute() == 0 {
                continue 'wrap;
            }
        }
        // Second.
        while !bit(spec.second, civil(t, tz)?.second()) {
            added = true;
            t += 1;
            if civil(t, tz)?.second() == 0 {
                continue 'wrap;
            }
        }
        return Some(t);
    }
}

/// Whether the day satisfies the day-of-month and day-of-week fields, as robfig's
/// `dayMatches`: both when either was written `*`, otherwise either.
fn day_matches(spec: &SpecSchedule, c: jiff::civil::DateTime) -> bool {
    let dom = spec.dom & (1u64 << u8::try_from(c.day()).unwrap_or(0)) != 0;
    let weekday = u8::try_from(c.weekday().to_sunday_zero_offset()).unwrap_or(0);
    let dow = spec.dow & (1u64 << weekday) != 0;
    if spec.dom & STAR_BIT != 0 || spec.dow & STAR_BIT != 0 {
        dom && dow
    } else {
        dom || dow
    }
}

/// All values of a field plus [`STAR_BIT`], as robfig's `all`.
fn all(bounds: &Bounds) -> u64 {
    bits(bounds.min, bounds.max, 1) | STAR_BIT
}

/// The predefined schedules, as robfig's `parseDescriptor`.
fn parse_descriptor(descriptor: &str, location: Location) -> Result<Schedule, ParseError> {
    let at_zero = |b: &Bounds| 1u64 << b.min;
    let spec = |hour: u64, dom: u64, month: u64, dow: u64| {
        Ok(Schedule::Spec(SpecSchedule {
            second: at_zero(&SECONDS),
            minute: at_zero(&MINUTES),
            hour,
            dom,
            month,
            dow,
            location: location.clone(),
        }))
    };
    match descriptor {
        "@yearly" | "@annually" => {
            spec(at_zero(&HOURS), at_zero(&DOM), at_zero(&MONTHS), all(&DOW))
        }
        "@monthly" => spec(at_zero(&HOURS), at_zero(&DOM), all(&MONTHS), all(&DOW)),
        "@weekly" => spec(at_zero(&HOURS), all(&DOM), all(&MONTHS), at_zero(&DOW)),
        "@daily" | "@midnight" => spec(at_zero(&HOURS), all(&DOM), all(&MONTHS), all(&DOW)),
        "@hourly" => spec(all(&HOURS), all(&DOM), all(&MONTHS), all(&DOW)),
        _ => {
            let Some(duration) = descriptor.strip_prefix("@every ") else {
                return Err(ParseError::UnrecognizedDescriptor(descriptor.to_owned()));
            };
            let duration =
                parse_go_duration(duration).map_err(|source| ParseError::BadDuration {
                    descriptor: descriptor.to_owned(),
                    source,
                })?;
            // robfig's `Every`: at least a second, rounded down to whole seconds.
            let secs = duration.as_secs().max(1);
            Ok(Schedule::ConstantDelay(SignedDuration::from_secs(secs)))
        }
    }
}

/// The bits of a comma list of ranges (empty items are skipped), as robfig's `getField`.
fn field_bits(field: &str, bounds: &Bounds) -> Result<u64, ParseError> {
    field
        .split(',')
        .filter(|r| !r.is_empty())
        .try_fold(0, |acc, expr| Ok(acc | range_bits(expr, bounds)?))
}

/// The bits of `*`, `?`, `N`, `N-M`, each with an optional `/step`, as robfig's `getRange`.
fn range_bits(expr: &str, bounds: &Bounds) -> Result<u64, ParseError> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end, mut extra) = if matches!(low_and_high[0], "*" | "?") {
        (bounds.min, bounds.max, STAR_BIT)
    } else {
        let start = int_or_name(low_and_high[0], bounds)?;
        let end = match low_and_high.len() {
            1 => start,
            2 => int_or_name(low_and_high[1], bounds)?,
            _ => return Err(ParseError::TooManyHyphens(expr.to_owned())),
        };
        (start, end, 0)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = parse_uint(range_and_step[1])?;
            // `N/step` means `N-max/step`.
            if single {
                end = bounds.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return Err(ParseError::TooManySlashes(expr.to_owned())),
    };
    if start < bounds.min {
        return Err(ParseError::BelowMinimum {
            start,
            min: bounds.min,
            expr: expr.to_owned(),
        });
    }
    if end > bounds.max {
        return Err(ParseError::AboveMaximum {
            end,
            max: bounds.max,
            expr: expr.to_owned(),
        });
    }
    if start > end {
        return Err(ParseError::StartBeyondEnd {
            start,
            end,
            expr: expr.to_owned(),
        });
    }
    if step == 0 {
        return Err(ParseError::ZeroStep(expr.to_owned()));
    }
    Ok(bits(start, end, step) | extra)
}

/// Bits `min..=max` every `step` (`max` ≤ 59, validated).
fn bits(min: u64, max: u64, step: u64) -> u64 {
    (min..=max)
        .step_by(usize::try_from(step).unwrap_or(usize::MAX))
        .fold(0, |acc, i| acc | (1u64 << i))
}

/// A field value: a name of the field (any case) or a number, as robfig's `parseIntOrName`.
fn int_or_name(expr: &str, bounds: &Bounds) -> Result<u64, ParseError> {
    let lower = expr.to_ascii_lowercase();
    if let Some(&(_, value)) = bounds.names.iter().find(|(name, _)| *name == lower) {
        return Ok(value);
    }
    parse_uint(expr)
}

/// A non-negative number as Go's `strconv.Atoi` reads it, as robfig's `mustParseInt`.
fn parse_uint(expr: &str) -> Result<u64, ParseError> {
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::NotANumber {
            expr: expr.to_owned(),
            reason: "invalid syntax",
        });
    }
    let number: i64 = expr.parse().map_err(|_| ParseError::NotANumber {
        expr: expr.to_owned(),
        reason: "value out of range",
    })?;
    u64::try_from(number).map_err(|_| ParseError::Negative {
        number,
        expr: expr.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tz(name: &str) -> TimeZone {
        TimeZone::get(name).unwrap_or_else(|e| panic!("tzdata for {name}: {e}"))
    }

    /// A time as robfig's tests write it: RFC 3339 with an offset, or `TZ=zone` + a wall
    /// time `YYYY-MM-DDTHH:MM:SS` (first occurrence).
    fn at(text: &str) -> Timestamp {
        text.parse().unwrap_or_else(|e| panic!("time {text}: {e}"))
    }

    #[test]
    fn next_table() {
        struct Case {
            name: &'static str,
            after: &'static str,
            spec: &'static str,
            want: Option<&'static str>,
        }
        let c = |name, after, spec, want| Case {
            name,
            after,
            spec,
            want,
        };
        let cases = [
            c(
                "simple",
                "2012-07-09T14:45:00Z",
                "0/15 * * * *",
                Some("2012-07-09T15:00:00Z"),
            ),
            c(
                "simple, just before",
                "2012-07-09T14:59:59Z",
                "0/15 * * * *",
                Some("2012-07-09T15:00:00Z"),
            ),
            c(
                "wrap around hours",
                "2012-07-09T15:45:00Z",
                "20-35/15 * * * *",
                Some("2012-07-09T16:20:00Z"),
            ),
            c(
                "wrap around days",
                "2012-07-09T23:46:00Z",
                "*/15 * * * *",
                Some("2012-07-10T00:00:00Z"),
            ),
            c(
                "wrap around days with a range",
                "2012-07-09T23:45:00Z",
                "20-35/15 * * * *",
                Some("2012-07-10T00:20:00Z"),
            ),
            c(
                "hour step",
                "2012-07-09T23:35:51Z",
                "20-35/15 1/2 * * *",
                Some("2012-07-10T01:20:00Z"),
            ),
            c(
                "hour range",
                "2012-07-09T23:35:51Z",
                "20-35/15 10-12 * * *",
                Some("2012-07-10T10:20:00Z"),
            ),
            c(
                "day step",
                "2012-07-09T23:35:51Z",
                "20-35/15 1/2 */2 * *",
                Some("2012-07-11T01:20:00Z"),
            ),
            c(
                "day range",
                "2012-07-09T23:35:51Z",
                "20-35/15 * 9-20 * *",
                Some("2012-07-10T00:20:00Z"),
            ),
            c(
                "named month",
                "2012-07-09T23:35:51Z",
                "20-35/15 * 9-20 Jul *",
                Some("2012-07-10T00:20:00Z"),
            ),
            c(
                "wrap around months",
                "2012-07-09T23:35:00Z",
                "0 0 9 Apr-Oct ?",
                Some("2012-08-09T00:00:00Z"),
            ),
            c(
                "dom or dow",
                "2012-07-09T23:35:00Z",
                "0 0 */5 Apr,Aug,Oct Mon",
                Some("2012-08-01T00:00:00Z"),
            ),
            c(
                "dom or dow in October",
                "2012-07-09T23:35:00Z",
                "0 0 */5 Oct Mon",
                Some("2012-10-01T00:00:00Z"),
            ),
            c(
                "wrap around years",
                "2012-07-09T23:35:00Z",
                "0 0 * Feb Mon",
                Some("2013-02-04T00:00:00Z"),
            ),
            c(
                "wrap around years with a weekday step",
                "2012-07-09T23:35:00Z",
                "0 0 * Feb Mon/2",
                Some("2013-02-01T00:00:00Z"),
            ),
            c(
                "wrap around everything",
                "2012-12-31T23:59:45Z",
                "* * * * *",
                Some("2013-01-01T00:00:00Z"),
            ),
            c(
                "leap year",
                "2012-07-09T23:35:00Z",
                "0 0 29 Feb ?",
                Some("2016-02-29T00:00:00Z"),
            ),
            c(
                "unsatisfiable February 30",
                "2012-07-09T23:35:00Z",
                "0 0 30 Feb ?",
                None,
            ),
            c(
                "unsatisfiable April 31",
                "2012-07-09T23:35:00Z",
                "0 0 31 Apr ?",
                None,
            ),
            c(
                "yearly",
                "2012-07-09T23:35:00Z",
                "@yearly",
                Some("2013-01-01T00:00:00Z"),
            ),
            c(
                "monthly",
                "2012-07-09T23:35:00Z",
                "@monthly",
                Some("2012-08-01T00:00:00Z"),
            ),
            c(
                "weekly is on Sunday",
                "2012-07-09T23:35:00Z",
                "@weekly",
                Some("2012-07-15T00:00:00Z"),
            ),
            c(
                "daily",
                "2012-07-09T23:35:00Z",
                "@daily",
                Some("2012-07-10T00:00:00Z"),
            ),
            c(
                "hourly",
                "2012-07-09T23:35:00Z",
                "@hourly",
                Some("2012-07-10T00:00:00Z"),
            ),
            c(
                "every",
                "2012-07-09T23:35:00.5Z",
                "@every 1h30m",
                Some("2012-07-10T01:05:00Z"),
            ),
            c(
                "every, less than a second",
                "2012-07-09T23:35:00Z",
                "@every 10ms",
                Some("2012-07-09T23:35:01Z"),
            ),
            // Daylight saving time in New York: 2am EST (-5) -> 3am EDT (-4) on 2012-03-11.
            c(
                "time skipped by DST runs next year",
                "2012-03-11T00:00:00-05:00",
                "TZ=America/New_York 30 2 11 Mar ?",
                Some("2013-03-11T02:30:00-04:00"),
            ),
            c(
                "hourly before the gap",
                "2012-03-11T00:00:00-05:00",
                "TZ=America/New_York 0 * * * *",
                Some("2012-03-11T01:00:00-05:00"),
            ),
            c(
                "hourly across the gap",
                "2012-03-11T01:00:00-05:00",
                "TZ=America/New_York 0 * * * *",
                Some("2012-03-11T03:00:00-04:00"),
            ),
            c(
                "hourly after the gap",
                "2012-03-11T03:00:00-04:00",
                "TZ=America/New_York 0 * * * *",
                Some("2012-03-11T04:00:00-04:00"),
            ),
            c(
                "hourly with CRON_TZ",
                "2012-03-11T01:00:00-05:00",
                "CRON_TZ=America/New_York 0 * * * *",
                Some("2012-03-11T03:00:00-04:00"),
            ),
            c(
                "1am nightly",
                "2012-03-11T00:00:00-05:00",
                "TZ=America/New_York 0 1 * * *",
                Some("2012-03-11T01:00:00-05:00"),
            ),
            c(
                "1am nightly, next day",
                "2012-03-11T01:00:00-05:00",
                "TZ=America/New_York 0 1 * * *",
                Some("2012-03-12T01:00:00-04:00"),
            ),
            c(
                "2am nightly is skipped",
                "2012-03-11T00:00:00-05:00",
                "TZ=America/New_York 0 2 * * *",
                Some("2012-03-12T02:00:00-04:00"),
            ),
            // 2am EDT (-4) -> 1am EST (-5) on 2012-11-04.
            c(
                "time after the fold",
                "2012-11-04T00:00:00-04:00",
                "TZ=America/New_York 30 2 04 Nov *",
                Some("2012-11-04T02:30:00-05:00"),
            ),
            c(
                "time in the fold, second pass",
                "2012-11-04T01:45:00-04:00",
                "TZ=America/New_York 30 1 04 Nov *",
                Some("2012-11-04T01:30:00-05:00"),
            ),
            c(
                "hourly into the fold",
                "2012-11-04T00:00:00-04:00",
                "TZ=America/New_York 0 * * * *",
                Some("2012-11-04T01:00:00-04:00"),
            ),
            c(
                "hourly repeats the fold",
                "2012-11-04T01:00:00-04:00",
                "TZ=America/New_York 0 * * * *",
                Some("2012-11-04T01:00:00-05:00"),
            ),
            c(
                "hourly out of the fold",
                "2012-11-04T01:00:00-05:00",
                "TZ=America/New_York 0 * * * *",
                Some("2012-11-04T02:00:00-05:00"),
            ),
            c(
                "1am nightly runs twice",
                "2012-11-04T01:00:00-04:00",
                "TZ=America/New_York 0 1 * * *",
                Some("2012-11-04T01:00:00-05:00"),
            ),
            c(
                "1am nightly, then tomorrow",
                "2012-11-04T01:00:00-05:00",
                "TZ=America/New_York 0 1 * * *",
                Some("2012-11-05T01:00:00-05:00"),
            ),
            c(
                "2am nightly on fall-back day",
                "2012-11-04T00:00:00-04:00",
                "TZ=America/New_York 0 2 * * *",
                Some("2012-11-04T02:00:00-05:00"),
            ),
            c(
                "3am nightly on fall-back day",
                "2012-11-04T00:00:00-04:00",
                "TZ=America/New_York 0 3 * * *",
                Some("2012-11-04T03:00:00-05:00"),
            ),
            c(
                "monthly across the fold",
                "2012-11-04T00:00:00-04:00",
                "TZ=America/New_York 0 3 3 * ?",
                Some("2012-12-03T03:00:00-05:00"),
            ),
            // Midnight does not exist on some DST days (robfig/cron issue 157).
            c(
                "Sao Paulo missing midnight",
                "2018-10-17T05:00:00-04:00",
                "TZ=America/Sao_Paulo 0 9 10 * ?",
                Some("2018-11-10T06:00:00-05:00"),
            ),
            c(
                "Sao Paulo end of DST",
                "2018-02-14T05:00:00-05:00",
                "TZ=America/Sao_Paulo 0 9 22 * ?",
                Some("2018-02-22T07:00:00-05:00"),
            ),
            // Europe: east of UTC, the gap and the fold resolve the other way round.
            c(
                "Berlin hourly across the gap",
                "2012-03-25T01:00:00+01:00",
                "TZ=Europe/Berlin 0 * * * *",
                Some("2012-03-25T03:00:00+02:00"),
            ),
            c(
                "Berlin 2:30 skipped",
                "2012-03-25T00:00:00+01:00",
                "TZ=Europe/Berlin 30 2 * * *",
                Some("2012-03-26T02:30:00+02:00"),
            ),
            c(
                "Berlin hourly through the fold",
                "2012-10-28T02:00:00+02:00",
                "TZ=Europe/Berlin 0 * * * *",
                Some("2012-10-28T02:00:00+01:00"),
            ),
        ];
        for case in cases {
            let schedule = Schedule::parse_standard(case.spec)
                .unwrap_or_else(|e| panic!("{}: {e}", case.name));
            let got = schedule.next(at(case.after), &TimeZone::UTC);
            assert_eq!(got, case.want.map(at), "{}", case.name);
        }
    }

    #[test]
    fn schedule_without_zone_uses_the_local_zone() {
        let schedule = Schedule::parse_standard("0 2 * * *").expect("schedule");
        let ny = tz("America/New_York");
        assert_eq!(
            schedule.next(at("2012-03-11T00:00:00-05:00"), &ny),
            Some(at("2012-03-12T02:00:00-04:00"))
        );
        assert_eq!(
            schedule.next(at("2012-03-11T00:00:00-05:00"), &TimeZone::UTC),
            Some(at("2012-03-12T02:00:00Z"))
        );
        let local = Schedule::parse_standard("TZ=Local 0 2 * * *").expect("schedule");
        assert_eq!(local, schedule);
    }

    #[test]
    fn activation_table() {
        // Whether the schedule fires exactly at the time (next after one second before).
        struct Case {
            time: &'static str,
            spec: &'static str,
            want: bool,
        }
        let c = |time, spec, want| Case { time, spec, want };
        let cases = [
            c("2012-07-09T15:00:00Z", "0/15 * * * *", true),
            c("2012-07-09T15:45:00Z", "0/15 * * * *", true),
            c("2012-07-09T15:40:00Z", "0/15 * * * *", false),
            c("2012-07-09T15:05:00Z", "5/15 * * * *", true),
            c("2012-07-09T15:50:00Z", "5/15 * * * *", true),
            c("2012-07-15T15:00:00Z", "0/15 * * Jul *", true),
            c("2012-07-15T15:00:00Z", "0/15 * * Jun *", false),
            c("2012-07-15T08:30:00Z", "30 08 ? Jul Sun", true),
            c("2012-07-15T08:30:00Z", "30 08 15 Jul ?", true),
            c("2012-07-16T08:30:00Z", "30 08 ? Jul Sun", false),
            c("2012-07-16T08:30:00Z", "30 08 15 Jul ?", false),
            c("2012-07-09T15:00:00Z", "@hourly", true),
            c("2012-07-09T15:04:00Z", "@hourly", false),
            c("2012-07-09T15:00:00Z", "@daily", false),
            c("2012-07-09T00:00:00Z", "@daily", true),
            c("2012-07-09T00:00:00Z", "@weekly", false),
            c("2012-07-08T00:00:00Z", "@weekly", true),
            c("2012-07-08T01:00:00Z", "@weekly", false),
            c("2012-07-08T00:00:00Z", "@monthly", false),
            c("2012-07-01T00:00:00Z", "@monthly", true),
            // Both day fields restricted: either matches.
            c("2012-07-15T00:00:00Z", "* * 1,15 * Sun", true),
            c("2012-06-15T00:00:00Z", "* * 1,15 * Sun", true),
            c("2012-08-01T00:00:00Z", "* * 1,15 * Sun", true),
            c("2012-07-15T00:00:00Z", "* * */10 * Sun", true),
            // One of them a star: both must match.
            c("2012-07-15T00:00:00Z", "* * * * Mon", false),
            c("2012-07-09T00:00:00Z", "* * 1,15 * *", false),
            c("2012-07-15T00:00:00Z", "* * 1,15 * *", true),
            c("2012-07-15T00:00:00Z", "* * */2 * Sun", true),
        ];
        for case in cases {
            let schedule = Schedule::parse_standard(case.spec)
                .unwrap_or_else(|e| panic!("{}: {e}", case.spec));
            let t = at(case.time);
            let fires = schedule.next(t - SignedDuration::from_secs(1), &TimeZone::UTC) == Some(t);
            assert_eq!(fires, case.want, "{} at {}", case.spec, case.time);
        }
    }

    #[test]
    fn parse_errors_table() {
        struct Case {
            spec: &'static str,
            want: &'static str,
        }
        let c = |spec, want| Case { spec, want };
        let cases = [
            c("", "empty spec string"),
            c("xyz", "expected exactly 5 fields, found 1: [xyz]"),
            c("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
            c(
                "0 0 * * * *",
                "expected exactly 5 fields, found 6: [0 0 * * * *]",
            ),
            c("60 0 * * *", "end of range (60) above maximum (59): 60"),
            c("0 60 * * *", "end of range (60) above maximum (23): 60"),
            c(
                "0 0 * * XYZ",
                "failed to parse int from XYZ: strconv.Atoi: parsing \"XYZ\": invalid syntax",
            ),
            c("0 0 0 * *", "beginning of range (0) below minimum (1): 0"),
            c("0 0 * * 7", "end of range (7) above maximum (6): 7"),
            c(
                "5-3 * * * *",
                "beginning of range (5) beyond end of range (3): 5-3",
            ),
            c("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            c("*/2/3 * * * *", "too many slashes: */2/3"),
            c(
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            c("*/-1 * * * *", "negative number (-1) not allowed: -1"),
            c(
                "99999999999999999999 * * * *",
                "failed to parse int from 99999999999999999999: strconv.Atoi: parsing \"99999999999999999999\": value out of range",
            ),
            c("@fortnightly", "unrecognized descriptor: @fortnightly"),
            c(
                "@every 1d",
                "failed to parse duration @every 1d: time: unknown unit \"d\" in duration \"1d\"",
            ),
            c(
                "TZ=Mars/Olympus * * * * *",
                "provided bad location Mars/Olympus: unknown time zone Mars/Olympus",
            ),
            c(
                "CRON_TZ=UTC",
                "provided bad location CRON_TZ=UTC: missing schedule after the time zone",
            ),
        ];
        for case in cases {
            let got = Schedule::parse_standard(case.spec).map_err(|e| e.to_string());
            assert_eq!(got, Err(case.want.to_owned()), "{:?}", case.spec);
        }
    }

    #[test]
    fn parse_accepts_names_lists_and_question_marks() {
        let Ok(Schedule::Spec(spec)) = Schedule::parse_standard("0,30 9-17/4 ? jan,JUL mon-FRI")
        else {
            panic!("schedule should parse");
        };
        assert_eq!(spec.minute, 1 | 1 << 30);
        assert_eq!(spec.hour, 1 << 9 | 1 << 13 | 1 << 17);
        assert_eq!(
            spec.dom,
            (0b1111_1111_1111_1111_1111_1111_1111_1110u64 & ((1 << 32) - 1)) | STAR_BIT
        );
        assert_eq!(spec.month, 1 << 1 | 1 << 7);
        assert_eq!(spec.dow, 0b11_1110);
        assert_eq!(spec.location, Location::Local);
        // Empty list items are skipped, as Go's FieldsFunc drops them.
        assert!(Schedule::parse_standard("1,,2 * * * *").is_ok());
        let Ok(Schedule::Spec(zoned)) = Schedule::parse_standard("TZ=America/New_York   @daily")
        else {
            panic!("descriptor with zone should parse");
        };
        assert_eq!(zoned.location, Location::Zone(tz("America/New_York")));
    }
}
