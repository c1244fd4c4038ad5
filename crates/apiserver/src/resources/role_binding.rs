//! RoleBindings and ClusterRoleBindings: scheme defaults, roleRef and subject validation, roleRef immutability (upstream's `ValidateRoleBinding`, `ValidateClusterRoleBindingUpdate`, `SetDefaults_Subject`).

use serde_json::{Map, Value, json};

use crate::registry::strategy::{Grants, Strategy};
use crate::resources::go_values;
use crate::validation::{FieldError, NameRule};

/// The RBAC API group, the only one a roleRef may name.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The JSON-level part of the RBAC binding defaults, before the typed decode: a missing
/// `roleRef` or subject `kind`/`name` reads as empty (as Go's zero values, so that
/// validation answers 422 instead of a decode error), `roleRef.apiGroup` defaults to the
/// RBAC group, and a subject's `apiGroup` to its kind's (`SetDefaults_RoleBinding`,
/// `SetDefaults_Subject`).
pub fn default_binding(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let role_ref = map.entry("roleRef").or_insert_with(|| json!({}));
    if role_ref.is_null() {
        *role_ref = json!({});
    }
    if let Some(role_ref) = role_ref.as_object_mut() {
        for key in ["kind", "name"] {
            role_ref.entry(key).or_insert_with(|| json!(""));
        }
        let group = role_ref.entry("apiGroup").or_insert_with(|| json!(""));
        if group.as_str().is_none_or(str::is_empty) {
            *group = json!(RBAC_GROUP);
        }
    }
    if let Some(subjects) = map.get_mut("subjects").and_then(Value::as_array_mut) {
        for subject in subjects.iter_mut().filter_map(Value::as_object_mut) {
            default_subject(subject);
        }
    }
}

fn default_subject(subject: &mut Map<String, Value>) {
    for key in ["kind", "name"] {
        subject.entry(key).or_insert_with(|| json!(""));
    }
    let empty = subject
        .get("apiGroup")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    if !empty {
        return;
    }
    match subject.get("kind").and_then(Value::as_str) {
        Some("User" | "Group") => {
            subject.insert("apiGroup".to_owned(), json!(RBAC_GROUP));
        }
        // A ServiceAccount's group is the core group: omitted, as Go's `omitempty`.
        _ => {
            subject.remove("apiGroup");
        }
    }
}

/// The binding strategy; `namespaced` tells RoleBindings (which may name Roles) from
/// ClusterRoleBindings (ClusterRoles only, subjects' namespaces required).
#[derive(Debug)]
pub struct BindingStrategy {
    /// Whether the bindings are RoleBindings.
    pub namespaced: bool,
}

impl Strategy for BindingStrategy {
    fn grants(&self) -> Grants {
        Grants::RoleRef
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let role_ref = obj.get("roleRef").cloned().unwrap_or(json!({}));
        let field = |k: &str| {
            role_ref
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let group = field("apiGroup");
        if group != RBAC_GROUP {
            errs.push(FieldError::not_supported(
                "roleRef.apiGroup",
                group,
                &[RBAC_GROUP],
            ));
        }
        let kind = field("kind");
        let kinds: &[&str] = if self.namespaced {
            &["Role", "ClusterRole"]
        } else {
            &["ClusterRole"]
        };
        if !kinds.contains(&kind.as_str()) {
            errs.push(FieldError::not_supported("roleRef.kind", kind, kinds));
        }
        let name = field("name");
        if name.is_empty() {
            errs.push(FieldError::required("roleRef.name", ""));
        } else {
            for msg in NameRule::PathSegment.check(&name) {
                errs.push(FieldError::invalid("roleRef.name", name.as_str(), msg));
            }
        }
        let subjects = obj
            .get("subjects")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for (i, subject) in subjects.iter().enumerate() {
            validate_subject(
                subject,
                self.namespaced,
                &format!("subjects[{i}]"),
                &mut errs,
            );
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("roleRef") != old.get("roleRef") {
            errs.push(go_values::invalid(
                "roleRef",
                go_role_ref(new.get("roleRef")),
                "cannot change roleRef",
            ));
        }
        errs
    }
}

/// A roleRef as Go prints the internal `rbac.RoleRef` struct (`%#v`).
fn go_role_ref(role_ref: Option<&Value>) -> String {
    let field = |k: &str| {
        role_ref
            .and_then(|r| r.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    format!(
        "rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}",
        field("apiGroup"),
        field("kind"),
        field("name")
    )
}

/// Upstream's `validateRoleBindingSubject`.
fn validate_subject(subject: &Value, namespaced: bool, path: &str, errs: &mut Vec<FieldError>) {
    let field = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    let name = field("name");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    let group = field("apiGroup");
    match field("kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for msg in NameRule::Subdomain.check(name) {
                    errs.push(FieldError::invalid(format!("{path}.name"), name, msg));
                }
            }
            if !group.is_empty() {
                errs.push(FieldError::not_supported(
                    format!("{path}.apiGroup"),
                    group,
                    &[""],
                ));
            }
            if !namespaced && field("namespace").is_empty() {
                errs.push(FieldError::required(format!("{path}.namespace"), ""));
            }
        }
        kind @ ("User" | "Group") => {
            if name.is_empty() {
                let what = if kind == "User" { "user" } else { "group" };
                errs.push(FieldError::invalid(
                    format!("{path}.name"),
                    name,
                    format!("{what} name cannot be empty"),
                ));
            }
            if group != RBAC_GROUP {
                errs.push(FieldError::not_supported(
                    format!("{path}.apiGroup"),
                    group,
                    &[RBAC_GROUP],
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            format!("{path}.kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(role_ref: Value, subjects: Value) -> Value {
        let mut obj = json!({"metadata": {"name": "b"}, "roleRef": role_ref, "subjects": subjects});
        default_binding(&mut obj);
        obj
    }

    #[test]
    fn defaults_fill_groups_by_kind() {
        let obj = binding(
            json!({"kind": "Role", "name": "r"}),
            json!([{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "sa", "apiGroup": ""}]),
        );
        assert_eq!(obj["roleRef"]["apiGroup"], RBAC_GROUP);
        assert_eq!(obj["subjects"][0]["apiGroup"], RBAC_GROUP);
        assert!(obj["subjects"][1].get("apiGroup").is_none());
        let missing = binding(Value::Null, json!([{}]));
        assert_eq!(missing["roleRef"]["apiGroup"], RBAC_GROUP);
        assert_eq!(missing["subjects"][0], json!({"kind": "", "name": ""}));
        let mut absent = json!({"metadata": {"name": "b"}});
        default_binding(&mut absent);
        assert_eq!(
            absent["roleRef"],
            json!({"kind": "", "name": "", "apiGroup": RBAC_GROUP})
        );
    }

    #[test]
    fn binding_validation() {
        struct Case {
            name: &'static str,
            namespaced: bool,
            obj: Value,
            errors: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "valid role binding",
                namespaced: true,
                obj: binding(
                    json!({"kind": "Role", "name": "r"}),
                    json!([{"kind": "ServiceAccount", "name": "sa"}]),
                ),
                errors: &[],
            },
            Case {
                name: "cluster binding to a Role, service account without namespace",
                namespaced: false,
                obj: binding(
                    json!({"kind": "Role", "name": "r"}),
                    json!([{"kind": "ServiceAccount", "name": "sa"}]),
                ),
                errors: &[
                    r#"roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole""#,
                    "subjects[0].namespace: Required value",
                ],
            },
            Case {
                name: "empty roleRef, bad subjects",
                namespaced: true,
                obj: binding(
                    json!({"apiGroup": "example.com"}),
                    json!([{"kind": "Robot", "name": "r2"}, {"kind": "User", "apiGroup": "x"}]),
                ),
                errors: &[
                    r#"roleRef.apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io""#,
                    r#"roleRef.kind: Unsupported value: "": supported values: "Role", "ClusterRole""#,
                    "roleRef.name: Required value",
                    r#"subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group""#,
                    "subjects[1].name: Required value",
                    r#"subjects[1].name: Invalid value: "": user name cannot be empty"#,
                    r#"subjects[1].apiGroup: Unsupported value: "x": supported values: "rbac.authorization.k8s.io""#,
                ],
            },
        ];
        for case in cases {
            let errs: Vec<String> = BindingStrategy {
                namespaced: case.namespaced,
            }
            .validate(&case.obj)
            .iter()
            .map(ToString::to_string)
            .collect();
            assert_eq!(errs, case.errors, "{}", case.name);
        }
    }

    #[test]
    fn role_ref_is_immutable() {
        let old = binding(json!({"kind": "ClusterRole", "name": "view"}), json!([]));
        let new = binding(json!({"kind": "ClusterRole", "name": "edit"}), json!([]));
        let errs = BindingStrategy { namespaced: false }.validate_update(&new, &old);
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                r#"roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: cannot change roleRef"#
            ]
        );
        assert!(
            BindingStrategy { namespaced: false }
                .validate_update(&old, &old)
                .is_empty()
        );
    }
}
