//! The API calls of the simulated provisioner, attacher and resizer: [`VolumeClient`] over a `kube::Client`, and an in-memory fake.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass, VolumeAttachment};
use kcm_machinery::controller::api_status::{self, ApiStatus};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

/// The result of one API call.
pub type Result<T, E = kube::Error> = std::result::Result<T, E>;

/// What the provisioner, the attacher and the resizer write.
#[async_trait]
pub trait VolumeClient: Send + Sync {
    /// Creates `class` unless a class of that name exists.
    async fn ensure_storage_class(&self, class: &StorageClass) -> Result<()>;
    /// Creates a PersistentVolume.
    async fn create_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume>;
    /// Replaces a PersistentVolume (spec and metadata), guarded by its resourceVersion.
    async fn update_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume>;
    /// Replaces a PersistentVolume's status.
    async fn update_volume_status(&self, volume: &PersistentVolume) -> Result<PersistentVolume>;
    /// Deletes a PersistentVolume (gone already is not an error).
    async fn delete_volume(&self, name: &str) -> Result<()>;
    /// Replaces a claim (spec and metadata), guarded by its resourceVersion.
    async fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim>;
    /// Replaces a claim's status.
    async fn update_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim>;
    /// Patches a claim's status (`persistentvolumeclaims/status`) with an RFC 7386 merge
    /// patch; a `metadata.resourceVersion` in it is a precondition (a Conflict when stale).
    async fn patch_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
        patch: &serde_json::Value,
    ) -> Result<PersistentVolumeClaim>;
    /// Patches a PersistentVolume with an RFC 7386 merge patch.
    async fn patch_volume(&self, name: &str, patch: &serde_json::Value)
    -> Result<PersistentVolume>;
    /// Creates `driver` unless a CSIDriver of that name exists.
    async fn ensure_csi_driver(&self, driver: &CSIDriver) -> Result<()>;
    /// Replaces a VolumeAttachment's status (the external attacher's write).
    async fn update_volume_attachment_status(
        &self,
        attachment: &VolumeAttachment,
    ) -> Result<VolumeAttachment>;
}

/// [`VolumeClient`] over a `kube::Client`.
#[derive(Clone)]
pub struct KubeVolumeClient {
    client: Client,
}

impl KubeVolumeClient {
    /// Calls through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    fn claims(&self, claim: &PersistentVolumeClaim) -> Api<PersistentVolumeClaim> {
        Api::namespaced(
            self.client.clone(),
            claim.metadata.namespace.as_deref().unwrap_or_default(),
        )
    }
}

impl std::fmt::Debug for KubeVolumeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeVolumeClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl VolumeClient for KubeVolumeClient {
    async fn ensure_storage_class(&self, class: &StorageClass) -> Result<()> {
        let api: Api<StorageClass> = Api::all(self.client.clone());
        match api.create(&PostParams::default(), class).await {
            Ok(_) => Ok(()),
            Err(err) if err.is_already_exists() => Ok(()),
            Err(err) => Err(err),
        }
    }

    async fn create_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        api.create(&PostParams::default(), volume).await
    }

    async fn update_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        api.replace(name, &PostParams::default(), volume).await
    }

    async fn update_volume_status(&self, volume: &PersistentVolume) -> Result<PersistentVolume> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        api.replace_status(name, &PostParams::default(), volume)
            .await
    }

    async fn delete_volume(&self, name: &str) -> Result<()> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(err) if err.is_not_found() => Ok(()),
            Err(err) => Err(err),
        }
    }

    async fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim> {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        self.claims(claim)
            .replace(name, &PostParams::default(), claim)
            .await
    }

    async fn update_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim> {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        self.claims(claim)
            .replace_status(name, &PostParams::default(), claim)
            .await
    }

    async fn patch_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
        patch: &serde_json::Value,
    ) -> Result<PersistentVolumeClaim> {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        self.claims(claim)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
    }

    async fn patch_volume(
        &self,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<PersistentVolume> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
    }

    async fn ensure_csi_driver(&self, driver: &CSIDriver) -> Result<()> {
        let api: Api<CSIDriver> = Api::all(self.client.clone());
        match api.create(&PostParams::default(), driver).await {
            Ok(_) => Ok(()),
            Err(err) if err.is_already_exists() => Ok(()),
            Err(err) => Err(err),
        }
    }

    async fn update_volume_attachment_status(
        &self,
        attachment: &VolumeAttachment,
    ) -> Result<VolumeAttachment> {
        let api: Api<VolumeAttachment> = Api::all(self.client.clone());
        let name = attachment.metadata.name.as_deref().unwrap_or_default();
        api.replace_status(name, &PostParams::default(), attachment)
            .await
    }
}

#[derive(Default)]
struct FakeState {
    classes: BTreeMap<String, StorageClass>,
    volumes: BTreeMap<String, PersistentVolume>,
    claims: BTreeMap<String, PersistentVolumeClaim>,
    attachments: BTreeMap<String, VolumeAttachment>,
    actions: Vec<String>,
}

/// An in-memory [`VolumeClient`] recording its calls (`verb name`).
#[derive(Default)]
pub struct FakeVolumes {
    state: Mutex<FakeState>,
}

impl std::fmt::Debug for FakeVolumes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeVolumes").finish_non_exhaustive()
    }
}

fn claim_key(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

/// `base` with the merge `patch` applied, as the API server does: a `metadata.resourceVersion`
/// in the patch must match `base`'s (a Conflict otherwise); every write bumps it.
fn merge_patched<K>(base: &K, patch: &serde_json::Value, resource: &str, name: &str) -> Result<K>
where
    K: serde::Serialize + serde::de::DeserializeOwned + kube::Resource,
{
    let current = base.meta().resource_version.clone();
    if let Some(pinned) = patch
        .pointer("/metadata/resourceVersion")
        .and_then(|v| v.as_str())
        && Some(pinned) != current.as_deref()
    {
        return Err(kube::Error::Api(
            api_status::conflict(
                resource,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
            .boxed(),
        ));
    }
    let mut doc = serde_json::to_value(base).map_err(kube::Error::SerdeError)?;
    json_patch::merge(&mut doc, patch);
    let mut patched: K = serde_json::from_value(doc).map_err(kube::Error::SerdeError)?;
    let next = current
        .and_then(|rv| rv.parse::<u64>().ok())
        .unwrap_or(0)
        .saturating_add(1);
    patched.meta_mut().resource_version = Some(next.to_string());
    Ok(patched)
}

impl FakeVolumes {
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

    /// The volumes held.
    pub fn volumes(&self) -> Vec<PersistentVolume> {
        self.state().volumes.values().cloned().collect()
    }

    /// The latest version of claim `namespace/name` written.
    pub fn claim(&self, key: &str) -> Option<PersistentVolumeClaim> {
        self.state().claims.get(key).cloned()
    }

    /// The classes held.
    pub fn classes(&self) -> Vec<StorageClass> {
        self.state().classes.values().cloned().collect()
    }

    /// Puts `claim` in the fake as if the API server held it (what status patches apply to).
    pub fn put_claim(&self, claim: PersistentVolumeClaim) {
        self.state().claims.insert(claim_key(&claim), claim);
    }

    /// The latest version of VolumeAttachment `name` written.
    pub fn attachment(&self, name: &str) -> Option<VolumeAttachment> {
        self.state().attachments.get(name).cloned()
    }
}

#[async_trait]
impl VolumeClient for FakeVolumes {
    async fn ensure_storage_class(&self, class: &StorageClass) -> Result<()> {
        let mut state = self.state();
        let name = class.metadata.name.clone().unwrap_or_default();
        state.actions.push(format!("ensure-class {name}"));
        state.classes.entry(name).or_insert_with(|| class.clone());
        Ok(())
    }

    async fn create_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume> {
        let mut state = self.state();
        let name = volume.metadata.name.clone().unwrap_or_default();
        state.actions.push(format!("create-volume {name}"));
        if state.volumes.contains_key(&name) {
            return Err(kube::Error::Api(
                api_status::already_exists("persistentvolumes", &name).boxed(),
            ));
        }
        state.volumes.insert(name, volume.clone());
        Ok(volume.clone())
    }

    async fn update_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume> {
        let mut state = self.state();
        let name = volume.metadata.name.clone().unwrap_or_default();
        state.actions.push(format!("update-volume {name}"));
        state.volumes.insert(name, volume.clone());
        Ok(volume.clone())
    }

    async fn update_volume_status(&self, volume: &PersistentVolume) -> Result<PersistentVolume> {
        let mut state = self.state();
        let name = volume.metadata.name.clone().unwrap_or_default();
        state.actions.push(format!("update-volume-status {name}"));
        state.volumes.insert(name, volume.clone());
        Ok(volume.clone())
    }

    async fn delete_volume(&self, name: &str) -> Result<()> {
        let mut state = self.state();
        state.actions.push(format!("delete-volume {name}"));
        state.volumes.remove(name);
        Ok(())
    }

    async fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim> {
        let mut state = self.state();
        state
            .actions
            .push(format!("update-claim {}", claim_key(claim)));
        state.claims.insert(claim_key(claim), claim.clone());
        Ok(claim.clone())
    }

    async fn update_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim> {
        let mut state = self.state();
        state
            .actions
            .push(format!("update-claim-status {}", claim_key(claim)));
        state.claims.insert(claim_key(claim), claim.clone());
        Ok(claim.clone())
    }

    async fn patch_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
        patch: &serde_json::Value,
    ) -> Result<PersistentVolumeClaim> {
        let mut state = self.state();
        let key = claim_key(claim);
        state.actions.push(format!("patch-claim-status {key}"));
        let base = state
            .claims
            .get(&key)
            .cloned()
            .unwrap_or_else(|| claim.clone());
        let patched = merge_patched(&base, patch, "persistentvolumeclaims", &key)?;
        state.claims.insert(key, patched.clone());
        Ok(patched)
    }

    async fn patch_volume(
        &self,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<PersistentVolume> {
        let mut state = self.state();
        state.actions.push(format!("patch-volume {name}"));
        let Some(base) = state.volumes.get(name).cloned() else {
            return Err(kube::Error::Api(
                api_status::not_found("persistentvolumes", name).boxed(),
            ));
        };
        let patched = merge_patched(&base, patch, "persistentvolumes", name)?;
        state.volumes.insert(name.to_owned(), patched.clone());
        Ok(patched)
    }

    async fn ensure_csi_driver(&self, driver: &CSIDriver) -> Result<()> {
        let name = driver.metadata.name.clone().unwrap_or_default();
        self.state()
            .actions
            .push(format!("ensure-csi-driver {name}"));
        Ok(())
    }

    async fn update_volume_attachment_status(
        &self,
        attachment: &VolumeAttachment,
    ) -> Result<VolumeAttachment> {
        let mut state = self.state();
        let name = attachment.metadata.name.clone().unwrap_or_default();
        state
            .actions
            .push(format!("update-volume-attachment-status {name}"));
        state.attachments.insert(name, attachment.clone());
        Ok(attachment.clone())
    }
}
