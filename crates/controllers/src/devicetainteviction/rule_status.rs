//! The `EvictionInProgress` condition of a DeviceTaintRule's status, from counts of pending and evicted pods (the condition built in upstream's `maybeUpdateRuleStatus`).

use std::time::Duration;

use k8s_openapi::api::resource::v1beta2::DeviceTaintRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::tolerations::{EFFECT_NO_EXECUTE, EFFECT_NONE};

/// The condition type (`resourceapi.DeviceTaintConditionEvictionInProgress`).
pub const CONDITION_EVICTION_IN_PROGRESS: &str = "EvictionInProgress";

/// The shortest time between status updates of a rule while eviction is in progress
/// (upstream's `ruleStatusPeriod`).
pub const RULE_STATUS_PERIOD: Duration = Duration::from_secs(10);

/// What the condition reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleCounts {
    /// Published devices the rule selects (reported for effect `None` only).
    pub tainted_slice_devices: i64,
    /// Allocated devices the rule selects (reported for effect `None` only).
    pub tainted_allocated_devices: i64,
    /// Pods (not being deleted) that the rule evicts or, for `None`, would evict.
    pub pending_pods: i64,
    /// The namespaces of those pods.
    pub pending_namespaces: i64,
    /// Pods this controller evicted because of the rule since it started.
    pub evicted_pods: i64,
}

fn plural(n: i64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// The `EvictionInProgress` condition for `rule` given `counts`, carrying
/// `last_transition_time` (the existing condition's, so that an unchanged condition compares
/// equal; the caller stamps a changed one).
pub fn eviction_condition(
    rule: &DeviceTaintRule,
    counts: &RuleCounts,
    last_transition_time: Time,
) -> Condition {
    let effect = rule.spec.taint.effect.as_str();
    let mut status = "False";
    let mut message = String::new();
    let reason = match effect {
        EFFECT_NO_EXECUTE if counts.pending_pods > 0 => {
            status = "True";
            message = format!(
                "{} to be evicted in {}",
                plural(counts.pending_pods, "pod needs", "pods need"),
                if counts.pending_namespaces == 1 {
                    "1 namespace.".to_owned()
                } else {
                    format!("{} different namespaces.", counts.pending_namespaces)
                }
            );
            "PodsPendingEviction"
        }
        EFFECT_NO_EXECUTE if counts.evicted_pods > 0 => "Completed",
        EFFECT_NO_EXECUTE => "NotStarted",
        EFFECT_NONE => {
            message = format!(
                "{} selected. {} selected. {} would be evicted in {} if the effect was \
                 NoExecute. This information will not be updated again. Recreate the \
                 DeviceTaintRule to trigger an update.",
                plural(
                    counts.tainted_slice_devices,
                    "published device",
                    "published devices"
                ),
                plural(
                    counts.tainted_allocated_devices,
                    "allocated device",
                    "allocated devices"
                ),
                plural(counts.pending_pods, "pod", "pods"),
                plural(
                    counts.pending_namespaces,
                    "namespace",
                    "different namespaces"
                ),
            );
            "NoEffect"
        }
        _ => {
            message = "Eviction only happens for the NoExecute effect.".to_owned();
            "OtherEffect"
        }
    };
    if counts.evicted_pods > 0 {
        if !message.is_empty() {
            message.push(' ');
        }
        message.push_str(&plural(counts.evicted_pods, "pod", "pods"));
        message.push_str(" evicted since starting the controller.");
    }
    Condition {
        type_: CONDITION_EVICTION_IN_PROGRESS.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: rule.metadata.generation,
        last_transition_time,
    }
}

/// The rule's current `EvictionInProgress` condition, if set.
pub fn existing_condition(rule: &DeviceTaintRule) -> Option<&Condition> {
    rule.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == CONDITION_EVICTION_IN_PROGRESS))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::resource::v1beta2::{DeviceTaint, DeviceTaintRuleSpec};

    use super::*;

    fn rule(effect: &str) -> DeviceTaintRule {
        DeviceTaintRule {
            spec: DeviceTaintRuleSpec {
                taint: DeviceTaint {
                    key: "example.com/taint".to_owned(),
                    effect: effect.to_owned(),
                    ..DeviceTaint::default()
                },
                ..DeviceTaintRuleSpec::default()
            },
            ..DeviceTaintRule::default()
        }
    }

    #[test]
    fn condition_as_upstream_for_each_effect() {
        struct Case {
            name: &'static str,
            effect: &'static str,
            counts: RuleCounts,
            want: (&'static str, &'static str, &'static str),
        }
        let cases = [
            Case {
                name: "nothing yet",
                effect: "NoExecute",
                counts: RuleCounts::default(),
                want: ("False", "NotStarted", ""),
            },
            Case {
                name: "one pending",
                effect: "NoExecute",
                counts: RuleCounts {
                    pending_pods: 1,
                    pending_namespaces: 1,
                    ..RuleCounts::default()
                },
                want: (
                    "True",
                    "PodsPendingEviction",
                    "1 pod needs to be evicted in 1 namespace.",
                ),
            },
            Case {
                name: "several pending, some evicted",
                effect: "NoExecute",
                counts: RuleCounts {
                    pending_pods: 3,
                    pending_namespaces: 2,
                    evicted_pods: 2,
                    ..RuleCounts::default()
                },
                want: (
                    "True",
                    "PodsPendingEviction",
                    "3 pods need to be evicted in 2 different namespaces. 2 pods evicted since starting the controller.",
                ),
            },
            Case {
                name: "done",
                effect: "NoExecute",
                counts: RuleCounts {
                    evicted_pods: 1,
                    ..RuleCounts::default()
                },
                want: (
                    "False",
                    "Completed",
                    "1 pod evicted since starting the controller.",
                ),
            },
            Case {
                name: "simulated",
                effect: "None",
                counts: RuleCounts {
                    tainted_slice_devices: 1,
                    tainted_allocated_devices: 1,
                    pending_pods: 1,
                    pending_namespaces: 1,
                    evicted_pods: 0,
                },
                want: (
                    "False",
                    "NoEffect",
                    "1 published device selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace if the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger an update.",
                ),
            },
            Case {
                name: "no scheduling only",
                effect: "NoSchedule",
                counts: RuleCounts::default(),
                want: (
                    "False",
                    "OtherEffect",
                    "Eviction only happens for the NoExecute effect.",
                ),
            },
        ];
        for case in cases {
            let c = eviction_condition(
                &rule(case.effect),
                &case.counts,
                Time(jiff::Timestamp::UNIX_EPOCH),
            );
            assert_eq!(c.type_, CONDITION_EVICTION_IN_PROGRESS, "{}", case.name);
            assert_eq!(
                (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
                case.want,
                "{}",
                case.name
            );
        }
    }
}
