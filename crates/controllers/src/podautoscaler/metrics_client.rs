//! Reads pod resource usage from the resource metrics API (`metrics.k8s.io/v1beta1` PodMetrics), as upstream's `metrics.NewRESTMetricsClient(...).GetResourceMetric`, with a fake for tests.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use kcm_machinery::controller::api_status::error_message;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde::Deserialize;

use super::quantity::milli_value;
use super::replica_calculator::{PodMetric, PodMetricsInfo};

/// Why no metrics could be read; the messages are upstream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricsError {
    /// The list failed (the metrics API is not served, or answered an error).
    #[error("unable to fetch metrics from resource metrics API: {0}")]
    Fetch(String),
    /// The list was empty.
    #[error("no metrics returned from resource metrics API")]
    Empty,
}

/// Reads the usage of the pods a selector matches.
#[async_trait]
pub trait MetricsClient: Send + Sync {
    /// The usage of `resource` of each pod in `namespace` matching `selector` (summed over
    /// its containers, or of `container` only), in milli-units, and the time of the first
    /// sample. A pod lacking the resource in any container counted is left out.
    async fn resource_metric(
        &self,
        resource: &str,
        namespace: &str,
        selector: &str,
        container: Option<&str>,
    ) -> Result<(PodMetricsInfo, Timestamp), MetricsError>;
}

/// The PodMetrics fields the controller reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodMetricsFields {
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    window: Option<String>,
    #[serde(default)]
    containers: Vec<ContainerFields>,
}

#[derive(Debug, Default, Deserialize)]
struct ContainerFields {
    #[serde(default)]
    name: String,
    #[serde(default)]
    usage: BTreeMap<String, String>,
}

/// A Go duration such as `15s`, `1m0.5s`, `20.5s`.
fn go_duration(s: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let split = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (number, tail) = rest.split_at(split);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let n: f64 = number.parse().ok()?;
        total += n * match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// The per-pod metrics of `items`, as upstream's `getPodMetrics` / `getContainerMetrics`.
fn pod_metrics(
    items: &[(String, PodMetricsFields)],
    resource: &str,
    container: Option<&str>,
) -> PodMetricsInfo {
    let mut out = PodMetricsInfo::new();
    for (name, m) in items {
        let timestamp = m
            .timestamp
            .as_deref()
            .and_then(|t| t.parse().ok())
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let window = m
            .window
            .as_deref()
            .and_then(go_duration)
            .unwrap_or_default();
        let counted: Vec<&ContainerFields> = m
            .containers
            .iter()
            .filter(|c| container.is_none_or(|want| want == c.name))
            .collect();
        if counted.is_empty() {
            continue;
        }
        let values: Option<Vec<i64>> = counted
            .iter()
            .map(|c| c.usage.get(resource).and_then(|q| milli_value(q)))
            .collect();
        if let Some(values) = values {
            out.insert(
                name.clone(),
                PodMetric {
                    timestamp,
                    window,
                    value: values.into_iter().fold(0, i64::saturating_add),
                },
            );
        }
    }
    out
}

/// [`MetricsClient`] over the API server's `metrics.k8s.io/v1beta1`.
#[derive(Clone)]
pub struct ApiMetricsClient {
    client: kube::Client,
}

impl std::fmt::Debug for ApiMetricsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiMetricsClient").finish_non_exhaustive()
    }
}

impl ApiMetricsClient {
    /// Reads through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

/// metrics.k8s.io/v1beta1 pods.
fn pod_metrics_resource() -> ApiResource {
    ApiResource {
        group: "metrics.k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "metrics.k8s.io/v1beta1".into(),
        kind: "PodMetrics".into(),
        plural: "pods".into(),
    }
}

#[async_trait]
impl MetricsClient for ApiMetricsClient {
    async fn resource_metric(
        &self,
        resource: &str,
        namespace: &str,
        selector: &str,
        container: Option<&str>,
    ) -> Result<(PodMetricsInfo, Timestamp), MetricsError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &pod_metrics_resource());
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| MetricsError::Fetch(error_message(&e)))?;
        let items: Vec<(String, PodMetricsFields)> = list
            .items
            .into_iter()
            .map(|o| {
                let fields = serde_json::from_value(o.data).unwrap_or_default();
                (o.metadata.name.unwrap_or_default(), fields)
            })
            .collect();
        let Some((_, first)) = items.first() else {
            return Err(MetricsError::Empty);
        };
        let timestamp = first
            .timestamp
            .as_deref()
            .and_then(|t| t.parse().ok())
            .unwrap_or(Timestamp::UNIX_EPOCH);
        Ok((pod_metrics(&items, resource, container), timestamp))
    }
}

/// A [`MetricsClient`] answering what a test set.
#[derive(Debug, Default)]
pub struct FakeMetricsClient {
    answer: Mutex<Option<Result<(PodMetricsInfo, Timestamp), MetricsError>>>,
}

impl FakeMetricsClient {
    /// A fake answering [`MetricsError::Empty`] until set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Answers `answer` from now on.
    pub fn set(&self, answer: Result<(PodMetricsInfo, Timestamp), MetricsError>) {
        *self.answer.lock().unwrap_or_else(PoisonError::into_inner) = Some(answer);
    }
}

#[async_trait]
impl MetricsClient for FakeMetricsClient {
    async fn resource_metric(
        &self,
        _resource: &str,
        _namespace: &str,
        _selector: &str,
        _container: Option<&str>,
    ) -> Result<(PodMetricsInfo, Timestamp), MetricsError> {
        self.answer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or(Err(MetricsError::Empty))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pods_sum_their_containers_and_skip_incomplete_ones() {
        let parse = |v: serde_json::Value| -> PodMetricsFields {
            serde_json::from_value(v).expect("fields")
        };
        let items = vec![
            (
                "a".to_owned(),
                parse(
                    json!({"timestamp": "2026-01-01T00:00:00Z", "window": "15s", "containers": [
                    {"name": "app", "usage": {"cpu": "150000000n", "memory": "1024Ki"}},
                    {"name": "side", "usage": {"cpu": "50m", "memory": "1Mi"}}]}),
                ),
            ),
            (
                "b".to_owned(),
                parse(json!({"containers": [{"name": "app", "usage": {"memory": "1Ki"}}]})),
            ),
            ("c".to_owned(), parse(json!({"containers": []}))),
        ];
        let cpu = pod_metrics(&items, "cpu", None);
        assert_eq!(cpu.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(cpu["a"].value, 200);
        assert_eq!(cpu["a"].window, Duration::from_secs(15));
        let side = pod_metrics(&items, "cpu", Some("side"));
        assert_eq!(side["a"].value, 50);
        let memory = pod_metrics(&items, "memory", Some("app"));
        assert_eq!(memory["b"].value, 1024 * 1000);
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration("15s"), Some(Duration::from_secs(15)));
        assert_eq!(go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(go_duration("20.5s"), Some(Duration::from_millis(20500)));
        assert_eq!(go_duration("x"), None);
    }
}
