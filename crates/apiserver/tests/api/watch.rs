//! Watch semantics: start points, selector transitions, DELETED state, bookmarks, timeouts, 410 and relist.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kcm_apiserver::StorageBackend;
use kcm_apiserver::storage::EtcdOptions;
use kcm_apiserver::storage::etcd::throwaway::EtcdCluster;
use kcm_apiserver::testing::TestServer;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use kube::core::WatchEvent;
use serde_json::json;

use crate::common::{configmap, describe, drain, next_event, pod, timed};

fn rv_of(cm: &ConfigMap) -> String {
    cm.metadata.resource_version.clone().expect("rv")
}

#[tokio::test]
async fn watch_from_revision_delivers_later_changes_in_order() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let a = api
            .create(&PostParams::default(), &configmap("a", &[]))
            .await
            .expect("create a");
        let start = rv_of(&a);
        api.create(&PostParams::default(), &configmap("b", &[]))
            .await
            .expect("create b");
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"x": "1"}})),
        )
        .await
        .expect("patch a");
        api.delete("b", &DeleteParams::default())
            .await
            .expect("delete b");

        let wp = WatchParams::default().disable_bookmarks().timeout(1);
        let events = drain(api.watch(&wp, &start).await.expect("watch")).await;
        let seen: Vec<String> = events.iter().map(describe).collect();
        assert_eq!(seen, vec!["ADDED b", "MODIFIED a", "DELETED b"]);
    })
    .await;
}

#[tokio::test]
async fn watch_without_revision_replays_current_state_then_follows() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        api.create(&PostParams::default(), &configmap("a", &[]))
            .await
            .expect("create");
        api.create(&PostParams::default(), &configmap("b", &[]))
            .await
            .expect("create");
        let mut stream = api
            .watch(&WatchParams::default().disable_bookmarks(), "0")
            .await
            .expect("watch")
            .boxed();
        let mut initial = vec![
            describe(&next_event(&mut stream).await),
            describe(&next_event(&mut stream).await),
        ];
        initial.sort();
        assert_eq!(initial, vec!["ADDED a", "ADDED b"]);
        api.create(&PostParams::default(), &configmap("c", &[]))
            .await
            .expect("create");
        assert_eq!(describe(&next_event(&mut stream).await), "ADDED c");
    })
    .await;
}

#[tokio::test]
async fn deleted_event_carries_last_state_at_deletion_revision() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let created = api
            .create(&PostParams::default(), &configmap("d", &[("k", "v")]))
            .await
            .expect("create");
        let mut stream = api
            .watch(
                &WatchParams::default().disable_bookmarks(),
                &rv_of(&created),
            )
            .await
            .expect("watch")
            .boxed();
        api.delete("d", &DeleteParams::default())
            .await
            .expect("delete");
        let WatchEvent::Deleted(gone) = next_event(&mut stream).await else {
            panic!("expected DELETED");
        };
        assert_eq!(gone.data.as_ref().expect("data")["k"], "v");
        let deleted_at: i64 = rv_of(&gone).parse().expect("rv");
        assert!(deleted_at > rv_of(&created).parse::<i64>().expect("rv"));
    })
    .await;
}

#[tokio::test]
async fn objects_entering_and_leaving_a_selector_are_added_and_deleted() {
    timed(async {
        let server = TestServer::start().await;
        let pods: Api<Pod> = Api::namespaced(server.client(), "default");
        let p = pods
            .create(&PostParams::default(), &pod("p", &[("tier", "back")]))
            .await
            .expect("create");
        let wp = WatchParams::default()
            .labels("tier=front")
            .disable_bookmarks();
        let mut stream = pods
            .watch(&wp, p.metadata.resource_version.as_deref().expect("rv"))
            .await
            .expect("watch")
            .boxed();
        let relabel =
            |tier: &'static str| Patch::Merge(json!({"metadata": {"labels": {"tier": tier}}}));
        pods.patch("p", &PatchParams::default(), &relabel("front"))
            .await
            .expect("enter");
        assert_eq!(describe(&next_event(&mut stream).await), "ADDED p");
        pods.patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"a": "b"}}})),
        )
        .await
        .expect("stay");
        assert_eq!(describe(&next_event(&mut stream).await), "MODIFIED p");
        pods.patch("p", &PatchParams::default(), &relabel("back"))
            .await
            .expect("leave");
        let left = next_event(&mut stream).await;
        assert_eq!(describe(&left), "DELETED p");
        let WatchEvent::Deleted(last) = left else {
            unreachable!()
        };
        // The last state that matched, at the revision it stopped matching.
        assert_eq!(last.metadata.labels.expect("labels")["tier"], "front");
    })
    .await;
}

#[tokio::test]
async fn bookmarks_only_when_requested() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let cm = api
            .create(&PostParams::default(), &configmap("a", &[]))
            .await
            .expect("create");
        let rv = rv_of(&cm);
        // The test server sends bookmarks every 200 ms: a 1 s watch that asked gets some.
        let with = drain(
            api.watch(&WatchParams::default().timeout(1), &rv)
                .await
                .expect("watch"),
        )
        .await;
        let bookmarks: Vec<_> = with
            .iter()
            .filter_map(|e| match e {
                WatchEvent::Bookmark(b) => Some(b.metadata.resource_version.clone()),
                _ => None,
            })
            .collect();
        assert!(!bookmarks.is_empty(), "no bookmark in {with:?}");
        assert!(bookmarks.iter().all(|b| *b == rv));
        let without = drain(
            api.watch(&WatchParams::default().disable_bookmarks().timeout(1), &rv)
                .await
                .expect("watch"),
        )
        .await;
        assert!(without.is_empty(), "unexpected events {without:?}");
    })
    .await;
}

/// On etcd, BOOKMARKs follow etcd's progress notifications (upstream: the etcd3 watcher's
/// progress notify feeding the cacher): a write by another cluster sharing the etcd changes
/// nothing this server stores, yet a bookmarking watch's resourceVersion soon moves up to it
/// (within a few bookmark periods, well before the server's own periodic writes, such as its
/// endpoint lease every 10 s, would move it there without progress notifications).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_on_etcd_advance_with_progress_notifications() {
    let Some(etcd) = EtcdCluster::start(1).await else {
        return;
    };
    timed(async {
        let options = EtcdOptions {
            prefix: "/one".into(),
            compaction_interval: None,
            watch_progress_interval: Duration::from_millis(100),
            ..EtcdOptions::new(etcd.endpoints())
        };
        let server = TestServer::try_start(StorageBackend::Etcd(options), None)
            .await
            .expect("a server on etcd");
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let cm = api
            .create(&PostParams::default(), &configmap("a", &[]))
            .await
            .expect("create");
        let mut raw = etcd_client::Client::connect(etcd.endpoints(), None)
            .await
            .expect("raw client");
        let elsewhere = raw
            .put("/registry/configmaps/default/theirs", "1", None)
            .await
            .expect("another cluster's write")
            .header()
            .expect("header")
            .revision();
        let started = tokio::time::Instant::now();
        let mut stream = api
            .watch(&WatchParams::default().timeout(20), &rv_of(&cm))
            .await
            .expect("watch")
            .boxed();
        loop {
            match next_event(&mut stream).await {
                WatchEvent::Bookmark(b) => {
                    let rv: i64 = b.metadata.resource_version.parse().expect("numeric rv");
                    if rv >= elsewhere {
                        break;
                    }
                }
                other => panic!("only bookmarks expected, got {}", describe(&other)),
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the bookmark reached revision {elsewhere} only after {:?}",
            started.elapsed()
        );
    })
    .await;
    drop(etcd);
}

#[tokio::test]
async fn watch_from_compacted_revision_is_410_then_relist_works() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let old = api
            .create(&PostParams::default(), &configmap("a", &[]))
            .await
            .expect("create");
        for i in 0..5 {
            api.create(&PostParams::default(), &configmap(&format!("b{i}"), &[]))
                .await
                .expect("create");
        }
        let storage = server.server().storage();
        let current = storage.current_revision().await.expect("revision");
        storage.compact(current).await.expect("compact");

        let events = drain(
            api.watch(&WatchParams::default().disable_bookmarks(), &rv_of(&old))
                .await
                .expect("watch"),
        )
        .await;
        let [WatchEvent::Error(status)] = events.as_slice() else {
            panic!("expected one ERROR event, got {events:?}");
        };
        assert_eq!(status.code, 410);
        assert_eq!(status.reason, "Expired");
        assert!(
            status.message.starts_with("too old resource version"),
            "{}",
            status.message
        );

        // The reflector's recovery: relist, then watch from the list's revision.
        let list = api.list(&ListParams::default()).await.expect("relist");
        assert_eq!(list.items.len(), 6);
        let list_rv = list.metadata.resource_version.clone().expect("rv");
        let mut stream = api
            .watch(&WatchParams::default().disable_bookmarks(), &list_rv)
            .await
            .expect("watch")
            .boxed();
        api.create(&PostParams::default(), &configmap("c", &[]))
            .await
            .expect("create");
        assert_eq!(describe(&next_event(&mut stream).await), "ADDED c");
    })
    .await;
}

#[tokio::test]
async fn send_initial_events_ends_with_annotated_bookmark() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        api.create(&PostParams::default(), &configmap("a", &[]))
            .await
            .expect("create");
        let mut stream = api
            .watch(&WatchParams::streaming_lists(), "")
            .await
            .expect("watch")
            .boxed();
        assert_eq!(describe(&next_event(&mut stream).await), "ADDED a");
        let WatchEvent::Bookmark(b) = next_event(&mut stream).await else {
            panic!("expected the initial-events-end bookmark");
        };
        assert_eq!(
            b.metadata
                .annotations
                .get("k8s.io/initial-events-end")
                .map(String::as_str),
            Some("true")
        );
        api.create(&PostParams::default(), &configmap("b", &[]))
            .await
            .expect("create");
        // Periodic bookmarks may interleave; the next object event is b.
        loop {
            match next_event(&mut stream).await {
                WatchEvent::Bookmark(_) => continue,
                other => {
                    assert_eq!(describe(&other), "ADDED b");
                    break;
                }
            }
        }
    })
    .await;
}

#[tokio::test]
async fn watch_ends_at_timeout_seconds() {
    timed(async {
        let server = TestServer::start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let started = std::time::Instant::now();
        let events = drain(
            api.watch(&WatchParams::default().disable_bookmarks().timeout(1), "0")
                .await
                .expect("watch"),
        )
        .await;
        assert!(events.is_empty());
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    })
    .await;
}
