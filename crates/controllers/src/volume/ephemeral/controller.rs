//! The ephemeral volume controller: constants, construction (the pod-to-claim index), `Run`, the pod and claim event handlers, `syncHandler` and `handleVolume` (upstream `controller.go`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::{meta_namespace_key, object_key, split_meta_namespace_key};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::Resource;
use tokio_util::sync::CancellationToken;

use super::metrics::EphemeralVolumeMetrics;
use super::{Error, FAILED_BINDING, Result, VolumeError};
use crate::volume::client::{ApiStorageClient, StorageClient};
use crate::volume::common::{
    POD_PVC_INDEX, add_pod_pvc_indexer, pod_volumes, volume_claim_name, volume_is_for_pod,
};

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "ephemeral-volume-controller";

/// The source component of its events, as upstream's recorder.
pub const EVENT_COMPONENT: &str = "ephemeral_volume";

/// The work queue's name in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "ephemeral_volume";

/// `--concurrent-ephemeralvolume-syncs`' default.
pub const DEFAULT_CONCURRENT_EPHEMERAL_VOLUME_SYNCS: u32 = 5;

/// Every failed sync is requeued rate-limited, as upstream's `processNextWorkItem`.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("ephemeral volume sync failed");

/// Wiring of an [`EphemeralController`].
#[derive(Clone, Default)]
pub struct EphemeralControllerOptions {
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// Where the controller counts its claim creations; `None` counts nothing.
    pub controller_metrics: Option<Arc<EphemeralVolumeMetrics>>,
}

impl std::fmt::Debug for EphemeralControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EphemeralControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .field("controller_metrics", &self.controller_metrics.is_some())
            .finish()
    }
}

/// Creates the claims of pods' generic ephemeral volumes, as upstream's `ephemeralController`.
pub struct EphemeralController {
    /// The claim creations. Test seam: [`crate::volume::client::FakeStorageClient`].
    pub(super) client: Arc<dyn StorageClient>,
    /// The pod informer's cache, indexed by [`POD_PVC_INDEX`] (read only).
    pub(super) pods: Indexer<Pod>,
    /// The claim informer's cache (read only).
    pub(super) claims: Indexer<PersistentVolumeClaim>,
    /// Whether both informers have synced.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Keys of pods whose claims may be missing.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: EphemeralEventHandlers,
    /// Where `FailedBinding` warnings go.
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// The create counters, if recorded.
    pub(super) metrics: Option<Arc<EphemeralVolumeMetrics>>,
}

impl std::fmt::Debug for EphemeralController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EphemeralController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl EphemeralController {
    /// The controller kube-controller-manager runs, over the factory's pod and claim
    /// informers, as upstream's `NewController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: EphemeralControllerOptions,
    ) -> Self {
        let pods = factory.pods();
        let claims = factory.informer_for::<PersistentVolumeClaim>();
        let mut controller = Self::with_caches(
            pods.indexer().clone(),
            claims.indexer().clone(),
            Arc::new(ApiStorageClient::new(client)),
            recorder,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(&pods, controller.handlers.clone())
            .register(&claims, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over bare caches, adding the pod-to-claim index to `pods` (unit tests fill
    /// them and call the handlers and [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        pods: Indexer<Pod>,
        claims: Indexer<PersistentVolumeClaim>,
        client: Arc<dyn StorageClient>,
        recorder: Arc<dyn EventRecorder>,
        options: EphemeralControllerOptions,
    ) -> Self {
        if let Err(err) = add_pod_pvc_indexer(&pods) {
            // Without the index a deleted claim is not made again until its pod is resynced.
            tracing::error!(controller = CONTROLLER_NAME, %err, "adding the pod-to-claim index");
        }
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics: options.metrics,
            },
        );
        Self {
            client,
            handlers: EphemeralEventHandlers {
                queue: queue.clone(),
                pods: pods.clone(),
            },
            pods,
            claims,
            caches_synced: Vec::new(),
            queue,
            recorder,
            metrics: options.controller_metrics,
        }
    }

    /// The handlers to register with the pod and claim informers.
    pub fn event_handlers(&self) -> &EphemeralEventHandlers {
        &self.handlers
    }

    /// The work queue of pod keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the caches, then makes claims with `workers` workers until `cancel` fires,
    /// as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        run_controller(
            CONTROLLER_NAME,
            "ephemeral volume controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            || all_synced(&self.caches_synced),
            sync,
        )
        .await;
    }

    /// Takes one pod key and syncs it through the shared worker, as upstream's
    /// `processNextWorkItem`. False once the queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.queue,
            &ERROR_POLICY,
            |key| async move { self.sync(&key).await },
        )
        .await
    }

    /// Makes the missing claims of pod `key`, as upstream's `syncHandler`: a pod gone from the
    /// cache or being deleted needs none; otherwise each volume in turn, stopping at the first
    /// that fails with a `FailedBinding` warning on the pod.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let (namespace, name) =
            split_meta_namespace_key(key).map_err(|source| Error::InvalidKey {
                key: key.to_owned(),
                source,
            })?;
        let Some(pod) = self
            .pods
            .get_by_key(&object_key(namespace.unwrap_or_default(), name))
        else {
            tracing::trace!(pod = key, "Ephemeral: nothing to do for pod, it is gone");
            return Ok(());
        };
        if pod.metadata.deletion_timestamp.is_some() {
            tracing::trace!(
                pod = key,
                "Ephemeral: nothing to do for pod, it is marked for deletion"
            );
            return Ok(());
        }
        for volume in pod_volumes(&pod) {
            if let Err(source) = self.handle_volume(&pod, volume).await {
                self.recorder.event(
                    &pod.object_ref(&()),
                    EventType::Warning,
                    FAILED_BINDING,
                    format!("ephemeral volume {}: {source}", volume.name),
                );
                return Err(Error::Volume {
                    pod: key.to_owned(),
                    volume: volume.name.clone(),
                    source,
                });
            }
        }
        Ok(())
    }

    /// Makes the claim of one volume if it is ephemeral and its claim is missing, as
    /// upstream's `handleVolume`. A claim of that name must be the pod's.
    async fn handle_volume(&self, pod: &Pod, volume: &Volume) -> Result<(), VolumeError> {
        let Some(ephemeral) = &volume.ephemeral else {
            return Ok(());
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let claim_name = volume_claim_name(pod, volume);
        if let Some(existing) = self.claims.get_by_key(&object_key(namespace, &claim_name)) {
            volume_is_for_pod(pod, &existing)?;
            tracing::trace!(
                volume = volume.name,
                claim = claim_name,
                "Ephemeral: PVC already created"
            );
            return Ok(());
        }
        let template = ephemeral.volume_claim_template.clone().unwrap_or_default();
        let template_meta = template.metadata.unwrap_or_default();
        let claim = PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(claim_name.clone()),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".to_owned(),
                    kind: "Pod".to_owned(),
                    name: pod.metadata.name.clone().unwrap_or_default(),
                    uid: pod.metadata.uid.clone().unwrap_or_default(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                annotations: template_meta.annotations,
                labels: template_meta.labels,
                ..ObjectMeta::default()
            },
            spec: Some(template.spec),
            status: None,
        };
        if let Some(metrics) = &self.metrics {
            metrics.create_attempt();
        }
        match self.client.create_claim(namespace, &claim).await {
            Ok(_) => {
                tracing::debug!(pod = ?pod.metadata.name, claim = claim_name, "Created PVC for ephemeral volume");
                Ok(())
            }
            Err(source) => {
                if let Some(metrics) = &self.metrics {
                    metrics.create_failure();
                }
                Err(VolumeError::Create {
                    claim: claim_name,
                    source,
                })
            }
        }
    }
}

/// The pod and claim event handlers, as upstream's `enqueuePod` and `onPVCDelete`: a new pod
/// with an ephemeral volume is enqueued; a deleted claim enqueues the pods whose volume it was
/// (through [`POD_PVC_INDEX`]), so it is made again. Pod updates and deletions need nothing: a
/// pod's volumes cannot change, and its claims go with it through the garbage collector.
#[derive(Clone)]
pub struct EphemeralEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
    /// The pod cache, for the pods using a deleted claim.
    pods: Indexer<Pod>,
}

impl std::fmt::Debug for EphemeralEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EphemeralEventHandlers")
            .finish_non_exhaustive()
    }
}

impl EphemeralEventHandlers {
    /// A pod appeared: enqueued if it has an ephemeral volume and is not being deleted.
    pub fn enqueue_pod(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            return;
        }
        if !pod_volumes(pod).any(|v| v.ephemeral.is_some()) {
            return;
        }
        match meta_namespace_key(pod) {
            Ok(key) => self.queue.add(key),
            Err(err) => tracing::error!(%err, "couldn't get key for pod"),
        }
    }

    /// A claim was deleted: the pods using it are enqueued (the cache's index prefilters them).
    pub fn claim_deleted(&self, claim: &PersistentVolumeClaim) {
        let key = object_key(
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default(),
        );
        match self.pods.by_index(POD_PVC_INDEX, &key) {
            Ok(pods) => {
                for pod in pods {
                    self.enqueue_pod(&pod);
                }
            }
            Err(err) => tracing::error!(%err, claim = key, "listing pods from cache"),
        }
    }
}

impl ResourceEventHandler<Pod> for EphemeralEventHandlers {
    fn on_add(&self, pod: Arc<Pod>, _is_in_initial_list: bool) {
        self.enqueue_pod(&pod);
    }

    fn on_update(&self, _old: Arc<Pod>, _new: Arc<Pod>) {}

    fn on_delete(&self, _obj: DeletedObject<Pod>) {}
}

impl ResourceEventHandler<PersistentVolumeClaim> for EphemeralEventHandlers {
    fn on_add(&self, _claim: Arc<PersistentVolumeClaim>, _is_in_initial_list: bool) {}

    fn on_update(&self, _old: Arc<PersistentVolumeClaim>, _new: Arc<PersistentVolumeClaim>) {}

    fn on_delete(&self, obj: DeletedObject<PersistentVolumeClaim>) {
        self.claim_deleted(obj.object());
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
