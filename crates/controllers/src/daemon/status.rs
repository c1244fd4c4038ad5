//! DaemonSet status: counting scheduled, ready, available and updated daemon pods per node and writing `/status`, as upstream's `updateDaemonSetStatus` and `storeDaemonSetStatus`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::Node;
use kcm_machinery::controller::{is_pod_available, is_pod_ready};

use super::controller::{DaemonSetsController, key_of};
use super::placement::DaemonPlacement;
use super::util::{
    ds_key, get_template_generation, is_pod_updated, min_ready_seconds,
    sort_by_creation_timestamp_and_phase,
};
use super::{Error, Result};

/// How many times a failed `/status` write is retried after re-reading the DaemonSet, as
/// upstream's `StatusUpdateRetries`.
pub const STATUS_UPDATE_RETRIES: usize = 1;

/// The counts a status pass computes (upstream passes them as seven ints).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DaemonSetCounts {
    /// Nodes that should run a daemon pod.
    pub desired_number_scheduled: i32,
    /// Of those, nodes that run one.
    pub current_number_scheduled: i32,
    /// Nodes that run one but should not.
    pub number_misscheduled: i32,
    /// Nodes whose oldest daemon pod is ready.
    pub number_ready: i32,
    /// Nodes whose oldest daemon pod is from the current revision.
    pub updated_number_scheduled: i32,
    /// Nodes whose oldest daemon pod is available.
    pub number_available: i32,
    /// `desired - available`.
    pub number_unavailable: i32,
}

/// `Some(n)` unless zero, as Go's `omitempty`.
fn non_zero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// Whether `status` already holds `counts` and has observed `generation`, as the early return
/// of upstream's `storeDaemonSetStatus` (absent counts are zero).
fn status_unchanged(status: &DaemonSetStatus, counts: &DaemonSetCounts, generation: i64) -> bool {
    let n = |v: Option<i32>| v.unwrap_or(0);
    status.desired_number_scheduled == counts.desired_number_scheduled
        && status.current_number_scheduled == counts.current_number_scheduled
        && status.number_misscheduled == counts.number_misscheduled
        && status.number_ready == counts.number_ready
        && n(status.updated_number_scheduled) == counts.updated_number_scheduled
        && n(status.number_available) == counts.number_available
        && n(status.number_unavailable) == counts.number_unavailable
        && status.observed_generation.unwrap_or(0) >= generation
}

fn apply_counts(status: &mut DaemonSetStatus, counts: &DaemonSetCounts) {
    status.desired_number_scheduled = counts.desired_number_scheduled;
    status.current_number_scheduled = counts.current_number_scheduled;
    status.number_misscheduled = counts.number_misscheduled;
    status.number_ready = counts.number_ready;
    status.updated_number_scheduled = non_zero(counts.updated_number_scheduled);
    status.number_available = non_zero(counts.number_available);
    status.number_unavailable = non_zero(counts.number_unavailable);
}

impl DaemonSetsController {
    /// Counts the daemon pods node by node (the oldest pod of each node stands for it) and
    /// writes the status, raising `observedGeneration` when `update_observed_gen`, as
    /// upstream's `updateDaemonSetStatus`. Ready pods not yet available bring the DaemonSet
    /// back after `minReadySeconds`.
    pub(super) async fn update_daemon_set_status(
        &self,
        ds: &DaemonSet,
        nodes: &[Arc<Node>],
        hash: &str,
        update_observed_gen: bool,
    ) -> Result<()> {
        let mut node_to_daemon_pods = self.get_nodes_to_daemon_pods(ds, false).await?;
        let placement = DaemonPlacement::of(ds);
        let now = (self.clock)();
        let min_ready = min_ready_seconds(ds);
        let generation = get_template_generation(ds).ok().flatten();
        let mut counts = DaemonSetCounts::default();
        for node in nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let should_run = placement.should_run(node).should_run;
            let pods = node_to_daemon_pods.get_mut(name).filter(|p| !p.is_empty());
            if !should_run {
                if pods.is_some() {
                    counts.number_misscheduled += 1;
                }
                continue;
            }
            counts.desired_number_scheduled += 1;
            let Some(pods) = pods else {
                continue;
            };
            counts.current_number_scheduled += 1;
            sort_by_creation_timestamp_and_phase(pods);
            let Some(pod) = pods.first() else {
                continue;
            };
            if is_pod_ready(pod) {
                counts.number_ready += 1;
                if is_pod_available(pod, min_ready, now) {
                    counts.number_available += 1;
                }
            }
            if is_pod_updated(pod, hash, generation) {
                counts.updated_number_scheduled += 1;
            }
        }
        counts.number_unavailable = counts.desired_number_scheduled - counts.number_available;

        if let Some(stored) = self
            .store_daemon_set_status(ds, &counts, update_observed_gen)
            .await?
            && let (Some(writes), Some(key)) = (&self.own_writes, key_of(ds))
        {
            writes.record(&key, stored.metadata.resource_version.as_deref());
        }

        if min_ready > 0
            && counts.number_ready != counts.number_available
            && let Some(key) = key_of(ds)
        {
            self.queue.add_after(
                key,
                Duration::from_secs(u64::from(min_ready.unsigned_abs())),
            );
        }
        Ok(())
    }

    /// Writes `counts` (and the generation, when `update_observed_gen`) unless the status
    /// already holds them, retrying once on a freshly read copy, as upstream's
    /// `storeDaemonSetStatus`. Returns the DaemonSet as stored, `None` when nothing changed.
    pub(super) async fn store_daemon_set_status(
        &self,
        ds: &DaemonSet,
        counts: &DaemonSetCounts,
        update_observed_gen: bool,
    ) -> Result<Option<DaemonSet>> {
        let generation = ds.metadata.generation.unwrap_or(0);
        let default = DaemonSetStatus::default();
        if status_unchanged(ds.status.as_ref().unwrap_or(&default), counts, generation) {
            return Ok(None);
        }
        let namespace = ds.metadata.namespace.as_deref().unwrap_or_default();
        let name = ds.metadata.name.as_deref().unwrap_or_default();
        let mut to_update = ds.clone();
        let mut attempt = 0;
        loop {
            let status = to_update.status.get_or_insert_with(Default::default);
            if update_observed_gen {
                status.observed_generation = ds.metadata.generation;
            }
            apply_counts(status, counts);
            let err = match self.ds_client.update_status(&to_update).await {
                Ok(stored) => return Ok(Some(stored)),
                Err(err) => err,
            };
            if attempt >= STATUS_UPDATE_RETRIES {
                return Err(Error::UpdateStatus {
                    daemon_set: ds_key(ds),
                    source: err,
                });
            }
            attempt += 1;
            // A failed read leaves nothing trustworthy to retry with; its error is the more
            // interesting one.
            to_update = self
                .ds_client
                .get(namespace, name)
                .await
                .map_err(|source| Error::Get {
                    daemon_set: ds_key(ds),
                    source,
                })?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchanged_compares_absent_as_zero_and_needs_the_generation() {
        let counts = DaemonSetCounts {
            desired_number_scheduled: 3,
            current_number_scheduled: 3,
            number_ready: 3,
            updated_number_scheduled: 3,
            number_available: 3,
            ..DaemonSetCounts::default()
        };
        let mut status = DaemonSetStatus::default();
        apply_counts(&mut status, &counts);
        status.observed_generation = Some(2);
        assert!(status_unchanged(&status, &counts, 2));
        assert!(
            !status_unchanged(&status, &counts, 3),
            "newer generation not observed"
        );
        let zero = DaemonSetCounts::default();
        let empty = DaemonSetStatus::default();
        assert!(status_unchanged(&empty, &zero, 0));
        assert_eq!(empty.number_unavailable, None);
    }
}
