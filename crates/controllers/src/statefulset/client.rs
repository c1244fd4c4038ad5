//! The API calls of the StatefulSet controller: the set's uncached GET and `/status` update ([`StatefulSetClient`]) and the pod and claim writes ([`StatefulPodObjectManager`]), each with a real implementation and a fake.
//!
//! Upstream splits these the same way: `kubeClient.AppsV1().StatefulSets` for the set, and
//! `StatefulPodControlObjectManager` (writes through the clientset, reads from listers) for
//! pods and claims, with the `fakeObjectManager` its tests use. The fakes here keep the
//! objects in the informer caches the controller reads, so a test sees its own writes.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodStatus};
use kcm_machinery::controller::api_status;
use kcm_machinery::informer::keys::object_key;
use kcm_machinery::informer::store::Indexer;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::Status;

/// The StatefulSet calls the controller makes to the API server, bypassing the cache.
#[async_trait]
pub trait StatefulSetClient: Send + Sync {
    /// Reads `namespace/name` from the API server.
    async fn get(&self, namespace: &str, name: &str) -> Result<StatefulSet, kube::Error>;

    /// Writes `set.status` through `/status` (its resourceVersion is the precondition).
    async fn update_status(&self, set: &StatefulSet) -> Result<StatefulSet, kube::Error>;
}

/// [`StatefulSetClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiStatefulSetClient {
    client: kube::Client,
}

impl ApiStatefulSetClient {
    /// StatefulSet calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, namespace: &str) -> Api<StatefulSet> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiStatefulSetClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiStatefulSetClient")
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl StatefulSetClient for ApiStatefulSetClient {
    async fn get(&self, namespace: &str, name: &str) -> Result<StatefulSet, kube::Error> {
        self.api(namespace).get(name).await
    }

    async fn update_status(&self, set: &StatefulSet) -> Result<StatefulSet, kube::Error> {
        let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
        let name = set.metadata.name.as_deref().unwrap_or_default();
        self.api(namespace)
            .replace_status(name, &PostParams::default(), set)
            .await
    }
}

/// The pod and claim operations of the StatefulSet controller, as upstream's
/// `StatefulPodControlObjectManager`: writes go to the API server, reads to the caches.
#[async_trait]
pub trait StatefulPodObjectManager: Send + Sync {
    /// Creates `pod` (its name is set).
    async fn create_pod(&self, pod: &Pod) -> Result<(), kube::Error>;
    /// The cached pod `namespace/name` (a NotFound error when absent).
    fn get_pod(&self, namespace: &str, name: &str) -> Result<Arc<Pod>, kube::Error>;
    /// Replaces `pod`.
    async fn update_pod(&self, pod: &Pod) -> Result<(), kube::Error>;
    /// Deletes `pod`.
    async fn delete_pod(&self, pod: &Pod) -> Result<(), kube::Error>;
    /// Creates `claim`.
    async fn create_claim(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error>;
    /// The cached claim `namespace/name` (a NotFound error when absent).
    fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<PersistentVolumeClaim>, kube::Error>;
    /// Replaces `claim`.
    async fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error>;
}

fn not_found(resource: &str, name: &str) -> kube::Error {
    kube::Error::Api(api_status::not_found(resource, name).boxed())
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    object_key(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// [`StatefulPodObjectManager`] over a `kube::Client` and the pod and claim caches.
#[derive(Clone)]
pub struct ApiObjectManager {
    client: kube::Client,
    pods: Indexer<Pod>,
    claims: Indexer<PersistentVolumeClaim>,
}

impl ApiObjectManager {
    /// Writes through `client`, reads from `pods` and `claims`.
    pub fn new(
        client: kube::Client,
        pods: Indexer<Pod>,
        claims: Indexer<PersistentVolumeClaim>,
    ) -> Self {
        Self {
            client,
            pods,
            claims,
        }
    }

    fn pods_api(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn claims_api(&self, namespace: &str) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiObjectManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiObjectManager").finish_non_exhaustive()
    }
}

#[async_trait]
impl StatefulPodObjectManager for ApiObjectManager {
    async fn create_pod(&self, pod: &Pod) -> Result<(), kube::Error> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        self.pods_api(namespace)
            .create(&PostParams::default(), pod)
            .await
            .map(drop)
    }

    fn get_pod(&self, namespace: &str, name: &str) -> Result<Arc<Pod>, kube::Error> {
        self.pods
            .get_by_key(&object_key(namespace, name))
            .ok_or_else(|| not_found("pods", name))
    }

    async fn update_pod(&self, pod: &Pod) -> Result<(), kube::Error> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        self.pods_api(namespace)
            .replace(name, &PostParams::default(), pod)
            .await
            .map(drop)
    }

    async fn delete_pod(&self, pod: &Pod) -> Result<(), kube::Error> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        self.pods_api(namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(drop)
    }

    async fn create_claim(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        self.claims_api(namespace)
            .create(&PostParams::default(), claim)
            .await
            .map(drop)
    }

    fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<PersistentVolumeClaim>, kube::Error> {
        self.claims
            .get_by_key(&object_key(namespace, name))
            .ok_or_else(|| not_found("persistentvolumeclaims", name))
    }

    async fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        self.claims_api(namespace)
            .replace(name, &PostParams::default(), claim)
            .await
            .map(drop)
    }
}

/// One write recorded by [`FakeObjectManager`]: the verb (`create_pod`, `update_pod`,
/// `delete_pod`, `create_claim`, `update_claim`) and the object's `namespace/name`.
pub type ObjectAction = (&'static str, String);

#[derive(Default)]
struct FakeState {
    actions: Vec<ObjectAction>,
    /// Per verb: the status to fail with, and after how many successful calls.
    errors: HashMap<&'static str, (Status, usize)>,
    calls: HashMap<&'static str, usize>,
}

/// A [`StatefulPodObjectManager`] over the caches themselves, as upstream's
/// `fakeObjectManager`: a created pod lands in the pod cache (Pending, with a UID, as the API
/// server would make it), deletions remove it at once, claims likewise. Records every write;
/// fails the verbs it is told to.
pub struct FakeObjectManager {
    pods: Indexer<Pod>,
    claims: Indexer<PersistentVolumeClaim>,
    state: Mutex<FakeState>,
    next_uid: AtomicU64,
}

impl std::fmt::Debug for FakeObjectManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeObjectManager").finish_non_exhaustive()
    }
}

impl FakeObjectManager {
    /// A fake writing into `pods` and `claims`.
    pub fn new(pods: Indexer<Pod>, claims: Indexer<PersistentVolumeClaim>) -> Self {
        Self {
            pods,
            claims,
            state: Mutex::default(),
            next_uid: AtomicU64::new(1),
        }
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes calls of `verb` fail with `status` after `after` more successful ones (`None`
    /// clears it).
    pub fn set_error(&self, verb: &'static str, status: Option<Status>, after: usize) {
        let mut state = self.state();
        state.calls.remove(verb);
        match status {
            Some(s) => state.errors.insert(verb, (s, after)),
            None => state.errors.remove(verb),
        };
    }

    /// Every write so far.
    pub fn actions(&self) -> Vec<ObjectAction> {
        self.state().actions.clone()
    }

    /// The `namespace/name`s of the writes of `verb`, in order.
    pub fn of(&self, verb: &str) -> Vec<String> {
        self.state()
            .actions
            .iter()
            .filter(|(v, _)| *v == verb)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// Forgets the recorded writes.
    pub fn clear(&self) {
        self.state().actions.clear();
    }

    fn record(&self, verb: &'static str, key: String) -> Result<(), kube::Error> {
        let mut state = self.state();
        state.actions.push((verb, key));
        let calls = state.calls.entry(verb).or_insert(0);
        *calls += 1;
        let calls = *calls;
        match state.errors.get(verb) {
            Some((status, after)) if calls > *after => {
                Err(kube::Error::Api(status.clone().boxed()))
            }
            _ => Ok(()),
        }
    }

    fn uid(&self) -> String {
        format!("fake-uid-{}", self.next_uid.fetch_add(1, Ordering::Relaxed))
    }
}

#[async_trait]
impl StatefulPodObjectManager for FakeObjectManager {
    async fn create_pod(&self, pod: &Pod) -> Result<(), kube::Error> {
        let key = key_of(&pod.metadata);
        self.record("create_pod", key.clone())?;
        if self.pods.get_by_key(&key).is_some() {
            let name = pod.metadata.name.clone().unwrap_or_default();
            return Err(kube::Error::Api(
                api_status::already_exists("pods", &name).boxed(),
            ));
        }
        let mut created = pod.clone();
        created.metadata.uid = Some(self.uid());
        created.metadata.resource_version = Some("1".into());
        created.status = Some(PodStatus {
            phase: Some("Pending".into()),
            ..PodStatus::default()
        });
        let _ = self.pods.add(Arc::new(created));
        Ok(())
    }

    fn get_pod(&self, namespace: &str, name: &str) -> Result<Arc<Pod>, kube::Error> {
        self.pods
            .get_by_key(&object_key(namespace, name))
            .ok_or_else(|| not_found("pods", name))
    }

    async fn update_pod(&self, pod: &Pod) -> Result<(), kube::Error> {
        self.record("update_pod", key_of(&pod.metadata))?;
        let _ = self.pods.update(Arc::new(pod.clone()));
        Ok(())
    }

    async fn delete_pod(&self, pod: &Pod) -> Result<(), kube::Error> {
        let key = key_of(&pod.metadata);
        self.record("delete_pod", key.clone())?;
        match self.pods.get_by_key(&key) {
            Some(existing) => {
                let _ = self.pods.delete(&existing);
                Ok(())
            }
            None => Err(not_found(
                "pods",
                pod.metadata.name.as_deref().unwrap_or_default(),
            )),
        }
    }

    async fn create_claim(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        let key = key_of(&claim.metadata);
        self.record("create_claim", key.clone())?;
        if self.claims.get_by_key(&key).is_some() {
            let name = claim.metadata.name.clone().unwrap_or_default();
            return Err(kube::Error::Api(
                api_status::already_exists("persistentvolumeclaims", &name).boxed(),
            ));
        }
        let mut created = claim.clone();
        created.metadata.uid = Some(self.uid());
        let _ = self.claims.add(Arc::new(created));
        Ok(())
    }

    fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<PersistentVolumeClaim>, kube::Error> {
        self.claims
            .get_by_key(&object_key(namespace, name))
            .ok_or_else(|| not_found("persistentvolumeclaims", name))
    }

    async fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        self.record("update_claim", key_of(&claim.metadata))?;
        let _ = self.claims.update(Arc::new(claim.clone()));
        Ok(())
    }
}

/// One call recorded by [`FakeStatefulSetClient`].
#[derive(Clone, Debug, PartialEq)]
pub enum StatefulSetAction {
    /// A `get` of `namespace/name`.
    Get(String),
    /// An `update_status` with this object.
    UpdateStatus(StatefulSet),
}

#[derive(Default)]
struct FakeSetState {
    objects: BTreeMap<String, StatefulSet>,
    actions: Vec<StatefulSetAction>,
    update_errors: Vec<Status>,
}

/// A [`StatefulSetClient`] serving objects from memory, mirroring status writes into an
/// optional cache, and recording calls.
#[derive(Default)]
pub struct FakeStatefulSetClient {
    state: Mutex<FakeSetState>,
    cache: Option<Indexer<StatefulSet>>,
}

impl std::fmt::Debug for FakeStatefulSetClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeStatefulSetClient")
            .finish_non_exhaustive()
    }
}

impl FakeStatefulSetClient {
    /// A fake holding nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fake whose status writes also land in `cache`.
    pub fn with_cache(cache: Indexer<StatefulSet>) -> Self {
        Self {
            state: Mutex::default(),
            cache: Some(cache),
        }
    }

    fn state(&self) -> MutexGuard<'_, FakeSetState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `set` as the server's copy.
    pub fn insert(&self, set: StatefulSet) {
        self.state().objects.insert(key_of(&set.metadata), set);
    }

    /// Makes the next `update_status` calls fail, one per status given, in order.
    pub fn fail_updates(&self, statuses: Vec<Status>) {
        self.state().update_errors = statuses;
    }

    /// The statuses written so far.
    pub fn status_updates(&self) -> Vec<StatefulSet> {
        self.state()
            .actions
            .iter()
            .filter_map(|a| match a {
                StatefulSetAction::UpdateStatus(s) => Some(s.clone()),
                StatefulSetAction::Get(_) => None,
            })
            .collect()
    }

    /// Every call so far.
    pub fn actions(&self) -> Vec<StatefulSetAction> {
        self.state().actions.clone()
    }
}

#[async_trait]
impl StatefulSetClient for FakeStatefulSetClient {
    async fn get(&self, namespace: &str, name: &str) -> Result<StatefulSet, kube::Error> {
        let key = object_key(namespace, name);
        let mut state = self.state();
        state.actions.push(StatefulSetAction::Get(key.clone()));
        state
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found("statefulsets.apps", name))
    }

    async fn update_status(&self, set: &StatefulSet) -> Result<StatefulSet, kube::Error> {
        let mut state = self.state();
        state
            .actions
            .push(StatefulSetAction::UpdateStatus(set.clone()));
        if !state.update_errors.is_empty() {
            let status = state.update_errors.remove(0);
            return Err(kube::Error::Api(status.boxed()));
        }
        state.objects.insert(key_of(&set.metadata), set.clone());
        drop(state);
        if let Some(cache) = &self.cache {
            let _ = cache.update(Arc::new(set.clone()));
        }
        Ok(set.clone())
    }
}
