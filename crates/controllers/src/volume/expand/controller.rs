//! The expand controller: constants, construction, `Run`, the claim event handlers and `syncHandler` (upstream `expand_controller.go`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim};
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::{meta_namespace_key, split_meta_namespace_key};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::{EXTERNAL_EXPANDING, Error, Result};
use crate::volume::client::{ApiStorageClient, StorageClient};
use crate::volume::persistentvolume::util::{requested_storage, storage_milli};

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "persistentvolume-expander-controller";

/// The work queue's name in the `workqueue_*` metrics, as upstream's `volume_expand`.
pub const QUEUE_NAME: &str = "volume_expand";

/// The source component of its events, as upstream's recorder.
pub const EVENT_COMPONENT: &str = "volume_expand";

/// Upstream's `defaultWorkerCount`; no flag sets it.
pub const WORKERS: usize = 10;

/// Every failed sync is requeued rate-limited, as upstream's `processNextWorkItem`.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("PVC failed");

/// Wiring of an [`ExpandController`].
#[derive(Clone, Default)]
pub struct ExpandControllerOptions {
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl std::fmt::Debug for ExpandControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpandControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

/// Hands claims whose request exceeds their capacity to their volume's external resizer, as
/// upstream's `expandController`.
pub struct ExpandController {
    /// The volume reads (upstream reads the volume from the API server, not a cache). Test
    /// seam: [`crate::volume::client::FakeStorageClient`].
    pub(super) client: Arc<dyn StorageClient>,
    /// Where the `ExternalExpanding` events go.
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// The claim informer's cache (read only).
    pub(super) claims: Indexer<PersistentVolumeClaim>,
    /// Whether the claim informer has synced.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Keys (`namespace/name`) of bound claims that may need expanding.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: ExpandEventHandlers,
}

impl std::fmt::Debug for ExpandController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpandController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl ExpandController {
    /// The controller kube-controller-manager runs, over the factory's claim informer, as
    /// upstream's `NewExpandController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: ExpandControllerOptions,
    ) -> Self {
        Self::with_informer(
            &factory.informer_for::<PersistentVolumeClaim>(),
            Arc::new(ApiStorageClient::new(client)),
            recorder,
            options,
        )
    }

    /// A controller over `claim_informer`, registering its handlers and waiting for it.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informer(
        claim_informer: &SharedIndexInformer<PersistentVolumeClaim>,
        client: Arc<dyn StorageClient>,
        recorder: Arc<dyn EventRecorder>,
        options: ExpandControllerOptions,
    ) -> Self {
        let mut controller =
            Self::with_cache(claim_informer.indexer().clone(), client, recorder, options);
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(claim_informer, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over a bare cache (unit tests fill it and call the handlers and
    /// [`Self::process_next_work_item`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_cache(
        claims: Indexer<PersistentVolumeClaim>,
        client: Arc<dyn StorageClient>,
        recorder: Arc<dyn EventRecorder>,
        options: ExpandControllerOptions,
    ) -> Self {
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics: options.metrics,
            },
        );
        Self {
            client,
            recorder,
            claims,
            caches_synced: Vec::new(),
            handlers: ExpandEventHandlers {
                queue: queue.clone(),
            },
            queue,
        }
    }

    /// The handlers to register with the claim informer.
    pub fn event_handlers(&self) -> &ExpandEventHandlers {
        &self.handlers
    }

    /// The work queue of claim keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the claim cache, then syncs claims with `workers` workers until `cancel`
    /// fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        run_controller(
            CONTROLLER_NAME,
            "expand controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            || all_synced(&self.caches_synced),
            sync,
        )
        .await;
    }

    /// Takes one claim key and syncs it through the shared worker, as upstream's
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

    /// Syncs the claim `key`, as upstream's `syncHandler`: a claim gone from the cache is
    /// ignored; its volume is read from the API server and must be bound to it (namespace and
    /// UID of `claimRef`), else the claim is retried; a claim whose request does not exceed
    /// its status capacity needs nothing; otherwise no in-tree plugin expands the volume, so
    /// the `ExternalExpanding` event says an external resizer will, and the claim is not
    /// requeued.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let (namespace, name) =
            split_meta_namespace_key(key).map_err(|_| Error::InvalidKey(key.to_owned()))?;
        let Some(claim) = self.claims.get_by_key(key) else {
            tracing::trace!(claim = key, "PVC not found, ignoring");
            return Ok(());
        };
        let volume_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        let volume = self
            .client
            .get_volume(&volume_name)
            .await
            .map_err(|source| Error::GetVolume {
                volume: volume_name.clone(),
                source,
            })?;
        let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        let bound_here = claim_ref.is_some_and(|r| {
            r.namespace.as_deref().unwrap_or_default() == namespace.unwrap_or_default()
                && r.uid == claim.metadata.uid
        });
        if !bound_here {
            return Err(Error::NotBound(key.to_owned()));
        }
        let capacity = storage_milli(claim.status.as_ref().and_then(|s| s.capacity.as_ref()));
        if requested_storage(&claim) <= capacity {
            return Ok(());
        }
        self.recorder.event(
            &claim_reference(&claim),
            EventType::Normal,
            EXTERNAL_EXPANDING,
            "waiting for an external controller to expand this PVC".to_owned(),
        );
        tracing::info!(
            claim = key,
            name,
            uid = claim.metadata.uid.as_deref().unwrap_or_default(),
            "Waiting for an external controller to expand the PVC"
        );
        Ok(())
    }
}

/// The reference an event about `claim` carries, as `reference.GetReference`.
fn claim_reference(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("PersistentVolumeClaim".to_owned()),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// Whether the claim is `Bound`: only bound claims are queued, as upstream's `enqueuePVC`.
fn is_bound(claim: &PersistentVolumeClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

/// The claim event handlers, as upstream's `AddFunc`/`UpdateFunc`/`DeleteFunc`: a new bound
/// claim is queued; an updated one when its request or its status capacity grew (the request
/// asks for expansion; a grown capacity means a resize just finished); a deleted one always.
#[derive(Clone)]
pub struct ExpandEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for ExpandEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpandEventHandlers")
            .finish_non_exhaustive()
    }
}

impl ExpandEventHandlers {
    /// Queues `claim` if it is bound, as upstream's `enqueuePVC`.
    pub fn enqueue_claim(&self, claim: &PersistentVolumeClaim) {
        if is_bound(claim)
            && let Ok(key) = meta_namespace_key(claim)
        {
            self.queue.add(key);
        }
    }

    /// A claim changed from `old` to `new`.
    pub fn claim_updated(&self, old: &PersistentVolumeClaim, new: &PersistentVolumeClaim) {
        let capacity = |c: &PersistentVolumeClaim| {
            storage_milli(c.status.as_ref().and_then(|s| s.capacity.as_ref()))
        };
        if requested_storage(new) > requested_storage(old) || capacity(new) > capacity(old) {
            self.enqueue_claim(new);
        }
    }
}

impl ResourceEventHandler<PersistentVolumeClaim> for ExpandEventHandlers {
    fn on_add(&self, claim: Arc<PersistentVolumeClaim>, _is_in_initial_list: bool) {
        self.enqueue_claim(&claim);
    }

    fn on_update(&self, old: Arc<PersistentVolumeClaim>, new: Arc<PersistentVolumeClaim>) {
        self.claim_updated(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<PersistentVolumeClaim>) {
        // Upstream's type assertion drops tombstones.
        if !obj.is_tombstone() {
            self.enqueue_claim(obj.object());
        }
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
