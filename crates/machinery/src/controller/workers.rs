//! The worker pool of a queue-driven controller: the second half of every upstream controller's `Run`.

use std::future::Future;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Spawns `workers` copies of `worker`, waits for `cancel`, calls `shut_down` (the work queue's,
/// so idle workers wake and return while busy ones finish their item), and returns once every
/// worker has returned — upstream's `for i := 0; i < workers; i++ { go wait.UntilWithContext(ctx,
/// c.worker, time.Second) }; <-ctx.Done()` with the deferred `queue.ShutDown()`. A worker that
/// panics is logged under `controller`; the others go on.
pub async fn run_workers<F, Fut>(
    controller: &str,
    workers: usize,
    cancel: &CancellationToken,
    worker: F,
    shut_down: impl FnOnce(),
) where
    F: Fn() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut tasks = JoinSet::new();
    for _ in 0..workers {
        tasks.spawn(worker());
    }
    cancel.cancelled().await;
    shut_down();
    while let Some(joined) = tasks.join_next().await {
        if let Err(err) = joined {
            tracing::error!(controller, %err, "worker ended abnormally");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::workqueue::Queue;

    #[tokio::test]
    async fn workers_drain_the_queue_and_stop_after_shut_down() {
        let queue: Queue<u32> = Queue::new();
        for i in 0..10 {
            queue.add(i);
        }
        let done = Arc::new(AtomicUsize::new(0));
        let cancel = CancellationToken::new();
        let run = {
            let (queue, done, cancel) = (queue.clone(), done.clone(), cancel.clone());
            tokio::spawn(async move {
                let worker = || {
                    let (queue, done) = (queue.clone(), done.clone());
                    async move {
                        while let Some(item) = queue.get().await {
                            done.fetch_add(1, Ordering::SeqCst);
                            queue.done(&item);
                        }
                    }
                };
                run_workers("test", 3, &cancel, worker, || queue.shut_down()).await;
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
        assert!(queue.shutting_down());
    }

    #[tokio::test]
    async fn a_panicking_worker_does_not_stop_the_others() {
        let cancel = CancellationToken::new();
        let finished = Arc::new(AtomicUsize::new(0));
        let started = Arc::new(AtomicUsize::new(0));
        let worker = || {
            let (finished, started) = (finished.clone(), started.clone());
            async move {
                if started.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("first worker fails");
                }
                finished.fetch_add(1, Ordering::SeqCst);
            }
        };
        cancel.cancel();
        run_workers("test", 3, &cancel, worker, || {}).await;
        assert_eq!(finished.load(Ordering::SeqCst), 2);
    }
}
