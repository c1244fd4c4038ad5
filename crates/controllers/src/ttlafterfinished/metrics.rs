//! The TTL-after-finished controller's own metric, as upstream's `ttlafterfinished/metrics`.

use std::time::Duration;

use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The full name of the deletion-latency histogram.
pub const JOB_DELETION_DURATION: &str =
    "ttl_after_finished_controller_job_deletion_duration_seconds";

/// The controller's metric families. Build one per process, [`register`](Self::register) it
/// and hand the `Arc` to the controller's options.
#[derive(Debug)]
pub struct TtlAfterFinishedMetrics {
    /// Seconds from a Job becoming eligible for deletion (its TTL expiring) to its deletion.
    job_deletion_duration: Histogram,
}

impl Default for TtlAfterFinishedMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl TtlAfterFinishedMetrics {
    /// An empty histogram with upstream's buckets (100 ms doubling, fourteen of them).
    pub fn new() -> Self {
        Self {
            job_deletion_duration: Histogram::new(exponential_buckets(0.1, 2.0, 14)),
        }
    }

    /// Registers the histogram under upstream's name.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            JOB_DELETION_DURATION,
            "The time it took to delete the job since it became eligible for deletion",
            self.job_deletion_duration.clone(),
        );
    }

    /// A Job was deleted `late` after its TTL expired.
    pub fn observe_deletion(&self, late: Duration) {
        self.job_deletion_duration.observe(late.as_secs_f64());
    }
}
