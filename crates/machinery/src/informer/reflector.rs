//! Reflector: lists, then watches, and mirrors every change into a store, as client-go's `Reflector`.
//!
//! The Reflector is a loop of two states:
//!
//! ```text
//!            ┌──────────── backoff (800ms doubling to 30s, jittered) ◄─────────┐
//!            ▼                                                                │
//!  List (paged, limit 500 + continue) ──ok──► Watch from the list's RV ──410 / error / very short
//!    │ 410 on the RV: retry at once                │ ▲
//!    │ with RV="" (consistent read)                └─┘ server closed the stream: re-watch
//!    └─ error ───────────────────────────────────────────────────────────────┘  from the last RV
//! ```
//!
//! Watch requests carry a random timeout in [5, 10) minutes and ask for bookmarks; every
//! event and bookmark advances [`Reflector::last_sync_resource_version`], so a re-watch
//! resumes where the last one stopped, and a relist asks for data at least that fresh.
//! Connection refused and 429 on a watch back off and re-watch without relisting. No error
//! makes the loop spin: every relist waits a backoff first, exactly like client-go's
//! `wait.BackoffUntil` around `ListAndWatch`.

use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use kube::Resource;
use kube::api::{ListParams, WatchEvent, WatchParams};
use rand::Rng;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use super::api_errors::{
    is_expired, is_expired_status, is_internal_error, is_not_found, is_too_large_resource_version,
    is_too_many_requests, is_watch_error_retriable,
};
use super::backoff::Backoff;
use super::delta_fifo::DeltaFifo;
use super::keys;
use super::lister_watcher::{ListerWatcher, WatchStream};

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why one list-and-watch attempt ended with an error (the Reflector then backs off and
/// relists; these are reported, never fatal).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The list request failed.
    #[error("{name}: failed to list {type_description}: {source}")]
    List {
        /// The Reflector's name.
        name: String,
        /// What it lists.
        type_description: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The watch request failed.
    #[error("{name}: failed to watch {type_description}: {source}")]
    Watch {
        /// The Reflector's name.
        name: String,
        /// What it watches.
        type_description: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// Default page size of list requests, as client-go's `pager.PageSize`.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// Watch timeouts are random in `[MIN_WATCH_TIMEOUT, 2 × MIN_WATCH_TIMEOUT)`, spreading
/// re-watch load on the API server, as client-go's `minWatchTimeout`.
pub const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// A watch that ends sooner than this without delivering anything is treated as an error.
const VERY_SHORT_WATCH: Duration = Duration::from_secs(1);

/// Where a Reflector writes what it lists and watches: the DeltaFIFO, as client-go's `Store`
/// as the Reflector uses it (plus `ResourceVersionUpdater`).
pub trait ReflectorStore<K>: Send + Sync {
    /// A watch `ADDED` event. Stores that track freshness take the object's resourceVersion
    /// as reached once the event is processed (so do `update` and `delete`).
    fn add(&self, obj: K) -> Result<(), keys::Error>;
    /// A watch `MODIFIED` event.
    fn update(&self, obj: K) -> Result<(), keys::Error>;
    /// A watch `DELETED` event.
    fn delete(&self, obj: K) -> Result<(), keys::Error>;
    /// A full list at `resource_version`.
    fn replace(&self, list: Vec<K>, resource_version: &str);
    /// A periodic resync.
    fn resync(&self);
    /// Called after every bookmark with its resourceVersion (client-go's
    /// `ResourceVersionUpdater`, which is also called after object events; those are covered
    /// by `add`/`update`/`delete` here).
    fn update_resource_version(&self, _resource_version: &str) {}
}

impl<K: Resource + Send + Sync + 'static> ReflectorStore<K> for DeltaFifo<K> {
    fn add(&self, obj: K) -> Result<(), keys::Error> {
        DeltaFifo::add(self, obj)
    }
    fn update(&self, obj: K) -> Result<(), keys::Error> {
        DeltaFifo::update(self, obj)
    }
    fn delete(&self, obj: K) -> Result<(), keys::Error> {
        DeltaFifo::delete(self, obj)
    }
    fn replace(&self, list: Vec<K>, resource_version: &str) {
        DeltaFifo::replace(self, list, resource_version);
    }
    fn resync(&self) {
        DeltaFifo::resync(self);
    }
    fn update_resource_version(&self, resource_version: &str) {
        DeltaFifo::update_resource_version(self, resource_version);
    }
}

/// Decides, when the resync period elapses, whether to resync now (the shared informer asks
/// its handlers), as client-go's `ShouldResyncFunc`.
pub type ShouldResync = Arc<dyn Fn() -> bool + Send + Sync>;

/// Reflector settings, as client-go's `ReflectorOptions`.
#[derive(Clone)]
pub struct ReflectorOptions {
    /// Names the Reflector in logs.
    pub name: String,
    /// What it lists and watches, for logs (e.g. `"v1/Pod"`).
    pub type_description: String,
    /// How often to consider a resync; zero disables resyncs.
    pub resync_period: Duration,
    /// `None` (the default) resyncs every period; otherwise consulted each period.
    pub should_resync: Option<ShouldResync>,
    /// Items per list page; zero picks client-go's behaviour: [`DEFAULT_PAGE_SIZE`], except
    /// that a relist at a specific resourceVersion is not paginated (so a server with a watch
    /// cache can serve it) unless the initial list came back paginated.
    pub page_size: u32,
}

impl Default for ReflectorOptions {
    fn default() -> Self {
        Self {
            name: "reflector".to_owned(),
            type_description: "<unspecified>".to_owned(),
            resync_period: Duration::ZERO,
            should_resync: None,
            page_size: 0,
        }
    }
}

struct RvState {
    /// The resourceVersion of the last list or watch event/bookmark; `""` before the first.
    last_sync_resource_version: String,
    /// Set when a list at `last_sync_resource_version` failed as expired or too large: the
    /// next list then asks for the latest data (`""`).
    unavailable: bool,
    /// Set when a list at `"0"` came back paginated: the server does not serve lists from a
    /// watch cache, so later relists keep paginating.
    paginated_result: bool,
}

/// How one watch stream ended.
enum WatchEnd {
    /// Cancelled.
    Stopped,
    /// The server closed the stream normally (e.g. its timeout): re-watch from the last RV.
    Closed,
    /// The stream ended with an error.
    Error(kube::Error),
    /// Closed within a second without a single event: suspicious, relist after a backoff.
    VeryShort,
}

/// Keeps a store in sync with the API server for one resource (see the module docs).
pub struct Reflector<K: Clone> {
    name: String,
    type_description: String,
    lister_watcher: Arc<dyn ListerWatcher<K>>,
    store: Arc<dyn ReflectorStore<K>>,
    resync_period: Duration,
    should_resync: Option<ShouldResync>,
    page_size: u32,
    rv: Mutex<RvState>,
}

impl<K: Resource + Clone + Send + Sync + 'static> Reflector<K> {
    /// A Reflector feeding `store` from `lister_watcher`.
    pub fn new(
        lister_watcher: Arc<dyn ListerWatcher<K>>,
        store: Arc<dyn ReflectorStore<K>>,
        options: ReflectorOptions,
    ) -> Self {
        Self {
            name: options.name,
            type_description: options.type_description,
            lister_watcher,
            store,
            resync_period: options.resync_period,
            should_resync: options.should_resync,
            page_size: options.page_size,
            rv: Mutex::new(RvState {
                last_sync_resource_version: String::new(),
                unavailable: false,
                paginated_result: false,
            }),
        }
    }

    fn rv_state(&self) -> MutexGuard<'_, RvState> {
        self.rv
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The resourceVersion last observed from a list, watch event or bookmark (`""` before
    /// the first list), as client-go's `LastSyncResourceVersion`. Not synchronized with the
    /// store's consumer: see [`super::freshness`] for what the cache has processed.
    pub fn last_sync_resource_version(&self) -> String {
        self.rv_state().last_sync_resource_version.clone()
    }

    fn set_last_sync_resource_version(&self, rv: &str) {
        let mut state = self.rv_state();
        if state.last_sync_resource_version != rv {
            state.last_sync_resource_version.clear();
            state.last_sync_resource_version.push_str(rv);
        }
    }

    /// Records a watch event object's resourceVersion as the last synced one.
    fn observe_resource_version(&self, obj: &K) {
        if let Some(rv) = obj.meta().resource_version.as_deref()
            && !rv.is_empty()
        {
            self.set_last_sync_resource_version(rv);
        }
    }

    /// The resourceVersion to (re)list at, as client-go's `relistResourceVersion`: `""` (a
    /// consistent read) after an expired one, `"0"` (any cached data) for the first list,
    /// else the last one seen (data at least as fresh as what we have).
    fn relist_resource_version(&self) -> String {
        let state = self.rv_state();
        if state.unavailable {
            String::new()
        } else if state.last_sync_resource_version.is_empty() {
            "0".to_owned()
        } else {
            state.last_sync_resource_version.clone()
        }
    }

    /// Runs list-and-watch until `cancel` fires, backing off between attempts, as client-go's
    /// `Reflector.Run`.
    pub async fn run(&self, cancel: CancellationToken) {
        tracing::debug!(reflector = %self.name, kind = %self.type_description, "starting reflector");
        let mut backoff = Backoff::reflector();
        while !cancel.is_cancelled() {
            if let Err(err) = self.list_and_watch(&cancel, &mut backoff).await {
                tracing::warn!(reflector = %self.name, %err, "list and watch failed");
            }
            let delay = backoff.next_delay();
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = sleep(delay) => {}
            }
        }
        tracing::debug!(reflector = %self.name, kind = %self.type_description, "stopping reflector");
    }

    /// One list, then watches until a relist is needed, as client-go's `ListAndWatch`.
    /// Returns `Ok` when cancelled or when the watch ended in a way that calls for a relist.
    pub async fn list_and_watch(
        &self,
        cancel: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<()> {
        tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            listed = self.list() => listed?,
        }
        self.watch(cancel, backoff).await
    }

    /// Lists everything and replaces the store's content, as client-go's `Reflector.list`.
    async fn list(&self) -> Result<()> {
        let rv = self.relist_resource_version();
        let page_size = {
            let state = self.rv_state();
            if self.page_size != 0 {
                self.page_size
            } else if state.paginated_result || rv.is_empty() || rv == "0" {
                DEFAULT_PAGE_SIZE
            } else {
                0
            }
        };
        let mut result = self.list_pages(&rv, page_size).await;
        if let Err(err) = &result
            && (is_expired(err) || is_too_large_resource_version(err))
        {
            // The RV we asked for is gone (or not there yet): ask for the latest at once.
            self.rv_state().unavailable = true;
            let rv = self.relist_resource_version();
            result = self.list_pages(&rv, page_size).await;
        }
        let (items, list_rv, paginated) = match result {
            Ok(listed) => listed,
            Err(err) => {
                if is_not_found(&err) {
                    // The resource does not exist: an empty list is the truth, and unblocks
                    // anyone waiting for the cache to sync.
                    self.store.replace(Vec::new(), "");
                }
                return Err(Error::List {
                    name: self.name.clone(),
                    type_description: self.type_description.clone(),
                    source: err,
                });
            }
        };
        {
            let mut state = self.rv_state();
            if rv == "0" && paginated {
                state.paginated_result = true;
            }
            state.unavailable = false;
        }
        tracing::debug!(reflector = %self.name, items = items.len(), resource_version = %list_rv, "listed");
        self.store.replace(items, &list_rv);
        self.set_last_sync_resource_version(&list_rv);
        Ok(())
    }

    /// Lists in pages of `page_size` (0: one request) following continue tokens, as
    /// client-go's `ListPager` with `FullListIfExpired`: when a continue token expires
    /// mid-way, falls back to one full list at the requested resourceVersion. Returns the
    /// items, the list's resourceVersion and whether more than one page was needed.
    async fn list_pages(
        &self,
        rv: &str,
        page_size: u32,
    ) -> Result<(Vec<K>, String, bool), kube::Error> {
        let requested_rv = (!rv.is_empty()).then(|| rv.to_owned());
        let mut params = ListParams {
            limit: (page_size > 0).then_some(page_size),
            resource_version: requested_rv.clone(),
            ..ListParams::default()
        };
        let mut items: Vec<K> = Vec::new();
        let mut list_rv: Option<String> = None;
        let mut paginated = false;
        loop {
            let page = match self.lister_watcher.list(&params).await {
                Ok(page) => page,
                Err(err) if is_expired(&err) && params.continue_token.is_some() => {
                    tracing::debug!(reflector = %self.name, "continue token expired; listing in full");
                    let full = ListParams {
                        resource_version: requested_rv,
                        ..ListParams::default()
                    };
                    let list = self.lister_watcher.list(&full).await?;
                    let rv = list.metadata.resource_version.unwrap_or_default();
                    return Ok((list.items, rv, paginated));
                }
                Err(err) => return Err(err),
            };
            if list_rv.is_none() {
                list_rv = Some(page.metadata.resource_version.clone().unwrap_or_default());
            }
            if items.is_empty() {
                items = page.items;
            } else {
                items.extend(page.items);
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                None => return Ok((items, list_rv.unwrap_or_default(), paginated)),
                Some(token) => {
                    params.continue_token = Some(token);
                    // A continue token pins the snapshot; a resourceVersion must not be sent.
                    params.resource_version = None;
                    params.version_match = None;
                    paginated = true;
                }
            }
        }
    }

    /// Watches from the last resourceVersion until a relist is needed, as client-go's
    /// `Reflector.watch`.
    async fn watch(&self, cancel: &CancellationToken, backoff: &mut Backoff) -> Result<()> {
        let mut resync_at = self.next_resync();
        loop {
            if cancel.is_cancelled() {
                return Ok(());
            }
            let start = Instant::now();
            let timeout_secs = {
                let min = MIN_WATCH_TIMEOUT.as_secs();
                rand::rng().random_range(min..2 * min)
            };
            let params = WatchParams {
                timeout: u32::try_from(timeout_secs).ok(),
                bookmarks: true,
                ..WatchParams::default()
            };
            let rv = self.last_sync_resource_version();
            let started = tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                started = self.lister_watcher.watch(&params, &rv) => started,
            };
            let stream = match started {
                Ok(stream) => stream,
                Err(err) if is_watch_error_retriable(&err) => {
                    tracing::debug!(reflector = %self.name, %err, "watch failed; backing off");
                    if self.backoff_or_cancel(cancel, backoff).await {
                        return Ok(());
                    }
                    continue;
                }
                Err(err) => {
                    return Err(Error::Watch {
                        name: self.name.clone(),
                        type_description: self.type_description.clone(),
                        source: err,
                    });
                }
            };
            match self
                .handle_watch(stream, start, cancel, &mut resync_at)
                .await
            {
                WatchEnd::Stopped => return Ok(()),
                WatchEnd::Closed => continue,
                WatchEnd::VeryShort => {
                    tracing::warn!(
                        reflector = %self.name,
                        "very short watch: watch lasted less than a second and no items received"
                    );
                    return Ok(());
                }
                WatchEnd::Error(err) if is_expired(&err) => {
                    // Relist at the last RV: a list at an RV means "at least this fresh",
                    // which the server can still serve after the watch window moved on.
                    tracing::debug!(reflector = %self.name, %err, "watch closed; relisting");
                    return Ok(());
                }
                WatchEnd::Error(err) if is_too_many_requests(&err) => {
                    tracing::debug!(reflector = %self.name, "watch returned 429; backing off");
                    if self.backoff_or_cancel(cancel, backoff).await {
                        return Ok(());
                    }
                }
                WatchEnd::Error(err) => {
                    if is_internal_error(&err) {
                        tracing::warn!(reflector = %self.name, %err, "watch ended with an internal error");
                    } else {
                        tracing::warn!(reflector = %self.name, %err, "watch ended");
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Sleeps one backoff step; true if cancelled meanwhile.
    async fn backoff_or_cancel(&self, cancel: &CancellationToken, backoff: &mut Backoff) -> bool {
        let delay = backoff.next_delay();
        tokio::select! {
            _ = cancel.cancelled() => true,
            _ = sleep(delay) => false,
        }
    }

    fn next_resync(&self) -> Option<Instant> {
        (!self.resync_period.is_zero()).then(|| Instant::now() + self.resync_period)
    }

    /// Applies one watch stream's events to the store, as client-go's `watchHandler`; also
    /// fires periodic resyncs while watching.
    async fn handle_watch(
        &self,
        mut stream: WatchStream<K>,
        start: Instant,
        cancel: &CancellationToken,
        resync_at: &mut Option<Instant>,
    ) -> WatchEnd {
        let mut events = 0usize;
        // Registered once, not once per event.
        let mut cancelled = pin!(cancel.cancelled());
        // One timer for the whole stream, reset after each resync (not one per event).
        let mut resync_timer = pin!(sleep_until(resync_at.unwrap_or_else(Instant::now)));
        loop {
            let next = tokio::select! {
                biased;
                _ = &mut cancelled => return WatchEnd::Stopped,
                _ = &mut resync_timer, if resync_at.is_some() => {
                    if self.should_resync.as_ref().is_none_or(|should| should()) {
                        tracing::trace!(reflector = %self.name, "forcing resync");
                        self.store.resync();
                    }
                    *resync_at = self.next_resync();
                    if let Some(at) = *resync_at {
                        resync_timer.as_mut().reset(at);
                    }
                    continue;
                }
                next = stream.next() => next,
            };
            let event = match next {
                None => break,
                // The connection broke mid-stream: resume from the last RV, as client-go
                // does when its stream decoder hits a read error.
                Some(Err(kube::Error::ReadEvents(err))) => {
                    tracing::debug!(reflector = %self.name, %err, "watch stream read error");
                    break;
                }
                Some(Err(err)) => return WatchEnd::Error(err),
                Some(Ok(event)) => event,
            };
            // As client-go's watchHandler, the resourceVersion advances with every event; it
            // is recorded just before the store op, which saves a copy of the object's RV.
            match event {
                WatchEvent::Added(obj) => {
                    self.observe_resource_version(&obj);
                    if let Err(err) = self.store.add(obj) {
                        tracing::warn!(reflector = %self.name, %err, "unable to add watch event object to store");
                    }
                }
                WatchEvent::Modified(obj) => {
                    self.observe_resource_version(&obj);
                    if let Err(err) = self.store.update(obj) {
                        tracing::warn!(reflector = %self.name, %err, "unable to update watch event object in store");
                    }
                }
                WatchEvent::Deleted(obj) => {
                    self.observe_resource_version(&obj);
                    if let Err(err) = self.store.delete(obj) {
                        tracing::warn!(reflector = %self.name, %err, "unable to delete watch event object from store");
                    }
                }
                // A bookmark only says "the watch has seen everything up to here".
                WatchEvent::Bookmark(bookmark) => {
                    let rv = bookmark.metadata.resource_version;
                    if !rv.is_empty() {
                        self.set_last_sync_resource_version(&rv);
                        self.store.update_resource_version(&rv);
                    }
                }
                WatchEvent::Error(status) => {
                    if is_expired_status(&status) {
                        tracing::debug!(reflector = %self.name, %status, "watch expired");
                    }
                    return WatchEnd::Error(kube::Error::Api(status));
                }
            }
            events += 1;
        }
        if events == 0 && start.elapsed() < VERY_SHORT_WATCH {
            return WatchEnd::VeryShort;
        }
        WatchEnd::Closed
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use k8s_openapi::api::core::v1::Pod;
    use kube::core::Status;

    use super::*;
    use crate::informer::delta::{Delta, DeltaType};
    use crate::informer::delta_fifo::DeltaFifoOptions;
    use crate::informer::store::Indexer;
    use crate::informer::testing::{
        FakeLw, WatchScript, api_error, bookmark, ends, hangs, list, pod,
    };

    struct Harness {
        lw: Arc<FakeLw>,
        fifo: Arc<DeltaFifo<Pod>>,
        reflector: Arc<Reflector<Pod>>,
        cancel: CancellationToken,
        task: tokio::task::JoinHandle<()>,
    }

    fn start(lw: Arc<FakeLw>, options: ReflectorOptions) -> Harness {
        start_with_fifo(
            lw,
            Arc::new(DeltaFifo::new(DeltaFifoOptions::default())),
            options,
        )
    }

    fn start_with_fifo(
        lw: Arc<FakeLw>,
        fifo: Arc<DeltaFifo<Pod>>,
        options: ReflectorOptions,
    ) -> Harness {
        let reflector = Arc::new(Reflector::new(lw.clone(), fifo.clone(), options));
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let reflector = reflector.clone();
            let cancel = cancel.clone();
            async move { reflector.run(cancel).await }
        });
        Harness {
            lw,
            fifo,
            reflector,
            cancel,
            task,
        }
    }

    impl Harness {
        async fn stop(self) {
            self.cancel.cancel();
            self.task.await.expect("reflector task");
        }
    }

    async fn settle() {
        sleep(Duration::from_millis(1)).await;
    }

    async fn drain(fifo: &DeltaFifo<Pod>) -> Vec<(DeltaType, String)> {
        let mut out = Vec::new();
        while !fifo.is_empty() {
            let deltas = fifo.pop(|_, d, _| d).await.expect("pop");
            for d in deltas {
                out.push((
                    d.delta_type(),
                    d.object().metadata.name.clone().unwrap_or_default(),
                ));
            }
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn lists_then_watches_from_the_list_resource_version() {
        let lw = FakeLw::new(
            vec![Ok(list("10", None, vec![pod("a", "5"), pod("b", "10")]))],
            vec![hangs(vec![
                Ok(WatchEvent::Added(pod("c", "11"))),
                Ok(WatchEvent::Modified(pod("a", "12"))),
                Ok(WatchEvent::Deleted(pod("b", "13"))),
            ])],
        );
        let h = start(lw, ReflectorOptions::default());
        settle().await;

        let lists = h.lw.list_calls();
        assert_eq!(lists.len(), 1);
        // The first list may be served from a cache ("0") and is paginated.
        assert_eq!(lists[0].1.resource_version.as_deref(), Some("0"));
        assert_eq!(lists[0].1.limit, Some(DEFAULT_PAGE_SIZE));
        let watches = h.lw.watch_calls();
        assert_eq!(watches.len(), 1);
        assert_eq!(watches[0].2, "10");
        assert!(watches[0].1.bookmarks, "watch must ask for bookmarks");
        let timeout = watches[0].1.timeout.expect("timeout set");
        assert!((300..600).contains(&timeout), "timeout {timeout}s");

        assert_eq!(h.reflector.last_sync_resource_version(), "13");
        assert_eq!(
            drain(&h.fifo).await,
            vec![
                (DeltaType::Replaced, "a".into()),
                (DeltaType::Updated, "a".into()),
                (DeltaType::Replaced, "b".into()),
                (DeltaType::Deleted, "b".into()),
                (DeltaType::Added, "c".into()),
            ]
        );
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn watch_timeouts_are_randomized_in_five_to_ten_minutes() {
        let watches = (0..20)
            .map(|i| ends(vec![Ok(bookmark(&(20 + i).to_string()))]))
            .collect();
        let lw = FakeLw::new(vec![Ok(list("10", None, vec![]))], watches);
        let h = start(lw, ReflectorOptions::default());
        settle().await;
        let timeouts: Vec<u32> =
            h.lw.watch_calls()
                .iter()
                .map(|c| c.1.timeout.expect("timeout"))
                .collect();
        assert_eq!(timeouts.len(), 21);
        assert!(timeouts.iter().all(|t| (300..600).contains(t)));
        assert!(
            timeouts.iter().any(|t| *t != timeouts[0]),
            "timeouts are not randomized: {timeouts:?}"
        );
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn bookmarks_advance_the_resource_version_and_rewatch_resumes_there() {
        let lw = FakeLw::new(
            vec![Ok(list("10", None, vec![pod("a", "10")]))],
            vec![
                ends(vec![Ok(bookmark("15")), Ok(bookmark("20"))]),
                hangs(vec![]),
            ],
        );
        let h = start(lw, ReflectorOptions::default());
        settle().await;
        let watches = h.lw.watch_calls();
        assert_eq!(
            watches.iter().map(|w| w.2.as_str()).collect::<Vec<_>>(),
            vec!["10", "20"],
            "a normally closed watch resumes from the bookmark without relisting"
        );
        assert_eq!(h.lw.list_calls().len(), 1);
        assert_eq!(h.reflector.last_sync_resource_version(), "20");
        // Bookmarks carry no object: nothing but the list is queued.
        assert_eq!(
            drain(&h.fifo).await,
            vec![(DeltaType::Replaced, "a".into())]
        );
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn relists_after_a_410_error_event_with_backoff() {
        let lw = FakeLw::new(
            vec![
                Ok(list("10", None, vec![pod("a", "10"), pod("b", "10")])),
                // b was deleted while we were not watching.
                Ok(list("30", None, vec![pod("a", "25")])),
            ],
            vec![
                ends(vec![
                    Ok(WatchEvent::Modified(pod("a", "12"))),
                    Ok(WatchEvent::Error(Box::new(Status {
                        code: 410,
                        reason: "Expired".into(),
                        message: "too old resource version: 12 (20)".into(),
                        ..Status::default()
                    }))),
                ]),
                hangs(vec![]),
            ],
        );
        // The cache the popped deltas go into, so the relist can tombstone known keys.
        let known = Indexer::<Pod>::new();
        let fifo_known = Arc::new(DeltaFifo::new(DeltaFifoOptions {
            known_objects: Some(Arc::new(known.clone())),
            ..DeltaFifoOptions::default()
        }));
        let h = start_with_fifo(lw, fifo_known.clone(), ReflectorOptions::default());
        settle().await;
        // Pop the first list and the watch event into the cache.
        while !fifo_known.is_empty() {
            fifo_known
                .pop(|_, deltas, _| {
                    for d in deltas {
                        known.add(d.object().clone()).expect("add");
                    }
                })
                .await
                .expect("pop");
        }
        sleep(Duration::from_secs(5)).await;

        let lists = h.lw.list_calls();
        assert_eq!(lists.len(), 2, "410 must cause a relist");
        // The relist asks for data at least as fresh as the last event.
        assert_eq!(lists[1].1.resource_version.as_deref(), Some("12"));
        let gap = lists[1].0 - h.lw.watch_calls()[0].0;
        assert!(gap >= Duration::from_millis(800), "relisted after {gap:?}");
        assert_eq!(h.lw.watch_calls()[1].2, "30");
        assert_eq!(h.reflector.last_sync_resource_version(), "30");

        let deltas = fifo_known.pop(|_, d, _| d).await.expect("pop a");
        assert_eq!(deltas.len(), 1);
        assert!(
            matches!(&deltas[0], Delta::Replaced(p) if p.metadata.resource_version.as_deref() == Some("25"))
        );
        let deltas = fifo_known.pop(|_, d, _| d).await.expect("pop b");
        match &deltas[..] {
            [Delta::Deleted(d)] => assert!(d.is_tombstone(), "missed delete yields a tombstone"),
            other => panic!("unexpected {other:?}"),
        }
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn relists_after_http_410_on_the_watch_request() {
        let lw = FakeLw::new(
            vec![Ok(list("10", None, vec![])), Ok(list("40", None, vec![]))],
            vec![WatchScript::Fail(api_error(410, "Gone")), hangs(vec![])],
        );
        let h = start(lw, ReflectorOptions::default());
        sleep(Duration::from_secs(5)).await;
        assert_eq!(h.lw.list_calls().len(), 2);
        let watches = h.lw.watch_calls();
        assert_eq!(
            watches.iter().map(|w| w.2.as_str()).collect::<Vec<_>>(),
            vec!["10", "40"]
        );
        h.stop().await;
    }

    fn expired_event() -> WatchScript {
        ends(vec![Ok(WatchEvent::Error(Box::new(Status {
            code: 410,
            reason: "Expired".into(),
            ..Status::default()
        })))])
    }

    #[tokio::test(start_paused = true)]
    async fn relists_stay_paginated_when_the_initial_list_was() {
        // As TestReflectorPaginatingNonConsistentReadsIfWatchCacheDisabled: a paginated answer
        // to the RV="0" list means no watch cache, so relists at an RV paginate too.
        let lw = FakeLw::new(
            vec![
                Ok(list("10", Some("c1"), vec![pod("a", "1")])),
                Ok(list("10", None, vec![pod("b", "2")])),
                Ok(list("20", None, vec![pod("a", "1")])),
            ],
            vec![expired_event(), hangs(vec![])],
        );
        let h = start(lw, ReflectorOptions::default());
        sleep(Duration::from_secs(5)).await;
        let lists = h.lw.list_calls();
        assert_eq!(lists.len(), 3);
        assert_eq!(lists[2].1.resource_version.as_deref(), Some("10"));
        assert_eq!(lists[2].1.limit, Some(DEFAULT_PAGE_SIZE));
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_too_large_resource_version_list_falls_back_to_a_consistent_read() {
        // As TestReflectorFullListIfTooLarge.
        let mut too_large = Status {
            code: 504,
            reason: "Timeout".into(),
            message: "Too large resource version".into(),
            ..Status::default()
        };
        too_large.details = None;
        let lw = FakeLw::new(
            vec![
                Ok(list("10", None, vec![])),
                Err(kube::Error::Api(Box::new(too_large))),
                Ok(list("11", None, vec![])),
            ],
            vec![expired_event(), hangs(vec![])],
        );
        let h = start(lw, ReflectorOptions::default());
        sleep(Duration::from_secs(5)).await;
        let lists = h.lw.list_calls();
        assert_eq!(lists.len(), 3);
        assert_eq!(lists[2].1.resource_version, None);
        assert_eq!(h.reflector.last_sync_resource_version(), "11");
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_list_falls_back_to_a_consistent_read_at_once() {
        // As TestReflectorFullListIfExpired / relistResourceVersion: a 410 on a list at an RV
        // retries immediately with RV="" (the latest).
        let lw = FakeLw::new(
            vec![
                Ok(list("10", None, vec![])),
                Err(api_error(410, "Expired")),
                Ok(list("50", None, vec![])),
            ],
            vec![ends(vec![Ok(WatchEvent::Error(Box::new(Status {
                code: 410,
                reason: "Expired".into(),
                ..Status::default()
            })))])],
        );
        let h = start(lw, ReflectorOptions::default());
        sleep(Duration::from_secs(5)).await;
        let lists = h.lw.list_calls();
        assert_eq!(lists.len(), 3);
        assert_eq!(lists[1].1.resource_version.as_deref(), Some("10"));
        assert_eq!(lists[1].1.limit, None, "relist at an RV is not paginated");
        assert_eq!(lists[2].1.resource_version, None, "consistent read");
        assert_eq!(lists[2].0, lists[1].0, "no backoff before the fallback");
        assert_eq!(h.reflector.last_sync_resource_version(), "50");
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn paginated_list_follows_continue_tokens() {
        let lw = FakeLw::new(
            vec![
                Ok(list("100", Some("c1"), vec![pod("a", "1")])),
                Ok(list("100", Some("c2"), vec![pod("b", "2")])),
                Ok(list("100", None, vec![pod("c", "3")])),
            ],
            vec![hangs(vec![])],
        );
        let h = start(
            lw,
            ReflectorOptions {
                page_size: 1,
                ..ReflectorOptions::default()
            },
        );
        settle().await;
        let lists = h.lw.list_calls();
        assert_eq!(lists.len(), 3);
        assert_eq!(lists[0].1.limit, Some(1));
        assert_eq!(lists[1].1.continue_token.as_deref(), Some("c1"));
        assert_eq!(lists[1].1.resource_version, None);
        assert_eq!(lists[2].1.continue_token.as_deref(), Some("c2"));
        assert_eq!(h.lw.watch_calls()[0].2, "100");
        assert_eq!(h.fifo.len(), 3);
        assert!(h.reflector.rv_state().paginated_result);
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_continue_token_falls_back_to_a_full_list() {
        let lw = FakeLw::new(
            vec![
                Ok(list("100", Some("c1"), vec![pod("a", "1")])),
                Err(api_error(410, "Expired")),
                Ok(list("120", None, vec![pod("a", "1"), pod("b", "2")])),
            ],
            vec![hangs(vec![])],
        );
        let h = start(lw, ReflectorOptions::default());
        settle().await;
        let lists = h.lw.list_calls();
        assert_eq!(lists.len(), 3);
        assert_eq!(lists[2].1.limit, None);
        assert_eq!(lists[2].1.continue_token, None);
        assert_eq!(lists[2].1.resource_version.as_deref(), Some("0"));
        assert_eq!(h.fifo.len(), 2);
        assert_eq!(h.reflector.last_sync_resource_version(), "120");
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn failing_lists_back_off_exponentially_and_never_hot_loop() {
        let lw = FakeLw::new(vec![], vec![]);
        *lw.always_fail_list.lock().expect("lock") = Some(500);
        let h = start(lw, ReflectorOptions::default());
        sleep(Duration::from_secs(600)).await;
        let calls: Vec<Instant> = h.lw.list_calls().iter().map(|c| c.0).collect();
        // 0.8, 1.6, 3.2, 6.4, 12.8, 25.6 then 30 (each up to ×2 jitter) over 10 minutes.
        assert!(
            (12..=30).contains(&calls.len()),
            "{} lists in 10 minutes",
            calls.len()
        );
        let gaps: Vec<Duration> = calls.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps[0] >= Duration::from_millis(800) && gaps[0] < Duration::from_millis(1600));
        assert!(
            gaps.iter().all(|g| *g < Duration::from_secs(60)),
            "capped: {gaps:?}"
        );
        assert!(
            gaps.iter().skip(8).all(|g| *g >= Duration::from_secs(30)),
            "reaches the cap: {gaps:?}"
        );
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_very_short_empty_watch_relists_after_a_backoff() {
        let lw = FakeLw::new(
            vec![Ok(list("10", None, vec![])), Ok(list("10", None, vec![]))],
            vec![ends(vec![]), hangs(vec![])],
        );
        let h = start(lw, ReflectorOptions::default());
        sleep(Duration::from_secs(5)).await;
        let lists = h.lw.list_calls();
        assert_eq!(lists.len(), 2);
        assert!(lists[1].0 - lists[0].0 >= Duration::from_millis(800));
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn retriable_watch_errors_back_off_and_rewatch_without_relisting() {
        let refused =
            kube::Error::ReadEvents(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let lw = FakeLw::new(
            vec![Ok(list("10", None, vec![]))],
            vec![
                WatchScript::Fail(refused),
                WatchScript::Fail(api_error(429, "TooManyRequests")),
                hangs(vec![]),
            ],
        );
        let h = start(lw, ReflectorOptions::default());
        sleep(Duration::from_secs(10)).await;
        assert_eq!(h.lw.list_calls().len(), 1);
        let watches = h.lw.watch_calls();
        assert_eq!(watches.len(), 3);
        assert!(watches.iter().all(|w| w.2 == "10"));
        assert!(watches[1].0 - watches[0].0 >= Duration::from_millis(800));
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn not_found_list_syncs_an_empty_store() {
        let lw = FakeLw::new(vec![Err(api_error(404, "NotFound"))], vec![]);
        let h = start(lw, ReflectorOptions::default());
        settle().await;
        assert!(h.fifo.has_synced(), "an empty replace unblocks cache sync");
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn resyncs_periodically_while_watching() {
        let known = Indexer::<Pod>::new();
        known.add(Arc::new(pod("a", "5"))).expect("add");
        let fifo = Arc::new(DeltaFifo::new(DeltaFifoOptions {
            known_objects: Some(Arc::new(known)),
            ..DeltaFifoOptions::default()
        }));
        let should = Arc::new(AtomicUsize::new(0));
        let lw = FakeLw::new(vec![Ok(list("5", None, vec![pod("a", "5")]))], vec![]);
        let h = start_with_fifo(
            lw,
            fifo.clone(),
            ReflectorOptions {
                resync_period: Duration::from_secs(30),
                should_resync: Some({
                    let should = should.clone();
                    Arc::new(move || should.fetch_add(1, Ordering::SeqCst) % 2 == 1)
                }),
                ..ReflectorOptions::default()
            },
        );
        settle().await;
        drain(&fifo).await;
        sleep(Duration::from_secs(31)).await;
        assert_eq!(should.load(Ordering::SeqCst), 1);
        assert!(fifo.is_empty(), "should_resync said no");
        sleep(Duration::from_secs(30)).await;
        assert_eq!(should.load(Ordering::SeqCst), 2);
        assert_eq!(drain(&fifo).await, vec![(DeltaType::Sync, "a".into())]);
        h.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_stops_a_hanging_list() {
        let lw = FakeLw::new(vec![], vec![]);
        let h = start(lw, ReflectorOptions::default());
        settle().await;
        h.stop().await;
    }
}
