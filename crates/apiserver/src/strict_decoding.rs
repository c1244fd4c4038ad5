//! Strict decoding of request bodies, as upstream's strict decoders (sigs.k8s.io/json's `UnmarshalStrict`, sigs.k8s.io/yaml's `YAMLToJSONStrict`): the value a lenient decode gives (the last of repeated fields wins) plus the repeated fields, which `fieldValidation` reports.
//!
//! Upstream decodes every body leniently and, under `fieldValidation=Warn|Strict`, a second
//! time strictly: a JSON field given twice is `duplicate field "spec.replicas"` (among the
//! unknown fields, in document order); a YAML key given twice is goyaml's
//! `line 11: key "foo" already set in map`. Here one pass gives both the value and the
//! repeats; [`Findings::errors`] orders them with the unknown fields the schema walk finds.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write as _};

use bytes::Bytes;
use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::{DuplicateKeyPolicy, Spanned};

/// A JSON field given more than once in one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Duplicate {
    /// Its path, as upstream's strict errors write it (`spec.replicas`, `spec.ports[0].name`).
    pub path: String,
    /// Its position among the body's fields: every member of every object counts, in
    /// document order, so unknown fields can be placed among the duplicates.
    pub position: usize,
}

/// One strict decoding error, as upstream words it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrictError {
    /// A field the kind's schema does not declare.
    Unknown(String),
    /// A JSON field given more than once.
    Duplicate(String),
    /// The YAML keys given more than once (goyaml's lines, `line 11: key "foo" already set
    /// in map`): one error, as goyaml returns them.
    Yaml(Vec<String>),
    /// An error in a JSON patch's operations (`json patch unknown field "[0].foo"`).
    JsonPatch(Box<StrictError>),
}

impl StrictError {
    /// The `Warning` headers of this error under `fieldValidation=Warn`: one per YAML line
    /// (upstream's `parseYAMLWarnings`), the error itself otherwise.
    pub fn warnings(&self) -> Vec<String> {
        match self {
            StrictError::Yaml(lines) => lines.clone(),
            other => vec![other.to_string()],
        }
    }
}

impl fmt::Display for StrictError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StrictError::Unknown(path) => write!(f, "unknown field {path:?}"),
            StrictError::Duplicate(path) => write!(f, "duplicate field {path:?}"),
            StrictError::JsonPatch(inner) => write!(f, "json patch {inner}"),
            StrictError::Yaml(lines) => {
                f.write_str("yaml: unmarshal errors:")?;
                for line in lines {
                    write!(f, "\n  {line}")?;
                }
                Ok(())
            }
        }
    }
}

/// `strict decoding error: a, b`, upstream's `runtime.StrictDecodingError` text.
pub fn strict_decoding_error(errors: &[StrictError]) -> String {
    let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
    format!("strict decoding error: {}", list.join(", "))
}

/// What a body is decoded into, which decides how upstream orders its strict errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    /// A built-in's Go type: sigs.k8s.io/json reports unknown and duplicate fields as it
    /// meets them, in document order, and skips what is inside an unknown field (so a field
    /// both unknown and repeated is only unknown).
    Typed,
    /// A custom resource's unstructured map: every duplicate first (the map decoding),
    /// then the unknown fields the schema coercion finds.
    Unstructured,
}

/// What strict decoding of a body found that its lenient decode no longer shows.
#[derive(Clone, Debug, Default)]
pub struct Findings {
    /// The YAML keys given twice, in goyaml's words.
    yaml: Vec<String>,
    /// The JSON fields given twice, in document order.
    duplicates: Vec<Duplicate>,
    /// The JSON body, to put unknown fields in document order.
    source: Option<Bytes>,
}

impl Findings {
    /// The findings of a JSON document [`json_slice`] decoded into `duplicates`; `source`
    /// is kept to place unknown fields among them.
    pub fn json_duplicates(duplicates: Vec<Duplicate>, source: Bytes) -> Self {
        Findings {
            yaml: Vec::new(),
            duplicates,
            source: Some(source),
        }
    }

    /// Whether strict decoding found nothing.
    pub fn is_empty(&self) -> bool {
        self.yaml.is_empty() && self.duplicates.is_empty()
    }

    /// The YAML keys given twice (`line 11: key "foo" already set in map`).
    pub fn yaml_duplicates(&self) -> &[String] {
        &self.yaml
    }

    /// The strict errors of a body decoded `into` a kind whose schema does not declare the
    /// fields `unknown` (in the schema walk's order), ordered as upstream reports them: the
    /// YAML keys first (upstream converts YAML strictly before it decodes the JSON), then
    /// the unknown and duplicate fields.
    pub fn errors(&self, unknown: &[String], into: Destination) -> Vec<StrictError> {
        let mut out = Vec::with_capacity(unknown.len() + self.duplicates.len() + 1);
        if !self.yaml.is_empty() {
            out.push(StrictError::Yaml(self.yaml.clone()));
        }
        if into == Destination::Unstructured {
            out.extend(self.duplicate_errors());
            out.extend(unknown.iter().cloned().map(StrictError::Unknown));
            return out;
        }
        let under_unknown = |path: &str| {
            unknown.iter().any(|u| {
                path.strip_prefix(u.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
            })
        };
        let duplicates = self.duplicates.iter().filter(|d| !under_unknown(&d.path));
        let source = self
            .source
            .as_ref()
            .filter(|_| unknown.len() + self.duplicates.len() > 1 && !unknown.is_empty());
        let Some(source) = source else {
            out.extend(unknown.iter().cloned().map(StrictError::Unknown));
            out.extend(duplicates.map(|d| StrictError::Duplicate(d.path.clone())));
            return out;
        };
        let wanted: HashSet<&str> = unknown.iter().map(String::as_str).collect();
        let positions = first_positions(source, &wanted);
        let mut placed: Vec<(usize, StrictError)> = unknown
            .iter()
            .map(|path| {
                let at = positions.get(path).copied().unwrap_or(usize::MAX);
                (at, StrictError::Unknown(path.clone()))
            })
            .chain(duplicates.map(|d| (d.position, StrictError::Duplicate(d.path.clone()))))
            .collect();
        // Stable: a field the body does not show (none in practice) keeps the walk's order.
        placed.sort_by_key(|(at, _)| *at);
        out.extend(placed.into_iter().map(|(_, e)| e));
        out
    }

    /// The repeated fields alone, as a patch reports its own (before those of the patched
    /// object).
    pub fn duplicate_errors(&self) -> impl Iterator<Item = StrictError> + '_ {
        self.duplicates
            .iter()
            .map(|d| StrictError::Duplicate(d.path.clone()))
    }
}

/// Decodes a JSON body leniently (a repeated field's last value wins, as upstream's lenient
/// decoder) and finds the repeated fields; the findings keep `bytes` (a reference count) to
/// place unknown fields among them.
pub fn json(bytes: &Bytes) -> Result<(Value, Findings), serde_json::Error> {
    let (value, duplicates) = json_slice(bytes)?;
    Ok((
        value,
        Findings {
            yaml: Vec::new(),
            duplicates,
            source: Some(bytes.clone()),
        },
    ))
}

/// [`json`] over a borrowed body: the value and the repeated fields.
pub fn json_slice(bytes: &[u8]) -> Result<(Value, Vec<Duplicate>), serde_json::Error> {
    let mut state = State::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = ValueSeed { state: &mut state }.deserialize(&mut de)?;
    de.end()?;
    Ok((value, state.duplicates))
}

/// The position of the first occurrence of each of `paths` among the fields of `bytes`, a
/// JSON body [`json`] decoded.
fn first_positions(bytes: &[u8], paths: &HashSet<&str>) -> HashMap<String, usize> {
    let mut state = State {
        wanted: Some(paths),
        ..State::default()
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // The body decoded once already; should it not now, no position is known.
    let _ = ValueSeed { state: &mut state }.deserialize(&mut de);
    state.found
}

/// Decodes a YAML (or JSON) body leniently, as sigs.k8s.io/yaml's `Unmarshal` (a repeated
/// key's last value wins), and finds the keys given twice in one mapping, worded as goyaml's
/// strict decoder (`line 11: key "foo" already set in map`).
pub fn yaml(bytes: &[u8]) -> Result<(Value, Findings), serde_saphyr::Error> {
    let options = serde_saphyr::options! {
        duplicate_keys: DuplicateKeyPolicy::LastWins,
    };
    let node: YamlNode = serde_saphyr::from_slice_with_options(bytes, options)?;
    Ok((
        node.value,
        Findings {
            yaml: node.duplicates,
            duplicates: Vec::new(),
            source: None,
        },
    ))
}

/// The state of one JSON decoding pass.
#[derive(Default)]
struct State<'w> {
    /// The path of the value being decoded (`spec.ports[0]`).
    path: String,
    /// How many object members were seen so far: the position of the next one.
    members: usize,
    /// The members given twice.
    duplicates: Vec<Duplicate>,
    /// Positions pass: the paths whose first position is wanted.
    wanted: Option<&'w HashSet<&'w str>>,
    /// Positions pass: the first position of each wanted path seen.
    found: HashMap<String, usize>,
}

/// Decodes any JSON value as `serde_json::Value` does, noting repeated members.
struct ValueSeed<'s, 'w> {
    state: &'s mut State<'w>,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let len = self.state.path.len();
            // Writing to a String cannot fail.
            let _ = write!(self.state.path, "[{}]", items.len());
            let next = seq.next_element_seed(ValueSeed {
                state: &mut *self.state,
            });
            self.state.path.truncate(len);
            match next? {
                Some(item) => items.push(item),
                None => break,
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let len = self.state.path.len();
            if len > 0 {
                self.state.path.push('.');
            }
            self.state.path.push_str(&key);
            let position = self.state.members;
            self.state.members += 1;
            if let Some(wanted) = self.state.wanted
                && wanted.contains(self.state.path.as_str())
            {
                self.state
                    .found
                    .entry(self.state.path.clone())
                    .or_insert(position);
            }
            if out.contains_key(&key) {
                self.state.duplicates.push(Duplicate {
                    path: self.state.path.clone(),
                    position,
                });
            }
            let value = map.next_value_seed(ValueSeed {
                state: &mut *self.state,
            });
            self.state.path.truncate(len);
            out.insert(key, value?);
        }
        Ok(Value::Object(out))
    }
}

/// A YAML node decoded as `serde_json::Value`, with the keys given twice inside it.
struct YamlNode {
    value: Value,
    /// goyaml's strict errors for the repeated keys, in the order goyaml reports them
    /// (a value's own repeats before its key's).
    duplicates: Vec<String>,
}

impl YamlNode {
    fn leaf(value: Value) -> Self {
        YamlNode {
            value,
            duplicates: Vec::new(),
        }
    }
}

impl<'de> Deserialize<'de> for YamlNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(YamlVisitor)
    }
}

/// Builds a [`YamlNode`] as `serde_json::Value`'s visitor builds a value.
struct YamlVisitor;

impl<'de> Visitor<'de> for YamlVisitor {
    type Value = YamlNode;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<YamlNode, E> {
        Ok(YamlNode::leaf(Value::Bool(b)))
    }

    fn visit_i64<E>(self, n: i64) -> Result<YamlNode, E> {
        Ok(YamlNode::leaf(Value::Number(n.into())))
    }

    fn visit_u64<E>(self, n: u64) -> Result<YamlNode, E> {
        Ok(YamlNode::leaf(Value::Number(n.into())))
    }

    fn visit_f64<E>(self, n: f64) -> Result<YamlNode, E> {
        Ok(YamlNode::leaf(
            Number::from_f64(n).map_or(Value::Null, Value::Number),
        ))
    }

    fn visit_str<E>(self, s: &str) -> Result<YamlNode, E> {
        Ok(YamlNode::leaf(Value::String(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<YamlNode, E> {
        Ok(YamlNode::leaf(Value::String(s)))
    }

    fn visit_unit<E>(self) -> Result<YamlNode, E> {
        Ok(YamlNode::leaf(Value::Null))
    }

    fn visit_none<E>(self) -> Result<YamlNode, E> {
        Ok(YamlNode::leaf(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<YamlNode, D::Error> {
        YamlNode::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<YamlNode, A::Error> {
        let mut items = Vec::new();
        let mut duplicates = Vec::new();
        while let Some(item) = seq.next_element::<YamlNode>()? {
            items.push(item.value);
            duplicates.extend(item.duplicates);
        }
        Ok(YamlNode {
            value: Value::Array(items),
            duplicates,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<YamlNode, A::Error> {
        let mut out = Map::new();
        let mut duplicates = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let node: Spanned<YamlNode> = map.next_value()?;
            duplicates.extend(node.value.duplicates);
            if out.contains_key(&key) {
                // goyaml names the line of the repeated key's value (its `setMapIndex`).
                duplicates.push(format!(
                    "line {}: key {key:?} already set in map",
                    node.referenced.line()
                ));
            }
            out.insert(key, node.value.value);
        }
        Ok(YamlNode {
            value: Value::Object(out),
            duplicates,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_repeats_are_found_with_upstream_paths_and_the_last_value_wins() {
        struct Case {
            name: &'static str,
            body: &'static str,
            want: Value,
            duplicates: Vec<&'static str>,
        }
        let cases = [
            Case {
                name: "no repeats",
                body: r#"{"a": 1, "b": [1, {"c": null}], "d": 1.5, "e": -3, "f": true}"#,
                want: json!({"a": 1, "b": [1, {"c": null}], "d": 1.5, "e": -3, "f": true}),
                duplicates: vec![],
            },
            Case {
                name: "nested repeat",
                body: r#"{"spec": {"replicas": 2, "replicas": 3}}"#,
                want: json!({"spec": {"replicas": 3}}),
                duplicates: vec!["spec.replicas"],
            },
            Case {
                name: "repeats in list items and at the root",
                body: r#"{"a": 1, "l": [{"x": 1}, {"x": 1, "x": {"y": 2}}], "a": 2}"#,
                want: json!({"a": 2, "l": [{"x": 1}, {"x": {"y": 2}}]}),
                duplicates: vec!["l[1].x", "a"],
            },
        ];
        for case in cases {
            let (value, duplicates) = json_slice(case.body.as_bytes()).expect(case.name);
            assert_eq!(value, case.want, "case {}", case.name);
            let paths: Vec<&str> = duplicates.iter().map(|d| d.path.as_str()).collect();
            assert_eq!(paths, case.duplicates, "case {}", case.name);
        }
        assert!(json_slice(b"{\"a\": ").is_err());
        assert!(json_slice(b"{} x").is_err());
    }

    #[test]
    fn typed_bodies_report_unknown_and_duplicate_fields_in_document_order() {
        // upstream's integration test body (test/integration/apiserver/field_validation_test.go)
        let body = Bytes::from_static(
            br#"{"metadata": {"name": "dupename", "name": "x", "unknownMeta": "v"},
                "spec": {"unknown1": "v", "unknownDupe": "a", "unknownDupe": "b",
                    "paused": true, "paused": false, "template": {"spec": {"containers": [
                        {"name": "n", "unknownNested": "v", "imagePullPolicy": "Always",
                         "imagePullPolicy": "Never"}]}}}}"#,
        );
        let (_, findings) = json(&body).expect("decodes");
        // The schema walk's order (sorted), as `field_validation::unknown_fields` gives it.
        let unknown = [
            "metadata.unknownMeta",
            "spec.template.spec.containers[0].unknownNested",
            "spec.unknown1",
            "spec.unknownDupe",
        ]
        .map(str::to_owned);
        assert_eq!(
            strict_decoding_error(&findings.errors(&unknown, Destination::Typed)),
            r#"strict decoding error: duplicate field "metadata.name", unknown field "metadata.unknownMeta", unknown field "spec.unknown1", unknown field "spec.unknownDupe", duplicate field "spec.paused", unknown field "spec.template.spec.containers[0].unknownNested", duplicate field "spec.template.spec.containers[0].imagePullPolicy""#
        );
        assert_eq!(
            strict_decoding_error(&findings.errors(&unknown, Destination::Unstructured)),
            r#"strict decoding error: duplicate field "metadata.name", duplicate field "spec.unknownDupe", duplicate field "spec.paused", duplicate field "spec.template.spec.containers[0].imagePullPolicy", unknown field "metadata.unknownMeta", unknown field "spec.template.spec.containers[0].unknownNested", unknown field "spec.unknown1", unknown field "spec.unknownDupe""#
        );
        let (_, clean) = json(&Bytes::from_static(b"{\"b\": 1, \"a\": 1}")).expect("decodes");
        assert!(clean.is_empty());
        assert_eq!(
            clean.errors(&["a".to_owned(), "b".to_owned()], Destination::Typed),
            vec![
                StrictError::Unknown("b".to_owned()),
                StrictError::Unknown("a".to_owned())
            ]
        );
    }

    #[test]
    fn yaml_repeats_are_worded_as_goyaml_and_the_last_value_wins() {
        let body = "\napiVersion: v1\nkind: Foo\nspec:\n  foo: foo1\n  foo: foo2\n  bar: [1, {x: 1, x: 2}]\n";
        let (value, findings) = yaml(body.as_bytes()).expect("decodes");
        assert_eq!(
            value,
            json!({"apiVersion": "v1", "kind": "Foo", "spec": {"foo": "foo2", "bar": [1, {"x": 2}]}})
        );
        assert_eq!(
            findings.yaml_duplicates(),
            [
                r#"line 6: key "foo" already set in map"#,
                r#"line 7: key "x" already set in map"#
            ]
        );
        let errors = findings.errors(&["spec.bar".to_owned()], Destination::Typed);
        assert_eq!(
            strict_decoding_error(&errors),
            "strict decoding error: yaml: unmarshal errors:\n  line 6: key \"foo\" already set in map\n  line 7: key \"x\" already set in map, unknown field \"spec.bar\""
        );
        assert_eq!(
            errors[0].warnings(),
            [
                r#"line 6: key "foo" already set in map"#,
                r#"line 7: key "x" already set in map"#
            ]
        );
        let (json_body, none) = yaml(br#"{"a": [1, 2.5, null, true]}"#).expect("json is yaml");
        assert_eq!(json_body, json!({"a": [1, 2.5, null, true]}));
        assert!(none.is_empty());
        assert!(yaml(b"a: [").is_err());
    }
}
