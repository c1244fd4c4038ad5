//! Events: core/v1 `events` and events.k8s.io/v1 `events`, one stored object in two versions.

use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event as EventsEvent;
use serde_json::{Map, Value};

use crate::registry::resource::{Conversion, ResourceDef, SelectableField};
use crate::resources::simple::CreateOnUpdate;
use crate::strategic_merge::kinds;
use crate::table::printers;

/// Field selectors of core/v1 events (upstream's `event.ToSelectableFields`).
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
    // Upstream's `ToSelectableFields`: `source.component`, else `reportingController`.
    SelectableField::string_or("source", "/source/component", "/reportingComponent"),
    SelectableField::string("type", "/type"),
];

/// Field selectors of events.k8s.io/v1 events (upstream's
/// `AddFieldLabelConversionsForEvent`): that version's names, read from an object in that
/// version (what a list or watch matches).
const EVENTS_V1_FIELDS: &[SelectableField] = &[
    SelectableField::string("regarding.kind", "/regarding/kind"),
    SelectableField::string("regarding.namespace", "/regarding/namespace"),
    SelectableField::string("regarding.name", "/regarding/name"),
    SelectableField::string("regarding.uid", "/regarding/uid"),
    SelectableField::string("regarding.apiVersion", "/regarding/apiVersion"),
    SelectableField::string("regarding.resourceVersion", "/regarding/resourceVersion"),
    SelectableField::string("regarding.fieldPath", "/regarding/fieldPath"),
    SelectableField::string("reason", "/reason"),
    SelectableField::string("reportingController", "/reportingController"),
    SelectableField::string("type", "/type"),
];

/// core/v1 events: the stored form.
pub static CORE_EVENTS: ResourceDef = ResourceDef::of::<CoreEvent>()
    .short_names(&["ev"])
    .fields(EVENT_FIELDS)
    .strategy(&CreateOnUpdate)
    .printer(printers::EVENT)
    .merge_schema(&kinds::METADATA_ONLY);

/// events.k8s.io/v1 events, stored as core/v1 events.
pub static EVENTS_V1: ResourceDef = ResourceDef::of::<EventsEvent>()
    .short_names(&["ev"])
    .fields(EVENTS_V1_FIELDS)
    .strategy(&CreateOnUpdate)
    .stored_as("core", "events", TO_CORE)
    .printer(printers::EVENT)
    .merge_schema(&kinds::METADATA_ONLY);

/// events.k8s.io/v1 to and from the stored core/v1 form.
const TO_CORE: Conversion = Conversion {
    to_storage: |obj| convert(obj, true),
    from_storage: |obj| convert(obj, false),
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
        let core = EVENTS_V1.to_storage(v1.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hello");
        assert_eq!(core["count"], 3);
        assert_eq!(core["reportingComponent"], "kubelet");
        let back = EVENTS_V1.from_storage(core);
        assert_eq!(back, v1);
        assert_eq!(
            CORE_EVENTS.to_storage(v1.clone()),
            v1,
            "core/v1 is the stored form"
        );
        assert_eq!(CORE_EVENTS.storage_root(), EVENTS_V1.storage_root());
    }

    #[test]
    fn the_source_field_falls_back_to_the_reporting_controller() {
        let source = CORE_EVENTS.field("source").expect("source is selectable");
        let event = |v: serde_json::Value| source.value(&v);
        assert_eq!(
            event(json!({"source": {"component": "kubelet"}, "reportingComponent": "x"})),
            "kubelet"
        );
        // An events.k8s.io/v1 writer sets only reportingController (the e2e Events test's
        // `source=` list finds its event so).
        assert_eq!(
            event(json!({"source": {}, "reportingComponent": "test-controller"})),
            "test-controller"
        );
        assert_eq!(
            event(json!({"source": {"component": ""}, "reportingComponent": "c"})),
            "c"
        );
        assert_eq!(event(json!({})), "");
    }

    #[test]
    fn events_v1_selects_by_its_own_field_names() {
        let stored = EVENTS_V1.from_storage(json!({"involvedObject": {"name": "p", "kind": "Pod"},
            "reportingComponent": "test-controller", "type": "Normal", "reason": "Tested"}));
        for (field, want) in [
            ("reportingController", "test-controller"),
            ("regarding.name", "p"),
            ("regarding.kind", "Pod"),
            ("type", "Normal"),
            ("reason", "Tested"),
        ] {
            let f = EVENTS_V1.field(field).expect(field);
            assert_eq!(f.value(&stored), want, "{field}");
        }
        assert!(EVENTS_V1.field("involvedObject.name").is_none());
        assert!(CORE_EVENTS.field("reportingController").is_none());
    }
}
