//! The `/scale` subresource: an autoscaling/v1 `Scale` view of `spec.replicas`, `status.replicas` and the selector.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcm_machinery::labels::Selector;
use serde_json::{Value, json};

use crate::error::{ApiError, GroupKind, Result};
use crate::object;
use crate::openapi::field_validation::FieldValidation;
use crate::pointer::At;
use crate::registry::custom::ScalePaths;
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
        .at("/spec/selector")
        .and_then(selector_of)
        .map(|s| s.to_string())
        .unwrap_or_default();
    scale_from(obj, "/spec/replicas", "/status/replicas", selector)
}

/// The `Scale` of a custom resource, read at its CRD's paths (the selector is the string
/// at `labelSelectorPath`, as upstream's custom resource scale).
pub fn custom_scale_of(paths: &ScalePaths, obj: &Value) -> Value {
    let selector = paths
        .label_selector
        .as_deref()
        .and_then(|p| obj.at(p))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    scale_from(obj, &paths.spec_replicas, &paths.status_replicas, selector)
}

/// The `Scale` of `def`'s object `obj`.
fn scale_for(def: &ResourceDef, obj: &Value) -> Value {
    match def.custom.as_ref().and_then(|c| c.scale_paths()) {
        Some(paths) => custom_scale_of(paths, obj),
        None => scale_of(obj),
    }
}

/// A merge patch setting the value at JSON pointer `pointer` (`/spec/replicas`).
fn merge_patch_at(pointer: &str, value: Value) -> Value {
    pointer
        .split('/')
        .filter(|s| !s.is_empty())
        .rev()
        .fold(value, |inner, key| json!({ key: inner }))
}

fn scale_from(obj: &Value, spec_replicas: &str, status_replicas: &str, selector: String) -> Value {
    let mut metadata = json!({
        "name": object::name(obj),
        "uid": object::uid(obj),
        "resourceVersion": object::resource_version(obj),
    });
    if !object::namespace(obj).is_empty() {
        metadata["namespace"] = Value::String(object::namespace(obj).to_owned());
    }
    if let Some(ts) = obj.at("/metadata/creationTimestamp") {
        metadata["creationTimestamp"] = ts.clone();
    }
    let mut status =
        json!({"replicas": obj.at(status_replicas).and_then(Value::as_i64).unwrap_or(0)});
    // `ScaleStatus.selector` is `omitempty`: a custom resource without `labelSelectorPath`
    // shows none.
    if !selector.is_empty() {
        status["selector"] = Value::String(selector);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": obj.at(spec_replicas).and_then(Value::as_i64).unwrap_or(0)},
        "status": status,
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
        Ok(scale_for(def, &self.get(def, namespace, name).await?))
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
        let replicas = match scale.at("/spec/replicas") {
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
        let spec_path = def
            .custom
            .as_ref()
            .and_then(|c| c.scale_paths())
            .map_or("/spec/replicas", |p| p.spec_replicas.as_str());
        let mut patch = merge_patch_at(spec_path, json!(replicas));
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
        Ok(scale_for(def, &updated.object))
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
    fn a_custom_resource_scales_at_its_paths() {
        let paths = ScalePaths {
            spec_replicas: "/spec/size".to_owned(),
            status_replicas: "/status/ready".to_owned(),
            label_selector: Some("/status/selector".to_owned()),
        };
        let foo = json!({"metadata": {"name": "f"}, "spec": {"size": 3},
            "status": {"ready": 1, "selector": "app=f"}});
        let scale = custom_scale_of(&paths, &foo);
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(scale["status"]["replicas"], 1);
        assert_eq!(scale["status"]["selector"], "app=f");
        assert_eq!(
            merge_patch_at("/spec/size", json!(4)),
            json!({"spec": {"size": 4}})
        );
    }

    #[test]
    fn a_custom_resource_without_a_label_selector_path_shows_no_selector() {
        let paths = ScalePaths {
            spec_replicas: "/spec/replicas".to_owned(),
            status_replicas: "/status/availableReplicas".to_owned(),
            label_selector: None,
        };
        let foo = json!({"metadata": {"name": "f"}, "spec": {"replicas": 2}});
        let scale = custom_scale_of(&paths, &foo);
        assert_eq!(scale["status"], json!({"replicas": 0}));
    }

    #[test]
    fn a_replication_controllers_map_selector_renders_as_a_set() {
        let rc = json!({"metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"app": "web", "tier": "front"}}});
        assert_eq!(scale_of(&rc)["status"]["selector"], "app=web,tier=front");
    }
}
