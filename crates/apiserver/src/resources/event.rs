//! Events: core/v1 `events` and events.k8s.io/v1 `events`, one stored object in two versions.

use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event as EventsEvent;
use serde_json::{Map, Value};

use crate::registry::strategy::{ResourceInfo, SelectableField, Strategy, typed_roundtrip};

/// Field selectors of events (upstream's `event.ToSelectableFields`), on the stored core form.
const EVENT_FIELDS: &[SelectableField] = &[
    SelectableField::string("involvedObject.kind", "/involvedObject/kind"),
    SelectableField::string("involvedObject.namespace", "/involvedObject/namespace"),
    SelectableField::string("involvedObject.name", "/involvedObject/name"),
    SelectableField::string("involvedObject.uid", "/involvedObject/uid"),
    SelectableField::string("involvedObject.apiVersion", "/involvedObject/apiVersion"),
    SelectableField::string(
        "involvedObject.resourceVersion",
        "/involvedObject/resourceVersion",
    ),
    SelectableField::string("involvedObject.fieldPath", "/involvedObject/fieldPath"),
    SelectableField::string("reason", "/reason"),
    SelectableField::string("reportingComponent", "/reportingComponent"),
    SelectableField::string("source", "/source/component"),
    SelectableField::string("type", "/type"),
];

/// core/v1 events.
pub static CORE: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Event",
    plural: "events",
    singular: "event",
    short_names: &["ev"],
    categories: &[],
    namespaced: true,
    subresources: &[],
    fields: EVENT_FIELDS,
    storage_resource: ("core", "events"),
};

/// events.k8s.io/v1 events, stored as core/v1 events.
pub static EVENTS_V1: ResourceInfo = ResourceInfo {
    group: "events.k8s.io",
    version: "v1",
    kind: "Event",
    plural: "events",
    singular: "event",
    short_names: &["ev"],
    categories: &[],
    namespaced: true,
    subresources: &[],
    fields: EVENT_FIELDS,
    storage_resource: ("core", "events"),
};

/// Field renames between core/v1 (left) and events.k8s.io/v1 (right).
const RENAMES: [(&str, &str); 8] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
    ("related", "related"),
];

/// Which version an [`EventStrategy`] serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventVersion {
    /// core/v1.
    Core,
    /// events.k8s.io/v1.
    EventsV1,
}

/// The event strategy for either version.
#[derive(Debug)]
pub struct EventStrategy(pub EventVersion);

impl Strategy for EventStrategy {
    fn info(&self) -> &'static ResourceInfo {
        match self.0 {
            EventVersion::Core => &CORE,
            EventVersion::EventsV1 => &EVENTS_V1,
        }
    }

    fn decode(&self, obj: Value) -> Result<Value, String> {
        match self.0 {
            EventVersion::Core => typed_roundtrip::<CoreEvent>(obj, "Event", |_| {}),
            EventVersion::EventsV1 => typed_roundtrip::<EventsEvent>(obj, "Event", |_| {}),
        }
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn convert_from_storage(&self, obj: Value) -> Value {
        match self.0 {
            EventVersion::Core => obj,
            EventVersion::EventsV1 => convert(obj, false),
        }
    }

    fn convert_to_storage(&self, obj: Value) -> Value {
        match self.0 {
            EventVersion::Core => obj,
            EventVersion::EventsV1 => convert(obj, true),
        }
    }
}

/// Converts between the two versions: `to_core` maps events.k8s.io/v1 to core/v1.
fn convert(obj: Value, to_core: bool) -> Value {
    let Value::Object(mut map) = obj else {
        return obj;
    };
    let mut out = Map::new();
    for (core, v1) in RENAMES {
        let (from, to) = if to_core { (v1, core) } else { (core, v1) };
        if let Some(v) = map.remove(from) {
            out.insert(to.to_owned(), v);
        }
    }
    out.extend(map);
    let api_version = if to_core { "v1" } else { "events.k8s.io/v1" };
    out.insert(
        "apiVersion".to_owned(),
        Value::String(api_version.to_owned()),
    );
    out.insert("kind".to_owned(), Value::String("Event".to_owned()));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn conversion_round_trips() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hello", "reason": "Started",
            "reportingController": "kubelet", "deprecatedCount": 3});
        let core = EventStrategy(EventVersion::EventsV1).convert_to_storage(v1.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hello");
        assert_eq!(core["count"], 3);
        assert_eq!(core["reportingComponent"], "kubelet");
        let back = EventStrategy(EventVersion::EventsV1).convert_from_storage(core);
        assert_eq!(back, v1);
    }
}
