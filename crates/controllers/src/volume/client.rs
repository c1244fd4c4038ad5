//! The API calls of the storage controllers (claim, volume and VolumeAttributesClass updates, claim creation, the live pod list, the PV controller's status writes, reads and volume deletion) and one recording fake for all their tests, as client-go's fake clientset with reactors.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use kcm_machinery::controller::api_status;
use kcm_machinery::informer::keys::object_key;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::core::Status;

/// The calls, as upstream's `client.CoreV1()` / `client.StorageV1()`.
#[async_trait]
pub trait StorageClient: Send + Sync {
    /// Replaces the claim (a PUT, conditioned on its `resourceVersion`), as
    /// `PersistentVolumeClaims(ns).Update`.
    async fn update_claim(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, kube::Error>;

    /// Creates `claim` in `namespace`, as `PersistentVolumeClaims(ns).Create`.
    async fn create_claim(
        &self,
        namespace: &str,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, kube::Error>;

    /// Lists the pods of `namespace` from the API server (not a cache), as
    /// `Pods(ns).List(ctx, metav1.ListOptions{})`.
    async fn list_pods(&self, namespace: &str) -> Result<Vec<Pod>, kube::Error>;

    /// Replaces the volume, as `PersistentVolumes().Update`.
    async fn update_volume(
        &self,
        volume: &PersistentVolume,
    ) -> Result<PersistentVolume, kube::Error>;

    /// Replaces the class, as `VolumeAttributesClasses().Update`.
    async fn update_volume_attributes_class(
        &self,
        class: &VolumeAttributesClass,
    ) -> Result<VolumeAttributesClass, kube::Error>;

    /// Replaces the claim's status, as `PersistentVolumeClaims(ns).UpdateStatus`.
    async fn update_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, kube::Error>;

    /// Replaces the volume's status, as `PersistentVolumes().UpdateStatus`.
    async fn update_volume_status(
        &self,
        volume: &PersistentVolume,
    ) -> Result<PersistentVolume, kube::Error>;

    /// Reads the volume from the API server, as `PersistentVolumes().Get`.
    async fn get_volume(&self, name: &str) -> Result<PersistentVolume, kube::Error>;

    /// Reads the claim from the API server, as `PersistentVolumeClaims(ns).Get`.
    async fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<PersistentVolumeClaim, kube::Error>;

    /// Deletes the volume, as `PersistentVolumes().Delete`.
    async fn delete_volume(&self, name: &str) -> Result<(), kube::Error>;
}

/// [`StorageClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct ApiStorageClient {
    /// The API client (cheap to clone).
    client: kube::Client,
}

impl ApiStorageClient {
    /// Calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl std::fmt::Debug for ApiStorageClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiStorageClient").finish_non_exhaustive()
    }
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

#[async_trait]
impl StorageClient for ApiStorageClient {
    async fn update_claim(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, kube::Error> {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace)
            .replace(name_of(&claim.metadata), &PostParams::default(), claim)
            .await
    }

    async fn create_claim(
        &self,
        namespace: &str,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, kube::Error> {
        Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), claim)
            .await
    }

    async fn list_pods(&self, namespace: &str) -> Result<Vec<Pod>, kube::Error> {
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .list(&ListParams::default())
            .await
            .map(|list| list.items)
    }

    async fn update_volume(
        &self,
        volume: &PersistentVolume,
    ) -> Result<PersistentVolume, kube::Error> {
        Api::<PersistentVolume>::all(self.client.clone())
            .replace(name_of(&volume.metadata), &PostParams::default(), volume)
            .await
    }

    async fn update_volume_attributes_class(
        &self,
        class: &VolumeAttributesClass,
    ) -> Result<VolumeAttributesClass, kube::Error> {
        Api::<VolumeAttributesClass>::all(self.client.clone())
            .replace(name_of(&class.metadata), &PostParams::default(), class)
            .await
    }

    async fn update_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, kube::Error> {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace)
            .replace_status(name_of(&claim.metadata), &PostParams::default(), claim)
            .await
    }

    async fn update_volume_status(
        &self,
        volume: &PersistentVolume,
    ) -> Result<PersistentVolume, kube::Error> {
        Api::<PersistentVolume>::all(self.client.clone())
            .replace_status(name_of(&volume.metadata), &PostParams::default(), volume)
            .await
    }

    async fn get_volume(&self, name: &str) -> Result<PersistentVolume, kube::Error> {
        Api::<PersistentVolume>::all(self.client.clone())
            .get(name)
            .await
    }

    async fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<PersistentVolumeClaim, kube::Error> {
        Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
    }

    async fn delete_volume(&self, name: &str) -> Result<(), kube::Error> {
        Api::<PersistentVolume>::all(self.client.clone())
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
    }
}

/// The kinds of call, for injecting failures into [`FakeStorageClient`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// [`StorageClient::update_claim`].
    UpdateClaim,
    /// [`StorageClient::create_claim`].
    CreateClaim,
    /// [`StorageClient::list_pods`].
    ListPods,
    /// [`StorageClient::update_volume`].
    UpdateVolume,
    /// [`StorageClient::update_volume_attributes_class`].
    UpdateVolumeAttributesClass,
    /// [`StorageClient::update_claim_status`].
    UpdateClaimStatus,
    /// [`StorageClient::update_volume_status`].
    UpdateVolumeStatus,
    /// [`StorageClient::get_volume`].
    GetVolume,
    /// [`StorageClient::get_claim`].
    GetClaim,
    /// [`StorageClient::delete_volume`].
    DeleteVolume,
}

/// One call [`FakeStorageClient`] received, with what was sent (as client-go's fake records
/// `Action`s, failed ones included).
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// A claim update, with the claim sent.
    UpdateClaim(PersistentVolumeClaim),
    /// A claim creation, with the claim sent (its namespace set to the call's).
    CreateClaim(PersistentVolumeClaim),
    /// A live list of the pods of a namespace.
    ListPods(String),
    /// A volume update, with the volume sent.
    UpdateVolume(PersistentVolume),
    /// A class update, with the class sent.
    UpdateVolumeAttributesClass(VolumeAttributesClass),
    /// A claim status update, with the claim sent.
    UpdateClaimStatus(PersistentVolumeClaim),
    /// A volume status update, with the volume sent.
    UpdateVolumeStatus(PersistentVolume),
    /// A read of the volume of this name.
    GetVolume(String),
    /// A read of the claim of this `namespace/name`.
    GetClaim(String),
    /// A deletion of the volume of this name.
    DeleteVolume(String),
}

impl Action {
    /// The kind of call.
    pub fn verb(&self) -> Verb {
        match self {
            Action::UpdateClaim(_) => Verb::UpdateClaim,
            Action::CreateClaim(_) => Verb::CreateClaim,
            Action::ListPods(_) => Verb::ListPods,
            Action::UpdateVolume(_) => Verb::UpdateVolume,
            Action::UpdateVolumeAttributesClass(_) => Verb::UpdateVolumeAttributesClass,
            Action::UpdateClaimStatus(_) => Verb::UpdateClaimStatus,
            Action::UpdateVolumeStatus(_) => Verb::UpdateVolumeStatus,
            Action::GetVolume(_) => Verb::GetVolume,
            Action::GetClaim(_) => Verb::GetClaim,
            Action::DeleteVolume(_) => Verb::DeleteVolume,
        }
    }
}

/// What [`FakeStorageClient`] holds.
#[derive(Debug, Default)]
struct FakeState {
    /// The "server's" pods, by `namespace/name`, served by the live list.
    pods: BTreeMap<String, Pod>,
    /// The "server's" claims, by `namespace/name`: creations collide with these.
    claims: BTreeMap<String, PersistentVolumeClaim>,
    /// The "server's" volumes, by name: reads serve these, writes replace them.
    volumes: BTreeMap<String, PersistentVolume>,
    /// Every call, in order.
    actions: Vec<Action>,
    /// Per kind of call: how many of the next calls fail, and with what.
    failures: HashMap<Verb, (usize, Status)>,
}

impl FakeState {
    /// Records `action` and takes one injected failure of its kind, if any is left.
    fn record(&mut self, action: Action) -> Result<(), kube::Error> {
        let verb = action.verb();
        self.actions.push(action);
        if let Some((left, status)) = self.failures.get_mut(&verb)
            && *left > 0
        {
            *left -= 1;
            return Err(kube::Error::Api(status.clone().boxed()));
        }
        Ok(())
    }
}

/// A [`StorageClient`] serving pods and claims from memory and recording every call. Updates
/// succeed (returning what was sent) unless a failure is injected with [`Self::fail`].
#[derive(Debug, Default)]
pub struct FakeStorageClient {
    state: Mutex<FakeState>,
}

impl FakeStorageClient {
    /// A fake holding nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `pod` as the server's copy (the live list returns it).
    pub fn insert_pod(&self, pod: Pod) {
        let key = object_key(
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            name_of(&pod.metadata),
        );
        self.state().pods.insert(key, pod);
    }

    /// Stores `claim` as the server's copy (a creation of its name fails with AlreadyExists).
    pub fn insert_claim(&self, claim: PersistentVolumeClaim) {
        let key = object_key(
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            name_of(&claim.metadata),
        );
        self.state().claims.insert(key, claim);
    }

    /// Stores `volume` as the server's copy (reads return it).
    pub fn insert_volume(&self, volume: PersistentVolume) {
        let name = name_of(&volume.metadata).to_owned();
        self.state().volumes.insert(name, volume);
    }

    /// The server's volumes, by name.
    pub fn volumes(&self) -> BTreeMap<String, PersistentVolume> {
        self.state().volumes.clone()
    }

    /// Makes the next `times` calls of kind `verb` fail with `status` (recorded all the same),
    /// as a prepended client-go reactor.
    pub fn fail(&self, verb: Verb, times: usize, status: Status) {
        self.state().failures.insert(verb, (times, status));
    }

    /// Every call so far, in order.
    pub fn actions(&self) -> Vec<Action> {
        self.state().actions.clone()
    }

    /// The server's claims, by `namespace/name`.
    pub fn claims(&self) -> BTreeMap<String, PersistentVolumeClaim> {
        self.state().claims.clone()
    }
}

#[async_trait]
impl StorageClient for FakeStorageClient {
    async fn update_claim(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, kube::Error> {
        let mut state = self.state();
        state.record(Action::UpdateClaim(claim.clone()))?;
        let key = object_key(
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            name_of(&claim.metadata),
        );
        state.claims.insert(key, claim.clone());
        Ok(claim.clone())
    }

    async fn create_claim(
        &self,
        namespace: &str,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, kube::Error> {
        let mut sent = claim.clone();
        sent.metadata.namespace = Some(namespace.to_owned());
        let mut state = self.state();
        state.record(Action::CreateClaim(sent.clone()))?;
        let key = object_key(namespace, name_of(&sent.metadata));
        if state.claims.contains_key(&key) {
            return Err(kube::Error::Api(
                api_status::already_exists("persistentvolumeclaims", name_of(&sent.metadata))
                    .boxed(),
            ));
        }
        state.claims.insert(key, sent.clone());
        Ok(sent)
    }

    async fn list_pods(&self, namespace: &str) -> Result<Vec<Pod>, kube::Error> {
        let mut state = self.state();
        state.record(Action::ListPods(namespace.to_owned()))?;
        Ok(state
            .pods
            .values()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
            .cloned()
            .collect())
    }

    async fn update_volume(
        &self,
        volume: &PersistentVolume,
    ) -> Result<PersistentVolume, kube::Error> {
        let mut state = self.state();
        state.record(Action::UpdateVolume(volume.clone()))?;
        state
            .volumes
            .insert(name_of(&volume.metadata).to_owned(), volume.clone());
        Ok(volume.clone())
    }

    async fn update_volume_attributes_class(
        &self,
        class: &VolumeAttributesClass,
    ) -> Result<VolumeAttributesClass, kube::Error> {
        self.state()
            .record(Action::UpdateVolumeAttributesClass(class.clone()))?;
        Ok(class.clone())
    }

    async fn update_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, kube::Error> {
        let mut state = self.state();
        state.record(Action::UpdateClaimStatus(claim.clone()))?;
        let key = object_key(
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            name_of(&claim.metadata),
        );
        state.claims.insert(key, claim.clone());
        Ok(claim.clone())
    }

    async fn update_volume_status(
        &self,
        volume: &PersistentVolume,
    ) -> Result<PersistentVolume, kube::Error> {
        let mut state = self.state();
        state.record(Action::UpdateVolumeStatus(volume.clone()))?;
        state
            .volumes
            .insert(name_of(&volume.metadata).to_owned(), volume.clone());
        Ok(volume.clone())
    }

    async fn get_volume(&self, name: &str) -> Result<PersistentVolume, kube::Error> {
        let mut state = self.state();
        state.record(Action::GetVolume(name.to_owned()))?;
        state.volumes.get(name).cloned().ok_or_else(|| {
            kube::Error::Api(api_status::not_found("persistentvolumes", name).boxed())
        })
    }

    async fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<PersistentVolumeClaim, kube::Error> {
        let key = object_key(namespace, name);
        let mut state = self.state();
        state.record(Action::GetClaim(key.clone()))?;
        state.claims.get(&key).cloned().ok_or_else(|| {
            kube::Error::Api(api_status::not_found("persistentvolumeclaims", name).boxed())
        })
    }

    async fn delete_volume(&self, name: &str) -> Result<(), kube::Error> {
        let mut state = self.state();
        state.record(Action::DeleteVolume(name.to_owned()))?;
        match state.volumes.remove(name) {
            Some(_) => Ok(()),
            None => Err(kube::Error::Api(
                api_status::not_found("persistentvolumes", name).boxed(),
            )),
        }
    }
}
