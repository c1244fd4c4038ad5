//! resource.k8s.io/v1 resourceslices: a device taint without `timeAdded` gets the current time, as upstream's defaulting (`SetDefaults_DeviceTaint`) does on every write. The spec's validation is not done.

use serde_json::Value;

use crate::object::now_rfc3339;
use crate::registry::strategy::Strategy;

/// The ResourceSlice strategy.
#[derive(Debug, Default)]
pub struct ResourceSliceStrategy;

/// Sets `timeAdded` to `now` on every taint of `spec.devices[]` that has none: the device
/// taint eviction controller counts tolerations from it.
pub fn default_taint_time_added(obj: &mut Value, now: &str) {
    let Some(devices) = obj
        .pointer_mut("/spec/devices")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for device in devices {
        let Some(taints) = device.get_mut("taints").and_then(Value::as_array_mut) else {
            continue;
        };
        for taint in taints.iter_mut().filter_map(Value::as_object_mut) {
            if taint.get("timeAdded").is_none_or(Value::is_null) {
                taint.insert("timeAdded".to_owned(), Value::String(now.to_owned()));
            }
        }
    }
}

impl Strategy for ResourceSliceStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_taint_time_added(obj, &now_rfc3339());
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_taint_time_added(new, &now_rfc3339());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn taints_without_time_added_get_one_and_others_keep_theirs() {
        let mut slice = json!({"spec": {"devices": [
            {"name": "a", "taints": [
                {"key": "k", "effect": "NoExecute"},
                {"key": "k2", "effect": "NoSchedule", "timeAdded": "2006-01-02T15:04:05Z"},
            ]},
            {"name": "b"},
        ]}});
        default_taint_time_added(&mut slice, "2024-05-01T12:00:00Z");
        let taints = &slice["spec"]["devices"][0]["taints"];
        assert_eq!(taints[0]["timeAdded"], "2024-05-01T12:00:00Z");
        assert_eq!(taints[1]["timeAdded"], "2006-01-02T15:04:05Z");
        assert!(slice["spec"]["devices"][1].get("taints").is_none());
    }
}
