//! The ReplicationController manager: the ReplicaSet controller run over RCs through the conversion adapter, as upstream's `replication_controller.go`.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kcm_machinery::controller::{PodControl, RealPodControl};
use kcm_machinery::events::EventRecorder;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, OwnWrites, SharedIndexInformer, SharedInformerFactory,
};
use kcm_machinery::workqueue::WorkqueueMetrics;
use kube::core::GroupVersionKind;
use tokio_util::sync::CancellationToken;

use super::conversion::{ApiRcClient, RcInformerAdapter};
use crate::replicaset::{
    ManagedKind, ReplicaSetClient, ReplicaSetController, ReplicaSetControllerOptions,
};

/// The most pods one pass creates or deletes for one RC, as upstream's `BurstReplicas`.
pub const BURST_REPLICAS: usize = 500;

/// The controller's name in logs and `--controllers` (kube-controller-manager's
/// `replicationcontroller-controller`).
pub const CONTROLLER_NAME: &str = "replicationcontroller-controller";

/// The work queue's name, as upstream's (`replicationmanager`).
pub const QUEUE_NAME: &str = "replicationmanager";

/// The event source component of the pod events, as upstream's recorder
/// (`replication-controller`).
pub const EVENT_COMPONENT: &str = "replication-controller";

/// `v1 ReplicationController`, its controller name and queue.
pub fn managed_kind() -> ManagedKind {
    ManagedKind {
        gvk: GroupVersionKind::gvk("", "v1", "ReplicationController"),
        controller_name: CONTROLLER_NAME,
        queue_name: QUEUE_NAME,
        status_terminating_replicas: false,
    }
}

/// Keeps `spec.replicas` pods of each ReplicationController, as kube-controller-manager's
/// `ReplicationManager`: a [`ReplicaSetController`] that reads a ReplicaSet-shaped mirror of
/// the RC cache and writes RCs through the adapter.
pub struct ReplicationManager {
    /// The ReplicaSet logic, over RCs.
    inner: Arc<ReplicaSetController>,
}

impl std::fmt::Debug for ReplicationManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicationManager").finish_non_exhaustive()
    }
}

impl ReplicationManager {
    /// The manager kube-controller-manager runs, over the factory's RC and pod informers,
    /// as upstream's `NewReplicationManager`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        Self::with_informers(
            &factory.informer_for::<ReplicationController>(),
            &factory.pods(),
            Arc::new(ApiRcClient::new(client.clone())),
            Arc::new(RealPodControl::new(client, recorder)),
            metrics,
        )
    }

    /// A manager over the given informers and seams: the RC informer feeds the mirror through
    /// the [`RcInformerAdapter`], the pod informer the ReplicaSet handlers directly.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informers(
        rc_informer: &SharedIndexInformer<ReplicationController>,
        pod_informer: &SharedIndexInformer<Pod>,
        rc_client: Arc<dyn ReplicaSetClient>,
        pod_control: Arc<dyn PodControl>,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let mirror: Indexer<ReplicaSet> = Indexer::new();
        let inner = Self::controller(
            mirror.clone(),
            pod_informer.indexer().clone(),
            rc_client,
            pod_control,
            metrics,
        )
        .with_own_writes(OwnWrites::new(rc_informer.freshness()));
        let adapter = RcInformerAdapter::new(mirror, inner.event_handlers().clone());
        let caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(rc_informer, adapter)
            .register(pod_informer, inner.event_handlers().clone())
            .finish();
        let inner = inner.with_caches_synced(caches_synced);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The ReplicaSet controller over the RC mirror and the pod cache.
    pub fn controller(
        mirror: Indexer<ReplicaSet>,
        pods: Indexer<Pod>,
        rc_client: Arc<dyn ReplicaSetClient>,
        pod_control: Arc<dyn PodControl>,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> ReplicaSetController {
        ReplicaSetController::with_caches(
            mirror,
            pods,
            rc_client,
            pod_control,
            ReplicaSetControllerOptions {
                kind: managed_kind(),
                burst_replicas: BURST_REPLICAS,
                metrics,
                controller_metrics: None,
            },
        )
    }

    /// The underlying controller (its queue, expectations and handlers).
    pub fn inner(&self) -> &Arc<ReplicaSetController> {
        &self.inner
    }

    /// Runs `workers` workers until `cancel` fires (`--concurrent-rc-syncs`).
    pub async fn run(self, workers: usize, cancel: CancellationToken) {
        Arc::clone(&self.inner).run(workers, cancel).await;
    }
}
