//! The garbage collector: workers deciding, object by object, whether to delete, orphan or wait (upstream `garbagecollector.go`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_machinery::controller::{ApiStatus, ErrorPolicy, process_next_work_item, run_workers};
use kcm_machinery::events::EventRecorder;
use kcm_machinery::informer::SharedInformerFactory;
use kcm_machinery::workqueue::{
    Queue, QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::api::{ObjectMeta, PropagationPolicy};
use prometheus_client::metrics::counter::Counter;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::discovery::{
    DiscoveredResource, GroupResource, GroupVersionResource, RestMapper, deletable_resources,
    discover,
};
use super::graph::{DependentInfo, Graph, NodeSnapshot, ObjectIdentity};
use super::graph_builder::{
    FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN_DEPENDENTS, GraphBuilder, GraphChanges, NodeKey,
    has_finalizer,
};
use super::monitors::Monitors;
use super::operations::{ApiMetadataClient, MetadataClient, Operations};
use super::patch::{
    delete_owner_refs_json_merge, delete_owner_refs_strategic, unblock_owner_refs_json_merge,
    unblock_owner_refs_strategic,
};
use super::uid_cache::ReferenceCache;
use super::{Error, Result};

/// The resources the collector never monitors by default: core and `events.k8s.io` events,
/// as upstream's `DefaultIgnoredResources`.
pub fn default_ignored_resources() -> Vec<GroupResource> {
    vec![
        GroupResource::new("", "events"),
        GroupResource::new("events.k8s.io", "events"),
    ]
}

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// kube-controller-manager's name of the controller (`--controllers` accepts it and
/// [`CONTROLLER_ALIAS`]); also the source component of its events.
pub const CONTROLLER_NAME: &str = "garbage-collector-controller";

/// The controller's alias for `--controllers` (upstream's `garbagecollector`).
pub const CONTROLLER_ALIAS: &str = "garbagecollector";

/// The default of `--concurrent-gc-syncs`.
pub const DEFAULT_CONCURRENT_GC_SYNCS: usize = 20;

/// How often discovery is re-read to monitor new resources, and how long `run` waits for the
/// monitors' first sync before collecting anyway (upstream's `syncPeriod` in
/// `startGarbageCollectorController`).
pub const SYNC_PERIOD: Duration = Duration::from_secs(30);

/// The `attemptToDelete` queue's name (its `workqueue_*` metrics' `name` label).
pub const ATTEMPT_TO_DELETE_QUEUE: &str = "garbage_collector_attempt_to_delete";

/// The `attemptToOrphan` queue's name.
pub const ATTEMPT_TO_ORPHAN_QUEUE: &str = "garbage_collector_attempt_to_orphan";

/// The `graph_changes` queue's name.
pub const GRAPH_CHANGES_QUEUE: &str = "garbage_collector_graph_changes";

/// Tuning and wiring of a [`GarbageCollector`].
#[derive(Clone)]
pub struct GarbageCollectorOptions {
    /// Resources never monitored (default: core and `events.k8s.io` events; upstream's
    /// `--gc-ignored-resources` config adds to them).
    pub ignored_resources: Vec<GroupResource>,
    /// Where the three queues record their `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// Counts failed monitor resyncs (upstream's
    /// `garbagecollector_controller_resources_sync_error_total`); register it where the
    /// process serves metrics.
    pub resources_sync_error: Counter,
    /// Discovery re-read period and initial sync timeout (default [`SYNC_PERIOD`]).
    pub sync_period: Duration,
    /// Capacity of the absent-owner cache (default
    /// [`ABSENT_OWNER_CACHE_SIZE`](super::uid_cache::ABSENT_OWNER_CACHE_SIZE), as upstream).
    pub absent_owner_cache_size: usize,
}

impl Default for GarbageCollectorOptions {
    fn default() -> Self {
        Self {
            ignored_resources: default_ignored_resources(),
            metrics: None,
            resources_sync_error: Counter::default(),
            sync_period: SYNC_PERIOD,
            absent_owner_cache_size: super::uid_cache::ABSENT_OWNER_CACHE_SIZE,
        }
    }
}

impl std::fmt::Debug for GarbageCollectorOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GarbageCollectorOptions")
            .field("ignored_resources", &self.ignored_resources)
            .field("metrics", &self.metrics.is_some())
            .field("sync_period", &self.sync_period)
            .finish_non_exhaustive()
    }
}

/// What [`GarbageCollector::attempt_to_delete_item`] did, when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The item was handled (deleted, patched, left alone, or waiting on its dependents).
    Done,
    /// The item does not exist: a virtual delete event was queued for the graph builder
    /// (upstream's `enqueuedVirtualDeleteEventErr`).
    VirtualDeleteEnqueued,
}

/// Upstream's `requeueItem`: a worker's item must be tried again after the rate limiter's
/// delay. The worker has logged why; `Ok(())` is upstream's `forgetItem`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Requeue;

impl std::fmt::Display for Requeue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("requeued")
    }
}

/// How the `attemptToDelete` and `attemptToOrphan` workers requeue an item: rate limited,
/// forever (the worker already logged the reason at its own level), as upstream's
/// `processAttemptToDeleteWorker` and `processAttemptToOrphanWorker`.
const ITEM_ERROR_POLICY_DELETE: ErrorPolicy<NodeKey, Requeue> =
    ErrorPolicy::new("attemptToDelete item requeued").with_requeue_level(tracing::Level::TRACE);
/// As [`ITEM_ERROR_POLICY_DELETE`], for `attemptToOrphan`.
const ITEM_ERROR_POLICY_ORPHAN: ErrorPolicy<String, Requeue> =
    ErrorPolicy::new("attemptToOrphan item requeued").with_requeue_level(tracing::Level::TRACE);

/// An owner reference classified by the owner's live state, as upstream's
/// `classifyReferences`.
#[derive(Debug, Default)]
struct Classified {
    /// The owner exists and is not waiting for its dependents' deletion.
    solid: Vec<OwnerReference>,
    /// The owner does not exist.
    dangling: Vec<OwnerReference>,
    /// The owner exists, is being deleted, and has the `foregroundDeletion` finalizer.
    waiting_for_dependents_deletion: Vec<OwnerReference>,
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// Deletes objects whose owners are all gone, deletes foreground-deleted owners' dependents
/// first, and orphans dependents of owners deleted with the orphan policy, as
/// kube-controller-manager's `GarbageCollector`.
///
/// Build it with [`Self::new`] and [`run`](Self::run) it; it discovers and monitors every
/// resource itself. Tests of the decisions build it with [`Self::with_client`] (no monitors)
/// and feed [`Self::graph_builder`] events directly.
pub struct GarbageCollector {
    /// The API calls (and the REST mapper). Test seam: the [`MetadataClient`] inside.
    ops: Operations,
    /// Builds the graph from events; fills the two queues.
    builder: Arc<GraphBuilder>,
    /// Nodes to examine (maybe garbage, or maybe unblocked). Filled by the graph builder and
    /// by workers (dependents of foreground-deleting owners).
    attempt_to_delete: RateLimitingQueue<NodeKey>,
    /// Owners (by uid) whose dependents must be orphaned.
    attempt_to_orphan: RateLimitingQueue<String>,
    /// Owners known not to exist, shared with the graph builder.
    absent_owner_cache: Arc<ReferenceCache>,
    /// The informers feeding the graph builder; `None` when events are fed by hand (tests).
    monitors: Option<Monitors>,
    /// The client discovery runs through; `None` with no monitors.
    discovery_client: Option<kube::Client>,
    /// Flags and wiring.
    options: GarbageCollectorOptions,
    /// The deletable resources last discovered (upstream's `oldResources` in `Sync`).
    monitored: Mutex<BTreeMap<GroupVersionResource, DiscoveredResource>>,
}

impl std::fmt::Debug for GarbageCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GarbageCollector")
            .field("nodes", &self.builder.graph().len())
            .field("attempt_to_delete", &self.attempt_to_delete.len())
            .field("attempt_to_orphan", &self.attempt_to_orphan.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Constructors
// ---------------------------------------------------------------------------------------------

fn queue_config(name: &str, metrics: &Option<Arc<WorkqueueMetrics>>) -> QueueConfig {
    match metrics {
        Some(m) => QueueConfig::named(name, m.clone()),
        None => QueueConfig::default(),
    }
}

impl GarbageCollector {
    /// The collector kube-controller-manager runs: monitors built from discovery at
    /// [`run`](Self::run), sharing `factory`'s typed informers for the resources kcm's
    /// controllers watch, requests through `client`, `OwnerRefInvalidNamespace` warnings
    /// through `recorder`, as upstream's `NewGarbageCollector`.
    ///
    /// # Panics
    ///
    /// Builds work queues, which spawn timer tasks: call inside a Tokio runtime.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        recorder: Arc<dyn EventRecorder>,
        options: GarbageCollectorOptions,
    ) -> Self {
        let mut gc = Self::with_client(
            Arc::new(ApiMetadataClient::new(client.clone())),
            Arc::new(RestMapper::new()),
            recorder,
            options,
        );
        gc.monitors = Some(Monitors::new(
            client.clone(),
            Some(factory.clone()),
            gc.builder.clone(),
        ));
        gc.discovery_client = Some(client);
        gc
    }

    /// A collector without monitors: requests through `client`, kinds resolved by `mapper`;
    /// feed events to [`Self::graph_builder`] yourself (unit tests, embedding).
    ///
    /// # Panics
    ///
    /// Builds work queues, which spawn timer tasks: call inside a Tokio runtime.
    pub fn with_client(
        client: Arc<dyn MetadataClient>,
        mapper: Arc<RestMapper>,
        recorder: Arc<dyn EventRecorder>,
        options: GarbageCollectorOptions,
    ) -> Self {
        let attempt_to_delete = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            queue_config(ATTEMPT_TO_DELETE_QUEUE, &options.metrics),
        );
        let attempt_to_orphan = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            queue_config(ATTEMPT_TO_ORPHAN_QUEUE, &options.metrics),
        );
        let changes = GraphChanges::new(Queue::with_config(queue_config(
            GRAPH_CHANGES_QUEUE,
            &options.metrics,
        )));
        let absent_owner_cache = Arc::new(ReferenceCache::new(options.absent_owner_cache_size));
        let builder = Arc::new(GraphBuilder::new(
            changes,
            attempt_to_delete.clone(),
            attempt_to_orphan.clone(),
            absent_owner_cache.clone(),
            recorder,
        ));
        Self {
            ops: Operations::new(client, mapper),
            builder,
            attempt_to_delete,
            attempt_to_orphan,
            absent_owner_cache,
            monitors: None,
            discovery_client: None,
            options,
            monitored: Mutex::new(BTreeMap::new()),
        }
    }

    /// The dependency graph (read only).
    pub fn graph(&self) -> &Arc<Graph> {
        self.builder.graph()
    }

    /// The graph builder: feed it events when there are no monitors.
    pub fn graph_builder(&self) -> &Arc<GraphBuilder> {
        &self.builder
    }

    /// The absent-owner cache.
    pub fn absent_owner_cache(&self) -> &Arc<ReferenceCache> {
        &self.absent_owner_cache
    }

    /// The `attemptToDelete` queue.
    pub fn attempt_to_delete_queue(&self) -> &RateLimitingQueue<NodeKey> {
        &self.attempt_to_delete
    }

    /// The `attemptToOrphan` queue.
    pub fn attempt_to_orphan_queue(&self) -> &RateLimitingQueue<String> {
        &self.attempt_to_orphan
    }

    /// The monitored resources (empty before `run` has discovered them).
    pub fn monitored_resources(&self) -> Vec<GroupVersionResource> {
        self.monitors
            .as_ref()
            .map(Monitors::resources)
            .unwrap_or_default()
    }

    /// Whether every monitor has synced (false with no monitors), as upstream's `IsSynced`.
    pub fn is_synced(&self) -> bool {
        self.monitors.as_ref().is_some_and(Monitors::is_synced)
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Runs until `cancel` fires: the graph builder, discovery and the monitors (re-synced
    /// every sync period), then `workers` delete workers and `workers` orphan workers once
    /// the monitors have synced or the sync period has passed, as upstream's `Run` + `Sync`.
    /// Returns once every task has stopped.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tracing::info!(controller = CONTROLLER_ALIAS, "starting controller");
        let mut tasks = JoinSet::new();
        tasks.spawn({
            let gc = self.clone();
            let cancel = cancel.clone();
            async move { gc.builder.run(cancel).await }
        });

        if self.monitors.is_some() {
            // The first discovery: nothing to collect until something is monitored.
            loop {
                let synced = tokio::select! {
                    _ = cancel.cancelled() => break,
                    synced = self.resync_monitors(&cancel) => synced,
                };
                match synced {
                    Ok(n) if n > 0 => break,
                    Ok(_) => tracing::info!("no resources reported by discovery, retrying"),
                    Err(err) => {
                        tracing::error!(%err, "failed to sync resource monitors");
                        // Some monitors failed: run with the others, the sync loop retries.
                        if !self.monitored_resources().is_empty() {
                            break;
                        }
                    }
                }
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = tokio::time::sleep(self.options.sync_period) => {}
                }
            }
            if self.wait_for_sync(&cancel, self.options.sync_period).await {
                tracing::info!("all resource monitors have synced");
            } else {
                tracing::info!("not all resource monitors could be synced, proceeding anyways");
            }
            tasks.spawn({
                let gc = self.clone();
                let cancel = cancel.clone();
                async move { gc.sync_loop(cancel).await }
            });
        }

        if !cancel.is_cancelled() {
            tracing::info!("proceeding to collect garbage");
            self.run_workers(workers, &cancel).await;
        }

        cancel.cancelled().await;
        tracing::info!(controller = CONTROLLER_ALIAS, "shutting down controller");
        self.builder.changes().queue().shut_down();
        self.attempt_to_orphan.shut_down();
        self.attempt_to_delete.shut_down();
        while let Some(joined) = tasks.join_next().await {
            if let Err(err) = joined {
                tracing::error!(%err, "garbage collector task failed");
            }
        }
        if let Some(monitors) = &self.monitors {
            monitors.stop().await;
        }
    }

    /// Runs `workers` `attemptToDelete` and `workers` `attemptToOrphan` workers until `cancel`
    /// fires, then shuts both queues down; an item taken after cancellation is handed back
    /// untouched (no API call after shutdown).
    pub(crate) async fn run_workers(self: &Arc<Self>, workers: usize, cancel: &CancellationToken) {
        let gc = Arc::clone(self);
        let delete = move |key: NodeKey| {
            let gc = Arc::clone(&gc);
            async move { gc.attempt_to_delete_worker(&key).await }
        };
        let gc = Arc::clone(self);
        let orphan = move |uid: String| {
            let gc = Arc::clone(&gc);
            async move { gc.attempt_to_orphan_worker(&uid).await }
        };
        tokio::join!(
            run_workers(
                CONTROLLER_ALIAS,
                &self.attempt_to_delete,
                ITEM_ERROR_POLICY_DELETE,
                workers,
                cancel,
                delete,
            ),
            run_workers(
                CONTROLLER_ALIAS,
                &self.attempt_to_orphan,
                ITEM_ERROR_POLICY_ORPHAN,
                workers,
                cancel,
                orphan,
            ),
        );
    }

    /// Waits until the monitors have synced (true), or `timeout` passes or `cancel` fires.
    async fn wait_for_sync(&self, cancel: &CancellationToken, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.is_synced() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tokio::time::sleep(kcm_machinery::informer::shared_informer::SYNCED_POLL_PERIOD) => {}
            }
        }
    }

    /// Re-reads discovery every sync period and resyncs the monitors when the deletable
    /// resources changed, as upstream's `Sync`.
    async fn sync_loop(&self, cancel: CancellationToken) {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(self.options.sync_period) => {}
            }
            let synced = tokio::select! {
                _ = cancel.cancelled() => return,
                synced = self.resync_monitors(&cancel) => synced,
            };
            if let Err(err) = synced {
                tracing::error!(%err, "failed to sync resource monitors");
            }
        }
    }

    /// One discovery pass: refreshes the REST mapper and, if the deletable resources changed,
    /// the monitors (started at once). Returns how many resources are monitored. Failed
    /// groups keep their synced monitors, as upstream's partial-discovery handling.
    pub async fn resync_monitors(&self, cancel: &CancellationToken) -> Result<usize> {
        let (Some(monitors), Some(client)) = (&self.monitors, &self.discovery_client) else {
            return Ok(0);
        };
        let discovery = match discover(client).await {
            Ok(d) => d,
            Err(source) => {
                self.options.resources_sync_error.inc();
                return Err(Error::Discovery { source });
            }
        };
        let mut resources = deletable_resources(&discovery, &self.options.ignored_resources);
        if resources.is_empty() {
            self.options.resources_sync_error.inc();
            return Ok(0);
        }
        let failed_group_versions: BTreeSet<&str> =
            discovery.failed.iter().map(|(gv, _)| gv.as_str()).collect();
        let old = self
            .monitored
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (gvr, resource) in &old {
            if failed_group_versions.contains(resource.api_resource.api_version.as_str())
                && monitors.is_resource_synced(gvr)
            {
                resources.insert(gvr.clone(), resource.clone());
            }
        }
        // The mapper learns every version; the monitors only follow the deletable resources.
        let mut mapped: Vec<DiscoveredResource> = discovery.resources.clone();
        mapped.extend(resources.values().cloned());
        self.ops.mapper().replace(mapped.iter());
        if old == resources {
            return Ok(resources.len());
        }
        let added: Vec<String> = resources
            .keys()
            .filter(|k| !old.contains_key(*k))
            .map(ToString::to_string)
            .collect();
        let removed: Vec<String> = old
            .keys()
            .filter(|k| !resources.contains_key(*k))
            .map(ToString::to_string)
            .collect();
        tracing::info!(
            ?added,
            ?removed,
            "syncing garbage collector with updated resources from discovery"
        );
        let errors = monitors.sync(&resources);
        monitors.start(cancel);
        *self
            .monitored
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = resources;
        if !errors.is_empty() {
            self.options.resources_sync_error.inc();
            let text: Vec<String> = errors
                .iter()
                .map(|(gvr, e)| format!("couldn't start monitor for resource {gvr}: {e}"))
                .collect();
            return Err(Error::Monitors(text.join("; ")));
        }
        Ok(monitors.resources().len())
    }

    // -----------------------------------------------------------------------------------------
    // attemptToDelete workers
    // -----------------------------------------------------------------------------------------

    /// Takes one node off `attemptToDelete` and processes it through the shared worker; false
    /// once the queue has shut down, as upstream's `processAttemptToDeleteWorker`.
    pub async fn process_attempt_to_delete_worker(&self) -> bool {
        process_next_work_item(
            CONTROLLER_ALIAS,
            &self.attempt_to_delete,
            &ITEM_ERROR_POLICY_DELETE,
            |key| async move { self.attempt_to_delete_worker(&key).await },
        )
        .await
    }

    /// Decides what to do with a queued node, as upstream's `attemptToDeleteWorker`.
    async fn attempt_to_delete_worker(&self, key: &NodeKey) -> Result<(), Requeue> {
        let Some(item) = self.graph().snapshot(&key.uid) else {
            // Gone from the graph: its deletion was observed, nothing left to do.
            tracing::trace!(uid = %key.uid, "item no longer in the graph, skipping attemptToDeleteItem");
            return Ok(());
        };
        if key.is_virtual && !item.is_virtual {
            // Queued to verify a virtual node; the informer has reported the object since.
            tracing::trace!(item = %item.identity, "item no longer virtual in the graph, skipping attemptToDeleteItem on virtual node");
            return Ok(());
        }
        match self.attempt_to_delete_item(&item).await {
            Ok(DeleteOutcome::VirtualDeleteEnqueued) => Ok(()),
            Err(Error::NamespacedOwnerOfClusterScopedObject { .. }) => Ok(()),
            Err(err) => {
                if matches!(err, Error::RestMapping { .. }) {
                    tracing::error!(%err, item = %item.identity, "error syncing item");
                } else {
                    tracing::error!(%err, "error syncing item {}", item.identity);
                }
                Err(Requeue)
            }
            Ok(DeleteOutcome::Done) => {
                let still_virtual = self
                    .graph()
                    .snapshot(&key.uid)
                    .is_some_and(|n| n.is_virtual);
                if still_virtual {
                    // Not observed by an informer yet: keep checking, or a virtual node for
                    // an object added and removed while a watch was down stays forever
                    // (kubernetes#56121).
                    tracing::trace!(item = %item.identity, "item hasn't been observed via informer yet");
                    Err(Requeue)
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Looks the item up live and deletes it if every owner is gone (or waits, or patches
    /// away dangling references), as upstream's `attemptToDeleteItem`:
    ///
    /// - being deleted (and not waiting on its dependents): nothing, the deletion will be seen;
    /// - missing, or another object under its name: a virtual delete event;
    /// - waiting on its dependents (foreground): delete them first, then drop the finalizer;
    /// - no owner references: nothing;
    /// - some owner exists: remove the references to absent owners and to owners waiting on
    ///   their dependents (else those owners would wait forever);
    /// - an owner is deleting in the foreground and the item has dependents itself: delete
    ///   it in the foreground too (unblocking its own references first if a dependent is
    ///   also foreground-deleting, to break cycles);
    /// - otherwise: delete it, honouring an `orphan` or `foregroundDeletion` finalizer it
    ///   already carries, else in the background.
    pub async fn attempt_to_delete_item(&self, item: &NodeSnapshot) -> Result<DeleteOutcome> {
        tracing::debug!(item = %item.identity, virtual_item = item.is_virtual, "processing item");
        if item.being_deleted && !item.deleting_dependents {
            tracing::trace!(item = %item.identity, "processing item returned at once, because its DeletionTimestamp is non-nil");
            return Ok(DeleteOutcome::Done);
        }
        let latest = match self.ops.get_object(&item.identity).await {
            Ok(latest) => latest,
            Err(err) if err.is_not_found() => {
                // Virtual nodes are made up for owners that may not exist: drop them.
                tracing::trace!(item = %item.identity, "item not found, generating a virtual delete event");
                self.builder.enqueue_virtual_delete_event(&item.identity);
                return Ok(DeleteOutcome::VirtualDeleteEnqueued);
            }
            Err(err) => return Err(err),
        };
        if latest.uid.as_deref() != Some(item.identity.uid.as_str()) {
            tracing::trace!(item = %item.identity, "UID doesn't match, item not found, generating a virtual delete event");
            self.builder.enqueue_virtual_delete_event(&item.identity);
            return Ok(DeleteOutcome::VirtualDeleteEnqueued);
        }
        if item.deleting_dependents {
            self.process_deleting_dependents_item(item).await?;
            return Ok(DeleteOutcome::Done);
        }
        let owner_references = latest.owner_references.clone().unwrap_or_default();
        if owner_references.is_empty() {
            tracing::debug!(item = %item.identity, "item doesn't have an owner, continue on next item");
            return Ok(DeleteOutcome::Done);
        }
        let classified = self.classify_references(item, &owner_references).await?;
        tracing::trace!(item = %item.identity, ?classified, "classify item's references");
        let resource_version = latest.resource_version.clone().unwrap_or_default();

        if !classified.solid.is_empty() {
            tracing::debug!(item = %item.identity, "item has at least one existing owner, will not garbage collect");
            if classified.dangling.is_empty()
                && classified.waiting_for_dependents_deletion.is_empty()
            {
                return Ok(DeleteOutcome::Done);
            }
            // References to owners waiting on their dependents go too, or those owners would
            // keep their foregroundDeletion finalizer forever.
            let owner_uids: Vec<String> = classified
                .dangling
                .iter()
                .chain(&classified.waiting_for_dependents_deletion)
                .map(|r| r.uid.clone())
                .collect();
            tracing::debug!(item = %item.identity, ?owner_uids, "remove dangling references and waiting references for item");
            let uids: Vec<&str> = owner_uids.iter().map(String::as_str).collect();
            let strategic = delete_owner_refs_strategic(&item.identity.uid, &uids);
            let uids_for_merge = owner_uids.clone();
            self.ops
                .patch(&item.identity, strategic, move |current: &ObjectMeta| {
                    let uids: Vec<&str> = uids_for_merge.iter().map(String::as_str).collect();
                    delete_owner_refs_json_merge(
                        current.resource_version.as_deref().unwrap_or_default(),
                        current.owner_references.as_deref().unwrap_or_default(),
                        &uids,
                    )
                })
                .await?;
            return Ok(DeleteOutcome::Done);
        }

        let has_dependents = self
            .graph()
            .read()
            .get(&item.identity.uid)
            .is_some_and(|n| !n.dependents().is_empty());
        let policy = if !classified.waiting_for_dependents_deletion.is_empty() && has_dependents {
            let dependents = self.graph().read().dependents_of(&item.identity.uid);
            if let Some(dep) = dependents.iter().find(|d| d.deleting_dependents) {
                // Cycle guard (with false positives, as upstream): make this item's references
                // non-blocking, so its owner need not wait for it while it waits for `dep`.
                tracing::debug!(
                    item = %item.identity,
                    dependent = %dep.identity,
                    "processing item, some of its owners and its dependent have FinalizerDeletingDependents, to prevent potential cycle, its ownerReferences are going to be modified to be non-blocking, then the item is going to be deleted with Foreground"
                );
                let strategic = unblock_owner_refs_strategic(&item.identity.uid, &item.owners);
                let owners = item.owners.clone();
                self.ops
                    .patch(&item.identity, strategic, move |current: &ObjectMeta| {
                        unblock_owner_refs_json_merge(
                            current.resource_version.as_deref().unwrap_or_default(),
                            &owners,
                        )
                    })
                    .await?;
            }
            tracing::debug!(item = %item.identity, "at least one owner of item has FinalizerDeletingDependents, and the item itself has dependents, so it is going to be deleted in Foreground");
            PropagationPolicy::Foreground
        } else if has_finalizer(&latest, FINALIZER_ORPHAN_DEPENDENTS) {
            PropagationPolicy::Orphan
        } else if has_finalizer(&latest, FINALIZER_DELETE_DEPENDENTS) {
            PropagationPolicy::Foreground
        } else {
            PropagationPolicy::Background
        };
        tracing::debug!(item = %item.identity, ?policy, "deleting item");
        match self
            .ops
            .delete_object(
                &item.identity,
                &resource_version,
                &owner_references,
                Some(policy),
            )
            .await
        {
            Ok(()) => Ok(DeleteOutcome::Done),
            Err(err) if err.is_not_found() => {
                self.builder.enqueue_virtual_delete_event(&item.identity);
                Ok(DeleteOutcome::VirtualDeleteEnqueued)
            }
            Err(err) => Err(err),
        }
    }

    /// Whether `reference` names an owner that does not exist (checked with the absent-owner
    /// cache, then a live GET), and the owner's live metadata when it exists, as upstream's
    /// `isDangling`.
    async fn is_dangling(
        &self,
        reference: &OwnerReference,
        item: &NodeSnapshot,
    ) -> Result<(bool, Option<ObjectMeta>)> {
        let mut key = ObjectIdentity::from_owner_reference(reference, "");
        if self.absent_owner_cache.has(&key) {
            tracing::trace!(item = %item.identity, owner = %key, "according to the absentOwnerCache, item's owner does not exist");
            return Ok((true, None));
        }
        key.namespace = item.identity.namespace.clone();
        if self.absent_owner_cache.has(&key) {
            tracing::trace!(item = %item.identity, owner = %key, "according to the absentOwnerCache, item's owner does not exist in namespace");
            return Ok((true, None));
        }
        let mapping = self
            .ops
            .api_resource(&reference.api_version, &reference.kind)?;
        if !mapping.namespaced {
            key.namespace.clear();
        }
        if item.identity.namespace.is_empty() && mapping.namespaced {
            tracing::debug!(item = %item.identity, owner = %key, "item is cluster-scoped, but refers to a namespaced owner");
            return Err(Error::NamespacedOwnerOfClusterScopedObject {
                item: item.identity.to_string(),
                owner: key.to_string(),
            });
        }
        let namespace = if mapping.namespaced {
            item.identity.namespace.as_str()
        } else {
            ""
        };
        let owner = match self
            .ops
            .client()
            .get(&mapping, namespace, &reference.name)
            .await
        {
            Ok(owner) => owner,
            Err(err) if err.is_not_found() => {
                self.absent_owner_cache.add(key);
                tracing::trace!(item = %item.identity, owner = %reference.name, "item's owner is not found");
                return Ok((true, None));
            }
            Err(err) => return Err(Error::api("get", &key, err)),
        };
        if owner.uid.as_deref() != Some(reference.uid.as_str()) {
            tracing::trace!(item = %item.identity, owner = %reference.name, "item's owner is not found, UID mismatch");
            self.absent_owner_cache.add(key);
            return Ok((true, None));
        }
        Ok((false, Some(owner)))
    }

    /// Sorts `references` into solid, dangling and waiting-for-dependents-deletion, as
    /// upstream's `classifyReferences`.
    async fn classify_references(
        &self,
        item: &NodeSnapshot,
        references: &[OwnerReference],
    ) -> Result<Classified> {
        let mut out = Classified::default();
        for reference in references {
            let (dangling, owner) = self.is_dangling(reference, item).await?;
            match owner {
                _ if dangling => out.dangling.push(reference.clone()),
                Some(owner)
                    if owner.deletion_timestamp.is_some()
                        && has_finalizer(&owner, FINALIZER_DELETE_DEPENDENTS) =>
                {
                    out.waiting_for_dependents_deletion.push(reference.clone())
                }
                _ => out.solid.push(reference.clone()),
            }
        }
        Ok(out)
    }

    /// For an owner waiting on its dependents: removes the `foregroundDeletion` finalizer when
    /// no blocking dependent is left, else queues the blocking dependents (those not
    /// themselves waiting), as upstream's `processDeletingDependentsItem`.
    async fn process_deleting_dependents_item(&self, item: &NodeSnapshot) -> Result<()> {
        let blocking: Vec<DependentInfo> = self
            .graph()
            .read()
            .blocking_dependents_of(&item.identity.uid);
        if blocking.is_empty() {
            tracing::debug!(item = %item.identity, "remove DeleteDependents finalizer for item");
            return self
                .ops
                .remove_finalizer(&item.identity, FINALIZER_DELETE_DEPENDENTS)
                .await;
        }
        for dep in blocking.iter().filter(|d| !d.deleting_dependents) {
            tracing::debug!(item = %item.identity, dependent = %dep.identity, "adding dependent to attemptToDelete, because its owner is deletingDependents");
            self.attempt_to_delete.add(NodeKey {
                uid: dep.identity.uid.clone(),
                is_virtual: dep.is_virtual,
            });
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // attemptToOrphan workers
    // -----------------------------------------------------------------------------------------

    /// Takes one owner off `attemptToOrphan`, removes it from its dependents' owner
    /// references, then removes its `orphan` finalizer; requeued on any failure, as upstream's
    /// `processAttemptToOrphanWorker`. False once the queue has shut down.
    pub async fn process_attempt_to_orphan_worker(&self) -> bool {
        process_next_work_item(
            CONTROLLER_ALIAS,
            &self.attempt_to_orphan,
            &ITEM_ERROR_POLICY_ORPHAN,
            |uid| async move { self.attempt_to_orphan_worker(&uid).await },
        )
        .await
    }

    /// Orphans the dependents of one owner, as upstream's `attemptToOrphanWorker`.
    async fn attempt_to_orphan_worker(&self, uid: &str) -> Result<(), Requeue> {
        let (owner, dependents) = {
            let nodes = self.graph().read();
            let Some(owner) = nodes.get(uid) else {
                tracing::trace!(uid, "owner no longer in the graph, nothing to orphan");
                return Ok(());
            };
            (owner.identity().clone(), nodes.dependents_of(uid))
        };
        if let Err(err) = self.orphan_dependents(&owner, &dependents).await {
            tracing::error!(%err, "orphanDependents for {owner} failed");
            return Err(Requeue);
        }
        if let Err(err) = self
            .ops
            .remove_finalizer(&owner, FINALIZER_ORPHAN_DEPENDENTS)
            .await
        {
            tracing::error!(%err, "removeOrphanFinalizer for {owner} failed");
            return Err(Requeue);
        }
        Ok(())
    }

    /// Removes the owner reference to `owner` from every dependent, concurrently; a dependent
    /// already gone is fine, as upstream's `orphanDependents`.
    pub async fn orphan_dependents(
        &self,
        owner: &ObjectIdentity,
        dependents: &[DependentInfo],
    ) -> Result<()> {
        let results = join_all(dependents.iter().map(|dep| async move {
            let strategic = delete_owner_refs_strategic(&dep.identity.uid, &[owner.uid.as_str()]);
            let owner_uid = owner.uid.clone();
            let result = self
                .ops
                .patch(&dep.identity, strategic, move |current: &ObjectMeta| {
                    delete_owner_refs_json_merge(
                        current.resource_version.as_deref().unwrap_or_default(),
                        current.owner_references.as_deref().unwrap_or_default(),
                        &[owner_uid.as_str()],
                    )
                })
                .await;
            match result {
                Err(err) if !err.is_not_found() => {
                    Some(format!("orphaning {} failed, {err}", dep.identity))
                }
                _ => None,
            }
        }))
        .await;
        let errors: Vec<String> = results.into_iter().flatten().collect();
        if !errors.is_empty() {
            return Err(Error::OrphanDependents {
                owner: owner.to_string(),
                errors: errors.join("; "),
            });
        }
        tracing::trace!(%owner, "successfully updated all dependents");
        Ok(())
    }
}

#[cfg(test)]
#[path = "garbagecollector_tests.rs"]
mod tests;
