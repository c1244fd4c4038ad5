//! The simulated CSI driver's resizer: the external-resizer sidecar's control-plane expansion of claims bound to [`CSI_DRIVER`] volumes, as kubernetes-csi/external-resizer's `resizeController` (with `RecoverVolumeExpansionFailure`, `expandAndRecover`) behaves.
//!
//! A bound claim whose request exceeds `status.capacity`, bound to a PV whose `spec.csi.driver`
//! is [`CSI_DRIVER`] (upstream's `csiResizer.CanSupport`; kcm's expand controller, like
//! upstream's for CSI volumes, sets no `volume.kubernetes.io/storage-resizer` annotation) goes
//! through, each step a `persistentvolumeclaims/status` merge patch:
//!
//! 1. `markControllerResizeInProgress`: condition `Resizing`, `allocatedResources.storage` = the
//!    new size, `allocatedResourceStatuses.storage` = `ControllerResizeInProgress`; event
//!    `Resizing` (`External resizer is resizing volume <pv>`);
//! 2. `ControllerExpandVolume` succeeds; `updatePVCapacity` patches the PV's
//!    `spec.capacity.storage` to the new size;
//! 3. the simulated driver has no online expansion and needs the node to grow the file system,
//!    so `markForPendingNodeExpansion`: condition `FileSystemResizePending` ("Waiting for user
//!    to (re-)start a pod to finish file system resize of volume on node."), the other resize
//!    conditions kept (`keepOldResizeConditions`, so `Resizing` stays until the kubelet
//!    finishes), `allocatedResourceStatuses.storage` = `NodeResizePending`; event
//!    `FileSystemResizeRequired` ("Require file system resize of volume on node").
//!
//! The kubelet then finishes on the node ([`crate::simulator`]). Fault: a PV or StorageClass
//! annotated [`ANNOTATION_RESIZE_FAILS`]`: "<message>"` makes `ControllerExpandVolume` fail with
//! `OutOfRange` (the CSI code for an unsupported capacity), a final infeasible error:
//! `allocatedResourceStatuses.storage` = `ControllerResizeInfeasible`, condition
//! `ControllerResizeError` (`failed to expand pvc with <error>`), Warning event
//! `VolumeResizeFailed` (`resize volume "<pv>" by resizer "<driver>" failed: <error>`). The
//! claim then waits for a change (upstream parks it in its slow-retry set): removing the
//! annotation retries it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_machinery::controller::{ErrorPolicy, run_controller};
use kcm_machinery::events::{EventRecorder, EventType, SystemClock, WallClock};
use kcm_machinery::informer::{
    DeletedObject, Indexer, ResourceEventHandler, SharedInformerFactory, meta_namespace_key,
};
use kcm_machinery::workqueue::{QueueConfig, RateLimitingQueue, default_controller_rate_limiter};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::attacher::CSI_DRIVER;
use super::client::VolumeClient;
use super::resize_status::{
    CONTROLLER_RESIZE_ERROR, CONTROLLER_RESIZE_IN_PROGRESS, CONTROLLER_RESIZE_INFEASIBLE,
    FILE_SYSTEM_RESIZE_PENDING, FILE_SYSTEM_RESIZE_PENDING_MESSAGE, NODE_RESIZE_IN_PROGRESS,
    NODE_RESIZE_INFEASIBLE, NODE_RESIZE_PENDING, RESIZING, STORAGE, allocated, capacity,
    claim_reference, has_true_condition, merge_resize_conditions, milli, requested, resize_status,
    set_conditions, set_resize_status, status_patch, storage_of, true_condition,
};
use super::{Synced, watch};

/// Fault annotation on a PersistentVolume or its StorageClass: its claims' control-plane resize
/// fails with this message (a final `OutOfRange` error, so `ControllerResizeInfeasible`).
pub const ANNOTATION_RESIZE_FAILS: &str = "sim.kcm.io/resize-fails";

/// The claim annotation naming the resizer of an in-tree or migrated volume
/// (`util.VolumeResizerKey`); a change of it requeues the claim, as upstream's `updatePVC`.
pub const STORAGE_RESIZER_ANNOTATION: &str = "volume.kubernetes.io/storage-resizer";

/// Event reason: the resize started (`util.VolumeResizing`).
pub const VOLUME_RESIZING: &str = "Resizing";
/// Event reason: the resize failed (`util.VolumeResizeFailed`).
pub const VOLUME_RESIZE_FAILED: &str = "VolumeResizeFailed";
/// Event reason: the node must grow the file system (`util.FileSystemResizeRequired`).
pub const FILE_SYSTEM_RESIZE_REQUIRED: &str = "FileSystemResizeRequired";

/// How many claims are resized at once.
const WORKERS: usize = 2;

/// The `source.component` of the resizer's events, as the sidecar's recorder
/// (`external-resizer <driver>`).
pub fn event_component() -> String {
    format!("external-resizer {CSI_DRIVER}")
}

/// Why a resize step failed (the queue retries it).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{step} for {object}: {source}")]
    Api {
        /// What was being done (`marking the claim resizing`, ...).
        step: &'static str,
        /// The claim (`namespace/name`) or PV name.
        object: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// The fault message of `meta`'s [`ANNOTATION_RESIZE_FAILS`], if set.
fn resize_fault(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_RESIZE_FAILS))
        .map(String::as_str)
}

/// Whether `claim` asks for a resize, as upstream's `pvcNeedResize`: bound, with a volume, and
/// requesting more than its `status.capacity`.
pub fn pvc_needs_resize(claim: &PersistentVolumeClaim) -> bool {
    let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    let has_volume = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty());
    bound && has_volume && milli(requested(claim)) > milli(capacity(claim))
}

/// Whether this resizer expands `volume` for `claim`, as upstream's `pvCanBeExpanded`: the
/// volume is of [`CSI_DRIVER`] and its `claimRef` names the claim (namespace and uid).
pub fn can_expand(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(spec) = volume.spec.as_ref() else {
        return false;
    };
    let ours = spec.csi.as_ref().is_some_and(|c| c.driver == CSI_DRIVER);
    let bound_here = spec
        .claim_ref
        .as_ref()
        .is_some_and(|r| r.namespace == claim.metadata.namespace && r.uid == claim.metadata.uid);
    ours && bound_here
}

/// The size to expand to, or `None` when nothing is to be done now, as upstream's
/// `expandAndRecover` picks it from the request, the PV's size, `allocatedResources` and
/// `allocatedResourceStatuses`.
pub fn target_size(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> Option<Quantity> {
    let spec_size = requested(claim)?.clone();
    let pv_size = milli(storage_of(
        volume.spec.as_ref().and_then(|s| s.capacity.as_ref()),
    ));
    let allocated = allocated(claim).cloned();
    let status = resize_status(claim).unwrap_or_default();
    let allocated_or = |fallback: Quantity| allocated.clone().unwrap_or(fallback);
    if pv_size < milli(Some(&spec_size)) {
        // The volume is smaller than asked: a previous expansion must finish first.
        match status {
            NODE_RESIZE_INFEASIBLE => Some(allocated_or(spec_size)),
            NODE_RESIZE_PENDING | NODE_RESIZE_IN_PROGRESS => {
                let size = allocated_or(spec_size);
                (pv_size < milli(Some(&size))).then_some(size)
            }
            CONTROLLER_RESIZE_IN_PROGRESS => Some(allocated_or(spec_size)),
            _ => Some(spec_size),
        }
    } else {
        // Already expanded: a spurious event, or work not yet recorded in the claim.
        match status {
            NODE_RESIZE_PENDING | NODE_RESIZE_IN_PROGRESS => None,
            NODE_RESIZE_INFEASIBLE
            | CONTROLLER_RESIZE_IN_PROGRESS
            | CONTROLLER_RESIZE_INFEASIBLE => Some(allocated_or(spec_size)),
            _ => match allocated {
                Some(size) if status.is_empty() => Some(size),
                _ if has_true_condition(claim, FILE_SYSTEM_RESIZE_PENDING) => None,
                _ => Some(spec_size),
            },
        }
    }
}

/// The simulated external resizer: watches claims and resizes those of [`CSI_DRIVER`] volumes.
pub struct Resizer {
    client: Arc<dyn VolumeClient>,
    /// Records `Resizing`, `VolumeResizeFailed`, `FileSystemResizeRequired` on claims.
    recorder: Arc<dyn EventRecorder>,
    /// The time of the conditions written.
    clock: Arc<dyn WallClock>,
    /// PersistentVolumeClaims.
    claims: Indexer<PersistentVolumeClaim>,
    /// PersistentVolumes.
    volumes: Indexer<PersistentVolume>,
    /// StorageClasses (the fault annotation).
    classes: Indexer<StorageClass>,
    /// Claim keys (`namespace/name`) to look at.
    queue: RateLimitingQueue<String>,
    synced: Vec<Synced>,
}

impl std::fmt::Debug for Resizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resizer").finish_non_exhaustive()
    }
}

/// Queues claims as upstream's `addPVC`/`updatePVC` (added; request grown; resizer annotation
/// changed; a resync; capacity grown), and the claims of a volume or class whose annotations
/// changed (a fault removed).
#[derive(Clone)]
struct ResizerHandlers {
    queue: RateLimitingQueue<String>,
    claims: Indexer<PersistentVolumeClaim>,
}

impl ResizerHandlers {
    fn claim(&self, claim: &PersistentVolumeClaim) {
        if let Ok(key) = meta_namespace_key(claim) {
            self.queue.add(key);
        }
    }

    /// Queues the claims bound to `volume`, or every claim when `None`.
    fn claims_of(&self, volume: Option<&str>) {
        for claim in self.claims.list() {
            let name = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref());
            if volume.is_none() || name == volume {
                self.claim(&claim);
            }
        }
    }
}

impl ResourceEventHandler<PersistentVolumeClaim> for ResizerHandlers {
    fn on_add(&self, claim: Arc<PersistentVolumeClaim>, _initial: bool) {
        self.claim(&claim);
    }
    fn on_update(&self, old: Arc<PersistentVolumeClaim>, new: Arc<PersistentVolumeClaim>) {
        let resizer = |c: &PersistentVolumeClaim| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(STORAGE_RESIZER_ANNOTATION).cloned())
        };
        if milli(requested(&new)) > milli(requested(&old))
            || resizer(&new) != resizer(&old)
            || new.metadata.resource_version == old.metadata.resource_version
            || milli(capacity(&new)) > milli(capacity(&old))
        {
            self.claim(&new);
        }
    }
    fn on_delete(&self, obj: DeletedObject<PersistentVolumeClaim>) {
        if let Ok(key) = meta_namespace_key(obj.object().as_ref()) {
            self.queue.forget(&key);
        }
    }
}

impl ResourceEventHandler<PersistentVolume> for ResizerHandlers {
    fn on_add(&self, _volume: Arc<PersistentVolume>, _initial: bool) {}
    fn on_update(&self, old: Arc<PersistentVolume>, new: Arc<PersistentVolume>) {
        if old.metadata.annotations != new.metadata.annotations {
            self.claims_of(new.metadata.name.as_deref());
        }
    }
    fn on_delete(&self, _obj: DeletedObject<PersistentVolume>) {}
}

impl ResourceEventHandler<StorageClass> for ResizerHandlers {
    fn on_add(&self, _class: Arc<StorageClass>, _initial: bool) {}
    fn on_update(&self, old: Arc<StorageClass>, new: Arc<StorageClass>) {
        if old.metadata.annotations != new.metadata.annotations {
            self.claims_of(None);
        }
    }
    fn on_delete(&self, _obj: DeletedObject<StorageClass>) {}
}

impl Resizer {
    /// A resizer over the factory's claim, volume and class informers, recording through
    /// `recorder` (give it [`event_component`] as its component).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: Arc<dyn VolumeClient>,
        recorder: Arc<dyn EventRecorder>,
    ) -> Self {
        let claims = factory.informer_for::<PersistentVolumeClaim>();
        let volumes = factory.informer_for::<PersistentVolume>();
        let classes = factory.informer_for::<StorageClass>();
        let mut resizer = Self::with_caches(
            claims.indexer().clone(),
            volumes.indexer().clone(),
            classes.indexer().clone(),
            client,
            recorder,
            Arc::new(SystemClock),
        );
        let handlers = ResizerHandlers {
            queue: resizer.queue.clone(),
            claims: resizer.claims.clone(),
        };
        resizer.synced = vec![
            watch("resizer", &claims, handlers.clone()),
            watch("resizer", &volumes, handlers.clone()),
            watch("resizer", &classes, handlers),
        ];
        resizer
    }

    /// A resizer over bare caches (tests fill them and call [`Self::sync`]).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        claims: Indexer<PersistentVolumeClaim>,
        volumes: Indexer<PersistentVolume>,
        classes: Indexer<StorageClass>,
        client: Arc<dyn VolumeClient>,
        recorder: Arc<dyn EventRecorder>,
        clock: Arc<dyn WallClock>,
    ) -> Self {
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: "sim-resizer".to_owned(),
                metrics: None,
            },
        );
        Self {
            client,
            recorder,
            clock,
            claims,
            volumes,
            classes,
            queue,
            synced: Vec::new(),
        }
    }

    /// Waits for the caches, then resizes claims until `cancel`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        run_controller(
            "sim-resizer",
            "the simulated CSI resizer",
            &self.queue,
            ErrorPolicy::new("resizing failed"),
            WORKERS,
            &cancel,
            || self.synced.iter().all(|s| s()),
            sync,
        )
        .await;
    }

    /// Resizes claim `key` if it asks for it, as upstream's `syncPVC`.
    pub async fn sync(&self, key: &str) -> Result<(), Error> {
        let Some(claim) = self.claims.get_by_key(key) else {
            return Ok(());
        };
        let Some(volume) = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .filter(|v| !v.is_empty())
            .and_then(|v| self.volumes.get_by_key(v))
        else {
            return Ok(());
        };
        if !pvc_needs_resize(&claim) || !can_expand(&volume, &claim) {
            return Ok(());
        }
        self.expand(key, &claim, &volume).await
    }

    /// The fault message for `volume` (its own annotation, else its class's).
    fn fault(&self, volume: &PersistentVolume) -> Option<String> {
        if let Some(message) = resize_fault(&volume.metadata) {
            return Some(message.to_owned());
        }
        let class = volume
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref())
            .and_then(|c| self.classes.get_by_key(c))?;
        resize_fault(&class.metadata).map(str::to_owned)
    }

    /// Upstream's `expandAndRecover` for one claim and its volume.
    async fn expand(
        &self,
        key: &str,
        claim: &PersistentVolumeClaim,
        volume: &PersistentVolume,
    ) -> Result<(), Error> {
        let Some(new_size) = target_size(claim, volume) else {
            return Ok(());
        };
        let pv_name = volume.metadata.name.clone().unwrap_or_default();
        let fault = self.fault(volume);
        // Expanding to the size already recorded changes no status fields.
        let same_size = allocated(claim).is_some_and(|a| milli(Some(a)) == milli(Some(&new_size)));
        if same_size
            && resize_status(claim) == Some(CONTROLLER_RESIZE_INFEASIBLE)
            && fault.is_some()
        {
            // Upstream's slow-retry set: the same infeasible expansion is not retried at once.
            tracing::debug!(
                claim = key,
                "skipping an expansion that failed as infeasible"
            );
            return Ok(());
        }
        let claim = self
            .mark_controller_resize_in_progress(key, claim, &new_size, !same_size)
            .await?;
        self.recorder.event(
            &claim_reference(&claim),
            EventType::Normal,
            VOLUME_RESIZING,
            format!("External resizer is resizing volume {pv_name}"),
        );
        if let Some(message) = fault {
            let err = format!("rpc error: code = OutOfRange desc = {message}");
            self.mark_controller_expansion_infeasible(key, &claim, &err)
                .await?;
            self.recorder.event(
                &claim_reference(&claim),
                EventType::Warning,
                VOLUME_RESIZE_FAILED,
                format!("resize volume {pv_name:?} by resizer {CSI_DRIVER:?} failed: {err}"),
            );
            return Ok(());
        }
        // ControllerExpandVolume succeeded; record the new size on the volume.
        let patch = json!({ "spec": { "capacity": { "storage": new_size } } });
        self.client
            .patch_volume(&pv_name, &patch)
            .await
            .map_err(|source| Error::Api {
                step: "updating the volume's capacity",
                object: pv_name.clone(),
                source,
            })?;
        self.mark_for_pending_node_expansion(key, &claim).await?;
        self.recorder.event(
            &claim_reference(&claim),
            EventType::Normal,
            FILE_SYSTEM_RESIZE_REQUIRED,
            "Require file system resize of volume on node".to_owned(),
        );
        tracing::info!(
            claim = key,
            volume = pv_name,
            size = new_size.0,
            "volume resized; node expansion pending"
        );
        Ok(())
    }

    /// Upstream's `markControllerResizeInProgress`: `Resizing`, the allocated size and (when
    /// `update_status`) `ControllerResizeInProgress`, pinned to the claim's resourceVersion.
    async fn mark_controller_resize_in_progress(
        &self,
        key: &str,
        claim: &PersistentVolumeClaim,
        new_size: &Quantity,
        update_status: bool,
    ) -> Result<PersistentVolumeClaim, Error> {
        let mut new = claim.clone();
        let status = new.status.get_or_insert_with(Default::default);
        let merged = merge_resize_conditions(
            status.conditions.as_deref().unwrap_or_default(),
            vec![true_condition(RESIZING, None, self.clock.now())],
            !update_status,
        );
        set_conditions(status, merged);
        if update_status {
            set_resize_status(status, Some(CONTROLLER_RESIZE_IN_PROGRESS));
        }
        status
            .allocated_resources
            .get_or_insert_with(Default::default)
            .insert(STORAGE.to_owned(), new_size.clone());
        self.patch(key, claim, &new, true, "marking the claim resizing")
            .await
    }

    /// Upstream's `markControllerExpansionInfeasible`: `ControllerResizeInfeasible` and the
    /// `ControllerResizeError` condition, not pinned (the failure is recorded even when stale).
    async fn mark_controller_expansion_infeasible(
        &self,
        key: &str,
        claim: &PersistentVolumeClaim,
        err: &str,
    ) -> Result<PersistentVolumeClaim, Error> {
        let mut new = claim.clone();
        let status = new.status.get_or_insert_with(Default::default);
        set_resize_status(status, Some(CONTROLLER_RESIZE_INFEASIBLE));
        let merged = merge_resize_conditions(
            status.conditions.as_deref().unwrap_or_default(),
            vec![true_condition(
                CONTROLLER_RESIZE_ERROR,
                Some(format!("failed to expand pvc with {err}")),
                self.clock.now(),
            )],
            true,
        );
        set_conditions(status, merged);
        self.patch(key, claim, &new, false, "marking the expansion infeasible")
            .await
    }

    /// Upstream's `markForPendingNodeExpansion`: `FileSystemResizePending` (older resize
    /// conditions kept) and `NodeResizePending`, pinned to the claim's resourceVersion.
    async fn mark_for_pending_node_expansion(
        &self,
        key: &str,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, Error> {
        let mut new = claim.clone();
        let status = new.status.get_or_insert_with(Default::default);
        let merged = merge_resize_conditions(
            status.conditions.as_deref().unwrap_or_default(),
            vec![true_condition(
                FILE_SYSTEM_RESIZE_PENDING,
                Some(FILE_SYSTEM_RESIZE_PENDING_MESSAGE.to_owned()),
                self.clock.now(),
            )],
            true,
        );
        set_conditions(status, merged);
        set_resize_status(status, Some(NODE_RESIZE_PENDING));
        self.patch(key, claim, &new, true, "marking the node expansion pending")
            .await
    }

    /// Sends the status patch from `old` to `new` (upstream's `util.PatchClaim`).
    async fn patch(
        &self,
        key: &str,
        old: &PersistentVolumeClaim,
        new: &PersistentVolumeClaim,
        check_resource_version: bool,
        step: &'static str,
    ) -> Result<PersistentVolumeClaim, Error> {
        let patch = status_patch(old, new, check_resource_version);
        self.client
            .patch_claim_status(old, &patch)
            .await
            .map_err(|source| Error::Api {
                step,
                object: key.to_owned(),
                source,
            })
    }
}

#[cfg(test)]
#[path = "resizer_tests.rs"]
mod tests;
