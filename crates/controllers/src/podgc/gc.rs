//! The pod garbage collector's passes and `markFailedAndDeletePod` (upstream `gc_controller.go` from `gc` on).

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::controller::pod_key;
use serde_json::json;

use super::controller::PodGcController;
use super::metrics::{
    REASON_ORPHANED, REASON_TERMINATED, REASON_TERMINATING_OUT_OF_SERVICE,
    REASON_TERMINATING_UNSCHEDULED,
};
use super::{Error, Result};

/// The taint that marks a node as out of service, as core/v1 `TaintNodeOutOfService`.
pub const TAINT_NODE_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

/// The pod condition PodGC sets on orphans it fails, as core/v1 `DisruptionTarget`.
pub use kcm_machinery::controller::ranking::DISRUPTION_TARGET;

/// Deletions issued concurrently in one pass (upstream starts a goroutine per pod).
const DELETE_CONCURRENCY: usize = 50;

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Whether the pod's phase is neither `Pending`, `Running` nor `Unknown` (an empty phase
/// counts as terminated, as upstream's `isPodTerminated` reads it).
pub fn is_pod_terminated(pod: &Pod) -> bool {
    !matches!(phase(pod), "Pending" | "Running" | "Unknown")
}

/// Whether the pod is being deleted, as upstream's `isPodTerminating`.
pub fn is_pod_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

/// Whether the node's `Ready` condition is `True`, as upstream's `IsNodeReady`.
fn is_node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn has_out_of_service_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .any(|t| t.key == TAINT_NODE_OUT_OF_SERVICE)
}

/// Oldest first, names breaking ties, as upstream's `byCreationTimestamp`.
fn sort_by_creation_timestamp(pods: &mut [Arc<Pod>]) {
    pods.sort_by(|a, b| {
        let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        created(a)
            .cmp(&created(b))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

impl PodGcController {
    /// One collection over the caches, as upstream's `gc`: terminated pods beyond the
    /// threshold, terminating pods on out-of-service nodes, orphans of deleted nodes, and
    /// unscheduled terminating pods.
    pub async fn gc(&self) {
        let pods = self.pod_cache.list();
        let nodes = self.node_cache.list();
        if self.terminated_pod_threshold > 0 {
            self.gc_terminated(&pods).await;
        }
        self.gc_terminating(&pods).await;
        self.gc_orphaned(&pods, &nodes).await;
        self.gc_unscheduled_terminating(&pods).await;
    }

    /// Deletes the oldest terminated pods beyond the threshold, as upstream's `gcTerminated`.
    async fn gc_terminated(&self, pods: &[Arc<Pod>]) {
        let mut terminated: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| is_pod_terminated(p))
            .cloned()
            .collect();
        let threshold = usize::try_from(self.terminated_pod_threshold).unwrap_or(0);
        let delete_count = terminated.len().saturating_sub(threshold);
        if delete_count == 0 {
            return;
        }
        tracing::info!(num_pods = delete_count, "Garbage collecting pods");
        // Sorted only when needed: usually nothing is beyond the threshold.
        sort_by_creation_timestamp(&mut terminated);
        terminated.truncate(delete_count);
        self.delete_all(&terminated, REASON_TERMINATED, None).await;
    }

    /// Deletes terminating pods on not-ready nodes tainted `node.kubernetes.io/out-of-service`
    /// (their kubelet will not finish them), as upstream's `gcTerminating`.
    async fn gc_terminating(&self, pods: &[Arc<Pod>]) {
        let mut terminating: Vec<Arc<Pod>> = Vec::new();
        for pod in pods.iter().filter(|p| is_pod_terminating(p)) {
            let Some(node) = self.node_cache.get_by_key(node_name(pod)) else {
                tracing::debug!(pod = %pod_key(pod), node = node_name(pod), "failed to get node");
                continue;
            };
            if !is_node_ready(&node) && has_out_of_service_taint(&node) {
                terminating.push(pod.clone());
            }
        }
        if terminating.is_empty() {
            return;
        }
        tracing::debug!(
            count = terminating.len(),
            "Garbage collecting pods that are terminating on node tainted with node.kubernetes.io/out-of-service"
        );
        sort_by_creation_timestamp(&mut terminating);
        self.delete_all(&terminating, REASON_TERMINATING_OUT_OF_SERVICE, None)
            .await;
    }

    /// Deletes pods bound to nodes that no longer exist, as upstream's `gcOrphaned`: a node
    /// missing from the cache waits out its quarantine, then the API server is asked; only a
    /// node it does not know is gone. Such pods get `DisruptionTarget` (`DeletionByPodGC`).
    async fn gc_orphaned(&self, pods: &[Arc<Pod>], nodes: &[Arc<Node>]) {
        let existing: HashSet<&str> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        for pod in pods {
            let node = node_name(pod);
            if !node.is_empty() && !existing.contains(node) {
                self.node_queue
                    .add_after(node.to_owned(), self.quarantine_time);
            }
        }
        let Some(deleted_nodes) = self.discover_deleted_nodes(&existing).await else {
            return;
        };
        if deleted_nodes.is_empty() {
            return;
        }
        let orphans: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| deleted_nodes.contains(node_name(p)))
            .cloned()
            .collect();
        for pod in &orphans {
            tracing::info!(pod = %pod_key(pod), node = node_name(pod), "Found orphaned Pod assigned to the Node, deleting");
        }
        let condition = PodCondition {
            type_: DISRUPTION_TARGET.to_owned(),
            status: "True".to_owned(),
            reason: Some("DeletionByPodGC".to_owned()),
            message: Some("PodGC: node no longer exists".to_owned()),
            last_transition_time: Some(Time((self.clock)())),
            ..PodCondition::default()
        };
        self.delete_all(&orphans, REASON_ORPHANED, Some(&condition))
            .await;
    }

    /// The quarantined node names whose quarantine is over and that the API server does not
    /// know, as upstream's `discoverDeletedNodes`. `None` once the queue shut down.
    async fn discover_deleted_nodes(&self, existing: &HashSet<&str>) -> Option<HashSet<String>> {
        let mut deleted = HashSet::new();
        while !self.node_queue.is_empty() {
            let name = self.node_queue.get().await?;
            if !existing.contains(name.as_str()) {
                match self.client.node_exists(&name).await {
                    // Still wanted, the node comes back into the queue with the next pass.
                    Err(err) => tracing::error!(node = %name, %err, "Error while getting node"),
                    Ok(false) => {
                        deleted.insert(name.clone());
                    }
                    Ok(true) => {}
                }
            }
            self.node_queue.done(&name);
        }
        Some(deleted)
    }

    /// Deletes terminating pods never bound to a node (no kubelet will finish them), as
    /// upstream's `gcUnscheduledTerminating`.
    async fn gc_unscheduled_terminating(&self, pods: &[Arc<Pod>]) {
        let unscheduled: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| is_pod_terminating(p) && node_name(p).is_empty())
            .cloned()
            .collect();
        for pod in &unscheduled {
            tracing::info!(pod = %pod_key(pod), "Found unscheduled terminating Pod not assigned to any Node, deleting");
        }
        self.delete_all(&unscheduled, REASON_TERMINATING_UNSCHEDULED, None)
            .await;
    }

    /// Marks failed and deletes `pods` concurrently, counting each in the metrics; failures
    /// are logged (the next pass sees the pods again).
    async fn delete_all(&self, pods: &[Arc<Pod>], reason: &str, condition: Option<&PodCondition>) {
        stream::iter(pods.iter().cloned())
            .map(|pod| async move {
                if let Some(metrics) = &self.metrics {
                    metrics.deleting(namespace(&pod), reason);
                }
                match self.mark_failed_and_delete_pod(&pod, condition).await {
                    Ok(()) => {
                        tracing::info!(pod = %pod_key(&pod), reason, "Forced deletion of Pod succeeded");
                    }
                    Err(err) => {
                        tracing::warn!(%err, reason, "PodGC could not force delete the pod");
                        if let Some(metrics) = &self.metrics {
                            metrics.error(namespace(&pod), reason);
                        }
                    }
                }
            })
            .buffer_unordered(DELETE_CONCURRENCY)
            .collect::<Vec<()>>()
            .await;
    }

    /// Moves a pod not yet terminal to `Failed` (adding `condition`), then deletes it with
    /// grace period 0, as upstream's `markFailedAndDeletePodWithCondition`: an orphan would
    /// otherwise stay `Running` forever, with no kubelet to finish it, and a Job could not
    /// count it.
    async fn mark_failed_and_delete_pod(
        &self,
        pod: &Pod,
        condition: Option<&PodCondition>,
    ) -> Result<()> {
        let key = pod_key(pod);
        let namespace = namespace(pod);
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        tracing::info!(pod = %key, "PodGC is force deleting Pod");
        if !matches!(phase(pod), "Succeeded" | "Failed") {
            let mut status = json!({ "phase": "Failed" });
            if let Some(condition) = condition {
                // `conditions` merge by `type`: only this one changes.
                status["conditions"] = json!([condition]);
            }
            let patch = json!({
                "metadata": { "uid": pod.metadata.uid },
                "status": status,
            });
            self.client
                .patch_pod_status(namespace, name, &patch)
                .await
                .map_err(|source| Error::MarkFailed {
                    pod: key.clone(),
                    source,
                })?;
        }
        self.client
            .delete_pod(namespace, name)
            .await
            .map_err(|source| Error::Delete { pod: key, source })
    }
}
