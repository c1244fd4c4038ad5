//! `spec.podFailurePolicy`: the first rule matching a failed pod (by container exit codes or pod conditions) decides whether the failure fails the Job, fails its index, is ignored, or counts, as upstream's `pod_failure_policy.go`.

use k8s_openapi::api::batch::v1::{
    PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern,
};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};

/// What a matching rule does, as batch/v1 `PodFailurePolicyAction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PodFailurePolicyAction {
    /// Fail the whole Job (`FailJob`).
    FailJob,
    /// Fail the pod's index, with `backoffLimitPerIndex` (`FailIndex`).
    FailIndex,
    /// Do not count the failure toward any backoff limit (`Ignore`).
    Ignore,
    /// Count the failure as usual (`Count`).
    Count,
}

impl PodFailurePolicyAction {
    /// The action named `name`, `None` for an unknown one (whose rule is then skipped).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "FailJob" => Some(Self::FailJob),
            "FailIndex" => Some(Self::FailIndex),
            "Ignore" => Some(Self::Ignore),
            "Count" => Some(Self::Count),
            _ => None,
        }
    }

    /// The API name (also the `action` label of `job_pod_failures_handled_by_failure_policy_total`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FailJob => "FailJob",
            Self::FailIndex => "FailIndex",
            Self::Ignore => "Ignore",
            Self::Count => "Count",
        }
    }
}

/// The outcome of matching a failed pod against the policy, as the three results of upstream's
/// `matchPodFailurePolicy`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFailurePolicyMatch {
    /// The Job failure message, when a `FailJob` rule matched.
    pub job_failure_message: Option<String>,
    /// Whether the failure counts toward `backoffLimit`/`backoffLimitPerIndex` (false only for
    /// `Ignore`).
    pub count_failed: bool,
    /// The matched rule's action; `None` when no rule matched (or there is no policy).
    pub action: Option<PodFailurePolicyAction>,
}

impl PodFailurePolicyMatch {
    /// No rule matched: the failure counts.
    const NONE: Self = Self {
        job_failure_message: None,
        count_failed: true,
        action: None,
    };
}

/// Matches `failed_pod` against the rules in order, as upstream's `matchPodFailurePolicy`. A
/// rule with an unknown action or operator never matches.
pub fn match_pod_failure_policy(
    policy: Option<&PodFailurePolicy>,
    failed_pod: &Pod,
) -> PodFailurePolicyMatch {
    let Some(policy) = policy else {
        return PodFailurePolicyMatch::NONE;
    };
    let namespace = failed_pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = failed_pod.metadata.name.as_deref().unwrap_or_default();
    for (index, rule) in policy.rules.iter().enumerate() {
        let Some(action) = PodFailurePolicyAction::from_name(&rule.action) else {
            continue;
        };
        let fail_job_message = if let Some(requirement) = &rule.on_exit_codes {
            let Some((container, exit_code)) = match_on_exit_codes(failed_pod, requirement) else {
                continue;
            };
            format!(
                "Container {container} for pod {namespace}/{name} failed with exit code \
                 {exit_code} matching {} rule at index {index}",
                rule.action
            )
        } else if let Some(patterns) = &rule.on_pod_conditions {
            let Some(condition) = match_on_pod_conditions(failed_pod, patterns) else {
                continue;
            };
            format!(
                "Pod {namespace}/{name} has condition {} matching {} rule at index {index}",
                condition.type_, rule.action
            )
        } else {
            continue;
        };
        return match action {
            PodFailurePolicyAction::Ignore => PodFailurePolicyMatch {
                job_failure_message: None,
                count_failed: false,
                action: Some(action),
            },
            PodFailurePolicyAction::FailJob => PodFailurePolicyMatch {
                job_failure_message: Some(fail_job_message),
                count_failed: true,
                action: Some(action),
            },
            PodFailurePolicyAction::FailIndex | PodFailurePolicyAction::Count => {
                PodFailurePolicyMatch {
                    job_failure_message: None,
                    count_failed: true,
                    action: Some(action),
                }
            }
        };
    }
    PodFailurePolicyMatch::NONE
}

/// The name and exit code of the first terminated container (regular ones, then init ones)
/// whose non-zero exit code satisfies the requirement, as upstream's `matchOnExitCodes`.
fn match_on_exit_codes<'a>(
    pod: &'a Pod,
    requirement: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<(&'a str, i32)> {
    let status = pod.status.as_ref()?;
    [&status.container_statuses, &status.init_container_statuses]
        .into_iter()
        .flat_map(|list| list.iter().flatten())
        .find_map(|cs| matching_exit_code(cs, requirement).map(|code| (cs.name.as_str(), code)))
}

/// The container's exit code if it terminated, is the required container, failed, and
/// satisfies the operator, as upstream's `getMatchingContainerFromList`.
fn matching_exit_code(
    status: &ContainerStatus,
    requirement: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<i32> {
    // A container still terminating has no exit code to match.
    let terminated = status.state.as_ref()?.terminated.as_ref()?;
    if requirement
        .container_name
        .as_ref()
        .is_some_and(|n| *n != status.name)
    {
        return None;
    }
    let code = terminated.exit_code;
    let matches = match requirement.operator.as_str() {
        "In" => requirement.values.contains(&code),
        "NotIn" => !requirement.values.contains(&code),
        _ => false,
    };
    (code != 0 && matches).then_some(code)
}

/// The first pod condition (in the pod's order) equal in type and status to one of the
/// patterns, as upstream's `matchOnPodConditions`.
fn match_on_pod_conditions<'a>(
    pod: &'a Pod,
    patterns: &[PodFailurePolicyOnPodConditionsPattern],
) -> Option<&'a PodCondition> {
    pod.status.as_ref()?.conditions.iter().flatten().find(|c| {
        patterns
            .iter()
            .any(|p| p.type_ == c.type_ && p.status.as_deref().unwrap_or("True") == c.status)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::PodFailurePolicyRule;
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn exit_rule(action: &str, operator: &str, values: &[i32]) -> PodFailurePolicyRule {
        PodFailurePolicyRule {
            action: action.into(),
            on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                container_name: None,
                operator: operator.into(),
                values: values.to_vec(),
            }),
            on_pod_conditions: None,
        }
    }

    fn condition_rule(action: &str, type_: &str, status: &str) -> PodFailurePolicyRule {
        PodFailurePolicyRule {
            action: action.into(),
            on_exit_codes: None,
            on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                type_: type_.into(),
                status: Some(status.into()),
            }]),
        }
    }

    fn terminated(name: &str, exit_code: i32) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn failed_pod(
        containers: Vec<ContainerStatus>,
        init: Vec<ContainerStatus>,
        conditions: &[(&str, &str)],
    ) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some("default".into()),
                name: Some("mypod".into()),
                ..Default::default()
            },
            status: Some(PodStatus {
                phase: Some("Failed".into()),
                container_statuses: Some(containers),
                init_container_statuses: Some(init),
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| PodCondition {
                            type_: t.to_string(),
                            status: s.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    use PodFailurePolicyAction::{Count, FailIndex, FailJob, Ignore};

    #[test]
    fn match_pod_failure_policy_table() {
        struct Case {
            name: &'static str,
            rules: Option<Vec<PodFailurePolicyRule>>,
            pod: Pod,
            want_message: Option<&'static str>,
            want_count_failed: bool,
            want_action: Option<PodFailurePolicyAction>,
        }
        let main2 = || failed_pod(vec![terminated("main-container", 2)], vec![], &[]);
        let disruption = |s: &'static str| failed_pod(vec![], vec![], &[("DisruptionTarget", s)]);
        let cases = vec![
            Case {
                name: "unknown action for rule matching by exit codes - skip rule with unknown action",
                rules: Some(vec![
                    exit_rule("UnknownAction", "In", &[1, 2]),
                    exit_rule("FailJob", "In", &[2, 3]),
                ]),
                pod: main2(),
                want_message: Some(
                    "Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at index 1",
                ),
                want_count_failed: true,
                want_action: Some(FailJob),
            },
            Case {
                name: "unknown action for rule matching by pod conditions - skip rule with unknown action",
                rules: Some(vec![
                    condition_rule("UnkonwnAction", "DisruptionTarget", "True"),
                    condition_rule("Ignore", "DisruptionTarget", "True"),
                ]),
                pod: disruption("True"),
                want_message: None,
                want_count_failed: false,
                want_action: Some(Ignore),
            },
            Case {
                name: "unknown operator - rule with unknown action is skipped for onExitCodes",
                rules: Some(vec![
                    exit_rule("Ignore", "UnknownOperator", &[1, 2]),
                    exit_rule("FailJob", "In", &[2, 3]),
                ]),
                pod: main2(),
                want_message: Some(
                    "Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at index 1",
                ),
                want_count_failed: true,
                want_action: Some(FailJob),
            },
            Case {
                name: "no policy rules",
                rules: None,
                pod: failed_pod(vec![terminated("", 2)], vec![], &[]),
                want_message: None,
                want_count_failed: true,
                want_action: None,
            },
            Case {
                name: "ignore rule matched for exit codes",
                rules: Some(vec![exit_rule("Ignore", "In", &[1, 2, 3])]),
                pod: failed_pod(vec![terminated("", 2)], vec![], &[]),
                want_message: None,
                want_count_failed: false,
                want_action: Some(Ignore),
            },
            Case {
                name: "ignore rule matched on negative exit codes - needed for Windows support",
                rules: Some(vec![exit_rule("Ignore", "In", &[-1073741676, -1073741510])]),
                pod: failed_pod(vec![terminated("", -1073741510)], vec![], &[]),
                want_message: None,
                want_count_failed: false,
                want_action: Some(Ignore),
            },
            Case {
                name: "FailJob rule matched for exit codes",
                rules: Some(vec![exit_rule("FailJob", "In", &[1, 2, 3])]),
                pod: main2(),
                want_message: Some(
                    "Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at index 0",
                ),
                want_count_failed: true,
                want_action: Some(FailJob),
            },
            Case {
                name: "successful containers are skipped by the rules",
                rules: Some(vec![exit_rule("FailJob", "NotIn", &[111])]),
                pod: failed_pod(
                    vec![
                        terminated("main-container", 111),
                        terminated("suppport-container", 0),
                    ],
                    vec![terminated("init-container", 0)],
                    &[],
                ),
                want_message: None,
                want_count_failed: true,
                want_action: None,
            },
            Case {
                name: "FailIndex rule matched for exit codes",
                rules: Some(vec![exit_rule("FailIndex", "In", &[1, 2, 3])]),
                pod: failed_pod(vec![terminated("", 2)], vec![], &[]),
                want_message: None,
                want_count_failed: true,
                want_action: Some(FailIndex),
            },
            Case {
                name: "pod failure policy with NotIn operator and value 0",
                rules: Some(vec![exit_rule("FailJob", "NotIn", &[0])]),
                pod: failed_pod(
                    vec![
                        terminated("main-container", 1),
                        terminated("suppport-container", 0),
                    ],
                    vec![],
                    &[],
                ),
                want_message: Some(
                    "Container main-container for pod default/mypod failed with exit code 1 matching FailJob rule at index 0",
                ),
                want_count_failed: true,
                want_action: Some(FailJob),
            },
            Case {
                name: "second jobfail rule matched for exit codes",
                rules: Some(vec![
                    exit_rule("Count", "In", &[1, 2, 3]),
                    exit_rule("FailJob", "In", &[4, 5, 6]),
                ]),
                pod: failed_pod(vec![terminated("main-container", 6)], vec![], &[]),
                want_message: Some(
                    "Container main-container for pod default/mypod failed with exit code 6 matching FailJob rule at index 1",
                ),
                want_count_failed: true,
                want_action: Some(FailJob),
            },
            Case {
                name: "count rule matched for exit codes",
                rules: Some(vec![exit_rule("Count", "In", &[1, 2, 3])]),
                pod: failed_pod(
                    vec![
                        ContainerStatus {
                            name: "foo".into(),
                            ..Default::default()
                        },
                        terminated("bar", 2),
                    ],
                    vec![],
                    &[],
                ),
                want_message: None,
                want_count_failed: true,
                want_action: Some(Count),
            },
            Case {
                name: "init container exit code matched when regular containers did not",
                rules: Some(vec![PodFailurePolicyRule {
                    on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                        container_name: Some("init".into()),
                        operator: "In".into(),
                        values: vec![42],
                    }),
                    ..exit_rule("FailJob", "In", &[])
                }]),
                pod: failed_pod(
                    vec![terminated("main", 42)],
                    vec![terminated("init", 42)],
                    &[],
                ),
                want_message: Some(
                    "Container init for pod default/mypod failed with exit code 42 matching FailJob rule at index 0",
                ),
                want_count_failed: true,
                want_action: Some(FailJob),
            },
            Case {
                name: "FailIndex rule matched for pod conditions",
                rules: Some(vec![condition_rule(
                    "FailIndex",
                    "DisruptionTarget",
                    "True",
                )]),
                pod: disruption("True"),
                want_message: None,
                want_count_failed: true,
                want_action: Some(FailIndex),
            },
            Case {
                name: "ignore rule matched for pod conditions",
                rules: Some(vec![condition_rule("Ignore", "DisruptionTarget", "True")]),
                pod: disruption("True"),
                want_message: None,
                want_count_failed: false,
                want_action: Some(Ignore),
            },
            Case {
                name: "ignore rule matches by the status=False",
                rules: Some(vec![condition_rule("Ignore", "DisruptionTarget", "False")]),
                pod: disruption("False"),
                want_message: None,
                want_count_failed: false,
                want_action: Some(Ignore),
            },
            Case {
                name: "ignore rule matches by the status=Unknown",
                rules: Some(vec![condition_rule(
                    "Ignore",
                    "DisruptionTarget",
                    "Unknown",
                )]),
                pod: disruption("Unknown"),
                want_message: None,
                want_count_failed: false,
                want_action: Some(Ignore),
            },
            Case {
                name: "ignore rule does not match when status for pattern is False, but actual True",
                rules: Some(vec![condition_rule("Ignore", "DisruptionTarget", "False")]),
                pod: disruption("True"),
                want_message: None,
                want_count_failed: true,
                want_action: None,
            },
            Case {
                name: "ignore rule does not match when status for pattern is True, but actual False",
                rules: Some(vec![condition_rule("Ignore", "DisruptionTarget", "True")]),
                pod: disruption("False"),
                want_message: None,
                want_count_failed: true,
                want_action: None,
            },
            Case {
                name: "job fail rule matched for pod conditions",
                rules: Some(vec![condition_rule("FailJob", "DisruptionTarget", "True")]),
                pod: disruption("True"),
                want_message: Some(
                    "Pod default/mypod has condition DisruptionTarget matching FailJob rule at index 0",
                ),
                want_count_failed: true,
                want_action: Some(FailJob),
            },
            Case {
                name: "count rule matched for pod conditions",
                rules: Some(vec![condition_rule("Count", "DisruptionTarget", "True")]),
                pod: disruption("True"),
                want_message: None,
                want_count_failed: true,
                want_action: Some(Count),
            },
            Case {
                name: "no rule matched",
                rules: Some(vec![
                    exit_rule("Count", "NotIn", &[8]),
                    exit_rule("Ignore", "In", &[1, 2, 3]),
                    exit_rule("FailJob", "NotIn", &[5, 6, 7]),
                    condition_rule("Count", "ResourceLimitExceeded", "True"),
                    condition_rule("Ignore", "DisruptionTarget", "True"),
                ]),
                pod: failed_pod(vec![terminated("", 32)], vec![], &[]),
                // The first rule (NotIn [8]) matches exit code 32.
                want_message: None,
                want_count_failed: true,
                want_action: Some(Count),
            },
        ];
        for c in cases {
            let policy = c.rules.map(|rules| PodFailurePolicy { rules });
            let got = match_pod_failure_policy(policy.as_ref(), &c.pod);
            assert_eq!(
                got.job_failure_message.as_deref(),
                c.want_message,
                "{}",
                c.name
            );
            assert_eq!(got.count_failed, c.want_count_failed, "{}", c.name);
            assert_eq!(got.action, c.want_action, "{}", c.name);
        }
    }
}
