//! RBAC policy rules and their matching (upstream's `rbacv1helpers` `VerbMatches`/`APIGroupMatches`/`ResourceMatches`/`ResourceNameMatches`/`NonResourceURLMatches`, `RuleAllows`) and the escalation check's `Covers`.

use serde_json::Value;

use crate::auth::authorizer::{Attributes, Target};

/// One `rbac.authorization.k8s.io/v1` `PolicyRule`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyRule {
    /// Verbs, `*` for all.
    pub verbs: Vec<String>,
    /// API groups, `*` for all.
    pub api_groups: Vec<String>,
    /// Resources, `*`, `pods/status`, `*/scale`.
    pub resources: Vec<String>,
    /// Object names; empty for all.
    pub resource_names: Vec<String>,
    /// Non-resource paths; a trailing `*` matches any suffix.
    pub non_resource_urls: Vec<String>,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl PolicyRule {
    /// A rule from its JSON (`verbs`, `apiGroups`, `resources`, `resourceNames`,
    /// `nonResourceURLs`).
    pub fn from_json(v: &Value) -> Self {
        Self {
            verbs: strings(v, "verbs"),
            api_groups: strings(v, "apiGroups"),
            resources: strings(v, "resources"),
            resource_names: strings(v, "resourceNames"),
            non_resource_urls: strings(v, "nonResourceURLs"),
        }
    }

    /// The rules of a Role or ClusterRole object.
    pub fn rules_of(obj: &Value) -> Vec<Self> {
        obj.get("rules")
            .and_then(Value::as_array)
            .map(|rules| rules.iter().map(Self::from_json).collect())
            .unwrap_or_default()
    }

    /// The rule as JSON, empty lists left out.
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("verbs".to_owned(), self.verbs.clone().into());
        for (k, v) in [
            ("apiGroups", &self.api_groups),
            ("resources", &self.resources),
            ("resourceNames", &self.resource_names),
            ("nonResourceURLs", &self.non_resource_urls),
        ] {
            if !v.is_empty() {
                m.insert(k.to_owned(), v.clone().into());
            }
        }
        Value::Object(m)
    }
}

/// `VerbMatches`.
pub fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == "*" || v == verb)
}

/// `APIGroupMatches`.
pub fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    rule.api_groups.iter().any(|g| g == "*" || g == group)
}

/// `ResourceMatches`: `*`, the combined `resource/subresource`, or `*/subresource`.
pub fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|r| {
        if r == "*" || r == combined {
            return true;
        }
        !subresource.is_empty()
            && r.len() == subresource.len() + 2
            && r.starts_with("*/")
            && r.ends_with(subresource)
    })
}

/// `ResourceNameMatches`: any name when the rule names none.
pub fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == name)
}

/// `NonResourceURLMatches`: `*`, exact, or a prefix ending in `*`.
pub fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls.iter().any(|u| {
        u == "*"
            || u == path
            || u.strip_suffix('*')
                .is_some_and(|prefix| path.starts_with(prefix))
    })
}

/// `RuleAllows`: whether `rule` allows the request.
pub fn rule_allows(attrs: &Attributes<'_>, rule: &PolicyRule) -> bool {
    match attrs.target {
        Target::Resource {
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let combined;
            let combined = if subresource.is_empty() {
                resource
            } else {
                combined = format!("{resource}/{subresource}");
                &combined
            };
            verb_matches(rule, attrs.verb)
                && api_group_matches(rule, group)
                && resource_matches(rule, combined, subresource)
                && resource_name_matches(rule, name)
        }
        Target::NonResource { path } => {
            verb_matches(rule, attrs.verb) && non_resource_url_matches(rule, path)
        }
    }
}

/// Whether `owner` covers every rule of `requested` (upstream's `validation.Covers`): each
/// requested rule is broken into single-verb, single-group, single-resource (and name or
/// URL) rules, each of which some owner rule must match.
pub fn covers(owner: &[PolicyRule], requested: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    let mut uncovered = Vec::new();
    for rule in requested {
        for sub in breakdown(rule) {
            if !owner.iter().any(|o| rule_covers(o, &sub)) {
                uncovered.push(sub);
            }
        }
    }
    (uncovered.is_empty(), uncovered)
}

/// Upstream's `BreakdownRule`.
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    let one = |s: &String| vec![s.clone()];
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                if rule.resource_names.is_empty() {
                    out.push(PolicyRule {
                        verbs: one(verb),
                        api_groups: one(group),
                        resources: one(resource),
                        ..PolicyRule::default()
                    });
                }
                for name in &rule.resource_names {
                    out.push(PolicyRule {
                        verbs: one(verb),
                        api_groups: one(group),
                        resources: one(resource),
                        resource_names: one(name),
                        ..PolicyRule::default()
                    });
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..PolicyRule::default()
            });
        }
    }
    out
}

fn has_all(set: &[String], want: &[String]) -> bool {
    want.iter().all(|w| set.contains(w))
}

/// Upstream's `ruleCovers`: the owner rule is a superset of the (broken-down) requested one.
fn rule_covers(owner: &PolicyRule, requested: &PolicyRule) -> bool {
    let star = |v: &[String]| v.iter().any(|s| s == "*");
    let verbs = star(&owner.verbs) || has_all(&owner.verbs, &requested.verbs);
    let groups = star(&owner.api_groups) || has_all(&owner.api_groups, &requested.api_groups);
    let resources = requested.resources.iter().all(|r| {
        owner.resources.iter().any(|o| {
            o == "*"
                || o == r
                // `*/status` covers `pods/status`, and `pods/*`-less subresource forms.
                || (o.starts_with("*/")
                    && r.split_once('/').is_some_and(|(_, sub)| o[2..] == *sub))
        })
    });
    let urls = requested.non_resource_urls.iter().all(|u| {
        owner.non_resource_urls.iter().any(|o| {
            o == "*"
                || o == u
                || o.strip_suffix('*')
                    .is_some_and(|prefix| u.starts_with(prefix))
        })
    });
    // Names restrict: an owner limited to some names does not cover a request for all.
    let names = owner.resource_names.is_empty()
        || (!requested.resource_names.is_empty()
            && has_all(&owner.resource_names, &requested.resource_names));
    verbs && groups && resources && urls && names
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::auth::user::UserInfo;

    fn rule(v: Value) -> PolicyRule {
        PolicyRule::from_json(&v)
    }

    /// Upstream's `TestRuleMatches` (plugin/pkg/auth/authorizer/rbac/rbac_test.go), ported.
    #[test]
    fn rule_matches() {
        let user = UserInfo::default();
        struct Case {
            name: &'static str,
            rule: PolicyRule,
            requests_to_expected: Vec<(Attributes<'static>, bool)>,
        }
        fn res(
            user: &'static UserInfo,
            verb: &'static str,
            group: &'static str,
            resource: &'static str,
            subresource: &'static str,
            name: &'static str,
        ) -> Attributes<'static> {
            Attributes {
                user,
                verb,
                target: Target::Resource {
                    namespace: "ns1",
                    group,
                    resource,
                    subresource,
                    name,
                },
            }
        }
        fn non(
            user: &'static UserInfo,
            verb: &'static str,
            path: &'static str,
        ) -> Attributes<'static> {
            Attributes {
                user,
                verb,
                target: Target::NonResource { path },
            }
        }
        let u: &'static UserInfo = Box::leak(Box::new(user));
        let cases = vec![
            Case {
                name: "star verb, exact match other",
                rule: rule(
                    json!({"verbs": ["*"], "apiGroups": ["group1"], "resources": ["resource1"]}),
                ),
                requests_to_expected: vec![
                    (res(u, "get", "group1", "resource1", "", ""), true),
                    (res(u, "get", "group2", "resource1", "", ""), false),
                    (res(u, "get", "group1", "resource2", "", ""), false),
                    (res(u, "get", "group2", "resource2", "", ""), false),
                    (res(u, "update", "group1", "resource1", "", ""), true),
                ],
            },
            Case {
                name: "star group, exact match other",
                rule: rule(
                    json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["resource1"]}),
                ),
                requests_to_expected: vec![
                    (res(u, "get", "group1", "resource1", "", ""), true),
                    (res(u, "get", "group2", "resource1", "", ""), true),
                    (res(u, "get", "group1", "resource2", "", ""), false),
                    (res(u, "update", "group1", "resource1", "", ""), false),
                ],
            },
            Case {
                name: "star resource, exact match other",
                rule: rule(json!({"verbs": ["get"], "apiGroups": ["group1"], "resources": ["*"]})),
                requests_to_expected: vec![
                    (res(u, "get", "group1", "resource1", "", ""), true),
                    (res(u, "get", "group2", "resource1", "", ""), false),
                    (res(u, "get", "group1", "resource2", "", ""), true),
                    (res(u, "update", "group1", "resource1", "", ""), false),
                ],
            },
            Case {
                name: "tuple expansion",
                rule: rule(
                    json!({"verbs": ["get", "update"], "apiGroups": ["group1", "group2"], "resources": ["resource1", "resource2"]}),
                ),
                requests_to_expected: vec![
                    (res(u, "get", "group1", "resource1", "", ""), true),
                    (res(u, "get", "group2", "resource2", "", ""), true),
                    (res(u, "update", "group2", "resource1", "", ""), true),
                    (res(u, "delete", "group1", "resource1", "", ""), false),
                ],
            },
            Case {
                name: "subresource expansion",
                rule: rule(
                    json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["resource1/subresource1"]}),
                ),
                requests_to_expected: vec![
                    (
                        res(u, "get", "group1", "resource1", "subresource1", ""),
                        true,
                    ),
                    (
                        res(u, "get", "group1", "resource1", "subresource2", ""),
                        false,
                    ),
                    (res(u, "get", "group1", "resource1", "", ""), false),
                    (
                        res(u, "get", "group1", "resource2", "subresource1", ""),
                        false,
                    ),
                ],
            },
            Case {
                name: "star nonresource, exact match other",
                rule: rule(json!({"verbs": ["get"], "nonResourceURLs": ["*"]})),
                requests_to_expected: vec![
                    (non(u, "get", "/foo"), true),
                    (non(u, "get", "/foo/bar"), true),
                    (non(u, "get", "/foo/baz"), true),
                    (non(u, "get", "/foo/bar/one"), true),
                    (non(u, "get", "/foo/baz/one"), true),
                    (non(u, "post", "/foo"), false),
                ],
            },
            Case {
                name: "star nonresource subpath",
                rule: rule(json!({"verbs": ["get"], "nonResourceURLs": ["/foo/*"]})),
                requests_to_expected: vec![
                    (non(u, "get", "/foo"), false),
                    (non(u, "get", "/foo/bar"), true),
                    (non(u, "get", "/foo/baz"), true),
                    (non(u, "get", "/foo/bar/one"), true),
                    (non(u, "get", "/foo/baz/one"), true),
                    (non(u, "get", "/notfoo"), false),
                    (non(u, "get", "/notfoo/bar"), false),
                ],
            },
            Case {
                name: "star verb, exact nonresource",
                rule: rule(json!({"verbs": ["*"], "nonResourceURLs": ["/foo", "/foo/bar/one"]})),
                requests_to_expected: vec![
                    (non(u, "get", "/foo"), true),
                    (non(u, "get", "/foo/bar"), false),
                    (non(u, "get", "/foo/baz"), false),
                    (non(u, "get", "/foo/bar/one"), true),
                    (non(u, "get", "/foo/baz/one"), false),
                ],
            },
            Case {
                name: "resource names",
                rule: rule(
                    json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
                ),
                requests_to_expected: vec![
                    (res(u, "get", "", "configmaps", "", "a"), true),
                    (res(u, "get", "", "configmaps", "", "b"), false),
                    (res(u, "get", "", "configmaps", "", ""), false),
                ],
            },
            Case {
                name: "star subresource",
                rule: rule(
                    json!({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["*/scale"]}),
                ),
                requests_to_expected: vec![
                    (res(u, "get", "apps", "deployments", "scale", ""), true),
                    (res(u, "get", "apps", "deployments", "status", ""), false),
                    (res(u, "get", "apps", "deployments", "", ""), false),
                ],
            },
        ];
        for case in cases {
            for (attrs, expected) in case.requests_to_expected {
                assert_eq!(
                    rule_allows(&attrs, &case.rule),
                    expected,
                    "{}: {attrs:?}",
                    case.name
                );
            }
        }
    }

    /// Cases of upstream's `TestCoversExactMatch` and friends (validation/policy_comparator_test.go).
    #[test]
    fn covers_cases() {
        struct Case {
            name: &'static str,
            owner: Vec<Value>,
            requested: Vec<Value>,
            covers: bool,
        }
        let cases = [
            Case {
                name: "exact match",
                owner: vec![
                    json!({"verbs": ["get"], "apiGroups": ["v1"], "resources": ["builds"]}),
                ],
                requested: vec![
                    json!({"verbs": ["get"], "apiGroups": ["v1"], "resources": ["builds"]}),
                ],
                covers: true,
            },
            Case {
                name: "sub-resource mismatch",
                owner: vec![
                    json!({"verbs": ["get"], "apiGroups": ["v1"], "resources": ["builds/proxy"]}),
                ],
                requested: vec![
                    json!({"verbs": ["get"], "apiGroups": ["v1"], "resources": ["builds"]}),
                ],
                covers: false,
            },
            Case {
                name: "star subresource covers",
                owner: vec![
                    json!({"verbs": ["get"], "apiGroups": ["v1"], "resources": ["*/scale"]}),
                ],
                requested: vec![
                    json!({"verbs": ["get"], "apiGroups": ["v1"], "resources": ["deployments/scale"]}),
                ],
                covers: true,
            },
            Case {
                name: "verb mismatch",
                owner: vec![
                    json!({"verbs": ["create", "update"], "apiGroups": ["v1"], "resources": ["builds"]}),
                ],
                requested: vec![
                    json!({"verbs": ["create", "delete"], "apiGroups": ["v1"], "resources": ["builds"]}),
                ],
                covers: false,
            },
            Case {
                name: "resource names: all names cover some",
                owner: vec![json!({"verbs": ["get"], "apiGroups": [""], "resources": ["builds"]})],
                requested: vec![
                    json!({"verbs": ["get"], "apiGroups": [""], "resources": ["builds"], "resourceNames": ["foo"]}),
                ],
                covers: true,
            },
            Case {
                name: "resource names: some names do not cover all",
                owner: vec![
                    json!({"verbs": ["get"], "apiGroups": [""], "resources": ["builds"], "resourceNames": ["foo"]}),
                ],
                requested: vec![
                    json!({"verbs": ["get"], "apiGroups": [""], "resources": ["builds"]}),
                ],
                covers: false,
            },
            Case {
                name: "stars cover everything",
                owner: vec![json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
                requested: vec![
                    json!({"verbs": ["get", "delete"], "apiGroups": ["", "apps"], "resources": ["pods", "deployments/scale"]}),
                ],
                covers: true,
            },
            Case {
                name: "a star requested needs a star",
                owner: vec![
                    json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}),
                ],
                requested: vec![json!({"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]})],
                covers: false,
            },
            Case {
                name: "non-resource prefix",
                owner: vec![json!({"verbs": ["get"], "nonResourceURLs": ["/api/*"]})],
                requested: vec![json!({"verbs": ["get"], "nonResourceURLs": ["/api/v1"]})],
                covers: true,
            },
            Case {
                name: "non-resource mismatch",
                owner: vec![json!({"verbs": ["get"], "nonResourceURLs": ["/api"]})],
                requested: vec![json!({"verbs": ["get"], "nonResourceURLs": ["/metrics"]})],
                covers: false,
            },
            Case {
                name: "split across owner rules",
                owner: vec![
                    json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}),
                    json!({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}),
                ],
                requested: vec![
                    json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}),
                ],
                covers: true,
            },
        ];
        for case in cases {
            let owner: Vec<PolicyRule> = case.owner.iter().map(PolicyRule::from_json).collect();
            let requested: Vec<PolicyRule> =
                case.requested.iter().map(PolicyRule::from_json).collect();
            let (ok, missing) = covers(&owner, &requested);
            assert_eq!(ok, case.covers, "{}: missing {missing:?}", case.name);
        }
    }
}
