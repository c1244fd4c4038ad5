//! From the metrics' proposal to the replica count applied: stabilization windows, scaling policies, min/max, and the `AbleToScale`/`ScalingLimited` reasons each step gives, as upstream's `normalizeDesiredReplicas` and `normalizeDesiredReplicasWithBehaviors` (horizontal.go).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{
    HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscalerBehavior,
};

/// Without `behavior`, a scale-up goes at most to `max(2 * current, 4)` (upstream's
/// `scaleUpLimitFactor` and `scaleUpLimitMinimum`).
const SCALE_UP_LIMIT_FACTOR: f64 = 2.0;
const SCALE_UP_LIMIT_MINIMUM: f64 = 4.0;

/// A recommendation made at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampedRecommendation {
    /// The replica count recommended.
    pub recommendation: i32,
    /// When.
    pub timestamp: Timestamp,
}

/// A rescale made at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampedScaleEvent {
    /// By how many replicas (positive either way).
    pub replica_change: i32,
    /// When.
    pub timestamp: Timestamp,
}

/// What the controller remembers of one HPA between syncs (upstream's `recommendations`,
/// `scaleUpEvents` and `scaleDownEvents` maps, per key).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// Past recommendations; one older than every window is overwritten rather than
    /// appended, so the list stays bounded.
    pub recommendations: Vec<TimestampedRecommendation>,
    /// Past scale-ups.
    pub scale_up_events: Vec<TimestampedScaleEvent>,
    /// Past scale-downs.
    pub scale_down_events: Vec<TimestampedScaleEvent>,
}

/// A condition the normalization sets: `(reason, message)`.
pub type Reason = (&'static str, &'static str);

/// The result of a normalization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Normalized {
    /// The replica count to apply.
    pub replicas: i32,
    /// `AbleToScale=True` with this reason (`ReadyForNewScale`, `ScaleUpStabilized`, ...).
    pub able_to_scale: Reason,
    /// `ScalingLimited` is `True` with this reason when `limited`, else `False`.
    pub scaling_limited: Reason,
    /// Whether a limit (min, max, rate) changed the stabilized recommendation.
    pub limited: bool,
}

const READY_FOR_NEW_SCALE: Reason = ("ReadyForNewScale", "recommended size matches current size");
const SCALE_DOWN_STABILIZED: Reason = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
);
const SCALE_UP_STABILIZED: Reason = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
);
const DESIRED_WITHIN_RANGE: Reason = (
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
);
const SCALE_UP_LIMIT: Reason = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
);
const SCALE_DOWN_LIMIT: Reason = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
);
const TOO_MANY_REPLICAS: Reason = (
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
);
const TOO_FEW_REPLICAS: Reason = (
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
);

fn before(now: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| now.checked_sub(d).ok())
        .unwrap_or(Timestamp::MIN)
}

fn seconds(s: Option<i32>) -> Duration {
    Duration::from_secs(u64::try_from(s.unwrap_or(0)).unwrap_or(0))
}

/// Records `desired` in the history, overwriting one sample older than every cutoff (as
/// upstream's reuse of `oldSampleIndex`).
fn record(history: &mut History, old: Option<usize>, desired: i32, now: Timestamp) {
    let sample = TimestampedRecommendation {
        recommendation: desired,
        timestamp: now,
    };
    match old {
        Some(i) => history.recommendations[i] = sample,
        None => history.recommendations.push(sample),
    }
}

/// Records the current scale as the first recommendation of a new HPA, as upstream's
/// `recordInitialRecommendation`.
pub fn record_initial_recommendation(history: &mut History, current: i32, now: Timestamp) {
    if history.recommendations.is_empty() {
        history.recommendations.push(TimestampedRecommendation {
            recommendation: current,
            timestamp: now,
        });
    }
}

/// Without `behavior`: the highest recommendation of the downscale stabilization window,
/// then `[min, max(2 * current, 4) or max]`, as upstream's `normalizeDesiredReplicas`.
pub fn normalize_without_behavior(
    history: &mut History,
    downscale_stabilization: Duration,
    current: i32,
    desired: i32,
    min: i32,
    max: i32,
    now: Timestamp,
) -> Normalized {
    let cutoff = before(now, downscale_stabilization);
    let mut stabilized = desired;
    let mut old = None;
    for (i, rec) in history.recommendations.iter().enumerate() {
        if rec.timestamp < cutoff {
            old = Some(i);
        } else if rec.recommendation > stabilized {
            stabilized = rec.recommendation;
        }
    }
    record(history, old, desired, now);
    let able_to_scale = if stabilized != desired {
        SCALE_DOWN_STABILIZED
    } else {
        READY_FOR_NEW_SCALE
    };

    let scale_up_limit = (SCALE_UP_LIMIT_FACTOR * f64::from(current)).max(SCALE_UP_LIMIT_MINIMUM);
    let scale_up_limit = if scale_up_limit >= f64::from(i32::MAX) {
        i32::MAX
    } else {
        scale_up_limit as i32
    };
    let (maximum, max_reason) = if max > scale_up_limit {
        (scale_up_limit, SCALE_UP_LIMIT)
    } else {
        (max, TOO_MANY_REPLICAS)
    };
    let (replicas, reason) = if stabilized < min {
        (min, TOO_FEW_REPLICAS)
    } else if stabilized > maximum {
        (maximum, max_reason)
    } else {
        (stabilized, DESIRED_WITHIN_RANGE)
    };
    Normalized {
        replicas,
        able_to_scale,
        scaling_limited: reason,
        limited: replicas != stabilized,
    }
}

/// The replicas added (or removed) within the last `period`, as upstream's
/// `getReplicasChangePerPeriod`.
fn change_in_period(period_seconds: i32, events: &[TimestampedScaleEvent], now: Timestamp) -> i32 {
    let cutoff = before(now, seconds(Some(period_seconds)));
    events
        .iter()
        .filter(|e| e.timestamp > cutoff)
        .map(|e| e.replica_change)
        .fold(0, i32::saturating_add)
}

fn select_policy(rules: &HPAScalingRules) -> &str {
    rules.select_policy.as_deref().unwrap_or("Max")
}

fn policies(rules: &HPAScalingRules) -> &[HPAScalingPolicy] {
    rules.policies.as_deref().unwrap_or_default()
}

/// The most replicas the scale-up policies allow now, as upstream's
/// `calculateScaleUpLimitWithScalingRules`.
pub fn scale_up_limit(
    current: i32,
    history: &History,
    rules: &HPAScalingRules,
    now: Timestamp,
) -> i32 {
    let select = select_policy(rules);
    if select == "Disabled" {
        return current;
    }
    let min_change = select == "Min";
    let mut result = if min_change { i32::MAX } else { i32::MIN };
    for policy in policies(rules) {
        let added = change_in_period(policy.period_seconds, &history.scale_up_events, now);
        let period_start = current.saturating_sub(added);
        let proposed = match policy.type_.as_str() {
            "Pods" => period_start.saturating_add(policy.value),
            _ => (f64::from(period_start) * (1.0 + f64::from(policy.value) / 100.0)).ceil() as i32,
        };
        result = if min_change {
            result.min(proposed)
        } else {
            result.max(proposed)
        };
    }
    result
}

/// The fewest replicas the scale-down policies allow now, as upstream's
/// `calculateScaleDownLimitWithBehaviors`.
pub fn scale_down_limit(
    current: i32,
    history: &History,
    rules: &HPAScalingRules,
    now: Timestamp,
) -> i32 {
    let select = select_policy(rules);
    if select == "Disabled" {
        return current;
    }
    let min_change = select == "Min";
    let mut result = if min_change { i32::MIN } else { i32::MAX };
    for policy in policies(rules) {
        let added = change_in_period(policy.period_seconds, &history.scale_up_events, now);
        let removed = change_in_period(policy.period_seconds, &history.scale_down_events, now);
        let period_start = current.saturating_sub(added).saturating_add(removed);
        let proposed = match policy.type_.as_str() {
            "Pods" => period_start.saturating_sub(policy.value),
            _ => (f64::from(period_start) * (1.0 - f64::from(policy.value) / 100.0)) as i32,
        };
        result = if min_change {
            result.max(proposed)
        } else {
            result.min(proposed)
        };
    }
    result
}

/// With `behavior`: stabilize within both windows, then apply the rate policies and
/// min/max, as upstream's `normalizeDesiredReplicasWithBehaviors`. A scale-down window left
/// unset takes `downscale_stabilization` (upstream's `maybeInitScaleDownStabilizationWindow`).
#[allow(clippy::too_many_arguments)]
pub fn normalize_with_behavior(
    history: &mut History,
    behavior: &HorizontalPodAutoscalerBehavior,
    downscale_stabilization: Duration,
    current: i32,
    desired: i32,
    min: i32,
    max: i32,
    now: Timestamp,
) -> Normalized {
    let up_rules = behavior.scale_up.clone().unwrap_or_default();
    let down_rules = behavior.scale_down.clone().unwrap_or_default();
    let up_cutoff = before(now, seconds(up_rules.stabilization_window_seconds));
    let down_window = match down_rules.stabilization_window_seconds {
        Some(s) => seconds(Some(s)),
        None => downscale_stabilization,
    };
    let down_cutoff = before(now, down_window);

    // stabilizeRecommendationWithBehaviors
    let mut up_recommendation = desired;
    let mut down_recommendation = desired;
    let mut old = None;
    for (i, rec) in history.recommendations.iter().enumerate() {
        if rec.timestamp > up_cutoff {
            up_recommendation = up_recommendation.min(rec.recommendation);
        }
        if rec.timestamp > down_cutoff {
            down_recommendation = down_recommendation.max(rec.recommendation);
        }
        if rec.timestamp < up_cutoff && rec.timestamp < down_cutoff {
            old = Some(i);
        }
    }
    let stabilized = current.max(up_recommendation).min(down_recommendation);
    record(history, old, desired, now);
    let stabilize_reason = if desired >= current {
        SCALE_UP_STABILIZED
    } else {
        SCALE_DOWN_STABILIZED
    };
    let able_to_scale = if stabilized != desired {
        stabilize_reason
    } else {
        READY_FOR_NEW_SCALE
    };

    // convertDesiredReplicasWithBehaviorRate
    let (replicas, reason) = if stabilized > current {
        let limit = scale_up_limit(current, history, &up_rules, now).max(current);
        let (maximum, reason) = if max > limit {
            (limit, SCALE_UP_LIMIT)
        } else {
            (max, TOO_MANY_REPLICAS)
        };
        if stabilized > maximum {
            (maximum, reason)
        } else {
            (stabilized, DESIRED_WITHIN_RANGE)
        }
    } else if stabilized < current {
        let limit = scale_down_limit(current, history, &down_rules, now).min(current);
        let (minimum, reason) = if min < limit {
            (limit, SCALE_DOWN_LIMIT)
        } else {
            (min, TOO_FEW_REPLICAS)
        };
        if stabilized < minimum {
            (minimum, reason)
        } else {
            (stabilized, DESIRED_WITHIN_RANGE)
        }
    } else {
        (stabilized, DESIRED_WITHIN_RANGE)
    };
    Normalized {
        replicas,
        able_to_scale,
        scaling_limited: reason,
        limited: replicas != stabilized,
    }
}

/// Records a rescale for the rate policies and forgets events older than the longest
/// policy period, as upstream's `storeScaleEvent` (which marks them outdated and reuses
/// them).
pub fn store_scale_event(
    history: &mut History,
    behavior: Option<&HorizontalPodAutoscalerBehavior>,
    previous: i32,
    new: i32,
    now: Timestamp,
) {
    let Some(behavior) = behavior else {
        return;
    };
    let longest = |rules: Option<&HPAScalingRules>| {
        rules
            .map(policies)
            .unwrap_or_default()
            .iter()
            .map(|p| p.period_seconds)
            .max()
            .unwrap_or(0)
    };
    let event = TimestampedScaleEvent {
        replica_change: (new - previous).saturating_abs(),
        timestamp: now,
    };
    let (events, period) = if new > previous {
        (
            &mut history.scale_up_events,
            longest(behavior.scale_up.as_ref()),
        )
    } else {
        (
            &mut history.scale_down_events,
            longest(behavior.scale_down.as_ref()),
        )
    };
    let cutoff = before(now, seconds(Some(period)));
    events.retain(|e| e.timestamp > cutoff);
    events.push(event);
}

#[cfg(test)]
#[path = "normalize_tests.rs"]
mod tests;
