//! OpenAPI: the `/openapi/v3` index and one document per served group-version, generated from the k8s-openapi types, the `/openapi/v2` document derived from them; strict field validation against the same schemas.
//!
//! kubectl needs these documents for `apply`/`create`/`replace` with the default
//! `--validate=strict` (it looks for the `fieldValidation` parameter of the kind's `patch`
//! operation and then leaves validation to the server) and for `kubectl explain`. The
//! documents are built once per [`Registry`](crate::registry::Registry), on first use, and
//! served as encoded bytes with a content hash in the index URL, as upstream does so that
//! clients may cache them.

pub mod field_validation;
pub mod patch_extensions;
pub mod paths;
pub mod schemas;
pub mod v2;

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::pointer::At;
use crate::registry::resource::ResourceDef;
use crate::registry::subresource::Subresource;
use paths::ResourceNames;
use schemas::{Components, TypedKind};

/// One group-version's document.
#[derive(Clone, Debug)]
pub struct Document {
    /// The index key and URL path under `/openapi/v3/`, e.g. `apis/apps/v1` or `api/v1`.
    pub path: String,
    /// Upper-case hex content hash, as in the index's `serverRelativeURL`.
    pub hash: String,
    /// The encoded JSON document.
    pub body: Bytes,
}

/// Every OpenAPI v3 document of a server, plus the union of their component schemas.
#[derive(Debug)]
pub struct OpenApi {
    /// The encoded `/openapi/v3` index.
    index: Bytes,
    /// One document per group-version, in discovery order.
    documents: Vec<Document>,
    /// Every component schema of every built-in document, by name (equal names are equal
    /// schemas); custom resources validate fields against their own structural schema.
    components: Arc<Map<String, Value>>,
    /// The component names of custom resources' kinds (not their lists), which v2
    /// publishes filtered.
    custom_kinds: BTreeSet<String>,
    /// The `/openapi/v2` document, derived from `documents` on first use.
    v2: OnceLock<Document>,
}

impl OpenApi {
    /// Builds the documents of `resources`.
    pub fn build(resources: &[&ResourceDef]) -> Self {
        let mut components = Map::new();
        let mut custom_kinds = BTreeSet::new();
        let documents = documents_of(resources, Some(&mut components), &mut custom_kinds);
        Self {
            index: index_of(&documents),
            documents,
            components: Arc::new(components),
            custom_kinds,
            v2: OnceLock::new(),
        }
    }

    /// These documents plus those of the custom resources' group versions `custom` (a
    /// group version both serve is documented from `custom`'s entries alone, which the CRD
    /// controller never lets happen).
    pub fn with_custom(&self, custom: &[Arc<ResourceDef>]) -> Self {
        let defs: Vec<&ResourceDef> = custom.iter().map(|d| d.as_ref()).collect();
        let mut custom_kinds = self.custom_kinds.clone();
        let added = documents_of(&defs, None, &mut custom_kinds);
        let mut documents: Vec<Document> = self
            .documents
            .iter()
            .filter(|d| added.iter().all(|a| a.path != d.path))
            .cloned()
            .collect();
        documents.extend(added);
        Self {
            index: index_of(&documents),
            documents,
            components: Arc::clone(&self.components),
            custom_kinds,
            v2: OnceLock::new(),
        }
    }

    /// The encoded `/openapi/v3` index: `{"paths": {"apis/apps/v1": {"serverRelativeURL": ...}}}`.
    pub fn index(&self) -> &Bytes {
        &self.index
    }

    /// The document at `/openapi/v3/{path}`.
    pub fn document(&self, path: &str) -> Option<&Document> {
        self.documents.iter().find(|d| d.path == path)
    }

    /// Every document, in index order.
    pub fn documents(&self) -> &[Document] {
        &self.documents
    }

    /// The `/openapi/v2` document of everything the v3 documents describe (path `v2`),
    /// built on first use: few clients read it, and a server's set of custom resources
    /// changes more often than anyone asks.
    pub fn v2(&self) -> &Document {
        self.v2.get_or_init(|| {
            let parsed: Vec<Value> = self
                .documents
                .iter()
                .filter_map(|d| serde_json::from_slice(&d.body).ok())
                .collect();
            let doc = v2::document(&parsed, &self.custom_kinds);
            let body = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
            Document {
                path: "v2".to_owned(),
                hash: content_hash(&body),
                body,
            }
        })
    }

    /// Every component schema, by name.
    pub fn components(&self) -> &Map<String, Value> {
        &self.components
    }

    /// The paths of the fields of `obj` that the schema of `kind` does not declare
    /// (`spec.foo`, `spec.containers[0].bar`), sorted by key within each object; empty for a
    /// kind whose schema is in no document.
    pub fn unknown_fields(&self, kind: Option<&TypedKind>, obj: &Value) -> Vec<String> {
        let Some(kind) = kind else {
            return Vec::new();
        };
        let name = (kind.name)();
        if !self.components.contains_key(name.as_ref()) {
            return Vec::new();
        }
        field_validation::unknown_fields(&self.components, &name, obj)
    }
}

/// The documents of every group version of `resources`, the core group first (as upstream's
/// index lists `api/v1` before `apis/...`); every schema also goes into `components` when
/// given, and the component names of custom kinds into `custom_kinds`.
fn documents_of(
    resources: &[&ResourceDef],
    mut components: Option<&mut Map<String, Value>>,
    custom_kinds: &mut BTreeSet<String>,
) -> Vec<Document> {
    let mut group_versions: Vec<(&str, &str)> = Vec::new();
    for def in resources {
        let gv = (&*def.group, &*def.version);
        if !group_versions.contains(&gv) {
            group_versions.push(gv);
        }
    }
    group_versions.sort_by_key(|(g, _)| !g.is_empty());
    let mut documents = Vec::new();
    for (group, version) in group_versions {
        let path = if group.is_empty() {
            format!("api/{version}")
        } else {
            format!("apis/{group}/{version}")
        };
        let doc = group_version_document(resources, group, version, custom_kinds);
        if let Some(all) = components.as_deref_mut()
            && let Some(Value::Object(schemas)) = doc.at("/components/schemas")
        {
            for (name, schema) in schemas {
                all.entry(name.clone()).or_insert_with(|| schema.clone());
            }
        }
        let body = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
        let hash = content_hash(&body);
        documents.push(Document { path, hash, body });
    }
    documents
}

/// The encoded `/openapi/v3` index of `documents`.
fn index_of(documents: &[Document]) -> Bytes {
    let mut index = Map::new();
    for doc in documents {
        index.insert(
            doc.path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{}?hash={}", doc.path, doc.hash)}),
        );
    }
    Bytes::from(serde_json::to_vec(&json!({"paths": index})).unwrap_or_default())
}

/// The document of one group-version: every resource's paths and the schemas they reach.
fn group_version_document(
    resources: &[&ResourceDef],
    group: &str,
    version: &str,
    custom_kinds: &mut BTreeSet<String>,
) -> Value {
    let mut components = Components::new();
    let common = components.add_common();
    let mut paths = Map::new();
    // The kinds whose schemas get the patch table's extensions.
    let mut patched: Vec<(String, &ResourceDef)> = Vec::new();
    for def in resources.iter().copied() {
        if def.group != group || def.version != version {
            continue;
        }
        let (kind_name, list_name) = match (&def.openapi, &def.custom) {
            (Some(typed), _) => (components.add_kind(typed), components.add_list(typed)),
            (None, Some(custom)) => {
                let names = components.add_custom(
                    &def.group,
                    &def.version,
                    &def.kind,
                    custom.openapi_schema(),
                );
                custom_kinds.insert(names.0.clone());
                names
            }
            (None, None) => continue,
        };
        if def.declares_merge_schema() {
            patched.push((kind_name.clone(), def));
        }
        let mut sub_name = |sub: Subresource| {
            if !def.has_subresource(sub) {
                return None;
            }
            sub.schema().map(|t| components.add_kind(&t))
        };
        let scale = sub_name(Subresource::Scale);
        let binding = sub_name(Subresource::Binding);
        let eviction = sub_name(Subresource::Eviction);
        let names = ResourceNames {
            kind: &kind_name,
            list: &list_name,
            scale: scale.as_deref(),
            binding: binding.as_deref(),
            eviction: eviction.as_deref(),
            common: &common,
        };
        paths::add_resource(&mut paths, def, &names);
    }
    let mut schemas = components.finish();
    for (name, def) in patched {
        patch_extensions::annotate(&mut schemas, &name, def.patch_schema().root());
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::version::GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// A 128-bit FNV-1a content hash in upper-case hex: stable for equal documents, which is all
/// clients need of the `hash` they cache by (upstream uses SHA-512 for the same purpose).
pub fn content_hash(bytes: &[u8]) -> String {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut hash = OFFSET;
    for b in bytes {
        hash ^= u128::from(*b);
        hash = hash.wrapping_mul(PRIME);
    }
    format!("{hash:032X}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_lists_every_group_version_with_a_hash() {
        let api = OpenApi::build(crate::resources::ALL);
        let index: Value = serde_json::from_slice(api.index()).expect("json");
        let paths = index["paths"].as_object().expect("paths");
        for gv in [
            "api/v1",
            "apis/apps/v1",
            "apis/coordination.k8s.io/v1",
            "apis/events.k8s.io/v1",
            "apis/policy/v1",
        ] {
            let url = paths[gv]["serverRelativeURL"].as_str().expect(gv);
            let doc = api.document(gv).expect(gv);
            assert_eq!(url, format!("/openapi/v3/{gv}?hash={}", doc.hash));
        }
        assert_eq!(paths.keys().next().map(String::as_str), Some("api/v1"));
    }

    #[test]
    fn every_served_kind_has_a_schema_with_its_gvk() {
        let api = OpenApi::build(crate::resources::ALL);
        for info in crate::resources::ALL {
            let kind = info.openapi.as_ref().expect("built-ins are typed");
            let doc: Value =
                serde_json::from_slice(&api.document(&gv_path(info)).expect("doc").body)
                    .expect("json");
            let schema = &doc["components"]["schemas"][&*(kind.name)()];
            let gvks = schema["x-kubernetes-group-version-kind"]
                .as_array()
                .unwrap_or_else(|| panic!("no gvk on {}", info.kind));
            assert!(
                gvks.contains(&schemas::gvk_json(&info.group, &info.version, &info.kind)),
                "{}: {gvks:?}",
                info.kind
            );
        }
    }

    fn gv_path(info: &ResourceDef) -> String {
        if info.group.is_empty() {
            format!("api/{}", info.version)
        } else {
            format!("apis/{}/{}", info.group, info.version)
        }
    }

    #[test]
    fn every_ref_resolves_within_its_document() {
        let api = OpenApi::build(crate::resources::ALL);
        for doc in api.documents() {
            let value: Value = serde_json::from_slice(&doc.body).expect("json");
            let schemas = value["components"]["schemas"].as_object().expect("schemas");
            let mut refs = Vec::new();
            collect_refs(&value, &mut refs);
            assert!(!refs.is_empty());
            for r in refs {
                let name = r.strip_prefix(schemas::REF_PREFIX).expect("component ref");
                assert!(schemas.contains_key(name), "{}: dangling {r}", doc.path);
            }
        }
    }

    #[test]
    fn the_v2_document_defines_what_it_refers_to_and_every_path() {
        let api = OpenApi::build(crate::resources::ALL);
        let doc: Value = serde_json::from_slice(&api.v2().body).expect("json");
        let definitions = doc["definitions"].as_object().expect("definitions");
        let mut refs = Vec::new();
        collect_refs(&doc, &mut refs);
        for r in refs {
            let name = r.strip_prefix("#/definitions/").expect("definition ref");
            assert!(definitions.contains_key(name), "dangling {r}");
        }
        let paths = doc["paths"].as_object().expect("paths");
        for v3 in api.documents() {
            let v3: Value = serde_json::from_slice(&v3.body).expect("json");
            for path in v3["paths"].as_object().expect("paths").keys() {
                assert!(paths.contains_key(path), "{path} missing from v2");
            }
        }
        assert!(std::ptr::eq(api.v2(), api.v2()), "built once");
    }

    fn collect_refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|v| collect_refs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn hash_is_stable_and_content_sensitive() {
        assert_eq!(content_hash(b"abc"), content_hash(b"abc"));
        assert_ne!(content_hash(b"abc"), content_hash(b"abd"));
        assert_eq!(content_hash(b"").len(), 32);
    }
}
