//! Validation of a CustomResourceDefinition itself, as upstream's `apiextensions/validation/validation.go` (names, group, scope, versions, schemas, subresources, printer columns, conversion).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionVersion,
    CustomResourceSubresources,
};
use kcm_machinery::labels::is_dns1123_subdomain;
use serde_json::Value;

use super::structural::Schema;
use super::{is_established, is_simple_json_path, printer};
use crate::validation::{DNS1035_LABEL_MESSAGE, DNS1123_SUBDOMAIN_MESSAGE, FieldError, NameRule};

/// Upstream's message for a CRD name that is not `plural.group`.
const NAME_MESSAGE: &str = "must be spec.names.plural+\".\"+spec.group";

/// The conversion strategies upstream accepts; kcm refuses `Webhook` (below).
const STRATEGIES: [&str; 2] = ["None", "Webhook"];

/// The reasons a DNS-1035 label is invalid (empty when it is valid).
fn dns1035(value: &str) -> Option<String> {
    let errs = NameRule::Dns1035Label.check(value);
    if errs.is_empty() {
        None
    } else if errs.iter().any(|e| e == DNS1035_LABEL_MESSAGE) && errs.len() == 1 {
        Some(DNS1035_LABEL_MESSAGE.to_owned())
    } else {
        Some(errs.join(","))
    }
}

/// Every reason `crd` (decoded) is invalid on create, as upstream's
/// `ValidateCustomResourceDefinition` (object metadata is validated by the registry; the
/// name rule is here).
pub fn validate(crd: &CustomResourceDefinition) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &crd.spec;
    let name = crd.metadata.name.as_deref().unwrap_or("");
    if !name.is_empty() && name != format!("{}.{}", spec.names.plural, spec.group) {
        errs.push(FieldError::invalid("metadata.name", name, NAME_MESSAGE));
    }
    errs.extend(validate_spec(crd));
    errs.extend(validate_api_approval(crd));
    if let Some(accepted) = crd.status.as_ref().and_then(|s| s.accepted_names.as_ref()) {
        errs.extend(validate_names(accepted, "status.acceptedNames"));
    }
    errs
}

/// Every reason an update from `old` to `new` is invalid, as upstream's
/// `ValidateCustomResourceDefinitionUpdate`: the create rules, then the immutable group and
/// plural (and scope and kind once Established), and stored versions still served.
pub fn validate_update(
    new: &CustomResourceDefinition,
    old: &CustomResourceDefinition,
) -> Vec<FieldError> {
    let mut errs = validate(new);
    let immutable = |errs: &mut Vec<FieldError>, field: &str, a: &str, b: &str| {
        if a != b {
            errs.push(FieldError::invalid(field, a, "field is immutable"));
        }
    };
    if is_established(old) {
        immutable(&mut errs, "spec.scope", &new.spec.scope, &old.spec.scope);
        immutable(
            &mut errs,
            "spec.names.kind",
            &new.spec.names.kind,
            &old.spec.names.kind,
        );
    }
    immutable(&mut errs, "spec.group", &new.spec.group, &old.spec.group);
    immutable(
        &mut errs,
        "spec.names.plural",
        &new.spec.names.plural,
        &old.spec.names.plural,
    );
    let stored = new
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default();
    for (i, v) in stored.iter().enumerate() {
        if !new.spec.versions.iter().any(|sv| &sv.name == v) {
            errs.push(FieldError::invalid(
                format!("status.storedVersions[{i}]"),
                v.as_str(),
                "must appear in spec.versions",
            ));
        }
    }
    errs
}

/// The annotation a CRD in a protected group (`*.k8s.io`, `*.kubernetes.io`) must carry.
pub const API_APPROVED: &str = "api-approved.kubernetes.io";

/// Upstream's group protection (KEP 2337): a CRD in a Kubernetes-owned group names its API
/// review (a URL) or says it is `unapproved...`.
fn validate_api_approval(crd: &CustomResourceDefinition) -> Vec<FieldError> {
    let group = crd.spec.group.as_str();
    let protected = ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|g| group == *g || group.ends_with(&format!(".{g}")));
    if !protected {
        return Vec::new();
    }
    let field = format!("metadata.annotations[{API_APPROVED}]");
    match crd
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(API_APPROVED))
    {
        None => vec![FieldError::required(
            field,
            format!(
                "protected groups must have approval annotation {API_APPROVED:?}, see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        )],
        Some(v)
            if v.starts_with("unapproved")
                || v.starts_with("http://")
                || v.starts_with("https://") =>
        {
            Vec::new()
        }
        Some(v) => vec![FieldError::invalid(
            field,
            v.as_str(),
            "protected groups must have approval annotation \"api-approved.kubernetes.io\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111",
        )],
    }
}

fn validate_spec(crd: &CustomResourceDefinition) -> Vec<FieldError> {
    let spec = &crd.spec;
    let mut errs = Vec::new();
    if spec.group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else if !is_dns1123_subdomain(&spec.group) {
        errs.push(FieldError::invalid(
            "spec.group",
            spec.group.as_str(),
            DNS1123_SUBDOMAIN_MESSAGE,
        ));
    } else if !spec.group.contains('.') {
        errs.push(FieldError::invalid(
            "spec.group",
            spec.group.as_str(),
            "should be a domain with at least one dot",
        ));
    }
    match spec.scope.as_str() {
        "" => errs.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported(
            "spec.scope",
            other,
            &["Cluster", "Namespaced"],
        )),
    }
    let versions_json = || serde_json::to_value(&spec.versions).unwrap_or(Value::Null);
    if spec.versions.is_empty() {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_json(),
            "must have exactly one version marked as storage version",
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    let mut storage = 0;
    for (i, version) in spec.versions.iter().enumerate() {
        let path = format!("spec.versions[{i}]");
        if version.storage {
            storage += 1;
        }
        if seen.contains(&version.name.as_str()) {
            unique = false;
        }
        seen.push(&version.name);
        if let Some(why) = dns1035(&version.name) {
            errs.push(FieldError::invalid(
                format!("{path}.name"),
                version.name.as_str(),
                why,
            ));
        }
        errs.extend(validate_version(version, &path));
    }
    if !unique {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_json(),
            "must contain unique version names",
        ));
    }
    if storage != 1 && !spec.versions.is_empty() {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_json(),
            "must have exactly one version marked as storage version",
        ));
    }
    let names = &spec.names;
    if names.plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    }
    if names.singular.as_deref().unwrap_or("").is_empty() {
        errs.push(FieldError::required("spec.names.singular", ""));
    }
    if names.kind.is_empty() {
        errs.push(FieldError::required("spec.names.kind", ""));
    }
    if names.list_kind.as_deref().unwrap_or("").is_empty() {
        errs.push(FieldError::required("spec.names.listKind", ""));
    }
    errs.extend(validate_names(names, "spec.names"));
    if let Some(conversion) = &spec.conversion {
        match conversion.strategy.as_str() {
            "" => errs.push(FieldError::required("spec.conversion.strategy", "")),
            "None" => {
                if conversion.webhook.is_some() {
                    errs.push(FieldError::forbidden(
                        "spec.conversion.webhook",
                        "should not be set when strategy is not set to Webhook",
                    ));
                }
            }
            // Upstream calls the webhook to convert between versions; kcm calls no webhooks
            // (admission webhooks are stored, not called), so a CRD that needs one is refused
            // rather than served with conversions that silently never happen.
            "Webhook" => errs.push(FieldError::forbidden(
                "spec.conversion.strategy",
                "Webhook conversion is not supported by kcm's API server (it calls no webhooks): use strategy None",
            )),
            other => errs.push(FieldError::not_supported(
                "spec.conversion.strategy",
                other,
                &STRATEGIES,
            )),
        }
    }
    errs
}

/// One version: its schema (required and structural in `apiextensions.k8s.io/v1`), its
/// subresources and its printer columns.
fn validate_version(version: &CustomResourceDefinitionVersion, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let status = version
        .subresources
        .as_ref()
        .is_some_and(|s| s.status.is_some());
    match version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
    {
        None => errs.push(FieldError::required(
            format!("{path}.schema.openAPIV3Schema"),
            "schemas are required",
        )),
        Some(props) => {
            let schema_path = format!("{path}.schema.openAPIV3Schema");
            match Schema::build(props, &schema_path) {
                Err(e) => errs.extend(e),
                Ok(schema) => {
                    errs.extend(super::cel::check_rules(&schema, &schema_path));
                    errs.extend(check_defaults(&schema, &schema_path));
                }
            }
            if status {
                let other = props.type_.as_deref().is_some_and(|t| t != "object")
                    || props.items.is_some()
                    || props.additional_properties.is_some()
                    || props.enum_.is_some()
                    || props.default.is_some()
                    || props.all_of.is_some()
                    || props.any_of.is_some()
                    || props.one_of.is_some()
                    || props.not.is_some();
                if other {
                    errs.push(FieldError::invalid_omitting_value(
                        schema_path,
                        "must only have \"properties\", \"required\" or \"description\" at the root if the status subresource is enabled",
                    ));
                }
            }
        }
    }
    errs.extend(validate_subresources(
        version.subresources.as_ref(),
        &format!("{path}.subresources"),
    ));
    for (i, col) in version
        .additional_printer_columns
        .iter()
        .flatten()
        .enumerate()
    {
        errs.extend(printer::validate_column(
            col,
            &format!("{path}.additionalPrinterColumns[{i}]"),
        ));
    }
    errs
}

/// Every `default` must itself be valid against its schema (upstream's
/// `validateDefaults`: `must result in valid values`).
fn check_defaults(schema: &Schema, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk_defaults(schema, path, &mut errs);
    errs
}

fn walk_defaults(schema: &Schema, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(d) = &schema.default {
        let mut found = Vec::new();
        super::values::validate(schema, d, "", false, &mut found);
        for e in found {
            errs.push(FieldError::invalid(
                format!("{path}.default"),
                d.clone(),
                e.body(),
            ));
        }
    }
    for (name, sub) in &schema.properties {
        walk_defaults(sub, &format!("{path}.properties[{name}]"), errs);
    }
    if let Some(items) = &schema.items {
        walk_defaults(items, &format!("{path}.items"), errs);
    }
    if let Some(ap) = &schema.additional_properties {
        walk_defaults(ap, &format!("{path}.additionalProperties"), errs);
    }
}

fn validate_subresources(sub: Option<&CustomResourceSubresources>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(scale) = sub.and_then(|s| s.scale.as_ref()) else {
        return errs;
    };
    // Upstream serves `/scale` without `/status` too: only the paths are checked.
    let scale_path = format!("{path}.scale");
    let check = |errs: &mut Vec<FieldError>, field: &str, value: &str, spec_or_status: &str| {
        let at = format!("{scale_path}.{field}");
        if value.is_empty() {
            errs.push(FieldError::required(at, ""));
            return;
        }
        if !is_simple_json_path(value) {
            errs.push(FieldError::invalid(
                at,
                value,
                "must be a simple json path starting with .",
            ));
            return;
        }
        if !spec_or_status.is_empty() && !value.starts_with(spec_or_status) {
            errs.push(FieldError::invalid(
                at,
                value,
                format!("should be a json path under {spec_or_status}"),
            ));
        }
    };
    check(
        &mut errs,
        "specReplicasPath",
        &scale.spec_replicas_path,
        ".spec.",
    );
    check(
        &mut errs,
        "statusReplicasPath",
        &scale.status_replicas_path,
        ".status.",
    );
    if let Some(selector) = &scale.label_selector_path {
        let mut sel_errs = Vec::new();
        check(&mut sel_errs, "labelSelectorPath", selector, "");
        if sel_errs.is_empty()
            && !(selector.starts_with(".spec.") || selector.starts_with(".status."))
        {
            sel_errs.push(FieldError::invalid(
                format!("{scale_path}.labelSelectorPath"),
                selector.as_str(),
                "should be a json path under either .spec or .status",
            ));
        }
        errs.extend(sel_errs);
    }
    errs
}

/// Names, as upstream's `ValidateCustomResourceDefinitionNames`.
pub fn validate_names(names: &CustomResourceDefinitionNames, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let check = |errs: &mut Vec<FieldError>, field: String, value: &str, lower: bool| {
        if value.is_empty() {
            return;
        }
        let probe = if lower {
            value.to_ascii_lowercase()
        } else {
            value.to_owned()
        };
        if let Some(why) = dns1035(&probe) {
            let detail = if lower {
                format!("may have mixed case, but should otherwise match: {why}")
            } else {
                why
            };
            errs.push(FieldError::invalid(field, value, detail));
        }
    };
    check(&mut errs, format!("{path}.plural"), &names.plural, false);
    check(
        &mut errs,
        format!("{path}.singular"),
        names.singular.as_deref().unwrap_or(""),
        false,
    );
    check(&mut errs, format!("{path}.kind"), &names.kind, true);
    let list_kind = names.list_kind.as_deref().unwrap_or("");
    check(&mut errs, format!("{path}.listKind"), list_kind, true);
    for (i, short) in names.short_names.iter().flatten().enumerate() {
        if let Some(why) = dns1035(short) {
            errs.push(FieldError::invalid(
                format!("{path}.shortNames[{i}]"),
                short.as_str(),
                why,
            ));
        }
    }
    if !names.kind.is_empty() && names.kind == list_kind {
        errs.push(FieldError::invalid(
            format!("{path}.listKind"),
            list_kind,
            "kind and listKind may not be the same",
        ));
    }
    for (i, category) in names.categories.iter().flatten().enumerate() {
        if let Some(why) = dns1035(category) {
            errs.push(FieldError::invalid(
                format!("{path}.categories[{i}]"),
                category.as_str(),
                why,
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn crd(patch: impl FnOnce(&mut Value)) -> CustomResourceDefinition {
        let mut v = json!({
            "metadata": {"name": "foos.samplecontroller.k8s.io",
                "annotations": {"api-approved.kubernetes.io": "unapproved, experimental-only"}},
            "spec": {
                "group": "samplecontroller.k8s.io",
                "scope": "Namespaced",
                "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "listKind": "FooList"},
                "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}}}],
            },
        });
        patch(&mut v);
        serde_json::from_value(v).expect("crd")
    }

    fn errors(patch: impl FnOnce(&mut Value)) -> Vec<String> {
        validate(&crd(patch))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn malformed_definitions_get_upstreams_causes() {
        struct Case {
            name: &'static str,
            patch: fn(&mut Value),
            want: &'static str,
        }
        let cases = [
            Case {
                name: "valid",
                patch: |_| {},
                want: "",
            },
            Case {
                name: "no storage version",
                patch: |v| v["spec"]["versions"][0]["storage"] = json!(false),
                want: "spec.versions: Invalid value: ",
            },
            Case {
                name: "two storage versions",
                patch: |v| {
                    let mut second = v["spec"]["versions"][0].clone();
                    second["name"] = json!("v1");
                    v["spec"]["versions"]
                        .as_array_mut()
                        .expect("versions")
                        .push(second);
                },
                want: "must have exactly one version marked as storage version",
            },
            Case {
                name: "duplicate version names",
                patch: |v| {
                    let mut second = v["spec"]["versions"][0].clone();
                    second["storage"] = json!(false);
                    v["spec"]["versions"]
                        .as_array_mut()
                        .expect("versions")
                        .push(second);
                },
                want: "must contain unique version names",
            },
            Case {
                name: "name is not plural.group",
                patch: |v| v["metadata"]["name"] = json!("foo.samplecontroller.k8s.io"),
                want: "metadata.name: Invalid value: \"foo.samplecontroller.k8s.io\": must be spec.names.plural+\".\"+spec.group",
            },
            Case {
                name: "group without a dot",
                patch: |v| {
                    v["spec"]["group"] = json!("sample");
                    v["metadata"]["name"] = json!("foos.sample");
                },
                want: "spec.group: Invalid value: \"sample\": should be a domain with at least one dot",
            },
            Case {
                name: "bad plural",
                patch: |v| {
                    v["spec"]["names"]["plural"] = json!("Foos");
                    v["metadata"]["name"] = json!("Foos.samplecontroller.k8s.io");
                },
                want: "spec.names.plural: Invalid value: \"Foos\": a DNS-1035 label",
            },
            Case {
                name: "kind equals listKind",
                patch: |v| v["spec"]["names"]["listKind"] = json!("Foo"),
                want: "spec.names.listKind: Invalid value: \"Foo\": kind and listKind may not be the same",
            },
            Case {
                name: "bad kind",
                patch: |v| v["spec"]["names"]["kind"] = json!("Foo_Bar"),
                want: "spec.names.kind: Invalid value: \"Foo_Bar\": may have mixed case, but should otherwise match: a DNS-1035 label",
            },
            Case {
                name: "scope",
                patch: |v| v["spec"]["scope"] = json!("Global"),
                want: "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
            },
            Case {
                name: "no schema",
                patch: |v| {
                    v["spec"]["versions"][0]
                        .as_object_mut()
                        .map(|m| m.remove("schema"))
                        .map(drop)
                        .unwrap_or(())
                },
                want: "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required",
            },
            Case {
                name: "non-structural",
                patch: |v| {
                    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] =
                        json!({"properties": {}})
                },
                want: "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
            },
            Case {
                name: "a protected group without approval",
                patch: |v| {
                    v["metadata"]
                        .as_object_mut()
                        .map(|m| m.remove("annotations"))
                        .map(drop)
                        .unwrap_or(())
                },
                want: "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation",
            },
            Case {
                name: "webhook conversion",
                patch: |v| v["spec"]["conversion"] = json!({"strategy": "Webhook"}),
                want: "spec.conversion.strategy: Forbidden: Webhook conversion is not supported",
            },
            Case {
                name: "scale path",
                patch: |v| v["spec"]["versions"][0]["subresources"] = json!({"scale": {"specReplicasPath": "spec.replicas", "statusReplicasPath": ".status.replicas"}}),
                want: "spec.versions[0].subresources.scale.specReplicasPath: Invalid value: \"spec.replicas\": must be a simple json path starting with .",
            },
        ];
        for case in cases {
            let got = errors(case.patch);
            if case.want.is_empty() {
                assert!(got.is_empty(), "{}: {got:?}", case.name);
            } else {
                assert!(
                    got.iter().any(|e| e.contains(case.want)),
                    "{}: {got:?}",
                    case.name
                );
            }
        }
    }

    #[test]
    fn group_and_plural_are_immutable() {
        let old = crd(|_| {});
        let new = crd(|v| {
            v["spec"]["names"]["plural"] = json!("bars");
            v["metadata"]["name"] = json!("bars.samplecontroller.k8s.io");
        });
        let errs: Vec<String> = validate_update(&new, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            errs.contains(
                &"spec.names.plural: Invalid value: \"bars\": field is immutable".to_owned()
            ),
            "{errs:?}"
        );
    }
}
