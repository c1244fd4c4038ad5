//! The root CA publisher: constants, the controller, construction, handlers, worker wiring and the sync (upstream `publisher.go`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_machinery::controller::{ApiStatus, ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    DeletedObject, InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::client::{ApiConfigMapClient, ConfigMapClient};
use super::metrics::PublisherMetrics;
use super::{Error, Result};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// kube-controller-manager's name of this controller.
pub const CONTROLLER_NAME: &str = "root-ca-certificate-publisher-controller";

/// The older name `--controllers` also accepts.
pub const CONTROLLER_ALIAS: &str = "root-ca-cert-publisher";

/// The work queue's name.
pub const QUEUE_NAME: &str = "root_ca_cert_publisher";

/// The published ConfigMap (upstream's `RootCACertConfigMapName`).
pub const ROOT_CA_CERT_CONFIG_MAP_NAME: &str = "kube-root-ca.crt";

/// The data key holding the CA bundle.
pub const ROOT_CA_KEY: &str = "ca.crt";

/// The annotation describing the ConfigMap (upstream's `DescriptionAnnotation`).
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";

/// Upstream's `Description`, word for word: what the ConfigMap is for.
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Workers: one, as kube-controller-manager starts it (`sac.Run(ctx, 1)`).
pub const PUBLISHER_WORKERS: usize = 1;

/// How the workers treat a failed sync, as upstream's `processNextWorkItem`: requeue
/// rate-limited, forever.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("syncing failed");

/// Wiring of a [`Publisher`].
#[derive(Clone, Default)]
pub struct PublisherOptions {
    /// Where the queue records its `workqueue_*{name="root_ca_cert_publisher"}` metrics.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// The `root_ca_cert_publisher_*` metrics (a private set when `None`).
    pub publisher_metrics: Option<Arc<PublisherMetrics>>,
}

impl std::fmt::Debug for PublisherOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublisherOptions").finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Manages the `kube-root-ca.crt` ConfigMap of every namespace, as upstream's `Publisher`.
pub struct Publisher {
    /// The CA bundle to publish (PEM).
    root_ca: String,
    /// ConfigMap writes. Test seam: [`super::FakeConfigMapClient`].
    client: Arc<dyn ConfigMapClient>,
    /// The ConfigMap informer's cache (read only).
    config_maps: Indexer<ConfigMap>,
    /// The informers `run` waits for.
    caches_synced: Vec<InformerSynced>,
    /// Namespace names to sync.
    queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    handlers: PublisherEventHandlers,
    /// Sync counts and durations.
    metrics: Arc<PublisherMetrics>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl Publisher {
    /// The publisher kube-controller-manager runs, over the factory's ConfigMap and Namespace
    /// informers, publishing `root_ca` (PEM), as upstream's `NewPublisher`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        root_ca: &[u8],
        options: PublisherOptions,
    ) -> Self {
        Self::with_informers(
            &factory.config_maps(),
            &factory.namespaces(),
            Arc::new(ApiConfigMapClient::new(client)),
            root_ca,
            options,
        )
    }

    /// A publisher over the given informers, writing through `client`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informers(
        config_maps: &SharedIndexInformer<ConfigMap>,
        namespaces: &SharedIndexInformer<Namespace>,
        client: Arc<dyn ConfigMapClient>,
        root_ca: &[u8],
        options: PublisherOptions,
    ) -> Self {
        let mut publisher =
            Self::with_caches(config_maps.indexer().clone(), client, root_ca, options);
        publisher.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(config_maps, publisher.handlers.clone())
            .register(namespaces, publisher.handlers.clone())
            .finish();
        publisher
    }

    /// A publisher over a bare ConfigMap cache (unit tests).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        config_maps: Indexer<ConfigMap>,
        client: Arc<dyn ConfigMapClient>,
        root_ca: &[u8],
        options: PublisherOptions,
    ) -> Self {
        let config = QueueConfig {
            name: QUEUE_NAME.to_owned(),
            metrics: options.metrics,
        };
        let queue = RateLimitingQueue::with_config(default_controller_rate_limiter(), config);
        Self {
            root_ca: String::from_utf8_lossy(root_ca).into_owned(),
            client,
            config_maps,
            caches_synced: Vec::new(),
            handlers: PublisherEventHandlers {
                queue: queue.clone(),
            },
            queue,
            metrics: options.publisher_metrics.unwrap_or_default(),
        }
    }

    /// The handlers registered with both informers.
    pub fn event_handlers(&self) -> &PublisherEventHandlers {
        &self.handlers
    }

    /// The work queue of namespace names.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// The publisher's metrics.
    pub fn metrics(&self) -> &Arc<PublisherMetrics> {
        &self.metrics
    }

    /// Waits for the caches, then runs `workers` workers until `cancel` fires, as upstream's
    /// `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        run_controller(
            CONTROLLER_NAME,
            "root CA cert publisher controller",
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

/// The ConfigMap and Namespace handlers, as upstream's `configMapDeleted`,
/// `configMapUpdated`, `namespaceAdded` and `namespaceUpdated`. Cheap to clone.
#[derive(Clone)]
pub struct PublisherEventHandlers {
    queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for PublisherEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublisherEventHandlers")
            .finish_non_exhaustive()
    }
}

impl PublisherEventHandlers {
    /// Queues the namespace of a changed or deleted `kube-root-ca.crt`.
    fn config_map_event(&self, config_map: &ConfigMap) {
        if config_map.metadata.name.as_deref() != Some(ROOT_CA_CERT_CONFIG_MAP_NAME) {
            return;
        }
        if let Some(namespace) = config_map
            .metadata
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
        {
            self.queue.add(namespace.to_owned());
        }
    }

    fn namespace_event(&self, namespace: &Namespace) {
        if let Some(name) = namespace.metadata.name.as_deref().filter(|n| !n.is_empty()) {
            self.queue.add(name.to_owned());
        }
    }
}

impl ResourceEventHandler<ConfigMap> for PublisherEventHandlers {
    fn on_update(&self, _old: Arc<ConfigMap>, new: Arc<ConfigMap>) {
        self.config_map_event(&new);
    }

    fn on_delete(&self, config_map: DeletedObject<ConfigMap>) {
        self.config_map_event(config_map.object());
    }
}

impl ResourceEventHandler<Namespace> for PublisherEventHandlers {
    fn on_add(&self, namespace: Arc<Namespace>, _is_in_initial_list: bool) {
        self.namespace_event(&namespace);
    }

    /// Only active namespaces: a terminating one refuses creations anyway.
    fn on_update(&self, _old: Arc<Namespace>, new: Arc<Namespace>) {
        if new.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Active") {
            self.namespace_event(&new);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Worker wiring and sync
// ---------------------------------------------------------------------------------------------

impl Publisher {
    /// Takes one namespace and syncs it through the shared worker. False once the queue has
    /// shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.queue,
            &ERROR_POLICY,
            |key| async move { self.sync(&key).await },
        )
        .await
    }

    /// Syncs namespace `namespace`, as upstream's `syncNamespace`, recording the outcome in
    /// the metrics: creates `kube-root-ca.crt` when missing (a gone or terminating namespace is
    /// not an error), rewrites it when its `ca.crt` or description annotation is off.
    pub async fn sync(&self, namespace: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = self.sync_namespace(namespace).await;
        let code = match &result {
            Ok(()) => 200,
            Err(err) => err
                .api_status()
                .map_or(500, |s| if s.code == 0 { 500 } else { s.code }),
        };
        self.metrics.record(code, start.elapsed().as_secs_f64());
        tracing::debug!(namespace, elapsed = ?start.elapsed(), "Finished syncing namespace");
        result
    }

    fn desired_data(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(ROOT_CA_KEY.to_owned(), self.root_ca.clone())])
    }

    async fn sync_namespace(&self, namespace: &str) -> Result<()> {
        let key = format!("{namespace}/{ROOT_CA_CERT_CONFIG_MAP_NAME}");
        let Some(current) = self.config_maps.get_by_key(&key) else {
            let config_map = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(ROOT_CA_CERT_CONFIG_MAP_NAME.to_owned()),
                    annotations: Some(BTreeMap::from([(
                        DESCRIPTION_ANNOTATION.to_owned(),
                        DESCRIPTION.to_owned(),
                    )])),
                    ..ObjectMeta::default()
                },
                data: Some(self.desired_data()),
                ..ConfigMap::default()
            };
            return match self.client.create(namespace, &config_map).await {
                Ok(_) => Ok(()),
                // Do not retry a create in a namespace that is gone or terminating.
                Err(err) if err.is_not_found() || err.is_namespace_terminating() => Ok(()),
                Err(source) => Err(Error::Create {
                    namespace: namespace.to_owned(),
                    source,
                }),
            };
        };
        let data = self.desired_data();
        let described = current
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
            .is_some_and(|d| !d.is_empty());
        if current.data.as_ref() == Some(&data) && described {
            return Ok(());
        }
        let mut updated = (*current).clone();
        updated.data = Some(data);
        updated
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(DESCRIPTION_ANNOTATION.to_owned(), DESCRIPTION.to_owned());
        self.client
            .update(namespace, &updated)
            .await
            .map(|_| ())
            .map_err(|source| Error::Update {
                namespace: namespace.to_owned(),
                source,
            })
    }
}

#[cfg(test)]
#[path = "publisher_tests.rs"]
mod tests;
