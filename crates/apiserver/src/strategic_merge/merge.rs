//! Applying a strategic merge patch to a live object, as upstream's `StrategicMergeMapPatch`.
//!
//! This is the server side of the algorithm (`MergeParallelList` and `IgnoreUnmatchedNulls`
//! both on): directives are executed, not carried along, and a `null` for a field the live
//! object lacks is dropped. Values are moved, never deep-copied: each function takes the
//! live value and the patch by value and returns the merged value.

use serde_json::{Map, Value};

use super::directives::{
    DELETE_DIRECTIVE, DELETE_FROM_PRIMITIVE_LIST_PREFIX, DIRECTIVE_MARKER, MERGE_DIRECTIVE,
    REPLACE_DIRECTIVE, RETAIN_KEYS_DIRECTIVE, SET_ELEMENT_ORDER_PREFIX,
};
use super::error::{Error, FieldPath, Result, json_type_name};
use super::order::{
    check_maps_with_key, dedupe_scalars, identities, identity, normalize_element_order,
};
use super::schema::{FieldMeta, Strategy, TypeDef};

type Object = Map<String, Value>;

/// The JSON type of a value; two values of different types never merge.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum JsonType {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

fn json_type(v: &Value) -> JsonType {
    match v {
        Value::Null => JsonType::Null,
        Value::Bool(_) => JsonType::Bool,
        Value::Number(_) => JsonType::Number,
        Value::String(_) => JsonType::String,
        Value::Array(_) => JsonType::Array,
        Value::Object(_) => JsonType::Object,
    }
}

/// Merges `patch` into `original`, as upstream's `mergeMap`.
pub(super) fn merge_map(
    mut original: Object,
    mut patch: Object,
    ty: &'static TypeDef,
) -> Result<Object> {
    if let Some(directive) = patch.get(DIRECTIVE_MARKER) {
        return match directive.as_str() {
            Some(REPLACE_DIRECTIVE) => {
                patch.remove(DIRECTIVE_MARKER);
                Ok(patch)
            }
            Some(DELETE_DIRECTIVE) => Ok(Object::new()),
            _ => Err(Error::BadPatchType {
                path: FieldPath::default(),
                directive: directive.to_string(),
                map: Value::Object(patch.clone()).to_string(),
            }),
        };
    }

    apply_retain_keys(&mut original, &mut patch)?;
    merge_set_element_order_lists(&mut original, &mut patch, ty)?;

    for (key, patch_value) in patch {
        let (key, is_delete_list) = match key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
            Some(rest) => match rest.strip_prefix('/') {
                Some(field) => (field.to_owned(), true),
                None => {
                    return Err(Error::BadPrimitiveListFormat {
                        path: FieldPath::default(),
                    }
                    .within(&key));
                }
            },
            None => (key, false),
        };

        // A null deletes the field; with nothing to delete it is dropped, never stored.
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }

        let Some(live) = original.get_mut(&key) else {
            if !is_delete_list {
                insert_new(&mut original, key, patch_value);
            }
            continue;
        };
        if json_type(live) != json_type(&patch_value) {
            if !is_delete_list {
                insert_new(&mut original, key, patch_value);
            }
            continue;
        }
        match (live, patch_value) {
            (Value::Object(live), Value::Object(patch_map)) => {
                let meta = ty.field(&key);
                if meta.strategy == Strategy::Replace {
                    *live = patch_map;
                } else {
                    let merged = merge_map(std::mem::take(live), patch_map, meta.ty)
                        .map_err(|e| e.within(&key))?;
                    *live = merged;
                }
            }
            (Value::Array(live), Value::Array(patch_list)) => {
                let meta = ty.field(&key);
                let merged =
                    merge_list_field(std::mem::take(live), patch_list, meta, is_delete_list)
                        .map_err(|e| e.within(&key))?;
                *live = merged;
            }
            (live, scalar) => *live = scalar,
        }
    }
    Ok(original)
}

/// Stores a patch value for a field the live object lacks (or holds with another type):
/// nulls inside it are dropped and maps carrying `$patch` are left out, as upstream's
/// `discardNullValuesFromPatch` + `removeDirectives`.
fn insert_new(original: &mut Object, key: String, mut value: Value) {
    discard_nulls(&mut value);
    match remove_directives(value) {
        Some(value) => {
            original.insert(key, value);
        }
        None => {
            original.remove(&key);
        }
    }
}

/// Drops every `null` member of every map in `value` (list elements that are null stay).
fn discard_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(discard_nulls);
        }
        Value::Array(list) => list.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// Removes maps carrying `$patch` (and list elements that are such maps); `None` when
/// `value` itself is one.
fn remove_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) => {
            if map.contains_key(DIRECTIVE_MARKER) {
                return None;
            }
            Some(Value::Object(
                map.into_iter()
                    .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                    .collect(),
            ))
        }
        Value::Array(list) => Some(Value::Array(
            list.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

/// Executes `$retainKeys`: live fields not listed are cleared, and the patch may only set
/// listed fields (upstream's `applyRetainKeysDirective`).
fn apply_retain_keys(original: &mut Object, patch: &mut Object) -> Result<()> {
    let Some(retain) = patch.remove(RETAIN_KEYS_DIRECTIVE) else {
        return Ok(());
    };
    let bad = || Error::BadRetainKeysFormat {
        path: FieldPath::default(),
    };
    let Value::Array(retain) = retain else {
        return Err(bad());
    };
    let retained = |k: &str| retain.iter().any(|v| v.as_str() == Some(k));
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
            || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
        {
            continue;
        }
        if !retained(k) {
            return Err(bad());
        }
    }
    original.retain(|k, _| retained(k));
    Ok(())
}

/// Executes every `$setElementOrder/<field>` of `patch`: merges the field's list (if the
/// patch has one) and orders the result by the directive, then by the patch, then by the
/// live list. Both the directive and the field's patch list leave `patch`
/// (upstream's `mergePatchIntoOriginal`).
fn merge_set_element_order_lists(
    original: &mut Object,
    patch: &mut Object,
    ty: &'static TypeDef,
) -> Result<()> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX))
        .cloned()
        .collect();
    for key in keys {
        let Some(order) = patch.remove(&key) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(Error::BadArgType {
                path: FieldPath::default(),
                expected: "list",
                actual: json_type_name(&order),
            }
            .within(&key));
        };
        let field = key
            .strip_prefix(SET_ELEMENT_ORDER_PREFIX)
            .and_then(|rest| rest.strip_prefix('/'))
            .ok_or_else(|| {
                Error::BadSetElementOrderFormat {
                    path: FieldPath::default(),
                }
                .within(&key)
            })?
            .to_owned();
        set_element_order(original, patch, &field, order, ty).map_err(|e| e.within(&field))?;
    }
    Ok(())
}

/// One `$setElementOrder/<field>` (see [`merge_set_element_order_lists`]).
fn set_element_order(
    original: &mut Object,
    patch: &mut Object,
    field: &str,
    order: Vec<Value>,
    ty: &'static TypeDef,
) -> Result<()> {
    let list_of = |v: Value| match v {
        Value::Array(list) => Ok(list),
        other => Err(Error::BadArgType {
            path: FieldPath::default(),
            expected: "list",
            actual: json_type_name(&other),
        }),
    };
    let live = original.remove(field).map(list_of).transpose()?;
    let patch_list = patch.remove(field).map(list_of).transpose()?;
    let meta = ty.field(field);
    check_against_order(patch_list.as_deref().unwrap_or(&[]), &order, meta.merge_key)?;

    let (live_slice, patch_slice) = (
        live.as_deref().unwrap_or(&[]),
        patch_list.as_deref().unwrap_or(&[]),
    );
    if live.is_none() && patch_list.is_none() {
        return Ok(());
    }
    let is_map = element_type(live_slice, patch_slice)? == JsonType::Object;
    // The live list's order, taken before merging moves its elements.
    let mut server_order = identities(live_slice, meta.merge_key, is_map)?;
    if is_map && meta.strategy == Strategy::Merge && !meta.merge_key.is_empty() {
        server_order = order_seen_by_upstream(server_order, patch_slice, meta.merge_key);
    }

    let merged = match (live, patch_list) {
        (Some(live), None) => live,
        (None, Some(patch_list)) => match remove_directives(Value::Array(patch_list)) {
            Some(Value::Array(list)) => list,
            _ => Vec::new(),
        },
        (Some(live), Some(patch_list)) => merge_list_field(live, patch_list, meta, false)?,
        (None, None) => return Ok(()),
    };

    let (in_order, server_only) = partition(merged, &order, meta.merge_key)?;
    let patch_order = identities(&order, meta.merge_key, is_map)?;
    let both = normalize_element_order(
        in_order,
        server_only,
        &patch_order,
        &server_order,
        meta.merge_key,
        is_map,
    )?;
    original.insert(field.to_owned(), Value::Array(both));
    Ok(())
}

/// The live order upstream's `mergePatchIntoOriginal` sorts server-only elements by.
///
/// Upstream keeps a slice header on the live list while merging into it in place: element
/// deletions shift the backing array left and elements the patch adds are appended into
/// the room they free, so the "live order" it then uses is that array, not the list as
/// it was. Several upstream test expectations depend on it, so the same array is
/// computed here from the identities of the live list (`live_ids`) and the patch list.
fn order_seen_by_upstream(
    mut live_ids: Vec<Value>,
    patch: &[Value],
    merge_key: &'static str,
) -> Vec<Value> {
    let visible = live_ids.len();
    // The keys of the list being merged: a prefix of `live_ids` until it grows past it.
    let mut len = visible;
    let mut grown: Vec<Value> = Vec::new();
    let mut replace = false;
    for p in patch {
        match p.get(DIRECTIVE_MARKER).and_then(Value::as_str) {
            Some(DELETE_DIRECTIVE) => {
                let Some(key_value) = p.get(merge_key) else {
                    continue;
                };
                while let Some(k) = live_ids[..len].iter().position(|id| id == key_value) {
                    // Go's `append(s[:k], s[k+1:]...)`: shift left, the last slot keeps
                    // its old value.
                    for i in k..len - 1 {
                        live_ids[i] = live_ids[i + 1].clone();
                    }
                    len -= 1;
                }
            }
            Some(REPLACE_DIRECTIVE) => replace = true,
            _ => {}
        }
    }
    if replace {
        return live_ids;
    }
    for p in patch {
        if p.get(DIRECTIVE_MARKER).is_some() {
            continue;
        }
        let Some(key_value) = p.get(merge_key) else {
            continue;
        };
        let present = live_ids[..len].contains(key_value) || grown.contains(key_value);
        if present {
            continue;
        }
        if len < visible {
            live_ids[len] = key_value.clone();
            len += 1;
        } else {
            grown.push(key_value.clone());
        }
    }
    live_ids
}

/// The patch list's elements must appear in `$setElementOrder` in the same relative order
/// (elements deleted with `$patch` are ignored): upstream's `validatePatchWithSetOrderList`.
fn check_against_order(
    patch_list: &[Value],
    order: &[Value],
    merge_key: &'static str,
) -> Result<()> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let kept: Vec<&Value> = if merge_key.is_empty() {
        patch_list.iter().collect()
    } else {
        for item in patch_list {
            if !item.is_object() {
                return Err(Error::BadArgType {
                    path: FieldPath::default(),
                    expected: "map",
                    actual: json_type_name(item),
                });
            }
        }
        patch_list
            .iter()
            .filter(|v| v.get(DIRECTIVE_MARKER).and_then(Value::as_str) != Some(DELETE_DIRECTIVE))
            .collect()
    };
    let (mut p, mut o) = (0, 0);
    while p < kept.len() && o < order.len() {
        if kept[p].get(DIRECTIVE_MARKER).is_some() {
            p += 1;
            continue;
        }
        if merge_key_equal(kept[p], &order[o], merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < kept.len() && o >= order.len() {
        return Err(Error::OrderMismatch {
            path: FieldPath::default(),
            patch: Value::Array(patch_list.to_vec()).to_string(),
            order: Value::Array(order.to_vec()).to_string(),
        });
    }
    Ok(())
}

/// Whether two elements have equal merge-key values (or are equal, for scalars).
fn merge_key_equal(left: &Value, right: &Value, merge_key: &'static str) -> Result<bool> {
    if merge_key.is_empty() {
        return Ok(left == right);
    }
    let key_of = |v: &Value| -> Result<Value> {
        let map = v.as_object().ok_or_else(|| Error::BadArgType {
            path: FieldPath::default(),
            expected: "map",
            actual: json_type_name(v),
        })?;
        map.get(merge_key)
            .cloned()
            .ok_or_else(|| Error::NoMergeKey {
                path: FieldPath::default(),
                map: v.to_string(),
                key: merge_key,
            })
    };
    Ok(key_of(left)? == key_of(right)?)
}

/// Splits `merged` into the elements present in `by` and the others, keeping order
/// (upstream's `partitionPrimitivesByPresentInList`/`partitionMapsByPresentInList`).
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    merge_key: &'static str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut present = Vec::with_capacity(merged.len());
    let mut absent = Vec::new();
    if merge_key.is_empty() {
        for v in merged {
            if by.contains(&v) {
                present.push(v);
            } else {
                absent.push(v);
            }
        }
        return Ok((present, absent));
    }
    check_maps_with_key(&merged, merge_key)?;
    for v in merged {
        let id = identity(&v, merge_key, true);
        let mut found = false;
        for b in by {
            let Some(b) = b.as_object() else {
                return Err(Error::BadArgType {
                    path: FieldPath::default(),
                    expected: "map",
                    actual: json_type_name(b),
                });
            };
            if b.get(merge_key) == Some(id) {
                found = true;
                break;
            }
        }
        if found {
            present.push(v);
        } else {
            absent.push(v);
        }
    }
    Ok((present, absent))
}

/// Merges a list field by its strategy; a `$deleteFromPrimitiveList` list always merges
/// (upstream's `mergeSliceHandler`). Returns the new value of the field.
fn merge_list_field(
    live: Vec<Value>,
    patch: Vec<Value>,
    meta: FieldMeta,
    is_delete_list: bool,
) -> Result<Vec<Value>> {
    if meta.strategy == Strategy::Merge || is_delete_list {
        merge_list(live, patch, meta, is_delete_list)
    } else {
        Ok(patch)
    }
}

/// The JSON type shared by the elements of both lists (upstream's `sliceElementType`).
fn element_type(a: &[Value], b: &[Value]) -> Result<JsonType> {
    let mut found = None;
    for v in a.iter().chain(b) {
        let t = json_type(v);
        match found {
            None if t == JsonType::Array => {
                return Err(Error::NoListOfLists {
                    path: FieldPath::default(),
                });
            }
            None => found = Some(t),
            Some(prev) if prev != t => {
                return Err(Error::MixedElementTypes {
                    path: FieldPath::default(),
                });
            }
            Some(_) => {}
        }
    }
    found.ok_or(Error::NoElements {
        path: FieldPath::default(),
    })
}

/// Merges two lists with the merge strategy (upstream's `mergeSlice`): scalars as a set
/// (or, for a deletion list, by removing values), maps by merge key with `$patch`
/// elements executed; the result is ordered patch-first.
fn merge_list(
    live: Vec<Value>,
    patch: Vec<Value>,
    meta: FieldMeta,
    is_delete_list: bool,
) -> Result<Vec<Value>> {
    if live.is_empty() && patch.is_empty() {
        return Ok(live);
    }
    let is_map = element_type(&live, &patch)? == JsonType::Object;

    if !is_map {
        if is_delete_list {
            return Ok(live.into_iter().filter(|v| !patch.contains(v)).collect());
        }
        let server_order = live.clone();
        let mut both = live;
        both.extend(patch.iter().cloned());
        let merged = dedupe_scalars(both);
        let (in_patch, server_only) = partition(merged, &patch, "")?;
        return normalize_element_order(in_patch, server_only, &patch, &server_order, "", false);
    }

    let merge_key = meta.merge_key;
    if merge_key.is_empty() {
        return Err(Error::NoMergeKeyDeclared {
            path: FieldPath::default(),
            type_name: meta.ty.name,
        });
    }
    let (live, patch) = execute_element_directives(live, patch, merge_key)?;
    let server_order = identities(&live, merge_key, true)?;
    let patch_order = identities(&patch, merge_key, true)?;
    let merged = merge_elements(live, patch, merge_key, meta.ty)?;

    let mut in_patch = Vec::with_capacity(merged.len());
    let mut server_only = Vec::new();
    check_maps_with_key(&merged, merge_key)?;
    for v in merged {
        if patch_order.contains(identity(&v, merge_key, true)) {
            in_patch.push(v);
        } else {
            server_only.push(v);
        }
    }
    normalize_element_order(
        in_patch,
        server_only,
        &patch_order,
        &server_order,
        merge_key,
        true,
    )
}

/// Executes the `$patch` elements of a merging list: `delete` removes every live element
/// with that key, `replace` makes the rest of the patch the whole list. Returns the live
/// list and the patch without them (upstream's `mergeSliceWithSpecialElements`).
fn execute_element_directives(
    mut live: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &'static str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut rest = Vec::with_capacity(patch.len());
    let mut replace = false;
    for v in patch {
        let Some(directive) = v.get(DIRECTIVE_MARKER) else {
            rest.push(v);
            continue;
        };
        match directive.as_str() {
            Some(DELETE_DIRECTIVE) => {
                let Some(key_value) = v.get(merge_key) else {
                    return Err(Error::NoMergeKey {
                        path: FieldPath::default(),
                        map: v.to_string(),
                        key: merge_key,
                    });
                };
                live.retain(|l| l.get(merge_key) != Some(key_value));
            }
            Some(REPLACE_DIRECTIVE) => replace = true,
            Some(MERGE_DIRECTIVE) => {
                return Err(Error::MergeDirectiveInList {
                    path: FieldPath::default(),
                });
            }
            _ => {
                return Err(Error::BadPatchType {
                    path: FieldPath::default(),
                    directive: directive.to_string(),
                    map: v.to_string(),
                });
            }
        }
    }
    if replace {
        Ok((rest, Vec::new()))
    } else {
        Ok((live, rest))
    }
}

/// Merges each patch element into the live element with the same key, or appends it
/// (upstream's `mergeSliceWithoutSpecialElements`).
fn merge_elements(
    mut live: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &'static str,
    element: &'static TypeDef,
) -> Result<Vec<Value>> {
    for v in patch {
        let Value::Object(patch_map) = v else {
            return Err(Error::BadArgType {
                path: FieldPath::default(),
                expected: "map",
                actual: json_type_name(&v),
            });
        };
        let Some(key_value) = patch_map.get(merge_key) else {
            return Err(Error::NoMergeKey {
                path: FieldPath::default(),
                map: Value::Object(patch_map).to_string(),
                key: merge_key,
            });
        };
        let found = live
            .iter()
            .position(|l| l.get(merge_key) == Some(key_value));
        match found {
            Some(i) => {
                let segment = format!("[{merge_key}={key_value}]");
                let live_map = match std::mem::take(&mut live[i]) {
                    Value::Object(m) => m,
                    _ => Object::new(),
                };
                let merged =
                    merge_map(live_map, patch_map, element).map_err(|e| e.within(&segment))?;
                live[i] = Value::Object(merged);
            }
            None => live.push(Value::Object(patch_map)),
        }
    }
    Ok(live)
}
