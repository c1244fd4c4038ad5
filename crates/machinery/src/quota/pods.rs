//! The pod evaluator's pure parts (kubernetes `pkg/quota/v1/evaluator/core/pods.go`): compute usage, matching resource names, scopes, and the explicit-request constraint.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, Pod, PodAffinityTerm, ScopedResourceSelectorRequirement,
};

use super::resource_list::{self, Amount, ResourceList};
use crate::resource_names;

/// `count/pods`: every stored pod, terminal or not.
pub const POD_OBJECT_COUNT: &str = "count/pods";

/// The resource names the pod evaluator charges (upstream's `podResources`).
const POD_RESOURCES: [&str; 11] = [
    POD_OBJECT_COUNT,
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];

/// Prefixed names charged as requests (`podResourcePrefixes`).
const POD_RESOURCE_PREFIXES: [&str; 2] = ["hugepages-", "requests.hugepages-"];

/// Names that, when a quota limits them, every container must request explicitly
/// (`validationSet`).
const VALIDATION_SET: [&str; 6] = [
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// The names of `input` the pod evaluator charges (`podEvaluator.MatchingResources`).
pub fn matching_resources<'a>(input: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    input
        .into_iter()
        .filter(|name| {
            POD_RESOURCES.contains(&name.as_str())
                || POD_RESOURCE_PREFIXES.iter().any(|p| name.starts_with(p))
                || is_extended_resource_name_for_quota(name)
        })
        .cloned()
        .collect()
}

/// Extended resources are quota'd only as `requests.<name>` (no overcommit).
fn is_extended_resource_name_for_quota(name: &str) -> bool {
    name.strip_prefix("requests.")
        .is_some_and(resource_names::is_extended)
}

/// Whether a pod still counts against compute quota (`QuotaV1Pod`): not terminal, and not a
/// deleted pod whose grace period is over.
pub fn counts_compute(pod: &Pod, now: jiff::Timestamp) -> bool {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    if matches!(phase, "Failed" | "Succeeded") {
        return false;
    }
    if let (Some(deleted), Some(grace)) = (
        pod.metadata.deletion_timestamp.as_ref(),
        pod.metadata.deletion_grace_period_seconds,
    ) && let Ok(end) = deleted
        .0
        .checked_add(jiff::SignedDuration::from_secs(grace))
        && now > end
    {
        return false;
    }
    true
}

/// The pod's usage (`PodUsageFunc`): `count/pods` always; `pods` and compute resources
/// while it counts.
pub fn usage(pod: &Pod, now: jiff::Timestamp) -> ResourceList {
    let mut result = ResourceList::new();
    result.insert(POD_OBJECT_COUNT.to_owned(), Amount::count(1));
    if !counts_compute(pod, now) {
        return result;
    }
    let (requests, limits) = pod_requests_and_limits(pod);
    resource_list::add(&result, &compute_usage(&requests, &limits))
}

/// A container's effective requests: limits stand in for unset requests, as the API
/// server's defaulting stores them.
fn container_requests(c: &Container) -> ResourceList {
    let res = c.resources.as_ref();
    let mut requests = resource_list::from_quantities(res.and_then(|r| r.requests.as_ref()));
    for (k, v) in resource_list::from_quantities(res.and_then(|r| r.limits.as_ref())) {
        requests.entry(k).or_insert(v);
    }
    requests
}

fn container_limits(c: &Container) -> ResourceList {
    resource_list::from_quantities(c.resources.as_ref().and_then(|r| r.limits.as_ref()))
}

/// Per-resource maximum.
fn max(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, v) in b {
        out.entry(k.clone())
            .and_modify(|x| x.milli = x.milli.max(v.milli))
            .or_insert(*v);
    }
    out
}

/// The pod's requests and limits (`resourcehelper.PodRequests`/`PodLimits`): the sum of its
/// containers and restartable (sidecar) init containers, at least each regular init
/// container plus the sidecars started before it, plus the pod overhead.
fn pod_requests_and_limits(pod: &Pod) -> (ResourceList, ResourceList) {
    let Some(spec) = pod.spec.as_ref() else {
        return (ResourceList::new(), ResourceList::new());
    };
    let mut requests = ResourceList::new();
    let mut limits = ResourceList::new();
    for c in &spec.containers {
        requests = resource_list::add(&requests, &container_requests(c));
        limits = resource_list::add(&limits, &container_limits(c));
    }
    let mut sidecar_requests = ResourceList::new();
    let mut sidecar_limits = ResourceList::new();
    let mut init_requests = ResourceList::new();
    let mut init_limits = ResourceList::new();
    for c in spec.init_containers.iter().flatten() {
        if c.restart_policy.as_deref() == Some("Always") {
            sidecar_requests = resource_list::add(&sidecar_requests, &container_requests(c));
            sidecar_limits = resource_list::add(&sidecar_limits, &container_limits(c));
            init_requests = max(&init_requests, &sidecar_requests);
            init_limits = max(&init_limits, &sidecar_limits);
        } else {
            init_requests = max(
                &init_requests,
                &resource_list::add(&container_requests(c), &sidecar_requests),
            );
            init_limits = max(
                &init_limits,
                &resource_list::add(&container_limits(c), &sidecar_limits),
            );
        }
    }
    requests = max(
        &resource_list::add(&requests, &sidecar_requests),
        &init_requests,
    );
    limits = max(&resource_list::add(&limits, &sidecar_limits), &init_limits);
    let overhead = resource_list::from_quantities(spec.overhead.as_ref());
    if !overhead.is_empty() {
        requests = resource_list::add(&requests, &overhead);
        // Overhead adds to a limit only where the pod has one.
        for (k, v) in &overhead {
            if let Some(l) = limits.get_mut(k) {
                l.milli += v.milli;
            }
        }
    }
    (requests, limits)
}

/// Quota names from requests and limits (`podComputeUsageHelper`).
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut result = ResourceList::new();
    result.insert("pods".to_owned(), Amount::count(1));
    for (name, req_alias, limit_alias) in [
        ("cpu", "requests.cpu", "limits.cpu"),
        ("memory", "requests.memory", "limits.memory"),
        (
            "ephemeral-storage",
            "requests.ephemeral-storage",
            "limits.ephemeral-storage",
        ),
    ] {
        if let Some(r) = requests.get(name) {
            result.insert(name.to_owned(), *r);
            result.insert(req_alias.to_owned(), *r);
        }
        if let Some(l) = limits.get(name) {
            result.insert(limit_alias.to_owned(), *l);
        }
    }
    for (name, r) in requests {
        if resource_names::is_huge_pages(name) {
            result.insert(name.clone(), *r);
            result.insert(format!("requests.{name}"), *r);
        }
        if resource_names::is_extended(name) {
            result.insert(format!("requests.{name}"), *r);
        }
    }
    result
}

/// Every container must request what a quota on cpu or memory limits
/// (`podEvaluator.Constraints`), e.g. `must specify limits.cpu for: app; memory for: app`.
pub fn constraints(required: &[String], pod: &Pod) -> Result<(), String> {
    let required: BTreeSet<&str> = required
        .iter()
        .map(String::as_str)
        .filter(|r| VALIDATION_SET.contains(r))
        .collect();
    if required.is_empty() {
        return Ok(());
    }
    let mut missing: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let spec = pod.spec.as_ref();
    let containers = spec
        .map(|s| s.containers.iter())
        .into_iter()
        .flatten()
        .chain(
            spec.and_then(|s| s.init_containers.as_ref())
                .into_iter()
                .flatten(),
        );
    for c in containers {
        let res = c.resources.as_ref();
        let usage = compute_usage(
            &resource_list::from_quantities(res.and_then(|r| r.requests.as_ref())),
            &resource_list::from_quantities(res.and_then(|r| r.limits.as_ref())),
        );
        for r in &required {
            if !usage.contains_key(*r) {
                missing.entry(r).or_default().insert(c.name.as_str());
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| {
            format!(
                "{r} for: {}",
                names.iter().copied().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

/// Whether the pod is in a scope (`podMatchesScopeFunc`).
pub fn matches_scope(selector: &ScopedResourceSelectorRequirement, pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    match selector.scope_name.as_str() {
        "Terminating" => is_terminating(pod),
        "NotTerminating" => !is_terminating(pod),
        "BestEffort" => is_best_effort(pod),
        "NotBestEffort" => !is_best_effort(pod),
        "PriorityClass" => {
            let class = spec
                .and_then(|s| s.priority_class_name.as_deref())
                .unwrap_or("");
            let values = selector.values.as_deref().unwrap_or_default();
            // The pod is matched as the label set {PriorityClass: <its class>}.
            match selector.operator.as_str() {
                "Exists" => !class.is_empty(),
                "In" => values.iter().any(|v| v == class),
                "NotIn" => !values.iter().any(|v| v == class),
                _ => false,
            }
        }
        "CrossNamespacePodAffinity" => uses_cross_namespace_pod_affinity(pod),
        _ => false,
    }
}

/// `activeDeadlineSeconds` set (and not negative).
fn is_terminating(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.active_deadline_seconds)
        .is_some_and(|d| d >= 0)
}

/// QoS class BestEffort: no container requests or limits cpu or memory.
fn is_best_effort(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let sets_compute = |c: &Container| {
        let res = c.resources.as_ref();
        [
            res.and_then(|r| r.requests.as_ref()),
            res.and_then(|r| r.limits.as_ref()),
        ]
        .into_iter()
        .flatten()
        .any(|list| {
            ["cpu", "memory"].iter().any(|name| {
                list.get(*name)
                    .and_then(|q| Amount::parse(&q.0))
                    .is_some_and(|a| a.milli != 0)
            })
        })
    };
    !spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(sets_compute)
}

/// A pod (anti-)affinity term naming other namespaces (`usesCrossNamespacePodAffinity`).
fn uses_cross_namespace_pod_affinity(pod: &Pod) -> bool {
    let Some(affinity) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else {
        return false;
    };
    let crosses = |t: &PodAffinityTerm| {
        t.namespace_selector.is_some() || t.namespaces.as_ref().is_some_and(|n| !n.is_empty())
    };
    let affinity_terms = affinity.pod_affinity.as_ref().map(|a| {
        (
            a.required_during_scheduling_ignored_during_execution
                .as_ref(),
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        )
    });
    let anti_terms = affinity.pod_anti_affinity.as_ref().map(|a| {
        (
            a.required_during_scheduling_ignored_during_execution
                .as_ref(),
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        )
    });
    [affinity_terms, anti_terms]
        .into_iter()
        .flatten()
        .any(|(required, preferred)| {
            required.into_iter().flatten().any(crosses)
                || preferred
                    .into_iter()
                    .flatten()
                    .any(|w| crosses(&w.pod_affinity_term))
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("pod")
    }

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_700_000_000).expect("ts")
    }

    #[test]
    fn usage_cases() {
        let cases = [
            (
                "best effort",
                json!({"containers": [{"name": "a"}]}),
                "count/pods=1,pods=1",
            ),
            (
                "requests and limits",
                json!({"containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"cpu": "200m"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "1"}}}]}),
                "count/pods=1,cpu=1100m,limits.cpu=200m,memory=1Gi,pods=1,requests.cpu=1100m,requests.memory=1Gi",
            ),
            (
                "limits stand in for requests",
                json!({"containers": [{"name": "a", "resources": {"limits": {"memory": "512Mi"}}}]}),
                "count/pods=1,limits.memory=512Mi,memory=512Mi,pods=1,requests.memory=512Mi",
            ),
            (
                "init container maximum",
                json!({"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
                       "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}),
                "count/pods=1,cpu=2,pods=1,requests.cpu=2",
            ),
            (
                "hugepages and extended resources",
                json!({"containers": [{"name": "a", "resources": {"requests": {"hugepages-2Mi": "4Mi", "example.com/gpu": "1"}}}]}),
                "count/pods=1,hugepages-2Mi=4Mi,pods=1,requests.example.com/gpu=1,requests.hugepages-2Mi=4Mi",
            ),
        ];
        for (name, spec, want) in cases {
            assert_eq!(
                resource_list::pretty_print(&usage(&pod(spec), now())),
                want,
                "case {name}"
            );
        }
    }

    #[test]
    fn terminal_and_expired_pods_count_only_as_objects() {
        let mut p = pod(json!({"containers": [{"name": "a"}]}));
        p.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).expect("status"));
        assert_eq!(
            resource_list::pretty_print(&usage(&p, now())),
            "count/pods=1"
        );
        let mut deleted = pod(json!({"containers": [{"name": "a"}]}));
        deleted.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::from_second(1_699_999_000).expect("ts"),
            ));
        deleted.metadata.deletion_grace_period_seconds = Some(30);
        assert!(!counts_compute(&deleted, now()));
        deleted.metadata.deletion_grace_period_seconds = Some(3600);
        assert!(counts_compute(&deleted, now()));
    }

    #[test]
    fn constraints_name_containers_missing_requests() {
        let p = pod(json!({"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b"}]}));
        let required = [
            "requests.cpu".to_owned(),
            "limits.memory".to_owned(),
            "pods".to_owned(),
        ];
        assert_eq!(
            constraints(&required, &p),
            Err("must specify limits.memory for: a,b; requests.cpu for: b".to_owned())
        );
        assert_eq!(constraints(&["pods".to_owned()], &p), Ok(()));
    }

    #[test]
    fn scopes() {
        let sel = |scope: &str, op: &str, values: &[&str]| ScopedResourceSelectorRequirement {
            scope_name: scope.to_owned(),
            operator: op.to_owned(),
            values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
        };
        let best = pod(json!({"containers": [{"name": "a"}], "priorityClassName": "high"}));
        let burst = pod(
            json!({"activeDeadlineSeconds": 10, "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "k", "namespaces": ["x"]}]}}}),
        );
        let cases = [
            ("best effort", sel("BestEffort", "Exists", &[]), true, false),
            (
                "not best effort",
                sel("NotBestEffort", "Exists", &[]),
                false,
                true,
            ),
            (
                "terminating",
                sel("Terminating", "Exists", &[]),
                false,
                true,
            ),
            (
                "not terminating",
                sel("NotTerminating", "Exists", &[]),
                true,
                false,
            ),
            (
                "priority class exists",
                sel("PriorityClass", "Exists", &[]),
                true,
                false,
            ),
            (
                "priority class in",
                sel("PriorityClass", "In", &["high"]),
                true,
                false,
            ),
            (
                "priority class not in",
                sel("PriorityClass", "NotIn", &["high"]),
                false,
                true,
            ),
            (
                "cross namespace",
                sel("CrossNamespacePodAffinity", "Exists", &[]),
                false,
                true,
            ),
        ];
        for (name, s, want_best, want_burst) in cases {
            assert_eq!(
                matches_scope(&s, &best),
                want_best,
                "case {name} (best effort pod)"
            );
            assert_eq!(
                matches_scope(&s, &burst),
                want_burst,
                "case {name} (burstable pod)"
            );
        }
    }

    #[test]
    fn matching_resources_cases() {
        let names: Vec<String> = [
            "pods",
            "services",
            "requests.cpu",
            "requests.hugepages-2Mi",
            "requests.example.com/gpu",
            "example.com/gpu",
            "count/pods",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            matching_resources(&names),
            [
                "pods",
                "requests.cpu",
                "requests.hugepages-2Mi",
                "requests.example.com/gpu",
                "count/pods"
            ]
        );
    }
}
