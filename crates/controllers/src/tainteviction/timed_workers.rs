//! Work scheduled at a time and cancellable until it starts (upstream's `TimedWorkerQueue`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::future::BoxFuture;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What a worker works on: a pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorkArgs {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl WorkArgs {
    /// `namespace/name`, the queue key.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The work to run when a worker fires, given its arguments and the time it was due to fire;
/// an error forgets the key so it can be added again.
pub type WorkFn =
    Arc<dyn Fn(WorkArgs, Instant) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// A scheduled worker.
#[derive(Clone, Debug)]
pub struct TimedWorker {
    /// Distinguishes a worker from a later one with the same key.
    id: u64,
    /// When the work was first scheduled (kept across reschedules by the caller).
    pub created_at: Instant,
    /// When it fires.
    pub fire_at: Instant,
    /// Cancels it before it fires.
    cancel: CancellationToken,
}

#[derive(Default)]
struct Workers {
    /// Per key: a pending worker, or `None` once its work succeeded (the key stays so the
    /// work is not scheduled again until cancelled, as upstream).
    by_key: HashMap<String, Option<TimedWorker>>,
    /// Next worker id.
    next_id: u64,
}

/// Runs work for a key at a time unless cancelled first, as upstream's `TimedWorkerQueue`.
/// Time is tokio's.
pub struct TimedWorkerQueue {
    workers: Mutex<Workers>,
    work: WorkFn,
}

impl std::fmt::Debug for TimedWorkerQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimedWorkerQueue").finish_non_exhaustive()
    }
}

impl TimedWorkerQueue {
    /// A queue running `work`.
    pub fn new(work: WorkFn) -> Arc<Self> {
        Arc::new(Self {
            workers: Mutex::new(Workers::default()),
            work,
        })
    }

    fn workers(&self) -> MutexGuard<'_, Workers> {
        self.workers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Schedules the work for `args` at `fire_at` (now if past) unless its key is already
    /// present (pending or done), as upstream's `AddWork`.
    pub fn add_work(self: &Arc<Self>, args: WorkArgs, created_at: Instant, fire_at: Instant) {
        let key = args.key();
        let mut workers = self.workers();
        if workers.by_key.contains_key(&key) {
            tracing::debug!(key, "Trying to add already existing work");
            return;
        }
        workers.next_id += 1;
        let worker = TimedWorker {
            id: workers.next_id,
            created_at,
            fire_at,
            cancel: CancellationToken::new(),
        };
        workers.by_key.insert(key.clone(), Some(worker.clone()));
        drop(workers);
        let this = Arc::clone(self);
        tokio::spawn(async move {
            tokio::select! {
                _ = worker.cancel.cancelled() => return,
                _ = tokio::time::sleep_until(worker.fire_at) => {}
            }
            let result = (this.work)(args, worker.fire_at).await;
            let mut workers = this.workers();
            let current = workers
                .by_key
                .get(&key)
                .and_then(|w| w.as_ref().map(|w| w.id));
            if current == Some(worker.id) {
                if result.is_ok() {
                    workers.by_key.insert(key, None);
                } else {
                    workers.by_key.remove(&key);
                }
            }
        });
    }

    /// Cancels and forgets the work for `key`; true if a pending worker was cancelled.
    pub fn cancel_work(&self, key: &str) -> bool {
        match self.workers().by_key.remove(key) {
            Some(Some(worker)) => {
                worker.cancel.cancel();
                true
            }
            _ => false,
        }
    }

    /// The pending worker for `key`, if any (upstream's `GetWorkerUnsafe`).
    pub fn worker(&self, key: &str) -> Option<TimedWorker> {
        self.workers().by_key.get(key).cloned().flatten()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    fn counting() -> (Arc<TimedWorkerQueue>, Arc<AtomicUsize>) {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let q = TimedWorkerQueue::new(Arc::new(move |_, _| {
            let c = c.clone();
            Box::pin(async move {
                c.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        }));
        (q, count)
    }

    fn args() -> WorkArgs {
        WorkArgs {
            namespace: "ns".to_owned(),
            name: "p".to_owned(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn fires_at_its_time_once() {
        let (q, count) = counting();
        let now = Instant::now();
        q.add_work(args(), now, now + Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(4_900)).await;
        assert_eq!(count.load(Ordering::SeqCst), 0);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(count.load(Ordering::SeqCst), 1);
        q.add_work(args(), now, Instant::now());
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(count.load(Ordering::SeqCst), 1, "done work is not redone");
        assert!(!q.cancel_work("ns/p"), "nothing pending");
        q.add_work(args(), now, Instant::now());
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(
            count.load(Ordering::SeqCst),
            2,
            "after cancel it can be added again"
        );
    }

    /// A key stays while its work is pending or done (so it is not redone) and leaves when
    /// cancelled (the pod went, or tolerates its node again) or when the work failed: pods
    /// evicted for days do not grow the queue.
    #[tokio::test(start_paused = true)]
    async fn keys_leave_once_cancelled_or_failed() {
        let (q, count) = counting();
        let now = Instant::now();
        let pod = |i: usize| WorkArgs {
            namespace: "ns".to_owned(),
            name: format!("p{i}"),
        };
        for i in 0..100 {
            q.add_work(pod(i), now, now + Duration::from_secs(1));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(count.load(Ordering::SeqCst), 100);
        assert_eq!(q.workers().by_key.len(), 100, "done keys are kept");
        for i in 0..100 {
            q.cancel_work(&pod(i).key());
        }
        assert!(q.workers().by_key.is_empty());

        let failing = TimedWorkerQueue::new(Arc::new(|_, _| {
            Box::pin(async { Err("eviction failed".to_owned()) })
        }));
        failing.add_work(args(), now, Instant::now());
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            failing.workers().by_key.is_empty(),
            "a failure forgets the key"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cancelled_work_never_fires() {
        let (q, count) = counting();
        let now = Instant::now();
        q.add_work(args(), now, now + Duration::from_secs(5));
        assert!(q.worker("ns/p").is_some());
        assert!(q.cancel_work("ns/p"));
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(count.load(Ordering::SeqCst), 0);
        assert!(q.worker("ns/p").is_none());
    }
}
