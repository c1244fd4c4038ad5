//! The CustomResourceDefinition strategy: upstream's `customresourcedefinition/strategy.go` (status owned by the server, `storedVersions` kept, validation) and its REST `Delete` (cleanup finalizer, `Terminating`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use super::{CLEANUP_FINALIZER, crd_validation};
use crate::object;
use crate::pointer::At;
use crate::registry::strategy::{MetadataReset, Strategy, typed, typed_roundtrip};
use crate::validation::FieldError;

/// The strategy of `customresourcedefinitions`.
#[derive(Clone, Copy, Debug, Default)]
pub struct CrdStrategy;

/// Decodes a CRD with upstream's v1 defaults: `names.singular` (the lower-cased kind),
/// `names.listKind` (`{kind}List`) and `conversion.strategy: None`.
pub fn decode(obj: Value) -> Result<Value, String> {
    typed_roundtrip(obj, |crd: &mut CustomResourceDefinition| {
        let names = &mut crd.spec.names;
        if names.singular.as_deref().unwrap_or("").is_empty() {
            names.singular = Some(names.kind.to_ascii_lowercase());
        }
        if names.list_kind.as_deref().unwrap_or("").is_empty() && !names.kind.is_empty() {
            names.list_kind = Some(format!("{}List", names.kind));
        }
        let conversion = crd.spec.conversion.get_or_insert_with(Default::default);
        if conversion.strategy.is_empty() {
            conversion.strategy = "None".to_owned();
        }
    })
}

/// The storage version of a CRD (its one version with `storage: true`).
fn storage_version(obj: &Value) -> Option<&str> {
    obj.at("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?
        .get("name")?
        .as_str()
}

/// Adds the storage version to `status.storedVersions` if missing.
fn record_stored_version(obj: &mut Value) {
    let Some(storage) = storage_version(obj).map(str::to_owned) else {
        return;
    };
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let stored = &mut obj["status"]["storedVersions"];
    match stored.as_array_mut() {
        Some(list) => {
            if !list.iter().any(|v| v.as_str() == Some(&storage)) {
                list.push(json!(storage));
            }
        }
        None => *stored = json!([storage]),
    }
}

/// Sets (or replaces) the condition `ty` on a CRD's status.
pub fn set_condition(obj: &mut Value, ty: &str, status: &str, reason: &str, message: &str) {
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let conditions = &mut obj["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Some(list) = conditions.as_array_mut() else {
        return;
    };
    let now = object::now_rfc3339();
    match list.iter_mut().find(|c| c["type"] == ty) {
        Some(c) => {
            if c["status"] != status {
                c["lastTransitionTime"] = json!(now);
            }
            c["status"] = json!(status);
            c["reason"] = json!(reason);
            c["message"] = json!(message);
        }
        None => list.push(json!({"type": ty, "status": status, "reason": reason,
            "message": message, "lastTransitionTime": now})),
    }
}

impl Strategy for CrdStrategy {
    /// The CRD `statusStrategy.PrepareForUpdate`: labels, annotations and owner references
    /// keep their stored values (finalizers may change: the cleanup finalizer goes this way).
    fn status_metadata_reset(&self) -> MetadataReset {
        MetadataReset::Fields(&["labels", "annotations", "ownerReferences"])
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
        record_stored_version(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        record_stored_version(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        match typed::<CustomResourceDefinition>(obj) {
            Some(crd) => crd_validation::validate(&crd),
            None => vec![FieldError::invalid_omitting_value(
                "spec",
                "not a CustomResourceDefinition",
            )],
        }
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        match (
            typed::<CustomResourceDefinition>(new),
            typed::<CustomResourceDefinition>(old),
        ) {
            (Some(new), Some(old)) => crd_validation::validate_update(&new, &old),
            _ => self.validate(new),
        }
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let Some(crd) = typed::<CustomResourceDefinition>(new) else {
            return Vec::new();
        };
        crd.status
            .as_ref()
            .and_then(|s| s.accepted_names.as_ref())
            .map(|n| crd_validation::validate_names(n, "status.acceptedNames"))
            .unwrap_or_default()
    }

    /// Upstream's CRD `Delete`: the cleanup finalizer holds the CRD until the finalizing
    /// controller has deleted every custom resource.
    fn prepare_for_delete(&self, obj: &mut Value) -> bool {
        let mut finalizers = object::finalizers(obj);
        if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.push(CLEANUP_FINALIZER.to_owned());
            object::set_finalizers(obj, finalizers);
        }
        set_condition(
            obj,
            "Terminating",
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_stored_versions() {
        let decoded = decode(
            json!({"metadata": {"name": "foos.a.b"}, "spec": {"group": "a.b",
            "scope": "Namespaced", "names": {"plural": "foos", "kind": "Foo"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}}),
        )
        .expect("decodes");
        assert_eq!(decoded["spec"]["names"]["singular"], "foo");
        assert_eq!(decoded["spec"]["names"]["listKind"], "FooList");
        assert_eq!(decoded["spec"]["conversion"]["strategy"], "None");
        let mut created = decoded.clone();
        CrdStrategy.prepare_for_create(&mut created);
        assert_eq!(created["status"]["storedVersions"], json!(["v1"]));
        let mut updated = decoded.clone();
        updated["spec"]["versions"] = json!([{"name": "v1", "served": true, "storage": false},
            {"name": "v2", "served": true, "storage": true}]);
        updated["status"] = created["status"].clone();
        CrdStrategy.prepare_for_update(&mut updated, &created);
        assert_eq!(updated["status"]["storedVersions"], json!(["v1", "v2"]));
    }

    #[test]
    fn the_first_delete_adds_the_cleanup_finalizer_and_terminating() {
        let mut crd = json!({"metadata": {"name": "foos.a.b"}});
        assert!(CrdStrategy.prepare_for_delete(&mut crd));
        assert_eq!(crd["metadata"]["finalizers"], json!([CLEANUP_FINALIZER]));
        assert_eq!(crd["status"]["conditions"][0]["type"], "Terminating");
        assert_eq!(
            crd["status"]["conditions"][0]["reason"],
            "InstanceDeletionPending"
        );
    }
}
