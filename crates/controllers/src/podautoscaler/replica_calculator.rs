//! The replica calculator: the replica count a target's pods and their metrics call for, with the tolerance, missing metrics and unready pods handled as upstream's `replica_calculator.go`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::quantity::milli_value;

/// `--horizontal-pod-autoscaler-tolerance`' default.
pub const DEFAULT_TOLERANCE: f64 = 0.1;
/// `--horizontal-pod-autoscaler-cpu-initialization-period`' default.
pub const DEFAULT_CPU_INITIALIZATION_PERIOD: Duration = Duration::from_secs(300);
/// `--horizontal-pod-autoscaler-initial-readiness-delay`' default.
pub const DEFAULT_INITIAL_READINESS_DELAY: Duration = Duration::from_secs(30);

/// One pod's metric, as upstream's `metricsclient.PodMetric`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodMetric {
    /// When it was measured (the end of the window).
    pub timestamp: Timestamp,
    /// The window it was averaged over.
    pub window: Duration,
    /// The value in milli-units (millicores; thousandths of a byte).
    pub value: i64,
}

/// Metrics by pod name, as upstream's `PodMetricsInfo`.
pub type PodMetricsInfo = BTreeMap<String, PodMetric>;

/// Why no replica count could be computed; the messages are upstream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalculationError {
    /// The selector matched no pod.
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    /// A container lacks a request for the resource, so utilization is undefined.
    #[error("missing request for {resource} in container {container} of Pod {pod}")]
    MissingRequest {
        /// The resource (`cpu`).
        resource: String,
        /// The container without the request.
        container: String,
        /// Its pod.
        pod: String,
    },
    /// Every pod with metrics was unready or ignored.
    #[error("did not receive metrics for targeted pods (pods might be unready)")]
    NoReadyMetrics,
    /// No metric belonged to a pod with known requests.
    #[error("no metrics returned matched known pods")]
    NoMatchingMetrics,
}

/// The outcome of a utilization calculation, as the return values of upstream's
/// `GetResourceReplicas`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UtilizationProposal {
    /// The proposed replica count.
    pub replicas: i32,
    /// The current average utilization, in percent of the requests.
    pub utilization: i32,
    /// The current average value per pod, in milli-units.
    pub raw_utilization: i64,
}

/// The outcome of an average-value calculation, as upstream's `GetRawResourceReplicas`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueProposal {
    /// The proposed replica count.
    pub replicas: i32,
    /// The current average value per pod, in milli-units.
    pub usage: i64,
}

/// Calculates replica counts, as upstream's `ReplicaCalculator` (its metrics client and pod
/// lister are the caller's: the pods and metrics are passed in).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplicaCalculator {
    /// A usage ratio within `1 ± tolerance` changes nothing.
    pub tolerance: f64,
    /// CPU samples of pods started less than this ago are trusted only once a full window
    /// was measured after the pod became ready.
    pub cpu_initialization_period: Duration,
    /// An unready pod started less than this before its last readiness transition is taken
    /// as never having been ready.
    pub delay_of_initial_readiness_status: Duration,
}

impl Default for ReplicaCalculator {
    fn default() -> Self {
        Self {
            tolerance: DEFAULT_TOLERANCE,
            cpu_initialization_period: DEFAULT_CPU_INITIALIZATION_PERIOD,
            delay_of_initial_readiness_status: DEFAULT_INITIAL_READINESS_DELAY,
        }
    }
}

/// How [`group_pods`] sorted the pods.
#[derive(Debug, Default)]
struct Groups {
    ready: usize,
    unready: BTreeSet<String>,
    missing: BTreeSet<String>,
    ignored: BTreeSet<String>,
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

fn add(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

/// Sorts the pods as upstream's `groupPods`: deleted and failed pods are ignored, pending
/// ones unready, pods without a metric missing; for CPU, a pod is unready when it has no
/// Ready condition or start time, when within the CPU initialization period it is not ready
/// or its sample was taken less than a window after its readiness changed, and after that
/// period when it is not ready and never was.
fn group_pods(
    pods: &[Arc<Pod>],
    metrics: &PodMetricsInfo,
    resource: &str,
    calc: &ReplicaCalculator,
    now: Timestamp,
) -> Groups {
    let mut groups = Groups::default();
    for pod in pods {
        let pod_name = name(pod).to_owned();
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
        if pod.metadata.deletion_timestamp.is_some() || phase == "Failed" {
            groups.ignored.insert(pod_name);
            continue;
        }
        if phase == "Pending" {
            groups.unready.insert(pod_name);
            continue;
        }
        let Some(metric) = metrics.get(&pod_name) else {
            groups.missing.insert(pod_name);
            continue;
        };
        if resource == "cpu" {
            let condition = status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
            let start = status.and_then(|s| s.start_time.as_ref()).map(|t| t.0);
            let unready = match (condition, start) {
                (Some(condition), Some(start)) => {
                    let transition = condition
                        .last_transition_time
                        .as_ref()
                        .map_or(Timestamp::UNIX_EPOCH, |t| t.0);
                    if add(start, calc.cpu_initialization_period) > now {
                        condition.status == "False"
                            || metric.timestamp < add(transition, metric.window)
                    } else {
                        condition.status == "False"
                            && add(start, calc.delay_of_initial_readiness_status) > transition
                    }
                }
                _ => true,
            };
            if unready {
                groups.unready.insert(pod_name);
                continue;
            }
        }
        groups.ready += 1;
    }
    groups
}

/// The summed requests of `resource` of each pod (of `container` only when given), in
/// milli-units, as upstream's `calculateRequests` (restartable init containers count).
fn calculate_requests(
    pods: &[Arc<Pod>],
    container: Option<&str>,
    resource: &str,
) -> Result<BTreeMap<String, i64>, CalculationError> {
    let mut requests = BTreeMap::new();
    for pod in pods {
        let Some(spec) = pod.spec.as_ref() else {
            requests.insert(name(pod).to_owned(), 0);
            continue;
        };
        let sidecars = spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"));
        let mut sum = 0i64;
        for c in spec.containers.iter().chain(sidecars) {
            if container.is_some_and(|want| want != c.name) {
                continue;
            }
            let request = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(resource))
                .and_then(|q| milli_value(&q.0));
            match request {
                Some(request) => sum = sum.saturating_add(request),
                None => {
                    return Err(CalculationError::MissingRequest {
                        resource: resource.to_owned(),
                        container: c.name.clone(),
                        pod: name(pod).to_owned(),
                    });
                }
            }
        }
        requests.insert(name(pod).to_owned(), sum);
    }
    Ok(requests)
}

/// As upstream's `GetResourceUtilizationRatio`: the usage ratio, the utilization in percent
/// of the requests and the average value, over the pods with both a metric and requests.
fn utilization_ratio(
    metrics: &PodMetricsInfo,
    requests: &BTreeMap<String, i64>,
    target_utilization: i32,
) -> Result<(f64, i32, i64), CalculationError> {
    let mut metrics_total = 0i64;
    let mut requests_total = 0i64;
    let mut entries = 0i64;
    for (pod, metric) in metrics {
        let Some(request) = requests.get(pod) else {
            continue;
        };
        metrics_total = metrics_total.saturating_add(metric.value);
        requests_total = requests_total.saturating_add(*request);
        entries += 1;
    }
    if requests_total == 0 {
        return Err(CalculationError::NoMatchingMetrics);
    }
    let utilization =
        i32::try_from(metrics_total.saturating_mul(100) / requests_total).unwrap_or(i32::MAX);
    Ok((
        f64::from(utilization) / f64::from(target_utilization),
        utilization,
        metrics_total / entries,
    ))
}

/// As upstream's `GetMetricUsageRatio`: the ratio of the average value to the target.
fn usage_ratio(metrics: &PodMetricsInfo, target: i64) -> (f64, i64) {
    let total: i64 = metrics
        .values()
        .map(|m| m.value)
        .fold(0, i64::saturating_add);
    let count = i64::try_from(metrics.len()).unwrap_or(i64::MAX).max(1);
    let usage = total / count;
    (usage as f64 / target as f64, usage)
}

/// `ceil(x)` as a replica count (saturating).
fn ceil_replicas(x: f64) -> i32 {
    let c = x.ceil();
    if c >= f64::from(i32::MAX) {
        i32::MAX
    } else if c <= 0.0 {
        0
    } else {
        c as i32
    }
}

fn placeholder(value: i64) -> PodMetric {
    PodMetric {
        timestamp: Timestamp::UNIX_EPOCH,
        window: Duration::ZERO,
        value,
    }
}

impl ReplicaCalculator {
    /// The replica count that brings the pods' average utilization of `resource` (percent
    /// of their requests) to `target_utilization`, as upstream's `GetResourceReplicas`:
    /// missing pods count as using 100 % (or the target, if higher) on a scale-down and 0 %
    /// on a scale-up, unready pods as 0 % on a scale-up; no change within the tolerance or
    /// when the adjustments would reverse the direction.
    #[allow(clippy::too_many_arguments)]
    pub fn resource_replicas(
        &self,
        current_replicas: i32,
        target_utilization: i32,
        resource: &str,
        container: Option<&str>,
        pods: &[Arc<Pod>],
        mut metrics: PodMetricsInfo,
        now: Timestamp,
    ) -> Result<UtilizationProposal, CalculationError> {
        if pods.is_empty() {
            return Err(CalculationError::NoPods);
        }
        let groups = group_pods(pods, &metrics, resource, self, now);
        for pod in groups.ignored.iter().chain(&groups.unready) {
            metrics.remove(pod);
        }
        let requests = calculate_requests(pods, container, resource)?;
        if metrics.is_empty() {
            return Err(CalculationError::NoReadyMetrics);
        }
        let (ratio, utilization, raw) = utilization_ratio(&metrics, &requests, target_utilization)?;
        let proposal = |replicas| UtilizationProposal {
            replicas,
            utilization,
            raw_utilization: raw,
        };
        let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
        if !scale_up_with_unready && groups.missing.is_empty() {
            if (1.0 - ratio).abs() <= self.tolerance {
                return Ok(proposal(current_replicas));
            }
            return Ok(proposal(ceil_replicas(ratio * groups.ready as f64)));
        }
        if !groups.missing.is_empty() {
            let fallback = i64::from(target_utilization.max(100));
            for pod in &groups.missing {
                let value = if ratio < 1.0 {
                    requests
                        .get(pod)
                        .copied()
                        .unwrap_or(0)
                        .saturating_mul(fallback)
                        / 100
                } else {
                    0
                };
                if ratio != 1.0 {
                    metrics.insert(pod.clone(), placeholder(value));
                }
            }
        }
        if scale_up_with_unready {
            for pod in &groups.unready {
                metrics.insert(pod.clone(), placeholder(0));
            }
        }
        let (new_ratio, _, _) = utilization_ratio(&metrics, &requests, target_utilization)?;
        if (1.0 - new_ratio).abs() <= self.tolerance
            || (ratio < 1.0 && new_ratio > 1.0)
            || (ratio > 1.0 && new_ratio < 1.0)
        {
            return Ok(proposal(current_replicas));
        }
        let new_replicas = ceil_replicas(new_ratio * metrics.len() as f64);
        if (new_ratio < 1.0 && new_replicas > current_replicas)
            || (new_ratio > 1.0 && new_replicas < current_replicas)
        {
            return Ok(proposal(current_replicas));
        }
        Ok(proposal(new_replicas))
    }

    /// The replica count that brings the pods' average value of `resource` (milli-units) to
    /// `target`, as upstream's `GetRawResourceReplicas` / `calcPlainMetricReplicas`.
    pub fn raw_resource_replicas(
        &self,
        current_replicas: i32,
        target: i64,
        resource: &str,
        pods: &[Arc<Pod>],
        mut metrics: PodMetricsInfo,
        now: Timestamp,
    ) -> Result<ValueProposal, CalculationError> {
        if pods.is_empty() {
            return Err(CalculationError::NoPods);
        }
        let groups = group_pods(pods, &metrics, resource, self, now);
        for pod in groups.ignored.iter().chain(&groups.unready) {
            metrics.remove(pod);
        }
        if metrics.is_empty() {
            return Err(CalculationError::NoReadyMetrics);
        }
        let (ratio, usage) = usage_ratio(&metrics, target);
        let proposal = |replicas| ValueProposal { replicas, usage };
        let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
        if !scale_up_with_unready && groups.missing.is_empty() {
            if (1.0 - ratio).abs() <= self.tolerance {
                return Ok(proposal(current_replicas));
            }
            return Ok(proposal(ceil_replicas(ratio * groups.ready as f64)));
        }
        for pod in &groups.missing {
            let value = if ratio < 1.0 { target } else { 0 };
            metrics.insert(pod.clone(), placeholder(value));
        }
        if scale_up_with_unready {
            for pod in &groups.unready {
                metrics.insert(pod.clone(), placeholder(0));
            }
        }
        let (new_ratio, _) = usage_ratio(&metrics, target);
        if (1.0 - new_ratio).abs() <= self.tolerance
            || (ratio < 1.0 && new_ratio > 1.0)
            || (ratio > 1.0 && new_ratio < 1.0)
        {
            return Ok(proposal(current_replicas));
        }
        Ok(proposal(ceil_replicas(new_ratio * metrics.len() as f64)))
    }
}

#[cfg(test)]
#[path = "replica_calculator_tests.rs"]
mod tests;
