//! The simulated kubelets' pod side: drive each bound pod with [`crate::kubelet::decide`].

use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use kcm_machinery::controller::api_status::ApiStatus;
use kcm_machinery::informer::split_meta_namespace_key;

use super::{Error, Result, Simulator, lock};
use crate::kubelet::{
    ContainerEvent, Context, Decision, NODE_PORTS, container_events, decide, host_port_conflict,
    killing_events, rejected_status, wants_host_ports,
};
use crate::node::heartbeat_stopped;
use crate::scheduler::service::pod_reference;

/// When the pod was bound: its `PodScheduled=True` transition, as the API server records it
/// on binding.
fn scheduled_at(pod: &Pod) -> Option<jiff::Timestamp> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        })
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

pub(super) fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

impl Simulator {
    /// Records `events` about `pod` with its node's recorder.
    fn record(&self, node: &str, pod: &Pod, events: Vec<ContainerEvent>) {
        let Some(recorder) = self.shared.recorders.get(node) else {
            return;
        };
        for event in events {
            let mut regarding = pod_reference(pod);
            regarding.field_path = Some(event.field_path).filter(|p| !p.is_empty());
            recorder.event(&regarding, event.type_, event.reason, event.message);
        }
    }

    /// Whether the kubelet's admission refuses `pod`, not yet started on `node`: a host port
    /// it asks for is held by a pod the node already runs (started, not finished).
    fn rejects(&self, pod: &Pod, node: &str, uid: &str) -> bool {
        let started = pod.status.as_ref().is_some_and(|s| s.start_time.is_some());
        if started || pod.metadata.deletion_timestamp.is_some() || !wants_host_ports(pod) {
            return false;
        }
        let everything = kcm_machinery::labels::Selector::everything();
        let others = self.shared.pods.list_all(&everything);
        let admitted = others.iter().map(AsRef::as_ref).filter(|other: &&Pod| {
            other.metadata.uid.as_deref() != Some(uid)
                && other.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
                && other
                    .status
                    .as_ref()
                    .is_some_and(|s| s.start_time.is_some())
                && !is_finished(other)
        });
        host_port_conflict(pod, admitted)
    }

    /// Whether `pod`, not started yet, needs an attachable volume its node does not list in
    /// `status.volumesAttached` (the kubelet's `WaitForAttachAndMount`: the pod stays pending).
    fn waits_for_attach(&self, pod: &Pod, node: &str) -> bool {
        let started = pod.status.as_ref().is_some_and(|s| s.start_time.is_some());
        if started || pod.metadata.deletion_timestamp.is_some() {
            return false;
        }
        let needed = self.shared.attachable_volumes(pod);
        if needed.is_empty() {
            return false;
        }
        let node = self.shared.nodes.get_cluster(node);
        let attached: Vec<&str> = node
            .as_ref()
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.volumes_attached.as_ref())
            .into_iter()
            .flatten()
            .map(|v| v.name.as_str())
            .collect();
        needed.iter().any(|v| !attached.contains(&v.as_str()))
    }

    /// Why `pod`, not started yet, cannot start: a claim it names is not allocated and
    /// reserved for it (`None` without the claim informer).
    fn claims_waiting(&self, pod: &Pod) -> Option<String> {
        let started = pod.status.as_ref().is_some_and(|s| s.start_time.is_some());
        if started || pod.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let claims = self.shared.resource_claims.get()?;
        super::claims::claims_not_prepared(claims, pod)
    }

    /// Serves the pod queue until it shuts down.
    pub(super) async fn pod_worker(&self) {
        let queue = &self.shared.pod_queue;
        while let Some(key) = queue.get().await {
            match self.sync_pod(&key).await {
                Ok(next) => {
                    queue.forget(&key);
                    if let Some(next) = next {
                        queue.add_after(key.clone(), next);
                    }
                }
                Err(err) => {
                    tracing::warn!(%err, "driving pod failed; retrying");
                    queue.add_rate_limited(key.clone());
                }
            }
            queue.done(&key);
        }
    }

    /// One kubelet step for the pod under `key`: post the status it should have now,
    /// finalize it if it is being deleted, or wait. Returns when to look again.
    pub(super) async fn sync_pod(&self, key: &str) -> Result<Option<Duration>> {
        let shared = &self.shared;
        let pod = match split_meta_namespace_key(key) {
            Ok((Some(namespace), name)) => shared.pods.get(namespace, name),
            _ => None,
        };
        let Some(pod) = pod else {
            return Ok(None);
        };
        let Some(node_name) = shared.node_of(&pod) else {
            return Ok(None);
        };
        let Some(slot) = shared.slots.get(node_name) else {
            return Ok(None);
        };
        if shared
            .nodes
            .get_cluster(node_name)
            .is_some_and(|n| heartbeat_stopped(&n))
        {
            // A silent kubelet touches nothing; the node handler requeues its pods when
            // the annotation goes.
            return Ok(None);
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if is_finished(&pod) && pod.metadata.deletion_timestamp.is_none() {
            shared.release(node_name, &uid);
            return Ok(None);
        }
        if self.rejects(&pod, node_name, &uid) {
            let (status, message) = rejected_status(&pod);
            let mut update = (*pod).clone();
            update.status = Some(status);
            match self.client.update_pod_status(&update).await {
                Ok(_) => {
                    let event = ContainerEvent {
                        field_path: String::new(),
                        type_: kcm_machinery::events::EventType::Warning,
                        reason: NODE_PORTS,
                        message,
                    };
                    self.record(node_name, &pod, vec![event]);
                }
                Err(err) if err.is_not_found() => {}
                Err(source) => {
                    return Err(Error::PodStatus {
                        pod: key.to_owned(),
                        source,
                    });
                }
            }
            shared.release(node_name, &uid);
            return Ok(None);
        }
        if self.waits_for_attach(&pod, node_name) {
            // The node handler queues the node's pods when its volumesAttached changes.
            tracing::debug!(pod = key, node = node_name, "waiting for volumes to attach");
            return Ok(None);
        }
        if let Some(message) = self.claims_waiting(&pod) {
            // The claim handler queues the pod when a claim reserved for it changes.
            tracing::debug!(pod = key, node = node_name, %message, "waiting for resource claims");
            let host_ip = lock(slot).host_ip.to_string();
            let status = super::claims::waiting_status(&pod, &host_ip);
            if pod.status.as_ref() != Some(&status) {
                let mut update = (*pod).clone();
                update.status = Some(status);
                match self.client.update_pod_status(&update).await {
                    Ok(_) => {}
                    Err(err) if err.is_not_found() => return Ok(None),
                    Err(source) => {
                        return Err(Error::PodStatus {
                            pod: key.to_owned(),
                            source,
                        });
                    }
                }
            }
            let repeated = lock(&shared.prepare_failures)
                .insert(uid.clone(), message.clone())
                .is_some_and(|last| last == message);
            if !repeated {
                let event = ContainerEvent {
                    field_path: String::new(),
                    type_: kcm_machinery::events::EventType::Warning,
                    reason: super::claims::FAILED_PREPARE_DYNAMIC_RESOURCES,
                    message: format!(
                        "Failed to prepare dynamic resources: prepare dynamic resources: {message}"
                    ),
                };
                self.record(node_name, &pod, vec![event]);
            }
            return Ok(None);
        }
        lock(&shared.prepare_failures).remove(&uid);
        if pod.metadata.deletion_timestamp.is_none() {
            // Mounting (or mounted): a volume the resizer grew is expanded on the node.
            self.expand_volumes(&pod, node_name).await?;
        }
        let (pod_ip, host_ip) = {
            let mut slot = lock(slot);
            let host_ip = slot.host_ip;
            let Some(ipam) = slot.ipam.as_mut() else {
                // No pod CIDR on the Node yet: the node handler queues the node's pods when
                // the node IPAM controller sets it.
                tracing::debug!(
                    pod = key,
                    node = node_name,
                    "waiting for the node's pod CIDR"
                );
                return Ok(None);
            };
            let posted = pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.as_deref())
                .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
                .filter(|ip| ipam.reserve(&uid, *ip));
            (posted.or_else(|| ipam.allocate(&uid)), host_ip)
        };
        let Some(pod_ip) = pod_ip else {
            return Err(Error::NoPodIp {
                pod: key.to_owned(),
                node: node_name.to_owned(),
            });
        };
        let now = shared.clock.now();
        let bound_at = scheduled_at(&pod)
            .unwrap_or_else(|| *lock(&shared.first_seen).entry(uid.clone()).or_insert(now));
        let cx = Context {
            now,
            bound_at: Some(bound_at),
            ready_delay: shared.config.pod_ready_delay,
            pod_ip,
            host_ip,
        };
        match decide(&pod, &cx) {
            Decision::Wait(next) => Ok(next),
            Decision::UpdateStatus { status, recheck } => {
                let finished = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
                let mut update = (*pod).clone();
                update.status = Some(*status);
                match self.client.update_pod_status(&update).await {
                    Ok(_) => {
                        let old = pod.status.clone().unwrap_or_default();
                        let new = update.status.clone().unwrap_or_default();
                        self.record(node_name, &pod, container_events(&pod, &old, &new));
                    }
                    Err(err) if err.is_not_found() => {
                        shared.release(node_name, &uid);
                        return Ok(None);
                    }
                    Err(source) => {
                        return Err(Error::PodStatus {
                            pod: key.to_owned(),
                            source,
                        });
                    }
                }
                if finished {
                    shared.release(node_name, &uid);
                }
                Ok(recheck)
            }
            Decision::Finalize { final_status } => {
                let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                if let Some(current) = pod.status.as_ref() {
                    self.record(node_name, &pod, killing_events(current));
                }
                if let Some(status) = final_status {
                    let mut update = (*pod).clone();
                    update.status = Some(*status);
                    match self.client.update_pod_status(&update).await {
                        Ok(_) => {}
                        Err(err) if err.is_not_found() => {
                            shared.release(node_name, &uid);
                            return Ok(None);
                        }
                        Err(source) => {
                            return Err(Error::PodStatus {
                                pod: key.to_owned(),
                                source,
                            });
                        }
                    }
                }
                self.client
                    .delete_pod(namespace, name, &uid)
                    .await
                    .map_err(|source| Error::DeletePod {
                        pod: key.to_owned(),
                        source,
                    })?;
                shared.release(node_name, &uid);
                Ok(None)
            }
        }
    }
}
