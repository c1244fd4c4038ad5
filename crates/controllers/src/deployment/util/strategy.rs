//! Rolling-update arithmetic: resolving `maxSurge`/`maxUnavailable`, the new ReplicaSet's
//! next size, and the spec switches (`progressDeadlineSeconds`,
//! `revisionHistoryLimit`) that turn features on.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::accessors::{
    RECREATE_STRATEGY, ROLLING_UPDATE_STRATEGY, deployment_replicas, object_key,
    progress_deadline_seconds, revision_history_limit, rolling_update_params, rs_replicas,
    strategy_type,
};
use super::counts::get_replica_count_for_replica_sets;

/// Errors of rolling-update arithmetic.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An int-or-percent field is missing where a value is required.
    #[error("nil value for IntOrString")]
    NilIntOrString,
    /// An int-or-percent string is not a percentage (`"25%"`).
    #[error("invalid value for IntOrString: invalid type: string is not a percentage: {0:?}")]
    NotAPercentage(String),
    /// A percentage whose number does not parse.
    #[error("invalid value for IntOrString: invalid value {0:?}")]
    InvalidPercentage(String),
    /// The Deployment's strategy type is neither `RollingUpdate` nor `Recreate`.
    #[error("deployment {deployment}: deployment type {strategy:?} isn't supported")]
    UnsupportedStrategy {
        /// `namespace/name` of the Deployment.
        deployment: String,
        /// The strategy type found.
        strategy: String,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The absolute value of an int-or-percent against `total`, rounding percentages up or down,
/// as apimachinery's `GetScaledValueFromIntOrPercent`.
pub fn scaled_value_from_int_or_percent(
    value: Option<&IntOrString>,
    total: i32,
    round_up: bool,
) -> Result<i32> {
    match value {
        None => Err(Error::NilIntOrString),
        Some(IntOrString::Int(v)) => Ok(*v),
        Some(IntOrString::String(s)) => {
            let Some(number) = s.strip_suffix('%') else {
                return Err(Error::NotAPercentage(s.clone()));
            };
            let percent: i64 = number
                .parse()
                .map_err(|_| Error::InvalidPercentage(s.clone()))?;
            let scaled = percent as f64 * f64::from(total) / 100.0;
            let rounded = if round_up {
                scaled.ceil()
            } else {
                scaled.floor()
            };
            // Saturating float-to-int conversion; only absurd percentages get here.
            Ok(rounded as i32)
        }
    }
}

/// Resolves `maxSurge` (rounded up) and `maxUnavailable` (rounded down) against `desired`
/// replicas in one step; missing values are 0, and when both resolve to 0 `maxUnavailable`
/// becomes 1 so the rollout can make progress, as upstream `ResolveFenceposts`.
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32)> {
    let zero = IntOrString::Int(0);
    let surge = scaled_value_from_int_or_percent(Some(max_surge.unwrap_or(&zero)), desired, true)?;
    let mut unavailable =
        scaled_value_from_int_or_percent(Some(max_unavailable.unwrap_or(&zero)), desired, false)?;
    if surge == 0 && unavailable == 0 {
        // Validation rejects explicit zeros for both, but rounding maxUnavailable down can
        // still produce them; assume surge may be blocked by quota and allow one unavailable.
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

/// Whether the Deployment rolls out with `RollingUpdate`.
pub fn is_rolling_update(d: &Deployment) -> bool {
    strategy_type(d) == ROLLING_UPDATE_STRATEGY
}

/// `(maxSurge, maxUnavailable)` resolved against `spec.replicas`; invalid values (rejected by
/// validation) read as `(0, 0)` as upstream ignores the error.
fn fenceposts(d: &Deployment) -> (i32, i32) {
    let (surge, unavailable) = rolling_update_params(d);
    resolve_fenceposts(surge.as_ref(), unavailable.as_ref(), deployment_replicas(d))
        .unwrap_or((0, 0))
}

/// How many pods may be unavailable during a rolling update, at most `spec.replicas`, as
/// upstream `MaxUnavailable` (0 for `Recreate` or zero replicas).
pub fn max_unavailable(d: &Deployment) -> i32 {
    let replicas = deployment_replicas(d);
    if !is_rolling_update(d) || replicas == 0 {
        return 0;
    }
    fenceposts(d).1.min(replicas)
}

/// How many pods must stay available during a rolling update, as upstream `MinAvailable`.
pub fn min_available(d: &Deployment) -> i32 {
    if !is_rolling_update(d) {
        return 0;
    }
    deployment_replicas(d) - max_unavailable(d)
}

/// How many pods may exist above `spec.replicas` during a rolling update, as upstream
/// `MaxSurge` (0 for `Recreate`).
pub fn max_surge(d: &Deployment) -> i32 {
    if !is_rolling_update(d) {
        return 0;
    }
    fenceposts(d).0
}

/// The size the new ReplicaSet should have next: for a rolling update as many more pods as
/// `maxSurge` allows over all ReplicaSets (`all_rss`), never above `spec.replicas`; for
/// `Recreate` the full `spec.replicas`. As upstream `NewRSNewReplicas`.
pub fn new_rs_new_replicas(
    d: &Deployment,
    all_rss: &[&ReplicaSet],
    new_rs: &ReplicaSet,
) -> Result<i32> {
    let replicas = deployment_replicas(d);
    match strategy_type(d) {
        ROLLING_UPDATE_STRATEGY => {
            let (surge, _) = rolling_update_params(d);
            let max_surge = scaled_value_from_int_or_percent(surge.as_ref(), replicas, true)?;
            let current = get_replica_count_for_replica_sets(all_rss);
            let max_total = replicas.saturating_add(max_surge);
            let new_replicas = rs_replicas(new_rs);
            if current >= max_total {
                return Ok(new_replicas);
            }
            let scale_up = (max_total - current).min(replicas - new_replicas);
            Ok(new_replicas + scale_up)
        }
        RECREATE_STRATEGY => Ok(replicas),
        other => Err(Error::UnsupportedStrategy {
            deployment: object_key(&d.metadata),
            strategy: other.to_owned(),
        }),
    }
}

/// Whether the Deployment reports `ProgressDeadlineExceeded` at all: a deadline is set and is
/// not `MaxInt32` (infinite), as upstream `HasProgressDeadline`.
pub fn has_progress_deadline(d: &Deployment) -> bool {
    progress_deadline_seconds(d).is_some_and(|s| s != i32::MAX)
}

/// Whether old ReplicaSets are ever cleaned up: a limit is set and is not `MaxInt32`, as
/// upstream `HasRevisionHistoryLimit`.
pub fn has_revision_history_limit(d: &Deployment) -> bool {
    revision_history_limit(d).is_some_and(|l| l != i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{deployment, deployment_with, rs, with_strategy};
    use super::*;

    fn pct(s: &str) -> IntOrString {
        IntOrString::String(s.to_owned())
    }

    #[test]
    fn resolve_fenceposts_table() {
        // Upstream TestResolveFenceposts plus rounding cases.
        struct Case {
            name: &'static str,
            max_surge: Option<IntOrString>,
            max_unavailable: Option<IntOrString>,
            desired: i32,
            want: Option<(i32, i32)>,
        }
        let cases = [
            Case {
                name: "0%/0% of 0 → unavailable 1",
                max_surge: Some(pct("0%")),
                max_unavailable: Some(pct("0%")),
                desired: 0,
                want: Some((0, 1)),
            },
            Case {
                name: "39%/39% of 10: surge rounds up, unavailable down",
                max_surge: Some(pct("39%")),
                max_unavailable: Some(pct("39%")),
                desired: 10,
                want: Some((4, 3)),
            },
            Case {
                name: "bad surge",
                max_surge: Some(pct("oops")),
                max_unavailable: Some(pct("39%")),
                desired: 10,
                want: None,
            },
            Case {
                name: "bad unavailable",
                max_surge: Some(pct("55%")),
                max_unavailable: Some(pct("urg")),
                desired: 10,
                want: None,
            },
            Case {
                name: "nil surge",
                max_surge: None,
                max_unavailable: Some(pct("39%")),
                desired: 10,
                want: Some((0, 3)),
            },
            Case {
                name: "nil unavailable",
                max_surge: Some(pct("39%")),
                max_unavailable: None,
                desired: 10,
                want: Some((4, 0)),
            },
            Case {
                name: "both nil → unavailable 1",
                max_surge: None,
                max_unavailable: None,
                desired: 10,
                want: Some((0, 1)),
            },
            Case {
                name: "25%/25% of 10",
                max_surge: Some(pct("25%")),
                max_unavailable: Some(pct("25%")),
                desired: 10,
                want: Some((3, 2)),
            },
            Case {
                name: "1%/1% of 2 → surge 1, unavailable 0",
                max_surge: Some(pct("1%")),
                max_unavailable: Some(pct("1%")),
                desired: 2,
                want: Some((1, 0)),
            },
            Case {
                name: "0%/1% of 2 → both zero → unavailable 1",
                max_surge: Some(pct("0%")),
                max_unavailable: Some(pct("1%")),
                desired: 2,
                want: Some((0, 1)),
            },
            Case {
                name: "absolute ints are taken as is",
                max_surge: Some(IntOrString::Int(2)),
                max_unavailable: Some(IntOrString::Int(1)),
                desired: 10,
                want: Some((2, 1)),
            },
            Case {
                name: "a bare number string is not a percentage",
                max_surge: Some(pct("5")),
                max_unavailable: None,
                desired: 10,
                want: None,
            },
            Case {
                name: "100% of 7",
                max_surge: Some(pct("100%")),
                max_unavailable: Some(pct("100%")),
                desired: 7,
                want: Some((7, 7)),
            },
        ];
        for c in cases {
            let got =
                resolve_fenceposts(c.max_surge.as_ref(), c.max_unavailable.as_ref(), c.desired)
                    .ok();
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    #[test]
    fn max_unavailable_table() {
        // Upstream TestMaxUnavailable.
        struct Case {
            name: &'static str,
            deployment: Deployment,
            expected: i32,
        }
        let d = |replicas, mu| deployment_with("foo", replicas, IntOrString::Int(1), mu);
        let cases = [
            Case {
                name: "maxUnavailable less than replicas",
                deployment: d(10, IntOrString::Int(5)),
                expected: 5,
            },
            Case {
                name: "maxUnavailable equal replicas",
                deployment: d(10, IntOrString::Int(10)),
                expected: 10,
            },
            Case {
                name: "maxUnavailable greater than replicas",
                deployment: d(5, IntOrString::Int(10)),
                expected: 5,
            },
            Case {
                name: "maxUnavailable with replicas is 0",
                deployment: d(0, IntOrString::Int(10)),
                expected: 0,
            },
            Case {
                name: "maxUnavailable with Recreate deployment strategy",
                deployment: with_strategy(deployment("foo", 10), RECREATE_STRATEGY),
                expected: 0,
            },
            Case {
                name: "maxUnavailable less than replicas with percents",
                deployment: d(10, pct("50%")),
                expected: 5,
            },
            Case {
                name: "maxUnavailable equal replicas with percents",
                deployment: d(10, pct("100%")),
                expected: 10,
            },
            Case {
                name: "maxUnavailable greater than replicas with percents",
                deployment: d(5, pct("100%")),
                expected: 5,
            },
        ];
        for c in cases {
            assert_eq!(max_unavailable(&c.deployment), c.expected, "{}", c.name);
        }
    }

    #[test]
    fn min_available_table() {
        // Upstream TestMinAvailable.
        struct Case {
            name: &'static str,
            deployment: Deployment,
            expected: i32,
        }
        let d = |replicas, mu| deployment_with("foo", replicas, IntOrString::Int(1), mu);
        let cases = [
            Case {
                name: "replicas greater than maxUnavailable",
                deployment: d(10, IntOrString::Int(5)),
                expected: 5,
            },
            Case {
                name: "replicas equal maxUnavailable",
                deployment: d(10, IntOrString::Int(10)),
                expected: 0,
            },
            Case {
                name: "replicas less than maxUnavailable",
                deployment: d(5, IntOrString::Int(10)),
                expected: 0,
            },
            Case {
                name: "replicas is 0",
                deployment: d(0, IntOrString::Int(10)),
                expected: 0,
            },
            Case {
                name: "minAvailable with Recreate deployment strategy",
                deployment: with_strategy(deployment("foo", 10), RECREATE_STRATEGY),
                expected: 0,
            },
            Case {
                name: "replicas greater than maxUnavailable with percents",
                deployment: d(10, pct("60%")),
                expected: 4,
            },
            Case {
                name: "replicas equal maxUnavailable with percents",
                deployment: d(10, pct("100%")),
                expected: 0,
            },
            Case {
                name: "replicas less than maxUnavailable with percents",
                deployment: d(5, pct("100%")),
                expected: 0,
            },
        ];
        for c in cases {
            assert_eq!(min_available(&c.deployment), c.expected, "{}", c.name);
        }
    }

    #[test]
    fn max_surge_uses_api_defaults_without_rolling_update_block() {
        let mut d = deployment("foo", 10);
        if let Some(s) = d.spec.as_mut().and_then(|s| s.strategy.as_mut()) {
            s.rolling_update = None;
        }
        assert_eq!(max_surge(&d), 3, "25% of 10 rounded up");
        assert_eq!(max_unavailable(&d), 2, "25% of 10 rounded down");
    }

    #[test]
    fn new_rs_new_replicas_table() {
        // Upstream TestNewRSNewReplicas: all_rss holds one other ReplicaSet of 5 replicas.
        struct Case {
            name: &'static str,
            strategy: &'static str,
            dep_replicas: i32,
            new_rs_replicas: i32,
            max_surge: i32,
            expected: i32,
        }
        let cases = [
            Case {
                name: "can not scale up - to newRSReplicas",
                strategy: ROLLING_UPDATE_STRATEGY,
                dep_replicas: 1,
                new_rs_replicas: 5,
                max_surge: 1,
                expected: 5,
            },
            Case {
                name: "scale up - to depReplicas",
                strategy: ROLLING_UPDATE_STRATEGY,
                dep_replicas: 6,
                new_rs_replicas: 2,
                max_surge: 10,
                expected: 6,
            },
            Case {
                name: "recreate - to depReplicas",
                strategy: RECREATE_STRATEGY,
                dep_replicas: 3,
                new_rs_replicas: 1,
                max_surge: 1,
                expected: 3,
            },
            Case {
                name: "scale up limited by surge",
                strategy: ROLLING_UPDATE_STRATEGY,
                dep_replicas: 10,
                new_rs_replicas: 0,
                max_surge: 2,
                expected: 7,
            },
        ];
        let rs5 = rs("rs5", 5);
        for c in cases {
            let mut d = deployment_with(
                "nginx",
                c.dep_replicas,
                IntOrString::Int(c.max_surge),
                IntOrString::Int(1),
            );
            if let Some(s) = d.spec.as_mut().and_then(|s| s.strategy.as_mut()) {
                s.type_ = Some(c.strategy.to_owned());
            }
            let new_rs = rs("new", c.new_rs_replicas);
            let got = new_rs_new_replicas(&d, &[&rs5], &new_rs).expect("no error");
            assert_eq!(got, c.expected, "{}", c.name);
        }
        let d = with_strategy(deployment("nginx", 3), "Canary");
        assert!(matches!(
            new_rs_new_replicas(&d, &[], &rs("new", 0)),
            Err(Error::UnsupportedStrategy { .. })
        ));
    }

    #[test]
    fn deadline_and_history_switches() {
        let mut d = deployment("foo", 1);
        assert!(!has_progress_deadline(&d));
        assert!(!has_revision_history_limit(&d));
        if let Some(s) = d.spec.as_mut() {
            s.progress_deadline_seconds = Some(600);
            s.revision_history_limit = Some(0);
        }
        assert!(has_progress_deadline(&d));
        assert!(has_revision_history_limit(&d));
        if let Some(s) = d.spec.as_mut() {
            s.progress_deadline_seconds = Some(i32::MAX);
            s.revision_history_limit = Some(i32::MAX);
        }
        assert!(!has_progress_deadline(&d));
        assert!(!has_revision_history_limit(&d));
    }
}
