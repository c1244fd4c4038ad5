//! The ReplicationController controller: the ReplicaSet controller's logic over RCs, through one conversion adapter, as kube-controller-manager's `pkg/controller/replication`.
//!
//! Where to start: [`ReplicationManager`]. Upstream does not copy the ReplicaSet controller
//! for RCs; it runs it over adapters that convert RCs to ReplicaSets and back. So does this
//! module: [`conversion`] turns each RC (whose selector is a label map) into a ReplicaSet
//! with `matchLabels` in a mirror cache the ReplicaSet logic reads, forwards the RC events
//! to its handlers, and converts its status writes back to RCs; the ReplicaSet controller is
//! told the managed kind ([`crate::replicaset::ManagedKind`]), so pods get `v1
//! ReplicationController` controller references and events name the RC.
//!
//! The files:
//! - `controller`: [`ReplicationManager`] and its constants (`replication_controller.go`).
//! - [`conversion`]: RC ↔ RS conversion, the informer adapter and the client adapter
//!   (`conversion.go`).

mod controller;
pub mod conversion;

pub use controller::{
    BURST_REPLICAS, CONTROLLER_NAME, EVENT_COMPONENT, QUEUE_NAME, ReplicationManager, managed_kind,
};
pub use conversion::{ApiRcClient, RcInformerAdapter, rc_to_rs, rs_to_rc};

#[cfg(test)]
#[path = "replication_tests.rs"]
mod tests;
