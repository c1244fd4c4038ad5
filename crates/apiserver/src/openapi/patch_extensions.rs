//! The strategic-merge extensions of the schemas (`x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`, `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`), from the server's patch table.
//!
//! kubectl v1.32 computes `kubectl apply`'s three-way strategic merge patch from the OpenAPI
//! v3 document of the kind (`NewPatchMetaFromOpenAPIV3`); without these extensions every list
//! would be replaced whole. They come from the same table the server merges patches with
//! ([`crate::strategic_merge::Schema`]), so client and server agree on every list.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use crate::openapi::schemas::REF_PREFIX;
use crate::strategic_merge::{Strategy, TypeDef};

/// Annotates the component `name` (and the components its listed fields lead to) with the
/// patch metadata of `ty`.
pub fn annotate(components: &mut Map<String, Value>, name: &str, ty: &'static TypeDef) {
    let mut seen = HashSet::new();
    walk(components, name, ty, &mut seen);
}

fn walk(
    components: &mut Map<String, Value>,
    name: &str,
    ty: &'static TypeDef,
    seen: &mut HashSet<(String, usize)>,
) {
    // A component reached twice with the same type is done; types are recursive in places.
    if !seen.insert((name.to_owned(), std::ptr::from_ref(ty) as usize)) {
        return;
    }
    let mut next: Vec<(String, &'static TypeDef)> = Vec::new();
    {
        let Some(properties) = components
            .get_mut(name)
            .and_then(|s| s.get_mut("properties"))
            .and_then(Value::as_object_mut)
        else {
            return;
        };
        for field in ty.fields {
            let Some(Value::Object(prop)) = properties.get_mut(field.name) else {
                continue;
            };
            let is_array = prop.get("type").and_then(Value::as_str) == Some("array");
            let strategy = match (field.strategy, field.retain_keys) {
                (Strategy::Merge, true) => Some("merge,retainKeys"),
                (Strategy::Merge, false) => Some("merge"),
                (Strategy::Replace, _) => Some("replace"),
                (Strategy::Default, true) => Some("retainKeys"),
                (Strategy::Default, false) => None,
            };
            if let Some(strategy) = strategy {
                prop.insert("x-kubernetes-patch-strategy".to_owned(), json!(strategy));
            }
            if !field.merge_key.is_empty() {
                prop.insert(
                    "x-kubernetes-patch-merge-key".to_owned(),
                    json!(field.merge_key),
                );
            }
            if is_array && field.strategy == Strategy::Merge {
                if field.merge_key.is_empty() {
                    prop.insert("x-kubernetes-list-type".to_owned(), json!("set"));
                } else {
                    prop.insert("x-kubernetes-list-type".to_owned(), json!("map"));
                    prop.insert(
                        "x-kubernetes-list-map-keys".to_owned(),
                        json!([field.merge_key]),
                    );
                }
            }
            // Where the field's type lives: its own ref, its items', or a map's values'.
            let target = if is_array {
                prop.get("items").and_then(referenced)
            } else {
                referenced(&Value::Object(prop.clone()))
            };
            if let Some(target) = target {
                next.push((target, field.ty));
            } else if let Some(values) = field.ty.values
                && let Some(target) = prop.get("additionalProperties").and_then(referenced)
            {
                next.push((target, values));
            }
        }
    }
    for (target, ty) in next {
        walk(components, &target, ty, seen);
    }
}

/// The component a schema refers to: `$ref`, or the single `allOf` entry's.
fn referenced(schema: &Value) -> Option<String> {
    let direct = schema.get("$ref").and_then(Value::as_str);
    let via_all_of = || {
        schema
            .get("allOf")?
            .as_array()?
            .first()?
            .get("$ref")?
            .as_str()
    };
    direct
        .or_else(via_all_of)
        .and_then(|r| r.strip_prefix(REF_PREFIX))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::schemas::{Components, TypedKind};

    #[test]
    fn containers_and_finalizers_carry_upstream_extensions() {
        let mut c = Components::new();
        let name = c.add_kind(&TypedKind::of::<k8s_openapi::api::apps::v1::Deployment>());
        let mut defs = c.finish();
        annotate(&mut defs, &name, &crate::strategic_merge::kinds::DEPLOYMENT);
        let containers = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        let volumes = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["volumes"];
        assert_eq!(volumes["x-kubernetes-patch-strategy"], "merge,retainKeys");
        let env = &defs["io.k8s.api.core.v1.Container"]["properties"]["env"];
        assert_eq!(env["x-kubernetes-patch-merge-key"], "name");
        let finalizers =
            &defs["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["finalizers"];
        assert_eq!(finalizers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(finalizers["x-kubernetes-list-type"], "set");
        let strategy = &defs["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["strategy"];
        assert_eq!(strategy["x-kubernetes-patch-strategy"], "retainKeys");
        let args = &defs["io.k8s.api.core.v1.Container"]["properties"]["args"];
        assert!(args.get("x-kubernetes-patch-strategy").is_none());
    }
}
