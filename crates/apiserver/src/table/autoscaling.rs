//! Rows of HorizontalPodAutoscalers (printed from the stored autoscaling/v2 form, whichever version was asked for).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Row;
use super::duration::since;
use super::fields::{get, int_at, list_at, name, opt_int_at, str_at, time_at};

use crate::pointer::At;

/// upstream's `printHorizontalPodAutoscaler`.
pub(super) fn horizontal_pod_autoscaler(obj: &Value, now: Timestamp) -> Row {
    let reference = format!(
        "{}/{}",
        str_at(obj, &["spec", "scaleTargetRef", "kind"]),
        str_at(obj, &["spec", "scaleTargetRef", "name"])
    );
    let min = opt_int_at(obj, &["spec", "minReplicas"])
        .map_or_else(|| "<unset>".to_owned(), |m| m.to_string());
    Row::new(vec![
        json!(name(obj)),
        json!(reference),
        json!(format_metrics(
            list_at(obj, &["spec", "metrics"]),
            list_at(obj, &["status", "currentMetrics"])
        )),
        json!(min),
        json!(int_at(obj, &["spec", "maxReplicas"])),
        json!(int_at(obj, &["status", "currentReplicas"])),
        json!(since(time_at(obj, &["metadata", "creationTimestamp"]), now)),
    ])
}

/// `current/target` per metric, the first two and `+ N more...` (upstream's
/// `formatHPAMetrics`).
fn format_metrics(specs: &[Value], statuses: &[Value]) -> String {
    if specs.is_empty() {
        return "<none>".to_owned();
    }
    let quantity = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("0").to_owned();
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let status = statuses.get(i);
            let current = |source: &str, field: &str| {
                status
                    .and_then(|s| get(s, &[source]))
                    .filter(|s| s.is_object())
                    .and_then(|s| get(s, &["current", field]))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            match str_at(spec, &["type"]) {
                source @ ("External" | "Object") => {
                    let key = source.to_ascii_lowercase();
                    let target = &spec[&key]["target"];
                    if target.get("averageValue").is_some_and(|v| !v.is_null()) {
                        format!(
                            "{}/{} (avg)",
                            current(&key, "averageValue").unwrap_or_else(|| "<unknown>".to_owned()),
                            quantity(target.get("averageValue"))
                        )
                    } else {
                        let has_status = status
                            .and_then(|s| get(s, &[key.as_str()]))
                            .is_some_and(Value::is_object);
                        let value = if has_status {
                            current(&key, "value").unwrap_or_else(|| "0".to_owned())
                        } else {
                            "<unknown>".to_owned()
                        };
                        format!("{value}/{}", quantity(target.get("value")))
                    }
                }
                "Pods" => format!(
                    "{}/{}",
                    current("pods", "averageValue").unwrap_or_else(|| "<unknown>".to_owned()),
                    quantity(spec.at("/pods/target/averageValue"))
                ),
                source @ ("Resource" | "ContainerResource") => {
                    let key = if source == "Resource" {
                        "resource"
                    } else {
                        "containerResource"
                    };
                    let resource = str_at(spec, &[key, "name"]);
                    let target = &spec[key]["target"];
                    if target.get("averageValue").is_some_and(|v| !v.is_null()) {
                        format!(
                            "{resource}: {}/{}",
                            current(key, "averageValue").unwrap_or_else(|| "<unknown>".to_owned()),
                            quantity(target.get("averageValue"))
                        )
                    } else {
                        let now = status
                            .and_then(|s| s.at(&format!("/{key}/current/averageUtilization")))
                            .and_then(Value::as_i64)
                            .map_or_else(|| "<unknown>".to_owned(), |u| format!("{u}%"));
                        let want = target
                            .get("averageUtilization")
                            .and_then(Value::as_i64)
                            .map_or_else(|| "<auto>".to_owned(), |u| format!("{u}%"));
                        format!("{resource}: {now}/{want}")
                    }
                }
                _ => "<unknown type>".to_owned(),
            }
        })
        .collect();
    const MAX: usize = 2;
    if list.len() > MAX {
        format!("{} + {} more...", list[..MAX].join(", "), list.len() - MAX)
    } else {
        list.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(row: Row) -> Vec<String> {
        row.cells
            .iter()
            .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned))
            .collect()
    }

    #[test]
    fn hpa_rows_show_current_over_target() {
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().expect("now");
        let hpa = json!({"metadata": {"name": "web", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 1,
                "maxReplicas": 10, "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
                    {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}},
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}}
                ]},
            "status": {"currentReplicas": 3, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42, "averageValue": "21m"}}}]}});
        assert_eq!(
            texts(horizontal_pod_autoscaler(&hpa, now)),
            [
                "web",
                "Deployment/web",
                "cpu: 42%/50%, <unknown>/1k + 1 more...",
                "1",
                "10",
                "3",
                "60m"
            ]
        );
        let bare = json!({"metadata": {"name": "x"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "x"}}});
        assert_eq!(
            texts(horizontal_pod_autoscaler(&bare, now))[2..4],
            ["<none>", "<unset>"]
        );
    }
}
