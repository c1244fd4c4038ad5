//! The PVC protection controller: constants, the controller and its construction (the pod-to-claim index), `Run` with its main and namespace workers, and the claim and pod event handlers (upstream `pvc_protection_controller.go` but `processPVC` and its helpers).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::{meta_namespace_key, split_meta_namespace_key};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedInformerFactory, all_synced,
    wait_until_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::LivePodList;
use super::batches::ClaimBatches;
use crate::volume::client::{ApiStorageClient, StorageClient};
use crate::volume::common::{
    add_pod_pvc_indexer, is_pod_terminated, is_scheduled, pod_volumes, volume_claim_name,
};
use crate::volume::protection::{
    PVC_PROTECTION_FINALIZER, is_deletion_candidate, need_to_add_finalizer,
};

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "persistentvolumeclaim-protection-controller";

/// The work queue's name in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "pvcprotection";

/// Upstream runs one namespace worker (`Run(ctx, 1)`) beside the main worker; no flag sets it.
pub const WORKERS: usize = 1;

/// Wiring of a [`PvcProtectionController`].
#[derive(Clone, Default)]
pub struct PvcProtectionControllerOptions {
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl std::fmt::Debug for PvcProtectionControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PvcProtectionControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

/// Adds the PVC protection finalizer to claims and removes it from deleted claims no pod
/// uses, as upstream's pvcprotection `Controller`.
pub struct PvcProtectionController {
    /// The claim updates and the live pod list. Test seam:
    /// [`crate::volume::client::FakeStorageClient`].
    pub(super) client: Arc<dyn StorageClient>,
    /// The claim informer's cache (read only).
    pub(super) claims: Indexer<PersistentVolumeClaim>,
    /// The pod informer's cache, indexed by the claims pods use (read only).
    pub(super) pods: Indexer<Pod>,
    /// Whether both informers have synced.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Keys of claims whose finalizer may need a change. A key is "processing" from the main
    /// worker's `get` until its namespace batch has processed it.
    pub(super) queue: RateLimitingQueue<String>,
    /// Keys taken from `queue`, by namespace, not yet processed.
    pub(super) batches: Arc<ClaimBatches>,
    /// The informer-facing handlers.
    pub(super) handlers: PvcProtectionEventHandlers,
}

impl std::fmt::Debug for PvcProtectionController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PvcProtectionController")
            .field("queue_len", &self.queue.len())
            .field("namespaces_pending", &self.batches.len())
            .finish_non_exhaustive()
    }
}

impl PvcProtectionController {
    /// The controller kube-controller-manager runs, over the factory's claim and pod
    /// informers, as upstream's `NewPVCProtectionController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        options: PvcProtectionControllerOptions,
    ) -> Self {
        let claims = factory.informer_for::<PersistentVolumeClaim>();
        let pods = factory.pods();
        let mut controller = Self::with_caches(
            claims.indexer().clone(),
            pods.indexer().clone(),
            Arc::new(ApiStorageClient::new(client)),
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(&claims, controller.handlers.clone())
            .register(&pods, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over bare caches, adding the pod-to-claim index to `pods` (unit tests fill
    /// them and call the handlers and workers themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        claims: Indexer<PersistentVolumeClaim>,
        pods: Indexer<Pod>,
        client: Arc<dyn StorageClient>,
        options: PvcProtectionControllerOptions,
    ) -> Self {
        if let Err(err) = add_pod_pvc_indexer(&pods) {
            // Without the index the cache finds no user and every decision takes a live list.
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
            claims,
            pods,
            caches_synced: Vec::new(),
            handlers: PvcProtectionEventHandlers {
                queue: queue.clone(),
            },
            queue,
            batches: Arc::new(ClaimBatches::new()),
        }
    }

    /// The handlers to register with the claim and pod informers.
    pub fn event_handlers(&self) -> &PvcProtectionEventHandlers {
        &self.handlers
    }

    /// The work queue of claim keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// The claim keys taken from the queue, by namespace.
    pub fn batches(&self) -> &ClaimBatches {
        &self.batches
    }

    /// Waits for the caches, then runs the main worker and `workers` namespace workers until
    /// `cancel` fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tracing::info!(
            controller = CONTROLLER_NAME,
            "Starting PVC protection controller"
        );
        if wait_until_synced(CONTROLLER_NAME, &cancel, || all_synced(&self.caches_synced)).await {
            let mut tasks = JoinSet::new();
            let this = Arc::clone(&self);
            tasks.spawn(async move { while this.process_next_work_item().await {} });
            for _ in 0..workers {
                let (this, cancel) = (Arc::clone(&self), cancel.clone());
                tasks.spawn(async move {
                    while !cancel.is_cancelled() && this.process_claims_by_namespace().await {}
                });
            }
            cancel.cancelled().await;
            self.queue.shut_down();
            self.batches.shut_down();
            while let Some(joined) = tasks.join_next().await {
                if let Err(err) = joined {
                    tracing::error!(controller = CONTROLLER_NAME, %err, "worker ended abnormally");
                }
            }
        } else {
            self.queue.shut_down();
            self.batches.shut_down();
        }
        tracing::info!(
            controller = CONTROLLER_NAME,
            "Shutting down PVC protection controller"
        );
    }

    /// The main worker's turn: takes one claim key and adds it to its namespace's batch, as
    /// upstream's `processNextWorkItem`. The key stays "processing" in the queue until its batch
    /// is done with it. False once the queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        let Some(key) = self.queue.get().await else {
            return false;
        };
        match split_meta_namespace_key(&key) {
            Ok((namespace, name)) => {
                let (namespace, name) = (namespace.unwrap_or_default().to_owned(), name.to_owned());
                self.batches.add(&namespace, key, name);
            }
            Err(err) => {
                tracing::error!(controller = CONTROLLER_NAME, %err, key, "error parsing PVC key");
                self.queue.forget(&key);
                self.queue.done(&key);
            }
        }
        true
    }

    /// A namespace worker's turn: takes the next namespace's batch and processes each claim of
    /// it, sharing one [`LivePodList`], as upstream's `processPVCsByNamespace`. A claim that
    /// fails is requeued rate-limited and the batch goes on. False once shut down.
    pub async fn process_claims_by_namespace(&self) -> bool {
        let Some((namespace, claims)) = self.batches.next().await else {
            return false;
        };
        let mut live = LivePodList::default();
        for claim in claims {
            match self.process_claim(&namespace, &claim.name, &mut live).await {
                Ok(()) => self.queue.forget(&claim.key),
                Err(err) => {
                    tracing::error!(
                        controller = CONTROLLER_NAME,
                        claim = claim.key,
                        error = %err,
                        "PVC failed"
                    );
                    self.queue.add_rate_limited(claim.key.clone());
                }
            }
            self.queue.done(&claim.key);
        }
        true
    }
}

/// The claim and pod event handlers, as upstream's `pvcAddedUpdated` and
/// `podAddedDeletedUpdated`.
#[derive(Clone)]
pub struct PvcProtectionEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for PvcProtectionEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PvcProtectionEventHandlers")
            .finish_non_exhaustive()
    }
}

impl PvcProtectionEventHandlers {
    /// A claim appeared or changed: enqueued if it needs the finalizer, or is being deleted
    /// with it.
    pub fn claim_added_updated(&self, claim: &PersistentVolumeClaim) {
        let meta = &claim.metadata;
        if !(need_to_add_finalizer(meta, PVC_PROTECTION_FINALIZER)
            || is_deletion_candidate(meta, PVC_PROTECTION_FINALIZER))
        {
            return;
        }
        match meta_namespace_key(claim) {
            Ok(key) => {
                tracing::trace!(claim = key, "Got event on PVC");
                self.queue.add(key);
            }
            Err(err) => tracing::error!(%err, "couldn't get key for PersistentVolumeClaim"),
        }
    }

    /// A pod appeared, changed (`old` set) or was deleted: its claims are enqueued if it can no
    /// longer hold them. An update whose UID changed is a deletion of the old pod and a
    /// creation of a namesake: the old pod's claims are enqueued as deleted ones.
    pub fn pod_added_deleted_updated(&self, old: Option<&Pod>, new: &Pod, deleted: bool) {
        self.enqueue_claims(new, deleted);
        if let Some(old) = old
            && old.metadata.uid != new.metadata.uid
        {
            self.enqueue_claims(old, true);
        }
    }

    /// Enqueues every claim `pod` uses (directly or through an ephemeral volume) unless the pod
    /// is live, unterminated and scheduled: such a pod cannot let a finalizer go, as upstream's
    /// `enqueuePVCs`.
    fn enqueue_claims(&self, pod: &Pod, deleted: bool) {
        if !deleted && !is_pod_terminated(pod) && is_scheduled(pod) {
            return;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        for volume in pod_volumes(pod) {
            if let Some(claim) = &volume.persistent_volume_claim {
                self.queue.add(format!("{namespace}/{}", claim.claim_name));
            } else if volume.ephemeral.is_some() {
                self.queue
                    .add(format!("{namespace}/{}", volume_claim_name(pod, volume)));
            }
        }
    }
}

impl ResourceEventHandler<PersistentVolumeClaim> for PvcProtectionEventHandlers {
    fn on_add(&self, claim: Arc<PersistentVolumeClaim>, _is_in_initial_list: bool) {
        self.claim_added_updated(&claim);
    }

    fn on_update(&self, _old: Arc<PersistentVolumeClaim>, new: Arc<PersistentVolumeClaim>) {
        self.claim_added_updated(&new);
    }

    fn on_delete(&self, _obj: DeletedObject<PersistentVolumeClaim>) {}
}

impl ResourceEventHandler<Pod> for PvcProtectionEventHandlers {
    fn on_add(&self, pod: Arc<Pod>, _is_in_initial_list: bool) {
        self.pod_added_deleted_updated(None, &pod, false);
    }

    fn on_update(&self, old: Arc<Pod>, new: Arc<Pod>) {
        self.pod_added_deleted_updated(Some(&old), &new, false);
    }

    fn on_delete(&self, obj: DeletedObject<Pod>) {
        self.pod_added_deleted_updated(None, obj.object(), true);
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
