//! SharedIndexInformer: one Reflector + DeltaFIFO + Indexer per resource, fanned out to many
//! handlers, as client-go's `sharedIndexInformer`.
//!
//! ```text
//! ListerWatcher ─► Reflector ─► DeltaFIFO ─pop─► handle_deltas ─► Indexer (the cache)
//!                                                     └─► SharedProcessor ─► listener task ─► handler
//! ```
//!
//! `run` pops deltas one key at a time; for each delta it updates the indexer and hands the
//! matching notification to every handler's buffer, all while holding the DeltaFIFO's lock,
//! so the cache, the queue and the notifications stay consistent. Handlers added after
//! start first get a synthetic add for every cached object.

use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use kube::Resource;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::delta::{Delta, Deltas};
use super::delta_fifo::{DeltaFifo, DeltaFifoOptions};
use super::freshness::{self, Freshness};
use super::handler::ResourceEventHandler;
use super::index::Indexers;
use super::lister::Lister;
use super::lister_watcher::ListerWatcher;
use super::processor::{
    Listener, MINIMUM_RESYNC_PERIOD, Notification, SharedProcessor, determine_resync_period,
};
use super::reflector::{Reflector, ReflectorOptions};
use super::store::{self, Indexer};
use super::transform::{TransformFunc, default_transform};

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why an informer operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The informer has stopped; nothing can be added any more.
    #[error("informer {informer}: cannot {operation}: the informer has stopped")]
    Stopped {
        /// The informer's name.
        informer: String,
        /// What was attempted.
        operation: &'static str,
    },
    /// The setting can only change before the informer starts.
    #[error("informer {informer}: cannot {operation}: the informer has already started")]
    AlreadyStarted {
        /// The informer's name.
        informer: String,
        /// What was attempted.
        operation: &'static str,
    },
    /// Adding indexers failed.
    #[error("informer {informer}: {source}")]
    Indexer {
        /// The informer's name.
        informer: String,
        /// The cache error.
        #[source]
        source: store::Error,
    },
}

/// Something that can tell whether a cache has synced: an informer, or a handler
/// registration (synced once its handler has seen the initial list).
pub trait HasSynced: Send + Sync {
    /// True once synced.
    fn has_synced(&self) -> bool;
}

/// How often [`wait_for_cache_sync`] polls, as client-go's `syncedPollPeriod`.
pub const SYNCED_POLL_PERIOD: Duration = Duration::from_millis(100);

/// Waits until every `synced` reports synced (true) or `cancel` fires (false), as client-go's
/// `WaitForNamedCacheSync`; `controller` names the waiter in logs.
pub async fn wait_for_cache_sync(
    controller: &str,
    cancel: &CancellationToken,
    synced: &[&dyn HasSynced],
) -> bool {
    wait_until_synced(controller, cancel, || synced.iter().all(|s| s.has_synced())).await
}

/// As [`wait_for_cache_sync`], for a caller that knows its sync state as one check (e.g. a
/// list of `InformerSynced` closures that tests replace).
pub async fn wait_until_synced(
    controller: &str,
    cancel: &CancellationToken,
    synced: impl Fn() -> bool,
) -> bool {
    tracing::info!(controller, "waiting for caches to sync");
    loop {
        if synced() {
            tracing::info!(controller, "caches are synced");
            return true;
        }
        tokio::select! {
            _ = cancel.cancelled() => {
                tracing::info!(controller, "unable to sync caches");
                return false;
            }
            _ = tokio::time::sleep(SYNCED_POLL_PERIOD) => {}
        }
    }
}

/// Informer settings, as the arguments of client-go's `NewSharedIndexInformerWithOptions`.
pub struct SharedInformerOptions<K> {
    /// Names the informer (and its Reflector) in logs and errors, e.g. `"v1/Pod"`.
    pub name: String,
    /// The resync period of handlers added with [`SharedIndexInformer::add_event_handler`];
    /// zero for none.
    pub resync_period: Duration,
    /// Index functions besides the built-in `namespace` index.
    pub indexers: Indexers<K>,
    /// Applied to every received object before caching; `None` keeps objects as received.
    /// Defaults to [`default_transform`] (drops `metadata.managedFields`).
    pub transform: Option<TransformFunc<K>>,
    /// Items per list page (0: client-go's default behaviour, see [`ReflectorOptions`]).
    pub page_size: u32,
}

impl<K: Resource + 'static> Default for SharedInformerOptions<K> {
    fn default() -> Self {
        Self {
            name: std::any::type_name::<K>().to_owned(),
            resync_period: Duration::ZERO,
            indexers: Indexers::new(),
            transform: Some(default_transform()),
            page_size: 0,
        }
    }
}

/// A shared, indexed, eventually consistent cache of one resource, kept up to date by a
/// list/watch, that notifies any number of handlers, as client-go's `SharedIndexInformer`.
///
/// Cheap to clone: clones are the same informer. Typical use: get it from a
/// [`super::SharedInformerFactory`], add handlers and indexers, start the factory, wait for
/// [`HasSynced`], then read through [`SharedIndexInformer::lister`].
pub struct SharedIndexInformer<K: Clone> {
    inner: Arc<Inner<K>>,
}

impl<K: Clone> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K: Clone> fmt::Debug for SharedIndexInformer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("name", &self.inner.name)
            .finish()
    }
}

struct Inner<K: Clone> {
    name: String,
    lister_watcher: Arc<dyn ListerWatcher<K>>,
    /// The cache. Written only by `handle_deltas` (under the DeltaFIFO's lock).
    indexer: Indexer<K>,
    processor: SharedProcessor<K>,
    /// Held while deltas are applied and distributed, and while a late handler joins, so a
    /// joining handler sees each object exactly once (as client-go's `blockDeltas`).
    block_deltas: Mutex<()>,
    freshness: Freshness,
    page_size: u32,
    /// Lock order: `state`, then `block_deltas`, then the processor / indexer locks.
    state: Mutex<State<K>>,
}

struct State<K: Clone> {
    started: bool,
    stopped: bool,
    /// How often the Reflector considers a resync: the smallest handler resync period
    /// requested before start (client-go's `resyncCheckPeriod`).
    resync_check_period: Duration,
    default_handler_resync_period: Duration,
    transform: Option<TransformFunc<K>>,
    /// Set by `run`.
    fifo: Option<Arc<DeltaFifo<K>>>,
    /// Set by `run`.
    reflector: Option<Arc<Reflector<K>>>,
}

impl<K: Resource + Clone + Send + Sync + 'static> SharedIndexInformer<K> {
    /// An informer over `lister_watcher` whose handlers resync every `resync_period` (zero:
    /// never), with the default options.
    pub fn new(lister_watcher: impl ListerWatcher<K> + 'static, resync_period: Duration) -> Self {
        Self::with_options(
            Arc::new(lister_watcher),
            SharedInformerOptions {
                resync_period,
                ..SharedInformerOptions::default()
            },
        )
    }

    /// An informer with explicit options.
    pub fn with_options(
        lister_watcher: Arc<dyn ListerWatcher<K>>,
        options: SharedInformerOptions<K>,
    ) -> Self {
        let indexer = Indexer::new();
        if !options.indexers.is_empty()
            && let Err(err) = indexer.add_indexers(options.indexers)
        {
            tracing::error!(informer = %options.name, %err, "ignoring indexers");
        }
        Self {
            inner: Arc::new(Inner {
                name: options.name,
                lister_watcher,
                indexer,
                processor: SharedProcessor::new(),
                block_deltas: Mutex::new(()),
                freshness: Freshness::new(),
                page_size: options.page_size,
                state: Mutex::new(State {
                    started: false,
                    stopped: false,
                    resync_check_period: options.resync_period,
                    default_handler_resync_period: options.resync_period,
                    transform: options.transform,
                    fifo: None,
                    reflector: None,
                }),
            }),
        }
    }

    /// Registers a handler with the informer's default resync period, as client-go's
    /// `AddEventHandler`. Added after start, the handler first receives an add (with
    /// `is_in_initial_list = true`) for every cached object.
    pub fn add_event_handler(
        &self,
        handler: impl ResourceEventHandler<K>,
    ) -> Result<ResourceEventHandlerRegistration<K>> {
        let resync = self.inner.state().default_handler_resync_period;
        self.add_event_handler_with_resync_period(handler, resync)
    }

    /// Registers a handler that gets `on_update(obj, obj)` for every cached object each
    /// `resync_period` (zero: never), as client-go's `AddEventHandlerWithResyncPeriod`.
    /// Periods under a second are raised to a second; before start, a period shorter than
    /// the informer's lowers the informer's resync check period; after start, it is raised
    /// to it.
    pub fn add_event_handler_with_resync_period(
        &self,
        handler: impl ResourceEventHandler<K>,
        resync_period: Duration,
    ) -> Result<ResourceEventHandlerRegistration<K>> {
        let inner = &self.inner;
        let mut state = inner.state();
        if state.stopped {
            return Err(Error::Stopped {
                informer: inner.name.clone(),
                operation: "add an event handler",
            });
        }
        let mut resync_period = resync_period;
        if !resync_period.is_zero() {
            if resync_period < MINIMUM_RESYNC_PERIOD {
                tracing::warn!(informer = %inner.name, ?resync_period, "resync period too small; using 1s");
                resync_period = MINIMUM_RESYNC_PERIOD;
            }
            if resync_period < state.resync_check_period {
                if state.started {
                    tracing::warn!(
                        informer = %inner.name,
                        ?resync_period,
                        check = ?state.resync_check_period,
                        "informer already started; raising the handler's resync period"
                    );
                    resync_period = state.resync_check_period;
                } else {
                    state.resync_check_period = resync_period;
                    inner.processor.resync_check_period_changed(resync_period);
                }
            }
        }
        let listener = Listener::new(
            Arc::new(handler),
            resync_period,
            determine_resync_period(resync_period, state.resync_check_period),
            Instant::now(),
        );
        let registration = ResourceEventHandlerRegistration {
            listener: listener.clone(),
            informer: Arc::downgrade(inner),
        };
        if !state.started {
            inner.processor.add_listener(listener);
            return Ok(registration);
        }
        // Join safely: no deltas are applied while the newcomer catches up on the cache.
        let _block = inner.block_deltas();
        inner.processor.add_listener(listener.clone());
        for obj in inner.indexer.list() {
            listener.add(Notification::Add {
                obj,
                is_in_initial_list: true,
            });
        }
        Ok(registration)
    }

    /// Removes a handler; it receives nothing more, as client-go's `RemoveEventHandler`.
    pub fn remove_event_handler(&self, registration: &ResourceEventHandlerRegistration<K>) {
        let _state = self.inner.state();
        let _block = self.inner.block_deltas();
        self.inner.processor.remove_listener(&registration.listener);
    }

    /// Adds index functions to the cache (objects already cached are indexed too), as
    /// client-go's `AddIndexers`.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<()> {
        let state = self.inner.state();
        if state.stopped {
            return Err(Error::Stopped {
                informer: self.inner.name.clone(),
                operation: "add indexers",
            });
        }
        self.inner
            .indexer
            .add_indexers(indexers)
            .map_err(|source| Error::Indexer {
                informer: self.inner.name.clone(),
                source,
            })
    }

    /// Replaces the transform applied before caching (`None`: keep objects as received), as
    /// client-go's `SetTransform`. Only before start.
    pub fn set_transform(&self, transform: Option<TransformFunc<K>>) -> Result<()> {
        let mut state = self.inner.state();
        if state.started {
            return Err(Error::AlreadyStarted {
                informer: self.inner.name.clone(),
                operation: "set the transform",
            });
        }
        state.transform = transform;
        Ok(())
    }

    /// Runs the informer until `cancel` fires: starts the handlers' tasks and the Reflector,
    /// then applies deltas to the cache and distributes notifications, as client-go's
    /// `sharedIndexInformer.Run`. Runs at most once; a second call returns at once.
    pub async fn run(&self, cancel: CancellationToken) {
        let inner = &self.inner;
        let Some((fifo, reflector)) = inner.start() else {
            tracing::warn!(informer = %inner.name, "the informer has already started; run more than once is not allowed");
            return;
        };
        tracing::debug!(informer = %inner.name, "starting informer");
        // The Reflector and handler tasks stop with `cancel`, and also if this future is
        // dropped without it.
        let cancel = cancel.child_token();
        let _stop_tasks_on_drop = cancel.clone().drop_guard();
        inner.processor.run(cancel.clone());
        let reflector_task = tokio::spawn({
            let reflector = reflector.clone();
            let cancel = cancel.clone();
            async move { reflector.run(cancel).await }
        });
        let mut cancelled = pin!(cancel.cancelled());
        loop {
            tokio::select! {
                biased;
                _ = &mut cancelled => break,
                popped = fifo.pop(|key, deltas, initial| inner.handle_deltas(&key, deltas, initial)) => {
                    if popped.is_err() {
                        break;
                    }
                }
            }
        }
        fifo.close();
        inner.state().stopped = true;
        if let Err(err) = reflector_task.await {
            tracing::error!(informer = %inner.name, %err, "reflector task failed");
        }
        inner.processor.join().await;
        inner.freshness.close();
        tracing::debug!(informer = %inner.name, "stopped informer");
    }

    /// True once the first list has been fully applied to the cache (and handed to the
    /// handlers' buffers), as client-go's `HasSynced`.
    pub fn has_synced(&self) -> bool {
        self.inner.has_synced()
    }

    /// Whether `run` was called.
    pub fn has_started(&self) -> bool {
        self.inner.state().started
    }

    /// Whether `run` has returned (or is returning).
    pub fn is_stopped(&self) -> bool {
        self.inner.state().stopped
    }

    /// The informer's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The cache, as client-go's `GetIndexer`. Read it; never write to it.
    pub fn indexer(&self) -> &Indexer<K> {
        &self.inner.indexer
    }

    /// A typed lister over the cache.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.inner.indexer.clone())
    }

    /// The resourceVersion the Reflector last saw (list, event or bookmark), `""` before the
    /// first list, as client-go's `LastSyncResourceVersion`. The cache may lag behind it;
    /// see [`Self::cache_resource_version`].
    pub fn last_sync_resource_version(&self) -> String {
        let reflector = self.inner.state().reflector.clone();
        reflector
            .map(|r| r.last_sync_resource_version())
            .unwrap_or_default()
    }

    /// The resourceVersion the cache has reached: every event (and bookmark) up to it has
    /// been applied to the indexer and handed to the handlers. resourceVersions are
    /// compared as decimal integers (see [`super::freshness`]).
    pub fn cache_resource_version(&self) -> Option<u64> {
        self.inner.freshness.resource_version()
    }

    /// A handle on the cache's freshness, to wait without holding the informer.
    pub fn freshness(&self) -> Freshness {
        self.inner.freshness.clone()
    }

    /// Returns once the cache has processed an event at or past `resource_version`
    /// (compared as decimal integers), e.g. the resourceVersion a controller's own write
    /// returned, so it never acts on a cache older than that write. Combine with a timeout
    /// or cancellation: for a resource nobody writes to, only bookmarks advance it.
    pub async fn wait_for_resource_version(&self, resource_version: &str) -> freshness::Result<()> {
        self.inner
            .freshness
            .wait_for_resource_version(resource_version)
            .await
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> HasSynced for SharedIndexInformer<K> {
    fn has_synced(&self) -> bool {
        self.inner.has_synced()
    }
}

impl<K: Clone> Drop for Inner<K> {
    fn drop(&mut self) {
        // Nobody can advance the cache any more: fail pending waits.
        self.freshness.close();
    }
}

impl<K: Clone> Inner<K> {
    fn state(&self) -> MutexGuard<'_, State<K>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn block_deltas(&self) -> MutexGuard<'_, ()> {
        self.block_deltas
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn has_synced(&self) -> bool {
        let fifo = self.state().fifo.clone();
        fifo.is_some_and(|f| f.has_synced())
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> Inner<K> {
    /// Builds the DeltaFIFO and Reflector and marks the informer started; `None` if it
    /// already was.
    fn start(self: &Arc<Self>) -> Option<(Arc<DeltaFifo<K>>, Arc<Reflector<K>>)> {
        let mut state = self.state();
        if state.started {
            return None;
        }
        let fifo = Arc::new(DeltaFifo::new(DeltaFifoOptions {
            known_objects: Some(Arc::new(self.indexer.clone())),
            transform: state.transform.clone(),
            freshness: Some(self.freshness.clone()),
        }));
        let weak: Weak<Self> = Arc::downgrade(self);
        let reflector = Arc::new(Reflector::new(
            self.lister_watcher.clone(),
            fifo.clone(),
            ReflectorOptions {
                name: self.name.clone(),
                type_description: self.name.clone(),
                resync_period: state.resync_check_period,
                should_resync: Some(Arc::new(move || {
                    weak.upgrade()
                        .is_some_and(|inner| inner.processor.should_resync())
                })),
                page_size: self.page_size,
            },
        ));
        state.fifo = Some(fifo.clone());
        state.reflector = Some(reflector.clone());
        state.started = true;
        Some((fifo, reflector))
    }

    /// Applies one key's deltas to the cache and notifies the handlers, as client-go's
    /// `HandleDeltas`/`processDeltas`. Runs under the DeltaFIFO's lock.
    fn handle_deltas(&self, key: &Arc<str>, deltas: Deltas<K>, is_in_initial_list: bool) {
        let _block = self.block_deltas();
        for delta in deltas {
            match delta {
                Delta::Deleted(obj) => {
                    self.indexer.delete_key(key);
                    self.processor.distribute(Notification::Delete(obj), false);
                }
                Delta::Added(obj)
                | Delta::Updated(obj)
                | Delta::Replaced(obj)
                | Delta::Sync(obj) => {
                    match self.indexer.add_with_key(key.clone(), obj.clone()) {
                        Some(old) => {
                            // Unchanged resourceVersion: a resync or a relist of an unchanged
                            // object, only for handlers that are due a resync.
                            let is_sync =
                                old.meta().resource_version == obj.meta().resource_version;
                            self.processor
                                .distribute(Notification::Update { old, new: obj }, is_sync);
                        }
                        None => self.processor.distribute(
                            Notification::Add {
                                obj,
                                is_in_initial_list,
                            },
                            false,
                        ),
                    }
                }
            }
        }
    }
}

/// A registered handler, as client-go's `ResourceEventHandlerRegistration`.
pub struct ResourceEventHandlerRegistration<K: Clone> {
    listener: Arc<Listener<K>>,
    informer: Weak<Inner<K>>,
}

impl<K: Clone> fmt::Debug for ResourceEventHandlerRegistration<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceEventHandlerRegistration")
            .finish_non_exhaustive()
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> ResourceEventHandlerRegistration<K> {
    /// True once the informer has synced and this handler has handled every add of the
    /// initial list (or of its catch-up on joining late), as client-go's
    /// `ResourceEventHandlerRegistration.HasSynced`.
    pub fn has_synced(&self) -> bool {
        // Upstream first: once it has synced, every initial add has been counted.
        let upstream = self
            .informer
            .upgrade()
            .is_some_and(|inner| inner.has_synced());
        upstream && self.listener.initial_adds_handled()
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> HasSynced
    for ResourceEventHandlerRegistration<K>
{
    fn has_synced(&self) -> bool {
        ResourceEventHandlerRegistration::has_synced(self)
    }
}

/// A type-erased informer, so a factory can hold informers of many types.
pub(crate) trait AnyInformer: Send + Sync {
    fn run_boxed(&self, cancel: CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>>;
    fn synced(&self) -> bool;
    fn as_any(&self) -> &(dyn std::any::Any + Send + Sync);
}

impl<K: Resource + Clone + Send + Sync + 'static> AnyInformer for SharedIndexInformer<K> {
    fn run_boxed(&self, cancel: CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let informer = self.clone();
        Box::pin(async move { informer.run(cancel).await })
    }

    fn synced(&self) -> bool {
        self.has_synced()
    }

    fn as_any(&self) -> &(dyn std::any::Any + Send + Sync) {
        self
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};

    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use kube::api::WatchEvent;
    use kube::core::Status;

    use super::*;
    use crate::informer::delta::DeletedObject;
    use crate::informer::handler::ResourceEventHandlerFuncs;
    use crate::informer::testing::{FakeLw, WatchItem, bookmark, channel, ends, hangs, list, pod};

    /// Records every notification as a line.
    #[derive(Default)]
    struct Recorder {
        events: Mutex<Vec<String>>,
    }

    impl Recorder {
        fn events(&self) -> Vec<String> {
            self.events.lock().expect("lock").clone()
        }
        fn push(&self, e: String) {
            self.events.lock().expect("lock").push(e);
        }
    }

    fn name_rv(p: &Pod) -> String {
        format!(
            "{}@{}",
            p.metadata.name.as_deref().unwrap_or_default(),
            p.metadata.resource_version.as_deref().unwrap_or_default()
        )
    }

    impl ResourceEventHandler<Pod> for Recorder {
        fn on_add(&self, obj: Arc<Pod>, initial: bool) {
            self.push(format!("add {} {initial}", name_rv(&obj)));
        }
        fn on_update(&self, old: Arc<Pod>, new: Arc<Pod>) {
            self.push(format!("update {} -> {}", name_rv(&old), name_rv(&new)));
        }
        fn on_delete(&self, obj: DeletedObject<Pod>) {
            let kind = if obj.is_tombstone() {
                "tombstone"
            } else {
                "object"
            };
            self.push(format!("delete {} {kind}", name_rv(obj.object())));
        }
    }

    async fn wait_until(what: &str, cond: impl Fn() -> bool) {
        for _ in 0..10_000 {
            if cond() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting for {what}");
    }

    struct Running {
        informer: SharedIndexInformer<Pod>,
        cancel: CancellationToken,
        task: tokio::task::JoinHandle<()>,
    }

    fn run(informer: &SharedIndexInformer<Pod>) -> Running {
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let informer = informer.clone();
            let cancel = cancel.clone();
            async move { informer.run(cancel).await }
        });
        Running {
            informer: informer.clone(),
            cancel,
            task,
        }
    }

    impl Running {
        async fn stop(self) {
            self.cancel.cancel();
            self.task.await.expect("informer task");
            assert!(self.informer.is_stopped());
        }
    }

    fn informer(lw: Arc<FakeLw>, resync: Duration) -> SharedIndexInformer<Pod> {
        SharedIndexInformer::with_options(
            lw,
            SharedInformerOptions {
                name: "v1/Pod".into(),
                resync_period: resync,
                ..SharedInformerOptions::default()
            },
        )
    }

    fn modified(name: &str, rv: &str) -> WatchItem {
        Ok(WatchEvent::Modified(pod(name, rv)))
    }

    #[tokio::test(start_paused = true)]
    async fn list_and_watch_events_reach_the_cache_and_handlers() {
        let (tx, watch) = channel();
        let lw = FakeLw::new(
            vec![Ok(list("10", None, vec![pod("a", "5"), pod("b", "10")]))],
            vec![watch],
        );
        let inf = informer(lw, Duration::ZERO);
        let rec = Arc::new(Recorder::default());
        let reg = inf.add_event_handler(rec.clone()).expect("add handler");
        assert!(!inf.has_synced());
        let running = run(&inf);
        wait_until("sync", || reg.has_synced()).await;
        assert!(inf.has_synced());
        assert_eq!(inf.indexer().len(), 2);

        tx.unbounded_send(modified("a", "11")).expect("send");
        tx.unbounded_send(Ok(WatchEvent::Deleted(pod("b", "12"))))
            .expect("send");
        tx.unbounded_send(Ok(WatchEvent::Added(pod("c", "13"))))
            .expect("send");
        wait_until("events", || rec.events().len() == 5).await;
        let mut initial = rec.events()[..2].to_vec();
        initial.sort();
        assert_eq!(initial, vec!["add a@5 true", "add b@10 true"]);
        assert_eq!(
            rec.events()[2..],
            ["update a@5 -> a@11", "delete b@12 object", "add c@13 false"]
        );
        let lister = inf.lister();
        assert_eq!(
            lister.get("ns", "a").map(|p| name_rv(&p)).as_deref(),
            Some("a@11")
        );
        assert!(lister.get("ns", "b").is_none());
        assert_eq!(inf.indexer().len(), 2, "the deleted key left the cache");
        assert_eq!(inf.last_sync_resource_version(), "13");
        assert_eq!(inf.cache_resource_version(), Some(13));
        running.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_joining_handler_first_gets_the_cache() {
        // As client-go's TestSharedInformerInitializationRace / late handler join.
        let (tx, watch) = channel();
        let lw = FakeLw::new(
            vec![Ok(list("10", None, vec![pod("a", "5"), pod("b", "10")]))],
            vec![watch],
        );
        let inf = informer(lw, Duration::ZERO);
        let early = Arc::new(Recorder::default());
        inf.add_event_handler(early.clone()).expect("add");
        let running = run(&inf);
        wait_until("sync", || inf.has_synced()).await;
        tx.unbounded_send(modified("a", "11")).expect("send");
        wait_until("early update", || early.events().len() == 3).await;

        let late = Arc::new(Recorder::default());
        let reg = inf.add_event_handler(late.clone()).expect("add late");
        wait_until("late sync", || reg.has_synced()).await;
        let mut got = late.events();
        got.sort();
        assert_eq!(got, vec!["add a@11 true", "add b@10 true"]);

        // Afterwards it sees new events like everyone else.
        tx.unbounded_send(modified("b", "12")).expect("send");
        wait_until("late update", || late.events().len() == 3).await;
        assert_eq!(late.events()[2], "update b@10 -> b@12");
        running.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn relist_after_410_delivers_tombstones_for_missed_deletes() {
        let lw = FakeLw::new(
            vec![
                Ok(list("10", None, vec![pod("a", "5"), pod("b", "10")])),
                // b was deleted and a unchanged while the watch was broken.
                Ok(list("20", None, vec![pod("a", "5")])),
            ],
            vec![
                ends(vec![Ok(WatchEvent::Error(Box::new(Status {
                    code: 410,
                    reason: "Expired".into(),
                    ..Status::default()
                })))]),
                hangs(vec![]),
            ],
        );
        let inf = informer(lw.clone(), Duration::ZERO);
        let rec = Arc::new(Recorder::default());
        inf.add_event_handler(rec.clone()).expect("add");
        let running = run(&inf);
        wait_until("relist", || rec.events().len() == 4).await;
        assert_eq!(lw.list_calls().len(), 2);
        let mut after = rec.events()[2..].to_vec();
        after.sort();
        // The unchanged object is re-delivered as an update with the same resourceVersion
        // (every handler counts as syncing until the first resync check).
        assert_eq!(after, vec!["delete b@10 tombstone", "update a@5 -> a@5"]);
        assert!(inf.lister().get("ns", "b").is_none());
        assert_eq!(inf.last_sync_resource_version(), "20");
        running.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn resync_goes_only_to_handlers_that_are_due() {
        let lw = FakeLw::new(vec![Ok(list("10", None, vec![pod("a", "5")]))], vec![]);
        let inf = informer(lw, Duration::from_secs(60));
        let every_30s = Arc::new(Recorder::default());
        let default_60s = Arc::new(Recorder::default());
        let never = Arc::new(Recorder::default());
        // Lowers the informer's resync check period to 30s (before start).
        inf.add_event_handler_with_resync_period(every_30s.clone(), Duration::from_secs(30))
            .expect("add");
        inf.add_event_handler(default_60s.clone()).expect("add");
        inf.add_event_handler_with_resync_period(never.clone(), Duration::ZERO)
            .expect("add");
        let running = run(&inf);
        wait_until("sync", || inf.has_synced()).await;
        tokio::time::sleep(Duration::from_secs(95)).await;
        let resync = "update a@5 -> a@5";
        assert_eq!(
            every_30s.events(),
            vec!["add a@5 true", resync, resync, resync]
        );
        assert_eq!(default_60s.events(), vec!["add a@5 true", resync]);
        assert_eq!(never.events(), vec!["add a@5 true"]);
        running.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_informer_without_resync_ignores_handler_resync_periods() {
        // As client-go: resyncCheckPeriod 0 means the informer does not support resyncing.
        let lw = FakeLw::new(vec![Ok(list("10", None, vec![pod("a", "5")]))], vec![]);
        let inf = informer(lw, Duration::ZERO);
        let rec = Arc::new(Recorder::default());
        inf.add_event_handler_with_resync_period(rec.clone(), Duration::from_secs(30))
            .expect("add");
        let running = run(&inf);
        wait_until("sync", || inf.has_synced()).await;
        tokio::time::sleep(Duration::from_secs(95)).await;
        assert_eq!(rec.events(), vec!["add a@5 true"]);
        running.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn handler_resync_periods_are_adjusted_like_client_go() {
        let lw = FakeLw::new(vec![Ok(list("10", None, vec![pod("a", "5")]))], vec![]);
        let inf = informer(lw, Duration::from_secs(60));
        // Below the minimum: raised to 1s, and lowers the informer's check period to 1s.
        let fast = Arc::new(Recorder::default());
        inf.add_event_handler_with_resync_period(fast.clone(), Duration::from_millis(10))
            .expect("add");
        let running = run(&inf);
        wait_until("sync", || inf.has_synced()).await;
        tokio::time::sleep(Duration::from_millis(3500)).await;
        assert_eq!(fast.events().len(), 1 + 3, "{:?}", fast.events());
        running.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_handler_loses_one_notification_and_keeps_receiving() {
        let (tx, watch) = channel();
        let lw = FakeLw::new(vec![Ok(list("10", None, vec![]))], vec![watch]);
        let inf = informer(lw, Duration::ZERO);
        let rec = Arc::new(Recorder::default());
        let rec2 = rec.clone();
        let handler = ResourceEventHandlerFuncs::<Pod>::new().add_func(move |obj, _| {
            if obj.metadata.name.as_deref() == Some("boom") {
                panic!("handler bug");
            }
            rec2.push(name_rv(&obj));
        });
        inf.add_event_handler(handler).expect("add");
        let running = run(&inf);
        wait_until("sync", || inf.has_synced()).await;
        tx.unbounded_send(Ok(WatchEvent::Added(pod("boom", "11"))))
            .expect("send");
        tx.unbounded_send(Ok(WatchEvent::Added(pod("fine", "12"))))
            .expect("send");
        wait_until("after panic", || rec.events().len() == 1).await;
        assert_eq!(rec.events(), vec!["fine@12"]);
        assert_eq!(inf.indexer().len(), 2);
        running.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_blocked_handler_never_blocks_the_cache_or_other_handlers() {
        let (tx, watch) = channel();
        let lw = FakeLw::new(vec![Ok(list("1", None, vec![]))], vec![watch]);
        let inf = informer(lw, Duration::ZERO);
        let release = Arc::new(AtomicBool::new(false));
        let blocked_seen = Arc::new(Mutex::new(0usize));
        let handler = ResourceEventHandlerFuncs::<Pod>::new().add_func({
            let release = release.clone();
            let seen = blocked_seen.clone();
            move |_, _| {
                // Blocks its thread until released: the worst kind of slow handler.
                while !release.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                *seen.lock().expect("lock") += 1;
            }
        });
        inf.add_event_handler(handler).expect("add");
        let fast = Arc::new(Recorder::default());
        inf.add_event_handler(fast.clone()).expect("add");
        let running = run(&inf);
        wait_until("sync", || inf.has_synced()).await;
        for i in 0..100 {
            tx.unbounded_send(Ok(WatchEvent::Added(pod(
                &format!("p{i}"),
                &(i + 2).to_string(),
            ))))
            .expect("send");
        }
        wait_until("fast handler", || fast.events().len() == 100).await;
        assert_eq!(inf.indexer().len(), 100);
        assert_eq!(*blocked_seen.lock().expect("lock"), 0);
        release.store(true, Ordering::SeqCst);
        wait_until("blocked handler", || {
            *blocked_seen.lock().expect("lock") == 100
        })
        .await;
        running.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_transform_drops_managed_fields_before_caching() {
        let mut p = pod("a", "5");
        p.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        p.metadata.labels = Some(BTreeMap::from([("k".to_owned(), "v".to_owned())]));
        let lw = FakeLw::new(vec![Ok(list("10", None, vec![p]))], vec![]);
        let inf = informer(lw, Duration::ZERO);
        let running = run(&inf);
        wait_until("sync", || inf.has_synced()).await;
        let cached = inf.lister().get("ns", "a").expect("cached");
        assert_eq!(cached.metadata.managed_fields, None);
        assert!(cached.metadata.labels.is_some());
        assert!(matches!(
            inf.set_transform(None),
            Err(Error::AlreadyStarted { .. })
        ));
        running.stop().await;
        assert!(matches!(
            inf.add_event_handler(ResourceEventHandlerFuncs::new()),
            Err(Error::Stopped { .. })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_resource_version_returns_once_the_cache_processed_it() {
        let (tx, watch) = channel();
        let lw = FakeLw::new(vec![Ok(list("10", None, vec![pod("a", "5")]))], vec![watch]);
        let inf = informer(lw, Duration::ZERO);
        let running = run(&inf);
        inf.wait_for_resource_version("10").await.expect("list rv");
        assert!(inf.lister().get("ns", "a").is_some());

        let waiter = tokio::spawn({
            let inf = inf.clone();
            async move { inf.wait_for_resource_version("12").await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiter.is_finished());
        // Our own write comes back as RV 12.
        tx.unbounded_send(modified("a", "12")).expect("send");
        waiter.await.expect("join").expect("reached");
        assert_eq!(
            inf.lister().get("ns", "a").map(|p| name_rv(&p)).as_deref(),
            Some("a@12"),
            "the cache holds the write once the wait returns"
        );
        // A bookmark moves freshness along without any object change.
        tx.unbounded_send(Ok(bookmark("30"))).expect("send");
        inf.wait_for_resource_version("30").await.expect("bookmark");
        assert_eq!(inf.cache_resource_version(), Some(30));
        running.stop().await;
        assert!(inf.wait_for_resource_version("31").await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_run_future_stops_the_reflector() {
        let lw = FakeLw::new(vec![], vec![]);
        *lw.always_fail_list.lock().expect("lock") = Some(500);
        let inf = informer(lw.clone(), Duration::ZERO);
        let task = tokio::spawn({
            let inf = inf.clone();
            async move { inf.run(CancellationToken::new()).await }
        });
        tokio::time::sleep(Duration::from_secs(10)).await;
        task.abort();
        let _ = task.await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        let calls = lw.list_calls().len();
        assert!(calls > 0);
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert_eq!(lw.list_calls().len(), calls, "the reflector kept running");
    }

    #[tokio::test(start_paused = true)]
    async fn a_removed_handler_receives_nothing_more() {
        let (tx, watch) = channel();
        let lw = FakeLw::new(vec![Ok(list("10", None, vec![]))], vec![watch]);
        let inf = informer(lw, Duration::ZERO);
        let rec = Arc::new(Recorder::default());
        let reg = inf.add_event_handler(rec.clone()).expect("add");
        let running = run(&inf);
        wait_until("sync", || inf.has_synced()).await;
        tx.unbounded_send(Ok(WatchEvent::Added(pod("a", "11"))))
            .expect("send");
        wait_until("add", || rec.events().len() == 1).await;
        inf.remove_event_handler(&reg);
        tx.unbounded_send(Ok(WatchEvent::Added(pod("b", "12"))))
            .expect("send");
        inf.wait_for_resource_version("12")
            .await
            .expect("processed");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(rec.events(), vec!["add a@11 false"]);
        running.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_cache_sync_waits_for_every_informer_or_cancel() {
        let lw = FakeLw::new(vec![Ok(list("10", None, vec![pod("a", "5")]))], vec![]);
        let inf = informer(lw, Duration::ZERO);
        let reg = inf
            .add_event_handler(ResourceEventHandlerFuncs::new())
            .expect("add");
        let cancel = CancellationToken::new();
        let running = run(&inf);
        assert!(wait_for_cache_sync("test", &cancel, &[&inf, &reg]).await);

        // A source that never lists never syncs: cancellation ends the wait.
        let never = informer(FakeLw::new(vec![], vec![]), Duration::ZERO);
        let running2 = run(&never);
        let waiter = tokio::spawn({
            let cancel = cancel.clone();
            let never = never.clone();
            async move { wait_for_cache_sync("test", &cancel, &[&never]).await }
        });
        tokio::time::sleep(Duration::from_secs(10)).await;
        cancel.cancel();
        assert!(!waiter.await.expect("join"));
        running.stop().await;
        running2.stop().await;
    }
}
