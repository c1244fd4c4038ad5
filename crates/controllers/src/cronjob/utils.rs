//! CronJob schedule arithmetic and Job construction: the most recent missed schedule (with the "more than 100 missed" case), the next schedule honouring `startingDeadlineSeconds`, the requeue delay, job names and the scheduled-timestamp annotation, and the active list, as upstream's `pkg/controller/cronjob/utils.go`.

use std::collections::BTreeMap;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kcm_machinery::controller::new_controller_ref;
use kube::core::GroupVersionKind;

use super::{CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION, Error, Result};
use kcm_machinery::cron::Schedule;
use kcm_machinery::cron::go_time::{format_rfc3339, load_location};

/// Added to every requeue delay so that a sync lands after the scheduled time despite small
/// clock skews, as upstream's `nextScheduleDelta`.
pub const NEXT_SCHEDULE_DELTA: SignedDuration = SignedDuration::from_millis(100);

/// Beyond this many missed schedules the controller warns (`TooManyMissedTimes`).
pub const TOO_MANY_MISSED_SCHEDULES: i64 = 100;

/// How many schedules passed unrun, as upstream's `missedSchedulesType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissedSchedules {
    /// None since the earliest time.
    None,
    /// Some (up to [`TOO_MANY_MISSED_SCHEDULES`]).
    Few,
    /// More than [`TOO_MANY_MISSED_SCHEDULES`]: probably a clock skew or a long outage.
    Many,
}

impl std::fmt::Display for MissedSchedules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::None => "none",
            Self::Few => "few",
            Self::Many => "many",
        })
    }
}

/// The result of [`most_recent_schedule_time`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MostRecentSchedule {
    /// The time schedules are counted from: `status.lastScheduleTime`, else the creation
    /// time, moved up to `now - startingDeadlineSeconds` when asked to.
    pub earliest: Timestamp,
    /// The latest schedule at or before `now` after `earliest`, if any.
    pub most_recent: Option<Timestamp>,
    /// How many schedules were missed.
    pub missed: MissedSchedules,
}

/// When the CronJob last scheduled a job (or was created), the latest schedule since then
/// that is due by `now`, and how many were missed, as upstream's `mostRecentScheduleTime`.
/// With `include_starting_deadline`, schedules older than `startingDeadlineSeconds` are not
/// considered. The count of missed schedules is estimated from the gap between the first two
/// schedules, so it stays cheap however long the controller was down. Fails for a schedule
/// that never (or always) fires, such as `59 23 31 2 *`.
pub fn most_recent_schedule_time(
    cron_job: &CronJob,
    now: Timestamp,
    schedule: &Schedule,
    local: &TimeZone,
    include_starting_deadline: bool,
) -> Result<MostRecentSchedule> {
    let mut earliest = cron_job
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .or(cron_job.metadata.creation_timestamp.as_ref())
        .map_or(super::GO_ZERO_TIME, |t| t.0);
    if include_starting_deadline && let Some(deadline) = cron_job.spec.starting_deadline_seconds {
        // The controller is not going to schedule anything before this point.
        let scheduling_deadline = now
            .checked_sub(SignedDuration::from_secs(deadline))
            .unwrap_or(Timestamp::MIN);
        earliest = earliest.max(scheduling_deadline);
    }
    let none = |missed| MostRecentSchedule {
        earliest,
        most_recent: None,
        missed,
    };
    let t1 = schedule.next(earliest, local);
    let t2 = t1.and_then(|t1| schedule.next(t1, local));
    if let Some(t1) = t1
        && now < t1
    {
        return Ok(none(MissedSchedules::None));
    }
    if let (Some(t1), Some(t2)) = (t1, t2)
        && now < t2
    {
        return Ok(MostRecentSchedule {
            earliest,
            most_recent: Some(t1),
            missed: MissedSchedules::None,
        });
    }
    // An impossible date (31 February) never fires: no interval between two schedules.
    let (Some(t1), Some(t2)) = (t1, t2) else {
        return Err(Error::ScheduleTooFrequent);
    };
    let between = t2.duration_since(t1).as_secs();
    if between < 1 {
        return Err(Error::ScheduleTooFrequent);
    }
    // A rough count: how many intervals fit between the first schedule and now.
    let elapsed = now.duration_since(t1).as_secs();
    let missed_count = elapsed / between + 1;
    // Start one interval early and let the schedule find the exact times: intervals of
    // schedules like `30 6-16/4 * * 1-5` are uneven.
    let back = SignedDuration::from_secs((missed_count - 2).saturating_mul(between));
    let potential_earliest = t1.checked_add(back).unwrap_or(t1);
    let mut most_recent = None;
    let mut next = schedule.next(potential_earliest, local);
    while let Some(t) = next.filter(|t| *t <= now) {
        most_recent = Some(t);
        next = schedule.next(t, local);
    }
    let missed = if missed_count > TOO_MANY_MISSED_SCHEDULES {
        MissedSchedules::Many
    } else if missed_count > 0 {
        MissedSchedules::Few
    } else {
        MissedSchedules::None
    };
    Ok(MostRecentSchedule {
        earliest,
        most_recent,
        missed,
    })
}

/// How long until the sync after the next schedule (plus [`NEXT_SCHEDULE_DELTA`]), as
/// upstream's `nextScheduleTimeDuration`. `None` when the schedule never fires again.
pub fn next_schedule_time_duration(
    cron_job: &CronJob,
    now: Timestamp,
    schedule: &Schedule,
    local: &TimeZone,
) -> Option<SignedDuration> {
    let from = match most_recent_schedule_time(cron_job, now, schedule, local, false) {
        // Still requeue at some point: aim for the next slot from now.
        Err(_) => now,
        Ok(MostRecentSchedule {
            most_recent: Some(t),
            ..
        }) => t,
        // No missed schedules since the earliest time: count from it.
        Ok(MostRecentSchedule {
            earliest,
            missed: MissedSchedules::None,
            ..
        }) => earliest,
        // Missed schedules but none found: count from now.
        Ok(_) => now,
    };
    let next = schedule.next(from, local)?;
    Some(
        next.checked_add(NEXT_SCHEDULE_DELTA)
            .unwrap_or(next)
            .duration_since(now),
    )
}

/// The schedule to start a job for now, if one is due, with how many schedules were missed
/// (the caller warns `TooManyMissedTimes` for [`MissedSchedules::Many`]), as upstream's
/// `nextScheduleTime` (which honours `startingDeadlineSeconds`).
pub fn next_schedule_time(
    cron_job: &CronJob,
    now: Timestamp,
    schedule: &Schedule,
    local: &TimeZone,
) -> Result<Option<(Timestamp, MissedSchedules)>> {
    let recent = most_recent_schedule_time(cron_job, now, schedule, local, true)?;
    Ok(recent
        .most_recent
        .filter(|t| *t <= now)
        .map(|t| (t, recent.missed)))
}

/// Whether `scheduled` is more than `startingDeadlineSeconds` before `now` (the job is then
/// not started; `MissSchedule`), as the `tooLate` check of upstream's `syncCronJob`.
pub fn is_too_late(cron_job: &CronJob, scheduled: Timestamp, now: Timestamp) -> bool {
    cron_job
        .spec
        .starting_deadline_seconds
        .is_some_and(|deadline| {
            scheduled
                .checked_add(SignedDuration::from_secs(deadline))
                .is_ok_and(|limit| limit < now)
        })
}

/// The schedule the controller parses: the spec's schedule, prefixed with `TZ=<timeZone>`
/// when `spec.timeZone` names a zone that loads, as upstream's `formatSchedule`. A schedule
/// already containing `TZ` is used as written; `tz_in_schedule` then asks the caller to warn
/// `UnsupportedSchedule`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormattedSchedule {
    /// What to parse.
    pub schedule: String,
    /// The schedule itself contains `TZ` (or `CRON_TZ`).
    pub tz_in_schedule: bool,
}

/// See [`FormattedSchedule`].
pub fn format_schedule(cron_job: &CronJob) -> FormattedSchedule {
    let spec = Some(&cron_job.spec);
    let schedule = cron_job.spec.schedule.as_str();
    if schedule.contains("TZ") {
        return FormattedSchedule {
            schedule: schedule.to_owned(),
            tz_in_schedule: true,
        };
    }
    let formatted = match spec.and_then(|s| s.time_zone.as_deref()) {
        Some(tz) if load_location(tz).is_ok() => format!("TZ={tz} {schedule}"),
        _ => schedule.to_owned(),
    };
    FormattedSchedule {
        schedule: formatted,
        tz_in_schedule: false,
    }
}

/// The message of the `UnsupportedSchedule` warning for a schedule with `TZ`/`CRON_TZ`.
pub fn unsupported_schedule_message(schedule: &str) -> String {
    format!(
        "CRON_TZ or TZ used in schedule {schedule:?} is not officially supported, see \
         https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"
    )
}

/// The name of the job for the schedule at `scheduled`: `<cronjob>-<minutes since the Unix
/// epoch>`, deterministic so a schedule is never run twice, as upstream's `getJobName`.
pub fn job_name(cron_job: &CronJob, scheduled: Timestamp) -> String {
    let name = cron_job.metadata.name.as_deref().unwrap_or_default();
    format!("{name}-{}", scheduled.as_second() / 60)
}

/// The job to create for the schedule at `scheduled`, as upstream's `getJobFromTemplate2`:
/// the template's labels, annotations and spec, the deterministic [`job_name`], a controller
/// reference to the CronJob, its creation time set to the schedule, and the
/// [`CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION`] (RFC 3339, in `spec.timeZone`, UTC without).
pub fn job_from_template(cron_job: &CronJob, scheduled: Timestamp) -> Result<Job> {
    let spec = &cron_job.spec;
    let template_meta = spec.job_template.metadata.as_ref();
    let labels = template_meta
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let mut annotations: BTreeMap<String, String> = template_meta
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    let zone = spec.time_zone.as_deref().unwrap_or_default();
    let location = load_location(zone).map_err(|source| Error::TimeZone {
        name: zone.to_owned(),
        source,
    })?;
    // `Local` is refused by validation; read it as UTC rather than the host's zone.
    let utc = TimeZone::UTC;
    let tz = location.resolve(&utc);
    annotations.insert(
        CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION.to_owned(),
        format_rfc3339(scheduled, tz),
    );
    let gvk = GroupVersionKind::gvk("batch", "v1", "CronJob");
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(job_name(cron_job, scheduled)),
            labels: Some(labels),
            annotations: Some(annotations),
            creation_timestamp: Some(Time(scheduled)),
            owner_references: Some(vec![new_controller_ref(&cron_job.metadata, &gvk)]),
            ..Default::default()
        },
        spec: spec.job_template.spec.clone(),
        status: None,
    })
}

fn active_list(cron_job: &CronJob) -> &[ObjectReference] {
    cron_job
        .status
        .as_ref()
        .and_then(|s| s.active.as_deref())
        .unwrap_or_default()
}

/// Whether `status.active` references a job with this UID, as upstream's `inActiveList`.
pub fn in_active_list(cron_job: &CronJob, uid: &str) -> bool {
    active_list(cron_job)
        .iter()
        .any(|r| r.uid.as_deref() == Some(uid))
}

/// Whether `status.active` references a job with this name and namespace, as upstream's
/// `inActiveListByName`.
pub fn in_active_list_by_name(cron_job: &CronJob, namespace: &str, name: &str) -> bool {
    active_list(cron_job).iter().any(|r| {
        r.name.as_deref() == Some(name) && r.namespace.as_deref().unwrap_or_default() == namespace
    })
}

/// Removes the job with this UID from `status.active`, as upstream's `deleteFromActiveList`.
pub fn delete_from_active_list(cron_job: &mut CronJob, uid: &str) {
    if let Some(status) = cron_job.status.as_mut()
        && let Some(active) = status.active.as_mut()
    {
        active.retain(|r| r.uid.as_deref() != Some(uid));
        // An empty list is left out on the wire (Go's `omitempty`), as upstream writes it.
        if active.is_empty() {
            status.active = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{CronJobSpec, CronJobStatus, JobSpec, JobTemplateSpec};

    fn top_of_the_hour() -> Timestamp {
        "2016-05-19T10:00:00Z".parse().expect("timestamp")
    }

    fn after_top(d: SignedDuration) -> Timestamp {
        top_of_the_hour() + d
    }

    fn mins(n: i64) -> SignedDuration {
        SignedDuration::from_mins(n)
    }

    fn hours(n: i64) -> SignedDuration {
        SignedDuration::from_hours(n)
    }

    fn cron_job(
        schedule: &str,
        created: Timestamp,
        last: Option<Timestamp>,
        deadline: Option<i64>,
    ) -> CronJob {
        CronJob {
            metadata: ObjectMeta {
                name: Some("mycronjob".into()),
                namespace: Some("default".into()),
                uid: Some("1a2b3c".into()),
                creation_timestamp: Some(Time(created)),
                ..Default::default()
            },
            spec: CronJobSpec {
                schedule: schedule.into(),
                starting_deadline_seconds: deadline,
                ..Default::default()
            },
            status: Some(CronJobStatus {
                last_schedule_time: last.map(Time),
                ..Default::default()
            }),
        }
    }

    fn parse(schedule: &str) -> Schedule {
        Schedule::parse_standard(schedule).unwrap_or_else(|e| panic!("{schedule}: {e}"))
    }

    #[test]
    fn most_recent_schedule_time_table() {
        struct Case {
            name: &'static str,
            cj: CronJob,
            include_sds: bool,
            now: Timestamp,
            want_earliest: Timestamp,
            want_recent: Option<Timestamp>,
            want_missed: MissedSchedules,
            want_err: bool,
        }
        let top = top_of_the_hour();
        let half_past = after_top(mins(30));
        let cases = vec![
            Case {
                name: "now before next schedule",
                cj: cron_job("0 * * * *", top, None, None),
                include_sds: false,
                now: top + SignedDuration::from_secs(30),
                want_earliest: top,
                want_recent: None,
                want_missed: MissedSchedules::None,
                want_err: false,
            },
            Case {
                name: "now just after next schedule",
                cj: cron_job("0 * * * *", top, None, None),
                include_sds: false,
                now: after_top(mins(61)),
                want_earliest: top,
                want_recent: Some(after_top(mins(60))),
                want_missed: MissedSchedules::None,
                want_err: false,
            },
            Case {
                name: "missed 5 schedules",
                cj: cron_job("0 * * * *", top + SignedDuration::from_secs(10), None, None),
                include_sds: false,
                now: after_top(mins(301)),
                want_earliest: top + SignedDuration::from_secs(10),
                want_recent: Some(after_top(mins(300))),
                want_missed: MissedSchedules::Few,
                want_err: false,
            },
            Case {
                name: "complex schedule",
                cj: cron_job("30 6-16/4 * * 1-5", top, Some(half_past), None),
                include_sds: false,
                now: after_top(hours(24) + mins(31)),
                want_earliest: half_past,
                want_recent: Some(after_top(hours(24) + mins(30))),
                want_missed: MissedSchedules::Few,
                want_err: false,
            },
            Case {
                name: "another complex schedule",
                cj: cron_job("30 10,11,12 * * 1-5", top, Some(half_past), None),
                include_sds: false,
                now: after_top(hours(30) + mins(30)),
                want_earliest: half_past,
                want_recent: None,
                want_missed: MissedSchedules::Few,
                want_err: false,
            },
            Case {
                name: "complex schedule with longer diff between executions",
                cj: cron_job("30 6-16/4 * * 1-5", top, Some(half_past), None),
                include_sds: false,
                now: after_top(hours(96) + mins(31)),
                want_earliest: half_past,
                want_recent: Some(after_top(hours(96) + mins(30))),
                want_missed: MissedSchedules::Few,
                want_err: false,
            },
            Case {
                name: "complex schedule with shorter diff between executions",
                cj: cron_job("30 6-16/4 * * 1-5", top, None, None),
                include_sds: false,
                now: after_top(hours(24) + mins(31)),
                want_earliest: top,
                want_recent: Some(after_top(hours(24) + mins(30))),
                want_missed: MissedSchedules::Few,
                want_err: false,
            },
            Case {
                name: "@every schedule",
                cj: cron_job(
                    "@every 1h",
                    after_top(mins(-59)),
                    Some(after_top(mins(1))),
                    Some(10),
                ),
                include_sds: false,
                now: after_top(hours(7 * 24)),
                want_earliest: after_top(mins(1)),
                want_recent: Some(after_top(hours(6 * 24 + 23) + mins(1))),
                want_missed: MissedSchedules::Many,
                want_err: false,
            },
            Case {
                name: "rogue cronjob",
                cj: cron_job(
                    "59 23 31 2 *",
                    top + SignedDuration::from_secs(10),
                    None,
                    None,
                ),
                include_sds: false,
                now: after_top(hours(1)),
                want_earliest: top,
                want_recent: None,
                want_missed: MissedSchedules::None,
                want_err: true,
            },
            Case {
                name: "earliestTime being CreationTimestamp and LastScheduleTime",
                cj: cron_job("0 * * * *", top, Some(top), None),
                include_sds: false,
                now: top + SignedDuration::from_secs(30),
                want_earliest: top,
                want_recent: None,
                want_missed: MissedSchedules::None,
                want_err: false,
            },
            Case {
                name: "earliestTime being LastScheduleTime",
                cj: cron_job("*/5 * * * *", top, Some(half_past), None),
                include_sds: false,
                now: after_top(mins(31)),
                want_earliest: half_past,
                want_recent: None,
                want_missed: MissedSchedules::None,
                want_err: false,
            },
            Case {
                name: "earliestTime being LastScheduleTime (within StartingDeadlineSeconds)",
                cj: cron_job("*/5 * * * *", top, Some(half_past), Some(60)),
                include_sds: false,
                now: after_top(mins(31)),
                want_earliest: half_past,
                want_recent: None,
                want_missed: MissedSchedules::None,
                want_err: false,
            },
            Case {
                name: "earliestTime being LastScheduleTime (outside StartingDeadlineSeconds)",
                cj: cron_job("*/5 * * * *", top, Some(half_past), Some(60)),
                include_sds: true,
                now: after_top(mins(32)),
                want_earliest: after_top(mins(31)),
                want_recent: None,
                want_missed: MissedSchedules::None,
                want_err: false,
            },
        ];
        for c in cases {
            let schedule = parse(&c.cj.spec.schedule.clone());
            let got =
                most_recent_schedule_time(&c.cj, c.now, &schedule, &TimeZone::UTC, c.include_sds);
            if c.want_err {
                assert!(got.is_err(), "{}: want an error, got {got:?}", c.name);
                continue;
            }
            let got = got.unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert_eq!(got.earliest, c.want_earliest, "{} earliest", c.name);
            assert_eq!(got.most_recent, c.want_recent, "{} most recent", c.name);
            assert_eq!(got.missed, c.want_missed, "{} missed", c.name);
        }
    }

    #[test]
    fn next_schedule_time_duration_table() {
        struct Case {
            name: &'static str,
            cj: CronJob,
            now: Timestamp,
            want: SignedDuration,
        }
        let top = top_of_the_hour();
        let cases = vec![
            Case {
                name: "complex schedule skipping weekend",
                cj: cron_job("30 6-16/4 * * 1-5", top, Some(after_top(mins(30))), None),
                now: after_top(hours(24) + mins(31)),
                want: hours(3) + mins(59) + NEXT_SCHEDULE_DELTA,
            },
            Case {
                name: "another complex schedule skipping weekend",
                cj: cron_job("30 10,11,12 * * 1-5", top, Some(after_top(mins(30))), None),
                now: after_top(hours(30) + mins(30)),
                want: hours(66) + NEXT_SCHEDULE_DELTA,
            },
            Case {
                name: "once a week cronjob, missed two runs",
                cj: cron_job("0 12 * * 4", top, Some(after_top(hours(2))), None),
                now: after_top(hours(19 * 24 + 1) + mins(30)),
                want: hours(48) + mins(30) + NEXT_SCHEDULE_DELTA,
            },
            Case {
                name: "no previous run of a cronjob",
                cj: cron_job("0 12 * * 5", top, None, None),
                now: after_top(hours(6)),
                want: hours(20) + NEXT_SCHEDULE_DELTA,
            },
        ];
        for c in cases {
            let schedule = parse(&c.cj.spec.schedule.clone());
            let got = next_schedule_time_duration(&c.cj, c.now, &schedule, &TimeZone::UTC);
            assert_eq!(got, Some(c.want), "{}", c.name);
        }
    }

    #[test]
    fn next_schedule_time_cases() {
        let hourly = parse("0 * * * ?");
        let t1 = top_of_the_hour();
        let t2 = after_top(hours(1));
        struct Case {
            name: &'static str,
            created: Timestamp,
            last: Option<Timestamp>,
            deadline: Option<i64>,
            now: Timestamp,
            want: Option<Timestamp>,
        }
        let cases = [
            Case {
                name: "no known start times, and none needed yet",
                created: t1 - mins(10),
                last: None,
                deadline: None,
                now: t1 - mins(7),
                want: None,
            },
            Case {
                name: "no known start times, and one needed",
                created: t1 - mins(10),
                last: None,
                deadline: None,
                now: t1 + SignedDuration::from_secs(2),
                want: Some(t1),
            },
            Case {
                name: "known LastScheduleTime, no start needed",
                created: t1 - mins(10),
                last: Some(t1),
                deadline: None,
                now: t1 + mins(2),
                want: None,
            },
            Case {
                name: "known LastScheduleTime, a start needed",
                created: t1 - mins(10),
                last: Some(t1),
                deadline: None,
                now: t2 + mins(5),
                want: Some(t2),
            },
            Case {
                name: "known LastScheduleTime, two starts needed",
                created: t1 - hours(2),
                last: Some(t1 - hours(1)),
                deadline: None,
                now: t2 + mins(5),
                want: Some(t2),
            },
            Case {
                name: "now is way ahead of last start time, and there is no deadline",
                created: t1 - hours(2),
                last: Some(t1 - hours(1)),
                deadline: None,
                now: t2 + hours(10 * 24),
                want: Some(t2 + hours(10 * 24)),
            },
            Case {
                name: "now is way ahead of last start time, but there is a short deadline",
                created: t1 - hours(2),
                last: Some(t1 - hours(1)),
                deadline: Some(2 * 60 * 60),
                now: t2 + hours(10 * 24),
                want: Some(t2 + hours(10 * 24)),
            },
        ];
        for c in cases {
            let cj = cron_job("0 * * * ?", c.created, c.last, c.deadline);
            let got = next_schedule_time(&cj, c.now, &hourly, &TimeZone::UTC)
                .unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert_eq!(got.map(|(t, _)| t), c.want, "{}", c.name);
        }
        // 240 hours missed without a deadline: warn; with a 2-hour deadline only 2 are seen.
        let far = t2 + hours(10 * 24);
        let missed = |deadline| {
            let cj = cron_job("0 * * * ?", t1 - hours(2), Some(t1 - hours(1)), deadline);
            next_schedule_time(&cj, far, &hourly, &TimeZone::UTC)
                .ok()
                .flatten()
                .map(|(_, m)| m)
        };
        assert_eq!(missed(None), Some(MissedSchedules::Many));
        assert_eq!(missed(Some(7200)), Some(MissedSchedules::Few));
        // The error of an impossible schedule comes through.
        let rogue = cron_job(
            "59 23 31 2 *",
            t1 + SignedDuration::from_secs(10),
            None,
            None,
        );
        let err = next_schedule_time(&rogue, t2, &parse("59 23 31 2 *"), &TimeZone::UTC)
            .map_err(|e| e.to_string());
        assert_eq!(
            err,
            Err("time difference between two schedules is less than 1 second".to_owned())
        );
    }

    #[test]
    fn missed_schedules_in_new_york_across_dst() {
        // Daily at 02:30 New York time; the controller was down over the spring-forward
        // weekend of 2024 (no 02:30 on 2024-03-10).
        let ny = TimeZone::get("America/New_York").expect("tzdata for America/New_York");
        let schedule = parse("TZ=America/New_York 30 2 * * *");
        let last: Timestamp = "2024-03-08T02:30:00-05:00".parse().expect("timestamp");
        let now: Timestamp = "2024-03-11T09:00:00-04:00".parse().expect("timestamp");
        let cj = cron_job("30 2 * * *", last, Some(last), None);
        let got = most_recent_schedule_time(&cj, now, &schedule, &TimeZone::UTC, false)
            .expect("schedule");
        assert_eq!(
            got.most_recent,
            Some("2024-03-11T02:30:00-04:00".parse().expect("timestamp"))
        );
        assert_eq!(got.missed, MissedSchedules::Few);
        // The next run is tomorrow 02:30 EDT, plus the delta.
        let wait = next_schedule_time_duration(&cj, now, &schedule, &ny);
        assert_eq!(wait, Some(hours(17) + mins(30) + NEXT_SCHEDULE_DELTA));
    }

    #[test]
    fn too_late_only_with_a_deadline() {
        let t = top_of_the_hour();
        let with = cron_job("* * * * *", t, None, Some(60));
        assert!(!is_too_late(&with, t, t + SignedDuration::from_secs(60)));
        assert!(is_too_late(&with, t, t + SignedDuration::from_secs(61)));
        assert!(!is_too_late(
            &cron_job("* * * * *", t, None, None),
            t,
            t + hours(100)
        ));
    }

    #[test]
    fn job_from_template_table() {
        let scheduled = top_of_the_hour();
        struct Case {
            name: &'static str,
            time_zone: Option<&'static str>,
            annotations: BTreeMap<String, String>,
            want_annotations: usize,
            want_scheduled: &'static str,
        }
        let one = BTreeMap::from([("x".to_owned(), "y".to_owned())]);
        let two = BTreeMap::from([
            ("x".to_owned(), "y".to_owned()),
            ("z".to_owned(), "x".to_owned()),
        ]);
        let cases = vec![
            Case {
                name: "UTC timezone and one annotation",
                time_zone: Some("UTC"),
                annotations: one.clone(),
                want_annotations: 2,
                want_scheduled: "2016-05-19T10:00:00Z",
            },
            Case {
                name: "nil timezone and one annotation",
                time_zone: None,
                annotations: one,
                want_annotations: 2,
                want_scheduled: "2016-05-19T10:00:00Z",
            },
            Case {
                name: "correct timezone and multiple annotation",
                time_zone: Some("Europe/Rome"),
                annotations: two,
                want_annotations: 3,
                want_scheduled: "2016-05-19T12:00:00+02:00",
            },
        ];
        for c in cases {
            let mut cj = cron_job("* * * * ?", scheduled, None, None);
            {
                let spec = &mut cj.spec;
                spec.time_zone = c.time_zone.map(Into::into);
                spec.job_template = JobTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(BTreeMap::from([("a".to_owned(), "b".to_owned())])),
                        annotations: Some(c.annotations),
                        ..Default::default()
                    }),
                    spec: Some(JobSpec {
                        active_deadline_seconds: Some(1),
                        manual_selector: Some(false),
                        ..Default::default()
                    }),
                };
            }
            let job =
                job_from_template(&cj, scheduled).unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert_eq!(
                job.metadata.name.as_deref(),
                Some("mycronjob-24394200"),
                "{}",
                c.name
            );
            assert_eq!(
                job.metadata.labels.as_ref().map(BTreeMap::len),
                Some(1),
                "{}",
                c.name
            );
            let annotations = job.metadata.annotations.clone().unwrap_or_default();
            assert_eq!(annotations.len(), c.want_annotations, "{}", c.name);
            assert_eq!(
                annotations
                    .get(CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION)
                    .map(String::as_str),
                Some(c.want_scheduled),
                "{}",
                c.name
            );
            assert_eq!(
                job.metadata.creation_timestamp,
                Some(Time(scheduled)),
                "{}",
                c.name
            );
            let owner = job.metadata.owner_references.clone().unwrap_or_default();
            assert_eq!(owner.len(), 1);
            assert_eq!(
                (
                    owner[0].kind.as_str(),
                    owner[0].api_version.as_str(),
                    owner[0].uid.as_str()
                ),
                ("CronJob", "batch/v1", "1a2b3c")
            );
            assert_eq!(
                (owner[0].controller, owner[0].block_owner_deletion),
                (Some(true), Some(true))
            );
            assert_eq!(
                job.spec.and_then(|s| s.active_deadline_seconds),
                Some(1),
                "{}",
                c.name
            );
        }
        let mut bad = cron_job("* * * * ?", scheduled, None, None);
        {
            let spec = &mut bad.spec;
            spec.time_zone = Some("Mars/Olympus".into());
        }
        assert!(matches!(
            job_from_template(&bad, scheduled),
            Err(Error::TimeZone { .. })
        ));
    }

    #[test]
    fn job_names_count_minutes_since_the_epoch() {
        let cj = cron_job("* * * * *", top_of_the_hour(), None, None);
        assert_eq!(job_name(&cj, top_of_the_hour()), "mycronjob-24394200");
        // Seconds within the minute do not change the name.
        assert_eq!(
            job_name(&cj, top_of_the_hour() + SignedDuration::from_secs(59)),
            "mycronjob-24394200"
        );
        assert_eq!(
            job_name(&cj, top_of_the_hour() + mins(1)),
            "mycronjob-24394201"
        );
    }

    #[test]
    fn format_schedule_table() {
        struct Case {
            name: &'static str,
            schedule: &'static str,
            time_zone: Option<&'static str>,
            want: FormattedSchedule,
        }
        let f = |s: &str, tz_in_schedule| FormattedSchedule {
            schedule: s.into(),
            tz_in_schedule,
        };
        let cases = [
            Case {
                name: "plain",
                schedule: "0 * * * *",
                time_zone: None,
                want: f("0 * * * *", false),
            },
            Case {
                name: "time zone field",
                schedule: "0 * * * *",
                time_zone: Some("Europe/Rome"),
                want: f("TZ=Europe/Rome 0 * * * *", false),
            },
            Case {
                name: "invalid time zone field is ignored",
                schedule: "0 * * * *",
                time_zone: Some("Mars/Olympus"),
                want: f("0 * * * *", false),
            },
            Case {
                name: "TZ in schedule wins",
                schedule: "CRON_TZ=UTC 0 * * * *",
                time_zone: Some("Europe/Rome"),
                want: f("CRON_TZ=UTC 0 * * * *", true),
            },
        ];
        for c in cases {
            let mut cj = cron_job(c.schedule, top_of_the_hour(), None, None);
            {
                let spec = &mut cj.spec;
                spec.time_zone = c.time_zone.map(Into::into);
            }
            assert_eq!(format_schedule(&cj), c.want, "{}", c.name);
        }
        assert!(
            unsupported_schedule_message("TZ=UTC * * * * *")
                .starts_with("CRON_TZ or TZ used in schedule \"TZ=UTC * * * * *\"")
        );
    }

    #[test]
    fn active_list_helpers() {
        let reference = |name: &str, uid: &str| ObjectReference {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(uid.into()),
            ..Default::default()
        };
        let mut cj = cron_job("* * * * *", top_of_the_hour(), None, None);
        if let Some(status) = cj.status.as_mut() {
            status.active = Some(vec![reference("a", "1"), reference("b", "2")]);
        }
        assert!(in_active_list(&cj, "1"));
        assert!(!in_active_list(&cj, "3"));
        assert!(in_active_list_by_name(&cj, "default", "b"));
        assert!(!in_active_list_by_name(&cj, "other", "b"));
        delete_from_active_list(&mut cj, "1");
        assert!(!in_active_list(&cj, "1"));
        assert!(in_active_list(&cj, "2"));
        delete_from_active_list(&mut cj, "2");
        assert_eq!(
            cj.status.as_ref().and_then(|s| s.active.as_ref()),
            None,
            "an emptied list is left out, as on the wire"
        );
        let mut empty = CronJob::default();
        delete_from_active_list(&mut empty, "1");
        assert!(!in_active_list(&empty, "1"));
    }
}
