//! Patch types and their application: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch.

use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::registry::resource::ResourceDef;
use crate::strategic_merge::{self, Schema};
use crate::validation::FieldError;

/// A patch's format, from its `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml`: server-side apply (see [`crate::fieldmanager`]).
    Apply,
}

impl PatchType {
    /// Every media type a patch may be sent as.
    pub const MEDIA_TYPES: [&'static str; 4] = [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ];

    /// The patch type of a `Content-Type` (parameters ignored).
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }
}

/// Applies `patch` to `current` and returns the patched object; a strategic merge patch
/// merges lists as `schema` says (the patched document's kind's). A malformed patch is a
/// 400; a JSON patch that cannot be applied (failed `test`, missing path) is a 422, naming
/// `def`'s kind.
pub fn apply_patch(
    def: &ResourceDef,
    schema: Schema,
    current: &Value,
    kind: PatchType,
    patch: &[u8],
) -> Result<Value> {
    let mut doc = current.clone();
    match kind {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(patch)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::patch(&mut doc, &ops).map_err(|e| {
                ApiError::invalid(
                    def.group_kind(),
                    crate::object::name(current),
                    &[FieldError::invalid(
                        "patch",
                        String::from_utf8_lossy(patch).into_owned(),
                        e.to_string(),
                    )],
                )
            })?;
        }
        PatchType::Merge => {
            let p: Value = serde_json::from_slice(patch)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            if !p.is_object() {
                return Err(ApiError::bad_request(
                    "json: cannot unmarshal merge patch: not an object",
                ));
            }
            json_patch::merge(&mut doc, &p);
        }
        PatchType::Apply => {
            return Err(ApiError::unsupported_media_type(
                "application/apply-patch+yaml",
                &PatchType::MEDIA_TYPES[..3],
            ));
        }
        PatchType::StrategicMerge => {
            let p: Value = serde_json::from_slice(patch)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            // Upstream answers malformed strategic patches with 400 (`interpretStrategicMergePatchError`).
            doc = strategic_merge::apply_owned(doc, p, &schema)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::pod;

    #[test]
    fn patch_types() {
        let labeled = json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"l": [1, 2]}});
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"},
            "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "old"}]}});
        struct Case {
            name: &'static str,
            current: Value,
            kind: PatchType,
            patch: &'static str,
            want: Value,
        }
        let cases = [
            Case {
                name: "merge removes with null",
                current: labeled.clone(),
                kind: PatchType::Merge,
                patch: r#"{"metadata": {"labels": {"x": null, "z": "3"}}}"#,
                want: json!({"metadata": {"name": "a", "labels": {"y": "2", "z": "3"}}, "spec": {"l": [1, 2]}}),
            },
            Case {
                name: "json patch",
                current: labeled.clone(),
                kind: PatchType::Json,
                patch: r#"[{"op": "replace", "path": "/spec/l/0", "value": 9}]"#,
                want: json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"l": [9, 2]}}),
            },
            Case {
                name: "strategic merges containers by name",
                current: pod.clone(),
                kind: PatchType::StrategicMerge,
                patch: r#"{"spec": {"containers": [{"name": "b", "image": "new"}]}}"#,
                want: json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"},
                    "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "new"}]}}),
            },
            Case {
                name: "merge replaces lists",
                current: pod.clone(),
                kind: PatchType::Merge,
                patch: r#"{"spec": {"containers": [{"name": "b", "image": "new"}]}}"#,
                want: json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"},
                    "spec": {"containers": [{"name": "b", "image": "new"}]}}),
            },
        ];
        for case in cases {
            let got = apply_patch(
                &pod::PODS,
                pod::PODS.patch_schema(),
                &case.current,
                case.kind,
                case.patch.as_bytes(),
            )
            .expect(case.name);
            assert_eq!(got, case.want, "case {}", case.name);
        }
    }

    #[test]
    fn bad_patches() {
        let current = json!({"metadata": {"name": "a"}});
        let err = apply_patch(
            &pod::PODS,
            pod::PODS.patch_schema(),
            &current,
            PatchType::Merge,
            b"{nope",
        )
        .expect_err("malformed");
        assert_eq!(err.code, 400);
        let err = apply_patch(
            &pod::PODS,
            pod::PODS.patch_schema(),
            &current,
            PatchType::Json,
            br#"[{"op": "test", "path": "/metadata/name", "value": "b"}]"#,
        )
        .expect_err("test fails");
        assert_eq!(err.code, 422);
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml"),
            Some(PatchType::Apply)
        );
        assert_eq!(PatchType::from_content_type("application/cbor"), None);
    }
}
