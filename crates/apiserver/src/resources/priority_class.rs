//! scheduling.k8s.io/v1 priorityclasses' behaviour: the two system classes every cluster starts with, protected from deletion and change, and upstream's validation (reserved `system-` names, the user value ceiling, an immutable value and preemption policy).
//!
//! The uniqueness of `globalDefault` and the pods' priorities are the Priority admission
//! plugin's, in [`crate::admission::priority`].

use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::{Value, json};

use crate::object;
use crate::registry::strategy::{Strategy, typed_roundtrip};
use crate::validation::FieldError;

/// The largest value a user-defined class may have (`HighestUserDefinablePriority`).
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;
/// Names with this prefix are reserved for the system classes.
const SYSTEM_PREFIX: &str = "system-";
/// The system classes: name, value, description (upstream's `SystemPriorityClasses`).
const SYSTEM_CLASSES: [(&str, i64, &str); 2] = [
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];
/// Preemption policies.
const PREEMPTION_POLICIES: [&str; 2] = ["Never", "PreemptLowerPriority"];

/// The system classes, created at start when missing (upstream's
/// `scheduling/bootstrap-system-priority-classes` post-start hook).
pub fn system_priority_classes() -> Vec<Value> {
    SYSTEM_CLASSES
        .iter()
        .map(|(name, value, description)| {
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value, "description": description,
                "preemptionPolicy": "PreemptLowerPriority"})
        })
        .collect()
}

/// Decodes a PriorityClass with upstream's default preemption policy.
pub fn decode_priority_class(obj: Value) -> Result<Value, String> {
    typed_roundtrip::<PriorityClass>(obj, |pc| {
        pc.preemption_policy
            .get_or_insert_with(|| "PreemptLowerPriority".to_owned());
    })
}

/// The PriorityClass strategy (upstream's `priorityClassStrategy` and its REST `Delete`).
#[derive(Debug, Default)]
pub struct PriorityClassStrategy;

impl Strategy for PriorityClassStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let name = object::name(obj);
        let value = obj.get("value").and_then(Value::as_i64).unwrap_or(0);
        if name.starts_with(SYSTEM_PREFIX) {
            if let Err(why) = known_system_class(name, value, global_default(obj)) {
                errs.push(FieldError::forbidden(
                    "metadata.name",
                    format!(
                        "priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: {why}"
                    ),
                ));
            }
        } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
            errs.push(FieldError::forbidden(
                "value",
                format!(
                    "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
                ),
            ));
        }
        if let Some(policy) = obj.get("preemptionPolicy").and_then(Value::as_str)
            && !PREEMPTION_POLICIES.contains(&policy)
        {
            errs.push(FieldError::not_supported(
                "preemptionPolicy",
                policy,
                &PREEMPTION_POLICIES,
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("value") != old.get("value") {
            errs.push(FieldError::forbidden(
                "value",
                "may not be changed in an update.",
            ));
        }
        if new.get("preemptionPolicy") != old.get("preemptionPolicy") {
            errs.push(FieldError::invalid(
                "preemptionPolicy",
                new.get("preemptionPolicy").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errs
    }

    fn forbid_delete(&self, name: &str) -> Option<&'static str> {
        SYSTEM_CLASSES
            .iter()
            .any(|(system, _, _)| *system == name)
            .then_some("this is a system priority class and cannot be deleted")
    }
}

fn global_default(obj: &Value) -> bool {
    obj.get("globalDefault").and_then(Value::as_bool) == Some(true)
}

/// upstream's `IsKnownSystemPriorityClass`: a system name, with its value and no global
/// default.
fn known_system_class(name: &str, value: i64, global_default: bool) -> Result<(), String> {
    let Some((_, want, _)) = SYSTEM_CLASSES.iter().find(|(n, _, _)| *n == name) else {
        return Err(format!("name {name} is not a known system priority class"));
    };
    if value != *want {
        return Err(format!("value of {name} PriorityClass must be {want}"));
    }
    if global_default {
        return Err(format!(
            "globalDefault of {name} PriorityClass must be false"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, value: i64) -> Value {
        decode_priority_class(
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}),
        )
        .expect("decodes")
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn system_classes_are_upstreams_and_valid() {
        let classes = system_priority_classes();
        assert_eq!(classes.len(), 2);
        for c in &classes {
            let c = decode_priority_class(c.clone()).expect("decodes");
            assert!(PriorityClassStrategy.validate(&c).is_empty(), "{c}");
            assert!(
                PriorityClassStrategy
                    .forbid_delete(object::name(&c))
                    .is_some()
            );
        }
        assert_eq!(classes[0]["value"], 2_000_001_000);
        assert_eq!(classes[1]["metadata"]["name"], "system-cluster-critical");
        assert_eq!(PriorityClassStrategy.forbid_delete("high"), None);
    }

    #[test]
    fn validation_messages_are_upstreams() {
        assert_eq!(
            class("high", 1000)["preemptionPolicy"],
            "PreemptLowerPriority"
        );
        assert_eq!(
            messages(PriorityClassStrategy.validate(&class("system-mine", 5))),
            [
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: name system-mine is not a known system priority class"
            ]
        );
        assert_eq!(
            messages(PriorityClassStrategy.validate(&class("system-node-critical", 5))),
            [
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-node-critical PriorityClass must be 2000001000"
            ]
        );
        assert_eq!(
            messages(PriorityClassStrategy.validate(&class("huge", 1_000_000_001))),
            ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
        );
        let old = class("high", 1000);
        let mut changed = old.clone();
        changed["value"] = json!(2000);
        changed["preemptionPolicy"] = json!("Never");
        assert_eq!(
            messages(PriorityClassStrategy.validate_update(&changed, &old)),
            [
                "value: Forbidden: may not be changed in an update.",
                "preemptionPolicy: Invalid value: \"Never\": field is immutable",
            ]
        );
    }
}
