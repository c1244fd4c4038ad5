//! The ResourceClaim controller's requests (claim create, status update, update, delete; pod get and status apply) behind a seam with a recording in-memory fake.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::json;

use kcm_machinery::controller::api_status::{self, ApiStatus};

/// The field manager of the pod status apply (upstream's `fieldManager`).
pub const FIELD_MANAGER: &str = "ResourceClaimController";

/// The requests the ResourceClaim controller makes.
#[async_trait]
pub trait ResourceClaimClient: Send + Sync {
    /// Creates `claim` in `namespace` (it carries a `generateName`); the stored claim.
    async fn create_claim(
        &self,
        namespace: &str,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, kube::Error>;

    /// Replaces the claim's status (`UpdateStatus`, failing on a stale resourceVersion).
    async fn update_claim_status(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, kube::Error>;

    /// Replaces the claim (`Update`), to drop a finalizer.
    async fn update_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim, kube::Error>;

    /// Deletes claim `namespace/name`.
    async fn delete_claim(&self, namespace: &str, name: &str) -> Result<(), kube::Error>;

    /// Reads pod `namespace/name` from the server; `None` when it does not exist.
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, kube::Error>;

    /// Applies `status.resourceClaimStatuses` of pod `namespace/name` with server-side apply
    /// (field manager [`FIELD_MANAGER`], forced).
    async fn apply_pod_claim_statuses(
        &self,
        namespace: &str,
        name: &str,
        statuses: &[PodResourceClaimStatus],
    ) -> Result<(), kube::Error>;
}

/// The apply body of [`ResourceClaimClient::apply_pod_claim_statuses`], as upstream's
/// `corev1apply.Pod(name, namespace).WithStatus(...WithResourceClaimStatuses(...))`.
pub fn pod_claim_statuses_apply(
    namespace: &str,
    name: &str,
    statuses: &[PodResourceClaimStatus],
) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"resourceClaimStatuses": statuses},
    })
}

/// [`ResourceClaimClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiResourceClaimClient {
    client: kube::Client,
}

impl ApiResourceClaimClient {
    /// Requests through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn claims(&self, namespace: &str) -> Api<ResourceClaim> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiResourceClaimClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiResourceClaimClient")
            .finish_non_exhaustive()
    }
}

fn namespace_of(claim: &ResourceClaim) -> &str {
    claim.metadata.namespace.as_deref().unwrap_or_default()
}

fn name_of(claim: &ResourceClaim) -> &str {
    claim.metadata.name.as_deref().unwrap_or_default()
}

#[async_trait]
impl ResourceClaimClient for ApiResourceClaimClient {
    async fn create_claim(
        &self,
        namespace: &str,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, kube::Error> {
        self.claims(namespace)
            .create(&PostParams::default(), claim)
            .await
    }

    async fn update_claim_status(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, kube::Error> {
        self.claims(namespace_of(claim))
            .replace_status(name_of(claim), &PostParams::default(), claim)
            .await
    }

    async fn update_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim, kube::Error> {
        self.claims(namespace_of(claim))
            .replace(name_of(claim), &PostParams::default(), claim)
            .await
    }

    async fn delete_claim(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        self.claims(namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.get(name).await {
            Ok(pod) => Ok(Some(pod)),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn apply_pod_claim_statuses(
        &self,
        namespace: &str,
        name: &str,
        statuses: &[PodResourceClaimStatus],
    ) -> Result<(), kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        api.patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(pod_claim_statuses_apply(namespace, name, statuses)),
        )
        .await
        .map(|_| ())
    }
}

/// The request kinds of the fake, for counting and for failing them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `create` of a claim.
    Create,
    /// `update` of a claim's status.
    UpdateStatus,
    /// `update` of a claim.
    Update,
    /// `delete` of a claim.
    Delete,
    /// `get` of a pod.
    GetPod,
    /// the `apply` of a pod's status.
    ApplyPodStatus,
}

/// One request the fake saw: the verb and `namespace/name` (the generateName for a create).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// What was asked.
    pub verb: Verb,
    /// Of which object, `namespace/name`.
    pub key: String,
}

#[derive(Debug, Default)]
struct FakeState {
    /// The server's claims by `namespace/name`.
    claims: BTreeMap<String, ResourceClaim>,
    /// The server's pods by `namespace/name`.
    pods: BTreeMap<String, Pod>,
    /// The last applied `resourceClaimStatuses` by pod `namespace/name`.
    pod_statuses: BTreeMap<String, Vec<PodResourceClaimStatus>>,
    /// Every request, in order.
    actions: Vec<Action>,
    /// Requests of these verbs fail with the status.
    errors: HashMap<Verb, Status>,
    /// Names generated so far (the next suffix).
    generated: u32,
}

/// An in-memory [`ResourceClaimClient`]: a claim and pod store that records every request and
/// fails the verbs it is told to, as client-go's fake clientset with a reactor.
#[derive(Debug, Default)]
pub struct FakeResourceClaimClient {
    state: Mutex<FakeState>,
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl FakeResourceClaimClient {
    /// An empty server.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `claim` on the server.
    pub fn add_claim(&self, claim: ResourceClaim) {
        let k = key(namespace_of(&claim), name_of(&claim));
        self.state().claims.insert(k, claim);
    }

    /// Stores `pod` on the server.
    pub fn add_pod(&self, pod: Pod) {
        let k = key(
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default(),
        );
        self.state().pods.insert(k, pod);
    }

    /// The server's claims, by `namespace/name`.
    pub fn claims(&self) -> Vec<ResourceClaim> {
        self.state().claims.values().cloned().collect()
    }

    /// The applied `resourceClaimStatuses` by pod `namespace/name`.
    pub fn pod_statuses(&self) -> BTreeMap<String, Vec<PodResourceClaimStatus>> {
        self.state().pod_statuses.clone()
    }

    /// Every request so far.
    pub fn actions(&self) -> Vec<Action> {
        self.state().actions.clone()
    }

    /// Makes every later request of `verb` fail with `error` (`None` restores success).
    pub fn set_error(&self, verb: Verb, error: Option<Status>) {
        let mut state = self.state();
        match error {
            Some(status) => state.errors.insert(verb, status),
            None => state.errors.remove(&verb),
        };
    }

    /// Records the request and returns the injected failure, if any.
    fn begin_locked(state: &mut FakeState, verb: Verb, k: String) -> Result<(), kube::Error> {
        state.actions.push(Action { verb, key: k });
        match state.errors.get(&verb) {
            Some(status) => Err(kube::Error::Api(status.clone().boxed())),
            None => Ok(()),
        }
    }
}

fn not_found(resource: &str, name: &str) -> kube::Error {
    kube::Error::Api(api_status::not_found(resource, name).boxed())
}

#[async_trait]
impl ResourceClaimClient for FakeResourceClaimClient {
    async fn create_claim(
        &self,
        namespace: &str,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, kube::Error> {
        let mut state = self.state();
        let generate = claim.metadata.generate_name.clone().unwrap_or_default();
        Self::begin_locked(&mut state, Verb::Create, key(namespace, &generate))?;
        let mut stored = claim.clone();
        if stored.metadata.name.as_deref().is_none_or(str::is_empty) {
            stored.metadata.name = Some(format!("{generate}{:05}", state.generated));
            state.generated += 1;
        }
        stored.metadata.namespace = Some(namespace.to_owned());
        let k = key(namespace, name_of(&stored));
        if state.claims.contains_key(&k) {
            return Err(kube::Error::Api(
                api_status::already_exists("resourceclaims.resource.k8s.io", name_of(&stored))
                    .boxed(),
            ));
        }
        state.claims.insert(k, stored.clone());
        Ok(stored)
    }

    async fn update_claim_status(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, kube::Error> {
        let mut state = self.state();
        let k = key(namespace_of(claim), name_of(claim));
        Self::begin_locked(&mut state, Verb::UpdateStatus, k.clone())?;
        let Some(stored) = state.claims.get_mut(&k) else {
            return Err(not_found("resourceclaims.resource.k8s.io", name_of(claim)));
        };
        stored.status = claim.status.clone();
        Ok(stored.clone())
    }

    async fn update_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim, kube::Error> {
        let mut state = self.state();
        let k = key(namespace_of(claim), name_of(claim));
        Self::begin_locked(&mut state, Verb::Update, k.clone())?;
        let Some(stored) = state.claims.get_mut(&k) else {
            return Err(not_found("resourceclaims.resource.k8s.io", name_of(claim)));
        };
        let status = stored.status.clone();
        *stored = claim.clone();
        stored.status = status;
        Ok(stored.clone())
    }

    async fn delete_claim(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let mut state = self.state();
        let k = key(namespace, name);
        Self::begin_locked(&mut state, Verb::Delete, k.clone())?;
        match state.claims.remove(&k) {
            Some(_) => Ok(()),
            None => Err(not_found("resourceclaims.resource.k8s.io", name)),
        }
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, kube::Error> {
        let mut state = self.state();
        let k = key(namespace, name);
        Self::begin_locked(&mut state, Verb::GetPod, k.clone())?;
        Ok(state.pods.get(&k).cloned())
    }

    async fn apply_pod_claim_statuses(
        &self,
        namespace: &str,
        name: &str,
        statuses: &[PodResourceClaimStatus],
    ) -> Result<(), kube::Error> {
        let mut state = self.state();
        let k = key(namespace, name);
        Self::begin_locked(&mut state, Verb::ApplyPodStatus, k.clone())?;
        state.pod_statuses.insert(k, statuses.to_vec());
        Ok(())
    }
}
