//! Go-style durations for flags (`15s`, `1m30s`, `12h0m0s`), parsed and printed as Go's `time`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A non-negative duration written the way Go's `time.ParseDuration` reads it and
/// `time.Duration.String` prints it, so flags take the values kube-controller-manager takes
/// (`--leader-elect-lease-duration=15s`, `--min-resync-period=1h30m`) and `--help` shows the
/// same defaults (`12h0m0s`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoDuration(pub Duration);

impl GoDuration {
    /// `secs` whole seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Self(Duration::from_secs(secs))
    }

    /// The duration.
    pub const fn get(self) -> Duration {
        self.0
    }
}

impl From<Duration> for GoDuration {
    fn from(d: Duration) -> Self {
        Self(d)
    }
}

impl From<GoDuration> for Duration {
    fn from(d: GoDuration) -> Self {
        d.0
    }
}

/// Why a duration did not parse; the message names the input, as Go's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseDurationError {
    /// Not of the form `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`.
    #[error("time: invalid duration {0:?}")]
    Invalid(String),
    /// A number without a unit (other than `0`).
    #[error("time: missing unit in duration {0:?}")]
    MissingUnit(String),
    /// A unit other than `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`.
    #[error("time: unknown unit {unit:?} in duration {input:?}")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole input.
        input: String,
    },
    /// Above about 584 years (Go's int64 nanoseconds).
    #[error("time: invalid duration {0:?}: out of range")]
    Overflow(String),
    /// Below zero: the flags this type backs only make sense for non-negative values.
    #[error("time: negative duration {0:?} is not allowed here")]
    Negative(String),
}

/// Nanoseconds per unit, as Go's `unitMap`.
fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Go's largest duration, `math.MaxInt64` nanoseconds.
const MAX_NANOS: u128 = i64::MAX as u128;

impl FromStr for GoDuration {
    type Err = ParseDurationError;

    /// Parses as Go's `time.ParseDuration`: a sequence of decimal numbers, each with an optional
    /// fraction and a unit (`300ms`, `1.5h`, `2h45m`); a bare `0` is zero. Negative values
    /// are rejected.
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let invalid = || ParseDurationError::Invalid(input.to_owned());
        let (negative, mut rest) = match input.as_bytes().first() {
            Some(b'-') => (true, &input[1..]),
            Some(b'+') => (false, &input[1..]),
            _ => (false, input),
        };
        if rest == "0" {
            return Ok(Self(Duration::ZERO));
        }
        if rest.is_empty() {
            return Err(invalid());
        }
        let mut total: u128 = 0;
        while !rest.is_empty() {
            let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            let (int_part, after_int) = rest.split_at(int_len);
            let (frac_part, after_num) = match after_int.strip_prefix('.') {
                Some(frac) => {
                    let frac_len = frac.bytes().take_while(u8::is_ascii_digit).count();
                    frac.split_at(frac_len)
                }
                None => ("", after_int),
            };
            if int_part.is_empty() && frac_part.is_empty() {
                return Err(invalid());
            }
            let unit_len = after_num
                .char_indices()
                .find(|(_, c)| *c == '.' || c.is_ascii_digit())
                .map_or(after_num.len(), |(i, _)| i);
            let (unit, after_unit) = after_num.split_at(unit_len);
            if unit.is_empty() {
                return Err(ParseDurationError::MissingUnit(input.to_owned()));
            }
            let Some(per_unit) = unit_nanos(unit) else {
                return Err(ParseDurationError::UnknownUnit {
                    unit: unit.to_owned(),
                    input: input.to_owned(),
                });
            };
            let overflow = || ParseDurationError::Overflow(input.to_owned());
            let whole: u128 = if int_part.is_empty() {
                0
            } else {
                int_part.parse().map_err(|_| overflow())?
            };
            let mut value = whole.checked_mul(per_unit).ok_or_else(overflow)?;
            // The fraction, scaled by the unit and truncated to whole nanoseconds as Go does.
            let mut scale = per_unit;
            for digit in frac_part.bytes() {
                scale /= 10;
                if scale == 0 {
                    break;
                }
                value += u128::from(digit - b'0') * scale;
            }
            total = total.checked_add(value).ok_or_else(overflow)?;
            if total > MAX_NANOS {
                return Err(overflow());
            }
            rest = after_unit;
        }
        if negative && total != 0 {
            return Err(ParseDurationError::Negative(input.to_owned()));
        }
        let secs = u64::try_from(total / 1_000_000_000).map_err(|_| invalid())?;
        // Below 1e9 by construction.
        let nanos = (total % 1_000_000_000) as u32;
        Ok(Self(Duration::new(secs, nanos)))
    }
}

/// Appends `value / 10^precision` with trailing zeros (and a bare point) trimmed.
fn push_fraction(out: &mut String, value: u128, precision: u32) {
    let pow = 10u128.pow(precision);
    out.push_str(&(value / pow).to_string());
    let frac = value % pow;
    if frac != 0 {
        let digits = format!("{frac:0width$}", width = precision as usize);
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
}

impl fmt::Display for GoDuration {
    /// Prints as Go's `time.Duration.String`: `0s`, `1.5ms`, `2m0s`, `12h0m0s`, `1h2m3.5s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        let mut out = String::new();
        if nanos == 0 {
            out.push_str("0s");
        } else if nanos < 1_000 {
            out.push_str(&nanos.to_string());
            out.push_str("ns");
        } else if nanos < 1_000_000 {
            push_fraction(&mut out, nanos, 3);
            out.push_str("µs");
        } else if nanos < 1_000_000_000 {
            push_fraction(&mut out, nanos, 6);
            out.push_str("ms");
        } else {
            let hours = nanos / 3_600_000_000_000;
            let minutes = (nanos / 60_000_000_000) % 60;
            let sub_minute = nanos % 60_000_000_000;
            if hours > 0 {
                out.push_str(&format!("{hours}h"));
            }
            if hours > 0 || minutes > 0 {
                out.push_str(&format!("{minutes}m"));
            }
            push_fraction(&mut out, sub_minute, 9);
            out.push('s');
        }
        f.pad(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_go_parses() {
        struct Case {
            name: &'static str,
            input: &'static str,
            want: Duration,
        }
        let ms = Duration::from_millis;
        let s = Duration::from_secs;
        let cases = [
            Case {
                name: "zero",
                input: "0",
                want: Duration::ZERO,
            },
            Case {
                name: "signed zero",
                input: "-0",
                want: Duration::ZERO,
            },
            Case {
                name: "zero with unit",
                input: "0s",
                want: Duration::ZERO,
            },
            Case {
                name: "seconds",
                input: "15s",
                want: s(15),
            },
            Case {
                name: "plus sign",
                input: "+5s",
                want: s(5),
            },
            Case {
                name: "minutes and seconds",
                input: "1m30s",
                want: s(90),
            },
            Case {
                name: "go's own default format",
                input: "12h0m0s",
                want: s(12 * 3600),
            },
            Case {
                name: "fractional hours",
                input: "1.5h",
                want: s(5400),
            },
            Case {
                name: "leading point",
                input: ".5s",
                want: ms(500),
            },
            Case {
                name: "trailing point",
                input: "5.s",
                want: s(5),
            },
            Case {
                name: "milliseconds",
                input: "300ms",
                want: ms(300),
            },
            Case {
                name: "micro and nano",
                input: "1us2µs3ns",
                want: Duration::from_nanos(3_003),
            },
            Case {
                name: "units in any order",
                input: "2s1h",
                want: s(3602),
            },
            Case {
                name: "sub-nanosecond fraction truncated",
                input: "1.0000000009s",
                want: s(1),
            },
        ];
        for case in cases {
            let got: GoDuration = case
                .input
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", case.name));
            assert_eq!(got.get(), case.want, "{}", case.name);
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        struct Case {
            name: &'static str,
            input: &'static str,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "empty",
                input: "",
                want: "time: invalid duration \"\"",
            },
            Case {
                name: "bare number",
                input: "15",
                want: "time: missing unit in duration \"15\"",
            },
            Case {
                name: "unknown unit",
                input: "3d",
                want: "time: unknown unit \"d\" in duration \"3d\"",
            },
            Case {
                name: "unit only",
                input: "s",
                want: "time: invalid duration \"s\"",
            },
            Case {
                name: "lonely point",
                input: ".s",
                want: "time: invalid duration \".s\"",
            },
            Case {
                name: "sign only",
                input: "-",
                want: "time: invalid duration \"-\"",
            },
            Case {
                name: "negative",
                input: "-1s",
                want: "time: negative duration \"-1s\" is not allowed here",
            },
            Case {
                name: "above int64 nanoseconds",
                input: "2562048h",
                want: "time: invalid duration \"2562048h\": out of range",
            },
            Case {
                name: "space inside",
                input: "1 s",
                want: "time: unknown unit \" s\" in duration \"1 s\"",
            },
        ];
        for case in cases {
            let err = case
                .input
                .parse::<GoDuration>()
                .expect_err(case.name)
                .to_string();
            assert_eq!(err, case.want, "{}", case.name);
        }
    }

    #[test]
    fn prints_as_go_prints() {
        let cases = [
            ("zero", Duration::ZERO, "0s"),
            ("nanoseconds", Duration::from_nanos(500), "500ns"),
            ("microseconds", Duration::from_nanos(1_500), "1.5µs"),
            ("milliseconds", Duration::from_millis(100), "100ms"),
            ("fractional ms", Duration::from_micros(1_250), "1.25ms"),
            ("seconds", Duration::from_secs(15), "15s"),
            ("fractional seconds", Duration::from_millis(2_500), "2.5s"),
            ("minutes", Duration::from_secs(120), "2m0s"),
            ("minutes and seconds", Duration::from_secs(90), "1m30s"),
            ("hours", Duration::from_secs(12 * 3600), "12h0m0s"),
            ("everything", Duration::from_millis(3_723_500), "1h2m3.5s"),
        ];
        for (name, d, want) in cases {
            assert_eq!(GoDuration(d).to_string(), want, "{name}");
            // What Go prints, Go parses back.
            assert_eq!(want.parse::<GoDuration>().expect(name).get(), d, "{name}");
        }
    }
}
