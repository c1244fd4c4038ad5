//! The Deployment controller: construction, workers and `syncDeployment` (upstream `deployment_controller.go`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::controller::ref_manager::{ControllerRefManager, recheck_owner};
use kcm_machinery::controller::{ApiStatus, get_controller_of};
use kcm_machinery::controller::{ErrorPolicy, Retry, process_next_work_item, run_workers};
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::keys::split_meta_namespace_key;
use kcm_machinery::informer::lister::Lister;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::wait_until_synced;
use kcm_machinery::informer::{SharedIndexInformer, SharedInformerFactory};
use kcm_machinery::labels::Selector;
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::Resource;
use kube::core::GroupVersionKind;
use tokio_util::sync::CancellationToken;

use super::client::{ApiDeploymentClient, ClientPatcher, DeploymentClient};
use super::handlers::DeploymentEventHandlers;
use super::util::accessors::{
    RECREATE_STRATEGY, ROLLING_UPDATE_STRATEGY, generation, is_paused, object_key, strategy_type,
};
use super::util::new_replica_set::{DEPLOYMENT_API_VERSION, DEPLOYMENT_KIND};
use super::util::rollback_plan::rollback_to;
use super::{Error, Operation, Result};
use kcm_machinery::informer::OwnWrites;

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// How many times a failing Deployment is requeued (rate limited) before it is dropped from
/// the queue until its next event, as upstream's `maxRetries` (5 ms doubling up to about 82 s).
pub const MAX_RETRIES: usize = 15;

/// How the workers treat a failed sync, as upstream's `handleErr`: an error saying the
/// namespace is being deleted is forgotten (retrying cannot help); any other error (or a panic)
/// requeues the key rate limited, at most [`MAX_RETRIES`] times in a row, then drops it until
/// its next event.
pub const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("Error syncing deployment")
    .with_requeue_level(tracing::Level::INFO)
    .with_max_retries(MAX_RETRIES, "Dropping deployment out of the queue")
    .with_classifier(|_key, err| {
        if err.is_namespace_terminating() {
            Retry::Forget
        } else {
            Retry::RateLimited
        }
    });

/// How many Deployments are synced at once unless configured otherwise
/// (kube-controller-manager's `--concurrent-deployment-syncs` default).
pub const DEFAULT_CONCURRENT_DEPLOYMENT_SYNCS: usize = 5;

/// The work queue's name: the `name` label of its `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "deployment";

/// The controller's name in logs and the source component of its events.
pub const CONTROLLER_NAME: &str = "deployment-controller";

/// The longest a sync waits for the informer caches to show this controller's own last writes
/// for that Deployment before going ahead with stale copies (see `own_writes`).
pub const OWN_WRITE_WAIT: Duration = Duration::from_secs(2);

/// Tells whether an informer's cache has synced its initial list, as client-go's
/// `InformerSynced`.
pub type InformerSynced = Arc<dyn Fn() -> bool + Send + Sync>;

/// The wall clock used for condition times and progress deadlines (upstream's `metav1.Now()`);
/// injectable so tests are deterministic.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// A replacement for [`DeploymentController::sync`] run by the workers, as upstream's
/// injectable `syncHandler` (tests only).
pub type SyncHandler = Arc<dyn Fn(String) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// Wiring of a [`DeploymentController`] beyond its informers and client.
#[derive(Clone, Default)]
pub struct DeploymentControllerOptions {
    /// Where the queue records its `workqueue_*{name="deployment"}` metrics; `None` records
    /// nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl std::fmt::Debug for DeploymentControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Synchronizes Deployments with the ReplicaSets (and, through them, pods) they own, as
/// kube-controller-manager's `DeploymentController`.
///
/// Build it, then [`run`](Self::run) it. A key is never synced by two workers at once (the
/// queue's promise), so one sync pass owns its Deployment.
pub struct DeploymentController {
    /// `apps/v1 Deployment`: written into the controller references of adopted ReplicaSets.
    pub(super) gvk: GroupVersionKind,
    /// Every API call (uncached GET before adopting, writes). Test seam:
    /// [`super::FakeDeploymentClient`].
    pub(super) client: Arc<dyn DeploymentClient>,
    /// Records the controller's events on Deployments. Test seam:
    /// `kcm_machinery::events::FakeRecorder`.
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// The Deployment informer's cache (read only).
    pub(super) d_lister: Lister<Deployment>,
    /// The ReplicaSet informer's cache (read only).
    pub(super) rs_lister: Lister<ReplicaSet>,
    /// The pod informer's cache (read only).
    pub(super) pod_lister: Lister<Pod>,
    /// Whether the informers feeding the three caches have synced; `run` waits for all.
    caches_synced: Vec<InformerSynced>,
    /// Deployment keys (`namespace/name`) to sync. Shared with the event handlers.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers; they share `queue` and the listers.
    handlers: DeploymentEventHandlers,
    /// Replaces [`Self::sync`] in the workers when set (test seam, upstream's `syncHandler`).
    sync_handler: Option<SyncHandler>,
    /// Wall-clock time (test seam).
    pub(super) clock: Clock,
    /// This controller's Deployment writes not yet seen in the Deployment cache; `None`
    /// without an informer (unit tests over bare caches).
    pub(super) deployment_writes: Option<OwnWrites>,
    /// This controller's ReplicaSet writes (per Deployment key) not yet seen in the
    /// ReplicaSet cache; `None` without an informer.
    pub(super) replica_set_writes: Option<OwnWrites>,
}

impl std::fmt::Debug for DeploymentController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Constructor
// ---------------------------------------------------------------------------------------------

impl DeploymentController {
    /// The controller kube-controller-manager runs, over the factory's Deployment,
    /// ReplicaSet and pod informers, writing through `client` and recording events with
    /// `recorder`, as upstream's `NewDeploymentController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
    ) -> Self {
        Self::new_with_options(
            factory,
            client,
            recorder,
            DeploymentControllerOptions::default(),
        )
    }

    /// As [`Self::new`], with every option (e.g. a metrics handle for the queue).
    pub fn new_with_options(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: DeploymentControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.deployments(),
            &factory.replica_sets(),
            &factory.pods(),
            Arc::new(ApiDeploymentClient::new(client)),
            recorder,
            options,
        )
    }

    /// A controller over the given informers, writing through `client` (e.g. a fake in
    /// tests): registers the [event handlers](DeploymentEventHandlers) with the three informers
    /// and waits for them to sync in [`Self::run`].
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informers(
        d_informer: &SharedIndexInformer<Deployment>,
        rs_informer: &SharedIndexInformer<ReplicaSet>,
        pod_informer: &SharedIndexInformer<Pod>,
        client: Arc<dyn DeploymentClient>,
        recorder: Arc<dyn EventRecorder>,
        options: DeploymentControllerOptions,
    ) -> Self {
        let mut controller = Self::with_caches(
            d_informer.indexer().clone(),
            rs_informer.indexer().clone(),
            pod_informer.indexer().clone(),
            client,
            recorder,
            options,
        );
        if let Err(err) = d_informer.add_event_handler(controller.handlers.clone()) {
            tracing::error!(%err, "registering the Deployment event handler");
        }
        if let Err(err) = rs_informer.add_event_handler(controller.handlers.clone()) {
            tracing::error!(%err, "registering the ReplicaSet event handler");
        }
        if let Err(err) = pod_informer.add_event_handler(controller.handlers.clone()) {
            tracing::error!(%err, "registering the pod event handler");
        }
        let (d_synced, rs_synced, pod_synced) = (
            d_informer.clone(),
            rs_informer.clone(),
            pod_informer.clone(),
        );
        controller.caches_synced = vec![
            Arc::new(move || d_synced.has_synced()),
            Arc::new(move || rs_synced.has_synced()),
            Arc::new(move || pod_synced.has_synced()),
        ];
        controller.deployment_writes = Some(OwnWrites::new(d_informer.freshness()));
        controller.replica_set_writes = Some(OwnWrites::new(rs_informer.freshness()));
        controller
    }

    /// A controller over the given informer caches, writing through `client`. The
    /// [handlers](Self::event_handlers) must be registered with the informers that fill the
    /// caches and their sync state given with [`Self::with_caches_synced`]; unit tests instead
    /// fill the caches directly and call the handlers and [`Self::sync`] themselves.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        d_cache: Indexer<Deployment>,
        rs_cache: Indexer<ReplicaSet>,
        pod_cache: Indexer<Pod>,
        client: Arc<dyn DeploymentClient>,
        recorder: Arc<dyn EventRecorder>,
        options: DeploymentControllerOptions,
    ) -> Self {
        let config = QueueConfig {
            name: QUEUE_NAME.to_owned(),
            metrics: options.metrics,
        };
        let queue = RateLimitingQueue::with_config(default_controller_rate_limiter(), config);
        let d_lister = Lister::new(d_cache);
        let rs_lister = Lister::new(rs_cache);
        let pod_lister = Lister::new(pod_cache);
        let handlers = DeploymentEventHandlers::new(
            queue.clone(),
            d_lister.clone(),
            rs_lister.clone(),
            pod_lister.clone(),
        );
        Self {
            gvk: GroupVersionKind::gvk("apps", "v1", DEPLOYMENT_KIND),
            client,
            recorder,
            d_lister,
            rs_lister,
            pod_lister,
            caches_synced: Vec::new(),
            queue,
            handlers,
            sync_handler: None,
            clock: Arc::new(Timestamp::now),
            deployment_writes: None,
            replica_set_writes: None,
        }
    }

    /// Makes [`Self::run`] wait for these informers to sync before starting workers.
    pub fn with_caches_synced(mut self, synced: Vec<InformerSynced>) -> Self {
        self.caches_synced = synced;
        self
    }

    /// Replaces [`Self::sync`] in the workers (test seam, upstream's `syncHandler`).
    pub fn with_sync_handler(mut self, handler: SyncHandler) -> Self {
        self.sync_handler = Some(handler);
        self
    }

    /// Replaces the wall clock (test seam).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The handlers to register with the Deployment, ReplicaSet and pod informers.
    pub fn event_handlers(&self) -> &DeploymentEventHandlers {
        &self.handlers
    }

    /// The work queue of Deployment keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Waits for the caches to sync, then syncs Deployments with `workers` concurrent workers
    /// (kube-controller-manager's `--concurrent-deployment-syncs`, default
    /// [`DEFAULT_CONCURRENT_DEPLOYMENT_SYNCS`]) until `cancel`
    /// fires, as upstream's `Run`. On cancellation the queue shuts down, syncs in progress
    /// finish, and `run` returns once every worker has stopped.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tracing::info!(controller = QUEUE_NAME, "Starting controller");
        if !self.wait_for_caches_synced(&cancel).await {
            self.queue.shut_down();
            tracing::info!(controller = QUEUE_NAME, "Shutting down controller");
            return;
        }
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync_key(key).await }
        };
        run_workers(
            QUEUE_NAME,
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            sync,
        )
        .await;
        tracing::info!(controller = QUEUE_NAME, "Shutting down controller");
    }

    /// Polls the informers' sync state until all have synced (true) or `cancel` fires
    /// (false), as client-go's `WaitForNamedCacheSync`.
    async fn wait_for_caches_synced(&self, cancel: &CancellationToken) -> bool {
        wait_until_synced(QUEUE_NAME, cancel, || {
            self.caches_synced.iter().all(|synced| synced())
        })
        .await
    }

    // -----------------------------------------------------------------------------------------
    // Worker loop
    // -----------------------------------------------------------------------------------------

    /// Takes one key and syncs it through the shared worker with [`ERROR_POLICY`] (forget,
    /// requeue rate limited, or drop after [`MAX_RETRIES`]), as upstream's
    /// `processNextWorkItem` + `handleErr`. False once the queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(QUEUE_NAME, &self.queue, &ERROR_POLICY, |key| {
            self.sync_key(key)
        })
        .await
    }

    /// What the workers run for a key: the injected sync handler if any, else [`Self::sync`].
    async fn sync_key(&self, key: String) -> Result<()> {
        match &self.sync_handler {
            Some(handler) => handler(key).await,
            None => self.sync(&key).await,
        }
    }

    // -----------------------------------------------------------------------------------------
    // Sync
    // -----------------------------------------------------------------------------------------

    /// Syncs the Deployment with key `namespace/name`, as upstream's `syncDeployment`. Never
    /// run concurrently for one key.
    ///
    /// A Deployment gone from the cache is done with. One selecting everything gets a
    /// `SelectingAll` warning and nothing else. Otherwise its ReplicaSets are claimed, and
    /// then, first match wins: being deleted → status only; paused → scale only; a rollback
    /// requested → roll back; a scaling event → scale; else one rollout step of its strategy.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        tracing::trace!(deployment = key, "Started syncing deployment");
        let result = self.sync_deployment(key).await;
        tracing::debug!(deployment = key, duration = ?start.elapsed(), "Finished syncing deployment");
        result
    }

    async fn sync_deployment(&self, key: &str) -> Result<()> {
        split_meta_namespace_key(key).map_err(|source| Error::InvalidKey {
            key: key.to_owned(),
            source,
        })?;
        self.wait_for_own_writes(key).await;
        let Some(cached) = self.d_lister.indexer().get_by_key(key) else {
            tracing::debug!(deployment = key, "Deployment has been deleted");
            return Ok(());
        };
        // The sync edits its own copy, never the cache's.
        let mut d = (*cached).clone();

        if selects_everything(&d) {
            self.event(
                &d,
                EventType::Warning,
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required."
                    .to_owned(),
            );
            let observed = d
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0);
            if observed < generation(&d.metadata) {
                d.status
                    .get_or_insert_with(Default::default)
                    .observed_generation = Some(generation(&d.metadata));
                // As upstream, the outcome of this write does not matter.
                if let Err(err) = self.update_status(key, &mut d).await {
                    tracing::debug!(deployment = key, %err, "recording observedGeneration");
                }
            }
            return Ok(());
        }

        let mut rs_list = self.get_replica_sets_for_deployment(&d, key).await?;
        let pod_map = self.get_pod_map_for_deployment(&d, &rs_list)?;

        if d.metadata.deletion_timestamp.is_some() {
            return self.sync_status_only(&mut d, key, &mut rs_list).await;
        }

        // Unknown conditions mark pausing and resuming, so time spent paused never counts
        // against the progress deadline.
        self.check_paused_conditions(&mut d, key).await?;

        if is_paused(&d) {
            return self.sync_scale(&mut d, key, &mut rs_list).await;
        }

        // Rollback is not re-entrant: nothing else happens until the request is cleared.
        if rollback_to(&d).is_some() {
            return self.rollback(&mut d, key, &mut rs_list).await;
        }

        if self.is_scaling_event(&mut d, key, &mut rs_list).await? {
            return self.sync_scale(&mut d, key, &mut rs_list).await;
        }

        match strategy_type(&d) {
            RECREATE_STRATEGY => {
                self.rollout_recreate(&mut d, key, &mut rs_list, &pod_map)
                    .await
            }
            ROLLING_UPDATE_STRATEGY => self.rollout_rolling(&mut d, key, &mut rs_list).await,
            other => Err(Error::UnexpectedStrategy {
                strategy: other.to_owned(),
            }),
        }
    }

    /// Waits (bounded) for the caches to show this controller's last writes for `key`.
    async fn wait_for_own_writes(&self, key: &str) {
        if let Some(writes) = &self.deployment_writes {
            writes.wait(key, OWN_WRITE_WAIT).await;
        }
        if let Some(writes) = &self.replica_set_writes {
            writes.wait(key, OWN_WRITE_WAIT).await;
        }
    }

    /// The ReplicaSets of the Deployment's namespace it owns after adopting the orphans its
    /// selector matches and releasing the owned ones it no longer matches, as upstream's
    /// `getReplicaSetsForDeployment`. Before the first adoption the Deployment is re-read from
    /// the API server: one being deleted (or replaced by a namesake) adopts nothing.
    async fn get_replica_sets_for_deployment(
        &self,
        d: &Deployment,
        key: &str,
    ) -> Result<Vec<Arc<ReplicaSet>>> {
        let namespace = d.metadata.namespace.clone().unwrap_or_default();
        // Every ReplicaSet of the namespace, so owned ones that no longer match are released.
        let rs_list = self.rs_lister.list(&namespace, &Selector::everything());
        let selector = deployment_selector(d, key)?;
        let client = Arc::clone(&self.client);
        let name = d.metadata.name.clone().unwrap_or_default();
        let can_adopt = recheck_owner(d, move || async move {
            client.get_deployment(&namespace, &name).await
        });
        let manager = ControllerRefManager::new(
            ClientPatcher(Arc::clone(&self.client)),
            &d.metadata,
            selector,
            self.gvk.clone(),
            Some(can_adopt),
        );
        manager
            .claim(&rs_list, |_| true)
            .await
            .map_err(|source| Error::ClaimReplicaSets {
                deployment: key.to_owned(),
                source: Box::new(source),
            })
    }

    /// The pods the Deployment selects, grouped by the UID of the claimed ReplicaSet that
    /// controls them (every claimed ReplicaSet has an entry), as upstream's
    /// `getPodMapForDeployment`. Inactive pods are kept: a Recreate rollout must see that no
    /// old pod still runs.
    pub(super) fn get_pod_map_for_deployment(
        &self,
        d: &Deployment,
        rs_list: &[Arc<ReplicaSet>],
    ) -> Result<HashMap<String, Vec<Arc<Pod>>>> {
        let key = object_key(&d.metadata);
        let selector = deployment_selector(d, &key)?;
        let namespace = d.metadata.namespace.as_deref().unwrap_or_default();
        Ok(pod_map(self.pod_lister.list(namespace, &selector), rs_list))
    }

    // -----------------------------------------------------------------------------------------
    // Writes and events
    // -----------------------------------------------------------------------------------------

    /// Writes `d`'s status (and annotations) through `/status`. On success `d` takes the new
    /// resourceVersion, so later writes of this pass do not conflict with this one, unless the
    /// spec changed meanwhile (then the next write conflicts and the key is retried, as
    /// upstream).
    pub(super) async fn update_status(&self, key: &str, d: &mut Deployment) -> Result<()> {
        let written = self
            .client
            .update_deployment_status(d)
            .await
            .map_err(|source| Error::Api {
                operation: Operation::UpdateDeploymentStatus,
                object: key.to_owned(),
                source,
            })?;
        self.adopt_written(key, d, &written);
        Ok(())
    }

    /// Replaces `d` (a rollback), as [`Self::update_status`] for the main resource.
    pub(super) async fn update_deployment(&self, key: &str, d: &mut Deployment) -> Result<()> {
        let written = self
            .client
            .update_deployment(d)
            .await
            .map_err(|source| Error::Api {
                operation: Operation::UpdateDeployment,
                object: key.to_owned(),
                source,
            })?;
        self.adopt_written(key, d, &written);
        Ok(())
    }

    fn adopt_written(&self, key: &str, d: &mut Deployment, written: &Deployment) {
        if let Some(writes) = &self.deployment_writes {
            writes.record(key, written.metadata.resource_version.as_deref());
        }
        if generation(&written.metadata) == generation(&d.metadata) {
            d.metadata.resource_version = written.metadata.resource_version.clone();
        }
    }

    /// Replaces a ReplicaSet on behalf of Deployment `key`; the stored object is returned.
    pub(super) async fn update_replica_set(
        &self,
        key: &str,
        rs: &ReplicaSet,
    ) -> Result<Arc<ReplicaSet>> {
        let written = self
            .client
            .update_replica_set(rs)
            .await
            .map_err(|source| Error::Api {
                operation: Operation::UpdateReplicaSet,
                object: object_key(&rs.metadata),
                source,
            })?;
        self.record_replica_set_write(key, &written);
        Ok(Arc::new(written))
    }

    /// Remembers a ReplicaSet written on behalf of Deployment `key`.
    pub(super) fn record_replica_set_write(&self, key: &str, written: &ReplicaSet) {
        if let Some(writes) = &self.replica_set_writes {
            writes.record(key, written.metadata.resource_version.as_deref());
        }
    }

    /// Records an event about the Deployment.
    pub(super) fn event(&self, d: &Deployment, type_: EventType, reason: &str, message: String) {
        let mut regarding = d.object_ref(&());
        regarding.api_version = Some(DEPLOYMENT_API_VERSION.to_owned());
        regarding.kind = Some(DEPLOYMENT_KIND.to_owned());
        self.recorder.event(&regarding, type_, reason, message);
    }
}

// ---------------------------------------------------------------------------------------------
// Free helpers
// ---------------------------------------------------------------------------------------------

/// Whether the Deployment's selector is `{}` (present and empty), which selects every pod of
/// the namespace; upstream refuses to act on it.
fn selects_everything(d: &Deployment) -> bool {
    d.spec.as_ref().is_some_and(|s| {
        s.selector
            .match_labels
            .as_ref()
            .is_none_or(|l| l.is_empty())
            && s.selector
                .match_expressions
                .as_ref()
                .is_none_or(|e| e.is_empty())
    })
}

/// The Deployment's selector; a Deployment without a spec selects nothing.
pub(super) fn deployment_selector(d: &Deployment, key: &str) -> Result<Selector> {
    match &d.spec {
        Some(spec) => {
            Selector::from_label_selector(&spec.selector).map_err(|source| Error::InvalidSelector {
                deployment: key.to_owned(),
                source,
            })
        }
        None => Ok(Selector::nothing()),
    }
}

/// Groups `pods` by the UID of their controller among `rs_list`; every ReplicaSet of the list
/// has an entry, pods of other controllers are left out.
pub(super) fn pod_map(
    pods: Vec<Arc<Pod>>,
    rs_list: &[Arc<ReplicaSet>],
) -> HashMap<String, Vec<Arc<Pod>>> {
    let mut map: HashMap<String, Vec<Arc<Pod>>> = rs_list
        .iter()
        .filter_map(|rs| rs.metadata.uid.clone())
        .map(|uid| (uid, Vec::new()))
        .collect();
    for pod in pods {
        let Some(controller_ref) = get_controller_of(&pod.metadata) else {
            continue;
        };
        if let Some(list) = map.get_mut(&controller_ref.uid) {
            list.push(pod);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kcm_machinery::controller::api_status;

    use super::super::client::{DeploymentAction, Verb};
    use super::super::test_support::{deployment, fixture, key, now, rs_for};
    use super::super::util::accessors::name;
    use super::*;

    #[tokio::test]
    async fn deployment_gone_from_the_cache_is_done_with() {
        let f = fixture();
        f.controller
            .sync("default/nope")
            .await
            .expect("nothing to do");
        assert!(f.client.actions().is_empty());
        let err = f.controller.sync("a/b/c").await.expect_err("bad key");
        assert!(matches!(err, Error::InvalidKey { .. }));
    }

    #[tokio::test]
    async fn orphan_replica_set_is_adopted_after_an_uncached_check() {
        let f = fixture();
        let d = deployment("web", 2, 1, 0);
        f.add_deployment(&d);
        let mut orphan = rs_for(&d, 2, 2, "1", 0);
        orphan.metadata.owner_references = None;
        f.add_rs(&orphan);
        f.sync(&d).await.expect("sync");
        let actions = f.client.actions();
        assert!(
            matches!(&actions[0], DeploymentAction::GetDeployment { name, .. } if name == "web"),
            "{actions:?}"
        );
        assert!(
            matches!(&actions[1], DeploymentAction::PatchReplicaSet { name: n, .. } if n == name(&orphan.metadata)),
            "{actions:?}"
        );
        assert!(
            f.created().is_empty(),
            "the adopted ReplicaSet is the new one"
        );
    }

    #[tokio::test]
    async fn replaced_deployment_adopts_nothing() {
        let f = fixture();
        let d = deployment("web", 2, 1, 0);
        f.add_deployment(&d);
        let mut namesake = d.clone();
        namesake.metadata.uid = Some("uid-other".into());
        f.client.insert_deployment(namesake);
        let mut orphan = rs_for(&d, 2, 2, "1", 0);
        orphan.metadata.owner_references = None;
        f.add_rs(&orphan);
        let err = f.sync(&d).await.expect_err("cannot adopt");
        assert!(matches!(err, Error::ClaimReplicaSets { .. }), "{err}");
        assert!(f.client.actions_of(Verb::PatchReplicaSet).is_empty());
    }

    #[tokio::test]
    async fn replica_set_no_longer_selected_is_released() {
        let f = fixture();
        let d = deployment("web", 2, 1, 0);
        f.add_deployment(&d);
        let mut relabelled = rs_for(&d, 2, 2, "1", 0);
        relabelled.metadata.labels = Some(BTreeMap::from([("app".into(), "other".into())]));
        f.add_rs(&relabelled);
        f.sync(&d).await.expect("sync");
        assert_eq!(f.client.actions_of(Verb::PatchReplicaSet).len(), 1);
        assert_eq!(
            f.created().len(),
            1,
            "a new ReplicaSet replaces the released one"
        );
    }

    #[tokio::test]
    async fn deployment_being_deleted_only_gets_its_status() {
        let f = fixture();
        let mut d = deployment("web", 2, 1, 0);
        d.metadata.deletion_timestamp = Some(Time(now()));
        f.add_deployment(&d);
        f.sync(&d).await.expect("sync");
        assert!(f.created().is_empty());
        assert!(f.rs_updates().is_empty());
        assert_eq!(f.status_updates().len(), 1);
    }

    #[tokio::test]
    async fn selecting_everything_is_refused_with_a_warning() {
        let f = fixture();
        let mut d = deployment("web", 2, 1, 0);
        d.metadata.generation = Some(3);
        if let Some(s) = d.spec.as_mut() {
            s.selector = Default::default();
        }
        f.add_deployment(&d);
        f.sync(&d).await.expect("sync");
        let events = f.recorder.events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].type_, EventType::Warning);
        assert_eq!(events[0].reason, "SelectingAll");
        assert!(f.created().is_empty());
        let status = f.stored(&d).status.expect("status");
        assert_eq!(status.observed_generation, Some(3));
    }

    #[tokio::test]
    async fn unknown_strategy_fails_the_sync() {
        let f = fixture();
        let mut d = deployment("web", 2, 1, 0);
        if let Some(s) = d.spec.as_mut().and_then(|s| s.strategy.as_mut()) {
            s.type_ = Some("Blue".into());
        }
        f.add_deployment(&d);
        let err = f.sync(&d).await.expect_err("unexpected strategy");
        assert_eq!(err.to_string(), "unexpected deployment strategy type: Blue");
    }

    #[tokio::test(start_paused = true)]
    async fn failing_key_is_retried_rate_limited_then_dropped() {
        let f = fixture();
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let controller = f.controller.with_sync_handler(Arc::new(move |key: String| {
            counter.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { Err(Error::UnexpectedStrategy { strategy: key }) })
        }));
        controller.queue().add("default/web".to_owned());
        for attempt in 0..=MAX_RETRIES {
            assert!(
                controller.process_next_work_item().await,
                "attempt {attempt}"
            );
            // The next retry comes after the rate limiter's delay.
            tokio::time::advance(Duration::from_secs(120)).await;
            tokio::task::yield_now().await;
        }
        assert_eq!(calls.load(Ordering::SeqCst), MAX_RETRIES + 1);
        assert!(
            controller.queue().is_empty(),
            "dropped after {MAX_RETRIES} retries"
        );
        assert_eq!(
            controller.queue().num_requeues(&"default/web".to_owned()),
            0
        );
    }

    #[tokio::test]
    async fn namespace_terminating_errors_are_not_retried() {
        let f = fixture();
        let controller = f.controller.with_sync_handler(Arc::new(|key: String| {
            Box::pin(async move {
                Err(Error::Api {
                    operation: Operation::CreateReplicaSet,
                    object: key,
                    source: kube::Error::Api(
                        api_status::namespace_terminating("replicasets", "web-1", "default")
                            .boxed(),
                    ),
                })
            })
        }));
        controller.queue().add("default/web".to_owned());
        assert!(controller.process_next_work_item().await);
        assert_eq!(
            controller.queue().num_requeues(&"default/web".to_owned()),
            0
        );
        assert!(controller.queue().is_empty());
    }

    #[tokio::test]
    async fn panicking_sync_is_caught_and_retried() {
        let f = fixture();
        let controller = f
            .controller
            .with_sync_handler(Arc::new(|_key: String| Box::pin(async { panic!("boom") })));
        controller.queue().add("default/web".to_owned());
        assert!(controller.process_next_work_item().await);
        assert_eq!(
            controller.queue().num_requeues(&"default/web".to_owned()),
            1
        );
    }

    #[tokio::test]
    async fn run_stops_on_cancel() {
        let f = fixture();
        let controller = Arc::new(f.controller.with_caches_synced(vec![Arc::new(|| true)]));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(Arc::clone(&controller).run(2, cancel.clone()));
        let d = deployment("web", 1, 1, 0);
        f.d_cache.add(Arc::new(d.clone())).expect("cache");
        f.client.insert_deployment(d.clone());
        controller.queue().add(key(&d));
        for _ in 0..100 {
            if !f.client.actions_of(Verb::CreateReplicaSet).is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            f.client.actions_of(Verb::CreateReplicaSet).len(),
            1,
            "a worker synced the key"
        );
        cancel.cancel();
        task.await.expect("run returns");
        assert!(controller.queue().shutting_down());
    }

    /// A panic injected in the sync is recovered by the shared worker, counted in
    /// `kcm_workqueue_sync_panics_total{name="deployment"}`, and the key retried, within the
    /// same [`MAX_RETRIES`] budget as errors.
    #[tokio::test(start_paused = true)]
    async fn panicking_sync_is_recovered_counted_and_retried_then_dropped() {
        let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
        let controller = DeploymentController::with_caches(
            Indexer::new(),
            Indexer::new(),
            Indexer::new(),
            Arc::new(super::super::FakeDeploymentClient::new()),
            Arc::new(kcm_machinery::events::FakeRecorder::new()),
            DeploymentControllerOptions {
                metrics: Some(metrics.clone()),
            },
        )
        .with_sync_handler(Arc::new(|_key: String| {
            Box::pin(async { panic!("injected panic") })
        }));
        let key = "default/web".to_owned();
        controller.queue().add(key.clone());
        assert!(controller.process_next_work_item().await, "recovered");
        assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1, "counted");
        assert_eq!(controller.queue().num_requeues(&key), 1, "retried");
        for _ in 0..MAX_RETRIES {
            assert!(controller.process_next_work_item().await);
        }
        assert_eq!(
            metrics.sync_panics_total(QUEUE_NAME),
            1 + MAX_RETRIES as u64
        );
        assert!(
            controller.queue().is_empty(),
            "dropped after {MAX_RETRIES} retries"
        );
        assert_eq!(controller.queue().waiting_len(), 0);
        assert_eq!(controller.queue().num_requeues(&key), 0, "and forgotten");
    }
}
