//! Counting of identical events, as client-go's `eventLogger`.

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Map, Value};

use super::keys::{KeyDigest, event_digest};
use crate::lru::Lru;

/// What is remembered about the Event last written for one key.
#[derive(Clone, Debug, Default)]
struct EventLog {
    /// Occurrences so far; 0 = never seen.
    count: i32,
    /// When the first occurrence happened.
    first_timestamp: Option<Time>,
    /// The Event object's name on the server.
    name: Option<String>,
    /// The resourceVersion the server last returned.
    resource_version: Option<String>,
}

/// Turns a repeat of an already-recorded event into an update of that Event (same name,
/// `count + 1`, new `lastTimestamp` and message) with the patch to send.
#[derive(Debug)]
pub(crate) struct EventLogger {
    /// By the digest of the event key (or of the aggregate key, for aggregates).
    cache: Lru<KeyDigest, EventLog>,
}

impl EventLogger {
    pub(crate) fn new(cache_size: usize) -> Self {
        Self {
            cache: Lru::new(cache_size),
        }
    }

    /// Keys remembered.
    #[cfg(test)]
    pub(crate) fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// Records an occurrence of `event` under `key`; for a repeat, returns the event rewritten
    /// onto the existing Event and a merge patch of `count`, `lastTimestamp` and `message`
    /// (client-go's `eventObserve`).
    pub(crate) fn observe(&mut self, mut event: Event, key: KeyDigest) -> (Event, Option<Value>) {
        let mut patch = None;
        if let Some(last) = self.cache.get_mut(&key).filter(|l| l.count > 0) {
            event.metadata.name = last.name.clone();
            event.metadata.resource_version = last.resource_version.clone();
            event.first_timestamp = last.first_timestamp.clone();
            event.count = Some(last.count.saturating_add(1));

            // The fields a two-way strategic merge patch against (count 0, lastTimestamp 0,
            // message "") would carry.
            let mut fields = Map::new();
            fields.insert("count".into(), Value::from(event.count.unwrap_or(1)));
            if let Some(last_timestamp) = &event.last_timestamp
                && let Ok(value) = serde_json::to_value(last_timestamp)
            {
                fields.insert("lastTimestamp".into(), value);
            }
            if let Some(message) = event.message.as_ref().filter(|m| !m.is_empty()) {
                fields.insert("message".into(), Value::from(message.clone()));
            }
            patch = Some(Value::Object(fields));
        }
        self.cache.insert(
            key,
            EventLog {
                count: event.count.unwrap_or(1),
                first_timestamp: event.first_timestamp.clone(),
                name: event.metadata.name.clone(),
                resource_version: event.metadata.resource_version.clone(),
            },
        );
        (event, patch)
    }

    /// Remembers the server's copy of a written Event (name, resourceVersion, count).
    pub(crate) fn update_state(&mut self, event: &Event) {
        self.cache.insert(
            event_digest(event),
            EventLog {
                count: event.count.unwrap_or(1),
                first_timestamp: event.first_timestamp.clone(),
                name: event.metadata.name.clone(),
                resource_version: event.metadata.resource_version.clone(),
            },
        );
    }
}
