//! Simulated Dynamic Resource Allocation: the driver `gpu.sim.kcm.io` and what the scheduler and
//! the simulated kubelets share about ResourceClaims.
//!
//! Where to start: [`Driver`] publishes one ResourceSlice per simulated node
//! ([`node_resource_slice`]: pool = node name, devices `gpu-0..`) owned by its Node, and the
//! DeviceClass [`DRIVER`] ([`device_class`]) whose selector is `device.driver ==
//! "gpu.sim.kcm.io"`. [`cel`] evaluates the simple CEL selector forms it needs. The scheduler's
//! allocation lives in [`crate::scheduler::dynamic_resources`]; the helpers here
//! ([`pod_claim_name`], [`is_reserved_for_pod`]) mirror `k8s.io/dynamic-resource-allocation/resourceclaim`.

pub mod cel;
pub mod client;
pub mod driver;

pub use client::{DraClient, FakeDra, KubeDraClient};
pub use driver::{DEFAULT_DEVICES_PER_NODE, Driver, device_class, node_resource_slice, slice_name};

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::ResourceClaim;

/// The simulated driver's name, also the name of its DeviceClass and its attribute domain.
pub const DRIVER: &str = "gpu.sim.kcm.io";
/// The finalizer the scheduler puts on a claim it allocates (`resourceapi.Finalizer`); the
/// resourceclaim controller removes it once the claim is deallocated.
pub const FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// How many consumers a claim may be reserved for (`ResourceClaimReservedForMaxSize`).
pub const RESERVED_FOR_MAX_SIZE: usize = 256;

/// The name of the ResourceClaim behind a pod's `spec.resourceClaims` entry, as
/// `resourceclaim.Name`: `resourceClaimName` directly, or for a template entry the name the
/// resourceclaim controller recorded in `status.resourceClaimStatuses` (and then the claim must
/// be owned by the pod: the `bool`). `Ok(None)` when the controller recorded that no claim is
/// needed; an error (upstream's message) when it has not recorded anything yet.
pub fn pod_claim_name(
    pod: &Pod,
    entry: &PodResourceClaim,
) -> Result<Option<(String, bool)>, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    if let Some(claim) = &entry.resource_claim_name {
        return Ok(Some((claim.clone(), false)));
    }
    if entry.resource_claim_template_name.is_some() {
        let recorded = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .and_then(|all| all.iter().find(|s| s.name == entry.name));
        return match recorded {
            Some(status) => Ok(status.resource_claim_name.clone().map(|c| (c, true))),
            None => Err(format!(
                "pod \"{namespace}/{name}\": ResourceClaim not created yet"
            )),
        };
    }
    Err(format!(
        "pod \"{namespace}/{name}\", spec.resourceClaim {:?}: none of the supported fields are set",
        entry.name
    ))
}

/// The pod's `spec.resourceClaims`.
pub fn pod_resource_claims(pod: &Pod) -> &[PodResourceClaim] {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_deref())
        .unwrap_or_default()
}

/// Whether the claim was made for the pod (its controller is the pod), as
/// `resourceclaim.IsForPod`; the error is upstream's message.
pub fn is_for_pod(pod: &Pod, claim: &ResourceClaim) -> Result<(), String> {
    let owned =
        claim.metadata.owner_references.iter().flatten().any(|r| {
            r.controller == Some(true) && Some(r.uid.as_str()) == pod.metadata.uid.as_deref()
        });
    if owned {
        return Ok(());
    }
    Err(format!(
        "ResourceClaim {}/{} was not created for pod {}/{} (pod is not owner)",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
    ))
}

/// Whether `status.reservedFor` names the pod (`resourceclaim.IsReservedForPod`).
pub fn is_reserved_for_pod(pod: &Pod, claim: &ResourceClaim) -> bool {
    let Some(uid) = pod.metadata.uid.as_deref() else {
        return false;
    };
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .is_some_and(|all| {
            all.iter().any(|r| {
                r.resource == "pods"
                    && r.api_group.as_deref().unwrap_or_default().is_empty()
                    && r.uid == uid
            })
        })
}

/// Whether another consumer may still be added to `status.reservedFor`
/// (`resourceclaim.CanBeReserved`).
pub fn can_be_reserved(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .is_none_or(|all| all.len() < RESERVED_FOR_MAX_SIZE)
}

/// Whether the claim has an allocation.
pub fn is_allocated(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodResourceClaimStatus, PodStatus};
    use k8s_openapi::api::resource::v1::{ResourceClaimConsumerReference, ResourceClaimStatus};
    use kcm_testing::MetaBuilder;

    fn entry(name: &str, claim: Option<&str>, template: Option<&str>) -> PodResourceClaim {
        PodResourceClaim {
            name: name.into(),
            resource_claim_name: claim.map(Into::into),
            resource_claim_template_name: template.map(Into::into),
        }
    }

    #[test]
    fn claim_names_follow_resourceclaim_name() {
        let mut pod = kcm_testing::pod("web").namespace("ns").uid("u1").build();
        assert_eq!(
            pod_claim_name(&pod, &entry("gpu", Some("shared"), None)),
            Ok(Some(("shared".into(), false)))
        );
        assert_eq!(
            pod_claim_name(&pod, &entry("gpu", None, Some("tpl"))),
            Err("pod \"ns/web\": ResourceClaim not created yet".into())
        );
        assert_eq!(
            pod_claim_name(&pod, &entry("gpu", None, None)),
            Err(
                "pod \"ns/web\", spec.resourceClaim \"gpu\": none of the supported fields are set"
                    .into()
            )
        );
        pod.status = Some(PodStatus {
            resource_claim_statuses: Some(vec![
                PodResourceClaimStatus {
                    name: "gpu".into(),
                    resource_claim_name: Some("web-gpu-x7k2p".into()),
                },
                PodResourceClaimStatus {
                    name: "none".into(),
                    resource_claim_name: None,
                },
            ]),
            ..PodStatus::default()
        });
        assert_eq!(
            pod_claim_name(&pod, &entry("gpu", None, Some("tpl"))),
            Ok(Some(("web-gpu-x7k2p".into(), true)))
        );
        assert_eq!(
            pod_claim_name(&pod, &entry("none", None, Some("tpl"))),
            Ok(None)
        );
    }

    #[test]
    fn reservations_and_ownership() {
        let pod = kcm_testing::pod("web").namespace("ns").uid("u1").build();
        let mut claim = ResourceClaim::default();
        claim.metadata.name = Some("c".into());
        claim.metadata.namespace = Some("ns".into());
        assert_eq!(
            is_for_pod(&pod, &claim),
            Err("ResourceClaim ns/c was not created for pod ns/web (pod is not owner)".into())
        );
        assert!(!is_reserved_for_pod(&pod, &claim));
        assert!(can_be_reserved(&claim));
        claim.status = Some(ResourceClaimStatus {
            reserved_for: Some(vec![ResourceClaimConsumerReference {
                resource: "pods".into(),
                name: "web".into(),
                uid: "u1".into(),
                api_group: None,
            }]),
            ..ResourceClaimStatus::default()
        });
        assert!(is_reserved_for_pod(&pod, &claim));
    }
}
