//! Go's zero `metav1.Time` through kcm's typed decode: Go encodes an unset `metav1.Condition.lastTransitionTime` as `null` and kube-apiserver takes it, but k8s-openapi's `Condition` requires the field, so a decode round trip would refuse the object. The unset times are held by a placeholder for the round trip and given back as `null`.

use serde_json::Value;

use crate::pointer::At;

/// What stands for an unset time during the typed round trip.
const PLACEHOLDER: &str = "1970-01-01T00:00:00Z";

/// The indices of the conditions at `pointer` whose `lastTransitionTime` is unset (absent or
/// `null`), which now hold the placeholder.
pub fn hold(obj: &mut Value, pointer: &str) -> Vec<usize> {
    let Some(Value::Array(conditions)) = obj.pointer_mut(pointer) else {
        return Vec::new();
    };
    let mut held = Vec::new();
    for (i, condition) in conditions.iter_mut().enumerate() {
        let Some(map) = condition.as_object_mut() else {
            continue;
        };
        if map.get("lastTransitionTime").is_none_or(Value::is_null) {
            map.insert("lastTransitionTime".into(), Value::from(PLACEHOLDER));
            held.push(i);
        }
    }
    held
}

/// Gives the conditions [`hold`] found unset their `null` back.
pub fn release(obj: &mut Value, pointer: &str, held: &[usize]) {
    if held.is_empty() || obj.at(pointer).is_none() {
        return;
    }
    if let Some(Value::Array(conditions)) = obj.pointer_mut(pointer) {
        for i in held {
            if let Some(map) = conditions.get_mut(*i).and_then(Value::as_object_mut) {
                map.insert("lastTransitionTime".into(), Value::Null);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unset_times_survive_the_round_trip_as_null() {
        let mut obj = json!({"status": {"conditions": [
            {"type": "A", "status": "True", "reason": "R", "message": ""},
            {"type": "B", "status": "True", "reason": "R", "message": "",
                "lastTransitionTime": "2026-12-02T00:00:00Z"},
            {"type": "C", "status": "True", "reason": "R", "message": "",
                "lastTransitionTime": null},
        ]}});
        let held = hold(&mut obj, "/status/conditions");
        assert_eq!(held, vec![0, 2]);
        assert_eq!(
            obj["status"]["conditions"][0]["lastTransitionTime"],
            PLACEHOLDER
        );
        release(&mut obj, "/status/conditions", &held);
        assert_eq!(
            obj["status"]["conditions"][0]["lastTransitionTime"],
            Value::Null
        );
        assert_eq!(
            obj["status"]["conditions"][1]["lastTransitionTime"],
            "2026-12-02T00:00:00Z"
        );
        assert_eq!(
            obj["status"]["conditions"][2]["lastTransitionTime"],
            Value::Null
        );
        assert!(hold(&mut json!({"spec": {}}), "/status/conditions").is_empty());
    }
}
