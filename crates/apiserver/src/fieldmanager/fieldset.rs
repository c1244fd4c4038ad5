//! Sets of field paths (structured-merge-diff's `fieldpath.Set`) and their `FieldsV1` encoding in `managedFields`.
//!
//! A path is a list of elements: `f:<field>` for a field of an object, `k:<json>` for the
//! item of an associative list with those key fields, `v:<json>` for a member of a set list,
//! `i:<n>` for a list position. A set is a trie; a node that is itself in the set is marked
//! with `.` in `FieldsV1` when it also has children, and is `{}` when it has none.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// `f:name`: a field of an object (or a key of a map).
    Field(String),
    /// `k:{"name":"c"}`: the item of an associative list whose key fields have these values
    /// (compact JSON, keys sorted).
    Key(String),
    /// `v:"x"`: the member of a set list equal to this JSON value.
    Value(String),
    /// `i:0`: a list position (lists without keys that are not atomic).
    Index(usize),
}

impl PathElement {
    /// The `FieldsV1` key of this element.
    pub fn encode(&self) -> String {
        match self {
            PathElement::Field(f) => format!("f:{f}"),
            PathElement::Key(k) => format!("k:{k}"),
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `FieldsV1` key (`None` for `.` or anything malformed).
    pub fn decode(s: &str) -> Option<Self> {
        let (prefix, rest) = s.split_at_checked(2)?;
        match prefix {
            "f:" => Some(PathElement::Field(rest.to_owned())),
            "k:" => Some(PathElement::Key(canonical(rest)?)),
            "v:" => Some(PathElement::Value(canonical(rest)?)),
            "i:" => rest.parse().ok().map(PathElement::Index),
            _ => None,
        }
    }

    /// The key element of a list item: `{"name":"c"}` from the item's key fields.
    pub fn key_of(item: &Value, keys: &[&str]) -> Option<Self> {
        let mut map = Map::new();
        for k in keys {
            map.insert((*k).to_owned(), item.get(*k)?.clone());
        }
        serde_json::to_string(&Value::Object(map))
            .ok()
            .map(PathElement::Key)
    }

    /// The value element of a set member.
    pub fn value_of(v: &Value) -> Self {
        PathElement::Value(serde_json::to_string(v).unwrap_or_default())
    }
}

/// Re-encodes JSON text compactly with sorted keys, so equal values compare equal.
fn canonical(json: &str) -> Option<String> {
    let v: Value = serde_json::from_str(json).ok()?;
    serde_json::to_string(&v).ok()
}

/// A field path.
pub type Path = Vec<PathElement>;

/// Renders a path as structured-merge-diff does in conflict messages:
/// `.spec.containers[name="c"].image`, `.metadata.finalizers[="x"]`.
pub struct PathDisplay<'a>(pub &'a [PathElement]);

impl fmt::Display for PathDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for element in self.0 {
            match element {
                PathElement::Field(name) => write!(f, ".{name}")?,
                PathElement::Key(json) => {
                    let parsed: Map<String, Value> = serde_json::from_str(json).unwrap_or_default();
                    let parts: Vec<String> =
                        parsed.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    write!(f, "[{}]", parts.join(","))?;
                }
                PathElement::Value(json) => write!(f, "[={json}]")?,
                PathElement::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

/// A set of field paths, as a trie.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// Whether the path leading to this node is itself in the set.
    member: bool,
    /// Longer paths through this node.
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no path is in the set.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// Adds `path`.
    pub fn insert(&mut self, path: &[PathElement]) {
        let mut node = self;
        for element in path {
            node = node.children.entry(element.clone()).or_default();
        }
        node.member = true;
    }

    /// Whether `path` is in the set.
    pub fn contains(&self, path: &[PathElement]) -> bool {
        let mut node = self;
        for element in path {
            match node.children.get(element) {
                Some(child) => node = child,
                None => return false,
            }
        }
        node.member
    }

    /// Removes `path` (longer paths through it stay).
    pub fn remove(&mut self, path: &[PathElement]) {
        fn go(node: &mut FieldSet, path: &[PathElement]) {
            match path.split_first() {
                None => node.member = false,
                Some((first, rest)) => {
                    if let Some(child) = node.children.get_mut(first) {
                        go(child, rest);
                        if child.is_empty() {
                            node.children.remove(first);
                        }
                    }
                }
            }
        }
        go(self, path);
    }

    /// Adds every path of `other`.
    pub fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (k, v) in &other.children {
            self.children.entry(k.clone()).or_default().union(v);
        }
    }

    /// The paths of `self` that are not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            let child = match other.children.get(k) {
                Some(o) => v.difference(o),
                None => v.clone(),
            };
            if !child.is_empty() {
                out.children.insert(k.clone(), child);
            }
        }
        out
    }

    /// Every path in the set, in order.
    pub fn paths(&self) -> Vec<Path> {
        fn go(node: &FieldSet, prefix: &mut Path, out: &mut Vec<Path>) {
            if node.member {
                out.push(prefix.clone());
            }
            for (k, child) in &node.children {
                prefix.push(k.clone());
                go(child, prefix, out);
                prefix.pop();
            }
        }
        let mut out = Vec::new();
        go(self, &mut Vec::new(), &mut out);
        out
    }

    /// The `FieldsV1` JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".to_owned(), Value::Object(Map::new()));
        }
        for (k, child) in &self.children {
            if !child.is_empty() {
                map.insert(k.encode(), child.to_fields_v1());
            }
        }
        Value::Object(map)
    }

    /// Parses `FieldsV1` JSON (the root is never a member itself).
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, String> {
        fn go(v: &Value, depth: usize) -> Result<FieldSet, String> {
            if depth > 64 {
                return Err("FieldsV1 nests too deeply".to_owned());
            }
            let map = v
                .as_object()
                .ok_or_else(|| format!("FieldsV1 node is not an object: {v}"))?;
            let mut node = FieldSet {
                member: map.is_empty(),
                children: BTreeMap::new(),
            };
            for (k, child) in map {
                if k == "." {
                    node.member = true;
                    continue;
                }
                let element =
                    PathElement::decode(k).ok_or_else(|| format!("invalid FieldsV1 key {k:?}"))?;
                node.children.insert(element, go(child, depth + 1)?);
            }
            Ok(node)
        }
        let mut set = go(v, 0)?;
        set.member = false;
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn f(name: &str) -> PathElement {
        PathElement::Field(name.to_owned())
    }

    #[test]
    fn fields_v1_round_trip_matches_upstream_shape() {
        let fields = json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}
                }}}
            }
        });
        let set = FieldSet::from_fields_v1(&fields).expect("parses");
        assert!(set.contains(&[f("spec"), f("replicas")]));
        assert!(!set.contains(&[f("spec")]));
        let item = [
            f("spec"),
            f("template"),
            f("spec"),
            f("containers"),
            PathElement::Key(r#"{"name":"nginx"}"#.to_owned()),
        ];
        assert!(set.contains(&item));
        assert_eq!(set.to_fields_v1(), fields);
        assert_eq!(set.paths().len(), 5);
    }

    #[test]
    fn set_operations() {
        let mut a = FieldSet::new();
        a.insert(&[f("a")]);
        a.insert(&[f("b"), f("c")]);
        let mut b = FieldSet::new();
        b.insert(&[f("b"), f("c")]);
        b.insert(&[f("d")]);
        let diff = a.difference(&b);
        assert_eq!(diff.paths(), vec![vec![f("a")]]);
        let mut u = a.clone();
        u.union(&b);
        assert_eq!(u.paths().len(), 3);
        u.remove(&[f("b"), f("c")]);
        assert_eq!(u.to_fields_v1(), json!({"f:a": {}, "f:d": {}}));
        assert!(FieldSet::new().is_empty());
    }

    #[test]
    fn keys_are_canonical_and_paths_display_like_upstream() {
        let key = PathElement::decode(r#"k:{ "b": 1, "a": "x" }"#).expect("key");
        assert_eq!(key, PathElement::Key(r#"{"a":"x","b":1}"#.to_owned()));
        let item = json!({"name": "c", "image": "i"});
        let path = vec![
            f("spec"),
            f("containers"),
            PathElement::key_of(&item, &["name"]).expect("key"),
            f("image"),
        ];
        assert_eq!(
            PathDisplay(&path).to_string(),
            r#".spec.containers[name="c"].image"#
        );
        assert_eq!(
            PathDisplay(&[
                f("metadata"),
                f("finalizers"),
                PathElement::value_of(&json!("x"))
            ])
            .to_string(),
            r#".metadata.finalizers[="x"]"#
        );
        assert!(PathElement::decode("x:1").is_none());
        assert!(FieldSet::from_fields_v1(&json!({"bad": {}})).is_err());
    }
}
