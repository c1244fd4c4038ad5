//! The node lifecycle controller (`node-lifecycle-controller`), as kube-controller-manager's.
//!
//! Where to start: [`NodeLifecycleController`] judges node health every
//! `--node-monitor-period` from heartbeats ([`health`]), sets silent nodes' conditions
//! Unknown, keeps condition taints ([`taints`]) in line, and taints not-ready nodes NoExecute
//! through per-zone rate-limited queues ([`timed_queue`]) whose rates follow zone health
//! ([`zone`]), keeps the beta OS/arch labels in line ([`labels`]) and reports
//! `node_collector_*` ([`metrics`]). Evicting pods from NoExecute-tainted nodes is [`crate::tainteviction`]'s job.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::informer::{Lister, SharedIndexInformer};

pub mod client;
pub mod controller;
pub mod health;
pub mod labels;
pub mod metrics;
pub mod node_ops;
pub mod taints;
pub mod timed_queue;
pub mod zone;

#[cfg(test)]
mod controller_tests;
#[cfg(test)]
pub(crate) mod testing;

pub use client::{ApiLifecycleClient, FakeLifecycleClient, LifecycleAction, LifecycleClient};
pub use controller::{
    CONTROLLER_NAME, EVENT_COMPONENT, NodeLifecycleController, NodeLifecycleOptions,
};
pub use metrics::NodeLifecycleMetrics;
pub use zone::{EvictionRates, ZoneState};

/// The pod index by `spec.nodeName` both controllers use (upstream's `nodeNameKeyIndex`).
pub const POD_NODE_NAME_INDEX: &str = "spec.nodeName";

/// Adds [`POD_NODE_NAME_INDEX`] to the pod informer unless it is there already.
pub fn add_pod_node_name_index(pods: &SharedIndexInformer<Pod>) {
    if pods
        .indexer()
        .index_names()
        .iter()
        .any(|n| n == POD_NODE_NAME_INDEX)
    {
        return;
    }
    let index: kcm_machinery::informer::IndexFunc<Pod> = Arc::new(|pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty())
            .into_iter()
            .collect()
    });
    let indexers = [(POD_NODE_NAME_INDEX.to_owned(), index)]
        .into_iter()
        .collect();
    if let Err(err) = pods.add_indexers(indexers) {
        tracing::debug!(%err, "pod index by node name");
    }
}

/// The cached pods bound to `node` (empty if the index is missing).
pub fn pods_on_node(pods: &Lister<Pod>, node: &str) -> Vec<Arc<Pod>> {
    pods.by_index(POD_NODE_NAME_INDEX, node).unwrap_or_default()
}
