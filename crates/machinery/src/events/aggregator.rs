//! Aggregation of similar events, as client-go's `EventAggregator`.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use tokio::time::Instant;

use super::clock::WallClock;
use super::keys::{KeyDigest, aggregate_digest, event_digest};
use crate::lru::Lru;

/// Prefix of an aggregated event's message, as client-go's `EventAggregatorByReasonMessageFunc`.
pub const AGGREGATE_MESSAGE_PREFIX: &str = "(combined from similar events): ";

/// What the aggregator remembers about one group of similar events.
#[derive(Debug)]
struct AggregateRecord {
    /// Digests of the distinct messages seen in the group; never more than `max_events - 1`
    /// after a call.
    local_keys: HashSet<KeyDigest>,
    /// When a group member was last seen (our monotonic clock).
    last_seen: Instant,
}

/// Groups events that differ only in their message (same source, object, type, reason and
/// reporter). Once `max_events` distinct messages are seen within `max_interval` of each other,
/// further members are replaced by one aggregate event whose message is prefixed with
/// [`AGGREGATE_MESSAGE_PREFIX`], keyed so that repeats count up on the same Event.
#[derive(Debug)]
pub(crate) struct Aggregator {
    /// Groups by the digest of their aggregate key.
    cache: Lru<KeyDigest, AggregateRecord>,
    /// Distinct messages within the interval before aggregating.
    max_events: usize,
    /// A group not seen for longer than this starts afresh.
    max_interval: Duration,
}

impl Aggregator {
    pub(crate) fn new(cache_size: usize, max_events: usize, max_interval: Duration) -> Self {
        Self {
            cache: Lru::new(cache_size),
            max_events: max_events.max(1),
            max_interval,
        }
    }

    /// Groups remembered.
    #[cfg(test)]
    pub(crate) fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// Returns the event to record (the input, or a new aggregate event) and its cache key for
    /// the event logger (the full event key's digest, or the aggregate key's), as client-go's
    /// `EventAggregate`.
    pub(crate) fn aggregate(&mut self, event: &Event, clock: &dyn WallClock) -> (Event, KeyDigest) {
        let now = Instant::now();
        let (group, local_key) = aggregate_digest(event);
        let max_interval = self.max_interval;
        let record = self.cache.get_or_insert_with(group, || AggregateRecord {
            local_keys: HashSet::new(),
            last_seen: now,
        });
        if now.saturating_duration_since(record.last_seen) > max_interval {
            record.local_keys.clear();
        }
        record.local_keys.insert(local_key);
        record.last_seen = now;

        if record.local_keys.len() < self.max_events {
            return (event.clone(), event_digest(event));
        }
        // Keep the set from growing past the threshold: drop any one member.
        if let Some(any) = record.local_keys.iter().next().copied() {
            record.local_keys.remove(&any);
        }

        let wall = clock.now();
        let aggregate = Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    event.involved_object.name.as_deref().unwrap_or_default(),
                    wall.as_nanosecond()
                )),
                namespace: event.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            count: Some(1),
            first_timestamp: Some(Time(wall)),
            last_timestamp: Some(Time(wall)),
            involved_object: event.involved_object.clone(),
            message: Some(format!(
                "{AGGREGATE_MESSAGE_PREFIX}{}",
                event.message.as_deref().unwrap_or_default()
            )),
            type_: event.type_.clone(),
            reason: event.reason.clone(),
            source: event.source.clone(),
            reporting_component: event.reporting_component.clone(),
            reporting_instance: event.reporting_instance.clone(),
            ..Event::default()
        };
        (aggregate, group)
    }
}
