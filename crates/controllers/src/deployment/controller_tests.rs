//! Unit tests of the Deployment controller: `syncDeployment`, the worker wiring and the event handlers (upstream `deployment_controller_test.go`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::controller::api_status;

use super::super::client::{DeploymentAction, Verb};
use super::super::test_support::{deployment, fixture, key, now, rs_for};
use super::super::util::accessors::name;
use super::*;

#[tokio::test]
async fn deployment_gone_from_the_cache_is_done_with() {
    let f = fixture();
    f.controller
        .sync("default/nope")
        .await
        .expect("nothing to do");
    assert!(f.client.actions().is_empty());
    let err = f.controller.sync("a/b/c").await.expect_err("bad key");
    assert!(matches!(err, Error::InvalidKey { .. }));
}

#[tokio::test]
async fn orphan_replica_set_is_adopted_after_an_uncached_check() {
    let f = fixture();
    let d = deployment("web", 2, 1, 0);
    f.add_deployment(&d);
    let mut orphan = rs_for(&d, 2, 2, "1", 0);
    orphan.metadata.owner_references = None;
    f.add_rs(&orphan);
    f.sync(&d).await.expect("sync");
    let actions = f.client.actions();
    assert!(
        matches!(&actions[0], DeploymentAction::GetDeployment { name, .. } if name == "web"),
        "{actions:?}"
    );
    assert!(
        matches!(&actions[1], DeploymentAction::PatchReplicaSet { name: n, .. } if n == name(&orphan.metadata)),
        "{actions:?}"
    );
    assert!(
        f.created().is_empty(),
        "the adopted ReplicaSet is the new one"
    );
}

#[tokio::test]
async fn replaced_deployment_adopts_nothing() {
    let f = fixture();
    let d = deployment("web", 2, 1, 0);
    f.add_deployment(&d);
    let mut namesake = d.clone();
    namesake.metadata.uid = Some("uid-other".into());
    f.client.insert_deployment(namesake);
    let mut orphan = rs_for(&d, 2, 2, "1", 0);
    orphan.metadata.owner_references = None;
    f.add_rs(&orphan);
    let err = f.sync(&d).await.expect_err("cannot adopt");
    assert!(matches!(err, Error::ClaimReplicaSets { .. }), "{err}");
    assert!(f.client.actions_of(Verb::PatchReplicaSet).is_empty());
}

#[tokio::test]
async fn replica_set_no_longer_selected_is_released() {
    let f = fixture();
    let d = deployment("web", 2, 1, 0);
    f.add_deployment(&d);
    let mut relabelled = rs_for(&d, 2, 2, "1", 0);
    relabelled.metadata.labels = Some(BTreeMap::from([("app".into(), "other".into())]));
    f.add_rs(&relabelled);
    f.sync(&d).await.expect("sync");
    assert_eq!(f.client.actions_of(Verb::PatchReplicaSet).len(), 1);
    assert_eq!(
        f.created().len(),
        1,
        "a new ReplicaSet replaces the released one"
    );
}

#[tokio::test]
async fn deployment_being_deleted_only_gets_its_status() {
    let f = fixture();
    let mut d = deployment("web", 2, 1, 0);
    d.metadata.deletion_timestamp = Some(Time(now()));
    f.add_deployment(&d);
    f.sync(&d).await.expect("sync");
    assert!(f.created().is_empty());
    assert!(f.rs_updates().is_empty());
    assert_eq!(f.status_updates().len(), 1);
}

#[tokio::test]
async fn selecting_everything_is_refused_with_a_warning() {
    let f = fixture();
    let mut d = deployment("web", 2, 1, 0);
    d.metadata.generation = Some(3);
    if let Some(s) = d.spec.as_mut() {
        s.selector = Default::default();
    }
    f.add_deployment(&d);
    f.sync(&d).await.expect("sync");
    let events = f.recorder.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].type_, EventType::Warning);
    assert_eq!(events[0].reason, "SelectingAll");
    assert!(f.created().is_empty());
    let status = f.stored(&d).status.expect("status");
    assert_eq!(status.observed_generation, Some(3));
}

#[tokio::test]
async fn unknown_strategy_fails_the_sync() {
    let f = fixture();
    let mut d = deployment("web", 2, 1, 0);
    if let Some(s) = d.spec.as_mut().and_then(|s| s.strategy.as_mut()) {
        s.type_ = Some("Blue".into());
    }
    f.add_deployment(&d);
    let err = f.sync(&d).await.expect_err("unexpected strategy");
    assert_eq!(err.to_string(), "unexpected deployment strategy type: Blue");
}

#[tokio::test(start_paused = true)]
async fn failing_key_is_retried_rate_limited_then_dropped() {
    let f = fixture();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let controller = f.controller.with_sync_handler(Arc::new(move |key: String| {
        counter.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { Err(Error::UnexpectedStrategy { strategy: key }) })
    }));
    controller.queue().add("default/web".to_owned());
    for attempt in 0..=MAX_RETRIES {
        assert!(
            controller.process_next_work_item().await,
            "attempt {attempt}"
        );
        // The next retry comes after the rate limiter's delay.
        tokio::time::advance(Duration::from_secs(120)).await;
        tokio::task::yield_now().await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), MAX_RETRIES + 1);
    assert!(
        controller.queue().is_empty(),
        "dropped after {MAX_RETRIES} retries"
    );
    assert_eq!(
        controller.queue().num_requeues(&"default/web".to_owned()),
        0
    );
}

#[tokio::test]
async fn namespace_terminating_errors_are_not_retried() {
    let f = fixture();
    let controller = f.controller.with_sync_handler(Arc::new(|key: String| {
        Box::pin(async move {
            Err(Error::Api {
                operation: Operation::CreateReplicaSet,
                object: key,
                source: kube::Error::Api(
                    api_status::namespace_terminating("replicasets", "web-1", "default").boxed(),
                ),
            })
        })
    }));
    controller.queue().add("default/web".to_owned());
    assert!(controller.process_next_work_item().await);
    assert_eq!(
        controller.queue().num_requeues(&"default/web".to_owned()),
        0
    );
    assert!(controller.queue().is_empty());
}

#[tokio::test]
async fn panicking_sync_is_caught_and_retried() {
    let f = fixture();
    let controller = f
        .controller
        .with_sync_handler(Arc::new(|_key: String| Box::pin(async { panic!("boom") })));
    controller.queue().add("default/web".to_owned());
    assert!(controller.process_next_work_item().await);
    assert_eq!(
        controller.queue().num_requeues(&"default/web".to_owned()),
        1
    );
}

#[tokio::test]
async fn run_stops_on_cancel() {
    let f = fixture();
    let controller = Arc::new(f.controller.with_caches_synced(vec![Arc::new(|| true)]));
    let cancel = CancellationToken::new();
    let task = tokio::spawn(Arc::clone(&controller).run(2, cancel.clone()));
    let d = deployment("web", 1, 1, 0);
    f.d_cache.add(Arc::new(d.clone())).expect("cache");
    f.client.insert_deployment(d.clone());
    controller.queue().add(key(&d));
    for _ in 0..100 {
        if !f.client.actions_of(Verb::CreateReplicaSet).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        f.client.actions_of(Verb::CreateReplicaSet).len(),
        1,
        "a worker synced the key"
    );
    cancel.cancel();
    task.await.expect("run returns");
    assert!(controller.queue().shutting_down());
}

/// A panic injected in the sync is recovered by the shared worker, counted in
/// `kcm_workqueue_sync_panics_total{name="deployment"}`, and the key retried, within the
/// same [`MAX_RETRIES`] budget as errors.
#[tokio::test(start_paused = true)]
async fn panicking_sync_is_recovered_counted_and_retried_then_dropped() {
    let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
    let controller = DeploymentController::with_caches(
        Indexer::new(),
        Indexer::new(),
        Indexer::new(),
        Arc::new(super::super::FakeDeploymentClient::new()),
        Arc::new(kcm_machinery::events::FakeRecorder::new()),
        DeploymentControllerOptions {
            metrics: Some(metrics.clone()),
        },
    )
    .with_sync_handler(Arc::new(|_key: String| {
        Box::pin(async { panic!("injected panic") })
    }));
    let key = "default/web".to_owned();
    controller.queue().add(key.clone());
    assert!(controller.process_next_work_item().await, "recovered");
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1, "counted");
    assert_eq!(controller.queue().num_requeues(&key), 1, "retried");
    for _ in 0..MAX_RETRIES {
        assert!(controller.process_next_work_item().await);
    }
    assert_eq!(
        metrics.sync_panics_total(QUEUE_NAME),
        1 + MAX_RETRIES as u64
    );
    assert!(
        controller.queue().is_empty(),
        "dropped after {MAX_RETRIES} retries"
    );
    assert_eq!(controller.queue().waiting_len(), 0);
    assert_eq!(controller.queue().num_requeues(&key), 0, "and forgotten");
}

/// The event handlers (upstream's `addDeployment` … `deletePod`).
mod handlers {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use kcm_machinery::informer::delta::DeletedFinalStateUnknown;

    use super::super::*;
    use crate::deployment::test_support::{
        Fixture, deployment, fixture, key, labels, old_rs_for, pod_of, recreate, rs_for,
    };

    /// Drains the queue's keys (they are all immediately available).
    async fn drain(f: &Fixture) -> Vec<String> {
        let mut keys = Vec::new();
        while !f.controller.queue().is_empty() {
            if let Some(k) = f.controller.queue().get().await {
                f.controller.queue().done(&k);
                keys.push(k);
            }
        }
        keys.sort();
        keys
    }

    fn orphan(mut rs: ReplicaSet) -> ReplicaSet {
        rs.metadata.owner_references = None;
        rs
    }

    #[tokio::test]
    async fn replica_set_events_wake_their_owner_or_matching_deployments() {
        let f = fixture();
        let web = deployment("web", 1, 1, 0);
        let api = deployment("api", 1, 1, 0);
        f.add_deployment(&web);
        f.add_deployment(&api);
        let handlers = f.controller.event_handlers();

        let owned = rs_for(&web, 1, 1, "1", 0);
        handlers.add_replica_set(&owned);
        assert_eq!(drain(&f).await, vec![key(&web)]);

        // An orphan wakes every Deployment selecting it.
        handlers.add_replica_set(&orphan(rs_for(&api, 1, 1, "1", 0)));
        assert_eq!(drain(&f).await, vec![key(&api)]);

        // An owner reference to a namesake (other UID) is not ours.
        let mut stranger = owned.clone();
        if let Some(r) = stranger.metadata.owner_references.as_mut() {
            r[0].uid = "other".into();
        }
        handlers.add_replica_set(&stranger);
        assert!(drain(&f).await.is_empty());

        // A resync (same resourceVersion) is ignored.
        handlers.update_replica_set(&owned, &owned);
        assert!(drain(&f).await.is_empty());

        // Ownership moved from web to api: both are synced.
        let mut moved = owned.clone();
        moved.metadata.resource_version = Some("2".into());
        if let Some(r) = moved.metadata.owner_references.as_mut() {
            r[0].name = "api".into();
            r[0].uid = "uid-api".into();
        }
        handlers.update_replica_set(&owned, &moved);
        assert_eq!(drain(&f).await, vec![key(&api), key(&web)]);

        // An orphan whose labels changed wakes the Deployments now selecting it.
        let before = orphan(rs_for(&web, 1, 1, "1", 0));
        let mut relabelled = before.clone();
        relabelled.metadata.resource_version = Some("2".into());
        relabelled.metadata.labels = Some(labels(&[("app", "api")]));
        handlers.update_replica_set(&before, &relabelled);
        assert_eq!(drain(&f).await, vec![key(&api)]);

        // Deletions (also as tombstones) wake the owner; an orphan's wakes nobody.
        handlers.delete_replica_set(&DeletedObject::Tombstone(DeletedFinalStateUnknown {
            key: "default/x".into(),
            obj: Arc::new(owned.clone()),
        }));
        assert_eq!(drain(&f).await, vec![key(&web)]);
        handlers.delete_replica_set(&DeletedObject::Object(Arc::new(before)));
        assert!(drain(&f).await.is_empty());

        // A ReplicaSet seen for the first time while being deleted counts as deleted.
        let mut deleting = owned;
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                crate::deployment::test_support::now(),
            ));
        handlers.add_replica_set(&deleting);
        assert_eq!(drain(&f).await, vec![key(&web)]);
    }

    #[tokio::test]
    async fn deployment_events_enqueue_their_key() {
        let f = fixture();
        let web = deployment("web", 1, 1, 0);
        let handlers = f.controller.event_handlers();
        handlers.add_deployment(&web);
        handlers.update_deployment(&web, &web);
        assert_eq!(
            drain(&f).await,
            vec![key(&web)],
            "deduplicated by the queue"
        );
        handlers.delete_deployment(&DeletedObject::Tombstone(DeletedFinalStateUnknown {
            key: "default/gone".into(),
            obj: Arc::new(web),
        }));
        assert_eq!(drain(&f).await, vec!["default/gone".to_owned()]);
    }

    #[tokio::test]
    async fn pod_deletion_wakes_a_recreate_deployment_once_its_pods_are_gone() {
        let f = fixture();
        let d = recreate(deployment("web", 2, 0, 0));
        f.add_deployment(&d);
        let old = old_rs_for(&d, "image:v1", 0, 2, "1", 0);
        f.rs_cache.add(Arc::new(old.clone())).expect("cache rs");
        let a = pod_of(&old, "a", "Running");
        let b = pod_of(&old, "b", "Running");
        f.add_pod(&a);
        f.add_pod(&b);
        let handlers = f.controller.event_handlers();

        f.pod_cache.delete(&a).expect("gone from cache");
        handlers.delete_pod(&DeletedObject::Object(Arc::new(a)));
        assert!(drain(&f).await.is_empty(), "one pod left");

        f.pod_cache.delete(&b).expect("gone from cache");
        handlers.delete_pod(&DeletedObject::Object(Arc::new(b.clone())));
        assert_eq!(drain(&f).await, vec![key(&d)]);

        // A rolling Deployment does not care.
        let rolling = deployment("api", 2, 1, 0);
        f.add_deployment(&rolling);
        let rs = rs_for(&rolling, 1, 1, "1", 0);
        f.rs_cache.add(Arc::new(rs.clone())).expect("cache rs");
        handlers.delete_pod(&DeletedObject::Object(Arc::new(pod_of(
            &rs, "c", "Running",
        ))));
        assert!(drain(&f).await.is_empty());
    }
}
