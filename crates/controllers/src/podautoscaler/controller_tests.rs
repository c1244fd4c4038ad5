//! Controller tests in the spirit of upstream's horizontal_test.go: caches seeded, fake scale and metrics clients, `sync` called, writes and events counted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
    MetricIdentifier, MetricSpec, MetricTarget, PodsMetricSource, ResourceMetricSource,
};
use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kcm_machinery::events::{EventType, FakeRecorder};
use kcm_machinery::informer::store::Indexer;

use super::super::client::FakeHpaClient;
use super::super::metrics_client::FakeMetricsClient;
use super::super::replica_calculator::{PodMetric, PodMetricsInfo};
use super::*;

fn start() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().expect("timestamp")
}

fn hpa(metrics: Vec<MetricSpec>) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("hpa-uid".into()),
            resource_version: Some("1".into()),
            ..Default::default()
        },
        spec: HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: "web".into(),
            },
            min_replicas: Some(1),
            max_replicas: 10,
            metrics: Some(metrics),
            behavior: None,
        },
        status: None,
    }
}

fn cpu_utilization(percent: i32) -> MetricSpec {
    MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource {
            name: "cpu".into(),
            target: MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(percent),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

fn pod(i: usize) -> Arc<Pod> {
    let long_ago = Time(start() - jiff::SignedDuration::from_secs(3600));
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(format!("web-{i}")),
            namespace: Some("default".into()),
            labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "cpu".to_owned(),
                        Quantity("200m".into()),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            start_time: Some(long_ago.clone()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(long_ago),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    })
}

/// Every pod at `millis` CPU, sampled at `at`.
fn usage(pods: usize, millis: i64, at: Timestamp) -> PodMetricsInfo {
    (0..pods)
        .map(|i| {
            (
                format!("web-{i}"),
                PodMetric {
                    timestamp: at,
                    window: Duration::from_secs(15),
                    value: millis,
                },
            )
        })
        .collect()
}

struct Fixture {
    controller: HorizontalController,
    client: Arc<FakeHpaClient>,
    metrics: Arc<FakeMetricsClient>,
    recorder: FakeRecorder,
    now: Arc<std::sync::Mutex<Timestamp>>,
    hpas: Indexer<HorizontalPodAutoscaler>,
}

impl Fixture {
    fn new(hpa: HorizontalPodAutoscaler, pods: usize) -> Self {
        let hpas = Indexer::new();
        hpas.add(Arc::new(hpa)).expect("hpa");
        let pod_cache = Indexer::new();
        for i in 0..pods {
            pod_cache.add(pod(i)).expect("pod");
        }
        let client = Arc::new(FakeHpaClient::new());
        client.set_scale("web", i32::try_from(pods).unwrap_or(0), "app=web");
        let metrics = Arc::new(FakeMetricsClient::new());
        let recorder = FakeRecorder::new();
        let now = Arc::new(std::sync::Mutex::new(start()));
        let clock_now = Arc::clone(&now);
        let controller = HorizontalController::with_caches(
            hpas.clone(),
            pod_cache,
            client.clone(),
            metrics.clone(),
            Arc::new(recorder.clone()),
            HorizontalControllerOptions::default(),
        )
        .with_clock(Arc::new(move || *clock_now.lock().expect("clock")));
        Self {
            controller,
            client,
            metrics,
            recorder,
            now,
            hpas,
        }
    }

    fn advance(&self, secs: i64) {
        let mut now = self.now.lock().expect("clock");
        *now += jiff::SignedDuration::from_secs(secs);
    }

    fn last_status(&self) -> HorizontalPodAutoscaler {
        self.client
            .statuses()
            .last()
            .cloned()
            .expect("a status was written")
    }

    /// Stores the last written status in the cache, as the informer would.
    fn observe_status(&self) {
        self.hpas
            .update(Arc::new(self.last_status()))
            .expect("update");
    }
}

fn condition(hpa: &HorizontalPodAutoscaler, type_: &str) -> (String, String, String) {
    let c = hpa
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_).cloned())
        .unwrap_or_else(|| panic!("no {type_} condition"));
    (
        c.status,
        c.reason.unwrap_or_default(),
        c.message.unwrap_or_default(),
    )
}

#[tokio::test(start_paused = true)]
async fn scales_up_to_the_computed_count_and_says_why() {
    let f = Fixture::new(hpa(vec![cpu_utilization(50)]), 2);
    // 150 % of a 200m request: utilization 150, ratio 3, 2 pods -> 6.
    f.metrics.set(Ok((usage(2, 300, start()), start())));
    let deleted = f.controller.sync("default/web").await.expect("sync");
    assert!(!deleted);
    assert_eq!(
        f.client.scale_updates(),
        [("web".to_owned(), 4)],
        "limited to max(2 * 2, 4)"
    );
    let events = f.recorder.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].type_, EventType::Normal);
    assert_eq!(events[0].reason, "SuccessfulRescale");
    assert_eq!(
        events[0].message,
        "New size: 4; reason: cpu resource utilization (percentage of request) above target"
    );
    let written = f.last_status();
    let status = written.status.clone().expect("status");
    assert_eq!(
        (status.current_replicas, status.desired_replicas),
        (Some(2), 4)
    );
    assert!(status.last_scale_time.is_some());
    let current = &status.current_metrics.expect("metrics")[0];
    let resource = current.resource.as_ref().expect("resource status");
    assert_eq!(resource.current.average_utilization, Some(150));
    assert_eq!(
        resource.current.average_value,
        Some(Quantity("300m".into()))
    );
    assert_eq!(condition(&written, "AbleToScale").1, "SucceededRescale");
    assert_eq!(
        condition(&written, "ScalingActive"),
        (
            "True".into(),
            "ValidMetricFound".into(),
            "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)".into()
        )
    );
    assert_eq!(condition(&written, "ScalingLimited").0, "True");
    assert_eq!(condition(&written, "ScalingLimited").1, "ScaleUpLimit");
}

#[tokio::test(start_paused = true)]
async fn scales_down_only_after_the_stabilization_window() {
    let f = Fixture::new(hpa(vec![cpu_utilization(50)]), 4);
    // 25 % of requests: ratio 0.5 -> 2 pods, held by the initial recommendation of 4.
    f.metrics.set(Ok((usage(4, 50, start()), start())));
    f.controller.sync("default/web").await.expect("first pass");
    assert!(f.client.scale_updates().is_empty());
    let written = f.last_status();
    assert_eq!(condition(&written, "AbleToScale").1, "ScaleDownStabilized");
    f.observe_status();

    f.advance(240);
    f.controller
        .sync("default/web")
        .await
        .expect("within the window");
    assert!(
        f.client.scale_updates().is_empty(),
        "still within 5 min of the recommendation of 4"
    );

    f.advance(120);
    f.controller
        .sync("default/web")
        .await
        .expect("after the window");
    assert_eq!(f.client.scale_updates(), [("web".to_owned(), 2)]);
    assert_eq!(
        f.recorder.events().last().map(|e| e.message.clone()),
        Some("New size: 2; reason: All metrics below target".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn custom_metrics_say_they_are_not_available() {
    let pods_metric = MetricSpec {
        type_: "Pods".into(),
        pods: Some(PodsMetricSource {
            metric: MetricIdentifier {
                name: "requests_per_second".into(),
                selector: None,
            },
            target: MetricTarget {
                type_: "AverageValue".into(),
                average_value: Some(Quantity("10".into())),
                ..Default::default()
            },
        }),
        ..Default::default()
    };
    let f = Fixture::new(hpa(vec![pods_metric]), 2);
    let err = f
        .controller
        .sync("default/web")
        .await
        .expect_err("no metric works");
    assert!(
        err.to_string()
            .contains("invalid metrics (1 invalid out of 1)"),
        "{err}"
    );
    assert!(f.client.scale_updates().is_empty());
    let written = f.last_status();
    let (status, reason, message) = condition(&written, "ScalingActive");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "FailedGetPodsMetric")
    );
    assert!(
        message.contains("custom metrics API (custom.metrics.k8s.io)"),
        "{message}"
    );
    let reasons: Vec<String> = f.recorder.events().into_iter().map(|e| e.reason).collect();
    assert_eq!(
        reasons,
        ["FailedGetPodsMetric", "FailedComputeMetricsReplicas"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_missing_target_fails_get_scale() {
    let mut spec_hpa = hpa(vec![cpu_utilization(50)]);
    {
        let spec = &mut spec_hpa.spec;
        spec.scale_target_ref.name = "missing".into();
    }
    let f = Fixture::new(spec_hpa, 1);
    let err = f
        .controller
        .sync("default/web")
        .await
        .expect_err("no scale");
    assert!(
        err.to_string()
            .starts_with("failed to query scale subresource for Deployment/default/missing"),
        "{err}"
    );
    let written = f.last_status();
    let (status, reason, _) = condition(&written, "AbleToScale");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "FailedGetScale")
    );
    assert_eq!(f.recorder.reasons(), ["FailedGetScale"]);
}

#[tokio::test(start_paused = true)]
async fn replicas_outside_min_max_are_brought_back_and_deleted_hpas_are_forgotten() {
    let mut capped = hpa(vec![cpu_utilization(50)]);
    {
        let spec = &mut capped.spec;
        spec.max_replicas = 3;
    }
    let f = Fixture::new(capped, 5);
    f.controller.sync("default/web").await.expect("sync");
    assert_eq!(f.client.scale_updates(), [("web".to_owned(), 3)]);
    assert_eq!(
        f.recorder.events()[0].message,
        "New size: 3; reason: Current number of replicas above Spec.MaxReplicas"
    );

    let cached = f.hpas.get_by_key("default/web").expect("cached");
    f.hpas.delete(&cached).expect("delete");
    assert!(f.controller.sync("default/web").await.expect("gone"));
    assert!(f.controller.history.lock().expect("history").is_empty());
}
