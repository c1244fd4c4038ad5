//! Cases ported in spirit from upstream's `replica_calculator_test.go`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, PodCondition, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;

fn now() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().expect("timestamp")
}

fn ago(secs: i64) -> Timestamp {
    now() - jiff::SignedDuration::from_secs(secs)
}

/// How a test pod looks.
#[derive(Clone, Copy)]
enum State {
    /// Running and ready for ten minutes.
    Ready,
    /// Running for ten minutes, never ready.
    NeverReady,
    /// Started a minute ago, ready 30 s ago: its CPU sample is too early to trust.
    HotCpu,
    Pending,
    Failed,
    Deleting,
}

fn pod(i: usize, state: State, request: Option<&str>, resource: &str) -> Arc<Pod> {
    let (phase, ready, start, transition) = match state {
        State::Ready => ("Running", "True", ago(600), ago(590)),
        State::NeverReady => ("Running", "False", ago(600), ago(595)),
        State::HotCpu => ("Running", "True", ago(60), ago(30)),
        State::Pending => ("Pending", "False", ago(600), ago(600)),
        State::Failed => ("Failed", "False", ago(600), ago(300)),
        State::Deleting => ("Running", "True", ago(600), ago(590)),
    };
    let requests: BTreeMap<String, Quantity> = request
        .map(|r| [(resource.to_owned(), Quantity(r.to_owned()))].into())
        .unwrap_or_default();
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(format!("pod-{i}")),
            namespace: Some("default".into()),
            deletion_timestamp: matches!(state, State::Deleting).then(|| Time(ago(1))),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(requests),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            start_time: Some(Time(start)),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: ready.into(),
                last_transition_time: Some(Time(transition)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    })
}

/// Metrics for the pods with a level (`None`: the pod has no metric).
fn metrics(levels: &[Option<i64>]) -> PodMetricsInfo {
    levels
        .iter()
        .enumerate()
        .filter_map(|(i, level)| {
            level.map(|value| {
                (
                    format!("pod-{i}"),
                    PodMetric {
                        timestamp: now(),
                        window: Duration::from_secs(60),
                        value,
                    },
                )
            })
        })
        .collect()
}

struct Case {
    name: &'static str,
    current: i32,
    states: Vec<State>,
    levels: Vec<Option<i64>>,
    target: i32,
    want: Result<(i32, i32), CalculationError>,
}

fn all(n: usize, state: State) -> Vec<State> {
    vec![state; n]
}

#[test]
fn resource_utilization_cases() {
    use State::*;
    let cases = vec![
        Case {
            name: "scale up",
            current: 3,
            states: all(3, Ready),
            levels: vec![Some(300), Some(500), Some(700)],
            target: 30,
            want: Ok((5, 50)),
        },
        Case {
            name: "scale up, an unready pod counts as 0 %: less scale",
            current: 3,
            states: vec![NeverReady, Ready, Ready],
            levels: vec![Some(300), Some(500), Some(700)],
            target: 30,
            want: Ok((4, 60)),
        },
        Case {
            name: "scale up, a hot CPU sample is ignored: less scale",
            current: 3,
            states: vec![HotCpu, Ready, Ready],
            levels: vec![Some(300), Some(500), Some(700)],
            target: 30,
            want: Ok((4, 60)),
        },
        Case {
            name: "scale up with unready pods that would reverse the direction: no scale",
            current: 3,
            states: vec![Ready, NeverReady, NeverReady],
            levels: vec![Some(400), Some(500), Some(700)],
            target: 30,
            want: Ok((3, 40)),
        },
        Case {
            name: "scale up ignores failed pods",
            current: 2,
            states: vec![Ready, Ready, Failed, Failed],
            levels: vec![Some(500), Some(700), Some(4000), Some(7000)],
            target: 30,
            want: Ok((4, 60)),
        },
        Case {
            name: "scale up ignores pods being deleted",
            current: 2,
            states: vec![Ready, Ready, Deleting, Deleting],
            levels: vec![Some(500), Some(700), Some(4000), Some(7000)],
            target: 30,
            want: Ok((4, 60)),
        },
        Case {
            name: "scale down",
            current: 5,
            states: all(5, Ready),
            levels: vec![Some(100), Some(300), Some(500), Some(250), Some(250)],
            target: 50,
            want: Ok((3, 28)),
        },
        Case {
            name: "scale down ignores unready pods",
            current: 5,
            states: vec![Ready, Ready, Ready, NeverReady, NeverReady],
            levels: vec![Some(100), Some(300), Some(500), Some(250), Some(250)],
            target: 50,
            want: Ok((2, 30)),
        },
        Case {
            name: "within the tolerance: no change",
            current: 3,
            states: all(3, Ready),
            levels: vec![Some(1010), Some(1030), Some(1020)],
            target: 100,
            want: Ok((3, 102)),
        },
        Case {
            name: "missing metrics count as the full request on a scale-down: no flapping",
            current: 4,
            states: all(4, Ready),
            levels: vec![Some(100), Some(100), None, None],
            target: 50,
            want: Ok((4, 10)),
        },
        Case {
            name: "missing metrics on a scale-down that still scales down",
            current: 4,
            states: all(4, Ready),
            levels: vec![Some(100), Some(100), None, None],
            target: 80,
            want: Ok((3, 10)),
        },
        Case {
            name: "missing metrics count as 0 on a scale-up",
            current: 4,
            states: all(4, Ready),
            levels: vec![Some(1500), Some(1500), None, None],
            target: 50,
            want: Ok((6, 150)),
        },
        Case {
            name: "no pods",
            current: 1,
            states: vec![],
            levels: vec![],
            target: 50,
            want: Err(CalculationError::NoPods),
        },
        Case {
            name: "only pending pods have metrics",
            current: 2,
            states: all(2, Pending),
            levels: vec![Some(100), Some(100)],
            target: 50,
            want: Err(CalculationError::NoReadyMetrics),
        },
    ];
    let calc = ReplicaCalculator::default();
    for case in cases {
        let pods: Vec<Arc<Pod>> = case
            .states
            .iter()
            .enumerate()
            .map(|(i, s)| pod(i, *s, Some("1"), "cpu"))
            .collect();
        let got = calc
            .resource_replicas(
                case.current,
                case.target,
                "cpu",
                None,
                &pods,
                metrics(&case.levels),
                now(),
            )
            .map(|p| (p.replicas, p.utilization));
        assert_eq!(got, case.want, "{}", case.name);
    }
}

#[test]
fn utilization_needs_every_request() {
    let pods = vec![
        pod(0, State::Ready, Some("1"), "cpu"),
        pod(1, State::Ready, None, "cpu"),
    ];
    let got = ReplicaCalculator::default().resource_replicas(
        2,
        50,
        "cpu",
        None,
        &pods,
        metrics(&[Some(100), Some(100)]),
        now(),
    );
    assert_eq!(
        got.map_err(|e| e.to_string()),
        Err("missing request for cpu in container app of Pod pod-1".to_owned())
    );
}

#[test]
fn memory_counts_unready_pods() {
    // Readiness only filters CPU samples.
    let pods: Vec<Arc<Pod>> = [State::NeverReady, State::Ready, State::Ready]
        .iter()
        .enumerate()
        .map(|(i, s)| pod(i, *s, Some("1000"), "memory"))
        .collect();
    let got = ReplicaCalculator::default()
        .resource_replicas(
            3,
            30,
            "memory",
            None,
            &pods,
            metrics(&[Some(300_000), Some(500_000), Some(700_000)]),
            now(),
        )
        .map(|p| (p.replicas, p.utilization, p.raw_utilization));
    assert_eq!(got, Ok((5, 50, 500_000)));
}

#[test]
fn average_value_cases() {
    let cases = [
        (
            "scale up",
            3,
            vec![Some(20_000), Some(10_000), Some(30_000)],
            Ok((4, 20_000)),
        ),
        (
            "within tolerance",
            3,
            vec![Some(15_000), Some(15_500), Some(14_500)],
            Ok((3, 15_000)),
        ),
        (
            "scale down",
            4,
            vec![Some(5_000), Some(5_000), Some(5_000), Some(5_000)],
            Ok((2, 5_000)),
        ),
        (
            "missing metric on a scale-up counts as 0",
            3,
            vec![Some(30_000), Some(30_000), None],
            Ok((4, 30_000)),
        ),
    ];
    let calc = ReplicaCalculator::default();
    for (name, current, levels, want) in cases {
        let pods: Vec<Arc<Pod>> = (0..levels.len())
            .map(|i| pod(i, State::Ready, Some("1"), "cpu"))
            .collect();
        let got: Result<(i32, i64), CalculationError> = calc
            .raw_resource_replicas(current, 15_000, "cpu", &pods, metrics(&levels), now())
            .map(|p| (p.replicas, p.usage));
        assert_eq!(got, want, "{name}");
    }
}
