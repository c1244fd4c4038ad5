//! The core/v1 event recorder: broadcaster, correlator (aggregation, spam filter) and sink.
//!
//! Controllers hold an [`EventRecorder`] (usually an `Arc<dyn EventRecorder>`) and call
//! [`EventRecorder::event`]; recording never blocks and never fails from the caller's point of
//! view. Tests use [`FakeRecorder`], which keeps every event in memory.
//!
//! The real recorder comes from an [`EventBroadcaster`] (client-go's `record` package): its
//! [`EventBroadcaster::recorder`] puts events in a bounded buffer (dropping and counting when
//! full), and one worker logs each event, passes it through the [`EventCorrelator`]
//! (aggregation of similar events, counting of identical ones, per-object spam filter) and
//! writes it to an [`EventSink`] ([`KubeEventSink`] for a cluster).

mod aggregator;
mod broadcaster;
pub mod clock;
mod correlator;
mod event_logger;
mod keys;
mod sink;
mod spam_filter;

pub use aggregator::AGGREGATE_MESSAGE_PREFIX;
pub use broadcaster::{
    BroadcasterOptions, DEFAULT_SLEEP_DURATION, EventBroadcaster, MAX_QUEUED_EVENTS,
    MAX_TRIES_PER_EVENT,
};
pub use clock::{SystemClock, TokioClock, WallClock};
pub use correlator::{
    CorrelateResult, CorrelatorOptions, DEFAULT_AGGREGATE_INTERVAL, DEFAULT_AGGREGATE_MAX_EVENTS,
    DEFAULT_SPAM_BURST, DEFAULT_SPAM_QPS, EventCorrelator, MAX_LRU_CACHE_ENTRIES,
};
pub use keys::{aggregate_key, event_key, spam_key};
pub use sink::{Error, EventSink, KubeEventSink, Result};

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;

/// The `type` of an event, as core/v1 defines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Everything is fine (`Normal`).
    Normal,
    /// Something may need attention (`Warning`).
    Warning,
}

impl EventType {
    /// The wire value: `Normal` or `Warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Records events about objects, as client-go's `record.EventRecorder`.
///
/// Implementations must not block the caller and must not panic: an event that cannot be
/// delivered is dropped (and counted), never retried in the caller's task.
pub trait EventRecorder: Send + Sync {
    /// Records an event of `type_` with a CamelCase `reason` about `regarding`.
    fn event(&self, regarding: &ObjectReference, type_: EventType, reason: &str, message: String);
}

/// One event captured by [`FakeRecorder`].
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedEvent {
    /// The object the event is about.
    pub regarding: ObjectReference,
    /// `Normal` or `Warning`.
    pub type_: EventType,
    /// The CamelCase reason, e.g. `SuccessfulCreate`.
    pub reason: String,
    /// The human-readable message.
    pub message: String,
}

/// An in-memory recorder for tests, as client-go's `record.FakeRecorder`.
#[derive(Clone, Debug, Default)]
pub struct FakeRecorder {
    events: Arc<Mutex<Vec<RecordedEvent>>>,
}

impl FakeRecorder {
    /// A recorder with no events.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every event recorded so far, oldest first.
    pub fn events(&self) -> Vec<RecordedEvent> {
        match self.events.lock() {
            Ok(events) => events.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The reasons of every event recorded so far, oldest first.
    pub fn reasons(&self) -> Vec<String> {
        self.events().into_iter().map(|e| e.reason).collect()
    }
}

impl EventRecorder for FakeRecorder {
    fn event(&self, regarding: &ObjectReference, type_: EventType, reason: &str, message: String) {
        let event = RecordedEvent {
            regarding: regarding.clone(),
            type_,
            reason: reason.to_owned(),
            message,
        };
        match self.events.lock() {
            Ok(mut events) => events.push(event),
            Err(poisoned) => poisoned.into_inner().push(event),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_recorder_keeps_events_in_order() {
        let recorder = FakeRecorder::new();
        let rs = ObjectReference {
            kind: Some("ReplicaSet".into()),
            namespace: Some("default".into()),
            name: Some("web".into()),
            ..Default::default()
        };
        recorder.event(
            &rs,
            EventType::Normal,
            "SuccessfulCreate",
            "Created pod: web-1".into(),
        );
        recorder.event(&rs, EventType::Warning, "FailedCreate", "quota".into());
        assert_eq!(recorder.reasons(), vec!["SuccessfulCreate", "FailedCreate"]);
        assert_eq!(recorder.events()[1].type_.as_str(), "Warning");
    }
}
