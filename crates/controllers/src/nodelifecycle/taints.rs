//! The taints the node lifecycle controller owns, and pure functions to compute and swap them.

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `node.kubernetes.io/not-ready`: the NodeReady condition is False.
pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// `node.kubernetes.io/unreachable`: the NodeReady condition is Unknown.
pub const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// `node.kubernetes.io/unschedulable`: `spec.unschedulable` is set.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// `node.kubernetes.io/memory-pressure`.
pub const TAINT_NODE_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// `node.kubernetes.io/disk-pressure`.
pub const TAINT_NODE_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// `node.kubernetes.io/network-unavailable`.
pub const TAINT_NODE_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
/// `node.kubernetes.io/pid-pressure`.
pub const TAINT_NODE_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";

/// The `NoSchedule` taint effect.
pub const EFFECT_NO_SCHEDULE: &str = "NoSchedule";
/// The `NoExecute` taint effect.
pub const EFFECT_NO_EXECUTE: &str = "NoExecute";

/// Node condition types.
pub const NODE_READY: &str = "Ready";
/// Memory pressure condition type.
pub const NODE_MEMORY_PRESSURE: &str = "MemoryPressure";
/// Disk pressure condition type.
pub const NODE_DISK_PRESSURE: &str = "DiskPressure";
/// PID pressure condition type.
pub const NODE_PID_PRESSURE: &str = "PIDPressure";
/// Network unavailable condition type (owned by the control plane, never set Unknown here).
pub const NODE_NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";

/// Condition statuses.
pub const CONDITION_TRUE: &str = "True";
/// Condition status False.
pub const CONDITION_FALSE: &str = "False";
/// Condition status Unknown.
pub const CONDITION_UNKNOWN: &str = "Unknown";

/// A taint with `key` and `effect` and nothing else, as upstream's taint templates.
pub fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_owned(),
        effect: effect.to_owned(),
        ..Taint::default()
    }
}

/// The NoExecute `unreachable` taint (upstream's `UnreachableTaintTemplate`).
pub fn unreachable_taint() -> Taint {
    taint(TAINT_NODE_UNREACHABLE, EFFECT_NO_EXECUTE)
}

/// The NoExecute `not-ready` taint (upstream's `NotReadyTaintTemplate`).
pub fn not_ready_taint() -> Taint {
    taint(TAINT_NODE_NOT_READY, EFFECT_NO_EXECUTE)
}

/// The NoSchedule taint key a condition of `type_` in `status` maps to, as upstream's
/// `nodeConditionToTaintKeyStatusMap`.
pub fn condition_taint_key(type_: &str, status: &str) -> Option<&'static str> {
    match (type_, status) {
        (NODE_READY, CONDITION_FALSE) => Some(TAINT_NODE_NOT_READY),
        (NODE_READY, CONDITION_UNKNOWN) => Some(TAINT_NODE_UNREACHABLE),
        (NODE_MEMORY_PRESSURE, CONDITION_TRUE) => Some(TAINT_NODE_MEMORY_PRESSURE),
        (NODE_DISK_PRESSURE, CONDITION_TRUE) => Some(TAINT_NODE_DISK_PRESSURE),
        (NODE_NETWORK_UNAVAILABLE, CONDITION_TRUE) => Some(TAINT_NODE_NETWORK_UNAVAILABLE),
        (NODE_PID_PRESSURE, CONDITION_TRUE) => Some(TAINT_NODE_PID_PRESSURE),
        _ => None,
    }
}

/// Whether `key` is a taint this controller derives from a condition (upstream's
/// `taintKeyToNodeConditionMap`).
pub fn is_condition_taint_key(key: &str) -> bool {
    matches!(
        key,
        TAINT_NODE_NOT_READY
            | TAINT_NODE_UNREACHABLE
            | TAINT_NODE_NETWORK_UNAVAILABLE
            | TAINT_NODE_MEMORY_PRESSURE
            | TAINT_NODE_DISK_PRESSURE
            | TAINT_NODE_PID_PRESSURE
    )
}

/// Two taints match when key and effect are equal (upstream's `Taint.MatchTaint`).
pub fn taints_match(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

/// Whether `taints` holds one matching `t` (upstream's `TaintExists`).
pub fn taint_exists(taints: &[Taint], t: &Taint) -> bool {
    taints.iter().any(|x| taints_match(x, t))
}

/// The node's condition of `type_`, if any (upstream's `GetNodeCondition`).
pub fn node_condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The NoSchedule taints the node should carry for its conditions and `spec.unschedulable`,
/// as upstream's `doNoScheduleTaintingPass`.
pub fn desired_no_schedule_taints(node: &Node) -> Vec<Taint> {
    let mut taints = Vec::new();
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    for c in conditions {
        if let Some(key) = condition_taint_key(&c.type_, &c.status) {
            taints.push(taint(key, EFFECT_NO_SCHEDULE));
        }
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        taints.push(taint(TAINT_NODE_UNSCHEDULABLE, EFFECT_NO_SCHEDULE));
    }
    taints
}

/// The NoSchedule taints the node carries that this controller owns.
pub fn owned_no_schedule_taints(node: &Node) -> Vec<Taint> {
    node_taints(node)
        .iter()
        .filter(|t| {
            t.effect == EFFECT_NO_SCHEDULE
                && (t.key == TAINT_NODE_UNSCHEDULABLE || is_condition_taint_key(&t.key))
        })
        .cloned()
        .collect()
}

/// The node's taints (empty without a spec).
pub fn node_taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// `(to_add, to_remove)`: the taints of `desired` missing from `current`, and those of
/// `current` not in `desired`, compared by key and effect (upstream's `TaintSetDiff`).
pub fn taint_set_diff(desired: &[Taint], current: &[Taint]) -> (Vec<Taint>, Vec<Taint>) {
    let add = desired
        .iter()
        .filter(|t| !taint_exists(current, t))
        .cloned()
        .collect();
    let remove = current
        .iter()
        .filter(|t| !taint_exists(desired, t))
        .cloned()
        .collect();
    (add, remove)
}

/// The taints after removing every taint matching one of `remove` and adding (or updating in
/// place) each of `add`, stamped `time_added = now`; `None` when nothing changes. One
/// computation for both halves, so a swap is written in a single update (upstream's
/// `SwapNodeControllerTaint` = `AddOrUpdateTaintOnNode` + `RemoveTaintOffNode`).
pub fn swap_taints(
    current: &[Taint],
    add: &[Taint],
    remove: &[Taint],
    now: jiff::Timestamp,
) -> Option<Vec<Taint>> {
    let mut out: Vec<Taint> = current
        .iter()
        .filter(|t| !taint_exists(remove, t) || taint_exists(add, t))
        .cloned()
        .collect();
    let mut changed = out.len() != current.len();
    for a in add {
        match out.iter_mut().find(|t| taints_match(t, a)) {
            // Same key and effect: upstream's AddOrUpdateTaint keeps it when the value matches
            // (time_added is ignored by the comparison).
            Some(existing) if existing.value == a.value => {}
            Some(existing) => {
                *existing = stamped(a, now);
                changed = true;
            }
            None => {
                out.push(stamped(a, now));
                changed = true;
            }
        }
    }
    changed.then_some(out)
}

fn stamped(t: &Taint, now: jiff::Timestamp) -> Taint {
    let mut t = t.clone();
    if t.effect == EFFECT_NO_EXECUTE {
        t.time_added = Some(Time(now));
    }
    t
}

#[cfg(test)]
mod tests {
    use kcm_testing::{NodeBuilder, node_condition};

    use super::*;

    fn node(conditions: &[(&str, &str)], unschedulable: bool, taints: Vec<Taint>) -> Node {
        NodeBuilder::default()
            .unschedulable(unschedulable)
            .taints(taints)
            .conditions(
                conditions
                    .iter()
                    .map(|(t, s)| node_condition(t, s).build())
                    .collect(),
            )
            .build()
    }

    fn keys(taints: &[Taint]) -> Vec<String> {
        let mut k: Vec<String> = taints
            .iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect();
        k.sort();
        k
    }

    #[test]
    fn conditions_map_to_no_schedule_taints() {
        struct Case {
            name: &'static str,
            conditions: &'static [(&'static str, &'static str)],
            unschedulable: bool,
            want: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "healthy node",
                conditions: &[("Ready", "True"), ("MemoryPressure", "False")],
                unschedulable: false,
                want: &[],
            },
            Case {
                name: "not ready",
                conditions: &[("Ready", "False")],
                unschedulable: false,
                want: &["node.kubernetes.io/not-ready:NoSchedule"],
            },
            Case {
                name: "unknown is unreachable",
                conditions: &[("Ready", "Unknown")],
                unschedulable: false,
                want: &["node.kubernetes.io/unreachable:NoSchedule"],
            },
            Case {
                name: "pressures and network",
                conditions: &[
                    ("Ready", "True"),
                    ("MemoryPressure", "True"),
                    ("DiskPressure", "True"),
                    ("PIDPressure", "True"),
                    ("NetworkUnavailable", "True"),
                ],
                unschedulable: false,
                want: &[
                    "node.kubernetes.io/disk-pressure:NoSchedule",
                    "node.kubernetes.io/memory-pressure:NoSchedule",
                    "node.kubernetes.io/network-unavailable:NoSchedule",
                    "node.kubernetes.io/pid-pressure:NoSchedule",
                ],
            },
            Case {
                name: "cordoned",
                conditions: &[("Ready", "True")],
                unschedulable: true,
                want: &["node.kubernetes.io/unschedulable:NoSchedule"],
            },
        ];
        for case in cases {
            let n = node(case.conditions, case.unschedulable, vec![]);
            assert_eq!(
                keys(&desired_no_schedule_taints(&n)),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn only_owned_no_schedule_taints_are_diffed() {
        let n = node(
            &[("Ready", "True")],
            false,
            vec![
                taint(TAINT_NODE_NOT_READY, EFFECT_NO_SCHEDULE),
                taint("example.com/mine", EFFECT_NO_SCHEDULE),
                taint(TAINT_NODE_UNREACHABLE, EFFECT_NO_EXECUTE),
            ],
        );
        let (add, remove) = taint_set_diff(
            &desired_no_schedule_taints(&n),
            &owned_no_schedule_taints(&n),
        );
        assert!(add.is_empty());
        assert_eq!(keys(&remove), ["node.kubernetes.io/not-ready:NoSchedule"]);
    }

    #[test]
    fn swap_replaces_not_ready_with_unreachable_in_one_step() {
        let now = jiff::Timestamp::from_second(1_000).expect("ts");
        let current = vec![taint("other", EFFECT_NO_SCHEDULE), not_ready_taint()];
        let out = swap_taints(&current, &[unreachable_taint()], &[not_ready_taint()], now)
            .expect("changed");
        assert_eq!(
            keys(&out),
            [
                "node.kubernetes.io/unreachable:NoExecute",
                "other:NoSchedule"
            ]
        );
        let added = out
            .iter()
            .find(|t| t.key == TAINT_NODE_UNREACHABLE)
            .expect("added");
        assert_eq!(added.time_added, Some(Time(now)));
        // Swapping again changes nothing.
        assert!(swap_taints(&out, &[unreachable_taint()], &[not_ready_taint()], now).is_none());
        // Removing a taint that is not there changes nothing.
        assert!(swap_taints(&current[..1], &[], &[not_ready_taint()], now).is_none());
    }
}
