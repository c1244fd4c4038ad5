//! The simulated kubelets' volume expansion: the node side of a resize, as the kubelet's `NodeExpander` (`pkg/volume/util/operationexecutor/node_expander.go`) and `pkg/volume/util/resize_util.go` finish it.
//!
//! When a pod using a claim starts on a node (its volumes attached) or runs there, and the
//! claim's volume is bigger than the claim's `status.capacity` with the resizer having left it
//! `NodeResizePending`, the kubelet grows the file system (`NodeExpandVolume`, which always
//! succeeds here) and records it:
//!
//! 1. `MarkNodeExpansionInProgress`: `allocatedResourceStatuses.storage` =
//!    `NodeResizeInProgress`;
//! 2. event `FileSystemResizeSuccessful` on the pod and on the claim: `MountVolume.NodeExpandVolume
//!    succeeded for volume "<pv>" <node>` (`VolumeToMount.GenerateMsg` with the node as suffix);
//! 3. `MarkNodeExpansionFinishedWithRecovery`: `status.capacity.storage` = the volume's size,
//!    the `allocatedResourceStatuses` entry removed, every resize condition (`Resizing`,
//!    `FileSystemResizePending`, ...) removed.
//!
//! Both patches are pinned to the claim's resourceVersion, as `PatchPVCStatus`. A claim no pod
//! uses stays `FileSystemResizePending`.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kcm_machinery::controller::api_status::ApiStatus;
use kcm_machinery::events::EventType;

use super::{Error, Result, Simulator, lock};
use crate::scheduler::service::pod_reference;
use crate::storage::resize_status::{
    FILE_SYSTEM_RESIZE_PENDING, NODE_RESIZE_IN_PROGRESS, NODE_RESIZE_PENDING, STORAGE, capacity,
    claim_reference, has_true_condition, merge_resize_conditions, milli, resize_status,
    set_conditions, set_resize_status, status_patch, storage_of,
};

/// Event reason of a finished node expansion (`events.FileSystemResizeSuccess`).
pub const FILE_SYSTEM_RESIZE_SUCCESSFUL: &str = "FileSystemResizeSuccessful";

/// Whether `claim` waits for a node to expand `volume`: the volume is bigger than the claim's
/// `status.capacity`, and the resizer left it `NodeResizePending` (`NodeResizeInProgress`: a
/// kubelet started and did not finish) or, for a resizer that writes no
/// `allocatedResourceStatuses`, a `FileSystemResizePending` condition.
pub fn needs_node_expansion(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let pv_size = milli(storage_of(
        volume.spec.as_ref().and_then(|s| s.capacity.as_ref()),
    ));
    let waiting = match resize_status(claim) {
        Some(NODE_RESIZE_PENDING | NODE_RESIZE_IN_PROGRESS) => true,
        Some(_) => false,
        None => has_true_condition(claim, FILE_SYSTEM_RESIZE_PENDING),
    };
    waiting && pv_size > milli(capacity(claim))
}

impl Simulator {
    /// Expands on `node` the volumes of `pod`'s claims that wait for it (the kubelet's
    /// `NodeExpandVolume` path while mounting, or for a mounted volume of a running pod).
    pub(super) async fn expand_volumes(&self, pod: &Pod, node: &str) -> Result<()> {
        let Some((claims, volumes)) = self.shared.volumes.get() else {
            return Ok(());
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        for name in super::Shared::claim_names(pod) {
            let Some(claim) = claims.get(namespace, &name) else {
                continue;
            };
            let Some(volume) = claim
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref())
                .and_then(|v| volumes.get_cluster(v))
            else {
                continue;
            };
            if !needs_node_expansion(&claim, &volume) {
                continue;
            }
            let uid = claim.metadata.uid.clone().unwrap_or_default();
            let new_size = storage_of(volume.spec.as_ref().and_then(|s| s.capacity.as_ref()))
                .cloned()
                .unwrap_or_default();
            let target = milli(Some(&new_size));
            if lock(&self.shared.expanded)
                .get(&uid)
                .is_some_and(|done| *done >= target)
            {
                // Done already; the claim cache has not seen the kubelet's patch yet.
                continue;
            }
            self.expand_claim(pod, node, &claim, &volume, new_size)
                .await?;
            lock(&self.shared.expanded).insert(uid, target);
        }
        Ok(())
    }

    /// The three steps of the module doc for one claim.
    async fn expand_claim(
        &self,
        pod: &Pod,
        node: &str,
        claim: &PersistentVolumeClaim,
        volume: &PersistentVolume,
        new_size: k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    ) -> Result<()> {
        let key = format!(
            "{}/{}",
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default()
        );
        let failed = |source: kube::Error| Error::ClaimStatus {
            claim: key.clone(),
            source,
        };
        let mut in_progress = claim.clone();
        set_resize_status(
            in_progress.status.get_or_insert_with(Default::default),
            Some(NODE_RESIZE_IN_PROGRESS),
        );
        let claim = match self
            .client
            .patch_claim_status(claim, &status_patch(claim, &in_progress, true))
            .await
        {
            Ok(claim) => claim,
            Err(err) if err.is_not_found() => return Ok(()),
            Err(err) => return Err(failed(err)),
        };
        let pv = volume.metadata.name.as_deref().unwrap_or_default();
        let message = format!("MountVolume.NodeExpandVolume succeeded for volume {pv:?} {node}");
        if let Some(recorder) = self.shared.recorders.get(node) {
            for regarding in [pod_reference(pod), claim_reference(&claim)] {
                recorder.event(
                    &regarding,
                    EventType::Normal,
                    FILE_SYSTEM_RESIZE_SUCCESSFUL,
                    message.clone(),
                );
            }
        }
        let mut finished = claim.clone();
        let status = finished.status.get_or_insert_with(Default::default);
        status
            .capacity
            .get_or_insert_with(Default::default)
            .insert(STORAGE.to_owned(), new_size.clone());
        set_resize_status(status, None);
        let merged = merge_resize_conditions(
            status.conditions.as_deref().unwrap_or_default(),
            Vec::new(),
            false,
        );
        set_conditions(status, merged);
        match self
            .client
            .patch_claim_status(&claim, &status_patch(&claim, &finished, true))
            .await
        {
            Ok(_) => {
                tracing::info!(
                    claim = key,
                    node,
                    size = new_size.0,
                    "volume expanded on the node"
                );
                Ok(())
            }
            Err(err) if err.is_not_found() => Ok(()),
            Err(err) => Err(failed(err)),
        }
    }
}
