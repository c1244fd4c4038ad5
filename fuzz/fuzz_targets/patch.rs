//! Patches: JSON, merge and strategic-merge patches of any bytes against any JSON document, for a pod's schema and an unknown kind: an answer or a 4xx, never a panic.
#![no_main]

use kcm_apiserver::registry::patch::{PatchType, apply_patch};
use kcm_apiserver::resources::pod::PODS;
use kcm_apiserver::strategic_merge::{Schema, kinds};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    // First byte: patch type and schema; then the document and the patch, split at a NUL.
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let (doc, patch) = match rest.iter().position(|b| *b == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (&b"{}"[..], rest),
    };
    let Ok(doc) = serde_json::from_slice::<Value>(doc) else {
        return;
    };
    let kind = match selector % 3 {
        0 => PatchType::Json,
        1 => PatchType::Merge,
        _ => PatchType::StrategicMerge,
    };
    let schema = if selector & 4 == 0 {
        Schema::new(&kinds::POD)
    } else {
        Schema::unknown()
    };
    if let Err(err) = apply_patch(&PODS, schema, &doc, kind, patch) {
        assert!((400..500).contains(&err.code), "{err}");
    }
});
