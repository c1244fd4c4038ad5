//! Why a strategic merge patch could not be applied.

use serde_json::Value;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A short name of a value's JSON type, for messages.
pub(super) fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// A strategic merge patch that cannot be applied. Every variant but [`Error::NotAnObject`]
/// carries the field path (`spec.containers`) where the problem was found; the path is
/// built while the error travels back up the recursion.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The live object or the patch is not a JSON object (upstream's `ErrBadJSONDoc`).
    #[error("invalid JSON document: the {which} is not a JSON object")]
    NotAnObject {
        /// `"patch"` or `"original object"`.
        which: &'static str,
    },
    /// `$patch` holds something other than `replace`/`delete` (or `delete`/`replace` in a
    /// list element), upstream's `ErrBadPatchType`.
    #[error("{path}: unknown patch type: {directive} in map: {map}")]
    BadPatchType {
        /// Where.
        path: FieldPath,
        /// The directive value, as JSON.
        directive: String,
        /// The map that carries it, as JSON.
        map: String,
    },
    /// `$patch: merge` on a list element: upstream refuses it too.
    #[error("{path}: merging lists cannot yet be specified in the patch")]
    MergeDirectiveInList {
        /// Where.
        path: FieldPath,
    },
    /// An element of a merging list lacks the merge key (upstream's `ErrNoMergeKey`).
    #[error("{path}: map: {map} does not contain declared merge key: {key}")]
    NoMergeKey {
        /// Where.
        path: FieldPath,
        /// The element, as JSON.
        map: String,
        /// The merge key.
        key: &'static str,
    },
    /// A value has the wrong JSON type for its place (upstream's `ErrBadArgType`).
    #[error("{path}: expected a {expected}, but received a {actual}")]
    BadArgType {
        /// Where.
        path: FieldPath,
        /// The JSON type needed.
        expected: &'static str,
        /// The JSON type found.
        actual: &'static str,
    },
    /// A merging list holds lists (upstream's `ErrNoListOfLists`).
    #[error("{path}: lists of lists are not supported")]
    NoListOfLists {
        /// Where.
        path: FieldPath,
    },
    /// The elements of a merging list (live and patch together) differ in JSON type.
    #[error("{path}: list element types are not identical")]
    MixedElementTypes {
        /// Where.
        path: FieldPath,
    },
    /// A `$setElementOrder` list was given for a list that is empty on both sides.
    #[error("{path}: no elements in any of the given slices")]
    NoElements {
        /// Where.
        path: FieldPath,
    },
    /// A list of maps has the merge strategy but no merge key (only possible with a
    /// hand-built schema).
    #[error("{path}: cannot merge lists without merge key for {type_name}")]
    NoMergeKeyDeclared {
        /// Where.
        path: FieldPath,
        /// The element type.
        type_name: &'static str,
    },
    /// A `$deleteFromPrimitiveList` key is malformed (upstream's
    /// `ErrBadPatchFormatForPrimitiveList`).
    #[error("{path}: invalid patch format of primitive list")]
    BadPrimitiveListFormat {
        /// Where.
        path: FieldPath,
    },
    /// A `$setElementOrder` key or value is malformed (upstream's
    /// `ErrBadPatchFormatForSetElementOrderList`).
    #[error("{path}: invalid patch format of setElementOrder list")]
    BadSetElementOrderFormat {
        /// Where.
        path: FieldPath,
    },
    /// `$setElementOrder` and the patch list disagree on the order of their elements.
    #[error("{path}: the order in patch list {patch} doesn't match $setElementOrder list {order}")]
    OrderMismatch {
        /// Where.
        path: FieldPath,
        /// The patch list, as JSON.
        patch: String,
        /// The `$setElementOrder` list, as JSON.
        order: String,
    },
    /// `$retainKeys` is not a list, or the patch sets a field it does not retain (upstream's
    /// `ErrBadPatchFormatForRetainKeys`).
    #[error("{path}: invalid patch format of retainKeys")]
    BadRetainKeysFormat {
        /// Where.
        path: FieldPath,
    },
}

/// Where in the object a problem was found: `spec.containers`, empty for the root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(pub String);

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            f.write_str("<root>")
        } else {
            f.write_str(&self.0)
        }
    }
}

impl Error {
    /// The HTTP status the API server answers with. Upstream's
    /// `interpretStrategicMergePatchError` maps the malformed-document and bad-directive-
    /// format errors to 400 and lists of lists to 422; it lets the rest become 500s, which
    /// would blame the server for a client's patch, so they are 422 here.
    pub fn status_code(&self) -> u16 {
        match self {
            Error::NotAnObject { .. }
            | Error::BadPrimitiveListFormat { .. }
            | Error::BadSetElementOrderFormat { .. }
            | Error::BadRetainKeysFormat { .. } => 400,
            _ => 422,
        }
    }

    /// Prefixes the field path with `segment` (called while unwinding the recursion).
    pub(super) fn within(mut self, segment: &str) -> Self {
        if let Some(FieldPath(path)) = self.path_mut() {
            if !path.is_empty() && !path.starts_with('[') {
                path.insert(0, '.');
            }
            path.insert_str(0, segment);
        }
        self
    }

    fn path_mut(&mut self) -> Option<&mut FieldPath> {
        match self {
            Error::NotAnObject { .. } => None,
            Error::BadPatchType { path, .. }
            | Error::MergeDirectiveInList { path }
            | Error::NoMergeKey { path, .. }
            | Error::BadArgType { path, .. }
            | Error::NoListOfLists { path }
            | Error::MixedElementTypes { path }
            | Error::NoElements { path }
            | Error::NoMergeKeyDeclared { path, .. }
            | Error::BadPrimitiveListFormat { path }
            | Error::BadSetElementOrderFormat { path }
            | Error::OrderMismatch { path, .. }
            | Error::BadRetainKeysFormat { path } => Some(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_is_built_outermost_last() {
        let err = Error::NoListOfLists {
            path: FieldPath::default(),
        }
        .within("containers")
        .within("spec");
        assert_eq!(
            err.to_string(),
            "spec.containers: lists of lists are not supported"
        );
        assert_eq!(err.status_code(), 422);
    }

    #[test]
    fn format_errors_are_bad_requests() {
        let err = Error::BadRetainKeysFormat {
            path: FieldPath::default(),
        };
        assert_eq!(err.status_code(), 400);
        assert_eq!(
            Error::NotAnObject { which: "patch" }.to_string(),
            "invalid JSON document: the patch is not a JSON object"
        );
    }
}
