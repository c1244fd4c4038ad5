//! Storage benchmarks: creates per second (memory, SQLite with each sync mode, one writer and
//! 64 concurrent writers) and watch fan-out through the watch cache (1 writer, 50 watchers).
//!
//! Run: `cargo bench -p kcm-apiserver --bench storage`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use kcm_apiserver::storage::{
    MemoryStorage, SqliteOptions, SqliteStorage, Storage, Synchronous, WatchCache,
};
use tokio::runtime::Runtime;
use tokio::sync::Notify;

/// A pod-sized JSON value (about 1 KiB).
fn object() -> Bytes {
    let pad = "x".repeat(900);
    Bytes::from(format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"p\",\"namespace\":\"default\"}},\"spec\":{{\"pad\":\"{pad}\"}}}}"
    ))
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The backends under test; the temporary directory lives as long as the store.
fn backends(rt: &Runtime) -> Vec<(&'static str, Option<tempfile::TempDir>, Arc<dyn Storage>)> {
    let sqlite = |sync| {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = rt
            .block_on(SqliteStorage::open(
                dir.path().join("state.db"),
                SqliteOptions {
                    synchronous: sync,
                    ..SqliteOptions::default()
                },
            ))
            .expect("open sqlite");
        (Some(dir), Arc::new(store) as Arc<dyn Storage>)
    };
    let (full_dir, full) = sqlite(Synchronous::Full);
    let (normal_dir, normal) = sqlite(Synchronous::Normal);
    vec![
        (
            "memory",
            None,
            Arc::new(MemoryStorage::new()) as Arc<dyn Storage>,
        ),
        ("sqlite_full", full_dir, full),
        ("sqlite_normal", normal_dir, normal),
    ]
}

fn creates(c: &mut Criterion) {
    let rt = runtime();
    let value = object();
    let mut group = c.benchmark_group("create");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    for (name, _dir, store) in backends(&rt) {
        let counter = Arc::new(AtomicU64::new(0));
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("{name}/sequential"), |b| {
            b.to_async(&rt).iter(|| {
                let (store, value) = (Arc::clone(&store), value.clone());
                let n = counter.fetch_add(1, Ordering::Relaxed);
                async move {
                    store
                        .create(&format!("/registry/pods/default/seq-{n}"), value)
                        .await
                        .expect("create")
                }
            })
        });
        const CONCURRENT: u64 = 64;
        group.throughput(Throughput::Elements(CONCURRENT));
        group.bench_function(format!("{name}/concurrent64"), |b| {
            b.to_async(&rt).iter(|| {
                let base = counter.fetch_add(CONCURRENT, Ordering::Relaxed);
                let tasks: Vec<_> = (0..CONCURRENT)
                    .map(|i| {
                        let (store, value) = (Arc::clone(&store), value.clone());
                        tokio::spawn(async move {
                            store
                                .create(&format!("/registry/pods/default/con-{}", base + i), value)
                                .await
                                .expect("create")
                        })
                    })
                    .collect();
                async move {
                    for task in tasks {
                        task.await.expect("join");
                    }
                }
            })
        });
    }
    group.finish();
}

fn watch_fanout(c: &mut Criterion) {
    const WATCHERS: u64 = 50;
    const BATCH: u64 = 100;
    let rt = runtime();
    let value = object();
    let mut group = c.benchmark_group("watch_fanout");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(WATCHERS * BATCH));
    for (name, _dir, backend) in backends(&rt) {
        let cache: Arc<dyn Storage> = Arc::new(
            rt.block_on(WatchCache::new(backend, 10_000))
                .expect("watch cache"),
        );
        let delivered = Arc::new(AtomicU64::new(0));
        let target = Arc::new(AtomicU64::new(u64::MAX));
        let done = Arc::new(Notify::new());
        let start = rt.block_on(cache.current_revision()).expect("revision");
        for _ in 0..WATCHERS {
            let mut stream = rt
                .block_on(cache.watch("/registry/pods/", start))
                .expect("watch");
            let (delivered, target, done) = (delivered.clone(), target.clone(), done.clone());
            rt.spawn(async move {
                while let Some(event) = stream.next().await {
                    event.expect("watch event");
                    let n = delivered.fetch_add(1, Ordering::AcqRel) + 1;
                    if n == target.load(Ordering::Acquire) {
                        done.notify_one();
                    }
                }
            });
        }
        let counter = Arc::new(AtomicU64::new(0));
        group.bench_function(format!("{name}/1writer_50watchers"), |b| {
            b.to_async(&rt).iter(|| {
                let (cache, value) = (Arc::clone(&cache), value.clone());
                let base = counter.fetch_add(BATCH, Ordering::Relaxed);
                let (delivered, target, done) = (delivered.clone(), target.clone(), done.clone());
                async move {
                    target.store(
                        delivered.load(Ordering::Acquire) + WATCHERS * BATCH,
                        Ordering::Release,
                    );
                    for i in 0..BATCH {
                        cache
                            .create(
                                &format!("/registry/pods/default/w-{}", base + i),
                                value.clone(),
                            )
                            .await
                            .expect("create");
                    }
                    done.notified().await;
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, creates, watch_fanout);
criterion_main!(benches);
