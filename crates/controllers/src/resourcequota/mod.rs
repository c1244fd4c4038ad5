//! The ResourceQuota controller: computes each quota's `status.hard` and `status.used` from what its namespace holds, and recalculates when quota'd objects change or go, as kube-controller-manager's `pkg/controller/resourcequota`.
//!
//! Where to start: [`ResourceQuotaController`] (upstream `resource_quota_controller.go`).
//! Quotas whose declared limits are not yet in their status go to a priority queue, the
//! others to the primary queue; every `--resource-quota-sync-period` all quotas are
//! recalculated. [`ResourceQuotaController::sync`] (upstream `syncResourceQuota`) sums the
//! usage the evaluators of `kcm_machinery::quota` measure over the cached pods, services and
//! claims (and, for other `count/<resource>.<group>` limits, an uncached count), and writes
//! the status when it changed. The quota admission check in the API server charges usage
//! as objects are created; this controller releases it when they are deleted or finish.
//!
//! - `controller`: constants, the controller, construction, `Run`, the quota event handlers,
//!   the replenishment handlers (upstream `resource_quota_monitor.go`) and the worker wiring.
//! - `sync`: `syncResourceQuota` and `CalculateUsage`.
//! - [`client`]: the status write and the object counts, with a recording fake.

pub mod client;
mod controller;
mod sync;

pub use client::{ApiQuotaClient, FakeQuotaClient, QuotaClient};
pub use controller::{
    CONTROLLER_NAME, DEFAULT_CONCURRENT_RESOURCE_QUOTA_SYNCS, DEFAULT_RESOURCE_QUOTA_SYNC_PERIOD,
    PRIMARY_QUEUE_NAME, PRIORITY_QUEUE_NAME, QuotaEventHandlers, ReplenishmentHandlers,
    ResourceQuotaController, ResourceQuotaControllerOptions,
};

use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::informer::keys;

/// `resourcequota` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "resourcequota";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a quota's sync failed; the worker requeues the key rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid ResourceQuota key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// Counting the objects of a resource without an informer failed.
    #[error("counting {resource} in namespace {namespace}: {message}", message = error_message(.source))]
    Count {
        /// `count/<resource>.<group>`.
        resource: String,
        /// The namespace counted.
        namespace: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Writing the quota's status failed.
    #[error("updating the status of ResourceQuota {quota}: {message}", message = error_message(.source))]
    UpdateStatus {
        /// The quota, `namespace/name`.
        quota: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
