//! Rows of the resource.k8s.io kinds: DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Row;
use super::duration::since;
use super::fields::{get, list_at, name, str_at, time_at};

fn age(obj: &Value, now: Timestamp) -> Value {
    json!(since(time_at(obj, &["metadata", "creationTimestamp"]), now))
}

/// upstream's `printDeviceClass` and `printResourceClaimTemplate`: NAME and AGE.
pub(super) fn name_and_age(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![json!(name(obj)), age(obj, now)])
}

/// upstream's `printResourceClaim`: STATE is `resourceClaimState`.
pub(super) fn resource_claim(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(claim_state(obj)),
        age(obj, now),
    ])
}

/// upstream's `resourceClaimState`: `deleted`, then `pending` or `allocated` (and
/// `reserved` when consumers hold it), comma-separated.
fn claim_state(obj: &Value) -> String {
    let deleted = get(obj, &["metadata", "deletionTimestamp"]).is_some_and(|t| !t.is_null());
    let allocated = get(obj, &["status", "allocation"]).is_some_and(|a| !a.is_null());
    let mut states = Vec::new();
    if deleted {
        states.push("deleted");
    }
    if !allocated {
        if !deleted {
            states.push("pending");
        }
    } else {
        states.push("allocated");
        if !list_at(obj, &["status", "reservedFor"]).is_empty() {
            states.push("reserved");
        }
    }
    states.join(",")
}

/// upstream's `printResourceSlice`.
pub(super) fn resource_slice(obj: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        json!(name(obj)),
        json!(str_at(obj, &["spec", "nodeName"])),
        json!(str_at(obj, &["spec", "driver"])),
        json!(str_at(obj, &["spec", "pool", "name"])),
        age(obj, now),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("now")
    }

    #[test]
    fn claim_states_are_upstreams() {
        let cases = [
            ("new", json!({}), "pending"),
            (
                "allocated",
                json!({"status": {"allocation": {"devices": {}}}}),
                "allocated",
            ),
            (
                "reserved",
                json!({"status": {"allocation": {}, "reservedFor": [{"name": "p"}]}}),
                "allocated,reserved",
            ),
            (
                "deleted pending",
                json!({"metadata": {"deletionTimestamp": "2024-05-01T11:00:00Z"}}),
                "deleted",
            ),
            (
                "deleted allocated",
                json!({"metadata": {"deletionTimestamp": "2024-05-01T11:00:00Z"},
                    "status": {"allocation": {}}}),
                "deleted,allocated",
            ),
        ];
        for (case, claim, want) in cases {
            assert_eq!(claim_state(&claim), want, "{case}");
        }
        let slice = json!({"metadata": {"name": "s", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "spec": {"nodeName": "n1", "driver": "gpu.example.com", "pool": {"name": "n1"}}});
        assert_eq!(
            resource_slice(&slice, now()).cells,
            [
                json!("s"),
                json!("n1"),
                json!("gpu.example.com"),
                json!("n1"),
                json!("60m")
            ]
        );
    }
}
