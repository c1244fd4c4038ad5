//! Unit tests of the StatefulSet controller wiring and sync, as upstream's
//! `stateful_set_test.go`: adoption and release of pods and revisions, the event handlers,
//! and panic recovery.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kcm_machinery::controller::get_controller_of;
use kcm_testing::{MetaBuilder, controller_ref_of, pod};

use super::super::test_support::{fixture, new_set};
use super::*;

/// Upstream's `TestStatefulSetControllerAddPod` / `UpdatePod`: owned pods wake their set;
/// an orphan wakes the sets selecting it.
#[tokio::test]
async fn pod_events_enqueue_the_owner() {
    let f = fixture();
    let set = new_set(1).build();
    f.add_set(&set);
    let owned = pod("web-0")
        .namespace("default")
        .labels(&[("app", "nginx")])
        .owner(controller_ref_of(&set))
        .resource_version("1")
        .build();
    let h = f.controller.event_handlers();
    h.add_pod(&owned);
    assert_eq!(f.controller.queue().len(), 1);
    let k = f.controller.queue().get().await;
    assert_eq!(k.as_deref(), Some("default/web"));
    if let Some(k) = k {
        f.controller.queue().done(&k);
    }
    let mut orphan = owned.clone();
    orphan.metadata.owner_references = None;
    h.add_pod(&orphan);
    assert_eq!(f.controller.queue().len(), 1);
    let mut foreign = orphan.clone();
    foreign.metadata.labels = Some(kcm_testing::labels(&[("app", "other")]));
    let _ = f
        .controller
        .queue()
        .get()
        .await
        .map(|k| f.controller.queue().done(&k));
    h.add_pod(&foreign);
    assert_eq!(f.controller.queue().len(), 0);
    let mut same = owned.clone();
    h.update_pod(&owned, &same);
    assert_eq!(
        f.controller.queue().len(),
        0,
        "resync: same resourceVersion"
    );
    same.metadata.resource_version = Some("2".into());
    h.update_pod(&owned, &same);
    assert_eq!(f.controller.queue().len(), 1);
}

/// Upstream's `TestGetPodsForStatefulSetAdopt` / `Release`: an orphan named as a member and
/// matching the selector is adopted; one not named as a member is left alone; an owned pod
/// that no longer matches is released.
#[tokio::test]
async fn sync_adopts_and_releases_pods() {
    let f = fixture();
    let set = new_set(0).build();
    f.add_set(&set);
    let orphan = pod("web-0")
        .namespace("default")
        .uid("p0")
        .labels(&[("app", "nginx")])
        .build();
    let stranger = pod("other-0")
        .namespace("default")
        .uid("p1")
        .labels(&[("app", "nginx")])
        .build();
    let mut drifted = pod("web-1")
        .namespace("default")
        .uid("p2")
        .labels(&[("app", "changed")])
        .owner(controller_ref_of(&set))
        .build();
    drifted
        .metadata
        .owner_references
        .iter_mut()
        .flatten()
        .for_each(|r| r.controller = Some(true));
    for p in [orphan, stranger, drifted] {
        let _ = f.caches.pods.add(Arc::new(p));
    }
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    let patched: Vec<String> = f
        .pod_control
        .patches()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert!(patched.contains(&"web-0".to_owned()), "{patched:?}");
    assert!(patched.contains(&"web-1".to_owned()), "{patched:?}");
    assert!(!patched.contains(&"other-0".to_owned()));
}

/// Orphaned revisions the set selects are adopted after an uncached check.
#[tokio::test]
async fn sync_adopts_orphan_revisions() {
    let f = fixture();
    let set = new_set(0).build();
    f.add_set(&set);
    let mut orphan = super::super::utils::new_revision(&set, 1, 0);
    orphan.metadata.namespace = Some("default".into());
    orphan.metadata.owner_references = None;
    orphan.metadata.uid = Some("rev-uid".into());
    f.revisions.insert(orphan.clone());
    f.sync().await.unwrap_or_else(|e| panic!("{e}"));
    let adopted = f
        .revisions
        .objects()
        .into_iter()
        .find(|r| r.metadata.name == orphan.metadata.name);
    assert_eq!(
        adopted
            .as_ref()
            .and_then(|r| get_controller_of(&r.metadata))
            .map(|o| o.uid.clone()),
        Some("web-uid".to_owned())
    );
    assert!(
        f.set_client
            .actions()
            .iter()
            .any(|a| matches!(a, super::super::client::StatefulSetAction::Get(_)))
    );
}

/// A set gone from the cache syncs to nothing.
#[tokio::test]
async fn deleted_sets_are_ignored() {
    let f = fixture();
    f.controller
        .sync("default/gone")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(f.objects.actions().is_empty());
    assert!(matches!(
        f.controller.sync("a/b/c").await,
        Err(Error::InvalidKey { .. })
    ));
}

/// A panic injected in the sync is recovered, counted and retried.
#[tokio::test(start_paused = true)]
async fn panicking_sync_is_recovered_counted_and_retried() {
    let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
    let attempts = Arc::new(AtomicU64::new(0));
    let handler: SyncHandler = {
        let attempts = attempts.clone();
        Arc::new(move |_key: String| {
            let attempts = attempts.clone();
            Box::pin(async move {
                if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("injected panic");
                }
                Ok(())
            })
        })
    };
    let f = fixture();
    let controller = StatefulSetController::with_caches(
        f.caches.clone(),
        f.set_client.clone(),
        f.objects.clone(),
        f.revisions.clone(),
        f.pod_control.clone(),
        f.recorder.clone(),
        Arc::new(super::super::test_support::now),
        StatefulSetControllerOptions {
            metrics: Some(metrics.clone()),
            ..StatefulSetControllerOptions::default()
        },
    )
    .with_sync_handler(handler);
    let key = "default/web".to_owned();
    controller.queue().add(key.clone());
    assert!(controller.process_next_work_item().await);
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1);
    assert_eq!(controller.queue().num_requeues(&key), 1);
    assert!(controller.process_next_work_item().await);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}
