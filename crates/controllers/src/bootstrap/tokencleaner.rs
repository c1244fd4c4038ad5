//! The token cleaner: deletes bootstrap token Secrets in `kube-system` once their `expiration` has passed, as upstream's `bootstrap.TokenCleaner` (`tokencleaner.go`).
//!
//! Every added or updated token Secret is enqueued; a sync deletes an expired one (its UID as
//! precondition, so a recreated Secret of the same name survives; NotFound and Conflict are
//! not errors) and requeues one that expires later for the moment it does.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kcm_machinery::controller::clock::{Clock, system_clock};
use kcm_machinery::controller::{ApiStatus, ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::lister::Lister;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::client::{ApiBootstrapClient, BootstrapClient};
use super::token::{SECRET_TYPE_BOOTSTRAP_TOKEN, TOKEN_SECRET_NAMESPACE, expiration};
use super::{Error, Result};

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "token-cleaner-controller";

/// `tokencleaner` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "tokencleaner";

/// The work queue's name in the `workqueue_*` metrics, upstream's.
pub const QUEUE_NAME: &str = "token_cleaner";

/// As upstream's `processNextWorkItem`: every error requeued rate-limited.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("Sync failed");

/// Deletes expired bootstrap token Secrets, as upstream's `TokenCleaner`.
pub struct TokenCleaner {
    /// The delete. Test seam: [`super::FakeBootstrapClient`].
    client: Arc<dyn BootstrapClient>,
    /// The Secret cache (read only).
    lister: Lister<Secret>,
    /// Whether the Secret informer has synced; empty over a bare cache.
    caches_synced: Vec<InformerSynced>,
    /// Keys of token Secrets to look at.
    queue: RateLimitingQueue<String>,
    /// Now.
    clock: Clock,
    /// The informer-facing handlers.
    handlers: TokenSecretHandlers,
}

impl std::fmt::Debug for TokenCleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCleaner")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl TokenCleaner {
    /// The controller kube-controller-manager runs, over the factory's Secret informer.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let informer = factory.informer_for::<Secret>();
        let mut controller = Self::with_cache(
            informer.indexer().clone(),
            Arc::new(ApiBootstrapClient::new(client)),
            system_clock(),
            metrics,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(&informer, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over a bare cache and `clock` (unit tests fill the cache and call the
    /// handlers and [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_cache(
        cache: Indexer<Secret>,
        client: Arc<dyn BootstrapClient>,
        clock: Clock,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics,
            },
        );
        Self {
            client,
            lister: Lister::new(cache),
            caches_synced: Vec::new(),
            handlers: TokenSecretHandlers {
                queue: queue.clone(),
            },
            queue,
            clock,
        }
    }

    /// The handlers to register with the Secret informer.
    pub fn event_handlers(&self) -> &TokenSecretHandlers {
        &self.handlers
    }

    /// The work queue of Secret keys.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the Secret cache, then cleans with one worker until `cancel` fires, as
    /// upstream's `Run`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        run_controller(
            CONTROLLER_NAME,
            "token cleaner controller",
            &self.queue,
            ERROR_POLICY,
            1,
            &cancel,
            || all_synced(&self.caches_synced),
            sync,
        )
        .await;
    }

    /// Takes one key and syncs it through the shared worker. False once the queue has shut
    /// down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.queue,
            &ERROR_POLICY,
            |key| async move { self.sync(&key).await },
        )
        .await
    }

    /// Deletes the token Secret `key` if it has expired, else requeues it for when it will
    /// (upstream's `syncFunc` and `evalSecret`).
    pub async fn sync(&self, key: &str) -> Result<()> {
        let Some((namespace, name)) = key.split_once('/') else {
            return Ok(());
        };
        let Some(secret) = self.lister.get(namespace, name) else {
            tracing::debug!(secret = key, "Secret has been deleted");
            return Ok(());
        };
        if secret.type_.as_deref() != Some(SECRET_TYPE_BOOTSTRAP_TOKEN) {
            return Ok(());
        }
        let (left, expired) = expiration(&secret, (self.clock)());
        if expired {
            tracing::debug!(secret = key, "Deleting expired secret");
            let uid = secret.metadata.uid.as_deref().filter(|u| !u.is_empty());
            match self.client.delete_secret(namespace, name, uid).await {
                // Already gone, or the UID precondition failed: a new Secret of that name.
                Err(e) if e.is_not_found() || e.is_conflict() => {}
                Err(source) => {
                    // Upstream logs this and does not retry; the next update or resync does.
                    tracing::debug!(secret = key, err = %Error::Delete { secret: key.to_owned(), source }, "Error deleting secret");
                }
                Ok(()) => {}
            }
        } else if let Some(left) = left {
            self.queue.add_after(key.to_owned(), left);
        }
        Ok(())
    }
}

/// The Secret handlers: an added or updated bootstrap token Secret in `kube-system` is
/// enqueued, as upstream's filtered `enqueueSecrets`.
#[derive(Clone)]
pub struct TokenSecretHandlers {
    queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for TokenSecretHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSecretHandlers")
            .finish_non_exhaustive()
    }
}

impl TokenSecretHandlers {
    fn enqueue(&self, secret: &Secret) {
        if secret.type_.as_deref() != Some(SECRET_TYPE_BOOTSTRAP_TOKEN)
            || secret.metadata.namespace.as_deref() != Some(TOKEN_SECRET_NAMESPACE)
        {
            return;
        }
        if let Some(name) = &secret.metadata.name {
            self.queue.add(format!("{TOKEN_SECRET_NAMESPACE}/{name}"));
        }
    }
}

impl ResourceEventHandler<Secret> for TokenSecretHandlers {
    fn on_add(&self, secret: Arc<Secret>, _is_in_initial_list: bool) {
        self.enqueue(&secret);
    }

    fn on_update(&self, _old: Arc<Secret>, new: Arc<Secret>) {
        self.enqueue(&new);
    }

    fn on_delete(&self, _obj: DeletedObject<Secret>) {}
}

#[cfg(test)]
#[path = "tokencleaner_tests.rs"]
mod tests;
