//! batch/v1 jobs: upstream's defaults (`SetDefaults_Job`), generated selector and labels, validation of the spec and its update, and the status reset on create.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec, PodFailurePolicyRule, SuccessPolicy};
use kcm_machinery::labels::{Selector, validate_label_key};
use serde_json::{Value, json};

use crate::object;
use crate::pointer::At;
use crate::registry::strategy::{Strategy, keep_requested_meta, typed, typed_roundtrip_checked};
use crate::resources::pod::validate_pod_spec;
use crate::resources::pod_defaults::default_template;
use crate::resources::quantities::{self, canonicalize_template};
use crate::validation::FieldError;

/// The pods' job name label (`batch.kubernetes.io/job-name`).
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The pods' controller uid label (`batch.kubernetes.io/controller-uid`).
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// The legacy job name label, still set and checked.
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";
/// The legacy controller uid label, still set and checked.
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";

/// The largest `parallelism` of an Indexed Job (bounds `status.completedIndexes`).
const MAX_PARALLELISM_FOR_INDEXED_JOB: i64 = 100_000;
/// The largest `maxFailedIndexes` of an Indexed Job.
const MAX_FAILED_INDEXES_FOR_INDEXED_JOB: i64 = 100_000;
/// Above this many completions, a Job with a per-index backoff limit has tighter bounds.
const COMPLETIONS_SOFT_LIMIT: i64 = 100_000;
/// `parallelism` and `maxFailedIndexes` bound above the soft completions limit.
const LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
/// At most this many pod failure policy rules.
const MAX_POD_FAILURE_POLICY_RULES: usize = 20;
/// At most this many exit codes per `onExitCodes` requirement.
const MAX_ON_EXIT_CODES_VALUES: usize = 255;
/// At most this many `onPodConditions` patterns per rule.
const MAX_ON_POD_CONDITIONS_PATTERNS: usize = 20;
/// At most this many success policy rules.
const MAX_SUCCESS_POLICY_RULES: usize = 20;
/// The longest `succeededIndexes` string.
const MAX_SUCCEEDED_INDEXES_LENGTH: usize = 64 * 1024;
/// The longest `managedBy`.
const MAX_MANAGED_BY_LENGTH: usize = 63;

/// The Job strategy (upstream's `jobStrategy`): generated selector, empty status on create,
/// the spec rules and what may change on update.
#[derive(Debug, Default)]
pub struct JobStrategy;

impl Strategy for JobStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(map) = obj.as_object_mut() {
            map.remove("status");
        }
        generate_selector(obj);
    }

    /// Upstream's `jobStatusStrategy.PrepareForUpdate` resets only the spec (no
    /// `ResetObjectMetaForStatus`): the labels and annotations of a `/status` write are kept.
    fn prepare_for_status_update(&self, new: &mut Value, requested_meta: Option<&Value>) {
        keep_requested_meta(new, requested_meta, &["labels", "annotations"]);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let Some(job) = typed::<Job>(obj) else {
            return errs;
        };
        let Some(spec) = job.spec.as_ref() else {
            errs.push(FieldError::required("spec", ""));
            return errs;
        };
        validate_generated_selector(&job, spec, &mut errs);
        validate_job_spec(spec, "spec", &mut errs);
        validate_selector(spec, &mut errs);
        let name = object::name(obj);
        if spec.completion_mode.as_deref() == Some("Indexed")
            && let Some(completions) = spec.completions.filter(|c| *c > 0)
        {
            // The controller suffixes pod hostnames with the index: the longest must be a label.
            let hostname = format!("{name}-{}", completions - 1);
            if !kcm_machinery::labels::is_dns1123_label(&hostname) {
                errs.push(FieldError::invalid(
                    "metadata.name",
                    name,
                    format!("will not able to create pod with invalid DNS label: {hostname}"),
                ));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let (Some(new_spec), Some(old_spec)) = (spec_of(new), spec_of(old)) else {
            return errs;
        };
        validate_completions_update(&new_spec, &old_spec, &mut errs);
        let pairs = [
            (
                "selector",
                json_of(&new_spec.selector),
                json_of(&old_spec.selector),
            ),
            (
                "completionMode",
                json_of(&new_spec.completion_mode),
                json_of(&old_spec.completion_mode),
            ),
            (
                "podFailurePolicy",
                json_of(&new_spec.pod_failure_policy),
                json_of(&old_spec.pod_failure_policy),
            ),
            (
                "backoffLimitPerIndex",
                json_of(&new_spec.backoff_limit_per_index),
                json_of(&old_spec.backoff_limit_per_index),
            ),
            (
                "managedBy",
                json_of(&new_spec.managed_by),
                json_of(&old_spec.managed_by),
            ),
            (
                "successPolicy",
                json_of(&new_spec.success_policy),
                json_of(&old_spec.success_policy),
            ),
        ];
        for (field, new_value, old_value) in &pairs {
            immutable(&mut errs, field, new_value, old_value);
        }
        // A suspended Job that never started may change where its pods go (upstream's
        // `AllowMutableSchedulingDirectives`).
        let never_started = old.at("/status/startTime").is_none_or(Value::is_null);
        let mutable_scheduling = old_spec.suspend == Some(true) && never_started;
        let new_template = new.at("/spec/template").cloned().unwrap_or(Value::Null);
        let mut old_template = old.at("/spec/template").cloned().unwrap_or(Value::Null);
        if mutable_scheduling {
            allow_scheduling_changes(&new_template, &mut old_template);
        }
        if new_template != old_template {
            errs.push(FieldError::invalid(
                "spec.template",
                new_template,
                "field is immutable",
            ));
        }
        errs
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for field in ["active", "succeeded", "failed", "ready", "terminating"] {
            nonnegative(
                &mut errs,
                &format!("status.{field}"),
                new.at(&format!("/status/{field}")).and_then(Value::as_i64),
            );
        }
        errs
    }

    fn orphans_by_default(&self) -> bool {
        true
    }

    fn orphan_warning(&self) -> Option<&'static str> {
        Some(
            "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning",
        )
    }
}

/// Decodes a Job with upstream's defaults (`SetDefaults_Job`) and the pod template's.
pub fn decode_job(obj: Value) -> Result<Value, String> {
    typed_roundtrip_checked::<Job, quantities::Error>(obj, |job| {
        if let Some(spec) = job.spec.as_mut() {
            default_job_spec(spec);
            canonicalize_template(&mut spec.template)?;
            default_template(&mut spec.template);
            let template_labels = spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone());
            if let Some(labels) = template_labels
                && job.metadata.labels.as_ref().is_none_or(BTreeMap::is_empty)
            {
                job.metadata.labels = Some(labels);
            }
        }
        Ok(())
    })
}

/// `SetDefaults_Job` on a spec (also what a CronJob's job template gets).
pub fn default_job_spec(spec: &mut JobSpec) {
    if spec.completions.is_none() && spec.parallelism.is_none() {
        spec.completions = Some(1);
    }
    spec.parallelism.get_or_insert(1);
    if spec.backoff_limit.is_none() {
        spec.backoff_limit = Some(if spec.backoff_limit_per_index.is_some() {
            i32::MAX
        } else {
            6
        });
    }
    spec.completion_mode
        .get_or_insert_with(|| "NonIndexed".to_owned());
    spec.suspend.get_or_insert(false);
    spec.manual_selector.get_or_insert(false);
    if let Some(policy) = spec.pod_failure_policy.as_mut() {
        for rule in &mut policy.rules {
            for pattern in rule.on_pod_conditions.iter_mut().flatten() {
                if pattern.status.as_deref().unwrap_or("").is_empty() {
                    pattern.status = Some("True".to_owned());
                }
            }
        }
    }
    if spec.pod_replacement_policy.is_none() {
        spec.pod_replacement_policy = Some(
            if spec.pod_failure_policy.is_some() {
                "Failed"
            } else {
                "TerminatingOrFailed"
            }
            .to_owned(),
        );
    }
}

/// Unless `manualSelector`, labels the template with the job's name and uid (the legacy
/// and the `batch.kubernetes.io/` keys, keeping any the user set: validation rejects a
/// conflict) and selects on the uid (upstream's `generateSelector`). A Job without labels
/// gets its template's, as the defaults applied again on read give it upstream.
fn generate_selector(job: &mut Value) {
    if job.at("/spec/manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    let name = object::name(job).to_owned();
    let uid = object::uid(job).to_owned();
    let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let template = spec.entry("template").or_insert_with(|| json!({}));
    if !template.get("metadata").is_some_and(Value::is_object) {
        template["metadata"] = json!({});
    }
    if !template["metadata"]
        .get("labels")
        .is_some_and(Value::is_object)
    {
        template["metadata"]["labels"] = json!({});
    }
    if let Some(labels) = template["metadata"]["labels"].as_object_mut() {
        for (key, value) in [
            (LEGACY_JOB_NAME_LABEL, &name),
            (JOB_NAME_LABEL, &name),
            (LEGACY_CONTROLLER_UID_LABEL, &uid),
            (CONTROLLER_UID_LABEL, &uid),
        ] {
            labels
                .entry(key)
                .or_insert_with(|| Value::String(value.clone()));
        }
    }
    let template_labels = template["metadata"]["labels"].clone();
    let selector = spec.entry("selector").or_insert_with(|| json!({}));
    if !selector.is_object() {
        *selector = json!({});
    }
    if !selector.get("matchLabels").is_some_and(Value::is_object) {
        selector["matchLabels"] = json!({});
    }
    if let Some(match_labels) = selector["matchLabels"].as_object_mut() {
        match_labels
            .entry(CONTROLLER_UID_LABEL)
            .or_insert_with(|| Value::String(uid.clone()));
    }
    let labels_empty = job
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .is_none_or(|l| l.is_empty());
    if labels_empty {
        object::set_meta(job, "labels", template_labels);
    }
}

/// upstream's `validateGeneratedSelector`: a generated selector selects exactly the uid and
/// name labels the template carries.
fn validate_generated_selector(job: &Job, spec: &JobSpec, errs: &mut Vec<FieldError>) {
    if spec.manual_selector == Some(true) {
        return;
    }
    let Some(selector) = spec.selector.as_ref() else {
        return;
    };
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    if uid.is_empty() {
        errs.push(FieldError::required("metadata.uid", ""));
    }
    let labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    for (key, want) in [
        (LEGACY_CONTROLLER_UID_LABEL, &uid),
        (LEGACY_JOB_NAME_LABEL, &name),
        (CONTROLLER_UID_LABEL, &uid),
        (JOB_NAME_LABEL, &name),
    ] {
        let path = format!("spec.template.metadata.labels[{key}]");
        match labels.get(key) {
            None => errs.push(FieldError::required(path, want.as_str())),
            Some(v) if v != want => errs.push(FieldError::invalid(
                path,
                serde_json::to_value(&labels).unwrap_or(Value::Null),
                want.as_str(),
            )),
            Some(_) => {}
        }
    }
    let expected: BTreeMap<String, String> = [
        (CONTROLLER_UID_LABEL, &uid),
        (JOB_NAME_LABEL, &name),
        (LEGACY_CONTROLLER_UID_LABEL, &uid),
        (LEGACY_JOB_NAME_LABEL, &name),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.clone()))
    .collect();
    if let Ok(sel) = Selector::from_label_selector(selector)
        && !sel.matches(&expected)
    {
        errs.push(FieldError::invalid(
            "spec.selector",
            serde_json::to_value(selector).unwrap_or(Value::Null),
            "`selector` not auto-generated",
        ));
    }
}

/// The selector is required, valid, and matches the template's labels (the rest of
/// upstream's `ValidateJobSpec`).
fn validate_selector(spec: &JobSpec, errs: &mut Vec<FieldError>) {
    let Some(selector) = spec.selector.as_ref() else {
        errs.push(FieldError::required("spec.selector", ""));
        return;
    };
    match Selector::from_label_selector(selector) {
        Ok(sel) => {
            let labels = spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            if !sel.matches(&labels) {
                errs.push(FieldError::invalid(
                    "spec.template.metadata.labels",
                    serde_json::to_value(&labels).unwrap_or(Value::Null),
                    "`selector` does not match template `labels`",
                ));
            }
        }
        Err(e) => errs.push(FieldError::invalid(
            "spec.selector",
            serde_json::to_value(selector).unwrap_or(Value::Null),
            e.to_string(),
        )),
    }
}

/// upstream's `validateJobSpec`: what a Job and a CronJob's job template share. `path` is
/// the spec's field path (`spec` or `spec.jobTemplate.spec`).
pub fn validate_job_spec(spec: &JobSpec, path: &str, errs: &mut Vec<FieldError>) {
    let field = |f: &str| format!("{path}.{f}");
    nonnegative(errs, &field("parallelism"), spec.parallelism.map(i64::from));
    nonnegative(errs, &field("completions"), spec.completions.map(i64::from));
    nonnegative(
        errs,
        &field("activeDeadlineSeconds"),
        spec.active_deadline_seconds,
    );
    nonnegative(
        errs,
        &field("backoffLimit"),
        spec.backoff_limit.map(i64::from),
    );
    nonnegative(
        errs,
        &field("ttlSecondsAfterFinished"),
        spec.ttl_seconds_after_finished.map(i64::from),
    );
    nonnegative(
        errs,
        &field("backoffLimitPerIndex"),
        spec.backoff_limit_per_index.map(i64::from),
    );
    let completions = spec.completions.map(i64::from);
    let parallelism = spec.parallelism.map(i64::from);
    let max_failed = spec.max_failed_indexes.map(i64::from);
    if let Some(max_failed) = max_failed {
        nonnegative(errs, &field("maxFailedIndexes"), Some(max_failed));
        if spec.backoff_limit_per_index.is_none() {
            errs.push(FieldError::required(
                field("backoffLimitPerIndex"),
                "when maxFailedIndexes is specified",
            ));
        }
    }
    let mode = spec.completion_mode.as_deref();
    match mode {
        None | Some("NonIndexed") => {
            if let Some(limit) = spec.backoff_limit_per_index {
                errs.push(FieldError::invalid(
                    field("backoffLimitPerIndex"),
                    limit,
                    "requires indexed completion mode",
                ));
            }
            if let Some(max_failed) = max_failed {
                errs.push(FieldError::invalid(
                    field("maxFailedIndexes"),
                    max_failed,
                    "requires indexed completion mode",
                ));
            }
        }
        Some("Indexed") => {
            if completions.is_none() {
                errs.push(FieldError::required(
                    field("completions"),
                    "when completion mode is Indexed",
                ));
            }
            if let Some(p) = parallelism.filter(|p| *p > MAX_PARALLELISM_FOR_INDEXED_JOB) {
                errs.push(FieldError::invalid(
                    field("parallelism"),
                    p,
                    format!(
                        "must be less than or equal to {MAX_PARALLELISM_FOR_INDEXED_JOB} when completion mode is Indexed"
                    ),
                ));
            }
            if let (Some(c), Some(m)) = (completions, max_failed)
                && m > c
            {
                errs.push(FieldError::invalid(
                    field("maxFailedIndexes"),
                    m,
                    "must be less than or equal to completions",
                ));
            }
            if let Some(m) = max_failed.filter(|m| *m > MAX_FAILED_INDEXES_FOR_INDEXED_JOB) {
                errs.push(FieldError::invalid(
                    field("maxFailedIndexes"),
                    m,
                    format!("must be less than or equal to {MAX_FAILED_INDEXES_FOR_INDEXED_JOB}"),
                ));
            }
            if completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT)
                && spec.backoff_limit_per_index.is_some()
            {
                let high = format!(
                    "must be less than or equal to {LIMIT_FOR_HIGH_COMPLETIONS} when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
                );
                if max_failed.is_none() {
                    errs.push(FieldError::required(
                        field("maxFailedIndexes"),
                        format!(
                            "must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"
                        ),
                    ));
                }
                if let Some(p) = parallelism.filter(|p| *p > LIMIT_FOR_HIGH_COMPLETIONS) {
                    errs.push(FieldError::invalid(field("parallelism"), p, high.clone()));
                }
                if let Some(m) = max_failed.filter(|m| *m > LIMIT_FOR_HIGH_COMPLETIONS) {
                    errs.push(FieldError::invalid(field("maxFailedIndexes"), m, high));
                }
            }
        }
        Some(other) => errs.push(FieldError::not_supported(
            field("completionMode"),
            other,
            &["NonIndexed", "Indexed"],
        )),
    }
    if let Some(policy) = spec.pod_failure_policy.as_ref() {
        let rules_path = field("podFailurePolicy.rules");
        if policy.rules.len() > MAX_POD_FAILURE_POLICY_RULES {
            errs.push(too_many(
                &rules_path,
                policy.rules.len(),
                MAX_POD_FAILURE_POLICY_RULES,
            ));
        }
        let containers: Vec<&str> = spec
            .template
            .spec
            .iter()
            .flat_map(|s| {
                s.containers
                    .iter()
                    .chain(s.init_containers.iter().flatten())
            })
            .map(|c| c.name.as_str())
            .collect();
        for (i, rule) in policy.rules.iter().enumerate() {
            validate_pod_failure_policy_rule(
                spec,
                rule,
                &format!("{rules_path}[{i}]"),
                &containers,
                errs,
            );
        }
    }
    if let Some(policy) = spec.pod_replacement_policy.as_deref() {
        if spec.pod_failure_policy.is_some() {
            if policy != "Failed" {
                errs.push(FieldError::not_supported(
                    field("podReplacementPolicy"),
                    policy,
                    &["Failed"],
                ));
            }
        } else if policy != "Failed" && policy != "TerminatingOrFailed" {
            errs.push(FieldError::not_supported(
                field("podReplacementPolicy"),
                policy,
                &["Failed", "TerminatingOrFailed"],
            ));
        }
    }
    if let Some(policy) = spec.success_policy.as_ref() {
        if mode != Some("Indexed") {
            errs.push(FieldError::invalid(
                field("successPolicy"),
                json_of(&Some(policy)),
                "requires indexed completion mode",
            ));
        } else {
            validate_success_policy(
                policy,
                completions.unwrap_or(0),
                &field("successPolicy"),
                errs,
            );
        }
    }
    if let Some(managed_by) = spec.managed_by.as_deref() {
        let managed_path = field("managedBy");
        if !is_domain_prefixed_path(managed_by) {
            errs.push(FieldError::invalid(
                managed_path.clone(),
                managed_by,
                "must be a domain-prefixed path (such as \"acme.io/foo\")",
            ));
        }
        if managed_by.len() > MAX_MANAGED_BY_LENGTH {
            errs.push(FieldError::too_long(managed_path, MAX_MANAGED_BY_LENGTH));
        }
    }
    let template_spec_path = field("template.spec");
    match spec.template.spec.as_ref() {
        Some(pod_spec) => {
            validate_pod_spec(pod_spec, &template_spec_path, errs);
            let restart_path = format!("{template_spec_path}.restartPolicy");
            match pod_spec.restart_policy.as_deref().unwrap_or("") {
                "" | "Always" => errs.push(FieldError::required(
                    restart_path,
                    "valid values: \"OnFailure\", \"Never\"",
                )),
                "OnFailure" if spec.pod_failure_policy.is_some() => {
                    errs.push(FieldError::invalid(
                        restart_path,
                        "OnFailure",
                        "only \"Never\" is supported when podFailurePolicy is specified",
                    ));
                }
                "OnFailure" | "Never" => {}
                other => errs.push(FieldError::not_supported(
                    restart_path,
                    other,
                    &["OnFailure", "Never"],
                )),
            }
        }
        None => errs.push(FieldError::required(template_spec_path, "")),
    }
}

/// upstream's `validatePodFailurePolicyRule`.
fn validate_pod_failure_policy_rule(
    spec: &JobSpec,
    rule: &PodFailurePolicyRule,
    path: &str,
    containers: &[&str],
    errs: &mut Vec<FieldError>,
) {
    const ACTIONS: [&str; 4] = ["Count", "FailIndex", "FailJob", "Ignore"];
    let action_path = format!("{path}.action");
    match rule.action.as_str() {
        "" => errs.push(FieldError::required(
            action_path,
            format!("valid values: {}", quoted_list(&ACTIONS)),
        )),
        "FailIndex" => {
            if spec.backoff_limit_per_index.is_none() {
                errs.push(FieldError::invalid(
                    action_path,
                    "FailIndex",
                    "requires the backoffLimitPerIndex to be set",
                ));
            }
        }
        a if ACTIONS.contains(&a) => {}
        other => errs.push(FieldError::not_supported(action_path, other, &ACTIONS)),
    }
    if let Some(on_exit) = rule.on_exit_codes.as_ref() {
        let exit_path = format!("{path}.onExitCodes");
        const OPERATORS: [&str; 2] = ["In", "NotIn"];
        match on_exit.operator.as_str() {
            "" => errs.push(FieldError::required(
                format!("{exit_path}.operator"),
                format!("valid values: {}", quoted_list(&OPERATORS)),
            )),
            o if OPERATORS.contains(&o) => {}
            other => errs.push(FieldError::not_supported(
                format!("{exit_path}.operator"),
                other,
                &OPERATORS,
            )),
        }
        if let Some(name) = on_exit.container_name.as_deref()
            && !containers.contains(&name)
        {
            errs.push(FieldError::invalid(
                format!("{exit_path}.containerName"),
                name,
                "must be one of the container or initContainer names in the pod template",
            ));
        }
        let values_path = format!("{exit_path}.values");
        if on_exit.values.is_empty() {
            errs.push(FieldError::invalid(
                values_path.clone(),
                json!([]),
                "at least one value is required",
            ));
        } else if on_exit.values.len() > MAX_ON_EXIT_CODES_VALUES {
            errs.push(too_many(
                &values_path,
                on_exit.values.len(),
                MAX_ON_EXIT_CODES_VALUES,
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (j, value) in on_exit.values.iter().enumerate() {
            let value_path = format!("{values_path}[{j}]");
            if on_exit.operator == "In" && *value == 0 {
                errs.push(FieldError::invalid(
                    value_path.clone(),
                    0,
                    "must not be 0 for the In operator",
                ));
            }
            if !seen.insert(*value) {
                errs.push(FieldError::duplicate(value_path, *value));
            }
        }
        if on_exit.values.windows(2).any(|w| w[0] > w[1]) {
            errs.push(FieldError::invalid(
                values_path,
                json!(on_exit.values),
                "must be ordered",
            ));
        }
    }
    let patterns = rule.on_pod_conditions.as_deref().unwrap_or(&[]);
    let patterns_path = format!("{path}.onPodConditions");
    if patterns.len() > MAX_ON_POD_CONDITIONS_PATTERNS {
        errs.push(too_many(
            &patterns_path,
            patterns.len(),
            MAX_ON_POD_CONDITIONS_PATTERNS,
        ));
    }
    const STATUSES: [&str; 3] = ["False", "True", "Unknown"];
    for (j, pattern) in patterns.iter().enumerate() {
        let pattern_path = format!("{patterns_path}[{j}]");
        if let Err(e) = validate_label_key(&pattern.type_) {
            errs.push(FieldError::invalid(
                format!("{pattern_path}.type"),
                pattern.type_.as_str(),
                e.to_string(),
            ));
        }
        match pattern.status.as_deref().unwrap_or("") {
            "" => errs.push(FieldError::required(
                format!("{pattern_path}.status"),
                format!("valid values: {}", quoted_list(&STATUSES)),
            )),
            s if STATUSES.contains(&s) => {}
            other => errs.push(FieldError::not_supported(
                format!("{pattern_path}.status"),
                other,
                &STATUSES,
            )),
        }
    }
    match (rule.on_exit_codes.is_some(), !patterns.is_empty()) {
        (true, true) => errs.push(FieldError::invalid_omitting_value(
            path,
            "specifying both OnExitCodes and OnPodConditions is not supported",
        )),
        (false, false) => errs.push(FieldError::invalid_omitting_value(
            path,
            "specifying one of OnExitCodes and OnPodConditions is required",
        )),
        _ => {}
    }
}

/// upstream's `validateSuccessPolicy` (an Indexed Job's success policy).
fn validate_success_policy(
    policy: &SuccessPolicy,
    completions: i64,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let rules_path = format!("{path}.rules");
    if policy.rules.is_empty() {
        errs.push(FieldError::required(
            rules_path.clone(),
            "at least one rules must be specified when the successPolicy is specified",
        ));
    }
    if policy.rules.len() > MAX_SUCCESS_POLICY_RULES {
        errs.push(too_many(
            &rules_path,
            policy.rules.len(),
            MAX_SUCCESS_POLICY_RULES,
        ));
    }
    for (i, rule) in policy.rules.iter().enumerate() {
        let rule_path = format!("{rules_path}[{i}]");
        if rule.succeeded_count.is_none() && rule.succeeded_indexes.is_none() {
            errs.push(FieldError::required(
                rule_path.clone(),
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
        let mut total = 0;
        if let Some(indexes) = rule.succeeded_indexes.as_deref() {
            let indexes_path = format!("{rule_path}.succeededIndexes");
            if indexes.len() > MAX_SUCCEEDED_INDEXES_LENGTH {
                errs.push(FieldError::too_long(
                    indexes_path.clone(),
                    MAX_SUCCEEDED_INDEXES_LENGTH,
                ));
            }
            match count_indexes(indexes, completions) {
                Ok(n) => total = n,
                Err(why) => errs.push(FieldError::invalid(
                    indexes_path,
                    indexes,
                    format!("error parsing succeededIndexes: {why}"),
                )),
            }
        }
        if let Some(count) = rule.succeeded_count.map(i64::from) {
            let count_path = format!("{rule_path}.succeededCount");
            nonnegative(errs, &count_path, Some(count));
            if count > completions {
                errs.push(FieldError::invalid(
                    count_path.clone(),
                    count,
                    format!(
                        "must be less than or equal to {completions} (the number of specified completions)"
                    ),
                ));
            }
            if rule.succeeded_indexes.is_some() && count > total {
                errs.push(FieldError::invalid(
                    count_path,
                    count,
                    format!(
                        "must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)"
                    ),
                ));
            }
        }
    }
}

/// The number of indexes in an interval list such as `0,2-4` (each below `completions`,
/// strictly increasing), as upstream's `validateIndexesFormat`.
fn count_indexes(indexes: &str, completions: i64) -> Result<i64, String> {
    if indexes.is_empty() {
        return Ok(0);
    }
    let mut last: Option<i64> = None;
    let mut total = 0;
    for interval in indexes.split(',') {
        let limits: Vec<&str> = interval.split('-').collect();
        if limits.len() > 2 {
            return Err(format!(
                "the fragment {interval:?} violates the requirement that an index interval can have at most two parts separated by '-'"
            ));
        }
        let mut bounds = Vec::with_capacity(2);
        for limit in &limits {
            let x: i64 = limit
                .parse()
                .map_err(|_| format!("cannot convert string to integer for index: {limit:?}"))?;
            if x >= completions {
                return Err(format!("too large index: {limit:?}"));
            }
            if let Some(prev) = last
                && prev >= x
            {
                return Err(format!(
                    "non-increasing order, previous: {prev}, current: {x}"
                ));
            }
            last = Some(x);
            bounds.push(x);
        }
        total += match bounds.as_slice() {
            [a, b] => b - a + 1,
            _ => 1,
        };
    }
    Ok(total)
}

/// Completions may change only on an Indexed Job, and only together with parallelism
/// (upstream's `validateCompletions` with elastic Indexed Jobs, GA).
fn validate_completions_update(new: &JobSpec, old: &JobSpec, errs: &mut Vec<FieldError>) {
    if new.completions == old.completions {
        return;
    }
    if new.completion_mode.as_deref() != Some("Indexed") {
        immutable(
            errs,
            "completions",
            &json_of(&new.completions),
            &json_of(&old.completions),
        );
        return;
    }
    if let Some(completions) = new.completions
        && Some(completions) != new.parallelism
    {
        errs.push(FieldError::invalid(
            "spec.completions",
            completions,
            "can only be modified in tandem with spec.parallelism",
        ));
    }
}

/// What a suspended, never started Job's template may change: node affinity, node
/// selector, tolerations, labels, annotations and scheduling gates (copied from the new
/// template into the old before comparing, as upstream's `validatePodTemplateUpdate`).
fn allow_scheduling_changes(new: &Value, old: &mut Value) {
    for pointer in [
        "/spec/nodeSelector",
        "/spec/tolerations",
        "/spec/schedulingGates",
        "/metadata/labels",
        "/metadata/annotations",
        "/spec/affinity/nodeAffinity",
    ] {
        let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
        let value = new.at(pointer).cloned();
        let target = if parent.is_empty() {
            Some(&mut *old)
        } else {
            ensure_object(old, parent)
        };
        if let Some(target) = target.and_then(Value::as_object_mut) {
            match value {
                Some(v) => {
                    target.insert(key.to_owned(), v);
                }
                None => {
                    target.remove(key);
                }
            }
        }
    }
    // An affinity left empty by moving node affinity compares as none.
    if old
        .at("/spec/affinity")
        .and_then(Value::as_object)
        .is_some_and(|a| a.is_empty())
        && new.at("/spec/affinity").is_none()
        && let Some(spec) = old.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.remove("affinity");
    }
}

/// The object at `pointer` in `v`, created (as empty objects) along the way.
fn ensure_object<'a>(v: &'a mut Value, pointer: &str) -> Option<&'a mut Value> {
    let mut current = v;
    for key in pointer.split('/').filter(|k| !k.is_empty()) {
        let map = current.as_object_mut()?;
        current = map.entry(key).or_insert_with(|| json!({}));
    }
    Some(current)
}

fn spec_of(obj: &Value) -> Option<JobSpec> {
    obj.get("spec").and_then(typed::<JobSpec>)
}

fn json_of<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// An `Invalid ...: field is immutable` error under `spec.` when `new` differs from `old`.
fn immutable(errs: &mut Vec<FieldError>, field: &str, new: &Value, old: &Value) {
    if new != old {
        errs.push(FieldError::invalid(
            format!("spec.{field}"),
            new.clone(),
            "field is immutable",
        ));
    }
}

/// `ValidateNonnegativeField`.
pub(crate) fn nonnegative(errs: &mut Vec<FieldError>, path: &str, value: Option<i64>) {
    if let Some(v) = value
        && v < 0
    {
        errs.push(FieldError::invalid(
            path,
            v,
            "must be greater than or equal to 0",
        ));
    }
}

/// A `Too many` error (upstream's `field.TooMany`).
fn too_many(path: &str, actual: usize, max: usize) -> FieldError {
    FieldError::too_many(path, actual, max)
}

/// `["a", "b"]`, as Go's `%q` prints a string slice.
fn quoted_list(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// A domain-prefixed path (`acme.io/foo`): a DNS subdomain, `/`, and a non-empty path
/// (upstream's `IsDomainPrefixedPath`).
fn is_domain_prefixed_path(s: &str) -> bool {
    let Some((host, path)) = s.split_once('/') else {
        return false;
    };
    kcm_machinery::labels::is_dns1123_subdomain(host)
        && !path.is_empty()
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@%/".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::strategy::Strategy;

    /// A decoded Job as the registry holds it right before validation on create.
    fn created(job: Value) -> Value {
        let mut obj = decode_job(job).expect("decodes");
        object::set_meta(&mut obj, "uid", "u-1");
        JobStrategy.prepare_for_create(&mut obj);
        obj
    }

    fn job(spec: Value) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "pi", "namespace": "default"}, "spec": spec})
    }

    fn template(restart: &str) -> Value {
        json!({"spec": {"restartPolicy": restart,
            "containers": [{"name": "pi", "image": "perl:5.34"}]}})
    }

    fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaults_and_generated_selector_match_a_real_cluster() {
        let obj = created(job(json!({"template": template("Never")})));
        let spec = &obj["spec"];
        assert_eq!(spec["backoffLimit"], 6);
        assert_eq!(spec["completions"], 1);
        assert_eq!(spec["parallelism"], 1);
        assert_eq!(spec["completionMode"], "NonIndexed");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["manualSelector"], false);
        assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(
            spec["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        let labels = json!({
            "batch.kubernetes.io/controller-uid": "u-1",
            "batch.kubernetes.io/job-name": "pi",
            "controller-uid": "u-1",
            "job-name": "pi"
        });
        assert_eq!(spec["template"]["metadata"]["labels"], labels);
        assert_eq!(obj["metadata"]["labels"], labels);
        assert!(
            JobStrategy.validate(&obj).is_empty(),
            "{:?}",
            JobStrategy.validate(&obj)
        );
    }

    #[test]
    fn parallelism_alone_leaves_completions_unset_and_per_index_backoff_raises_the_limit() {
        let obj = created(job(
            json!({"parallelism": 3, "template": template("Never")}),
        ));
        assert_eq!(obj["spec"].get("completions"), None);
        let obj = created(job(json!({"completionMode": "Indexed", "completions": 3,
            "backoffLimitPerIndex": 1, "template": template("Never")})));
        assert_eq!(obj["spec"]["backoffLimit"], i32::MAX);
        assert!(JobStrategy.validate(&obj).is_empty());
        let obj = created(job(
            json!({"podFailurePolicy": {"rules": [{"action": "Ignore",
            "onPodConditions": [{"type": "DisruptionTarget", "status": ""}]}]},
            "template": template("Never")}),
        ));
        assert_eq!(obj["spec"]["podReplacementPolicy"], "Failed");
        assert_eq!(
            obj["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
            "True"
        );
    }

    #[test]
    fn validation_messages_are_upstreams() {
        struct Case {
            name: &'static str,
            spec: Value,
            want: Vec<&'static str>,
        }
        let cases = [
            Case {
                name: "restart policy always",
                spec: json!({"template": template("Always")}),
                want: vec![
                    "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
                ],
            },
            Case {
                name: "negative backoff",
                spec: json!({"backoffLimit": -1, "template": template("Never")}),
                want: vec![
                    "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
                ],
            },
            Case {
                name: "per-index backoff on a non-indexed job",
                spec: json!({"backoffLimitPerIndex": 1, "template": template("Never")}),
                want: vec![
                    "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode",
                ],
            },
            Case {
                name: "max failed indexes without per-index backoff",
                spec: json!({"completionMode": "Indexed", "completions": 4, "maxFailedIndexes": 1,
                    "template": template("Never")}),
                want: vec![
                    "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
                ],
            },
            Case {
                name: "max failed indexes above completions",
                spec: json!({"completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": 1,
                    "maxFailedIndexes": 3, "template": template("Never")}),
                want: vec![
                    "spec.maxFailedIndexes: Invalid value: 3: must be less than or equal to completions",
                ],
            },
            Case {
                name: "indexed without completions",
                spec: json!({"completionMode": "Indexed", "parallelism": 2, "template": template("Never")}),
                want: vec!["spec.completions: Required value: when completion mode is Indexed"],
            },
            Case {
                name: "unknown completion mode",
                spec: json!({"completionMode": "Sometimes", "template": template("Never")}),
                want: vec![
                    "spec.completionMode: Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\"",
                ],
            },
            Case {
                name: "fail index without per-index backoff",
                spec: json!({"podFailurePolicy": {"rules": [{"action": "FailIndex",
                    "onExitCodes": {"operator": "In", "values": [1]}}]}, "template": template("Never")}),
                want: vec![
                    "spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set",
                ],
            },
            Case {
                name: "exit codes unordered and zero with In",
                spec: json!({"podFailurePolicy": {"rules": [{"action": "FailJob",
                    "onExitCodes": {"operator": "In", "values": [3, 0]}}]}, "template": template("Never")}),
                want: vec![
                    "spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Invalid value: 0: must not be 0 for the In operator",
                    "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [3,0]: must be ordered",
                ],
            },
            Case {
                name: "rule with neither requirement",
                spec: json!({"podFailurePolicy": {"rules": [{"action": "Ignore"}]}, "template": template("Never")}),
                want: vec![
                    "spec.podFailurePolicy.rules[0]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
                ],
            },
            Case {
                name: "on failure with a pod failure policy",
                spec: json!({"podFailurePolicy": {"rules": [{"action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
                    "template": template("OnFailure")}),
                want: vec![
                    "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified",
                ],
            },
            Case {
                name: "success policy on a non-indexed job",
                spec: json!({"successPolicy": {"rules": [{"succeededCount": 1}]}, "template": template("Never")}),
                want: vec![
                    "spec.successPolicy: Invalid value: {\"rules\":[{\"succeededCount\":1}]}: requires indexed completion mode",
                ],
            },
            Case {
                name: "success count above completions",
                spec: json!({"completionMode": "Indexed", "completions": 2,
                    "successPolicy": {"rules": [{"succeededIndexes": "0-1", "succeededCount": 3}]},
                    "template": template("Never")}),
                want: vec![
                    "spec.successPolicy.rules[0].succeededCount: Invalid value: 3: must be less than or equal to 2 (the number of specified completions)",
                    "spec.successPolicy.rules[0].succeededCount: Invalid value: 3: must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)",
                ],
            },
            Case {
                name: "managedBy not a domain path",
                spec: json!({"managedBy": "my controller", "template": template("Never")}),
                want: vec![
                    "spec.managedBy: Invalid value: \"my controller\": must be a domain-prefixed path (such as \"acme.io/foo\")",
                ],
            },
        ];
        for case in cases {
            let obj = created(job(case.spec));
            assert_eq!(
                fields(&JobStrategy.validate(&obj)),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn generated_labels_the_user_contradicts_are_rejected() {
        let obj = created(job(
            json!({"template": {"metadata": {"labels": {"job-name": "other"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}),
        ));
        let errs = fields(&JobStrategy.validate(&obj));
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.template.metadata.labels[job-name]: Invalid value")),
            "{errs:?}"
        );
    }

    #[test]
    fn manual_selector_keeps_the_users_selector() {
        let obj = created(job(json!({"manualSelector": true,
            "selector": {"matchLabels": {"app": "batch"}},
            "template": {"metadata": {"labels": {"app": "batch"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}})));
        assert_eq!(
            obj["spec"]["selector"],
            json!({"matchLabels": {"app": "batch"}})
        );
        assert!(JobStrategy.validate(&obj).is_empty());
        let no_selector = created(job(
            json!({"manualSelector": true, "template": template("Never")}),
        ));
        assert_eq!(
            fields(&JobStrategy.validate(&no_selector)),
            ["spec.selector: Required value"]
        );
    }

    #[test]
    fn indexed_pod_hostnames_must_be_labels() {
        let mut spec =
            json!({"completionMode": "Indexed", "completions": 10, "template": template("Never")});
        spec["template"]["spec"]["restartPolicy"] = json!("Never");
        let mut long = job(spec);
        long["metadata"]["name"] = json!("a".repeat(62));
        let errs = fields(&JobStrategy.validate(&created(long)));
        assert!(
            errs.iter()
                .any(|e| e.contains("will not able to create pod with invalid DNS label")),
            "{errs:?}"
        );
    }

    #[test]
    fn updates_keep_the_template_except_scheduling_of_a_suspended_job() {
        let old = created(job(json!({"suspend": true, "template": template("Never")})));
        let mut rescheduled = old.clone();
        rescheduled["spec"]["template"]["spec"]["nodeSelector"] = json!({"disk": "ssd"});
        rescheduled["spec"]["template"]["metadata"]["annotations"] = json!({"a": "b"});
        assert!(JobStrategy.validate_update(&rescheduled, &old).is_empty());

        let mut started = old.clone();
        started["status"] = json!({"startTime": "2024-05-01T00:00:00Z"});
        let errs = fields(&JobStrategy.validate_update(&rescheduled, &started));
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.template: Invalid value")
                    && e.ends_with("field is immutable")),
            "{errs:?}"
        );

        let mut image = old.clone();
        image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:5.36");
        assert!(!JobStrategy.validate_update(&image, &old).is_empty());

        let mut mode = old.clone();
        mode["spec"]["completionMode"] = json!("Indexed");
        let errs = fields(&JobStrategy.validate_update(&mode, &old));
        assert!(
            errs.contains(
                &"spec.completionMode: Invalid value: \"Indexed\": field is immutable".to_owned()
            ),
            "{errs:?}"
        );
    }

    #[test]
    fn indexed_completions_scale_with_parallelism_only() {
        let old = created(job(
            json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2,
            "template": template("Never")}),
        ));
        let mut both = old.clone();
        both["spec"]["completions"] = json!(4);
        both["spec"]["parallelism"] = json!(4);
        assert!(JobStrategy.validate_update(&both, &old).is_empty());
        let mut alone = old.clone();
        alone["spec"]["completions"] = json!(4);
        assert_eq!(
            fields(&JobStrategy.validate_update(&alone, &old)),
            [
                "spec.completions: Invalid value: 4: can only be modified in tandem with spec.parallelism"
            ]
        );
        let plain = created(job(json!({"template": template("Never")})));
        let mut more = plain.clone();
        more["spec"]["completions"] = json!(3);
        assert_eq!(
            fields(&JobStrategy.validate_update(&more, &plain)),
            ["spec.completions: Invalid value: 3: field is immutable"]
        );
    }

    #[test]
    fn index_lists_count_and_reject_disorder() {
        assert_eq!(count_indexes("0,2-4", 5), Ok(4));
        assert_eq!(count_indexes("", 5), Ok(0));
        assert!(count_indexes("3,1", 5).is_err_and(|e| e.contains("non-increasing order")));
        assert!(count_indexes("1-2-3", 5).is_err());
        assert_eq!(
            count_indexes("5", 5),
            Err("too large index: \"5\"".to_owned())
        );
    }
}
