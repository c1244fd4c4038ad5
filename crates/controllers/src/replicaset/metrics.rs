//! The ReplicaSet controller's own metrics (`replicaset_controller_*`), as upstream's `replicaset/metrics`.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::controller::is_pod_ready;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The full name of the scale-down age-ratio histogram.
pub const SORTING_DELETION_AGE_RATIO: &str = "replicaset_controller_sorting_deletion_age_ratio";

/// The controller's metric families. Build one per process, [`register`](Self::register) it,
/// and hand the `Arc` to the controller's options.
#[derive(Debug)]
pub struct ReplicaSetMetrics {
    /// For each ready pod chosen for deletion, its age over the youngest ready pod's age:
    /// how well scale-down ranking keeps young pods (it should stay under 2).
    sorting_deletion_age_ratio: Histogram,
}

impl Default for ReplicaSetMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplicaSetMetrics {
    /// Empty families with upstream's buckets (0.25 × 2ⁿ, six of them).
    pub fn new() -> Self {
        Self {
            sorting_deletion_age_ratio: Histogram::new(exponential_buckets(0.25, 2.0, 6)),
        }
    }

    /// Registers the families under upstream's names.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            SORTING_DELETION_AGE_RATIO,
            "The ratio of chosen deleted pod's ages to the current youngest pod's age (at the \
             time). Should be <2. The intent of this metric is to measure the rough efficacy of \
             the LogarithmicScaleDown feature gate's effect on the sorting (and deletion) of pods \
             when a replicaset scales down. This only considers Ready pods when calculating and \
             reporting.",
            self.sorting_deletion_age_ratio.clone(),
        );
    }

    /// Observes the age ratio of every ready victim, as upstream's
    /// `reportSortingDeletionAgeRatioMetric` (called only when ranking chose among more pods
    /// than it deletes). Ages are whole milliseconds and the ratio is their integer quotient,
    /// as upstream computes it; with no ready pod, or one created this very millisecond,
    /// nothing is observed (upstream would divide by zero).
    pub fn report_sorting_deletion_age_ratio(
        &self,
        candidates: &[Arc<Pod>],
        victims: &[Arc<Pod>],
        now: Timestamp,
    ) {
        let created = |pod: &Pod| pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let age_ms = |since: Timestamp| since.duration_until(now).as_millis();
        let Some(youngest) = candidates
            .iter()
            .filter(|p| is_pod_ready(p))
            .filter_map(|p| created(p))
            .max()
        else {
            return;
        };
        let youngest_age = age_ms(youngest);
        if youngest_age <= 0 {
            return;
        }
        for victim in victims.iter().filter(|p| is_pod_ready(p)) {
            let Some(since) = created(victim) else {
                continue;
            };
            // A ratio of ages: a small integer, exactly representable.
            #[allow(clippy::cast_precision_loss)]
            let ratio = (age_ms(since) / youngest_age) as f64;
            self.sorting_deletion_age_ratio.observe(ratio);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;
    use kcm_testing::{MetaBuilder, PodBuilder, pod_condition};

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().expect("timestamp")
    }

    fn pod(age_secs: i64, ready: bool) -> Arc<Pod> {
        PodBuilder::default()
            .created_at(now() - SignedDuration::from_secs(age_secs))
            .condition(pod_condition("Ready", if ready { "True" } else { "False" }))
            .arc()
    }

    fn encoded(metrics: &ReplicaSetMetrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        text
    }

    #[test]
    fn ratios_of_ready_victims_to_the_youngest_ready_pod() {
        let metrics = ReplicaSetMetrics::new();
        let youngest = pod(10, true);
        let old = pod(35, true);
        let not_ready = pod(1, false);
        let candidates = vec![youngest.clone(), old.clone(), not_ready.clone()];
        // 35s / 10s is 3 in integer milliseconds division; the unready victim is skipped.
        metrics.report_sorting_deletion_age_ratio(&candidates, &[old, not_ready], now());
        let text = encoded(&metrics);
        assert!(
            text.contains("replicaset_controller_sorting_deletion_age_ratio_count 1"),
            "{text}"
        );
        assert!(
            text.contains("replicaset_controller_sorting_deletion_age_ratio_sum 3.0"),
            "{text}"
        );
        assert!(
            text.contains(r#"replicaset_controller_sorting_deletion_age_ratio_bucket{le="4.0"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn nothing_without_a_ready_pod() {
        let metrics = ReplicaSetMetrics::new();
        let a = pod(5, false);
        let pods = [a];
        metrics.report_sorting_deletion_age_ratio(&pods, &pods, now());
        assert!(
            encoded(&metrics).contains("replicaset_controller_sorting_deletion_age_ratio_count 0")
        );
    }
}
