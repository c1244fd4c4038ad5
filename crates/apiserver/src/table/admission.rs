//! Rows of the admissionregistration.k8s.io kinds: webhook configurations, the validating and mutating admission policies and their bindings.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Row;
use super::duration::since;
use super::fields::{get, list_at, name, str_at, time_at};

fn age(obj: &Value, now: Timestamp) -> Value {
    json!(since(time_at(obj, &["metadata", "creationTimestamp"]), now))
}

/// upstream's `printValidatingWebhook` / `printMutatingWebhook`.
pub(super) fn webhook_configuration(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(list_at(obj, &["webhooks"]).len()),
        age(obj, now),
    ])
}

/// A policy's PARAMKIND: `apiVersion/Kind`, or `<unset>`.
fn param_kind(obj: &Value) -> String {
    match get(obj, &["spec", "paramKind"]).filter(|p| !p.is_null()) {
        None => "<unset>".to_owned(),
        Some(p) => format!("{}/{}", str_at(p, &["apiVersion"]), str_at(p, &["kind"])),
    }
}

/// upstream's `printValidatingAdmissionPolicy`.
pub(super) fn validating_admission_policy(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(list_at(obj, &["spec", "validations"]).len()),
        json!(param_kind(obj)),
        age(obj, now),
    ])
}

/// upstream's `printMutatingAdmissionPolicy`.
pub(super) fn mutating_admission_policy(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(list_at(obj, &["spec", "mutations"]).len()),
        json!(param_kind(obj)),
        age(obj, now),
    ])
}

/// upstream's `printValidatingAdmissionPolicyBinding` (and `printMutatingAdmissionPolicyBinding`,
/// the same): PARAMREF as `namespace/name`, `*/name`
/// without a namespace, or the selector's Go `String()`.
pub(super) fn validating_admission_policy_binding(obj: &Value, now: Timestamp) -> Row {
    let param = match get(obj, &["spec", "paramRef"]).filter(|p| !p.is_null()) {
        None => "<unset>".to_owned(),
        Some(p) => {
            let param_name = str_at(p, &["name"]);
            let namespace = str_at(p, &["namespace"]);
            match get(p, &["selector"]).filter(|s| !s.is_null()) {
                _ if !param_name.is_empty() && !namespace.is_empty() => {
                    format!("{namespace}/{param_name}")
                }
                _ if !param_name.is_empty() => format!("*/{param_name}"),
                Some(selector) => go_label_selector_string(selector),
                None => "<unset>".to_owned(),
            }
        }
    };
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "policyName"])),
        json!(param),
        age(obj, now),
    ])
}

/// A `metav1.LabelSelector` as its generated Go `String()` prints it.
fn go_label_selector_string(selector: &Value) -> String {
    let mut labels: Vec<(&str, &str)> = get(selector, &["matchLabels"])
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    labels.sort_unstable();
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let expressions: String = list_at(selector, &["matchExpressions"])
        .iter()
        .map(|e| {
            let values: Vec<&str> = list_at(e, &["values"])
                .iter()
                .filter_map(Value::as_str)
                .collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                str_at(e, &["key"]),
                str_at(e, &["operator"]),
                values.join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("now")
    }

    #[test]
    fn admission_rows() {
        let created = "2024-05-01T11:00:00Z";
        let hooks = json!({"metadata": {"name": "w", "creationTimestamp": created},
            "webhooks": [{"name": "a.example.com"}, {"name": "b.example.com"}]});
        assert_eq!(
            webhook_configuration(&hooks, now()).cells,
            [json!("w"), json!(2), json!("60m")]
        );
        let policy = json!({"metadata": {"name": "p", "creationTimestamp": created},
            "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "validations": [{"expression": "true"}]}});
        assert_eq!(
            validating_admission_policy(&policy, now()).cells,
            [json!("p"), json!(1), json!("v1/ConfigMap"), json!("60m")]
        );
        let mutating = json!({"metadata": {"name": "m", "creationTimestamp": created},
            "spec": {"mutations": [{"patchType": "JSONPatch"}, {"patchType": "JSONPatch"}]}});
        assert_eq!(
            mutating_admission_policy(&mutating, now()).cells,
            [json!("m"), json!(2), json!("<unset>"), json!("60m")]
        );
        let binding = |param_ref: Value| json!({"metadata": {"name": "b"}, "spec": {"policyName": "p", "paramRef": param_ref}});
        let cases = [
            (json!({"name": "cfg", "namespace": "ns"}), "ns/cfg"),
            (json!({"name": "cfg"}), "*/cfg"),
            (
                json!({"selector": {"matchLabels": {"b": "2", "a": "1"},
                    "matchExpressions": [{"key": "k", "operator": "In", "values": ["x", "y"]}]}}),
                "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:k,Operator:In,Values:[x y],},},}",
            ),
            (Value::Null, "<unset>"),
        ];
        for (param_ref, want) in cases {
            let cells = validating_admission_policy_binding(&binding(param_ref), now()).cells;
            assert_eq!(cells[2], json!(want));
        }
    }
}
