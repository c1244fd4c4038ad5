//! The CronJob controller: constants, the controller and its construction, `Run`, the event handlers and the worker wiring (upstream `cronjob_controllerv2.go` up to `processNextWorkItem`).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::controller::{
    ErrorPolicy, get_controller_of, process_next_work_item, run_controller,
};
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::{meta_namespace_key, object_key};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, OwnWrites, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::Resource;
use tokio_util::sync::CancellationToken;

use super::client::{ApiCronJobControl, CronJobControl, JobControl};
use super::metrics::CronJobMetrics;
use super::utils::{format_schedule, next_schedule_time_duration};
use super::{Error, Result};
use kcm_machinery::cron::Schedule;

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// The controller's name in logs, events and `--controllers` (kube-controller-manager's
/// `cronjob-controller`).
pub const CONTROLLER_NAME: &str = "cronjob-controller";

/// The work queue's name in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "cronjob";

/// `--concurrent-cron-job-syncs`' default.
pub const DEFAULT_CONCURRENT_CRON_JOB_SYNCS: u32 = 5;

/// The longest a sync waits for the CronJob cache to catch up with this controller's own last
/// status write before going ahead with the stale copy.
pub const OWN_WRITE_WAIT: Duration = Duration::from_secs(2);

/// How the workers treat a failed sync, as upstream's `processNextWorkItem`: requeued
/// rate-limited, forever.
const ERROR_POLICY: ErrorPolicy<String, Error> =
    ErrorPolicy::new("error syncing CronJobController, requeuing");

/// The kind of the Jobs' owner.
pub(super) const KIND: &str = "CronJob";

/// The wall clock (upstream's `now` seam); injectable so tests are deterministic.
pub use kcm_machinery::controller::clock::Clock;

/// A replacement for [`CronJobController::sync`] run by the workers (test seam).
pub type SyncHandler = Arc<dyn Fn(String) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// Wiring of a [`CronJobController`].
#[derive(Clone)]
pub struct CronJobControllerOptions {
    /// The zone of schedules without `TZ=` and CronJobs without `spec.timeZone` (upstream:
    /// the process's `time.Local`).
    pub local: TimeZone,
    /// Where the queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// Where the controller records `cronjob_controller_*`; `None` records nothing.
    pub controller_metrics: Option<Arc<CronJobMetrics>>,
}

impl Default for CronJobControllerOptions {
    fn default() -> Self {
        Self {
            local: TimeZone::system(),
            metrics: None,
            controller_metrics: None,
        }
    }
}

impl std::fmt::Debug for CronJobControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronJobControllerOptions")
            .field("local", &self.local.iana_name())
            .field("metrics", &self.metrics.is_some())
            .field("controller_metrics", &self.controller_metrics.is_some())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Starts the Jobs of every CronJob on schedule, as kube-controller-manager's `ControllerV2`:
/// each CronJob is requeued for its next schedule (a delaying queue, not polling).
pub struct CronJobController {
    /// CronJob reads and status writes. Test seam: [`super::FakeCronJobControl`].
    pub(super) cron_job_control: Arc<dyn CronJobControl>,
    /// Job reads, creations and deletions. Test seam: [`super::FakeJobControl`].
    pub(super) job_control: Arc<dyn JobControl>,
    /// Records the CronJob's events.
    pub(super) recorder: Arc<dyn EventRecorder>,
    /// The Job informer's cache (read only).
    pub(super) job_cache: Indexer<Job>,
    /// The CronJob informer's cache (read only).
    pub(super) cron_job_cache: Indexer<CronJob>,
    /// Whether the informers have synced; `run` waits for all.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// CronJob keys to sync, now or at their next schedule. Shared with the handlers.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: CronJobEventHandlers,
    /// Replaces [`Self::sync`] in the workers when set (test seam).
    pub(super) sync_handler: Option<SyncHandler>,
    /// Wall-clock time (test seam).
    pub(super) clock: Clock,
    /// The zone of schedules that name none.
    pub(super) local: TimeZone,
    /// The `cronjob_controller_*` metrics, if recorded.
    pub(super) metrics: Option<Arc<CronJobMetrics>>,
    /// This controller's status writes not yet seen in the CronJob cache.
    pub(super) own_writes: Option<OwnWrites>,
}

impl std::fmt::Debug for CronJobController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronJobController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Constructor
// ---------------------------------------------------------------------------------------------

impl CronJobController {
    /// The controller kube-controller-manager runs, over the factory's Job and CronJob
    /// informers, as upstream's `NewControllerV2`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: CronJobControllerOptions,
    ) -> Self {
        let control = Arc::new(ApiCronJobControl::new(client));
        Self::with_informers(
            &factory.jobs(),
            &factory.informer_for::<CronJob>(),
            control.clone(),
            control,
            recorder,
            options,
        )
    }

    /// A controller over the given informers: registers the handlers, waits for both in
    /// [`Self::run`], and for its own status writes to reach the CronJob cache.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informers(
        job_informer: &SharedIndexInformer<Job>,
        cron_job_informer: &SharedIndexInformer<CronJob>,
        cron_job_control: Arc<dyn CronJobControl>,
        job_control: Arc<dyn JobControl>,
        recorder: Arc<dyn EventRecorder>,
        options: CronJobControllerOptions,
    ) -> Self {
        let mut controller = Self::with_caches(
            job_informer.indexer().clone(),
            cron_job_informer.indexer().clone(),
            cron_job_control,
            job_control,
            recorder,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(job_informer, controller.handlers.clone())
            .register(cron_job_informer, controller.handlers.clone())
            .finish();
        controller.own_writes = Some(OwnWrites::new(cron_job_informer.freshness()));
        controller
    }

    /// A controller over bare caches (unit tests fill them and call the handlers and
    /// [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        job_cache: Indexer<Job>,
        cron_job_cache: Indexer<CronJob>,
        cron_job_control: Arc<dyn CronJobControl>,
        job_control: Arc<dyn JobControl>,
        recorder: Arc<dyn EventRecorder>,
        options: CronJobControllerOptions,
    ) -> Self {
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics: options.metrics,
            },
        );
        let clock: Clock = Arc::new(Timestamp::now);
        let handlers = CronJobEventHandlers {
            queue: queue.clone(),
            cron_job_cache: cron_job_cache.clone(),
            recorder: Arc::clone(&recorder),
            clock: Arc::clone(&clock),
            local: options.local.clone(),
        };
        Self {
            cron_job_control,
            job_control,
            recorder,
            job_cache,
            cron_job_cache,
            caches_synced: Vec::new(),
            queue,
            handlers,
            sync_handler: None,
            clock,
            local: options.local,
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

    /// The handlers to register with the Job and CronJob informers.
    pub fn event_handlers(&self) -> &CronJobEventHandlers {
        &self.handlers
    }

    /// The work queue of CronJob keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Waits for the caches, then syncs CronJobs with `workers` workers until `cancel` fires,
    /// as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync_key(key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        run_controller(
            CONTROLLER_NAME,
            "cronjob controller v2",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            synced,
            sync,
        )
        .await;
    }
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// The Job and CronJob event handlers, as upstream's `addJob`/`updateJob`/`deleteJob` and the
/// CronJob handler functions. Cheap to clone; clones share the controller's queue and cache.
#[derive(Clone)]
pub struct CronJobEventHandlers {
    /// The work queue.
    queue: RateLimitingQueue<String>,
    /// The CronJob cache, to resolve a Job's owner.
    cron_job_cache: Indexer<CronJob>,
    /// For the `UnParseableCronJobSchedule` warning of a schedule change.
    recorder: Arc<dyn EventRecorder>,
    /// The controller's clock.
    clock: Clock,
    /// The zone of schedules that name none.
    local: TimeZone,
}

impl std::fmt::Debug for CronJobEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronJobEventHandlers")
            .finish_non_exhaustive()
    }
}

impl CronJobEventHandlers {
    /// A Job appeared: its CronJob is synced (a Job already being deleted counts as deleted).
    pub fn add_job(&self, job: &Job) {
        if job.metadata.deletion_timestamp.is_some() {
            self.delete_job_object(job);
            return;
        }
        if let Some(cron_job) = self.owner_of(job) {
            self.enqueue(&cron_job);
        }
    }

    /// A Job changed (same resourceVersion: ignored): its CronJob, and the previous one when
    /// the controller reference changed, are synced.
    pub fn update_job(&self, old: &Job, cur: &Job) {
        if cur.metadata.resource_version == old.metadata.resource_version {
            return;
        }
        let cur_ref = get_controller_of(&cur.metadata);
        let old_ref = get_controller_of(&old.metadata);
        if cur_ref != old_ref
            && let Some(old_ref) = old_ref
            && let Some(cron_job) = self.resolve_controller_ref(namespace_of(old), old_ref)
        {
            self.enqueue(&cron_job);
        }
        if let Some(cron_job) = self.owner_of(cur) {
            self.enqueue(&cron_job);
        }
    }

    /// A Job was deleted (possibly seen as a tombstone): its CronJob is synced.
    pub fn delete_job(&self, obj: &DeletedObject<Job>) {
        self.delete_job_object(obj.object());
    }

    fn delete_job_object(&self, job: &Job) {
        if let Some(cron_job) = self.owner_of(job) {
            self.enqueue(&cron_job);
        }
    }

    /// A CronJob appeared: sync it.
    pub fn add_cron_job(&self, cron_job: &CronJob) {
        self.enqueue(cron_job);
    }

    /// A CronJob changed: a new schedule or time zone requeues it for its next schedule under
    /// the new one (an unparseable schedule is reported and left until the next change);
    /// anything else syncs it now, as upstream's `updateCronJob`.
    pub fn update_cron_job(&self, old: &CronJob, cur: &CronJob) {
        let spec = |cj: &CronJob| (cj.spec.schedule.clone(), cj.spec.time_zone.clone());
        if spec(old) == spec(cur) {
            self.enqueue(cur);
            return;
        }
        let formatted = format_schedule(cur);
        let schedule = match Schedule::parse_standard(&formatted.schedule) {
            Ok(schedule) => schedule,
            Err(err) => {
                let written = cur.spec.schedule.as_str();
                tracing::debug!(cronjob = ?key_of(cur), schedule = written, %err, "Unparseable schedule for cronjob");
                self.recorder.event(
                    &cur.object_ref(&()),
                    EventType::Warning,
                    "UnParseableCronJobSchedule",
                    format!("unparseable schedule for cronjob: {written}"),
                );
                return;
            }
        };
        let now = (self.clock)();
        if let (Some(key), Some(delay)) = (
            key_of(cur),
            next_schedule_time_duration(cur, now, &schedule, &self.local),
        ) {
            self.queue.add_after(key, requeue_delay(delay));
        }
    }

    /// A CronJob was deleted: sync the key (which finds nothing and stops).
    pub fn delete_cron_job(&self, obj: &DeletedObject<CronJob>) {
        match obj.key() {
            Ok(key) => self.queue.add(key),
            Err(err) => tracing::error!(%err, "couldn't get key for CronJob"),
        }
    }

    /// The cached CronJob `controller_ref` points to (same kind, name and UID), as upstream's
    /// `resolveControllerRef`.
    pub fn resolve_controller_ref(
        &self,
        namespace: &str,
        controller_ref: &OwnerReference,
    ) -> Option<Arc<CronJob>> {
        if controller_ref.kind != KIND {
            return None;
        }
        self.cron_job_cache
            .get_by_key(&object_key(namespace, &controller_ref.name))
            .filter(|cj| cj.metadata.uid.as_deref() == Some(controller_ref.uid.as_str()))
    }

    fn owner_of(&self, job: &Job) -> Option<Arc<CronJob>> {
        let controller_ref = get_controller_of(&job.metadata)?;
        self.resolve_controller_ref(namespace_of(job), controller_ref)
    }

    fn enqueue(&self, cron_job: &CronJob) {
        if let Some(key) = key_of(cron_job) {
            self.queue.add(key);
        }
    }
}

/// The informer side: Job notifications.
impl ResourceEventHandler<Job> for CronJobEventHandlers {
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

/// The informer side: CronJob notifications.
impl ResourceEventHandler<CronJob> for CronJobEventHandlers {
    fn on_add(&self, cron_job: Arc<CronJob>, _is_in_initial_list: bool) {
        self.add_cron_job(&cron_job);
    }

    fn on_update(&self, old: Arc<CronJob>, new: Arc<CronJob>) {
        self.update_cron_job(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<CronJob>) {
        self.delete_cron_job(&obj);
    }
}

// ---------------------------------------------------------------------------------------------
// Worker wiring
// ---------------------------------------------------------------------------------------------

impl CronJobController {
    /// Takes one key and syncs it through the shared worker, as upstream's
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

// ---------------------------------------------------------------------------------------------
// Free helpers
// ---------------------------------------------------------------------------------------------

/// A requeue delay from a signed duration (a schedule already past requeues at once).
pub(super) fn requeue_delay(delay: jiff::SignedDuration) -> Duration {
    Duration::try_from(delay).unwrap_or(Duration::ZERO)
}

/// The cache key of a CronJob, logging when it has none.
pub(super) fn key_of(cron_job: &CronJob) -> Option<String> {
    match meta_namespace_key(cron_job) {
        Ok(key) => Some(key),
        Err(err) => {
            tracing::error!(%err, "couldn't get key for CronJob");
            None
        }
    }
}

fn namespace_of(job: &Job) -> &str {
    job.metadata.namespace.as_deref().unwrap_or_default()
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
