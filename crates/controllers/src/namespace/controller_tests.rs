//! Unit tests of the namespace controller's handlers, queue and worker (upstream `namespace_controller_test.go`).

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResource, APIResourceList};
use kcm_machinery::controller::api_status;
use kcm_machinery::workqueue::RateLimiter;
use kcm_testing::{MetaBuilder, PodSpecBuilder, pod};

use super::*;
use crate::namespace::FakeNamespaceClient;
use crate::namespace::deleter::FINALIZER_KUBERNETES;

fn namespace(name: &str, deleting: bool) -> Namespace {
    let ns = kcm_testing::namespace(name)
        .uid(format!("uid-{name}"))
        .resource_version("1")
        .spec_finalizers(&[FINALIZER_KUBERNETES]);
    if deleting {
        ns.deleted_at(Timestamp::UNIX_EPOCH)
            .phase("Terminating")
            .build()
    } else {
        ns.phase("Active").build()
    }
}

struct Fixture {
    fake: Arc<FakeNamespaceClient>,
    cache: Indexer<Namespace>,
    controller: NamespaceController,
}

/// A controller over a bare cache; the fake serves pods only. The clock reads `now_seconds`.
fn fixture(now_seconds: i64) -> Fixture {
    let fake = Arc::new(FakeNamespaceClient::new());
    fake.add_resource_list(APIResourceList {
        group_version: "v1".into(),
        resources: vec![APIResource {
            name: "pods".into(),
            kind: "Pod".into(),
            namespaced: true,
            verbs: ["delete", "deletecollection", "list"]
                .iter()
                .map(|v| v.to_string())
                .collect(),
            singular_name: String::new(),
            ..APIResource::default()
        }],
    });
    let deleter = NamespacedResourcesDeleter::new(fake.clone(), FINALIZER_KUBERNETES).with_clock(
        Arc::new(move || Timestamp::from_second(now_seconds).expect("valid")),
    );
    let cache = Indexer::new();
    let controller = NamespaceController::with_cache(
        cache.clone(),
        deleter,
        NamespaceControllerOptions::default(),
    );
    Fixture {
        fake,
        cache,
        controller,
    }
}

impl Fixture {
    fn store(&self, ns: Namespace) {
        self.cache.add(Arc::new(ns.clone())).expect("cache");
        self.fake.insert_namespace(ns);
    }
}

#[tokio::test(start_paused = true)]
async fn only_namespaces_being_deleted_are_queued_after_the_grace_period() {
    let fx = fixture(0);
    let handlers = fx.controller.event_handlers();
    handlers.on_add(Arc::new(namespace("live", false)), true);
    handlers.on_update(
        Arc::new(namespace("live", false)),
        Arc::new(namespace("live", false)),
    );
    assert_eq!(fx.controller.queue().waiting_len(), 0);

    handlers.on_update(
        Arc::new(namespace("going", false)),
        Arc::new(namespace("going", true)),
    );
    assert_eq!(fx.controller.queue().len(), 0);
    tokio::time::advance(NAMESPACE_DELETION_GRACE_PERIOD - Duration::from_millis(10)).await;
    assert_eq!(fx.controller.queue().len(), 0);
    tokio::time::advance(Duration::from_millis(20)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 1);
    assert_eq!(fx.controller.queue().get().await.as_deref(), Some("going"));
}

#[tokio::test(start_paused = true)]
async fn a_finished_pass_forgets_the_namespace_and_the_server_removes_it() {
    let fx = fixture(0);
    fx.store(namespace("team", true));
    fx.controller.queue().add("team".into());
    assert!(fx.controller.process_next_work_item().await);
    assert_eq!(fx.controller.queue().num_requeues(&"team".to_owned()), 0);
    assert_eq!(fx.controller.queue().len(), 0);
    assert_eq!(fx.controller.queue().waiting_len(), 0);
    assert!(fx.fake.namespace("team").is_none());
}

#[tokio::test(start_paused = true)]
async fn remaining_content_requeues_after_half_the_estimate_plus_one_second() {
    // Deleted at t=0, now t=10: a pod with a 60 s grace period, which the fake keeps.
    let fx = fixture(10);
    fx.store(namespace("team", true));
    fx.fake
        .set_sticky(&kcm_machinery::discovery::GroupVersionResource::new(
            "", "v1", "pods",
        ));
    fx.fake.insert_pod(
        pod("web")
            .namespace("team")
            .termination_grace_period(60)
            .build(),
    );
    fx.controller.queue().add("team".into());
    assert!(fx.controller.process_next_work_item().await);
    // Not rate limited: waiting 60/2 + 1 = 31 s.
    assert_eq!(fx.controller.queue().num_requeues(&"team".to_owned()), 0);
    assert_eq!(fx.controller.queue().waiting_len(), 1);
    tokio::time::advance(Duration::from_secs(30)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 0);
    tokio::time::advance(Duration::from_millis(1001)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn other_failures_requeue_rate_limited() {
    let fx = fixture(0);
    fx.store(namespace("team", true));
    fx.fake
        .set_discovery_error(Some(api_status::internal_error("down")));
    fx.controller.queue().add("team".into());
    assert!(fx.controller.process_next_work_item().await);
    assert_eq!(fx.controller.queue().num_requeues(&"team".to_owned()), 1);
    assert!(fx.fake.namespace("team").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_namespace_gone_from_the_cache_needs_nothing() {
    let fx = fixture(0);
    fx.controller.sync("gone").await.expect("nothing to do");
    assert!(fx.fake.actions().is_empty());
}

#[test]
fn requeue_waits_half_the_estimate_plus_one_second() {
    assert_eq!(requeue_after_remaining(0), Duration::from_secs(1));
    assert_eq!(requeue_after_remaining(15), Duration::from_secs(8));
    assert_eq!(requeue_after_remaining(30), Duration::from_secs(16));
}

#[tokio::test(start_paused = true)]
async fn the_rate_limiter_backs_off_exponentially_up_to_a_minute() {
    let limiter = ns_controller_rate_limiter();
    let key = "team".to_owned();
    assert_eq!(limiter.when(&key), Duration::from_millis(5));
    assert_eq!(limiter.when(&key), Duration::from_millis(10));
    for _ in 0..20 {
        limiter.when(&key);
    }
    assert_eq!(limiter.when(&key), Duration::from_secs(60));
    limiter.forget(&key);
    assert_eq!(limiter.when(&key), Duration::from_millis(5));
}

/// A panic injected in the sync (the fake client panics once) is recovered by the shared
/// worker, counted in `kcm_workqueue_sync_panics_total{name="namespace"}`, and the namespace
/// retried.
#[tokio::test(start_paused = true)]
async fn panicking_sync_is_recovered_counted_and_retried() {
    let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
    let fake = Arc::new(FakeNamespaceClient::new());
    let cache = Indexer::new();
    let controller = NamespaceController::with_cache(
        cache.clone(),
        NamespacedResourcesDeleter::new(fake.clone(), FINALIZER_KUBERNETES),
        NamespaceControllerOptions {
            metrics: Some(metrics.clone()),
            ..NamespaceControllerOptions::default()
        },
    );
    let team = namespace("team", true);
    cache.add(Arc::new(team.clone())).expect("cache");
    fake.insert_namespace(team);
    fake.panic_on_next_call();
    let key = "team".to_owned();
    controller.queue().add(key.clone());
    assert!(controller.process_next_work_item().await, "recovered");
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1, "counted");
    assert_eq!(controller.queue().num_requeues(&key), 1, "retried");
    assert!(fake.namespace("team").is_some());
    assert!(controller.process_next_work_item().await);
    assert_eq!(
        controller.queue().num_requeues(&key),
        0,
        "the retry succeeded"
    );
    assert!(fake.namespace("team").is_none(), "finalized on the retry");
}
