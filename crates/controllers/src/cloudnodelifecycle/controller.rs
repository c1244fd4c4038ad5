//! The cloud node lifecycle controller: constants, construction, `Run` and `MonitorNodes` (upstream `cloud-provider/controllers/nodelifecycle/node_lifecycle_controller.go`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Taint};
use kcm_machinery::controller::ApiStatus;
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, SharedIndexInformer, SharedInformerFactory, wait_for_synced,
};
use tokio_util::sync::CancellationToken;

use super::client::{ApiCloudNodeClient, CloudNodeClient};
use super::{Error, Result};
use crate::cloud::Instances;

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "cloud-node-lifecycle-controller";

/// The component of its events.
pub const EVENT_COMPONENT: &str = "cloud-node-lifecycle-controller";

/// The key of the taint on a Node whose machine is shut down
/// (`cloudproviderapi.TaintNodeShutdown`).
pub const SHUTDOWN_TAINT_KEY: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// Attempts of a taint update that keeps conflicting.
const TAINT_ATTEMPTS: usize = 5;

/// The taint of a shut-down machine's Node (upstream's `ShutdownTaint`).
pub fn shutdown_taint() -> Taint {
    Taint {
        key: SHUTDOWN_TAINT_KEY.to_owned(),
        effect: "NoSchedule".to_owned(),
        ..Taint::default()
    }
}

/// Deletes Nodes whose machine is gone and taints Nodes whose machine is shut down, as
/// upstream's `CloudNodeLifecycleController`.
pub struct CloudNodeLifecycleController {
    client: Arc<dyn CloudNodeClient>,
    instances: Arc<dyn Instances>,
    recorder: Arc<dyn EventRecorder>,
    nodes: Indexer<Node>,
    caches_synced: Vec<InformerSynced>,
    /// `--node-monitor-period`.
    period: Duration,
}

impl std::fmt::Debug for CloudNodeLifecycleController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudNodeLifecycleController")
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

impl CloudNodeLifecycleController {
    /// The controller kube-controller-manager runs over the factory's Node informer, as
    /// upstream's `NewCloudNodeLifecycleController`.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        instances: Arc<dyn Instances>,
        recorder: Arc<dyn EventRecorder>,
        period: Duration,
    ) -> Self {
        Self::with_informer(
            &factory.informer_for::<Node>(),
            Arc::new(ApiCloudNodeClient::new(client)),
            instances,
            recorder,
            period,
        )
    }

    /// A controller over `informer` (no handler: it reads the cache every period).
    pub fn with_informer(
        informer: &SharedIndexInformer<Node>,
        client: Arc<dyn CloudNodeClient>,
        instances: Arc<dyn Instances>,
        recorder: Arc<dyn EventRecorder>,
        period: Duration,
    ) -> Self {
        let mut controller = Self::with_cache(
            informer.indexer().clone(),
            client,
            instances,
            recorder,
            period,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .wait_for(informer)
            .finish();
        controller
    }

    /// A controller over a bare cache (unit tests fill it and call [`Self::monitor_nodes`]).
    pub fn with_cache(
        nodes: Indexer<Node>,
        client: Arc<dyn CloudNodeClient>,
        instances: Arc<dyn Instances>,
        recorder: Arc<dyn EventRecorder>,
        period: Duration,
    ) -> Self {
        Self {
            client,
            instances,
            recorder,
            nodes,
            caches_synced: Vec::new(),
            period,
        }
    }

    /// Waits for the Node cache, then runs [`Self::monitor_nodes`] every period until
    /// `cancel` fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        if !wait_for_synced(CONTROLLER_NAME, &cancel, &self.caches_synced).await {
            return;
        }
        tracing::info!("Starting cloud node lifecycle controller");
        let mut tick = tokio::time::interval(self.period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => self.monitor_nodes().await,
            }
        }
    }

    /// One pass over the cached Nodes (upstream's `MonitorNodes`): a `Ready` node loses the
    /// shutdown taint; any other is deleted if its machine is gone, or tainted if it is shut
    /// down. A failure on one node is logged and the pass goes on.
    pub async fn monitor_nodes(&self) {
        let mut nodes = self.nodes.list();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for node in nodes {
            if let Err(err) = self.monitor_node(&node).await {
                tracing::error!(%err, "cloud node lifecycle");
            }
        }
    }

    async fn monitor_node(&self, node: &Node) -> Result<()> {
        let name = node.metadata.name.clone().unwrap_or_default();
        if ready_status(node) == "True" {
            return self.change_shutdown_taint(&name, false).await;
        }
        let exists = match self.instances.instance_exists(node).await {
            Ok(exists) => exists,
            Err(err) => {
                tracing::error!(node = %name, %err, "error checking if node exists");
                return Ok(());
            }
        };
        if !exists {
            tracing::info!(node = %name, "deleting node since it is no longer present in cloud provider");
            let regarding = ObjectReference {
                kind: Some("Node".to_owned()),
                name: Some(name.clone()),
                uid: node.metadata.uid.clone(),
                ..ObjectReference::default()
            };
            self.recorder.event(
                &regarding,
                EventType::Normal,
                "DeletingNode",
                format!("Deleting node {name} because it does not exist in the cloud provider"),
            );
            return match self.client.delete_node(&name).await {
                Err(err) if !err.is_not_found() => Err(Error::Delete {
                    node: name,
                    source: err,
                }),
                _ => Ok(()),
            };
        }
        match self.instances.instance_shutdown(node).await {
            Ok(true) => self.change_shutdown_taint(&name, true).await,
            Ok(false) => Ok(()),
            Err(err) => {
                tracing::error!(node = %name, %err, "error checking if node is shutdown");
                Ok(())
            }
        }
    }

    /// Adds (`add`) or removes the shutdown taint, reading the Node first and retrying
    /// conflicts; nothing is written when the taint is already as wanted.
    async fn change_shutdown_taint(&self, name: &str, add: bool) -> Result<()> {
        let cached_has = self
            .nodes
            .get_by_key(name)
            .is_some_and(|n| has_shutdown_taint(&n));
        if cached_has == add {
            return Ok(());
        }
        let mut last = None;
        for _ in 0..TAINT_ATTEMPTS {
            let mut node = match self.client.get_node(name).await {
                Ok(node) => node,
                Err(err) if err.is_not_found() => return Ok(()),
                Err(err) => {
                    last = Some(err);
                    continue;
                }
            };
            if has_shutdown_taint(&node) == add {
                return Ok(());
            }
            let spec = node.spec.get_or_insert_with(Default::default);
            let mut taints = spec.taints.take().unwrap_or_default();
            if add {
                taints.push(shutdown_taint());
            } else {
                taints.retain(|t| !(t.key == SHUTDOWN_TAINT_KEY && t.effect == "NoSchedule"));
            }
            spec.taints = (!taints.is_empty()).then_some(taints);
            match self.client.update_node(&node).await {
                Ok(()) => return Ok(()),
                Err(err) if err.is_not_found() => return Ok(()),
                Err(err) if err.is_conflict() => last = Some(err),
                Err(err) => {
                    return Err(Error::Taint {
                        node: name.to_owned(),
                        source: err,
                    });
                }
            }
        }
        match last {
            Some(source) => Err(Error::Taint {
                node: name.to_owned(),
                source,
            }),
            None => Ok(()),
        }
    }
}

/// The Node's `Ready` status; `Unknown` without the condition, as upstream defaults it.
fn ready_status(node: &Node) -> &str {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map_or("Unknown", |c| c.status.as_str())
}

fn has_shutdown_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == SHUTDOWN_TAINT_KEY && t.effect == "NoSchedule")
        })
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
