//! The worker loop every queue-driven controller shares: take a key, sync it, forget or requeue it, mark it done.
//!
//! Upstream, each controller writes the same loop by hand: `Run` starts `workers` goroutines
//! running `worker`, which calls `processNextWorkItem` until the queue shuts down; that takes a
//! key, calls `syncHandler(key)`, `Forget`s the key on success, `AddRateLimited`s it on failure
//! (some controllers drop it after `maxRetries`, some forget errors that retrying cannot fix),
//! and always calls `Done`. Here that loop is written once:
//!
//! - [`run_controller`] is a whole one-queue `Run`: the start line, the wait for the caches,
//!   [`run_workers`], the stop line.
//! - [`run_workers`] is the second half of every `Run`: `workers` tasks, each taking keys until
//!   the queue shuts down or `cancel` fires, then the queue's shutdown and the join.
//! - [`process_next_work_item`] is one turn of the loop, for tests that drive a controller key by
//!   key.
//! - [`ErrorPolicy`] says what a failed sync does to its key ([`Retry`]) and what is logged.
//!
//! A sync that panics is caught (`catch_unwind`): the panic message is logged with the key,
//! counted in `kcm_workqueue_sync_panics_total{name}`, and the key is retried like a failed
//! sync. Without this a panic would kill the worker with the key still marked "processing",
//! and the queue would never hand that key out again.

use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::LazyLock;
use std::time::Duration;

use futures::FutureExt;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Level;

use crate::informer::wait_until_synced;
use crate::repeated_log::{self, RepeatFilter, Verdict};
use crate::workqueue::RateLimitingQueue;

/// What the worker does with a key whose sync failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Requeue it after the queue's rate-limiter delay, counting one more failure
    /// (`AddRateLimited`); past the policy's max retries it is dropped instead.
    RateLimited,
    /// Requeue it after this fixed delay (`AddAfter`), e.g. the namespace controller waiting
    /// for content it expects to be gone by then. Not counted as a failure.
    After(Duration),
    /// Do not retry (`Forget`): retrying cannot fix this error, e.g. a write refused because
    /// the namespace is being deleted.
    Forget,
}

/// How a controller's workers treat keys whose sync failed or panicked: the error half of
/// upstream's `processNextWorkItem` (and the Deployment controller's `handleErr`).
///
/// Built in a `const`, e.g. the Deployment controller's:
///
/// ```
/// # use kcm_machinery::controller::{ErrorPolicy, Retry};
/// # #[derive(Debug)] struct Error { terminating: bool }
/// const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("Error syncing deployment")
///     .with_requeue_level(tracing::Level::INFO)
///     .with_max_retries(15, "Dropping deployment out of the queue")
///     .with_classifier(|_key, err| if err.terminating { Retry::Forget } else { Retry::RateLimited });
/// ```
pub struct ErrorPolicy<T, E> {
    /// Decides the [`Retry`] of each error; panics are always [`Retry::RateLimited`].
    classify: fn(&T, &E) -> Retry,
    /// Rate-limited requeues allowed in a row (`NumRequeues`) before the key is dropped;
    /// `None` retries forever.
    max_retries: Option<usize>,
    /// Logged with the key and the error at each rate-limited requeue.
    requeue_message: &'static str,
    /// The level of `requeue_message`.
    requeue_level: Level,
    /// Logged (at error level) with the key and the error when the key is dropped.
    drop_message: &'static str,
}

// Manual impls: the fields are `Copy` whatever `T` and `E` are.
impl<T, E> Clone for ErrorPolicy<T, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, E> Copy for ErrorPolicy<T, E> {}

impl<T, E> std::fmt::Debug for ErrorPolicy<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ErrorPolicy")
            .field("max_retries", &self.max_retries)
            .field("requeue_message", &self.requeue_message)
            .field("requeue_level", &self.requeue_level)
            .field("drop_message", &self.drop_message)
            .finish_non_exhaustive()
    }
}

impl<T, E> ErrorPolicy<T, E> {
    /// Every error requeues its key rate-limited, forever, logging `requeue_message` at error
    /// level (upstream's `utilruntime.HandleError`), as the ReplicaSet controller's
    /// `processNextWorkItem`.
    pub const fn new(requeue_message: &'static str) -> Self {
        Self {
            classify: |_, _| Retry::RateLimited,
            max_retries: None,
            requeue_message,
            requeue_level: Level::ERROR,
            drop_message: "Dropping key out of the queue",
        }
    }

    /// Drops a key (forgets it, logging `drop_message`) once it has been requeued
    /// `max_retries` times in a row, as the Deployment controller's `maxRetries`. It comes
    /// back with its next event.
    pub const fn with_max_retries(
        mut self,
        max_retries: usize,
        drop_message: &'static str,
    ) -> Self {
        self.max_retries = Some(max_retries);
        self.drop_message = drop_message;
        self
    }

    /// Decides per error whether and how its key is retried (default: always
    /// [`Retry::RateLimited`]). A classifier may log what the generic lines do not say.
    pub const fn with_classifier(mut self, classify: fn(&T, &E) -> Retry) -> Self {
        self.classify = classify;
        self
    }

    /// Logs rate-limited requeues at `level` instead of error.
    pub const fn with_requeue_level(mut self, level: Level) -> Self {
        self.requeue_level = level;
        self
    }

    /// The most rate-limited requeues in a row before a key is dropped, if any.
    pub fn max_retries(&self) -> Option<usize> {
        self.max_retries
    }
}

/// A one-queue controller's whole `Run`, as upstream writes it in each controller: logs
/// `Starting <what>`, waits until `synced()` holds (the informers' `HasSynced`), runs
/// [`run_workers`] until `cancel` fires, and logs `Shutting down <what>`. Cancelled before the
/// caches synced, it shuts the queue down and syncs nothing. `what` is upstream's phrase for
/// the controller in those two lines ("stateful set controller", "range CIDR allocator").
#[allow(clippy::too_many_arguments)] // upstream's Run parameters plus the queue and policy
pub async fn run_controller<T, E, F, Fut>(
    controller: &'static str,
    what: &str,
    queue: &RateLimitingQueue<T>,
    policy: ErrorPolicy<T, E>,
    workers: usize,
    cancel: &CancellationToken,
    synced: impl Fn() -> bool,
    sync: F,
) where
    T: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    E: Display + Send + 'static,
    F: Fn(T) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
{
    tracing::info!(controller, "Starting {what}");
    if wait_until_synced(controller, cancel, synced).await {
        run_workers(controller, queue, policy, workers, cancel, sync).await;
    } else {
        queue.shut_down();
    }
    tracing::info!(controller, "Shutting down {what}");
}

/// Runs `workers` workers on `queue` until `cancel` fires, as the second half of every
/// upstream controller's `Run` (`go wait.UntilWithContext(ctx, c.worker, time.Second)` per
/// worker, `<-ctx.Done()`, the deferred `queue.ShutDown()`).
///
/// Each worker takes keys and hands each to `sync`, then forgets, requeues or drops it by
/// `policy`, and marks it done. Once `cancel` has fired the queue shuts down: idle workers
/// return, busy ones finish their key, and a key taken after cancellation is handed back
/// unsynced (no API call after shutdown). Returns once every worker has returned.
/// `controller` names the controller in logs.
pub async fn run_workers<T, E, F, Fut>(
    controller: &'static str,
    queue: &RateLimitingQueue<T>,
    policy: ErrorPolicy<T, E>,
    workers: usize,
    cancel: &CancellationToken,
    sync: F,
) where
    T: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    E: Display + Send + 'static,
    F: Fn(T) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
{
    let mut tasks = JoinSet::new();
    for _ in 0..workers {
        let (queue, cancel, sync) = (queue.clone(), cancel.clone(), sync.clone());
        tasks.spawn(async move {
            while !cancel.is_cancelled() {
                let Some(key) = queue.get().await else {
                    break;
                };
                if cancel.is_cancelled() {
                    queue.done(&key);
                    break;
                }
                process_key(controller, &queue, &policy, key, &sync).await;
            }
        });
    }
    cancel.cancelled().await;
    queue.shut_down();
    while let Some(joined) = tasks.join_next().await {
        if let Err(err) = joined {
            tracing::error!(controller, %err, "worker ended abnormally");
        }
    }
}

/// Takes one key from `queue` and processes it as [`run_workers`]' workers do, as upstream's
/// `processNextWorkItem`. False once the queue has shut down. For tests that drive a
/// controller one key at a time.
pub async fn process_next_work_item<T, E, F, Fut>(
    controller: &str,
    queue: &RateLimitingQueue<T>,
    policy: &ErrorPolicy<T, E>,
    sync: F,
) -> bool
where
    T: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    E: Display,
    F: FnOnce(T) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let Some(key) = queue.get().await else {
        return false;
    };
    process_key(controller, queue, policy, key, sync).await;
    true
}

/// Syncs `key` (catching a panic), forgets, requeues or drops it by `policy`, and marks it
/// done.
async fn process_key<T, E, F, Fut>(
    controller: &str,
    queue: &RateLimitingQueue<T>,
    policy: &ErrorPolicy<T, E>,
    key: T,
    sync: F,
) where
    T: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    E: Display,
    F: FnOnce(T) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    // Inside the async block, so a panic while building the future is caught too.
    let synced = AssertUnwindSafe(async { sync(key.clone()).await })
        .catch_unwind()
        .await;
    match synced {
        Ok(Ok(())) => queue.forget(&key),
        Ok(Err(err)) => match (policy.classify)(&key, &err) {
            Retry::RateLimited => requeue_rate_limited(controller, queue, policy, &key, &err),
            Retry::After(delay) => {
                tracing::debug!(controller, key = ?key, error = %err, ?delay, "requeued after a delay");
                queue.add_after(key.clone(), delay);
            }
            Retry::Forget => {
                tracing::debug!(controller, key = ?key, error = %err, "not retried");
                queue.forget(&key);
            }
        },
        Err(panic) => {
            let message = panic_message(panic.as_ref());
            tracing::error!(controller, key = ?key, panic = %message, "Observed a panic in sync");
            queue.record_sync_panic();
            let err = format!("sync panicked: {message}");
            requeue_rate_limited(controller, queue, policy, &key, &err);
        }
    }
    queue.done(&key);
}

/// `AddRateLimited`, or, past the policy's max retries, `Forget` (upstream's `handleErr`).
fn requeue_rate_limited<T, E>(
    controller: &str,
    queue: &RateLimitingQueue<T>,
    policy: &ErrorPolicy<T, E>,
    key: &T,
    err: &dyn Display,
) where
    T: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    if policy
        .max_retries
        .is_some_and(|max| queue.num_requeues(key) >= max)
    {
        tracing::error!(controller, key = ?key, error = %err, "{}", policy.drop_message);
        queue.forget(key);
        return;
    }
    let message = policy.requeue_message;
    // The same failure of many keys (a full pod network, a quota) is one line per interval
    // with a count; each key's line stays at debug level.
    match policy.requeue_level {
        level @ (Level::ERROR | Level::WARN) => {
            let error = err.to_string();
            let signature = repeated_log::signature((controller, message, &error));
            match (REQUEUE_LINES.check_now(signature), level) {
                (Verdict::Suppress, _) => {
                    tracing::debug!(controller, key = ?key, %error, "{message}")
                }
                (Verdict::Log { repeated: 0 }, Level::ERROR) => {
                    tracing::error!(controller, key = ?key, %error, "{message}")
                }
                (Verdict::Log { repeated }, Level::ERROR) => {
                    tracing::error!(controller, key = ?key, %error, repeated, "{message}")
                }
                (Verdict::Log { repeated: 0 }, _) => {
                    tracing::warn!(controller, key = ?key, %error, "{message}")
                }
                (Verdict::Log { repeated }, _) => {
                    tracing::warn!(controller, key = ?key, %error, repeated, "{message}")
                }
            }
        }
        Level::INFO => tracing::info!(controller, key = ?key, error = %err, "{message}"),
        Level::DEBUG => tracing::debug!(controller, key = ?key, error = %err, "{message}"),
        _ => tracing::trace!(controller, key = ?key, error = %err, "{message}"),
    }
    queue.add_rate_limited(key.clone());
}

/// Requeue lines of every controller in the process, by controller, message and error.
static REQUEUE_LINES: LazyLock<RepeatFilter> = LazyLock::new(RepeatFilter::default);

/// The text of a panic payload (`panic!` with a literal or a formatted message).
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;
    use crate::workqueue::{
        ItemExponentialFailureRateLimiter, QueueConfig, WorkqueueMetrics,
        default_controller_rate_limiter,
    };

    /// A failure whose message says what it is.
    #[derive(Debug)]
    struct Failed(&'static str);

    impl Display for Failed {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    const ALWAYS: ErrorPolicy<String, Failed> = ErrorPolicy::new("sync failed");

    fn queue() -> RateLimitingQueue<String> {
        RateLimitingQueue::new(default_controller_rate_limiter())
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn success_forgets_the_key_and_marks_it_done() {
        let q = queue();
        q.add_rate_limited("a".to_owned());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(q.num_requeues(&"a".to_owned()), 1);
        let synced = process_next_work_item("test", &q, &ALWAYS, |key| async move {
            assert_eq!(key, "a");
            Ok(())
        })
        .await;
        assert!(synced);
        assert_eq!(q.num_requeues(&"a".to_owned()), 0, "forgotten");
        q.add("a".to_owned());
        assert_eq!(q.len(), 1, "done: a new add queues the key again");
    }

    #[tokio::test(start_paused = true)]
    async fn failure_requeues_rate_limited() {
        let q = queue();
        q.add("a".to_owned());
        assert!(process_next_work_item("test", &q, &ALWAYS, |_| async { Err(Failed("x")) }).await);
        assert_eq!(q.num_requeues(&"a".to_owned()), 1);
        tokio::time::advance(Duration::from_millis(10)).await;
        settle().await;
        assert_eq!(q.len(), 1, "back after the limiter's delay");
    }

    /// Upstream's `TestDeploymentController_handleErr`-style budget: `max_retries` requeues,
    /// then the key is dropped and forgotten.
    #[tokio::test(start_paused = true)]
    async fn failing_key_is_dropped_after_max_retries() {
        const POLICY: ErrorPolicy<String, Failed> =
            ErrorPolicy::new("retrying").with_max_retries(3, "dropping");
        let q = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(1),
            Duration::from_secs(1),
        ));
        q.add("a".to_owned());
        let calls = AtomicUsize::new(0);
        for _ in 0..4 {
            assert!(
                process_next_work_item("test", &q, &POLICY, |_| async {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Err(Failed("x"))
                })
                .await
            );
            tokio::time::advance(Duration::from_secs(1)).await;
            settle().await;
        }
        assert_eq!(
            calls.load(Ordering::SeqCst),
            4,
            "the first try and three retries"
        );
        assert!(q.is_empty(), "dropped");
        assert_eq!(q.num_requeues(&"a".to_owned()), 0, "and forgotten");
    }

    #[tokio::test(start_paused = true)]
    async fn classifier_forgets_or_delays() {
        const POLICY: ErrorPolicy<String, Failed> =
            ErrorPolicy::new("retrying").with_classifier(|_, err| match err.0 {
                "permanent" => Retry::Forget,
                "later" => Retry::After(Duration::from_secs(7)),
                _ => Retry::RateLimited,
            });
        let q = queue();
        q.add("a".to_owned());
        process_next_work_item("test", &q, &POLICY, |_| async { Err(Failed("permanent")) }).await;
        assert!(q.is_empty());
        assert_eq!(q.waiting_len(), 0, "not retried");

        q.add("b".to_owned());
        process_next_work_item("test", &q, &POLICY, |_| async { Err(Failed("later")) }).await;
        assert_eq!(
            q.num_requeues(&"b".to_owned()),
            0,
            "a delay is not a failure"
        );
        tokio::time::advance(Duration::from_secs(6)).await;
        settle().await;
        assert!(q.is_empty());
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        assert_eq!(q.len(), 1, "back after exactly the delay");
    }

    #[tokio::test(start_paused = true)]
    async fn panicking_sync_is_recovered_counted_and_retried() {
        let metrics = Arc::new(WorkqueueMetrics::new());
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let q = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig::named("panicky", metrics),
        );
        q.add("a".to_owned());
        let attempts = AtomicUsize::new(0);
        let sync = |_key: String| async {
            if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("boom");
            }
            Ok::<(), Failed>(())
        };
        assert!(process_next_work_item("test", &q, &ALWAYS, sync).await);
        assert_eq!(q.num_requeues(&"a".to_owned()), 1, "retried rate-limited");
        let mut text = String::new();
        encode(&mut text, &registry).expect("encode");
        assert!(
            text.lines()
                .any(|l| l == "kcm_workqueue_sync_panics_total{name=\"panicky\"} 1"),
            "{text}"
        );

        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        assert!(process_next_work_item("test", &q, &ALWAYS, sync).await);
        assert_eq!(attempts.load(Ordering::SeqCst), 2);
        assert_eq!(q.num_requeues(&"a".to_owned()), 0, "the retry succeeded");
    }

    #[tokio::test]
    async fn workers_drain_the_queue_and_stop_after_cancel() {
        let q = queue();
        for i in 0..10 {
            q.add(format!("k{i}"));
        }
        let done = Arc::new(AtomicUsize::new(0));
        let cancel = CancellationToken::new();
        let run = {
            let (q, done, cancel) = (q.clone(), done.clone(), cancel.clone());
            tokio::spawn(async move {
                let sync = move |_key: String| {
                    let done = done.clone();
                    async move {
                        done.fetch_add(1, Ordering::SeqCst);
                        Ok::<(), Failed>(())
                    }
                };
                run_workers("test", &q, ALWAYS, 3, &cancel, sync).await;
            })
        };
        while done.load(Ordering::SeqCst) < 10 {
            tokio::task::yield_now().await;
        }
        assert!(
            !run.is_finished(),
            "workers wait for cancellation, not for an empty queue"
        );
        cancel.cancel();
        run.await
            .expect("run_workers returns once every worker has stopped");
        assert!(q.shutting_down());
    }

    #[tokio::test]
    async fn no_sync_starts_after_cancellation() {
        let q = queue();
        q.add("a".to_owned());
        let cancel = CancellationToken::new();
        cancel.cancel();
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let sync = move |_key: String| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<(), Failed>(())
            }
        };
        run_workers("test", &q, ALWAYS, 2, &cancel, sync).await;
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn run_controller_waits_for_the_caches_then_syncs() {
        let q = queue();
        q.add("a".to_owned());
        let synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let calls = Arc::new(AtomicUsize::new(0));
        let cancel = CancellationToken::new();
        let run = {
            let (q, synced, calls, cancel) =
                (q.clone(), synced.clone(), calls.clone(), cancel.clone());
            tokio::spawn(async move {
                let sync = move |_key: String| {
                    let calls = calls.clone();
                    async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        Ok::<(), Failed>(())
                    }
                };
                let is_synced = move || synced.load(Ordering::SeqCst);
                run_controller(
                    "test",
                    "test controller",
                    &q,
                    ALWAYS,
                    2,
                    &cancel,
                    is_synced,
                    sync,
                )
                .await;
            })
        };
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            calls.load(Ordering::SeqCst),
            0,
            "no sync before the caches sync"
        );
        synced.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        cancel.cancel();
        run.await.expect("run_controller returns after cancel");
        assert!(q.shutting_down());
    }

    #[tokio::test(start_paused = true)]
    async fn run_controller_cancelled_before_sync_shuts_the_queue_down() {
        let q = queue();
        q.add("a".to_owned());
        let cancel = CancellationToken::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let sync = move |_key: String| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<(), Failed>(())
            }
        };
        let stopper = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            stopper.cancel();
        });
        run_controller(
            "test",
            "test controller",
            &q,
            ALWAYS,
            2,
            &cancel,
            || false,
            sync,
        )
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert!(q.shutting_down());
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_key_does_not_stop_the_worker() {
        let q = queue();
        q.add("bad".to_owned());
        q.add("good".to_owned());
        let cancel = CancellationToken::new();
        let synced = Arc::new(AtomicUsize::new(0));
        let run = {
            let (q, cancel, synced) = (q.clone(), cancel.clone(), synced.clone());
            tokio::spawn(async move {
                let sync = move |key: String| {
                    let synced = synced.clone();
                    async move {
                        if key == "bad" {
                            panic!("bad key");
                        }
                        synced.fetch_add(1, Ordering::SeqCst);
                        Ok::<(), Failed>(())
                    }
                };
                run_workers("test", &q, ALWAYS, 1, &cancel, sync).await;
            })
        };
        while synced.load(Ordering::SeqCst) < 1 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            q.num_requeues(&"bad".to_owned()),
            1,
            "the panicking key is retried"
        );
        cancel.cancel();
        run.await.expect("run_workers returns");
    }

    #[test]
    fn panic_message_reads_str_and_string_payloads() {
        let literal: Box<dyn std::any::Any + Send> = Box::new("literal");
        let formatted: Box<dyn std::any::Any + Send> = Box::new(format!("n={}", 1));
        let other: Box<dyn std::any::Any + Send> = Box::new(7_u8);
        assert_eq!(panic_message(literal.as_ref()), "literal");
        assert_eq!(panic_message(formatted.as_ref()), "n=1");
        assert_eq!(panic_message(other.as_ref()), "non-string panic payload");
    }
}
