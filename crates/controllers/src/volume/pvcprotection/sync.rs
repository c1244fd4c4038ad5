//! Processing one claim: `processPVC`, `isBeingUsed`, `askInformer`, `askAPIServer`, `podUsesPVC` and `podIsShutDown` (upstream `pvc_protection_controller.go`).

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kcm_machinery::informer::keys::object_key;

use super::controller::PvcProtectionController;
use super::{Error, Result};
use crate::volume::common::{
    POD_PVC_INDEX, is_scheduled, pod_volumes, volume_claim_name, volume_is_for_pod,
};
use crate::volume::protection::{
    PVC_PROTECTION_FINALIZER, is_deletion_candidate, need_to_add_finalizer, with_finalizer,
    without_finalizer,
};

/// The API server's pods of one namespace, listed at most once per batch, as upstream's
/// `LazyLivePodList`: many claims of a namespace deleted together cost one list, not one each.
#[derive(Debug, Default)]
pub struct LivePodList {
    /// The first successful list of this batch; `None` until then.
    pods: Option<Vec<Pod>>,
}

impl PvcProtectionController {
    /// Adds or removes the finalizer of claim `namespace/name`, as upstream's `processPVC`: a
    /// deleted claim loses it unless a pod uses it; a live claim without it gets it (the
    /// admission plugin adds it at creation; this catches claims created without the plugin).
    pub async fn process_claim(
        &self,
        namespace: &str,
        name: &str,
        live: &mut LivePodList,
    ) -> Result<()> {
        let key = object_key(namespace, name);
        tracing::trace!(claim = key, "Processing PVC");
        let Some(claim) = self.claims.get_by_key(&key) else {
            tracing::trace!(claim = key, "PVC not found, ignoring");
            return Ok(());
        };
        if is_deletion_candidate(&claim.metadata, PVC_PROTECTION_FINALIZER) {
            if !self.is_being_used(&claim, live).await? {
                return self.remove_finalizer(&claim).await;
            }
            tracing::debug!(claim = key, "Keeping PVC because it is being used");
        }
        if need_to_add_finalizer(&claim.metadata, PVC_PROTECTION_FINALIZER) {
            return self.add_finalizer(&claim).await;
        }
        Ok(())
    }

    /// Whether a pod uses `claim`, as upstream's `isBeingUsed`: a user in the cache settles it
    /// at once; otherwise the live list decides, since a pod may not have reached the cache.
    async fn is_being_used(
        &self,
        claim: &PersistentVolumeClaim,
        live: &mut LivePodList,
    ) -> Result<bool> {
        if self.ask_informer(claim) {
            return Ok(true);
        }
        self.ask_api_server(claim, live).await
    }

    /// Whether a cached pod uses `claim`, found through the pod-to-claim index, as upstream's
    /// `askInformer`. A failed lookup is logged and answers no: the live list follows.
    fn ask_informer(&self, claim: &PersistentVolumeClaim) -> bool {
        let key = object_key(
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default(),
        );
        match self.pods.by_index(POD_PVC_INDEX, &key) {
            Ok(pods) => {
                // The index also holds pods whose ephemeral volume merely has this name:
                // `pod_uses_claim` checks that the claim is really theirs.
                if pods.iter().any(|pod| pod_uses_claim(pod, claim)) {
                    return true;
                }
                tracing::trace!(
                    claim = key,
                    "No Pod using PVC was found in the Informer's cache"
                );
                false
            }
            Err(err) => {
                tracing::error!(
                    claim = key,
                    %err,
                    "cache-based list of pods failed"
                );
                false
            }
        }
    }

    /// Whether a pod of the API server's live list uses `claim`, listing the namespace once per
    /// batch, as upstream's `askAPIServer`.
    async fn ask_api_server(
        &self,
        claim: &PersistentVolumeClaim,
        live: &mut LivePodList,
    ) -> Result<bool> {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        if live.pods.is_none() {
            tracing::trace!(namespace, "Live listing Pods in namespace");
            let pods =
                self.client
                    .list_pods(namespace)
                    .await
                    .map_err(|source| Error::ListPods {
                        namespace: namespace.to_owned(),
                        source,
                    })?;
            live.pods = Some(pods);
        }
        let used = live
            .pods
            .iter()
            .flatten()
            .any(|pod| pod_uses_claim(pod, claim));
        if !used {
            tracing::debug!(
                claim = ?claim.metadata.name,
                namespace,
                "PVC is unused"
            );
        }
        Ok(used)
    }

    async fn add_finalizer(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        let mut updated = claim.clone();
        updated.metadata = with_finalizer(&claim.metadata, PVC_PROTECTION_FINALIZER);
        self.update(&updated, "adding").await
    }

    async fn remove_finalizer(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        let mut updated = claim.clone();
        updated.metadata = without_finalizer(&claim.metadata, PVC_PROTECTION_FINALIZER);
        self.update(&updated, "removing").await
    }

    async fn update(&self, claim: &PersistentVolumeClaim, action: &'static str) -> Result<()> {
        let key = object_key(
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default(),
        );
        self.client
            .update_claim(claim)
            .await
            .map_err(|source| Error::Update {
                action,
                claim: key.clone(),
                source,
            })?;
        tracing::debug!(claim = key, action, "Changed protection finalizer of PVC");
        Ok(())
    }
}

/// Whether `pod` uses `claim`, as upstream's `podUsesPVC`. Only a scheduled pod counts (a
/// kubelet sees a pod once it is scheduled, and refuses to start one whose claim is being
/// deleted). It uses the claim if a `persistentVolumeClaim` volume names it, whatever the pod's
/// phase; or if one of its generic ephemeral volumes gets that name and the claim is the one
/// made for the pod, unless the pod is shut down ([`pod_is_shut_down`]).
pub fn pod_uses_claim(pod: &Pod, claim: &PersistentVolumeClaim) -> bool {
    if !is_scheduled(pod) {
        return false;
    }
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    pod_volumes(pod).any(|volume| {
        let direct = volume
            .persistent_volume_claim
            .as_ref()
            .is_some_and(|source| source.claim_name == name);
        let ephemeral = || {
            !pod_is_shut_down(pod)
                && volume.ephemeral.is_some()
                && volume_claim_name(pod, volume) == name
                && volume_is_for_pod(pod, claim).is_ok()
        };
        direct || ephemeral()
    })
}

/// Whether the kubelet is done with `pod` or it was force-deleted: it has a deletion timestamp
/// and a zero `deletionGracePeriodSeconds`, as upstream's `podIsShutDown`. Such a pod only waits
/// for garbage collection (perhaps blocked by its own finalizers), so its ephemeral claim may
/// go; waiting for the pod could deadlock against a pod finalizer waiting for the claim.
pub fn pod_is_shut_down(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
        && pod.metadata.deletion_grace_period_seconds == Some(0)
}
