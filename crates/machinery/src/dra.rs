//! What a pod's claims are and whether a claim is the pod's: `k8s.io/dynamic-resource-allocation/resourceclaim`, shared by the resourceclaim controller, the simulated scheduler and the simulated kubelet.

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::ResourceClaim;

/// The finalizer the scheduler adds when it allocates a claim (upstream's `resourceapi.Finalizer`):
/// the controller may clear such an allocation once nobody uses it.
pub const DELETE_PROTECTION_FINALIZER: &str = "resource.kubernetes.io/delete-protection";

/// The most `status.reservedFor` entries a claim may have (`ResourceClaimReservedForMaxSize`).
pub const RESERVED_FOR_MAX_SIZE: usize = 256;

/// Why an entry does not resolve to a claim name (upstream's `resourceclaim.Name` errors).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// A template entry whose claim is not in the pod's status yet (`ErrClaimNotFound`).
    #[error("pod \"{pod}\": ResourceClaim not created yet")]
    ClaimNotFound {
        /// The pod, `namespace/name`.
        pod: String,
    },
    /// Neither a claim nor a template name (`ErrAPIUnsupported`).
    #[error(
        "pod \"{pod}\", spec.resourceClaim {entry:?}: resource claim reference uses an unsupported API"
    )]
    ApiUnsupported {
        /// The pod, `namespace/name`.
        pod: String,
        /// The entry's name.
        entry: String,
    },
}

/// A claim the pod does not control (upstream's `IsForPod` error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ResourceClaim {claim} was not created for pod {pod} (pod is not owner)")]
pub struct NotForPod {
    /// The claim, `namespace/name`.
    pub claim: String,
    /// The pod, `namespace/name`.
    pub pod: String,
}

/// `namespace/name` of any object's metadata.
fn ns_name(namespace: Option<&str>, name: Option<&str>) -> String {
    format!(
        "{}/{}",
        namespace.unwrap_or_default(),
        name.unwrap_or_default()
    )
}

fn pod_ref(pod: &Pod) -> String {
    ns_name(
        pod.metadata.namespace.as_deref(),
        pod.metadata.name.as_deref(),
    )
}

/// The claim name `entry` of `pod` refers to, as upstream's `resourceclaim.Name`: a plain
/// `resourceClaimName` as is (no owner check); a template entry through the pod's
/// `status.resourceClaimStatuses`, with the owner to be checked, `None` when the status says no
/// claim is needed.
pub fn claim_name(
    pod: &Pod,
    entry: &PodResourceClaim,
) -> Result<(Option<String>, bool), NameError> {
    if let Some(name) = &entry.resource_claim_name {
        return Ok((Some(name.clone()), false));
    }
    if entry.resource_claim_template_name.is_some() {
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref());
        if let Some(status) = statuses
            .into_iter()
            .flatten()
            .find(|s| s.name == entry.name)
        {
            return Ok((status.resource_claim_name.clone(), true));
        }
        return Err(NameError::ClaimNotFound { pod: pod_ref(pod) });
    }
    Err(NameError::ApiUnsupported {
        pod: pod_ref(pod),
        entry: entry.name.clone(),
    })
}

/// The pod's `spec.resourceClaims`.
pub fn pod_claims(pod: &Pod) -> &[PodResourceClaim] {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_deref())
        .unwrap_or_default()
}

/// `Ok` when `pod` controls `claim`, as upstream's `IsForPod` (`metav1.IsControlledBy`).
pub fn is_for_pod(pod: &Pod, claim: &ResourceClaim) -> Result<(), NotForPod> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let controlled = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid);
    if controlled {
        Ok(())
    } else {
        Err(NotForPod {
            claim: ns_name(
                claim.metadata.namespace.as_deref(),
                claim.metadata.name.as_deref(),
            ),
            pod: pod_ref(pod),
        })
    }
}

/// The claim's `status.reservedFor`.
pub fn reserved_for(
    claim: &ResourceClaim,
) -> &[k8s_openapi::api::resource::v1::ResourceClaimConsumerReference] {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_deref())
        .unwrap_or_default()
}

/// Whether the claim is allocated (`status.allocation` set).
pub fn is_allocated(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some())
}

/// Whether `pod` is among the claim's consumers, by UID (upstream's `IsReservedForPod`).
pub fn is_reserved_for_pod(pod: &Pod, claim: &ResourceClaim) -> bool {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    reserved_for(claim).iter().any(|r| r.uid == uid)
}

/// Whether one more consumer fits (upstream's `CanBeReserved`).
pub fn can_be_reserved(claim: &ResourceClaim) -> bool {
    reserved_for(claim).len() < RESERVED_FOR_MAX_SIZE
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
            claim_name(&pod, &entry("gpu", Some("shared"), None)),
            Ok((Some("shared".into()), false))
        );
        assert_eq!(
            claim_name(&pod, &entry("gpu", None, Some("tpl"))).map_err(|e| e.to_string()),
            Err("pod \"ns/web\": ResourceClaim not created yet".into())
        );
        assert_eq!(
            claim_name(&pod, &entry("gpu", None, None)).map_err(|e| e.to_string()),
            Err(
                "pod \"ns/web\", spec.resourceClaim \"gpu\": resource claim reference uses an unsupported API"
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
            claim_name(&pod, &entry("gpu", None, Some("tpl"))),
            Ok((Some("web-gpu-x7k2p".into()), true))
        );
        assert_eq!(
            claim_name(&pod, &entry("none", None, Some("tpl"))),
            Ok((None, true))
        );
    }

    #[test]
    fn reservations_and_ownership() {
        let pod = kcm_testing::pod("web").namespace("ns").uid("u1").build();
        let mut claim = ResourceClaim::default();
        claim.metadata.name = Some("c".into());
        claim.metadata.namespace = Some("ns".into());
        assert_eq!(
            is_for_pod(&pod, &claim).map_err(|e| e.to_string()),
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
