//! The API calls of the namespace deleter: the namespace itself (get, `/status`, `/finalize`), discovery, and list/delete of any namespaced resource.
//!
//! [`NamespaceClient`] is the seam: [`ApiNamespaceClient`] talks to the server (upstream's
//! typed namespace client, pods client, discovery client and metadata client),
//! [`FakeNamespaceClient`] keeps namespaces, pods and other objects in memory and records the
//! calls for unit tests (upstream's fake clientset with reactors).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kcm_machinery::controller::api_status;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::core::{ApiResource, DynamicObject, Status};

use kcm_machinery::discovery::GroupVersionResource;
use kcm_machinery::discovery::{self, DiscoveryResult};

/// The requests the namespace deleter makes. Objects of other resources are seen through
/// their metadata only, as upstream's metadata client.
#[async_trait]
pub trait NamespaceClient: Send + Sync {
    /// GETs namespace `name` from the API server (never a cache).
    async fn get_namespace(&self, name: &str) -> Result<Namespace, kube::Error>;

    /// Writes `ns.status` through `/status`, with `ns`'s resourceVersion as the precondition.
    async fn update_status(&self, ns: &Namespace) -> Result<Namespace, kube::Error>;

    /// Writes `ns.spec.finalizers` through `PUT /api/v1/namespaces/{name}/finalize`, with
    /// `ns`'s resourceVersion as the precondition, as client-go's `Namespaces().Finalize`.
    async fn finalize(&self, ns: &Namespace) -> Result<Namespace, kube::Error>;

    /// Lists the pods of `namespace` from the API server.
    async fn list_pods(&self, namespace: &str) -> Result<Vec<Pod>, kube::Error>;

    /// Reads the served resources (`/api`, `/apis` and every group version); group versions
    /// that fail are recorded in the result's `failed`.
    async fn discover(&self) -> Result<DiscoveryResult, kube::Error>;

    /// `DELETE` on the collection of `resource` in `namespace` with background propagation.
    async fn delete_collection(
        &self,
        resource: &ApiResource,
        namespace: &str,
    ) -> Result<(), kube::Error>;

    /// Lists the metadata of every `resource` object in `namespace`.
    async fn list(
        &self,
        resource: &ApiResource,
        namespace: &str,
    ) -> Result<Vec<ObjectMeta>, kube::Error>;

    /// `DELETE`s one `resource` object with background propagation.
    async fn delete(
        &self,
        resource: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<(), kube::Error>;
}

/// [`NamespaceClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiNamespaceClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiNamespaceClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn namespaces(&self) -> Api<Namespace> {
        Api::all(self.client.clone())
    }

    fn dynamic(&self, resource: &ApiResource, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, resource)
    }
}

impl std::fmt::Debug for ApiNamespaceClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiNamespaceClient").finish_non_exhaustive()
    }
}

fn name_of(ns: &Namespace) -> &str {
    ns.metadata.name.as_deref().unwrap_or_default()
}

#[async_trait]
impl NamespaceClient for ApiNamespaceClient {
    async fn get_namespace(&self, name: &str) -> Result<Namespace, kube::Error> {
        self.namespaces().get(name).await
    }

    async fn update_status(&self, ns: &Namespace) -> Result<Namespace, kube::Error> {
        self.namespaces()
            .replace_status(name_of(ns), &PostParams::default(), ns)
            .await
    }

    async fn finalize(&self, ns: &Namespace) -> Result<Namespace, kube::Error> {
        self.namespaces()
            .replace_subresource("finalize", name_of(ns), &PostParams::default(), ns)
            .await
    }

    async fn list_pods(&self, namespace: &str) -> Result<Vec<Pod>, kube::Error> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        Ok(pods.list(&ListParams::default()).await?.items)
    }

    async fn discover(&self) -> Result<DiscoveryResult, kube::Error> {
        discovery::discover(&self.client).await
    }

    async fn delete_collection(
        &self,
        resource: &ApiResource,
        namespace: &str,
    ) -> Result<(), kube::Error> {
        self.dynamic(resource, namespace)
            .delete_collection(&DeleteParams::background(), &ListParams::default())
            .await?;
        Ok(())
    }

    async fn list(
        &self,
        resource: &ApiResource,
        namespace: &str,
    ) -> Result<Vec<ObjectMeta>, kube::Error> {
        let list = self
            .dynamic(resource, namespace)
            .list_metadata(&ListParams::default())
            .await?;
        Ok(list.items.into_iter().map(|item| item.metadata).collect())
    }

    async fn delete(
        &self,
        resource: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<(), kube::Error> {
        self.dynamic(resource, namespace)
            .delete(name, &DeleteParams::background())
            .await?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The fake
// ---------------------------------------------------------------------------------------------

/// One call recorded by [`FakeNamespaceClient`], with the resource as `resource.version.group`.
#[derive(Clone, Debug, PartialEq)]
pub enum NamespaceAction {
    /// `get_namespace(name)`.
    GetNamespace(String),
    /// `update_status` with this object.
    UpdateStatus(Namespace),
    /// `finalize` with this object.
    Finalize(Namespace),
    /// `list_pods(namespace)`.
    ListPods(String),
    /// `discover()`.
    Discover,
    /// `delete_collection(resource, namespace)`.
    DeleteCollection(String, String),
    /// `list(resource, namespace)`.
    List(String, String),
    /// `delete(resource, namespace, name)`.
    Delete(String, String, String),
}

/// One stored object of a resource other than namespaces and pods.
#[derive(Clone, Debug)]
struct FakeObject {
    /// Its metadata (name, namespace, finalizers).
    meta: ObjectMeta,
}

/// What [`FakeNamespaceClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// Namespaces by name; the resourceVersion is bumped on every successful write.
    namespaces: BTreeMap<String, Namespace>,
    /// Pods by namespace, returned by `list_pods` and by `list` of `pods.v1.`.
    pods: BTreeMap<String, Vec<Pod>>,
    /// Other objects by `resource.version.group`, then namespace.
    objects: BTreeMap<String, BTreeMap<String, Vec<FakeObject>>>,
    /// The discovery documents served.
    resource_lists: Vec<APIResourceList>,
    /// Group versions whose discovery fails (with the failure's message).
    failing_group_versions: Vec<(String, String)>,
    /// When set, `discover` fails entirely with this status.
    discovery_error: Option<Status>,
    /// Per call kind (`delete_collection`, `list`, `delete`) and resource, the error to return.
    errors: BTreeMap<(&'static str, String), Status>,
    /// The next `n` namespace writes (`update_status`, `finalize`) fail with a conflict.
    conflicts: usize,
    /// Resources whose deletes mark objects deleting instead of removing them (as objects
    /// with graceful deletion or finalizers do).
    sticky: HashSet<String>,
    /// Every call, in order (failed ones too).
    actions: Vec<NamespaceAction>,
    /// When set, the next call through the client trait panics (and clears it): a sync that
    /// panics once, for the shared worker's panic recovery.
    panic_next_call: bool,
}

/// A [`NamespaceClient`] serving namespaces, pods and other objects from memory and recording
/// calls, as upstream's fake clientset with reactors.
///
/// `delete_collection` and `delete` remove the objects (or, for a
/// [sticky](Self::set_sticky) resource, leave them in place); `finalize` of a namespace being
/// deleted whose finalizers all went away removes the namespace, as the API server does.
#[derive(Debug, Default)]
pub struct FakeNamespaceClient {
    state: Mutex<FakeState>,
}

impl FakeNamespaceClient {
    /// A fake holding nothing and failing nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next call through the client trait panic, once (tests of the shared worker's
    /// panic recovery).
    pub fn panic_on_next_call(&self) {
        self.state().panic_next_call = true;
    }

    /// Panics if [`Self::panic_on_next_call`] armed it; the state's lock is released first, so
    /// the fake stays usable.
    fn take_injected_panic(&self) {
        let armed = std::mem::take(&mut self.state().panic_next_call);
        if armed {
            panic!("FakeNamespaceClient: injected panic");
        }
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `ns` as the server's copy.
    pub fn insert_namespace(&self, ns: Namespace) {
        self.state().namespaces.insert(name_of(&ns).to_owned(), ns);
    }

    /// The server's copy of namespace `name`.
    pub fn namespace(&self, name: &str) -> Option<Namespace> {
        self.state().namespaces.get(name).cloned()
    }

    /// Stores `pod` in its namespace.
    pub fn insert_pod(&self, pod: Pod) {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        self.state().pods.entry(namespace).or_default().push(pod);
    }

    /// Removes pod `name` of `namespace`, as the server does once its grace period and
    /// finalizers are done.
    pub fn remove_pod(&self, namespace: &str, name: &str) {
        if let Some(pods) = self.state().pods.get_mut(namespace) {
            pods.retain(|p| p.metadata.name.as_deref() != Some(name));
        }
    }

    /// Stores an object of `gvr` with metadata `meta` (its namespace set).
    pub fn insert_object(&self, gvr: &GroupVersionResource, meta: ObjectMeta) {
        let namespace = meta.namespace.clone().unwrap_or_default();
        self.state()
            .objects
            .entry(gvr.to_string())
            .or_default()
            .entry(namespace)
            .or_default()
            .push(FakeObject { meta });
    }

    /// How many objects of `gvr` (pods included) `namespace` holds.
    pub fn count(&self, gvr: &GroupVersionResource, namespace: &str) -> usize {
        let state = self.state();
        if is_pods(&gvr.to_string()) {
            return state.pods.get(namespace).map_or(0, Vec::len);
        }
        state
            .objects
            .get(&gvr.to_string())
            .and_then(|by_ns| by_ns.get(namespace))
            .map_or(0, Vec::len)
    }

    /// Serves `list` in discovery.
    pub fn add_resource_list(&self, list: APIResourceList) {
        self.state().resource_lists.push(list);
    }

    /// Makes discovery of `group_version` fail with `message` (the others still answer).
    pub fn fail_group_version(&self, group_version: &str, message: &str) {
        self.state()
            .failing_group_versions
            .push((group_version.to_owned(), message.to_owned()));
    }

    /// Makes `discover` fail entirely with `status` (or succeed again with `None`).
    pub fn set_discovery_error(&self, status: Option<Status>) {
        self.state().discovery_error = status;
    }

    /// Makes every `call` (`"delete_collection"`, `"list"` or `"delete"`) on `gvr` fail with
    /// `status`.
    pub fn fail(&self, call: &'static str, gvr: &GroupVersionResource, status: Status) {
        self.state().errors.insert((call, gvr.to_string()), status);
    }

    /// Makes the next `n` namespace writes fail with a 409 Conflict.
    pub fn set_conflicts(&self, n: usize) {
        self.state().conflicts = n;
    }

    /// Makes deletes of `gvr` leave the objects in place.
    pub fn set_sticky(&self, gvr: &GroupVersionResource) {
        self.state().sticky.insert(gvr.to_string());
    }

    /// Every call so far, in order.
    pub fn actions(&self) -> Vec<NamespaceAction> {
        self.state().actions.clone()
    }

    /// The objects of every `update_status` call so far.
    pub fn status_updates(&self) -> Vec<Namespace> {
        self.state()
            .actions
            .iter()
            .filter_map(|a| match a {
                NamespaceAction::UpdateStatus(ns) => Some(ns.clone()),
                _ => None,
            })
            .collect()
    }

    /// The objects of every `finalize` call so far.
    pub fn finalizes(&self) -> Vec<Namespace> {
        self.state()
            .actions
            .iter()
            .filter_map(|a| match a {
                NamespaceAction::Finalize(ns) => Some(ns.clone()),
                _ => None,
            })
            .collect()
    }

    /// Forgets the recorded calls.
    pub fn clear_actions(&self) {
        self.state().actions.clear();
    }
}

fn is_pods(resource: &str) -> bool {
    resource == "pods.v1."
}

fn api_error(status: &Status) -> kube::Error {
    kube::Error::Api(status.clone().boxed())
}

/// A write of `ns` to the fake: checks the resourceVersion precondition and bumps it.
fn write_namespace(state: &mut FakeState, ns: &Namespace) -> Result<Namespace, kube::Error> {
    let name = name_of(ns).to_owned();
    if state.conflicts > 0 {
        state.conflicts -= 1;
        return Err(api_error(&api_status::conflict(
            "namespaces",
            &name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )));
    }
    let Some(stored) = state.namespaces.get(&name) else {
        return Err(api_error(&api_status::not_found("namespaces", &name)));
    };
    let stored_rv = stored.metadata.resource_version.clone();
    if ns.metadata.resource_version.is_some() && ns.metadata.resource_version != stored_rv {
        return Err(api_error(&api_status::conflict(
            "namespaces",
            &name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )));
    }
    let next: u64 = stored_rv
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
        + 1;
    let mut written = ns.clone();
    written.metadata.resource_version = Some(next.to_string());
    state.namespaces.insert(name, written.clone());
    Ok(written)
}

#[async_trait]
impl NamespaceClient for FakeNamespaceClient {
    async fn get_namespace(&self, name: &str) -> Result<Namespace, kube::Error> {
        self.take_injected_panic();
        let mut state = self.state();
        state
            .actions
            .push(NamespaceAction::GetNamespace(name.to_owned()));
        state
            .namespaces
            .get(name)
            .cloned()
            .ok_or_else(|| api_error(&api_status::not_found("namespaces", name)))
    }

    async fn update_status(&self, ns: &Namespace) -> Result<Namespace, kube::Error> {
        self.take_injected_panic();
        let mut state = self.state();
        state
            .actions
            .push(NamespaceAction::UpdateStatus(ns.clone()));
        let mut merged = match state.namespaces.get(name_of(ns)) {
            Some(stored) => stored.clone(),
            None => ns.clone(),
        };
        merged.status = ns.status.clone();
        merged.metadata.resource_version = ns.metadata.resource_version.clone();
        write_namespace(&mut state, &merged)
    }

    async fn finalize(&self, ns: &Namespace) -> Result<Namespace, kube::Error> {
        self.take_injected_panic();
        let mut state = self.state();
        state.actions.push(NamespaceAction::Finalize(ns.clone()));
        let mut merged = match state.namespaces.get(name_of(ns)) {
            Some(stored) => stored.clone(),
            None => ns.clone(),
        };
        let finalizers = ns.spec.as_ref().and_then(|s| s.finalizers.clone());
        merged.spec.get_or_insert_with(Default::default).finalizers = finalizers;
        merged.metadata.resource_version = ns.metadata.resource_version.clone();
        let written = write_namespace(&mut state, &merged)?;
        let drained = written
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.as_ref())
            .is_none_or(Vec::is_empty)
            && written
                .metadata
                .finalizers
                .as_ref()
                .is_none_or(Vec::is_empty);
        if drained && written.metadata.deletion_timestamp.is_some() {
            state.namespaces.remove(name_of(&written));
        }
        Ok(written)
    }

    async fn list_pods(&self, namespace: &str) -> Result<Vec<Pod>, kube::Error> {
        self.take_injected_panic();
        let mut state = self.state();
        state
            .actions
            .push(NamespaceAction::ListPods(namespace.to_owned()));
        if let Some(status) = state.errors.get(&("list", "pods.v1.".to_owned())) {
            return Err(api_error(status));
        }
        Ok(state.pods.get(namespace).cloned().unwrap_or_default())
    }

    async fn discover(&self) -> Result<DiscoveryResult, kube::Error> {
        self.take_injected_panic();
        let mut state = self.state();
        state.actions.push(NamespaceAction::Discover);
        if let Some(status) = &state.discovery_error {
            return Err(api_error(status));
        }
        let mut result = DiscoveryResult::default();
        for list in &state.resource_lists {
            let group = list
                .group_version
                .split_once('/')
                .map_or("", |(g, _)| g)
                .to_owned();
            let version = list
                .group_version
                .split_once('/')
                .map_or(list.group_version.as_str(), |(_, v)| v)
                .to_owned();
            let versions = result.versions.entry(group.clone()).or_default();
            if !versions.contains(&version) {
                versions.push(version.clone());
            }
            result.preferred_versions.entry(group).or_insert(version);
            result.add_resource_list(list);
        }
        for (gv, message) in &state.failing_group_versions {
            let status = Status::failure(message, "ServiceUnavailable").with_code(503);
            result.failed.push((gv.clone(), api_error(&status)));
        }
        Ok(result)
    }

    async fn delete_collection(
        &self,
        resource: &ApiResource,
        namespace: &str,
    ) -> Result<(), kube::Error> {
        self.take_injected_panic();
        let key = resource_key(resource);
        let mut state = self.state();
        state.actions.push(NamespaceAction::DeleteCollection(
            key.clone(),
            namespace.to_owned(),
        ));
        if let Some(status) = state.errors.get(&("delete_collection", key.clone())) {
            return Err(api_error(status));
        }
        if state.sticky.contains(&key) {
            return Ok(());
        }
        if is_pods(&key) {
            state.pods.remove(namespace);
        } else if let Some(by_ns) = state.objects.get_mut(&key) {
            by_ns.remove(namespace);
        }
        Ok(())
    }

    async fn list(
        &self,
        resource: &ApiResource,
        namespace: &str,
    ) -> Result<Vec<ObjectMeta>, kube::Error> {
        self.take_injected_panic();
        let key = resource_key(resource);
        let mut state = self.state();
        state
            .actions
            .push(NamespaceAction::List(key.clone(), namespace.to_owned()));
        if let Some(status) = state.errors.get(&("list", key.clone())) {
            return Err(api_error(status));
        }
        if is_pods(&key) {
            return Ok(state
                .pods
                .get(namespace)
                .map(|pods| pods.iter().map(|p| p.metadata.clone()).collect())
                .unwrap_or_default());
        }
        Ok(state
            .objects
            .get(&key)
            .and_then(|by_ns| by_ns.get(namespace))
            .map(|objects| objects.iter().map(|o| o.meta.clone()).collect())
            .unwrap_or_default())
    }

    async fn delete(
        &self,
        resource: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<(), kube::Error> {
        self.take_injected_panic();
        let key = resource_key(resource);
        let mut state = self.state();
        state.actions.push(NamespaceAction::Delete(
            key.clone(),
            namespace.to_owned(),
            name.to_owned(),
        ));
        if let Some(status) = state.errors.get(&("delete", key.clone())) {
            return Err(api_error(status));
        }
        if state.sticky.contains(&key) {
            return Ok(());
        }
        let named = |meta: &ObjectMeta| meta.name.as_deref() == Some(name);
        if is_pods(&key) {
            if let Some(pods) = state.pods.get_mut(namespace) {
                pods.retain(|p| !named(&p.metadata));
            }
        } else if let Some(objects) = state
            .objects
            .get_mut(&key)
            .and_then(|by_ns| by_ns.get_mut(namespace))
        {
            objects.retain(|o| !named(&o.meta));
        }
        Ok(())
    }
}

/// `resource.version.group`, the key the fake stores objects under.
fn resource_key(resource: &ApiResource) -> String {
    GroupVersionResource::new(&resource.group, &resource.version, &resource.plural).to_string()
}

#[cfg(test)]
mod tests {
    use kcm_machinery::controller::ApiStatus;
    use kcm_testing::MetaBuilder;

    use super::*;

    fn ns(name: &str, rv: &str) -> Namespace {
        kcm_testing::namespace(name).resource_version(rv).build()
    }

    #[tokio::test]
    async fn fake_namespace_writes_check_and_bump_the_resource_version() {
        let fake = FakeNamespaceClient::new();
        fake.insert_namespace(ns("a", "1"));
        let written = fake.update_status(&ns("a", "1")).await.expect("fresh");
        assert_eq!(written.metadata.resource_version.as_deref(), Some("2"));
        let stale = fake.update_status(&ns("a", "1")).await.expect_err("stale");
        assert!(stale.is_conflict());
        fake.set_conflicts(1);
        assert!(
            fake.finalize(&ns("a", "2"))
                .await
                .expect_err("injected")
                .is_conflict()
        );
        assert!(
            fake.get_namespace("b")
                .await
                .expect_err("missing")
                .is_not_found()
        );
        assert_eq!(fake.actions().len(), 4);
    }

    #[tokio::test]
    async fn fake_finalize_removes_a_drained_namespace_being_deleted() {
        let fake = FakeNamespaceClient::new();
        let mut deleting = ns("a", "1");
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        fake.insert_namespace(deleting.clone());
        fake.finalize(&deleting).await.expect("finalize");
        assert!(fake.namespace("a").is_none());
    }
}
