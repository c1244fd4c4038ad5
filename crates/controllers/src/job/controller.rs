//! The Job controller: constants, the controller and its construction, `Run`, the event handlers and the worker wiring (upstream `job_controller.go` up to `processNextWorkItem` and the orphan-pod worker).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::controller::{
    ControllerExpectations, ErrorPolicy, PodControl, RealPodControl,
    add_pod_controller_uid_indexer, get_controller_of, pod_key, process_next_work_item,
    run_workers,
};
use kcm_machinery::events::EventRecorder;
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::index::NAMESPACE_INDEX;
use kcm_machinery::informer::keys::{meta_namespace_key, object_key};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, OwnWrites, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, wait_for_synced,
};
use kcm_machinery::labels::Selector;
use kcm_machinery::workqueue::limiters::ItemExponentialFailureRateLimiter;
use kcm_machinery::workqueue::{QueueConfig, RateLimitingQueue, WorkqueueMetrics};
use kube::core::GroupVersionKind;
use tokio_util::sync::CancellationToken;

use super::client::{ApiJobClient, JobClient};
use super::conditions::is_job_finished;
use super::manage::SYNC_JOB_BATCH_PERIOD;
use super::metrics::JobMetrics;
use super::status::managed_by_external_controller;
use super::tracking::{has_job_tracking_finalizer, is_finished_pod_with_tracking_finalizer};
use super::{BackoffStore, Error, Result, UidTrackingExpectations};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// The controller's name in logs, events and `--controllers` (kube-controller-manager's
/// `job-controller`).
pub const CONTROLLER_NAME: &str = "job-controller";

/// The Job work queue's name in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "job";

/// The orphan-pod work queue's name in the `workqueue_*` metrics.
pub const ORPHAN_QUEUE_NAME: &str = "job_orphan_pod";

/// The first retry delay of a failing Job sync, as upstream's `DefaultJobApiBackOff`.
pub const DEFAULT_JOB_API_BACKOFF: Duration = Duration::from_secs(1);

/// The longest retry delay of a failing Job sync, as upstream's `MaxJobApiBackOff`.
pub const MAX_JOB_API_BACKOFF: Duration = Duration::from_secs(60);

/// `--concurrent-job-syncs`' default.
pub const DEFAULT_CONCURRENT_JOB_SYNCS: u32 = 5;

/// The longest a sync waits for the Job cache to catch up with this controller's own last
/// status write to that Job before going ahead with the stale copy.
pub const OWN_WRITE_WAIT: Duration = Duration::from_secs(2);

/// How the workers treat a failed Job sync, as upstream's `processNextWorkItem`: every error
/// requeues the key rate-limited, forever.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("syncing job");

/// How the orphan worker treats a failed finalizer removal, as upstream's
/// `processNextOrphanPod`.
const ORPHAN_ERROR_POLICY: ErrorPolicy<String, Error> =
    ErrorPolicy::new("Error syncing orphan pod");

/// The kind whose pods this controller manages.
pub(super) const KIND: &str = "Job";

/// The wall clock (upstream's `clock.WithTicker`); injectable so tests are deterministic.
pub use kcm_machinery::controller::clock::Clock;

/// A replacement for [`JobController::sync`] run by the workers (test seam, upstream's
/// `syncHandler`).
pub type SyncHandler = Arc<dyn Fn(String) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// Wiring of a [`JobController`].
#[derive(Clone, Default)]
pub struct JobControllerOptions {
    /// Where the queues record their `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// Where the controller records its `job_controller_*` metrics; `None` records nothing.
    pub controller_metrics: Option<Arc<JobMetrics>>,
}

impl std::fmt::Debug for JobControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .field("controller_metrics", &self.controller_metrics.is_some())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Runs the pods of every Job to completion, as kube-controller-manager's Job `Controller`.
///
/// Build it, hand its [`JobEventHandlers`] to the Job and pod informers, then
/// [`run`](Self::run) it. A key is never synced by two workers at once.
pub struct JobController {
    /// `batch/v1 Job`: written into the controller references of created and adopted pods.
    pub(super) gvk: GroupVersionKind,
    /// The direct Job API calls (uncached GET before adopting, `/status` writes). Test seam:
    /// [`super::FakeJobClient`].
    pub(super) job_client: Arc<dyn JobClient>,
    /// Creates, deletes and patches pods, recording pod events. Test seam:
    /// `kcm_machinery::controller::FakePodControl`.
    pub(super) pod_control: Arc<dyn PodControl>,
    /// Records the Job's own events (`Completed`, `BackoffLimitExceeded`, `Suspended`, ...).
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// Per Job key, the pod creations and deletions issued and not yet observed. A Job with
    /// unfulfilled expectations is not managed (its cache is behind its own writes).
    pub(super) expectations: Arc<ControllerExpectations>,
    /// Per Job key, the pod UIDs whose tracking-finalizer removal is in flight; those pods
    /// are not counted again.
    pub(super) finalizer_expectations: Arc<UidTrackingExpectations>,
    /// Per Job key, the failures since the last success, for the pod-failure back-off.
    pub(super) backoff_store: Arc<BackoffStore>,
    /// The Job informer's cache (read only).
    pub(super) job_cache: Indexer<Job>,
    /// The pod informer's cache (read only), indexed by namespace and controller UID.
    pub(super) pod_cache: Indexer<Pod>,
    /// Whether the informers feeding the caches have synced; `run` waits for all.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Job keys to sync. Shared with the event handlers.
    pub(super) queue: RateLimitingQueue<String>,
    /// Keys of orphan pods whose tracking finalizer must go. Shared with the handlers.
    pub(super) orphan_queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: JobEventHandlers,
    /// Replaces [`Self::sync`] in the workers when set (test seam).
    pub(super) sync_handler: Option<SyncHandler>,
    /// Wall-clock time (test seam).
    pub(super) clock: Clock,
    /// The `job_controller_*` metrics, if recorded.
    pub(super) metrics: Option<Arc<JobMetrics>>,
    /// This controller's status writes not yet seen in the Job cache; `None` without an
    /// informer (unit tests over bare caches).
    pub(super) own_writes: Option<OwnWrites>,
}

impl std::fmt::Debug for JobController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobController")
            .field("queue_len", &self.queue.len())
            .field("orphan_queue_len", &self.orphan_queue.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Constructor
// ---------------------------------------------------------------------------------------------

impl JobController {
    /// The controller kube-controller-manager runs, over the factory's Job and pod informers,
    /// writing through `client` with events recorded by `recorder`, as upstream's
    /// `NewController`.
    ///
    /// # Panics
    ///
    /// Builds the work queues, which spawn timer tasks: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: JobControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.jobs(),
            &factory.pods(),
            Arc::new(ApiJobClient::new(client.clone())),
            Arc::new(RealPodControl::new(client, Arc::clone(&recorder))),
            recorder,
            options,
        )
    }

    /// A controller over the given informers: registers the handlers with both, waits for
    /// both in [`Self::run`], and waits for its own status writes to reach the Job cache.
    ///
    /// # Panics
    ///
    /// Builds the work queues, which spawn timer tasks: call inside a Tokio runtime.
    pub fn with_informers(
        job_informer: &SharedIndexInformer<Job>,
        pod_informer: &SharedIndexInformer<Pod>,
        job_client: Arc<dyn JobClient>,
        pod_control: Arc<dyn PodControl>,
        recorder: Arc<dyn EventRecorder>,
        options: JobControllerOptions,
    ) -> Self {
        let mut controller = Self::with_caches(
            job_informer.indexer().clone(),
            pod_informer.indexer().clone(),
            job_client,
            pod_control,
            recorder,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(job_informer, controller.handlers.clone())
            .register(pod_informer, controller.handlers.clone())
            .finish();
        controller.own_writes = Some(OwnWrites::new(job_informer.freshness()));
        controller
    }

    /// A controller over bare caches (unit tests fill them and call the handlers and
    /// [`Self::sync`] themselves). Adds the pod controller-UID index to `pod_cache`.
    ///
    /// # Panics
    ///
    /// Builds the work queues, which spawn timer tasks: call inside a Tokio runtime.
    pub fn with_caches(
        job_cache: Indexer<Job>,
        pod_cache: Indexer<Pod>,
        job_client: Arc<dyn JobClient>,
        pod_control: Arc<dyn PodControl>,
        recorder: Arc<dyn EventRecorder>,
        options: JobControllerOptions,
    ) -> Self {
        if let Err(err) = add_pod_controller_uid_indexer(&pod_cache) {
            tracing::warn!(%err, "not adding the pod controller-UID index");
        }
        let queue = RateLimitingQueue::with_config(
            ItemExponentialFailureRateLimiter::new(DEFAULT_JOB_API_BACKOFF, MAX_JOB_API_BACKOFF),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics: options.metrics.clone(),
            },
        );
        let orphan_queue = RateLimitingQueue::with_config(
            ItemExponentialFailureRateLimiter::new(DEFAULT_JOB_API_BACKOFF, MAX_JOB_API_BACKOFF),
            QueueConfig {
                name: ORPHAN_QUEUE_NAME.to_owned(),
                metrics: options.metrics,
            },
        );
        let clock: Clock = Arc::new(Timestamp::now);
        let expectations = Arc::new(ControllerExpectations::new());
        let finalizer_expectations = Arc::new(UidTrackingExpectations::new());
        let handlers = JobEventHandlers {
            queue: queue.clone(),
            orphan_queue: orphan_queue.clone(),
            expectations: Arc::clone(&expectations),
            finalizer_expectations: Arc::clone(&finalizer_expectations),
            job_cache: job_cache.clone(),
            pod_cache: pod_cache.clone(),
            clock: Arc::clone(&clock),
            metrics: options.controller_metrics.clone(),
        };
        Self {
            gvk: GroupVersionKind::gvk("batch", "v1", KIND),
            job_client,
            pod_control,
            recorder,
            expectations,
            finalizer_expectations,
            backoff_store: Arc::new(BackoffStore::new()),
            job_cache,
            pod_cache,
            caches_synced: Vec::new(),
            queue,
            orphan_queue,
            handlers,
            sync_handler: None,
            clock,
            metrics: options.controller_metrics,
            own_writes: None,
        }
    }

    /// Makes [`Self::run`] wait for these informers to sync before starting workers.
    pub fn with_caches_synced(mut self, synced: Vec<InformerSynced>) -> Self {
        self.caches_synced = synced;
        self
    }

    /// Replaces [`Self::sync`] in the workers (test seam).
    pub fn with_sync_handler(mut self, handler: SyncHandler) -> Self {
        self.sync_handler = Some(handler);
        self
    }

    /// Replaces the wall clock (test seam), for the syncs and the handlers.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.handlers.clock = Arc::clone(&clock);
        self.clock = clock;
        self
    }

    /// The handlers to register with the Job and pod informers.
    pub fn event_handlers(&self) -> &JobEventHandlers {
        &self.handlers
    }

    /// The work queue of Job keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// The work queue of orphan pod keys.
    pub fn orphan_queue(&self) -> &RateLimitingQueue<String> {
        &self.orphan_queue
    }

    /// The pending pod creations and deletions per Job key.
    pub fn expectations(&self) -> &ControllerExpectations {
        &self.expectations
    }

    /// The pending tracking-finalizer removals per Job key.
    pub fn finalizer_expectations(&self) -> &UidTrackingExpectations {
        &self.finalizer_expectations
    }

    /// The pod-failure back-off records.
    pub fn backoff_store(&self) -> &BackoffStore {
        &self.backoff_store
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Waits for the caches, then syncs Jobs with `workers` workers and removes orphan pods'
    /// finalizers with one more, until `cancel` fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tracing::info!(controller = CONTROLLER_NAME, "Starting job controller");
        let synced = wait_for_synced(CONTROLLER_NAME, &cancel, &self.caches_synced).await;
        if !synced {
            self.queue.shut_down();
            self.orphan_queue.shut_down();
            tracing::info!(controller = CONTROLLER_NAME, "Shutting down job controller");
            return;
        }
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync_key(key).await }
        };
        let this = Arc::clone(&self);
        let sync_orphan = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync_orphan_pod(&key).await }
        };
        tokio::join!(
            run_workers(
                CONTROLLER_NAME,
                &self.queue,
                ERROR_POLICY,
                workers,
                &cancel,
                sync
            ),
            run_workers(
                CONTROLLER_NAME,
                &self.orphan_queue,
                ORPHAN_ERROR_POLICY,
                1,
                &cancel,
                sync_orphan
            ),
        );
        tracing::info!(controller = CONTROLLER_NAME, "Shutting down job controller");
    }
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// The Job and pod event handlers, as upstream's `addJob`/`updateJob`/`deleteJob` and
/// `addPod`/`updatePod`/`deletePod`. Cheap to clone; clones share the controller's queues,
/// expectations and caches. They only compute keys, touch expectations and enqueue.
#[derive(Clone)]
pub struct JobEventHandlers {
    /// The Job work queue.
    queue: RateLimitingQueue<String>,
    /// The orphan-pod work queue.
    orphan_queue: RateLimitingQueue<String>,
    /// Pod creations and deletions in flight.
    expectations: Arc<ControllerExpectations>,
    /// Finalizer removals in flight.
    finalizer_expectations: Arc<UidTrackingExpectations>,
    /// The Job cache, to resolve owners and find Jobs selecting an orphan.
    job_cache: Indexer<Job>,
    /// The pod cache, to find the pods of a finished or deleted Job.
    pod_cache: Indexer<Pod>,
    /// The controller's clock (for the active-deadline requeue).
    clock: Clock,
    /// The `job_controller_*` metrics, if recorded.
    metrics: Option<Arc<JobMetrics>>,
}

impl std::fmt::Debug for JobEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobEventHandlers").finish_non_exhaustive()
    }
}

impl JobEventHandlers {
    /// A pod appeared. Already being deleted: handled as a deletion. Owned by a known Job: one
    /// expected creation is observed and the Job synced (batched). An orphan carrying the
    /// tracking finalizer is queued for its removal, and every Job selecting it is synced.
    pub fn add_pod(&self, pod: &Pod) {
        self.record_finished_pod_with_tracking_finalizer(None, Some(pod));
        if pod.metadata.deletion_timestamp.is_some() {
            // A pod already pending deletion after a restart is no creation observation.
            self.delete_pod_object(pod, false);
            return;
        }
        if let Some(controller_ref) = get_controller_of(&pod.metadata) {
            let Some(job) = self.resolve_controller_ref(pod_namespace(pod), controller_ref) else {
                return;
            };
            let Some(key) = key_of(&job) else {
                return;
            };
            self.expectations.creation_observed(&key);
            self.enqueue_batched(key);
            return;
        }
        if has_job_tracking_finalizer(pod) {
            self.enqueue_orphan_pod(pod);
        }
        for job in self.get_pod_jobs(pod) {
            if let Some(key) = key_of(&job) {
                self.enqueue_batched(key);
            }
        }
    }

    /// A pod changed. Same resourceVersion: ignored. Being deleted: handled as a deletion (so
    /// a replacement need not wait for the kubelet). A removed tracking finalizer is observed
    /// for the old and the current owner; both are synced. An orphan with the finalizer is
    /// queued for its removal; changed labels or reference sync the Jobs selecting it.
    pub fn update_pod(&self, old: &Pod, cur: &Pod) {
        self.record_finished_pod_with_tracking_finalizer(Some(old), Some(cur));
        if cur.metadata.resource_version == old.metadata.resource_version {
            return;
        }
        if cur.metadata.deletion_timestamp.is_some() {
            self.delete_pod_object(cur, false);
            return;
        }
        // Not checking the old pod: during an ownership transfer the finalizer may be added
        // and removed again, and the two updates may arrive as one.
        let finalizer_removed = !has_job_tracking_finalizer(cur);
        let uid = cur.metadata.uid.as_deref().unwrap_or_default();
        let cur_ref = get_controller_of(&cur.metadata);
        let old_ref = get_controller_of(&old.metadata);
        let controller_ref_changed = cur_ref != old_ref;
        if controller_ref_changed
            && let Some(old_ref) = old_ref
            && let Some(job) = self.resolve_controller_ref(pod_namespace(old), old_ref)
            && let Some(key) = key_of(&job)
        {
            if finalizer_removed {
                self.finalizer_expectations
                    .finalizer_removal_observed(&key, uid);
            }
            self.enqueue_batched(key);
        }
        if let Some(cur_ref) = cur_ref {
            let Some(job) = self.resolve_controller_ref(pod_namespace(cur), cur_ref) else {
                return;
            };
            let Some(key) = key_of(&job) else {
                return;
            };
            if finalizer_removed {
                self.finalizer_expectations
                    .finalizer_removal_observed(&key, uid);
            }
            self.enqueue_batched(key);
            return;
        }
        if has_job_tracking_finalizer(cur) {
            self.enqueue_orphan_pod(cur);
        }
        let label_changed = labels_of(cur) != labels_of(old);
        if label_changed || controller_ref_changed {
            for job in self.get_pod_jobs(cur) {
                if let Some(key) = key_of(&job) {
                    self.enqueue_batched(key);
                }
            }
        }
    }

    /// A pod was deleted (possibly seen as a tombstone): its Job observes the deletion (and,
    /// on the final delete or without the finalizer, the finalizer removal) and is synced. A
    /// pod nobody running will clean up that still has the finalizer goes to the orphan queue.
    pub fn delete_pod(&self, obj: &DeletedObject<Pod>) {
        self.record_finished_pod_with_tracking_finalizer(Some(obj.object()), None);
        self.delete_pod_object(obj.object(), true);
    }

    fn delete_pod_object(&self, pod: &Pod, is_final: bool) {
        let has_finalizer = has_job_tracking_finalizer(pod);
        let Some(controller_ref) = get_controller_of(&pod.metadata) else {
            // The garbage collector may have removed the reference of a Job's pod.
            if has_finalizer {
                self.enqueue_orphan_pod(pod);
            }
            return;
        };
        let job = self.resolve_controller_ref(pod_namespace(pod), controller_ref);
        let Some(job) = job.filter(|j| !is_job_finished(j)) else {
            // No sync will remove this finalizer.
            if has_finalizer {
                self.enqueue_orphan_pod(pod);
            }
            return;
        };
        let Some(key) = key_of(&job) else {
            return;
        };
        self.expectations.deletion_observed(&key);
        if is_final || !has_finalizer {
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            self.finalizer_expectations
                .finalizer_removal_observed(&key, uid);
        }
        self.enqueue_batched(key);
    }

    /// A Job appeared: sync it now.
    pub fn add_job(&self, job: &Job) {
        if let Some(key) = key_of(job) {
            self.enqueue_immediately(key);
        }
        if let (Some(name), Some(metrics)) = (managed_by_external_controller(job), &self.metrics) {
            metrics.job_by_external_controller(name);
        }
    }

    /// A Job changed: a spec change (new generation) syncs now, a status change batched. A
    /// finished Job's leftover pod finalizers are queued for removal (a backstop), and a
    /// changed `activeDeadlineSeconds` requeues the Job for its new deadline.
    pub fn update_job(&self, old: &Job, cur: &Job) {
        let Some(key) = key_of(cur) else {
            return;
        };
        if cur.metadata.generation == old.metadata.generation {
            self.enqueue_batched(key.clone());
        } else {
            self.enqueue_immediately(key.clone());
        }
        if is_job_finished(cur) {
            self.cleanup_pod_finalizers(cur);
        }
        let Some(start) = cur.status.as_ref().and_then(|s| s.start_time.as_ref()) else {
            return;
        };
        let Some(cur_ads) = cur.spec.as_ref().and_then(|s| s.active_deadline_seconds) else {
            return;
        };
        let old_ads = old.spec.as_ref().and_then(|s| s.active_deadline_seconds);
        if old_ads != Some(cur_ads) {
            let passed = (self.clock)().duration_since(start.0);
            let total = jiff::SignedDuration::from_secs(cur_ads);
            let left = Duration::try_from(total.saturating_sub(passed)).unwrap_or(Duration::ZERO);
            tracing::debug!(key, interval = ?left, "job's ActiveDeadlineSeconds updated, will rsync");
            self.queue.add_after(key, left);
        }
    }

    /// A Job was deleted: sync it (which forgets its state) and queue its pods' finalizers
    /// for removal.
    pub fn delete_job(&self, obj: &DeletedObject<Job>) {
        match obj.key() {
            Ok(key) => self.enqueue_immediately(key),
            Err(err) => tracing::error!(%err, "couldn't get key for Job"),
        }
        self.cleanup_pod_finalizers(obj.object());
    }

    /// The cached Job `controller_ref` points to: same kind, name and UID, as upstream's
    /// `resolveControllerRef`.
    pub fn resolve_controller_ref(
        &self,
        namespace: &str,
        controller_ref: &OwnerReference,
    ) -> Option<Arc<Job>> {
        if controller_ref.kind != KIND {
            return None;
        }
        self.job_cache
            .get_by_key(&object_key(namespace, &controller_ref.name))
            .filter(|job| job.metadata.uid.as_deref() == Some(controller_ref.uid.as_str()))
    }

    /// The cached Jobs of the pod's namespace whose selector matches its labels, as
    /// upstream's `getPodJobs` (`GetPodJobs`): none for a pod without labels; an empty or
    /// invalid selector matches nothing.
    pub fn get_pod_jobs(&self, pod: &Pod) -> Vec<Arc<Job>> {
        if pod.metadata.labels.as_ref().is_none_or(BTreeMap::is_empty) {
            return Vec::new();
        }
        let mut jobs = objects_in_namespace(&self.job_cache, pod_namespace(pod));
        jobs.retain(|job| match job_selector(job) {
            Ok(selector) => {
                !selector.is_everything() && selector.matches_opt(pod.metadata.labels.as_ref())
            }
            Err(_) => false,
        });
        if jobs.len() > 1 {
            tracing::error!(
                labels = ?pod.metadata.labels,
                "user error! more than one job is selecting pods with labels"
            );
        }
        jobs
    }

    /// Queues the pods `job` controls that still carry the tracking finalizer for its
    /// removal, as upstream's `cleanupPodFinalizers`.
    fn cleanup_pod_finalizers(&self, job: &Job) {
        let selector = match job_selector(job) {
            Ok(selector) => selector,
            Err(err) => {
                tracing::error!(%err, "parsing deleted job selector");
                return;
            }
        };
        let uid = job.metadata.uid.as_deref().unwrap_or_default();
        let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
        for pod in objects_in_namespace(&self.pod_cache, namespace) {
            let controlled = get_controller_of(&pod.metadata).is_some_and(|r| r.uid == uid);
            if controlled
                && has_job_tracking_finalizer(&pod)
                && selector.matches_opt(pod.metadata.labels.as_ref())
            {
                self.enqueue_orphan_pod(&pod);
            }
        }
    }

    /// Counts terminated pods with the tracking finalizer appearing and going, as upstream's
    /// `recordFinishedPodWithTrackingFinalizer`.
    fn record_finished_pod_with_tracking_finalizer(&self, old: Option<&Pod>, new: Option<&Pod>) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let was = is_finished_pod_with_tracking_finalizer(old);
        let is = is_finished_pod_with_tracking_finalizer(new);
        if was == is {
            return;
        }
        metrics.tracking_finalizer(if is { "add" } else { "delete" });
    }

    /// Syncs `key` now (Job events), as upstream's `enqueueSyncJobImmediately`.
    fn enqueue_immediately(&self, key: String) {
        tracing::trace!(key, "enqueueing job");
        self.queue.add(key);
    }

    /// Syncs `key` after the batch period, so a burst of pod events makes one sync, as
    /// upstream's `enqueueSyncJobBatched`.
    fn enqueue_batched(&self, key: String) {
        tracing::trace!(key, delay = ?SYNC_JOB_BATCH_PERIOD, "enqueueing job");
        self.queue.add_after(key, SYNC_JOB_BATCH_PERIOD);
    }

    fn enqueue_orphan_pod(&self, pod: &Pod) {
        self.orphan_queue.add(pod_key(pod));
    }
}

/// The informer side: Job notifications.
impl ResourceEventHandler<Job> for JobEventHandlers {
    fn on_add(&self, job: Arc<Job>, _is_in_initial_list: bool) {
        self.add_job(&job);
    }

    fn on_update(&self, old: Arc<Job>, new: Arc<Job>) {
        self.update_job(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<Job>) {
        self.delete_job(&obj);
    }
}

/// The informer side: pod notifications.
impl ResourceEventHandler<Pod> for JobEventHandlers {
    fn on_add(&self, pod: Arc<Pod>, _is_in_initial_list: bool) {
        self.add_pod(&pod);
    }

    fn on_update(&self, old: Arc<Pod>, new: Arc<Pod>) {
        self.update_pod(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<Pod>) {
        self.delete_pod(&obj);
    }
}

// ---------------------------------------------------------------------------------------------
// Worker wiring
// ---------------------------------------------------------------------------------------------

impl JobController {
    /// Takes one Job key and syncs it through the shared worker, as upstream's
    /// `processNextWorkItem`. False once the queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(CONTROLLER_NAME, &self.queue, &ERROR_POLICY, |key| {
            self.sync_key(key)
        })
        .await
    }

    /// Takes one orphan pod key and removes its finalizer, as upstream's
    /// `processNextOrphanPod`. False once the queue has shut down.
    pub async fn process_next_orphan_pod(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.orphan_queue,
            &ORPHAN_ERROR_POLICY,
            |key| async move { self.sync_orphan_pod(&key).await },
        )
        .await
    }

    /// What the workers run for a key: the injected handler if any, else [`Self::sync`].
    async fn sync_key(&self, key: String) -> Result<()> {
        match &self.sync_handler {
            Some(handler) => handler(key).await,
            None => self.sync(&key).await,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Free helpers
// ---------------------------------------------------------------------------------------------

/// The Job's selector, as `metav1.LabelSelectorAsSelector(job.Spec.Selector)`: a missing
/// selector selects nothing.
pub(super) fn job_selector(job: &Job) -> kcm_machinery::labels::Result<Selector> {
    match job.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(selector) => Selector::from_label_selector(selector),
        None => Ok(Selector::nothing()),
    }
}

/// The cache key of `job`, logging when it has none.
pub(super) fn key_of(job: &Job) -> Option<String> {
    match meta_namespace_key(job) {
        Ok(key) => Some(key),
        Err(err) => {
            tracing::error!(%err, "couldn't get key for Job");
            None
        }
    }
}

fn pod_namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

/// A pod's labels, absent and empty being the same.
fn labels_of(pod: &Pod) -> Option<&BTreeMap<String, String>> {
    pod.metadata.labels.as_ref().filter(|l| !l.is_empty())
}

/// The objects of `namespace` in `cache`, through its namespace index.
fn objects_in_namespace<K>(cache: &Indexer<K>, namespace: &str) -> Vec<Arc<K>>
where
    K: kube::Resource + Send + Sync + 'static,
{
    match cache.by_index(NAMESPACE_INDEX, namespace) {
        Ok(objects) => objects,
        Err(_) => cache
            .list()
            .into_iter()
            .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
            .collect(),
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
