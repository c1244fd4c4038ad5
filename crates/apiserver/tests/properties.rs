//! Property tests of the API server's parsers that face the network: patches, protobuf envelopes, request paths, object bodies of every served kind, and quantity comparison.
//!
//! `cargo test` runs a bounded number of cases per property (`PROPTEST_CASES` overrides it:
//! `PROPTEST_CASES=1000000 cargo test --release -p kcm-apiserver --test properties` runs
//! them long; see BENCHMARKS.md).

use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use serde_json::{Map, Value};

use kcm_apiserver::http::request_info::{self, Route};
use kcm_apiserver::registry::Registry;
use kcm_apiserver::registry::patch::{PatchType, apply_patch};
use kcm_apiserver::strategic_merge::{self, Schema, kinds};

/// Cases per property unless `PROPTEST_CASES` says otherwise.
fn config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Random JSON: scalars, and arrays and objects nested a few levels, keys from a small
/// alphabet (so patches and documents touch the same keys) plus the directive keys.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..1000).prop_map(Value::from),
        "[a-c]{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-d]{1,2}",
        1 => Just("name".to_owned()),
        1 => Just("$patch".to_owned()),
        1 => Just("$retainKeys".to_owned()),
        1 => Just("$deleteFromPrimitiveList/a".to_owned()),
        1 => Just("$setElementOrder/a".to_owned()),
    ]
}

/// JSON objects without `null` anywhere and without directive keys: documents a merge patch
/// can produce exactly.
fn plain_object() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..1000).prop_map(Value::from),
        "[a-c]{0,3}".prop_map(Value::String),
    ];
    let value = leaf.prop_recursive(3, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-d]{1,2}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop::collection::btree_map("[a-d]{1,2}", value, 0..5)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// The RFC 7386 merge patch turning `a` into `b` (both objects without nulls).
fn merge_diff(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let mut patch = Map::new();
            for (k, av) in a {
                match b.get(k) {
                    None => {
                        patch.insert(k.clone(), Value::Null);
                    }
                    Some(bv) if bv != av => {
                        patch.insert(k.clone(), merge_diff(av, bv));
                    }
                    Some(_) => {}
                }
            }
            for (k, bv) in b {
                if !a.contains_key(k) {
                    patch.insert(k.clone(), bv.clone());
                }
            }
            Value::Object(patch)
        }
        (_, b) => b.clone(),
    }
}

fn schemas() -> [Schema; 5] {
    [
        Schema::unknown(),
        Schema::new(&kinds::POD),
        Schema::new(&kinds::DEPLOYMENT),
        Schema::new(&kinds::NODE),
        Schema::new(&kinds::SERVICE),
    ]
}

fn pods() -> &'static kcm_apiserver::registry::resource::ResourceDef {
    &kcm_apiserver::resources::pod::PODS
}

proptest! {
    #![proptest_config(config(256))]

    /// Any patch against any document: an answer (patched or an error), never a panic.
    #[test]
    fn patches_never_panic(doc in json_value(), patch in json_value(), schema in 0usize..5) {
        let schema = schemas()[schema];
        let _ = strategic_merge::apply(&doc, &patch, &schema);
        let bytes = serde_json::to_vec(&patch).expect("json");
        for kind in [PatchType::Json, PatchType::Merge, PatchType::StrategicMerge] {
            let _ = apply_patch(pods(), schema, &doc, kind, &bytes);
        }
    }

    /// Patch bytes that are not JSON at all: a 4xx, never a panic.
    #[test]
    fn patch_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        for kind in [PatchType::Json, PatchType::Merge, PatchType::StrategicMerge] {
            if let Err(e) = apply_patch(pods(), Schema::new(&kinds::POD), &Value::Null, kind, &bytes) {
                prop_assert!((400..500).contains(&e.code), "{e}");
            }
        }
    }

    /// apply(diff(a, b), a) == b for merge patches, strategic patches of a kind nothing is
    /// known about (merge semantics), and JSON patches.
    #[test]
    fn applying_the_difference_gives_the_target(a in plain_object(), b in plain_object()) {
        let merge = merge_diff(&a, &b);
        let bytes = serde_json::to_vec(&merge).expect("json");
        let merged = apply_patch(pods(), Schema::unknown(), &a, PatchType::Merge, &bytes).expect("merge");
        prop_assert_eq!(&merged, &b);
        let strategic = strategic_merge::apply(&a, &merge, &Schema::unknown()).expect("strategic");
        prop_assert_eq!(&strategic, &b);
        let ops = json_patch::diff(&a, &b);
        let bytes = serde_json::to_vec(&ops).expect("json");
        let patched = apply_patch(pods(), Schema::unknown(), &a, PatchType::Json, &bytes).expect("json patch");
        prop_assert_eq!(&patched, &b);
    }

    /// Random bytes, with and without the protobuf magic: decoded or refused, never a panic.
    #[test]
    fn protobuf_envelopes_never_panic(magic in any::<bool>(), body in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut bytes = if magic { b"k8s\0".to_vec() } else { Vec::new() };
        bytes.extend_from_slice(&body);
        let _ = kcm_apiserver::protobuf::decode_to_json(&bytes);
    }

    /// No request path names an object outside the namespace it names: once its segments are
    /// accepted, the object's storage key is one segment under the namespace's prefix.
    #[test]
    fn paths_stay_inside_their_namespace(segments in prop::collection::vec(segment(), 0..8)) {
        let path = format!("/{}", segments.join("/"));
        let Route::Resource(r) = request_info::parse(&path) else {
            return Ok(());
        };
        for field in [&r.group, &r.version, &r.resource] {
            prop_assert!(!field.contains('/'));
        }
        if request_info::validate_segments(&r).is_err() {
            return Ok(());
        }
        let (Some(ns), Some(name)) = (&r.namespace, &r.name) else {
            return Ok(());
        };
        for part in [ns, name] {
            prop_assert!(part != "." && part != ".." && !part.contains('/') && !part.contains('%'));
        }
        let def = pods();
        let prefix = def.storage_prefix(Some(ns));
        let key = def.storage_key(ns, name);
        prop_assert!(key.starts_with(&prefix), "{} outside {}", key, prefix);
        prop_assert!(!key[prefix.len()..].trim_start_matches('/').contains('/'), "{}", key);
    }

    /// The size comparison of quantities agrees with exact arithmetic.
    #[test]
    fn quantity_sizes_compare_exactly(a in quantity(), b in quantity()) {
        let (ma, mb) = (
            kcm_apiserver::resources::quantities::milli_value(&a.text),
            kcm_apiserver::resources::quantities::milli_value(&b.text),
        );
        prop_assert_eq!(ma, Some(a.nanos / 1_000_000), "{}", a.text);
        prop_assert_eq!(mb, Some(b.nanos / 1_000_000), "{}", b.text);
        if a.nanos / 1_000_000 != b.nanos / 1_000_000 {
            prop_assert_eq!(ma.cmp(&mb), a.nanos.cmp(&b.nanos));
        }
    }
}

/// Path segments: the API's words, names, and traversal-like pieces.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("api".to_owned()),
        Just("apis".to_owned()),
        Just("v1".to_owned()),
        Just("apps".to_owned()),
        Just("namespaces".to_owned()),
        Just("pods".to_owned()),
        Just("watch".to_owned()),
        Just("status".to_owned()),
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just("%2F".to_owned()),
        Just("%2e%2e".to_owned()),
        Just("a%2Fb".to_owned()),
        Just(String::new()),
        "[a-z0-9.%-]{1,6}",
    ]
}

/// A quantity string and its exact value in nano-units.
#[derive(Clone, Debug)]
struct Sized {
    text: String,
    nanos: i128,
}

fn quantity() -> impl Strategy<Value = Sized> {
    // (suffix, multiplier in nano-units); every generated value is whole in nano-units.
    const SUFFIXES: [(&str, i128); 14] = [
        ("", 1_000_000_000),
        ("m", 1_000_000),
        ("u", 1_000),
        ("k", 1_000_000_000_000),
        ("M", 1_000_000_000_000_000),
        ("G", 1_000_000_000_000_000_000),
        ("Ki", 1024 * 1_000_000_000),
        ("Mi", 1024 * 1024 * 1_000_000_000),
        ("Gi", 1024 * 1024 * 1024 * 1_000_000_000),
        ("Ti", 1024 * 1024 * 1024 * 1024 * 1_000_000_000),
        ("e3", 1_000_000_000_000),
        ("e-3", 1_000_000),
        ("E6", 1_000_000_000_000_000),
        ("e0", 1_000_000_000),
    ];
    (
        0u64..10_000_000,
        0u32..1000,
        0usize..3,
        0usize..SUFFIXES.len(),
    )
        .prop_map(|(whole, frac, frac_digits, suffix)| {
            let (suffix, mul) = SUFFIXES[suffix];
            let (frac_text, frac_value, frac_div) = match frac_digits {
                0 => (String::new(), 0i128, 1i128),
                1 => (format!(".{}", frac % 10), i128::from(frac % 10), 10),
                _ => (format!(".{:03}", frac), i128::from(frac), 1000),
            };
            let mut nanos = i128::from(whole) * mul + frac_value * mul / frac_div;
            // As `ParseQuantity`, SI quantities (not exponent ones) are capped at the
            // largest int64.
            let cap = i128::from(i64::MAX) * 1_000_000_000;
            if !suffix.starts_with(['e', 'E']) {
                nanos = nanos.min(cap);
            }
            Sized {
                text: format!("{whole}{frac_text}{suffix}"),
                nanos,
            }
        })
}

/// Bodies for every served kind: random JSON objects, some shaped like the kind.
fn body() -> impl Strategy<Value = Value> {
    let meta = prop_oneof![
        Just(Value::Null),
        "[a-z]{1,5}".prop_map(|n| serde_json::json!({"name": n})),
        json_value(),
    ];
    (meta, json_value(), json_value()).prop_map(|(metadata, spec, extra)| {
        let mut obj = Map::new();
        obj.insert("metadata".to_owned(), metadata);
        obj.insert("spec".to_owned(), spec);
        if let Value::Object(extra) = extra {
            obj.extend(extra);
        }
        Value::Object(obj)
    })
}

/// One registry and runtime for the whole test binary.
fn harness() -> &'static (tokio::runtime::Runtime, Arc<Registry>) {
    static HARNESS: OnceLock<(tokio::runtime::Runtime, Arc<Registry>)> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let registry = Arc::new(Registry::new(Arc::new(
            kcm_apiserver::storage::MemoryStorage::new(),
        )));
        rt.block_on(registry.ensure_default_namespaces())
            .expect("namespaces");
        (rt, registry)
    })
}

proptest! {
    #![proptest_config(config(64))]

    /// A random body created as any served kind: created, or refused with a 4xx Status;
    /// never a 5xx, never a panic.
    #[test]
    fn every_served_kind_answers_bad_bodies_with_a_client_error(which in any::<prop::sample::Index>(), body in body()) {
        let (rt, registry) = harness();
        let defs: Vec<_> = registry.resources().refs().collect();
        let def = &defs[which.index(defs.len())];
        let ns = if def.namespaced { "default" } else { "" };
        let opts = kcm_apiserver::registry::options::WriteOptions::default();
        let outcome = rt.block_on(registry.create(def, ns, body.clone(), &opts));
        if let Err(e) = outcome {
            prop_assert!((400..500).contains(&e.code), "{} {}: {} for {}", def.group, def.plural, e, body);
        }
    }
}
