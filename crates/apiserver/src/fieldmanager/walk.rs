//! The field paths an object sets, walked with the kind's list semantics, and edits by path (find, remove, merge).
//!
//! List semantics come from the strategic-merge table ([`crate::strategic_merge::Schema`]):
//! a list merged on a key is an associative list (`k:` items), a merged list without a key is
//! a set (`v:` members), and every other list is atomic (one leaf). Objects are granular.
//! Upstream takes the same facts from the OpenAPI `x-kubernetes-list-type`/`-map-keys`
//! markers; the two agree for the built-in kinds except for a few multi-field keys
//! (container ports are keyed by `containerPort` alone here, by `containerPort` and
//! `protocol` upstream).

use serde_json::{Map, Value};

use crate::fieldmanager::fieldset::{FieldSet, Path, PathElement};
use crate::strategic_merge::{FieldMeta, Strategy, TypeDef};

/// Which part of an object a field set covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The main resource: `status` is left out when the kind has a status subresource.
    Main {
        /// Whether `status` belongs to the `/status` subresource.
        status_subresource: bool,
    },
    /// The `/status` subresource: only `status`.
    Status,
}

/// Metadata fields the server owns, never tracked (upstream's `stripSet`).
const SERVER_METADATA: [&str; 10] = [
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "generation",
    "managedFields",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// What a path of an object leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A value owned as a whole: a scalar, an empty object, an atomic list, a set member.
    Leaf,
    /// An item of an associative list (its fields are entries of their own).
    Item,
}

/// One path an object sets and the value there.
#[derive(Clone, Debug)]
pub struct Entry<'a> {
    /// The path.
    pub path: Path,
    /// What the path leads to.
    pub kind: EntryKind,
    /// The value at the path.
    pub value: &'a Value,
}

/// A list of the object that cannot be walked as its type says.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct WalkError {
    /// Where, as structured-merge-diff prints paths.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// The paths `obj` sets within `scope`. With `strict`, an associative list with a missing or
/// duplicate key is an error (an apply configuration must be well formed); otherwise such a
/// list is treated as atomic (a live object written by other means).
pub fn entries<'a>(
    obj: &'a Value,
    root: &'static TypeDef,
    scope: Scope,
    strict: bool,
) -> Result<Vec<Entry<'a>>, WalkError> {
    let mut out = Vec::new();
    let Some(map) = obj.as_object() else {
        return Ok(out);
    };
    let mut path = Vec::new();
    for (k, v) in map {
        let keep = match (k.as_str(), scope) {
            ("apiVersion" | "kind", _) => false,
            ("status", Scope::Status) => true,
            (_, Scope::Status) => false,
            ("status", Scope::Main { status_subresource }) => !status_subresource,
            _ => true,
        };
        if !keep || v.is_null() {
            continue;
        }
        path.push(PathElement::Field(k.clone()));
        if k == "metadata"
            && let Some(meta) = v.as_object()
        {
            let meta_ty = root.field("metadata").ty;
            for (mk, mv) in meta {
                if SERVER_METADATA.contains(&mk.as_str()) || mv.is_null() {
                    continue;
                }
                path.push(PathElement::Field(mk.clone()));
                field(mv, meta_ty.field(mk), &mut path, &mut out, strict)?;
                path.pop();
            }
        } else {
            field(v, root.field(k), &mut path, &mut out, strict)?;
        }
        path.pop();
    }
    Ok(out)
}

/// The set of the paths of `entries`.
pub fn set_of(entries: &[Entry<'_>]) -> FieldSet {
    let mut set = FieldSet::new();
    for e in entries {
        set.insert(&e.path);
    }
    set
}

fn leaf<'a>(v: &'a Value, path: &Path, out: &mut Vec<Entry<'a>>) {
    out.push(Entry {
        path: path.clone(),
        kind: EntryKind::Leaf,
        value: v,
    });
}

fn object<'a>(
    v: &'a Value,
    ty: &'static TypeDef,
    path: &mut Path,
    out: &mut Vec<Entry<'a>>,
    strict: bool,
) -> Result<(), WalkError> {
    if let Some(map) = v.as_object() {
        for (k, child) in map {
            if child.is_null() {
                continue;
            }
            path.push(PathElement::Field(k.clone()));
            field(child, ty.field(k), path, out, strict)?;
            path.pop();
        }
    }
    Ok(())
}

/// Whether a list is associative (merged on a key), and on which key.
fn list_key(meta: &FieldMeta) -> Option<&'static str> {
    (meta.strategy == Strategy::Merge && !meta.merge_key.is_empty()).then_some(meta.merge_key)
}

/// Whether a list is a set of scalars.
fn is_set(meta: &FieldMeta) -> bool {
    meta.strategy == Strategy::Merge && meta.merge_key.is_empty()
}

fn field<'a>(
    v: &'a Value,
    meta: FieldMeta,
    path: &mut Path,
    out: &mut Vec<Entry<'a>>,
    strict: bool,
) -> Result<(), WalkError> {
    match v {
        Value::Object(map) if !map.is_empty() && meta.strategy != Strategy::Replace => {
            object(v, meta.ty, path, out, strict)
        }
        Value::Array(items) if !items.is_empty() => {
            if let Some(key) = list_key(&meta) {
                match item_keys(items, key) {
                    Ok(keys) => {
                        for (item, element) in items.iter().zip(keys) {
                            path.push(element);
                            out.push(Entry {
                                path: path.clone(),
                                kind: EntryKind::Item,
                                value: item,
                            });
                            object(item, meta.ty, path, out, strict)?;
                            path.pop();
                        }
                        Ok(())
                    }
                    Err(message) if strict => Err(WalkError {
                        path: crate::fieldmanager::fieldset::PathDisplay(path).to_string(),
                        message,
                    }),
                    Err(_) => {
                        leaf(v, path, out);
                        Ok(())
                    }
                }
            } else if is_set(&meta) && items.iter().all(|i| !i.is_object() && !i.is_array()) {
                let mut seen = FieldSet::new();
                for item in items {
                    path.push(PathElement::value_of(item));
                    if seen.contains(&path[path.len() - 1..]) && strict {
                        return Err(WalkError {
                            path: crate::fieldmanager::fieldset::PathDisplay(path).to_string(),
                            message: "duplicate entries for value".to_owned(),
                        });
                    }
                    seen.insert(&path[path.len() - 1..]);
                    leaf(item, path, out);
                    path.pop();
                }
                Ok(())
            } else {
                leaf(v, path, out);
                Ok(())
            }
        }
        _ => {
            leaf(v, path, out);
            Ok(())
        }
    }
}

/// The key element of every item, or why the list cannot be keyed.
fn item_keys(items: &[Value], key: &str) -> Result<Vec<PathElement>, String> {
    let mut keys: Vec<PathElement> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let element = PathElement::key_of(item, &[key]).ok_or_else(|| {
            format!("element {i}: associative list with keys has an element that omits key field {key:?}")
        })?;
        if keys.contains(&element) {
            return Err(format!(
                "duplicate entries for key {}",
                crate::fieldmanager::fieldset::PathDisplay(std::slice::from_ref(&element))
            ));
        }
        keys.push(element);
    }
    Ok(keys)
}

/// Finds the index of the list item `element` (a key or set value) addresses.
fn find_item(items: &[Value], element: &PathElement) -> Option<usize> {
    match element {
        PathElement::Key(json) => {
            let wanted: Map<String, Value> = serde_json::from_str(json).ok()?;
            items
                .iter()
                .position(|item| wanted.iter().all(|(k, v)| item.get(k) == Some(v)))
        }
        PathElement::Value(json) => {
            let wanted: Value = serde_json::from_str(json).ok()?;
            items.iter().position(|item| *item == wanted)
        }
        PathElement::Index(i) => (*i < items.len()).then_some(*i),
        PathElement::Field(_) => None,
    }
}

/// The value at `path` in `obj`, if any.
pub fn get<'a>(obj: &'a Value, path: &[PathElement]) -> Option<&'a Value> {
    let mut cur = obj;
    for element in path {
        cur = match (element, cur) {
            (PathElement::Field(f), Value::Object(m)) => m.get(f)?,
            (_, Value::Array(items)) => &items[find_item(items, element)?],
            _ => return None,
        };
    }
    Some(cur)
}

/// Removes what `path` addresses from `obj` (a field, a list item); a missing path is a no-op.
pub fn remove(obj: &mut Value, path: &[PathElement]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for element in parents {
        cur = match (element, cur) {
            (PathElement::Field(f), Value::Object(m)) => match m.get_mut(f) {
                Some(v) => v,
                None => return,
            },
            (_, Value::Array(items)) => match find_item(items, element) {
                Some(i) => &mut items[i],
                None => return,
            },
            _ => return,
        };
    }
    match (last, cur) {
        (PathElement::Field(f), Value::Object(m)) => {
            m.remove(f);
        }
        (_, Value::Array(items)) => {
            if let Some(i) = find_item(items, last) {
                items.remove(i);
            }
        }
        _ => {}
    }
}

/// Merges an apply configuration into a live object: objects field by field, associative
/// lists item by item (new items appended), sets by union, everything else replaced.
pub fn merge(live: &Value, config: &Value, ty: &'static TypeDef) -> Value {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) => {
            let mut out = l.clone();
            for (k, cv) in c {
                if cv.is_null() {
                    continue;
                }
                let merged = match l.get(k) {
                    Some(lv) => merge_field(lv, cv, ty.field(k)),
                    None => cv.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        _ => config.clone(),
    }
}

/// The paths of `config` that [`merge`] replaces whole rather than merging into (atomic
/// lists, replaced maps), as structured-merge-diff prints them (`.spec.args`, `[0]`): what
/// a mutating policy's apply configuration may not set (upstream's `findAtomics`), since
/// it would drop the fields it does not repeat.
pub fn atomic_paths(config: &Value, ty: &'static TypeDef) -> Vec<String> {
    let mut out = Vec::new();
    atomics_in(config, ty, &mut String::new(), &mut out);
    out
}

fn atomics_in(config: &Value, ty: &'static TypeDef, path: &mut String, out: &mut Vec<String>) {
    let Value::Object(fields) = config else {
        return;
    };
    for (k, v) in fields {
        let meta = ty.field(k);
        let len = path.len();
        path.push('.');
        path.push_str(k);
        match v {
            Value::Object(_) if meta.strategy == Strategy::Replace => out.push(path.clone()),
            Value::Object(_) => atomics_in(v, meta.ty, path, out),
            Value::Array(items) => {
                if list_key(&meta).is_none() && !is_set(&meta) {
                    out.push(path.clone());
                }
                for (i, item) in items.iter().enumerate() {
                    let item_len = path.len();
                    path.push_str(&format!("[{i}]"));
                    atomics_in(item, meta.ty, path, out);
                    path.truncate(item_len);
                }
            }
            _ => {}
        }
        path.truncate(len);
    }
}

fn merge_field(live: &Value, config: &Value, meta: FieldMeta) -> Value {
    match (live, config) {
        (Value::Object(_), Value::Object(_)) if meta.strategy != Strategy::Replace => {
            merge(live, config, meta.ty)
        }
        (Value::Array(l), Value::Array(c)) => {
            if let Some(key) = list_key(&meta)
                && item_keys(l, key).is_ok()
                && let Ok(config_keys) = item_keys(c, key)
            {
                let mut out = l.clone();
                for (item, element) in c.iter().zip(config_keys) {
                    match find_item(&out, &element) {
                        Some(i) => out[i] = merge(&out[i], item, meta.ty),
                        None => out.push(item.clone()),
                    }
                }
                Value::Array(out)
            } else if is_set(&meta) {
                let mut out = l.clone();
                for v in c {
                    if !out.contains(v) {
                        out.push(v.clone());
                    }
                }
                Value::Array(out)
            } else {
                config.clone()
            }
        }
        _ => config.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::fieldmanager::fieldset::PathDisplay;

    fn deployment_root() -> &'static TypeDef {
        &crate::strategic_merge::kinds::DEPLOYMENT
    }

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "u", "labels": {"app": "web"},
                "finalizers": ["a", "b"]},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1", "args": ["x", "y"]}]}}},
            "status": {"replicas": 2},
        })
    }

    #[test]
    fn atomic_paths_are_the_lists_merge_replaces() {
        let config = json!({"metadata": {"finalizers": ["x"], "labels": {"a": "b"}},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "c", "args": ["a"], "ports": [{"containerPort": 80}]}]}}}});
        assert_eq!(
            atomic_paths(&config, deployment_root()),
            [".spec.template.spec.containers[0].args"]
        );
    }

    #[test]
    fn entries_follow_list_semantics_and_skip_server_fields() {
        let obj = deployment();
        let got = entries(
            &obj,
            deployment_root(),
            Scope::Main {
                status_subresource: true,
            },
            true,
        )
        .expect("walks");
        let rendered: Vec<String> = got
            .iter()
            .map(|e| format!("{:?} {}", e.kind, PathDisplay(&e.path)))
            .collect();
        assert_eq!(
            rendered,
            [
                r#"Leaf .metadata.finalizers[="a"]"#,
                r#"Leaf .metadata.finalizers[="b"]"#,
                "Leaf .metadata.labels.app",
                "Leaf .spec.replicas",
                "Leaf .spec.selector.matchLabels.app",
                "Leaf .spec.template.metadata.labels.app",
                r#"Item .spec.template.spec.containers[name="nginx"]"#,
                r#"Leaf .spec.template.spec.containers[name="nginx"].args"#,
                r#"Leaf .spec.template.spec.containers[name="nginx"].image"#,
                r#"Leaf .spec.template.spec.containers[name="nginx"].name"#,
            ]
        );
        let status = entries(&obj, deployment_root(), Scope::Status, true).expect("walks");
        assert_eq!(status.len(), 1);
    }

    #[test]
    fn duplicate_keys_fail_strict_walks_and_are_atomic_otherwise() {
        let obj =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}}});
        let err = entries(
            &obj,
            deployment_root(),
            Scope::Main {
                status_subresource: true,
            },
            true,
        )
        .expect_err("duplicate");
        assert_eq!(err.path, ".spec.template.spec.containers");
        assert!(err.message.starts_with("duplicate entries for key"));
        let lenient = entries(
            &obj,
            deployment_root(),
            Scope::Main {
                status_subresource: true,
            },
            false,
        )
        .expect("lenient");
        assert_eq!(lenient.len(), 1);
    }

    #[test]
    fn get_remove_and_merge_by_path() {
        let mut obj = deployment();
        let item = PathElement::Key(r#"{"name":"nginx"}"#.to_owned());
        let containers = [
            PathElement::Field("spec".to_owned()),
            PathElement::Field("template".to_owned()),
            PathElement::Field("spec".to_owned()),
            PathElement::Field("containers".to_owned()),
        ];
        let image: Vec<PathElement> = containers
            .iter()
            .cloned()
            .chain([item.clone(), PathElement::Field("image".to_owned())])
            .collect();
        assert_eq!(get(&obj, &image), Some(&json!("nginx:1")));
        remove(&mut obj, &image);
        assert_eq!(get(&obj, &image), None);
        let finalizer = [
            PathElement::Field("metadata".to_owned()),
            PathElement::Field("finalizers".to_owned()),
            PathElement::value_of(&json!("a")),
        ];
        remove(&mut obj, &finalizer);
        assert_eq!(obj["metadata"]["finalizers"], json!(["b"]));

        let live = deployment();
        let config = json!({"metadata": {"finalizers": ["c"]}, "spec": {"replicas": 3,
            "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:2", "args": ["z"]},
                {"name": "sidecar", "image": "s"}]}}}});
        let merged = merge(&live, &config, deployment_root());
        assert_eq!(merged["metadata"]["finalizers"], json!(["a", "b", "c"]));
        assert_eq!(merged["spec"]["replicas"], 3);
        assert_eq!(merged["status"]["replicas"], 2);
        assert_eq!(
            merged["spec"]["template"]["spec"]["containers"],
            json!([{"name": "nginx", "image": "nginx:2", "args": ["z"]}, {"name": "sidecar", "image": "s"}])
        );
    }
}
