//! The PV controller's constants, construction, `Run` (caches, resync, one worker per queue) and event handlers (upstream `pv_controller_base.go`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kcm_machinery::controller::{ErrorPolicy, Retry, process_next_work_item, run_workers};
use kcm_machinery::events::EventRecorder;
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::object_key;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedInformerFactory, wait_for_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::index::{ClaimCache, VolumeIndex};
use super::metrics::{PvMetrics, PvStateCollector};
use super::util::{claim_key, claim_ref, claim_ref_key};
use super::{Error, Result};
use crate::volume::client::{ApiStorageClient, StorageClient};
use crate::volume::common::add_pod_pvc_indexer;

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "persistentvolume-binder-controller";

/// The source component of its events, as upstream's recorder.
pub const EVENT_COMPONENT: &str = "persistentvolume-controller";

/// The claim queue's name in the `workqueue_*` metrics.
pub const CLAIM_QUEUE_NAME: &str = "claims";

/// The volume queue's name in the `workqueue_*` metrics.
pub const VOLUME_QUEUE_NAME: &str = "volumes";

/// `--pvclaimbinder-sync-period`'s default.
pub const DEFAULT_PV_CLAIM_BINDER_SYNC_PERIOD: Duration = Duration::from_secs(15);

/// A failed sync is not retried by the queue: upstream's workers log it and the periodic
/// resync comes back to the object.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("PV controller sync failed")
    .with_classifier(|key, err| {
        if err.is_conflict() {
            tracing::debug!(key, %err, "PV controller sync hit a conflict");
        } else {
            tracing::error!(key, %err, "PV controller sync failed");
        }
        Retry::Forget
    });

/// Wiring and flags of a [`PersistentVolumeController`] (upstream's `ControllerParameters`).
#[derive(Clone)]
pub struct PersistentVolumeControllerOptions {
    /// How often every claim and volume is synced again (`--pvclaimbinder-sync-period`).
    pub resync_period: Duration,
    /// Whether claims of a class are provisioned (`--enable-dynamic-provisioning`).
    pub enable_dynamic_provisioning: bool,
    /// Where the queues record their `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// Where provision and delete operations and retroactive class assignments are recorded;
    /// `None` records nothing.
    pub controller_metrics: Option<Arc<PvMetrics>>,
}

impl Default for PersistentVolumeControllerOptions {
    fn default() -> Self {
        Self {
            resync_period: DEFAULT_PV_CLAIM_BINDER_SYNC_PERIOD,
            enable_dynamic_provisioning: true,
            metrics: None,
            controller_metrics: None,
        }
    }
}

impl std::fmt::Debug for PersistentVolumeControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentVolumeControllerOptions")
            .field("resync_period", &self.resync_period)
            .field(
                "enable_dynamic_provisioning",
                &self.enable_dynamic_provisioning,
            )
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

/// The informers' caches the controller reads (read only).
#[derive(Clone, Default)]
pub struct PvListers {
    /// PersistentVolumes.
    pub volumes: Indexer<PersistentVolume>,
    /// PersistentVolumeClaims.
    pub claims: Indexer<PersistentVolumeClaim>,
    /// StorageClasses.
    pub classes: Indexer<StorageClass>,
    /// Pods, indexed by the claims they use.
    pub pods: Indexer<Pod>,
}

/// Binds claims and volumes, as upstream's `PersistentVolumeController`.
pub struct PersistentVolumeController {
    /// The writes and live reads. Test seam: [`crate::volume::client::FakeStorageClient`].
    pub(super) client: Arc<dyn StorageClient>,
    /// Where claim and volume events go.
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// The informers' caches.
    pub(super) listers: PvListers,
    /// The controller's volumes: each informer copy it synced and each volume it wrote,
    /// whichever is newer (upstream `ctrl.volumes`).
    pub(super) volumes: VolumeIndex,
    /// The controller's claims, kept as [`Self::volumes`] (upstream `ctrl.claims`).
    pub(super) claims: ClaimCache,
    /// Keys (`namespace/name`) of claims to sync; one worker, as `syncClaim` is not reentrant.
    pub(super) claim_queue: RateLimitingQueue<String>,
    /// Names of volumes to sync; one worker.
    pub(super) volume_queue: RateLimitingQueue<String>,
    /// Whether the informers have synced.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// The flags.
    pub(super) options: PersistentVolumeControllerOptions,
    /// The informer-facing handlers.
    pub(super) handlers: PvEventHandlers,
}

impl std::fmt::Debug for PersistentVolumeController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentVolumeController")
            .field("claim_queue_len", &self.claim_queue.len())
            .field("volume_queue_len", &self.volume_queue.len())
            .finish_non_exhaustive()
    }
}

impl PersistentVolumeController {
    /// The controller kube-controller-manager runs, over the factory's volume, claim, class
    /// and pod informers, as upstream's `NewController`.
    ///
    /// # Panics
    ///
    /// Builds the work queues, which spawn timer tasks: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: PersistentVolumeControllerOptions,
    ) -> Self {
        let volumes = factory.informer_for::<PersistentVolume>();
        let claims = factory.informer_for::<PersistentVolumeClaim>();
        let classes = factory.informer_for::<StorageClass>();
        let pods = factory.pods();
        let listers = PvListers {
            volumes: volumes.indexer().clone(),
            claims: claims.indexer().clone(),
            classes: classes.indexer().clone(),
            pods: pods.indexer().clone(),
        };
        let mut controller = Self::with_listers(
            listers,
            Arc::new(ApiStorageClient::new(client)),
            recorder,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(&volumes, controller.handlers.clone())
            .register(&claims, controller.handlers.clone())
            .wait_for(&classes)
            .wait_for(&pods)
            .finish();
        controller
    }

    /// A controller over bare caches, adding the pod-to-claim index to the pods' (unit tests
    /// fill them and call [`Self::sync_claim`] and [`Self::sync_volume`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queues, which spawn timer tasks: call inside a Tokio runtime.
    pub fn with_listers(
        listers: PvListers,
        client: Arc<dyn StorageClient>,
        recorder: Arc<dyn EventRecorder>,
        options: PersistentVolumeControllerOptions,
    ) -> Self {
        if let Err(err) = add_pod_pvc_indexer(&listers.pods) {
            tracing::error!(controller = CONTROLLER_NAME, %err, "adding the pod-to-claim index");
        }
        let queue = |name: &str| {
            RateLimitingQueue::with_config(
                default_controller_rate_limiter(),
                QueueConfig {
                    name: name.to_owned(),
                    metrics: options.metrics.clone(),
                },
            )
        };
        let claim_queue = queue(CLAIM_QUEUE_NAME);
        let volume_queue = queue(VOLUME_QUEUE_NAME);
        Self {
            client,
            recorder,
            listers,
            volumes: VolumeIndex::default(),
            claims: ClaimCache::default(),
            handlers: PvEventHandlers {
                claim_queue: claim_queue.clone(),
                volume_queue: volume_queue.clone(),
            },
            claim_queue,
            volume_queue,
            caches_synced: Vec::new(),
            options,
        }
    }

    /// The handlers registered with the volume and claim informers.
    pub fn event_handlers(&self) -> &PvEventHandlers {
        &self.handlers
    }

    /// The claim queue.
    pub fn claim_queue(&self) -> &RateLimitingQueue<String> {
        &self.claim_queue
    }

    /// The volume queue.
    pub fn volume_queue(&self) -> &RateLimitingQueue<String> {
        &self.volume_queue
    }

    /// Waits for the caches, fills the controller's own from them, then resyncs every
    /// `resync_period` and runs one worker per queue until `cancel` fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        tracing::info!(
            controller = CONTROLLER_NAME,
            "Starting persistent volume controller"
        );
        if !wait_for_synced(CONTROLLER_NAME, &cancel, &self.caches_synced).await {
            self.claim_queue.shut_down();
            self.volume_queue.shut_down();
            return;
        }
        self.initialize_caches();
        let resync = tokio::spawn({
            let this = Arc::clone(&self);
            let cancel = cancel.clone();
            async move {
                let mut ticker = tokio::time::interval(this.options.resync_period);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                ticker.tick().await;
                loop {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = ticker.tick() => this.resync(),
                    }
                }
            }
        });
        let claims = {
            let this = Arc::clone(&self);
            move |key: String| {
                let this = Arc::clone(&this);
                async move { this.claim_work(&key).await }
            }
        };
        let volumes = {
            let this = Arc::clone(&self);
            move |name: String| {
                let this = Arc::clone(&this);
                async move { this.volume_work(&name).await }
            }
        };
        tokio::join!(
            run_workers(
                CONTROLLER_NAME,
                &self.claim_queue,
                ERROR_POLICY,
                1,
                &cancel,
                claims
            ),
            run_workers(
                CONTROLLER_NAME,
                &self.volume_queue,
                ERROR_POLICY,
                1,
                &cancel,
                volumes
            ),
        );
        resync.abort();
        tracing::info!(
            controller = CONTROLLER_NAME,
            "Shutting down persistent volume controller"
        );
    }

    /// Registers the collector of the `pv_collector_*` gauges over this controller's caches,
    /// as upstream's `metrics.Register` in `Run`.
    pub fn register_state_metrics(
        self: &Arc<Self>,
        registry: &mut prometheus_client::registry::Registry,
    ) {
        registry.register_collector(Box::new(PvStateCollector::new(Arc::downgrade(self))));
    }

    /// The operation metrics, when recorded.
    pub(super) fn pv_metrics(&self) -> Option<&PvMetrics> {
        self.options.controller_metrics.as_deref()
    }

    /// Copies the informers' volumes and claims into the controller's caches, as upstream's
    /// `initializeCaches`.
    pub fn initialize_caches(&self) {
        for volume in self.listers.volumes.list() {
            let name = volume.metadata.name.clone().unwrap_or_default();
            self.volumes.store_update(name, volume, |v| &v.metadata);
        }
        for claim in self.listers.claims.list() {
            self.claims
                .store_update(claim_key(&claim), claim, |c| &c.metadata);
        }
    }

    /// Enqueues every claim and volume of the informers, as upstream's `resync`.
    pub fn resync(&self) {
        for claim in self.listers.claims.list() {
            self.claim_queue.add(claim_key(&claim));
        }
        for volume in self.listers.volumes.list() {
            self.volume_queue
                .add(volume.metadata.name.clone().unwrap_or_default());
        }
    }

    /// Takes one claim key and syncs it as the claim worker does. False once the queue has
    /// shut down.
    pub async fn process_next_claim(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.claim_queue,
            &ERROR_POLICY,
            |key| async move { self.claim_work(&key).await },
        )
        .await
    }

    /// Takes one volume name and syncs it as the volume worker does. False once the queue
    /// has shut down.
    pub async fn process_next_volume(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.volume_queue,
            &ERROR_POLICY,
            |name| async move { self.volume_work(&name).await },
        )
        .await
    }

    /// One turn of the claim worker: a claim in the informer is synced if it is not older
    /// than the controller's copy (`updateClaim`); one gone from the informer but still in
    /// the controller's cache was deleted (`deleteClaim`).
    pub async fn claim_work(&self, key: &str) -> Result<()> {
        if let Some(claim) = self.listers.claims.get_by_key(key) {
            if !self
                .claims
                .store_update(key.to_owned(), Arc::clone(&claim), |c| &c.metadata)
            {
                return Ok(());
            }
            return self.sync_claim(&claim).await;
        }
        let Some(claim) = self.claims.get(key) else {
            tracing::trace!(claim = key, "Deletion of claim was already processed");
            return Ok(());
        };
        self.claims.delete(key);
        // A provisioning never finished by a binding is not timed any further.
        if let Some(metrics) = self.pv_metrics() {
            metrics.operation_forgotten(key);
        }
        // Sync the volume now rather than at the next resync, so it is released at once.
        if let Some(volume) = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .filter(|v| !v.is_empty())
        {
            self.volume_queue.add(volume);
        }
        Ok(())
    }

    /// One turn of the volume worker, as [`Self::claim_work`] (`updateVolume`,
    /// `deleteVolume`: a deleted volume's claim is synced at once, to go `Lost`).
    pub async fn volume_work(&self, name: &str) -> Result<()> {
        if let Some(volume) = self.listers.volumes.get_by_key(name) {
            if !self
                .volumes
                .store_update(name.to_owned(), Arc::clone(&volume), |v| &v.metadata)
            {
                return Ok(());
            }
            return self.sync_volume(&volume).await;
        }
        let Some(volume) = self.volumes.get(name) else {
            tracing::trace!(volume = name, "Deletion of volume was already processed");
            return Ok(());
        };
        self.volumes.delete(name);
        // The end of a deletion: its latency, from the first attempt.
        if let Some(metrics) = self.pv_metrics() {
            metrics.record_operation(name, false);
        }
        if let Some(claim_ref) = claim_ref(&volume) {
            self.claim_queue.add(claim_ref_key(claim_ref));
        }
        Ok(())
    }

    /// Stores a claim the controller wrote, so the next sync does not act on the informer's
    /// older copy (`storeClaimUpdate`).
    pub(super) fn store_claim(&self, claim: &PersistentVolumeClaim) {
        self.claims
            .store_update(claim_key(claim), Arc::new(claim.clone()), |c| &c.metadata);
    }

    /// Stores a volume the controller wrote (`storeVolumeUpdate`).
    pub(super) fn store_volume(&self, volume: &PersistentVolume) {
        self.volumes.store_update(
            volume.metadata.name.clone().unwrap_or_default(),
            Arc::new(volume.clone()),
            |v| &v.metadata,
        );
    }
}

/// The volume and claim event handlers: every add, update and delete enqueues the object,
/// as upstream's `enqueueWork`; the workers tell deletions apart.
#[derive(Clone)]
pub struct PvEventHandlers {
    /// The claim queue.
    claim_queue: RateLimitingQueue<String>,
    /// The volume queue.
    volume_queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for PvEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PvEventHandlers").finish_non_exhaustive()
    }
}

impl ResourceEventHandler<PersistentVolume> for PvEventHandlers {
    fn on_add(&self, volume: Arc<PersistentVolume>, _is_in_initial_list: bool) {
        self.volume_queue
            .add(volume.metadata.name.clone().unwrap_or_default());
    }

    fn on_update(&self, _old: Arc<PersistentVolume>, new: Arc<PersistentVolume>) {
        self.volume_queue
            .add(new.metadata.name.clone().unwrap_or_default());
    }

    fn on_delete(&self, obj: DeletedObject<PersistentVolume>) {
        self.volume_queue
            .add(obj.object().metadata.name.clone().unwrap_or_default());
    }
}

impl ResourceEventHandler<PersistentVolumeClaim> for PvEventHandlers {
    fn on_add(&self, claim: Arc<PersistentVolumeClaim>, _is_in_initial_list: bool) {
        self.claim_queue.add(claim_key(&claim));
    }

    fn on_update(&self, _old: Arc<PersistentVolumeClaim>, new: Arc<PersistentVolumeClaim>) {
        self.claim_queue.add(claim_key(&new));
    }

    fn on_delete(&self, obj: DeletedObject<PersistentVolumeClaim>) {
        let meta = &obj.object().metadata;
        self.claim_queue.add(object_key(
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        ));
    }
}
