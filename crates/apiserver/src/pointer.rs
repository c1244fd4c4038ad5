//! JSON Pointer lookups without allocation: [`At::at`] answers as `serde_json::Value::pointer` does, without the two `String`s that method makes for every path segment.

use serde_json::Value;

/// A JSON Pointer (RFC 6901) lookup on a value. The server reads fixed paths such as
/// `/spec/serviceAccountName` many times per request; `Value::pointer` unescapes every
/// segment into a fresh `String`, which made pointer lookups a visible share of a pod
/// create. Paths with an escape (`~0`, `~1`) fall back to `Value::pointer`.
pub trait At {
    /// The value at `pointer` (`""` is the value itself), as `Value::pointer`.
    fn at(&self, pointer: &str) -> Option<&Value>;
}

impl At for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        if pointer.contains('~') {
            return self.pointer(pointer);
        }
        if pointer.is_empty() {
            return Some(self);
        }
        pointer
            .strip_prefix('/')?
            .split('/')
            .try_fold(self, |target, token| match target {
                Value::Object(map) => map.get(token),
                Value::Array(list) => array_index(token).and_then(|i| list.get(i)),
                _ => None,
            })
    }
}

/// An array index as RFC 6901 writes it: decimal digits, no sign, no leading zero.
fn array_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn answers_as_value_pointer_does() {
        let doc = json!({
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "n": null},
            "a/b": 1, "m~n": 2, "": {"": 3}, "01": 4,
            "list": [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20],
        });
        for pointer in [
            "",
            "/",
            "//",
            "/spec",
            "/spec/containers/0/name",
            "/spec/containers/1/name",
            "/spec/containers/2/name",
            "/spec/containers/01/name",
            "/spec/containers/+1/name",
            "/spec/containers/-1/name",
            "/spec/containers/name",
            "/spec/n",
            "/spec/n/deeper",
            "/a~1b",
            "/m~0n",
            "/a/b",
            "/01",
            "/list/10",
            "/list/010",
            "/list/99999999999999999999999",
            "spec",
            "/missing/x",
        ] {
            assert_eq!(doc.at(pointer), doc.pointer(pointer), "{pointer:?}");
        }
    }
}
