//! Server-side apply of a configuration to a live object: ownership, conflicts, merge, and removal of fields the applier stopped applying.

use serde_json::Value;

use crate::error::ApiError;
use crate::fieldmanager::fieldset::{FieldSet, PathDisplay};
use crate::fieldmanager::managed::{self, APPLY, ManagedEntry, UPDATE, Writer};
use crate::fieldmanager::walk::{self, EntryKind, Scope};
use crate::pointer::At;
use crate::strategic_merge::TypeDef;

/// The manager upstream credits with the fields of an object that had no `managedFields`
/// when it was first applied to.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// One field the apply would change that another manager owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager, as conflict messages name it.
    pub manager: String,
    /// The field, e.g. `.spec.replicas`.
    pub path: String,
}

/// Why an apply failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The configuration does not fit the kind (e.g. duplicate list keys).
    #[error("{0}")]
    Invalid(String),
    /// Fields owned by other managers would change (and `force` was not set).
    #[error("apply conflicts")]
    Conflicts(Vec<Conflict>),
}

impl ApplyError {
    /// The API error upstream answers with: 409 with one cause per conflict, or 500 for a
    /// configuration that cannot be typed (`failed to create typed patch object`).
    pub fn into_api_error(self, object: &str, gvk: &str) -> ApiError {
        match self {
            ApplyError::Invalid(why) => ApiError {
                code: 500,
                reason: "",
                message: format!("failed to create typed patch object ({object}; {gvk}): {why}"),
                details: None,
                continue_token: None,
            },
            ApplyError::Conflicts(conflicts) => conflict_error(&conflicts),
        }
    }
}

/// Upstream's `NewApplyConflict` message and causes.
fn conflict_error(conflicts: &[Conflict]) -> ApiError {
    let message = if let [one] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            one.manager, one.path
        )
    } else {
        let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
        managers.sort_unstable();
        managers.dedup();
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {m}:"));
            for c in conflicts.iter().filter(|c| c.manager == m) {
                lines.push(format!("- {}", c.path));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let mut error = ApiError {
        code: 409,
        reason: "Conflict",
        message,
        details: None,
        continue_token: None,
    };
    for c in conflicts {
        error = error.with_cause(
            "FieldManagerConflict",
            format!("conflict with {}", c.manager),
            &c.path,
        );
    }
    error
}

/// Applies `config` for `writer` to `live` (`None` when the object does not exist yet) and
/// returns the object to store, with `managedFields` updated:
///
/// - the applier's `Apply` entry becomes exactly the fields `config` sets;
/// - a field the applier sets to a value other than the live one, owned by another manager,
///   is a conflict, unless `force`, which takes the field from that manager;
/// - fields the applier set before and no longer sets are removed from the object, unless
///   another manager owns them too;
/// - everything else is merged in (objects by field, associative lists by key, sets by
///   member; other lists and scalars replaced).
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    root: &'static TypeDef,
    scope: Scope,
    writer: Writer<'_>,
    force: bool,
) -> Result<Value, ApplyError> {
    let applied =
        walk::entries(config, root, scope, true).map_err(|e| ApplyError::Invalid(e.to_string()))?;
    let new_set = walk::set_of(&applied);
    let own = |e: &ManagedEntry| e.is(writer.manager, APPLY, writer.subresource);
    let Some(live) = live else {
        let mut obj = config.clone();
        managed::encode_into(&mut obj, &[apply_entry(writer, new_set)]);
        return Ok(obj);
    };
    let mut entries = match managed::decode(live) {
        Some(entries) => entries,
        None => {
            // Upstream credits an untracked object's fields to one made-up manager, so the
            // first apply conflicts where it would change them.
            let fields = walk::entries(live, root, scope, false)
                .map(|e| walk::set_of(&e))
                .unwrap_or_default();
            vec![ManagedEntry {
                manager: BEFORE_FIRST_APPLY.to_owned(),
                operation: UPDATE.to_owned(),
                api_version: writer.api_version.to_owned(),
                subresource: writer.subresource.to_owned(),
                time: None,
                fields,
            }]
        }
    };

    let mut conflicts = Vec::new();
    let mut taken = FieldSet::new();
    for e in applied.iter().filter(|e| e.kind == EntryKind::Leaf) {
        match walk::get(live, &e.path) {
            Some(current) if current != e.value => {}
            _ => continue,
        }
        for other in entries
            .iter()
            .filter(|o| !own(o) && o.fields.contains(&e.path))
        {
            conflicts.push(Conflict {
                manager: other.describe(),
                path: PathDisplay(&e.path).to_string(),
            });
        }
        taken.insert(&e.path);
    }
    if !conflicts.is_empty() && !force {
        // Upgrading from client-side apply: kubectl's fields that still hold the values of
        // its last-applied configuration may be taken over (upstream's lastAppliedManager).
        let allowed = client_side_applied(live, root, scope, writer.manager);
        conflicts.retain(|c| !allowed.contains(&c.path));
        if !conflicts.is_empty() {
            return Err(ApplyError::Conflicts(conflicts));
        }
    }
    for entry in entries.iter_mut().filter(|e| !own(e)) {
        entry.fields = entry.fields.difference(&taken);
    }

    let mut merged = walk::merge(live, config, root);
    let previous = entries
        .iter()
        .find(|e| own(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut others = FieldSet::new();
    for entry in entries.iter().filter(|e| !own(e)) {
        others.union(&entry.fields);
    }
    // Shortest paths first: a dropped list item goes before its fields (which are then
    // gone), while its key fields still identify it.
    let mut dropped = previous.difference(&new_set).difference(&others).paths();
    dropped.sort_by_key(Vec::len);
    for path in dropped {
        walk::remove(&mut merged, &path);
    }

    match entries.iter_mut().find(|e| own(e)) {
        Some(entry) => {
            entry.fields = new_set;
            entry.api_version = writer.api_version.to_owned();
            entry.time = Some(writer.now.to_owned());
        }
        None => entries.push(apply_entry(writer, new_set)),
    }
    managed::encode_into(&mut merged, &entries);
    sync_last_applied(&mut merged, config, writer.manager);
    Ok(merged)
}

/// The manager whose applies keep client-side apply's annotation in step, as upstream.
const KUBECTL: &str = "kubectl";

/// `kubectl apply`'s record of the configuration it last applied client-side.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The fields (as conflict paths) of `live`'s last-applied configuration whose values are
/// still the live ones, when `manager` is kubectl; empty otherwise.
fn client_side_applied(
    live: &Value,
    root: &'static TypeDef,
    scope: Scope,
    manager: &str,
) -> Vec<String> {
    if manager != KUBECTL {
        return Vec::new();
    }
    let Some(last) = live
        .at("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str::<Value>(s).ok())
    else {
        return Vec::new();
    };
    let Ok(entries) = walk::entries(&last, root, scope, false) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter(|e| e.kind == EntryKind::Leaf && walk::get(live, &e.path) == Some(e.value))
        .map(|e| PathDisplay(&e.path).to_string())
        .collect()
}

/// After an apply by kubectl, an object that carries client-side apply's annotation gets it
/// rewritten to the new configuration (upstream's lastAppliedUpdater), so a later
/// client-side `kubectl apply` diffs against what was last applied.
fn sync_last_applied(merged: &mut Value, config: &Value, manager: &str) {
    let has_annotation = merged
        .at("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .is_some();
    if manager != KUBECTL || !has_annotation {
        return;
    }
    let mut recorded = config.clone();
    if let Some(annotations) = recorded
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED);
    }
    let mut text = serde_json::to_string(&recorded).unwrap_or_default();
    text.push('\n');
    if let Some(annotations) = merged
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.insert(LAST_APPLIED.to_owned(), Value::String(text));
    }
}

fn apply_entry(writer: Writer<'_>, fields: FieldSet) -> ManagedEntry {
    ManagedEntry {
        manager: writer.manager.to_owned(),
        operation: APPLY.to_owned(),
        api_version: writer.api_version.to_owned(),
        subresource: writer.subresource.to_owned(),
        time: Some(writer.now.to_owned()),
        fields,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn root() -> &'static TypeDef {
        &crate::strategic_merge::kinds::DEPLOYMENT
    }

    const MAIN: Scope = Scope::Main {
        status_subresource: true,
    };

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            api_version: "apps/v1",
            subresource: "",
            now: "2025-01-01T00:00:00Z",
        }
    }

    fn config(replicas: i64, labels: Value, containers: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": labels},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": containers}}}})
    }

    #[test]
    fn first_apply_owns_what_it_sets() {
        let cfg = config(2, json!({"a": "1"}), json!([{"name": "c", "image": "i"}]));
        let obj = apply(None, &cfg, root(), MAIN, writer("kubectl"), false).expect("applies");
        let entries = managed::decode(&obj).expect("managed");
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].operation, "Apply");
        assert_eq!(
            entries[0].fields.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:replicas": {},
                "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
        );
    }

    #[test]
    fn reapply_removes_what_the_applier_dropped_and_keeps_what_others_own() {
        let first = config(
            2,
            json!({"a": "1", "b": "2"}),
            json!([{"name": "c", "image": "i"}, {"name": "d", "image": "j"}]),
        );
        let live = apply(None, &first, root(), MAIN, writer("kubectl"), false).expect("first");
        // Another manager takes label b.
        let mut shared = live.clone();
        shared["metadata"]["labels"]["b"] = json!("3");
        managed::record_update(&live, &mut shared, root(), MAIN, writer("editor"));
        let second = config(2, json!({"a": "1"}), json!([{"name": "c", "image": "i2"}]));
        let out = apply(
            Some(&shared),
            &second,
            root(),
            MAIN,
            writer("kubectl"),
            false,
        )
        .expect("second");
        assert_eq!(out["metadata"]["labels"], json!({"a": "1", "b": "3"}));
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name": "c", "image": "i2"}])
        );
    }

    #[test]
    fn changing_a_field_another_manager_owns_conflicts_unless_forced() {
        let live = apply(
            None,
            &config(2, json!({}), json!([])),
            root(),
            MAIN,
            writer("kubectl"),
            false,
        )
        .expect("first");
        let other = config(5, json!({}), json!([]));
        let err =
            apply(Some(&live), &other, root(), MAIN, writer("ci"), false).expect_err("conflict");
        let ApplyError::Conflicts(conflicts) = err else {
            panic!("not a conflict: {err:?}");
        };
        assert_eq!(
            conflicts,
            [Conflict {
                manager: r#""kubectl""#.to_owned(),
                path: ".spec.replicas".to_owned()
            }]
        );
        let api = ApplyError::Conflicts(conflicts)
            .into_api_error("default/web", "apps/v1, Kind=Deployment");
        assert_eq!(api.code, 409);
        assert_eq!(
            api.message,
            r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#
        );
        // The same value is shared ownership, not a conflict.
        let same = config(2, json!({}), json!([]));
        apply(Some(&live), &same, root(), MAIN, writer("ci"), false).expect("shared");
        // Forced: the field moves to the new applier.
        let forced = apply(Some(&live), &other, root(), MAIN, writer("ci"), true).expect("forced");
        assert_eq!(forced["spec"]["replicas"], 5);
        let entries = managed::decode(&forced).expect("managed");
        let kubectl = entries.iter().find(|e| e.manager == "kubectl");
        assert!(kubectl.is_none_or(|e| !e.fields.contains(&[
            crate::fieldmanager::fieldset::PathElement::Field("spec".to_owned()),
            crate::fieldmanager::fieldset::PathElement::Field("replicas".to_owned())
        ])));
    }

    #[test]
    fn kubectl_takes_over_from_client_side_apply_without_conflicts() {
        let last = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":1}}"#;
        let live = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "annotations": {LAST_APPLIED: format!("{last}\n")}},
            "spec": {"replicas": 1, "paused": true}});
        let cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"replicas": 3, "paused": false}});
        // replicas was client-side applied and is unchanged: kubectl takes it over; paused
        // was set by someone else: still a conflict.
        let err = apply(Some(&live), &cfg, root(), MAIN, writer("kubectl"), false)
            .expect_err("paused conflicts");
        let ApplyError::Conflicts(c) = err else {
            panic!("not a conflict");
        };
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].path, ".spec.paused");
        let cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"replicas": 3}});
        let out =
            apply(Some(&live), &cfg, root(), MAIN, writer("kubectl"), false).expect("upgraded");
        assert_eq!(out["spec"]["replicas"], 3);
        assert_eq!(
            out["metadata"]["annotations"][LAST_APPLIED],
            "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\"},\"spec\":{\"replicas\":3}}\n"
        );
        // Another manager name gets no such pass.
        apply(Some(&live), &cfg, root(), MAIN, writer("ci"), false).expect_err("conflict");
    }

    #[test]
    fn untracked_objects_belong_to_before_first_apply() {
        let live = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"replicas": 1, "paused": true}});
        let err = apply(
            Some(&live),
            &config(3, json!({}), json!([])),
            root(),
            MAIN,
            writer("kubectl"),
            false,
        )
        .expect_err("conflict");
        let ApplyError::Conflicts(c) = err else {
            panic!("not a conflict");
        };
        assert_eq!(c[0].manager, r#""before-first-apply" using apps/v1"#);
        let invalid = apply(
            None,
            &config(1, json!({}), json!([{"name": "a"}, {"name": "a"}])),
            root(),
            MAIN,
            writer("kubectl"),
            false,
        )
        .expect_err("duplicate key");
        assert!(matches!(invalid, ApplyError::Invalid(_)));
    }
}
