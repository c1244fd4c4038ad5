//! The basic work queue: FIFO, de-duplicating, never handing one item to two workers.
//!
//! As client-go's `workqueue.Typed`: a dirty set (items that need processing), a processing
//! set (items handed out by `get` and not yet `done`) and a FIFO of the dirty items that are
//! not being processed. See the [module docs](super) for the promises this gives.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio::sync::Notify;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::metrics::{QueueMetrics, UNFINISHED_WORK_UPDATE_PERIOD, WorkqueueMetrics};

/// How to build a queue (client-go's `TypedQueueConfig`).
#[derive(Clone, Default)]
pub struct QueueConfig {
    /// The queue's name: the `name` label of its metrics. An empty name records no metrics.
    pub name: String,
    /// Where the queue records its metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
}

impl QueueConfig {
    /// A named queue recording into `metrics`.
    pub fn named(name: impl Into<String>, metrics: Arc<WorkqueueMetrics>) -> Self {
        Self {
            name: name.into(),
            metrics: Some(metrics),
        }
    }

    /// The series this configuration records into, if it records at all.
    pub(crate) fn queue_metrics(&self) -> Option<QueueMetrics> {
        match &self.metrics {
            Some(metrics) if !self.name.is_empty() => Some(metrics.queue(&self.name)),
            _ => None,
        }
    }
}

/// A fair, stingy work queue shared by many producers and consumers (client-go's
/// `workqueue.Typed`). Cloning is cheap and every clone is the same queue.
///
/// Workers loop on [`get`](Self::get), process the item, then call [`done`](Self::done) with
/// it; until then, adding the item again only marks it dirty, and it is queued again when
/// `done` is called.
pub struct Queue<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// What every handle of one queue shares.
struct Shared<T> {
    /// The queue's sets. Never held across an `.await`.
    state: Mutex<State<T>>,
    /// Wakes a waiting `get`: one waiter per item pushed onto the FIFO, all waiters on
    /// shutdown.
    item_ready: Notify,
    /// Wakes `shut_down_with_drain` when the processing set empties or `shut_down` cancels
    /// the drain.
    drained: Notify,
    /// Cancelled by the first shutdown; the delaying queue's timer task and the metrics
    /// updater stop on it.
    closed: CancellationToken,
    /// The queue's metric series; `None` for an unnamed queue.
    metrics: Option<QueueMetrics>,
}

/// The sets of client-go's `Typed`, guarded by one lock.
///
/// The values of `dirty` and `processing` are timestamps for the metrics (when the item became
/// dirty, when it was handed out); they are `None` when the queue records no metrics, so an
/// unnamed queue never reads the clock.
struct State<T> {
    /// The order in which items will be handed out.
    /// Invariant: every element is in `dirty` and not in `processing`, and appears once.
    queue: VecDeque<T>,
    /// Every item that needs processing.
    /// Invariant: each key is either in `queue` or in `processing`, never in both.
    dirty: HashMap<T, Option<Instant>>,
    /// Items handed out by `get` and not yet `done`. An item here may also be in `dirty`:
    /// it was added again while being processed, and `done` will queue it.
    processing: HashMap<T, Option<Instant>>,
    /// Set once by `shut_down` or `shut_down_with_drain`; never cleared. Adds are ignored.
    shutting_down: bool,
    /// A `shut_down_with_drain` is waiting for `processing` to empty; `shut_down` clears it
    /// to release that wait early.
    drain: bool,
}

impl<T> Default for Queue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Queue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An unnamed queue, recording no metrics (client-go's `NewTyped`).
    pub fn new() -> Self {
        Self::with_config(QueueConfig::default())
    }

    /// A queue built from `config` (client-go's `NewTypedWithConfig`).
    ///
    /// # Panics
    ///
    /// A queue that records metrics spawns its unfinished-work updater with `tokio::spawn`, so
    /// it must be built inside a Tokio runtime.
    pub fn with_config(config: QueueConfig) -> Self {
        let metrics = config.queue_metrics();
        let recording = metrics.is_some();
        let queue = Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    dirty: HashMap::new(),
                    processing: HashMap::new(),
                    shutting_down: false,
                    drain: false,
                }),
                item_ready: Notify::new(),
                drained: Notify::new(),
                closed: CancellationToken::new(),
                metrics,
            }),
        };
        if recording {
            // The ticker is built here, not in the task, so the period counts from now and
            // not from whenever the task is first polled.
            let mut ticker = tokio::time::interval_at(
                Instant::now() + UNFINISHED_WORK_UPDATE_PERIOD,
                UNFINISHED_WORK_UPDATE_PERIOD,
            );
            ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
            tokio::spawn(update_unfinished_work_loop(
                Arc::downgrade(&queue.shared),
                queue.shared.closed.clone(),
                ticker,
            ));
        }
        queue
    }

    /// Marks `item` as needing processing (client-go's `Add`).
    ///
    /// Does nothing if the item is already dirty or the queue is shutting down. If the item is
    /// being processed it is only marked dirty, and [`done`](Self::done) queues it again.
    pub fn add(&self, item: T) {
        let mut state = self.lock();
        if state.shutting_down || state.dirty.contains_key(&item) {
            return;
        }
        let added_at = self.shared.metrics.as_ref().map(|metrics| {
            metrics.added();
            Instant::now()
        });
        if state.processing.contains_key(&item) {
            state.dirty.insert(item, added_at);
            return;
        }
        state.dirty.insert(item.clone(), added_at);
        state.queue.push_back(item);
        drop(state);
        self.shared.item_ready.notify_one();
    }

    /// How many items wait to be handed out. For information only: another handle may change
    /// it at once, so never gate `add` or `get` on it.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// Whether no item waits to be handed out (see [`len`](Self::len)).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for an item to process (client-go's `Get`).
    ///
    /// Returns `None` once the queue is shutting down and no item is left to hand out; the
    /// caller should then stop. Items queued before the shutdown are still handed out. The
    /// caller must call [`done`](Self::done) with the item when it has processed it.
    ///
    /// Cancel safety: dropping the future before it completes loses no item.
    pub async fn get(&self) -> Option<T> {
        loop {
            if let Some(outcome) = self.try_get() {
                return outcome;
            }
            // Register for a wake-up before the second look, so an `add` or `shut_down`
            // between the look and the await is not missed.
            let notified = self.shared.item_ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(outcome) = self.try_get() {
                return outcome;
            }
            notified.await;
        }
    }

    /// `Some(Some(item))` if an item was handed out, `Some(None)` if the queue is shut down
    /// and empty, `None` if the caller must wait.
    fn try_get(&self) -> Option<Option<T>> {
        let mut state = self.lock();
        let Some(item) = state.queue.pop_front() else {
            return state.shutting_down.then_some(None);
        };
        let (key, added_at) = match state.dirty.remove_entry(&item) {
            Some(entry) => entry,
            None => {
                debug_assert!(false, "a queued item is always dirty");
                (item.clone(), None)
            }
        };
        debug_assert!(
            !state.processing.contains_key(&key),
            "a queued item is never being processed"
        );
        let started = self.shared.metrics.as_ref().map(|metrics| {
            let now = Instant::now();
            metrics.got(added_at, now);
            now
        });
        state.processing.insert(key, started);
        Some(Some(item))
    }

    /// Marks `item` as processed (client-go's `Done`). If it was added again while being
    /// processed, it is queued again now.
    ///
    /// Calling `done` for an item that is not being processed does nothing (client-go would
    /// queue a second copy of it if it was dirty).
    pub fn done(&self, item: &T) {
        let mut state = self.lock();
        let Some((item, started)) = state.processing.remove_entry(item) else {
            return;
        };
        if let Some(metrics) = &self.shared.metrics {
            metrics.done(started, Instant::now());
        }
        let requeued = state.dirty.contains_key(&item);
        if requeued {
            state.queue.push_back(item);
        }
        let drained = state.drain && state.processing.is_empty();
        drop(state);
        if requeued {
            self.shared.item_ready.notify_one();
        }
        if drained {
            self.shared.drained.notify_waiters();
        }
    }

    /// Counts one recovered panic in a sync of one of this queue's items
    /// (`kcm_workqueue_sync_panics_total`); the shared controller worker calls it.
    pub(crate) fn record_sync_panic(&self) {
        if let Some(metrics) = &self.shared.metrics {
            metrics.sync_panicked();
        }
    }

    /// Stops the queue at once (client-go's `ShutDown`): later adds are ignored, and `get`
    /// returns `None` as soon as the items already queued are handed out. Releases a waiting
    /// [`shut_down_with_drain`](Self::shut_down_with_drain). May be called more than once.
    pub fn shut_down(&self) {
        {
            let mut state = self.lock();
            state.drain = false;
            state.shutting_down = true;
        }
        self.wake_all_on_shutdown();
    }

    /// Stops the queue like [`shut_down`](Self::shut_down), then waits until every item
    /// handed out has been marked [`done`](Self::done) (client-go's `ShutDownWithDrain`).
    ///
    /// Workers must keep calling `done` after the shutdown starts, or this waits forever;
    /// a later `shut_down` ends the wait early.
    pub async fn shut_down_with_drain(&self) {
        {
            let mut state = self.lock();
            state.drain = true;
            state.shutting_down = true;
        }
        self.wake_all_on_shutdown();
        loop {
            let notified = self.shared.drained.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let state = self.lock();
                if state.processing.is_empty() || !state.drain {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Whether a shutdown has started (client-go's `ShuttingDown`).
    pub fn shutting_down(&self) -> bool {
        self.lock().shutting_down
    }

    /// A token cancelled once the queue starts shutting down.
    pub(crate) fn closed(&self) -> CancellationToken {
        self.shared.closed.clone()
    }

    fn wake_all_on_shutdown(&self) {
        self.shared.closed.cancel();
        self.shared.item_ready.notify_waiters();
        self.shared.drained.notify_waiters();
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.shared.lock()
    }
}

impl<T> Shared<T> {
    /// The state lock. A panic while it was held leaves the sets consistent (every mutation
    /// is a single collection call), so a poisoned lock is taken over rather than propagated.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Refreshes the unfinished-work gauges every period until the queue shuts down or every
/// handle is dropped (client-go's `updateUnfinishedWorkLoop`). Holds the queue weakly so it
/// never keeps a dropped queue alive.
async fn update_unfinished_work_loop<T>(
    shared: Weak<Shared<T>>,
    closed: CancellationToken,
    mut ticker: Interval,
) {
    loop {
        tokio::select! {
            _ = closed.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let Some(metrics) = &shared.metrics else {
            return;
        };
        let state = shared.lock();
        if state.shutting_down {
            return;
        }
        metrics
            .update_unfinished_work(state.processing.values().flatten().copied(), Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::time::Duration;

    /// Lets every other task of the current-thread test runtime run until it blocks.
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn len_counts_each_dirty_item_once() {
        let q = Queue::new();
        q.add("foo");
        assert_eq!(q.len(), 1);
        q.add("bar");
        assert_eq!(q.len(), 2);
        q.add("foo");
        assert_eq!(
            q.len(),
            2,
            "adding a queued item again must not queue it twice"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn items_come_out_in_the_order_they_became_dirty() {
        let q = Queue::new();
        for item in ["a", "b", "a", "c", "b"] {
            q.add(item);
        }
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.get().await, Some("b"));
        assert_eq!(q.get().await, Some("c"));
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn reinsert_while_processing_requeues_after_done() {
        let q = Queue::new();
        q.add("foo");
        let item = q.get().await.expect("item");
        assert_eq!(item, "foo");

        // Added back while processing: dirty, but not handed to anyone else yet.
        q.add(item);
        assert_eq!(q.len(), 0, "an item being processed must not be queued");

        q.done(&item);
        assert_eq!(
            q.len(),
            1,
            "done must queue an item that became dirty again"
        );
        let again = q.get().await.expect("item");
        assert_eq!(again, "foo");
        q.done(&again);
        assert_eq!(q.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn item_is_never_handed_to_two_workers_at_once() {
        let q = Queue::new();
        q.add(1);
        let first = q.get().await.expect("item");
        q.add(1);
        // A second worker waits, because the only dirty item is being processed.
        let second = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        settle().await;
        assert!(
            !second.is_finished(),
            "a processing item was handed out twice"
        );
        q.done(&first);
        let got = second.await.expect("join");
        assert_eq!(got, Some(1));
    }

    #[tokio::test(start_paused = true)]
    async fn done_for_an_item_not_processing_is_a_no_op() {
        let q = Queue::new();
        q.add("x");
        q.done(&"x");
        assert_eq!(q.len(), 1, "done must not queue a second copy");
        assert_eq!(q.get().await, Some("x"));
        q.done(&"x");
        assert_eq!(q.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn get_waits_for_an_add() {
        let q = Queue::new();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        settle().await;
        assert!(!waiter.is_finished());
        q.add("late");
        assert_eq!(waiter.await.expect("join"), Some("late"));
    }

    #[tokio::test(start_paused = true)]
    async fn get_after_shutdown_hands_out_queued_items_then_none() {
        let q = Queue::new();
        q.add("a");
        q.add("b");
        q.shut_down();
        q.add("added after shutdown");
        assert!(q.shutting_down());
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.get().await, Some("b"));
        assert_eq!(q.get().await, None);
        assert_eq!(q.get().await, None, "None is sticky");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_wakes_every_waiting_worker() {
        let q: Queue<u32> = Queue::new();
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { q.get().await })
            })
            .collect();
        settle().await;
        q.shut_down();
        for worker in workers {
            assert_eq!(worker.await.expect("join"), None);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_does_not_wait_for_in_flight_items() {
        let q = Queue::new();
        q.add("foo");
        q.add("bar");
        let _foo = q.get().await;
        let _bar = q.get().await;
        // Returns at once although neither item is done.
        q.shut_down();
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_with_drain_waits_for_in_flight_items() {
        let q = Queue::new();
        q.add("foo");
        q.add("bar");
        let first = q.get().await.expect("item");
        let second = q.get().await.expect("item");

        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shut_down_with_drain().await }
        });
        settle().await;
        assert!(q.shutting_down());
        assert_eq!(
            q.get().await,
            None,
            "workers are told to stop while draining"
        );
        assert!(!drain.is_finished(), "drain returned with items in flight");

        q.done(&first);
        settle().await;
        assert!(
            !drain.is_finished(),
            "drain returned with one item in flight"
        );

        q.done(&second);
        drain.await.expect("join");
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_forces_a_pending_drain_to_return() {
        let q = Queue::new();
        q.add("foo");
        q.add("bar");
        let _foo = q.get().await;
        let _bar = q.get().await;
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shut_down_with_drain().await }
        });
        settle().await;
        assert!(!drain.is_finished());
        q.shut_down();
        drain.await.expect("join");
    }

    #[tokio::test(start_paused = true)]
    async fn drain_hands_out_an_item_that_was_dirty_while_processing() {
        let q = Queue::new();
        q.add("foo");
        let gotten = q.get().await.expect("item");
        q.add("foo");

        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shut_down_with_drain().await }
        });
        settle().await;
        assert_eq!(q.get().await, None);

        // Done queues the dirty item again, even while shutting down.
        q.done(&gotten);
        let again = q.get().await;
        assert_eq!(again, Some("foo"), "the dirty item must be processed again");
        q.done(&"foo");
        assert_eq!(q.get().await, None, "now the queue is really done");
        drain.await.expect("join");
    }

    #[tokio::test(start_paused = true)]
    async fn drain_with_nothing_in_flight_returns_at_once() {
        let q: Queue<u8> = Queue::new();
        q.shut_down_with_drain().await;
        assert!(q.shutting_down());
    }

    /// Many producers and consumers on a multi-threaded runtime: every item is processed,
    /// never by two workers at once, and the queue ends empty (upstream's `TestBasic` and
    /// `TestAddWhileProcessing`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn many_producers_and_consumers() {
        for drain in [false, true] {
            let q: Queue<u32> = Queue::new();
            let in_flight = Arc::new(Mutex::new(HashSet::new()));
            let producers: Vec<_> = (0..50)
                .map(|i| {
                    let q = q.clone();
                    tokio::spawn(async move {
                        for _ in 0..50 {
                            q.add(i);
                            tokio::task::yield_now().await;
                        }
                    })
                })
                .collect();
            let consumers: Vec<_> = (0..10)
                .map(|_| {
                    let q = q.clone();
                    let in_flight = Arc::clone(&in_flight);
                    tokio::spawn(async move {
                        let mut counters: HashMap<u32, u32> = HashMap::new();
                        let mut processed = 0_u32;
                        while let Some(item) = q.get().await {
                            assert_ne!(item, u32::MAX, "got an item added after shutdown");
                            assert!(
                                in_flight.lock().expect("lock").insert(item),
                                "item {item} handed to two workers at once"
                            );
                            tokio::task::yield_now().await;
                            // Re-add every item once while processing it.
                            let seen = counters.entry(item).or_default();
                            *seen += 1;
                            if *seen < 2 {
                                q.add(item);
                            }
                            in_flight.lock().expect("lock").remove(&item);
                            q.done(&item);
                            processed += 1;
                        }
                        processed
                    })
                })
                .collect();
            for producer in producers {
                producer.await.expect("producer");
            }
            if drain {
                q.shut_down_with_drain().await;
            } else {
                q.shut_down();
            }
            q.add(u32::MAX);
            let mut processed = 0;
            for consumer in consumers {
                processed += consumer.await.expect("consumer");
            }
            assert!(
                processed >= 50,
                "every produced item is processed at least once"
            );
            assert_eq!(q.len(), 0, "queue must end empty");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_get_loses_no_item() {
        let q = Queue::new();
        {
            let pending = q.get();
            tokio::pin!(pending);
            // Poll once so the future registers, then drop it.
            let _ = tokio::time::timeout(Duration::from_millis(1), &mut pending).await;
        }
        q.add("x");
        assert_eq!(q.get().await, Some("x"));
    }
}
