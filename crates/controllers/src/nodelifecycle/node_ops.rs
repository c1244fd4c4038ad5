//! Writes on Nodes and Pods shared by the controllers: taint swaps, pods marked not ready,
//! node events (upstream's `pkg/controller/util/node` and `controller.RemoveTaintOffNode`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, PodCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::events::{EventRecorder, EventType, WallClock};

use super::client::{LifecycleClient, is_conflict, is_not_found};
use super::taints::{node_taints, swap_taints, taint_exists};

/// Attempts of a taint update before giving up (upstream's `UpdateTaintBackoff.Steps`).
pub const UPDATE_TAINT_ATTEMPTS: usize = 5;
/// Pause between conflicting taint updates (upstream's `UpdateTaintBackoff.Duration`).
pub const UPDATE_TAINT_BACKOFF: Duration = Duration::from_millis(100);

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Updating the taints of a node failed.
    #[error("updating taints of node {node}")]
    Taints {
        /// The node.
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Marking a pod not ready failed.
    #[error("marking pod {pod} not ready")]
    MarkPodNotReady {
        /// `namespace/name`.
        pod: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// Adds `add` and removes `remove` on the node in one update, re-reading it from the server
/// and retrying on conflicts, as upstream's `SwapNodeControllerTaint` (which does it in two).
/// With nothing to remove that `cached` carries and nothing to add, no request is made.
/// A node that no longer exists is not an error.
pub async fn swap_node_taints(
    client: &dyn LifecycleClient,
    clock: &dyn WallClock,
    cached: &Node,
    add: &[Taint],
    remove: &[Taint],
) -> Result<()> {
    let name = cached.metadata.name.clone().unwrap_or_default();
    if add.is_empty() && !remove.iter().any(|t| taint_exists(node_taints(cached), t)) {
        return Ok(());
    }
    let mut last = None;
    for attempt in 0..UPDATE_TAINT_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(UPDATE_TAINT_BACKOFF).await;
        }
        let mut node = match client.get_node(&name).await {
            Ok(n) => n,
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => {
                last = Some(e);
                continue;
            }
        };
        let Some(taints) = swap_taints(node_taints(&node), add, remove, clock.now()) else {
            return Ok(());
        };
        node.spec.get_or_insert_with(Default::default).taints =
            (!taints.is_empty()).then_some(taints);
        match client.update_node(&node).await {
            Ok(_) => return Ok(()),
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) if is_conflict(&e) => last = Some(e),
            Err(e) => {
                return Err(Error::Taints {
                    node: name,
                    source: e,
                });
            }
        }
    }
    match last {
        Some(source) => Err(Error::Taints { node: name, source }),
        None => Ok(()),
    }
}

/// Sets the Ready condition of every pod of `pods` bound to `node_name` to False through
/// `pods/status`, with a `NodeNotReady` event per pod, as upstream's `MarkPodsNotReady`.
/// Pods already not ready are skipped; pods gone are not an error. Returns the first error
/// after trying every pod.
pub async fn mark_pods_not_ready(
    client: &dyn LifecycleClient,
    recorder: &dyn EventRecorder,
    clock: &dyn WallClock,
    pods: &[std::sync::Arc<Pod>],
    node_name: &str,
) -> Result<()> {
    let mut first_error = None;
    for cached in pods {
        if cached.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(node_name) {
            continue;
        }
        let Some(pod) = pod_marked_not_ready(cached, clock.now()) else {
            continue;
        };
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        tracing::debug!(pod = %key, node = node_name, "updating ready status of pod to false");
        match client.update_pod_status(&pod).await {
            Ok(_) => recorder.event(
                &pod_ref(&pod),
                EventType::Warning,
                "NodeNotReady",
                "Node is not ready".to_owned(),
            ),
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                if first_error.is_none() {
                    first_error = Some(Error::MarkPodNotReady {
                        pod: key,
                        source: e,
                    });
                }
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// `pod` with its Ready condition set False (transition time `now`), or `None` when it has
/// no Ready condition or it is already False (upstream's `UpdatePodCondition` semantics).
pub fn pod_marked_not_ready(pod: &Pod, now: jiff::Timestamp) -> Option<Pod> {
    let ready = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .position(|c| c.type_ == "Ready")?;
    let mut pod = pod.clone();
    let conditions = pod.status.as_mut()?.conditions.as_mut()?;
    let c: &mut PodCondition = conditions.get_mut(ready)?;
    if c.status == "False" {
        return None;
    }
    c.status = "False".to_owned();
    c.last_transition_time = Some(Time(now));
    Some(pod)
}

/// A reference to a pod for events.
pub fn pod_ref(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

/// A reference to a node for events (upstream uses the node name as UID in status-change
/// events).
pub fn node_ref(name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Node".to_owned()),
        name: Some(name.to_owned()),
        uid: Some(uid.to_owned()),
        ..ObjectReference::default()
    }
}

/// `Node <name> event: <event>`, as upstream's `RecordNodeEvent`.
pub fn record_node_event(
    recorder: &dyn EventRecorder,
    name: &str,
    uid: &str,
    type_: EventType,
    reason: &str,
    event: &str,
) {
    recorder.event(
        &node_ref(name, uid),
        type_,
        reason,
        format!("Node {name} event: {event}"),
    );
}

/// `Node <name> status is now: <status>`, as upstream's `RecordNodeStatusChange`.
pub fn record_node_status_change(recorder: &dyn EventRecorder, node: &Node, new_status: &str) {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    recorder.event(
        &node_ref(name, name),
        EventType::Normal,
        new_status,
        format!("Node {name} status is now: {new_status}"),
    );
}
