//! Strategic merge patch (`application/strategic-merge-patch+json`), the server side.
//!
//! A strategic merge patch is a JSON merge patch whose lists know how to merge: a list
//! tagged `patchStrategy:"merge"` merges element by element on its `patchMergeKey`
//! (containers by `name`, ports by `containerPort`, conditions by `type`, ...) or, for
//! scalars, as a set (finalizers); every other list is replaced. Directives refine it:
//!
//! - `null` deletes a field;
//! - `$patch: replace` in a map replaces the live map; `$patch: delete` empties it; in a
//!   list element, `delete` removes the live elements with that key and `replace` makes the
//!   patch list the whole list (`$patch: merge` is refused, as upstream);
//! - `$deleteFromPrimitiveList/<field>: [...]` removes values from a list of scalars;
//! - `$setElementOrder/<field>: [...]` orders a merged list;
//! - `$retainKeys: [...]` clears every field of the live map not listed.
//!
//! This is upstream's `StrategicMergeMapPatch` (k8s.io/apimachinery
//! `pkg/util/strategicpatch`), applied with the metadata of a kind's [`Schema`] (its
//! resource entry names a root from [`kinds`]). Start with [`apply`].

mod directives;
mod error;
pub mod kinds;
mod merge;
mod order;
mod schema;

#[cfg(test)]
mod upstream_cases;

pub use error::{Error, FieldPath, Result};
pub use schema::{FieldDef, FieldMeta, Schema, Strategy, TypeDef};

use serde_json::{Map, Value};

/// Applies `patch` to `original` and returns the patched object.
///
/// Both must be JSON objects (`null` counts as an empty object). The schema says how each
/// list merges; see [`kinds`]. Directive keys never reach the result.
pub fn apply(original: &Value, patch: &Value, schema: &Schema) -> Result<Value> {
    apply_owned(original.clone(), patch.clone(), schema)
}

/// [`apply`], consuming its arguments (no copy of the live object).
pub fn apply_owned(original: Value, patch: Value, schema: &Schema) -> Result<Value> {
    let original = match original {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        _ => {
            return Err(Error::NotAnObject {
                which: "original object",
            });
        }
    };
    let patch = match patch {
        Value::Object(map) => map,
        Value::Null => return Ok(Value::Object(original)),
        _ => return Err(Error::NotAnObject { which: "patch" }),
    };
    let has_directives = patch
        .iter()
        .any(|(k, v)| k.starts_with('$') || directives::has_directive_keys(v));
    let mut merged = Value::Object(merge::merge_map(original, patch, schema.root())?);
    if has_directives {
        directives::strip_directive_keys(&mut merged);
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_schema() -> Schema {
        Schema::new(&kinds::POD)
    }

    #[test]
    fn kubectl_set_image_patch_merges_one_container() {
        let live = json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"containers": [
                {"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]},
                {"name": "sidecar", "image": "busybox"}
            ]}
        });
        let patch = json!({"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}});
        let got = apply(&live, &patch, &pod_schema()).expect("apply");
        assert_eq!(
            got["spec"]["containers"],
            json!([
                {"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
                {"name": "sidecar", "image": "busybox"}
            ])
        );
        assert_eq!(got["metadata"], live["metadata"]);
    }

    #[test]
    fn finalizers_merge_as_a_set_and_delete_from_primitive_list() {
        let live = json!({"metadata": {"finalizers": ["a", "b"]}});
        let add = json!({"metadata": {"finalizers": ["c", "a"]}});
        let got = apply(&live, &add, &pod_schema()).expect("add");
        // Patch elements first in patch order; the live-only "b" cannot be placed among them
        // (they are not all in the live list), so it goes last.
        assert_eq!(got["metadata"]["finalizers"], json!(["c", "a", "b"]));

        let remove = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
        let got = apply(&got, &remove, &pod_schema()).expect("remove");
        assert_eq!(got, json!({"metadata": {"finalizers": ["c", "b"]}}));
    }

    #[test]
    fn unknown_kind_replaces_lists() {
        let schema = Schema::unknown();
        let live = json!({"spec": {"items": [1, 2], "keep": true}});
        let patch = json!({"spec": {"items": [3]}});
        let got = apply(&live, &patch, &schema).expect("apply");
        assert_eq!(got, json!({"spec": {"items": [3], "keep": true}}));
    }

    #[test]
    fn tolerations_are_replaced_conditions_merge_by_type() {
        let live = json!({
            "spec": {"tolerations": [{"key": "a"}, {"key": "b"}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "PodScheduled", "status": "True"}
            ]}
        });
        let patch = json!({
            "spec": {"tolerations": [{"key": "c"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        });
        let got = apply(&live, &patch, &pod_schema()).expect("apply");
        assert_eq!(got["spec"]["tolerations"], json!([{"key": "c"}]));
        assert_eq!(
            got["status"]["conditions"],
            json!([
                {"type": "Ready", "status": "True"},
                {"type": "PodScheduled", "status": "True"}
            ])
        );
    }

    #[test]
    fn deployment_strategy_retain_keys_clears_rolling_update() {
        let schema = Schema::new(&kinds::DEPLOYMENT);
        let live = json!({"spec": {"strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1}
        }}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        let got = apply(&live, &patch, &schema).expect("apply");
        assert_eq!(got, json!({"spec": {"strategy": {"type": "Recreate"}}}));
    }

    #[test]
    fn directives_in_added_values_do_not_leak_into_the_result() {
        let schema = Schema::new(&kinds::DEPLOYMENT);
        let live = json!({"spec": {}});
        let patch = json!({"spec": {
            "strategy": {"$retainKeys": ["type"], "type": "Recreate"},
            "template": {"spec": {
                "$setElementOrder/containers": [{"name": "a"}],
                "containers": [{"name": "a", "image": "x", "env": [{"name": "E", "$patch": "delete"}]}]
            }}
        }});
        let got = apply(&live, &patch, &schema).expect("apply");
        assert_eq!(
            got,
            json!({"spec": {
                "strategy": {"type": "Recreate"},
                "template": {"spec": {"containers": [{"name": "a", "image": "x", "env": []}]}}
            }})
        );
    }

    #[test]
    fn malformed_patches_are_errors_with_a_path() {
        struct Case {
            name: &'static str,
            live: Value,
            patch: Value,
            want: &'static str,
            status: u16,
        }
        let cases = [
            Case {
                name: "patch not an object",
                live: json!({}),
                patch: json!([1]),
                want: "invalid JSON document: the patch is not a JSON object",
                status: 400,
            },
            Case {
                name: "missing merge key",
                live: json!({"spec": {"containers": [{"name": "a"}]}}),
                patch: json!({"spec": {"containers": [{"image": "b"}]}}),
                want: "does not contain declared merge key: name",
                status: 422,
            },
            Case {
                name: "unknown directive",
                live: json!({"spec": {"nodeSelector": {"a": "b"}}}),
                patch: json!({"spec": {"nodeSelector": {"$patch": "explode"}}}),
                want: "spec.nodeSelector: unknown patch type: \"explode\"",
                status: 422,
            },
            Case {
                name: "merge directive in a list",
                live: json!({"spec": {"containers": [{"name": "a"}]}}),
                patch: json!({"spec": {"containers": [{"name": "a", "$patch": "merge"}]}}),
                want: "spec.containers: merging lists cannot yet be specified in the patch",
                status: 422,
            },
            Case {
                name: "retainKeys not a list",
                live: json!({"spec": {}}),
                patch: json!({"spec": {"$retainKeys": "x"}}),
                want: "spec: invalid patch format of retainKeys",
                status: 400,
            },
            Case {
                name: "malformed deleteFromPrimitiveList key",
                live: json!({"metadata": {"finalizers": ["a"]}}),
                patch: json!({"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}}),
                want: "invalid patch format of primitive list",
                status: 400,
            },
            Case {
                name: "lists of lists",
                live: json!({"metadata": {"finalizers": [["a"]]}}),
                patch: json!({"metadata": {"finalizers": [["b"]]}}),
                want: "metadata.finalizers: lists of lists are not supported",
                status: 422,
            },
            Case {
                name: "mixed element types",
                live: json!({"metadata": {"finalizers": ["a"]}}),
                patch: json!({"metadata": {"finalizers": [1]}}),
                want: "list element types are not identical",
                status: 422,
            },
            Case {
                name: "nested path through a merge key",
                live: json!({"spec": {"containers": [{"name": "a", "env": [{"name": "X"}]}]}}),
                patch: json!({"spec": {"containers": [{"name": "a", "env": [{"value": "1"}]}]}}),
                want: "spec.containers[name=\"a\"].env: map: {\"value\":\"1\"} does not contain declared merge key: name",
                status: 422,
            },
        ];
        for case in cases {
            let err = apply(&case.live, &case.patch, &pod_schema()).expect_err(case.name);
            assert!(err.to_string().contains(case.want), "{}: {err}", case.name);
            assert_eq!(err.status_code(), case.status, "{}", case.name);
        }
    }
}
