//! The namespace controller: event handlers, the `namespace` work queue, workers and the sync (upstream `namespace_controller.go`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kcm_machinery::controller::{ErrorPolicy, Retry, process_next_work_item, run_workers};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, wait_for_synced,
};
use kcm_machinery::workqueue::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, QueueConfig,
    RateLimitingQueue, WorkqueueMetrics,
};
use tokio_util::sync::CancellationToken;

use super::client::ApiNamespaceClient;
use super::deleter::{FINALIZER_KUBERNETES, NamespacedResourcesDeleter};
use super::{Error, Result};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// kube-controller-manager's name of this controller.
pub const CONTROLLER_NAME: &str = "namespace-controller";

/// The older name `--controllers` also accepts.
pub const CONTROLLER_ALIAS: &str = "namespace";

/// The work queue's name: the `name` label of its `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "namespace";

/// `--concurrent-namespace-syncs` default.
pub const DEFAULT_CONCURRENT_NAMESPACE_SYNCS: u32 = 10;

/// `--namespace-sync-period` default: the namespace informer handler's resync period.
pub const DEFAULT_NAMESPACE_SYNC_PERIOD: Duration = Duration::from_secs(5 * 60);

/// How long after observing a namespace being deleted the controller starts on it, as
/// upstream's `namespaceDeletionGracePeriod`: time for other API servers' admission to see the
/// deletion and refuse new content, and for last-moment creations to become visible, so the
/// cleanup does not miss them.
pub const NAMESPACE_DELETION_GRACE_PERIOD: Duration = Duration::from_secs(5);

/// How the workers treat a failed pass, as upstream's worker: content still remaining brings
/// the namespace back after half the estimate plus a second; any other error (or a panic)
/// requeues it rate-limited rather than waiting for a full resync.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("deletion of namespace failed")
    .with_classifier(|key, err| match err {
        Error::ResourcesRemaining { estimate, .. } => {
            let wait = requeue_after_remaining(*estimate);
            tracing::debug!(namespace = %key, wait_seconds = wait.as_secs(), "Content remaining in namespace");
            Retry::After(wait)
        }
        _ => Retry::RateLimited,
    });

/// The queue's rate limiter, as upstream's `nsControllerRateLimiter`: the larger of a per-item
/// exponential back-off from 5 ms capped at 60 s (a failing namespace is retried at least every
/// minute) and an overall 10 qps, burst 100 bucket.
pub fn ns_controller_rate_limiter() -> MaxOfRateLimiter<String> {
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(60),
        )),
        Box::new(BucketRateLimiter::new(10.0, 100)),
    ])
}

/// Tuning and wiring of a [`NamespaceController`].
#[derive(Clone)]
pub struct NamespaceControllerOptions {
    /// The namespace handler's resync period (`--namespace-sync-period`): every namespace is
    /// looked at again this often.
    pub resync_period: Duration,
    /// Where the queue records its `workqueue_*{name="namespace"}` metrics; `None` records
    /// nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl Default for NamespaceControllerOptions {
    fn default() -> Self {
        Self {
            resync_period: DEFAULT_NAMESPACE_SYNC_PERIOD,
            metrics: None,
        }
    }
}

impl std::fmt::Debug for NamespaceControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceControllerOptions")
            .field("resync_period", &self.resync_period)
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Finishes the deletion of namespaces, as kube-controller-manager's `NamespaceController`.
///
/// Build it (its handlers are registered with the namespace informer), then
/// [`run`](Self::run) it. A namespace is never synced by two workers at once (the queue's
/// promise).
pub struct NamespaceController {
    /// The namespace informer's cache (read only).
    cache: Indexer<Namespace>,
    /// Whether the namespace informer has synced; `run` waits for it. Empty for bare caches
    /// (unit tests).
    caches_synced: Vec<InformerSynced>,
    /// Names of namespaces being deleted. Shared with the event handlers.
    queue: RateLimitingQueue<String>,
    /// The informer-facing handlers; they share `queue`.
    handlers: NamespaceEventHandlers,
    /// Runs one deletion pass per namespace.
    deleter: NamespacedResourcesDeleter,
}

impl std::fmt::Debug for NamespaceController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Constructor
// ---------------------------------------------------------------------------------------------

impl NamespaceController {
    /// The controller kube-controller-manager runs, over the factory's namespace informer,
    /// deleting content and finalizing through `client` with the `kubernetes` finalizer, as
    /// upstream's `NewNamespaceController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        options: NamespaceControllerOptions,
    ) -> Self {
        let deleter = NamespacedResourcesDeleter::new(
            Arc::new(ApiNamespaceClient::new(client)),
            FINALIZER_KUBERNETES,
        );
        Self::with_informer(&factory.namespaces(), deleter, options)
    }

    /// A controller over `informer`, running `deleter` (e.g. over a fake client): registers the
    /// handlers with `options.resync_period` and waits for the informer in [`Self::run`].
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informer(
        informer: &SharedIndexInformer<Namespace>,
        deleter: NamespacedResourcesDeleter,
        options: NamespaceControllerOptions,
    ) -> Self {
        let resync = options.resync_period;
        let mut controller = Self::with_cache(informer.indexer().clone(), deleter, options);
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register_with_resync(informer, controller.handlers.clone(), resync)
            .finish();
        controller
    }

    /// A controller over a bare namespace cache (unit tests fill it and call the handlers and
    /// [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_cache(
        cache: Indexer<Namespace>,
        deleter: NamespacedResourcesDeleter,
        options: NamespaceControllerOptions,
    ) -> Self {
        let config = QueueConfig {
            name: QUEUE_NAME.to_owned(),
            metrics: options.metrics,
        };
        let queue = RateLimitingQueue::with_config(ns_controller_rate_limiter(), config);
        Self {
            cache,
            caches_synced: Vec::new(),
            handlers: NamespaceEventHandlers {
                queue: queue.clone(),
            },
            queue,
            deleter,
        }
    }

    /// The handlers to register with the namespace informer.
    pub fn event_handlers(&self) -> &NamespaceEventHandlers {
        &self.handlers
    }

    /// The work queue of namespace names.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Waits for the namespace cache to sync, then runs `workers` workers until `cancel`
    /// fires, as upstream's `Run`. On cancellation the queue shuts down, passes in progress
    /// finish, and `run` returns once every worker has stopped.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tracing::info!(controller = CONTROLLER_NAME, "Starting controller");
        if !wait_for_synced(CONTROLLER_NAME, &cancel, &self.caches_synced).await {
            self.queue.shut_down();
            tracing::info!(controller = CONTROLLER_NAME, "Shutting down controller");
            return;
        }
        tracing::debug!("Starting workers of namespace controller");
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        run_workers(
            CONTROLLER_NAME,
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            sync,
        )
        .await;
        tracing::info!(controller = CONTROLLER_NAME, "Shutting down controller");
    }
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// The namespace informer's handlers: namespaces being deleted go to the queue after
/// [`NAMESPACE_DELETION_GRACE_PERIOD`]. Cheap to clone (shares the queue).
#[derive(Clone)]
pub struct NamespaceEventHandlers {
    /// The controller's queue.
    queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for NamespaceEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceEventHandlers")
            .finish_non_exhaustive()
    }
}

impl NamespaceEventHandlers {
    /// Queues `namespace` if it is being deleted, after the grace period, as upstream's
    /// `enqueueNamespace`.
    pub fn enqueue_namespace(&self, namespace: &Namespace) {
        let Some(name) = namespace.metadata.name.as_deref().filter(|n| !n.is_empty()) else {
            tracing::error!("Couldn't get key for namespace without a name");
            return;
        };
        if namespace.metadata.deletion_timestamp.is_none() {
            return;
        }
        self.queue
            .add_after(name.to_owned(), NAMESPACE_DELETION_GRACE_PERIOD);
    }
}

impl ResourceEventHandler<Namespace> for NamespaceEventHandlers {
    fn on_add(&self, namespace: Arc<Namespace>, _is_in_initial_list: bool) {
        self.enqueue_namespace(&namespace);
    }

    fn on_update(&self, _old: Arc<Namespace>, new: Arc<Namespace>) {
        self.enqueue_namespace(&new);
    }
}

// ---------------------------------------------------------------------------------------------
// Worker wiring and sync
// ---------------------------------------------------------------------------------------------

impl NamespaceController {
    /// Takes one name and syncs it through the shared worker with `ERROR_POLICY`: forgotten
    /// on success, back after half the estimate plus a second while content remains, requeued
    /// rate-limited on any other failure (or a panic). False once the queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.queue,
            &ERROR_POLICY,
            |key| async move { self.sync(&key).await },
        )
        .await
    }

    // -----------------------------------------------------------------------------------------
    // Sync
    // -----------------------------------------------------------------------------------------

    /// Syncs namespace `key` (its name), as upstream's `syncNamespaceFromKey`: a namespace gone
    /// from the cache needs nothing; otherwise one deletion pass runs.
    pub async fn sync(&self, key: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = match self.cache.get_by_key(key) {
            None => {
                tracing::info!(namespace = key, "Namespace has been deleted");
                Ok(())
            }
            Some(namespace) => {
                let name = namespace.metadata.name.as_deref().unwrap_or(key);
                self.deleter.delete(name).await
            }
        };
        tracing::debug!(namespace = key, duration = ?start.elapsed(), "Finished syncing namespace");
        result
    }
}

// ---------------------------------------------------------------------------------------------
// Free helpers
// ---------------------------------------------------------------------------------------------

/// How long to wait before looking at a namespace whose content is estimated to need
/// `estimate` seconds: half of it plus one second, as upstream's worker.
fn requeue_after_remaining(estimate: i64) -> Duration {
    let seconds = estimate / 2 + 1;
    Duration::from_secs(u64::try_from(seconds).unwrap_or(1))
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
