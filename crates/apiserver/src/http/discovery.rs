//! Discovery documents (`/api`, `/apis`, `/apis/{group}`, `/api/v1`, `/apis/{group}/{version}`), built from the registry.

use serde_json::{Value, json};

use crate::registry::Registry;
use crate::registry::strategy::{ResourceInfo, Subresource};

/// The verbs of every main resource.
const RESOURCE_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// `/api`: the core group's versions.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// The named groups, in first-seen order, with their versions.
fn group_versions(registry: &Registry) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut groups: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for s in registry.resources() {
        let info = s.info();
        if info.group.is_empty() {
            continue;
        }
        match groups.iter_mut().find(|(g, _)| *g == info.group) {
            Some((_, versions)) => {
                if !versions.contains(&info.version) {
                    versions.push(info.version);
                }
            }
            None => groups.push((info.group, vec![info.version])),
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
    let groups: Vec<Value> = group_versions(registry)
        .iter()
        .map(|(g, v)| group_json(g, v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, if the group is served.
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let groups = group_versions(registry);
    let (g, versions) = groups.iter().find(|(g, _)| *g == name)?;
    let mut doc = group_json(g, versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `/api/v1` or `/apis/{group}/{version}`, if served.
pub fn resources(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let infos: Vec<&ResourceInfo> = registry
        .resources()
        .iter()
        .map(|s| s.info())
        .filter(|i| i.group == group && i.version == version)
        .collect();
    if infos.is_empty() {
        return None;
    }
    let mut list = Vec::new();
    for info in infos {
        let mut entry = json!({
            "name": info.plural,
            "singularName": info.singular,
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": RESOURCE_VERBS,
        });
        if !info.short_names.is_empty() {
            entry["shortNames"] = json!(info.short_names);
        }
        if !info.categories.is_empty() {
            entry["categories"] = json!(info.categories);
        }
        list.push(entry);
        for sub in info.subresources {
            let (kind, group, version, verbs): (&str, Option<&str>, Option<&str>, &[&str]) =
                match sub {
                    Subresource::Status => (info.kind, None, None, &["get", "patch", "update"]),
                    Subresource::Scale => (
                        "Scale",
                        Some("autoscaling"),
                        Some("v1"),
                        &["get", "patch", "update"],
                    ),
                    Subresource::Binding => ("Binding", None, None, &["create"]),
                    Subresource::Eviction => ("Eviction", Some("policy"), Some("v1"), &["create"]),
                    Subresource::Finalize => (info.kind, None, None, &["update"]),
                };
            let mut entry = json!({
                "name": format!("{}/{}", info.plural, sub.name()),
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": kind,
                "verbs": verbs,
            });
            if let Some(g) = group {
                entry["group"] = json!(g);
            }
            if let Some(v) = version {
                entry["version"] = json!(v);
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

/// `/version`: a v1.32-style version (kubectl warns about larger skews).
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": concat!("v1.32.0+kcm-", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "rust",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}
