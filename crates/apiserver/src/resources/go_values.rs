//! Field-error values rendered as upstream's `field.Invalid` prints Go values that are neither strings nor numbers (`%#v`): `[]string{"a", "b"}`, `rbac.RoleRef{...}`.

use serde_json::Value;

use crate::validation::{FieldError, FieldErrorKind};

/// An `Invalid value` error whose value is already rendered (a Go struct or slice).
pub fn invalid(
    field: impl Into<String>,
    rendered: String,
    detail: impl Into<String>,
) -> FieldError {
    FieldError {
        kind: FieldErrorKind::Invalid,
        field: field.into(),
        value: rendered,
        detail: detail.into(),
    }
}

/// A JSON list of strings as Go's `%#v` of a `[]string` (or of a named string slice such
/// as `[]admissionregistration.OperationType`, given as `type_name`).
pub fn string_slice(type_name: &str, list: Option<&Value>) -> String {
    let items: Vec<String> = list
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|v| format!("{:?}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    format!("{type_name}{{{}}}", items.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn string_slices_render_as_go() {
        assert_eq!(
            string_slice("[]string", Some(&json!(["/healthz", "/api"]))),
            r#"[]string{"/healthz", "/api"}"#
        );
        assert_eq!(string_slice("[]string", None), "[]string{}");
        let err = invalid(
            "rules[0].nonResourceURLs",
            string_slice("[]string", Some(&json!(["/x"]))),
            "bad",
        );
        assert_eq!(
            err.to_string(),
            r#"rules[0].nonResourceURLs: Invalid value: []string{"/x"}: bad"#
        );
    }
}
