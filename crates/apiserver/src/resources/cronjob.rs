//! batch/v1 cronjobs: upstream's defaults (`SetDefaults_CronJob`), schedule and time zone validation, the job template's rules, and the status reset on create.

use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec};
use serde_json::Value;

use crate::object;
use crate::registry::strategy::{Strategy, typed, typed_roundtrip_checked};
use crate::resources::job::{nonnegative, validate_job_spec};
use crate::resources::pod_defaults::default_template;
use crate::resources::quantities::{self, canonicalize_template};
use crate::validation::FieldError;

/// The longest CronJob name: the controller appends an 11-character `-<timestamp>` to name
/// its Jobs, which must stay within 63 characters.
const MAX_CRONJOB_NAME_LENGTH: usize = 52;

/// The CronJob strategy (upstream's `cronJobStrategy`).
#[derive(Debug, Default)]
pub struct CronJobStrategy;

impl Strategy for CronJobStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(map) = obj.as_object_mut() {
            map.remove("status");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Some(spec) = spec_of(obj) {
            validate_cron_job_spec(&spec, None, &mut errs);
        } else {
            errs.push(FieldError::required("spec", ""));
        }
        let name = object::name(obj);
        if name.len() > MAX_CRONJOB_NAME_LENGTH {
            errs.push(FieldError::invalid(
                "metadata.name",
                name,
                format!("must be no more than {MAX_CRONJOB_NAME_LENGTH} characters"),
            ));
        }
        errs
    }

    /// As upstream, an update skips the name length rule (old CronJobs with longer names
    /// can still be updated and deleted), allows a `TZ=` schedule the object already had,
    /// and checks the time zone only when it changes.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match spec_of(new) {
            Some(spec) => validate_cron_job_spec(&spec, spec_of(old).as_ref(), &mut errs),
            None => errs.push(FieldError::required("spec", "")),
        }
        errs
    }
}

/// Decodes a CronJob with upstream's defaults and its pod template's (the job template
/// gets no Job defaults, as upstream).
pub fn decode_cron_job(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<CronJob, quantities::Error>(obj, |cj| {
        {
            let spec = &mut cj.spec;
            if spec.concurrency_policy.as_deref().unwrap_or("").is_empty() {
                spec.concurrency_policy = Some("Allow".to_owned());
            }
            spec.suspend.get_or_insert(false);
            spec.successful_jobs_history_limit.get_or_insert(3);
            spec.failed_jobs_history_limit.get_or_insert(1);
            if let Some(job_spec) = spec.job_template.spec.as_mut() {
                canonicalize_template(&mut job_spec.template)?;
                default_template(&mut job_spec.template);
            }
        }
        Ok(())
    })
}

fn spec_of(obj: &Value) -> Option<CronJobSpec> {
    obj.get("spec").and_then(typed::<CronJobSpec>)
}

/// Checks `schedule` as upstream's `validateScheduleFormat` does, with robfig/cron's
/// `ParseStandard` (machinery's port, which the CronJob controller runs too); the error is
/// its message.
fn parse_standard(schedule: &str) -> Result<(), String> {
    kcm_machinery::cron::Schedule::parse_standard(schedule)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// upstream's `validateCronJobSpec`; `old` is the stored spec on update.
fn validate_cron_job_spec(
    spec: &CronJobSpec,
    old: Option<&CronJobSpec>,
    errs: &mut Vec<FieldError>,
) {
    if spec.schedule.is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    } else {
        if let Err(why) = parse_standard(&spec.schedule) {
            errs.push(FieldError::invalid(
                "spec.schedule",
                spec.schedule.as_str(),
                why,
            ));
        }
        let allow_tz = old.is_some_and(|o| o.schedule.contains("TZ"));
        if spec.schedule.contains("TZ") {
            if !allow_tz {
                errs.push(FieldError::invalid(
                    "spec.schedule",
                    spec.schedule.as_str(),
                    "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                ));
            } else if spec.time_zone.is_some() {
                errs.push(FieldError::invalid(
                    "spec.schedule",
                    spec.schedule.as_str(),
                    "cannot use both timeZone field and TZ or CRON_TZ in schedule",
                ));
            }
        }
    }
    nonnegative(
        errs,
        "spec.startingDeadlineSeconds",
        spec.starting_deadline_seconds,
    );
    if old.is_none_or(|o| o.time_zone != spec.time_zone)
        && let Some(zone) = spec.time_zone.as_deref()
        && let Err(why) = validate_time_zone(zone)
    {
        errs.push(FieldError::invalid("spec.timeZone", zone, why));
    }
    const POLICIES: [&str; 3] = ["Allow", "Forbid", "Replace"];
    match spec.concurrency_policy.as_deref().unwrap_or("") {
        "" => errs.push(FieldError::required("spec.concurrencyPolicy", "")),
        p if POLICIES.contains(&p) => {}
        other => errs.push(FieldError::not_supported(
            "spec.concurrencyPolicy",
            other,
            &POLICIES,
        )),
    }
    match spec.job_template.spec.as_ref() {
        Some(job_spec) => {
            validate_job_spec(job_spec, "spec.jobTemplate.spec", errs);
            if let Some(selector) = job_spec.selector.as_ref() {
                errs.push(FieldError::invalid(
                    "spec.jobTemplate.spec.selector",
                    serde_json::to_value(selector).unwrap_or(Value::Null),
                    "`selector` will be auto-generated",
                ));
            }
            if job_spec.manual_selector == Some(true) {
                errs.push(FieldError::not_supported(
                    "spec.jobTemplate.spec.manualSelector",
                    true,
                    &["nil", "false"],
                ));
            }
        }
        None => errs.push(FieldError::required("spec.jobTemplate.spec", "")),
    }
    nonnegative(
        errs,
        "spec.successfulJobsHistoryLimit",
        spec.successful_jobs_history_limit.map(i64::from),
    );
    nonnegative(
        errs,
        "spec.failedJobsHistoryLimit",
        spec.failed_jobs_history_limit.map(i64::from),
    );
}

/// upstream's `validateTimeZone`: an explicit IANA name the time zone database knows.
fn validate_time_zone(zone: &str) -> Result<(), String> {
    if zone.is_empty() {
        return Err("timeZone must be nil or non-empty string".to_owned());
    }
    let unknown = || format!("unknown time zone {zone}");
    for part in zone.split('/') {
        let valid_chars = !part.is_empty()
            && part.len() <= 14
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-+".contains(c));
        if part == "." || part == ".." || part.starts_with('-') || !valid_chars {
            return Err(unknown());
        }
    }
    if zone.eq_ignore_ascii_case("Local") {
        return Err(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .to_owned(),
        );
    }
    // Go's `time.LoadLocation` knows "UTC" without a database.
    if zone == "UTC" || jiff::tz::db().get(zone).is_ok() {
        Ok(())
    } else {
        Err(unknown())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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

    fn cron_job(spec: Value) -> Value {
        decode_cron_job(json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": "default"}, "spec": spec}))
        .expect("decodes")
    }

    fn job_template() -> Value {
        json!({"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "busybox"}]}}}})
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaults_as_upstream() {
        let cj = cron_job(json!({"schedule": "0 0 * * *", "jobTemplate": job_template()}));
        assert_eq!(cj["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(cj["spec"]["suspend"], false);
        assert_eq!(cj["spec"]["successfulJobsHistoryLimit"], 3);
        assert_eq!(cj["spec"]["failedJobsHistoryLimit"], 1);
        let job_spec = &cj["spec"]["jobTemplate"]["spec"];
        assert_eq!(
            job_spec.get("backoffLimit"),
            None,
            "no Job defaults in the template"
        );
        assert_eq!(job_spec["template"]["spec"]["dnsPolicy"], "ClusterFirst");
        assert!(CronJobStrategy.validate(&cj).is_empty());
    }

    #[test]
    fn validation_messages_are_upstreams() {
        let cases = [
            (
                "bad schedule",
                json!({"schedule": "* * *", "jobTemplate": job_template()}),
                vec![
                    "spec.schedule: Invalid value: \"* * *\": expected exactly 5 fields, found 3: [* * *]",
                ],
            ),
            (
                "TZ in the schedule",
                json!({"schedule": "TZ=UTC 0 0 * * *", "jobTemplate": job_template()}),
                vec![
                    "spec.schedule: Invalid value: \"TZ=UTC 0 0 * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                ],
            ),
            (
                "unknown time zone",
                json!({"schedule": "0 0 * * *", "timeZone": "Mars/Olympus", "jobTemplate": job_template()}),
                vec![
                    "spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus",
                ],
            ),
            (
                "local time zone",
                json!({"schedule": "0 0 * * *", "timeZone": "Local", "jobTemplate": job_template()}),
                vec![
                    "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                ],
            ),
            (
                "bad concurrency policy",
                json!({"schedule": "0 0 * * *", "concurrencyPolicy": "Sometimes", "jobTemplate": job_template()}),
                vec![
                    "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"",
                ],
            ),
            (
                "selector in the job template",
                json!({"schedule": "0 0 * * *", "jobTemplate": {"spec": {
                    "selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox"}]}}}}}),
                vec![
                    "spec.jobTemplate.spec.selector: Invalid value: {\"matchLabels\":{\"a\":\"b\"}}: `selector` will be auto-generated",
                ],
            ),
            (
                "restart policy always in the job template",
                json!({"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": {"spec": {
                    "containers": [{"name": "c", "image": "busybox"}]}}}}}),
                vec![
                    "spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
                ],
            ),
            (
                "negative history",
                json!({"schedule": "@daily", "successfulJobsHistoryLimit": -1, "jobTemplate": job_template()}),
                vec![
                    "spec.successfulJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
                ],
            ),
        ];
        for (name, spec, want) in cases {
            assert_eq!(
                messages(CronJobStrategy.validate(&cron_job(spec))),
                want,
                "{name}"
            );
        }
        assert!(
            CronJobStrategy
                .validate(&cron_job(
                    json!({"schedule": "0 0 * * *", "timeZone": "Europe/Berlin",
                    "jobTemplate": job_template()})
                ))
                .is_empty()
        );
    }

    #[test]
    fn long_names_fail_on_create_only() {
        let mut cj = cron_job(json!({"schedule": "0 0 * * *", "jobTemplate": job_template()}));
        cj["metadata"]["name"] = json!("n".repeat(53));
        assert_eq!(
            messages(CronJobStrategy.validate(&cj)),
            [format!(
                "metadata.name: Invalid value: \"{}\": must be no more than 52 characters",
                "n".repeat(53)
            )]
        );
        assert!(CronJobStrategy.validate_update(&cj, &cj).is_empty());
    }

    #[test]
    fn a_tz_schedule_the_object_had_may_stay() {
        let old =
            cron_job(json!({"schedule": "CRON_TZ=UTC 0 0 * * *", "jobTemplate": job_template()}));
        assert!(CronJobStrategy.validate_update(&old, &old).is_empty());
        let mut both = old.clone();
        both["spec"]["timeZone"] = json!("UTC");
        assert_eq!(
            messages(CronJobStrategy.validate_update(&both, &old)),
            [
                "spec.schedule: Invalid value: \"CRON_TZ=UTC 0 0 * * *\": cannot use both timeZone field and TZ or CRON_TZ in schedule"
            ]
        );
    }
}
