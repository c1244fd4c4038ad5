//! The etcd backend against a throwaway etcd: the conformance suite and etcd-specific cases.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

use super::throwaway::EtcdCluster;
use super::{EtcdOptions, EtcdStorage};
use crate::storage::conformance::{self, next_event};
use crate::storage::{Error, Event, ListOptions, Storage, WatchCache};

/// A fresh one-member etcd and a store on it (no periodic compaction: the suite compacts
/// explicitly), or `None` when etcd is not installed.
async fn fresh() -> Option<(EtcdCluster, EtcdStorage)> {
    let cluster = EtcdCluster::start(1).await?;
    let options = EtcdOptions {
        compaction_interval: None,
        ..EtcdOptions::new(cluster.endpoints())
    };
    let store = EtcdStorage::connect(options).await.expect("connect");
    Some((cluster, store))
}

conformance::suite!(optional async {
    let (cluster, store) = fresh().await?;
    Some((cluster, Arc::new(store) as Arc<dyn Storage>))
});

/// The suite again through the watch cache the API server puts in front of every backend,
/// with a window small enough that some watches go to etcd.
mod through_the_watch_cache {
    use super::*;

    conformance::suite!(optional async {
        let (cluster, store) = fresh().await?;
        let cache = WatchCache::new(Arc::new(store), 8).await.expect("cache");
        Some((cluster, Arc::new(cache) as Arc<dyn Storage>))
    });
}

fn val(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_laid_out_as_kube_apiserver_lays_them_out() {
    let Some((cluster, store)) = fresh().await else {
        return;
    };
    store
        .create("/registry/core/pods/default/nginx", val("pod"))
        .await
        .expect("create pod");
    store
        .create("/registry/apps/deployments/default/web", val("deploy"))
        .await
        .expect("create deployment");
    let mut raw = etcd_client::Client::connect(cluster.endpoints(), None)
        .await
        .expect("raw client");
    let got = raw
        .get(
            "/registry/",
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await
        .expect("raw get");
    let keys: Vec<_> = got
        .kvs()
        .iter()
        .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
        .collect();
    assert_eq!(
        keys,
        [
            "/registry/apps/deployments/default/web",
            "/registry/pods/default/nginx"
        ]
    );
    let list = store
        .list(ListOptions {
            prefix: "/registry/core/pods/".into(),
            ..ListOptions::default()
        })
        .await
        .expect("list");
    assert_eq!(&*list.kvs[0].key, "/registry/core/pods/default/nginx");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_prefix_keeps_two_clusters_apart() {
    let Some(cluster) = EtcdCluster::start(1).await else {
        return;
    };
    let open = |prefix: &str| {
        EtcdStorage::connect(EtcdOptions {
            prefix: prefix.into(),
            compaction_interval: None,
            ..EtcdOptions::new(cluster.endpoints())
        })
    };
    let (one, two) = (
        open("/one").await.expect("one"),
        open("/two").await.expect("two"),
    );
    let key = "/registry/core/configmaps/default/c";
    one.create(key, val("1")).await.expect("create in one");
    two.create(key, val("2"))
        .await
        .expect("create in two: another cluster");
    let mut watch = one.watch("", 0).await.expect("watch one");
    let marker = one
        .create("/registry/core/configmaps/default/m", val("m"))
        .await
        .expect("marker");
    let first = next_event(&mut watch).await;
    assert_eq!(first.key().map(|k| &**k), Some(key));
    assert_ne!(first.revision(), marker);
    assert_eq!(next_event(&mut watch).await.revision(), marker);
    assert_eq!(
        one.get(key).await.expect("get").map(|kv| kv.value),
        Some(val("1"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_sees_compaction_recorded_by_the_first() {
    let Some((cluster, first)) = fresh().await else {
        return;
    };
    let second = EtcdStorage::connect(EtcdOptions {
        compaction_interval: None,
        ..EtcdOptions::new(cluster.endpoints())
    })
    .await
    .expect("second");
    let r1 = first.create("/k/a", val("1")).await.expect("create");
    let r2 = first.update("/k/a", r1, val("2")).await.expect("update");
    first.compact(r2).await.expect("compact");
    assert_eq!(second.compacted_revision().await.expect("compacted"), r2);
    let Err(err) = second.watch("/k/", r1).await else {
        panic!("a watch below the compaction must fail");
    };
    assert!(
        matches!(err, Error::Compacted { compacted, .. } if compacted == r2),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_compaction_keeps_one_interval_of_history() {
    let Some(cluster) = EtcdCluster::start(1).await else {
        return;
    };
    let store = EtcdStorage::connect(EtcdOptions {
        compaction_interval: Some(Duration::from_millis(200)),
        ..EtcdOptions::new(cluster.endpoints())
    })
    .await
    .expect("connect");
    let first = store.create("/p/a", val("1")).await.expect("create");
    // The first tick only notes the revision; a later one compacts to it. The compactor
    // records the compaction before etcd performs it (as compact.go does), so wait for etcd
    // itself to refuse a read below `first`, not only for the record. Poll with a bound: the
    // interval is real time because etcd is a real process.
    let below = ListOptions {
        prefix: "/p/".into(),
        revision: Some(first - 1),
        ..ListOptions::default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let err = loop {
        match store.list(below.clone()).await {
            Err(err) => break err,
            Ok(_) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no compaction within 20 s"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert!(matches!(err, Error::Compacted { .. }), "{err:?}");
    let compacted = store.compacted_revision().await.expect("compacted");
    assert!(
        compacted >= first,
        "recorded {compacted}, created at {first}"
    );
    let now = store.get("/p/a").await.expect("get").expect("present");
    assert_eq!(now.value, val("1"), "compaction keeps current values");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_servers_is_an_error() {
    let err = EtcdStorage::connect(EtcdOptions::new(vec![]))
        .await
        .err()
        .expect("no servers");
    assert!(err.to_string().contains("no etcd servers"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_fails_within_the_request_timeout() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let started = std::time::Instant::now();
    let result = EtcdStorage::connect(EtcdOptions {
        request_timeout: Duration::from_millis(500),
        ..EtcdOptions::new(vec![format!("http://127.0.0.1:{port}")])
    })
    .await;
    assert!(matches!(result, Err(Error::Backend(_))));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_larger_than_grpcs_default_message_size_is_read() {
    let Some((_cluster, store)) = fresh().await else {
        return;
    };
    // Six values of 1 MiB (etcd takes requests up to 1.5 MiB): a 6 MiB range response.
    let big = Bytes::from(vec![b'x'; 1 << 20]);
    for i in 0..6 {
        store
            .create(&format!("/big/{i}"), big.clone())
            .await
            .expect("create");
    }
    let list = store
        .list(ListOptions {
            prefix: "/big/".into(),
            ..ListOptions::default()
        })
        .await
        .expect("a 6 MiB list");
    assert_eq!(list.kvs.len(), 6);
    let mut watch = store.watch("/big/", 0).await.expect("watch");
    for _ in 0..6 {
        next_event(&mut watch).await;
    }
}

/// A write elsewhere in etcd (another cluster's, under the default prefix) changes no watched key, yet progress
/// notifications carry its revision to a direct watch, as an [`Event::Progress`], and to the
/// watch cache, whose progress revision (what the API server's BOOKMARKs report) advances
/// while its last event stays put.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_advance_watches_without_events() {
    let Some(cluster) = EtcdCluster::start(1).await else {
        return;
    };
    let store = EtcdStorage::connect(EtcdOptions {
        compaction_interval: None,
        watch_progress_interval: Duration::from_millis(100),
        prefix: "/one".into(),
        ..EtcdOptions::new(cluster.endpoints())
    })
    .await
    .expect("connect");
    let store = Arc::new(store) as Arc<dyn Storage>;
    let start = store
        .create("/registry/core/configmaps/default/a", val("a"))
        .await
        .expect("create");
    let mut direct = store
        .watch("/registry/core/configmaps/", start)
        .await
        .expect("watch");
    let cache = WatchCache::new(Arc::clone(&store), 8).await.expect("cache");

    let mut raw = etcd_client::Client::connect(cluster.endpoints(), None)
        .await
        .expect("raw client");
    let elsewhere = raw
        .put("/registry/configmaps/default/x", "1", None)
        .await
        .expect("put elsewhere")
        .header()
        .expect("header")
        .revision();
    assert!(elsewhere > start);

    loop {
        match tokio::time::timeout(Duration::from_secs(10), direct.next()).await {
            Ok(Some(Ok(Event::Progress { revision }))) if revision >= elsewhere => break,
            Ok(Some(Ok(Event::Progress { revision }))) => assert!(revision >= start),
            other => panic!("only progress notifications expected, got {other:?}"),
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while cache.progress_revision().await.expect("progress") < elsewhere {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache's progress revision did not reach {elsewhere}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(cache.cached_revision(), start, "no event was published");

    // A change after the progress point is still delivered, in order.
    let next = store
        .create("/registry/core/configmaps/default/b", val("b"))
        .await
        .expect("create b");
    assert_eq!(next_event(&mut direct).await.revision(), next);
}
