//! Taints and tolerations, as upstream's `v1helper.FindMatchingUntoleratedTaint`, `Toleration.ToleratesTaint` and `AddOrUpdateTolerationInPodSpec`.

use k8s_openapi::api::core::v1::{PodSpec, Taint, Toleration};

/// `Some(s)` for a non-empty string: Go's zero value and an absent field are the same.
fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

/// A taint's fields as toleration matching reads them: a node taint's or a DRA device
/// taint's.
#[derive(Clone, Copy, Debug)]
pub struct TaintFields<'a> {
    /// The taint's key.
    pub key: &'a str,
    /// Its value, if any.
    pub value: Option<&'a str>,
    /// Its effect.
    pub effect: &'a str,
}

/// A toleration's fields as matching reads them: a pod's or a DRA device request's.
#[derive(Clone, Copy, Debug)]
pub struct TolerationFields<'a> {
    /// The key tolerated (empty or absent: every key).
    pub key: Option<&'a str>,
    /// `Equal` (also when empty or absent) or `Exists`.
    pub operator: Option<&'a str>,
    /// The value tolerated, for `Equal`.
    pub value: Option<&'a str>,
    /// The effect tolerated (empty or absent: every effect).
    pub effect: Option<&'a str>,
}

/// Whether a toleration tolerates a taint, field by field, as core/v1's
/// `Toleration.ToleratesTaint` and DRA's `resourceclaim.ToleratesTaint` both match: the
/// effects match (an empty toleration effect matches all), the keys match (an empty key
/// matches all, with `Exists`), and for `Equal` (the default operator) the values match;
/// any other operator matches nothing.
pub fn tolerates_fields(toleration: TolerationFields<'_>, taint: TaintFields<'_>) -> bool {
    if let Some(effect) = non_empty(toleration.effect)
        && effect != taint.effect
    {
        return false;
    }
    if let Some(key) = non_empty(toleration.key)
        && key != taint.key
    {
        return false;
    }
    match toleration.operator.unwrap_or_default() {
        "" | "Equal" => toleration.value.unwrap_or_default() == taint.value.unwrap_or_default(),
        "Exists" => true,
        _ => false,
    }
}

/// Whether `toleration` tolerates `taint`, as core/v1's `Toleration.ToleratesTaint` (see
/// [`tolerates_fields`]).
pub fn tolerates_taint(toleration: &Toleration, taint: &Taint) -> bool {
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

/// The first taint of `taints` that `include` selects and no toleration tolerates, as
/// upstream's `FindMatchingUntoleratedTaint`.
pub fn find_matching_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    include: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| include(t))
        .find(|t| !tolerations.iter().any(|tol| tolerates_taint(tol, t)))
}

/// Whether two tolerations are the same toleration (key, operator, value, effect; the
/// seconds may differ), as core/v1's `Toleration.MatchToleration`.
pub fn match_toleration(a: &Toleration, b: &Toleration) -> bool {
    let s = |v: &Option<String>| v.as_deref().unwrap_or_default().to_owned();
    s(&a.key) == s(&b.key)
        && s(&a.effect) == s(&b.effect)
        && s(&a.operator) == s(&b.operator)
        && s(&a.value) == s(&b.value)
}

/// Adds `toleration` to `spec`, replacing an existing one that [`match_toleration`]es it, as
/// upstream's `AddOrUpdateTolerationInPodSpec`. Returns false when an identical toleration
/// was already there (nothing changed).
pub fn add_or_update_toleration(spec: &mut PodSpec, toleration: Toleration) -> bool {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let mut updated = false;
    for existing in tolerations.iter_mut() {
        if match_toleration(existing, &toleration) {
            if *existing == toleration {
                return false;
            }
            *existing = toleration.clone();
            updated = true;
        }
    }
    if !updated {
        tolerations.push(toleration);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn toleration(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Toleration {
            key: some(key),
            operator: some(op),
            value: some(value),
            effect: some(effect),
            ..Default::default()
        }
    }

    /// Upstream's `TestTolerationToleratesTaint` cases.
    #[test]
    fn tolerates_taint_table() {
        let cases = [
            (
                "empty toleration tolerates an empty-key taint",
                toleration("", "", "", ""),
                taint("", "", "NoSchedule"),
                true,
            ),
            (
                "Exists with no key tolerates everything",
                toleration("", "Exists", "", ""),
                taint("k", "v", "NoExecute"),
                true,
            ),
            (
                "effects differ",
                toleration("k", "Exists", "", "NoSchedule"),
                taint("k", "", "NoExecute"),
                false,
            ),
            (
                "keys differ",
                toleration("k", "Exists", "", ""),
                taint("other", "", "NoSchedule"),
                false,
            ),
            (
                "Equal with the same value",
                toleration("k", "Equal", "v", "NoSchedule"),
                taint("k", "v", "NoSchedule"),
                true,
            ),
            (
                "Equal with another value",
                toleration("k", "Equal", "v", "NoSchedule"),
                taint("k", "w", "NoSchedule"),
                false,
            ),
            (
                "default operator is Equal",
                toleration("k", "", "v", ""),
                taint("k", "v", "PreferNoSchedule"),
                true,
            ),
            (
                "unknown operator",
                toleration("k", "Gte", "v", ""),
                taint("k", "v", "NoSchedule"),
                false,
            ),
        ];
        for (name, tol, t, want) in cases {
            assert_eq!(tolerates_taint(&tol, &t), want, "{name}");
        }
    }

    #[test]
    fn first_untolerated_taint_passing_the_filter() {
        let taints = [
            taint("soft", "", "PreferNoSchedule"),
            taint("tolerated", "", "NoSchedule"),
            taint("hard", "", "NoExecute"),
        ];
        let tolerations = [toleration("tolerated", "Exists", "", "")];
        let hard = |t: &Taint| t.effect == "NoSchedule" || t.effect == "NoExecute";
        assert_eq!(
            find_matching_untolerated_taint(&taints, &tolerations, hard).map(|t| t.key.as_str()),
            Some("hard")
        );
        assert_eq!(
            find_matching_untolerated_taint(&taints[..2], &tolerations, hard),
            None
        );
    }

    #[test]
    fn add_or_update_toleration_replaces_a_matching_one() {
        let mut spec = PodSpec::default();
        let base = toleration("k", "Exists", "", "NoExecute");
        assert!(add_or_update_toleration(&mut spec, base.clone()));
        assert!(
            !add_or_update_toleration(&mut spec, base.clone()),
            "identical: no change"
        );
        let with_seconds = Toleration {
            toleration_seconds: Some(30),
            ..base
        };
        assert!(add_or_update_toleration(&mut spec, with_seconds.clone()));
        assert_eq!(spec.tolerations, Some(vec![with_seconds]));
        assert!(add_or_update_toleration(
            &mut spec,
            toleration("other", "Exists", "", "NoSchedule")
        ));
        assert_eq!(spec.tolerations.map(|t| t.len()), Some(2));
    }
}
