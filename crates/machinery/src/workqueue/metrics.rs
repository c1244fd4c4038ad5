//! Prometheus metrics of named work queues, with client-go's names and `name` label.
//!
//! One [`WorkqueueMetrics`] holds the metric families of every queue in a process; each named
//! queue takes its own series (label `name`) from it when it is built. The families are
//! registered once into a [`Registry`] with [`WorkqueueMetrics::register`]. Queues without a
//! name, or built without a `WorkqueueMetrics`, record nothing (as client-go's `noMetrics`).
//!
//! What is measured, as client-go's `defaultQueueMetrics` and component-base's
//! `prometheus/workqueue` provider:
//! - `workqueue_depth`: items marked dirty and not yet handed out by `get`.
//! - `workqueue_adds_total`: adds that marked an item dirty (de-duplicated adds do not count).
//! - `workqueue_queue_duration_seconds`: from an item becoming dirty to `get` handing it out.
//! - `workqueue_work_duration_seconds`: from `get` to `done`.
//! - `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds`:
//!   the summed and the largest age of the items being processed. Like client-go, these two
//!   gauges are refreshed every [`UNFINISHED_WORK_UPDATE_PERIOD`] by a task each named queue
//!   spawns; the task stops when the queue shuts down or is dropped. An idle queue therefore
//!   costs one wake-up per period and nothing else.
//! - `workqueue_retries_total`: calls to `add_after` (and so `add_rate_limited`) on a queue
//!   that is not shutting down.
//!
//! And one of kcm's own, which client-go has no equivalent of (a panicking Go controller
//! crashes the process unless it recovers by hand):
//! - `kcm_workqueue_sync_panics_total`: syncs of an item that panicked and were recovered by
//!   the shared controller worker ([`crate::controller::workers`]), which then retries the item.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

/// How often a named queue refreshes its unfinished-work gauges (client-go's
/// `defaultUnfinishedWorkUpdatePeriod`).
pub const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// Bucket bounds of the two duration histograms, in seconds: 1e-8 to 10, ×10 apart
/// (component-base's `ExponentialBuckets(10e-9, 10, 10)`). Written out so the exposition shows
/// exact bounds rather than accumulated floating-point error.
pub const DURATION_BUCKETS: [f64; 10] = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];

/// The label set of every work-queue series: the queue's name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: String,
}

/// A gauge holding seconds as a float.
type SecondsGauge = Gauge<f64, AtomicU64>;

/// Builds one duration histogram with [`DURATION_BUCKETS`].
fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// The metric families of all work queues of a process.
///
/// Cheap to share: build one, wrap it in an `Arc`, [`register`](Self::register) it, and hand
/// the `Arc` to every queue's [`QueueConfig`](super::QueueConfig). Two queues built with the
/// same name share their series, as with client-go's provider.
pub struct WorkqueueMetrics {
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    queue_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    work_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    unfinished_work: Family<QueueLabels, SecondsGauge>,
    longest_running_processor: Family<QueueLabels, SecondsGauge>,
    retries: Family<QueueLabels, Counter>,
    sync_panics: Family<QueueLabels, Counter>,
}

impl Default for WorkqueueMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl WorkqueueMetrics {
    /// Empty families; series appear as named queues are built.
    pub fn new() -> Self {
        Self {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            unfinished_work: Family::default(),
            longest_running_processor: Family::default(),
            retries: Family::default(),
            sync_panics: Family::default(),
        }
    }

    /// Registers the seven families into `registry` under client-go's names, and kcm's own
    /// `kcm_workqueue_sync_panics_total`. The registry shares the families: later observations
    /// show up in its encodings.
    pub fn register(&self, registry: &mut Registry) {
        // Counters are registered without `_total`: the exposition appends it.
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            self.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            self.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            self.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            self.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed by \
             work_duration. Large values indicate stuck threads. One can deduce the number of \
             stuck threads by observing the rate at which this increases",
            self.unfinished_work.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            self.longest_running_processor.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            self.retries.clone(),
        );
        registry.register(
            "kcm_workqueue_sync_panics",
            "Total number of syncs of a workqueue item that panicked and were recovered by the \
             controller's worker (kcm's own metric; client-go has none)",
            self.sync_panics.clone(),
        );
    }

    /// `kcm_workqueue_sync_panics_total` of the queue called `name`: how many syncs of its
    /// items panicked and were recovered (0 for a queue that never recorded one).
    pub fn sync_panics_total(&self, name: &str) -> u64 {
        self.sync_panics
            .get(&QueueLabels {
                name: name.to_owned(),
            })
            .map_or(0, |counter| counter.get())
    }

    /// The series of the queue called `name`, fetched once so that the hot path touches only
    /// atomics (every handle shares its value with the family).
    pub(crate) fn queue(&self, name: &str) -> QueueMetrics {
        let labels = QueueLabels {
            name: name.to_owned(),
        };
        QueueMetrics {
            depth: self.depth.get_or_create_owned(&labels),
            adds: self.adds.get_or_create_owned(&labels),
            queue_duration: self.queue_duration.get_or_create_owned(&labels),
            work_duration: self.work_duration.get_or_create_owned(&labels),
            unfinished_work: self.unfinished_work.get_or_create_owned(&labels),
            longest_running_processor: self.longest_running_processor.get_or_create_owned(&labels),
            sync_panics: self.sync_panics.get_or_create_owned(&labels),
        }
    }

    /// The retry counter of the queue called `name` (the delaying layer's metric).
    pub(crate) fn retries(&self, name: &str) -> Counter {
        self.retries.get_or_create_owned(&QueueLabels {
            name: name.to_owned(),
        })
    }
}

/// The series of one named queue. The queue calls these hooks with its lock held, as
/// client-go's `defaultQueueMetrics` expects; each is a few atomic operations.
#[derive(Clone)]
pub(crate) struct QueueMetrics {
    depth: Gauge,
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    unfinished_work: SecondsGauge,
    longest_running_processor: SecondsGauge,
    sync_panics: Counter,
}

impl QueueMetrics {
    /// A worker recovered from a panic while syncing one of the queue's items.
    pub(crate) fn sync_panicked(&self) {
        self.sync_panics.inc();
    }

    /// An item became dirty.
    pub(crate) fn added(&self) {
        self.adds.inc();
        self.depth.inc();
    }

    /// An item that became dirty at `added_at` was handed out at `now`.
    pub(crate) fn got(&self, added_at: Option<Instant>, now: Instant) {
        self.depth.dec();
        if let Some(added_at) = added_at {
            self.queue_duration
                .observe(now.saturating_duration_since(added_at).as_secs_f64());
        }
    }

    /// An item handed out at `started` was marked done at `now`.
    pub(crate) fn done(&self, started: Option<Instant>, now: Instant) {
        if let Some(started) = started {
            self.work_duration
                .observe(now.saturating_duration_since(started).as_secs_f64());
        }
    }

    /// Sets the unfinished-work gauges from the start times of the items being processed.
    pub(crate) fn update_unfinished_work(
        &self,
        started: impl Iterator<Item = Instant>,
        now: Instant,
    ) {
        let mut total = 0.0;
        let mut oldest = 0.0_f64;
        for start in started {
            let age = now.saturating_duration_since(start).as_secs_f64();
            total += age;
            oldest = oldest.max(age);
        }
        self.unfinished_work.set(total);
        self.longest_running_processor.set(oldest);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{
        DelayingQueue, Queue, QueueConfig, RateLimitingQueue, default_controller_rate_limiter,
    };
    use super::*;
    use prometheus_client::encoding::text::encode;
    use std::sync::Arc;

    fn encoded(registry: &Registry) -> String {
        let mut out = String::new();
        encode(&mut out, registry).expect("encode registry");
        out
    }

    #[test]
    fn registers_upstream_names_and_buckets() {
        let metrics = WorkqueueMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let q = metrics.queue("pods");
        q.added();
        metrics.retries("pods").inc();
        q.sync_panicked();
        let text = encoded(&registry);
        for line in [
            "# TYPE workqueue_depth gauge",
            "workqueue_depth{name=\"pods\"} 1",
            "# TYPE workqueue_adds counter",
            "workqueue_adds_total{name=\"pods\"} 1",
            "# TYPE workqueue_queue_duration_seconds histogram",
            "workqueue_queue_duration_seconds_bucket{le=\"1e-8\",name=\"pods\"} 0",
            "workqueue_queue_duration_seconds_bucket{le=\"10.0\",name=\"pods\"} 0",
            "workqueue_queue_duration_seconds_bucket{le=\"+Inf\",name=\"pods\"} 0",
            "# TYPE workqueue_work_duration_seconds histogram",
            "workqueue_unfinished_work_seconds{name=\"pods\"} 0.0",
            "workqueue_longest_running_processor_seconds{name=\"pods\"} 0.0",
            "workqueue_retries_total{name=\"pods\"} 1",
            "# TYPE kcm_workqueue_sync_panics counter",
            "kcm_workqueue_sync_panics_total{name=\"pods\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing line {line:?} in\n{text}"
            );
        }
    }

    /// The value of the sample line starting with `series ` in `text`.
    fn sample(text: &str, series: &str) -> f64 {
        let prefix = format!("{series} ");
        let line = text
            .lines()
            .find(|line| line.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no sample {series:?} in\n{text}"));
        line[prefix.len()..]
            .parse()
            .unwrap_or_else(|e| panic!("sample {line:?} does not parse: {e}"))
    }

    fn assert_close(actual: f64, expected: f64, what: &str) {
        assert!(
            (actual - expected).abs() < 1e-12,
            "{what}: expected {expected}, got {actual}"
        );
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    fn registered() -> (Arc<WorkqueueMetrics>, Registry) {
        let metrics = Arc::new(WorkqueueMetrics::new());
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        (metrics, registry)
    }

    /// Upstream's `TestMetrics`, read back from the text exposition.
    #[tokio::test(start_paused = true)]
    async fn queue_records_adds_depth_and_durations() {
        let (metrics, registry) = registered();
        let q = Queue::with_config(QueueConfig::named("test", metrics));
        let series = |metric: &str| format!("{metric}{{name=\"test\"}}");

        q.add("foo");
        let text = encoded(&registry);
        assert_eq!(sample(&text, &series("workqueue_adds_total")), 1.0);
        assert_eq!(sample(&text, &series("workqueue_depth")), 1.0);

        tokio::time::advance(Duration::from_micros(50)).await;
        let item = q.get().await.expect("item");
        let text = encoded(&registry);
        assert_close(
            sample(&text, &series("workqueue_queue_duration_seconds_sum")),
            5e-5,
            "queue duration of the first get",
        );
        assert_eq!(
            sample(&text, &series("workqueue_queue_duration_seconds_count")),
            1.0
        );
        assert_eq!(sample(&text, &series("workqueue_depth")), 0.0);

        // Added back while processing; repeated adds are de-duplicated.
        for _ in 0..5 {
            q.add(item);
        }
        let text = encoded(&registry);
        assert_eq!(sample(&text, &series("workqueue_adds_total")), 2.0);
        assert_eq!(
            sample(&text, &series("workqueue_depth")),
            1.0,
            "one item is dirty"
        );

        tokio::time::advance(Duration::from_micros(25)).await;
        q.done(&item);
        let text = encoded(&registry);
        assert_close(
            sample(&text, &series("workqueue_work_duration_seconds_sum")),
            2.5e-5,
            "work duration of the first item",
        );
        assert_eq!(
            sample(&text, &series("workqueue_work_duration_seconds_count")),
            1.0
        );
        assert_eq!(sample(&text, &series("workqueue_depth")), 1.0);

        // Back on the queue since the re-add 25 µs ago.
        let item = q.get().await.expect("item");
        assert_eq!(item, "foo");
        let text = encoded(&registry);
        assert_close(
            sample(&text, &series("workqueue_queue_duration_seconds_sum")),
            5e-5 + 2.5e-5,
            "queue durations",
        );
        assert_eq!(
            sample(&text, &series("workqueue_queue_duration_seconds_count")),
            2.0
        );
        let bucket = |le: &str| {
            sample(
                &text,
                &format!("workqueue_queue_duration_seconds_bucket{{le=\"{le}\",name=\"test\"}}"),
            )
        };
        assert_eq!(bucket("0.00001"), 0.0);
        assert_eq!(bucket("0.0001"), 2.0);
        assert_eq!(bucket("+Inf"), 2.0);

        // The updater refreshes the unfinished-work gauges every 500 ms.
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        let text = encoded(&registry);
        assert_close(
            sample(&text, &series("workqueue_unfinished_work_seconds")),
            1.0,
            "unfinished work",
        );
        assert_close(
            sample(
                &text,
                &series("workqueue_longest_running_processor_seconds"),
            ),
            1.0,
            "longest running processor",
        );

        q.done(&item);
        let text = encoded(&registry);
        assert_close(
            sample(&text, &series("workqueue_work_duration_seconds_sum")),
            2.5e-5 + 1.0,
            "work durations",
        );
        assert_eq!(
            sample(&text, &series("workqueue_work_duration_seconds_count")),
            2.0
        );
        q.shut_down();
    }

    #[tokio::test(start_paused = true)]
    async fn unfinished_work_sums_items_in_flight_and_resets_when_idle() {
        let (metrics, registry) = registered();
        let q = Queue::with_config(QueueConfig::named("q", metrics));
        let series = |metric: &str| format!("{metric}{{name=\"q\"}}");
        q.add(1);
        let one = q.get().await.expect("item");
        tokio::time::advance(Duration::from_secs(2)).await;
        q.add(2);
        let two = q.get().await.expect("item");
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        let text = encoded(&registry);
        assert_close(
            sample(&text, &series("workqueue_unfinished_work_seconds")),
            3.0 + 1.0,
            "sum",
        );
        assert_close(
            sample(
                &text,
                &series("workqueue_longest_running_processor_seconds"),
            ),
            3.0,
            "oldest",
        );

        q.done(&one);
        q.done(&two);
        tokio::time::advance(Duration::from_millis(600)).await;
        settle().await;
        let text = encoded(&registry);
        assert_eq!(
            sample(&text, &series("workqueue_unfinished_work_seconds")),
            0.0
        );
        assert_eq!(
            sample(
                &text,
                &series("workqueue_longest_running_processor_seconds")
            ),
            0.0
        );
    }

    /// Upstream's `TestMetricShutdown`: no update after shutdown.
    #[tokio::test(start_paused = true)]
    async fn unfinished_work_is_not_updated_after_shutdown() {
        let (metrics, registry) = registered();
        let q = Queue::with_config(QueueConfig::named("q", metrics));
        q.add(1);
        let _one = q.get().await.expect("item");
        // Past the first tick (timer deadlines round up to the millisecond).
        tokio::time::advance(Duration::from_millis(600)).await;
        settle().await;
        let series = "workqueue_unfinished_work_seconds{name=\"q\"}";
        assert_close(sample(&encoded(&registry), series), 0.6, "before shutdown");
        q.shut_down();
        tokio::time::advance(Duration::from_secs(3600)).await;
        settle().await;
        assert_close(sample(&encoded(&registry), series), 0.6, "after shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn delaying_queue_counts_retries() {
        let (metrics, registry) = registered();
        let q = DelayingQueue::with_config(QueueConfig::named("retry", metrics));
        q.add_after("a", Duration::ZERO);
        q.add_after("a", Duration::from_millis(10));
        q.add_after("b", Duration::from_millis(10));
        q.add("c"); // a plain add is not a retry
        let series = "workqueue_retries_total{name=\"retry\"}";
        assert_eq!(sample(&encoded(&registry), series), 3.0);
        q.shut_down();
        q.add_after("a", Duration::from_millis(10));
        assert_eq!(
            sample(&encoded(&registry), series),
            3.0,
            "no retry counted after shutdown"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unnamed_queues_record_nothing() {
        let (metrics, registry) = registered();
        let q = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: String::new(),
                metrics: Some(metrics),
            },
        );
        q.add("x");
        q.add_rate_limited("y");
        let item = q.get().await.expect("item");
        q.done(&item);
        let text = encoded(&registry);
        assert!(
            !text.lines().any(|line| line.contains("name=")),
            "an unnamed queue must not create series:\n{text}"
        );
    }

    #[test]
    fn update_unfinished_work_sums_and_takes_the_oldest() {
        let metrics = WorkqueueMetrics::new();
        let q = metrics.queue("q");
        let now = Instant::now();
        let starts = [
            now - Duration::from_secs(3),
            now - Duration::from_secs(1),
            now,
        ];
        q.update_unfinished_work(starts.into_iter(), now);
        assert_eq!(q.unfinished_work.get(), 4.0);
        assert_eq!(q.longest_running_processor.get(), 3.0);
        q.update_unfinished_work(std::iter::empty(), now);
        assert_eq!(q.unfinished_work.get(), 0.0);
        assert_eq!(q.longest_running_processor.get(), 0.0);
    }
}
