//! The evaluator registry (kubernetes `pkg/quota/v1/evaluator/core/registry.go` and `generic/evaluator.go`): which resource names an object charges, whether a quota's scopes select it, and what it uses.

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, Pod, ResourceQuota, ScopedResourceSelectorRequirement, Service,
};

use super::resource_list::{self, Amount, ResourceList};
use super::{persistent_volume_claims, pods, services};

/// The admission operation being checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// A create.
    Create,
    /// An update (or patch).
    Update,
}

/// An object an evaluator measures. Object-count evaluators need nothing of the object.
#[derive(Clone, Copy, Debug)]
pub enum Object<'a> {
    /// A core/v1 pod.
    Pod(&'a Pod),
    /// A core/v1 service.
    Service(&'a Service),
    /// A core/v1 claim.
    Pvc(&'a PersistentVolumeClaim),
    /// Any other object (counted only).
    Other,
}

/// Objects whose count quota also knows by a legacy name (`configmaps` for
/// `count/configmaps`).
const LEGACY_COUNTED: [&str; 4] = [
    "configmaps",
    "secrets",
    "replicationcontrollers",
    "resourcequotas",
];

/// What one group/resource charges (upstream's per-resource `quota.Evaluator`s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Evaluator {
    /// core/v1 pods.
    Pods,
    /// core/v1 services.
    Services,
    /// core/v1 persistentvolumeclaims.
    Pvcs,
    /// Any other resource: one `count/<resource>[.<group>]` per object, and a legacy name
    /// for a few core resources (`generic.NewObjectCountEvaluator`).
    Count {
        /// `count/<resource>` or `count/<resource>.<group>`.
        count_name: String,
        /// The legacy name (`configmaps`, …), if any.
        legacy_name: Option<&'static str>,
    },
}

/// `count/<resource>` for the core group, `count/<resource>.<group>` otherwise
/// (`ObjectCountQuotaResourceNameFor`).
pub fn object_count_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }
}

/// The group and resource an object-count name counts: `count/deployments.apps` is
/// (`apps`, `deployments`), `count/pods` and the legacy `configmaps` are core resources.
pub fn counted_group_resource(name: &str) -> Option<(String, String)> {
    if let Some(rest) = name.strip_prefix("count/") {
        let (resource, group) = rest.split_once('.').unwrap_or((rest, ""));
        return (!resource.is_empty()).then(|| (group.to_owned(), resource.to_owned()));
    }
    LEGACY_COUNTED
        .contains(&name)
        .then(|| (String::new(), name.to_owned()))
}

impl Evaluator {
    /// The evaluator of a group/resource (the admission plugin adds an object-count
    /// evaluator for any resource without its own).
    pub fn for_resource(group: &str, resource: &str) -> Self {
        match (group, resource) {
            ("", "pods") => Self::Pods,
            ("", "services") => Self::Services,
            ("", "persistentvolumeclaims") => Self::Pvcs,
            _ => Self::Count {
                count_name: object_count_name(group, resource),
                legacy_name: if group.is_empty() {
                    LEGACY_COUNTED.iter().copied().find(|l| *l == resource)
                } else {
                    None
                },
            },
        }
    }

    /// Whether the evaluator charges this operation (`Handles`): pods on create (and the
    /// `resize` subresource), services and claims on create and update (type changes,
    /// expansion), counted objects on create.
    pub fn handles(&self, op: Operation, subresource: &str) -> bool {
        match self {
            Self::Pods => match subresource {
                "" => op == Operation::Create,
                "resize" => op == Operation::Update,
                _ => false,
            },
            Self::Services | Self::Pvcs => true,
            Self::Count { .. } => op == Operation::Create,
        }
    }

    /// The names of `input` this evaluator charges (`MatchingResources`).
    pub fn matching_resources<'a>(
        &self,
        input: impl IntoIterator<Item = &'a String>,
    ) -> Vec<String> {
        match self {
            Self::Pods => pods::matching_resources(input),
            Self::Services => services::matching_resources(input),
            Self::Pvcs => persistent_volume_claims::matching_resources(input),
            Self::Count {
                count_name,
                legacy_name,
            } => input
                .into_iter()
                .filter(|n| *n == count_name || Some(n.as_str()) == *legacy_name)
                .cloned()
                .collect(),
        }
    }

    /// Whether the object is in one scope; only pods have scopes, every other evaluator is
    /// outside any (`MatchesNoScopeFunc`).
    pub fn matches_scope(
        &self,
        selector: &ScopedResourceSelectorRequirement,
        obj: Object<'_>,
    ) -> bool {
        match (self, obj) {
            (Self::Pods, Object::Pod(pod)) => pods::matches_scope(selector, pod),
            _ => false,
        }
    }

    /// Whether a quota applies to the object (`generic.Matches`): its computed `status.hard`
    /// names something this evaluator charges, and every scope of the quota selects it.
    pub fn matches(&self, quota: &ResourceQuota, obj: Object<'_>) -> bool {
        let hard = quota.status.as_ref().and_then(|s| s.hard.as_ref());
        let names = hard.into_iter().flat_map(|h| h.keys());
        if self.matching_resources(names).is_empty() {
            return false;
        }
        scope_selectors(quota)
            .iter()
            .all(|s| self.matches_scope(s, obj))
    }

    /// Refuses an object that does not request what the quota requires (`Constraints`).
    pub fn constraints(&self, required: &[String], obj: Object<'_>) -> Result<(), String> {
        match (self, obj) {
            (Self::Pods, Object::Pod(pod)) => pods::constraints(required, pod),
            _ => Ok(()),
        }
    }

    /// What the object uses (`Usage`); `now` decides whether a deleted pod still counts.
    pub fn usage(&self, obj: Object<'_>, now: jiff::Timestamp) -> ResourceList {
        match (self, obj) {
            (Self::Pods, Object::Pod(pod)) => pods::usage(pod, now),
            (Self::Services, Object::Service(svc)) => services::usage(svc),
            (Self::Pvcs, Object::Pvc(pvc)) => persistent_volume_claims::usage(pvc),
            (
                Self::Count {
                    count_name,
                    legacy_name,
                },
                _,
            ) => {
                let mut out = ResourceList::new();
                out.insert(count_name.clone(), Amount::count(1));
                if let Some(legacy) = legacy_name {
                    out.insert((*legacy).to_owned(), Amount::count(1));
                }
                out
            }
            _ => ResourceList::new(),
        }
    }

    /// The usage of the objects a quota selects, masked to the names it limits
    /// (`generic.CalculateUsageStats` followed by `quota.Mask`).
    pub fn usage_stats<'a>(
        &self,
        quota: &ResourceQuota,
        hard_names: &[String],
        objects: impl IntoIterator<Item = Object<'a>>,
        now: jiff::Timestamp,
    ) -> ResourceList {
        let matching = self.matching_resources(hard_names);
        if matching.is_empty() {
            return ResourceList::new();
        }
        let selectors = scope_selectors(quota);
        // Every limited name starts at zero, so a quota with no matching object reads 0.
        let mut total: ResourceList = matching
            .iter()
            .map(|n| (n.clone(), Amount::count(0)))
            .collect();
        for obj in objects {
            if selectors.iter().all(|s| self.matches_scope(s, obj)) {
                total = resource_list::add(&total, &self.usage(obj, now));
            }
        }
        resource_list::mask(&total, &matching)
    }
}

/// The quota's `spec.scopes` (each as `Exists`) and its `scopeSelector` requirements
/// (`getScopeSelectorsFromQuota`).
pub fn scope_selectors(quota: &ResourceQuota) -> Vec<ScopedResourceSelectorRequirement> {
    let spec = quota.spec.as_ref();
    let mut out: Vec<ScopedResourceSelectorRequirement> = spec
        .and_then(|s| s.scopes.as_ref())
        .into_iter()
        .flatten()
        .map(|scope| ScopedResourceSelectorRequirement {
            scope_name: scope.clone(),
            operator: "Exists".to_owned(),
            values: None,
        })
        .collect();
    if let Some(selector) = spec.and_then(|s| s.scope_selector.as_ref()) {
        out.extend(selector.match_expressions.iter().flatten().cloned());
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn quota(v: serde_json::Value) -> ResourceQuota {
        serde_json::from_value(v).expect("quota")
    }

    #[test]
    fn counted_names() {
        let cases = [
            ("count/deployments.apps", Some(("apps", "deployments"))),
            ("count/pods", Some(("", "pods"))),
            (
                "count/widgets.example.com",
                Some(("example.com", "widgets")),
            ),
            ("secrets", Some(("", "secrets"))),
            ("requests.cpu", None),
            ("count/", None),
        ];
        for (name, want) in cases {
            assert_eq!(
                counted_group_resource(name),
                want.map(|(g, r)| (g.to_owned(), r.to_owned())),
                "{name}"
            );
        }
    }

    #[test]
    fn evaluators_by_resource() {
        assert_eq!(Evaluator::for_resource("", "pods"), Evaluator::Pods);
        assert_eq!(
            Evaluator::for_resource("apps", "deployments"),
            Evaluator::Count {
                count_name: "count/deployments.apps".to_owned(),
                legacy_name: None
            }
        );
        let cm = Evaluator::for_resource("", "configmaps");
        let names = vec![
            "configmaps".to_owned(),
            "count/configmaps".to_owned(),
            "pods".to_owned(),
        ];
        assert_eq!(
            cm.matching_resources(&names),
            ["configmaps", "count/configmaps"]
        );
        assert!(cm.handles(Operation::Create, ""));
        assert!(!cm.handles(Operation::Update, ""));
        assert!(!Evaluator::Pods.handles(Operation::Update, ""));
        assert!(Evaluator::Services.handles(Operation::Update, ""));
    }

    #[test]
    fn matching_uses_the_computed_status_and_every_scope() {
        let pod: Pod = serde_json::from_value(
            json!({"metadata": {}, "spec": {"containers": [{"name": "a"}]}}),
        )
        .expect("pod");
        let computed = quota(
            json!({"metadata": {}, "spec": {"hard": {"pods": "1"}}, "status": {"hard": {"pods": "1"}, "used": {"pods": "0"}}}),
        );
        assert!(Evaluator::Pods.matches(&computed, Object::Pod(&pod)));
        let uncomputed = quota(json!({"metadata": {}, "spec": {"hard": {"pods": "1"}}}));
        assert!(!Evaluator::Pods.matches(&uncomputed, Object::Pod(&pod)));
        let scoped = quota(
            json!({"metadata": {}, "spec": {"hard": {"pods": "1"}, "scopes": ["NotBestEffort"]}, "status": {"hard": {"pods": "1"}}}),
        );
        assert!(!Evaluator::Pods.matches(&scoped, Object::Pod(&pod)));
        let svc: Service = serde_json::from_value(json!({"metadata": {}})).expect("svc");
        let services = quota(
            json!({"metadata": {}, "spec": {"scopes": ["BestEffort"]}, "status": {"hard": {"services": "1"}}}),
        );
        assert!(
            !Evaluator::Services.matches(&services, Object::Service(&svc)),
            "services have no scopes"
        );
    }

    #[test]
    fn usage_stats_sum_the_selected_objects() {
        let best: Pod = serde_json::from_value(
            json!({"metadata": {}, "spec": {"containers": [{"name": "a"}]}}),
        )
        .expect("pod");
        let burst: Pod = serde_json::from_value(json!({"metadata": {}, "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}})).expect("pod");
        let q = quota(
            json!({"metadata": {}, "spec": {"hard": {"pods": "5", "requests.cpu": "4", "services": "1"}, "scopes": ["NotBestEffort"]}}),
        );
        let hard: Vec<String> = vec!["pods".into(), "requests.cpu".into(), "services".into()];
        let now = jiff::Timestamp::UNIX_EPOCH;
        let used = Evaluator::Pods.usage_stats(
            &q,
            &hard,
            [Object::Pod(&best), Object::Pod(&burst), Object::Pod(&burst)],
            now,
        );
        assert_eq!(resource_list::pretty_print(&used), "pods=2,requests.cpu=2");
        let none = Evaluator::Services.usage_stats(&q, &hard, [], now);
        assert_eq!(resource_list::pretty_print(&none), "services=0");
    }
}
