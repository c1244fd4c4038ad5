//! The device taint eviction controller (`device-taint-eviction-controller`): pods whose allocated ResourceClaims use devices with NoExecute taints they do not tolerate are deleted, as kube-controller-manager's `pkg/controller/devicetainteviction`.
//!
//! Where to start: [`DeviceTaintEvictionController`] (upstream `device_taint_eviction.go`).
//!
//! - The handlers keep, under one lock, every pool's ResourceSlices ([`pools`]), every
//!   allocated claim with the time its pods must go ([`eviction`]: the earliest `timeAdded`
//!   of a NoExecute taint on an allocated device, plus the smallest `tolerationSeconds` of the
//!   allocation's NoExecute tolerations matching it ([`tolerations`]); a matching toleration
//!   without seconds ignores the taint), and the pods to delete and when. A change of taints,
//!   claims, pods or (with `DRADeviceTaintRules`) DeviceTaintRules re-judges the pods the
//!   claims are reserved for; a pod no longer affected has its deletion cancelled
//!   (`DeviceTaintManagerEviction` "Cancelling deletion").
//! - Workers take pods when due: a `DeviceTaintManagerEviction` "Marking for deletion"
//!   event, the `DisruptionTarget` condition (`DeletionByDeviceTaintManager`), then a delete
//!   with a UID precondition; `device_taint_eviction_controller_pod_deletions_total` and
//!   `..._pod_deletion_duration_seconds` ([`metrics`]) count them. Evicted UIDs are remembered
//!   ([`uid_cache`]).
//! - With `DRADeviceTaintRules`, each rule's `EvictionInProgress` status condition is kept
//!   ([`rule_status`]), at most every 10 s while eviction goes on; for effect `None` the
//!   eviction is simulated once per spec change.
//! - [`client`]: the requests, with a recording in-memory fake.

pub mod client;
mod controller;
pub mod eviction;
pub mod metrics;
pub mod pools;
pub mod rule_status;
pub mod tolerations;
pub mod uid_cache;

#[cfg(test)]
mod controller_tests;

pub use client::{
    ApiDeviceTaintEvictionClient, DeviceTaintEvictionClient, FakeDeviceTaintEvictionClient,
};
pub use controller::{
    CONTROLLER_NAME, DEFAULT_CONCURRENT_SYNCS, DISRUPTION_TARGET, DeviceTaintEvictionController,
    DeviceTaintEvictionOptions, MESSAGE_CANCELLING_DELETION,
    MESSAGE_DELETION_BY_DEVICE_TAINT_MANAGER, MESSAGE_MARKING_FOR_DELETION, ObjectRef,
    REASON_DELETION_BY_DEVICE_TAINT_MANAGER, REASON_DEVICE_TAINT_MANAGER_EVICTION, WorkItem,
};
pub use metrics::DeviceTaintEvictionMetrics;

use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a work item failed; the worker requeues it rate-limited (except [`Error::is_not_found`]
/// ones for pods, which mean the work is done).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the pod from the API server failed.
    #[error("get pod {pod}: {message}", message = error_message(.source))]
    GetPod {
        /// The pod, `namespace/name`.
        pod: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The pod was replaced by another of the same name (upstream returns NotFound).
    #[error("pods {pod:?} not found")]
    Replaced {
        /// The pod, `namespace/name`.
        pod: String,
    },
    /// Setting the `DisruptionTarget` condition failed.
    #[error("patch pod {pod} status: {message}", message = error_message(.source))]
    PatchPodStatus {
        /// The pod, `namespace/name`.
        pod: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Deleting the pod failed.
    #[error("delete pod {pod}: {message}", message = error_message(.source))]
    DeletePod {
        /// The pod, `namespace/name`.
        pod: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Applying the rule's condition failed (upstream's `add condition to DeviceTaintRule
    /// status`).
    #[error("add condition to DeviceTaintRule {rule} status: {message}", message = error_message(.source))]
    ApplyRuleStatus {
        /// The rule's name.
        rule: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Whether the pod is gone (NotFound from any request, or replaced), as upstream's
    /// `apierrors.IsNotFound` on `addConditionAndDeletePod`'s error.
    pub fn is_not_found(&self) -> bool {
        match self {
            Self::Replaced { .. } => true,
            Self::GetPod { source, .. }
            | Self::PatchPodStatus { source, .. }
            | Self::DeletePod { source, .. }
            | Self::ApplyRuleStatus { source, .. } => source.is_not_found(),
        }
    }
}
