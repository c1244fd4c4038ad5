//! The event broadcaster: a bounded buffer in front of one worker that logs, correlates and
//! writes events, and the recorders feeding it (client-go's `record.EventBroadcaster`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rand::Rng;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::clock::{SystemClock, WallClock};
use super::correlator::{CorrelatorOptions, EventCorrelator};
use super::sink::{Error, EventSink, Result};
use super::{EventRecorder, EventType};
use crate::repeated_log::{self, RepeatFilter, Verdict};

/// Events buffered between recorders and the worker (client-go's `maxQueuedEvents`).
pub const MAX_QUEUED_EVENTS: usize = 1000;
/// Attempts to write one event before giving up (client-go's `maxTriesPerEvent`).
pub const MAX_TRIES_PER_EVENT: u32 = 12;
/// Pause between write attempts; the first is randomized (client-go's `defaultSleepDuration`).
pub const DEFAULT_SLEEP_DURATION: Duration = Duration::from_secs(10);

/// Broadcaster settings; `Default` is client-go's.
#[derive(Clone, Debug)]
pub struct BroadcasterOptions {
    /// Capacity of the buffer; events beyond it are dropped and counted.
    pub queue_size: usize,
    /// Attempts per event against a failing API server.
    pub max_tries: u32,
    /// Pause between attempts.
    pub sleep_duration: Duration,
    /// Aggregation and spam filtering.
    pub correlator: CorrelatorOptions,
    /// Wall clock for event timestamps and names.
    pub clock: Arc<dyn WallClock>,
}

impl Default for BroadcasterOptions {
    fn default() -> Self {
        Self {
            queue_size: MAX_QUEUED_EVENTS,
            max_tries: MAX_TRIES_PER_EVENT,
            sleep_duration: DEFAULT_SLEEP_DURATION,
            correlator: CorrelatorOptions::default(),
            clock: Arc::new(SystemClock),
        }
    }
}

/// State shared by the broadcaster and its recorders.
#[derive(Debug)]
struct Shared {
    /// Into the buffer; `try_send` only, so recording never blocks.
    tx: mpsc::Sender<Event>,
    /// Events dropped because the buffer was full or the broadcaster shut down.
    dropped: AtomicU64,
    /// Wall clock for timestamps and names.
    clock: Arc<dyn WallClock>,
}

/// Receives events from recorders and writes them to a sink through a correlator, as
/// client-go's `EventBroadcaster` started with `StartRecordingToSink` and
/// `StartStructuredLogging`.
///
/// One worker task owns the correlator and the sink, so events are written one at a time in the
/// order recorded. [`EventBroadcaster::shutdown`] flushes what is buffered.
pub struct EventBroadcaster {
    /// Shared with recorders.
    shared: Arc<Shared>,
    /// Tells the worker to flush and stop.
    stop: CancellationToken,
    /// The worker; taken by the first `shutdown`.
    worker: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl EventBroadcaster {
    /// A broadcaster writing to `sink` with client-go's defaults. Spawns its worker on the
    /// current tokio runtime.
    pub fn new(sink: Arc<dyn EventSink>) -> Self {
        Self::with_options(sink, BroadcasterOptions::default())
    }

    /// A broadcaster writing to `sink` with `options`. Spawns its worker on the current tokio
    /// runtime.
    pub fn with_options(sink: Arc<dyn EventSink>, options: BroadcasterOptions) -> Self {
        let (tx, rx) = mpsc::channel(options.queue_size.max(1));
        let stop = CancellationToken::new();
        let worker = Worker {
            rx,
            sink,
            correlator: EventCorrelator::new(options.correlator.clone()),
            max_tries: options.max_tries.max(1),
            sleep_duration: options.sleep_duration,
            stop: stop.clone(),
        };
        let handle = tokio::spawn(worker.run());
        Self {
            shared: Arc::new(Shared {
                tx,
                dropped: AtomicU64::new(0),
                clock: options.clock,
            }),
            stop,
            worker: std::sync::Mutex::new(Some(handle)),
        }
    }

    /// A recorder stamping events with `source.component` / `reportingComponent` = `component`
    /// and `source.host` / `reportingInstance` = `host` (client-go's `NewRecorder`).
    pub fn recorder(&self, component: &str, host: Option<&str>) -> Arc<dyn EventRecorder> {
        Arc::new(BroadcastRecorder {
            shared: self.shared.clone(),
            source: EventSource {
                component: Some(component.to_owned()),
                host: host.filter(|h| !h.is_empty()).map(str::to_owned),
            },
        })
    }

    /// Events dropped so far because the buffer was full or the broadcaster had shut down.
    pub fn dropped_events(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Stops accepting events, writes every buffered event (one attempt each, as client-go
    /// after shutdown) and waits for the worker to finish. Later calls return at once.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        let handle = match self.worker.lock() {
            Ok(mut worker) => worker.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(handle) = handle
            && let Err(err) = handle.await
        {
            tracing::error!(error = %err, "event broadcaster worker failed");
        }
    }
}

impl Drop for EventBroadcaster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The recorder handed out by [`EventBroadcaster::recorder`].
struct BroadcastRecorder {
    shared: Arc<Shared>,
    /// Who reports: `component` and optional `host`.
    source: EventSource,
}

impl BroadcastRecorder {
    /// Builds the core/v1 Event, as client-go's `makeEvent` + `generateEvent`.
    fn make_event(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: String,
    ) -> Event {
        let now = self.shared.clock.now();
        let namespace = regarding
            .namespace
            .as_deref()
            .filter(|ns| !ns.is_empty())
            .unwrap_or("default");
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or_default(),
            now.as_nanosecond()
        );
        Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            involved_object: regarding.clone(),
            reason: Some(reason.to_owned()),
            message: Some(message),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            type_: Some(type_.as_str().to_owned()),
            source: Some(self.source.clone()),
            reporting_component: self.source.component.clone(),
            reporting_instance: self.source.host.clone(),
            ..Event::default()
        }
    }
}

impl EventRecorder for BroadcastRecorder {
    fn event(&self, regarding: &ObjectReference, type_: EventType, reason: &str, message: String) {
        let event = self.make_event(regarding, type_, reason, message);
        match self.shared.tx.try_send(event) {
            Ok(()) => {}
            Err(TrySendError::Full(event)) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
                let object = object_key(&event.involved_object);
                let reason = event.reason.as_deref().unwrap_or_default();
                // One line per interval with the count; each dropped event at debug level.
                match LOG_LINES.check_now(repeated_log::signature("dropped event")) {
                    Verdict::Log { repeated } => tracing::error!(
                        %object,
                        reason,
                        repeated,
                        "Unable to record event: too many queued events, dropped event"
                    ),
                    Verdict::Suppress => tracing::debug!(
                        %object,
                        reason,
                        "Unable to record event: too many queued events, dropped event"
                    ),
                }
            }
            Err(TrySendError::Closed(event)) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    object = %object_key(&event.involved_object),
                    reason = event.reason.as_deref().unwrap_or_default(),
                    "Unable to record event: broadcaster is shut down"
                );
            }
        }
    }
}

/// The event lines of every broadcaster in the process, summarized when they repeat.
static LOG_LINES: LazyLock<RepeatFilter> = LazyLock::new(RepeatFilter::default);

/// A failed event write: at error level once per interval for the same message and error,
/// with the count held back; the rest at debug level.
fn log_write_failure(message: &'static str, err: &Error) {
    let error = err.to_string();
    match LOG_LINES.check_now(repeated_log::signature((message, &error))) {
        Verdict::Log { repeated: 0 } => tracing::error!(%error, "{message}"),
        Verdict::Log { repeated } => tracing::error!(%error, repeated, "{message}"),
        Verdict::Suppress => tracing::debug!(%error, "{message}"),
    }
}

/// The worker task: owns the correlator and writes events one at a time.
struct Worker {
    rx: mpsc::Receiver<Event>,
    sink: Arc<dyn EventSink>,
    correlator: EventCorrelator,
    max_tries: u32,
    sleep_duration: Duration,
    /// Cancelled by `shutdown`: flush, one attempt per event, then stop.
    stop: CancellationToken,
}

impl Worker {
    async fn run(mut self) {
        loop {
            let event = tokio::select! {
                biased;
                event = self.rx.recv() => match event {
                    Some(event) => event,
                    None => return,
                },
                _ = self.stop.cancelled() => break,
            };
            self.handle(event).await;
        }
        self.rx.close();
        while let Ok(event) = self.rx.try_recv() {
            self.handle(event).await;
        }
    }

    /// Logs the event (client-go's `StartStructuredLogging`), then records it.
    async fn handle(&mut self, event: Event) {
        log_event(&event);
        self.record_to_sink(event).await;
    }

    /// Correlates then writes, retrying transport failures, as client-go's `recordToSink`.
    async fn record_to_sink(&mut self, event: Event) {
        let result = self.correlator.correlate(&event);
        if result.skip {
            return;
        }
        let mut event = result.event;
        let patch = result.patch;
        let mut tries = 0;
        loop {
            if self.record_event(&mut event, patch.as_ref()).await {
                return;
            }
            tries += 1;
            if tries >= self.max_tries {
                tracing::error!(event = %event_key_for_log(&event), "Unable to write event (retry limit exceeded!)");
                return;
            }
            if self.stop.is_cancelled() {
                tracing::error!(event = %event_key_for_log(&event), "Unable to write event (broadcaster is shut down)");
                return;
            }
            // Randomize the first pause so clients do not retry in lockstep after an outage.
            let delay = if tries == 1 {
                self.sleep_duration.mul_f64(rand::rng().random::<f64>())
            } else {
                self.sleep_duration
            };
            tokio::select! {
                _ = self.stop.cancelled() => {
                    tracing::error!(event = %event_key_for_log(&event), "Unable to write event (broadcaster is shut down)");
                    return;
                }
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// One write attempt: patch a repeat (falling back to create when the Event is gone) or
    /// create. Returns whether the event is done with (written or rejected for good), as
    /// client-go's `recordEvent`.
    async fn record_event(&mut self, event: &mut Event, patch: Option<&serde_json::Value>) -> bool {
        let update_existing = event.count.unwrap_or(1) > 1;
        let result = match patch.filter(|_| update_existing) {
            Some(patch) => match self.sink.patch(event, patch).await {
                // The Event may have been deleted (or expired) since: record it afresh.
                Err(err) if err.is_not_found() => self.create(event).await,
                other => other,
            },
            None => self.create(event).await,
        };
        match result {
            Ok(stored) => {
                self.correlator.update_state(&stored);
                true
            }
            Err(Error::Rejected { reason, .. }) if reason == "AlreadyExists" => {
                tracing::debug!(event = %event_key_for_log(event), "Server rejected event (will not retry!): already exists");
                true
            }
            Err(err) if err.is_rejected() || err.is_not_found() => {
                log_write_failure("Server rejected event (will not retry!)", &err);
                true
            }
            Err(err) => {
                log_write_failure("Unable to write event (may retry after sleeping)", &err);
                false
            }
        }
    }

    /// Creates `event` with no resourceVersion.
    async fn create(&self, event: &mut Event) -> Result<Event> {
        event.metadata.resource_version = None;
        self.sink.create(event).await
    }
}

/// One log line per event, with the fields client-go's structured logging uses.
fn log_event(event: &Event) {
    let obj = &event.involved_object;
    tracing::debug!(
        object = %object_key(obj),
        field_path = obj.field_path.as_deref().unwrap_or_default(),
        kind = obj.kind.as_deref().unwrap_or_default(),
        api_version = obj.api_version.as_deref().unwrap_or_default(),
        r#type = event.type_.as_deref().unwrap_or_default(),
        reason = event.reason.as_deref().unwrap_or_default(),
        message = event.message.as_deref().unwrap_or_default(),
        "Event occurred"
    );
}

/// `namespace/name` (or `name`) of an object reference.
fn object_key(obj: &ObjectReference) -> String {
    match obj.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        Some(ns) => format!("{ns}/{}", obj.name.as_deref().unwrap_or_default()),
        None => obj.name.clone().unwrap_or_default(),
    }
}

/// `namespace/name` of an Event, for logs.
fn event_key_for_log(event: &Event) -> String {
    format!(
        "{}/{}",
        event.metadata.namespace.as_deref().unwrap_or_default(),
        event.metadata.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};
    use std::sync::Mutex;

    use async_trait::async_trait;
    use jiff::Timestamp;
    use serde_json::Value;
    use tokio::sync::Semaphore;

    use super::*;
    use crate::events::TokioClock;
    use crate::events::aggregator::AGGREGATE_MESSAGE_PREFIX;

    /// How the fake sink answers its next call.
    #[derive(Clone, Copy, Debug)]
    enum Fail {
        Transport,
        Rejected,
    }

    #[derive(Default)]
    struct SinkState {
        /// Stored Events by `namespace/name`.
        events: BTreeMap<String, Event>,
        /// `create ns/name` / `patch ns/name <patch>` in call order.
        actions: Vec<String>,
        /// Failures for the next calls, in order.
        fail_next: VecDeque<Fail>,
        version: u64,
    }

    /// An in-memory sink; optionally every call first waits for a permit of `gate`.
    #[derive(Default)]
    struct FakeSink {
        state: Mutex<SinkState>,
        gate: Option<Arc<Semaphore>>,
    }

    impl FakeSink {
        fn state(&self) -> std::sync::MutexGuard<'_, SinkState> {
            self.state.lock().expect("sink state")
        }

        fn actions(&self) -> Vec<String> {
            self.state().actions.clone()
        }

        fn stored(&self) -> Vec<Event> {
            self.state().events.values().cloned().collect()
        }

        async fn enter(&self, action: String, key: &str) -> Result<()> {
            if let Some(gate) = &self.gate {
                gate.acquire().await.expect("gate").forget();
            }
            let mut state = self.state();
            state.actions.push(action);
            match state.fail_next.pop_front() {
                None => Ok(()),
                Some(Fail::Transport) => Err(Error::Transport {
                    event: key.to_owned(),
                    op: "create",
                    source: kube::Error::Service(Box::new(std::io::Error::other("reset"))),
                }),
                Some(Fail::Rejected) => Err(Error::Rejected {
                    event: key.to_owned(),
                    op: "create",
                    reason: "Invalid".into(),
                    source: kube::Error::Api(
                        kube::core::Status::failure("bad event", "Invalid")
                            .with_code(422)
                            .boxed(),
                    ),
                }),
            }
        }
    }

    fn key(event: &Event) -> String {
        format!(
            "{}/{}",
            event.metadata.namespace.as_deref().unwrap_or_default(),
            event.metadata.name.as_deref().unwrap_or_default()
        )
    }

    #[async_trait]
    impl EventSink for FakeSink {
        async fn create(&self, event: &Event) -> Result<Event> {
            let k = key(event);
            self.enter(format!("create {k}"), &k).await?;
            let mut state = self.state();
            state.version += 1;
            let mut stored = event.clone();
            stored.metadata.resource_version = Some(state.version.to_string());
            state.events.insert(k, stored.clone());
            Ok(stored)
        }

        async fn patch(&self, event: &Event, patch: &Value) -> Result<Event> {
            let k = key(event);
            self.enter(format!("patch {k} {patch}"), &k).await?;
            let mut state = self.state();
            state.version += 1;
            let version = state.version.to_string();
            let Some(stored) = state.events.get_mut(&k) else {
                return Err(Error::NotFound {
                    event: k,
                    op: "patch",
                });
            };
            let mut json = serde_json::to_value(&*stored).expect("to json");
            json_patch::merge(&mut json, patch);
            *stored = serde_json::from_value(json).expect("from json");
            stored.metadata.resource_version = Some(version);
            Ok(stored.clone())
        }
    }

    fn t0() -> Timestamp {
        "2024-01-01T00:00:00Z".parse().expect("timestamp")
    }

    fn broadcaster(sink: Arc<FakeSink>, queue_size: usize) -> EventBroadcaster {
        let clock: Arc<dyn WallClock> = Arc::new(TokioClock::starting_at(t0()));
        EventBroadcaster::with_options(
            sink,
            BroadcasterOptions {
                queue_size,
                clock: clock.clone(),
                correlator: CorrelatorOptions {
                    clock,
                    ..CorrelatorOptions::default()
                },
                ..BroadcasterOptions::default()
            },
        )
    }

    fn rs(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("apps/v1".into()),
            kind: Some("ReplicaSet".into()),
            namespace: Some("prod".into()),
            name: Some(name.into()),
            uid: Some("uid-1".into()),
            ..Default::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn recorded_events_reach_the_sink_with_source_and_reporting_fields() {
        let sink = Arc::new(FakeSink::default());
        let broadcaster = broadcaster(sink.clone(), 16);
        let recorder = broadcaster.recorder("replicaset-controller", None);
        recorder.event(
            &rs("web"),
            EventType::Normal,
            "SuccessfulCreate",
            "Created pod: web-1".into(),
        );
        let mut cluster_scoped = rs("node-1");
        cluster_scoped.namespace = None;
        recorder.event(
            &cluster_scoped,
            EventType::Warning,
            "NodeNotReady",
            "down".into(),
        );
        broadcaster.shutdown().await;

        let expected_name = format!("web.{:x}", t0().as_nanosecond());
        assert_eq!(
            sink.actions(),
            vec![
                format!("create prod/{expected_name}"),
                format!("create default/node-1.{:x}", t0().as_nanosecond()),
            ]
        );
        let event = sink
            .stored()
            .into_iter()
            .find(|e| e.metadata.namespace.as_deref() == Some("prod"))
            .expect("stored");
        assert_eq!(event.involved_object, rs("web"));
        assert_eq!(event.type_.as_deref(), Some("Normal"));
        assert_eq!(event.reason.as_deref(), Some("SuccessfulCreate"));
        assert_eq!(event.message.as_deref(), Some("Created pod: web-1"));
        assert_eq!(event.count, Some(1));
        assert_eq!(event.first_timestamp, Some(Time(t0())));
        assert_eq!(event.last_timestamp, Some(Time(t0())));
        let source = event.source.expect("source");
        assert_eq!(source.component.as_deref(), Some("replicaset-controller"));
        assert_eq!(source.host, None);
        assert_eq!(
            event.reporting_component.as_deref(),
            Some("replicaset-controller")
        );
        assert_eq!(broadcaster.dropped_events(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn identical_events_patch_the_recorded_event() {
        let sink = Arc::new(FakeSink::default());
        let broadcaster = broadcaster(sink.clone(), 16);
        let recorder = broadcaster.recorder("deployment-controller", Some("node-a"));
        for _ in 0..3 {
            recorder.event(
                &rs("web"),
                EventType::Warning,
                "FailedCreate",
                "quota".into(),
            );
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        broadcaster.shutdown().await;

        let name = format!("prod/web.{:x}", t0().as_nanosecond());
        assert_eq!(
            sink.actions(),
            vec![
                format!("create {name}"),
                format!(
                    "patch {name} {}",
                    serde_json::json!({"count": 2, "lastTimestamp": "2024-01-01T00:00:02Z", "message": "quota"})
                ),
                format!(
                    "patch {name} {}",
                    serde_json::json!({"count": 3, "lastTimestamp": "2024-01-01T00:00:04Z", "message": "quota"})
                ),
            ]
        );
        let stored = sink.stored();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].count, Some(3));
        assert_eq!(stored[0].first_timestamp, Some(Time(t0())));
        assert_eq!(stored[0].reporting_instance.as_deref(), Some("node-a"));
    }

    #[tokio::test(start_paused = true)]
    async fn patching_a_deleted_event_creates_it_again() {
        let sink = Arc::new(FakeSink::default());
        let broadcaster = broadcaster(sink.clone(), 16);
        let recorder = broadcaster.recorder("rs", None);
        recorder.event(&rs("web"), EventType::Normal, "Scaled", "up".into());
        tokio::time::sleep(Duration::from_secs(1)).await;
        sink.state().events.clear();
        recorder.event(&rs("web"), EventType::Normal, "Scaled", "up".into());
        broadcaster.shutdown().await;

        let actions = sink.actions();
        assert_eq!(actions.len(), 3, "{actions:?}");
        assert!(actions[1].starts_with("patch "), "{actions:?}");
        assert!(actions[2].starts_with("create "), "{actions:?}");
        let stored = sink.stored();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].count, Some(2));
    }

    #[tokio::test(start_paused = true)]
    async fn transport_errors_are_retried_and_rejections_are_not() {
        let sink = Arc::new(FakeSink::default());
        sink.state()
            .fail_next
            .extend([Fail::Transport, Fail::Transport]);
        let broadcaster = broadcaster(sink.clone(), 16);
        let recorder = broadcaster.recorder("rs", None);
        let start = tokio::time::Instant::now();
        recorder.event(&rs("a"), EventType::Normal, "R", "first".into());
        // Two failures, then success after one randomized and one full sleep.
        while sink.stored().is_empty() {
            assert!(start.elapsed() < Duration::from_secs(60), "never written");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let waited = start.elapsed();
        assert!(waited >= DEFAULT_SLEEP_DURATION, "{waited:?}");
        assert!(waited <= DEFAULT_SLEEP_DURATION * 2 + Duration::from_millis(100));
        sink.state().fail_next.push_back(Fail::Rejected);
        recorder.event(&rs("b"), EventType::Normal, "R", "rejected".into());
        recorder.event(&rs("c"), EventType::Normal, "R", "after".into());
        broadcaster.shutdown().await;

        let creates: Vec<String> = sink
            .actions()
            .into_iter()
            .map(|a| a.split('.').next().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(
            creates,
            vec![
                "create prod/a",
                "create prod/a",
                "create prod/a",
                "create prod/b",
                "create prod/c"
            ]
        );
        assert_eq!(sink.stored().len(), 2, "a and c stored, b rejected once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_buffer_drops_and_counts_without_blocking() {
        let gate = Arc::new(Semaphore::new(0));
        let sink = Arc::new(FakeSink {
            gate: Some(gate.clone()),
            ..FakeSink::default()
        });
        let broadcaster = broadcaster(sink.clone(), 2);
        let recorder = broadcaster.recorder("rs", None);
        recorder.event(&rs("p0"), EventType::Normal, "R", "m".into());
        // Let the worker take the first event; it is now stuck in the sink.
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        for i in 1..5 {
            recorder.event(&rs(&format!("p{i}")), EventType::Normal, "R", "m".into());
        }
        assert_eq!(broadcaster.dropped_events(), 2);
        gate.add_permits(100);
        broadcaster.shutdown().await;
        assert_eq!(sink.stored().len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_flushes_buffered_events_and_drops_later_ones() {
        let sink = Arc::new(FakeSink::default());
        let broadcaster = broadcaster(sink.clone(), 100);
        let recorder = broadcaster.recorder("rs", None);
        for i in 0..5 {
            recorder.event(&rs(&format!("p{i}")), EventType::Normal, "R", "m".into());
        }
        broadcaster.shutdown().await;
        assert_eq!(sink.stored().len(), 5);
        recorder.event(&rs("late"), EventType::Normal, "R", "m".into());
        assert_eq!(broadcaster.dropped_events(), 1);
        broadcaster.shutdown().await;
        assert_eq!(sink.stored().len(), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn similar_events_are_combined_after_the_threshold() {
        let sink = Arc::new(FakeSink::default());
        let broadcaster = broadcaster(sink.clone(), 100);
        let recorder = broadcaster.recorder("rs", None);
        for i in 0..12 {
            recorder.event(
                &rs("web"),
                EventType::Warning,
                "FailedCreate",
                format!("pod web-{i} forbidden"),
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        broadcaster.shutdown().await;
        let mut messages: Vec<(String, i32)> = sink
            .stored()
            .into_iter()
            .map(|e| (e.message.unwrap_or_default(), e.count.unwrap_or_default()))
            .collect();
        messages.sort();
        assert_eq!(messages.len(), 10, "{messages:?}");
        assert_eq!(
            messages[0],
            (format!("{AGGREGATE_MESSAGE_PREFIX}pod web-11 forbidden"), 3)
        );
        assert!(
            messages[1..]
                .iter()
                .all(|(m, c)| m.starts_with("pod web-") && *c == 1)
        );
    }
}
