//! admissionregistration.k8s.io/v1 validating and mutating webhook configurations: upstream's defaults (`SetDefaults_ValidatingWebhook`, `..._MutatingWebhook`, `_Rule`, `_ServiceReference`) and validation (`ValidateValidatingWebhookConfiguration`). The admission chain's webhook plugins call them.

use std::collections::HashSet;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use kcm_machinery::labels;

use crate::admission::match_conditions;
use crate::registry::strategy::{Strategy, typed_roundtrip};
use crate::resources::{go_values, label_selector};
use crate::validation::{FieldError, NameRule};

/// The AdmissionReview versions kube-apiserver speaks.
const ACCEPTED_REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// Fills what Go reads as zero values where the typed form requires a field (a webhook's
/// `name`, `clientConfig`, `sideEffects`, `admissionReviewVersions`), so that validation
/// answers 422 with upstream's messages instead of a decode error.
fn fill_required(obj: &mut Value) {
    let hooks = obj.get_mut("webhooks").and_then(Value::as_array_mut);
    for hook in hooks.into_iter().flatten().filter_map(Value::as_object_mut) {
        hook.entry("name").or_insert_with(|| json!(""));
        hook.entry("clientConfig").or_insert_with(|| json!({}));
        hook.entry("sideEffects").or_insert_with(|| json!(""));
        hook.entry("admissionReviewVersions")
            .or_insert_with(|| json!([]));
    }
}

fn default_rules(rules: Option<&mut Vec<RuleWithOperations>>) {
    for rule in rules.into_iter().flatten() {
        rule.scope.get_or_insert_with(|| "*".to_owned());
    }
}

fn default_service(service: Option<&mut ServiceReference>) {
    if let Some(service) = service {
        service.port.get_or_insert(443);
    }
}

/// Decodes a ValidatingWebhookConfiguration with the scheme defaults: `failurePolicy: Fail`,
/// `matchPolicy: Equivalent`, empty namespace and object selectors, `timeoutSeconds: 10`,
/// rules' `scope: "*"`, service port 443.
pub fn decode_validating(mut obj: Value) -> Result<Value, String> {
    fill_required(&mut obj);
    typed_roundtrip::<ValidatingWebhookConfiguration>(obj, |config| {
        for hook in config.webhooks.iter_mut().flatten() {
            hook.failure_policy.get_or_insert_with(|| "Fail".to_owned());
            hook.match_policy
                .get_or_insert_with(|| "Equivalent".to_owned());
            hook.namespace_selector
                .get_or_insert_with(LabelSelector::default);
            hook.object_selector
                .get_or_insert_with(LabelSelector::default);
            hook.timeout_seconds.get_or_insert(10);
            default_rules(hook.rules.as_mut());
            default_service(hook.client_config.service.as_mut());
        }
    })
}

/// Decodes a MutatingWebhookConfiguration with the validating defaults plus
/// `reinvocationPolicy: Never`.
pub fn decode_mutating(mut obj: Value) -> Result<Value, String> {
    fill_required(&mut obj);
    typed_roundtrip::<MutatingWebhookConfiguration>(obj, |config| {
        for hook in config.webhooks.iter_mut().flatten() {
            hook.failure_policy.get_or_insert_with(|| "Fail".to_owned());
            hook.match_policy
                .get_or_insert_with(|| "Equivalent".to_owned());
            hook.namespace_selector
                .get_or_insert_with(LabelSelector::default);
            hook.object_selector
                .get_or_insert_with(LabelSelector::default);
            hook.timeout_seconds.get_or_insert(10);
            hook.reinvocation_policy
                .get_or_insert_with(|| "Never".to_owned());
            default_rules(hook.rules.as_mut());
            default_service(hook.client_config.service.as_mut());
        }
    })
}

/// The strategy of both webhook configuration kinds; `mutating` adds the reinvocation policy.
#[derive(Debug)]
pub struct WebhookConfigurationStrategy {
    /// Whether the configuration is a MutatingWebhookConfiguration.
    pub mutating: bool,
}

impl Strategy for WebhookConfigurationStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_configuration(obj, self.mutating, true, true)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        // Upstream tolerates on update what the stored object already got away with: side
        // effects other than None/NoneOnDryRun are only refused if every stored webhook
        // declared none.
        let strict = hooks(old).iter().all(|h| {
            matches!(
                h.get("sideEffects").and_then(Value::as_str),
                Some("None" | "NoneOnDryRun")
            )
        });
        // Nor are match conditions compiled again unless they changed
        // (`ignoreValidatingWebhookMatchConditions`).
        let (new_hooks, old_hooks) = (hooks(new), hooks(old));
        let conditions_changed = new_hooks.len() != old_hooks.len()
            || new_hooks
                .iter()
                .zip(old_hooks)
                .any(|(n, o)| n.get("matchConditions") != o.get("matchConditions"));
        validate_configuration(new, self.mutating, strict, conditions_changed)
    }
}

fn hooks(obj: &Value) -> &[Value] {
    obj.get("webhooks")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn validate_configuration(
    obj: &Value,
    mutating: bool,
    no_side_effects: bool,
    check_match_conditions: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = HashSet::new();
    for (i, hook) in hooks(obj).iter().enumerate() {
        let path = format!("webhooks[{i}]");
        validate_webhook(
            hook,
            mutating,
            no_side_effects,
            check_match_conditions,
            &path,
            &mut errs,
        );
        validate_review_versions(hook, &format!("{path}.admissionReviewVersions"), &mut errs);
        let name = str_of(hook, "name").unwrap_or("");
        if !name.is_empty() && !names.insert(name) {
            errs.push(FieldError::duplicate(format!("{path}.name"), name));
        }
    }
    errs
}

/// Upstream's `IsFullyQualifiedName`: a DNS subdomain of at least three labels.
pub fn fully_qualified_name_errors(field: &str, name: &str) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(field, "")];
    }
    let msgs = NameRule::Subdomain.check(name);
    if !msgs.is_empty() {
        return vec![FieldError::invalid(field, name, msgs.join(","))];
    }
    if name.split('.').count() < 3 {
        return vec![FieldError::invalid(
            field,
            name,
            "should be a domain with at least three segments separated by dots",
        )];
    }
    Vec::new()
}

fn validate_webhook(
    hook: &Value,
    mutating: bool,
    no_side_effects: bool,
    check_match_conditions: bool,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    errs.extend(fully_qualified_name_errors(
        &format!("{path}.name"),
        str_of(hook, "name").unwrap_or(""),
    ));
    for (i, rule) in list(hook, "rules").iter().enumerate() {
        validate_rule_with_operations(rule, &format!("{path}.rules[{i}]"), errs);
    }
    if let Some(policy) = str_of(hook, "failurePolicy")
        && policy != "Fail"
        && policy != "Ignore"
    {
        errs.push(FieldError::not_supported(
            format!("{path}.failurePolicy"),
            policy,
            &["Fail", "Ignore"],
        ));
    }
    if let Some(policy) = str_of(hook, "matchPolicy")
        && policy != "Equivalent"
        && policy != "Exact"
    {
        errs.push(FieldError::not_supported(
            format!("{path}.matchPolicy"),
            policy,
            &["Equivalent", "Exact"],
        ));
    }
    let allowed: &[&str] = if no_side_effects {
        &["None", "NoneOnDryRun"]
    } else {
        &["None", "NoneOnDryRun", "Some", "Unknown"]
    };
    match str_of(hook, "sideEffects").unwrap_or("") {
        "" => errs.push(FieldError::required(
            format!("{path}.sideEffects"),
            format!("must specify one of {}", allowed.join(", ")),
        )),
        effects if !allowed.contains(&effects) => {
            errs.push(FieldError::not_supported(
                format!("{path}.sideEffects"),
                effects,
                allowed,
            ));
        }
        _ => {}
    }
    if let Some(timeout) = hook.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&timeout)
    {
        errs.push(FieldError::invalid(
            format!("{path}.timeoutSeconds"),
            timeout,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    for selector in ["namespaceSelector", "objectSelector"] {
        errs.extend(label_selector::validate(
            hook.get(selector),
            &format!("{path}.{selector}"),
        ));
    }
    if mutating
        && let Some(policy) = str_of(hook, "reinvocationPolicy")
        && policy != "IfNeeded"
        && policy != "Never"
    {
        errs.push(FieldError::not_supported(
            format!("{path}.reinvocationPolicy"),
            policy,
            &["IfNeeded", "Never"],
        ));
    }
    validate_client_config(
        hook.get("clientConfig"),
        &format!("{path}.clientConfig"),
        errs,
    );
    if check_match_conditions {
        validate_match_conditions(
            list(hook, "matchConditions"),
            &format!("{path}.matchConditions"),
            errs,
        );
    }
}

/// Most match conditions a webhook may have.
const MAX_MATCH_CONDITIONS: usize = 64;

/// Upstream's `validateMatchConditions`: at most 64, each with a qualified, unique name and
/// an expression that compiles to a bool.
fn validate_match_conditions(conditions: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errs.push(FieldError::too_many(
            path,
            conditions.len(),
            MAX_MATCH_CONDITIONS,
        ));
    }
    let mut names = HashSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let cpath = format!("{path}[{i}]");
        let expression = str_of(condition, "expression").unwrap_or("").trim();
        if expression.is_empty() {
            errs.push(FieldError::required(format!("{cpath}.expression"), ""));
        } else if let Some(detail) = match_conditions::expression_error(expression) {
            errs.push(FieldError::invalid(
                format!("{cpath}.expression"),
                expression,
                detail,
            ));
        }
        let name = str_of(condition, "name").unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{cpath}.name"), ""));
        } else {
            if let Err(labels::Error::InvalidKey { reason, .. }) = labels::validate_label_key(name)
            {
                errs.push(FieldError::invalid(format!("{cpath}.name"), name, reason));
            }
            if !names.insert(name) {
                errs.push(FieldError::duplicate(format!("{cpath}.name"), name));
            }
        }
    }
}

/// Upstream's `validateAdmissionReviewVersions`.
fn validate_review_versions(hook: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let versions = list(hook, "admissionReviewVersions");
    if versions.is_empty() {
        errs.push(FieldError::required(
            path,
            format!(
                "must specify one of {}",
                ACCEPTED_REVIEW_VERSIONS.join(", ")
            ),
        ));
        return;
    }
    let mut seen = HashSet::new();
    for (i, v) in versions.iter().enumerate() {
        let v = v.as_str().unwrap_or("");
        if !seen.insert(v) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                v,
                "duplicate version",
            ));
            continue;
        }
        for msg in NameRule::Dns1035Label.check(v) {
            errs.push(FieldError::invalid(format!("{path}[{i}]"), v, msg));
        }
    }
    if !versions
        .iter()
        .any(|v| ACCEPTED_REVIEW_VERSIONS.contains(&v.as_str().unwrap_or("")))
    {
        errs.push(go_values::invalid(
            path,
            go_values::string_slice("[]string", hook.get("admissionReviewVersions")),
            format!(
                "must include at least one of {}",
                ACCEPTED_REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
}

/// Upstream's `validateRuleWithOperations` and `validateRule`.
pub fn validate_rule_with_operations(rule: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let operations = list(rule, "operations");
    if operations.is_empty() {
        errs.push(FieldError::required(format!("{path}.operations"), ""));
    }
    if operations.len() > 1 && operations.iter().any(|o| o == "*") {
        errs.push(go_values::invalid(
            format!("{path}.operations"),
            go_values::string_slice(
                "[]admissionregistration.OperationType",
                rule.get("operations"),
            ),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, op) in operations.iter().enumerate() {
        let op = op.as_str().unwrap_or("");
        if !["*", "CONNECT", "CREATE", "DELETE", "UPDATE"].contains(&op) {
            errs.push(FieldError::not_supported(
                format!("{path}.operations[{i}]"),
                op,
                &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
            ));
        }
    }
    validate_rule(rule, path, errs);
}

/// Upstream's `validateRule` (subresources allowed).
fn validate_rule(rule: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (field, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let items = list(rule, field);
        if items.is_empty() {
            errs.push(FieldError::required(format!("{path}.{field}"), ""));
        }
        if items.len() > 1 && items.iter().any(|g| g == "*") {
            errs.push(go_values::invalid(
                format!("{path}.{field}"),
                go_values::string_slice("[]string", rule.get(field)),
                format!("if '*' is present, must not specify other {what}"),
            ));
        }
    }
    for (i, v) in list(rule, "apiVersions").iter().enumerate() {
        if v.as_str().unwrap_or("").is_empty() {
            errs.push(FieldError::required(format!("{path}.apiVersions[{i}]"), ""));
        }
    }
    let resources = list(rule, "resources");
    if resources.is_empty() {
        errs.push(FieldError::required(format!("{path}.resources"), ""));
    }
    for (i, r) in resources.iter().enumerate() {
        if r.as_str().unwrap_or("").is_empty() {
            errs.push(FieldError::required(format!("{path}.resources[{i}]"), ""));
        }
    }
    if resources.len() > 1 && resources.iter().any(|r| r == "*/*") {
        errs.push(go_values::invalid(
            format!("{path}.resources"),
            go_values::string_slice("[]string", rule.get("resources")),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if let Some(scope) = str_of(rule, "scope")
        && !["*", "Cluster", "Namespaced"].contains(&scope)
    {
        errs.push(FieldError::not_supported(
            format!("{path}.scope"),
            scope,
            &["*", "Cluster", "Namespaced"],
        ));
    }
}

/// Exactly one of an `https` URL or a service reference (upstream's `ValidateWebhookURL`,
/// `ValidateWebhookService`).
fn validate_client_config(config: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let url = config.and_then(|c| c.get("url")).filter(|u| !u.is_null());
    let service = config
        .and_then(|c| c.get("service"))
        .filter(|s| !s.is_null());
    match (url, service) {
        (Some(url), None) => {
            let url = url.as_str().unwrap_or("");
            let field = format!("{path}.url");
            match url.split_once("://") {
                Some(("https", rest)) if !rest.is_empty() && !rest.starts_with('/') => {
                    if url.contains('#') {
                        errs.push(FieldError::invalid(
                            field,
                            url,
                            "fragments are not permitted in the URL",
                        ));
                    } else if url.contains('?') {
                        errs.push(FieldError::invalid(
                            field,
                            url,
                            "query parameters are not permitted in the URL",
                        ));
                    }
                }
                Some(("https", _)) => {
                    errs.push(FieldError::invalid(field, url, "host must be specified"));
                }
                _ => errs.push(FieldError::invalid(
                    field,
                    url,
                    "'https' is the only allowed URL scheme",
                )),
            }
        }
        (None, Some(service)) => {
            let spath = format!("{path}.service");
            for key in ["name", "namespace"] {
                let value = str_of(service, key).unwrap_or("");
                if value.is_empty() {
                    errs.push(FieldError::required(
                        format!("{spath}.{key}"),
                        format!("service {key} is required"),
                    ));
                } else {
                    for msg in NameRule::Label.check(value) {
                        errs.push(FieldError::invalid(format!("{spath}.{key}"), value, msg));
                    }
                }
            }
            if let Some(p) = str_of(service, "path")
                && !p.starts_with('/')
            {
                errs.push(FieldError::invalid(
                    format!("{spath}.path"),
                    p,
                    "must start with a '/'",
                ));
            }
            if let Some(port) = service.get("port").and_then(Value::as_i64)
                && !(1..=65535).contains(&port)
            {
                errs.push(FieldError::invalid(
                    format!("{spath}.port"),
                    port,
                    "port is not valid: must be between 1 and 65535, inclusive",
                ));
            }
        }
        _ => errs.push(FieldError::required(
            path,
            "exactly one of url or service is required",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(hook: Value) -> Value {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "w"}, "webhooks": [hook]})
    }

    fn hook() -> Value {
        json!({"name": "validate.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"name": "webhook", "namespace": "system"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]})
    }

    #[test]
    fn defaults_are_upstreams() {
        let decoded = decode_validating(config(hook())).expect("decodes");
        let h = &decoded["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
        assert_eq!(h["namespaceSelector"], json!({}));
        assert_eq!(h["objectSelector"], json!({}));
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
        assert!(h.get("reinvocationPolicy").is_none());
        let mut mutating = config(hook());
        mutating["kind"] = json!("MutatingWebhookConfiguration");
        let mutating = decode_mutating(mutating).expect("decodes");
        assert_eq!(mutating["webhooks"][0]["reinvocationPolicy"], "Never");
        assert!(
            WebhookConfigurationStrategy { mutating: false }
                .validate(&decoded)
                .is_empty()
        );
    }

    #[test]
    fn validation_messages() {
        struct Case {
            name: &'static str,
            hook: Value,
            errors: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "missing required fields",
                hook: json!({"name": "webhook.k8s.io"}),
                errors: &[
                    "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
                    "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
                    "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
                ],
            },
            Case {
                name: "bad values",
                hook: json!({"name": "short.name", "sideEffects": "Some", "admissionReviewVersions": ["v2"],
                    "failurePolicy": "Maybe", "timeoutSeconds": 31, "clientConfig": {"url": "http://example.com/hook"}}),
                errors: &[
                    r#"webhooks[0].name: Invalid value: "short.name": should be a domain with at least three segments separated by dots"#,
                    r#"webhooks[0].failurePolicy: Unsupported value: "Maybe": supported values: "Fail", "Ignore""#,
                    r#"webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun""#,
                    "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
                    r#"webhooks[0].clientConfig.url: Invalid value: "http://example.com/hook": 'https' is the only allowed URL scheme"#,
                    r#"webhooks[0].admissionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, v1beta1"#,
                ],
            },
        ];
        for case in cases {
            let decoded = decode_validating(config(case.hook)).expect("decodes");
            let errs: Vec<String> = WebhookConfigurationStrategy { mutating: false }
                .validate(&decoded)
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(errs, case.errors, "{}", case.name);
        }
        let mut two = config(hook());
        two["webhooks"] = json!([hook(), hook()]);
        let errs = WebhookConfigurationStrategy { mutating: false }
            .validate(&decode_validating(two).expect("decodes"));
        assert_eq!(
            errs[0].to_string(),
            r#"webhooks[1].name: Duplicate value: "validate.example.com""#
        );
    }

    #[test]
    fn match_conditions_must_compile_to_a_bool() {
        let with = |conditions: Value| {
            let mut h = hook();
            h["matchConditions"] = conditions;
            decode_validating(config(h)).expect("decodes")
        };
        let strategy = WebhookConfigurationStrategy { mutating: false };
        let messages = |obj: &Value| -> Vec<String> {
            strategy
                .validate(obj)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        let valid = with(json!([
            {"name": "not-skip-me", "expression": "object.metadata.name != 'skip-me'"},
            {"name": "users", "expression": "request.userInfo.username.startsWith('system:') || authorizer.group('').resource('pods').check('get').allowed()"},
        ]));
        assert!(messages(&valid).is_empty(), "{:?}", messages(&valid));

        let invalid = with(json!([
            {"name": "invalid-expression-1", "expression": "... [] bad expression"},
            {"name": "string", "expression": "'not a bool'"},
            {"name": "undeclared", "expression": "params.x == 1"},
            {"name": "", "expression": "  "},
            {"name": "string", "expression": "true"},
            {"name": "bad name!", "expression": "true"},
        ]));
        let got = messages(&invalid);
        assert!(
            got[0].starts_with(
                r#"webhooks[0].matchConditions[0].expression: Invalid value: "... [] bad expression": compilation failed: "#
            ),
            "{got:?}"
        );
        assert_eq!(
            got[1..],
            [
                r#"webhooks[0].matchConditions[1].expression: Invalid value: "'not a bool'": must evaluate to bool"#,
                r#"webhooks[0].matchConditions[2].expression: Invalid value: "params.x == 1": compilation failed: ERROR: <input>: undeclared reference to 'params' (in container '')"#,
                "webhooks[0].matchConditions[3].expression: Required value",
                "webhooks[0].matchConditions[3].name: Required value",
                r#"webhooks[0].matchConditions[4].name: Duplicate value: "string""#,
                r#"webhooks[0].matchConditions[5].name: Invalid value: "bad name!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"#,
            ]
        );

        // An update compiles the conditions again only when they changed.
        let mut stored = invalid.clone();
        stored["metadata"]["labels"] = json!({"touched": "yes"});
        assert!(
            strategy
                .validate_update(&stored, &invalid)
                .iter()
                .all(|e| !e.field.contains("matchConditions")),
            "unchanged conditions are not compiled again"
        );
        assert!(!strategy.validate_update(&invalid, &valid).is_empty());
    }
}
