//! The API server's checks of a CronJob's `schedule` and `timeZone`, as upstream's `validateScheduleFormat` and `validateTimeZone` (`pkg/apis/batch/validation`), for the embedded API server to share with the controller.

use kcm_machinery::cron::Schedule;
use kcm_machinery::cron::go_time::load_location;

/// Whether each `/`-separated part of a zone name is a plausible IANA file name component:
/// 1 to 14 of ASCII letters, digits, `.`, `-`, `_`, `+` (upstream's
/// `validTimeZoneCharacters`), neither `.` nor `..`, not starting with `-`.
fn valid_time_zone_part(part: &str) -> bool {
    let chars_ok = (1..=14).contains(&part.len())
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'));
    chars_ok && part != "." && part != ".." && !part.starts_with('-')
}

/// The problems with `spec.timeZone` (none when unset or a loadable IANA zone), as upstream's
/// `validateTimeZone`.
pub fn validate_time_zone(time_zone: Option<&str>) -> Vec<String> {
    let Some(tz) = time_zone else {
        return Vec::new();
    };
    if tz.is_empty() {
        return vec!["timeZone must be nil or non-empty string".to_owned()];
    }
    if !tz.split('/').all(valid_time_zone_part) {
        return vec![format!("unknown time zone {tz}")];
    }
    let mut errors = Vec::new();
    if tz.eq_ignore_ascii_case("Local") {
        errors.push(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .to_owned(),
        );
    }
    if let Err(e) = load_location(tz) {
        errors.push(e.to_string());
    }
    errors
}

/// The problems with `spec.schedule`, as upstream's `validateScheduleFormat`: it must parse,
/// and `TZ`/`CRON_TZ` in it is refused unless `allow_tz_in_schedule` (an update of a CronJob
/// that already had it) and `timeZone` is unset.
pub fn validate_schedule_format(
    schedule: &str,
    allow_tz_in_schedule: bool,
    time_zone: Option<&str>,
) -> Vec<String> {
    let mut errors = Vec::new();
    if let Err(e) = Schedule::parse_standard(schedule) {
        errors.push(e.to_string());
    }
    if schedule.contains("TZ") {
        if !allow_tz_in_schedule {
            errors.push(
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead".to_owned(),
            );
        } else if time_zone.is_some() {
            errors.push("cannot use both timeZone field and TZ or CRON_TZ in schedule".to_owned());
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_time_zone_table() {
        struct Case {
            name: &'static str,
            tz: Option<&'static str>,
            want: Vec<&'static str>,
        }
        let cases = [
            Case {
                name: "unset",
                tz: None,
                want: vec![],
            },
            Case {
                name: "valid",
                tz: Some("America/New_York"),
                want: vec![],
            },
            Case {
                name: "UTC",
                tz: Some("UTC"),
                want: vec![],
            },
            Case {
                name: "legacy name with digits",
                tz: Some("Etc/GMT+5"),
                want: vec![],
            },
            Case {
                name: "empty",
                tz: Some(""),
                want: vec!["timeZone must be nil or non-empty string"],
            },
            Case {
                name: "dot dot",
                tz: Some("../etc"),
                want: vec!["unknown time zone ../etc"],
            },
            Case {
                name: "leading dash",
                tz: Some("America/-York"),
                want: vec!["unknown time zone America/-York"],
            },
            Case {
                name: "part too long",
                tz: Some("America/Argentina_Buenos"),
                want: vec!["unknown time zone America/Argentina_Buenos"],
            },
            Case {
                name: "space",
                tz: Some("America/New York"),
                want: vec!["unknown time zone America/New York"],
            },
            Case {
                name: "local",
                tz: Some("Local"),
                want: vec![
                    "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                ],
            },
            Case {
                name: "unknown",
                tz: Some("Mars/Olympus"),
                want: vec!["unknown time zone Mars/Olympus"],
            },
            Case {
                name: "lower-case local is not a zone either",
                tz: Some("local"),
                want: vec![
                    "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                    "unknown time zone local",
                ],
            },
        ];
        for c in cases {
            assert_eq!(validate_time_zone(c.tz), c.want, "{}", c.name);
        }
    }

    #[test]
    fn validate_schedule_format_table() {
        struct Case {
            name: &'static str,
            schedule: &'static str,
            allow_tz: bool,
            tz: Option<&'static str>,
            want: Vec<&'static str>,
        }
        let cases = [
            Case {
                name: "valid",
                schedule: "0 * * * *",
                allow_tz: false,
                tz: None,
                want: vec![],
            },
            Case {
                name: "invalid",
                schedule: "0 * * *",
                allow_tz: false,
                tz: None,
                want: vec!["expected exactly 5 fields, found 4: [0 * * *]"],
            },
            Case {
                name: "TZ on create",
                schedule: "TZ=UTC 0 * * * *",
                allow_tz: false,
                tz: None,
                want: vec!["cannot use TZ or CRON_TZ in schedule, use timeZone field instead"],
            },
            Case {
                name: "TZ kept on update",
                schedule: "CRON_TZ=UTC 0 * * * *",
                allow_tz: true,
                tz: None,
                want: vec![],
            },
            Case {
                name: "TZ and timeZone on update",
                schedule: "TZ=UTC 0 * * * *",
                allow_tz: true,
                tz: Some("UTC"),
                want: vec!["cannot use both timeZone field and TZ or CRON_TZ in schedule"],
            },
        ];
        for c in cases {
            assert_eq!(
                validate_schedule_format(c.schedule, c.allow_tz, c.tz),
                c.want,
                "{}",
                c.name
            );
        }
    }
}
