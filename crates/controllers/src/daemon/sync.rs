//! The DaemonSet sync pass: `syncDaemonSet`, `getNodesToDaemonPods`, `podsShouldBeOnNode`, `manage` and `syncNodes` (upstream `daemon_controller.go` from `getDaemonPods` on).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::future::join_all;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, PodTemplateSpec};
use kcm_machinery::controller::ref_manager::recheck_owner;
use kcm_machinery::controller::{
    ApiStatus, PodControllerRefManager, SLOW_START_INITIAL_BATCH_SIZE, is_pod_available,
    is_pod_ready, new_controller_ref, pod_control,
};
use kcm_machinery::events::EventType;
use kcm_machinery::informer::keys::split_meta_namespace_key;
use kube::Resource;
use tokio::time::Instant;

use super::controller::{
    DaemonSetsController, FAILED_DAEMON_POD_REASON, OWN_WRITE_WAIT, SELECTING_ALL_REASON,
    SUCCEEDED_DAEMON_POD_REASON, daemon_set_selector, objects_in_namespace,
};
use super::placement::DaemonPlacement;
use super::util::{
    DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY, allows_surge, create_pod_template, ds_key,
    get_target_node_name, get_template_generation, min_ready_seconds,
    replace_daemon_set_pod_node_name_node_affinity, sort_by_creation_timestamp_and_phase,
};
use super::{Error, Result};

/// Daemon pods grouped by the node they are for.
pub(super) type NodeToDaemonPods = HashMap<String, Vec<Arc<Pod>>>;

fn is_pod_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed" | "Succeeded")
    )
}

fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// Whether the selector is the empty `{}` that would select every pod.
fn selects_everything(ds: &DaemonSet) -> bool {
    ds.spec.as_ref().is_none_or(|s| {
        s.selector
            .match_labels
            .as_ref()
            .is_none_or(|m| m.is_empty())
            && s.selector
                .match_expressions
                .as_ref()
                .is_none_or(|e| e.is_empty())
    })
}

impl DaemonSetsController {
    /// Syncs the DaemonSet with key `namespace/name`, as upstream's `syncDaemonSet`: builds
    /// its revision history; with satisfied expectations, creates and deletes pods, rolls
    /// them and prunes history; always writes the status (raising `observedGeneration` only
    /// after acting). A DaemonSet being deleted is left alone.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = self.sync_daemon_set(key).await;
        tracing::debug!(daemonset = key, duration = ?start.elapsed(), "Finished syncing daemon set");
        result
    }

    async fn sync_daemon_set(&self, key: &str) -> Result<()> {
        split_meta_namespace_key(key).map_err(|source| Error::InvalidKey {
            key: key.to_owned(),
            source,
        })?;
        if let Some(writes) = &self.own_writes {
            writes.wait(key, OWN_WRITE_WAIT).await;
        }
        let Some(ds) = self.ds_cache.get_by_key(key) else {
            tracing::debug!(daemonset = key, "Daemon set has been deleted");
            self.expectations.delete_expectations(key);
            return Ok(());
        };
        let nodes = self.node_cache.list();

        if selects_everything(&ds) {
            self.recorder.event(
                &self.controller_ref_of(&ds),
                EventType::Warning,
                SELECTING_ALL_REASON,
                "This daemon set is selecting all pods. A non-empty selector is required."
                    .to_owned(),
            );
            return Ok(());
        }
        // Its history may already be deleted or orphaned: no status can be trusted.
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }

        let (cur, old) = self.construct_history(&ds).await?;
        let hash = cur
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY))
            .cloned()
            .unwrap_or_default();

        if !self.expectations.satisfied_expectations(key) {
            // Not acting on this generation: the status keeps the observed one.
            return self
                .update_daemon_set_status(&ds, &nodes, &hash, false)
                .await;
        }

        let result = self.update_daemon_set(&ds, &nodes, &hash, key, &old).await;
        let status = self
            .update_daemon_set_status(&ds, &nodes, &hash, true)
            .await;
        match (result, status) {
            (Err(err), Err(status_err)) => {
                tracing::error!(daemonset = key, err = %status_err, "Failed to update status");
                Err(err)
            }
            (Err(err), Ok(())) | (Ok(()), Err(err)) => Err(err),
            (Ok(()), Ok(())) => Ok(()),
        }
    }

    /// `manage`, then the update strategy (when expectations allow), then history cleanup,
    /// as upstream's `updateDaemonSet`.
    async fn update_daemon_set(
        &self,
        ds: &DaemonSet,
        nodes: &[Arc<Node>],
        hash: &str,
        key: &str,
        old: &[Arc<ControllerRevision>],
    ) -> Result<()> {
        self.manage(ds, nodes, hash).await?;
        if self.expectations.satisfied_expectations(key)
            && super::util::strategy_type(ds) == "RollingUpdate"
        {
            self.rolling_update(ds, nodes, hash).await?;
        }
        self.cleanup_history(ds, old).await
    }

    /// The ObjectReference events about `ds` are recorded against.
    pub(super) fn controller_ref_of(&self, ds: &DaemonSet) -> ObjectReference {
        ds.object_ref(&())
    }

    /// The pods `ds` owns after adopting matching orphans and releasing owned pods that no
    /// longer match, as upstream's `getDaemonPods` (adoption re-checks the DaemonSet with an
    /// uncached read first).
    pub(super) async fn get_daemon_pods(&self, ds: &DaemonSet) -> Result<Vec<Arc<Pod>>> {
        let key = ds_key(ds);
        let selector = daemon_set_selector(ds).map_err(|source| Error::Selector {
            daemon_set: key.clone(),
            source,
        })?;
        let namespace = ds.metadata.namespace.clone().unwrap_or_default();
        let pods = objects_in_namespace(&self.pod_cache, &namespace);
        let client = Arc::clone(&self.ds_client);
        let name = ds.metadata.name.clone().unwrap_or_default();
        let can_adopt = recheck_owner(
            ds,
            move || async move { client.get(&namespace, &name).await },
        );
        let manager = PodControllerRefManager::for_pods(
            Arc::clone(&self.pod_control),
            &ds.metadata,
            selector,
            self.gvk.clone(),
            Some(can_adopt),
        );
        manager
            .claim_pods(&pods, |_| true)
            .await
            .map_err(|source| Error::ClaimPods {
                daemon_set: key,
                source: Box::new(source),
            })
    }

    /// The claimed daemon pods by the node they are for, as upstream's
    /// `getNodesToDaemonPods`. Terminal pods already being deleted are left out unless
    /// `include_deleted_terminal` (history cleanup still counts their revisions).
    pub(super) async fn get_nodes_to_daemon_pods(
        &self,
        ds: &DaemonSet,
        include_deleted_terminal: bool,
    ) -> Result<NodeToDaemonPods> {
        let claimed = self.get_daemon_pods(ds).await?;
        let mut by_node: NodeToDaemonPods = HashMap::new();
        for pod in claimed {
            if !include_deleted_terminal
                && is_pod_terminal(&pod)
                && pod.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            match get_target_node_name(&pod) {
                Ok(node) => by_node.entry(node).or_default().push(pod),
                Err(err) => {
                    tracing::debug!(daemonset = %ds_key(ds), %err, "Failed to get target node name of Pod in DaemonSet");
                }
            }
        }
        Ok(by_node)
    }

    /// The node needing a pod (`Some(node)`) and the pods to delete on `node`, as upstream's
    /// `podsShouldBeOnNode`: a missing pod is created; failed pods are deleted (with per-node
    /// back-off) and succeeded ones too; excess pods beyond the oldest (or, when surging,
    /// beyond one old and one new) go; a node that should not run the DaemonSet loses them.
    pub(super) fn pods_should_be_on_node(
        &self,
        node: &Node,
        placement: &DaemonPlacement,
        node_to_daemon_pods: &NodeToDaemonPods,
        ds: &DaemonSet,
        hash: &str,
    ) -> (Option<String>, Vec<String>) {
        let verdict = placement.should_run(node);
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let daemon_pods = node_to_daemon_pods.get(&node_name);
        let mut needs_pod = None;
        let mut to_delete = Vec::new();

        if verdict.should_run && daemon_pods.is_none() {
            return (Some(node_name), to_delete);
        }
        if verdict.should_continue_running {
            let mut running: Vec<Arc<Pod>> = Vec::new();
            for pod in daemon_pods.into_iter().flatten() {
                if pod.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                match pod_phase(pod) {
                    "Failed" => {
                        // The DaemonSet fights kubelets that reject pods here: back off.
                        let backoff_key = failed_pods_backoff_key(ds, &node_name);
                        let now = Instant::now();
                        if self
                            .failed_pods_backoff
                            .is_in_back_off_since_update(&backoff_key, now)
                        {
                            let delay = self.failed_pods_backoff.get(&backoff_key);
                            tracing::debug!(pod = %name_of(pod), node = %node_name, ?delay, "Deleting failed pod on node has been limited by backoff");
                            if let Some(key) = super::controller::key_of(ds) {
                                self.queue.add_after(key, delay);
                            }
                            continue;
                        }
                        self.failed_pods_backoff.next(&backoff_key, now);
                        let message = format!(
                            "Found failed daemon pod {}/{} on node {node_name}, will try to kill it",
                            pod.metadata.namespace.as_deref().unwrap_or_default(),
                            name_of(pod)
                        );
                        tracing::info!(pod = %name_of(pod), node = %node_name, "Found failed daemon pod on node, will try to kill it");
                        self.recorder.event(
                            &self.controller_ref_of(ds),
                            EventType::Warning,
                            FAILED_DAEMON_POD_REASON,
                            message,
                        );
                        to_delete.push(name_of(pod));
                    }
                    "Succeeded" => {
                        let message = format!(
                            "Found succeeded daemon pod {}/{} on node {node_name}, will try to delete it",
                            pod.metadata.namespace.as_deref().unwrap_or_default(),
                            name_of(pod)
                        );
                        self.recorder.event(
                            &self.controller_ref_of(ds),
                            EventType::Normal,
                            SUCCEEDED_DAEMON_POD_REASON,
                            message,
                        );
                        to_delete.push(name_of(pod));
                    }
                    _ => running.push(Arc::clone(pod)),
                }
            }

            if !allows_surge(ds) {
                // Without surge, more than one running pod: keep the oldest.
                if running.len() > 1 {
                    sort_by_creation_timestamp_and_phase(&mut running);
                    to_delete.extend(running[1..].iter().map(|p| name_of(p)));
                }
                return (needs_pod, to_delete);
            }
            if running.len() <= 1 {
                // Surging still needs at least one live pod on the node.
                if running.is_empty() && verdict.should_run {
                    needs_pod = Some(node_name);
                }
                return (needs_pod, to_delete);
            }
            // Surging allows one old and one new pod while the old one is ready and the new
            // one not yet available; every other pod goes.
            sort_by_creation_timestamp_and_phase(&mut running);
            let mut oldest_new: Option<&Arc<Pod>> = None;
            let mut oldest_old: Option<&Arc<Pod>> = None;
            for pod in &running {
                let is_new = pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(DEFAULT_DAEMON_SET_UNIQUE_LABEL_KEY))
                    .is_some_and(|h| h == hash);
                let slot = if is_new {
                    &mut oldest_new
                } else {
                    &mut oldest_old
                };
                if slot.is_none() {
                    *slot = Some(pod);
                    continue;
                }
                to_delete.push(name_of(pod));
            }
            if let (Some(new), Some(old)) = (oldest_new, oldest_old) {
                let now = (self.clock)();
                if !is_pod_ready(old) || is_pod_available(new, min_ready_seconds(ds), now) {
                    to_delete.push(name_of(old));
                }
            }
            return (needs_pod, to_delete);
        }
        if let Some(pods) = daemon_pods {
            to_delete.extend(
                pods.iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .map(|p| name_of(p)),
            );
        }
        (needs_pod, to_delete)
    }

    /// Creates the missing daemon pods and deletes the unwanted ones, as upstream's `manage`;
    /// also deletes unscheduled pods pinned to nodes that no longer exist.
    pub(super) async fn manage(
        &self,
        ds: &DaemonSet,
        nodes: &[Arc<Node>],
        hash: &str,
    ) -> Result<()> {
        let node_to_daemon_pods = self.get_nodes_to_daemon_pods(ds, false).await?;
        let placement = DaemonPlacement::of(ds);
        let mut nodes_needing = Vec::new();
        let mut to_delete = Vec::new();
        for node in nodes {
            let (needs, delete) =
                self.pods_should_be_on_node(node, &placement, &node_to_daemon_pods, ds, hash);
            nodes_needing.extend(needs);
            to_delete.extend(delete);
        }
        to_delete.extend(unscheduled_pods_without_node(nodes, &node_to_daemon_pods));
        self.sync_nodes(ds, &to_delete, &nodes_needing, hash).await
    }

    /// Deletes `pods_to_delete` and creates a pod on each of `nodes_needing`, at most
    /// `burst_replicas` of each, as upstream's `syncNodes`: expectations are set first;
    /// creations go in slow-start batches pinned to their node by node affinity (the
    /// scheduler binds them), and the never-attempted ones are taken off the expectations
    /// after a failing batch; every failure of the pass is returned.
    pub(super) async fn sync_nodes(
        &self,
        ds: &DaemonSet,
        pods_to_delete: &[String],
        nodes_needing: &[String],
        hash: &str,
    ) -> Result<()> {
        let key = ds_key(ds);
        let create_diff = nodes_needing.len().min(self.burst_replicas);
        let delete_diff = pods_to_delete.len().min(self.burst_replicas);
        self.expectations
            .set_expectations(&key, as_i64(create_diff), as_i64(delete_diff));

        let namespace = ds.metadata.namespace.as_deref().unwrap_or_default();
        let controller = self.controller_ref_of(ds);
        let controller_ref = new_controller_ref(&ds.metadata, &self.gvk);
        let generation = get_template_generation(ds).ok().flatten();
        let default_template = PodTemplateSpec::default();
        let template = create_pod_template(
            ds.spec.as_ref().map_or(&default_template, |s| &s.template),
            generation,
            hash,
        );
        let mut errors: Vec<pod_control::Error> = Vec::new();

        tracing::debug!(daemonset = %key, need = nodes_needing.len(), create = create_diff, "Nodes needing daemon pods for daemon set, creating");
        let mut batch = create_diff.min(SLOW_START_INITIAL_BATCH_SIZE);
        let mut pos = 0;
        while pos < create_diff {
            let creations = nodes_needing[pos..pos + batch].iter().map(|node| {
                let mut pod_template = template.clone();
                if let Some(spec) = pod_template.spec.as_mut() {
                    spec.affinity = Some(replace_daemon_set_pod_node_name_node_affinity(
                        spec.affinity.take(),
                        node,
                    ));
                }
                let (controller, controller_ref) = (&controller, &controller_ref);
                async move {
                    self.pod_control
                        .create_pods(namespace, &pod_template, controller, controller_ref)
                        .await
                }
            });
            let mut failed = 0;
            for result in join_all(creations).await {
                let Err(err) = result else { continue };
                // A namespace being torn down refuses every later creation too.
                if err.is_namespace_terminating() {
                    continue;
                }
                tracing::info!(daemonset = %key, %err, "Failed creation, decrementing expectations for daemon set");
                self.expectations.creation_observed(&key);
                errors.push(err);
                failed += 1;
            }
            let skipped = create_diff - (pos + batch);
            if failed > 0 && skipped > 0 {
                tracing::info!(daemonset = %key, skipped, "Slow-start failure. Skipping creation pods, decrementing expectations for daemon set");
                self.expectations
                    .lower_expectations(&key, as_i64(skipped), 0);
                break;
            }
            pos += batch;
            batch = (2 * batch).min(create_diff - pos);
        }

        tracing::debug!(daemonset = %key, delete = delete_diff, "Pods to delete for daemon set, deleting");
        let deletions = pods_to_delete[..delete_diff].iter().map(|name| {
            let controller = &controller;
            async move {
                self.pod_control
                    .delete_pod(namespace, name, controller)
                    .await
            }
        });
        for result in join_all(deletions).await {
            let Err(err) = result else { continue };
            self.expectations.deletion_observed(&key);
            if !err.is_not_found() {
                tracing::info!(daemonset = %key, %err, "Failed deletion, decremented expectations for daemon set");
                errors.push(err);
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Error::SyncNodes {
                daemon_set: key,
                errors,
            })
        }
    }
}

/// The failed-pods back-off key of `ds` on `node`: `uid/observedGeneration/node`, so a new
/// generation starts over.
pub(super) fn failed_pods_backoff_key(ds: &DaemonSet, node: &str) -> String {
    format!(
        "{}/{}/{node}",
        ds.metadata.uid.as_deref().unwrap_or_default(),
        ds.status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .unwrap_or(0)
    )
}

/// The unscheduled pods pinned to nodes that no longer exist: the pod GC never sees them,
/// so the DaemonSet deletes them, as upstream's `getUnscheduledPodsWithoutNode`.
pub(super) fn unscheduled_pods_without_node(
    nodes: &[Arc<Node>],
    node_to_daemon_pods: &NodeToDaemonPods,
) -> Vec<String> {
    let running: HashSet<&str> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let mut result = Vec::new();
    for (node, pods) in node_to_daemon_pods {
        if running.contains(node.as_str()) {
            continue;
        }
        for pod in pods {
            let unscheduled = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_none_or(str::is_empty);
            if unscheduled {
                result.push(name_of(pod));
            }
        }
    }
    result
}

fn as_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
