//! Deciding whether a user may do something (apiserver's `authorizer.Authorizer` and `RuleResolver`), with kcm's [`BootstrapPolicy`].

use std::fmt::Debug;

use crate::auth::user::{ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, SYSTEM_MASTERS, UserInfo};

/// What a request asks to do, as apiserver's `authorizer.Attributes`.
#[derive(Clone, Copy, Debug)]
pub struct Attributes<'a> {
    /// Who asks.
    pub user: &'a UserInfo,
    /// The verb: `get`, `list`, `create`, ... for resources, the lower-cased HTTP method
    /// for non-resource paths.
    pub verb: &'a str,
    /// What the verb acts on.
    pub target: Target<'a>,
}

/// The object of a request: a resource or a non-resource path.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// An API resource.
    Resource {
        /// The namespace; empty for cluster-scoped resources and all-namespace requests.
        namespace: &'a str,
        /// The API group; empty for core.
        group: &'a str,
        /// The plural resource, e.g. `pods`.
        resource: &'a str,
        /// The subresource, e.g. `status`; empty for the main resource.
        subresource: &'a str,
        /// The object name; empty for collections.
        name: &'a str,
    },
    /// A path outside the resource API, e.g. `/healthz`.
    NonResource {
        /// The path.
        path: &'a str,
    },
}

/// An authorizer's answer, as apiserver's `authorizer.Decision` with its reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, with why (may be empty).
    Allow(String),
    /// Explicitly denied, with why.
    Deny(String),
    /// No rule says anything: denied unless another authorizer allows.
    NoOpinion(String),
}

/// A rule over resources, as `authorization.k8s.io/v1` `ResourceRule`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceRule {
    /// Verbs, `*` for all.
    pub verbs: Vec<String>,
    /// API groups, `*` for all.
    pub api_groups: Vec<String>,
    /// Resources (`pods`, `pods/status`, `*`, `*/scale`).
    pub resources: Vec<String>,
    /// Object names; empty for all.
    pub resource_names: Vec<String>,
}

/// A rule over non-resource paths, as `authorization.k8s.io/v1` `NonResourceRule`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonResourceRule {
    /// Verbs, `*` for all.
    pub verbs: Vec<String>,
    /// Paths; a trailing `*` matches any suffix.
    pub non_resource_urls: Vec<String>,
}

/// What a user may do in a namespace, as a `SelfSubjectRulesReview` status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// Rules over resources.
    pub resource_rules: Vec<ResourceRule>,
    /// Rules over non-resource paths.
    pub non_resource_rules: Vec<NonResourceRule>,
    /// Whether some authorizer could not list its rules.
    pub incomplete: bool,
}

/// Decides requests and lists a user's rules. An RBAC authorizer reading Roles and bindings
/// implements the same trait.
pub trait Authorizer: Send + Sync + Debug {
    /// Whether `attrs` is allowed.
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision;

    /// The rules `user` has in `namespace` (upstream's `RuleResolver.RulesFor`).
    fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules;
}

/// One of the bootstrap policy's cluster roles and the groups it is bound to (upstream's
/// `bootstrappolicy.ClusterRoles()` / `ClusterRoleBindings()`, restricted to the bindings
/// kcm's identities can match).
struct BootstrapBinding {
    /// The ClusterRoleBinding's name (the ClusterRole's as well).
    name: &'static str,
    /// The groups bound.
    groups: &'static [&'static str],
    /// `(verbs, apiGroups, resources)` rules.
    resource_rules: &'static [(
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
    )],
    /// `(verbs, nonResourceURLs)` rules.
    non_resource_rules: &'static [(&'static [&'static str], &'static [&'static str])],
}

/// The bootstrap bindings, as upstream's defaults.
const BOOTSTRAP: &[BootstrapBinding] = &[
    BootstrapBinding {
        name: "cluster-admin",
        groups: &[SYSTEM_MASTERS],
        resource_rules: &[(&["*"], &["*"], &["*"])],
        non_resource_rules: &[(&["*"], &["*"])],
    },
    BootstrapBinding {
        name: "system:basic-user",
        groups: &[ALL_AUTHENTICATED],
        resource_rules: &[
            (
                &["create"],
                &["authentication.k8s.io"],
                &["selfsubjectreviews"],
            ),
            (
                &["create"],
                &["authorization.k8s.io"],
                &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            ),
        ],
        non_resource_rules: &[],
    },
    BootstrapBinding {
        name: "system:discovery",
        groups: &[ALL_AUTHENTICATED],
        resource_rules: &[],
        non_resource_rules: &[(
            &["get"],
            &[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ],
        )],
    },
    BootstrapBinding {
        name: "system:public-info-viewer",
        groups: &[ALL_AUTHENTICATED, ALL_UNAUTHENTICATED],
        resource_rules: &[],
        non_resource_rules: &[(
            &["get"],
            &["/healthz", "/livez", "/readyz", "/version", "/version/"],
        )],
    },
];

/// kcm's authorizer: `system:masters` may do everything (upstream's privileged-group
/// authorizer, which answers before RBAC with no reason), and every user has the rules of
/// the bootstrap ClusterRoles bound to their groups (`cluster-admin`, `system:basic-user`,
/// `system:discovery`, `system:public-info-viewer`), answered with RBAC's reasons. Roles
/// and bindings created through the API are stored but not consulted yet.
#[derive(Clone, Copy, Debug, Default)]
pub struct BootstrapPolicy;

impl BootstrapPolicy {
    fn bindings_of<'a>(
        user: &'a UserInfo,
    ) -> impl Iterator<Item = (&'static BootstrapBinding, &'static str)> + 'a {
        BOOTSTRAP
            .iter()
            .filter_map(move |b| b.groups.iter().find(|g| user.in_group(g)).map(|g| (b, *g)))
    }
}

impl Authorizer for BootstrapPolicy {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        if attrs.user.in_group(SYSTEM_MASTERS) {
            return Decision::Allow(String::new());
        }
        for (binding, group) in Self::bindings_of(attrs.user) {
            if binding_allows(binding, attrs) {
                return Decision::Allow(format!(
                    "RBAC: allowed by ClusterRoleBinding {name:?} of ClusterRole {name:?} to Group {group:?}",
                    name = binding.name
                ));
            }
        }
        Decision::NoOpinion(String::new())
    }

    fn rules_for(&self, user: &UserInfo, _namespace: &str) -> Rules {
        let mut rules = Rules::default();
        for (binding, _) in Self::bindings_of(user) {
            for (verbs, groups, resources) in binding.resource_rules {
                rules.resource_rules.push(ResourceRule {
                    verbs: owned(verbs),
                    api_groups: owned(groups),
                    resources: owned(resources),
                    resource_names: Vec::new(),
                });
            }
            for (verbs, urls) in binding.non_resource_rules {
                rules.non_resource_rules.push(NonResourceRule {
                    verbs: owned(verbs),
                    non_resource_urls: owned(urls),
                });
            }
        }
        rules
    }
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Whether one of the binding's rules allows `attrs` (RBAC's `RuleAllows`).
fn binding_allows(binding: &BootstrapBinding, attrs: &Attributes<'_>) -> bool {
    let verb_matches = |verbs: &[&str]| verbs.iter().any(|v| *v == "*" || *v == attrs.verb);
    match attrs.target {
        Target::Resource {
            group,
            resource,
            subresource,
            ..
        } => binding
            .resource_rules
            .iter()
            .any(|(verbs, groups, resources)| {
                verb_matches(verbs)
                    && groups.iter().any(|g| *g == "*" || *g == group)
                    && resource_matches(resources, resource, subresource)
            }),
        Target::NonResource { path } => binding
            .non_resource_rules
            .iter()
            .any(|(verbs, urls)| verb_matches(verbs) && urls.iter().any(|u| url_matches(u, path))),
    }
}

/// RBAC's `ResourceMatches`: `*` matches everything, `pods` the main resource, `pods/status`
/// and `*/status` the subresource.
fn resource_matches(rules: &[&str], resource: &str, subresource: &str) -> bool {
    rules.iter().any(|rule| {
        if *rule == "*" {
            return true;
        }
        if subresource.is_empty() {
            return *rule == resource;
        }
        *rule == format!("{resource}/{subresource}") || *rule == format!("*/{subresource}")
    })
}

/// RBAC's `NonResourceURLMatches`: exact, or a prefix ending in `*`.
fn url_matches(rule: &str, path: &str) -> bool {
    if rule == "*" || rule == path {
        return true;
    }
    rule.strip_suffix('*')
        .is_some_and(|prefix| path.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource<'a>(
        user: &'a UserInfo,
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            user,
            verb,
            target: Target::Resource {
                namespace: "default",
                group,
                resource,
                subresource: "",
                name: "",
            },
        }
    }

    #[test]
    fn masters_may_do_everything_without_a_reason() {
        let admin = UserInfo::admin();
        assert_eq!(
            BootstrapPolicy.authorize(&resource(&admin, "delete", "apps", "deployments")),
            Decision::Allow(String::new())
        );
    }

    #[test]
    fn authenticated_users_have_the_basic_and_discovery_roles_only() {
        let bob = UserInfo {
            username: "bob".to_owned(),
            groups: vec![ALL_AUTHENTICATED.to_owned()],
            ..UserInfo::default()
        };
        struct Case {
            name: &'static str,
            attrs: Attributes<'static>,
            allowed: bool,
        }
        let bob: &'static UserInfo = Box::leak(Box::new(bob));
        let cases = [
            Case {
                name: "create pods",
                attrs: resource(bob, "create", "", "pods"),
                allowed: false,
            },
            Case {
                name: "self access review",
                attrs: resource(
                    bob,
                    "create",
                    "authorization.k8s.io",
                    "selfsubjectaccessreviews",
                ),
                allowed: true,
            },
            Case {
                name: "discovery",
                attrs: Attributes {
                    user: bob,
                    verb: "get",
                    target: Target::NonResource {
                        path: "/apis/apps/v1",
                    },
                },
                allowed: true,
            },
            Case {
                name: "post to a discovery path",
                attrs: Attributes {
                    user: bob,
                    verb: "post",
                    target: Target::NonResource { path: "/api" },
                },
                allowed: false,
            },
        ];
        for case in cases {
            let decision = BootstrapPolicy.authorize(&case.attrs);
            assert_eq!(
                matches!(decision, Decision::Allow(_)),
                case.allowed,
                "{}: {decision:?}",
                case.name
            );
        }
        let Decision::Allow(reason) = BootstrapPolicy.authorize(&resource(
            bob,
            "create",
            "authentication.k8s.io",
            "selfsubjectreviews",
        )) else {
            panic!("selfsubjectreviews allowed");
        };
        assert_eq!(
            reason,
            r#"RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole "system:basic-user" to Group "system:authenticated""#
        );
    }

    #[test]
    fn rules_of_a_master_include_everything() {
        let rules = BootstrapPolicy.rules_for(&UserInfo::admin(), "default");
        assert_eq!(
            rules.resource_rules[0],
            ResourceRule {
                verbs: vec!["*".to_owned()],
                api_groups: vec!["*".to_owned()],
                resources: vec!["*".to_owned()],
                resource_names: vec![],
            }
        );
        assert_eq!(rules.non_resource_rules[0].non_resource_urls, ["*"]);
        assert!(!rules.incomplete);
        let anonymous = UserInfo {
            username: "system:anonymous".to_owned(),
            groups: vec![ALL_UNAUTHENTICATED.to_owned()],
            ..UserInfo::default()
        };
        let rules = BootstrapPolicy.rules_for(&anonymous, "");
        assert!(rules.resource_rules.is_empty());
        assert_eq!(rules.non_resource_rules.len(), 1);
    }

    #[test]
    fn subresource_and_url_matching() {
        assert!(resource_matches(&["pods/status"], "pods", "status"));
        assert!(resource_matches(&["*/status"], "pods", "status"));
        assert!(!resource_matches(&["pods"], "pods", "status"));
        assert!(url_matches("/apis/*", "/apis/apps"));
        assert!(!url_matches("/apis", "/apis/apps"));
    }
}
