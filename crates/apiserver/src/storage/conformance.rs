//! The behaviour every [`Storage`] backend must show, as reusable test cases.
//!
//! Each case is an `async fn(Arc<dyn Storage>)` on a fresh, empty store. A backend runs the
//! whole suite with [`suite!`], which expands to one multi-threaded `#[tokio::test]` per case:
//!
//! ```ignore
//! conformance::suite!(async { ((), Arc::new(MemoryStorage::new()) as Arc<dyn Storage>) });
//! ```
//!
//! The expression yields `(guard, store)`; the guard (a temporary directory, say) lives until
//! the case ends. Cases never assume revisions are consecutive, only strictly increasing, and
//! they prove "no further event" by writing a marker and expecting it next, so they hold for
//! backends that deliver events asynchronously (the watch cache).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

use super::{Error, Event, KeyValue, ListOptions, Revision, Storage, StorageStats, WatchStream};

/// Expands to one `#[tokio::test]` per conformance case, each on a store made by `$make`
/// (an async expression yielding `(guard, Arc<dyn Storage>)`). `suite!(optional $make)` takes
/// a maker yielding `Option<(guard, store)>` for backends that need an external server; a
/// `None` passes the case (the maker says why on stderr).
macro_rules! suite {
    (optional $make:expr) => {
        $crate::storage::conformance::suite!(@optional $make;
            empty_store_lists_nothing_at_its_revision,
            create_and_get,
            create_existing_key_fails,
            revisions_strictly_increase_across_keys,
            update_is_guarded_by_mod_revision,
            delete_is_guarded_and_returns_last_version,
            recreate_after_delete_starts_a_new_life,
            list_by_prefix_in_key_order,
            list_at_an_older_revision,
            list_pages_share_the_first_page_revision,
            cut_lists_count_the_keys_after_the_page,
            list_in_the_future_fails,
            watch_replays_history_then_live_events,
            watch_filters_by_prefix,
            watch_from_current_revision_sees_only_new_changes,
            watch_from_a_future_revision_skips_until_then,
            compaction_keeps_current_state_and_window,
            compaction_rejects_old_reads_and_watches,
            compaction_of_a_future_revision_fails,
            stats_count_live_keys_and_shrink_with_compaction,
            concurrent_guarded_updates_have_one_winner_per_version,
            concurrent_creates_get_distinct_revisions_and_watch_sees_all,
        );
    };
    ($make:expr) => {
        $crate::storage::conformance::suite!(@cases $make;
            empty_store_lists_nothing_at_its_revision,
            create_and_get,
            create_existing_key_fails,
            revisions_strictly_increase_across_keys,
            update_is_guarded_by_mod_revision,
            delete_is_guarded_and_returns_last_version,
            recreate_after_delete_starts_a_new_life,
            list_by_prefix_in_key_order,
            list_at_an_older_revision,
            list_pages_share_the_first_page_revision,
            cut_lists_count_the_keys_after_the_page,
            list_in_the_future_fails,
            watch_replays_history_then_live_events,
            watch_filters_by_prefix,
            watch_from_current_revision_sees_only_new_changes,
            watch_from_a_future_revision_skips_until_then,
            compaction_keeps_current_state_and_window,
            compaction_rejects_old_reads_and_watches,
            compaction_of_a_future_revision_fails,
            stats_count_live_keys_and_shrink_with_compaction,
            concurrent_guarded_updates_have_one_winner_per_version,
            concurrent_creates_get_distinct_revisions_and_watch_sees_all,
        );
    };
    (@optional $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                // `None`: the backend is not available here (the maker said why).
                let Some((_guard, store)) = $make.await else { return };
                $crate::storage::conformance::$case(store).await;
            }
        )*
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (_guard, store) = $make.await;
                $crate::storage::conformance::$case(store).await;
            }
        )*
    };
}
pub(crate) use suite;

/// A hang guard for awaiting an event: correctness never depends on it.
const PATIENCE: Duration = Duration::from_secs(20);

fn val(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

fn list_opts(prefix: &str) -> ListOptions {
    ListOptions {
        prefix: prefix.into(),
        ..ListOptions::default()
    }
}

fn keys(kvs: &[KeyValue]) -> Vec<&str> {
    kvs.iter().map(|kv| &*kv.key).collect()
}

/// The next watch event (panics on an error item, the end of the stream, or a hang).
pub(crate) async fn next_event(stream: &mut WatchStream) -> Event {
    loop {
        match tokio::time::timeout(PATIENCE, stream.next()).await {
            // A backend may interleave progress notifications at any time; the cases are
            // about changes.
            Ok(Some(Ok(Event::Progress { .. }))) => continue,
            Ok(Some(Ok(event))) => return event,
            Ok(Some(Err(err))) => panic!("watch failed: {err}"),
            Ok(None) => panic!("watch ended"),
            Err(_) => panic!("no watch event within {PATIENCE:?}"),
        }
    }
}

/// (key, revision, is-delete) of an event, for compact assertions.
fn summary(event: &Event) -> (String, Revision, bool) {
    (
        event.key().map(|k| k.to_string()).unwrap_or_default(),
        event.revision(),
        matches!(event, Event::Delete { .. }),
    )
}

/// Writes a marker key and expects it as the very next event: proves nothing else was queued.
async fn expect_nothing_before_marker(
    store: &Arc<dyn Storage>,
    stream: &mut WatchStream,
    marker: &str,
) {
    let rev = store
        .create(marker, val("marker"))
        .await
        .expect("create marker");
    let event = next_event(stream).await;
    assert_eq!(
        summary(&event),
        (marker.to_string(), rev, false),
        "unexpected event before the marker"
    );
}

/// An empty store holds nothing and has compacted nothing. Its revision is 0 for the
/// embedded stores and 1 for etcd (whose history starts at 1); either way lists report it.
pub(crate) async fn empty_store_lists_nothing_at_its_revision(store: Arc<dyn Storage>) {
    let rev = store.current_revision().await.expect("rev");
    assert!(
        (0..=1).contains(&rev),
        "an empty store is at revision {rev}"
    );
    assert_eq!(store.compacted_revision().await.expect("compacted"), 0);
    assert_eq!(store.get("/a").await.expect("get"), None);
    let list = store.list(list_opts("/")).await.expect("list");
    assert!(list.kvs.is_empty());
    assert!(!list.more);
    assert_eq!(list.revision, rev);
}

pub(crate) async fn create_and_get(store: Arc<dyn Storage>) {
    let rev = store.create("/a", val("one")).await.expect("create");
    assert!(rev > 0);
    assert_eq!(store.current_revision().await.expect("rev"), rev);
    let kv = store.get("/a").await.expect("get").expect("present");
    assert_eq!(
        kv,
        KeyValue {
            key: "/a".into(),
            value: val("one"),
            create_revision: rev,
            mod_revision: rev
        }
    );
    assert_eq!(store.get("/ab").await.expect("get"), None);
}

pub(crate) async fn create_existing_key_fails(store: Arc<dyn Storage>) {
    let rev = store.create("/a", val("one")).await.expect("create");
    let err = store
        .create("/a", val("two"))
        .await
        .expect_err("second create");
    assert!(
        matches!(err, Error::AlreadyExists { ref key } if key == "/a"),
        "{err:?}"
    );
    assert_eq!(
        store.current_revision().await.expect("rev"),
        rev,
        "a failed write takes no revision"
    );
    assert_eq!(
        store.get("/a").await.expect("get").map(|kv| kv.value),
        Some(val("one"))
    );
}

pub(crate) async fn revisions_strictly_increase_across_keys(store: Arc<dyn Storage>) {
    let mut last = 0;
    for key in ["/a", "/b", "/c"] {
        let rev = store.create(key, val("v")).await.expect("create");
        assert!(rev > last, "{rev} after {last}");
        last = rev;
        let rev = store.update(key, rev, val("w")).await.expect("update");
        assert!(rev > last, "{rev} after {last}");
        last = rev;
    }
    let (rev, _) = store
        .delete(
            "/a",
            store.get("/a").await.expect("get").expect("a").mod_revision,
        )
        .await
        .expect("delete");
    assert!(rev > last);
    assert_eq!(store.current_revision().await.expect("rev"), rev);
}

pub(crate) async fn update_is_guarded_by_mod_revision(store: Arc<dyn Storage>) {
    let created = store.create("/a", val("one")).await.expect("create");
    let updated = store
        .update("/a", created, val("two"))
        .await
        .expect("update");
    assert!(updated > created);
    let kv = store.get("/a").await.expect("get").expect("present");
    assert_eq!(
        (kv.value, kv.create_revision, kv.mod_revision),
        (val("two"), created, updated)
    );

    let err = store
        .update("/a", created, val("stale"))
        .await
        .expect_err("stale update");
    assert!(
        matches!(err, Error::Conflict { ref key, expected, actual } if key == "/a" && expected == created && actual == updated),
        "{err:?}"
    );
    let err = store
        .update("/missing", 1, val("x"))
        .await
        .expect_err("update missing");
    assert!(
        matches!(err, Error::NotFound { ref key } if key == "/missing"),
        "{err:?}"
    );
    assert_eq!(
        store.current_revision().await.expect("rev"),
        updated,
        "failed writes take no revision"
    );
    assert_eq!(
        store.get("/a").await.expect("get").map(|kv| kv.value),
        Some(val("two"))
    );
}

pub(crate) async fn delete_is_guarded_and_returns_last_version(store: Arc<dyn Storage>) {
    let created = store.create("/a", val("one")).await.expect("create");
    let updated = store
        .update("/a", created, val("two"))
        .await
        .expect("update");
    let err = store.delete("/a", created).await.expect_err("stale delete");
    assert!(
        matches!(err, Error::Conflict { actual, .. } if actual == updated),
        "{err:?}"
    );

    let (rev, prev) = store.delete("/a", updated).await.expect("delete");
    assert!(rev > updated);
    assert_eq!(
        prev,
        KeyValue {
            key: "/a".into(),
            value: val("two"),
            create_revision: created,
            mod_revision: updated
        }
    );
    assert_eq!(store.get("/a").await.expect("get"), None);
    assert_eq!(store.current_revision().await.expect("rev"), rev);
    let err = store.delete("/a", rev).await.expect_err("delete twice");
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    let err = store
        .update("/a", updated, val("x"))
        .await
        .expect_err("update deleted");
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
}

pub(crate) async fn recreate_after_delete_starts_a_new_life(store: Arc<dyn Storage>) {
    let first = store.create("/a", val("one")).await.expect("create");
    store.delete("/a", first).await.expect("delete");
    let second = store.create("/a", val("again")).await.expect("recreate");
    let kv = store.get("/a").await.expect("get").expect("present");
    assert_eq!(
        (kv.value, kv.create_revision, kv.mod_revision),
        (val("again"), second, second)
    );
    let err = store
        .update("/a", first, val("x"))
        .await
        .expect_err("old life");
    assert!(
        matches!(err, Error::Conflict { actual, .. } if actual == second),
        "{err:?}"
    );
}

pub(crate) async fn list_by_prefix_in_key_order(store: Arc<dyn Storage>) {
    for key in ["/r/b/2", "/r/a", "/r/b/1", "/r/ba", "/s/x", "/r/b"] {
        store.create(key, val("v")).await.expect("create");
    }
    let rev = store.current_revision().await.expect("rev");
    let list = store.list(list_opts("/r/b/")).await.expect("list");
    assert_eq!(keys(&list.kvs), ["/r/b/1", "/r/b/2"]);
    assert_eq!(list.revision, rev);
    assert!(!list.more);
    let list = store.list(list_opts("/r/")).await.expect("list");
    assert_eq!(
        keys(&list.kvs),
        ["/r/a", "/r/b", "/r/b/1", "/r/b/2", "/r/ba"]
    );
    let all = store.list(list_opts("")).await.expect("list all");
    assert_eq!(all.kvs.len(), 6);

    // Deleted keys disappear from lists at the current revision.
    let b1 = store.get("/r/b/1").await.expect("get").expect("b1");
    store
        .delete("/r/b/1", b1.mod_revision)
        .await
        .expect("delete");
    let list = store.list(list_opts("/r/b/")).await.expect("list");
    assert_eq!(keys(&list.kvs), ["/r/b/2"]);
}

pub(crate) async fn list_at_an_older_revision(store: Arc<dyn Storage>) {
    let a1 = store.create("/p/a", val("a1")).await.expect("create");
    let b1 = store.create("/p/b", val("b1")).await.expect("create");
    let snapshot = b1;
    store.update("/p/a", a1, val("a2")).await.expect("update");
    store.delete("/p/b", b1).await.expect("delete");
    store.create("/p/c", val("c1")).await.expect("create");

    let old = store
        .list(ListOptions {
            revision: Some(snapshot),
            ..list_opts("/p/")
        })
        .await
        .expect("old list");
    assert_eq!(old.revision, snapshot);
    let got: Vec<_> = old
        .kvs
        .iter()
        .map(|kv| (&*kv.key, kv.value.clone(), kv.mod_revision))
        .collect();
    assert_eq!(got, [("/p/a", val("a1"), a1), ("/p/b", val("b1"), b1)]);

    let now = store.list(list_opts("/p/")).await.expect("list");
    let got: Vec<_> = now
        .kvs
        .iter()
        .map(|kv| (&*kv.key, kv.value.clone()))
        .collect();
    assert_eq!(got, [("/p/a", val("a2")), ("/p/c", val("c1"))]);

    let first = store
        .list(ListOptions {
            revision: Some(a1),
            ..list_opts("/p/")
        })
        .await
        .expect("first list");
    assert_eq!(keys(&first.kvs), ["/p/a"]);
}

pub(crate) async fn list_pages_share_the_first_page_revision(store: Arc<dyn Storage>) {
    for i in 0..5 {
        store
            .create(&format!("/q/{i}"), val("v"))
            .await
            .expect("create");
    }
    store.create("/qq", val("outside")).await.expect("create");
    let first = store
        .list(ListOptions {
            limit: Some(2),
            ..list_opts("/q/")
        })
        .await
        .expect("page 1");
    assert_eq!(keys(&first.kvs), ["/q/0", "/q/1"]);
    assert!(first.more);

    // Writes between pages must not show up in later pages.
    let q3 = store.get("/q/3").await.expect("get").expect("q3");
    store.delete("/q/3", q3.mod_revision).await.expect("delete");
    store.create("/q/20", val("new")).await.expect("create");
    let q2 = store.get("/q/2").await.expect("get").expect("q2");
    store
        .update("/q/2", q2.mod_revision, val("changed"))
        .await
        .expect("update");

    let mut seen = keys(&first.kvs)
        .iter()
        .map(|k| k.to_string())
        .collect::<Vec<_>>();
    let mut last = first;
    while last.more {
        let page = store
            .list(ListOptions {
                prefix: "/q/".into(),
                start_after: last.kvs.last().map(|kv| kv.key.to_string()),
                revision: Some(last.revision),
                limit: Some(2),
            })
            .await
            .expect("next page");
        assert_eq!(
            page.revision, last.revision,
            "pages share the first page's revision"
        );
        for kv in &page.kvs {
            assert_eq!(kv.value, val("v"), "{} read at the snapshot", kv.key);
        }
        seen.extend(page.kvs.iter().map(|kv| kv.key.to_string()));
        last = page;
    }
    assert_eq!(seen, ["/q/0", "/q/1", "/q/2", "/q/3", "/q/4"]);

    // An exact fit does not claim more.
    let exact = store
        .list(ListOptions {
            limit: Some(5),
            ..list_opts("/q/")
        })
        .await
        .expect("exact");
    assert_eq!(keys(&exact.kvs), ["/q/0", "/q/1", "/q/2", "/q/20", "/q/4"]);
    assert!(!exact.more);

    // start_after before the prefix starts at the prefix.
    let from_start = store
        .list(ListOptions {
            start_after: Some("/a".into()),
            limit: Some(1),
            ..list_opts("/q/")
        })
        .await
        .expect("from start");
    assert_eq!(keys(&from_start.kvs), ["/q/0"]);
}

/// A page cut by `limit` says how many keys follow it, as of the page's revision (etcd's
/// range count, which the API server turns into `remainingItemCount`).
pub(crate) async fn cut_lists_count_the_keys_after_the_page(store: Arc<dyn Storage>) {
    for i in 0..5 {
        store
            .create(&format!("/r/{i}"), val("v"))
            .await
            .expect("create");
    }
    store.create("/rr", val("outside")).await.expect("create");
    let first = store
        .list(ListOptions {
            limit: Some(2),
            ..list_opts("/r/")
        })
        .await
        .expect("page 1");
    assert_eq!(keys(&first.kvs), ["/r/0", "/r/1"]);
    assert_eq!((first.more, first.remaining), (true, 3));

    // Later writes do not change what the snapshot counts.
    let r3 = store.get("/r/3").await.expect("get").expect("r3");
    store.delete("/r/3", r3.mod_revision).await.expect("delete");
    store.create("/r/5", val("new")).await.expect("create");
    store.create("/r/6", val("new")).await.expect("create");
    let second = store
        .list(ListOptions {
            prefix: "/r/".into(),
            start_after: Some("/r/1".into()),
            revision: Some(first.revision),
            limit: Some(2),
        })
        .await
        .expect("page 2");
    assert_eq!(keys(&second.kvs), ["/r/2", "/r/3"]);
    assert_eq!((second.more, second.remaining), (true, 1));

    // The latest state: deleted keys are not counted, new ones are.
    let latest = store
        .list(ListOptions {
            limit: Some(2),
            ..list_opts("/r/")
        })
        .await
        .expect("latest");
    assert_eq!((latest.more, latest.remaining), (true, 4));

    // Neither an exact fit nor an unlimited list claims a remainder.
    let exact = store
        .list(ListOptions {
            limit: Some(6),
            ..list_opts("/r/")
        })
        .await
        .expect("exact");
    assert_eq!((exact.more, exact.remaining), (false, 0));
    let all = store.list(list_opts("/r/")).await.expect("all");
    assert_eq!((all.kvs.len(), all.more, all.remaining), (6, false, 0));
}

pub(crate) async fn list_in_the_future_fails(store: Arc<dyn Storage>) {
    let rev = store.create("/a", val("v")).await.expect("create");
    let err = store
        .list(ListOptions {
            revision: Some(rev + 10),
            ..list_opts("/")
        })
        .await
        .expect_err("future list");
    assert!(
        matches!(err, Error::FutureRevision { requested, current } if requested == rev + 10 && current == rev),
        "{err:?}"
    );
}

pub(crate) async fn watch_replays_history_then_live_events(store: Arc<dyn Storage>) {
    let before = store.create("/w/old", val("old")).await.expect("create");
    let a = store.create("/w/a", val("a1")).await.expect("create");
    let a2 = store.update("/w/a", a, val("a2")).await.expect("update");
    let mut watch = store.watch("/w/", before).await.expect("watch");
    let (del, _) = store.delete("/w/a", a2).await.expect("delete");

    match next_event(&mut watch).await {
        Event::Put { kv, prev: None } => assert_eq!(
            (&*kv.key, kv.mod_revision, kv.value),
            ("/w/a", a, val("a1"))
        ),
        other => panic!("expected create, got {other:?}"),
    }
    match next_event(&mut watch).await {
        Event::Put {
            kv,
            prev: Some(prev),
        } => {
            assert_eq!(
                (&*kv.key, kv.mod_revision, kv.create_revision, kv.value),
                ("/w/a", a2, a, val("a2"))
            );
            assert_eq!((prev.mod_revision, prev.value), (a, val("a1")));
        }
        other => panic!("expected update, got {other:?}"),
    }
    match next_event(&mut watch).await {
        Event::Delete { revision, prev } => {
            assert_eq!(revision, del);
            assert_eq!(
                (
                    &*prev.key,
                    prev.mod_revision,
                    prev.create_revision,
                    prev.value
                ),
                ("/w/a", a2, a, val("a2"))
            );
        }
        other => panic!("expected delete, got {other:?}"),
    }
    expect_nothing_before_marker(&store, &mut watch, "/w/marker").await;
}

pub(crate) async fn watch_filters_by_prefix(store: Arc<dyn Storage>) {
    let start = store.current_revision().await.expect("rev");
    let r1 = store.create("/f/x/1", val("v")).await.expect("create");
    store.create("/f/xy", val("v")).await.expect("create");
    store.create("/g/x/1", val("v")).await.expect("create");
    let mut watch = store.watch("/f/x/", start).await.expect("watch");
    let mut live = store
        .watch("/f/x/", store.current_revision().await.expect("rev"))
        .await
        .expect("watch");
    store.create("/f/xz", val("v")).await.expect("create");
    let r2 = store.create("/f/x/2", val("v")).await.expect("create");
    assert_eq!(
        summary(&next_event(&mut watch).await),
        ("/f/x/1".into(), r1, false)
    );
    assert_eq!(
        summary(&next_event(&mut watch).await),
        ("/f/x/2".into(), r2, false)
    );
    assert_eq!(
        summary(&next_event(&mut live).await),
        ("/f/x/2".into(), r2, false)
    );
    expect_nothing_before_marker(&store, &mut watch, "/f/x/marker").await;
}

pub(crate) async fn watch_from_current_revision_sees_only_new_changes(store: Arc<dyn Storage>) {
    store.create("/n/a", val("v")).await.expect("create");
    let now = store.current_revision().await.expect("rev");
    let mut watch = store.watch("/n/", now).await.expect("watch");
    let rev = store.create("/n/b", val("v")).await.expect("create");
    assert_eq!(
        summary(&next_event(&mut watch).await),
        ("/n/b".into(), rev, false)
    );
}

pub(crate) async fn watch_from_a_future_revision_skips_until_then(store: Arc<dyn Storage>) {
    let now = store.create("/u/a", val("v")).await.expect("create");
    let mut watch = store.watch("/u/", now + 2).await.expect("watch");
    store.create("/u/b", val("v")).await.expect("create");
    store.create("/u/c", val("v")).await.expect("create");
    let rev = store.create("/u/d", val("v")).await.expect("create");
    let event = next_event(&mut watch).await;
    assert!(event.revision() > now + 2);
    assert_eq!(summary(&event), ("/u/d".into(), rev, false));
}

pub(crate) async fn compaction_keeps_current_state_and_window(store: Arc<dyn Storage>) {
    let a1 = store.create("/c/a", val("a1")).await.expect("create");
    let a2 = store.update("/c/a", a1, val("a2")).await.expect("update");
    let b1 = store.create("/c/b", val("b1")).await.expect("create");
    let (_, _) = store.delete("/c/b", b1).await.expect("delete");
    let c1 = store.create("/c/c", val("c1")).await.expect("create");
    let point = c1;
    let a3 = store.update("/c/a", a2, val("a3")).await.expect("update");
    store.compact(point).await.expect("compact");
    assert_eq!(store.compacted_revision().await.expect("compacted"), point);

    // The state as of the compaction point is still readable.
    let at = store
        .list(ListOptions {
            revision: Some(point),
            ..list_opts("/c/")
        })
        .await
        .expect("list at compaction point");
    let got: Vec<_> = at
        .kvs
        .iter()
        .map(|kv| (&*kv.key, kv.value.clone(), kv.mod_revision))
        .collect();
    assert_eq!(got, [("/c/a", val("a2"), a2), ("/c/c", val("c1"), c1)]);
    let now = store.list(list_opts("/c/")).await.expect("list");
    let got: Vec<_> = now
        .kvs
        .iter()
        .map(|kv| (&*kv.key, kv.value.clone(), kv.create_revision))
        .collect();
    assert_eq!(got, [("/c/a", val("a3"), a1), ("/c/c", val("c1"), c1)]);

    // Writes keep their guards after compaction; a compacted-away key can be recreated.
    let a4 = store
        .update("/c/a", a3, val("a4"))
        .await
        .expect("update after compaction");
    let b2 = store
        .create("/c/b", val("b2"))
        .await
        .expect("recreate after compaction");
    assert!(b2 > a4);

    // Watching from the compaction point replays what came after it.
    let mut watch = store
        .watch("/c/", point)
        .await
        .expect("watch at compaction point");
    match next_event(&mut watch).await {
        Event::Put {
            kv,
            prev: Some(prev),
        } => {
            assert_eq!((kv.mod_revision, kv.value), (a3, val("a3")));
            assert_eq!((prev.mod_revision, prev.value), (a2, val("a2")));
        }
        other => panic!("expected update, got {other:?}"),
    }
    assert_eq!(next_event(&mut watch).await.revision(), a4);
    assert_eq!(
        summary(&next_event(&mut watch).await),
        ("/c/b".into(), b2, false)
    );

    // Compacting to an older revision is a no-op.
    store.compact(a1).await.expect("compact older");
    assert_eq!(store.compacted_revision().await.expect("compacted"), point);
}

pub(crate) async fn compaction_rejects_old_reads_and_watches(store: Arc<dyn Storage>) {
    let r1 = store.create("/o/a", val("v")).await.expect("create");
    let r2 = store.update("/o/a", r1, val("w")).await.expect("update");
    let r3 = store.create("/o/b", val("v")).await.expect("create");
    store.compact(r2).await.expect("compact");

    let err = store
        .list(ListOptions {
            revision: Some(r1),
            ..list_opts("/o/")
        })
        .await
        .expect_err("list below compaction");
    assert!(
        matches!(err, Error::Compacted { requested, compacted } if requested == r1 && compacted == r2),
        "{err:?}"
    );

    let err = match store.watch("/o/", r1).await {
        Err(err) => err,
        Ok(mut stream) => match tokio::time::timeout(PATIENCE, stream.next()).await {
            Ok(Some(Err(err))) => err,
            other => panic!("watch below compaction should fail, got {other:?}"),
        },
    };
    assert!(
        matches!(err, Error::Compacted { requested, compacted } if requested == r1 && compacted == r2),
        "{err:?}"
    );

    let mut ok = store
        .watch("/o/", r2)
        .await
        .expect("watch at compaction point");
    assert_eq!(
        summary(&next_event(&mut ok).await),
        ("/o/b".into(), r3, false)
    );
}

pub(crate) async fn compaction_of_a_future_revision_fails(store: Arc<dyn Storage>) {
    let rev = store.create("/a", val("v")).await.expect("create");
    let err = store.compact(rev + 1).await.expect_err("future compaction");
    assert!(matches!(err, Error::FutureRevision { .. }), "{err:?}");
    assert_eq!(store.compacted_revision().await.expect("compacted"), 0);
}

pub(crate) async fn concurrent_guarded_updates_have_one_winner_per_version(
    store: Arc<dyn Storage>,
) {
    const WRITERS: usize = 8;
    const ROUNDS: usize = 10;
    let mut rev = store.create("/race", val("0")).await.expect("create");
    for round in 0..ROUNDS {
        let tasks: Vec<_> = (0..WRITERS)
            .map(|w| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    store
                        .update("/race", rev, Bytes::from(format!("{round}-{w}")))
                        .await
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            match task.await.expect("join") {
                Ok(new) => winners.push(new),
                Err(Error::Conflict {
                    expected, actual, ..
                }) => {
                    assert_eq!(expected, rev);
                    assert!(actual > rev);
                }
                Err(err) => panic!("unexpected error {err:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one writer wins");
        rev = winners[0];
        assert_eq!(
            store
                .get("/race")
                .await
                .expect("get")
                .expect("present")
                .mod_revision,
            rev
        );
    }
}

pub(crate) async fn concurrent_creates_get_distinct_revisions_and_watch_sees_all(
    store: Arc<dyn Storage>,
) {
    const TASKS: usize = 8;
    const PER_TASK: usize = 25;
    let mut watch = store.watch("/m/", 0).await.expect("watch");
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut revs = Vec::new();
                for i in 0..PER_TASK {
                    revs.push(
                        store
                            .create(&format!("/m/{t}/{i}"), val("v"))
                            .await
                            .expect("create"),
                    );
                }
                revs
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("join"));
    }
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        all.len(),
        TASKS * PER_TASK,
        "every create got its own revision"
    );

    let mut seen = Vec::new();
    while seen.len() < all.len() {
        seen.push(next_event(&mut watch).await.revision());
    }
    assert_eq!(
        seen, all,
        "the watch delivers every write once, in revision order"
    );
    let list = store.list(list_opts("/m/")).await.expect("list");
    assert_eq!(list.kvs.len(), TASKS * PER_TASK);
}

/// A store that reports its size counts the keys that exist, keeps every version until a
/// compaction, and gives the history's rows and bytes back when compacted.
pub(crate) async fn stats_count_live_keys_and_shrink_with_compaction(store: Arc<dyn Storage>) {
    let Some(empty) = store.stats().await.expect("stats") else {
        return; // A store that cannot tell.
    };
    let a1 = store
        .create("/registry/stats/a", Bytes::from(vec![b'a'; 1000]))
        .await
        .expect("create");
    let a2 = store
        .update("/registry/stats/a", a1, Bytes::from(vec![b'b'; 1000]))
        .await
        .expect("update");
    store
        .update("/registry/stats/a", a2, Bytes::from(vec![b'c'; 1000]))
        .await
        .expect("update");
    let b1 = store
        .create("/registry/stats/b", val("b1"))
        .await
        .expect("create");
    store.delete("/registry/stats/b", b1).await.expect("delete");
    let last = store
        .create("/registry/stats/c", val("c1"))
        .await
        .expect("create");
    let before = store.stats().await.expect("stats").unwrap_or_default();
    let grown = |f: fn(&StorageStats) -> Option<u64>| {
        f(&before).unwrap_or_default() - f(&empty).unwrap_or_default()
    };
    if before.live_keys.is_some() {
        assert_eq!(grown(|s| s.live_keys), 2, "a and c exist: {before:?}");
    }
    if before.stored_rows.is_some() {
        assert!(
            grown(|s| s.stored_rows) >= 5,
            "every version is kept: {before:?}"
        );
    }
    if before.stored_value_bytes.is_some() {
        assert!(grown(|s| s.stored_value_bytes) >= 3000, "{before:?}");
    }

    store.compact(last).await.expect("compact");
    let after = store.stats().await.expect("stats").unwrap_or_default();
    assert_eq!(
        after.live_keys, before.live_keys,
        "compaction keeps what exists"
    );
    if let (Some(b), Some(a)) = (before.stored_rows, after.stored_rows) {
        assert!(
            a < b,
            "compaction drops old versions: {before:?} -> {after:?}"
        );
    }
    if let (Some(b), Some(a)) = (before.stored_value_bytes, after.stored_value_bytes) {
        // a's two old 1000-byte versions go; its current 1000 bytes stay.
        assert!(a + 1000 < b, "{before:?} -> {after:?}");
        assert!(a >= 1000, "{after:?}");
    }
}
