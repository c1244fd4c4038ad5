//! The TTL controller: constants, the controller and its construction, `Run`, the Node event handlers, the worker wiring and the sync (upstream `ttl_controller.go`).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Node;
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::client::{ApiTtlNodeClient, TtlNodeClient};
use super::{Error, Result};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// kube-controller-manager's name of this controller.
pub const CONTROLLER_NAME: &str = "ttl-controller";

/// The older name `--controllers` also accepts.
pub const CONTROLLER_ALIAS: &str = "ttl";

/// The work queue's name in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "ttlcontroller";

/// Workers: five, as kube-controller-manager starts it (`Run(ctx, 5)`).
pub const WORKERS: usize = 5;

/// The annotation the controller owns (upstream's `v1.ObjectTTLAnnotationKey`).
pub const TTL_ANNOTATION: &str = "node.alpha.kubernetes.io/ttl";

/// One cluster-size interval and the TTL it asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TtlBoundary {
    /// Below this many nodes the controller steps down to the previous interval.
    pub size_min: i64,
    /// Above this many nodes it steps up to the next interval.
    pub size_max: i64,
    /// The TTL, in seconds, of this interval.
    pub ttl_seconds: i32,
}

/// Upstream's `ttlBoundaries`. Neighbouring intervals overlap (90–100, 450–500, ...), so a
/// cluster whose size hovers around a boundary keeps its TTL instead of flapping.
pub const TTL_BOUNDARIES: [TtlBoundary; 5] = [
    TtlBoundary {
        size_min: 0,
        size_max: 100,
        ttl_seconds: 0,
    },
    TtlBoundary {
        size_min: 90,
        size_max: 500,
        ttl_seconds: 15,
    },
    TtlBoundary {
        size_min: 450,
        size_max: 1000,
        ttl_seconds: 30,
    },
    TtlBoundary {
        size_min: 900,
        size_max: 2000,
        ttl_seconds: 60,
    },
    TtlBoundary {
        size_min: 1800,
        size_max: i32::MAX as i64,
        ttl_seconds: 300,
    },
];

/// How the workers treat a failed patch, as upstream's `processItem`: requeue rate-limited.
const ERROR_POLICY: ErrorPolicy<String, Error> =
    ErrorPolicy::new("failed to set the ttl annotation");

/// Wiring of a [`TtlController`].
#[derive(Clone, Default)]
pub struct TtlControllerOptions {
    /// Where the queue records its `workqueue_*{name="ttlcontroller"}` metrics.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl std::fmt::Debug for TtlControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlControllerOptions")
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// The cluster size and the TTL it asks for, moved by Node adds and deletes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ClusterSize {
    /// Nodes seen added minus nodes seen deleted.
    pub(super) node_count: i64,
    /// The interval of [`TTL_BOUNDARIES`] the cluster is in; always a valid index.
    pub(super) boundary_step: usize,
    /// `TTL_BOUNDARIES[boundary_step].ttl_seconds`, once a step was taken (0 before).
    pub(super) desired_ttl_seconds: i32,
}

/// Sets the TTL annotation on Nodes by cluster size, as upstream's ttl `Controller`.
pub struct TtlController {
    /// The annotation patch. Test seam: [`super::FakeTtlNodeClient`].
    client: Arc<dyn TtlNodeClient>,
    /// The Node informer's cache (read only).
    nodes: Indexer<Node>,
    /// The informers `run` waits for.
    caches_synced: Vec<InformerSynced>,
    /// Names of Nodes to sync.
    queue: RateLimitingQueue<String>,
    /// The informer-facing handlers; they own the cluster size.
    handlers: TtlEventHandlers,
}

impl std::fmt::Debug for TtlController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlController")
            .field("queue_len", &self.queue.len())
            .field("size", &*self.handlers.size())
            .finish_non_exhaustive()
    }
}

impl TtlController {
    /// The controller kube-controller-manager runs, over the factory's Node informer, as
    /// upstream's `NewTTLController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        options: TtlControllerOptions,
    ) -> Self {
        Self::with_informer(
            &factory.nodes(),
            Arc::new(ApiTtlNodeClient::new(client)),
            options,
        )
    }

    /// A controller over `nodes`, registering its handlers and waiting for it.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informer(
        nodes: &SharedIndexInformer<Node>,
        client: Arc<dyn TtlNodeClient>,
        options: TtlControllerOptions,
    ) -> Self {
        let mut controller = Self::with_cache(nodes.indexer().clone(), client, options);
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(nodes, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over a bare Node cache (unit tests fill it, call the handlers and
    /// [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_cache(
        nodes: Indexer<Node>,
        client: Arc<dyn TtlNodeClient>,
        options: TtlControllerOptions,
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
            nodes,
            caches_synced: Vec::new(),
            handlers: TtlEventHandlers {
                queue: queue.clone(),
                size: Arc::new(Mutex::new(ClusterSize::default())),
            },
            queue,
        }
    }

    /// The handlers registered with the Node informer.
    pub fn event_handlers(&self) -> &TtlEventHandlers {
        &self.handlers
    }

    /// The work queue of Node names.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// The TTL, in seconds, every Node should carry now (upstream's `getDesiredTTLSeconds`).
    pub fn desired_ttl_seconds(&self) -> i32 {
        self.handlers.size().desired_ttl_seconds
    }

    /// Waits for the Node cache, then runs `workers` workers until `cancel` fires, as
    /// upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        run_controller(
            CONTROLLER_NAME,
            "TTL controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            synced,
            sync,
        )
        .await;
    }

    /// Takes one Node and syncs it through the shared worker. False once the queue has shut
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

    /// Syncs Node `name`, as upstream's `updateNodeIfNeeded`: a Node gone from the cache is
    /// done with; one whose annotation already holds the desired TTL is left alone; any other
    /// (no annotation, another number, not a number) is patched.
    pub async fn sync(&self, name: &str) -> Result<()> {
        let Some(node) = self.nodes.get_by_key(name) else {
            return Ok(());
        };
        let desired = self.desired_ttl_seconds();
        if current_ttl_seconds(&node) == Some(desired) {
            return Ok(());
        }
        self.client
            .patch_ttl(name, desired)
            .await
            .map_err(|source| {
                tracing::debug!(node = name, %source, "Failed to change ttl annotation for node");
                Error::Patch {
                    node: name.to_owned(),
                    source,
                }
            })?;
        tracing::debug!(node = name, ttl_seconds = desired, "Changed ttl annotation");
        Ok(())
    }
}

/// The Node's TTL annotation as a number, if it is one (upstream's `getIntFromAnnotation`).
fn current_ttl_seconds(node: &Node) -> Option<i32> {
    let value = node.metadata.annotations.as_ref()?.get(TTL_ANNOTATION)?;
    match value.parse() {
        Ok(ttl) => Some(ttl),
        Err(_) => {
            tracing::info!(
                node = node.metadata.name.as_deref().unwrap_or_default(),
                value = value.as_str(),
                annotation = TTL_ANNOTATION,
                "Could not convert the value with annotation key for the node"
            );
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Event handlers
// ---------------------------------------------------------------------------------------------

/// The Node handlers, as upstream's `addNode`, `updateNode` and `deleteNode`. Cheap to clone.
#[derive(Clone)]
pub struct TtlEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
    /// The cluster size, shared with the controller.
    size: Arc<Mutex<ClusterSize>>,
}

impl std::fmt::Debug for TtlEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlEventHandlers").finish_non_exhaustive()
    }
}

impl TtlEventHandlers {
    fn size(&self) -> MutexGuard<'_, ClusterSize> {
        self.size.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the cluster size (unit tests start from upstream's table rows).
    #[cfg(test)]
    pub(super) fn set_size(&self, size: ClusterSize) {
        *self.size() = size;
    }

    /// A Node appeared: one more node, perhaps the next interval; the Node is queued.
    pub fn add_node(&self, node: &Node) {
        {
            let mut size = self.size();
            size.node_count += 1;
            if size.node_count > TTL_BOUNDARIES[size.boundary_step].size_max
                && size.boundary_step + 1 < TTL_BOUNDARIES.len()
            {
                size.boundary_step += 1;
                size.desired_ttl_seconds = TTL_BOUNDARIES[size.boundary_step].ttl_seconds;
            }
        }
        self.enqueue(node);
    }

    /// A Node changed: queued, so a TTL change reaches every Node within a status period.
    pub fn update_node(&self, node: &Node) {
        self.enqueue(node);
    }

    /// A Node went away: one node fewer, perhaps the previous interval; nothing to sync.
    pub fn delete_node(&self) {
        let mut size = self.size();
        size.node_count -= 1;
        if size.node_count < TTL_BOUNDARIES[size.boundary_step].size_min && size.boundary_step > 0 {
            size.boundary_step -= 1;
            size.desired_ttl_seconds = TTL_BOUNDARIES[size.boundary_step].ttl_seconds;
        }
    }

    fn enqueue(&self, node: &Node) {
        match node.metadata.name.as_deref().filter(|n| !n.is_empty()) {
            Some(name) => self.queue.add(name.to_owned()),
            None => tracing::error!("Couldn't get key for a Node without a name"),
        }
    }
}

impl ResourceEventHandler<Node> for TtlEventHandlers {
    fn on_add(&self, node: Arc<Node>, _is_in_initial_list: bool) {
        self.add_node(&node);
    }

    fn on_update(&self, _old: Arc<Node>, new: Arc<Node>) {
        self.update_node(&new);
    }

    fn on_delete(&self, _node: DeletedObject<Node>) {
        self.delete_node();
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
