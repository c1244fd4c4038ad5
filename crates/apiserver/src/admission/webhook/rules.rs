//! Whether a webhook rule (`operations`, `apiGroups`, `apiVersions`, `resources`, `scope`) matches a request, as upstream's `predicates/rules.Matcher`; and the admissionregistration resources no webhook is ever called for.

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;

use crate::admission::attributes::Attributes;

/// Whether `rule` matches the request (scope, operation, group, version and resource with
/// subresource all match).
pub fn matches(rule: &RuleWithOperations, a: &Attributes<'_>) -> bool {
    scope(rule, a) && operation(rule, a) && group(rule, a) && version(rule, a) && resource(rule, a)
}

/// `*` or the requested value in `items` (an absent list matches nothing).
fn exact_or_wildcard(items: Option<&Vec<String>>, requested: &str) -> bool {
    items
        .into_iter()
        .flatten()
        .any(|item| item == "*" || item == requested)
}

/// Whether the request is about a Namespace object itself (cluster-scoped, but its
/// attributes carry its own name as namespace).
fn is_namespace_object(a: &Attributes<'_>) -> bool {
    a.resource.group.is_empty() && a.resource.version == "v1" && a.resource.plural == "namespaces"
}

fn scope(rule: &RuleWithOperations, a: &Attributes<'_>) -> bool {
    match rule.scope.as_deref() {
        None | Some("*") => true,
        Some("Namespaced") => !is_namespace_object(a) && !a.namespace.is_empty(),
        Some("Cluster") => is_namespace_object(a) || a.namespace.is_empty(),
        Some(_) => false,
    }
}

fn group(rule: &RuleWithOperations, a: &Attributes<'_>) -> bool {
    exact_or_wildcard(rule.api_groups.as_ref(), &a.resource.group)
}

fn version(rule: &RuleWithOperations, a: &Attributes<'_>) -> bool {
    exact_or_wildcard(rule.api_versions.as_ref(), &a.resource.version)
}

fn operation(rule: &RuleWithOperations, a: &Attributes<'_>) -> bool {
    let op = a.operation.as_str();
    rule.operations
        .iter()
        .flatten()
        .any(|o| o == "*" || o == op)
}

fn resource(rule: &RuleWithOperations, a: &Attributes<'_>) -> bool {
    let (op_res, op_sub) = (&*a.resource.plural, a.subresource);
    rule.resources.iter().flatten().any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r.as_str(), ""));
        (res == "*" || res == op_res) && (sub == "*" || sub == op_sub)
    })
}

/// Whether the request writes a webhook configuration or an admission policy (or binding):
/// never sent to webhooks, so a broken webhook cannot lock its own configuration in place
/// (upstream's `IsExemptAdmissionConfigurationResource`).
pub fn is_exempt(a: &Attributes<'_>) -> bool {
    a.resource.group == "admissionregistration.k8s.io"
        && matches!(
            &*a.resource.kind,
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::attributes::Operation;
    use crate::auth::user::UserInfo;
    use crate::registry::resource::ResourceDef;
    use crate::resources::admissionregistration::VALIDATING_WEBHOOK_CONFIGURATIONS;
    use crate::resources::apps::DEPLOYMENTS;
    use crate::resources::namespace::NAMESPACES;
    use crate::resources::pod::PODS;

    fn rule(
        ops: &[&str],
        groups: &[&str],
        versions: &[&str],
        resources: &[&str],
    ) -> RuleWithOperations {
        let own = |items: &[&str]| Some(items.iter().map(|s| (*s).to_owned()).collect());
        RuleWithOperations {
            operations: own(ops),
            api_groups: own(groups),
            api_versions: own(versions),
            resources: own(resources),
            scope: None,
        }
    }

    fn scoped(mut r: RuleWithOperations, scope: &str) -> RuleWithOperations {
        r.scope = Some(scope.to_owned());
        r
    }

    /// One request of the table: operation, resource, subresource, namespace.
    struct Request {
        op: Operation,
        def: &'static ResourceDef,
        sub: &'static str,
        ns: &'static str,
    }

    fn req(
        op: Operation,
        def: &'static ResourceDef,
        sub: &'static str,
        ns: &'static str,
    ) -> Request {
        Request { op, def, sub, ns }
    }

    /// As upstream's `TestGroup`, `TestVersion`, `TestOperation`, `TestResource` and
    /// `TestScope` tables, folded into one: each rule with the requests it must and must
    /// not match.
    #[test]
    fn rules_match_as_upstreams_tables() {
        use Operation::*;
        struct Case {
            name: &'static str,
            rule: RuleWithOperations,
            matches: Vec<Request>,
            misses: Vec<Request>,
        }
        let all = &["*"];
        let cases = [
            Case {
                name: "wildcards match everything",
                rule: rule(all, all, all, &["*/*"]),
                matches: vec![
                    req(Create, &PODS, "", "ns"),
                    req(Update, &PODS, "status", "ns"),
                    req(Delete, &DEPLOYMENTS, "", "ns"),
                    req(Connect, &PODS, "exec", "ns"),
                ],
                misses: vec![],
            },
            Case {
                name: "`*` matches main resources only",
                rule: rule(all, all, all, &["*"]),
                matches: vec![req(Create, &PODS, "", "ns")],
                misses: vec![req(Update, &PODS, "status", "ns")],
            },
            Case {
                name: "operations",
                rule: rule(&["CREATE", "DELETE"], all, all, &["*"]),
                matches: vec![req(Create, &PODS, "", "ns"), req(Delete, &PODS, "", "ns")],
                misses: vec![req(Update, &PODS, "", "ns"), req(Connect, &PODS, "", "ns")],
            },
            Case {
                name: "groups",
                rule: rule(all, &["apps"], all, &["*"]),
                matches: vec![req(Create, &DEPLOYMENTS, "", "ns")],
                misses: vec![req(Create, &PODS, "", "ns")],
            },
            Case {
                name: "the core group is the empty string",
                rule: rule(all, &[""], &["v1"], &["pods"]),
                matches: vec![req(Create, &PODS, "", "ns")],
                misses: vec![req(Create, &DEPLOYMENTS, "", "ns")],
            },
            Case {
                name: "versions",
                rule: rule(all, all, &["v1beta1"], &["*"]),
                matches: vec![],
                misses: vec![req(Create, &PODS, "", "ns")],
            },
            Case {
                name: "a named subresource",
                rule: rule(all, all, all, &["pods/status"]),
                matches: vec![req(Update, &PODS, "status", "ns")],
                misses: vec![
                    req(Update, &PODS, "", "ns"),
                    req(Update, &PODS, "exec", "ns"),
                ],
            },
            Case {
                name: "every resource's status",
                rule: rule(all, all, all, &["*/status"]),
                matches: vec![
                    req(Update, &PODS, "status", "ns"),
                    req(Update, &DEPLOYMENTS, "status", "ns"),
                ],
                misses: vec![req(Update, &PODS, "", "ns")],
            },
            Case {
                name: "pods and every subresource of pods (`*` matches no subresource too)",
                rule: rule(all, all, all, &["pods/*"]),
                matches: vec![
                    req(Update, &PODS, "status", "ns"),
                    req(Create, &PODS, "eviction", "ns"),
                    req(Create, &PODS, "", "ns"),
                ],
                misses: vec![req(Update, &DEPLOYMENTS, "status", "ns")],
            },
            Case {
                name: "namespaced scope",
                rule: scoped(rule(all, all, all, &["*"]), "Namespaced"),
                matches: vec![req(Create, &PODS, "", "ns")],
                misses: vec![
                    req(Create, &NAMESPACES, "", "ns"),
                    req(Create, &VALIDATING_WEBHOOK_CONFIGURATIONS, "", ""),
                ],
            },
            Case {
                name: "cluster scope (a namespace is cluster-scoped)",
                rule: scoped(rule(all, all, all, &["*"]), "Cluster"),
                matches: vec![
                    req(Create, &NAMESPACES, "", "ns"),
                    req(Create, &VALIDATING_WEBHOOK_CONFIGURATIONS, "", ""),
                ],
                misses: vec![req(Create, &PODS, "", "ns")],
            },
            Case {
                name: "an unknown scope matches nothing",
                rule: scoped(rule(all, all, all, &["*"]), "Elsewhere"),
                matches: vec![],
                misses: vec![req(Create, &PODS, "", "ns")],
            },
        ];
        let user = UserInfo::admin();
        for case in cases {
            for (want, requests) in [(true, &case.matches), (false, &case.misses)] {
                for r in requests {
                    let a = Attributes::new(r.op, r.def, r.ns, "x", Some(json!({})), &user)
                        .with_subresource(r.sub);
                    assert_eq!(
                        matches(&case.rule, &a),
                        want,
                        "{}: {} {}/{}",
                        case.name,
                        r.op.as_str(),
                        r.def.plural,
                        r.sub
                    );
                }
            }
        }
    }

    #[test]
    fn admission_configuration_is_exempt() {
        let user = UserInfo::admin();
        let config = Attributes::new(
            Operation::Create,
            &VALIDATING_WEBHOOK_CONFIGURATIONS,
            "",
            "c",
            None,
            &user,
        );
        assert!(is_exempt(&config));
        let pod = Attributes::new(Operation::Create, &PODS, "ns", "p", None, &user);
        assert!(!is_exempt(&pod));
    }
}
