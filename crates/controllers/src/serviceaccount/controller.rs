//! The service account controller: event handlers, the `serviceaccount` work queue, the worker and the sync (upstream `serviceaccounts_controller.go`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    DeletedObject, InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::api::ObjectMeta;
use tokio_util::sync::CancellationToken;

use super::client::{ApiServiceAccountClient, ServiceAccountClient};
use super::{Error, Result};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// kube-controller-manager's name of this controller.
pub const CONTROLLER_NAME: &str = "serviceaccount-controller";

/// The older name `--controllers` also accepts.
pub const CONTROLLER_ALIAS: &str = "serviceaccount";

/// The work queue's name: the `name` label of its `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "serviceaccount";

/// The account every namespace gets, as upstream's `DefaultServiceAccountsControllerOptions`.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// How many workers kube-controller-manager runs: a fixed one (`sac.Run(ctx, 1)` in
/// `startServiceAccountController`; no flag).
pub const SERVICE_ACCOUNT_WORKERS: usize = 1;

/// How the workers treat a failed sync, as upstream's `processNextWorkItem` (`"%v failed with
/// : %v"`): every error (and every panic) requeues the namespace rate-limited.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("sync failed");

/// Which accounts to ensure and how the handlers resync, as upstream's
/// `ServiceAccountsControllerOptions`.
#[derive(Clone)]
pub struct ServiceAccountsControllerOptions {
    /// The accounts to ensure in every active namespace (only their names are read).
    pub service_accounts: Vec<ServiceAccount>,
    /// The ServiceAccount handler's resync period; zero never resyncs (upstream's default).
    pub service_account_resync: Duration,
    /// The Namespace handler's resync period; zero never resyncs (upstream's default).
    pub namespace_resync: Duration,
    /// Where the queue records its `workqueue_*{name="serviceaccount"}` metrics; `None`
    /// records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl Default for ServiceAccountsControllerOptions {
    /// Upstream's `DefaultServiceAccountsControllerOptions`: only `default`, no resync.
    fn default() -> Self {
        Self {
            service_accounts: vec![ServiceAccount {
                metadata: ObjectMeta {
                    name: Some(DEFAULT_SERVICE_ACCOUNT.to_owned()),
                    ..ObjectMeta::default()
                },
                ..ServiceAccount::default()
            }],
            service_account_resync: Duration::ZERO,
            namespace_resync: Duration::ZERO,
            metrics: None,
        }
    }
}

impl std::fmt::Debug for ServiceAccountsControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountsControllerOptions")
            .field("service_accounts", &self.service_accounts.len())
            .field("service_account_resync", &self.service_account_resync)
            .field("namespace_resync", &self.namespace_resync)
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Creates the wanted ServiceAccounts in every active namespace, as kube-controller-manager's
/// `ServiceAccountsController`.
///
/// Build it (its handlers are registered with both informers), then [`run`](Self::run) it.
pub struct ServiceAccountsController {
    /// The accounts to ensure, each with a name.
    to_ensure: Vec<ServiceAccount>,
    /// The ServiceAccount informer's cache (read only), keyed `namespace/name`.
    accounts: Indexer<ServiceAccount>,
    /// The Namespace informer's cache (read only), keyed by name.
    namespaces: Indexer<Namespace>,
    /// The informers `run` waits for; empty for bare caches (unit tests).
    caches_synced: Vec<InformerSynced>,
    /// Names of namespaces to look at. Shared with the event handlers.
    queue: RateLimitingQueue<String>,
    /// The informer-facing handlers; they share `queue`.
    handlers: ServiceAccountEventHandlers,
    /// Creates the accounts.
    client: Arc<dyn ServiceAccountClient>,
}

impl std::fmt::Debug for ServiceAccountsController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountsController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Constructor
// ---------------------------------------------------------------------------------------------

impl ServiceAccountsController {
    /// The controller kube-controller-manager runs, over the factory's ServiceAccount and
    /// Namespace informers, creating through `client`, as upstream's
    /// `NewServiceAccountsController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        options: ServiceAccountsControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.informer_for::<ServiceAccount>(),
            &factory.namespaces(),
            Arc::new(ApiServiceAccountClient::new(client)),
            options,
        )
    }

    /// A controller over the given informers, creating through `client` (e.g. a fake):
    /// registers the handlers and waits for both informers in [`Self::run`].
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informers(
        accounts: &SharedIndexInformer<ServiceAccount>,
        namespaces: &SharedIndexInformer<Namespace>,
        client: Arc<dyn ServiceAccountClient>,
        options: ServiceAccountsControllerOptions,
    ) -> Self {
        let (sa_resync, ns_resync) = (options.service_account_resync, options.namespace_resync);
        let mut controller = Self::with_caches(
            accounts.indexer().clone(),
            namespaces.indexer().clone(),
            client,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register_with_resync(accounts, controller.handlers.clone(), sa_resync)
            .register_with_resync(namespaces, controller.handlers.clone(), ns_resync)
            .finish();
        controller
    }

    /// A controller over bare caches (unit tests fill them and call the handlers and
    /// [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        accounts: Indexer<ServiceAccount>,
        namespaces: Indexer<Namespace>,
        client: Arc<dyn ServiceAccountClient>,
        options: ServiceAccountsControllerOptions,
    ) -> Self {
        let config = QueueConfig {
            name: QUEUE_NAME.to_owned(),
            metrics: options.metrics,
        };
        let queue = RateLimitingQueue::with_config(default_controller_rate_limiter(), config);
        let to_ensure = options
            .service_accounts
            .into_iter()
            .filter(|sa| sa.metadata.name.as_deref().is_some_and(|n| !n.is_empty()))
            .collect();
        Self {
            to_ensure,
            accounts,
            namespaces,
            caches_synced: Vec::new(),
            handlers: ServiceAccountEventHandlers {
                queue: queue.clone(),
            },
            queue,
            client,
        }
    }

    /// The handlers registered with both informers.
    pub fn event_handlers(&self) -> &ServiceAccountEventHandlers {
        &self.handlers
    }

    /// The work queue of namespace names.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Waits for both caches to sync, then runs `workers` workers until `cancel` fires, as
    /// upstream's `Run` (kube-controller-manager passes [`SERVICE_ACCOUNT_WORKERS`]). On
    /// cancellation the queue shuts down and `run` returns once every worker has stopped.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        run_controller(
            CONTROLLER_NAME,
            "service account controller",
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

/// Both informers' handlers: a namespace added or updated, or a ServiceAccount deleted, queues
/// the namespace's name. Cheap to clone (shares the queue).
#[derive(Clone)]
pub struct ServiceAccountEventHandlers {
    /// The controller's queue.
    queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for ServiceAccountEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountEventHandlers")
            .finish_non_exhaustive()
    }
}

impl ServiceAccountEventHandlers {
    fn enqueue(&self, name: Option<&str>) {
        match name.filter(|n| !n.is_empty()) {
            Some(name) => self.queue.add(name.to_owned()),
            None => tracing::error!("Couldn't get the namespace of an object without one"),
        }
    }
}

impl ResourceEventHandler<Namespace> for ServiceAccountEventHandlers {
    /// Upstream's `namespaceAdded`.
    fn on_add(&self, namespace: Arc<Namespace>, _is_in_initial_list: bool) {
        self.enqueue(namespace.metadata.name.as_deref());
    }

    /// Upstream's `namespaceUpdated` (also resyncs and relists).
    fn on_update(&self, _old: Arc<Namespace>, new: Arc<Namespace>) {
        self.enqueue(new.metadata.name.as_deref());
    }
}

impl ResourceEventHandler<ServiceAccount> for ServiceAccountEventHandlers {
    /// Upstream's `serviceAccountDeleted`: the namespace may need the account again.
    fn on_delete(&self, account: DeletedObject<ServiceAccount>) {
        self.enqueue(account.object().metadata.namespace.as_deref());
    }
}

// ---------------------------------------------------------------------------------------------
// Worker wiring and sync
// ---------------------------------------------------------------------------------------------

impl ServiceAccountsController {
    /// Takes one name and syncs it through the shared worker: forgotten on success, requeued
    /// rate-limited on failure or panic. False once the queue has shut down.
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

    /// Syncs namespace `key` (its name), as upstream's `syncNamespace`: nothing for a namespace
    /// gone from the cache or not `Active`; otherwise each wanted account missing from the
    /// ServiceAccount cache is created. AlreadyExists and NamespaceTerminating answers are not
    /// failures; every other failed creation is returned (all of them, aggregated).
    pub async fn sync(&self, key: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = self.sync_namespace(key).await;
        tracing::debug!(namespace = key, duration = ?start.elapsed(), "Finished syncing namespace");
        result
    }

    async fn sync_namespace(&self, key: &str) -> Result<()> {
        let Some(namespace) = self.namespaces.get_by_key(key) else {
            return Ok(());
        };
        let phase = namespace.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase != Some("Active") {
            // Nothing is created in a namespace that is not active.
            return Ok(());
        }
        let ns = namespace.metadata.name.as_deref().unwrap_or(key);
        let mut failures = Vec::new();
        for wanted in &self.to_ensure {
            let name = wanted.metadata.name.as_deref().unwrap_or_default();
            if self.accounts.get_by_key(&format!("{ns}/{name}")).is_some() {
                continue;
            }
            let mut account = wanted.clone();
            account.metadata.namespace = Some(ns.to_owned());
            match self.client.create(ns, &account).await {
                Ok(_) => {}
                Err(err) if err.is_already_exists() || err.is_namespace_terminating() => {}
                Err(source) => failures.push(Error::Create {
                    namespace: ns.to_owned(),
                    name: name.to_owned(),
                    source,
                }),
            }
        }
        match Error::aggregate(failures) {
            None => Ok(()),
            Some(err) => Err(err),
        }
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
