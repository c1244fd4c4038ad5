//! DefaultStorageClass: a new claim naming no class gets the default StorageClass (upstream's `plugin/pkg/admission/storage/storageclass/setdefault`).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::admission::attributes::{Attributes, Operation};
use crate::admission::interfaces::Plugin;
use crate::admission::plugins::DEFAULT_STORAGE_CLASS;
use crate::admission::source::ObjectSource;
use crate::error::Result;
use crate::object;
use crate::pointer::At;
use crate::resources::core::PERSISTENT_VOLUME_CLAIMS;
use crate::resources::storage::STORAGE_CLASSES;

/// The annotation marking a default class.
pub const IS_DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// The beta annotation, still honoured.
pub const BETA_IS_DEFAULT_CLASS_ANNOTATION: &str =
    "storageclass.beta.kubernetes.io/is-default-class";
/// The beta annotation a claim could name its class with before `storageClassName`.
const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The plugin.
#[derive(Debug, Default)]
pub struct DefaultStorageClass;

#[async_trait]
impl Plugin for DefaultStorageClass {
    fn name(&self) -> &'static str {
        DEFAULT_STORAGE_CLASS
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Create
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn admit(&self, source: &dyn ObjectSource, a: &mut Attributes<'_>) -> Result<()> {
        if !a.is_main(&PERSISTENT_VOLUME_CLAIMS) || !source.serves(&STORAGE_CLASSES) {
            return Ok(());
        }
        if a.object.as_ref().is_none_or(has_class) {
            return Ok(());
        }
        let Some(class) = default_class(source).await? else {
            return Ok(());
        };
        if let Some(claim) = a.object.as_mut()
            && let Some(spec) = claim.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.insert("storageClassName".to_owned(), json!(object::name(&class)));
        }
        Ok(())
    }
}

/// Whether the claim asked for a class: `storageClassName` set (even to `""`, which asks for
/// none) or the beta annotation (upstream's `PersistentVolumeClaimHasClass`).
fn has_class(claim: &Value) -> bool {
    claim
        .at("/spec/storageClassName")
        .is_some_and(|c| !c.is_null())
        || claim
            .at("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(BETA_STORAGE_CLASS_ANNOTATION))
}

/// The default class: of several, the newest (then the first by name), as upstream's
/// `GetDefaultClass`.
async fn default_class(source: &dyn ObjectSource) -> Result<Option<Arc<Value>>> {
    let mut defaults: Vec<Arc<Value>> = source
        .list(&STORAGE_CLASSES, "")
        .await?
        .into_iter()
        .filter(|c| is_default(c))
        .collect();
    defaults.sort_by(|a, b| {
        let created = |o: &Value| {
            o.at("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        created(b)
            .cmp(&created(a))
            .then_with(|| object::name(a).cmp(object::name(b)))
    });
    Ok(defaults.into_iter().next())
}

/// Whether a class is marked default (`"true"` on either annotation).
fn is_default(class: &Value) -> bool {
    let annotations = class.at("/metadata/annotations");
    [
        IS_DEFAULT_CLASS_ANNOTATION,
        BETA_IS_DEFAULT_CLASS_ANNOTATION,
    ]
    .iter()
    .any(|k| annotations.and_then(|a| a.get(*k)).and_then(Value::as_str) == Some("true"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::testing::Objects;
    use crate::auth::user::UserInfo;

    fn class(name: &str, default: bool, created: &str) -> Value {
        let annotations = if default {
            json!({IS_DEFAULT_CLASS_ANNOTATION: "true"})
        } else {
            json!({})
        };
        json!({"metadata": {"name": name, "annotations": annotations, "creationTimestamp": created}})
    }

    #[tokio::test]
    async fn a_claim_without_a_class_gets_the_newest_default() {
        struct Case {
            name: &'static str,
            classes: Vec<Value>,
            claim_spec: Value,
            want: Value,
        }
        let cases = [
            Case {
                name: "no default class: nothing set",
                classes: vec![class("slow", false, "2025-01-01T00:00:00Z")],
                claim_spec: json!({}),
                want: Value::Null,
            },
            Case {
                name: "the default is set",
                classes: vec![
                    class("slow", false, "2025-01-01T00:00:00Z"),
                    class("standard", true, "2025-01-01T00:00:00Z"),
                ],
                claim_spec: json!({}),
                want: json!("standard"),
            },
            Case {
                name: "of two defaults the newest",
                classes: vec![
                    class("old", true, "2025-01-01T00:00:00Z"),
                    class("new", true, "2025-06-01T00:00:00Z"),
                ],
                claim_spec: json!({}),
                want: json!("new"),
            },
            Case {
                name: "an explicit empty class is kept",
                classes: vec![class("standard", true, "2025-01-01T00:00:00Z")],
                claim_spec: json!({"storageClassName": ""}),
                want: json!(""),
            },
            Case {
                name: "a named class is kept",
                classes: vec![class("standard", true, "2025-01-01T00:00:00Z")],
                claim_spec: json!({"storageClassName": "fast"}),
                want: json!("fast"),
            },
        ];
        let user = UserInfo::admin();
        for case in cases {
            let source = Objects::new(
                case.classes
                    .into_iter()
                    .map(|c| (&STORAGE_CLASSES, c))
                    .collect(),
            );
            let claim = json!({"metadata": {"name": "c"}, "spec": case.claim_spec});
            let mut a = Attributes::new(
                Operation::Create,
                &PERSISTENT_VOLUME_CLAIMS,
                "ns",
                "c",
                Some(claim),
                &user,
            );
            DefaultStorageClass
                .admit(&source, &mut a)
                .await
                .expect("admit");
            let got = a.object.unwrap_or_default();
            assert_eq!(got["spec"]["storageClassName"], case.want, "{}", case.name);
        }
    }
}
