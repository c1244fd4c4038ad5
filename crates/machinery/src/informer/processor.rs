//! Fan-out of informer notifications to handlers, each with its own buffer and task, as
//! client-go's `sharedProcessor` and `processorListener`.
//!
//! The informer distributes while holding its delta lock; distributing only pushes onto each
//! listener's unbounded channel, so neither the cache nor other handlers ever wait for a slow
//! handler. Each listener's task drains its channel and calls the handler.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::delta::DeletedObject;
use super::handler::ResourceEventHandler;

/// The shortest resync period a handler may ask for, as client-go's `minimumResyncPeriod`.
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// One notification for a handler.
pub(crate) enum Notification<K> {
    Add {
        obj: Arc<K>,
        is_in_initial_list: bool,
    },
    Update {
        old: Arc<K>,
        new: Arc<K>,
    },
    Delete(DeletedObject<K>),
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Add {
                obj,
                is_in_initial_list,
            } => Self::Add {
                obj: obj.clone(),
                is_in_initial_list: *is_in_initial_list,
            },
            Self::Update { old, new } => Self::Update {
                old: old.clone(),
                new: new.clone(),
            },
            Self::Delete(d) => Self::Delete(d.clone()),
        }
    }
}

/// The resync settings of one listener.
struct ResyncState {
    /// What the handler asked for (after the 1s minimum).
    requested: Duration,
    /// What is used: `requested`, or zero when the informer does not resync at all.
    period: Duration,
    /// The earliest time of the next resync.
    next: Instant,
}

/// Relays notifications to one handler, as client-go's `processorListener`.
pub(crate) struct Listener<K> {
    handler: Arc<dyn ResourceEventHandler<K>>,
    tx: UnboundedSender<Notification<K>>,
    /// Taken by the task that runs the handler.
    rx: Mutex<Option<UnboundedReceiver<Notification<K>>>>,
    /// Initial-list adds sent but not yet handled (client-go's `SingleFileTracker`).
    pending_initial: AtomicUsize,
    resync: Mutex<ResyncState>,
    /// Cancelled when the handler is removed.
    stop: CancellationToken,
}

impl<K: Send + Sync + 'static> Listener<K> {
    pub(crate) fn new(
        handler: Arc<dyn ResourceEventHandler<K>>,
        requested_resync: Duration,
        resync: Duration,
        now: Instant,
    ) -> Arc<Self> {
        let (tx, rx) = unbounded_channel();
        Arc::new(Self {
            handler,
            tx,
            rx: Mutex::new(Some(rx)),
            pending_initial: AtomicUsize::new(0),
            resync: Mutex::new(ResyncState {
                requested: requested_resync,
                period: resync,
                next: now + resync,
            }),
            stop: CancellationToken::new(),
        })
    }

    fn resync_state(&self) -> MutexGuard<'_, ResyncState> {
        self.resync
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Buffers a notification; never blocks.
    pub(crate) fn add(&self, notification: Notification<K>) {
        if let Notification::Add {
            is_in_initial_list: true,
            ..
        } = notification
        {
            self.pending_initial.fetch_add(1, Ordering::SeqCst);
        }
        // Fails only once the task is gone (informer stopped or handler removed).
        let _ = self.tx.send(notification);
    }

    /// True when every initial-list add sent so far has been handled. Check the upstream
    /// informer first: once it has synced, every initial add has been sent.
    pub(crate) fn initial_adds_handled(&self) -> bool {
        self.pending_initial.load(Ordering::SeqCst) == 0
    }

    fn should_resync(&self, now: Instant) -> bool {
        let state = self.resync_state();
        !state.period.is_zero() && now >= state.next
    }

    fn determine_next_resync(&self, now: Instant) {
        let mut state = self.resync_state();
        state.next = now + state.period;
    }

    fn set_resync_check_period(&self, check: Duration) {
        let mut state = self.resync_state();
        state.period = determine_resync_period(state.requested, check);
    }

    /// Starts the task that feeds the handler, unless already started.
    fn spawn(self: &Arc<Self>, cancel: CancellationToken) -> Option<JoinHandle<()>> {
        let rx = self
            .rx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()?;
        Some(tokio::spawn(self.clone().run(rx, cancel)))
    }

    async fn run(
        self: Arc<Self>,
        mut rx: UnboundedReceiver<Notification<K>>,
        cancel: CancellationToken,
    ) {
        let mut cancelled = pin!(cancel.cancelled());
        let mut stopped = pin!(self.stop.cancelled());
        loop {
            let notification = tokio::select! {
                biased;
                _ = &mut cancelled => return,
                _ = &mut stopped => return,
                n = rx.recv() => n,
            };
            let Some(notification) = notification else {
                return;
            };
            let initial = matches!(
                notification,
                Notification::Add {
                    is_in_initial_list: true,
                    ..
                }
            );
            let handler = &self.handler;
            let outcome = catch_unwind(AssertUnwindSafe(|| match notification {
                Notification::Add {
                    obj,
                    is_in_initial_list,
                } => handler.on_add(obj, is_in_initial_list),
                Notification::Update { old, new } => handler.on_update(old, new),
                Notification::Delete(obj) => handler.on_delete(obj),
            }));
            if initial {
                self.pending_initial.fetch_sub(1, Ordering::SeqCst);
            }
            if outcome.is_err() {
                // As client-go: the notification is lost, delivery resumes after a second.
                tracing::error!("event handler panicked; notification dropped");
                tokio::select! {
                    _ = &mut cancelled => return,
                    _ = &mut stopped => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}

/// The resync period a listener gets, as client-go's `determineResyncPeriod`: none if it
/// asked for none or the informer does not resync, at least the informer's check period.
pub(crate) fn determine_resync_period(desired: Duration, check: Duration) -> Duration {
    if desired.is_zero() {
        return desired;
    }
    if check.is_zero() {
        tracing::warn!(
            ?desired,
            "resync period ignored: this informer does not resync"
        );
        return Duration::ZERO;
    }
    if desired < check {
        tracing::warn!(
            ?desired,
            ?check,
            "resync period raised to the informer's resync check period"
        );
        return check;
    }
    desired
}

struct Entry<K> {
    listener: Arc<Listener<K>>,
    /// Whether resync (`is_sync`) notifications go to this listener: recomputed at every
    /// resync check, true until the first.
    syncing: bool,
}

struct ProcessorState<K> {
    listeners: Vec<Entry<K>>,
    /// Set while running: new listeners start at once under this token.
    running: Option<CancellationToken>,
    tasks: Vec<JoinHandle<()>>,
}

/// Distributes notifications to listeners, as client-go's `sharedProcessor`.
pub(crate) struct SharedProcessor<K> {
    state: Mutex<ProcessorState<K>>,
}

impl<K: Send + Sync + 'static> SharedProcessor<K> {
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(ProcessorState {
                listeners: Vec::new(),
                running: None,
                tasks: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ProcessorState<K>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn add_listener(&self, listener: Arc<Listener<K>>) {
        let mut state = self.lock();
        if let Some(cancel) = state.running.clone()
            && let Some(task) = listener.spawn(cancel)
        {
            state.tasks.push(task);
        }
        state.listeners.push(Entry {
            listener,
            syncing: true,
        });
    }

    /// Removes and stops `listener`; false if it was not registered.
    pub(crate) fn remove_listener(&self, listener: &Arc<Listener<K>>) -> bool {
        let mut state = self.lock();
        let before = state.listeners.len();
        state
            .listeners
            .retain(|e| !Arc::ptr_eq(&e.listener, listener));
        listener.stop.cancel();
        state.listeners.len() != before
    }

    /// Sends `notification` to every listener, or for a resync only to those due one.
    pub(crate) fn distribute(&self, notification: Notification<K>, is_sync: bool) {
        let state = self.lock();
        let mut targets = state
            .listeners
            .iter()
            .filter(|e| !is_sync || e.syncing)
            .peekable();
        while let Some(entry) = targets.next() {
            if targets.peek().is_none() {
                entry.listener.add(notification);
                return;
            }
            entry.listener.add(notification.clone());
        }
    }

    /// Starts every listener's task; listeners added later start at once.
    pub(crate) fn run(&self, cancel: CancellationToken) {
        let mut state = self.lock();
        let mut tasks = Vec::new();
        for entry in &state.listeners {
            tasks.extend(entry.listener.spawn(cancel.clone()));
        }
        state.tasks.extend(tasks);
        state.running = Some(cancel);
    }

    /// Waits for every listener task to end (after the run's token was cancelled) and drops
    /// the listeners, which cannot be reused.
    pub(crate) async fn join(&self) {
        let tasks = {
            let mut state = self.lock();
            state.running = None;
            for entry in &state.listeners {
                entry.listener.stop.cancel();
            }
            state.listeners.clear();
            std::mem::take(&mut state.tasks)
        };
        for task in tasks {
            if let Err(err) = task.await {
                tracing::error!(%err, "event handler task failed");
            }
        }
    }

    /// Whether any listener is due a resync, marking exactly the due ones as syncing, as
    /// client-go's `sharedProcessor.shouldResync`.
    pub(crate) fn should_resync(&self) -> bool {
        let now = Instant::now();
        let mut state = self.lock();
        let mut needed = false;
        for entry in &mut state.listeners {
            entry.syncing = entry.listener.should_resync(now);
            if entry.syncing {
                needed = true;
                entry.listener.determine_next_resync(now);
            }
        }
        needed
    }

    pub(crate) fn resync_check_period_changed(&self, check: Duration) {
        for entry in &self.lock().listeners {
            entry.listener.set_resync_check_period(check);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn determine_resync_period_table() {
        struct Case {
            name: &'static str,
            desired: u64,
            check: u64,
            want: u64,
        }
        let cases = [
            Case {
                name: "no resync wanted",
                desired: 0,
                check: 10,
                want: 0,
            },
            Case {
                name: "informer does not resync",
                desired: 10,
                check: 0,
                want: 0,
            },
            Case {
                name: "raised to the check period",
                desired: 5,
                check: 10,
                want: 10,
            },
            Case {
                name: "kept",
                desired: 20,
                check: 10,
                want: 20,
            },
        ];
        for c in cases {
            assert_eq!(
                determine_resync_period(
                    Duration::from_secs(c.desired),
                    Duration::from_secs(c.check)
                ),
                Duration::from_secs(c.want),
                "{}",
                c.name
            );
        }
    }
}
