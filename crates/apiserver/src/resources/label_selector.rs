//! Validation of `metav1.LabelSelector` fields, as apimachinery's `ValidateLabelSelector` (operators, values, keys), with upstream's field paths and messages.

use kcm_machinery::labels::{validate_label_key, validate_label_value};
use serde_json::Value;

use crate::validation::FieldError;

/// The errors of the label selector at `path` (`None` or `null`: none).
pub fn validate(selector: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return errs;
    };
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        let labels_path = format!("{path}.matchLabels");
        for (key, value) in labels {
            if let Err(e) = validate_label_key(key) {
                errs.push(FieldError::invalid(
                    labels_path.as_str(),
                    key.as_str(),
                    e.to_string(),
                ));
            }
            let value = value.as_str().unwrap_or("");
            if let Err(e) = validate_label_value(value) {
                errs.push(FieldError::invalid(
                    labels_path.as_str(),
                    value,
                    e.to_string(),
                ));
            }
        }
    }
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (i, expr) in expressions.iter().enumerate() {
        let expr_path = format!("{path}.matchExpressions[{i}]");
        let values = expr
            .get("values")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        match expr.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        format!("{expr_path}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        format!("{expr_path}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errs.push(FieldError::invalid(
                format!("{expr_path}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        let key = expr.get("key").and_then(Value::as_str).unwrap_or("");
        if let Err(e) = validate_label_key(key) {
            errs.push(FieldError::invalid(
                format!("{expr_path}.key"),
                key,
                e.to_string(),
            ));
        }
        for (j, value) in values.iter().enumerate() {
            let value = value.as_str().unwrap_or("");
            if let Err(e) = validate_label_value(value) {
                errs.push(FieldError::invalid(
                    format!("{expr_path}.values[{j}]"),
                    value,
                    e.to_string(),
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn selector_errors_name_their_fields() {
        struct Case {
            name: &'static str,
            selector: Value,
            fields: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "valid",
                selector: json!({"matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}),
                fields: &[],
            },
            Case {
                name: "In without values",
                selector: json!({"matchExpressions": [{"key": "tier", "operator": "In"}]}),
                fields: &["s.matchExpressions[0].values"],
            },
            Case {
                name: "Exists with values",
                selector: json!({"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["a"]}]}),
                fields: &["s.matchExpressions[0].values"],
            },
            Case {
                name: "bad operator and key",
                selector: json!({"matchExpressions": [{"key": "-bad", "operator": "Near"}]}),
                fields: &[
                    "s.matchExpressions[0].operator",
                    "s.matchExpressions[0].key",
                ],
            },
            Case {
                name: "bad label value",
                selector: json!({"matchLabels": {"app": "has space"}}),
                fields: &["s.matchLabels"],
            },
        ];
        for case in cases {
            let errs = validate(Some(&case.selector), "s");
            let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
            assert_eq!(fields, case.fields, "{}", case.name);
        }
        assert!(validate(None, "s").is_empty());
    }
}
