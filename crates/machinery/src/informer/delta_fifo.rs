//! DeltaFIFO: a queue of per-object change lists, in FIFO order of keys, as client-go's `DeltaFIFO`.
//!
//! The Reflector is the producer (`add`/`update`/`delete`/`replace`/`resync`); the informer's
//! pop loop is the one consumer. Each key is queued once; every change to it while it waits
//! is appended to its [`Deltas`], so the consumer sees everything that happened to an object
//! since it last processed it, deletions included, and a relist that no longer contains an
//! object produces a tombstone for it.
//!
//! `pop` runs the consumer's processing function while holding the queue's lock (as
//! client-go does), so a known-objects store that is only written from that function (the
//! informer's indexer) is always consistent with the queue when `replace`, `delete` and
//! `resync` consult it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::Resource;
use tokio::sync::Notify;

use super::delta::{DeletedFinalStateUnknown, DeletedObject, Delta, Deltas};
use super::freshness::{Freshness, parse_resource_version};
use super::keys::{self, meta_namespace_key};
use super::transform::TransformFunc;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why popping from a DeltaFIFO failed (adding fails only for an object without a key:
/// [`keys::Error`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The queue was closed and is empty.
    #[error("DeltaFIFO: closed")]
    Closed,
}

/// The keys and objects a DeltaFIFO's consumer already knows (the informer's cache), used to
/// find deletions on `replace` and `delete` and the objects to re-deliver on `resync`, as
/// client-go's `KeyListerGetter`.
pub trait KnownObjects<K>: Send + Sync {
    /// Every known `(key, object)` pair.
    fn known_entries(&self) -> Vec<(Arc<str>, Arc<K>)>;
    /// The known object under `key`.
    fn get_known(&self, key: &str) -> Option<Arc<K>>;
}

/// Construction options, as client-go's `DeltaFIFOOptions` (with `EmitDeltaTypeReplaced`
/// always on: a relist emits [`Delta::Replaced`]).
pub struct DeltaFifoOptions<K> {
    /// What the consumer already knows; `None` means only the queue's own content is used to
    /// detect deletions.
    pub known_objects: Option<Arc<dyn KnownObjects<K>>>,
    /// Applied to every object received (not to tombstones or resyncs) before it is queued.
    pub transform: Option<TransformFunc<K>>,
    /// Advanced as popped deltas are processed; see [`DeltaFifo::update_resource_version`].
    pub freshness: Option<Freshness>,
}

impl<K> Default for DeltaFifoOptions<K> {
    fn default() -> Self {
        Self {
            known_objects: None,
            transform: None,
            freshness: None,
        }
    }
}

/// A producer/consumer queue of [`Deltas`] keyed by [`meta_namespace_key`].
pub struct DeltaFifo<K> {
    state: Mutex<State<K>>,
    /// Woken whenever a key is queued or the queue closes.
    notify: Notify,
    known_objects: Option<Arc<dyn KnownObjects<K>>>,
    transform: Option<TransformFunc<K>>,
    freshness: Option<Freshness>,
}

impl<K> fmt::Debug for DeltaFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("DeltaFifo")
            .field("queued", &state.queue.len())
            .field("populated", &state.populated)
            .field("initial_population_count", &state.initial_population_count)
            .field("closed", &state.closed)
            .finish()
    }
}

struct Entry<K> {
    /// Never empty.
    deltas: Deltas<K>,
    /// Sequence number of the oldest delta still in `deltas`.
    first_seq: u64,
}

struct State<K> {
    /// Every queued key's deltas. Invariant: a key is in `items` iff it is in `queue`.
    items: HashMap<Arc<str>, Entry<K>>,
    /// Keys in the order they were first queued; no duplicates. Because a key keeps its place
    /// while deltas are appended, the `first_seq` of the front entry is the smallest pending.
    queue: VecDeque<Arc<str>>,
    /// True once the first `replace` happened, or anything was added/updated/deleted first.
    populated: bool,
    /// How many pops remain until the first `replace`'s keys (listed and tombstoned) have all
    /// been popped.
    initial_population_count: usize,
    closed: bool,
    /// Number of deltas ever queued; the next delta's sequence number.
    seq: u64,
    /// `(seq, rv)`: once every delta numbered below `seq` is processed, the cache has reached
    /// resourceVersion `rv`. Ascending in both.
    marks: VecDeque<(u64, u64)>,
}

impl<K> State<K> {
    fn has_synced(&self) -> bool {
        self.populated && self.initial_population_count == 0
    }

    /// Whether the newest delta for `key` is a deletion (client-go's
    /// `willObjectBeDeletedLocked`).
    fn will_be_deleted(&self, key: &str) -> bool {
        self.items
            .get(key)
            .and_then(|e| e.deltas.last())
            .is_some_and(|d| matches!(d, Delta::Deleted(_)))
    }

    fn is_queued(&self, key: &str) -> bool {
        self.items.contains_key(key)
    }
}

impl<K: Resource + Send + Sync + 'static> DeltaFifo<K> {
    /// An empty queue.
    pub fn new(options: DeltaFifoOptions<K>) -> Self {
        Self {
            state: Mutex::new(State {
                items: HashMap::new(),
                queue: VecDeque::new(),
                populated: false,
                initial_population_count: 0,
                closed: false,
                seq: 0,
                marks: VecDeque::new(),
            }),
            notify: Notify::new(),
            known_objects: options.known_objects,
            transform: options.transform,
            freshness: options.freshness,
        }
    }

    fn prepare(&self, obj: K) -> Arc<K> {
        Arc::new(match &self.transform {
            Some(transform) => transform(obj),
            None => obj,
        })
    }

    /// Queues an [`Delta::Added`], as client-go's `DeltaFIFO.Add`. With freshness tracking,
    /// the object's resourceVersion counts as reached once this delta is processed (client-go's
    /// `ResourceVersionUpdater`, folded in to take the lock once per event).
    pub fn add(&self, obj: K) -> keys::Result<()> {
        let key = meta_namespace_key(&obj)?;
        let obj = self.prepare(obj);
        let mut state = self.lock();
        state.populated = true;
        let rv = self
            .freshness
            .as_ref()
            .and_then(|_| object_rv(obj.as_ref()));
        self.queue_action_locked(&mut state, &key, Delta::Added(obj));
        self.record_parsed_resource_version_locked(&mut state, rv);
        Ok(())
    }

    /// Queues an [`Delta::Updated`], as client-go's `DeltaFIFO.Update`.
    pub fn update(&self, obj: K) -> keys::Result<()> {
        let key = meta_namespace_key(&obj)?;
        let obj = self.prepare(obj);
        let mut state = self.lock();
        state.populated = true;
        let rv = self
            .freshness
            .as_ref()
            .and_then(|_| object_rv(obj.as_ref()));
        self.queue_action_locked(&mut state, &key, Delta::Updated(obj));
        self.record_parsed_resource_version_locked(&mut state, rv);
        Ok(())
    }

    /// Queues a [`Delta::Deleted`], as client-go's `DeltaFIFO.Delete`: dropped when the key is
    /// neither queued nor known (a relist already reported the deletion).
    pub fn delete(&self, obj: K) -> keys::Result<()> {
        let key = meta_namespace_key(&obj)?;
        let obj = self.prepare(obj);
        let mut state = self.lock();
        state.populated = true;
        let known = match &self.known_objects {
            Some(known) => known.get_known(&key).is_some(),
            None => false,
        };
        let rv = self
            .freshness
            .as_ref()
            .and_then(|_| object_rv(obj.as_ref()));
        if known || state.is_queued(&key) {
            self.queue_action_locked(&mut state, &key, Delta::Deleted(DeletedObject::Object(obj)));
        }
        self.record_parsed_resource_version_locked(&mut state, rv);
        Ok(())
    }

    /// Replaces the queue's view of the world with a full list, as client-go's
    /// `DeltaFIFO.Replace`: a [`Delta::Replaced`] for every listed object, then a
    /// [`Delta::Deleted`] carrying a [`DeletedFinalStateUnknown`] (key + last known object)
    /// for every key queued or known but absent from the list. The first call fixes the
    /// initial population that [`Self::has_synced`] waits for.
    ///
    /// Objects without a key are skipped with a warning (client-go fails the whole relist,
    /// which would then fail forever).
    pub fn replace(&self, list: Vec<K>, resource_version: &str) {
        let mut prepared = Vec::with_capacity(list.len());
        for obj in list {
            match meta_namespace_key(&obj) {
                Ok(key) => prepared.push((key, self.prepare(obj))),
                Err(err) => tracing::warn!(%err, "DeltaFIFO replace: skipping object"),
            }
        }

        let mut state = self.lock();
        let mut listed: HashSet<Arc<str>> = HashSet::with_capacity(prepared.len());
        for (key, obj) in prepared {
            let key: Arc<str> = Arc::from(key);
            self.queue_action_locked(&mut state, &key, Delta::Replaced(obj));
            listed.insert(key);
        }

        // Deletions of queued objects missing from the list: tombstone with the newest state.
        let mut queued_deletions = 0;
        let missing_queued: Vec<(Arc<str>, Arc<K>)> = state
            .items
            .iter()
            .filter(|(key, _)| !listed.contains(*key))
            .filter_map(|(key, entry)| {
                entry
                    .deltas
                    .last()
                    .map(|newest| (key.clone(), newest.object().clone()))
            })
            .collect();
        for (key, obj) in missing_queued {
            queued_deletions += 1;
            self.queue_tombstone_locked(&mut state, key, obj);
        }

        // Deletions of known objects missing from the list and not queued.
        if let Some(known) = &self.known_objects {
            for (key, obj) in known.known_entries() {
                if listed.contains(&key) || state.is_queued(&key) {
                    continue;
                }
                queued_deletions += 1;
                self.queue_tombstone_locked(&mut state, key, obj);
            }
        }

        if !state.populated {
            state.populated = true;
            state.initial_population_count = listed.len() + queued_deletions;
        }
        self.record_resource_version_locked(&mut state, resource_version);
    }

    /// Queues a [`Delta::Sync`] for every known object that has nothing queued, as client-go's
    /// `DeltaFIFO.Resync` (an object with a queued change is skipped: the known state is
    /// older than what is queued).
    pub fn resync(&self) {
        let Some(known) = &self.known_objects else {
            return;
        };
        let mut state = self.lock();
        for (key, obj) in known.known_entries() {
            if state.is_queued(&key) {
                continue;
            }
            self.queue_action_locked(&mut state, &key, Delta::Sync(obj));
        }
    }
}

impl<K> DeltaFifo<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn queue_tombstone_locked(&self, state: &mut State<K>, key: Arc<str>, obj: Arc<K>) {
        let delta = Delta::Deleted(DeletedObject::Tombstone(DeletedFinalStateUnknown {
            key: key.to_string(),
            obj,
        }));
        self.queue_action_locked(state, &key, delta);
    }

    /// Appends `delta` to `key`'s deltas, queueing the key if new; collapses consecutive
    /// deletions, as client-go's `queueActionLocked`.
    fn queue_action_locked(&self, state: &mut State<K>, key: &str, delta: Delta<K>) {
        // A resync must not resurrect an object that is about to be deleted.
        if matches!(delta, Delta::Sync(_)) && state.will_be_deleted(key) {
            return;
        }
        let seq = state.seq;
        state.seq += 1;
        match state.items.get_mut(key) {
            Some(entry) => {
                entry.deltas.push(delta);
                dedup_deltas(&mut entry.deltas);
            }
            None => {
                let key: Arc<str> = Arc::from(key);
                state.items.insert(
                    key.clone(),
                    Entry {
                        deltas: vec![delta],
                        first_seq: seq,
                    },
                );
                state.queue.push_back(key);
                // Poppers only park on an empty queue, so only this transition wakes them.
                if state.queue.len() == 1 {
                    self.notify.notify_waiters();
                }
            }
        }
    }

    /// Records that once everything queued so far is processed, the cache has reached
    /// `resource_version`, as client-go's `ResourceVersionUpdater` (the Reflector calls it for
    /// bookmarks; add/update/delete record their object's version themselves). Non-decimal
    /// versions are ignored.
    pub fn update_resource_version(&self, resource_version: &str) {
        let mut state = self.lock();
        self.record_resource_version_locked(&mut state, resource_version);
    }

    fn record_resource_version_locked(&self, state: &mut State<K>, resource_version: &str) {
        if self.freshness.is_none() {
            return;
        }
        let rv = parse_resource_version(resource_version).ok();
        self.record_parsed_resource_version_locked(state, rv);
    }

    fn record_parsed_resource_version_locked(&self, state: &mut State<K>, rv: Option<u64>) {
        let Some(rv) = rv else {
            return;
        };
        let seq = state.seq;
        match state.marks.back_mut() {
            Some(last) if last.0 == seq => last.1 = last.1.max(rv),
            _ => state.marks.push_back((seq, rv)),
        }
        self.advance_freshness_locked(state);
    }

    /// Advances the cache's freshness past every mark whose deltas are all processed.
    fn advance_freshness_locked(&self, state: &mut State<K>) {
        let Some(freshness) = &self.freshness else {
            return;
        };
        let oldest_pending = state
            .queue
            .front()
            .and_then(|key| state.items.get(key))
            .map_or(u64::MAX, |entry| entry.first_seq);
        let mut reached = None;
        while let Some(&(seq, rv)) = state.marks.front() {
            if seq > oldest_pending {
                break;
            }
            reached = Some(rv);
            state.marks.pop_front();
        }
        if let Some(rv) = reached {
            freshness.advance(rv);
        }
    }

    /// Waits for a queued key, removes it with its deltas and runs `process(key, deltas,
    /// is_in_initial_list)` while holding the queue's lock, as client-go's `DeltaFIFO.Pop`.
    /// `is_in_initial_list` is true while the first `replace`'s items are being popped.
    /// Returns [`Error::Closed`] once the queue is closed and empty.
    ///
    /// `process` must not call back into this queue.
    pub async fn pop<R>(&self, process: impl FnOnce(Arc<str>, Deltas<K>, bool) -> R) -> Result<R> {
        let mut process = Some(process);
        loop {
            {
                let mut state = self.lock();
                while let Some(key) = state.queue.pop_front() {
                    let is_in_initial_list = !state.has_synced();
                    if state.initial_population_count > 0 {
                        state.initial_population_count -= 1;
                    }
                    let Some(entry) = state.items.remove(&key) else {
                        tracing::error!(%key, "DeltaFIFO: key queued without deltas; skipping");
                        continue;
                    };
                    // Always `Some`: we return right after using it.
                    let Some(process) = process.take() else {
                        return Err(Error::Closed);
                    };
                    let out = process(key, entry.deltas, is_in_initial_list);
                    self.advance_freshness_locked(&mut state);
                    return Ok(out);
                }
                if state.closed {
                    return Err(Error::Closed);
                }
            }
            // Empty: park, re-checking after registering so no wake-up is missed.
            let mut notified = pin!(self.notify.notified());
            notified.as_mut().enable();
            {
                let state = self.lock();
                if !state.queue.is_empty() || state.closed {
                    continue;
                }
            }
            notified.await;
        }
    }

    /// True once the first `replace`'s items have all been popped (or the first operation was
    /// an add/update/delete), as client-go's `DeltaFIFO.HasSynced`.
    pub fn has_synced(&self) -> bool {
        self.lock().has_synced()
    }

    /// Closes the queue: pops return [`Error::Closed`] once it is empty.
    pub fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_waiters();
    }

    /// Whether [`Self::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// The number of queued keys.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.lock().queue.is_empty()
    }

    /// The queued keys, in pop order.
    pub fn list_keys(&self) -> Vec<String> {
        self.lock().queue.iter().map(|k| k.to_string()).collect()
    }

    /// The newest object of every queued key, in pop order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let state = self.lock();
        state
            .queue
            .iter()
            .filter_map(|k| state.items.get(k))
            .filter_map(|e| e.deltas.last().map(|d| d.object().clone()))
            .collect()
    }

    /// A copy of the deltas queued for `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Deltas<K>> {
        self.lock().items.get(key).map(|e| e.deltas.clone())
    }
}

fn object_rv<K: Resource>(obj: &K) -> Option<u64> {
    obj.meta()
        .resource_version
        .as_deref()
        .and_then(|rv| parse_resource_version(rv).ok())
}

/// Collapses the two newest deltas when both are deletions, keeping the one with more
/// information (the real object over a tombstone), as client-go's `dedupDeltas`.
fn dedup_deltas<K>(deltas: &mut Deltas<K>) {
    let n = deltas.len();
    if n < 2 {
        return;
    }
    let (Delta::Deleted(older), Delta::Deleted(_)) = (&deltas[n - 2], &deltas[n - 1]) else {
        return;
    };
    if older.is_tombstone() {
        deltas.remove(n - 2);
    } else {
        deltas.pop();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;
    use crate::informer::delta::DeltaType;

    /// As client-go's `mkFifoObj`: a cluster-scoped object keyed `name` whose value is its
    /// resourceVersion.
    fn obj(name: &str, val: u64) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(val.to_string()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn val(o: &ConfigMap) -> u64 {
        o.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .expect("test object has a numeric value")
    }

    /// As client-go's `literalListerGetter`: a fixed set of known objects.
    struct Literal(Vec<ConfigMap>);

    impl KnownObjects<ConfigMap> for Literal {
        fn known_entries(&self) -> Vec<(Arc<str>, Arc<ConfigMap>)> {
            self.0
                .iter()
                .map(|o| {
                    (
                        Arc::from(meta_namespace_key(o).expect("key")),
                        Arc::new(o.clone()),
                    )
                })
                .collect()
        }
        fn get_known(&self, key: &str) -> Option<Arc<ConfigMap>> {
            self.0
                .iter()
                .find(|o| o.metadata.name.as_deref() == Some(key))
                .map(|o| Arc::new(o.clone()))
        }
    }

    fn fifo() -> DeltaFifo<ConfigMap> {
        DeltaFifo::new(DeltaFifoOptions::default())
    }

    fn fifo_with_known(known: Vec<ConfigMap>) -> DeltaFifo<ConfigMap> {
        DeltaFifo::new(DeltaFifoOptions {
            known_objects: Some(Arc::new(Literal(known))),
            ..DeltaFifoOptions::default()
        })
    }

    fn added(o: ConfigMap) -> Delta<ConfigMap> {
        Delta::Added(Arc::new(o))
    }
    fn updated(o: ConfigMap) -> Delta<ConfigMap> {
        Delta::Updated(Arc::new(o))
    }
    fn replaced(o: ConfigMap) -> Delta<ConfigMap> {
        Delta::Replaced(Arc::new(o))
    }
    fn synced(o: ConfigMap) -> Delta<ConfigMap> {
        Delta::Sync(Arc::new(o))
    }
    fn deleted(o: ConfigMap) -> Delta<ConfigMap> {
        Delta::Deleted(DeletedObject::Object(Arc::new(o)))
    }
    fn tombstone(key: &str, o: ConfigMap) -> Delta<ConfigMap> {
        Delta::Deleted(DeletedObject::Tombstone(DeletedFinalStateUnknown {
            key: key.into(),
            obj: Arc::new(o),
        }))
    }

    async fn pop(f: &DeltaFifo<ConfigMap>) -> Deltas<ConfigMap> {
        f.pop(|_, deltas, _| deltas).await.expect("not closed")
    }

    /// As client-go's `testPop`: the newest object's value.
    async fn pop_val(f: &DeltaFifo<ConfigMap>) -> u64 {
        let deltas = pop(f).await;
        val(deltas.last().expect("non-empty").object())
    }

    #[tokio::test]
    async fn basic_fifo_order_under_concurrent_producers() {
        // As TestDeltaFIFO_basic.
        let f = Arc::new(fifo());
        const AMOUNT: u64 = 500;
        let a = tokio::spawn({
            let f = f.clone();
            async move {
                for i in 0..AMOUNT {
                    f.add(obj(&format!("a{i}"), i + 1)).expect("add");
                    tokio::task::yield_now().await;
                }
            }
        });
        let b = tokio::spawn({
            let f = f.clone();
            async move {
                for i in 0..AMOUNT {
                    f.add(obj(&format!("b{i}"), i + 1)).expect("add");
                    tokio::task::yield_now().await;
                }
            }
        });
        let (mut last_a, mut last_b) = (0, 0);
        for _ in 0..AMOUNT * 2 {
            let deltas = pop(&f).await;
            let o = deltas[0].object();
            let v = val(o);
            let name = o.metadata.name.clone().expect("name");
            let last = if name.starts_with('a') {
                &mut last_a
            } else {
                &mut last_b
            };
            assert!(v > *last, "{name} out of order: {v} after {last}");
            *last = v;
        }
        a.await.expect("producer a");
        b.await.expect("producer b");
    }

    #[tokio::test]
    async fn replace_with_delete_delta_in_queue_still_replaces() {
        // As TestDeltaFIFO_replaceWithDeleteDeltaIn (kubernetes#83810).
        let old = obj("foo", 1);
        let new = obj("foo", 2);
        let f = fifo_with_known(vec![old.clone()]);
        f.delete(old.clone()).expect("delete");
        f.replace(vec![new.clone()], "");
        assert_eq!(pop(&f).await, vec![deleted(old), replaced(new)]);
    }

    #[tokio::test]
    async fn replace_makes_deletions_for_objects_only_in_queue() {
        // As TestDeltaFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue, with Replaced deltas
        // (informers always emit them).
        type Ops = fn(&DeltaFifo<ConfigMap>);
        struct Case {
            name: &'static str,
            operations: Ops,
            expected: Deltas<ConfigMap>,
        }
        let o = obj("foo", 2);
        let o2 = obj("foo", 3);
        let cases = [
            Case {
                name: "added object should be deleted on replace",
                operations: |f| {
                    f.add(obj("foo", 2)).expect("add");
                    f.replace(vec![], "0");
                },
                expected: vec![added(o.clone()), tombstone("foo", o.clone())],
            },
            Case {
                name: "replaced object should have only a single delete",
                operations: |f| {
                    f.add(obj("foo", 2)).expect("add");
                    f.replace(vec![obj("foo", 2)], "0");
                    f.replace(vec![], "0");
                },
                expected: vec![
                    added(o.clone()),
                    replaced(o.clone()),
                    tombstone("foo", o.clone()),
                ],
            },
            Case {
                name: "deleted object should have only a single delete",
                operations: |f| {
                    f.add(obj("foo", 2)).expect("add");
                    f.delete(obj("foo", 2)).expect("delete");
                    f.replace(vec![], "0");
                },
                expected: vec![added(o.clone()), deleted(o.clone())],
            },
            Case {
                name: "replaced twice then missing should have a single delete",
                operations: |f| {
                    f.add(obj("foo", 2)).expect("add");
                    f.replace(vec![obj("foo", 2)], "0");
                    f.replace(vec![obj("foo", 2)], "0");
                    f.replace(vec![], "0");
                },
                expected: vec![
                    added(o.clone()),
                    replaced(o.clone()),
                    replaced(o.clone()),
                    tombstone("foo", o.clone()),
                ],
            },
            Case {
                name: "added objects should have a single delete on multiple replaces",
                operations: |f| {
                    f.add(obj("foo", 2)).expect("add");
                    f.replace(vec![], "0");
                    f.replace(vec![], "1");
                },
                expected: vec![added(o.clone()), tombstone("foo", o.clone())],
            },
            Case {
                name: "added and deleted and added object should be deleted",
                operations: |f| {
                    f.add(obj("foo", 2)).expect("add");
                    f.delete(obj("foo", 2)).expect("delete");
                    f.add(obj("foo", 3)).expect("add");
                    f.replace(vec![], "0");
                },
                expected: vec![
                    added(o.clone()),
                    deleted(o.clone()),
                    added(o2.clone()),
                    tombstone("foo", o2.clone()),
                ],
            },
        ];
        for case in cases {
            for (variant, f) in [
                ("with known objects", fifo_with_known(vec![])),
                ("without known objects", fifo()),
            ] {
                (case.operations)(&f);
                assert_eq!(pop(&f).await, case.expected, "{} ({variant})", case.name);
                assert!(f.is_empty(), "{} ({variant}): extra deltas", case.name);
            }
        }
    }

    #[tokio::test]
    async fn add_update_delete_collapse_into_one_key() {
        // As TestDeltaFIFO_addUpdate.
        let f = fifo();
        f.add(obj("foo", 10)).expect("add");
        f.update(obj("foo", 12)).expect("update");
        f.delete(obj("foo", 15)).expect("delete");
        assert_eq!(
            f.list().iter().map(|o| val(o)).collect::<Vec<_>>(),
            vec![15]
        );
        assert_eq!(f.list_keys(), vec!["foo".to_owned()]);
        assert_eq!(
            pop(&f).await,
            vec![
                added(obj("foo", 10)),
                updated(obj("foo", 12)),
                deleted(obj("foo", 15))
            ]
        );
        assert!(f.get_by_key("foo").is_none());
        assert!(f.is_empty());
    }

    #[tokio::test]
    async fn delete_of_unknown_key_is_dropped_without_lister() {
        // As TestDeltaFIFO_enqueueingNoLister.
        let f = fifo();
        f.add(obj("foo", 10)).expect("add");
        f.update(obj("bar", 15)).expect("update");
        f.add(obj("qux", 17)).expect("add");
        f.delete(obj("qux", 18)).expect("delete");
        // baz does not exist: nothing is queued.
        f.delete(obj("baz", 20)).expect("delete");
        for want in [10, 15, 18] {
            assert_eq!(pop_val(&f).await, want);
        }
        assert!(f.is_empty());
    }

    #[tokio::test]
    async fn delete_of_known_key_is_queued_with_lister() {
        // As TestDeltaFIFO_enqueueingWithLister.
        let f = fifo_with_known(vec![obj("foo", 5), obj("bar", 6), obj("baz", 7)]);
        f.add(obj("foo", 10)).expect("add");
        f.update(obj("bar", 15)).expect("update");
        // baz is known: the deletion is queued.
        f.delete(obj("baz", 20)).expect("delete");
        for want in [10, 15, 20] {
            assert_eq!(pop_val(&f).await, want);
        }
        assert!(f.is_empty());
    }

    #[tokio::test]
    async fn delete_of_key_unknown_to_queue_and_lister_is_dropped() {
        let f = fifo_with_known(vec![obj("foo", 5)]);
        f.delete(obj("bar", 1)).expect("delete");
        assert!(f.is_empty());
        // The dropped delete still counts as the first operation (populated).
        assert!(f.has_synced());
    }

    #[tokio::test]
    async fn add_then_replace_keeps_one_entry() {
        // As TestDeltaFIFO_addReplace.
        let f = fifo();
        f.add(obj("foo", 10)).expect("add");
        f.replace(vec![obj("foo", 15)], "0");
        assert_eq!(pop_val(&f).await, 15);
        assert!(f.is_empty());
        assert!(f.get_by_key("foo").is_none());
    }

    #[tokio::test]
    async fn resync_does_not_resurrect_a_queued_deletion() {
        // As TestDeltaFIFO_ResyncNonExisting.
        let f = fifo_with_known(vec![obj("foo", 5)]);
        f.delete(obj("foo", 10)).expect("delete");
        f.resync();
        let deltas = f.get_by_key("foo").expect("queued");
        assert_eq!(deltas.len(), 1);
        assert_eq!(deltas[0].delta_type(), DeltaType::Deleted);
    }

    #[tokio::test]
    async fn resync_emits_sync_for_known_objects() {
        // As TestDeltaFIFO_Resync.
        let f = fifo_with_known(vec![obj("foo", 5)]);
        f.resync();
        assert_eq!(
            f.get_by_key("foo").expect("queued"),
            vec![synced(obj("foo", 5))]
        );
    }

    #[tokio::test]
    async fn resync_skips_objects_with_queued_changes() {
        // As TestDeltaFIFO_UpdateResyncRace.
        let f = fifo_with_known(vec![obj("foo", 5)]);
        f.update(obj("foo", 6)).expect("update");
        f.resync();
        assert_eq!(pop(&f).await, vec![updated(obj("foo", 6))]);
        assert!(f.is_empty());
    }

    #[tokio::test]
    async fn delete_of_added_object_not_yet_known_is_queued() {
        // As TestDeltaFIFO_DeleteExistingNonPropagated.
        let f = fifo_with_known(vec![]);
        f.add(obj("foo", 5)).expect("add");
        f.delete(obj("foo", 6)).expect("delete");
        let deltas = f.get_by_key("foo").expect("queued");
        assert_eq!(deltas.len(), 2);
        assert_eq!(deltas[1].delta_type(), DeltaType::Deleted);
    }

    #[tokio::test]
    async fn replace_makes_deletions() {
        // As TestDeltaFIFO_ReplaceMakesDeletions / ...Replaced. Keys are popped in queue
        // order; tombstones for known keys come after the listed ones (client-go makes no
        // promise between several tombstones, so each case has at most one).
        let known = || vec![obj("foo", 5), obj("bar", 6), obj("baz", 7)];

        // A pre-existing delete.
        let f = fifo_with_known(known());
        f.delete(obj("baz", 10)).expect("delete");
        f.replace(vec![obj("foo", 6)], "0");
        assert_eq!(pop(&f).await, vec![deleted(obj("baz", 10))]);
        assert_eq!(pop(&f).await, vec![replaced(obj("foo", 6))]);
        assert_eq!(pop(&f).await, vec![tombstone("bar", obj("bar", 6))]);
        assert!(f.is_empty());

        // A pre-existing add: the tombstone carries the queued (newer) object.
        let f = fifo_with_known(known());
        f.add(obj("baz", 10)).expect("add");
        f.replace(vec![obj("foo", 5)], "0");
        assert_eq!(
            pop(&f).await,
            vec![added(obj("baz", 10)), tombstone("baz", obj("baz", 10))]
        );
        assert_eq!(pop(&f).await, vec![replaced(obj("foo", 5))]);
        assert_eq!(pop(&f).await, vec![tombstone("bar", obj("bar", 6))]);
        assert!(f.is_empty());

        // Deleted and re-created in the queue, then missing from a relist.
        let f = fifo_with_known(known());
        f.delete(obj("bar", 6)).expect("delete");
        f.add(obj("bar", 100)).expect("add");
        f.replace(vec![obj("foo", 5)], "0");
        assert_eq!(
            pop(&f).await,
            vec![
                deleted(obj("bar", 6)),
                added(obj("bar", 100)),
                tombstone("bar", obj("bar", 100)),
            ]
        );
        assert_eq!(pop(&f).await, vec![replaced(obj("foo", 5))]);
        assert_eq!(pop(&f).await, vec![tombstone("baz", obj("baz", 7))]);
        assert!(f.is_empty());

        // Replaced first, so the tombstone uses the newest (relisted) state.
        let f = fifo_with_known(known());
        f.replace(vec![obj("bar", 100), obj("foo", 5)], "0");
        f.replace(vec![obj("foo", 5)], "0");
        assert_eq!(
            pop(&f).await,
            vec![replaced(obj("bar", 100)), tombstone("bar", obj("bar", 100))]
        );
        assert_eq!(
            pop(&f).await,
            vec![replaced(obj("foo", 5)), replaced(obj("foo", 5))]
        );
        assert_eq!(pop(&f).await, vec![tombstone("baz", obj("baz", 7))]);
        assert!(f.is_empty());

        // Without known objects, only queued keys can be tombstoned.
        let f = fifo();
        f.add(obj("baz", 10)).expect("add");
        f.replace(vec![obj("foo", 5)], "0");
        assert_eq!(
            pop(&f).await,
            vec![added(obj("baz", 10)), tombstone("baz", obj("baz", 10))]
        );
        assert_eq!(pop(&f).await, vec![replaced(obj("foo", 5))]);
        assert!(f.is_empty());
    }

    #[tokio::test]
    async fn replace_emits_replaced_for_known_listed_objects() {
        // As TestDeltaFIFO_ReplaceDeltaType.
        let f = fifo_with_known(vec![obj("foo", 5)]);
        f.replace(vec![obj("foo", 5)], "0");
        assert_eq!(pop(&f).await, vec![replaced(obj("foo", 5))]);
    }

    #[tokio::test]
    async fn has_synced_counts_tombstones_of_the_first_replace() {
        // As TestDeltaFIFO_HasSyncedCorrectOnDeletion.
        let f = fifo_with_known(vec![obj("foo", 5), obj("bar", 6), obj("baz", 7)]);
        f.replace(vec![obj("foo", 5)], "0");
        let mut popped = Vec::new();
        for _ in 0..3 {
            assert!(!f.has_synced());
            popped.push(pop(&f).await);
        }
        assert!(f.has_synced());
        assert_eq!(popped[0], vec![replaced(obj("foo", 5))]);
        let mut tombstones: Vec<Delta<ConfigMap>> =
            popped[1..].iter().map(|d| d[0].clone()).collect();
        tombstones.sort_by_key(|d| d.object().metadata.name.clone());
        assert_eq!(
            tombstones,
            vec![
                tombstone("bar", obj("bar", 6)),
                tombstone("baz", obj("baz", 7))
            ]
        );
    }

    #[tokio::test]
    async fn a_key_keeps_its_place_in_line() {
        // As TestDeltaFIFO_detectLineJumpers.
        let f = fifo();
        f.add(obj("foo", 10)).expect("add");
        f.add(obj("bar", 1)).expect("add");
        f.add(obj("foo", 11)).expect("add");
        f.add(obj("foo", 13)).expect("add");
        f.add(obj("zab", 30)).expect("add");
        assert_eq!(pop_val(&f).await, 13);
        // foo must not jump back in line.
        f.add(obj("foo", 14)).expect("add");
        for want in [1, 30, 14] {
            assert_eq!(pop_val(&f).await, want);
        }
    }

    #[tokio::test]
    async fn has_synced_table() {
        // As TestDeltaFIFO_HasSynced.
        type Action = fn(&DeltaFifo<ConfigMap>);
        struct Case {
            name: &'static str,
            actions: Vec<Action>,
            pops: usize,
            expected: bool,
        }
        let cases = [
            Case {
                name: "nothing happened",
                actions: vec![],
                pops: 0,
                expected: false,
            },
            Case {
                name: "an add first",
                actions: vec![|f| f.add(obj("a", 1)).expect("add")],
                pops: 0,
                expected: true,
            },
            Case {
                name: "an empty replace",
                actions: vec![|f| f.replace(vec![], "0")],
                pops: 0,
                expected: true,
            },
            Case {
                name: "a replace of two, nothing popped",
                actions: vec![|f| f.replace(vec![obj("a", 1), obj("b", 2)], "0")],
                pops: 0,
                expected: false,
            },
            Case {
                name: "a replace of two, one popped",
                actions: vec![|f| f.replace(vec![obj("a", 1), obj("b", 2)], "0")],
                pops: 1,
                expected: false,
            },
            Case {
                name: "a replace of two, both popped",
                actions: vec![|f| f.replace(vec![obj("a", 1), obj("b", 2)], "0")],
                pops: 2,
                expected: true,
            },
            Case {
                name: "a replace with a duplicate key counts the key once",
                actions: vec![|f| f.replace(vec![obj("a", 1), obj("a", 2)], "0")],
                pops: 1,
                expected: true,
            },
        ];
        for case in cases {
            let f = fifo();
            for action in &case.actions {
                action(&f);
            }
            for _ in 0..case.pops {
                pop(&f).await;
            }
            assert_eq!(f.has_synced(), case.expected, "{}", case.name);
        }
    }

    #[tokio::test]
    async fn is_in_initial_list_is_true_only_for_the_first_replace() {
        let f = fifo();
        f.replace(vec![obj("a", 1), obj("b", 2)], "2");
        f.add(obj("c", 3)).expect("add");
        let mut flags = Vec::new();
        for _ in 0..3 {
            flags.push(f.pop(|_, _, initial| initial).await.expect("pop"));
        }
        assert_eq!(flags, vec![true, true, false]);
    }

    #[tokio::test(start_paused = true)]
    async fn pop_unblocks_when_closed() {
        // As TestDeltaFIFO_PopShouldUnblockWhenClosed.
        let f = Arc::new(fifo_with_known(vec![obj("foo", 5)]));
        let mut poppers = Vec::new();
        for _ in 0..10 {
            let f = f.clone();
            poppers.push(tokio::spawn(async move { f.pop(|_, _, _| ()).await }));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        f.close();
        for p in poppers {
            assert_eq!(p.await.expect("join"), Err(Error::Closed));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn pop_waits_for_an_add() {
        let f = Arc::new(fifo());
        let popper = tokio::spawn({
            let f = f.clone();
            async move { f.pop(|key, _, _| key.to_string()).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!popper.is_finished());
        f.add(obj("foo", 1)).expect("add");
        assert_eq!(popper.await.expect("join"), Ok("foo".to_owned()));
    }

    #[tokio::test]
    async fn transform_applies_to_received_objects_only() {
        let f = DeltaFifo::new(DeltaFifoOptions {
            known_objects: Some(Arc::new(Literal(vec![obj("known", 1)]))),
            transform: Some(Arc::new(|mut o: ConfigMap| {
                o.metadata.labels = Some([("t".to_owned(), "1".to_owned())].into());
                o
            })),
            freshness: None,
        });
        f.add(obj("a", 1)).expect("add");
        f.resync();
        let transformed = |d: &Delta<ConfigMap>| d.object().metadata.labels.is_some();
        assert!(transformed(&pop(&f).await[0]));
        // The resync delta carries the known object untouched.
        assert!(!transformed(&pop(&f).await[0]));
    }

    #[tokio::test]
    async fn freshness_advances_only_when_earlier_deltas_are_processed() {
        let freshness = Freshness::new();
        let f = DeltaFifo::new(DeltaFifoOptions {
            freshness: Some(freshness.clone()),
            ..DeltaFifoOptions::default()
        });
        f.replace(vec![obj("a", 5), obj("b", 7)], "7");
        assert_eq!(freshness.resource_version(), None);
        f.add(obj("c", 8)).expect("add");
        f.update_resource_version("8");
        // A bookmark with nothing new queued.
        f.update_resource_version("9");
        pop(&f).await;
        assert_eq!(freshness.resource_version(), None);
        pop(&f).await;
        assert_eq!(freshness.resource_version(), Some(7));
        pop(&f).await;
        assert_eq!(freshness.resource_version(), Some(9));
        // With nothing pending, a bookmark is reached at once.
        f.update_resource_version("12");
        assert_eq!(freshness.resource_version(), Some(12));
    }

    #[tokio::test]
    async fn freshness_waits_for_a_key_with_appended_deltas() {
        let freshness = Freshness::new();
        let f = DeltaFifo::new(DeltaFifoOptions {
            freshness: Some(freshness.clone()),
            ..DeltaFifoOptions::default()
        });
        f.add(obj("a", 1)).expect("add");
        f.update_resource_version("1");
        f.add(obj("b", 2)).expect("add");
        f.update_resource_version("2");
        // "a" is still at the front, with a newer delta appended.
        f.update(obj("a", 3)).expect("update");
        f.update_resource_version("3");
        pop(&f).await; // a (1 and 3)
        assert_eq!(freshness.resource_version(), Some(1));
        pop(&f).await; // b
        assert_eq!(freshness.resource_version(), Some(3));
    }
}
