//! The ResourceClaim controller: the claims of pods' `spec.resourceClaims` made from their ResourceClaimTemplates, and the `status.reservedFor` bookkeeping of every claim, as kube-controller-manager's `pkg/controller/resourceclaim`.
//!
//! Where to start: [`ResourceClaimController`] (upstream `controller.go`). Keys are
//! `pod:<namespace>/<name>` and `claim:<namespace>/<name>`.
//!
//! - A pod sync (upstream `syncPod`) creates, for every entry naming a
//!   `resourceClaimTemplateName`, a claim `<pod>-<entry>-<random>` owned by the pod (controller,
//!   `blockOwnerDeletion`) and annotated `resource.kubernetes.io/pod-claim-name: <entry>`, reusing
//!   one it made earlier (found by owner UID and annotation), and applies the names to the pod's
//!   `status.resourceClaimStatuses` (field manager `ResourceClaimController`). A failure is a
//!   `FailedResourceClaimCreation` warning on the pod. Once the pod is scheduled, an allocated
//!   claim not yet reserved for it is reserved (`status.reservedFor`).
//! - A claim sync (upstream `syncClaim`) drops `reservedFor` pods that are gone, replaced or
//!   done; when no consumer is left, an allocation made by the scheduler (the
//!   `resource.kubernetes.io/delete-protection` finalizer) is cleared and the finalizer removed,
//!   and a generated claim whose pod is done is deleted.
//!
//! - `controller`: constants, the controller, `Run`, the handlers, `syncPod`, `syncClaim`.
//! - [`claims`]: the helpers of `k8s.io/dynamic-resource-allocation/resourceclaim` (`Name`,
//!   `IsForPod`, `IsReservedForPod`, `CanBeReserved`) and the two indexes.
//! - [`client`]: the requests, with a recording in-memory fake.
//! - [`metrics`]: `resourceclaim_controller_creates_total` and
//!   `resourceclaim_controller_resource_claims`.

pub mod claims;
pub mod client;
mod controller;
pub mod metrics;

pub use client::{
    ApiResourceClaimClient, FIELD_MANAGER, FakeResourceClaimClient, ResourceClaimClient,
};
pub use controller::{
    CONTROLLER_ALIAS, CONTROLLER_NAME, DEFAULT_CONCURRENT_RESOURCE_CLAIM_SYNCS, EVENT_COMPONENT,
    FAILED_RESOURCE_CLAIM_CREATION, Features, QUEUE_NAME, ResourceClaimController,
    ResourceClaimControllerOptions, ResourceClaimEventHandlers,
};
pub use metrics::{ResourceClaimMetrics, ResourceClaimsCollector};

use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::informer::keys;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a pod or claim sync failed; the worker requeues the key rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key has no `pod:` or `claim:` prefix (upstream's `unexpected key`).
    #[error("unexpected key: {0}")]
    UnexpectedKey(String),
    /// The key's object part is not `namespace/name`.
    #[error("invalid key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// One of the pod's claims failed (upstream's `pod %s/%s, PodResourceClaim %s: %v`).
    #[error("pod {pod}, PodResourceClaim {pod_claim}: {source}")]
    PodClaim {
        /// The pod, `namespace/name`.
        pod: String,
        /// The entry's name in `spec.resourceClaims`.
        pod_claim: String,
        /// What went wrong with it.
        #[source]
        source: ClaimError,
    },
    /// Applying `status.resourceClaimStatuses` failed.
    #[error("update pod {pod} ResourceClaimStatuses: {message}", message = error_message(.source))]
    ApplyPodStatus {
        /// The pod, `namespace/name`.
        pod: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The pod's entry does not resolve to a claim name.
    #[error(transparent)]
    Name(#[from] claims::NameError),
    /// The claim named by the pod's status was made for another pod.
    #[error(transparent)]
    NotForPod(#[from] claims::NotForPod),
    /// Adding the pod to `status.reservedFor` failed.
    #[error("reserve claim {claim} for pod: {message}", message = error_message(.source))]
    Reserve {
        /// The claim, `namespace/name`.
        claim: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Reading a pod from the API server (to be sure it is gone) failed.
    #[error("get pod {pod}: {message}", message = error_message(.source))]
    GetPod {
        /// The pod, `namespace/name`.
        pod: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Writing the claim's status (reservations, allocation) failed.
    #[error("update claim {claim} status: {message}", message = error_message(.source))]
    UpdateStatus {
        /// The claim, `namespace/name`.
        claim: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Removing the claim's finalizer failed.
    #[error("update claim {claim}: {message}", message = error_message(.source))]
    Update {
        /// The claim, `namespace/name`.
        claim: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Deleting an unused generated claim failed.
    #[error("delete claim {claim}: {message}", message = error_message(.source))]
    Delete {
        /// The claim, `namespace/name`.
        claim: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// What went wrong with one pod claim entry; also the `FailedResourceClaimCreation` event's
/// message, after `PodResourceClaim <name>: `.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// The entry does not resolve (upstream's `checking for claim before creating it`).
    #[error("checking for claim before creating it: {0}")]
    Check(claims::NameError),
    /// The template is not in the cache.
    #[error(
        "resource claim template {template:?}: resourceclaimtemplate.resource.k8s.io {template:?} not found"
    )]
    TemplateNotFound {
        /// The template's name.
        template: String,
    },
    /// The template requests admin access and `DRAAdminAccess` is off.
    #[error("admin access is requested, but the feature is disabled")]
    AdminAccessDisabled,
    /// The template has a prioritized list and `DRAPrioritizedList` is off.
    #[error("template includes a prioritized list of subrequests, but the feature is disabled")]
    PrioritizedListDisabled,
    /// Creating the claim failed (the name is empty: the server generates it).
    #[error("create ResourceClaim {claim}: {message}", message = error_message(.source))]
    Create {
        /// The claim's name (empty with a generated name, as upstream's message).
        claim: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
