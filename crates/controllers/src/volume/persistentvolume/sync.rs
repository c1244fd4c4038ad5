//! The PV controller's state machine: `syncClaim`, `syncVolume`, binding, unbinding, provisioning and reclaiming, and the status writes they share (upstream `pv_controller.go`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use kcm_machinery::controller::api_status::ApiStatus;
use kcm_machinery::events::EventType;
use kube::Resource;

use super::controller::PersistentVolumeController;
use super::events::*;
use super::metrics::{OPERATION_DELETE, OPERATION_PROVISION, PLUGIN_NAME_NOT_AVAILABLE};
use super::util::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER,
    ANN_DYNAMICALLY_PROVISIONED, ANN_MIGRATED_TO, ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER,
    VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER, check_volume_satisfies_claim, claim_class,
    claim_has_class, claim_key, claim_phase, claim_ref, claim_ref_key, default_class,
    has_annotation, is_volume_bound_to_claim, storage_milli, volume_mode_mismatches, volume_phase,
};
use super::{Error, Result};
use crate::volume::common::{POD_PVC_INDEX, is_pod_terminated, is_scheduled};

/// The prefix of in-tree volume plugin names; any other provisioner is external.
const IN_TREE_PREFIX: &str = "kubernetes.io/";
/// The in-tree hostPath plugin, the one deleter modelled here.
const HOST_PATH_PLUGIN: &str = "kubernetes.io/host-path";

fn api(operation: &'static str, object: String) -> impl FnOnce(kube::Error) -> Error {
    move |source| Error::Api {
        operation,
        object,
        source,
    }
}

fn name_of(volume: &PersistentVolume) -> String {
    volume.metadata.name.clone().unwrap_or_default()
}

fn claim_volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default()
}

fn set_annotation(
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
    value: &str,
) {
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(key.to_owned(), value.to_owned());
}

/// The reference a bound volume keeps to its claim, as `reference.GetReference`.
fn claim_reference(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("PersistentVolumeClaim".to_owned()),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// Where a released volume goes: deleted by this controller, left to an external deleter, or
/// failed with this message (`findDeletablePlugin` and the plugin's `Delete`).
enum Deleter {
    /// The hostPath deleter accepts the volume: the PV object is deleted.
    InTree,
    /// An external provisioner made it and deletes it.
    External,
}

impl PersistentVolumeController {
    /// Syncs one claim, as upstream's `syncClaim`: a claim without `bind-completed` is
    /// unbound (`Self::sync_unbound_claim`), one with it bound (`Self::sync_bound_claim`).
    pub async fn sync_claim(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        tracing::trace!(
            claim = claim_key(claim),
            phase = claim_phase(claim),
            "Synchronizing PersistentVolumeClaim"
        );
        if has_annotation(&claim.metadata, ANN_BIND_COMPLETED) {
            self.sync_bound_claim(claim).await
        } else {
            self.sync_unbound_claim(claim).await
        }
    }

    /// Whether the claim's class binds only once a consumer is scheduled, as
    /// `IsDelayBindingMode` (a missing class is immediate).
    fn is_delay_binding_mode(&self, claim: &PersistentVolumeClaim) -> Result<bool> {
        let class = claim_class(claim);
        if class.is_empty() {
            return Ok(false);
        }
        let Some(class) = self.listers.classes.get_by_key(class) else {
            return Ok(false);
        };
        match class.volume_binding_mode.as_deref() {
            Some(mode) => Ok(mode == VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER),
            None => Err(Error::NoBindingMode {
                class: claim_class(claim).to_owned(),
            }),
        }
    }

    /// A claim that has not finished binding, as upstream's `syncUnboundClaim`.
    async fn sync_unbound_claim(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        let key = claim_key(claim);
        let volume_name = claim_volume_name(claim);
        if volume_name.is_empty() {
            // The user did not ask for a particular volume.
            let delay_binding = self.is_delay_binding_mode(claim)?;
            let found = self
                .volumes
                .find_by_claim(claim, None, delay_binding)
                .map_err(|message| Error::FindVolume {
                    claim: key.clone(),
                    message,
                })?;
            if let Some(volume) = found {
                tracing::debug!(claim = key, volume = %name_of(&volume), "Found a volume for the claim, binding");
                let bound = self.bind(&volume, claim).await;
                // The end of a provisioning (if one was timed), or a failed attempt of it.
                if let Some(metrics) = self.pv_metrics() {
                    metrics.record_operation(&key, bound.is_err());
                }
                return bound;
            }
            let assigned = self.assign_default_storage_class(claim).await;
            if let Some(metrics) = self.pv_metrics()
                && !matches!(assigned, Ok(false))
            {
                metrics.retroactive_storage_class(assigned.is_ok());
            }
            if assigned? {
                // The update's event syncs the claim again, with its class.
                return Ok(());
            }
            if delay_binding && !has_annotation(&claim.metadata, ANN_SELECTED_NODE) {
                self.emit_event_for_unbound_delay_binding_claim(claim);
            } else if !claim_class(claim).is_empty() {
                return self.provision_claim(claim).await;
            } else {
                self.claim_event(
                    claim,
                    EventType::Normal,
                    FAILED_BINDING,
                    "no persistent volumes available for this claim and no storage class is set"
                        .to_owned(),
                );
            }
            self.update_claim_status(claim, "Pending", None).await?;
            return Ok(());
        }
        // The user asked for a particular volume.
        let Some(volume) = self.volumes.get(volume_name) else {
            tracing::debug!(
                claim = key,
                volume = volume_name,
                "Requested volume not found, will try again"
            );
            self.update_claim_status(claim, "Pending", None).await?;
            return Ok(());
        };
        if claim_ref(&volume).is_none() {
            if let Err(reason) = check_volume_satisfies_claim(&volume, claim) {
                self.claim_event(
                    claim,
                    EventType::Warning,
                    VOLUME_MISMATCH,
                    format!("Cannot bind to requested volume {volume_name:?}: {reason}"),
                );
                self.update_claim_status(claim, "Pending", None).await?;
                return Ok(());
            }
            return self.bind(&volume, claim).await;
        }
        if is_volume_bound_to_claim(&volume, claim) {
            // Pre-bound to this claim (or bound, the claim not updated yet): finish it.
            return self.bind(&volume, claim).await;
        }
        if !has_annotation(&claim.metadata, ANN_BOUND_BY_CONTROLLER) {
            tracing::debug!(
                claim = key,
                volume = volume_name,
                "Requested volume is bound to another claim by the user, will retry"
            );
            self.update_claim_status(claim, "Pending", None).await?;
            return Ok(());
        }
        Err(Error::InvalidBinding {
            claim: key,
            volume: volume_name.to_owned(),
            other: claim_ref(&volume).map(claim_ref_key).unwrap_or_default(),
        })
    }

    /// A claim that was bound, as upstream's `syncBoundClaim`: it stays bound while its volume
    /// points back at it, and goes `Lost` otherwise.
    async fn sync_bound_claim(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        let volume_name = claim_volume_name(claim);
        if volume_name.is_empty() {
            return self
                .update_claim_status_with_event(
                    claim,
                    "Lost",
                    CLAIM_LOST,
                    "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
                )
                .await;
        }
        let Some(volume) = self.volumes.get(volume_name) else {
            return self
                .update_claim_status_with_event(
                    claim,
                    "Lost",
                    CLAIM_LOST,
                    "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
                )
                .await;
        };
        match claim_ref(&volume) {
            // Unbound volume (or one whose update the controller has not seen): bind again.
            None => self.bind(&volume, claim).await,
            Some(r) if r.uid == claim.metadata.uid => self.bind(&volume, claim).await,
            Some(_) => {
                self.update_claim_status_with_event(
                    claim,
                    "Lost",
                    CLAIM_MISBOUND,
                    "Two claims are bound to the same volume, this one is bound incorrectly",
                )
                .await
            }
        }
    }

    /// Syncs one volume, as upstream's `syncVolume`.
    pub async fn sync_volume(&self, volume: &PersistentVolume) -> Result<()> {
        let name = name_of(volume);
        tracing::trace!(
            volume = name,
            phase = volume_phase(volume),
            "Synchronizing PersistentVolume"
        );
        let Some(claim_ref) = claim_ref(volume).cloned() else {
            self.update_volume_phase(volume, "Available", "").await?;
            return Ok(());
        };
        if claim_ref.uid.as_deref().unwrap_or_default().is_empty() {
            // Pre-bound to a claim that has not been bound yet: the claim's sync does it.
            self.update_volume_phase(volume, "Available", "").await?;
            return Ok(());
        }
        let key = claim_ref_key(&claim_ref);
        let mut claim = self.claims.get(&key);
        if claim.is_none() && !matches!(volume_phase(volume), "Released" | "Failed") {
            // The claim may be too new for the caches (an external provisioner or binder
            // wrote the volume): look again before releasing the volume.
            claim = self.listers.claims.get_by_key(&key);
            if claim.is_none() {
                let namespace = claim_ref.namespace.as_deref().unwrap_or_default();
                let claim_name = claim_ref.name.as_deref().unwrap_or_default();
                match self.client.get_claim(namespace, claim_name).await {
                    Ok(found) => claim = Some(Arc::new(found)),
                    Err(err) if err.is_not_found() => {}
                    Err(err) => return Err(api("getting claim", key)(err)),
                }
            }
        }
        let claim = claim.filter(|c| c.metadata.uid == claim_ref.uid);
        let Some(claim) = claim else {
            // The claim is gone (or another of its name replaced it): release the volume.
            let mut volume = volume.clone();
            if !matches!(volume_phase(&volume), "Released" | "Failed") {
                tracing::info!(volume = name, policy = ?volume.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref()), "Volume is released and reclaim policy will be executed");
                volume = self.update_volume_phase(&volume, "Released", "").await?;
            }
            return self.reclaim_volume(&volume).await;
        };
        let claim_volume = claim_volume_name(&claim);
        if claim_volume.is_empty() {
            let claim_spec = claim.spec.clone().unwrap_or_default();
            let volume_spec = volume.spec.clone().unwrap_or_default();
            if volume_mode_mismatches(&claim_spec, &volume_spec) {
                let claim_name = claim.metadata.name.clone().unwrap_or_default();
                self.volume_event(
                    volume,
                    EventType::Warning,
                    VOLUME_MISMATCH,
                    format!("Cannot bind PersistentVolume to requested PersistentVolumeClaim {claim_name:?} due to incompatible volumeMode."),
                );
                self.claim_event(
                    &claim,
                    EventType::Warning,
                    VOLUME_MISMATCH,
                    format!("Cannot bind PersistentVolume {name:?} to requested PersistentVolumeClaim due to incompatible volumeMode."),
                );
                return Ok(());
            }
            // Bound (or pre-bound) volume, pending claim: the claim's sync binds it.
            self.claim_queue.add(key);
            return Ok(());
        }
        if claim_volume == name {
            self.update_volume_phase(volume, "Bound", "").await?;
            return Ok(());
        }
        // The claim is bound to another volume.
        let policy = volume
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_reclaim_policy.as_deref());
        if has_annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED) && policy == Some("Delete")
        {
            // Provisioned for this claim, which got another volume: not needed.
            let mut volume = volume.clone();
            if !matches!(volume_phase(&volume), "Released" | "Failed") {
                volume = self.update_volume_phase(&volume, "Released", "").await?;
            }
            return self.reclaim_volume(&volume).await;
        }
        // Bound by the controller: undo it; pre-bound by the user: keep the name, drop the UID.
        self.unbind_volume(volume).await
    }

    /// Binds volume and claim to each other and marks both `Bound`, as upstream's `bind`.
    pub(super) async fn bind(
        &self,
        volume: &PersistentVolume,
        claim: &PersistentVolumeClaim,
    ) -> Result<()> {
        let volume = self.bind_volume_to_claim(volume, claim).await?;
        let volume = self.update_volume_phase(&volume, "Bound", "").await?;
        let claim = self.bind_claim_to_volume(claim, &volume).await?;
        self.update_claim_status(&claim, "Bound", Some(&volume))
            .await?;
        Ok(())
    }

    /// Points the volume's `claimRef` at the claim (marking it bound by the controller unless
    /// it was pre-bound to it), as `bindVolumeToClaim` / `GetBindVolumeToClaim`.
    async fn bind_volume_to_claim(
        &self,
        volume: &PersistentVolume,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolume> {
        let mut updated = volume.clone();
        let mut dirty = false;
        let set_by_controller = !is_volume_bound_to_claim(volume, claim);
        let current = claim_ref(volume);
        if current.is_none_or(|r| {
            r.name != claim.metadata.name
                || r.namespace != claim.metadata.namespace
                || r.uid != claim.metadata.uid
        }) {
            updated.spec.get_or_insert_with(Default::default).claim_ref =
                Some(claim_reference(claim));
            dirty = true;
        }
        if set_by_controller && !has_annotation(&updated.metadata, ANN_BOUND_BY_CONTROLLER) {
            set_annotation(&mut updated.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
            dirty = true;
        }
        if !dirty {
            return Ok(updated);
        }
        let name = name_of(volume);
        let saved = self
            .client
            .update_volume(&updated)
            .await
            .map_err(api("binding volume to claim", name.clone()))?;
        self.store_volume(&saved);
        tracing::debug!(
            volume = name,
            claim = claim_key(claim),
            "Volume bound to claim"
        );
        Ok(saved)
    }

    /// Sets the claim's `volumeName` and the binding annotations, as `bindClaimToVolume`.
    async fn bind_claim_to_volume(
        &self,
        claim: &PersistentVolumeClaim,
        volume: &PersistentVolume,
    ) -> Result<PersistentVolumeClaim> {
        let volume_name = name_of(volume);
        let mut updated = claim.clone();
        let mut dirty = false;
        if claim_volume_name(claim) != volume_name {
            updated
                .spec
                .get_or_insert_with(Default::default)
                .volume_name = Some(volume_name.clone());
            if !has_annotation(&updated.metadata, ANN_BOUND_BY_CONTROLLER) {
                set_annotation(&mut updated.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
            }
            dirty = true;
        }
        if !has_annotation(&updated.metadata, ANN_BIND_COMPLETED) {
            set_annotation(&mut updated.metadata, ANN_BIND_COMPLETED, "yes");
            dirty = true;
        }
        if !dirty {
            return Ok(updated);
        }
        let key = claim_key(claim);
        let saved = self
            .client
            .update_claim(&updated)
            .await
            .map_err(api("binding claim to volume", key.clone()))?;
        self.store_claim(&saved);
        tracing::debug!(claim = key, volume = volume_name, "Claim bound to volume");
        Ok(saved)
    }

    /// Frees a volume whose claim is bound elsewhere, as `unbindVolume`: one the controller
    /// bound loses its `claimRef`, one the user pre-bound only the reference's UID; then it
    /// is `Available`.
    async fn unbind_volume(&self, volume: &PersistentVolume) -> Result<()> {
        let mut updated = volume.clone();
        if has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER) {
            if let Some(spec) = updated.spec.as_mut() {
                spec.claim_ref = None;
            }
            if let Some(annotations) = updated.metadata.annotations.as_mut() {
                annotations.remove(ANN_BOUND_BY_CONTROLLER);
                if annotations.is_empty() {
                    updated.metadata.annotations = None;
                }
            }
        } else if let Some(claim_ref) = updated.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
            claim_ref.uid = None;
        }
        let name = name_of(volume);
        let saved = self
            .client
            .update_volume(&updated)
            .await
            .map_err(api("unbinding volume", name))?;
        self.store_volume(&saved);
        self.update_volume_phase(&saved, "Available", "").await?;
        Ok(())
    }

    /// Sets the claim's phase, and its status access modes and capacity from `volume` (reset
    /// without one), writing only what changed, as `updateClaimStatus`.
    pub(super) async fn update_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
        phase: &str,
        volume: Option<&PersistentVolume>,
    ) -> Result<PersistentVolumeClaim> {
        let mut updated = claim.clone();
        let status = updated.status.get_or_insert_with(Default::default);
        let mut dirty = false;
        let phase_changes = claim_phase(claim) != phase;
        if phase_changes {
            status.phase = Some(phase.to_owned());
            dirty = true;
        }
        match volume {
            None => {
                if status.access_modes.is_some() {
                    status.access_modes = None;
                    dirty = true;
                }
                if status.capacity.is_some() {
                    status.capacity = None;
                    dirty = true;
                }
            }
            Some(volume) => {
                let spec = volume.spec.clone().unwrap_or_default();
                if status.access_modes != spec.access_modes {
                    status.access_modes = spec.access_modes.clone();
                    dirty = true;
                }
                // Only when the claim becomes bound: a later difference may be intended (a
                // filesystem smaller than its block device).
                if phase_changes {
                    let has_capacity = spec
                        .capacity
                        .as_ref()
                        .is_some_and(|c| c.contains_key("storage"));
                    if !has_capacity {
                        return Err(Error::NoCapacity {
                            volume: name_of(volume),
                        });
                    }
                    let current = status.capacity.as_ref().and_then(|c| c.get("storage"));
                    if current.is_none()
                        || storage_milli(status.capacity.as_ref())
                            != storage_milli(spec.capacity.as_ref())
                    {
                        status.capacity = spec.capacity.clone();
                        dirty = true;
                    }
                }
            }
        }
        if !dirty {
            return Ok(claim.clone());
        }
        let key = claim_key(claim);
        let saved = self
            .client
            .update_claim_status(&updated)
            .await
            .map_err(api("updating claim status", key.clone()))?;
        self.store_claim(&saved);
        tracing::debug!(claim = key, phase, "Claim entered phase");
        Ok(saved)
    }

    /// Moves the claim to `phase` with a warning event, unless it is there already, as
    /// `updateClaimStatusWithEvent`.
    async fn update_claim_status_with_event(
        &self,
        claim: &PersistentVolumeClaim,
        phase: &str,
        reason: &str,
        message: &str,
    ) -> Result<()> {
        if claim_phase(claim) == phase {
            return Ok(());
        }
        let saved = self.update_claim_status(claim, phase, None).await?;
        self.claim_event(&saved, EventType::Warning, reason, message.to_owned());
        Ok(())
    }

    /// Sets the volume's phase and message unless it is in `phase` already, as
    /// `updateVolumePhase`.
    pub(super) async fn update_volume_phase(
        &self,
        volume: &PersistentVolume,
        phase: &str,
        message: &str,
    ) -> Result<PersistentVolume> {
        if volume_phase(volume) == phase {
            return Ok(volume.clone());
        }
        let mut updated = volume.clone();
        let status = updated.status.get_or_insert_with(Default::default);
        status.phase = Some(phase.to_owned());
        status.message = (!message.is_empty()).then(|| message.to_owned());
        let name = name_of(volume);
        let saved = self
            .client
            .update_volume_status(&updated)
            .await
            .map_err(api("updating volume status", name.clone()))?;
        self.store_volume(&saved);
        tracing::debug!(volume = name, phase, "Volume entered phase");
        Ok(saved)
    }

    /// [`Self::update_volume_phase`] with a warning event of the message, as
    /// `updateVolumePhaseWithEvent`.
    async fn update_volume_phase_with_event(
        &self,
        volume: &PersistentVolume,
        phase: &str,
        reason: &str,
        message: String,
    ) -> Result<PersistentVolume> {
        if volume_phase(volume) == phase {
            return Ok(volume.clone());
        }
        let saved = self.update_volume_phase(volume, phase, &message).await?;
        self.volume_event(&saved, EventType::Warning, reason, message);
        Ok(saved)
    }

    /// Gives a claim that names no class the default class, as the `DefaultStorageClass`
    /// admission plugin would have (the retroactive default of upstream's
    /// `assignDefaultStorageClass`). True when the claim was updated.
    async fn assign_default_storage_class(&self, claim: &PersistentVolumeClaim) -> Result<bool> {
        if claim_has_class(claim) {
            return Ok(false);
        }
        let Some(class) = default_class(&self.listers.classes.list()) else {
            return Ok(false);
        };
        let mut updated = claim.clone();
        updated
            .spec
            .get_or_insert_with(Default::default)
            .storage_class_name = class.metadata.name.clone();
        let key = claim_key(claim);
        let saved = self.client.update_claim(&updated).await.map_err(api(
            "assigning the default StorageClass to claim",
            key.clone(),
        ))?;
        self.store_claim(&saved);
        tracing::debug!(claim = key, class = ?class.metadata.name, "Assigned the default StorageClass to claim");
        Ok(true)
    }

    /// The event of a delayed-binding claim still waiting: for its unscheduled pods by name,
    /// or for a first consumer, as `emitEventForUnboundDelayBindingClaim`.
    fn emit_event_for_unbound_delay_binding_claim(&self, claim: &PersistentVolumeClaim) {
        let mut pods: Vec<String> = self
            .listers
            .pods
            .by_index(POD_PVC_INDEX, &claim_key(claim))
            .unwrap_or_default()
            .into_iter()
            .filter(|pod| !is_pod_terminated(pod) && !is_scheduled(pod))
            .map(|pod| pod.metadata.name.clone().unwrap_or_default())
            .collect();
        pods.sort();
        let (reason, message) = match pods.as_slice() {
            [] => (
                WAIT_FOR_FIRST_CONSUMER,
                "waiting for first consumer to be created before binding".to_owned(),
            ),
            [pod] => (
                WAIT_FOR_POD_SCHEDULED,
                format!("waiting for pod {pod} to be scheduled"),
            ),
            pods => (
                WAIT_FOR_POD_SCHEDULED,
                format!("waiting for pods {} to be scheduled", pods.join(",")),
            ),
        };
        self.claim_event(claim, EventType::Normal, reason, message);
    }

    /// Starts provisioning a claim of a class, as `provisionClaim` and
    /// `provisionClaimOperationExternal`: kcm has no in-tree provisioners, so a class of an
    /// external provisioner gets the claim annotated for it (and an `ExternalProvisioning`
    /// event); a class that is missing or names an in-tree plugin gets `ProvisioningFailed`.
    async fn provision_claim(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        if !self.options.enable_dynamic_provisioning {
            return Ok(());
        }
        let class_name = claim_class(claim);
        let Some(class) = self.listers.classes.get_by_key(class_name) else {
            self.claim_event(
                claim,
                EventType::Warning,
                PROVISIONING_FAILED,
                format!("storageclass.storage.k8s.io {class_name:?} not found"),
            );
            return Ok(());
        };
        let provisioner = class.provisioner.as_str();
        if provisioner.starts_with(IN_TREE_PREFIX) && provisioner != HOST_PATH_PLUGIN {
            self.claim_event(
                claim,
                EventType::Warning,
                PROVISIONING_FAILED,
                format!("no volume plugin matched name: {provisioner}"),
            );
            return Ok(());
        }
        // From here on the provisioning is timed, from its first attempt until the claim is
        // bound; each failed attempt counts an error (upstream's `operationTimestamps`).
        let key = claim_key(claim);
        if let Some(metrics) = self.pv_metrics() {
            metrics.operation_started(&key, provisioner, OPERATION_PROVISION);
        }
        // Both paths announce the provisioner on the claim first.
        let claim = match self.set_claim_provisioner(claim, provisioner).await {
            Ok(claim) => claim,
            Err(err) => {
                if let Some(metrics) = self.pv_metrics() {
                    metrics.record_operation(&key, true);
                }
                self.claim_event(
                    claim,
                    EventType::Warning,
                    PROVISIONING_FAILED,
                    format!("Error saving claim: {err}"),
                );
                return Err(err);
            }
        };
        if provisioner == HOST_PATH_PLUGIN {
            // The in-tree hostPath provisioner (`--enable-hostpath-provisioner`) is not
            // modelled: it fails as upstream's does when disabled.
            self.claim_event(
                &claim,
                EventType::Warning,
                PROVISIONING_FAILED,
                format!(
                    "Failed to create provisioner: provisioning in volume plugin \"{HOST_PATH_PLUGIN}\" is disabled"
                ),
            );
            if let Some(metrics) = self.pv_metrics() {
                metrics.record_operation(&key, true);
            }
            return Ok(());
        }
        self.claim_event(
            &claim,
            EventType::Normal,
            EXTERNAL_PROVISIONING,
            format!(
                "Waiting for a volume to be created either by the external provisioner '{provisioner}' \
                 or manually by the system administrator. If volume creation is delayed, please \
                 verify that the provisioner is running and correctly registered."
            ),
        );
        Ok(())
    }

    /// Annotates the claim with the provisioner asked to provision it (both spellings), as
    /// `setClaimProvisioner`.
    async fn set_claim_provisioner(
        &self,
        claim: &PersistentVolumeClaim,
        provisioner: &str,
    ) -> Result<PersistentVolumeClaim> {
        let annotations = claim.metadata.annotations.as_ref();
        let has = |key: &str| {
            annotations
                .and_then(|a| a.get(key))
                .is_some_and(|v| v == provisioner)
        };
        if has(ANN_BETA_STORAGE_PROVISIONER) && has(ANN_STORAGE_PROVISIONER) {
            return Ok(claim.clone());
        }
        let mut updated = claim.clone();
        set_annotation(
            &mut updated.metadata,
            ANN_BETA_STORAGE_PROVISIONER,
            provisioner,
        );
        set_annotation(&mut updated.metadata, ANN_STORAGE_PROVISIONER, provisioner);
        let key = claim_key(claim);
        let saved = self
            .client
            .update_claim(&updated)
            .await
            .map_err(api("setting the provisioner of claim", key))?;
        self.store_claim(&saved);
        Ok(saved)
    }

    /// Carries out a released volume's reclaim policy, as `reclaimVolume`.
    async fn reclaim_volume(&self, volume: &PersistentVolume) -> Result<()> {
        if volume
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_MIGRATED_TO))
            .is_some_and(|v| !v.is_empty())
        {
            // Migrated to CSI: the external provisioner reclaims it.
            return Ok(());
        }
        let policy = volume
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
            .unwrap_or_default();
        match policy {
            "Retain" => {
                tracing::trace!(volume = %name_of(volume), "Reclaim policy is Retain, nothing to do");
                Ok(())
            }
            "Recycle" => self.recycle_volume(volume).await,
            "Delete" => {
                // Timed from the first attempt until the volume's deletion is seen; each
                // failed attempt counts an error.
                let name = name_of(volume);
                if let Some(metrics) = self.pv_metrics() {
                    metrics.operation_started(
                        &name,
                        &self.provisioner_name_of_volume(volume),
                        OPERATION_DELETE,
                    );
                }
                let deleted = self.delete_volume_operation(volume).await;
                if let Some(metrics) = self.pv_metrics()
                    && deleted.is_err()
                {
                    metrics.record_operation(&name, true);
                }
                deleted
            }
            _ => {
                self.update_volume_phase_with_event(
                    volume,
                    "Failed",
                    VOLUME_UNKNOWN_RECLAIM_POLICY,
                    "Volume has unrecognized PersistentVolumeReclaimPolicy".to_owned(),
                )
                .await?;
                Ok(())
            }
        }
    }

    /// Whether the volume needs reclaiming: bound (UID set) to a claim that is gone, replaced,
    /// or bound to another volume, as `isVolumeReleased`.
    fn is_volume_released(&self, volume: &PersistentVolume) -> bool {
        let Some(claim_ref) = claim_ref(volume) else {
            return false;
        };
        if claim_ref.uid.as_deref().unwrap_or_default().is_empty() {
            return false;
        }
        match self.claims.get(&claim_ref_key(claim_ref)) {
            Some(claim) if claim.metadata.uid == claim_ref.uid => {
                let bound_to = claim_volume_name(&claim);
                !bound_to.is_empty() && bound_to != name_of(volume)
            }
            _ => true,
        }
    }

    /// The pods (not terminated) using the volume's claim, as `isVolumeUsed`.
    fn pods_using(&self, volume: &PersistentVolume) -> Vec<String> {
        let Some(claim_ref) = claim_ref(volume) else {
            return Vec::new();
        };
        let mut pods: Vec<String> = self
            .listers
            .pods
            .by_index(POD_PVC_INDEX, &claim_ref_key(claim_ref))
            .unwrap_or_default()
            .into_iter()
            .filter(|pod| !is_pod_terminated(pod))
            .map(|pod| pod.metadata.name.clone().unwrap_or_default())
            .collect();
        pods.sort();
        pods
    }

    /// Recycles a released volume, as `recycleVolumeOperation`: kcm has no recycler plugins,
    /// so a volume no pod uses fails with `VolumeFailedRecycle` (retried at every sync).
    async fn recycle_volume(&self, volume: &PersistentVolume) -> Result<()> {
        let name = name_of(volume);
        let newest = match self.client.get_volume(&name).await {
            Ok(v) => v,
            Err(err) => {
                tracing::debug!(volume = name, %err, "Error reading volume to recycle");
                return Ok(());
            }
        };
        if !self.is_volume_released(&newest) {
            return Ok(());
        }
        let pods = self.pods_using(&newest);
        if !pods.is_empty() {
            self.volume_event(
                &newest,
                EventType::Normal,
                VOLUME_FAILED_RECYCLE,
                format!("Volume is used by pods: {}", pods.join(",")),
            );
            return Ok(());
        }
        self.update_volume_phase_with_event(
            &newest,
            "Failed",
            VOLUME_FAILED_RECYCLE,
            "No recycler plugin found for the volume!".to_owned(),
        )
        .await?;
        Ok(())
    }

    /// The `plugin_name` of a volume's deletion, as upstream's `getProvisionerNameFromVolume`:
    /// the in-tree deleter's name, else (an external provisioner) the provisioner of the
    /// volume's class, rather than the volume's annotation, to bound the label's values; `N/A`
    /// when neither is known.
    fn provisioner_name_of_volume(&self, volume: &PersistentVolume) -> String {
        match self.find_deleter(volume) {
            Ok(Deleter::InTree) => HOST_PATH_PLUGIN.to_owned(),
            Ok(Deleter::External) => {
                let class = volume
                    .spec
                    .as_ref()
                    .and_then(|s| s.storage_class_name.as_deref())
                    .unwrap_or_default();
                self.listers
                    .classes
                    .get_by_key(class)
                    .map(|c| c.provisioner.clone())
                    .unwrap_or_else(|| PLUGIN_NAME_NOT_AVAILABLE.to_owned())
            }
            Err(_) => PLUGIN_NAME_NOT_AVAILABLE.to_owned(),
        }
    }

    /// Finds who deletes a released volume, as `findDeletablePlugin`: the provisioner that
    /// made it (an external one deletes it itself), else a plugin by the volume's source.
    fn find_deleter(&self, volume: &PersistentVolume) -> Result<Deleter, String> {
        let name = name_of(volume);
        if let Some(provisioner) = volume
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_DYNAMICALLY_PROVISIONED))
            .filter(|p| !p.is_empty())
        {
            if provisioner == HOST_PATH_PLUGIN {
                return Ok(Deleter::InTree);
            }
            if !provisioner.starts_with(IN_TREE_PREFIX) {
                return Ok(Deleter::External);
            }
            return Err(format!("no volume plugin matched name: {provisioner}"));
        }
        let spec = volume.spec.clone().unwrap_or_default();
        let message = if spec.host_path.is_some() {
            return Ok(Deleter::InTree);
        } else if spec.nfs.is_some() || spec.local.is_some() {
            "no deletable volume plugin matched"
        } else {
            "no volume plugin matched"
        };
        Err(format!(
            "error getting deleter volume plugin for volume {name:?}: {message}"
        ))
    }

    /// Deletes a released volume whose policy is `Delete`, as `deleteVolumeOperation`: on the
    /// newest copy, unless it is being deleted or no longer released; an external
    /// provisioner's volume is left to it; a failure marks it `Failed` with
    /// `VolumeFailedDelete`.
    async fn delete_volume_operation(&self, volume: &PersistentVolume) -> Result<()> {
        let name = name_of(volume);
        let newest = match self.client.get_volume(&name).await {
            Ok(v) => v,
            Err(err) => {
                tracing::debug!(volume = name, %err, "Error reading volume to delete");
                return Ok(());
            }
        };
        if newest.metadata.deletion_timestamp.is_some() {
            tracing::debug!(volume = name, "Volume is already being deleted");
            return Ok(());
        }
        if !self.is_volume_released(&newest) {
            return Ok(());
        }
        let failure = match self.find_deleter(volume) {
            Ok(Deleter::External) => {
                tracing::debug!(
                    volume = name,
                    "Volume waits for deletion by its external provisioner"
                );
                return Ok(());
            }
            Ok(Deleter::InTree) => {
                let path = volume
                    .spec
                    .as_ref()
                    .and_then(|s| s.host_path.as_ref())
                    .map(|h| h.path.clone())
                    .unwrap_or_default();
                // The hostPath deleter's rule (an unanchored `/tmp/.+`); the directory itself
                // is simulated, so only the object goes.
                let under_tmp = path
                    .match_indices("/tmp/")
                    .any(|(at, m)| path.len() > at + m.len());
                if under_tmp {
                    None
                } else {
                    Some(format!(
                        "host_path deleter only supports /tmp/.+ but received provided {path}"
                    ))
                }
            }
            Err(message) => Some(message),
        };
        if let Some(message) = failure {
            self.update_volume_phase_with_event(
                volume,
                "Failed",
                VOLUME_FAILED_DELETE,
                message.clone(),
            )
            .await?;
            return Err(Error::Delete {
                volume: name,
                message,
            });
        }
        match self.client.delete_volume(&name).await {
            Ok(()) => {
                tracing::info!(volume = name, "Deleted volume");
                Ok(())
            }
            Err(err) if err.is_not_found() => Ok(()),
            Err(err) => Err(api("deleting volume", name)(err)),
        }
    }

    fn claim_event(
        &self,
        claim: &PersistentVolumeClaim,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        self.recorder
            .event(&claim.object_ref(&()), type_, reason, message);
    }

    fn volume_event(
        &self,
        volume: &PersistentVolume,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        self.recorder
            .event(&volume.object_ref(&()), type_, reason, message);
    }
}
