//! The API calls of the simulated DRA driver and the scheduler's claim writes:
//! [`DraClient`] over a `kube::Client`, and an in-memory fake.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kcm_machinery::controller::api_status::{self, ApiStatus};
use kube::Client;
use kube::api::{Api, PostParams};

/// The result of one API call.
pub type Result<T, E = kube::Error> = std::result::Result<T, E>;

/// What the driver and the scheduler write about devices and claims.
#[async_trait]
pub trait DraClient: Send + Sync {
    /// Creates `class` unless a DeviceClass of that name exists.
    async fn ensure_device_class(&self, class: &DeviceClass) -> Result<()>;
    /// Creates a ResourceSlice (AlreadyExists when one of that name exists).
    async fn create_resource_slice(&self, slice: &ResourceSlice) -> Result<ResourceSlice>;
    /// Replaces a claim (metadata and spec), guarded by its resourceVersion.
    async fn update_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim>;
    /// Replaces a claim's status through `resourceclaims/status`, guarded by its
    /// resourceVersion.
    async fn update_claim_status(&self, claim: &ResourceClaim) -> Result<ResourceClaim>;
}

/// [`DraClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct KubeDraClient {
    client: Client,
}

impl KubeDraClient {
    /// Calls through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    fn claims(&self, claim: &ResourceClaim) -> Api<ResourceClaim> {
        Api::namespaced(
            self.client.clone(),
            claim.metadata.namespace.as_deref().unwrap_or_default(),
        )
    }
}

impl std::fmt::Debug for KubeDraClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeDraClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl DraClient for KubeDraClient {
    async fn ensure_device_class(&self, class: &DeviceClass) -> Result<()> {
        let api: Api<DeviceClass> = Api::all(self.client.clone());
        match api.create(&PostParams::default(), class).await {
            Ok(_) => Ok(()),
            Err(err) if err.is_already_exists() => Ok(()),
            Err(err) => Err(err),
        }
    }

    async fn create_resource_slice(&self, slice: &ResourceSlice) -> Result<ResourceSlice> {
        let api: Api<ResourceSlice> = Api::all(self.client.clone());
        api.create(&PostParams::default(), slice).await
    }

    async fn update_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim> {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        self.claims(claim)
            .replace(name, &PostParams::default(), claim)
            .await
    }

    async fn update_claim_status(&self, claim: &ResourceClaim) -> Result<ResourceClaim> {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        self.claims(claim)
            .replace_status(name, &PostParams::default(), claim)
            .await
    }
}

#[derive(Default)]
struct FakeState {
    classes: BTreeMap<String, DeviceClass>,
    slices: BTreeMap<String, ResourceSlice>,
    claims: BTreeMap<String, ResourceClaim>,
    actions: Vec<String>,
    fail_next: Option<kube::Error>,
}

/// An in-memory [`DraClient`] recording its calls (`verb name`). Claim writes need the claim
/// put first ([`FakeDra::put_claim`]) and bump its resourceVersion; a stale one is a Conflict.
#[derive(Default)]
pub struct FakeDra {
    state: Mutex<FakeState>,
}

impl std::fmt::Debug for FakeDra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeDra").finish_non_exhaustive()
    }
}

fn key(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

impl FakeDra {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every call so far, as `verb name`.
    pub fn actions(&self) -> Vec<String> {
        self.state().actions.clone()
    }

    /// The slices created.
    pub fn slices(&self) -> Vec<ResourceSlice> {
        self.state().slices.values().cloned().collect()
    }

    /// The classes created.
    pub fn classes(&self) -> Vec<DeviceClass> {
        self.state().classes.values().cloned().collect()
    }

    /// The claim `namespace/name` as last written.
    pub fn claim(&self, key: &str) -> Option<ResourceClaim> {
        self.state().claims.get(key).cloned()
    }

    /// Puts `claim` in the fake as the API server would hold it.
    pub fn put_claim(&self, claim: ResourceClaim) {
        self.state().claims.insert(key(&claim), claim);
    }

    /// Makes the next call fail with `err`.
    pub fn fail_next(&self, err: kube::Error) {
        self.state().fail_next = Some(err);
    }

    fn write_claim(
        &self,
        verb: &str,
        claim: &ResourceClaim,
        status: bool,
    ) -> Result<ResourceClaim> {
        let mut state = self.state();
        let k = key(claim);
        state.actions.push(format!("{verb} {k}"));
        if let Some(err) = state.fail_next.take() {
            return Err(err);
        }
        let Some(current) = state.claims.get(&k).cloned() else {
            return Err(kube::Error::Api(
                api_status::not_found("resourceclaims", &k).boxed(),
            ));
        };
        if current.metadata.resource_version != claim.metadata.resource_version {
            return Err(kube::Error::Api(
                api_status::conflict(
                    "resourceclaims.resource.k8s.io",
                    claim.metadata.name.as_deref().unwrap_or_default(),
                    "the object has been modified; please apply your changes to the latest version and try again",
                )
                .boxed(),
            ));
        }
        let mut stored = if status {
            ResourceClaim {
                status: claim.status.clone(),
                ..current.clone()
            }
        } else {
            ResourceClaim {
                status: current.status.clone(),
                ..claim.clone()
            }
        };
        let next = current
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse::<u64>().ok())
            .unwrap_or(0)
            .saturating_add(1);
        stored.metadata.resource_version = Some(next.to_string());
        state.claims.insert(k, stored.clone());
        Ok(stored)
    }
}

#[async_trait]
impl DraClient for FakeDra {
    async fn ensure_device_class(&self, class: &DeviceClass) -> Result<()> {
        let mut state = self.state();
        let name = class.metadata.name.clone().unwrap_or_default();
        state.actions.push(format!("ensure-device-class {name}"));
        if let Some(err) = state.fail_next.take() {
            return Err(err);
        }
        state.classes.entry(name).or_insert_with(|| class.clone());
        Ok(())
    }

    async fn create_resource_slice(&self, slice: &ResourceSlice) -> Result<ResourceSlice> {
        let mut state = self.state();
        let name = slice.metadata.name.clone().unwrap_or_default();
        state.actions.push(format!("create-resource-slice {name}"));
        if let Some(err) = state.fail_next.take() {
            return Err(err);
        }
        if state.slices.contains_key(&name) {
            return Err(kube::Error::Api(
                api_status::already_exists("resourceslices", &name).boxed(),
            ));
        }
        state.slices.insert(name, slice.clone());
        Ok(slice.clone())
    }

    async fn update_claim(&self, claim: &ResourceClaim) -> Result<ResourceClaim> {
        self.write_claim("update-claim", claim, false)
    }

    async fn update_claim_status(&self, claim: &ResourceClaim) -> Result<ResourceClaim> {
        self.write_claim("update-claim-status", claim, true)
    }
}
