//! The keys events are grouped by: full identity, spam-filter key and aggregation group, as client-go's `getEventKey`, `getSpamKey` and `EventAggregatorByReasonFunc`.

use k8s_openapi::api::core::v1::Event;

/// Appends the parts of an event's identity to one key string.
fn join(parts: &[Option<&str>]) -> String {
    let len = parts.iter().map(|p| p.map_or(0, str::len)).sum();
    let mut key = String::with_capacity(len);
    for part in parts.iter().flatten() {
        key.push_str(part);
    }
    key
}

/// The full identity of an event: source, involved object (with field path), type, reason and
/// message (client-go's `getEventKey`).
pub fn event_key(event: &Event) -> String {
    let source = event.source.as_ref();
    let obj = &event.involved_object;
    join(&[
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
    ])
}

/// The spam-filter key: source and involved object (client-go's `getSpamKey`).
pub fn spam_key(event: &Event) -> String {
    let source = event.source.as_ref();
    let obj = &event.involved_object;
    join(&[
        source.and_then(|s| s.component.as_deref()),
        source.and_then(|s| s.host.as_deref()),
        obj.kind.as_deref(),
        obj.namespace.as_deref(),
        obj.name.as_deref(),
        obj.uid.as_deref(),
        obj.api_version.as_deref(),
    ])
}

/// The aggregation group (source, object, type, reason, reporter) and the member's local key
/// (its message), as client-go's `EventAggregatorByReasonFunc`.
pub fn aggregate_key(event: &Event) -> (String, String) {
    let source = event.source.as_ref();
    let obj = &event.involved_object;
    let group = join(&[
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
    ]);
    (group, event.message.clone().unwrap_or_default())
}
