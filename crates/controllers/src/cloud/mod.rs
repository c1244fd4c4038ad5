//! The cloud provider seam of the cloud controllers (`service-lb-controller`, the cloud node lifecycle), as `k8s.io/cloud-provider`'s `Interface` and `LoadBalancer`.
//!
//! Where to start: [`CloudProvider`]. kube-controller-manager v1.36 has no in-tree cloud: with
//! `--cloud-provider` empty or `external` its cloud controllers are skipped, and so are kcm's.
//! An embedding program passes a provider to
//! [`ControllerManager::with_cloud`](crate::manager::ControllerManager::with_cloud); `kcm up`
//! passes [`simulated::SimulatedCloud`], a pool of load-balancer addresses.

pub mod simulated;

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

/// Why a cloud call failed; the controller records it in an event and retries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloudError {
    /// The call is a no-op here: another controller implements it (upstream's
    /// `cloudprovider.ImplementedElsewhere`).
    #[error("implemented by alternate to cloud provider")]
    ImplementedElsewhere,
    /// The cloud refused or failed the call.
    #[error("{0}")]
    Failed(String),
}

/// A cloud's load balancers, keyed by the Service they serve (upstream's
/// `cloudprovider.LoadBalancer`). Implementations must be idempotent: the controller calls
/// `ensure_load_balancer` on every relevant change and on retries.
#[async_trait]
pub trait LoadBalancer: Send + Sync {
    /// The status of `service`'s load balancer, or `None` if it has none.
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError>;

    /// Creates or updates `service`'s load balancer to send traffic to `nodes`, and returns
    /// its status.
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerStatus, CloudError>;

    /// Points `service`'s existing load balancer at `nodes`.
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError>;

    /// Deletes `service`'s load balancer if it exists; succeeds if it does not.
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError>;
}

/// A cloud's machines, as the Nodes they back (upstream's `cloudprovider.InstancesV2`).
#[async_trait]
pub trait Instances: Send + Sync {
    /// Whether the machine behind `node` still exists.
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError>;

    /// Whether the machine behind `node` is shut down.
    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError>;
}

/// A cloud provider (upstream's `cloudprovider.Interface`, the parts kcm's controllers use).
pub trait CloudProvider: Send + Sync {
    /// The provider's name, as `--cloud-provider` would give it.
    fn provider_name(&self) -> &str;

    /// Its load balancers, if it has them.
    fn load_balancer(&self) -> Option<Arc<dyn LoadBalancer>>;

    /// Its machines, if it reports them.
    fn instances(&self) -> Option<Arc<dyn Instances>> {
        None
    }
}

impl std::fmt::Debug for dyn CloudProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudProvider")
            .field("name", &self.provider_name())
            .finish_non_exhaustive()
    }
}
