//! The event correlator: aggregation, counting and spam filtering before events reach the sink,
//! as client-go's `EventCorrelator` (`tools/record/events_cache.go`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use serde_json::Value;

use super::aggregator::Aggregator;
use super::clock::{SystemClock, WallClock};
use super::event_logger::EventLogger;
use super::keys::spam_key;
use super::spam_filter::SpamFilter;

/// Entries in each of the correlator's LRU caches.
pub const MAX_LRU_CACHE_ENTRIES: usize = 4096;
/// Distinct messages of similar events within the interval before they are aggregated.
pub const DEFAULT_AGGREGATE_MAX_EVENTS: usize = 10;
/// Window for aggregation: a group not seen for longer starts afresh.
pub const DEFAULT_AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// Events one source may emit about one object at once.
pub const DEFAULT_SPAM_BURST: u32 = 25;
/// Refill of the spam filter: one event every 5 minutes.
pub const DEFAULT_SPAM_QPS: f32 = 1.0 / 300.0;

/// Tuning of the correlator, as client-go's `CorrelatorOptions`; `Default` is client-go's.
#[derive(Clone, Debug)]
pub struct CorrelatorOptions {
    /// Entries in each LRU cache.
    pub lru_cache_size: usize,
    /// Spam filter burst per source+object.
    pub spam_burst: u32,
    /// Spam filter refill rate, events per second.
    pub spam_qps: f32,
    /// Distinct messages before similar events are aggregated.
    pub max_events: usize,
    /// Aggregation window.
    pub max_interval: Duration,
    /// The key events are throttled by (default: source + involved object, [`spam_key`]).
    pub spam_key: fn(&Event) -> String,
    /// Wall clock for the timestamps and names of aggregate events.
    pub clock: Arc<dyn WallClock>,
}

impl Default for CorrelatorOptions {
    fn default() -> Self {
        Self {
            lru_cache_size: MAX_LRU_CACHE_ENTRIES,
            spam_burst: DEFAULT_SPAM_BURST,
            spam_qps: DEFAULT_SPAM_QPS,
            max_events: DEFAULT_AGGREGATE_MAX_EVENTS,
            max_interval: DEFAULT_AGGREGATE_INTERVAL,
            spam_key,
            clock: Arc::new(SystemClock),
        }
    }
}

/// What to do with one event, as client-go's `EventCorrelateResult`.
#[derive(Clone, Debug, PartialEq)]
pub struct CorrelateResult {
    /// The event to write (possibly an aggregate, possibly a repeat of a recorded Event).
    pub event: Event,
    /// For a repeat (`count > 1`): the merge patch updating the recorded Event.
    pub patch: Option<Value>,
    /// The spam filter dropped the event: write nothing.
    pub skip: bool,
}

/// Filters, aggregates and counts events before they are written. Owned by the broadcaster's
/// worker task; not shared, so it needs no lock.
#[derive(Debug)]
pub struct EventCorrelator {
    aggregator: Aggregator,
    logger: EventLogger,
    spam_filter: SpamFilter,
    clock: Arc<dyn WallClock>,
}

impl EventCorrelator {
    /// A correlator with `options`.
    pub fn new(options: CorrelatorOptions) -> Self {
        Self {
            aggregator: Aggregator::new(
                options.lru_cache_size,
                options.max_events,
                options.max_interval,
            ),
            logger: EventLogger::new(options.lru_cache_size),
            spam_filter: SpamFilter::new(
                options.lru_cache_size,
                options.spam_burst,
                options.spam_qps,
                options.spam_key,
            ),
            clock: options.clock,
        }
    }

    /// Aggregates, counts and spam-filters `event`, as client-go's `EventCorrelate`.
    pub fn correlate(&mut self, event: &Event) -> CorrelateResult {
        let (aggregated, key) = self.aggregator.aggregate(event, &*self.clock);
        let (observed, patch) = self.logger.observe(aggregated, key);
        let skip = self.spam_filter.filter(&observed);
        CorrelateResult {
            event: observed,
            patch,
            skip,
        }
    }

    /// Entries of the aggregator's, the logger's and the spam filter's caches.
    #[cfg(test)]
    fn cache_lens(&self) -> [usize; 3] {
        [
            self.aggregator.cache_len(),
            self.logger.cache_len(),
            self.spam_filter.cache_len(),
        ]
    }

    /// Remembers the server's copy of a written Event, so repeats patch it (client-go's `UpdateState`).
    pub fn update_state(&mut self, event: &Event) {
        self.logger.update_state(event);
    }
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use tokio::time::advance;

    use super::*;
    use crate::events::TokioClock;
    use crate::events::aggregator::AGGREGATE_MESSAGE_PREFIX;
    use crate::events::keys::aggregate_key;

    fn object_ref(kind: &str, name: &str, namespace: &str) -> ObjectReference {
        ObjectReference {
            kind: Some(kind.into()),
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            uid: Some("C934D34AFB20242".into()),
            api_version: Some("version".into()),
            field_path: Some("spec.containers{mycontainer}".into()),
            ..Default::default()
        }
    }

    fn make_event(reason: &str, message: &str, involved: ObjectReference) -> Event {
        Event {
            reason: Some(reason.into()),
            message: Some(message.into()),
            involved_object: involved,
            source: Some(EventSource {
                component: Some("kubelet".into()),
                host: Some("kublet.node1".into()),
            }),
            count: Some(1),
            type_: Some("Normal".into()),
            ..Default::default()
        }
    }

    fn similar_events(n: usize, template: &Event) -> Vec<Event> {
        (0..n)
            .map(|i| {
                let mut e = template.clone();
                let msg = template.message.clone().unwrap_or_default();
                e.message = Some(format!("{msg}-{i}-{msg}"));
                e
            })
            .collect()
    }

    fn unique_events(n: usize) -> Vec<Event> {
        (0..n)
            .map(|i| {
                make_event(
                    &format!("reason-{i}"),
                    &format!("message-{i}"),
                    object_ref("Pod", &format!("pod-{i}"), &format!("ns-{i}")),
                )
            })
            .collect()
    }

    fn with_count(mut event: Event, count: i32) -> Event {
        event.count = Some(count);
        event
    }

    fn correlator(clock: &TokioClock) -> EventCorrelator {
        EventCorrelator::new(CorrelatorOptions {
            clock: Arc::new(*clock),
            ..CorrelatorOptions::default()
        })
    }

    /// Stamps `event` with the clock's time, as a recorder would.
    fn stamped(mut event: Event, clock: &TokioClock) -> Event {
        let now = Time(clock.now());
        event.first_timestamp = Some(now.clone());
        event.last_timestamp = Some(now);
        event
    }

    /// Checks the fields client-go's `validateEvent` checks: timestamps set and distinct exactly
    /// when counted, then everything but timestamps and name equal.
    fn validate(name: &str, actual: &Event, expected: &Event) {
        let first = actual.first_timestamp.clone().expect("firstTimestamp");
        let last = actual.last_timestamp.clone().expect("lastTimestamp");
        let count = expected.count.unwrap_or(1);
        if count > 1 {
            assert_ne!(first, last, "{name}: compression must move lastTimestamp");
        } else {
            assert_eq!(first, last, "{name}: a single occurrence has one timestamp");
        }
        let mut actual = actual.clone();
        actual.first_timestamp = None;
        actual.last_timestamp = None;
        actual.metadata.name = None;
        actual.metadata.resource_version = None;
        let mut expected = expected.clone();
        expected.first_timestamp = None;
        expected.last_timestamp = None;
        assert_eq!(actual, expected, "{name}");
    }

    #[test]
    fn aggregate_key_groups_events_that_differ_only_by_message() {
        let e1 = make_event(
            "end-of-world",
            "it was fun",
            object_ref("Pod", "pod1", "other"),
        );
        let e2 = make_event(
            "end-of-world",
            "it was awful",
            object_ref("Pod", "pod1", "other"),
        );
        let e3 = make_event(
            "nevermind",
            "it was a bug",
            object_ref("Pod", "pod1", "other"),
        );
        let (g1, l1) = aggregate_key(&e1);
        let (g2, l2) = aggregate_key(&e2);
        let (g3, _) = aggregate_key(&e3);
        assert_eq!(g1, g2);
        assert_ne!(l1, l2);
        assert_ne!(g1, g3);
    }

    /// client-go's `TestEventCorrelator`, with tokio's paused clock advancing `interval` before
    /// each event.
    #[tokio::test(start_paused = true)]
    async fn correlator_counts_aggregates_and_filters_as_client_go() {
        let pod = || object_ref("Pod", "my-pod", "my-ns");
        let first = make_event("first", "i am first", pod());
        let duplicate = make_event("duplicate", "me again", pod());
        let unique = make_event("unique", "snowflake", pod());
        let mut similar = make_event("similar", "similar message", pod());
        similar.involved_object.field_path = Some("spec.containers{container1}".into());
        let aggregate = make_event(
            "similar",
            &format!("{AGGREGATE_MESSAGE_PREFIX}similar message"),
            similar.involved_object.clone(),
        );
        let mut similar_other_container = similar.clone();
        similar_other_container.involved_object.field_path =
            Some("spec.containers{container2}".into());

        struct Case {
            name: &'static str,
            previous: Vec<Event>,
            new: Event,
            expected: Option<Event>,
            interval: Duration,
        }
        let secs = Duration::from_secs;
        let cases = vec![
            Case {
                name: "create-a-single-event",
                previous: vec![],
                new: first.clone(),
                expected: Some(with_count(first.clone(), 1)),
                interval: secs(5),
            },
            Case {
                name: "the-same-event-should-just-count",
                previous: vec![duplicate.clone()],
                new: duplicate.clone(),
                expected: Some(with_count(duplicate.clone(), 2)),
                interval: secs(5),
            },
            Case {
                name: "the-same-event-should-just-count-even-if-more-than-aggregate",
                previous: vec![duplicate.clone(); DEFAULT_AGGREGATE_MAX_EVENTS],
                new: duplicate.clone(),
                expected: Some(with_count(
                    duplicate.clone(),
                    DEFAULT_AGGREGATE_MAX_EVENTS as i32 + 1,
                )),
                interval: secs(30),
            },
            Case {
                name: "the-same-event-is-spam-if-happens-too-frequently",
                previous: vec![duplicate.clone(); DEFAULT_SPAM_BURST as usize + 1],
                new: duplicate.clone(),
                expected: None,
                interval: secs(1),
            },
            Case {
                name: "create-many-unique-events",
                previous: unique_events(30),
                new: unique.clone(),
                expected: Some(with_count(unique.clone(), 1)),
                interval: secs(5),
            },
            Case {
                name: "similar-events-should-aggregate-event",
                previous: similar_events(DEFAULT_AGGREGATE_MAX_EVENTS - 1, &similar),
                new: similar.clone(),
                expected: Some(with_count(aggregate.clone(), 1)),
                interval: secs(5),
            },
            Case {
                name: "similar-events-many-times-should-count-the-aggregate",
                previous: similar_events(DEFAULT_AGGREGATE_MAX_EVENTS, &similar),
                new: similar.clone(),
                expected: Some(with_count(aggregate.clone(), 2)),
                interval: secs(5),
            },
            Case {
                name: "events-from-different-containers-do-not-aggregate",
                previous: vec![similar_other_container.clone()],
                new: similar.clone(),
                expected: Some(with_count(similar.clone(), 1)),
                interval: secs(5),
            },
            Case {
                // client-go's interval clock ticks more than once per event; one tick past the
                // window here.
                name: "similar-events-whose-interval-is-greater-than-aggregate-interval-do-not-aggregate",
                previous: similar_events(DEFAULT_AGGREGATE_MAX_EVENTS - 1, &similar),
                new: similar.clone(),
                expected: Some(with_count(similar.clone(), 1)),
                interval: DEFAULT_AGGREGATE_INTERVAL + secs(1),
            },
        ];

        let start: Timestamp = "2024-01-01T00:00:00Z".parse().expect("timestamp");
        for case in cases {
            let clock = TokioClock::starting_at(start);
            let mut correlator = correlator(&clock);
            for previous in case.previous {
                advance(case.interval).await;
                let result = correlator.correlate(&stamped(previous, &clock));
                if !result.skip {
                    correlator.update_state(&result.event);
                }
            }
            advance(case.interval).await;
            let result = correlator.correlate(&stamped(case.new, &clock));
            match case.expected {
                None => assert!(result.skip, "{}: expected skip", case.name),
                Some(expected) => {
                    assert!(!result.skip, "{}: unexpected skip", case.name);
                    validate(case.name, &result.event, &expected);
                    assert_eq!(
                        result.patch.is_some(),
                        expected.count.unwrap_or(1) > 1,
                        "{}: a repeat carries a patch",
                        case.name
                    );
                }
            }
        }
    }

    /// client-go's `TestEventSpamFilter`: burst 1, default and custom spam keys.
    /// Every cache of the correlator is an LRU of `MAX_LRU_CACHE_ENTRIES` (client-go's
    /// `maxLruCacheEntries`): events about ever new objects (pods come and go for days) do not
    /// grow it past that.
    #[tokio::test(start_paused = true)]
    async fn caches_hold_at_most_max_lru_cache_entries() {
        let clock = TokioClock::starting_at("2024-01-01T00:00:00Z".parse().expect("ts"));
        let mut correlator = correlator(&clock);
        let n = MAX_LRU_CACHE_ENTRIES + 500;
        for event in unique_events(n) {
            let result = correlator.correlate(&stamped(event, &clock));
            assert!(!result.skip, "a new object has its own spam budget");
            let mut written = result.event;
            written.metadata.name = written.involved_object.name.clone();
            written.metadata.resource_version = Some("1".into());
            correlator.update_state(&written);
        }
        assert_eq!(correlator.cache_lens(), [MAX_LRU_CACHE_ENTRIES; 3]);

        let small = EventCorrelator::new(CorrelatorOptions {
            lru_cache_size: 3,
            clock: Arc::new(clock),
            ..CorrelatorOptions::default()
        });
        let mut small = small;
        for event in unique_events(10) {
            small.correlate(&stamped(event, &clock));
        }
        assert_eq!(
            small.cache_lens(),
            [3; 3],
            "the size option bounds each cache"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn spam_filter_throttles_per_source_and_object() {
        fn spam_key_with_reason(e: &Event) -> String {
            let mut key = spam_key(e);
            key.push_str(e.reason.as_deref().unwrap_or_default());
            key
        }
        let pod = || object_ref("Pod", "my-pod", "my-ns");
        let original = make_event("original", "i am first", pod());
        let different_reason = make_event("duplicate", "me again", pod());
        let spam = make_event("original", "me again", pod());

        struct Case {
            name: &'static str,
            new: Event,
            skip: bool,
            key: fn(&Event) -> String,
        }
        let cases = [
            Case {
                name: "event should be reported as spam if object reference is the same for default spam filter",
                new: different_reason.clone(),
                skip: true,
                key: spam_key,
            },
            Case {
                name: "event should not be reported as spam if object reference is the same, but reason is different for custom spam filter",
                new: different_reason.clone(),
                skip: false,
                key: spam_key_with_reason,
            },
            Case {
                name: "event should be reported as spam if object reference and reason is the same, but message is different for custom spam filter",
                new: spam.clone(),
                skip: true,
                key: spam_key_with_reason,
            },
        ];
        for case in cases {
            let clock = TokioClock::starting_at("2024-01-01T00:00:00Z".parse().expect("ts"));
            let mut correlator = EventCorrelator::new(CorrelatorOptions {
                clock: Arc::new(clock),
                spam_burst: 1,
                spam_key: case.key,
                ..CorrelatorOptions::default()
            });
            advance(Duration::from_secs(1)).await;
            let result = correlator.correlate(&stamped(original.clone(), &clock));
            assert!(!result.skip, "{}", case.name);
            correlator.update_state(&result.event);
            advance(Duration::from_secs(1)).await;
            let result = correlator.correlate(&stamped(case.new.clone(), &clock));
            assert_eq!(result.skip, case.skip, "{}", case.name);
            if !case.skip {
                validate(case.name, &result.event, &with_count(case.new, 1));
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn spam_budget_refills_one_event_per_five_minutes() {
        let clock = TokioClock::starting_at("2024-01-01T00:00:00Z".parse().expect("ts"));
        let mut correlator = correlator(&clock);
        let pod = object_ref("Pod", "p", "ns");
        for i in 0..DEFAULT_SPAM_BURST {
            let e = make_event(&format!("r{i}"), "m", pod.clone());
            assert!(!correlator.correlate(&stamped(e, &clock)).skip, "event {i}");
        }
        let e = make_event("more", "m", pod.clone());
        assert!(correlator.correlate(&stamped(e.clone(), &clock)).skip);
        advance(Duration::from_secs(299)).await;
        assert!(correlator.correlate(&stamped(e.clone(), &clock)).skip);
        advance(Duration::from_secs(1)).await;
        assert!(!correlator.correlate(&stamped(e.clone(), &clock)).skip);
        assert!(correlator.correlate(&stamped(e, &clock)).skip);
    }

    #[tokio::test(start_paused = true)]
    async fn repeat_patch_carries_count_last_timestamp_and_message() {
        let clock = TokioClock::starting_at("2024-01-01T00:00:00Z".parse().expect("ts"));
        let mut correlator = correlator(&clock);
        let e = make_event(
            "BackOff",
            "back-off restarting",
            object_ref("Pod", "p", "ns"),
        );
        let first = correlator.correlate(&stamped(e.clone(), &clock));
        let mut stored = first.event.clone();
        stored.metadata.name = Some("p.abc".into());
        stored.metadata.resource_version = Some("7".into());
        correlator.update_state(&stored);
        advance(Duration::from_secs(42)).await;
        let repeat = correlator.correlate(&stamped(e, &clock));
        assert_eq!(repeat.event.metadata.name.as_deref(), Some("p.abc"));
        assert_eq!(repeat.event.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(repeat.event.count, Some(2));
        assert_eq!(repeat.event.first_timestamp, first.event.first_timestamp);
        assert_eq!(
            repeat.patch,
            Some(serde_json::json!({
                "count": 2,
                "lastTimestamp": "2024-01-01T00:00:42Z",
                "message": "back-off restarting",
            }))
        );
    }
}
