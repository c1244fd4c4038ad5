//! The descriptors of the controllers kcm implements, one function each.

use std::sync::Arc;

use super::context::ControllerContext;
use super::registry::{ControllerDescriptor, StartedController};
use crate::replicaset::{
    BURST_REPLICAS, ReplicaSetController, ReplicaSetControllerOptions, ReplicaSetMetrics,
};

/// kube-controller-manager's name of the ReplicaSet controller.
pub const REPLICASET_CONTROLLER: &str = "replicaset-controller";

/// `replicaset-controller` (alias `replicaset`): ReplicaSets and Pods informers,
/// `--concurrent-replicaset-syncs` workers, queue `replicaset`.
pub fn replicaset_controller() -> ControllerDescriptor {
    ControllerDescriptor::new(REPLICASET_CONTROLLER, |ctx: ControllerContext| async move {
        let controller_metrics = Arc::new(ReplicaSetMetrics::new());
        ctx.metrics
            .with_registry(|registry| controller_metrics.register(registry));
        let controller = Arc::new(ReplicaSetController::new_with_options(
            &ctx.factory,
            ctx.client.clone(),
            ctx.recorder(REPLICASET_CONTROLLER),
            ReplicaSetControllerOptions {
                burst_replicas: BURST_REPLICAS,
                metrics: Some(ctx.workqueue_metrics()),
                controller_metrics: Some(controller_metrics),
            },
        ));
        let workers = ctx.options.replicaset.concurrent_replicaset_syncs as usize;
        Ok(Some(StartedController::new(
            controller.run(workers, ctx.cancel.clone()),
        )))
    })
    .with_aliases(&["replicaset"])
}
