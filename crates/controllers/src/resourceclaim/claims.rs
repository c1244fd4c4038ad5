//! Which claim a pod's `spec.resourceClaims` entry names and whether a claim is the pod's, as `k8s.io/dynamic-resource-allocation/resourceclaim`, plus the controller's two cache indexes.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::informer::index::{IndexFunc, Indexers};
use kcm_machinery::informer::store::Indexer;

/// The pod index of claims by `namespace/claim` (upstream's `podResourceClaimIndex`).
pub const POD_RESOURCE_CLAIM_INDEX: &str = "pod-resource-claim-index";

/// The claim index by controlling pod UID (upstream's `claimPodOwnerIndex`).
pub const CLAIM_POD_OWNER_INDEX: &str = "claim-pod-owner-index";

/// The annotation a generated claim carries: the pod's `spec.resourceClaims[].name` it was made
/// for (upstream's `podResourceClaimAnnotation`).
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

/// The annotation of a claim made by the scheduler for extended resources (source label
/// `extended_resource`).
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";

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
pub(crate) fn ns_name(namespace: Option<&str>, name: Option<&str>) -> String {
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

/// The controller reference of `claim` if it is a pod (`apiVersion: v1`, `kind: Pod`).
pub fn owning_pod(claim: &ResourceClaim) -> Option<&OwnerReference> {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.api_version == "v1" && o.kind == "Pod")
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

/// Whether any request asks for admin access (`exactly.adminAccess: true`).
pub fn spec_needs_admin_access(spec: &k8s_openapi::api::resource::v1::ResourceClaimSpec) -> bool {
    spec.devices
        .iter()
        .flat_map(|d| d.requests.iter().flatten())
        .any(|r| r.exactly.as_ref().and_then(|e| e.admin_access) == Some(true))
}

/// Whether any request is a prioritized list (`firstAvailable`).
pub fn spec_has_prioritized_list(spec: &k8s_openapi::api::resource::v1::ResourceClaimSpec) -> bool {
    spec.devices
        .iter()
        .flat_map(|d| d.requests.iter().flatten())
        .any(|r| r.first_available.as_ref().is_some_and(|f| !f.is_empty()))
}

/// Upstream's `podResourceClaimIndexFunc`: `namespace/claim` of every entry that resolves.
pub fn pod_resource_claim_index(pod: &Pod) -> Vec<String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    pod_claims(pod)
        .iter()
        .filter_map(|entry| match claim_name(pod, entry) {
            Ok((Some(name), _)) => Some(format!("{namespace}/{name}")),
            _ => None,
        })
        .collect()
}

/// Upstream's `claimPodOwnerIndexFunc`: the UID of the controlling pod.
pub fn claim_pod_owner_index(claim: &ResourceClaim) -> Vec<String> {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.controller == Some(true) && o.api_version == "v1" && o.kind == "Pod")
        .map(|o| o.uid.clone())
        .collect()
}

/// Adds [`POD_RESOURCE_CLAIM_INDEX`] to `pods` unless present.
pub fn add_pod_resource_claim_indexer(
    pods: &Indexer<Pod>,
) -> kcm_machinery::informer::store::Result<()> {
    if pods
        .index_names()
        .iter()
        .any(|n| n == POD_RESOURCE_CLAIM_INDEX)
    {
        return Ok(());
    }
    let mut indexers: Indexers<Pod> = Indexers::new();
    let index: IndexFunc<Pod> = Arc::new(pod_resource_claim_index);
    indexers.insert(POD_RESOURCE_CLAIM_INDEX.to_owned(), index);
    pods.add_indexers(indexers)
}

/// Adds [`CLAIM_POD_OWNER_INDEX`] to `claims` unless present.
pub fn add_claim_pod_owner_indexer(
    claims: &Indexer<ResourceClaim>,
) -> kcm_machinery::informer::store::Result<()> {
    if claims
        .index_names()
        .iter()
        .any(|n| n == CLAIM_POD_OWNER_INDEX)
    {
        return Ok(());
    }
    let mut indexers: Indexers<ResourceClaim> = Indexers::new();
    let index: IndexFunc<ResourceClaim> = Arc::new(claim_pod_owner_index);
    indexers.insert(CLAIM_POD_OWNER_INDEX.to_owned(), index);
    claims.add_indexers(indexers)
}

/// Whether the pod will not run (again): terminal phase, or deleted before being scheduled
/// (upstream's `isPodDone`).
pub fn is_pod_done(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let unscheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    matches!(phase, Some("Succeeded" | "Failed"))
        || (pod.metadata.deletion_timestamp.is_some() && unscheduled)
}

/// The generateName of a claim for `pod`'s entry `entry`: `<pod>-<entry>-`, both parts cut in
/// proportion when longer than 57 bytes so 5 random characters still fit 63 (upstream's
/// truncation in `handleClaim`).
pub fn generate_name(pod_name: &str, entry: &str) -> String {
    const MAX_BASE_LEN: usize = 57;
    let full = format!("{pod_name}-{entry}-");
    if full.len() <= MAX_BASE_LEN {
        return full;
    }
    let cut = |s: &str| {
        let mut end = s.len() * MAX_BASE_LEN / full.len();
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s[..end].to_owned()
    };
    format!("{}-{}", cut(pod_name), cut(entry))
}
