//! The bootstrap signer: keeps `kube-public/cluster-info` signed by every bootstrap token that may sign it, as upstream's `bootstrap.Signer` (`bootstrapsigner.go`).
//!
//! Any change to `cluster-info` or to a bootstrap token Secret in `kube-system` enqueues the
//! one key; a sync computes the detached JWS of the ConfigMap's `kubeconfig` for each valid
//! signing token, stores it as `jws-kubeconfig-<token-id>`, drops the signatures of tokens
//! that no longer sign, and updates the ConfigMap only if a signature changed.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcm_machinery::controller::clock::{Clock, system_clock};
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::lister::Lister;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedInformerFactory, all_synced,
};
use kcm_machinery::labels::Selector;
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::client::{ApiBootstrapClient, BootstrapClient};
use super::token::{
    CONFIG_MAP_NAME, CONFIG_MAP_NAMESPACE, JWS_SIGNATURE_KEY_PREFIX, KUBECONFIG_KEY,
    SECRET_TYPE_BOOTSTRAP_TOKEN, TOKEN_SECRET_NAMESPACE, detached_signature, signing_token,
};
use super::{Error, Result};

/// The controller's name in logs and `--controllers`.
pub const CONTROLLER_NAME: &str = "bootstrap-signer-controller";

/// `bootstrapsigner` (the old `--controllers` name).
pub const CONTROLLER_ALIAS: &str = "bootstrapsigner";

/// The work queue's name in the `workqueue_*` metrics, upstream's.
pub const QUEUE_NAME: &str = "bootstrap_signer_queue";

/// As upstream: every error requeued rate-limited.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("error signing cluster-info");

/// Signs `cluster-info` with the bootstrap tokens, as upstream's `Signer`.
pub struct BootstrapSigner {
    /// The ConfigMap update. Test seam: [`super::FakeBootstrapClient`].
    client: Arc<dyn BootstrapClient>,
    /// The ConfigMap cache.
    config_maps: Lister<ConfigMap>,
    /// The Secret cache.
    secrets: Lister<Secret>,
    /// Whether both informers have synced; empty over bare caches.
    caches_synced: Vec<InformerSynced>,
    /// The one key, `kube-public/cluster-info`.
    queue: RateLimitingQueue<String>,
    /// Now (token expiration).
    clock: Clock,
    /// The informer-facing handlers.
    handlers: SignerHandlers,
}

impl std::fmt::Debug for BootstrapSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapSigner")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl BootstrapSigner {
    /// The controller kube-controller-manager runs, over the factory's ConfigMap and Secret
    /// informers.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let config_maps = factory.informer_for::<ConfigMap>();
        let secrets = factory.informer_for::<Secret>();
        let mut controller = Self::with_cache(
            config_maps.indexer().clone(),
            secrets.indexer().clone(),
            Arc::new(ApiBootstrapClient::new(client)),
            system_clock(),
            metrics,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(&config_maps, controller.handlers.clone())
            .register(&secrets, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over bare caches and `clock` (unit tests fill them and call the handlers
    /// and [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_cache(
        config_maps: Indexer<ConfigMap>,
        secrets: Indexer<Secret>,
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
            config_maps: Lister::new(config_maps),
            secrets: Lister::new(secrets),
            caches_synced: Vec::new(),
            handlers: SignerHandlers {
                queue: queue.clone(),
            },
            queue,
            clock,
        }
    }

    /// The handlers to register with both informers.
    pub fn event_handlers(&self) -> &SignerHandlers {
        &self.handlers
    }

    /// The work queue.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for both caches, then signs with one worker until `cancel` fires.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        run_controller(
            CONTROLLER_NAME,
            "bootstrap signer controller",
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

    /// The tokens that may sign now: token ID to token secret (upstream's `getTokens`).
    fn tokens(&self) -> BTreeMap<String, String> {
        let now = (self.clock)();
        self.secrets
            .list(TOKEN_SECRET_NAMESPACE, &Selector::everything())
            .iter()
            .filter(|s| s.type_.as_deref() == Some(SECRET_TYPE_BOOTSTRAP_TOKEN))
            .filter_map(|s| signing_token(s, now))
            .collect()
    }

    /// Re-signs `cluster-info` (upstream's `signConfigMap`); the key is always the one
    /// ConfigMap's.
    pub async fn sync(&self, _key: &str) -> Result<()> {
        let Some(original) = self.config_maps.get(CONFIG_MAP_NAMESPACE, CONFIG_MAP_NAME) else {
            return Ok(());
        };
        let mut data = original.data.clone().unwrap_or_default();
        let Some(content) = data.get(KUBECONFIG_KEY).cloned() else {
            tracing::debug!(
                "No {KUBECONFIG_KEY} key in {CONFIG_MAP_NAMESPACE}/{CONFIG_MAP_NAME} configMap"
            );
            return Ok(());
        };
        // The signatures there now, taken out of the new data.
        let mut old: BTreeMap<String, String> = BTreeMap::new();
        data.retain(
            |key, value| match key.strip_prefix(JWS_SIGNATURE_KEY_PREFIX) {
                Some(id) => {
                    old.insert(id.to_owned(), std::mem::take(value));
                    false
                }
                None => true,
            },
        );
        let mut changed = false;
        for (id, token_secret) in self.tokens() {
            let signature = detached_signature(&content, &id, &token_secret);
            if old.remove(&id).as_deref() != Some(signature.as_str()) {
                changed = true;
            }
            data.insert(format!("{JWS_SIGNATURE_KEY_PREFIX}{id}"), signature);
        }
        // Signatures left over belong to tokens that no longer sign.
        if !old.is_empty() {
            changed = true;
        }
        if !changed {
            return Ok(());
        }
        let mut updated = (*original).clone();
        updated.data = Some(data);
        self.client
            .update_config_map(&updated)
            .await
            .map_err(|source| Error::Update { source })
    }
}

/// The handlers of both informers: `cluster-info` and bootstrap token Secrets in
/// `kube-system` enqueue the ConfigMap's key.
#[derive(Clone)]
pub struct SignerHandlers {
    queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for SignerHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignerHandlers").finish_non_exhaustive()
    }
}

impl SignerHandlers {
    fn enqueue(&self) {
        self.queue
            .add(format!("{CONFIG_MAP_NAMESPACE}/{CONFIG_MAP_NAME}"));
    }

    fn is_cluster_info(cm: &ConfigMap) -> bool {
        cm.metadata.namespace.as_deref() == Some(CONFIG_MAP_NAMESPACE)
            && cm.metadata.name.as_deref() == Some(CONFIG_MAP_NAME)
    }

    fn is_token(secret: &Secret) -> bool {
        secret.type_.as_deref() == Some(SECRET_TYPE_BOOTSTRAP_TOKEN)
            && secret.metadata.namespace.as_deref() == Some(TOKEN_SECRET_NAMESPACE)
    }
}

impl ResourceEventHandler<ConfigMap> for SignerHandlers {
    fn on_add(&self, cm: Arc<ConfigMap>, _is_in_initial_list: bool) {
        if Self::is_cluster_info(&cm) {
            self.enqueue();
        }
    }

    fn on_update(&self, _old: Arc<ConfigMap>, new: Arc<ConfigMap>) {
        if Self::is_cluster_info(&new) {
            self.enqueue();
        }
    }

    fn on_delete(&self, _obj: DeletedObject<ConfigMap>) {}
}

impl ResourceEventHandler<Secret> for SignerHandlers {
    fn on_add(&self, secret: Arc<Secret>, _is_in_initial_list: bool) {
        if Self::is_token(&secret) {
            self.enqueue();
        }
    }

    fn on_update(&self, _old: Arc<Secret>, new: Arc<Secret>) {
        if Self::is_token(&new) {
            self.enqueue();
        }
    }

    fn on_delete(&self, obj: DeletedObject<Secret>) {
        if Self::is_token(obj.object()) {
            self.enqueue();
        }
    }
}

#[cfg(test)]
#[path = "signer_tests.rs"]
mod tests;
