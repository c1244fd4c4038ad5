//! The directive keys of a strategic merge patch (`$patch`, `$retainKeys`, `$setElementOrder/...`, `$deleteFromPrimitiveList/...`).

use serde_json::Value;

/// The key of the `$patch` directive.
pub(super) const DIRECTIVE_MARKER: &str = "$patch";
/// `$patch: delete`.
pub(super) const DELETE_DIRECTIVE: &str = "delete";
/// `$patch: replace`.
pub(super) const REPLACE_DIRECTIVE: &str = "replace";
/// `$patch: merge`.
pub(super) const MERGE_DIRECTIVE: &str = "merge";
/// The `$retainKeys` directive: the keys a map keeps.
pub(super) const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
/// `$deleteFromPrimitiveList/<field>`: values to remove from a list of scalars.
pub(super) const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
/// `$setElementOrder/<field>`: the order of a merged list.
pub(super) const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

/// Whether `value` holds any directive key (`$patch`, `$retainKeys`,
/// `$setElementOrder/...`, `$deleteFromPrimitiveList/...`) at any depth.
pub(super) fn has_directive_keys(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| is_directive_key(k) || has_directive_keys(v)),
        Value::Array(list) => list.iter().any(has_directive_keys),
        _ => false,
    }
}

/// Removes directive keys left in the merged object (from values the patch added whole, or
/// lists it replaced). Upstream drops them while decoding the result into the typed object;
/// kcm may store the JSON as is, so they are removed here.
pub(super) fn strip_directive_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|k, _| !is_directive_key(k));
            map.values_mut().for_each(strip_directive_keys);
        }
        Value::Array(list) => list.iter_mut().for_each(strip_directive_keys),
        _ => {}
    }
}

fn is_directive_key(k: &str) -> bool {
    k == DIRECTIVE_MARKER
        || k == RETAIN_KEYS_DIRECTIVE
        || k.starts_with("$setElementOrder/")
        || k.starts_with("$deleteFromPrimitiveList/")
}
