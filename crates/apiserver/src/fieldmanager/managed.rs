//! `metadata.managedFields`: decoding and encoding the entries, and recording an `Update` (who changed which fields) on objects that carry them.

use serde_json::{Value, json};

use crate::fieldmanager::fieldset::FieldSet;
use crate::fieldmanager::walk::{self, EntryKind, Scope};
use crate::pointer::At;
use crate::strategic_merge::TypeDef;

/// `operation: Apply`.
pub const APPLY: &str = "Apply";
/// `operation: Update`.
pub const UPDATE: &str = "Update";

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedEntry {
    /// `manager`.
    pub manager: String,
    /// `operation`: `Apply` or `Update`.
    pub operation: String,
    /// `apiVersion` the fields were written with.
    pub api_version: String,
    /// `subresource` (`status`), empty for the main resource.
    pub subresource: String,
    /// `time` of the last change to this entry's set.
    pub time: Option<String>,
    /// `fieldsV1`.
    pub fields: FieldSet,
}

impl ManagedEntry {
    /// Whether this entry is the one of `manager` with `operation` on `subresource`
    /// (upstream's manager identity, without the API version).
    pub fn is(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }

    /// How conflict messages name the manager: `"kubectl"` for an applier,
    /// `"kubectl-edit" using apps/v1` for an updater.
    pub fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == UPDATE {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.fields.to_fields_v1(),
        });
        if let Some(t) = &self.time {
            v["time"] = json!(t);
        }
        if !self.subresource.is_empty() {
            v["subresource"] = json!(self.subresource);
        }
        v
    }

    fn from_json(v: &Value) -> Result<Self, String> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let fields = match v.get("fieldsV1") {
            Some(f) => FieldSet::from_fields_v1(f)?,
            None => FieldSet::new(),
        };
        Ok(Self {
            manager: s("manager"),
            operation: s("operation"),
            api_version: s("apiVersion"),
            subresource: s("subresource"),
            time: v.get("time").and_then(Value::as_str).map(str::to_owned),
            fields,
        })
    }
}

/// The object's `managedFields` entries; `None` when it has none (or they do not parse, as
/// upstream then starts over).
pub fn decode(obj: &Value) -> Option<Vec<ManagedEntry>> {
    let list = obj.at("/metadata/managedFields")?.as_array()?;
    if list.is_empty() {
        return None;
    }
    list.iter()
        .map(ManagedEntry::from_json)
        .collect::<Result<Vec<_>, _>>()
        .ok()
}

/// Sets the object's `managedFields` (entries with empty sets are dropped, as upstream).
pub fn encode_into(obj: &mut Value, entries: &[ManagedEntry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(ManagedEntry::to_json)
        .collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".to_owned(), Value::Array(list));
        }
    }
}

/// Who wrote and how: the identity an update or apply is recorded under.
#[derive(Clone, Copy, Debug)]
pub struct Writer<'a> {
    /// The field manager.
    pub manager: &'a str,
    /// The object's API version.
    pub api_version: &'a str,
    /// `status` for the status subresource, empty otherwise.
    pub subresource: &'a str,
    /// The time to record.
    pub now: &'a str,
}

/// Records an `Update` by `writer` from `old` to `new`, as upstream's field manager does:
/// the fields it added or changed become its own and leave every other manager, and fields
/// it removed leave everyone. Only objects that already carry `managedFields` are tracked
/// (see the module docs of [`crate::fieldmanager`]); a client that sent different
/// `managedFields` than stored gets its own.
pub fn record_update(
    old: &Value,
    new: &mut Value,
    root: &'static TypeDef,
    scope: Scope,
    writer: Writer<'_>,
) {
    let Some(mut entries) = decode(old) else {
        return;
    };
    let sent = new.at("/metadata/managedFields");
    let sent_own = sent.is_some_and(|s| s.as_array().is_some_and(|a| !a.is_empty()))
        && sent != old.at("/metadata/managedFields");
    if sent_own {
        return;
    }
    let (Ok(before), Ok(after)) = (
        walk::entries(old, root, scope, false),
        walk::entries(new, root, scope, false),
    ) else {
        encode_into(new, &entries);
        return;
    };
    let mut changed = FieldSet::new();
    let mut removed = FieldSet::new();
    let before_set = walk::set_of(&before);
    let after_set = walk::set_of(&after);
    for e in &after {
        let differs = match e.kind {
            EntryKind::Item => !before_set.contains(&e.path),
            EntryKind::Leaf => walk::get(old, &e.path) != Some(e.value),
        };
        if differs {
            changed.insert(&e.path);
        }
    }
    for e in &before {
        if !after_set.contains(&e.path) {
            removed.insert(&e.path);
        }
    }
    if changed.is_empty() && removed.is_empty() {
        encode_into(new, &entries);
        return;
    }
    for entry in &mut entries {
        entry.fields = entry.fields.difference(&removed);
        if !entry.is(writer.manager, UPDATE, writer.subresource) {
            entry.fields = entry.fields.difference(&changed);
        }
    }
    match entries
        .iter_mut()
        .find(|e| e.is(writer.manager, UPDATE, writer.subresource))
    {
        Some(own) => {
            own.fields.union(&changed);
            own.api_version = writer.api_version.to_owned();
            own.time = Some(writer.now.to_owned());
        }
        None => entries.push(ManagedEntry {
            manager: writer.manager.to_owned(),
            operation: UPDATE.to_owned(),
            api_version: writer.api_version.to_owned(),
            subresource: writer.subresource.to_owned(),
            time: Some(writer.now.to_owned()),
            fields: changed,
        }),
    }
    encode_into(new, &entries);
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn update_moves_changed_fields_to_the_updater() {
        let old = json!({"metadata": {"name": "a", "managedFields": [{
            "manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}}}]},
            "spec": {"replicas": 1, "paused": false}});
        let mut new = json!({"metadata": {"name": "a"}, "spec": {"replicas": 5, "paused": false}});
        record_update(&old, &mut new, root(), MAIN, writer("kubectl-scale"));
        let entries = decode(&new).expect("entries");
        assert_eq!(entries.len(), 2);
        assert_eq!(
            entries[0].fields.to_fields_v1(),
            json!({"f:spec": {"f:paused": {}}})
        );
        assert_eq!(entries[1].manager, "kubectl-scale");
        assert_eq!(entries[1].operation, "Update");
        assert_eq!(
            entries[1].fields.to_fields_v1(),
            json!({"f:spec": {"f:replicas": {}}})
        );
        assert_eq!(entries[1].describe(), r#""kubectl-scale" using apps/v1"#);
        assert_eq!(entries[0].describe(), r#""kubectl""#);
    }

    #[test]
    fn removed_fields_leave_every_manager_and_untracked_objects_stay_untracked() {
        let old = json!({"metadata": {"managedFields": [{
            "manager": "m", "operation": "Apply", "apiVersion": "apps/v1",
            "fieldsV1": {"f:spec": {"f:paused": {}}}}]}, "spec": {"paused": true}});
        let mut new = json!({"metadata": {}});
        record_update(&old, &mut new, root(), MAIN, writer("x"));
        assert!(new.at("/metadata/managedFields").is_none());

        let untracked = json!({"metadata": {}, "spec": {"paused": true}});
        let mut new = json!({"metadata": {}, "spec": {"paused": false}});
        record_update(&untracked, &mut new, root(), MAIN, writer("x"));
        assert!(new.at("/metadata/managedFields").is_none());
    }
}
