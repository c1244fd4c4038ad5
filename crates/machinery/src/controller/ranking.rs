//! Pod state and scale-down ranking: which pods are active, ready, available, and which to delete first.
//!
//! Mirrors kubernetes `pkg/api/v1/pod` (`IsPodReady`, `IsPodAvailable`), `pkg/controller`
//! (`IsPodActive`, `IsPodTerminating`, `FilterActivePods`, `ActivePods`,
//! `ActivePodsWithRanks`) and the ReplicaSet controller's `getPodsToDelete`, with the
//! `PodDeletionCost` and `LogarithmicScaleDown` features on (their defaults since 1.22 and
//! 1.31).
//!
//! The orderings are not total orders (the logarithmic comparison falls back to UIDs only for
//! times in the same bucket), so sorting uses a merge sort of our own that tolerates any
//! comparison instead of `slice::sort_by`, which may panic on an inconsistent order.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The annotation whose integer value is the cost of deleting a pod relative to its siblings;
/// cheaper pods are deleted first, as core's `PodDeletionCost`.
pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The pod condition that says a pod is about to be deleted because of a disruption (core/v1
/// `DisruptionTarget`), set by the eviction API, the taint managers and PodGC.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// Puts `condition` into `status` as upstream's `UpdatePodCondition`: its transition time is
/// `now` unless the status stays the same. `Some(condition as stored)` when anything changed.
pub fn update_pod_condition(
    status: &mut PodStatus,
    mut condition: PodCondition,
    now: Timestamp,
) -> Option<PodCondition> {
    condition.last_transition_time = Some(Time(now));
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let Some(old) = conditions.iter_mut().find(|c| c.type_ == condition.type_) else {
        conditions.push(condition.clone());
        return Some(condition);
    };
    if condition.status == old.status {
        condition.last_transition_time = old.last_transition_time.clone();
    }
    let equal = condition.status == old.status
        && condition.reason == old.reason
        && condition.message == old.message
        && condition.last_probe_time == old.last_probe_time
        && condition.last_transition_time == old.last_transition_time;
    *old = condition.clone();
    (!equal).then_some(condition)
}

/// The first condition of type `Ready`, as upstream's `GetPodReadyCondition`.
pub fn pod_ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// Whether the pod's `Ready` condition is `True`, as upstream's `IsPodReady`.
pub fn is_pod_ready(pod: &Pod) -> bool {
    pod_ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// Whether the pod has been ready for at least `min_ready_seconds` at `now`, as upstream's
/// `IsPodAvailable`: ready, and either `min_ready_seconds` is 0 or the Ready condition's
/// `lastTransitionTime` plus `min_ready_seconds` is strictly before `now`.
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    let Some(condition) = pod_ready_condition(pod).filter(|c| c.status == "True") else {
        return false;
    };
    if min_ready_seconds == 0 {
        return true;
    }
    let Some(Time(since)) = condition.last_transition_time else {
        return false;
    };
    since
        .checked_add(jiff::SignedDuration::from_secs(i64::from(
            min_ready_seconds,
        )))
        .is_ok_and(|ready_enough| ready_enough < now)
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Whether the pod still counts toward its controller: not `Succeeded`, not `Failed`, and not
/// being deleted, as upstream's `IsPodActive`.
pub fn is_pod_active(pod: &Pod) -> bool {
    let phase = phase(pod);
    phase != "Succeeded" && phase != "Failed" && pod.metadata.deletion_timestamp.is_none()
}

/// Whether the pod is being deleted but has not reached a terminal phase, as upstream's
/// `IsPodTerminating`.
pub fn is_pod_terminating(pod: &Pod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_some()
}

/// The active pods of `pods`, in order, as upstream's `FilterActivePods`. Shares the `Arc`s.
pub fn filter_active_pods(pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    pods.iter()
        .filter(|p| {
            let active = is_pod_active(p);
            if !active {
                tracing::trace!(
                    pod = %crate::controller::expectations::pod_key(p),
                    phase = phase(p),
                    "ignoring inactive pod"
                );
            }
            active
        })
        .cloned()
        .collect()
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// Pending < Unknown < Running; any other phase (including none) counts as Pending, as
/// upstream's `podPhaseToOrdinal` map lookup does.
fn phase_ordinal(pod: &Pod) -> u8 {
    match phase(pod) {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

/// The Ready condition's `lastTransitionTime` when the pod is ready, as upstream's
/// `podReadyTime`; `None` stands for Go's zero time.
fn pod_ready_time(pod: &Pod) -> Option<Timestamp> {
    if !is_pod_ready(pod) {
        return None;
    }
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

fn creation_time(pod: &Pod) -> Option<Timestamp> {
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// True when `t1` is zero (and `t2` is not), or when both are set and `t1` is later, as
/// upstream's `afterOrZero`: zero times sort first, then newer before older.
fn after_or_zero(t1: Option<Timestamp>, t2: Option<Timestamp>) -> bool {
    match (t1, t2) {
        (Some(t1), Some(t2)) => t1 > t2,
        (t1, _) => t1.is_none(),
    }
}

/// The difference of the log2 buckets of `now - t1` and `now - t2` (in nanoseconds; a
/// non-positive age is bucket -1), as upstream's `logarithmicRankDiff`.
fn logarithmic_rank_diff(t1: Timestamp, t2: Timestamp, now: Timestamp) -> i64 {
    fn bucket(t: Timestamp, now: Timestamp) -> i64 {
        // Go's Time.Sub saturates at the int64 range of nanoseconds.
        let nanos = now.duration_since(t).as_nanos();
        let nanos = i64::try_from(nanos).unwrap_or(if nanos < 0 { i64::MIN } else { i64::MAX });
        if nanos > 0 {
            // log2 of a value ≥ 1 is ≥ 0, so truncation is the floor; the cast is in range.
            (nanos as f64).log2() as i64
        } else {
            -1
        }
    }
    bucket(t1, now) - bucket(t2, now)
}

/// The pod's deletion cost from [`POD_DELETION_COST_ANNOTATION`]; 0 when absent or invalid
/// (a leading `+`, leading zeros, or outside `i32`), as upstream's
/// `GetDeletionCostFromPodAnnotations`.
pub fn pod_deletion_cost(pod: &Pod) -> i32 {
    let Some(value) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST_ANNOTATION))
    else {
        return 0;
    };
    let valid_first = match value.as_bytes().first() {
        Some(b'-') | Some(b'1'..=b'9') => true,
        Some(b'0') => value == "0",
        _ => false,
    };
    if !valid_first {
        return 0;
    }
    value.parse::<i32>().unwrap_or(0)
}

/// The highest restart count among regular containers and among sidecars (init containers with
/// `restartPolicy: Always`), as upstream's `maxContainerRestarts`.
fn max_container_restarts(pod: &Pod) -> (i32, i32) {
    let Some(status) = pod.status.as_ref() else {
        return (0, 0);
    };
    let regular = status
        .container_statuses
        .iter()
        .flatten()
        .map(|c| c.restart_count)
        .fold(0, i32::max);
    let sidecars: HashSet<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let sidecar = status
        .init_container_statuses
        .iter()
        .flatten()
        .filter(|c| sidecars.contains(c.name.as_str()))
        .map(|c| c.restart_count)
        .fold(0, i32::max);
    (regular, sidecar)
}

/// `Some(true)` when `a` restarted more, `Some(false)` when `b` did, `None` when equal;
/// regular containers first, then sidecars, as upstream's `compareMaxContainerRestarts`.
fn compare_max_container_restarts(a: &Pod, b: &Pod) -> Option<bool> {
    let (regular_a, sidecar_a) = max_container_restarts(a);
    let (regular_b, sidecar_b) = max_container_restarts(b);
    if regular_a != regular_b {
        return Some(regular_a > regular_b);
    }
    if sidecar_a != sidecar_b {
        return Some(sidecar_a > sidecar_b);
    }
    None
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// Rules 1–3 shared by both orderings: unassigned < assigned, Pending < Unknown < Running,
/// not ready < ready. `None` when they do not decide.
fn less_by_state(a: &Pod, b: &Pod) -> Option<bool> {
    let (node_a, node_b) = (node_name(a), node_name(b));
    if node_a != node_b && (node_a.is_empty() || node_b.is_empty()) {
        return Some(node_a.is_empty());
    }
    let (phase_a, phase_b) = (phase_ordinal(a), phase_ordinal(b));
    if phase_a != phase_b {
        return Some(phase_a < phase_b);
    }
    let (ready_a, ready_b) = (is_pod_ready(a), is_pod_ready(b));
    if ready_a != ready_b {
        return Some(!ready_a);
    }
    None
}

/// Compares two times for rules "ready for less time first" and "newer first": zero first,
/// then, with a reference `now`, by logarithmic bucket with the UID as tie-break, else newer
/// first.
fn less_by_time(
    t_a: Option<Timestamp>,
    t_b: Option<Timestamp>,
    now: Option<Timestamp>,
    a: &Pod,
    b: &Pod,
) -> bool {
    match (t_a, t_b, now) {
        (Some(t_a), Some(t_b), Some(now)) => {
            let diff = logarithmic_rank_diff(t_a, t_b, now);
            if diff == 0 { uid(a) < uid(b) } else { diff < 0 }
        }
        _ => after_or_zero(t_a, t_b),
    }
}

/// Whether `a` (with co-location rank `rank_a`) should be deleted before `b`, as upstream's
/// `ActivePodsWithRanks.Less`. Rules, first decisive one wins:
///
/// 1. unassigned before assigned;
/// 2. Pending before Unknown before Running;
/// 3. not ready before ready;
/// 4. lower [`pod_deletion_cost`] first;
/// 5. higher rank (more related pods on the same node) first;
/// 6. both ready: ready for less time first (zero time first; logarithmic buckets relative to
///    `now` when given, UID as tie-break);
/// 7. more container restarts first (regular containers, then sidecars);
/// 8. created more recently first (zero first; logarithmic as in 6).
pub fn less_with_ranks(
    a: &Pod,
    rank_a: usize,
    b: &Pod,
    rank_b: usize,
    now: Option<Timestamp>,
) -> bool {
    if let Some(less) = less_by_state(a, b) {
        return less;
    }
    let (cost_a, cost_b) = (pod_deletion_cost(a), pod_deletion_cost(b));
    if cost_a != cost_b {
        return cost_a < cost_b;
    }
    if rank_a != rank_b {
        return rank_a > rank_b;
    }
    if is_pod_ready(a) && is_pod_ready(b) {
        let (ready_a, ready_b) = (pod_ready_time(a), pod_ready_time(b));
        if ready_a != ready_b {
            return less_by_time(ready_a, ready_b, now, a, b);
        }
    }
    if let Some(more_restarts) = compare_max_container_restarts(a, b) {
        return more_restarts;
    }
    let (created_a, created_b) = (creation_time(a), creation_time(b));
    if created_a != created_b {
        return less_by_time(created_a, created_b, now, a, b);
    }
    false
}

/// Whether `a` should come before `b` in upstream's plain `ActivePods` order (no ranks, no
/// deletion cost, no logarithmic scaling): rules 1–3 of [`less_with_ranks`], then ready for
/// less time first, more restarts first, newer first.
pub fn less_active(a: &Pod, b: &Pod) -> bool {
    if let Some(less) = less_by_state(a, b) {
        return less;
    }
    if is_pod_ready(a) && is_pod_ready(b) {
        let (ready_a, ready_b) = (pod_ready_time(a), pod_ready_time(b));
        if ready_a != ready_b {
            return after_or_zero(ready_a, ready_b);
        }
    }
    if let Some(more_restarts) = compare_max_container_restarts(a, b) {
        return more_restarts;
    }
    let (created_a, created_b) = (creation_time(a), creation_time(b));
    if created_a != created_b {
        return after_or_zero(created_a, created_b);
    }
    false
}

/// Sorts pods in upstream's `ActivePods` order (see [`less_active`]).
pub fn sort_active_pods(pods: &mut [Arc<Pod>]) {
    merge_sort_by(pods, &|a: &Arc<Pod>, b: &Arc<Pod>| less_active(a, b));
}

/// Pods paired with ranks, sortable so that the pods to delete first come first, as upstream's
/// `ActivePodsWithRanks`.
#[derive(Clone, Debug)]
pub struct ActivePodsWithRanks {
    /// Each pod with its rank (the number of related active pods on its node).
    pods: Vec<(Arc<Pod>, usize)>,
    /// Reference time for logarithmic comparisons; `None` compares times exactly.
    now: Option<Timestamp>,
}

impl ActivePodsWithRanks {
    /// Pairs `pods[i]` with `ranks[i]`; a pod without a rank gets rank 0.
    pub fn new(pods: Vec<Arc<Pod>>, ranks: &[usize], now: Option<Timestamp>) -> Self {
        let pods = pods
            .into_iter()
            .enumerate()
            .map(|(i, p)| (p, ranks.get(i).copied().unwrap_or(0)))
            .collect();
        Self { pods, now }
    }

    /// Ranks each of `pods` by the number of active pods of `related` on the same node, as the
    /// ReplicaSet controller's `getPodsRankedByRelatedPodsOnSameNode`. `related` is usually a
    /// superset of `pods` (every pod owned by controllers of the same owner).
    pub fn ranked_by_related_pods_on_same_node(
        pods: Vec<Arc<Pod>>,
        related: &[Arc<Pod>],
        now: Option<Timestamp>,
    ) -> Self {
        let mut on_node: HashMap<&str, usize> = HashMap::new();
        for pod in related.iter().filter(|p| is_pod_active(p)) {
            *on_node.entry(node_name(pod)).or_default() += 1;
        }
        let pods = pods
            .into_iter()
            .map(|p| {
                let rank = on_node.get(node_name(&p)).copied().unwrap_or(0);
                (p, rank)
            })
            .collect();
        Self { pods, now }
    }

    /// The number of pods.
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    /// True when there are no pods.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Whether pod `i` should be deleted before pod `j` (see [`less_with_ranks`]); false when
    /// either index is out of range.
    pub fn less(&self, i: usize, j: usize) -> bool {
        match (self.pods.get(i), self.pods.get(j)) {
            (Some((a, rank_a)), Some((b, rank_b))) => {
                less_with_ranks(a, *rank_a, b, *rank_b, self.now)
            }
            _ => false,
        }
    }

    /// Sorts the pods, preferred for deletion first.
    pub fn sort(&mut self) {
        let now = self.now;
        merge_sort_by(
            &mut self.pods,
            &|(a, ra): &(Arc<Pod>, usize), (b, rb): &(Arc<Pod>, usize)| {
                less_with_ranks(a, *ra, b, *rb, now)
            },
        );
    }

    /// The pods with their ranks, in their current order.
    pub fn pods(&self) -> &[(Arc<Pod>, usize)] {
        &self.pods
    }

    /// The pods, in their current order, without ranks.
    pub fn into_pods(self) -> Vec<Arc<Pod>> {
        self.pods.into_iter().map(|(p, _)| p).collect()
    }
}

/// The `diff` pods of `filtered` to delete first, as the ReplicaSet controller's
/// `getPodsToDelete`: when not all of them go, they are ranked by co-location with `related`
/// (see [`ActivePodsWithRanks::ranked_by_related_pods_on_same_node`]) and sorted relative to
/// `now`. Returns all of `filtered` when `diff` ≥ its length.
pub fn get_pods_to_delete(
    filtered: Vec<Arc<Pod>>,
    related: &[Arc<Pod>],
    diff: usize,
    now: Timestamp,
) -> Vec<Arc<Pod>> {
    if diff >= filtered.len() {
        return filtered;
    }
    let mut ranked =
        ActivePodsWithRanks::ranked_by_related_pods_on_same_node(filtered, related, Some(now));
    ranked.sort();
    let mut pods = ranked.into_pods();
    pods.truncate(diff);
    pods
}

/// A stable bottom-up merge sort driven by a "less" predicate. Unlike `slice::sort_by` it never
/// panics when the predicate is not a strict weak order; it just yields some order.
fn merge_sort_by<T: Clone>(items: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let n = items.len();
    if n < 2 {
        return;
    }
    let mut buf = items.to_vec();
    let mut width = 1;
    while width < n {
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (mut left, mut right) = (start, mid);
            for slot in &mut buf[start..end] {
                let take_right = right < end && (left >= mid || less(&items[right], &items[left]));
                if take_right {
                    slot.clone_from(&items[right]);
                    right += 1;
                } else {
                    slot.clone_from(&items[left]);
                    left += 1;
                }
            }
            start = end;
        }
        items.clone_from_slice(&buf);
        width *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;
    use kcm_testing::{MetaBuilder, PodSpecBuilder, container, container_status, pod_condition};

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    struct PodArgs<'a> {
        name: &'a str,
        node: &'a str,
        phase: &'a str,
        ready: bool,
        restarts: i32,
        ready_since: Option<Timestamp>,
        created: Option<Timestamp>,
        annotations: &'a [(&'a str, &'a str)],
    }

    /// Upstream's helper in `TestSortingActivePodsWithRanks`.
    fn pod(args: PodArgs<'_>) -> Arc<Pod> {
        let mut pod = kcm_testing::pod(args.name).default_spec().phase(args.phase);
        if !args.node.is_empty() {
            pod = pod.node(args.node);
        }
        if args.ready {
            let ready = pod_condition("Ready", "True");
            pod = pod
                .condition(match args.ready_since {
                    Some(since) => ready.transitioned_at(since),
                    None => ready,
                })
                .container_status(container_status("").restarts(args.restarts));
        }
        if let Some(created) = args.created {
            pod = pod.created_at(created);
        }
        if !args.annotations.is_empty() {
            pod = pod.annotations(args.annotations);
        }
        pod.arc()
    }

    #[allow(clippy::too_many_arguments)]
    fn p(
        name: &str,
        node: &str,
        phase: &str,
        ready: bool,
        restarts: i32,
        ready_since: Option<Timestamp>,
        created: Option<Timestamp>,
        annotations: &[(&str, &str)],
    ) -> Arc<Pod> {
        pod(PodArgs {
            name,
            node,
            phase,
            ready,
            restarts,
            ready_since,
            created,
            annotations,
        })
    }

    fn name(p: &Pod) -> &str {
        p.metadata.name.as_deref().unwrap_or_default()
    }

    /// Upstream `TestSortingActivePodsWithRanks`: equal pairs compare equal both ways; each
    /// (lesser, greater) pair is strictly ordered.
    #[test]
    fn sorting_active_pods_with_ranks() {
        let now = ts("2024-06-15T12:00:00Z");
        let then_1_month = ts("2024-05-15T12:00:00Z");
        let then_2_hours = now - SignedDuration::from_hours(2);
        let then_5_hours = now - SignedDuration::from_hours(5);
        let then_8_hours = now - SignedDuration::from_hours(8);
        let (n, zero) = (Some(now), None);
        let cost = POD_DELETION_COST_ANNOTATION;

        let unscheduled = p("unscheduled", "", "Pending", false, 0, zero, zero, &[]);
        let scheduled_pending = p("pending", "node", "Pending", false, 0, zero, zero, &[]);
        let unknown_phase = p(
            "unknown-phase",
            "node",
            "Unknown",
            false,
            0,
            zero,
            zero,
            &[],
        );
        let running_not_ready = p("not-ready", "node", "Running", false, 0, zero, zero, &[]);
        let running_ready_no_ltt = p(
            "ready-no-last-transition-time",
            "node",
            "Running",
            true,
            0,
            zero,
            zero,
            &[],
        );
        let running_ready_now = p("ready-now", "node", "Running", true, 0, n, n, &[]);
        let m = Some(then_1_month);
        let running_ready_then = p("ready-then", "node", "Running", true, 0, m, m, &[]);
        let running_ready_now_high_restarts = p(
            "ready-high-restarts",
            "node",
            "Running",
            true,
            9001,
            n,
            n,
            &[],
        );
        let running_ready_now_created_then = p(
            "ready-now-created-then",
            "node",
            "Running",
            true,
            0,
            n,
            m,
            &[],
        );
        let low_cost = p(
            "low-deletion-cost",
            "node",
            "Running",
            true,
            0,
            n,
            m,
            &[(cost, "10")],
        );
        let high_cost = p(
            "high-deletion-cost",
            "node",
            "Running",
            true,
            0,
            n,
            m,
            &[(cost, "100")],
        );
        let (h5, h8) = (Some(then_5_hours), Some(then_8_hours));
        let unscheduled_5_hours = p("unscheduled-5-hours", "", "Pending", false, 0, h5, h5, &[]);
        let unscheduled_8_hours = p("unscheduled-10-hours", "", "Pending", false, 0, h8, h8, &[]);
        let ready_2_hours = p(
            "ready-2-hours",
            "",
            "Running",
            true,
            0,
            Some(then_2_hours),
            m,
            &[],
        );
        let ready_5_hours = p("ready-5-hours", "", "Running", true, 0, h5, m, &[]);
        let ready_10_hours = p("ready-10-hours", "", "Running", true, 0, h8, m, &[]);

        struct Equal {
            name: &'static str,
            p1: Arc<Pod>,
            p2: Option<Arc<Pod>>,
        }
        let equality = [
            Equal {
                name: "unscheduled",
                p1: unscheduled.clone(),
                p2: None,
            },
            Equal {
                name: "scheduled pending",
                p1: scheduled_pending.clone(),
                p2: None,
            },
            Equal {
                name: "unknown phase",
                p1: unknown_phase.clone(),
                p2: None,
            },
            Equal {
                name: "running not ready",
                p1: running_not_ready.clone(),
                p2: None,
            },
            Equal {
                name: "ready now created then",
                p1: running_ready_now_created_then.clone(),
                p2: None,
            },
            Equal {
                name: "ready now",
                p1: running_ready_now.clone(),
                p2: None,
            },
            Equal {
                name: "ready then",
                p1: running_ready_then.clone(),
                p2: None,
            },
            Equal {
                name: "ready now high restarts",
                p1: running_ready_now_high_restarts.clone(),
                p2: None,
            },
            Equal {
                name: "unscheduled 5h vs 8h: same log2 bucket, equal (empty) UIDs",
                p1: unscheduled_5_hours.clone(),
                p2: Some(unscheduled_8_hours.clone()),
            },
            Equal {
                name: "ready 5h vs 8h: same log2 bucket, equal (empty) UIDs",
                p1: ready_5_hours.clone(),
                p2: Some(ready_10_hours.clone()),
            },
        ];
        for case in equality {
            let p2 = case.p2.unwrap_or_else(|| case.p1.clone());
            let ranked = ActivePodsWithRanks::new(vec![case.p1.clone(), p2.clone()], &[1, 1], n);
            assert!(
                !ranked.less(0, 1) && !ranked.less(1, 0),
                "{}: expected {:?} to be equivalent to {:?}",
                case.name,
                name(&case.p1),
                name(&p2)
            );
        }

        struct Inequal {
            name: &'static str,
            lesser: (Arc<Pod>, usize),
            greater: (Arc<Pod>, usize),
        }
        let c = |p: &Arc<Pod>| p.clone();
        let inequality = [
            Inequal {
                name: "unscheduled < scheduled, despite lower rank",
                lesser: (c(&unscheduled), 1),
                greater: (c(&scheduled_pending), 2),
            },
            Inequal {
                name: "unscheduled < scheduled, higher rank",
                lesser: (c(&unscheduled), 2),
                greater: (c(&scheduled_pending), 1),
            },
            Inequal {
                name: "pending < unknown",
                lesser: (c(&scheduled_pending), 1),
                greater: (c(&unknown_phase), 2),
            },
            Inequal {
                name: "unknown < running",
                lesser: (c(&unknown_phase), 1),
                greater: (c(&running_not_ready), 2),
            },
            Inequal {
                name: "not ready < ready",
                lesser: (c(&running_not_ready), 1),
                greater: (c(&running_ready_no_ltt), 1),
            },
            Inequal {
                name: "zero ready time < ready now",
                lesser: (c(&running_ready_no_ltt), 1),
                greater: (c(&running_ready_now), 1),
            },
            Inequal {
                name: "higher rank first",
                lesser: (c(&running_ready_now), 2),
                greater: (c(&running_ready_no_ltt), 1),
            },
            Inequal {
                name: "ready for less time first",
                lesser: (c(&running_ready_now), 1),
                greater: (c(&running_ready_then), 1),
            },
            Inequal {
                name: "rank beats ready time",
                lesser: (c(&running_ready_now), 2),
                greater: (c(&running_ready_then), 1),
            },
            Inequal {
                name: "more restarts first",
                lesser: (c(&running_ready_now_high_restarts), 1),
                greater: (c(&running_ready_now), 1),
            },
            Inequal {
                name: "rank beats restarts",
                lesser: (c(&running_ready_now), 2),
                greater: (c(&running_ready_now_high_restarts), 1),
            },
            Inequal {
                name: "newer first",
                lesser: (c(&running_ready_now), 1),
                greater: (c(&running_ready_now_created_then), 1),
            },
            Inequal {
                name: "rank beats creation time",
                lesser: (c(&running_ready_now_created_then), 2),
                greater: (c(&running_ready_now), 1),
            },
            Inequal {
                name: "deletion cost beats rank",
                lesser: (c(&low_cost), 2),
                greater: (c(&high_cost), 1),
            },
            Inequal {
                name: "ready 2h < ready 5h: different log2 buckets",
                lesser: (c(&ready_2_hours), 1),
                greater: (c(&ready_5_hours), 1),
            },
        ];
        for case in inequality {
            let ranked = ActivePodsWithRanks::new(
                vec![case.lesser.0.clone(), case.greater.0.clone()],
                &[case.lesser.1, case.greater.1],
                n,
            );
            assert!(
                ranked.less(0, 1),
                "{}: expected {:?} (rank {}) < {:?} (rank {})",
                case.name,
                name(&case.lesser.0),
                case.lesser.1,
                name(&case.greater.0),
                case.greater.1
            );
            assert!(!ranked.less(1, 0), "{}: not antisymmetric", case.name);
        }
    }

    #[test]
    fn same_log_bucket_falls_back_to_uid() {
        let now = ts("2024-06-15T12:00:00Z");
        let h5 = Some(now - SignedDuration::from_hours(5));
        let h8 = Some(now - SignedDuration::from_hours(8));
        let mut a = (*p("a", "node", "Running", true, 0, h5, h5, &[])).clone();
        let mut b = (*p("b", "node", "Running", true, 0, h8, h8, &[])).clone();
        a.metadata.uid = Some("uid-2".into());
        b.metadata.uid = Some("uid-1".into());
        assert!(less_with_ranks(&b, 0, &a, 0, Some(now)));
        assert!(!less_with_ranks(&a, 0, &b, 0, Some(now)));
        // Without a reference time, the exact times decide: the newer ready time first.
        assert!(less_with_ranks(&a, 0, &b, 0, None));
    }

    /// Upstream `TestSortingActivePods`.
    #[test]
    fn sorting_active_pods() {
        let now = ts("2024-06-15T12:00:00Z");
        let then = Some(ts("2024-05-15T12:00:00Z"));
        let n = Some(now);
        let ready = |name: &str, since, created, restarts: [i32; 2]| {
            let mut pod = (*p(name, "foo", "Running", true, 0, since, created, &[])).clone();
            if let Some(status) = pod.status.as_mut() {
                status.container_statuses = Some(
                    restarts
                        .iter()
                        .map(|r| container_status("").restarts(*r).build())
                        .collect(),
                );
            }
            Arc::new(pod)
        };
        let want = [
            p("unscheduled", "", "Pending", false, 0, None, None, &[]),
            p(
                "scheduledButPending",
                "bar",
                "Pending",
                false,
                0,
                None,
                None,
                &[],
            ),
            p("unknownPhase", "foo", "Unknown", false, 0, None, None, &[]),
            p(
                "runningButNotReady",
                "foo",
                "Running",
                false,
                0,
                None,
                None,
                &[],
            ),
            ready("runningNoLastTransitionTime", None, None, [3, 0]),
            ready("runningWithLastTransitionTime", n, None, [3, 0]),
            ready("runningLongerTime", then, None, [3, 0]),
            ready("lowerContainerRestartCount", then, n, [2, 1]),
            ready("oldest", then, then, [2, 1]),
        ];
        let want_names: Vec<&str> = want.iter().map(|p| name(p)).collect();
        // Deterministic shuffles: every rotation, reversed and not.
        for shift in 0..want.len() {
            for reverse in [false, true] {
                let mut pods: Vec<Arc<Pod>> = want.to_vec();
                pods.rotate_left(shift);
                if reverse {
                    pods.reverse();
                }
                sort_active_pods(&mut pods);
                let got: Vec<&str> = pods.iter().map(|p| name(p)).collect();
                assert_eq!(got, want_names, "shift {shift}, reverse {reverse}");
            }
        }
    }

    #[test]
    fn readiness_and_availability() {
        let now = ts("2024-06-15T12:00:00Z");
        let ready_since = |secs_ago: i64| {
            p(
                "p",
                "n",
                "Running",
                true,
                0,
                Some(now - SignedDuration::from_secs(secs_ago)),
                None,
                &[],
            )
        };
        let not_ready = p("p", "n", "Running", false, 0, None, None, &[]);
        assert!(!is_pod_ready(&not_ready));
        assert!(!is_pod_available(&not_ready, 0, now));

        struct Case {
            name: &'static str,
            pod: Arc<Pod>,
            min_ready_seconds: i32,
            want: bool,
        }
        let cases = [
            Case {
                name: "ready, no min ready seconds",
                pod: ready_since(0),
                min_ready_seconds: 0,
                want: true,
            },
            Case {
                name: "ready long enough",
                pod: ready_since(11),
                min_ready_seconds: 10,
                want: true,
            },
            Case {
                name: "ready exactly min ready seconds is not yet available",
                pod: ready_since(10),
                min_ready_seconds: 10,
                want: false,
            },
            Case {
                name: "ready too recently",
                pod: ready_since(5),
                min_ready_seconds: 10,
                want: false,
            },
            Case {
                name: "ready without a transition time",
                pod: p("p", "n", "Running", true, 0, None, None, &[]),
                min_ready_seconds: 10,
                want: false,
            },
        ];
        for case in cases {
            assert!(is_pod_ready(&case.pod), "{}", case.name);
            assert_eq!(
                is_pod_available(&case.pod, case.min_ready_seconds, now),
                case.want,
                "{}",
                case.name
            );
        }

        let mut false_ready = (*ready_since(100)).clone();
        if let Some(c) = false_ready
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.first_mut())
        {
            c.status = "False".into();
        }
        assert!(!is_pod_ready(&false_ready));
    }

    /// Upstream `TestActivePodFiltering`.
    #[test]
    fn active_pod_filtering() {
        let mut pods: Vec<Arc<Pod>> = [
            ("pod-1", "Succeeded"),
            ("pod-2", "Failed"),
            ("pod-3", "Running"),
            ("pod-4", "Running"),
            ("pod-5", "Running"),
        ]
        .iter()
        .map(|(n, phase)| p(n, "node", phase, false, 0, None, None, &[]))
        .collect();
        let mut deleting = (*pods[4]).clone();
        deleting.metadata.deletion_timestamp = Some(Time(ts("2024-01-01T00:00:00Z")));
        deleting.metadata.name = Some("pod-6".into());
        pods.push(Arc::new(deleting));
        let got: Vec<String> = filter_active_pods(&pods)
            .iter()
            .map(|p| name(p).to_owned())
            .collect();
        assert_eq!(got, vec!["pod-3", "pod-4", "pod-5"]);
        let kept = filter_active_pods(&pods);
        assert!(Arc::ptr_eq(&kept[0], &pods[2]), "filtering shares the Arcs");
    }

    #[test]
    fn deletion_cost_parsing() {
        let cases = [
            ("absent", None, 0),
            ("plain", Some("10"), 10),
            ("negative", Some("-5"), -5),
            ("zero", Some("0"), 0),
            ("plus sign is invalid", Some("+10"), 0),
            ("leading zero is invalid", Some("008"), 0),
            ("out of range", Some("2147483648"), 0),
            ("not a number", Some("ten"), 0),
            ("empty", Some(""), 0),
        ];
        for (case, value, want) in cases {
            let annotations: Vec<(&str, &str)> = value
                .map(|v| vec![(POD_DELETION_COST_ANNOTATION, v)])
                .unwrap_or_default();
            let pod = p("p", "n", "Running", false, 0, None, None, &annotations);
            assert_eq!(pod_deletion_cost(&pod), want, "{case}");
        }
    }

    #[test]
    fn sidecar_restarts_break_ties() {
        let base = |sidecar_restarts: i32| {
            let mut pod = (*p("p", "n", "Running", false, 0, None, None, &[])).clone();
            if let Some(spec) = pod.spec.as_mut() {
                spec.init_containers = Some(vec![
                    container("sidecar").restart_policy("Always").build(),
                    container("init").build(),
                ]);
            }
            if let Some(status) = pod.status.as_mut() {
                status.init_container_statuses = Some(vec![
                    container_status("sidecar")
                        .restarts(sidecar_restarts)
                        .build(),
                    container_status("init").restarts(50).build(),
                ]);
            }
            pod
        };
        let (many, few) = (base(3), base(1));
        assert!(less_with_ranks(&many, 0, &few, 0, None));
        assert!(!less_with_ranks(&few, 0, &many, 0, None));
        assert!(less_active(&many, &few));
    }

    #[test]
    fn pods_to_delete_prefer_crowded_nodes() {
        let now = ts("2024-06-15T12:00:00Z");
        let t = Some(now - SignedDuration::from_hours(1));
        let on = |name: &str, node: &str| p(name, node, "Running", true, 0, t, t, &[]);
        let filtered = vec![on("a1", "a"), on("b1", "b"), on("b2", "b"), on("c1", "c")];
        // Pods of sibling ReplicaSets crowd node "c" the most.
        let mut related = filtered.clone();
        related.extend([on("c-other-1", "c"), on("c-other-2", "c")]);
        let got = get_pods_to_delete(filtered.clone(), &related, 3, now);
        let names: Vec<&str> = got.iter().map(|p| name(p)).collect();
        assert_eq!(names, vec!["c1", "b1", "b2"]);
        // Deleting all of them needs no ranking.
        let all = get_pods_to_delete(filtered.clone(), &related, 4, now);
        assert_eq!(all.len(), 4);
        assert!(Arc::ptr_eq(&all[0], &filtered[0]));
        assert!(get_pods_to_delete(filtered, &related, 0, now).is_empty());
    }

    #[test]
    fn ranks_count_only_active_related_pods() {
        let mut gone = (*p("gone", "x", "Succeeded", false, 0, None, None, &[])).clone();
        gone.metadata.name = Some("gone".into());
        let mine = p("mine", "x", "Running", false, 0, None, None, &[]);
        let related = vec![mine.clone(), Arc::new(gone)];
        let ranked =
            ActivePodsWithRanks::ranked_by_related_pods_on_same_node(vec![mine], &related, None);
        assert_eq!(ranked.pods()[0].1, 1);
    }

    #[test]
    fn merge_sort_survives_inconsistent_orders() {
        // A predicate that is not an order at all must neither panic nor lose elements.
        let mut items: Vec<u32> = (0..100).collect();
        merge_sort_by(&mut items, &|a: &u32, b: &u32| (a * 7 + b * 3) % 5 < 2);
        let mut sorted = items.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        // And a real order sorts, stably.
        let mut pairs: Vec<(u32, u32)> = (0..50).map(|i| (i % 5, i)).collect();
        merge_sort_by(&mut pairs, &|a: &(u32, u32), b: &(u32, u32)| a.0 < b.0);
        assert!(
            pairs
                .windows(2)
                .all(|w| w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1))
        );
    }
}
