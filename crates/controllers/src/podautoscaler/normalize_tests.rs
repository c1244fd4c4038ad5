//! Cases in the spirit of upstream's `TestNormalizeDesiredReplicas*` and `TestCalculateScale*Limit*` (horizontal_test.go).

use super::*;

fn now() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().expect("timestamp")
}

fn ago(secs: i64) -> Timestamp {
    now() - jiff::SignedDuration::from_secs(secs)
}

fn rec(recommendation: i32, secs_ago: i64) -> TimestampedRecommendation {
    TimestampedRecommendation {
        recommendation,
        timestamp: ago(secs_ago),
    }
}

fn policy(type_: &str, value: i32, period: i32) -> HPAScalingPolicy {
    HPAScalingPolicy {
        type_: type_.into(),
        value,
        period_seconds: period,
    }
}

fn rules(window: Option<i32>, select: &str, policies: Vec<HPAScalingPolicy>) -> HPAScalingRules {
    HPAScalingRules {
        stabilization_window_seconds: window,
        select_policy: Some(select.into()),
        policies: Some(policies),
        ..Default::default()
    }
}

/// The API server's defaults for a `behavior` naming nothing.
fn default_behavior() -> HorizontalPodAutoscalerBehavior {
    HorizontalPodAutoscalerBehavior {
        scale_up: Some(rules(
            Some(0),
            "Max",
            vec![policy("Pods", 4, 15), policy("Percent", 100, 15)],
        )),
        scale_down: Some(rules(None, "Max", vec![policy("Percent", 100, 15)])),
    }
}

const FIVE_MINUTES: Duration = Duration::from_secs(300);

#[test]
fn without_behavior() {
    struct Case {
        name: &'static str,
        history: Vec<TimestampedRecommendation>,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
        want: (i32, &'static str, &'static str, bool),
    }
    let cases = [
        Case {
            name: "scale up limited to twice the current count",
            history: vec![],
            current: 3,
            desired: 20,
            min: 1,
            max: 100,
            want: (6, "ReadyForNewScale", "ScaleUpLimit", true),
        },
        Case {
            name: "scale up limited to max",
            history: vec![],
            current: 3,
            desired: 10,
            min: 1,
            max: 5,
            want: (5, "ReadyForNewScale", "TooManyReplicas", true),
        },
        Case {
            name: "below min",
            history: vec![],
            current: 3,
            desired: 1,
            min: 2,
            max: 5,
            want: (2, "ReadyForNewScale", "TooFewReplicas", true),
        },
        Case {
            name: "scale down held by a recent higher recommendation",
            history: vec![rec(5, 60)],
            current: 5,
            desired: 2,
            min: 1,
            max: 10,
            want: (5, "ScaleDownStabilized", "DesiredWithinRange", false),
        },
        Case {
            name: "scale down once the higher recommendation left the window",
            history: vec![rec(5, 400)],
            current: 5,
            desired: 2,
            min: 1,
            max: 10,
            want: (2, "ReadyForNewScale", "DesiredWithinRange", false),
        },
    ];
    for case in cases {
        let mut history = History {
            recommendations: case.history,
            ..History::default()
        };
        let got = normalize_without_behavior(
            &mut history,
            FIVE_MINUTES,
            case.current,
            case.desired,
            case.min,
            case.max,
            now(),
        );
        assert_eq!(
            (
                got.replicas,
                got.able_to_scale.0,
                got.scaling_limited.0,
                got.limited
            ),
            case.want,
            "{}",
            case.name
        );
        assert!(
            history
                .recommendations
                .iter()
                .any(|r| r.recommendation == case.desired && r.timestamp == now()),
            "{}: the recommendation is recorded",
            case.name
        );
        assert!(
            history.recommendations.len() <= 2,
            "{}: an old sample is reused",
            case.name
        );
    }
}

#[test]
fn with_behavior() {
    struct Case {
        name: &'static str,
        behavior: HorizontalPodAutoscalerBehavior,
        history: History,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
        want: (i32, &'static str, &'static str),
    }
    let up_events = |n: i32, secs_ago: i64| History {
        scale_up_events: vec![TimestampedScaleEvent {
            replica_change: n,
            timestamp: ago(secs_ago),
        }],
        ..History::default()
    };
    let cases = [
        Case {
            name: "default policies: +4 pods or +100 % per 15 s, the larger",
            behavior: default_behavior(),
            history: History::default(),
            current: 1,
            desired: 10,
            min: 1,
            max: 20,
            want: (5, "ReadyForNewScale", "ScaleUpLimit"),
        },
        Case {
            name: "replicas added in the period count against the policy",
            behavior: default_behavior(),
            history: up_events(3, 5),
            current: 5,
            desired: 20,
            min: 1,
            max: 20,
            want: (6, "ReadyForNewScale", "ScaleUpLimit"),
        },
        Case {
            name: "events older than the period do not",
            behavior: default_behavior(),
            history: up_events(3, 20),
            current: 5,
            desired: 20,
            min: 1,
            max: 20,
            want: (10, "ReadyForNewScale", "ScaleUpLimit"),
        },
        Case {
            name: "max below the rate limit",
            behavior: default_behavior(),
            history: History::default(),
            current: 4,
            desired: 20,
            min: 1,
            max: 6,
            want: (6, "ReadyForNewScale", "TooManyReplicas"),
        },
        Case {
            name: "scale down at 50 % per minute",
            behavior: HorizontalPodAutoscalerBehavior {
                scale_down: Some(rules(Some(0), "Max", vec![policy("Percent", 50, 60)])),
                ..default_behavior()
            },
            history: History::default(),
            current: 10,
            desired: 1,
            min: 1,
            max: 20,
            want: (5, "ReadyForNewScale", "ScaleDownLimit"),
        },
        Case {
            name: "Min select policy takes the smaller change",
            behavior: HorizontalPodAutoscalerBehavior {
                scale_down: Some(rules(
                    Some(0),
                    "Min",
                    vec![policy("Percent", 50, 60), policy("Pods", 1, 60)],
                )),
                ..default_behavior()
            },
            history: History::default(),
            current: 10,
            desired: 1,
            min: 1,
            max: 20,
            want: (9, "ReadyForNewScale", "ScaleDownLimit"),
        },
        Case {
            name: "scale down disabled",
            behavior: HorizontalPodAutoscalerBehavior {
                scale_down: Some(rules(Some(0), "Disabled", vec![policy("Percent", 100, 15)])),
                ..default_behavior()
            },
            history: History::default(),
            current: 10,
            desired: 1,
            min: 1,
            max: 20,
            want: (10, "ReadyForNewScale", "ScaleDownLimit"),
        },
        Case {
            name: "the default scale-down window is the controller's (5 min)",
            behavior: default_behavior(),
            history: History {
                recommendations: vec![rec(8, 120)],
                ..History::default()
            },
            current: 8,
            desired: 2,
            min: 1,
            max: 20,
            want: (8, "ScaleDownStabilized", "DesiredWithinRange"),
        },
        Case {
            name: "a scale-up window holds the lowest recent recommendation",
            behavior: HorizontalPodAutoscalerBehavior {
                scale_up: Some(rules(Some(60), "Max", vec![policy("Pods", 4, 15)])),
                ..default_behavior()
            },
            history: History {
                recommendations: vec![rec(3, 30)],
                ..History::default()
            },
            current: 3,
            desired: 8,
            min: 1,
            max: 20,
            want: (3, "ScaleUpStabilized", "DesiredWithinRange"),
        },
    ];
    for case in cases {
        let mut history = case.history;
        let got = normalize_with_behavior(
            &mut history,
            &case.behavior,
            FIVE_MINUTES,
            case.current,
            case.desired,
            case.min,
            case.max,
            now(),
        );
        assert_eq!(
            (got.replicas, got.able_to_scale.0, got.scaling_limited.0),
            case.want,
            "{}",
            case.name
        );
    }
}

#[test]
fn scale_events_are_kept_for_the_longest_period() {
    let behavior = default_behavior();
    let mut history = History::default();
    store_scale_event(&mut history, Some(&behavior), 1, 5, ago(30));
    store_scale_event(&mut history, Some(&behavior), 5, 9, ago(10));
    store_scale_event(&mut history, Some(&behavior), 9, 3, now());
    assert_eq!(
        history.scale_up_events.len(),
        1,
        "the 30 s old event left the 15 s period"
    );
    assert_eq!(history.scale_up_events[0].replica_change, 4);
    assert_eq!(history.scale_down_events[0].replica_change, 6);

    let mut untouched = History::default();
    store_scale_event(&mut untouched, None, 1, 5, now());
    assert_eq!(untouched, History::default(), "no behavior, no events");
}
