//! The VAC protection controller: constants, construction (the class-name indexes), `Run`, the event handlers and `processVAC` (upstream `vac_protection_controller.go`).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    IndexFunc, Indexers, InformerRegistrar, InformerSynced, ResourceEventHandler,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::{Error, Result};
use crate::volume::client::{ApiStorageClient, StorageClient};
use crate::volume::protection::{
    VAC_PROTECTION_FINALIZER, is_deletion_candidate, need_to_add_finalizer, with_finalizer,
    without_finalizer,
};

/// The controller's name in logs and `--controllers` (it has no older alias).
pub const CONTROLLER_NAME: &str = "volumeattributesclass-protection-controller";

/// The work queue's name in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "vacprotection";

/// Upstream runs one worker (`Run(ctx, 1)`); no flag sets it.
pub const WORKERS: usize = 1;

/// The index of volumes and claims by the classes they name (upstream's `vacNameKeyIndex`).
pub const VAC_NAME_INDEX: &str = "volumeAttributesClassName";

/// Every failed sync is requeued rate-limited, as upstream's `processNextWorkItem`.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("VAC failed");

/// Wiring of a [`VacProtectionController`].
#[derive(Clone, Default)]
pub struct VacProtectionControllerOptions {
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl std::fmt::Debug for VacProtectionControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VacProtectionControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

/// Adds the VAC protection finalizer to classes and removes it from deleted classes nothing
/// names, as upstream's vacprotection `Controller`.
pub struct VacProtectionController {
    /// The class updates. Test seam: [`crate::volume::client::FakeStorageClient`].
    pub(super) client: Arc<dyn StorageClient>,
    /// The class informer's cache (read only).
    pub(super) classes: Indexer<VolumeAttributesClass>,
    /// The volume informer's cache, indexed by [`VAC_NAME_INDEX`].
    pub(super) volumes: Indexer<PersistentVolume>,
    /// The claim informer's cache, indexed by [`VAC_NAME_INDEX`].
    pub(super) claims: Indexer<PersistentVolumeClaim>,
    /// Whether the three informers have synced.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Names of classes whose finalizer may need a change.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: VacProtectionEventHandlers,
}

impl std::fmt::Debug for VacProtectionController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VacProtectionController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

/// The classes a volume names (upstream's `getPVReferencedVACNames`).
pub fn volume_class_names(volume: &PersistentVolume) -> Vec<String> {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.volume_attributes_class_name.clone())
        .filter(|name| !name.is_empty())
        .into_iter()
        .collect()
}

/// The classes a claim names: in its spec, as its current class, and as the target of a
/// modification in progress (upstream's `getPVCReferencedVACNames`), each once.
pub fn claim_class_names(claim: &PersistentVolumeClaim) -> Vec<String> {
    let status = claim.status.as_ref();
    let names: BTreeSet<String> = [
        claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_attributes_class_name.clone()),
        status.and_then(|s| s.current_volume_attributes_class_name.clone()),
        status
            .and_then(|s| s.modify_volume_status.as_ref())
            .and_then(|m| m.target_volume_attributes_class_name.clone()),
    ]
    .into_iter()
    .flatten()
    .filter(|name| !name.is_empty())
    .collect();
    names.into_iter().collect()
}

/// Adds [`VAC_NAME_INDEX`] with `index` to `cache` unless it is there already.
fn add_class_index<K: Send + Sync + 'static>(
    cache: &Indexer<K>,
    index: fn(&K) -> Vec<String>,
) -> kcm_machinery::informer::store::Result<()> {
    if cache.index_names().iter().any(|n| n == VAC_NAME_INDEX) {
        return Ok(());
    }
    let mut indexers: Indexers<K> = Indexers::new();
    let index: IndexFunc<K> = Arc::new(index);
    indexers.insert(VAC_NAME_INDEX.to_owned(), index);
    cache.add_indexers(indexers)
}

impl VacProtectionController {
    /// The controller kube-controller-manager runs, over the factory's claim, volume and
    /// VolumeAttributesClass informers, as upstream's `NewVACProtectionController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        options: VacProtectionControllerOptions,
    ) -> Self {
        let classes = factory.informer_for::<VolumeAttributesClass>();
        let volumes = factory.informer_for::<PersistentVolume>();
        let claims = factory.informer_for::<PersistentVolumeClaim>();
        let mut controller = Self::with_caches(
            classes.indexer().clone(),
            volumes.indexer().clone(),
            claims.indexer().clone(),
            Arc::new(ApiStorageClient::new(client)),
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(&classes, controller.handlers.clone())
            .register(&volumes, controller.handlers.clone())
            .register(&claims, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over bare caches, indexing the volume and claim caches by class name
    /// (unit tests fill them and call the handlers and [`Self::process_next_work_item`]).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        classes: Indexer<VolumeAttributesClass>,
        volumes: Indexer<PersistentVolume>,
        claims: Indexer<PersistentVolumeClaim>,
        client: Arc<dyn StorageClient>,
        options: VacProtectionControllerOptions,
    ) -> Self {
        for err in [
            add_class_index(&volumes, volume_class_names).err(),
            add_class_index(&claims, claim_class_names).err(),
        ]
        .into_iter()
        .flatten()
        {
            // Without the index every lookup fails and deleted classes are kept (safe).
            tracing::error!(controller = CONTROLLER_NAME, %err, "adding the class-name index");
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
            classes,
            volumes,
            claims,
            caches_synced: Vec::new(),
            handlers: VacProtectionEventHandlers {
                queue: queue.clone(),
            },
            queue,
        }
    }

    /// The handlers to register with the class, volume and claim informers.
    pub fn event_handlers(&self) -> &VacProtectionEventHandlers {
        &self.handlers
    }

    /// The work queue of class names.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the caches, then syncs classes with `workers` workers until `cancel` fires,
    /// as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |name: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&name).await }
        };
        run_controller(
            CONTROLLER_NAME,
            "VAC protection controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            || all_synced(&self.caches_synced),
            sync,
        )
        .await;
    }

    /// Takes one class name and syncs it through the shared worker, as upstream's
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

    /// Adds or removes the finalizer of class `name`, as upstream's `processVAC`: a deleted
    /// class loses it once no cached volume or claim names it; a live class without it gets it.
    pub async fn sync(&self, name: &str) -> Result<()> {
        tracing::trace!(class = name, "Processing VAC");
        let Some(class) = self.classes.get_by_key(name) else {
            tracing::trace!(class = name, "VAC not found, ignoring");
            return Ok(());
        };
        if is_deletion_candidate(&class.metadata, VAC_PROTECTION_FINALIZER) {
            if !self.is_being_used(name) {
                return self.remove_finalizer(&class).await;
            }
            tracing::debug!(class = name, "Keeping VAC because it is being used");
        }
        if need_to_add_finalizer(&class.metadata, VAC_PROTECTION_FINALIZER) {
            return self.add_finalizer(&class).await;
        }
        Ok(())
    }

    /// Whether a cached volume or claim names class `name`, as upstream's `isBeingUsed`; a
    /// failed index lookup counts as in use.
    fn is_being_used(&self, name: &str) -> bool {
        match self.volumes.index_keys(VAC_NAME_INDEX, name) {
            Ok(keys) if keys.is_empty() => {}
            Ok(_) => return true,
            Err(err) => {
                tracing::error!(class = name, %err, "Error getting PVs assigned to VAC");
                return true;
            }
        }
        match self.claims.index_keys(VAC_NAME_INDEX, name) {
            Ok(keys) => !keys.is_empty(),
            Err(err) => {
                tracing::error!(class = name, %err, "Error getting PVCs assigned to VAC");
                true
            }
        }
    }

    async fn add_finalizer(&self, class: &VolumeAttributesClass) -> Result<()> {
        let mut updated = class.clone();
        updated.metadata = with_finalizer(&class.metadata, VAC_PROTECTION_FINALIZER);
        self.update(&updated, "adding").await
    }

    async fn remove_finalizer(&self, class: &VolumeAttributesClass) -> Result<()> {
        let mut updated = class.clone();
        updated.metadata = without_finalizer(&class.metadata, VAC_PROTECTION_FINALIZER);
        self.update(&updated, "removing").await
    }

    async fn update(&self, class: &VolumeAttributesClass, action: &'static str) -> Result<()> {
        let name = class.metadata.name.clone().unwrap_or_default();
        self.client
            .update_volume_attributes_class(class)
            .await
            .map_err(|source| Error::Update {
                action,
                class: name.clone(),
                source,
            })?;
        tracing::debug!(class = name, action, "Changed protection finalizer of VAC");
        Ok(())
    }
}

/// The event handlers, as upstream's `vacAddedUpdated`, `pvUpdated`, `pvDeleted`,
/// `pvcUpdated` and `pvcDeleted`: a class that needs the finalizer or is being deleted with it
/// is enqueued; a volume or claim that stopped naming classes (changed, or deleted) enqueues
/// them.
#[derive(Clone)]
pub struct VacProtectionEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for VacProtectionEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VacProtectionEventHandlers")
            .finish_non_exhaustive()
    }
}

impl VacProtectionEventHandlers {
    /// A class appeared or changed.
    pub fn class_added_updated(&self, class: &VolumeAttributesClass) {
        let meta = &class.metadata;
        if need_to_add_finalizer(meta, VAC_PROTECTION_FINALIZER)
            || is_deletion_candidate(meta, VAC_PROTECTION_FINALIZER)
        {
            self.queue.add(meta.name.clone().unwrap_or_default());
        }
    }

    /// A volume changed: the classes it no longer names are enqueued.
    pub fn volume_updated(&self, old: &PersistentVolume, new: &PersistentVolume) {
        self.enqueue_dropped(volume_class_names(old), &volume_class_names(new));
    }

    /// A volume was deleted: every class it named is enqueued.
    pub fn volume_deleted(&self, volume: &PersistentVolume) {
        self.enqueue_dropped(volume_class_names(volume), &[]);
    }

    /// A claim changed: the classes it no longer names are enqueued.
    pub fn claim_updated(&self, old: &PersistentVolumeClaim, new: &PersistentVolumeClaim) {
        self.enqueue_dropped(claim_class_names(old), &claim_class_names(new));
    }

    /// A claim was deleted: every class it named is enqueued.
    pub fn claim_deleted(&self, claim: &PersistentVolumeClaim) {
        self.enqueue_dropped(claim_class_names(claim), &[]);
    }

    fn enqueue_dropped(&self, before: Vec<String>, after: &[String]) {
        for name in before {
            if !after.contains(&name) {
                self.queue.add(name);
            }
        }
    }
}

impl ResourceEventHandler<VolumeAttributesClass> for VacProtectionEventHandlers {
    fn on_add(&self, class: Arc<VolumeAttributesClass>, _is_in_initial_list: bool) {
        self.class_added_updated(&class);
    }

    fn on_update(&self, _old: Arc<VolumeAttributesClass>, new: Arc<VolumeAttributesClass>) {
        self.class_added_updated(&new);
    }

    fn on_delete(&self, _obj: DeletedObject<VolumeAttributesClass>) {}
}

impl ResourceEventHandler<PersistentVolume> for VacProtectionEventHandlers {
    fn on_add(&self, _volume: Arc<PersistentVolume>, _is_in_initial_list: bool) {}

    fn on_update(&self, old: Arc<PersistentVolume>, new: Arc<PersistentVolume>) {
        self.volume_updated(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<PersistentVolume>) {
        self.volume_deleted(obj.object());
    }
}

impl ResourceEventHandler<PersistentVolumeClaim> for VacProtectionEventHandlers {
    fn on_add(&self, _claim: Arc<PersistentVolumeClaim>, _is_in_initial_list: bool) {}

    fn on_update(&self, old: Arc<PersistentVolumeClaim>, new: Arc<PersistentVolumeClaim>) {
        self.claim_updated(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<PersistentVolumeClaim>) {
        self.claim_deleted(obj.object());
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
