//! DRA device taints and tolerations: whether a device toleration tolerates a device taint
//! (`k8s.io/dynamic-resource-allocation/resourceclaim`'s `ToleratesTaint`) and whether a
//! device's taints keep a request from allocating it (the allocator's `taintPreventsAllocation`).

use super::taints::{TaintFields, TolerationFields, tolerates_fields};
use k8s_openapi::api::resource::v1::{DeviceTaint, DeviceToleration};

/// The taint effect that evicts (`resourceapi.DeviceTaintEffectNoExecute`).
pub const EFFECT_NO_EXECUTE: &str = "NoExecute";
/// The taint effect that only keeps new pods away (`DeviceTaintEffectNoSchedule`).
pub const EFFECT_NO_SCHEDULE: &str = "NoSchedule";
/// The taint effect that does nothing but inform (`DeviceTaintEffectNone`).
pub const EFFECT_NONE: &str = "None";

/// Whether `toleration` tolerates `taint`, as upstream's `resourceclaim.ToleratesTaint`: the
/// effect matches (empty: every effect), the key matches (empty: every key), and for `Equal`
/// (also the empty operator) the value matches; `Exists` matches every value; any other
/// operator matches nothing. Callers still decide which effects they act on.
pub fn tolerates_taint(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    tolerates_fields(
        TolerationFields {
            key: toleration.key.as_deref(),
            operator: toleration.operator.as_deref(),
            value: toleration.value.as_deref(),
            effect: toleration.effect.as_deref(),
        },
        TaintFields {
            key: &taint.key,
            value: taint.value.as_deref(),
            effect: &taint.effect,
        },
    )
}

/// Whether `taints` keep a request with `tolerations` from allocating the device, as the
/// structured allocator's `taintPreventsAllocation`: a `NoSchedule` or `NoExecute` taint that
/// no toleration tolerates does; `None` and unknown effects are ignored.
pub fn taint_prevents_allocation(taints: &[DeviceTaint], tolerations: &[DeviceToleration]) -> bool {
    taints.iter().any(|taint| {
        matches!(
            taint.effect.as_str(),
            EFFECT_NO_EXECUTE | EFFECT_NO_SCHEDULE
        ) && !tolerations.iter().any(|t| tolerates_taint(t, taint))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> DeviceTaint {
        DeviceTaint {
            key: key.to_owned(),
            value: value.map(str::to_owned),
            effect: effect.to_owned(),
            time_added: None,
        }
    }

    fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> DeviceToleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        DeviceToleration {
            key: opt(key),
            operator: opt(operator),
            value: opt(value),
            effect: opt(effect),
            toleration_seconds: None,
        }
    }

    #[test]
    fn matches_as_resourceclaim_tolerates_taint() {
        struct Case {
            name: &'static str,
            toleration: DeviceToleration,
            want: bool,
        }
        let t = taint("example.com/taint", Some("something"), EFFECT_NO_EXECUTE);
        let cases = [
            Case {
                name: "equal key, value and effect",
                toleration: toleration(
                    "example.com/taint",
                    "Equal",
                    "something",
                    EFFECT_NO_EXECUTE,
                ),
                want: true,
            },
            Case {
                name: "empty operator means Equal",
                toleration: toleration("example.com/taint", "", "something", ""),
                want: true,
            },
            Case {
                name: "other value",
                toleration: toleration("example.com/taint", "Equal", "other", EFFECT_NO_EXECUTE),
                want: false,
            },
            Case {
                name: "exists ignores the value",
                toleration: toleration("example.com/taint", "Exists", "", EFFECT_NO_EXECUTE),
                want: true,
            },
            Case {
                name: "empty key with Exists tolerates every taint",
                toleration: toleration("", "Exists", "", ""),
                want: true,
            },
            Case {
                name: "other effect",
                toleration: toleration("example.com/taint", "Exists", "", EFFECT_NO_SCHEDULE),
                want: false,
            },
            Case {
                name: "other key",
                toleration: toleration("example.com/other", "Exists", "", ""),
                want: false,
            },
            Case {
                name: "unknown operator",
                toleration: toleration("example.com/taint", "Lt", "something", ""),
                want: false,
            },
        ];
        for case in cases {
            assert_eq!(
                tolerates_taint(&case.toleration, &t),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn only_untolerated_scheduling_effects_prevent_allocation() {
        let no_schedule = taint("example.com/taint", None, EFFECT_NO_SCHEDULE);
        let no_execute = taint("example.com/taint", None, EFFECT_NO_EXECUTE);
        let none = taint("example.com/taint", None, EFFECT_NONE);
        let unknown = taint("example.com/taint", None, "SomeFutureEffect");
        let tolerate_all = [toleration("", "Exists", "", "")];
        let tolerate_no_schedule = [toleration(
            "example.com/taint",
            "Exists",
            "",
            EFFECT_NO_SCHEDULE,
        )];

        assert!(!taint_prevents_allocation(&[], &[]), "an untainted device");
        assert!(taint_prevents_allocation(
            std::slice::from_ref(&no_schedule),
            &[]
        ));
        assert!(taint_prevents_allocation(
            std::slice::from_ref(&no_execute),
            &[]
        ));
        assert!(
            !taint_prevents_allocation(std::slice::from_ref(&none), &[]),
            "None only informs"
        );
        assert!(
            !taint_prevents_allocation(&[unknown], &[]),
            "unknown effects are ignored"
        );
        assert!(!taint_prevents_allocation(
            &[no_schedule.clone(), no_execute.clone()],
            &tolerate_all
        ));
        assert!(!taint_prevents_allocation(
            std::slice::from_ref(&no_schedule),
            &tolerate_no_schedule
        ));
        assert!(
            taint_prevents_allocation(&[no_schedule, no_execute, none], &tolerate_no_schedule),
            "every scheduling taint must be tolerated"
        );
    }
}
