//! The TTL-after-finished controller: constants, the controller and its construction, `Run`, the Job event handlers and the worker wiring (upstream `ttlafterfinished_controller.go` up to `processNextWorkItem`).

use std::sync::Arc;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::meta_namespace_key;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::client::{ApiTtlJobClient, TtlJobClient};
use super::expiry::needs_cleanup;
use super::metrics::TtlAfterFinishedMetrics;
use super::{Error, Result};

/// The controller's name in logs, events and `--controllers`.
pub const CONTROLLER_NAME: &str = "ttl-after-finished-controller";

/// The work queue's name in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "ttl_jobs_to_delete";

/// `--concurrent-ttl-after-finished-syncs`' default.
pub const DEFAULT_CONCURRENT_TTL_AFTER_FINISHED_SYNCS: u32 = 5;

/// How the workers treat a failed clean-up, as upstream's `handleErr`: requeued rate-limited.
const ERROR_POLICY: ErrorPolicy<String, Error> =
    ErrorPolicy::new("error cleaning up Job, will retry");

/// The wall clock (upstream's `clock.Clock`); injectable so tests are deterministic.
pub use kcm_machinery::controller::clock::Clock;

/// A replacement for [`TtlAfterFinishedController::sync`] run by the workers (test seam).
pub type SyncHandler = Arc<dyn Fn(String) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// Wiring of a [`TtlAfterFinishedController`].
#[derive(Clone, Default)]
pub struct TtlAfterFinishedControllerOptions {
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// Where the controller records its own metric; `None` records nothing.
    pub controller_metrics: Option<Arc<TtlAfterFinishedMetrics>>,
}

impl std::fmt::Debug for TtlAfterFinishedControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlAfterFinishedControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .field("controller_metrics", &self.controller_metrics.is_some())
            .finish()
    }
}

/// Deletes finished Jobs whose `ttlSecondsAfterFinished` has passed, as upstream's
/// ttlafterfinished `Controller`.
pub struct TtlAfterFinishedController {
    /// The uncached GET and the DELETE. Test seam: [`super::FakeTtlJobClient`].
    pub(super) client: Arc<dyn TtlJobClient>,
    /// The Job informer's cache (read only).
    pub(super) job_cache: Indexer<Job>,
    /// Whether the Job informer has synced.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Keys of finished Jobs with a TTL, added now or when their TTL expires.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: TtlEventHandlers,
    /// Wall-clock time (test seam).
    pub(super) clock: Clock,
    /// The deletion-latency metric, if recorded.
    pub(super) metrics: Option<Arc<TtlAfterFinishedMetrics>>,
    /// Replaces [`Self::sync`] in the workers when set (test seam).
    pub(super) sync_handler: Option<SyncHandler>,
}

impl std::fmt::Debug for TtlAfterFinishedController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlAfterFinishedController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl TtlAfterFinishedController {
    /// The controller kube-controller-manager runs, over the factory's Job informer, as
    /// upstream's `New`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        options: TtlAfterFinishedControllerOptions,
    ) -> Self {
        Self::with_informer(
            &factory.jobs(),
            Arc::new(ApiTtlJobClient::new(client)),
            options,
        )
    }

    /// A controller over `job_informer`, registering its handlers and waiting for it.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informer(
        job_informer: &SharedIndexInformer<Job>,
        client: Arc<dyn TtlJobClient>,
        options: TtlAfterFinishedControllerOptions,
    ) -> Self {
        let mut controller = Self::with_cache(job_informer.indexer().clone(), client, options);
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(job_informer, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over a bare cache (unit tests fill it and call the handlers and
    /// [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_cache(
        job_cache: Indexer<Job>,
        client: Arc<dyn TtlJobClient>,
        options: TtlAfterFinishedControllerOptions,
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
            job_cache,
            caches_synced: Vec::new(),
            handlers: TtlEventHandlers {
                queue: queue.clone(),
            },
            queue,
            clock: Arc::new(Timestamp::now),
            metrics: options.controller_metrics,
            sync_handler: None,
        }
    }

    /// Replaces [`Self::sync`] in the workers (test seam).
    pub fn with_sync_handler(mut self, handler: SyncHandler) -> Self {
        self.sync_handler = Some(handler);
        self
    }

    /// Replaces the wall clock (test seam).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The handlers to register with the Job informer.
    pub fn event_handlers(&self) -> &TtlEventHandlers {
        &self.handlers
    }

    /// The work queue of Job keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the Job cache, then cleans up Jobs with `workers` workers until `cancel`
    /// fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync_key(key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        run_controller(
            CONTROLLER_NAME,
            "TTL after finished controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            synced,
            sync,
        )
        .await;
    }

    /// Takes one key and cleans it up through the shared worker, as upstream's
    /// `processNextWorkItem`. False once the queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(CONTROLLER_NAME, &self.queue, &ERROR_POLICY, |key| {
            self.sync_key(key)
        })
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

/// The Job event handlers, as upstream's `addJob` and `updateJob`: a finished Job with a TTL
/// that is not being deleted is enqueued. Deletions need no handling.
#[derive(Clone)]
pub struct TtlEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for TtlEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlEventHandlers").finish_non_exhaustive()
    }
}

impl TtlEventHandlers {
    /// A Job appeared.
    pub fn add_job(&self, job: &Job) {
        self.enqueue_if_needed(job);
    }

    /// A Job changed (it may just have finished, or got a TTL).
    pub fn update_job(&self, job: &Job) {
        self.enqueue_if_needed(job);
    }

    fn enqueue_if_needed(&self, job: &Job) {
        if job.metadata.deletion_timestamp.is_some() || !needs_cleanup(job) {
            return;
        }
        match meta_namespace_key(job) {
            Ok(key) => {
                tracing::trace!(job = key, "Add job to cleanup");
                self.queue.add(key);
            }
            Err(err) => tracing::error!(%err, "couldn't get key for Job"),
        }
    }
}

impl ResourceEventHandler<Job> for TtlEventHandlers {
    fn on_add(&self, job: Arc<Job>, _is_in_initial_list: bool) {
        self.add_job(&job);
    }

    fn on_update(&self, _old: Arc<Job>, new: Arc<Job>) {
        self.update_job(&new);
    }

    fn on_delete(&self, _obj: DeletedObject<Job>) {}
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
