//! `spec.successPolicy`: an Indexed Job succeeds early once the succeeded indexes satisfy one of its rules (`succeededIndexes` and/or `succeededCount`), as upstream's `success_policy.go`.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{JobCondition, SuccessPolicy};

use super::conditions::{
    CONDITION_TRUE, JOB_SUCCESS_CRITERIA_MET, REASON_SUCCESS_POLICY, new_condition,
};
use super::intervals::OrderedIntervals;

/// The prefix of the `SuccessCriteriaMet` message; the matched rule's position follows.
pub const RULES_MATCHED_MESSAGE: &str = "Matched rules at index";

/// The message of the first rule the succeeded indexes satisfy, `None` if none does, as
/// upstream's `matchSuccessPolicy` (`JobSuccessPolicy` on). A rule whose `succeededIndexes`
/// does not parse to any index below `completions` is skipped.
pub fn match_success_policy(
    success_policy: Option<&SuccessPolicy>,
    completions: i32,
    succeeded_indexes: &OrderedIntervals,
) -> Option<String> {
    let policy = success_policy?;
    if succeeded_indexes.is_empty() {
        return None;
    }
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched = match (&rule.succeeded_indexes, rule.succeeded_count) {
            (Some(indexes), count) => {
                let required = OrderedIntervals::parse(indexes, completions);
                if required.is_empty() {
                    continue;
                }
                match_succeeded_indexes_rule(&required, succeeded_indexes, count)
            }
            (None, Some(count)) => succeeded_indexes.total() >= i64::from(count),
            (None, None) => false,
        };
        if matched {
            return Some(format!("{RULES_MATCHED_MESSAGE} {index}"));
        }
    }
    None
}

/// The interim `SuccessCriteriaMet=True` condition for a met success policy (reason
/// `SuccessPolicy`), as `syncJob` builds it.
pub fn success_policy_condition(message: &str, now: Timestamp) -> JobCondition {
    new_condition(
        JOB_SUCCESS_CRITERIA_MET,
        CONDITION_TRUE,
        REASON_SUCCESS_POLICY,
        message,
        now,
    )
}

/// Whether the succeeded indexes cover all of `rule_indexes`, or at least `succeeded_count`
/// of them, as upstream's `matchSucceededIndexesRule` (a linear walk over both lists).
fn match_succeeded_indexes_rule(
    rule_indexes: &OrderedIntervals,
    succeeded_indexes: &OrderedIntervals,
    succeeded_count: Option<i32>,
) -> bool {
    let (rules, succeeded) = (rule_indexes.as_slice(), succeeded_indexes.as_slice());
    let (mut r, mut s) = (0, 0);
    let mut contains: i64 = 0;
    while r < rules.len() && s < succeeded.len() {
        let (rule, done) = (rules[r], succeeded[s]);
        let overlap =
            i64::from(rule.last.min(done.last)) - i64::from(rule.first.max(done.first)) + 1;
        if overlap > 0 {
            contains += overlap;
        }
        if done.last < rule.last {
            s += 1;
        } else if done.last > rule.last {
            r += 1;
        } else {
            s += 1;
            r += 1;
        }
    }
    contains == rule_indexes.total() || succeeded_count.is_some_and(|c| contains >= i64::from(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::intervals::Interval;
    use k8s_openapi::api::batch::v1::SuccessPolicyRule;

    fn ivs(v: &[(i32, i32)]) -> OrderedIntervals {
        v.iter()
            .map(|&(a, b)| Interval::new(a, b))
            .collect::<Vec<_>>()
            .into()
    }

    fn rule(indexes: Option<&str>, count: Option<i32>) -> SuccessPolicyRule {
        SuccessPolicyRule {
            succeeded_indexes: indexes.map(Into::into),
            succeeded_count: count,
        }
    }

    #[test]
    fn match_success_policy_table() {
        struct Case {
            name: &'static str,
            rules: Option<Vec<SuccessPolicyRule>>,
            succeeded: OrderedIntervals,
            want: Option<&'static str>,
        }
        let idx = |s: &str| rule(Some(s), None);
        let both = |s: &str, c: i32| rule(Some(s), Some(c));
        let at0 = Some("Matched rules at index 0");
        let cases = vec![
            Case {
                name: "successPolicy is null",
                rules: None,
                succeeded: ivs(&[(0, 0)]),
                want: None,
            },
            Case {
                name: "any rules are nothing",
                rules: Some(vec![]),
                succeeded: ivs(&[(0, 0)]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes is invalid format",
                rules: Some(vec![idx("invalid-form")]),
                succeeded: ivs(&[(0, 0)]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes matched rules",
                rules: Some(vec![idx("0-2")]),
                succeeded: ivs(&[(0, 2), (4, 7)]),
                want: at0,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes didn't match rules",
                rules: Some(vec![idx("3")]),
                succeeded: ivs(&[(0, 2)]),
                want: None,
            },
            Case {
                name: "rules.succeededCount is specified; succeededIndexes matched rules",
                rules: Some(vec![rule(None, Some(2))]),
                succeeded: ivs(&[(0, 2)]),
                want: at0,
            },
            Case {
                name: "rules.succeededCount is specified; succeededIndexes didn't match rules",
                rules: Some(vec![rule(None, Some(4))]),
                succeeded: ivs(&[(0, 2)]),
                want: None,
            },
            Case {
                name: "multiple rules; rules.succeededIndexes is specified; succeededIndexes met one of rules",
                rules: Some(vec![idx("9"), idx("4,6")]),
                succeeded: ivs(&[(0, 2), (4, 7)]),
                want: Some("Matched rules at index 1"),
            },
            Case {
                name: "multiple rules; rules.succeededIndexes is specified; succeededIndexes met all rules",
                rules: Some(vec![idx("0,1"), idx("5")]),
                succeeded: ivs(&[(0, 2), (4, 7)]),
                want: at0,
            },
            Case {
                name: "rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes met all rules",
                rules: Some(vec![both("3-6", 2)]),
                succeeded: ivs(&[(0, 2), (4, 7)]),
                want: at0,
            },
            Case {
                name: "rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes didn't match rules",
                rules: Some(vec![both("3-6", 2)]),
                succeeded: ivs(&[(0, 2), (6, 7)]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes are nothing",
                rules: Some(vec![rule(None, Some(4))]),
                succeeded: ivs(&[]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes matched rules; rules is proper subset of succeededIndexes",
                rules: Some(vec![idx("2-4,6-8")]),
                succeeded: ivs(&[(1, 5), (6, 9)]),
                want: at0,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes matched rules; rules equals succeededIndexes",
                rules: Some(vec![idx("2-4,6-9")]),
                succeeded: ivs(&[(2, 4), (6, 9)]),
                want: at0,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes matched rules; rules is subset of succeededIndexes",
                rules: Some(vec![idx("2-4,8-12")]),
                succeeded: ivs(&[(2, 5), (7, 15)]),
                want: at0,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes didn't match rules; rules is an empty set",
                rules: Some(vec![idx("")]),
                succeeded: ivs(&[(1, 3)]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes didn't match rules; succeededIndexes is an empty set",
                rules: Some(vec![idx("")]),
                succeeded: ivs(&[]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes didn't match rules; all elements of rules.succeededIndexes aren't included in succeededIndexes",
                rules: Some(vec![idx("10-12,14-16")]),
                succeeded: ivs(&[(1, 3), (5, 7)]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes didn't match rules; rules overlaps succeededIndexes at first",
                rules: Some(vec![idx("1-3,5-7")]),
                succeeded: ivs(&[(2, 4), (6, 8)]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes matched rules; rules overlaps succeededIndexes at first",
                rules: Some(vec![both("1-3,5-7", 4)]),
                succeeded: ivs(&[(2, 4), (6, 8)]),
                want: at0,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes didn't match rules; rules overlaps succeededIndexes at last",
                rules: Some(vec![idx("2-4,6-9")]),
                succeeded: ivs(&[(1, 3), (5, 7)]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes matched rules; rules overlaps succeededIndexes at last",
                rules: Some(vec![both("2-4,6-9", 4)]),
                succeeded: ivs(&[(1, 3), (5, 7)]),
                want: at0,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes didn't match rules; rules completely overlaps succeededIndexes",
                rules: Some(vec![idx("0-4,6-9")]),
                succeeded: ivs(&[(1, 3), (7, 8)]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes matched rules; rules completely overlaps succeededIndexes",
                rules: Some(vec![both("0-4,6-9", 5)]),
                succeeded: ivs(&[(1, 3), (7, 8)]),
                want: at0,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes didn't match rules; rules overlaps multiple succeededIndexes at last",
                rules: Some(vec![idx("0-6,8-9")]),
                succeeded: ivs(&[(1, 3), (5, 9)]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes matched rules; rules overlaps multiple succeededIndexes at last",
                rules: Some(vec![both("0-6,8-9", 7)]),
                succeeded: ivs(&[(1, 3), (5, 9)]),
                want: at0,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes didn't match rules; rules overlaps succeededIndexes at first, and rules equals succeededIndexes at last",
                rules: Some(vec![idx("0-5,7-9")]),
                succeeded: ivs(&[(1, 5), (7, 10)]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes matched rules; rules overlaps succeededIndexes at first, and rules equals succeededIndexes at last",
                rules: Some(vec![both("0-5,7-9", 8)]),
                succeeded: ivs(&[(1, 5), (7, 10)]),
                want: at0,
            },
            Case {
                name: "rules.succeededIndexes is specified; succeededIndexes didn't match rules; the first rules overlaps succeededIndexes at first",
                rules: Some(vec![idx("0-3,6-9")]),
                succeeded: ivs(&[(1, 10)]),
                want: None,
            },
            Case {
                name: "rules.succeededIndexes and rules.succeededCount are specified; succeededIndexes matched rules; the first rules overlaps succeededIndexes at first",
                rules: Some(vec![both("0-3,6-9", 7)]),
                succeeded: ivs(&[(1, 10)]),
                want: at0,
            },
        ];
        for c in cases {
            let policy = c.rules.map(|rules| SuccessPolicy { rules });
            assert_eq!(
                match_success_policy(policy.as_ref(), 10, &c.succeeded).as_deref(),
                c.want,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn condition_for_a_met_policy() {
        let now: Timestamp = "2024-01-01T00:00:00Z".parse().expect("timestamp");
        let c = success_policy_condition("Matched rules at index 0", now);
        assert_eq!(c.type_, "SuccessCriteriaMet");
        assert_eq!(c.reason.as_deref(), Some("SuccessPolicy"));
        assert_eq!(c.message.as_deref(), Some("Matched rules at index 0"));
    }
}
