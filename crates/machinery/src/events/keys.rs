//! The keys events are grouped by: full identity, spam-filter key and aggregation group, as client-go's `getEventKey`, `getSpamKey` and `EventAggregatorByReasonFunc`.
//!
//! client-go's correlator caches hold the key strings. Ours hold a [`KeyDigest`] of the same
//! bytes, computed from the parts without building the string: a cache entry costs 16 bytes of
//! key instead of the key (a few hundred bytes, kept twice in an LRU), and correlating an event
//! builds no key strings. The string forms stay public for callers that want them.

use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::Event;

/// A 128-bit digest of a key string, standing for the string in the correlator's caches.
///
/// Two SipHash-1-3 digests of the same bytes under independent random keys (chosen once per
/// process). Two different strings get the same digest with probability 2^-128, so among the
/// 4,096 entries of a full cache a collision has probability below 2^-104.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct KeyDigest([u64; 2]);

impl KeyDigest {
    /// The digest of the parts' concatenation, as [`join`] would build it (absent parts add
    /// nothing). Equal to [`KeyDigest::of_str`] of the joined string.
    pub(crate) fn of_parts(parts: &[Option<&str>]) -> Self {
        let [a, b] = seeds();
        let (mut high, mut low) = (a.build_hasher(), b.build_hasher());
        for part in parts.iter().flatten() {
            // `write` streams: writing "ab" then "c" hashes as writing "abc", so the digest is
            // that of the concatenation whatever the parts' boundaries.
            high.write(part.as_bytes());
            low.write(part.as_bytes());
        }
        Self([high.finish(), low.finish()])
    }

    /// The digest of one key string (a custom spam key, a message).
    pub(crate) fn of_str(key: &str) -> Self {
        Self::of_parts(&[Some(key)])
    }
}

/// The process's two SipHash keys.
fn seeds() -> &'static [RandomState; 2] {
    static SEEDS: OnceLock<[RandomState; 2]> = OnceLock::new();
    SEEDS.get_or_init(|| [RandomState::new(), RandomState::new()])
}

/// Appends the parts of an event's identity to one key string.
fn join(parts: &[Option<&str>]) -> String {
    let len = parts.iter().map(|p| p.map_or(0, str::len)).sum();
    let mut key = String::with_capacity(len);
    for part in parts.iter().flatten() {
        key.push_str(part);
    }
    key
}

/// The parts of [`event_key`], in order.
fn event_parts(event: &Event) -> [Option<&str>; 11] {
    let source = event.source.as_ref();
    let obj = &event.involved_object;
    [
        source.and_then(|s| s.component.as_deref()),
        source.and_then(|s| s.host.as_deref()),
        obj.kind.as_deref(),
        obj.namespace.as_deref(),
        obj.name.as_deref(),
        obj.field_path.as_deref(),
        obj.uid.as_deref(),
        obj.api_version.as_deref(),
        event.type_.as_deref(),
        event.reason.as_deref(),
        event.message.as_deref(),
    ]
}

/// The parts of [`spam_key`], in order.
fn spam_parts(event: &Event) -> [Option<&str>; 7] {
    let source = event.source.as_ref();
    let obj = &event.involved_object;
    [
        source.and_then(|s| s.component.as_deref()),
        source.and_then(|s| s.host.as_deref()),
        obj.kind.as_deref(),
        obj.namespace.as_deref(),
        obj.name.as_deref(),
        obj.uid.as_deref(),
        obj.api_version.as_deref(),
    ]
}

/// The parts of [`aggregate_key`]'s group, in order.
fn group_parts(event: &Event) -> [Option<&str>; 11] {
    let source = event.source.as_ref();
    let obj = &event.involved_object;
    [
        source.and_then(|s| s.component.as_deref()),
        source.and_then(|s| s.host.as_deref()),
        obj.kind.as_deref(),
        obj.namespace.as_deref(),
        obj.name.as_deref(),
        obj.uid.as_deref(),
        obj.api_version.as_deref(),
        event.type_.as_deref(),
        event.reason.as_deref(),
        event.reporting_component.as_deref(),
        event.reporting_instance.as_deref(),
    ]
}

/// The full identity of an event: source, involved object (with field path), type, reason and
/// message (client-go's `getEventKey`).
pub fn event_key(event: &Event) -> String {
    join(&event_parts(event))
}

/// The digest of [`event_key`], without building it.
pub(crate) fn event_digest(event: &Event) -> KeyDigest {
    KeyDigest::of_parts(&event_parts(event))
}

/// The spam-filter key: source and involved object (client-go's `getSpamKey`).
pub fn spam_key(event: &Event) -> String {
    join(&spam_parts(event))
}

/// The digest of [`spam_key`], without building it.
pub(crate) fn spam_digest(event: &Event) -> KeyDigest {
    KeyDigest::of_parts(&spam_parts(event))
}

/// The aggregation group (source, object, type, reason, reporter) and the member's local key
/// (its message), as client-go's `EventAggregatorByReasonFunc`.
pub fn aggregate_key(event: &Event) -> (String, String) {
    (
        join(&group_parts(event)),
        event.message.clone().unwrap_or_default(),
    )
}

/// The digests of [`aggregate_key`]'s group and local key, without building them.
pub(crate) fn aggregate_digest(event: &Event) -> (KeyDigest, KeyDigest) {
    (
        KeyDigest::of_parts(&group_parts(event)),
        KeyDigest::of_str(event.message.as_deref().unwrap_or_default()),
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};

    use super::*;

    fn event(name: &str, message: &str) -> Event {
        Event {
            source: Some(EventSource {
                component: Some("replicaset-controller".into()),
                host: None,
            }),
            involved_object: ObjectReference {
                kind: Some("ReplicaSet".into()),
                namespace: Some("default".into()),
                name: Some(name.into()),
                uid: Some("0b6a1d4e".into()),
                api_version: Some("apps/v1".into()),
                ..ObjectReference::default()
            },
            type_: Some("Normal".into()),
            reason: Some("SuccessfulCreate".into()),
            message: Some(message.into()),
            ..Event::default()
        }
    }

    #[test]
    fn digests_are_those_of_the_key_strings() {
        let e = event("web-5d9c", "Created pod: web-5d9c-x7k2p");
        assert_eq!(event_digest(&e), KeyDigest::of_str(&event_key(&e)));
        assert_eq!(spam_digest(&e), KeyDigest::of_str(&spam_key(&e)));
        let (group, local) = aggregate_key(&e);
        assert_eq!(
            aggregate_digest(&e),
            (KeyDigest::of_str(&group), KeyDigest::of_str(&local))
        );
    }

    #[test]
    fn digests_follow_the_concatenation_not_the_parts() {
        // client-go joins with no separator, so "ab"+"c" and "a"+"bc" are one key.
        assert_eq!(
            KeyDigest::of_parts(&[Some("ab"), None, Some("c")]),
            KeyDigest::of_parts(&[Some("a"), Some("bc")])
        );
        assert_ne!(KeyDigest::of_str("abc"), KeyDigest::of_str("abd"));
        assert_ne!(KeyDigest::of_str(""), KeyDigest::of_str("a"));
    }

    #[test]
    fn events_differing_in_any_part_get_different_digests() {
        let base = event("web-5d9c", "Created pod: web-5d9c-x7k2p");
        let other_message = event("web-5d9c", "Created pod: web-5d9c-q2w8z");
        let other_object = event("web-7f1a", "Created pod: web-5d9c-x7k2p");
        assert_ne!(event_digest(&base), event_digest(&other_message));
        assert_ne!(event_digest(&base), event_digest(&other_object));
        // The spam key and the group leave the message out.
        assert_eq!(spam_digest(&base), spam_digest(&other_message));
        assert_eq!(
            aggregate_digest(&base).0,
            aggregate_digest(&other_message).0
        );
        assert_ne!(spam_digest(&base), spam_digest(&other_object));
    }
}
