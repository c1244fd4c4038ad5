//! Which tolerations tolerate which taints, and for how long (upstream's `ToleratesTaint`,
//! `GetMatchingTolerations` and `getMinTolerationTime`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Whether `toleration` tolerates `taint`, as core/v1's `Toleration.ToleratesTaint`.
pub use kcm_machinery::scheduling::taints::tolerates_taint as tolerates;

/// `Some(used)` when every taint is tolerated, with the first toleration matching each
/// taint; `None` when one is not (upstream's `GetMatchingTolerations`).
pub fn matching_tolerations<'a>(
    taints: &[Taint],
    tolerations: &'a [Toleration],
) -> Option<Vec<&'a Toleration>> {
    let mut used = Vec::with_capacity(taints.len());
    for taint in taints {
        used.push(tolerations.iter().find(|t| tolerates(t, taint))?);
    }
    Some(used)
}

/// How long the pod may stay: the smallest `tolerationSeconds` (0 for none at all or a
/// non-positive one), `None` for forever (upstream's `getMinTolerationTime`, -1 there).
pub fn min_toleration_time(used: &[&Toleration]) -> Option<Duration> {
    if used.is_empty() {
        return Some(Duration::ZERO);
    }
    let mut min: Option<i64> = None;
    for t in used {
        if let Some(seconds) = t.toleration_seconds {
            if seconds <= 0 {
                return Some(Duration::ZERO);
            }
            min = Some(min.map_or(seconds, |m| m.min(seconds)));
        }
    }
    min.map(|s| Duration::from_secs(s.unsigned_abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        let t = kcm_testing::taint(key, effect);
        match value {
            Some(value) => t.value(value).build(),
            None => t.build(),
        }
    }

    fn tol(key: &str, op: &str, value: &str, effect: &str, seconds: Option<i64>) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Toleration {
            key: opt(key),
            operator: opt(op),
            value: opt(value),
            effect: opt(effect),
            toleration_seconds: seconds,
        }
    }

    #[test]
    fn toleration_matching_as_core_v1() {
        struct Case {
            name: &'static str,
            toleration: Toleration,
            want: bool,
        }
        let t = taint("node.kubernetes.io/unreachable", None, "NoExecute");
        let cases = [
            Case {
                name: "exists on key and effect",
                toleration: tol(
                    "node.kubernetes.io/unreachable",
                    "Exists",
                    "",
                    "NoExecute",
                    Some(300),
                ),
                want: true,
            },
            Case {
                name: "empty key with Exists tolerates everything",
                toleration: tol("", "Exists", "", "", None),
                want: true,
            },
            Case {
                name: "other effect",
                toleration: tol(
                    "node.kubernetes.io/unreachable",
                    "Exists",
                    "",
                    "NoSchedule",
                    None,
                ),
                want: false,
            },
            Case {
                name: "equal with empty value matches a taint without value",
                toleration: tol("node.kubernetes.io/unreachable", "", "", "NoExecute", None),
                want: true,
            },
            Case {
                name: "equal with another value",
                toleration: tol(
                    "node.kubernetes.io/unreachable",
                    "Equal",
                    "x",
                    "NoExecute",
                    None,
                ),
                want: false,
            },
            Case {
                name: "other key",
                toleration: tol(
                    "node.kubernetes.io/not-ready",
                    "Exists",
                    "",
                    "NoExecute",
                    None,
                ),
                want: false,
            },
        ];
        for case in cases {
            assert_eq!(tolerates(&case.toleration, &t), case.want, "{}", case.name);
        }
    }

    #[test]
    fn min_toleration_time_as_upstream() {
        let a = tol("a", "Exists", "", "", Some(300));
        let b = tol("b", "Exists", "", "", Some(5));
        let forever = tol("c", "Exists", "", "", None);
        let zero = tol("d", "Exists", "", "", Some(0));
        assert_eq!(min_toleration_time(&[]), Some(Duration::ZERO));
        assert_eq!(min_toleration_time(&[&a, &b]), Some(Duration::from_secs(5)));
        assert_eq!(min_toleration_time(&[&forever]), None);
        assert_eq!(
            min_toleration_time(&[&forever, &a]),
            Some(Duration::from_secs(300))
        );
        assert_eq!(min_toleration_time(&[&a, &zero]), Some(Duration::ZERO));
        let taints = [taint("a", None, "NoExecute"), taint("x", None, "NoExecute")];
        assert!(matching_tolerations(&taints, std::slice::from_ref(&a)).is_none());
        assert_eq!(
            matching_tolerations(&taints[..1], std::slice::from_ref(&a)).map(|v| v.len()),
            Some(1)
        );
    }
}
