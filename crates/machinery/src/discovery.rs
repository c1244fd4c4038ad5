//! API discovery for controllers that act on every resource: the REST mapper (kind → resource, scope) and the deletable resources (upstream's `GetDeletableResources`), shared by the garbage collector and the namespace controller.
//!
//! The garbage collector maps every owner reference's apiVersion/kind to a resource to GET
//! it, so it needs the mapping for every served version of every group ([`RestMapper`]). It
//! and the namespace controller act on every resource of the server's preferred versions
//! that supports `delete`, `list` and `watch` ([`deletable_resources`]), less the ones they
//! ignore.
//! Discovery tolerates failing groups, as upstream's partial discovery does: the groups that
//! answered are used, the failures are reported.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{PoisonError, RwLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::core::ApiResource;

/// A resource of one group version, as apimachinery's `GroupVersionResource`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionResource {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version, e.g. `v1`.
    pub version: String,
    /// The plural resource name, e.g. `replicasets`.
    pub resource: String,
}

impl GroupVersionResource {
    /// `group/version/resource`.
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
        }
    }

    /// The group and resource, the key of the ignored-resources set.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }
}

/// Upstream's `%+v` rendering is noisy; this is `resource.version.group` (`pods.v1.`), as
/// `GroupVersionResource.String()`.
impl fmt::Display for GroupVersionResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.resource, self.version, self.group)
    }
}

/// A resource of a group, any version, as apimachinery's `GroupResource`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// The API group; empty for the core group.
    pub group: String,
    /// The plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// `group/resource`.
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }
}

/// One discovered resource.
#[derive(Clone, Debug, PartialEq)]
pub struct DiscoveredResource {
    /// Group, version, kind and plural.
    pub api_resource: ApiResource,
    /// Namespaced (true) or cluster-scoped.
    pub namespaced: bool,
    /// The verbs it supports.
    pub verbs: Vec<String>,
}

impl DiscoveredResource {
    /// Its group/version/resource.
    pub fn gvr(&self) -> GroupVersionResource {
        GroupVersionResource::new(
            &self.api_resource.group,
            &self.api_resource.version,
            &self.api_resource.plural,
        )
    }

    /// Whether it supports every one of `verbs`.
    pub fn supports_all(&self, verbs: &[&str]) -> bool {
        verbs
            .iter()
            .all(|v| self.verbs.iter().any(|have| have == v))
    }
}

/// What the collector learnt from the discovery endpoints.
#[derive(Debug, Default)]
pub struct DiscoveryResult {
    /// Every resource of every served version (subresources excluded).
    pub resources: Vec<DiscoveredResource>,
    /// Each group's preferred version (the core group: `v1`).
    pub preferred_versions: BTreeMap<String, String>,
    /// Each group's versions, preferred first.
    pub versions: BTreeMap<String, Vec<String>>,
    /// Group versions whose resource list could not be read, with the error.
    pub failed: Vec<(String, kube::Error)>,
}

impl DiscoveryResult {
    /// Each group resource once: from its group's preferred version, or, for a resource absent
    /// from it, the first version serving it (upstream's `ServerPreferredResources`).
    pub fn preferred(&self) -> BTreeMap<GroupResource, &DiscoveredResource> {
        let mut chosen: BTreeMap<GroupResource, (usize, &DiscoveredResource)> = BTreeMap::new();
        for r in &self.resources {
            let rank = self
                .versions
                .get(&r.api_resource.group)
                .and_then(|vs| vs.iter().position(|v| v == &r.api_resource.version))
                .unwrap_or(usize::MAX);
            let gr = GroupResource::new(&r.api_resource.group, &r.api_resource.plural);
            match chosen.get(&gr) {
                Some((best, _)) if *best <= rank => {}
                _ => {
                    chosen.insert(gr, (rank, r));
                }
            }
        }
        chosen.into_iter().map(|(gr, (_, r))| (gr, r)).collect()
    }

    /// Adds the resources of one `APIResourceList` (`groupVersion` and its resources).
    pub fn add_resource_list(&mut self, list: &APIResourceList) {
        let (group, version) = match list.group_version.split_once('/') {
            Some((g, v)) => (g.to_owned(), v.to_owned()),
            None => (String::new(), list.group_version.clone()),
        };
        if version.is_empty() || version.contains('/') {
            tracing::info!(group_version = %list.group_version, "ignoring invalid discovered resource");
            return;
        }
        for r in list.resources.iter().filter(|r| !r.name.contains('/')) {
            let group = r
                .group
                .clone()
                .filter(|g| !g.is_empty())
                .unwrap_or(group.clone());
            let version = r
                .version
                .clone()
                .filter(|v| !v.is_empty())
                .unwrap_or(version.clone());
            let api_version = if group.is_empty() {
                version.clone()
            } else {
                format!("{group}/{version}")
            };
            self.resources.push(DiscoveredResource {
                api_resource: ApiResource {
                    group,
                    version,
                    api_version,
                    kind: r.kind.clone(),
                    plural: r.name.clone(),
                },
                namespaced: r.namespaced,
                verbs: r.verbs.clone(),
            });
        }
    }
}

/// Reads `/api`, `/apis` and every group version's resource list. Fails only when neither
/// group list can be read; a failing group version is recorded in `failed` and skipped.
pub async fn discover(client: &kube::Client) -> Result<DiscoveryResult, kube::Error> {
    let mut result = DiscoveryResult::default();
    let mut first_error = None;
    match client.list_core_api_versions().await {
        Ok(core) => {
            if let Some(preferred) = core.versions.first() {
                result
                    .preferred_versions
                    .insert(String::new(), preferred.clone());
            }
            result.versions.insert(String::new(), core.versions.clone());
            for version in &core.versions {
                match client.list_core_api_resources(version).await {
                    Ok(list) => result.add_resource_list(&list),
                    Err(e) => result.failed.push((version.clone(), e)),
                }
            }
        }
        Err(e) => first_error = Some(e),
    }
    match client.list_api_groups().await {
        Ok(groups) => {
            for group in groups.groups {
                let mut versions: Vec<String> =
                    group.versions.iter().map(|v| v.version.clone()).collect();
                if let Some(preferred) = &group.preferred_version {
                    result
                        .preferred_versions
                        .insert(group.name.clone(), preferred.version.clone());
                    versions.retain(|v| v != &preferred.version);
                    versions.insert(0, preferred.version.clone());
                } else if let Some(first) = versions.first() {
                    result
                        .preferred_versions
                        .insert(group.name.clone(), first.clone());
                }
                for gv in &group.versions {
                    match client.list_api_group_resources(&gv.group_version).await {
                        Ok(list) => result.add_resource_list(&list),
                        Err(e) => result.failed.push((gv.group_version.clone(), e)),
                    }
                }
                result.versions.insert(group.name.clone(), versions);
            }
        }
        Err(e) => {
            if let Some(core_error) = first_error {
                tracing::debug!(error = %core_error, "core API versions");
                return Err(e);
            }
        }
    }
    if !result.failed.is_empty() {
        let groups: Vec<&str> = result.failed.iter().map(|(gv, _)| gv.as_str()).collect();
        tracing::info!(?groups, "failed to discover some groups");
    }
    Ok(result)
}

/// The resources the collector monitors: for each group resource, the preferred version's
/// (or, for resources absent from it, the first version serving them), supporting `delete`,
/// `list` and `watch`, minus `ignored`, as upstream's `GetDeletableResources` (built on
/// `ServerPreferredResources` and `SupportsAllVerbs`).
pub fn deletable_resources(
    discovery: &DiscoveryResult,
    ignored: &[GroupResource],
) -> BTreeMap<GroupVersionResource, DiscoveredResource> {
    discovery
        .preferred()
        .into_iter()
        .filter(|(gr, _)| !ignored.contains(gr))
        .filter(|(_, r)| r.supports_all(&["delete", "list", "watch"]))
        .map(|(_, r)| (r.gvr(), r.clone()))
        .collect()
}

/// Where an apiVersion/kind is served.
#[derive(Clone, Debug, PartialEq)]
pub struct RestMapping {
    /// The resource (group, version, plural, kind).
    pub resource: ApiResource,
    /// Namespaced (true) or cluster-scoped.
    pub namespaced: bool,
}

/// Maps apiVersion/kind to resources, as apimachinery's `RESTMapper` built from discovery.
/// Refreshed (replaced wholesale) when the collector re-runs discovery.
#[derive(Debug, Default)]
pub struct RestMapper {
    /// By (group, version, kind).
    mappings: RwLock<HashMap<(String, String, String), RestMapping>>,
}

impl RestMapper {
    /// An empty mapper (every lookup fails).
    pub fn new() -> Self {
        Self::default()
    }

    /// A mapper over `resources`.
    pub fn from_resources<'a>(resources: impl IntoIterator<Item = &'a DiscoveredResource>) -> Self {
        let mapper = Self::new();
        mapper.replace(resources);
        mapper
    }

    /// Replaces every mapping with those of `resources`.
    pub fn replace<'a>(&self, resources: impl IntoIterator<Item = &'a DiscoveredResource>) {
        let mappings = resources
            .into_iter()
            .map(|r| {
                (
                    (
                        r.api_resource.group.clone(),
                        r.api_resource.version.clone(),
                        r.api_resource.kind.clone(),
                    ),
                    RestMapping {
                        resource: r.api_resource.clone(),
                        namespaced: r.namespaced,
                    },
                )
            })
            .collect();
        *self
            .mappings
            .write()
            .unwrap_or_else(PoisonError::into_inner) = mappings;
    }

    /// The resource serving `kind` at `api_version` (`v1`, `apps/v1`), if any version of
    /// discovery knew it, as `RESTMapping(groupKind, version)`.
    pub fn mapping(&self, api_version: &str, kind: &str) -> Option<RestMapping> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        self.mappings
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(group.to_owned(), version.to_owned(), kind.to_owned()))
            .cloned()
    }

    /// How many kinds are mapped.
    pub fn len(&self) -> usize {
        self.mappings
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;

    use super::*;

    fn resource(name: &str, kind: &str, namespaced: bool, verbs: &[&str]) -> APIResource {
        APIResource {
            name: name.into(),
            kind: kind.into(),
            namespaced,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            singular_name: String::new(),
            ..APIResource::default()
        }
    }

    fn list(group_version: &str, resources: Vec<APIResource>) -> APIResourceList {
        APIResourceList {
            group_version: group_version.into(),
            resources,
        }
    }

    const DLW: &[&str] = &["delete", "list", "watch"];

    #[test]
    fn deletable_resources_as_upstream() {
        // Upstream's TestGetDeletableResources "no error" case, plus versions and ignores.
        let mut d = DiscoveryResult::default();
        d.add_resource_list(&list(
            "apps/v1",
            vec![
                resource("pods", "Pod", true, DLW),
                resource("services", "Service", true, &[]),
                resource("pods/status", "Pod", true, DLW),
            ],
        ));
        // Invalid group version: ignored.
        d.add_resource_list(&list(
            "foo//whatever",
            vec![resource("bars", "Bar", true, DLW)],
        ));
        // Missing verbs: ignored.
        d.add_resource_list(&list(
            "acme/v1",
            vec![resource("widgets", "Widget", true, &["delete"])],
        ));
        // Two versions: the preferred one wins; a resource only in the other is kept there.
        d.versions
            .insert("batch".into(), vec!["v1".into(), "v1beta1".into()]);
        d.add_resource_list(&list(
            "batch/v1beta1",
            vec![
                resource("cronjobs", "CronJob", true, DLW),
                resource("oldjobs", "OldJob", true, DLW),
            ],
        ));
        d.add_resource_list(&list(
            "batch/v1",
            vec![resource("cronjobs", "CronJob", true, DLW)],
        ));
        d.add_resource_list(&list("v1", vec![resource("events", "Event", true, DLW)]));
        let events = [
            GroupResource::new("", "events"),
            GroupResource::new("events.k8s.io", "events"),
        ];
        let got: Vec<String> = deletable_resources(&d, &events)
            .keys()
            .map(|gvr| gvr.to_string())
            .collect();
        assert_eq!(
            got,
            vec!["pods.v1.apps", "cronjobs.v1.batch", "oldjobs.v1beta1.batch"]
        );
    }

    #[test]
    fn the_mapper_knows_every_version_and_scope() {
        let mut d = DiscoveryResult::default();
        d.add_resource_list(&list(
            "apps/v1",
            vec![resource("deployments", "Deployment", true, DLW)],
        ));
        d.add_resource_list(&list("v1", vec![resource("nodes", "Node", false, DLW)]));
        let mapper = RestMapper::from_resources(&d.resources);
        let deployments = mapper.mapping("apps/v1", "Deployment").expect("mapped");
        assert_eq!(deployments.resource.plural, "deployments");
        assert!(deployments.namespaced);
        let nodes = mapper.mapping("v1", "Node").expect("mapped");
        assert!(!nodes.namespaced);
        assert_eq!(nodes.resource.api_version, "v1");
        assert_eq!(mapper.mapping("extensions/v1beta1", "Deployment"), None);
        assert_eq!(mapper.mapping("apps/v1", "ReplicaSet"), None);
    }
}
