//! The CronJob controller's own metric (`cronjob_controller_*`), as upstream's `cronjob/metrics`.

use jiff::SignedDuration;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The full name of the creation-skew histogram.
pub const JOB_CREATION_SKEW: &str = "cronjob_controller_job_creation_skew_duration_seconds";

/// The controller's metric families. Build one per process, [`register`](Self::register) it
/// and hand the `Arc` to the controller's options.
#[derive(Debug)]
pub struct CronJobMetrics {
    /// Seconds between a schedule and the creation of its Job: how late the controller is.
    creation_skew: Histogram,
}

impl Default for CronJobMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl CronJobMetrics {
    /// An empty histogram with upstream's buckets (1 s doubling, ten of them).
    pub fn new() -> Self {
        Self {
            creation_skew: Histogram::new(exponential_buckets(1.0, 2.0, 10)),
        }
    }

    /// Registers the histogram under upstream's name.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            JOB_CREATION_SKEW,
            "Time between when a cronjob is scheduled to be run, and when the corresponding job \
             is created",
            self.creation_skew.clone(),
        );
    }

    /// A Job was created `skew` after its schedule.
    pub fn observe_creation_skew(&self, skew: SignedDuration) {
        self.creation_skew.observe(skew.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_is_observed_in_seconds() {
        let metrics = CronJobMetrics::new();
        metrics.observe_creation_skew(SignedDuration::from_millis(1500));
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains("cronjob_controller_job_creation_skew_duration_seconds_sum 1.5"),
            "{text}"
        );
        assert!(
            text.contains(
                r#"cronjob_controller_job_creation_skew_duration_seconds_bucket{le="2.0"} 1"#
            ),
            "{text}"
        );
    }
}
