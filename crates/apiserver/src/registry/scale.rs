//! The `/scale` subresource: an autoscaling/v1 `Scale` view of `spec.replicas`, `status.replicas` and the selector.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcm_machinery::labels::Selector;
use serde_json::{Value, json};

use crate::error::{ApiError, GroupKind, Result};
use crate::object;
use crate::openapi::field_validation::FieldValidation;
use crate::registry::options::WriteOptions;
use crate::registry::patch::{PatchType, apply_patch};
use crate::registry::resource::ResourceDef;
use crate::registry::strategy::typed;
use crate::registry::update::Target;
use crate::registry::{Registry, parse_resource_version};
use crate::strategic_merge::Schema;
use crate::validation::FieldError;

/// The group/kind of `Scale` in errors.
const SCALE_KIND: GroupKind<'static> = GroupKind {
    group: "autoscaling",
    kind: "Scale",
};

/// The `Scale` of a workload object.
pub fn scale_of(obj: &Value) -> Value {
    let selector = obj
        .pointer("/spec/selector")
        .and_then(selector_of)
        .map(|s| s.to_string())
        .unwrap_or_default();
    let mut metadata = json!({
        "name": object::name(obj),
        "uid": object::uid(obj),
        "resourceVersion": object::resource_version(obj),
    });
    if !object::namespace(obj).is_empty() {
        metadata["namespace"] = Value::String(object::namespace(obj).to_owned());
    }
    if let Some(ts) = obj.pointer("/metadata/creationTimestamp") {
        metadata["creationTimestamp"] = ts.clone();
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0)},
        "status": {
            "replicas": obj.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
            "selector": selector,
        },
    })
}

/// A workload's selector: a `LabelSelector`, or a ReplicationController's plain label map
/// (every value a string), which upstream's RC scale renders with `SelectorFromSet`.
fn selector_of(raw: &Value) -> Option<Selector> {
    let map = raw.as_object()?;
    if map.values().all(Value::is_string) {
        return Selector::from_map(&object::string_map(Some(raw))).ok();
    }
    typed::<LabelSelector>(raw).and_then(|ls| Selector::from_label_selector(&ls).ok())
}

impl Registry {
    /// `GET .../{name}/scale`.
    pub async fn get_scale(&self, def: &ResourceDef, namespace: &str, name: &str) -> Result<Value> {
        Ok(scale_of(&self.get(def, namespace, name).await?))
    }

    /// `PUT .../{name}/scale`: writes `spec.replicas`; a `resourceVersion` in the Scale is a
    /// precondition on the object.
    pub async fn update_scale(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        scale: Value,
        opts: &WriteOptions,
    ) -> Result<Value> {
        let kind = scale.get("kind").and_then(Value::as_str).unwrap_or("Scale");
        if kind != "Scale" {
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type Scale): kind {kind:?} does not match"
            )));
        }
        let scale_name = object::name(&scale);
        if !scale_name.is_empty() && scale_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({scale_name}) does not match the name on the URL ({name})"
            )));
        }
        let replicas = match scale.pointer("/spec/replicas") {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_i64()
                .ok_or_else(|| ApiError::bad_request("Scale.spec.replicas must be an integer"))?,
        };
        if replicas < 0 {
            return Err(ApiError::invalid(
                SCALE_KIND,
                name,
                &[FieldError::invalid(
                    "spec.replicas",
                    replicas,
                    "must be greater than or equal to 0",
                )],
            ));
        }
        let precondition = parse_resource_version(object::resource_version(&scale))?;
        let mut patch = json!({"spec": {"replicas": replicas}});
        if let Some(rv) = precondition {
            patch["metadata"] = json!({"resourceVersion": rv.to_string()});
        }
        let bytes = serde_json::to_vec(&patch).map_err(ApiError::internal)?;
        let updated = self
            .patch(
                def,
                namespace,
                name,
                PatchType::Merge,
                &bytes,
                Target::Main,
                &WriteOptions {
                    subresource: "scale",
                    field_validation: FieldValidation::Ignore,
                    ..opts.clone()
                },
            )
            .await?;
        Ok(scale_of(&updated.object))
    }

    /// `PATCH .../{name}/scale`: the patch applies to the current `Scale`.
    pub async fn patch_scale(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: &[u8],
        opts: &WriteOptions,
    ) -> Result<Value> {
        let current = self.get_scale(def, namespace, name).await?;
        // autoscaling/v1 Scale has no patch tags: every list is replaced.
        let patched = apply_patch(def, Schema::unknown(), &current, patch_type, patch)?;
        // An untouched resourceVersion is not a precondition: the patch applies to the latest.
        let mut patched = patched;
        if object::resource_version(&patched) == object::resource_version(&current) {
            object::remove_meta(&mut patched, "resourceVersion");
        }
        self.update_scale(def, namespace, name, patched, opts).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_view() {
        let obj = json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}}, "status": {"replicas": 2}});
        let scale = scale_of(&obj);
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(scale["status"]["replicas"], 2);
        assert_eq!(scale["status"]["selector"], "app=web");
        assert_eq!(scale["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn a_replication_controllers_map_selector_renders_as_a_set() {
        let rc = json!({"metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"app": "web", "tier": "front"}}});
        assert_eq!(scale_of(&rc)["status"]["selector"], "app=web,tier=front");
    }
}
