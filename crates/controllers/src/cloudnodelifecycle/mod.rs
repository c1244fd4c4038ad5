//! The cloud node lifecycle controller: deletes a Node whose machine the cloud no longer has, and taints a Node whose machine is shut down, as kube-controller-manager's `cloud-node-lifecycle-controller` (`k8s.io/cloud-provider/controllers/nodelifecycle`).
//!
//! Where to start: [`CloudNodeLifecycleController::monitor_nodes`], run every
//! `--node-monitor-period`. Only nodes that are not `Ready` are asked about: a machine that is
//! gone means its Node is deleted (event `DeletingNode`); one that is shut down gets the
//! `node.cloudprovider.kubernetes.io/shutdown:NoSchedule` taint, which goes again once the
//! Node is `Ready`. A cloud controller: skipped without a cloud (`kcm run` has none), given the
//! simulated cloud by `kcm up`, whose machines follow the `sim.kcm.io/instance` annotation.
//!
//! - `controller`: constants, the controller, `Run` and `MonitorNodes`.
//! - [`client`]: the Node reads, updates and deletes, with a recording fake.

pub mod client;
mod controller;

pub use client::{ApiCloudNodeClient, CloudNodeClient, FakeCloudNodeClient, NodeAction};
pub use controller::{
    CONTROLLER_NAME, CloudNodeLifecycleController, EVENT_COMPONENT, SHUTDOWN_TAINT_KEY,
    shutdown_taint,
};

use kcm_machinery::controller::api_status::error_message;

/// `cloud-node-lifecycle` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "cloud-node-lifecycle";

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a node could not be handled; the next pass tries again.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Deleting the Node failed.
    #[error("deleting node {node}: {message}", message = error_message(.source))]
    Delete {
        /// The node.
        node: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Changing the Node's taints failed.
    #[error("updating the taints of node {node}: {message}", message = error_message(.source))]
    Taint {
        /// The node.
        node: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}
