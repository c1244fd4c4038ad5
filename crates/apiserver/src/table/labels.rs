//! Label sets and label selectors as text (upstream's `labels.FormatLabels`,
//! `metav1.FormatLabelSelector` and `Selector.String`).

use serde_json::Value;

/// `k1=v1,k2=v2` with keys sorted, or `<none>` (upstream's `labels.FormatLabels`).
pub(super) fn format_labels(labels: Option<&Value>) -> String {
    let mut pairs: Vec<(&str, &str)> = labels
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() {
        return "<none>".to_owned();
    }
    pairs.sort_unstable();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A `metav1.LabelSelector` as selector text (`app=web,tier in (a,b)`), `""` for a nil
/// or empty selector, `Err` for an invalid one (upstream's
/// `LabelSelectorAsSelector(...).String()`).
pub(super) fn selector_string(selector: Option<&Value>) -> Result<String, ()> {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return Ok(String::new());
    };
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(match_labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in match_labels {
            requirements.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for expr in expressions {
        let key = expr.get("key").and_then(Value::as_str).unwrap_or("");
        let op = expr.get("operator").and_then(Value::as_str).unwrap_or("");
        let mut values: Vec<&str> = expr
            .get("values")
            .and_then(Value::as_array)
            .map(|vs| vs.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let text = match op {
            "In" | "NotIn" => {
                if values.is_empty() {
                    return Err(());
                }
                values.sort_unstable();
                let word = if op == "In" { "in" } else { "notin" };
                format!("{key} {word} ({})", values.join(","))
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    return Err(());
                }
                if op == "Exists" {
                    key.to_owned()
                } else {
                    format!("!{key}")
                }
            }
            _ => return Err(()),
        };
        requirements.push((key.to_owned(), text));
    }
    // Requirements are ordered by key (stable, so matchLabels come first on a tie).
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(requirements
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(","))
}

/// A label selector for display: `<none>` when empty, `<error>` when invalid (upstream's
/// `metav1.FormatLabelSelector`).
pub(super) fn format_label_selector(selector: Option<&Value>) -> String {
    match selector_string(selector) {
        Ok(s) if s.is_empty() => "<none>".to_owned(),
        Ok(s) => s,
        Err(()) => "<error>".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_are_sorted_and_none_when_empty() {
        assert_eq!(
            format_labels(Some(&json!({"tier": "web", "app": "x"}))),
            "app=x,tier=web"
        );
        assert_eq!(format_labels(Some(&json!({}))), "<none>");
        assert_eq!(format_labels(None), "<none>");
    }

    #[test]
    fn selectors_print_like_upstream() {
        struct Case {
            name: &'static str,
            selector: Value,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "match labels sorted by key",
                selector: json!({"matchLabels": {"b": "2", "a": "1"}}),
                want: "a=1,b=2",
            },
            Case {
                name: "expressions",
                selector: json!({"matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["web", "api"]},
                    {"key": "env", "operator": "NotIn", "values": ["prod"]},
                    {"key": "gpu", "operator": "Exists"},
                    {"key": "arm", "operator": "DoesNotExist"}
                ]}),
                want: "!arm,env notin (prod),gpu,tier in (api,web)",
            },
            Case {
                name: "empty",
                selector: json!({}),
                want: "<none>",
            },
            Case {
                name: "null",
                selector: Value::Null,
                want: "<none>",
            },
            Case {
                name: "In without values is invalid",
                selector: json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
                want: "<error>",
            },
            Case {
                name: "unknown operator is invalid",
                selector: json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
                want: "<error>",
            },
        ];
        for case in cases {
            assert_eq!(
                format_label_selector(Some(&case.selector)),
                case.want,
                "{}",
                case.name
            );
        }
    }
}
