//! A strict validator of CronJob schedules, with the error messages of the cron parser kube-apiserver uses (robfig/cron v3 `ParseStandard`): five fields or a `@` descriptor.
//!
//! This only says whether a schedule parses, and why not; computing fire times is the
//! CronJob controller's (`kcm-controllers`' own parser). Accepted: five space-separated
//! fields (minute 0-59, hour 0-23, day of month 1-31, month 1-12 or `jan`-`dec`, day of week
//! 0-6 or `sun`-`sat`), each a comma list of `*`, `?`, `N`, `N-M`, with an optional `/step`;
//! the descriptors `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
//! `@hourly` and `@every <duration>`; an optional `TZ=` or `CRON_TZ=` prefix (which the
//! CronJob validation then refuses in favour of `spec.timeZone`).

/// Bounds and names of one field.
struct Field {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

const MINUTES: Field = Field {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Field = Field {
    min: 0,
    max: 23,
    names: &[],
};
const DAYS_OF_MONTH: Field = Field {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Field = Field {
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
const DAYS_OF_WEEK: Field = Field {
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

/// Checks `spec` as robfig/cron's `ParseStandard` does; the error is its message.
pub fn parse_standard(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".to_owned());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let (zone_spec, rest) = spec.split_once(' ').unwrap_or((spec, ""));
        let zone = zone_spec.split_once('=').map_or("", |(_, z)| z);
        if jiff::tz::db().get(zone).is_err() && zone != "UTC" && zone != "Local" {
            return Err(format!(
                "provided bad location {zone}: unknown time zone {zone}"
            ));
        }
        spec = rest.trim();
    }
    if spec.starts_with('@') {
        return parse_descriptor(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    for (expr, field) in fields
        .iter()
        .zip([MINUTES, HOURS, DAYS_OF_MONTH, MONTHS, DAYS_OF_WEEK])
    {
        for range in expr.split(',') {
            check_range(range, &field)?;
        }
    }
    Ok(())
}

/// `@hourly` and friends, and `@every <duration>`.
fn parse_descriptor(spec: &str) -> Result<(), String> {
    match spec {
        "@yearly" | "@annually" | "@monthly" | "@weekly" | "@daily" | "@midnight" | "@hourly" => {
            Ok(())
        }
        _ => match spec.strip_prefix("@every ") {
            Some(duration) if is_go_duration(duration) => Ok(()),
            Some(duration) => Err(format!(
                "failed to parse duration {spec}: time: invalid duration {duration:?}"
            )),
            None => Err(format!("unrecognized descriptor: {spec}")),
        },
    }
}

/// One `N`, `N-M`, `*` or `?`, with an optional `/step` (robfig's `getRange`).
fn check_range(expr: &str, field: &Field) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let (start, mut end) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
        (field.min, field.max)
    } else {
        let start = int_or_name(low_and_high[0], field)?;
        match low_and_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_and_high[1], field)?),
            _ => return Err(format!("too many hyphens: {expr}")),
        }
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = must_parse_int(range_and_step[1])?;
            // `N/step` means `N-max/step`.
            if low_and_high.len() == 1 {
                end = field.max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < field.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            field.min
        ));
    }
    if end > field.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            field.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

fn int_or_name(expr: &str, field: &Field) -> Result<u64, String> {
    let lower = expr.to_ascii_lowercase();
    match field.names.iter().find(|(name, _)| *name == lower) {
        Some((_, value)) => Ok(*value),
        None => must_parse_int(expr),
    }
}

/// A non-negative integer, with the messages of Go's `strconv.Atoi` as robfig wraps them.
fn must_parse_int(expr: &str) -> Result<u64, String> {
    let syntax = || {
        format!("failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: invalid syntax")
    };
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    let value: i64 = expr.parse().map_err(|_| {
        format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: value out of range"
        )
    })?;
    u64::try_from(value).map_err(|_| format!("negative number ({value}) not allowed: {expr}"))
}

/// Whether `s` is a Go `time.ParseDuration` string: a sign, then one or more decimal
/// numbers each with a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), or `0`.
fn is_go_duration(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut rest = s;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return false;
        }
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        if !["ns", "us", "µs", "μs", "ms", "s", "m", "h"].contains(&&rest[..unit_len]) {
            return false;
        }
        rest = &rest[unit_len..];
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_robfig_accepts() {
        for spec in [
            "*/5 * * * *",
            "0 0 * * *",
            "0 9-17 * * mon-fri",
            "15,45 */2 1-15/3 JAN,jul ?",
            "@hourly",
            "@every 1h30m",
            "CRON_TZ=Europe/Paris 0 6 * * *",
            "5/15 * * * *",
        ] {
            assert_eq!(parse_standard(spec), Ok(()), "{spec}");
        }
    }

    #[test]
    fn rejects_with_robfigs_messages() {
        let cases = [
            ("", "empty spec string"),
            ("* * *", "expected exactly 5 fields, found 3: [* * *]"),
            (
                "0 0 * * * *",
                "expected exactly 5 fields, found 6: [0 0 * * * *]",
            ),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("1/2/3 * * * *", "too many slashes: 1/2/3"),
            (
                "x * * * *",
                "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
            ("@fortnightly", "unrecognized descriptor: @fortnightly"),
            (
                "@every soon",
                "failed to parse duration @every soon: time: invalid duration \"soon\"",
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(parse_standard(spec), Err(want.to_owned()), "{spec:?}");
        }
    }
}
