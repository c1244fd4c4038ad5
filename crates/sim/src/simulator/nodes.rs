//! The simulated kubelets' node side: registration, Lease renewals and status heartbeats.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeStatus};
use tokio::time::Instant;

use kcm_machinery::controller::api_status::ApiStatus;

use super::{Error, Result, Simulator, lock};
use crate::node::{
    NODE_LEASE_NAMESPACE, build_lease, build_node, conditions_healthy, heartbeat_stopped,
    refresh_conditions, renewed_lease,
};

impl Simulator {
    /// Serves the node queue until it shuts down.
    pub(super) async fn node_worker(&self) {
        let queue = &self.shared.node_queue;
        while let Some(name) = queue.get().await {
            match self.sync_node(&name).await {
                Ok(next) => {
                    queue.forget(&name);
                    if let Some(next) = next {
                        queue.add_after(name.clone(), next);
                    }
                }
                Err(err) => {
                    tracing::warn!(%err, "node heartbeat failed; retrying");
                    queue.add_rate_limited(name.clone());
                }
            }
            queue.done(&name);
        }
    }

    /// Creates the node, or adopts the Node already named so (a restart, or a node made by
    /// someone else), as the kubelet's `registerWithAPIServer`. Returns the Node as stored.
    pub(super) async fn register(&self, name: &str) -> Result<Node> {
        let shared = &self.shared;
        let Some(slot) = shared.slots.get(name) else {
            return Err(Error::RegisterNode {
                node: name.to_owned(),
                source: kube::Error::Api(Box::new(
                    kcm_machinery::controller::api_status::not_found("nodes", name),
                )),
            });
        };
        let index = lock(slot).index;
        let mut desired = build_node(index, &shared.config.template, shared.clock.now());
        if !shared.config.assign_pod_cidrs
            && let Some(spec) = desired.spec.as_mut()
        {
            // A kubelet does not pick its pod CIDR: the node IPAM controller sets it.
            spec.pod_cidr = None;
            spec.pod_cidrs = None;
        }
        let wrap = |source| Error::RegisterNode {
            node: name.to_owned(),
            source,
        };
        let node = match self.client.create_node(&desired).await {
            Ok(node) => {
                tracing::debug!(node = name, "registered node");
                node
            }
            Err(err) if err.is_already_exists() => {
                let existing = self.client.get_node(name).await.map_err(wrap)?;
                // Deleted in between: the retry creates it.
                let existing = existing.ok_or_else(|| {
                    wrap(kube::Error::Api(Box::new(
                        kcm_machinery::controller::api_status::not_found("nodes", name),
                    )))
                })?;
                tracing::info!(node = name, "adopted existing node");
                existing
            }
            Err(err) => return Err(wrap(err)),
        };
        // The node's pod IPs come from the CIDR the Node shows (set by this registration, or
        // earlier by the node IPAM controller); without one its pods wait for it.
        shared.adopt_pod_cidr(&node);
        let mut slot = lock(slot);
        slot.registered = true;
        Ok(node)
    }

    /// One heartbeat step for node `name`: register it if needed, renew its Lease and post
    /// its status when due. Returns when to look again.
    pub(super) async fn sync_node(&self, name: &str) -> Result<Option<Duration>> {
        let shared = &self.shared;
        let Some(slot) = shared.slots.get(name) else {
            return Ok(None);
        };
        let renew_every = shared.config.lease_renew_interval;
        let post_every = shared.config.node_status_update_period;
        let registered = lock(slot).registered;
        let registration = if registered {
            None
        } else {
            Some(Arc::new(self.register(name).await?))
        };
        // The cache's view (annotations, conditions set by others); right after a
        // registration it may lag, so the registered object stands in.
        let Some(node) = shared.nodes.get_cluster(name).or(registration) else {
            // Deleted: a kubelet does not re-register by itself. Look again later in case
            // it comes back (the node handler also wakes us when it does).
            return Ok(Some(renew_every));
        };
        if heartbeat_stopped(&node) {
            return Ok(Some(renew_every));
        }
        let now = Instant::now();
        let due = |last: Option<Instant>, every: Duration| {
            last.is_none_or(|t| now.saturating_duration_since(t) >= every)
        };
        let in_use = shared.volumes_in_use(name);
        let reported = node
            .status
            .as_ref()
            .and_then(|s| s.volumes_in_use.clone())
            .unwrap_or_default();
        let (lease_due, status_due) = {
            let slot = lock(slot);
            (
                due(slot.last_renew, renew_every),
                due(slot.last_status, post_every)
                    || !conditions_healthy(&node)
                    || in_use != reported,
            )
        };
        if lease_due {
            self.renew_lease(name, &node).await?;
            lock(slot).last_renew = Some(now);
        }
        if status_due {
            self.post_status(name, &node, in_use).await?;
            lock(slot).last_status = Some(now);
        }
        let slot = lock(slot);
        let next = [
            slot.last_renew.map(|t| t + renew_every),
            slot.last_status.map(|t| t + post_every),
        ]
        .into_iter()
        .flatten()
        .min()
        .map_or(renew_every, |at| {
            at.saturating_duration_since(Instant::now())
        });
        Ok(Some(next))
    }

    /// Renews the node's Lease, creating it when missing, as the kubelet's lease
    /// controller: the Lease last written is updated; after a failure it is read again.
    async fn renew_lease(&self, name: &str, node: &Node) -> Result<()> {
        let shared = &self.shared;
        let Some(slot) = shared.slots.get(name) else {
            return Ok(());
        };
        let wrap = |source| Error::Lease {
            node: name.to_owned(),
            source,
        };
        let now = shared.clock.now();
        let cached = lock(slot).lease.take();
        let current = match cached {
            Some(lease) => Some(lease),
            None => self
                .client
                .get_lease(NODE_LEASE_NAMESPACE, name)
                .await
                .map_err(wrap)?,
        };
        let written = match current {
            Some(lease) => self
                .client
                .update_lease(&renewed_lease(&lease, node, now))
                .await
                .map_err(wrap)?,
            None => {
                let lease = build_lease(node, now);
                match self.client.create_lease(&lease).await {
                    Ok(lease) => lease,
                    Err(err) if err.is_not_found() => {
                        // The namespace is missing (a fresh API server without it).
                        self.client
                            .ensure_namespace(NODE_LEASE_NAMESPACE)
                            .await
                            .map_err(wrap)?;
                        self.client.create_lease(&lease).await.map_err(wrap)?
                    }
                    Err(err) => return Err(wrap(err)),
                }
            }
        };
        lock(slot).lease = Some(written);
        Ok(())
    }

    /// Posts the node's status: healthy conditions with a fresh heartbeat (transition times
    /// kept where the status did not change), capacity, addresses, node info and the volumes
    /// its pods use.
    async fn post_status(
        &self,
        name: &str,
        node: &Node,
        volumes_in_use: Vec<String>,
    ) -> Result<()> {
        let shared = &self.shared;
        let Some(slot) = shared.slots.get(name) else {
            return Ok(());
        };
        let index = lock(slot).index;
        let now = shared.clock.now();
        let desired = build_node(index, &shared.config.template, now)
            .status
            .unwrap_or_default();
        let existing = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or(&[]);
        let status = NodeStatus {
            conditions: Some(refresh_conditions(existing, now)),
            capacity: desired.capacity,
            allocatable: desired.allocatable,
            addresses: desired.addresses,
            node_info: desired.node_info,
            volumes_in_use: Some(volumes_in_use),
            ..NodeStatus::default()
        };
        self.client
            .patch_node_status(name, &status)
            .await
            .map_err(|source| Error::NodeStatus {
                node: name.to_owned(),
                source,
            })?;
        Ok(())
    }
}
