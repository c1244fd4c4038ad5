//! autoscaling/v1 <-> autoscaling/v2 HorizontalPodAutoscalers, as upstream converts them: v1's `targetCPUUtilizationPercentage` is v2's CPU utilization metric, and everything else v2 has rides in `autoscaling.alpha.kubernetes.io/*` annotations so that an object written as v2 reads back unchanged through v1 and back.
//!
//! The stored form is v2 (upstream's storage version). [`v2_to_v1`] is upstream's
//! `Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler`, [`v1_to_v2`]
//! the reverse (including its implicit 80% CPU target when no metric remains). The annotations
//! hold v1's metric shapes (`targetAverageUtilization`, `metricName`, ...), and the behavior
//! annotation holds upstream's internal type marshalled without JSON tags (`ScaleUp`,
//! `StabilizationWindowSeconds`, ...), exactly as kube-apiserver writes it.

use serde_json::{Map, Value, json};

use crate::pointer::At;

/// v2 metrics v1 cannot express (every metric but a CPU utilization target), v1-shaped.
pub const METRIC_SPECS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// v2 `status.currentMetrics`, v1-shaped.
pub const METRIC_STATUSES_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// v2 `status.conditions`.
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// v2 `spec.behavior`, as upstream's internal type.
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// The CPU utilization v1 always implied when no metric is given.
pub const DEFAULT_CPU_UTILIZATION: i64 = 80;

const ROUND_TRIP_ANNOTATIONS: [&str; 4] = [
    METRIC_SPECS_ANNOTATION,
    METRIC_STATUSES_ANNOTATION,
    CONDITIONS_ANNOTATION,
    BEHAVIOR_ANNOTATION,
];

/// A stored (v2) object as autoscaling/v1.
pub fn v2_to_v1(mut obj: Value) -> Value {
    obj["apiVersion"] = json!("autoscaling/v1");
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = obj.get("status").cloned();
    let mut annotations = take_annotations(&mut obj);

    let metrics = spec
        .get("metrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut v1_spec = Map::new();
    for key in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        if let Some(v) = spec.get(key) {
            v1_spec.insert(key.to_owned(), v.clone());
        }
    }
    if let Some(target) = metrics.iter().find_map(cpu_utilization_target) {
        v1_spec.insert("targetCPUUtilizationPercentage".to_owned(), json!(target));
    }
    let other: Vec<Value> = metrics
        .iter()
        .filter(|m| cpu_utilization_target(m).is_none())
        .map(metric_spec_to_v1)
        .collect();
    if !other.is_empty() {
        annotations.insert(
            METRIC_SPECS_ANNOTATION.to_owned(),
            json!(compact(&json!(other))),
        );
    }
    if let Some(behavior) = spec.get("behavior").filter(|b| !b.is_null()) {
        annotations.insert(
            BEHAVIOR_ANNOTATION.to_owned(),
            json!(compact(&behavior_to_internal(behavior))),
        );
    }
    obj["spec"] = Value::Object(v1_spec);

    if let Some(status) = status.filter(Value::is_object) {
        let mut v1_status = Map::new();
        for key in [
            "observedGeneration",
            "lastScaleTime",
            "currentReplicas",
            "desiredReplicas",
        ] {
            if let Some(v) = status.get(key) {
                v1_status.insert(key.to_owned(), v.clone());
            }
        }
        let current = status
            .get("currentMetrics")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if let Some(cpu) = current.iter().find_map(|m| {
            (m["type"] == "Resource" && m.at("/resource/name") == Some(&json!("cpu")))
                .then(|| m.at("/resource/current/averageUtilization").cloned())
                .flatten()
        }) {
            v1_status.insert("currentCPUUtilizationPercentage".to_owned(), cpu);
        }
        if !current.is_empty() {
            let v1: Vec<Value> = current.iter().map(metric_status_to_v1).collect();
            annotations.insert(
                METRIC_STATUSES_ANNOTATION.to_owned(),
                json!(compact(&json!(v1))),
            );
        }
        if let Some(conditions) = status
            .get("conditions")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty())
        {
            annotations.insert(
                CONDITIONS_ANNOTATION.to_owned(),
                json!(compact(&json!(conditions))),
            );
        }
        obj["status"] = Value::Object(v1_status);
    }
    put_annotations(&mut obj, annotations);
    obj
}

/// An autoscaling/v1 object in its stored (v2) form, with v2's defaults.
pub fn v1_to_v2(mut obj: Value) -> Value {
    obj["apiVersion"] = json!("autoscaling/v2");
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = obj.get("status").cloned();
    let given = obj
        .at("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let annotations = take_annotations(&mut obj);
    let annotated = |key: &str| {
        given
            .get(key)
            .and_then(Value::as_str)
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
    };

    let mut v2_spec = Map::new();
    for key in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        if let Some(v) = spec.get(key) {
            v2_spec.insert(key.to_owned(), v.clone());
        }
    }
    let mut metrics: Vec<Value> = annotated(METRIC_SPECS_ANNOTATION)
        .and_then(|m| m.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(metric_spec_from_v1)
        .collect();
    if let Some(target) = spec
        .get("targetCPUUtilizationPercentage")
        .filter(|t| !t.is_null())
    {
        metrics.push(cpu_metric(target.clone()));
    }
    if metrics.is_empty() {
        metrics.push(cpu_metric(json!(DEFAULT_CPU_UTILIZATION)));
    }
    v2_spec.insert("metrics".to_owned(), Value::Array(metrics));
    if let Some(behavior) = annotated(BEHAVIOR_ANNOTATION)
        .map(|b| behavior_from_internal(&b))
        .filter(|b| b.as_object().is_some_and(|m| !m.is_empty()))
    {
        v2_spec.insert("behavior".to_owned(), behavior);
    }
    obj["spec"] = Value::Object(v2_spec);

    if let Some(status) = status.filter(Value::is_object) {
        let mut v2_status = Map::new();
        for key in [
            "observedGeneration",
            "lastScaleTime",
            "currentReplicas",
            "desiredReplicas",
        ] {
            if let Some(v) = status.get(key) {
                v2_status.insert(key.to_owned(), v.clone());
            }
        }
        let current =
            match annotated(METRIC_STATUSES_ANNOTATION).and_then(|m| m.as_array().cloned()) {
                Some(list) => list.iter().map(metric_status_from_v1).collect(),
                None => status
                    .get("currentCPUUtilizationPercentage")
                    .filter(|c| !c.is_null())
                    .map(|cpu| {
                        vec![json!({"type": "Resource", "resource": {"name": "cpu",
                        "current": {"averageUtilization": cpu}}})]
                    })
                    .unwrap_or_default(),
            };
        if !current.is_empty() {
            v2_status.insert("currentMetrics".to_owned(), Value::Array(current));
        }
        if let Some(conditions) = annotated(CONDITIONS_ANNOTATION).filter(Value::is_array) {
            v2_status.insert("conditions".to_owned(), conditions);
        }
        obj["status"] = Value::Object(v2_status);
    }
    put_annotations(&mut obj, annotations);
    obj
}

/// The metric's CPU average utilization target, if it is a CPU utilization metric.
fn cpu_utilization_target(metric: &Value) -> Option<Value> {
    (metric["type"] == "Resource" && metric.at("/resource/name") == Some(&json!("cpu")))
        .then(|| metric.at("/resource/target/averageUtilization").cloned())
        .flatten()
        .filter(|v| !v.is_null())
}

fn cpu_metric(utilization: Value) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": utilization}}})
}

/// The annotations without the round-trip ones (upstream drops any stale ones first).
fn take_annotations(obj: &mut Value) -> Map<String, Value> {
    let mut annotations = obj
        .at("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for key in ROUND_TRIP_ANNOTATIONS {
        annotations.remove(key);
    }
    annotations
}

fn put_annotations(obj: &mut Value, annotations: Map<String, Value>) {
    let meta = crate::object::metadata_mut(obj);
    if annotations.is_empty() {
        meta.remove("annotations");
    } else {
        meta.insert("annotations".to_owned(), Value::Object(annotations));
    }
}

/// Field names of the types the annotations hold, in their Go declaration order (which
/// `json.Marshal` follows): v1 metric specs and statuses, cross-version references,
/// conditions, label selectors, and the internal behavior type.
const GO_FIELD_ORDER: [&str; 41] = [
    "type",
    "status",
    "lastTransitionTime",
    "reason",
    "message",
    "kind",
    "name",
    "apiVersion",
    "target",
    "metricName",
    "metricSelector",
    "targetValue",
    "currentValue",
    "targetAverageUtilization",
    "currentAverageUtilization",
    "targetAverageValue",
    "currentAverageValue",
    "selector",
    "averageValue",
    "container",
    "object",
    "pods",
    "resource",
    "containerResource",
    "external",
    "matchLabels",
    "matchExpressions",
    "key",
    "operator",
    "values",
    "ScaleUp",
    "ScaleDown",
    "StabilizationWindowSeconds",
    "SelectPolicy",
    "Policies",
    "Tolerance",
    "Type",
    "Value",
    "PeriodSeconds",
    "describedObject",
    "metric",
];

/// Go's `json.Marshal` output: compact, struct fields in declaration order (objects whose
/// keys are all known fields), map keys sorted (every other object).
fn compact(v: &Value) -> String {
    let mut out = String::new();
    write_go_json(v, &mut out);
    out
}

fn write_go_json(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let rank = |k: &str| GO_FIELD_ORDER.iter().position(|f| *f == k);
            let mut keys: Vec<&String> = map.keys().collect();
            if keys.iter().all(|k| rank(k).is_some()) {
                keys.sort_by_key(|k| rank(k));
            }
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*key).clone()).to_string());
                out.push(':');
                write_go_json(&map[key.as_str()], out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Copies `from[key]` to `to[as_key]` when present and not null.
fn copy(from: &Value, key: &str, to: &mut Map<String, Value>, as_key: &str) {
    if let Some(v) = from.get(key).filter(|v| !v.is_null()) {
        to.insert(as_key.to_owned(), v.clone());
    }
}

/// A v2 `MetricSpec` in v1's shape (upstream's `Convert_autoscaling_MetricSpec_To_v1_MetricSpec`).
fn metric_spec_to_v1(m: &Value) -> Value {
    let mut out = Map::new();
    copy(m, "type", &mut out, "type");
    if let Some(src) = m.get("object").filter(|v| v.is_object()) {
        let mut o = Map::new();
        o.insert(
            "target".to_owned(),
            src.get("describedObject")
                .cloned()
                .unwrap_or_else(|| json!({})),
        );
        copy(&src["metric"], "name", &mut o, "metricName");
        o.insert(
            "targetValue".to_owned(),
            src.at("/target/value")
                .cloned()
                .unwrap_or_else(|| json!("0")),
        );
        copy(&src["metric"], "selector", &mut o, "selector");
        copy(&src["target"], "averageValue", &mut o, "averageValue");
        out.insert("object".to_owned(), Value::Object(o));
    }
    if let Some(src) = m.get("pods").filter(|v| v.is_object()) {
        let mut o = Map::new();
        copy(&src["metric"], "name", &mut o, "metricName");
        o.insert(
            "targetAverageValue".to_owned(),
            src.at("/target/averageValue")
                .cloned()
                .unwrap_or_else(|| json!("0")),
        );
        copy(&src["metric"], "selector", &mut o, "selector");
        out.insert("pods".to_owned(), Value::Object(o));
    }
    for (key, container) in [("resource", false), ("containerResource", true)] {
        if let Some(src) = m.get(key).filter(|v| v.is_object()) {
            let mut o = Map::new();
            copy(src, "name", &mut o, "name");
            copy(
                &src["target"],
                "averageUtilization",
                &mut o,
                "targetAverageUtilization",
            );
            copy(&src["target"], "averageValue", &mut o, "targetAverageValue");
            if container {
                copy(src, "container", &mut o, "container");
            }
            out.insert(key.to_owned(), Value::Object(o));
        }
    }
    if let Some(src) = m.get("external").filter(|v| v.is_object()) {
        let mut o = Map::new();
        copy(&src["metric"], "name", &mut o, "metricName");
        copy(&src["metric"], "selector", &mut o, "metricSelector");
        copy(&src["target"], "value", &mut o, "targetValue");
        copy(&src["target"], "averageValue", &mut o, "targetAverageValue");
        out.insert("external".to_owned(), Value::Object(o));
    }
    Value::Object(out)
}

/// A v1-shaped `MetricSpec` in v2's (upstream's `Convert_v1_MetricSpec_To_autoscaling_MetricSpec`).
fn metric_spec_from_v1(m: &Value) -> Value {
    let mut out = Map::new();
    copy(m, "type", &mut out, "type");
    let identifier = |src: &Value, name: &str, selector: &str| {
        let mut id = Map::new();
        copy(src, name, &mut id, "name");
        copy(src, selector, &mut id, "selector");
        Value::Object(id)
    };
    if let Some(src) = m.get("object").filter(|v| v.is_object()) {
        let mut target = Map::new();
        let kind = if src.get("averageValue").is_some_and(|v| !v.is_null()) {
            "AverageValue"
        } else {
            "Value"
        };
        target.insert("type".to_owned(), json!(kind));
        target.insert(
            "value".to_owned(),
            src.get("targetValue")
                .cloned()
                .unwrap_or_else(|| json!("0")),
        );
        copy(src, "averageValue", &mut target, "averageValue");
        out.insert(
            "object".to_owned(),
            json!({"describedObject": src.get("target").cloned().unwrap_or_else(|| json!({})),
                "metric": identifier(src, "metricName", "selector"),
                "target": Value::Object(target)}),
        );
    }
    if let Some(src) = m.get("pods").filter(|v| v.is_object()) {
        out.insert(
            "pods".to_owned(),
            json!({"metric": identifier(src, "metricName", "selector"),
                "target": {"type": "AverageValue",
                    "averageValue": src.get("targetAverageValue").cloned().unwrap_or_else(|| json!("0"))}}),
        );
    }
    for (key, container) in [("resource", false), ("containerResource", true)] {
        if let Some(src) = m.get(key).filter(|v| v.is_object()) {
            let mut target = Map::new();
            let utilization = src.get("targetAverageUtilization").filter(|v| !v.is_null());
            target.insert(
                "type".to_owned(),
                json!(if utilization.is_some() {
                    "Utilization"
                } else {
                    "AverageValue"
                }),
            );
            copy(src, "targetAverageValue", &mut target, "averageValue");
            copy(
                src,
                "targetAverageUtilization",
                &mut target,
                "averageUtilization",
            );
            let mut o = Map::new();
            copy(src, "name", &mut o, "name");
            if container {
                copy(src, "container", &mut o, "container");
            }
            o.insert("target".to_owned(), Value::Object(target));
            out.insert(key.to_owned(), Value::Object(o));
        }
    }
    if let Some(src) = m.get("external").filter(|v| v.is_object()) {
        let mut target = Map::new();
        let value = src.get("targetValue").filter(|v| !v.is_null());
        target.insert(
            "type".to_owned(),
            json!(if value.is_some() {
                "Value"
            } else {
                "AverageValue"
            }),
        );
        copy(src, "targetValue", &mut target, "value");
        copy(src, "targetAverageValue", &mut target, "averageValue");
        out.insert(
            "external".to_owned(),
            json!({"metric": identifier(src, "metricName", "metricSelector"),
                "target": Value::Object(target)}),
        );
    }
    Value::Object(out)
}

/// A v2 `MetricStatus` in v1's shape.
fn metric_status_to_v1(m: &Value) -> Value {
    let mut out = Map::new();
    copy(m, "type", &mut out, "type");
    if let Some(src) = m.get("object").filter(|v| v.is_object()) {
        let mut o = Map::new();
        o.insert(
            "target".to_owned(),
            src.get("describedObject")
                .cloned()
                .unwrap_or_else(|| json!({})),
        );
        copy(&src["metric"], "name", &mut o, "metricName");
        o.insert(
            "currentValue".to_owned(),
            src.at("/current/value")
                .cloned()
                .unwrap_or_else(|| json!("0")),
        );
        copy(&src["metric"], "selector", &mut o, "selector");
        copy(&src["current"], "averageValue", &mut o, "averageValue");
        out.insert("object".to_owned(), Value::Object(o));
    }
    if let Some(src) = m.get("pods").filter(|v| v.is_object()) {
        let mut o = Map::new();
        copy(&src["metric"], "name", &mut o, "metricName");
        o.insert(
            "currentAverageValue".to_owned(),
            src.at("/current/averageValue")
                .cloned()
                .unwrap_or_else(|| json!("0")),
        );
        copy(&src["metric"], "selector", &mut o, "selector");
        out.insert("pods".to_owned(), Value::Object(o));
    }
    for (key, container) in [("resource", false), ("containerResource", true)] {
        if let Some(src) = m.get(key).filter(|v| v.is_object()) {
            let mut o = Map::new();
            copy(src, "name", &mut o, "name");
            copy(
                &src["current"],
                "averageUtilization",
                &mut o,
                "currentAverageUtilization",
            );
            o.insert(
                "currentAverageValue".to_owned(),
                src.at("/current/averageValue")
                    .cloned()
                    .unwrap_or_else(|| json!("0")),
            );
            if container {
                copy(src, "container", &mut o, "container");
            }
            out.insert(key.to_owned(), Value::Object(o));
        }
    }
    if let Some(src) = m.get("external").filter(|v| v.is_object()) {
        let mut o = Map::new();
        copy(&src["metric"], "name", &mut o, "metricName");
        copy(&src["metric"], "selector", &mut o, "metricSelector");
        o.insert(
            "currentValue".to_owned(),
            src.at("/current/value")
                .cloned()
                .unwrap_or_else(|| json!("0")),
        );
        copy(
            &src["current"],
            "averageValue",
            &mut o,
            "currentAverageValue",
        );
        out.insert("external".to_owned(), Value::Object(o));
    }
    Value::Object(out)
}

/// A v1-shaped `MetricStatus` in v2's.
fn metric_status_from_v1(m: &Value) -> Value {
    let mut out = Map::new();
    copy(m, "type", &mut out, "type");
    let identifier = |src: &Value, selector: &str| {
        let mut id = Map::new();
        copy(src, "metricName", &mut id, "name");
        copy(src, selector, &mut id, "selector");
        Value::Object(id)
    };
    if let Some(src) = m.get("object").filter(|v| v.is_object()) {
        let mut current = Map::new();
        copy(src, "currentValue", &mut current, "value");
        copy(src, "averageValue", &mut current, "averageValue");
        out.insert(
            "object".to_owned(),
            json!({"describedObject": src.get("target").cloned().unwrap_or_else(|| json!({})),
                "metric": identifier(src, "selector"), "current": Value::Object(current)}),
        );
    }
    if let Some(src) = m.get("pods").filter(|v| v.is_object()) {
        let mut current = Map::new();
        copy(src, "currentAverageValue", &mut current, "averageValue");
        out.insert(
            "pods".to_owned(),
            json!({"metric": identifier(src, "selector"), "current": Value::Object(current)}),
        );
    }
    for (key, container) in [("resource", false), ("containerResource", true)] {
        if let Some(src) = m.get(key).filter(|v| v.is_object()) {
            let mut current = Map::new();
            copy(src, "currentAverageValue", &mut current, "averageValue");
            copy(
                src,
                "currentAverageUtilization",
                &mut current,
                "averageUtilization",
            );
            let mut o = Map::new();
            copy(src, "name", &mut o, "name");
            if container {
                copy(src, "container", &mut o, "container");
            }
            o.insert("current".to_owned(), Value::Object(current));
            out.insert(key.to_owned(), Value::Object(o));
        }
    }
    if let Some(src) = m.get("external").filter(|v| v.is_object()) {
        let mut current = Map::new();
        copy(src, "currentValue", &mut current, "value");
        copy(src, "currentAverageValue", &mut current, "averageValue");
        out.insert(
            "external".to_owned(),
            json!({"metric": identifier(src, "metricSelector"), "current": Value::Object(current)}),
        );
    }
    Value::Object(out)
}

/// v2 `behavior` as upstream's internal type marshals (Go field names, every field).
fn behavior_to_internal(behavior: &Value) -> Value {
    let rules = |r: &Value| {
        if r.is_null() {
            return Value::Null;
        }
        let policies: Option<Vec<Value>> = r.get("policies").and_then(Value::as_array).map(|ps| {
            ps.iter()
                .map(|p| {
                    json!({"Type": p.get("type").cloned().unwrap_or(json!("")),
                        "Value": p.get("value").cloned().unwrap_or(json!(0)),
                        "PeriodSeconds": p.get("periodSeconds").cloned().unwrap_or(json!(0))})
                })
                .collect()
        });
        json!({
            "StabilizationWindowSeconds": r.get("stabilizationWindowSeconds").cloned().unwrap_or(Value::Null),
            "SelectPolicy": r.get("selectPolicy").cloned().unwrap_or(Value::Null),
            "Policies": policies,
            "Tolerance": r.get("tolerance").cloned().unwrap_or(Value::Null),
        })
    };
    json!({
        "ScaleUp": rules(behavior.get("scaleUp").unwrap_or(&Value::Null)),
        "ScaleDown": rules(behavior.get("scaleDown").unwrap_or(&Value::Null)),
    })
}

/// The behavior annotation back to v2 `behavior` (JSON field names, nulls dropped).
fn behavior_from_internal(internal: &Value) -> Value {
    let rules = |r: &Value| {
        let mut out = Map::new();
        copy(
            r,
            "StabilizationWindowSeconds",
            &mut out,
            "stabilizationWindowSeconds",
        );
        copy(r, "SelectPolicy", &mut out, "selectPolicy");
        if let Some(ps) = r.get("Policies").and_then(Value::as_array) {
            let policies: Vec<Value> = ps
                .iter()
                .map(|p| {
                    json!({"type": p.get("Type").cloned().unwrap_or(json!("")),
                        "value": p.get("Value").cloned().unwrap_or(json!(0)),
                        "periodSeconds": p.get("PeriodSeconds").cloned().unwrap_or(json!(0))})
                })
                .collect();
            out.insert("policies".to_owned(), Value::Array(policies));
        }
        copy(r, "Tolerance", &mut out, "tolerance");
        Value::Object(out)
    };
    let mut out = Map::new();
    for (internal_key, key) in [("ScaleUp", "scaleUp"), ("ScaleDown", "scaleDown")] {
        if let Some(r) = internal.get(internal_key).filter(|r| r.is_object()) {
            out.insert(key.to_owned(), rules(r));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2() -> Value {
        json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default", "annotations": {"team": "a"}},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 10,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 60}}},
                    {"type": "Pods", "pods": {"metric": {"name": "requests_per_second"},
                        "target": {"type": "AverageValue", "averageValue": "1k"}}},
                    {"type": "Resource", "resource": {"name": "memory",
                        "target": {"type": "AverageValue", "averageValue": "500Mi"}}}
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}
            },
            "status": {"currentReplicas": 2, "desiredReplicas": 3,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 75, "averageValue": "150m"}}}],
                "conditions": [{"type": "AbleToScale", "status": "True",
                    "lastTransitionTime": "2024-05-01T00:00:00Z", "reason": "ReadyForNewScale"}]}
        })
    }

    #[test]
    fn v2_reads_as_v1_with_the_rest_in_annotations() {
        let v1 = v2_to_v1(v2());
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        assert_eq!(v1["spec"].get("metrics"), None);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 75);
        let annotations = &v1["metadata"]["annotations"];
        assert_eq!(annotations["team"], "a");
        assert_eq!(
            annotations[METRIC_SPECS_ANNOTATION],
            r#"[{"type":"Pods","pods":{"metricName":"requests_per_second","targetAverageValue":"1k"}},{"type":"Resource","resource":{"name":"memory","targetAverageValue":"500Mi"}}]"#
        );
        assert_eq!(
            annotations[BEHAVIOR_ANNOTATION],
            r#"{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":300,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}"#
        );
        assert!(
            annotations[CONDITIONS_ANNOTATION]
                .as_str()
                .is_some_and(|c| c.contains("AbleToScale"))
        );
        assert!(
            annotations[METRIC_STATUSES_ANNOTATION]
                .as_str()
                .is_some_and(|c| c.contains("currentAverageUtilization"))
        );
    }

    #[test]
    fn v2_round_trips_through_v1() {
        let mut back = v1_to_v2(v2_to_v1(v2()));
        let original = v2();
        // v1 puts the CPU target last: the metrics hold the same set, in upstream's order.
        let metrics = back["spec"]["metrics"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(metrics.len(), 3);
        assert_eq!(metrics[2], original["spec"]["metrics"][0]);
        assert_eq!(metrics[0], original["spec"]["metrics"][1]);
        assert_eq!(metrics[1], original["spec"]["metrics"][2]);
        back["spec"]["metrics"] = original["spec"]["metrics"].clone();
        assert_eq!(back, original);
    }

    #[test]
    fn a_v1_object_gets_the_implicit_cpu_target() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}});
        let stored = v1_to_v2(v1);
        assert_eq!(stored["spec"]["metrics"], json!([cpu_metric(json!(80))]));
        assert_eq!(
            v2_to_v1(stored)["spec"]["targetCPUUtilizationPercentage"],
            80
        );
        let explicit =
            v1_to_v2(json!({"spec": {"maxReplicas": 3, "targetCPUUtilizationPercentage": 50}}));
        assert_eq!(explicit["spec"]["metrics"], json!([cpu_metric(json!(50))]));
    }
}
