//! The DaemonSet rolling update: which old pods to delete (or which nodes to surge onto) within `maxUnavailable`/`maxSurge`, as upstream's `rollingUpdate`, `findUpdatedPodsOnNode` and `updatedDesiredNodeCounts` (`update.go`).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kcm_machinery::controller::is_pod_available;
use kcm_machinery::informer::keys::object_key;

use super::controller::DaemonSetsController;
use super::placement::DaemonPlacement;
use super::sync::NodeToDaemonPods;
use super::util::{
    ds_key, get_template_generation, is_pod_updated, min_ready_seconds, surge_count,
    unavailable_count,
};
use super::{Error, Result};

fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// The live (not being deleted) new and old pod on a node, or `None` when there is more
/// than one of either (the manage loop prunes those first), as upstream's
/// `findUpdatedPodsOnNode`.
pub(super) fn find_updated_pods_on_node<'a>(
    ds: &DaemonSet,
    pods: &'a [Arc<Pod>],
    hash: &str,
) -> Option<(Option<&'a Arc<Pod>>, Option<&'a Arc<Pod>>)> {
    let generation = get_template_generation(ds).ok().flatten();
    let (mut new, mut old) = (None, None);
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let slot = if is_pod_updated(pod, hash, generation) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod);
    }
    Some((new, old))
}

/// The update budget: `(maxSurge, maxUnavailable, desiredNumberScheduled)` resolved against
/// the nodes that should run the DaemonSet, each of which gets an (empty) entry in
/// `node_to_daemon_pods`, as upstream's `updatedDesiredNodeCounts`. Neither surge nor
/// unavailability configured means one unavailable pod is allowed.
pub(super) fn updated_desired_node_counts(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    node_to_daemon_pods: &mut NodeToDaemonPods,
) -> Result<(i32, i32, i32)> {
    let placement = DaemonPlacement::of(ds);
    let mut desired = 0;
    for node in nodes {
        if !placement.should_run(node).should_run {
            continue;
        }
        desired += 1;
        let name = node.metadata.name.clone().unwrap_or_default();
        node_to_daemon_pods.entry(name).or_default();
    }
    let mut max_unavailable =
        unavailable_count(ds, desired).map_err(|source| Error::IntOrPercent {
            field: "MaxUnavailable",
            source,
        })?;
    let max_surge = surge_count(ds, desired).map_err(|source| Error::IntOrPercent {
        field: "MaxSurge",
        source,
    })?;
    if desired > 0 && max_unavailable == 0 && max_surge == 0 {
        tracing::info!(daemonset = %ds_key(ds), "DaemonSet is not configured for surge or unavailability, defaulting to accepting unavailability");
        max_unavailable = 1;
    }
    Ok((max_surge, max_unavailable, desired))
}

impl DaemonSetsController {
    /// Deletes old pods (or creates new ones beside them when surging) as far as the update
    /// strategy allows, as upstream's `rollingUpdate`. Without surge, unavailable old pods
    /// are replaced at once and available ones while fewer than `maxUnavailable` pods are
    /// unavailable; the manage loop creates the replacements. With surge, a new pod is
    /// started beside an old one (at most `maxSurge` at a time, or at once when the old one is
    /// unavailable) and the old one deleted once the new one is available.
    pub(super) async fn rolling_update(
        &self,
        ds: &DaemonSet,
        nodes: &[Arc<Node>],
        hash: &str,
    ) -> Result<()> {
        let mut node_to_daemon_pods = self.get_nodes_to_daemon_pods(ds, false).await?;
        let (max_surge, max_unavailable, desired) =
            updated_desired_node_counts(ds, nodes, &mut node_to_daemon_pods)?;
        let now = (self.clock)();
        let min_ready = min_ready_seconds(ds);
        let available = |pod: &Pod| is_pod_available(pod, min_ready, now);
        // A stable order, so the same pass picks the same candidates (upstream iterates a map).
        let mut entries: Vec<(&String, &Vec<Arc<Pod>>)> = node_to_daemon_pods.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));

        if max_surge == 0 {
            let mut num_unavailable = 0;
            let mut allowed_replacements: Vec<String> = Vec::new();
            let mut candidates: Vec<String> = Vec::new();
            for (node, pods) in &entries {
                let Some((new, old)) = find_updated_pods_on_node(ds, pods, hash) else {
                    tracing::debug!(daemonset = %ds_key(ds), node = %node, "DaemonSet has excess pods on node, skipping to allow the core loop to process");
                    num_unavailable += 1;
                    continue;
                };
                match (new, old) {
                    (None, None) | (Some(_), Some(_)) => num_unavailable += 1,
                    (Some(new), None) => {
                        if !available(new) {
                            num_unavailable += 1;
                        }
                    }
                    (None, Some(old)) => {
                        if !available(old) {
                            allowed_replacements.push(name_of(old));
                            num_unavailable += 1;
                        } else if num_unavailable < max_unavailable {
                            candidates.push(name_of(old));
                        }
                    }
                }
            }
            let remaining = usize::try_from(max_unavailable - num_unavailable)
                .unwrap_or(0)
                .min(candidates.len());
            tracing::debug!(daemonset = %ds_key(ds), replacements = allowed_replacements.len(), max_unavailable, num_unavailable, candidates = candidates.len(), "DaemonSet allowing replacements");
            let mut to_delete = allowed_replacements;
            to_delete.extend(candidates.into_iter().take(remaining));
            return self.sync_nodes(ds, &to_delete, &[], hash).await;
        }

        let mut to_delete: Vec<String> = Vec::new();
        let mut should_not_run: Vec<String> = Vec::new();
        let mut candidate_new_nodes: Vec<String> = Vec::new();
        let mut allowed_new_nodes: Vec<String> = Vec::new();
        let mut num_surge = 0;
        let mut num_available = 0;
        let placement = DaemonPlacement::of(ds);
        for (node_name, pods) in &entries {
            let Some((new, old)) = find_updated_pods_on_node(ds, pods, hash) else {
                tracing::debug!(daemonset = %ds_key(ds), node = %node_name, "DaemonSet has excess pods on node, skipping to allow the core loop to process");
                num_surge += 1;
                continue;
            };
            // Availability counts every node, even ones being sunset by scheduling changes.
            match (old, new) {
                (Some(old), _) if available(old) => num_available += 1,
                (None, Some(new)) if available(new) => num_available += 1,
                _ => {}
            }
            match (old, new) {
                (None, _) => {}
                (Some(old), None) => {
                    let node = self
                        .node_cache
                        .get_by_key(&object_key("", node_name))
                        .ok_or_else(|| Error::NodeNotFound {
                            node: (*node_name).clone(),
                        })?;
                    let should_run = placement.should_run(&node).should_run;
                    if !available(old) {
                        if !should_run {
                            to_delete.push(name_of(old));
                            continue;
                        }
                        allowed_new_nodes.push((*node_name).clone());
                    } else {
                        if !should_run {
                            should_not_run.push(name_of(old));
                            continue;
                        }
                        if num_surge >= max_surge {
                            continue;
                        }
                        candidate_new_nodes.push((*node_name).clone());
                    }
                }
                (Some(old), Some(new)) => {
                    if !available(new) {
                        num_surge += 1;
                        continue;
                    }
                    to_delete.push(name_of(old));
                }
            }
        }
        tracing::debug!(daemonset = %ds_key(ds), replacements = allowed_new_nodes.len(), max_surge, num_surge, candidates = candidate_new_nodes.len(), "DaemonSet allowing replacements");

        // With surge the owner expects full availability: a pod on a node that no longer
        // fits goes only once enough pods are available elsewhere.
        let deletable = usize::try_from(num_available - desired)
            .unwrap_or(0)
            .min(should_not_run.len());
        for name in should_not_run.into_iter().take(deletable) {
            let key = object_key(ds.metadata.namespace.as_deref().unwrap_or_default(), &name);
            if self.pod_cache.get_by_key(&key).is_some() {
                to_delete.push(name);
            }
        }
        let remaining = usize::try_from(max_surge - num_surge)
            .unwrap_or(0)
            .min(candidate_new_nodes.len());
        let mut new_nodes = allowed_new_nodes;
        new_nodes.extend(candidate_new_nodes.into_iter().take(remaining));
        self.sync_nodes(ds, &to_delete, &new_nodes, hash).await
    }
}
