//! The DaemonSet controller: one pod per eligible node, rolling updates, revision history, as kube-controller-manager's.
//!
//! Where to start: [`DaemonSetsController`] (kubernetes `pkg/controller/daemon`).
//! [`DaemonSetsController::new`] wires it to a `SharedInformerFactory` (DaemonSets,
//! ControllerRevisions, pods, nodes) as kube-controller-manager does;
//! [`DaemonSetsController::run`] runs its workers (`--concurrent-daemonset-syncs`, default 2).
//! Each DaemonSet key taken from the work queue is synced by [`DaemonSetsController::sync`]:
//! record the template as the current ControllerRevision (older ones are history), claim the
//! pods, create a pod on every node that should run one and has none (pinned there by a
//! `metadata.name` node affinity so the scheduler binds it), delete pods on nodes that should
//! not run one and failed pods (with back-off), roll pods to the current revision within
//! `maxUnavailable`/`maxSurge`, prune history beyond `revisionHistoryLimit`, and write the
//! status.
//!
//! The files follow upstream's package:
//!
//! - `controller`: constants, [`DaemonSetsController`] with its test seams, construction,
//!   `Run`, the event handlers ([`DaemonSetEventHandlers`]: DaemonSets, revisions, pods, nodes)
//!   and the worker wiring (`daemon_controller.go` up to `processNextWorkItem`).
//! - `sync`: `syncDaemonSet`, `getNodesToDaemonPods`, `podsShouldBeOnNode`, `manage` and
//!   `syncNodes` (the rest of `daemon_controller.go`).
//! - `rolling_update`: `rollingUpdate`, `findUpdatedPodsOnNode`, `updatedDesiredNodeCounts`
//!   (`update.go`).
//! - `revision_history`: `constructHistory`, `snapshot`, `dedupCurHistories`,
//!   `cleanupHistory`, `Match` and `getPatch` (`update.go`).
//! - `status`: `updateDaemonSetStatus` and `storeDaemonSetStatus`.
//! - [`placement`]: `NodeShouldRunDaemonPod` (node name, required node affinity, taints against
//!   the template's tolerations plus the default daemon tolerations).
//! - [`util`]: `daemon/util` (pod templates, surge/unavailable counts, `IsPodUpdated`, node
//!   affinity pinning).
//! - [`client`]: the seam for the DaemonSet API calls, with a recording fake.

pub mod client;
mod controller;
pub mod placement;
mod revision_history;
mod rolling_update;
mod status;
mod sync;
pub mod util;

pub use client::{ApiDaemonSetClient, DaemonSetAction, DaemonSetClient, FakeDaemonSetClient};
pub use controller::{
    BACKOFF_GC_INTERVAL, BURST_REPLICAS, CONTROLLER_NAME, Clock, DaemonSetEventHandlers,
    DaemonSetsController, DaemonSetsControllerOptions, FAILED_DAEMON_POD_REASON,
    FAILED_PLACEMENT_REASON, FAILED_PODS_BACKOFF_INITIAL, FAILED_PODS_BACKOFF_MAX, QUEUE_NAME,
    SELECTING_ALL_REASON, SUCCEEDED_DAEMON_POD_REASON, SyncHandler,
};
pub use placement::{DaemonPlacement, ShouldRun, node_should_run_daemon_pod};
pub use status::STATUS_UPDATE_RETRIES;

use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::controller::{ApiStatus, pod_control, ref_manager};
use kcm_machinery::informer::keys;
use kube::core::Status;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why syncing a DaemonSet failed. Every error but [`Error::InvalidKey`] makes the worker
/// requeue the key rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The work-queue key is not `namespace/name`.
    #[error("invalid DaemonSet key {key:?}: {source}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it does not split.
        #[source]
        source: keys::Error,
    },
    /// The DaemonSet's selector does not parse.
    #[error("DaemonSet {daemon_set}: invalid selector: {source}")]
    Selector {
        /// The DaemonSet, `namespace/name`.
        daemon_set: String,
        /// The selector error.
        #[source]
        source: kcm_machinery::labels::Error,
    },
    /// Claiming pods failed for some pods.
    #[error("couldn't get node to daemon pod mapping for daemon set {daemon_set:?}: {source}")]
    ClaimPods {
        /// The DaemonSet, `namespace/name`.
        daemon_set: String,
        /// The ref manager's (possibly aggregated) error.
        #[source]
        source: Box<ref_manager::Error>,
    },
    /// Claiming ControllerRevisions failed for some of them.
    #[error("failed to construct revisions of DaemonSet {daemon_set}: {source}")]
    ClaimRevisions {
        /// The DaemonSet, `namespace/name`.
        daemon_set: String,
        /// The ref manager's (possibly aggregated) error.
        #[source]
        source: Box<ref_manager::Error>,
    },
    /// A ControllerRevision call failed.
    #[error("failed to construct revisions of DaemonSet: {verb} ControllerRevision {revision}: {message}", message = error_message(.source))]
    Revision {
        /// `create`, `get`, `update` or `delete`.
        verb: &'static str,
        /// The revision, `namespace/name` (named after its DaemonSet).
        revision: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The collision count the revision name was computed with is older than the server's.
    #[error(
        "found a stale collision count ({seen}, expected {current}) of DaemonSet {daemon_set:?} while processing; will retry until it is updated"
    )]
    StaleCollisionCount {
        /// The DaemonSet's name.
        daemon_set: String,
        /// The count the cache had.
        seen: i32,
        /// The count the server has.
        current: i32,
    },
    /// Re-reading the DaemonSet (for a collision or a status retry) failed.
    #[error("getting DaemonSet {daemon_set}: {message}", message = error_message(.source))]
    Get {
        /// The DaemonSet, `namespace/name`.
        daemon_set: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Relabelling a pod to the kept duplicate revision failed.
    #[error("relabelling pods of DaemonSet {daemon_set}: {source}")]
    RelabelPod {
        /// The DaemonSet, `namespace/name`.
        daemon_set: String,
        /// The patch error.
        #[source]
        source: Box<pod_control::Error>,
    },
    /// Creating or deleting daemon pods failed (every failure of the pass).
    #[error("{}", .errors.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    SyncNodes {
        /// The DaemonSet, `namespace/name`.
        daemon_set: String,
        /// The failures, in the order they happened.
        errors: Vec<pod_control::Error>,
    },
    /// `maxSurge` or `maxUnavailable` does not resolve.
    #[error("couldn't get unavailable numbers: invalid value for {field}: {source}")]
    IntOrPercent {
        /// `MaxSurge` or `MaxUnavailable`.
        field: &'static str,
        /// The resolution error.
        #[source]
        source: kcm_machinery::intstr::Error,
    },
    /// A node the rolling update needs is not in the cache.
    #[error("couldn't get node for nodeName {node:?}: not found")]
    NodeNotFound {
        /// The node's name.
        node: String,
    },
    /// Writing `/status` failed, also after the retry.
    #[error("error storing status for daemon set {daemon_set}: {message}", message = error_message(.source))]
    UpdateStatus {
        /// The DaemonSet, `namespace/name`.
        daemon_set: String,
        /// The client error of the last attempt.
        #[source]
        source: kube::Error,
    },
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::ClaimPods { source, .. } | Error::ClaimRevisions { source, .. } => {
                source.api_status()
            }
            Error::Revision { source, .. }
            | Error::Get { source, .. }
            | Error::UpdateStatus { source, .. } => source.api_status(),
            Error::RelabelPod { source, .. } => source.api_status(),
            Error::SyncNodes { errors, .. } => errors.first().and_then(ApiStatus::api_status),
            Error::InvalidKey { .. }
            | Error::Selector { .. }
            | Error::StaleCollisionCount { .. }
            | Error::IntOrPercent { .. }
            | Error::NodeNotFound { .. } => None,
        }
    }
}
