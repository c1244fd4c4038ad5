//! The delaying queue: `add_after` holds an item in a timer heap until its time comes.
//!
//! As client-go's `delayingType`: a [`Queue`] plus a heap of waiting items ordered by when
//! they are ready, and one task that sleeps until the earliest of them (on `tokio::time`, so
//! tests pause and advance it) and adds the ready ones to the queue. An item waits once: a
//! second `add_after` of a waiting item keeps the earlier of the two deadlines.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::queue::{Queue, QueueConfig};

/// How far in the future a deadline too large to represent is put: far enough to never fire
/// in practice.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A [`Queue`] that can also add an item after a delay (client-go's `TypedDelayingInterface`).
///
/// Dereferences to the [`Queue`], so `add`, `get`, `done`, `len` and the shutdowns are the
/// queue's. Cloning is cheap and every clone is the same queue. The timer task stops when the
/// queue shuts down, and is aborted when the last handle is dropped.
pub struct DelayingQueue<T> {
    /// The queue ready items go to.
    queue: Queue<T>,
    /// The items waiting for their time, shared with the timer task.
    waiting: Arc<Waiting<T>>,
    /// Aborts the timer task when the last handle goes.
    _timer: Arc<TimerTask>,
}

impl<T> Clone for DelayingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            waiting: Arc::clone(&self.waiting),
            _timer: Arc::clone(&self._timer),
        }
    }
}

impl<T> Deref for DelayingQueue<T> {
    type Target = Queue<T>;

    fn deref(&self) -> &Queue<T> {
        &self.queue
    }
}

/// Owns the timer task: the task holds only the queue and the heap, so dropping the last
/// [`DelayingQueue`] drops this and ends the task.
struct TimerTask(AbortHandle);

impl Drop for TimerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What the handles and the timer task share.
struct Waiting<T> {
    /// The heap. Lock order: this lock, then the queue's; never held across an `.await`.
    state: Mutex<WaitingState<T>>,
    /// Wakes the timer task when an item becomes the earliest to be ready.
    wake: Notify,
    /// `workqueue_retries_total` of a named queue.
    retries: Option<Counter>,
}

/// The waiting items.
struct WaitingState<T> {
    /// Entries by readiness, earliest on top. Deadlines are never moved inside the heap:
    /// moving an item earlier pushes a new entry, and the entry it replaces becomes stale.
    /// Invariant: for every `(item, (_, seq))` in `pending` there is exactly one entry with
    /// that item and `seq`; every other entry is stale and is discarded when popped.
    heap: BinaryHeap<Entry<T>>,
    /// The live deadline of every waiting item, with the sequence number of its live entry.
    pending: HashMap<T, (Instant, u64)>,
    /// The next entry's sequence number; orders entries with equal deadlines first-in,
    /// first-out.
    next_seq: u64,
}

/// One heap entry.
struct Entry<T> {
    ready_at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<T> Eq for Entry<T> {}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Entry<T> {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest entry first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.ready_at, other.seq).cmp(&(self.ready_at, self.seq))
    }
}

impl<T> Default for DelayingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<T> DelayingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An unnamed delaying queue, recording no metrics (client-go's `NewTypedDelayingQueue`).
    ///
    /// # Panics
    ///
    /// Spawns its timer task with `tokio::spawn`: must be called inside a Tokio runtime.
    pub fn new() -> Self {
        Self::with_config(QueueConfig::default())
    }

    /// A delaying queue built from `config` (client-go's `NewTypedDelayingQueueWithConfig`).
    ///
    /// # Panics
    ///
    /// Spawns its timer task with `tokio::spawn`: must be called inside a Tokio runtime.
    pub fn with_config(config: QueueConfig) -> Self {
        let retries = match &config.metrics {
            Some(metrics) if !config.name.is_empty() => Some(metrics.retries(&config.name)),
            _ => None,
        };
        let queue = Queue::with_config(config);
        let waiting = Arc::new(Waiting {
            state: Mutex::new(WaitingState {
                heap: BinaryHeap::new(),
                pending: HashMap::new(),
                next_seq: 0,
            }),
            wake: Notify::new(),
            retries,
        });
        let task = tokio::spawn(waiting_loop(queue.clone(), Arc::clone(&waiting)));
        Self {
            queue,
            waiting,
            _timer: Arc::new(TimerTask(task.abort_handle())),
        }
    }

    /// Adds `item` to the queue once `delay` has passed (client-go's `AddAfter`).
    ///
    /// A zero delay adds it now. If the item is already waiting, the earlier of its two
    /// deadlines is kept. Does nothing once the queue is shutting down.
    pub fn add_after(&self, item: T, delay: Duration) {
        if self.queue.shutting_down() {
            return;
        }
        if let Some(retries) = &self.waiting.retries {
            retries.inc();
        }
        if delay.is_zero() {
            self.queue.add(item);
            return;
        }
        let now = Instant::now();
        let ready_at = now.checked_add(delay).unwrap_or_else(|| now + FAR_FUTURE);
        let earliest = self.waiting.lock().insert_locked(item, ready_at);
        if earliest {
            self.waiting.wake.notify_one();
        }
    }

    /// How many items wait for their time (not counting the queue's [`len`](Queue::len)).
    pub fn waiting_len(&self) -> usize {
        self.waiting.lock().pending.len()
    }
}

impl<T> Waiting<T> {
    fn lock(&self) -> MutexGuard<'_, WaitingState<T>> {
        // The heap and map are only changed together under this lock by non-panicking
        // calls; take a poisoned lock over.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Clone + Eq + Hash> WaitingState<T> {
    /// Makes `item` wait until `ready_at`, or until its current deadline if that is earlier
    /// (client-go's `insert`). Returns whether it became the earliest entry, in which case
    /// the timer task must be woken to sleep less.
    fn insert_locked(&mut self, item: T, ready_at: Instant) -> bool {
        if self
            .pending
            .get(&item)
            .is_some_and(|(current, _)| *current <= ready_at)
        {
            return false;
        }
        let earliest = self.heap.peek().is_none_or(|top| ready_at < top.ready_at);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pending.insert(item.clone(), (ready_at, seq));
        self.heap.push(Entry {
            ready_at,
            seq,
            item,
        });
        earliest
    }

    /// Removes the next entry that is live and ready at `now`, skipping stale ones.
    fn pop_ready_locked(&mut self, now: Instant) -> Option<T> {
        while self.heap.peek().is_some_and(|top| top.ready_at <= now) {
            let entry = self.heap.pop()?;
            let live = self
                .pending
                .get(&entry.item)
                .is_some_and(|(_, seq)| *seq == entry.seq);
            if live {
                self.pending.remove(&entry.item);
                return Some(entry.item);
            }
        }
        None
    }
}

/// Moves ready items to the queue, then sleeps until the earliest waiting deadline, a wake-up
/// from `add_after`, or the queue's shutdown (client-go's `waitingLoop`). Needs no periodic
/// heartbeat: every change that could shorten the sleep wakes it.
async fn waiting_loop<T>(queue: Queue<T>, waiting: Arc<Waiting<T>>)
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    let closed = queue.closed();
    loop {
        // Register before looking at the heap, so an `add_after` in between is not missed.
        let woken = waiting.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();

        let next = {
            let mut state = waiting.lock();
            let now = Instant::now();
            while let Some(item) = state.pop_ready_locked(now) {
                queue.add(item);
            }
            state.heap.peek().map(|top| top.ready_at)
        };

        let sleep = tokio::time::sleep_until(next.unwrap_or_else(|| Instant::now() + FAR_FUTURE));
        tokio::select! {
            _ = closed.cancelled() => break,
            _ = &mut woken => {}
            _ = sleep, if next.is_some() => {}
        }
    }
    // Shut down: nothing waiting will ever be added; free it.
    let mut state = waiting.lock();
    state.heap.clear();
    state.pending.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Lets the timer task run until it blocks.
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    /// Moves paused time forward and lets the timer task act on it.
    async fn step(d: Duration) {
        tokio::time::advance(d).await;
        settle().await;
    }

    /// Upstream's `TestSimpleQueue`.
    #[tokio::test(start_paused = true)]
    async fn adds_after_the_delay_and_not_before() {
        let q = DelayingQueue::new();
        q.add_after("foo", 50 * MS);
        settle().await;
        assert_eq!(q.waiting_len(), 1);
        assert_eq!(q.len(), 0, "should not have added yet");

        step(49 * MS).await;
        assert_eq!(q.len(), 0, "should not have added before the deadline");
        step(11 * MS).await;
        assert_eq!(q.len(), 1, "should have added");
        assert_eq!(q.waiting_len(), 0);
        let item = q.get().await.expect("item");
        q.done(&item);

        // Long after, nothing else shows up.
        step(10 * Duration::from_secs(1)).await;
        assert_eq!(q.len(), 0);
    }

    /// Upstream's `TestDeduping`.
    #[tokio::test(start_paused = true)]
    async fn a_second_add_after_keeps_the_earlier_deadline() {
        let q = DelayingQueue::new();
        q.add_after("foo", 50 * MS);
        q.add_after("foo", 70 * MS);
        settle().await;
        assert_eq!(q.waiting_len(), 1);
        assert_eq!(q.len(), 0);

        // Past the first deadline: it fires once.
        step(60 * MS).await;
        assert_eq!(q.len(), 1);
        let item = q.get().await.expect("item");
        q.done(&item);

        // Past the later deadline: the later add was merged, nothing more.
        step(20 * MS).await;
        assert_eq!(q.len(), 0);

        // Again, but the second deadline is the earlier one and wins.
        q.add_after("foo", 50 * MS);
        q.add_after("foo", 30 * MS);
        settle().await;
        assert_eq!(q.waiting_len(), 1);
        step(40 * MS).await;
        assert_eq!(q.len(), 1, "the earlier deadline must win");
        let item = q.get().await.expect("item");
        q.done(&item);

        // Past the replaced deadline: the stale entry must not add it again.
        step(20 * MS).await;
        assert_eq!(q.len(), 0);
    }

    /// Upstream's `TestAddTwoFireEarly`.
    #[tokio::test(start_paused = true)]
    async fn a_later_add_with_an_earlier_deadline_fires_first() {
        let q = DelayingQueue::new();
        q.add_after("foo", Duration::from_secs(1));
        q.add_after("bar", 50 * MS);
        settle().await;
        assert_eq!(q.waiting_len(), 2);
        assert_eq!(q.len(), 0);

        step(60 * MS).await;
        assert_eq!(q.len(), 1);
        assert_eq!(q.waiting_len(), 1);
        assert_eq!(q.get().await, Some("bar"));

        q.add_after("baz", 2 * Duration::from_secs(1));
        step(Duration::from_secs(1)).await;
        assert_eq!(q.len(), 1);
        assert_eq!(q.waiting_len(), 1);
        assert_eq!(q.get().await, Some("foo"));

        step(2 * Duration::from_secs(1)).await;
        assert_eq!(q.len(), 1);
        assert_eq!(q.waiting_len(), 0);
        assert_eq!(q.get().await, Some("baz"));
    }

    /// Upstream's `TestCopyShifting`.
    #[tokio::test(start_paused = true)]
    async fn ready_items_are_added_in_deadline_order() {
        let q = DelayingQueue::new();
        q.add_after("foo", Duration::from_secs(1));
        q.add_after("bar", 500 * MS);
        q.add_after("baz", 250 * MS);
        settle().await;
        assert_eq!(q.waiting_len(), 3);
        assert_eq!(q.len(), 0);

        step(2 * Duration::from_secs(1)).await;
        assert_eq!(q.len(), 3);
        assert_eq!(q.get().await, Some("baz"));
        assert_eq!(q.get().await, Some("bar"));
        assert_eq!(q.get().await, Some("foo"));
    }

    #[tokio::test(start_paused = true)]
    async fn equal_deadlines_keep_insertion_order() {
        let q = DelayingQueue::new();
        for item in ["a", "b", "c"] {
            q.add_after(item, 10 * MS);
        }
        step(10 * MS).await;
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.get().await, Some("b"));
        assert_eq!(q.get().await, Some("c"));
    }

    #[tokio::test(start_paused = true)]
    async fn zero_delay_adds_now() {
        let q = DelayingQueue::new();
        q.add_after("now", Duration::ZERO);
        assert_eq!(q.len(), 1, "a zero delay must not go through the timer");
        assert_eq!(q.waiting_len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn get_waits_through_the_delay() {
        let q = DelayingQueue::new();
        q.add_after(7_u32, Duration::from_secs(3));
        let start = Instant::now();
        // Paused time auto-advances to the timer while every task is idle.
        assert_eq!(q.get().await, Some(7));
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn huge_delay_does_not_overflow() {
        let q = DelayingQueue::new();
        q.add_after("never", Duration::MAX);
        settle().await;
        assert_eq!(q.waiting_len(), 1);
        step(Duration::from_secs(365 * 24 * 3600)).await;
        assert_eq!(q.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_stops_the_timer_and_ignores_add_after() {
        let q = DelayingQueue::new();
        q.add_after("pending", 10 * MS);
        settle().await;
        q.shut_down();
        settle().await;
        assert!(
            q._timer.0.is_finished(),
            "the timer task must stop on shutdown"
        );
        assert_eq!(q.waiting_len(), 0, "waiting items are dropped");

        q.add_after("late", Duration::ZERO);
        q.add_after("late", 10 * MS);
        step(20 * MS).await;
        assert_eq!(q.len(), 0);
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_every_handle_ends_the_timer_task() {
        let q: DelayingQueue<u8> = DelayingQueue::new();
        let timer = Arc::clone(&q._timer);
        let clone = q.clone();
        drop(q);
        settle().await;
        assert!(!timer.0.is_finished(), "a clone still holds the queue");
        drop(clone);
        // `timer` is the last owner now; dropping it aborts the task.
        let handle = timer.0.clone();
        drop(timer);
        settle().await;
        assert!(handle.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_item_that_is_being_processed_is_requeued_after_done() {
        let q = DelayingQueue::new();
        q.add("x");
        let item = q.get().await.expect("item");
        q.add_after("x", 10 * MS);
        step(10 * MS).await;
        assert_eq!(q.len(), 0, "still processing: only marked dirty");
        q.done(&item);
        assert_eq!(q.get().await, Some("x"));
    }
}
