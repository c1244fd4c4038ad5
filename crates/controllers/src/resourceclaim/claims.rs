//! Which claim a pod's `spec.resourceClaims` entry names and whether a claim is the pod's, as `k8s.io/dynamic-resource-allocation/resourceclaim`, plus the controller's two cache indexes.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
pub use kcm_machinery::dra::{
    DELETE_PROTECTION_FINALIZER, NameError, NotForPod, RESERVED_FOR_MAX_SIZE, can_be_reserved,
    claim_name, is_allocated, is_for_pod, is_reserved_for_pod, pod_claims, reserved_for,
};
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

/// `namespace/name` of any object's metadata.
pub(crate) fn ns_name(namespace: Option<&str>, name: Option<&str>) -> String {
    format!(
        "{}/{}",
        namespace.unwrap_or_default(),
        name.unwrap_or_default()
    )
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
