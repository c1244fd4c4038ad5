//! Upstream's strategic merge test cases (`patch_test.go`), as data, applied with this module.
//!
//! The YAML files under `tests/data/strategic_merge/` keep upstream's case layout: each case
//! has `original` + `twoWay` → `modified` (or `twoWayResult`), and `current` + `threeWay` →
//! `result`, or an `expectedError`. Only patch application is ported (kcm's server never
//! computes patches), so both patches of a case are applied and checked. The schema is
//! upstream's test type `MergeItem`.

use serde::Deserialize;
use serde_json::Value;

use super::schema::{
    Schema, TypeDef, field, merge_list, merge_list_retain_keys, replace, retain_keys,
};

const OPAQUE: &TypeDef = &TypeDef::OPAQUE;

/// Upstream's `MergeItem` test struct.
static MERGE_ITEM: TypeDef = TypeDef {
    name: "MergeItem",
    fields: &[
        merge_list("mergingList", "name", &MERGE_ITEM),
        field("nonMergingList", &MERGE_ITEM),
        merge_list("mergingIntList", "", OPAQUE),
        field("nonMergingIntList", OPAQUE),
        merge_list("mergeItemPtr", "name", &MERGE_ITEM),
        field("simpleMap", OPAQUE),
        replace("replacingItem", OPAQUE),
        retain_keys("retainKeysMap", &RETAIN_KEYS_MERGE_ITEM),
        merge_list_retain_keys("retainKeysMergingList", "name", &MERGE_ITEM),
    ],
    values: None,
};

/// Upstream's `RetainKeysMergeItem` test struct.
static RETAIN_KEYS_MERGE_ITEM: TypeDef = TypeDef {
    name: "RetainKeysMergeItem",
    fields: &[
        field("simpleMap", OPAQUE),
        merge_list("mergingIntList", "", OPAQUE),
        merge_list("mergingList", "name", &MERGE_ITEM),
        field("nonMergingList", &MERGE_ITEM),
    ],
    values: None,
};

/// One upstream case (`StrategicMergePatchTestCaseData`/`...RawTestCaseData`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Case {
    description: String,
    original: Option<Value>,
    two_way: Option<Value>,
    modified: Option<Value>,
    two_way_result: Option<Value>,
    current: Option<Value>,
    three_way: Option<Value>,
    result: Option<Value>,
    expected_error: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CaseFile {
    test_cases: Vec<Case>,
}

const FILES: &[(&str, &str)] = &[
    (
        "custom.yaml",
        include_str!("../../tests/data/strategic_merge/custom.yaml"),
    ),
    (
        "create.yaml",
        include_str!("../../tests/data/strategic_merge/create.yaml"),
    ),
    (
        "merging_lists.yaml",
        include_str!("../../tests/data/strategic_merge/merging_lists.yaml"),
    ),
    (
        "element_order.yaml",
        include_str!("../../tests/data/strategic_merge/element_order.yaml"),
    ),
    (
        "retain_keys.yaml",
        include_str!("../../tests/data/strategic_merge/retain_keys.yaml"),
    ),
    (
        "unknown_fields.yaml",
        include_str!("../../tests/data/strategic_merge/unknown_fields.yaml"),
    ),
];

fn object_or_empty(v: &Option<Value>) -> Value {
    v.clone()
        .unwrap_or_else(|| Value::Object(Default::default()))
}

/// Applies `patch` to `original` and checks the outcome; returns a failure message.
fn check(
    label: &str,
    original: &Value,
    patch: &Value,
    want: Result<&Value, &str>,
) -> Option<String> {
    let schema = Schema::new(&MERGE_ITEM);
    let got = super::apply(original, patch, &schema);
    match (got, want) {
        (Ok(got), Ok(want)) if &got == want => None,
        (Err(err), Err(want)) if err.to_string().contains(want) => None,
        (got, want) => Some(format!(
            "{label}\n  original: {original}\n  patch:    {patch}\n  want:     {want:?}\n  got:      {got:?}"
        )),
    }
}

#[test]
fn upstream_strategic_merge_cases() {
    let mut failures = Vec::new();
    let mut applied = 0;
    for (file, text) in FILES {
        let cases: CaseFile =
            serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{file}: cannot parse: {e}"));
        for case in &cases.test_cases {
            if let Some(two_way) = &case.two_way {
                let want = match &case.expected_error {
                    Some(err) => Err(err.as_str()),
                    None => Ok(case
                        .two_way_result
                        .as_ref()
                        .or(case.modified.as_ref())
                        .unwrap_or_else(|| panic!("{file}: {}: no modified", case.description))),
                };
                let label = format!("{file}: {} (two-way)", case.description);
                failures.extend(check(
                    &label,
                    &object_or_empty(&case.original),
                    two_way,
                    want,
                ));
                applied += 1;
            }
            if let Some(result) = &case.result {
                let label = format!("{file}: {} (three-way)", case.description);
                let three_way = object_or_empty(&case.three_way);
                failures.extend(check(
                    &label,
                    &object_or_empty(&case.current),
                    &three_way,
                    Ok(result),
                ));
                applied += 1;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {applied} upstream cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(applied > 150, "only {applied} cases applied");
}
