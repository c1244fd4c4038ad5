//! The dynamic client: resolves a group/version/resource (or kind) through discovery and hands out `Api<DynamicObject>`s for it, as client-go's `dynamic.Interface` with a `RESTMapper`.

use kube::Client;
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject};
use serde::Deserialize;

/// Errors of the dynamic client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Discovery of the group version failed (not served, or the request failed).
    #[error("discovering {group_version}: {source}")]
    Discovery {
        /// The group version asked about (`samplecontroller.k8s.io/v1alpha1`).
        group_version: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The group version is served but has no such resource or kind.
    #[error("{group_version} serves no resource {name:?}")]
    NotServed {
        /// The group version.
        group_version: String,
        /// The plural or kind asked for.
        name: String,
    },
}

/// One discovered resource: how to address it and whether it is namespaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedResource {
    /// Group, version, kind and plural.
    pub api_resource: ApiResource,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// The verbs discovery lists.
    pub verbs: Vec<String>,
}

/// `APIResourceList` as far as the dynamic client reads it.
#[derive(Deserialize)]
struct ResourceList {
    resources: Vec<DiscoveredEntry>,
}

#[derive(Deserialize)]
struct DiscoveredEntry {
    name: String,
    kind: String,
    namespaced: bool,
    #[serde(default)]
    verbs: Vec<String>,
}

/// A client for resources known only at run time. Cheap to clone.
#[derive(Clone)]
pub struct DynamicClient {
    client: Client,
}

impl std::fmt::Debug for DynamicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DynamicClient")
    }
}

impl DynamicClient {
    /// A dynamic client over `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    /// Looks up `name` (a plural such as `foos`, or a kind such as `Foo`) in the discovery
    /// document of `group`/`version` (`""` for core). Subresources are not resources.
    pub async fn resolve(
        &self,
        group: &str,
        version: &str,
        name: &str,
    ) -> Result<ServedResource, Error> {
        let (path, group_version) = if group.is_empty() {
            (format!("/api/{version}"), version.to_owned())
        } else {
            (
                format!("/apis/{group}/{version}"),
                format!("{group}/{version}"),
            )
        };
        let discovery_error = |source| Error::Discovery {
            group_version: group_version.clone(),
            source,
        };
        let request = http::Request::get(&path)
            .body(Vec::new())
            .map_err(|e| discovery_error(kube::Error::HttpError(e)))?;
        let list: ResourceList = self
            .client
            .request(request)
            .await
            .map_err(discovery_error)?;
        let entry = list
            .resources
            .into_iter()
            .filter(|r| !r.name.contains('/'))
            .find(|r| r.name == name || r.kind == name)
            .ok_or_else(|| Error::NotServed {
                group_version: group_version.clone(),
                name: name.to_owned(),
            })?;
        Ok(ServedResource {
            api_resource: ApiResource {
                group: group.to_owned(),
                version: version.to_owned(),
                api_version: group_version,
                kind: entry.kind,
                plural: entry.name,
            },
            namespaced: entry.namespaced,
            verbs: entry.verbs,
        })
    }

    /// The `Api` of a resolved resource: in `namespace` when namespaced and given, else
    /// across all namespaces (cluster-scoped resources ignore `namespace`).
    pub fn api(&self, resource: &ServedResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace.filter(|_| resource.namespaced) {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource.api_resource),
            None => Api::all_with(self.client.clone(), &resource.api_resource),
        }
    }
}
