//! Discovery documents (`/api`, `/apis`, `/apis/{group}`, `/api/v1`, `/apis/{group}/{version}`), built from the registry.

use serde_json::{Value, json};

use crate::registry::resource::ResourceDef;
use crate::registry::{Registry, Resources};

/// `/api`: the core group's versions.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// The named groups, in first-seen order, with their versions (the preferred one first: a
/// custom resource group's versions come in upstream's priority order).
fn group_versions(resources: &Resources) -> Vec<(&str, Vec<&str>)> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for def in resources.iter() {
        if def.group.is_empty() {
            continue;
        }
        match groups.iter_mut().find(|(g, _)| *g == def.group) {
            Some((_, versions)) => {
                if !versions.contains(&&*def.version) {
                    versions.push(&def.version);
                }
            }
            None => groups.push((&def.group, vec![&def.version])),
        }
    }
    groups
}

fn group_json(group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

/// `/apis`: every named group.
pub fn groups(registry: &Registry) -> Value {
    let resources = registry.resources();
    let groups: Vec<Value> = group_versions(&resources)
        .iter()
        .map(|(g, v)| group_json(g, v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, if the group is served.
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let resources = registry.resources();
    let groups = group_versions(&resources);
    let (g, versions) = groups.iter().find(|(g, _)| *g == name)?;
    let mut doc = group_json(g, versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// The resources of one group version, sorted by name: upstream's installer registers a
/// group version's paths in sorted order, so its discovery documents (and `kubectl
/// api-resources`, which keeps their order within a group) list them alphabetically.
fn served_in<'a>(resources: &'a Resources, group: &str, version: &str) -> Vec<&'a ResourceDef> {
    let mut defs: Vec<&ResourceDef> = resources
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    defs.sort_by(|a, b| a.plural.cmp(&b.plural));
    defs
}

/// `/api/v1` or `/apis/{group}/{version}`, if served.
pub fn resources(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let resources = registry.resources();
    let defs = served_in(&resources, group, version);
    if defs.is_empty() {
        return None;
    }
    let mut list = Vec::new();
    for def in defs {
        let mut entry = json!({
            "name": def.plural,
            "singularName": def.singular(),
            "namespaced": def.namespaced,
            "kind": def.kind,
            "verbs": def.verbs.names(),
        });
        if !def.short_names.is_empty() {
            entry["shortNames"] = json!(def.short_names);
        }
        if !def.categories.is_empty() {
            entry["categories"] = json!(def.categories);
        }
        list.push(entry);
        for sub in def.subresources {
            let (group, version, kind) = sub.kind((&def.group, &def.version, &def.kind));
            let mut entry = json!({
                "name": format!("{}/{}", def.plural, sub.name()),
                "singularName": "",
                "namespaced": def.namespaced,
                "kind": kind,
                "verbs": sub.verbs(),
            });
            // Only a subresource of another group/version names it (upstream omits its own).
            if (group, version) != (&*def.group, &*def.version) {
                entry["group"] = json!(group);
                entry["version"] = json!(version);
            }
            list.push(entry);
        }
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": list,
    }))
}

/// The `apidiscovery.k8s.io` version an `Accept` header asks for (`v2` or `v2beta1`), if it
/// asks for aggregated discovery (`as=APIGroupDiscoveryList`), as kubectl does first.
pub fn aggregated_version(accept: &str) -> Option<&'static str> {
    for range in accept.split(',') {
        let mut params = range.split(';').map(str::trim);
        let media = params.next().unwrap_or("");
        if media != "application/json" {
            continue;
        }
        let (mut group, mut version, mut as_kind) = ("", "", "");
        for p in params {
            match p.split_once('=') {
                Some(("g", v)) => group = v,
                Some(("v", v)) => version = v,
                Some(("as", v)) => as_kind = v,
                _ => {}
            }
        }
        if group == "apidiscovery.k8s.io" && as_kind == "APIGroupDiscoveryList" {
            match version {
                "v2" => return Some("v2"),
                "v2beta1" => return Some("v2beta1"),
                _ => {}
            }
        }
    }
    None
}

/// The `Content-Type` of an aggregated discovery answer.
pub fn aggregated_content_type(version: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
}

/// Aggregated discovery (`apidiscovery.k8s.io` `APIGroupDiscoveryList`): `/api` (`core`) or
/// `/apis`, every group's versions with their resources and subresources in one answer.
pub fn aggregated(registry: &Registry, core: bool, version: &str) -> Value {
    let resources = registry.resources();
    let mut groups: Vec<(&str, Vec<&str>)> = if core {
        vec![("", vec!["v1"])]
    } else {
        group_versions(&resources)
    };
    groups.retain(|(g, _)| g.is_empty() == core);
    let items: Vec<Value> = groups
        .iter()
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = served_in(&resources, group, v)
                        .into_iter()
                        .map(aggregated_resource)
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": group}, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

fn aggregated_resource(def: &ResourceDef) -> Value {
    let subresources: Vec<Value> = def
        .subresources
        .iter()
        .map(|sub| {
            let (group, version, kind) = sub.kind((&def.group, &def.version, &def.kind));
            json!({"subresource": sub.name(), "responseKind": gvk(group, version, kind), "verbs": sub.verbs()})
        })
        .collect();
    let mut entry = json!({
        "resource": def.plural,
        "responseKind": gvk(&def.group, &def.version, &def.kind),
        "scope": if def.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": def.singular(),
        "verbs": def.verbs.names(),
    });
    if !def.short_names.is_empty() {
        entry["shortNames"] = json!(def.short_names);
    }
    if !def.categories.is_empty() {
        entry["categories"] = json!(def.categories);
    }
    if !subresources.is_empty() {
        entry["subresources"] = json!(subresources);
    }
    entry
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::registry::resource::fixtures;
    use crate::storage::memory::MemoryStorage;

    fn registry() -> Registry {
        Registry::with_resources(Arc::new(MemoryStorage::new()), fixtures::ALL)
    }

    #[test]
    fn resource_lists_carry_each_entrys_verbs() {
        let registry = registry();
        let core = resources(&registry, "", "v1").expect("core");
        assert_eq!(core["resources"][0]["name"], "componentstatuses");
        assert_eq!(core["resources"][0]["verbs"], json!(["get", "list"]));
        assert_eq!(core["resources"][0]["shortNames"], json!(["cs"]));
        assert_eq!(core["resources"][0]["singularName"], "componentstatus");
        let authz = resources(&registry, "authorization.k8s.io", "v1").expect("authz");
        assert_eq!(authz["resources"][0]["verbs"], json!(["create"]));
        assert_eq!(authz["resources"][0]["namespaced"], false);
        assert!(resources(&registry, "apps", "v1").is_none());
    }

    #[test]
    fn aggregated_discovery_carries_each_entrys_verbs() {
        let registry = registry();
        let apis = aggregated(&registry, false, "v2");
        let group = &apis["items"][0];
        assert_eq!(group["metadata"]["name"], "authorization.k8s.io");
        let review = &group["versions"][0]["resources"][0];
        assert_eq!(review["resource"], "selfsubjectaccessreviews");
        assert_eq!(review["verbs"], json!(["create"]));
        assert_eq!(review["scope"], "Cluster");
        let core = aggregated(&registry, true, "v2");
        let cs = &core["items"][0]["versions"][0]["resources"][0];
        assert_eq!(cs["verbs"], json!(["get", "list"]));
    }

    #[test]
    fn a_group_versions_resources_are_listed_by_name_as_upstream() {
        let registry = Registry::new(Arc::new(MemoryStorage::new()));
        let rbac = resources(&registry, "rbac.authorization.k8s.io", "v1").expect("rbac");
        let names: Vec<&str> = rbac["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "clusterrolebindings",
                "clusterroles",
                "rolebindings",
                "roles"
            ]
        );
        let core = aggregated(&registry, true, "v2");
        let core: Vec<&str> = core["items"][0]["versions"][0]["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r["resource"].as_str())
            .collect();
        let mut sorted = core.clone();
        sorted.sort_unstable();
        assert_eq!(core, sorted);
        let csr = resources(&registry, "certificates.k8s.io", "v1").expect("certificates");
        let names: Vec<&str> = csr["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "certificatesigningrequests",
                "certificatesigningrequests/approval",
                "certificatesigningrequests/status"
            ]
        );
    }

    #[test]
    fn a_group_prefers_the_version_listed_first() {
        let registry = Registry::with_resources(Arc::new(MemoryStorage::new()), fixtures::HPAS);
        let autoscaling = group(&registry, "autoscaling").expect("served");
        assert_eq!(
            autoscaling["preferredVersion"]["groupVersion"],
            "autoscaling/v2"
        );
        let versions: Vec<&str> = autoscaling["versions"]
            .as_array()
            .expect("versions")
            .iter()
            .filter_map(|v| v["version"].as_str())
            .collect();
        assert_eq!(versions, ["v2", "v1"]);
        let v1 = resources(&registry, "autoscaling", "v1").expect("v1");
        assert_eq!(v1["resources"][0]["kind"], "HorizontalPodAutoscaler");
    }
}
