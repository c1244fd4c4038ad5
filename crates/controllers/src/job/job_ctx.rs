//! What one Job sync works on, passed between its steps, as upstream's `syncJobCtx`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::Pod;

use super::{BackoffRecord, OrderedIntervals, UncountedTerminatedPods};

/// The state of one sync of one Job. Built once the Job's pods are claimed; the steps
/// (`manageJob`, the deletions, the status tracking) update it in place.
#[derive(Debug)]
pub(super) struct SyncJobCtx {
    /// The Job's key, `namespace/name`.
    pub key: String,
    /// A private copy of the Job whose status the sync rewrites (never the cache's object).
    pub job: Job,
    /// Every pod the Job owns after claiming (adopted ones with the tracking finalizer).
    pub pods: Vec<Arc<Pod>>,
    /// The pods not being deleted and not finished.
    pub active_pods: Vec<Arc<Pod>>,
    /// The condition the Job finishes with, once decided: interim (`FailureTarget`,
    /// `SuccessCriteriaMet`) or final.
    pub finished_condition: Option<JobCondition>,
    /// Succeeded pods (succeeded indexes for Indexed Jobs), counted or not.
    pub succeeded: i32,
    /// Failed pods, counted or not, that count toward the backoff limit.
    pub failed: i32,
    /// Indexed Jobs: the succeeded indexes of `status.completedIndexes`.
    pub prev_succeeded_indexes: OrderedIntervals,
    /// Indexed Jobs: the succeeded indexes with this sync's.
    pub succeeded_indexes: OrderedIntervals,
    /// Indexed Jobs with `backoffLimitPerIndex`: the failed indexes.
    pub failed_indexes: Option<OrderedIntervals>,
    /// The back-off record with this sync's newly finished pods (stored once the status
    /// recording them is written).
    pub new_backoff_record: BackoffRecord,
    /// UIDs of pods whose finalizer removal is in flight.
    pub expected_rm_finalizers: HashSet<String>,
    /// `status.uncountedTerminatedPods` as the sync found it.
    pub uncounted: UncountedTerminatedPods,
    /// `backoffLimitPerIndex`: the last failed pod of each index awaiting its replacement.
    pub pods_with_delayed_deletion_per_index: HashMap<i32, Arc<Pod>>,
    /// Pods being deleted that have not finished.
    pub terminating: i32,
    /// Active pods that are ready.
    pub ready: i32,
}
