//! DaemonSet pod templates, update strategy arithmetic and pod bookkeeping, as upstream's `daemon/util/daemonset_util.go`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec,
    PodTemplateSpec, Toleration,
};
use kcm_machinery::intstr;
use kcm_machinery::scheduling::{NODE_NAME_FIELD, add_or_update_toleration};

/// The label (and pod label) holding the hash of the DaemonSet revision a pod was made from,
/// as apps/v1 `DefaultDaemonSetUniqueLabelKey` (`ControllerRevisionHashLabelKey`).
pub const DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY: &str = "controller-revision-hash";

/// The pod label holding the DaemonSet template generation a pod was made from, as
/// extensions/v1beta1 `DaemonSetTemplateGenerationKey`.
pub const DAEMON_SET_TEMPLATE_GENERATION_KEY: &str = "pod-template-generation";

/// The DaemonSet annotation the API server keeps the template generation in, as apps/v1
/// `DeprecatedTemplateGeneration`.
pub const DEPRECATED_TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// The taint the node lifecycle controller puts on not-ready nodes.
pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint the node lifecycle controller puts on unreachable nodes.
pub const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The taint of nodes under disk pressure.
pub const TAINT_NODE_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// The taint of nodes under memory pressure.
pub const TAINT_NODE_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// The taint of nodes under PID pressure.
pub const TAINT_NODE_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
/// The taint of cordoned nodes.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// The taint of nodes whose network is not configured.
pub const TAINT_NODE_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

/// `spec.minReadySeconds`, 0 when unset.
pub fn min_ready_seconds(ds: &DaemonSet) -> i32 {
    ds.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

/// `namespace/name` of `ds`.
pub fn ds_key(ds: &DaemonSet) -> String {
    format!(
        "{}/{}",
        ds.metadata.namespace.as_deref().unwrap_or_default(),
        ds.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The DaemonSet's template generation from its annotation, as upstream's
/// `GetTemplateGeneration`: `Ok(None)` without the annotation, an error when it does not
/// parse (callers then use `None`).
pub fn get_template_generation(ds: &DaemonSet) -> Result<Option<i64>, std::num::ParseIntError> {
    match ds
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEPRECATED_TEMPLATE_GENERATION))
    {
        None => Ok(None),
        Some(value) => value.parse().map(Some),
    }
}

fn exists_toleration(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: Some(effect.to_owned()),
        ..Toleration::default()
    }
}

/// Adds the tolerations every daemon pod gets, as upstream's
/// `AddOrUpdateDaemonPodTolerations`: not-ready and unreachable `NoExecute` (so node problems
/// never evict it), disk-, memory- and PID-pressure and unschedulable `NoSchedule`, and
/// network-unavailable `NoSchedule` for host-network pods.
pub fn add_or_update_daemon_pod_tolerations(spec: &mut PodSpec) {
    for (key, effect) in [
        (TAINT_NODE_NOT_READY, "NoExecute"),
        (TAINT_NODE_UNREACHABLE, "NoExecute"),
        (TAINT_NODE_DISK_PRESSURE, "NoSchedule"),
        (TAINT_NODE_MEMORY_PRESSURE, "NoSchedule"),
        (TAINT_NODE_PID_PRESSURE, "NoSchedule"),
        (TAINT_NODE_UNSCHEDULABLE, "NoSchedule"),
    ] {
        add_or_update_toleration(spec, exists_toleration(key, effect));
    }
    if spec.host_network == Some(true) {
        add_or_update_toleration(
            spec,
            exists_toleration(TAINT_NODE_NETWORK_UNAVAILABLE, "NoSchedule"),
        );
    }
}

/// The template daemon pods are created from: `template` with the default tolerations, the
/// `pod-template-generation` label (when known) and the revision `hash` label, as upstream's
/// `CreatePodTemplate`.
pub fn create_pod_template(
    template: &PodTemplateSpec,
    generation: Option<i64>,
    hash: &str,
) -> PodTemplateSpec {
    let mut new_template = template.clone();
    add_or_update_daemon_pod_tolerations(new_template.spec.get_or_insert_with(PodSpec::default));
    let labels = new_template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(BTreeMap::new);
    if let Some(generation) = generation {
        labels.insert(
            DAEMON_SET_TEMPLATE_GENERATION_KEY.to_owned(),
            generation.to_string(),
        );
    }
    if !hash.is_empty() {
        labels.insert(
            DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY.to_owned(),
            hash.to_owned(),
        );
    }
    new_template
}

/// The update strategy's type, `RollingUpdate` when unset (the API default).
pub fn strategy_type(ds: &DaemonSet) -> &str {
    ds.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        .unwrap_or("RollingUpdate")
}

/// The rolling update parameters when the strategy is `RollingUpdate`.
fn rolling_update(ds: &DaemonSet) -> Option<&k8s_openapi::api::apps::v1::RollingUpdateDaemonSet> {
    if strategy_type(ds) != "RollingUpdate" {
        return None;
    }
    ds.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref())
}

/// How many extra pods a rolling update may surge onto, out of `number_to_schedule`, as
/// upstream's `SurgeCount` (0 unless `maxSurge` is set on a rolling update; rounded up).
pub fn surge_count(ds: &DaemonSet, number_to_schedule: i32) -> Result<i32, intstr::Error> {
    match rolling_update(ds).and_then(|r| r.max_surge.as_ref()) {
        None => Ok(0),
        some => intstr::scaled_value(some, number_to_schedule, true),
    }
}

/// How many pods a rolling update may take down, out of `number_to_schedule`, as upstream's
/// `UnavailableCount` (0 unless rolling; rounded up).
pub fn unavailable_count(ds: &DaemonSet, number_to_schedule: i32) -> Result<i32, intstr::Error> {
    match rolling_update(ds) {
        None => Ok(0),
        Some(r) => intstr::scaled_value(r.max_unavailable.as_ref(), number_to_schedule, true),
    }
}

/// Whether the DaemonSet lets a node run two pods during an update, as upstream's
/// `AllowsSurge`.
pub fn allows_surge(ds: &DaemonSet) -> bool {
    surge_count(ds, 1).is_ok_and(|s| s > 0)
}

fn pod_label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// Whether `pod` was made from the current revision: its hash label is `hash`, or its
/// template generation label is the DaemonSet's `generation`, as upstream's `IsPodUpdated`.
pub fn is_pod_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let template_matches = generation.is_some_and(|g| {
        pod_label(pod, DAEMON_SET_TEMPLATE_GENERATION_KEY) == Some(g.to_string().as_str())
    });
    let hash_matches =
        !hash.is_empty() && pod_label(pod, DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY) == Some(hash);
    hash_matches || template_matches
}

/// The `metadata.name In [node]` term that pins a daemon pod to its node.
fn node_name_term(node: &str) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement {
            key: NODE_NAME_FIELD.to_owned(),
            operator: "In".to_owned(),
            values: Some(vec![node.to_owned()]),
        }]),
        match_expressions: None,
    }
}

/// `affinity` with its required node affinity replaced by one term selecting `node` by
/// name, so the scheduler binds the pod there, as upstream's
/// `ReplaceDaemonSetPodNodeNameNodeAffinity` (other affinity kinds are kept).
pub fn replace_daemon_set_pod_node_name_node_affinity(
    affinity: Option<Affinity>,
    node: &str,
) -> Affinity {
    let selector = NodeSelector {
        node_selector_terms: vec![node_name_term(node)],
    };
    let mut affinity = affinity.unwrap_or_default();
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(selector);
    affinity
}

/// The node a daemon pod is for: its `nodeName`, else the single `metadata.name In` value of
/// its required node affinity, as upstream's `GetTargetNodeName`.
pub fn get_target_node_name(pod: &Pod) -> Result<String, String> {
    let spec = pod.spec.as_ref();
    if let Some(name) = spec
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
    {
        return Ok(name.to_owned());
    }
    let key = || {
        format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        )
    };
    let Some(required) = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return Err(format!(
            "no spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution for pod {}",
            key()
        ));
    };
    if required.node_selector_terms.is_empty() {
        return Err(format!(
            "no nodeSelectorTerms in requiredDuringSchedulingIgnoredDuringExecution of pod {}",
            key()
        ));
    }
    for term in &required.node_selector_terms {
        for exp in term.match_fields.iter().flatten() {
            if exp.key == NODE_NAME_FIELD && exp.operator == "In" {
                return match exp.values.as_deref().unwrap_or(&[]) {
                    [name] => Ok(name.clone()),
                    _ => Err(format!(
                        "the matchFields value of '{NODE_NAME_FIELD}' is not unique for pod {}",
                        key()
                    )),
                };
            }
        }
    }
    Err(format!("no node name found for pod {}", key()))
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// Upstream's `podByCreationTimestampAndPhase.Less`: scheduled pods first, then the oldest,
/// then by name.
pub fn compare_by_creation_timestamp_and_phase(a: &Pod, b: &Pod) -> Ordering {
    let (a_scheduled, b_scheduled) = (!node_name(a).is_empty(), !node_name(b).is_empty());
    if a_scheduled != b_scheduled {
        return b_scheduled.cmp(&a_scheduled);
    }
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    created(a)
        .cmp(&created(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// Sorts daemon pods oldest (and scheduled) first.
pub fn sort_by_creation_timestamp_and_phase(pods: &mut [Arc<Pod>]) {
    pods.sort_by(|a, b| compare_by_creation_timestamp_and_phase(a, b));
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use kcm_testing::{MetaBuilder, PodSpecBuilder, daemon_set, pod, pod_template};

    use super::*;

    /// Upstream's `TestCreatePodTemplate`: the generation and hash labels.
    #[test]
    fn create_pod_template_labels_and_tolerations() {
        let template = pod_template().labels(&[("app", "a")]).build();
        let t = create_pod_template(&template, Some(3), "abc");
        let labels = t.metadata.and_then(|m| m.labels).unwrap_or_default();
        assert_eq!(
            labels
                .get(DAEMON_SET_TEMPLATE_GENERATION_KEY)
                .map(String::as_str),
            Some("3")
        );
        assert_eq!(
            labels
                .get(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY)
                .map(String::as_str),
            Some("abc")
        );
        assert_eq!(labels.get("app").map(String::as_str), Some("a"));
        let tolerations = t.spec.and_then(|s| s.tolerations).unwrap_or_default();
        let keys: Vec<_> = tolerations.iter().filter_map(|t| t.key.clone()).collect();
        assert_eq!(
            keys,
            [
                TAINT_NODE_NOT_READY,
                TAINT_NODE_UNREACHABLE,
                TAINT_NODE_DISK_PRESSURE,
                TAINT_NODE_MEMORY_PRESSURE,
                TAINT_NODE_PID_PRESSURE,
                TAINT_NODE_UNSCHEDULABLE
            ]
        );
        let no_labels = create_pod_template(&PodTemplateSpec::default(), None, "");
        assert_eq!(
            no_labels.metadata.and_then(|m| m.labels),
            Some(BTreeMap::new())
        );
    }

    #[test]
    fn host_network_pods_tolerate_network_unavailable() {
        let mut spec = PodSpec {
            host_network: Some(true),
            ..PodSpec::default()
        };
        add_or_update_daemon_pod_tolerations(&mut spec);
        add_or_update_daemon_pod_tolerations(&mut spec);
        let tolerations = spec.tolerations.unwrap_or_default();
        assert_eq!(tolerations.len(), 7, "added once, idempotent");
        assert!(
            tolerations
                .iter()
                .any(|t| t.key.as_deref() == Some(TAINT_NODE_NETWORK_UNAVAILABLE))
        );
    }

    /// Upstream's `TestIsPodUpdated`.
    #[test]
    fn is_pod_updated_table() {
        let with = |labels: &[(&str, &str)]| pod("p").labels(labels).build();
        let cases = [
            (
                "hash matches",
                with(&[(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY, "h1")]),
                "h1",
                None,
                true,
            ),
            (
                "hash differs",
                with(&[(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY, "h0")]),
                "h1",
                None,
                false,
            ),
            (
                "generation matches",
                with(&[(DAEMON_SET_TEMPLATE_GENERATION_KEY, "2")]),
                "h1",
                Some(2),
                true,
            ),
            (
                "generation differs",
                with(&[(DAEMON_SET_TEMPLATE_GENERATION_KEY, "1")]),
                "h1",
                Some(2),
                false,
            ),
            (
                "empty hash never matches",
                with(&[(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY, "")]),
                "",
                None,
                false,
            ),
            ("no labels", with(&[]), "h1", Some(1), false),
        ];
        for (name, p, hash, generation, want) in cases {
            assert_eq!(is_pod_updated(&p, hash, generation), want, "{name}");
        }
    }

    /// Upstream's `TestGetTemplateGeneration`.
    #[test]
    fn template_generation_from_the_annotation() {
        assert_eq!(get_template_generation(&daemon_set("d").build()), Ok(None));
        assert_eq!(
            get_template_generation(&daemon_set("d").template_generation(4).build()),
            Ok(Some(4))
        );
        assert!(
            get_template_generation(
                &daemon_set("d")
                    .annotation(DEPRECATED_TEMPLATE_GENERATION, "x")
                    .build()
            )
            .is_err()
        );
    }

    /// Upstream's `TestReplaceDaemonSetPodNodeNameNodeAffinity` and `TestGetTargetNodeName`.
    #[test]
    fn node_affinity_pins_and_is_read_back() {
        let affinity = replace_daemon_set_pod_node_name_node_affinity(None, "n1");
        let p = pod("p")
            .namespace("ns")
            .with(|p| p.spec.get_or_insert_default().affinity = Some(affinity.clone()))
            .build();
        assert_eq!(get_target_node_name(&p), Ok("n1".to_owned()));
        let replaced = replace_daemon_set_pod_node_name_node_affinity(Some(affinity), "n2");
        let terms = replaced
            .node_affinity
            .and_then(|n| n.required_during_scheduling_ignored_during_execution)
            .map(|s| s.node_selector_terms)
            .unwrap_or_default();
        assert_eq!(terms, vec![node_name_term("n2")]);
        assert_eq!(
            get_target_node_name(&pod("p").node("n3").build()),
            Ok("n3".to_owned())
        );
        let err = get_target_node_name(&pod("p").namespace("ns").build());
        assert!(err.is_err_and(|e| e.contains("no spec.affinity.nodeAffinity")));
    }

    /// Upstream's `TestSurgeCount` and `TestUnavailableCount`.
    #[test]
    fn surge_and_unavailable_counts() {
        let ds = daemon_set("d")
            .max_unavailable(IntOrString::String("20%".into()))
            .max_surge(IntOrString::String("10%".into()))
            .build();
        assert_eq!(unavailable_count(&ds, 10), Ok(2));
        assert_eq!(surge_count(&ds, 15), Ok(2), "rounded up");
        assert!(allows_surge(&ds));
        let on_delete = daemon_set("d")
            .max_surge(IntOrString::Int(1))
            .on_delete()
            .build();
        assert_eq!(surge_count(&on_delete, 10), Ok(0));
        assert_eq!(unavailable_count(&on_delete, 10), Ok(0));
        assert!(!allows_surge(
            &daemon_set("d").max_unavailable(IntOrString::Int(1)).build()
        ));
    }

    #[test]
    fn scheduled_and_older_pods_sort_first() {
        let at = |s: i64| Timestamp::from_second(s).unwrap_or(Timestamp::UNIX_EPOCH);
        let mut pods = vec![
            pod("c").created_at(at(1)).arc(),
            pod("b").node("n").created_at(at(5)).arc(),
            pod("a").node("n").created_at(at(5)).arc(),
            pod("d").node("n").created_at(at(2)).arc(),
        ];
        sort_by_creation_timestamp_and_phase(&mut pods);
        let names: Vec<_> = pods
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        assert_eq!(names, ["d", "a", "b", "c"]);
    }
}
