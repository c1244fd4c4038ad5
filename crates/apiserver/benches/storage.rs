//! Storage benchmarks: creates per second (memory, SQLite with each sync mode, etcd; one writer
//! and 64 concurrent writers), a list of 10k pods, and watch fan-out through the watch cache
//! (1 writer, 50 watchers).
//!
//! Run: `cargo bench -p kcm-apiserver --bench storage`. The etcd rows need the `etcd` binary
//! (a throwaway one-member etcd on a loopback port, data in the temp dir); without it they are
//! left out.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use kcm_apiserver::storage::etcd::throwaway::EtcdCluster;
use kcm_apiserver::storage::{
    EtcdOptions, EtcdStorage, ListOptions, MemoryStorage, SqliteOptions, SqliteStorage, Storage,
    Synchronous, WatchCache,
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

/// Keeps a backend's temporary directory or etcd process alive as long as the store.
type Guard = Option<Box<dyn std::any::Any>>;

/// The backends under test.
fn backends(rt: &Runtime) -> Vec<(&'static str, Guard, Arc<dyn Storage>)> {
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
        (
            Some(Box::new(dir) as Box<dyn std::any::Any>),
            Arc::new(store) as Arc<dyn Storage>,
        )
    };
    let (full_dir, full) = sqlite(Synchronous::Full);
    let (normal_dir, normal) = sqlite(Synchronous::Normal);
    let mut backends = vec![
        (
            "memory",
            None,
            Arc::new(MemoryStorage::new()) as Arc<dyn Storage>,
        ),
        ("sqlite_full", full_dir, full),
        ("sqlite_normal", normal_dir, normal),
    ];
    if let Some(cluster) = rt.block_on(EtcdCluster::start(1)) {
        let options = EtcdOptions {
            compaction_interval: None,
            ..EtcdOptions::new(cluster.endpoints())
        };
        let store = rt.block_on(EtcdStorage::connect(options)).expect("etcd");
        backends.push((
            "etcd",
            Some(Box::new(cluster) as Box<dyn std::any::Any>),
            Arc::new(store) as Arc<dyn Storage>,
        ));
    }
    backends
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
                        .create(&format!("/registry/core/pods/default/seq-{n}"), value)
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
                                .create(
                                    &format!("/registry/core/pods/default/con-{}", base + i),
                                    value,
                                )
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
                .block_on(cache.watch("/registry/core/pods/", start))
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
                                &format!("/registry/core/pods/default/w-{}", base + i),
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

fn list_10k(c: &mut Criterion) {
    const PODS: u64 = 10_000;
    let rt = runtime();
    let value = object();
    let mut group = c.benchmark_group("list");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(PODS));
    for (name, _guard, store) in backends(&rt) {
        rt.block_on(async {
            for chunk in 0..PODS / 100 {
                let tasks: Vec<_> = (0..100)
                    .map(|i| {
                        let (store, value) = (Arc::clone(&store), value.clone());
                        tokio::spawn(async move {
                            store
                                .create(
                                    &format!("/registry/core/pods/default/l-{}", chunk * 100 + i),
                                    value,
                                )
                                .await
                                .expect("create")
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.expect("join");
                }
            }
        });
        group.bench_function(format!("{name}/10k_pods"), |b| {
            b.to_async(&rt).iter(|| {
                let store = Arc::clone(&store);
                async move {
                    let list = store
                        .list(ListOptions {
                            prefix: "/registry/core/pods/".into(),
                            ..ListOptions::default()
                        })
                        .await
                        .expect("list");
                    assert_eq!(list.kvs.len() as u64, PODS);
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, creates, list_10k, watch_fanout);
criterion_main!(benches);
