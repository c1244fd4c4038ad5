//! The PV protection controller: constants, construction, `Run`, the volume event handler and `processPV` (upstream `pv_protection_controller.go`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::{Error, Result};
use crate::volume::client::{ApiStorageClient, StorageClient};
use crate::volume::protection::{
    PV_PROTECTION_FINALIZER, is_deletion_candidate, need_to_add_finalizer, with_finalizer,
    without_finalizer,
};

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "persistentvolume-protection-controller";

/// The work queue's name in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "pvprotection";

/// Upstream runs one worker (`Run(ctx, 1)`); no flag sets it.
pub const WORKERS: usize = 1;

/// Every failed sync is requeued rate-limited, as upstream's `processNextWorkItem`.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("PV failed");

/// Wiring of a [`PvProtectionController`].
#[derive(Clone, Default)]
pub struct PvProtectionControllerOptions {
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl std::fmt::Debug for PvProtectionControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PvProtectionControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

/// Adds the PV protection finalizer to volumes and removes it from deleted volumes that are
/// not bound, as upstream's pvprotection `Controller`.
pub struct PvProtectionController {
    /// The volume updates. Test seam: [`crate::volume::client::FakeStorageClient`].
    pub(super) client: Arc<dyn StorageClient>,
    /// The volume informer's cache (read only).
    pub(super) volumes: Indexer<PersistentVolume>,
    /// Whether the volume informer has synced.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Names of volumes whose finalizer may need a change.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: PvProtectionEventHandlers,
}

impl std::fmt::Debug for PvProtectionController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PvProtectionController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl PvProtectionController {
    /// The controller kube-controller-manager runs, over the factory's PersistentVolume
    /// informer, as upstream's `NewPVProtectionController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        options: PvProtectionControllerOptions,
    ) -> Self {
        Self::with_informer(
            &factory.informer_for::<PersistentVolume>(),
            Arc::new(ApiStorageClient::new(client)),
            options,
        )
    }

    /// A controller over `volume_informer`, registering its handler and waiting for it.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informer(
        volume_informer: &SharedIndexInformer<PersistentVolume>,
        client: Arc<dyn StorageClient>,
        options: PvProtectionControllerOptions,
    ) -> Self {
        let mut controller = Self::with_cache(volume_informer.indexer().clone(), client, options);
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(volume_informer, controller.handlers.clone())
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
        volumes: Indexer<PersistentVolume>,
        client: Arc<dyn StorageClient>,
        options: PvProtectionControllerOptions,
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
            volumes,
            caches_synced: Vec::new(),
            handlers: PvProtectionEventHandlers {
                queue: queue.clone(),
            },
            queue,
        }
    }

    /// The handlers to register with the volume informer.
    pub fn event_handlers(&self) -> &PvProtectionEventHandlers {
        &self.handlers
    }

    /// The work queue of volume names.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the volume cache, then syncs volumes with `workers` workers until `cancel`
    /// fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |name: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&name).await }
        };
        run_controller(
            CONTROLLER_NAME,
            "PV protection controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            || all_synced(&self.caches_synced),
            sync,
        )
        .await;
    }

    /// Takes one volume name and syncs it through the shared worker, as upstream's
    /// `processNextWorkItem`. False once the queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.queue,
            &ERROR_POLICY,
            |name| async move { self.sync(&name).await },
        )
        .await
    }

    /// Adds or removes the finalizer of volume `name`, as upstream's `processPV`: a deleted
    /// volume loses it unless it is in use (`is_being_used`); a live volume without it gets
    /// it (the admission plugin adds it at creation; this catches volumes created before the
    /// plugin ran).
    pub async fn sync(&self, name: &str) -> Result<()> {
        tracing::trace!(volume = name, "Processing PV");
        let Some(volume) = self.volumes.get_by_key(name) else {
            tracing::trace!(volume = name, "PV not found, ignoring");
            return Ok(());
        };
        if is_deletion_candidate(&volume.metadata, PV_PROTECTION_FINALIZER) {
            if !is_being_used(&volume) {
                return self.remove_finalizer(&volume).await;
            }
            tracing::debug!(volume = name, "Keeping PV because it is being used");
        }
        if need_to_add_finalizer(&volume.metadata, PV_PROTECTION_FINALIZER) {
            return self.add_finalizer(&volume).await;
        }
        Ok(())
    }

    async fn add_finalizer(&self, volume: &PersistentVolume) -> Result<()> {
        let mut updated = volume.clone();
        updated.metadata = with_finalizer(&volume.metadata, PV_PROTECTION_FINALIZER);
        self.update(&updated, "adding").await
    }

    async fn remove_finalizer(&self, volume: &PersistentVolume) -> Result<()> {
        let mut updated = volume.clone();
        updated.metadata = without_finalizer(&volume.metadata, PV_PROTECTION_FINALIZER);
        self.update(&updated, "removing").await
    }

    async fn update(&self, volume: &PersistentVolume, action: &'static str) -> Result<()> {
        let name = volume.metadata.name.clone().unwrap_or_default();
        self.client
            .update_volume(volume)
            .await
            .map_err(|source| Error::Update {
                action,
                volume: name.clone(),
                source,
            })?;
        tracing::debug!(volume = name, action, "Changed protection finalizer of PV");
        Ok(())
    }
}

/// Whether a volume is in use: its phase is `Bound` (set by the PV controller), as upstream's
/// `isBeingUsed`.
pub fn is_being_used(volume: &PersistentVolume) -> bool {
    volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

/// The volume event handler, as upstream's `pvAddedUpdated`: volumes that need the finalizer,
/// or are being deleted with it, are enqueued. Deletions need no handling.
#[derive(Clone)]
pub struct PvProtectionEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for PvProtectionEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PvProtectionEventHandlers")
            .finish_non_exhaustive()
    }
}

impl PvProtectionEventHandlers {
    /// A volume appeared or changed.
    pub fn volume_added_updated(&self, volume: &PersistentVolume) {
        let meta = &volume.metadata;
        if need_to_add_finalizer(meta, PV_PROTECTION_FINALIZER)
            || is_deletion_candidate(meta, PV_PROTECTION_FINALIZER)
        {
            self.queue.add(meta.name.clone().unwrap_or_default());
        }
    }
}

impl ResourceEventHandler<PersistentVolume> for PvProtectionEventHandlers {
    fn on_add(&self, volume: Arc<PersistentVolume>, _is_in_initial_list: bool) {
        self.volume_added_updated(&volume);
    }

    fn on_update(&self, _old: Arc<PersistentVolume>, new: Arc<PersistentVolume>) {
        self.volume_added_updated(&new);
    }

    fn on_delete(&self, _obj: DeletedObject<PersistentVolume>) {}
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
