//! Unit tests of the EndpointSlice controller's handlers, worker and sync (upstream `endpointslice_controller_test.go`).

use std::sync::Arc;
use std::time::Duration;

use kcm_machinery::controller::api_status;
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::DeletedObject;
use kcm_testing::prelude::*;

use super::*;
use crate::endpointsliceutil::{
    FakeEndpointSliceClient, LABEL_MANAGED_BY, LABEL_SERVICE_NAME, SliceAction,
};

const NS: &str = "ns";

struct Fixture {
    client: Arc<FakeEndpointSliceClient>,
    recorder: FakeRecorder,
    pods: Indexer<Pod>,
    services: Indexer<Service>,
    slices: Indexer<EndpointSlice>,
    controller: EndpointSliceController,
}

fn fixture_with(options: EndpointSliceControllerOptions) -> Fixture {
    let client = Arc::new(FakeEndpointSliceClient::new());
    let recorder = FakeRecorder::new();
    let (pods, services, nodes, slices) = (
        Indexer::new(),
        Indexer::new(),
        Indexer::new(),
        Indexer::new(),
    );
    nodes.add(node("node-1").arc()).expect("cache");
    let controller = EndpointSliceController::with_caches(
        pods.clone(),
        services.clone(),
        nodes,
        slices.clone(),
        client.clone(),
        Arc::new(recorder.clone()),
        options,
    );
    Fixture {
        client,
        recorder,
        pods,
        services,
        slices,
        controller,
    }
}

fn fixture() -> Fixture {
    fixture_with(EndpointSliceControllerOptions::default())
}

impl Fixture {
    /// Delivers the fake server's slices to the cache, as the informer would.
    fn observe_writes(&self) {
        let stored: Vec<Arc<EndpointSlice>> =
            self.client.slices().into_iter().map(Arc::new).collect();
        self.slices.replace(stored).expect("cache");
    }

    fn add_pods(&self, n: usize) {
        for i in 0..n {
            self.pods
                .add(
                    pod(&format!("pod{i}"))
                        .namespace(NS)
                        .uid(format!("uid{i}"))
                        .labels(&[("foo", "bar")])
                        .node("node-1")
                        .ready()
                        .pod_ips(&[&format!("10.0.0.{}", i + 1)])
                        .arc(),
                )
                .expect("cache");
        }
    }
}

fn svc(name: &str) -> ServiceBuilder {
    service(name)
        .namespace(NS)
        .uid(format!("{name}-uid"))
        .selector(&[("foo", "bar")])
        .cluster_ip("10.96.0.10")
        .ip_families(&["IPv4"])
        .port(80, 8080)
}

/// A Service with pods gets its slice; synced again once its write is observed, nothing
/// more happens (upstream's `TestSyncServiceWithSelector` and steady state).
#[tokio::test]
async fn sync_creates_then_is_quiet() {
    let fx = fixture();
    fx.services.add(svc("foo").arc()).expect("cache");
    fx.add_pods(3);
    let key = format!("{NS}/foo");
    fx.controller.sync(&key).await.expect("sync");
    assert_eq!(fx.client.actions().len(), 1);
    let slice = &fx.client.slices()[0];
    assert_eq!(slice.endpoints.as_ref().map_or(0, Vec::len), 3);
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(LABEL_SERVICE_NAME).map(String::as_str),
        Some("foo")
    );
    assert_eq!(
        labels.get(LABEL_MANAGED_BY).map(String::as_str),
        Some(MANAGED_BY)
    );

    fx.observe_writes();
    fx.controller.sync(&key).await.expect("sync");
    assert_eq!(fx.client.actions().len(), 1, "nothing to write");
}

/// A deleted Service leaves nothing in the controller's per-Service state: the slice tracker,
/// the trigger times (upstream's `syncService` deletes it from both and from the metrics).
#[tokio::test]
async fn deleted_service_is_forgotten_by_the_trackers() {
    let fx = fixture();
    let service = svc("foo").arc();
    fx.services.add(Arc::clone(&service)).expect("cache");
    fx.add_pods(3);
    let key = format!("{NS}/foo");
    fx.controller.sync(&key).await.expect("sync");
    assert_eq!(fx.controller.tracker.tracked_services(), 1);
    assert_eq!(fx.controller.trigger_times.tracked_services(), 1);

    fx.services.delete(&service).expect("cache");
    fx.controller.sync(&key).await.expect("sync");
    assert_eq!(fx.controller.tracker.tracked_services(), 0);
    assert_eq!(fx.controller.trigger_times.tracked_services(), 0);
}

/// A sync before the cache has seen the controller's own creation is refused (stale), and
/// counted as such (upstream's `TestSyncServiceStaleInformer`).
#[tokio::test]
async fn stale_slice_cache_is_refused() {
    let fx = fixture();
    fx.services.add(svc("foo").arc()).expect("cache");
    fx.add_pods(1);
    let key = format!("{NS}/foo");
    fx.controller.sync(&key).await.expect("sync");
    let err = fx.controller.sync(&key).await.expect_err("stale");
    assert!(err.is_stale_cache(), "{err}");
    assert_eq!(fx.client.actions().len(), 1);
    fx.observe_writes();
    fx.controller.sync(&key).await.expect("fresh again");
}

/// Services without a selector or of type ExternalName get nothing; a deleted Service's
/// trackers are forgotten (upstream's `TestSyncServiceNoSelector`, `...ExternalNameType`,
/// `TestSyncServiceMissing`).
#[tokio::test]
async fn services_the_controller_leaves_alone() {
    let fx = fixture();
    fx.services
        .add(service("nosel").namespace(NS).port(80, 80).arc())
        .expect("cache");
    fx.services
        .add(svc("ext").type_("ExternalName").arc())
        .expect("cache");
    fx.add_pods(2);
    for name in ["nosel", "ext", "missing"] {
        fx.controller
            .sync(&format!("{NS}/{name}"))
            .await
            .expect("sync");
    }
    assert!(fx.client.actions().is_empty());
}

/// A failed write is an error and a `FailedToUpdateEndpointSlices` warning on the Service.
#[tokio::test]
async fn failures_are_events_on_the_service() {
    let fx = fixture();
    fx.services.add(svc("foo").arc()).expect("cache");
    fx.add_pods(1);
    fx.client
        .set_error(Some(api_status::internal_error("boom")));
    let err = fx
        .controller
        .sync(&format!("{NS}/foo"))
        .await
        .expect_err("fails");
    assert!(
        err.to_string()
            .starts_with("failed to create EndpointSlice for Service ns/foo"),
        "{err}"
    );
    let events = fx.recorder.events();
    assert_eq!(fx.recorder.reasons(), ["FailedToUpdateEndpointSlices"]);
    assert_eq!(events[0].regarding.kind.as_deref(), Some("Service"));
    assert!(
        events[0]
            .message
            .starts_with("Error updating Endpoint Slices for Service ns/foo: "),
        "{}",
        events[0].message
    );
}

/// The controller's own slice writes, observed, queue nothing; someone else's change to a
/// managed slice queues the Service after the minimum delay; a slice the controller did not
/// manage is ignored (upstream's `TestOnEndpointSliceUpdate` and friends).
#[tokio::test(start_paused = true)]
async fn slice_events_queue_only_foreign_changes() {
    let fx = fixture();
    fx.services.add(svc("foo").arc()).expect("cache");
    fx.add_pods(1);
    let key = format!("{NS}/foo");
    fx.controller.sync(&key).await.expect("sync");
    let handlers = fx.controller.event_handlers();
    let own = Arc::new(fx.client.slices()[0].clone());
    ResourceEventHandler::<EndpointSlice>::on_add(handlers, Arc::clone(&own), false);
    tokio::time::advance(Duration::from_secs(2)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 0, "own write");

    let mut edited = (*own).clone();
    edited.metadata.generation = Some(2);
    ResourceEventHandler::<EndpointSlice>::on_update(handlers, Arc::clone(&own), Arc::new(edited));
    tokio::time::advance(Duration::from_millis(500)).await;
    tokio::task::yield_now().await;
    assert_eq!(
        fx.controller.queue().len(),
        0,
        "not before the minimum delay"
    );
    tokio::time::advance(Duration::from_millis(600)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 1);
    let got = fx.controller.queue().get().await.expect("key");
    assert_eq!(got, key);
    fx.controller.queue().done(&got);

    let unmanaged = endpoint_slice("other")
        .namespace(NS)
        .labels(&[(LABEL_SERVICE_NAME, "foo"), (LABEL_MANAGED_BY, "someone")])
        .arc();
    ResourceEventHandler::<EndpointSlice>::on_add(handlers, unmanaged, false);
    tokio::time::advance(Duration::from_secs(2)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 0, "not ours");
}

/// A managed slice deleted by someone else queues its Service (to recreate it); the
/// controller's own deletions do not.
#[tokio::test(start_paused = true)]
async fn foreign_deletions_queue_the_service() {
    let fx = fixture();
    fx.services.add(svc("foo").arc()).expect("cache");
    fx.add_pods(1);
    fx.controller
        .sync(&format!("{NS}/foo"))
        .await
        .expect("sync");
    let handlers = fx.controller.event_handlers();
    let own = Arc::new(fx.client.slices()[0].clone());
    fx.controller.tracker().expect_deletion(&own);
    ResourceEventHandler::<EndpointSlice>::on_delete(
        handlers,
        DeletedObject::Object(Arc::clone(&own)),
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 0, "expected deletion");

    fx.controller.tracker().update(&own);
    ResourceEventHandler::<EndpointSlice>::on_delete(handlers, DeletedObject::Object(own));
    tokio::time::advance(Duration::from_secs(2)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 1, "deleted behind our back");
}

/// A changed Service-name label queues both Services.
#[tokio::test(start_paused = true)]
async fn service_name_label_changes_queue_both() {
    let fx = fixture();
    let handlers = fx.controller.event_handlers();
    let old = endpoint_slice("s")
        .namespace(NS)
        .labels(&[(LABEL_SERVICE_NAME, "a"), (LABEL_MANAGED_BY, MANAGED_BY)])
        .arc();
    let new = endpoint_slice("s")
        .namespace(NS)
        .labels(&[(LABEL_SERVICE_NAME, "b"), (LABEL_MANAGED_BY, MANAGED_BY)])
        .arc();
    ResourceEventHandler::<EndpointSlice>::on_update(handlers, old, new);
    tokio::time::advance(Duration::from_secs(2)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 2);
}

/// Pod events queue the selecting Services after the batch period; Service events at once.
#[tokio::test(start_paused = true)]
async fn pod_and_service_events() {
    let fx = fixture_with(EndpointSliceControllerOptions {
        endpoint_updates_batch_period: Duration::from_secs(3),
        ..EndpointSliceControllerOptions::default()
    });
    fx.services.add(svc("foo").arc()).expect("cache");
    let handlers = fx.controller.event_handlers();
    ResourceEventHandler::<Service>::on_add(handlers, svc("bar").arc(), false);
    assert_eq!(fx.controller.queue().len(), 1);
    let p = pod("p").namespace(NS).labels(&[("foo", "bar")]).arc();
    ResourceEventHandler::<Pod>::on_add(handlers, p, false);
    tokio::time::advance(Duration::from_secs(2)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 1, "pod event still batched");
    tokio::time::advance(Duration::from_secs(2)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 2);
}

/// A panic in the sync is recovered, counted and retried by the shared worker; results are
/// counted in `endpoint_slice_controller_syncs`.
#[tokio::test(start_paused = true)]
async fn panicking_sync_is_recovered_counted_and_retried() {
    let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
    let fx = fixture_with(EndpointSliceControllerOptions {
        metrics: Some(metrics.clone()),
        ..EndpointSliceControllerOptions::default()
    });
    fx.services.add(svc("foo").arc()).expect("cache");
    fx.client.panic_on_next_call();
    let key = format!("{NS}/foo");
    fx.controller.queue().add(key.clone());
    assert!(fx.controller.process_next_work_item().await, "recovered");
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1);
    assert_eq!(fx.controller.queue().num_requeues(&key), 1);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(fx.controller.process_next_work_item().await);
    assert_eq!(
        fx.client.actions(),
        [SliceAction::Create("foo-00001".into())],
        "placeholder created on retry"
    );
}
