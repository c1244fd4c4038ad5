//! The parts of Go's `time` package the CronJob controller's results depend on, reproduced on jiff: `time.Date`'s resolution of wall times in DST gaps and folds, `LoadLocation`, `ParseDuration`, and the `RFC3339` layout.
//!
//! robfig/cron walks wall-clock fields with `time.Date` and `AddDate`, so which instant a
//! nonexistent or repeated wall time maps to decides when a job runs around a DST change.
//! Go resolves a wall time by taking the zone offset in force at the wall time read as UTC,
//! then, if the resulting instant falls outside that offset's period, the offset in force at
//! that instant (see `time.Date`). For zones west of UTC this puts a time in a spring-forward
//! gap before the gap (02:30 → 01:30 EST) and a time in a fall-back fold on its first
//! occurrence; jiff's `compatible` disambiguation differs in the gap case, hence this module.
//! All instants here are whole Unix seconds (the schedules are second-granular).

use std::fmt::Write;

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

/// Go's zero `time.Time` (0001-01-01T00:00:00Z): what upstream falls back to for an object
/// with no creation timestamp.
pub const GO_ZERO_TIME: Timestamp = Timestamp::constant(-62_135_596_800, 0);

/// A time zone as Go's `*time.Location`: `Local` stays symbolic (the zone of the time it is
/// applied to, i.e. the controller's local zone), any other is a concrete zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// Go's `time.Local`.
    Local,
    /// A named zone (or UTC).
    Zone(TimeZone),
}

impl Location {
    /// The concrete zone, `local` standing in for [`Location::Local`].
    pub fn resolve<'a>(&'a self, local: &'a TimeZone) -> &'a TimeZone {
        match self {
            Self::Local => local,
            Self::Zone(tz) => tz,
        }
    }
}

/// Why a location name was refused, with Go's messages.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    /// A name that cannot be an IANA name (`..`, leading slash), as Go's `errLocation`.
    #[error("time: invalid location name")]
    InvalidName,
    /// No such zone in the time zone database.
    #[error("unknown time zone {0}")]
    Unknown(String),
}

/// Go's `time.LoadLocation`: `""` and `"UTC"` are UTC, `"Local"` is the local zone, any other
/// name must exist in the time zone database with exactly that spelling (Go reads zoneinfo
/// files, so lookups are case-sensitive; jiff's are not, hence the check).
pub fn load_location(name: &str) -> Result<Location, LocationError> {
    match name {
        "" | "UTC" => return Ok(Location::Zone(TimeZone::UTC)),
        "Local" => return Ok(Location::Local),
        _ => {}
    }
    if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
        return Err(LocationError::InvalidName);
    }
    match jiff::tz::db().get(name) {
        Ok(tz) if tz.iana_name() == Some(name) => Ok(Location::Zone(tz)),
        _ => Err(LocationError::Unknown(name.to_owned())),
    }
}

/// The wall clock of `t` (Unix seconds) in `tz`.
pub(crate) fn civil(t: i64, tz: &TimeZone) -> Option<DateTime> {
    Some(tz.to_datetime(Timestamp::from_second(t).ok()?))
}

/// Go's `time.Date(year, month, day, hour, minute, second, 0, loc)` as Unix seconds: month
/// and day overflow roll into the following month and year; a wall time in a gap or fold is
/// resolved as Go does (see the module docs). `None` beyond jiff's year range.
pub(crate) fn go_date(
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    tz: &TimeZone,
) -> Option<i64> {
    let months = month.checked_sub(1)?;
    let year = year.checked_add(months.div_euclid(12))?;
    let month = months.rem_euclid(12) + 1;
    let first = Date::new(i16::try_from(year).ok()?, i8::try_from(month).ok()?, 1).ok()?;
    let first_unix_days = first
        .to_zoned(TimeZone::UTC)
        .ok()?
        .timestamp()
        .as_second()
        .div_euclid(86_400);
    let wall = first_unix_days
        .checked_add(day.checked_sub(1)?)?
        .checked_mul(86_400)?
        .checked_add(hour.checked_mul(3_600)?)?
        .checked_add(minute.checked_mul(60)?)?
        .checked_add(second)?;
    // The offset at the wall time read as UTC, then the offset at the instant that gives.
    let guess = i64::from(offset_at(wall, tz)?);
    let offset = i64::from(offset_at(wall.checked_sub(guess)?, tz)?);
    wall.checked_sub(offset)
}

fn offset_at(t: i64, tz: &TimeZone) -> Option<i32> {
    Some(tz.to_offset(Timestamp::from_second(t).ok()?).seconds())
}

/// Go's `t.AddDate(years, months, days)` in `tz`: the wall clock moved by whole calendar
/// units, then resolved with [`go_date`].
pub(crate) fn go_add_date(
    t: i64,
    years: i64,
    months: i64,
    days: i64,
    tz: &TimeZone,
) -> Option<i64> {
    let c = civil(t, tz)?;
    go_date(
        i64::from(c.year()).checked_add(years)?,
        i64::from(c.month()).checked_add(months)?,
        i64::from(c.day()).checked_add(days)?,
        i64::from(c.hour()),
        i64::from(c.minute()),
        i64::from(c.second()),
        tz,
    )
}

/// Go's `t.Format(time.RFC3339)` of `t` in `tz`: seconds precision, `Z` for a zero offset.
pub fn format_rfc3339(t: Timestamp, tz: &TimeZone) -> String {
    let c = tz.to_datetime(t);
    let mut out = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        c.year(),
        c.month(),
        c.day(),
        c.hour(),
        c.minute(),
        c.second()
    );
    let offset = tz.to_offset(t).seconds();
    if offset == 0 {
        out.push('Z');
    } else {
        let sign = if offset < 0 { '-' } else { '+' };
        let abs = offset.unsigned_abs();
        // Go's layout has minutes only; seconds of historical offsets are dropped.
        let _ = write!(out, "{sign}{:02}:{:02}", abs / 3600, abs / 60 % 60);
    }
    out
}

/// Why a duration did not parse, with Go's messages.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not of the form `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or out of range.
    #[error("time: invalid duration {0:?}")]
    Invalid(String),
    /// A number without a unit.
    #[error("time: missing unit in duration {0:?}")]
    MissingUnit(String),
    /// A unit Go does not know.
    #[error("time: unknown unit {unit:?} in duration {duration:?}")]
    UnknownUnit {
        /// The unit.
        unit: String,
        /// The whole duration text.
        duration: String,
    },
}

/// Go's `time.ParseDuration` (`"1h30m"`, `"1.5h"`, `"300ms"`, `"-2s"`; units `ns`, `us`,
/// `µs`, `ms`, `s`, `m`, `h`).
pub fn parse_go_duration(text: &str) -> Result<SignedDuration, DurationError> {
    let invalid = || DurationError::Invalid(text.to_owned());
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(SignedDuration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    const OVERFLOW: u64 = 1 << 63;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut value: u64 = 0;
        for b in rest[..int_len].bytes() {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(b - b'0')))
                .filter(|&v| v <= OVERFLOW)
                .ok_or_else(invalid)?;
        }
        rest = &rest[int_len..];
        let (mut fraction, mut scale, mut has_fraction) = (0u64, 1f64, false);
        if let Some(after_dot) = rest.strip_prefix('.') {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            has_fraction = frac_len > 0;
            let mut overflowed = false;
            for b in after_dot[..frac_len].bytes() {
                // Digits past int64 precision are dropped, as Go's `leadingFraction` does.
                if overflowed {
                    continue;
                }
                match fraction
                    .checked_mul(10)
                    .and_then(|f| f.checked_add(u64::from(b - b'0')))
                {
                    Some(f) if f <= OVERFLOW => {
                        fraction = f;
                        scale *= 10.0;
                    }
                    _ => overflowed = true,
                }
            }
            rest = &after_dot[frac_len..];
        }
        if int_len == 0 && !has_fraction {
            return Err(invalid());
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(i, _)| i);
        if unit_len == 0 {
            return Err(DurationError::MissingUnit(text.to_owned()));
        }
        let unit_name = &rest[..unit_len];
        rest = &rest[unit_len..];
        let unit: u64 = match unit_name {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(DurationError::UnknownUnit {
                    unit: unit_name.to_owned(),
                    duration: text.to_owned(),
                });
            }
        };
        if value > OVERFLOW / unit {
            return Err(invalid());
        }
        value *= unit;
        if fraction > 0 {
            // Go computes this in float64 too.
            value = value.saturating_add((fraction as f64 * (unit as f64 / scale)) as u64);
            if value > OVERFLOW {
                return Err(invalid());
            }
        }
        total = total
            .checked_add(value)
            .filter(|&t| t <= OVERFLOW)
            .ok_or_else(invalid)?;
    }
    let nanos = if negative {
        // -2^63 is representable.
        0i64.wrapping_sub_unsigned(total)
    } else {
        i64::try_from(total).map_err(|_| invalid())?
    };
    Ok(SignedDuration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_york() -> TimeZone {
        TimeZone::get("America/New_York").expect("tzdata for America/New_York")
    }

    fn unix(s: &str) -> i64 {
        s.parse::<Timestamp>().expect("timestamp").as_second()
    }

    #[test]
    fn go_date_resolves_gaps_and_folds_like_go() {
        let ny = new_york();
        struct Case {
            name: &'static str,
            wall: (i64, i64, i64, i64, i64),
            want: &'static str,
        }
        let cases = [
            Case {
                name: "plain winter time",
                wall: (2012, 1, 15, 9, 30),
                want: "2012-01-15T14:30:00Z",
            },
            // 02:30 does not exist on 2012-03-11; Go lands before the gap (01:30 EST).
            Case {
                name: "spring-forward gap",
                wall: (2012, 3, 11, 2, 30),
                want: "2012-03-11T06:30:00Z",
            },
            Case {
                name: "first hour after the gap",
                wall: (2012, 3, 11, 3, 0),
                want: "2012-03-11T07:00:00Z",
            },
            // 01:30 happens twice on 2012-11-04; Go picks the first (EDT).
            Case {
                name: "fall-back fold",
                wall: (2012, 11, 4, 1, 30),
                want: "2012-11-04T05:30:00Z",
            },
            Case {
                name: "month overflow rolls the year",
                wall: (2012, 13, 1, 0, 0),
                want: "2013-01-01T05:00:00Z",
            },
            Case {
                name: "day overflow rolls the month",
                wall: (2012, 2, 30, 0, 0),
                want: "2012-03-01T05:00:00Z",
            },
        ];
        for c in cases {
            let (y, mo, d, h, mi) = c.wall;
            assert_eq!(
                go_date(y, mo, d, h, mi, 0, &ny),
                Some(unix(c.want)),
                "{}",
                c.name
            );
        }
        // East of UTC the fold and gap resolve the other way round (Europe/Berlin, 2012).
        let berlin = TimeZone::get("Europe/Berlin").expect("tzdata for Europe/Berlin");
        assert_eq!(
            go_date(2012, 3, 25, 2, 30, 0, &berlin),
            Some(unix("2012-03-25T01:30:00Z"))
        );
        assert_eq!(
            go_date(2012, 10, 28, 2, 30, 0, &berlin),
            Some(unix("2012-10-28T01:30:00Z"))
        );
    }

    #[test]
    fn add_date_keeps_the_wall_clock() {
        let ny = new_york();
        let sat = unix("2012-03-10T05:00:00Z"); // 00:00 EST
        assert_eq!(
            go_add_date(sat, 0, 0, 1, &ny),
            Some(unix("2012-03-11T05:00:00Z"))
        );
        assert_eq!(
            go_add_date(sat, 0, 0, 2, &ny),
            Some(unix("2012-03-12T04:00:00Z"))
        );
        assert_eq!(
            go_add_date(sat, 0, 1, 0, &ny),
            Some(unix("2012-04-10T04:00:00Z"))
        );
    }

    #[test]
    fn load_location_as_go() {
        assert_eq!(load_location(""), Ok(Location::Zone(TimeZone::UTC)));
        assert_eq!(load_location("UTC"), Ok(Location::Zone(TimeZone::UTC)));
        assert_eq!(load_location("Local"), Ok(Location::Local));
        assert_eq!(
            load_location("America/New_York"),
            Ok(Location::Zone(new_york()))
        );
        assert_eq!(
            load_location("america/new_york"),
            Err(LocationError::Unknown("america/new_york".into()))
        );
        assert_eq!(
            load_location("Mars/Olympus"),
            Err(LocationError::Unknown("Mars/Olympus".into()))
        );
        assert_eq!(
            load_location("../etc/passwd"),
            Err(LocationError::InvalidName)
        );
        assert_eq!(
            load_location("/etc/localtime"),
            Err(LocationError::InvalidName)
        );
        assert_eq!(
            load_location("Mars/Olympus").map_err(|e| e.to_string()),
            Err("unknown time zone Mars/Olympus".to_owned())
        );
    }

    #[test]
    fn rfc3339_as_go_formats_it() {
        let t: Timestamp = "2016-05-19T10:00:00Z".parse().expect("timestamp");
        assert_eq!(format_rfc3339(t, &TimeZone::UTC), "2016-05-19T10:00:00Z");
        let rome = TimeZone::get("Europe/Rome").expect("tzdata for Europe/Rome");
        assert_eq!(format_rfc3339(t, &rome), "2016-05-19T12:00:00+02:00");
        assert_eq!(format_rfc3339(t, &new_york()), "2016-05-19T06:00:00-04:00");
    }

    #[test]
    fn parse_go_duration_table() {
        struct Case {
            name: &'static str,
            text: &'static str,
            want: Result<i64, &'static str>,
        }
        let cases = [
            Case {
                name: "zero",
                text: "0",
                want: Ok(0),
            },
            Case {
                name: "hours",
                text: "1h",
                want: Ok(3_600_000_000_000),
            },
            Case {
                name: "compound",
                text: "1h30m",
                want: Ok(5_400_000_000_000),
            },
            Case {
                name: "fraction",
                text: "1.5h",
                want: Ok(5_400_000_000_000),
            },
            Case {
                name: "leading dot",
                text: ".5s",
                want: Ok(500_000_000),
            },
            Case {
                name: "micro sign",
                text: "3µs",
                want: Ok(3_000),
            },
            Case {
                name: "negative",
                text: "-2s",
                want: Ok(-2_000_000_000),
            },
            Case {
                name: "plus",
                text: "+10m",
                want: Ok(600_000_000_000),
            },
            Case {
                name: "empty",
                text: "",
                want: Err("time: invalid duration \"\""),
            },
            Case {
                name: "missing unit",
                text: "1",
                want: Err("time: missing unit in duration \"1\""),
            },
            Case {
                name: "unknown unit",
                text: "1d",
                want: Err("time: unknown unit \"d\" in duration \"1d\""),
            },
            Case {
                name: "lone dot",
                text: ".s",
                want: Err("time: invalid duration \".s\""),
            },
            Case {
                name: "overflow",
                text: "9999999999h",
                want: Err("time: invalid duration \"9999999999h\""),
            },
        ];
        for c in cases {
            let got = parse_go_duration(c.text)
                .map(|d| d.as_nanos() as i64)
                .map_err(|e| e.to_string());
            assert_eq!(got, c.want.map_err(str::to_owned), "{}", c.name);
        }
    }
}
