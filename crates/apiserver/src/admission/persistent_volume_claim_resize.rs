//! PersistentVolumeClaimResize: a claim's storage request may grow only when it is bound and
//! its StorageClass allows volume expansion (upstream's
//! `plugin/pkg/admission/storage/persistentvolume/resize`).

use async_trait::async_trait;
use serde_json::Value;

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::plugins::PERSISTENT_VOLUME_CLAIM_RESIZE;
use crate::admission::source::ObjectSource;
use crate::error::Result;
use crate::pointer::At;
use crate::resources::core::PERSISTENT_VOLUME_CLAIMS;
use crate::resources::quantities::milli_value;
use crate::resources::storage::STORAGE_CLASSES;

/// The beta annotation a claim could name its class with before `storageClassName`.
const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The plugin.
#[derive(Debug, Default)]
pub struct PersistentVolumeClaimResize;

#[async_trait]
impl Plugin for PersistentVolumeClaimResize {
    fn name(&self) -> &'static str {
        PERSISTENT_VOLUME_CLAIM_RESIZE
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Update
    }

    fn validates(&self) -> bool {
        true
    }

    /// upstream's `Validate`: only a growing storage request on the main resource is looked
    /// at; the old claim must be bound, and both claims name the same class, which exists and
    /// has `allowVolumeExpansion: true`.
    async fn validate(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if !a.is_main(&PERSISTENT_VOLUME_CLAIMS) {
            return Ok(());
        }
        let (Some(new), Some(old)) = (a.object.as_ref(), a.old_object) else {
            return Ok(());
        };
        if storage_request(new) <= storage_request(old) {
            return Ok(());
        }
        if old.at("/status/phase").and_then(Value::as_str) != Some("Bound") {
            return Err(a.forbidden("Only bound persistent volume claims can be expanded"));
        }
        if !allows_resize(source, new, old).await? {
            return Err(a.forbidden(
                "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize",
            ));
        }
        Ok(())
    }
}

/// The claim's storage request in milli-units (0 when unset or unparsable).
fn storage_request(claim: &Value) -> i128 {
    claim
        .at("/spec/resources/requests/storage")
        .and_then(Value::as_str)
        .and_then(milli_value)
        .unwrap_or(0)
}

/// The claim's class: the beta annotation, else `storageClassName` (upstream's
/// `GetPersistentVolumeClaimClass`).
fn claim_class(claim: &Value) -> &str {
    claim
        .at("/metadata/annotations")
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
        .or_else(|| claim.at("/spec/storageClassName"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// upstream's `allowResize`: both claims name the same non-empty class, and that class exists
/// with `allowVolumeExpansion: true`.
async fn allows_resize(source: &dyn ObjectSource, new: &Value, old: &Value) -> Result<bool> {
    let class = claim_class(new);
    if class.is_empty() || class != claim_class(old) || !source.serves(&STORAGE_CLASSES) {
        return Ok(false);
    }
    let classes = source.list(&STORAGE_CLASSES, "").await?;
    Ok(classes
        .iter()
        .find(|c| c.at("/metadata/name").and_then(Value::as_str) == Some(class))
        .and_then(|c| c.get("allowVolumeExpansion"))
        .and_then(Value::as_bool)
        .unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::testing::Objects;
    use crate::auth::user::UserInfo;

    fn claim(class: &str, request: &str, phase: &str) -> Value {
        json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"storageClassName": class, "resources": {"requests": {"storage": request}}},
            "status": {"phase": phase},
        })
    }

    #[tokio::test]
    async fn only_bound_claims_of_expandable_classes_may_grow() {
        struct Case {
            name: &'static str,
            old: Value,
            new: Value,
            want: Option<&'static str>,
        }
        let forbidden_class = "persistentvolumeclaims \"c\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";
        let cases = [
            Case {
                name: "growing a bound claim of an expandable class",
                old: claim("gold", "1Gi", "Bound"),
                new: claim("gold", "2Gi", "Bound"),
                want: None,
            },
            Case {
                name: "growing a pending claim",
                old: claim("gold", "1Gi", "Pending"),
                new: claim("gold", "2Gi", "Pending"),
                want: Some(
                    "persistentvolumeclaims \"c\" is forbidden: Only bound persistent volume claims can be expanded",
                ),
            },
            Case {
                name: "a class without allowVolumeExpansion",
                old: claim("silver", "1Gi", "Bound"),
                new: claim("silver", "2Gi", "Bound"),
                want: Some(forbidden_class),
            },
            Case {
                name: "a class that does not exist",
                old: claim("missing", "1Gi", "Bound"),
                new: claim("missing", "2Gi", "Bound"),
                want: Some(forbidden_class),
            },
            Case {
                name: "no class",
                old: claim("", "1Gi", "Bound"),
                new: claim("", "2Gi", "Bound"),
                want: Some(forbidden_class),
            },
            Case {
                name: "the same size is not a resize",
                old: claim("silver", "1Gi", "Pending"),
                new: claim("silver", "1024Mi", "Pending"),
                want: None,
            },
            Case {
                name: "shrinking is left to validation",
                old: claim("silver", "2Gi", "Pending"),
                new: claim("silver", "1Gi", "Pending"),
                want: None,
            },
        ];
        let source = Objects::new(vec![
            (
                &STORAGE_CLASSES,
                json!({"metadata": {"name": "gold"}, "allowVolumeExpansion": true}),
            ),
            (
                &STORAGE_CLASSES,
                json!({"metadata": {"name": "silver"}, "allowVolumeExpansion": false}),
            ),
        ]);
        let user = UserInfo::admin();
        for case in cases {
            let mut a = Attributes::new(
                Operation::Update,
                &PERSISTENT_VOLUME_CLAIMS,
                "ns",
                "c",
                Some(case.new),
                &user,
            )
            .with_old_object(Some(&case.old));
            let got = PersistentVolumeClaimResize.validate(&source, &mut a).await;
            match case.want {
                None => assert!(got.is_ok(), "{}: {got:?}", case.name),
                Some(want) => {
                    let err = got.expect_err(case.name);
                    assert_eq!(err.code, 403, "{}", case.name);
                    assert_eq!(err.message, want, "{}", case.name);
                }
            }
        }
    }
}
