//! Work-queue throughput: add/get/done with 8 workers, and rate-limited requeues.
//!
//! Run with `cargo bench -p kcm-machinery --bench workqueue`. Each iteration builds a fresh
//! queue on a multi-threaded Tokio runtime, so the numbers include spawning the workers.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kcm_machinery::workqueue::{
    ItemExponentialFailureRateLimiter, Queue, RateLimitingQueue, default_controller_rate_limiter,
};
use tokio::runtime::Runtime;

const WORKERS: usize = 8;
const ADDS: usize = 1_000_000;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn keys(n: usize) -> Arc<Vec<String>> {
    Arc::new(
        (0..n)
            .map(|i| format!("namespace-{}/object-{i}", i % 16))
            .collect(),
    )
}

/// One producer adds `ADDS` keys cycling over `keys`; `WORKERS` workers get and done them until
/// the queue is shut down and empty. Returns how many items the workers processed.
async fn add_get_done<T>(items: impl Fn(usize) -> T) -> usize
where
    T: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    let queue: Queue<T> = Queue::new();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                let mut processed = 0;
                while let Some(item) = queue.get().await {
                    black_box(&item);
                    queue.done(&item);
                    processed += 1;
                }
                processed
            })
        })
        .collect();
    for i in 0..ADDS {
        queue.add(items(i));
    }
    queue.shut_down();
    let mut processed = 0;
    for worker in workers {
        processed += worker.await.expect("worker");
    }
    processed
}

fn queue_benches(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("queue");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(ADDS as u64));

    let distinct = keys(10_000);
    group.bench_function("add_get_done/1M_adds_10k_string_keys/8_workers", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let keys = Arc::clone(&distinct);
                    black_box(add_get_done(move |i| keys[i % keys.len()].clone()).await);
                }
                start.elapsed()
            })
        })
    });

    group.bench_function("add_get_done/1M_distinct_u64_keys/8_workers", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(add_get_done(|i| i as u64).await);
                }
                start.elapsed()
            })
        })
    });
    group.finish();
}

/// `WORKERS` tasks call `add_rate_limited` `ADDS` times in all over 10k keys with the
/// controller's default limiter: the limiter's bookkeeping plus the timer heap's
/// keep-the-earlier-deadline merge, the path a failing sync takes.
async fn add_rate_limited(keys: Arc<Vec<String>>) {
    let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    let per_task = ADDS / WORKERS;
    let tasks: Vec<_> = (0..WORKERS)
        .map(|w| {
            let queue = queue.clone();
            let keys = Arc::clone(&keys);
            tokio::spawn(async move {
                for i in 0..per_task {
                    queue.add_rate_limited(keys[(w * per_task + i) % keys.len()].clone());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    for key in keys.iter() {
        queue.forget(key);
    }
    queue.shut_down();
}

const REQUEUE_KEYS: usize = 10_000;
const FAILURES: usize = 10;

/// `WORKERS` workers process 10k keys that each fail `FAILURES` times before succeeding; every
/// failure goes through `add_rate_limited` with a 1 µs delay, so through the timer heap and
/// the timer task (which fires on the timer wheel's 1 ms resolution).
async fn requeue_cycle(keys: Arc<Vec<String>>) -> usize {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new(
        ItemExponentialFailureRateLimiter::new(Duration::from_micros(1), Duration::from_micros(1)),
    );
    let remaining = Arc::new(std::sync::atomic::AtomicUsize::new(keys.len()));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let queue = queue.clone();
            let remaining = Arc::clone(&remaining);
            tokio::spawn(async move {
                let mut requeues = 0;
                while let Some(key) = queue.get().await {
                    if queue.num_requeues(&key) < FAILURES {
                        queue.add_rate_limited(key.clone());
                        requeues += 1;
                    } else {
                        queue.forget(&key);
                        if remaining.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
                            queue.shut_down();
                        }
                    }
                    queue.done(&key);
                }
                requeues
            })
        })
        .collect();
    for key in keys.iter() {
        queue.add(key.clone());
    }
    let mut requeues = 0;
    for worker in workers {
        requeues += worker.await.expect("worker");
    }
    requeues
}

fn rate_limited_benches(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("rate_limited");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));

    let distinct = keys(10_000);
    group.throughput(Throughput::Elements(ADDS as u64));
    group.bench_function("add_rate_limited/1M_calls_10k_keys/8_tasks", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    add_rate_limited(Arc::clone(&distinct)).await;
                }
                start.elapsed()
            })
        })
    });

    let requeue_keys = keys(REQUEUE_KEYS);
    group.throughput(Throughput::Elements((REQUEUE_KEYS * FAILURES) as u64));
    group.bench_function("requeue_cycle/10k_keys_x10_failures/8_workers", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let requeues = requeue_cycle(Arc::clone(&requeue_keys)).await;
                    assert_eq!(requeues, REQUEUE_KEYS * FAILURES);
                }
                start.elapsed()
            })
        })
    });
    group.finish();
}

criterion_group!(benches, queue_benches, rate_limited_benches);
criterion_main!(benches);
