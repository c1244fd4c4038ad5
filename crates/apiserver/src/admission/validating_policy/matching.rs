//! Whether a request falls under a policy's `matchConstraints` or a binding's `matchResources`: namespace and object selectors, resource rules and exclusions (upstream's `policy/matching` and the webhook `rules` predicate).

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{MatchResources, NamedRuleWithOperations};
use kcm_machinery::labels::Selector;
use serde_json::Value;

use crate::admission::attributes::{Attributes, Operation};
use crate::object;

/// A request as matching sees it.
#[derive(Debug)]
pub struct Request<'a> {
    /// The operation.
    pub operation: Operation,
    /// Group, version and plural of the resource.
    pub group: &'a str,
    /// The resource's version.
    pub version: &'a str,
    /// The plural.
    pub resource: &'a str,
    /// The subresource, or `""`.
    pub subresource: &'a str,
    /// The namespace (`""` for cluster-scoped resources).
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// The new object's labels, if there is a new object.
    pub labels: Option<BTreeMap<String, String>>,
    /// The old object's labels, if there is an old object.
    pub old_labels: Option<BTreeMap<String, String>>,
}

impl<'a> Request<'a> {
    /// The request of `a`.
    pub fn of(a: &'a Attributes<'a>) -> Request<'a> {
        Request {
            operation: a.operation,
            group: &a.resource.group,
            version: &a.resource.version,
            resource: &a.resource.plural,
            subresource: a.subresource,
            namespace: a.namespace,
            name: a.name,
            labels: a.object.as_ref().map(object::labels),
            old_labels: a.old_object.map(object::labels),
        }
    }

    fn is_namespace(&self) -> bool {
        self.group.is_empty() && self.resource == "namespaces"
    }
}

/// One `matchConstraints` / `matchResources`, its selectors parsed once.
#[derive(Debug)]
pub struct Matcher {
    namespace_selector: Selector,
    object_selector: Selector,
    resource_rules: Vec<NamedRuleWithOperations>,
    exclude_resource_rules: Vec<NamedRuleWithOperations>,
    /// Whether no resource rules were given (a binding's `matchResources` may omit them:
    /// every resource the policy matches).
    all_resources: bool,
}

impl Matcher {
    /// The matcher of `m`; a selector that does not parse is an error.
    pub fn new(m: &MatchResources) -> Result<Matcher, String> {
        // An unset selector is `{}` once defaulted: everything.
        let selector = |s: Option<&_>| {
            s.map_or(Ok(Selector::everything()), Selector::from_label_selector)
                .map_err(|e| e.to_string())
        };
        let rules = m.resource_rules.clone().unwrap_or_default();
        Ok(Matcher {
            namespace_selector: selector(m.namespace_selector.as_ref())?,
            object_selector: selector(m.object_selector.as_ref())?,
            all_resources: rules.is_empty(),
            resource_rules: rules,
            exclude_resource_rules: m.exclude_resource_rules.clone().unwrap_or_default(),
        })
    }

    /// Whether the namespace selector needs the namespace's labels for `r`.
    pub fn needs_namespace(&self, r: &Request<'_>) -> bool {
        !self.namespace_selector.is_everything() && !r.namespace.is_empty() && !r.is_namespace()
    }

    /// Whether `r` matches, `namespace_labels` being the labels of the request's namespace
    /// (`None` when it does not exist). As upstream's `Matcher.Matches`: selectors, then
    /// exclusions, then rules; a missing namespace is an error only for a request that
    /// otherwise matches.
    pub fn matches(
        &self,
        r: &Request<'_>,
        namespace_labels: Option<&BTreeMap<String, String>>,
    ) -> Result<bool, String> {
        let namespace = self.match_namespace(r, namespace_labels);
        if namespace == Ok(false) {
            return Ok(false);
        }
        if !self.match_object(r) {
            return Ok(false);
        }
        if self
            .exclude_resource_rules
            .iter()
            .any(|rule| rule_matches(rule, r))
        {
            return Ok(false);
        }
        if !self.all_resources && !self.resource_rules.iter().any(|rule| rule_matches(rule, r)) {
            return Ok(false);
        }
        namespace
    }

    /// Upstream's namespace predicate: cluster-scoped resources always match; a namespace
    /// is matched by its own labels.
    fn match_namespace(
        &self,
        r: &Request<'_>,
        namespace_labels: Option<&BTreeMap<String, String>>,
    ) -> Result<bool, String> {
        if self.namespace_selector.is_everything() || (r.namespace.is_empty() && !r.is_namespace())
        {
            return Ok(true);
        }
        if r.is_namespace() {
            let own = if r.operation == Operation::Delete {
                r.old_labels.as_ref()
            } else {
                r.labels.as_ref().or(r.old_labels.as_ref())
            };
            return Ok(self.namespace_selector.matches_opt(own));
        }
        match namespace_labels {
            Some(labels) => Ok(self.namespace_selector.matches(labels)),
            None => Err(format!("namespaces \"{}\" not found", r.namespace)),
        }
    }

    /// Upstream's object predicate: the new or the old object's labels match.
    fn match_object(&self, r: &Request<'_>) -> bool {
        self.object_selector.is_everything()
            || [&r.labels, &r.old_labels]
                .into_iter()
                .flatten()
                .any(|labels| self.object_selector.matches(labels))
    }
}

/// Whether one (named) rule matches, as upstream's `rules.Matcher.Matches` plus the rule's
/// `resourceNames`.
fn rule_matches(rule: &NamedRuleWithOperations, r: &Request<'_>) -> bool {
    let any = |list: &Option<Vec<String>>, value: &str| {
        list.iter()
            .flatten()
            .any(|item| item == "*" || item == value)
    };
    let scope = match rule.scope.as_deref() {
        None | Some("*") => true,
        Some("Cluster") => r.namespace.is_empty(),
        Some("Namespaced") => !r.is_namespace() && !r.namespace.is_empty(),
        Some(_) => false,
    };
    let resource = rule.resources.iter().flatten().any(|res| {
        let (res, sub) = res.split_once('/').unwrap_or((res, ""));
        (res == "*" || res == r.resource) && (sub == "*" || sub == r.subresource)
    });
    let names = rule
        .resource_names
        .as_ref()
        .is_none_or(|names| names.is_empty() || names.iter().any(|n| n == r.name));
    scope
        && any(&rule.operations, r.operation.as_str())
        && any(&rule.api_groups, r.group)
        && any(&rule.api_versions, r.version)
        && resource
        && names
}

/// The labels of a namespace object.
pub fn namespace_labels(ns: &Value) -> BTreeMap<String, String> {
    object::labels(ns)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(
        operation: Operation,
        resource: &'static str,
        namespace: &'static str,
    ) -> Request<'static> {
        Request {
            operation,
            group: if resource == "deployments" {
                "apps"
            } else {
                ""
            },
            version: "v1",
            resource,
            subresource: "",
            namespace,
            name: "x",
            labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
            old_labels: None,
        }
    }

    fn matcher(m: Value) -> Matcher {
        let m: MatchResources = serde_json::from_value(m).expect("match resources");
        Matcher::new(&m).expect("valid")
    }

    #[test]
    fn rules_selectors_and_exclusions_as_upstream() {
        let deployments = json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]});
        let labels = BTreeMap::from([("env".to_owned(), "prod".to_owned())]);
        struct Case {
            name: &'static str,
            m: Value,
            r: Request<'static>,
            namespace: Option<&'static BTreeMap<String, String>>,
            want: Result<bool, String>,
        }
        let prod: &'static BTreeMap<String, String> = Box::leak(Box::new(labels));
        let cases = vec![
            Case {
                name: "rule matches",
                m: deployments.clone(),
                r: request(Operation::Create, "deployments", "default"),
                namespace: None,
                want: Ok(true),
            },
            Case {
                name: "operation not in the rule",
                m: deployments.clone(),
                r: request(Operation::Delete, "deployments", "default"),
                namespace: None,
                want: Ok(false),
            },
            Case {
                name: "other resource",
                m: deployments.clone(),
                r: request(Operation::Create, "pods", "default"),
                namespace: None,
                want: Ok(false),
            },
            Case {
                name: "wildcards and subresources",
                m: json!({"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                    "operations": ["*"], "resources": ["*/*"]}]}),
                r: Request {
                    subresource: "status",
                    ..request(Operation::Update, "pods", "default")
                },
                namespace: None,
                want: Ok(true),
            },
            Case {
                name: "a bare resource does not match its subresource",
                m: json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["*"], "resources": ["pods"]}]}),
                r: Request {
                    subresource: "status",
                    ..request(Operation::Update, "pods", "default")
                },
                namespace: None,
                want: Ok(false),
            },
            Case {
                name: "excluded by name",
                m: json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["*"], "resources": ["pods"]}],
                    "excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["*"], "resources": ["pods"], "resourceNames": ["x"]}]}),
                r: request(Operation::Create, "pods", "default"),
                namespace: None,
                want: Ok(false),
            },
            Case {
                name: "cluster scope only",
                m: json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["*"], "resources": ["pods"], "scope": "Cluster"}]}),
                r: request(Operation::Create, "pods", "default"),
                namespace: None,
                want: Ok(false),
            },
            Case {
                name: "namespace selector matches the namespace's labels",
                m: json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}}),
                r: request(Operation::Create, "pods", "default"),
                namespace: Some(prod),
                want: Ok(true),
            },
            Case {
                name: "namespace selector does not match",
                m: json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}),
                r: request(Operation::Create, "pods", "default"),
                namespace: Some(prod),
                want: Ok(false),
            },
            Case {
                name: "a missing namespace is an error",
                m: json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}),
                r: request(Operation::Create, "pods", "gone"),
                namespace: None,
                want: Err("namespaces \"gone\" not found".to_owned()),
            },
            Case {
                name: "cluster-scoped resources ignore the namespace selector",
                m: json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}),
                r: request(Operation::Create, "nodes", ""),
                namespace: None,
                want: Ok(true),
            },
            Case {
                name: "a namespace is matched by its own labels",
                m: json!({"namespaceSelector": {"matchLabels": {"app": "web"}}}),
                r: request(Operation::Create, "namespaces", ""),
                namespace: None,
                want: Ok(true),
            },
            Case {
                name: "object selector on the old object",
                m: json!({"objectSelector": {"matchLabels": {"app": "old"}}}),
                r: Request {
                    old_labels: Some(BTreeMap::from([("app".to_owned(), "old".to_owned())])),
                    ..request(Operation::Update, "pods", "default")
                },
                namespace: None,
                want: Ok(true),
            },
            Case {
                name: "object selector mismatch",
                m: json!({"objectSelector": {"matchExpressions": [{"key": "app",
                    "operator": "NotIn", "values": ["web"]}]}}),
                r: request(Operation::Create, "pods", "default"),
                namespace: None,
                want: Ok(false),
            },
        ];
        for case in cases {
            assert_eq!(
                matcher(case.m).matches(&case.r, case.namespace),
                case.want,
                "{}",
                case.name
            );
        }
    }
}
