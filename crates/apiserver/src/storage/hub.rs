//! Watch fan-out: committed events dispatched to many watchers, each with a bounded buffer.
//!
//! Every backend (and the watch cache) owns one [`WatchHub`]. The writer publishes each
//! committed event once, in revision order; the hub keeps an optional ring of recent events
//! (so a watch from a recent revision is served from memory) and hands a clone of the event to
//! every registered watcher whose prefix matches. Cloning an [`Event`] only bumps reference
//! counts (`Arc<str>` keys, `Bytes` values), so fan-out never copies objects.
//!
//! Each watcher has a bounded queue. A watcher that falls more than that many events behind is
//! dropped rather than allowed to grow memory without bound: its stream delivers what was
//! already queued and then ends with [`Error::Compacted`], which the API server reports as
//! 410 Gone so the client relists (upstream's cacher likewise closes unresponsive watchers).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc;

use super::{Error, Event, Result, Revision, WatchStream};

/// How many events a watcher may have queued before it is dropped, unless configured.
pub const DEFAULT_WATCHER_BUFFER: usize = 4096;

/// Fan-out of committed events to watchers, with a ring of recent events.
pub(crate) struct WatchHub {
    /// The ring, its window and the registered watchers, behind one lock so that registering
    /// a watcher and reading its backlog is atomic with respect to publishing.
    state: Mutex<HubState>,
    /// The queue bound of each watcher (at least 1).
    watcher_buffer: usize,
}

struct HubState {
    /// Recent events in strictly increasing revision order. Every event with a revision in
    /// `(floor, last]` is in `ring`; older ones may have been dropped.
    ring: VecDeque<Event>,
    /// The most events `ring` holds (0 keeps none: every backlog comes from the backend).
    ring_capacity: usize,
    /// The bytes of values each event of `ring` holds that no earlier ring event shares
    /// (same order and length as `ring`).
    ring_sizes: VecDeque<usize>,
    /// The sum of `ring_sizes`.
    ring_bytes: usize,
    /// The most bytes `ring` holds: the oldest events are dropped beyond it, except the
    /// newest, which is always kept (while `ring_capacity` > 0).
    ring_byte_limit: usize,
    /// Events at or below this revision are not (all) in the ring.
    floor: Revision,
    /// The revision of the last published event (or the starting revision); `floor <= last`.
    last: Revision,
    /// Every change at or below this revision has been published (`last <= progressed`):
    /// `last`, or further when a progress notification said nothing changed in between.
    progressed: Revision,
    /// Registered watchers; a watcher whose receiver was dropped is removed lazily.
    watchers: Vec<WatcherSender>,
}

/// The hub's end of one watcher.
struct WatcherSender {
    /// Only events whose key starts with this prefix are sent.
    prefix: Box<str>,
    /// Only events with a revision strictly greater than this are sent (the part at or below
    /// it was, or will be, delivered from the watcher's backlog).
    after: Revision,
    /// The revision of the last event queued to this watcher (`after` before the first).
    queued: Revision,
    /// The bounded queue to the watcher's stream.
    tx: mpsc::Sender<Event>,
    /// Set (before `tx` is dropped) when the watcher is cut off; the stream reports it.
    cut: Arc<OnceLock<Cut>>,
}

/// Why a watcher was cut off: it had received everything up to `delivered`, and the event at
/// `missed` could not be queued (or history after `delivered` is no longer available).
#[derive(Clone, Copy, Debug)]
struct Cut {
    delivered: Revision,
    missed: Revision,
}

/// What a new watcher still needs besides the live events the hub will send it.
pub(crate) enum Backlog {
    /// The events after the requested revision, taken from the ring.
    Ready(Vec<Event>),
    /// The ring does not reach back far enough: the caller must read the events in
    /// `(after, upto]` from the backend; the hub sends every event after `upto`.
    Missing {
        /// The last revision the hub will not send.
        upto: Revision,
    },
}

/// A registered watcher whose backlog is not attached yet.
pub(crate) struct Subscription {
    rx: mpsc::Receiver<Event>,
    cut: Arc<OnceLock<Cut>>,
}

impl WatchHub {
    /// A hub whose window starts at `start` (events up to `start` are the backend's business),
    /// keeping up to `ring_capacity` recent events and queueing up to `watcher_buffer` events
    /// per watcher.
    pub(crate) fn new(start: Revision, ring_capacity: usize, watcher_buffer: usize) -> Self {
        WatchHub {
            state: Mutex::new(HubState {
                ring: VecDeque::with_capacity(ring_capacity.min(1024)),
                ring_capacity,
                ring_sizes: VecDeque::with_capacity(ring_capacity.min(1024)),
                ring_bytes: 0,
                ring_byte_limit: usize::MAX,
                floor: start,
                last: start,
                progressed: start,
                watchers: Vec::new(),
            }),
            watcher_buffer: watcher_buffer.max(1),
        }
    }

    /// Also bounds the ring by the bytes of the values it holds: a window sized by events
    /// alone holds ten thousand whole objects however large they are (BENCHMARKS.md, "Memory
    /// of the 10k run"). A watch from before the window reads its backlog from the backend.
    pub(crate) fn with_ring_byte_limit(self, bytes: usize) -> Self {
        self.lock().ring_byte_limit = bytes;
        self
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        // A panic while holding the lock cannot leave the state half-updated in a way that
        // breaks its invariants worse than losing one event, so poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The revision of the last published event (or the start revision).
    pub(crate) fn last_revision(&self) -> Revision {
        self.lock().last
    }

    /// The revision up to which every change has been published: the last event's, or a
    /// later one reported by [`Event::Progress`].
    pub(crate) fn progress_revision(&self) -> Revision {
        self.lock().progressed
    }

    /// The oldest revision `after` for which [`WatchHub::subscribe`] returns a ready backlog.
    #[cfg(test)]
    pub(crate) fn floor(&self) -> Revision {
        self.lock().floor
    }

    /// Publishes one committed event. Callers publish in strictly increasing revision order
    /// (they hold their own write lock or are the only writer); an event at or below the last
    /// published revision is ignored.
    ///
    /// An [`Event::Progress`] only moves the progress revision: it is neither kept in the ring
    /// nor sent to watchers, who learn of it through [`WatchHub::progress_revision`]. It does
    /// not move `last` either, so an event at or below it that still arrives (an etcd without the
    /// fix for etcd-io/etcd#15220 may send a progress notification ahead of an event of the
    /// same revision) is still published rather than lost.
    ///
    /// The version an update or delete replaced is usually the ring's previous event for the
    /// key, read back from the backend as a separate copy; it is swapped for the ring's copy
    /// (see [`share_prev_locked`]) so that each version is held once, not twice.
    pub(crate) fn publish(&self, mut event: Event) {
        let mut state = self.lock();
        let rev = event.revision();
        if let Event::Progress { .. } = event {
            state.progressed = state.progressed.max(rev);
            return;
        }
        if rev <= state.last {
            return;
        }
        let size = share_prev_locked(&state.ring, &mut event);
        state.last = rev;
        state.progressed = state.progressed.max(rev);
        dispatch_locked(&mut state.watchers, &event);
        if state.ring_capacity == 0 {
            state.floor = rev;
            return;
        }
        while (state.ring.len() >= state.ring_capacity
            || state.ring_bytes.saturating_add(size) > state.ring_byte_limit)
            && let Some(old) = state.ring.pop_front()
        {
            state.floor = old.revision();
            state.ring_bytes -= state.ring_sizes.pop_front().unwrap_or(0);
        }
        state.ring.push_back(event);
        state.ring_sizes.push_back(size);
        state.ring_bytes += size;
        debug_assert_eq!(state.ring.len(), state.ring_sizes.len());
    }

    /// Registers a watcher for keys under `prefix` with revisions after `after`, and returns
    /// what it still needs from elsewhere.
    pub(crate) fn subscribe(&self, prefix: &str, after: Revision) -> (Backlog, Subscription) {
        let (tx, rx) = mpsc::channel(self.watcher_buffer);
        let cut = Arc::new(OnceLock::new());
        let mut state = self.lock();
        let backlog = if after >= state.floor {
            let start = state.ring.partition_point(|e| e.revision() <= after);
            Backlog::Ready(
                state
                    .ring
                    .range(start..)
                    .filter(|e| e.is_under(prefix))
                    .cloned()
                    .collect(),
            )
        } else {
            Backlog::Missing { upto: state.last }
        };
        let after = after.max(state.last);
        state.watchers.push(WatcherSender {
            prefix: prefix.into(),
            after,
            queued: after,
            tx,
            cut: Arc::clone(&cut),
        });
        (backlog, Subscription { rx, cut })
    }

    /// Forgets the ring and restarts the window at `start`, cutting off every watcher: used
    /// when the source of events had a gap (the watch cache lost its backend watch).
    pub(crate) fn reset(&self, start: Revision) {
        let mut state = self.lock();
        state.ring.clear();
        state.ring_sizes.clear();
        state.ring_bytes = 0;
        state.floor = start;
        state.last = start;
        state.progressed = start;
        for w in state.watchers.drain(..) {
            let _ = w.cut.set(Cut {
                delivered: w.queued,
                missed: start,
            });
        }
    }

    /// How many watchers are registered (including ones not yet noticed as gone).
    #[cfg(test)]
    pub(crate) fn watcher_count(&self) -> usize {
        self.lock().watchers.len()
    }
}

/// Makes `event`'s replaced version share the bytes (and key) of the ring's event that wrote
/// it, when that event is still in the ring and holds exactly the same version. Backends read
/// the replaced version back from storage for every update and delete; without this, the ring,
/// the watchers' queues and everything downstream would hold two copies of each version that
/// was later replaced (BENCHMARKS.md, "Memory of the 10k run").
///
/// Returns the bytes of values the event holds that no earlier ring event shares.
fn share_prev_locked(ring: &VecDeque<Event>, event: &mut Event) -> usize {
    let (own, prev) = match event {
        Event::Put {
            kv,
            prev: Some(prev),
        } => (kv.value.len(), prev),
        Event::Delete { prev, .. } => (0, prev),
        Event::Put { kv, prev: None } => return kv.value.len(),
        Event::Progress { .. } => return 0,
    };
    let unshared = own + prev.value.len();
    // The ring is in strictly increasing revision order.
    let at = ring.partition_point(|e| e.revision() < prev.mod_revision);
    let Some(Event::Put { kv: written, .. }) = ring.get(at) else {
        return unshared;
    };
    // Equal bytes are a cheap check next to a copy kept for minutes, and keep this exact even
    // if a backend ever handed out a different value for the same revision.
    if written.mod_revision == prev.mod_revision
        && written.key == prev.key
        && written.value == prev.value
    {
        prev.key = Arc::clone(&written.key);
        prev.value = written.value.clone();
        if let Event::Put { kv, .. } = event {
            kv.key = Arc::clone(&written.key);
        }
        return own;
    }
    unshared
}

/// Sends `event` to every matching watcher, dropping closed and overflowing ones.
fn dispatch_locked(watchers: &mut Vec<WatcherSender>, event: &Event) {
    let rev = event.revision();
    watchers.retain_mut(|w| {
        if rev <= w.after || !event.is_under(&w.prefix) {
            return !w.tx.is_closed();
        }
        match w.tx.try_send(event.clone()) {
            Ok(()) => {
                w.queued = rev;
                true
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                let _ = w.cut.set(Cut {
                    delivered: w.queued,
                    missed: rev,
                });
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    });
}

impl Subscription {
    /// The watch stream: `backlog` (events after the requested revision up to where the hub
    /// took over, in order), then the live events.
    pub(crate) fn into_stream(self, backlog: Vec<Event>) -> WatchStream {
        Box::pin(HubStream {
            backlog: backlog.into_iter(),
            rx: self.rx,
            cut: self.cut,
            done: false,
        })
    }
}

/// A watcher's stream: its backlog, then its queue, then (if it was cut off) an error.
struct HubStream {
    backlog: std::vec::IntoIter<Event>,
    rx: mpsc::Receiver<Event>,
    cut: Arc<OnceLock<Cut>>,
    /// The queue is closed and the final item was produced.
    done: bool,
}

impl Stream for HubStream {
    type Item = Result<Event>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(event) = this.backlog.next() {
            return Poll::Ready(Some(Ok(event)));
        }
        if this.done {
            return Poll::Ready(None);
        }
        match this.rx.poll_recv(cx) {
            Poll::Ready(Some(event)) => Poll::Ready(Some(Ok(event))),
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(this.cut.get().map(|cut| {
                    Err(Error::Compacted {
                        requested: cut.delivered,
                        compacted: cut.missed,
                    })
                }))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use futures::{FutureExt, StreamExt};

    use super::*;
    use crate::storage::KeyValue;

    fn put(key: &str, rev: Revision) -> Event {
        Event::Put {
            kv: KeyValue {
                key: key.into(),
                value: Bytes::from_static(b"v"),
                create_revision: rev,
                mod_revision: rev,
            },
            prev: None,
        }
    }

    fn revs(events: &[Event]) -> Vec<Revision> {
        events.iter().map(Event::revision).collect()
    }

    fn kv(key: &str, value: &[u8], create: Revision, rev: Revision) -> KeyValue {
        KeyValue {
            key: key.into(),
            // A fresh allocation each time, as a backend reading the row back makes.
            value: Bytes::copy_from_slice(value),
            create_revision: create,
            mod_revision: rev,
        }
    }

    /// The ring's events for `key` after revision 0.
    fn ring_events(hub: &WatchHub, key: &str) -> Vec<Event> {
        match hub.subscribe(key, 0).0 {
            Backlog::Ready(events) => events,
            Backlog::Missing { .. } => panic!("the ring covers revision 0"),
        }
    }

    /// The ring's events after `after`.
    fn ring_events_after(hub: &WatchHub, after: Revision) -> Vec<Event> {
        match hub.subscribe("", after).0 {
            Backlog::Ready(events) => events,
            Backlog::Missing { .. } => panic!("the ring covers revision {after}"),
        }
    }

    #[test]
    fn a_replaced_version_shares_the_bytes_of_the_event_that_wrote_it() {
        let hub = WatchHub::new(0, 10, 16);
        hub.publish(Event::Put {
            kv: kv("/p/a", b"v1", 1, 1),
            prev: None,
        });
        hub.publish(put("/p/b", 2));
        hub.publish(Event::Put {
            kv: kv("/p/a", b"v2", 1, 3),
            prev: Some(kv("/p/a", b"v1", 1, 1)),
        });
        hub.publish(Event::Delete {
            revision: 4,
            prev: kv("/p/a", b"v2", 1, 3),
        });
        let events = ring_events(&hub, "/p/a");
        let [
            Event::Put { kv: v1, prev: None },
            Event::Put {
                kv: v2,
                prev: Some(replaced_v1),
            },
            Event::Delete {
                prev: replaced_v2, ..
            },
        ] = events.as_slice()
        else {
            panic!("create, update, delete: {events:?}");
        };
        assert_eq!(replaced_v1, v1, "same version");
        assert_eq!(replaced_v1.value.as_ptr(), v1.value.as_ptr(), "not a copy");
        assert!(Arc::ptr_eq(&replaced_v1.key, &v1.key));
        assert!(Arc::ptr_eq(&v2.key, &v1.key), "the key is shared too");
        assert_eq!(replaced_v2, v2);
        assert_eq!(replaced_v2.value.as_ptr(), v2.value.as_ptr(), "not a copy");
    }

    #[test]
    fn a_replaced_version_that_differs_from_the_ring_is_kept_as_given() {
        let hub = WatchHub::new(0, 10, 16);
        hub.publish(Event::Put {
            kv: kv("/p/a", b"v1", 1, 1),
            prev: None,
        });
        // Not what revision 1 wrote (a backend bug or another key): delivered unchanged.
        let odd = kv("/p/a", b"other", 1, 1);
        hub.publish(Event::Put {
            kv: kv("/p/a", b"v2", 1, 2),
            prev: Some(odd.clone()),
        });
        // Older than the ring: nothing to share with.
        let old = kv("/p/c", b"v0", 0, 0);
        hub.publish(Event::Delete {
            revision: 3,
            prev: old.clone(),
        });
        let events = ring_events(&hub, "/p/");
        let Event::Put {
            prev: Some(prev), ..
        } = &events[1]
        else {
            panic!("an update: {events:?}");
        };
        assert_eq!(prev, &odd);
        let Event::Delete { prev, .. } = &events[2] else {
            panic!("a delete: {events:?}");
        };
        assert_eq!(prev, &old);
    }

    #[test]
    fn the_ring_is_bounded_by_bytes_as_well_as_events() {
        // 30 bytes: three 10-byte values, or one update whose replaced version is shared.
        let hub = WatchHub::new(0, 100, 16).with_ring_byte_limit(30);
        for rev in 1..=3 {
            hub.publish(Event::Put {
                kv: kv(&format!("/p/{rev}"), &[b'x'; 10], rev, rev),
                prev: None,
            });
        }
        assert_eq!(hub.floor(), 0, "30 bytes fit");
        hub.publish(Event::Put {
            kv: kv("/p/3", &[b'y'; 10], 3, 4),
            prev: Some(kv("/p/3", &[b'x'; 10], 3, 3)),
        });
        assert_eq!(
            hub.floor(),
            1,
            "the oldest event made room for 10 bytes, not 20"
        );
        assert_eq!(revs(&ring_events_after(&hub, 1)), vec![2, 3, 4]);
        assert!(matches!(
            hub.subscribe("/p/", 0).0,
            Backlog::Missing { upto: 4 }
        ));
        // A value larger than the limit is still kept, alone.
        hub.publish(Event::Put {
            kv: kv("/p/big", &[b'z'; 100], 5, 5),
            prev: None,
        });
        assert_eq!(hub.floor(), 4);
        assert_eq!(revs(&ring_events_after(&hub, 4)), vec![5]);
    }

    #[tokio::test]
    async fn ring_backlog_then_live_events_filtered_by_prefix() {
        let hub = WatchHub::new(0, 10, 16);
        hub.publish(put("/a/1", 1));
        hub.publish(put("/b/1", 2));
        hub.publish(put("/a/2", 3));
        let (backlog, sub) = hub.subscribe("/a/", 1);
        let Backlog::Ready(events) = backlog else {
            panic!("ring covers revision 1");
        };
        assert_eq!(revs(&events), vec![3]);
        let mut stream = sub.into_stream(events);
        hub.publish(put("/b/2", 4));
        hub.publish(put("/a/3", 5));
        let got: Vec<_> = stream
            .by_ref()
            .take(2)
            .map(|r| r.expect("event"))
            .collect()
            .await;
        assert_eq!(revs(&got), vec![3, 5]);
        assert!(
            stream.next().now_or_never().is_none(),
            "nothing else queued"
        );
    }

    #[tokio::test]
    async fn ring_window_moves_and_older_revisions_are_missing() {
        let hub = WatchHub::new(0, 2, 16);
        for rev in 1..=4 {
            hub.publish(put("/k", rev));
        }
        assert_eq!(hub.floor(), 2);
        assert!(matches!(hub.subscribe("", 2).0, Backlog::Ready(ref e) if revs(e) == vec![3, 4]));
        assert!(matches!(
            hub.subscribe("", 1).0,
            Backlog::Missing { upto: 4 }
        ));
    }

    #[tokio::test]
    async fn missing_backlog_watcher_gets_only_later_events() {
        let hub = WatchHub::new(5, 0, 16);
        let (backlog, sub) = hub.subscribe("", 2);
        assert!(matches!(backlog, Backlog::Missing { upto: 5 }));
        let mut stream = sub.into_stream(vec![put("/x", 3)]);
        hub.publish(put("/x", 6));
        let got: Vec<_> = stream
            .by_ref()
            .take(2)
            .map(|r| r.expect("event"))
            .collect()
            .await;
        assert_eq!(revs(&got), vec![3, 6]);
    }

    #[tokio::test]
    async fn slow_watcher_is_cut_off_after_its_queue() {
        let hub = WatchHub::new(0, 0, 2);
        let (_, sub) = hub.subscribe("", 0);
        let mut stream = sub.into_stream(Vec::new());
        for rev in 1..=3 {
            hub.publish(put("/k", rev));
        }
        assert_eq!(hub.watcher_count(), 0, "overflowing watcher is dropped");
        let items: Vec<_> = stream.by_ref().collect().await;
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].as_ref().map(Event::revision).ok(), Some(1));
        assert_eq!(items[1].as_ref().map(Event::revision).ok(), Some(2));
        assert!(matches!(
            items[2],
            Err(Error::Compacted {
                requested: 2,
                compacted: 3
            })
        ));
    }

    #[tokio::test]
    async fn dropped_watchers_are_removed() {
        let hub = WatchHub::new(0, 0, 2);
        let (_, sub) = hub.subscribe("/a", 0);
        drop(sub);
        hub.publish(put("/b", 1));
        assert_eq!(hub.watcher_count(), 0);
    }

    #[tokio::test]
    async fn progress_moves_the_progress_revision_only() {
        let hub = WatchHub::new(0, 4, 8);
        let (_, sub) = hub.subscribe("", 0);
        let mut stream = sub.into_stream(Vec::new());
        hub.publish(put("/k", 1));
        hub.publish(Event::Progress { revision: 5 });
        assert_eq!((hub.last_revision(), hub.progress_revision()), (1, 5));
        hub.publish(Event::Progress { revision: 3 });
        assert_eq!(hub.progress_revision(), 5, "progress never goes back");
        // A late event at or below the progress revision is still delivered, not dropped.
        hub.publish(put("/k", 4));
        hub.publish(put("/k", 6));
        assert_eq!((hub.last_revision(), hub.progress_revision()), (6, 6));
        let got: Vec<_> = stream
            .by_ref()
            .take(3)
            .map(|r| r.expect("event"))
            .collect()
            .await;
        assert_eq!(
            revs(&got),
            vec![1, 4, 6],
            "no progress event reaches a watcher"
        );
        assert!(
            matches!(hub.subscribe("", 0).0, Backlog::Ready(ref e) if revs(e) == vec![1, 4, 6])
        );
    }

    #[tokio::test]
    async fn reset_cuts_off_every_watcher() {
        let hub = WatchHub::new(0, 4, 8);
        hub.publish(put("/k", 1));
        let (_, sub) = hub.subscribe("", 1);
        let mut stream = sub.into_stream(Vec::new());
        hub.reset(10);
        assert!(matches!(
            stream.next().await,
            Some(Err(Error::Compacted {
                requested: 1,
                compacted: 10
            }))
        ));
        assert!(stream.next().await.is_none());
        assert_eq!(hub.last_revision(), 10);
        assert!(matches!(hub.subscribe("", 10).0, Backlog::Ready(ref e) if e.is_empty()));
    }
}
