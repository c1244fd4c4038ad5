//! Unit tests of the service account controller's handlers, worker and sync (upstream `serviceaccounts_controller_test.go`).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kcm_machinery::controller::api_status;
use kcm_machinery::informer::DeletedObject;
use kcm_testing::MetaBuilder;

use super::*;
use crate::serviceaccount::FakeServiceAccountClient;

fn namespace(name: &str, phase: Option<&str>) -> Namespace {
    let ns = kcm_testing::namespace(name).default_status();
    match phase {
        Some("Terminating") => ns.deleted_at(Timestamp::UNIX_EPOCH).phase("Terminating"),
        Some(phase) => ns.phase(phase),
        None => ns,
    }
    .build()
}

fn account(namespace: &str, name: &str) -> ServiceAccount {
    ServiceAccount {
        metadata: kcm_testing::meta(name).namespace(namespace).build(),
        ..Default::default()
    }
}

struct Fixture {
    fake: Arc<FakeServiceAccountClient>,
    accounts: Indexer<ServiceAccount>,
    namespaces: Indexer<Namespace>,
    controller: ServiceAccountsController,
}

fn fixture_with(options: ServiceAccountsControllerOptions) -> Fixture {
    let fake = Arc::new(FakeServiceAccountClient::new());
    let accounts = Indexer::new();
    let namespaces = Indexer::new();
    let controller = ServiceAccountsController::with_caches(
        accounts.clone(),
        namespaces.clone(),
        fake.clone(),
        options,
    );
    Fixture {
        fake,
        accounts,
        namespaces,
        controller,
    }
}

fn fixture() -> Fixture {
    fixture_with(ServiceAccountsControllerOptions::default())
}

/// Upstream's table: which namespaces get a `default` account created.
#[tokio::test]
async fn sync_creates_missing_accounts_only_in_active_namespaces() {
    struct Case {
        name: &'static str,
        namespace: Option<Namespace>,
        existing: Vec<ServiceAccount>,
        want_creates: Vec<&'static str>,
    }
    let cases = [
        Case {
            name: "new active namespace",
            namespace: Some(namespace("ns", Some("Active"))),
            existing: vec![],
            want_creates: vec!["ns/default"],
        },
        Case {
            name: "active namespace missing default, holding others",
            namespace: Some(namespace("ns", Some("Active"))),
            existing: vec![account("ns", "builder"), account("other", "default")],
            want_creates: vec!["ns/default"],
        },
        Case {
            name: "active namespace already holding default",
            namespace: Some(namespace("ns", Some("Active"))),
            existing: vec![account("ns", "default")],
            want_creates: vec![],
        },
        Case {
            name: "terminating namespace",
            namespace: Some(namespace("ns", Some("Terminating"))),
            existing: vec![],
            want_creates: vec![],
        },
        Case {
            name: "namespace without a phase",
            namespace: Some(namespace("ns", None)),
            existing: vec![],
            want_creates: vec![],
        },
        Case {
            name: "namespace gone from the cache",
            namespace: None,
            existing: vec![],
            want_creates: vec![],
        },
    ];
    for case in cases {
        let fx = fixture();
        if let Some(ns) = case.namespace {
            fx.namespaces.add(Arc::new(ns)).expect("cache");
        }
        for sa in case.existing {
            fx.accounts.add(Arc::new(sa)).expect("cache");
        }
        fx.controller.sync("ns").await.expect(case.name);
        assert_eq!(fx.fake.creates(), case.want_creates, "{}", case.name);
    }
}

#[tokio::test]
async fn every_wanted_account_is_created() {
    let fx = fixture_with(ServiceAccountsControllerOptions {
        service_accounts: vec![account("", "default"), account("", "builder")],
        ..Default::default()
    });
    fx.namespaces
        .add(Arc::new(namespace("ns", Some("Active"))))
        .expect("cache");
    fx.accounts
        .add(Arc::new(account("ns", "builder")))
        .expect("cache");
    fx.controller.sync("ns").await.expect("sync");
    assert_eq!(fx.fake.creates(), ["ns/default"]);
}

#[tokio::test(start_paused = true)]
async fn already_exists_is_not_a_failure() {
    let fx = fixture();
    fx.namespaces
        .add(Arc::new(namespace("ns", Some("Active"))))
        .expect("cache");
    // The server holds it, the cache has not seen it yet.
    fx.fake.insert("ns", "default");
    fx.controller.queue().add("ns".into());
    assert!(fx.controller.process_next_work_item().await);
    assert_eq!(fx.fake.creates(), ["ns/default"]);
    assert_eq!(fx.controller.queue().num_requeues(&"ns".to_owned()), 0);
    assert_eq!(fx.controller.queue().len(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_namespace_terminating_on_the_server_is_not_a_failure() {
    let fx = fixture();
    // The cache still says Active; the server already refuses new content.
    fx.namespaces
        .add(Arc::new(namespace("ns", Some("Active"))))
        .expect("cache");
    fx.fake.set_error(Some(api_status::namespace_terminating(
        "serviceaccounts",
        "default",
        "ns",
    )));
    fx.controller.queue().add("ns".into());
    assert!(fx.controller.process_next_work_item().await);
    assert_eq!(fx.controller.queue().num_requeues(&"ns".to_owned()), 0);
}

#[tokio::test(start_paused = true)]
async fn other_failures_requeue_rate_limited_until_the_create_succeeds() {
    let fx = fixture();
    fx.namespaces
        .add(Arc::new(namespace("ns", Some("Active"))))
        .expect("cache");
    fx.fake
        .set_error(Some(api_status::internal_error("etcd down")));
    fx.controller.queue().add("ns".into());
    assert!(fx.controller.process_next_work_item().await);
    assert_eq!(fx.controller.queue().num_requeues(&"ns".to_owned()), 1);
    assert!(!fx.fake.contains("ns", "default"));
    let err = fx.controller.sync("ns").await.expect_err("still failing");
    assert_eq!(
        err.to_string(),
        "create serviceaccount ns/default: Internal error occurred: etcd down"
    );

    fx.fake.set_error(None);
    // The retry comes back after the back-off.
    tokio::time::advance(std::time::Duration::from_millis(10)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 1);
    assert!(fx.controller.process_next_work_item().await);
    assert!(fx.fake.contains("ns", "default"));
    assert_eq!(fx.controller.queue().num_requeues(&"ns".to_owned()), 0);
}

#[tokio::test(start_paused = true)]
async fn handlers_queue_namespaces_added_updated_and_those_losing_an_account() {
    let fx = fixture();
    let handlers = fx.controller.event_handlers();
    let ns = Arc::new(namespace("a", Some("Active")));
    ResourceEventHandler::<Namespace>::on_add(handlers, ns.clone(), true);
    ResourceEventHandler::<Namespace>::on_update(
        handlers,
        ns.clone(),
        Arc::new(namespace("b", Some("Active"))),
    );
    // Adds and updates of accounts are not watched.
    let sa = Arc::new(account("c", "default"));
    ResourceEventHandler::<ServiceAccount>::on_add(handlers, sa.clone(), true);
    ResourceEventHandler::<ServiceAccount>::on_update(handlers, sa.clone(), sa.clone());
    assert_eq!(fx.controller.queue().len(), 2);
    ResourceEventHandler::<ServiceAccount>::on_delete(handlers, DeletedObject::Object(sa));
    assert_eq!(fx.controller.queue().len(), 3);
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(fx.controller.queue().get().await.expect("queued"));
    }
    assert_eq!(got, ["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn a_deleted_default_account_is_recreated() {
    let fx = fixture();
    fx.namespaces
        .add(Arc::new(namespace("ns", Some("Active"))))
        .expect("cache");
    let sa = Arc::new(account("ns", "default"));
    fx.accounts.add(sa.clone()).expect("cache");
    fx.fake.insert("ns", "default");
    fx.controller.sync("ns").await.expect("sync");
    assert!(fx.fake.creates().is_empty());

    // Deleted on the server; the informer drops it from its cache and tells the handler.
    fx.fake.remove("ns", "default");
    fx.accounts.delete(&sa).expect("cache");
    ResourceEventHandler::<ServiceAccount>::on_delete(
        fx.controller.event_handlers(),
        DeletedObject::Object(sa),
    );
    assert!(fx.controller.process_next_work_item().await);
    assert_eq!(fx.fake.creates(), ["ns/default"]);
    assert!(fx.fake.contains("ns", "default"));
}

/// A panic injected in the sync (the fake client panics once) is recovered by the shared
/// worker, counted in `kcm_workqueue_sync_panics_total{name="serviceaccount"}`, and the
/// namespace retried.
#[tokio::test(start_paused = true)]
async fn panicking_sync_is_recovered_counted_and_retried() {
    let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
    let fx = fixture_with(ServiceAccountsControllerOptions {
        metrics: Some(metrics.clone()),
        ..ServiceAccountsControllerOptions::default()
    });
    fx.namespaces
        .add(Arc::new(namespace("ns", Some("Active"))))
        .expect("cache");
    fx.fake.panic_on_next_call();
    let key = "ns".to_owned();
    fx.controller.queue().add(key.clone());
    assert!(fx.controller.process_next_work_item().await, "recovered");
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1, "counted");
    assert_eq!(fx.controller.queue().num_requeues(&key), 1, "retried");
    assert!(fx.controller.process_next_work_item().await);
    assert_eq!(
        fx.controller.queue().num_requeues(&key),
        0,
        "the retry succeeded"
    );
    assert!(fx.fake.contains("ns", "default"));
}
