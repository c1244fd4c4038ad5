//! The simulated kubelets' side of Dynamic Resource Allocation: a pod naming ResourceClaims
//! starts only once each claim is allocated and reserved for it, as the kubelet's
//! `PrepareDynamicResources`. Until then the pod stays `Pending` with its containers waiting
//! (`ContainerCreating`) and a `FailedPrepareDynamicResources` Warning event says why; a change
//! to a claim wakes the pods it is reserved for.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateWaiting, ContainerStatus, Pod, PodStatus,
};
use k8s_openapi::api::resource::v1::ResourceClaim;

use kcm_machinery::informer::{DeletedObject, ResourceEventHandler, SharedIndexInformer};

use super::{Shared, Simulator};
use crate::NO_RESYNC;
use kcm_machinery::dra::{claim_name, is_allocated, is_for_pod, is_reserved_for_pod, pod_claims};

/// The kubelet's event reason when a pod's claims cannot be prepared.
pub const FAILED_PREPARE_DYNAMIC_RESOURCES: &str = "FailedPrepareDynamicResources";

/// Wakes the pods a claim is reserved for (the scheduler just reserved it, or it changed).
struct ClaimHandler(Arc<Shared>);

impl ClaimHandler {
    fn changed(&self, claim: &ResourceClaim) {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let reserved = claim
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.as_ref())
            .into_iter()
            .flatten()
            .filter(|r| r.resource == "pods");
        for consumer in reserved {
            if let Some(pod) = self.0.pods.get(namespace, &consumer.name)
                && self.0.node_of(&pod).is_some()
            {
                self.0
                    .pod_queue
                    .add(format!("{namespace}/{}", consumer.name));
            }
        }
    }
}

impl ResourceEventHandler<ResourceClaim> for ClaimHandler {
    fn on_add(&self, claim: Arc<ResourceClaim>, _is_in_initial_list: bool) {
        self.changed(&claim);
    }

    fn on_update(&self, _old: Arc<ResourceClaim>, new: Arc<ResourceClaim>) {
        self.changed(&new);
    }

    fn on_delete(&self, _obj: DeletedObject<ResourceClaim>) {}
}

/// Why the kubelet cannot prepare `pod`'s claims yet (upstream's messages), or `None` when
/// every claim is allocated and reserved for it.
pub(super) fn claims_not_prepared(
    claims: &kcm_machinery::informer::Lister<ResourceClaim>,
    pod: &Pod,
) -> Option<String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    for entry in pod_claims(pod) {
        let (name, must_check_owner) = match claim_name(pod, entry) {
            Ok((Some(name), owned)) => (name, owned),
            Ok((None, _)) => continue,
            Err(e) => return Some(e.to_string()),
        };
        let Some(claim) = claims.get(namespace, &name) else {
            return Some(format!(
                "failed to fetch ResourceClaim {name} referenced by pod {pod_name}: resourceclaims.resource.k8s.io {name:?} not found"
            ));
        };
        if must_check_owner && let Err(e) = is_for_pod(pod, &claim) {
            return Some(e.to_string());
        }
        if !is_reserved_for_pod(pod, &claim) || !is_allocated(&claim) {
            return Some(format!(
                "pod {pod_name} ({}) is not allowed to use ResourceClaim {name} ({})",
                pod.metadata.uid.as_deref().unwrap_or_default(),
                claim.metadata.uid.as_deref().unwrap_or_default(),
            ));
        }
    }
    None
}

/// `pod`'s status while its claims are not prepared: `Pending`, each container waiting with
/// `ContainerCreating`, as the kubelet reports a pod whose sandbox it cannot start.
pub(super) fn waiting_status(pod: &Pod, host_ip: &str) -> PodStatus {
    let mut status = pod.status.clone().unwrap_or_default();
    status.phase = Some("Pending".to_owned());
    status.host_ip = Some(host_ip.to_owned());
    let waiting = |c: &k8s_openapi::api::core::v1::Container| ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        image_id: String::new(),
        ready: false,
        restart_count: 0,
        started: Some(false),
        state: Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ContainerCreating".to_owned()),
                message: None,
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    };
    let spec = pod.spec.as_ref();
    status.container_statuses = spec.map(|s| s.containers.iter().map(waiting).collect());
    if let Some(inits) = spec.and_then(|s| s.init_containers.as_ref()) {
        status.init_container_statuses = Some(inits.iter().map(waiting).collect());
    }
    status
}

impl Simulator {
    /// Gives the kubelets the ResourceClaim informer (started by the caller), so that a pod
    /// naming claims starts only once they are allocated and reserved for it. A second call
    /// changes nothing.
    pub fn watch_resource_claims(&self, claims: &SharedIndexInformer<ResourceClaim>) {
        if self.shared.resource_claims.set(claims.lister()).is_err() {
            return;
        }
        if let Err(err) = claims
            .add_event_handler_with_resync_period(ClaimHandler(self.shared.clone()), NO_RESYNC)
        {
            tracing::error!(%err, "registering the simulator's resource claim event handler");
        }
    }
}
