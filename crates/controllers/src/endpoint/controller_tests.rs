//! Unit tests of the endpoints controller's handlers, worker and sync (upstream `endpoints_controller_test.go`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset, ObjectReference};
use kcm_machinery::controller::api_status;
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::workqueue::WorkqueueMetrics;
use kcm_testing::prelude::*;

use super::*;
use crate::endpoint::subsets::{self, MAX_CAPACITY, TRUNCATED};
use crate::endpoint::{EndpointsAction, FakeEndpointsClient};
use crate::endpointsliceutil::{
    ENDPOINTS_LAST_CHANGE_TRIGGER_TIME, ENDPOINTS_OVER_CAPACITY, IS_HEADLESS_SERVICE,
    LEADER_ELECTION_RECORD_ANNOTATION,
};

const NS: &str = "other";

struct Fixture {
    client: Arc<FakeEndpointsClient>,
    recorder: FakeRecorder,
    pods: Indexer<Pod>,
    services: Indexer<Service>,
    endpoints: Indexer<Endpoints>,
    controller: EndpointController,
}

fn fixture_with(options: EndpointControllerOptions) -> Fixture {
    let client = Arc::new(FakeEndpointsClient::new());
    let recorder = FakeRecorder::new();
    let (pods, services, endpoints) = (Indexer::new(), Indexer::new(), Indexer::new());
    let controller = EndpointController::with_caches(
        pods.clone(),
        services.clone(),
        endpoints.clone(),
        client.clone(),
        Arc::new(recorder.clone()),
        options,
    );
    Fixture {
        client,
        recorder,
        pods,
        services,
        endpoints,
        controller,
    }
}

fn fixture() -> Fixture {
    fixture_with(EndpointControllerOptions::default())
}

impl Fixture {
    fn add_service(&self, svc: Service) {
        self.services.add(Arc::new(svc)).expect("cache");
    }

    fn add_pod(&self, pod: Pod) {
        self.pods.add(Arc::new(pod)).expect("cache");
    }

    /// Stores `endpoints` in the cache and on the fake server.
    fn add_endpoints(&self, endpoints: Endpoints) {
        self.client.insert(endpoints.clone());
        self.endpoints.add(Arc::new(endpoints)).expect("cache");
    }

    /// `n` ready pods `pod0..` labelled `foo=bar`, IPs `1.2.3.<4+i>`, port 8080 named `http`.
    fn add_pods(&self, n: usize, not_ready: usize) {
        for i in 0..n + not_ready {
            let mut p = pod(&format!("pod{i}"))
                .namespace(NS)
                .uid(format!("uid{i}"))
                .labels(&[("foo", "bar")])
                .node("node-1")
                .container(container("c").named_port("http", 8080, "TCP"))
                .phase("Running")
                .pod_ips(&[&format!("1.2.3.{}", 4 + i)]);
            if i < n {
                p = p.ready();
            }
            self.add_pod(p.build());
        }
    }

    fn stored(&self, name: &str) -> Endpoints {
        self.client.get(NS, name).expect("stored endpoints")
    }
}

fn svc(name: &str) -> ServiceBuilder {
    service(name)
        .namespace(NS)
        .selector(&[("foo", "bar")])
        .cluster_ip("10.96.0.10")
        .ip_families(&["IPv4"])
}

fn address(ip: &str, pod: &str, uid: &str) -> EndpointAddress {
    EndpointAddress {
        ip: ip.to_owned(),
        node_name: Some("node-1".to_owned()),
        hostname: None,
        target_ref: Some(ObjectReference {
            kind: Some("Pod".to_owned()),
            namespace: Some(NS.to_owned()),
            name: Some(pod.to_owned()),
            uid: Some(uid.to_owned()),
            ..ObjectReference::default()
        }),
    }
}

fn tcp(name: Option<&str>, port: i32) -> EndpointPort {
    EndpointPort {
        name: name.map(str::to_owned),
        port,
        protocol: Some("TCP".to_owned()),
        app_protocol: None,
    }
}

/// A Service without a selector keeps whatever Endpoints its owner wrote (upstream's
/// `TestSyncEndpointsItemsPreserveNoSelector`).
#[tokio::test]
async fn selectorless_service_endpoints_are_left_to_their_owner() {
    let fx = fixture();
    fx.add_service(service("foo").namespace(NS).port(80, 8080).build());
    fx.add_endpoints(
        endpoints("foo")
            .namespace(NS)
            .resource_version("1")
            .subset(&["6.7.8.9"], &[], &[("", 1000)])
            .build(),
    );
    fx.controller
        .sync(&format!("{NS}/foo"))
        .await
        .expect("sync");
    assert!(fx.client.actions().is_empty());
}

/// ExternalName Services get no Endpoints.
#[tokio::test]
async fn external_name_services_are_skipped() {
    let fx = fixture();
    fx.add_service(svc("foo").type_("ExternalName").build());
    fx.add_pods(1, 0);
    fx.controller
        .sync(&format!("{NS}/foo"))
        .await
        .expect("sync");
    assert!(fx.client.actions().is_empty());
}

/// A new Service gets its Endpoints created, with the pods' addresses, the target port
/// resolved per pod, the trigger time and no headless label.
#[tokio::test]
async fn new_service_gets_endpoints_with_its_pods() {
    let fx = fixture();
    let created = Timestamp::from_second(1_700_000_000).expect("ts");
    fx.add_service(
        svc("foo")
            .labels(&[("app", "web")])
            .created_at(created)
            .named_port("http", 80, "http")
            .build(),
    );
    fx.add_pods(2, 1);
    fx.controller
        .sync(&format!("{NS}/foo"))
        .await
        .expect("sync");
    assert_eq!(
        fx.client.actions(),
        [EndpointsAction::Create(format!("{NS}/foo"))]
    );
    let got = fx.stored("foo");
    assert_eq!(
        got.subsets,
        Some(vec![EndpointSubset {
            addresses: Some(vec![
                address("1.2.3.4", "pod0", "uid0"),
                address("1.2.3.5", "pod1", "uid1")
            ]),
            not_ready_addresses: Some(vec![address("1.2.3.6", "pod2", "uid2")]),
            ports: Some(vec![tcp(Some("http"), 8080)]),
        }])
    );
    let annotations = got.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations
            .get(ENDPOINTS_LAST_CHANGE_TRIGGER_TIME)
            .map(String::as_str),
        Some("2023-11-14T22:13:20Z"),
        "the Service's creation, on its first sync"
    );
    let labels = got.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("app").map(String::as_str), Some("web"));
    assert!(!labels.contains_key(IS_HEADLESS_SERVICE));
}

/// A Service without labels gets Endpoints without labels or annotations (omitted, as Go's
/// `omitempty` drops empty maps, not `labels: {}`).
#[tokio::test]
async fn empty_label_and_annotation_maps_are_omitted() {
    let fx = fixture();
    fx.add_service(svc("foo").named_port("http", 80, "http").build());
    fx.controller
        .sync(&format!("{NS}/foo"))
        .await
        .expect("sync");
    let got = fx.stored("foo");
    assert_eq!(got.metadata.labels, None);
    assert_eq!(got.metadata.annotations, None, "no pods, no trigger time");
}

/// Upstream's `TestSyncEndpointsExistingEmptySubsets` / `...NilSubsets`: no pods and
/// Endpoints already empty: no write.
#[tokio::test]
async fn empty_endpoints_already_right_are_not_rewritten() {
    for subsets in [None, Some(Vec::new())] {
        let fx = fixture();
        fx.add_service(svc("foo").port(80, 8080).build());
        fx.add_endpoints(
            endpoints("foo")
                .namespace(NS)
                .resource_version("1")
                .with(|e| e.subsets = subsets.clone())
                .build(),
        );
        fx.controller
            .sync(&format!("{NS}/foo"))
            .await
            .expect("sync");
        assert!(fx.client.actions().is_empty(), "{subsets:?}");
    }
}

/// Upstream's `TestSyncEndpointsItemsPreexisting` and `...PreexistingIdentical`: stale
/// subsets are replaced with an update; identical ones (but for pod resourceVersions) are
/// not written.
#[tokio::test]
async fn preexisting_endpoints_updated_only_when_different() {
    let fx = fixture();
    fx.add_service(svc("foo").port(80, 8080).build());
    fx.add_pods(1, 0);
    fx.add_endpoints(
        endpoints("foo")
            .namespace(NS)
            .resource_version("1")
            .subset(&["6.7.8.9"], &[], &[("", 1000)])
            .build(),
    );
    let key = format!("{NS}/foo");
    fx.controller.sync(&key).await.expect("sync");
    assert_eq!(fx.client.actions(), [EndpointsAction::Update(key.clone())]);
    let written = fx.stored("foo");
    assert_eq!(
        written.subsets.as_ref().map(|s| s[0].addresses.clone()),
        Some(Some(vec![address("1.2.3.4", "pod0", "uid0")]))
    );

    // The informer delivers the write (with a pod resourceVersion in the target, which
    // must not matter): nothing more to do.
    let mut observed = written.clone();
    if let Some(target) = observed
        .subsets
        .as_mut()
        .and_then(|s| s[0].addresses.as_mut())
        .and_then(|a| a[0].target_ref.as_mut())
    {
        target.resource_version = Some("42".to_owned());
    }
    fx.endpoints.update(Arc::new(observed)).expect("cache");
    fx.controller.sync(&key).await.expect("sync");
    assert_eq!(fx.client.actions().len(), 1, "no second write");
}

/// A sync that sees the version it just replaced still in the cache fails (and is retried)
/// instead of writing from stale data.
#[tokio::test]
async fn stale_cache_is_an_error_not_a_write() {
    let fx = fixture();
    fx.add_service(svc("foo").port(80, 8080).build());
    fx.add_pods(1, 0);
    fx.add_endpoints(endpoints("foo").namespace(NS).resource_version("1").build());
    let key = format!("{NS}/foo");
    fx.controller.sync(&key).await.expect("first write");
    fx.add_pods(2, 0);
    let err = fx.controller.sync(&key).await.expect_err("stale");
    assert!(matches!(err, Error::StaleCache { .. }), "{err}");
    assert_eq!(fx.client.actions().len(), 1);
}

/// Every pod's port is resolved on its own: two pods naming `http` on different container
/// ports give two subsets (upstream's `TestSyncEndpointsItems` with named ports).
#[tokio::test]
async fn named_target_ports_resolve_per_pod() {
    let fx = fixture();
    fx.add_service(svc("foo").named_port("web", 80, "http").build());
    for (i, port) in [(0, 8080), (1, 9090)] {
        fx.add_pod(
            pod(&format!("pod{i}"))
                .namespace(NS)
                .uid(format!("uid{i}"))
                .labels(&[("foo", "bar")])
                .node("node-1")
                .container(container("c").named_port("http", port, "TCP"))
                .ready()
                .pod_ips(&[&format!("1.2.3.{}", 4 + i)])
                .build(),
        );
    }
    // A pod without the named port is left out.
    fx.add_pod(
        pod("pod9")
            .namespace(NS)
            .uid("uid9")
            .labels(&[("foo", "bar")])
            .ready()
            .pod_ips(&["1.2.3.99"])
            .build(),
    );
    fx.controller
        .sync(&format!("{NS}/foo"))
        .await
        .expect("sync");
    let subsets = fx.stored("foo").subsets.unwrap_or_default();
    assert_eq!(
        subsets,
        vec![
            EndpointSubset {
                addresses: Some(vec![address("1.2.3.4", "pod0", "uid0")]),
                not_ready_addresses: None,
                ports: Some(vec![tcp(Some("web"), 8080)]),
            },
            EndpointSubset {
                addresses: Some(vec![address("1.2.3.5", "pod1", "uid1")]),
                not_ready_addresses: None,
                ports: Some(vec![tcp(Some("web"), 9090)]),
            },
        ]
    );
}

/// `publishNotReadyAddresses` lists unready pods as ready, and keeps terminating ones;
/// terminal pods are never listed.
#[tokio::test]
async fn publish_not_ready_and_terminal_pods() {
    let fx = fixture();
    fx.add_service(
        svc("foo")
            .port(80, 8080)
            .publish_not_ready_addresses(true)
            .build(),
    );
    fx.add_pods(0, 1);
    fx.add_pod(
        pod("failed")
            .namespace(NS)
            .uid("uidf")
            .labels(&[("foo", "bar")])
            .phase("Failed")
            .pod_ips(&["1.2.3.50"])
            .build(),
    );
    fx.add_pod(
        pod("leaving")
            .namespace(NS)
            .uid("uidl")
            .labels(&[("foo", "bar")])
            .node("node-1")
            .phase("Running")
            .deleted_at(Timestamp::from_second(1_700_000_000).expect("ts"))
            .pod_ips(&["1.2.3.60"])
            .build(),
    );
    fx.controller
        .sync(&format!("{NS}/foo"))
        .await
        .expect("sync");
    let subsets = fx.stored("foo").subsets.unwrap_or_default();
    assert_eq!(
        subsets[0].addresses,
        Some(vec![
            address("1.2.3.4", "pod0", "uid0"),
            address("1.2.3.60", "leaving", "uidl")
        ])
    );
    assert_eq!(subsets[0].not_ready_addresses, None);
}

/// Headless Services get the headless label; without ports their addresses are still listed
/// (upstream's `TestSyncEndpointsHeadlessService` and `...HeadlessWithoutPort`); a pod whose
/// hostname and subdomain name the Service carries its hostname.
#[tokio::test]
async fn headless_services_label_ports_and_hostnames() {
    let fx = fixture();
    fx.add_service(svc("foo").cluster_ip("None").build());
    fx.add_pod(
        pod("pod0")
            .namespace(NS)
            .uid("uid0")
            .labels(&[("foo", "bar")])
            .node("node-1")
            .hostname("web-0", "foo")
            .ready()
            .pod_ips(&["1.2.3.4"])
            .build(),
    );
    fx.controller
        .sync(&format!("{NS}/foo"))
        .await
        .expect("sync");
    let got = fx.stored("foo");
    assert_eq!(
        got.metadata
            .labels
            .unwrap_or_default()
            .get(IS_HEADLESS_SERVICE)
            .map(String::as_str),
        Some("")
    );
    let mut want = address("1.2.3.4", "pod0", "uid0");
    want.hostname = Some("web-0".to_owned());
    assert_eq!(
        got.subsets,
        Some(vec![EndpointSubset {
            addresses: Some(vec![want]),
            not_ready_addresses: None,
            ports: None,
        }])
    );
}

/// A deleted Service's Endpoints are deleted; already gone is fine.
#[tokio::test]
async fn deleted_service_deletes_its_endpoints() {
    let fx = fixture();
    fx.add_endpoints(endpoints("foo").namespace(NS).resource_version("1").build());
    let key = format!("{NS}/foo");
    fx.controller.sync(&key).await.expect("sync");
    fx.controller.sync(&key).await.expect("NotFound is fine");
    assert_eq!(
        fx.client.actions(),
        [
            EndpointsAction::Delete(key.clone()),
            EndpointsAction::Delete(key)
        ]
    );
}

/// A deleted Service leaves nothing in the controller's trackers (upstream's `syncService`
/// deletes it from the trigger-time and stale-Endpoints trackers).
#[tokio::test]
async fn deleted_service_is_forgotten_by_the_trackers() {
    let fx = fixture();
    let service = svc("foo").port(80, 8080).build();
    fx.add_service(service.clone());
    fx.add_pods(1, 0);
    fx.add_endpoints(
        endpoints("foo")
            .namespace(NS)
            .resource_version("1")
            .subset(&["6.7.8.9"], &[], &[("", 1000)])
            .build(),
    );
    let key = format!("{NS}/foo");
    fx.controller.sync(&key).await.expect("sync");
    assert_eq!(fx.client.actions(), [EndpointsAction::Update(key.clone())]);
    assert_eq!(fx.controller.trigger_times.tracked_services(), 1);
    assert_eq!(
        fx.controller.stale_endpoints.len(),
        1,
        "the replaced version"
    );

    fx.services.delete(&service).expect("cache");
    fx.controller.sync(&key).await.expect("sync");
    assert_eq!(fx.controller.trigger_times.tracked_services(), 0);
    assert!(fx.controller.stale_endpoints.is_empty());
}

/// Over 1000 addresses, the Endpoints is cut to 1000 (ready first) and annotated
/// `over-capacity: truncated`; back under, the annotation goes.
#[tokio::test]
async fn over_capacity_truncates_and_annotates() {
    let fx = fixture();
    fx.add_service(svc("foo").port(80, 8080).build());
    for i in 0..MAX_CAPACITY + 5 {
        fx.add_pod(
            pod(&format!("p{i}"))
                .namespace(NS)
                .uid(format!("u{i}"))
                .labels(&[("foo", "bar")])
                .ready()
                .pod_ips(&[&format!("10.0.{}.{}", i / 250, i % 250)])
                .build(),
        );
    }
    let key = format!("{NS}/foo");
    fx.controller.sync(&key).await.expect("sync");
    let got = fx.stored("foo");
    assert_eq!(
        subsets::address_count(got.subsets.as_deref().unwrap_or_default()),
        MAX_CAPACITY
    );
    assert_eq!(
        got.metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .get(ENDPOINTS_OVER_CAPACITY)
            .map(String::as_str),
        Some(TRUNCATED)
    );

    // The truncated object comes back through the informer: still over capacity, so still
    // "not set correctly" — the controller rewrites (as upstream).
    fx.endpoints.add(Arc::new(got)).expect("cache");
    for i in 0..10 {
        fx.pods
            .delete(&pod(&format!("p{i}")).namespace(NS).build())
            .expect("cache");
    }
    fx.controller.sync(&key).await.expect("sync");
    let got = fx.stored("foo");
    assert_eq!(
        subsets::address_count(got.subsets.as_deref().unwrap_or_default()),
        MAX_CAPACITY - 5
    );
    assert!(
        !got.metadata
            .annotations
            .unwrap_or_default()
            .contains_key(ENDPOINTS_OVER_CAPACITY)
    );
}

/// A failed create is an error and a `FailedToCreateEndpoint` warning; a create refused
/// because the namespace is terminating is dropped silently.
#[tokio::test]
async fn failed_writes_record_events() {
    let fx = fixture();
    fx.add_service(svc("foo").port(80, 8080).build());
    fx.client
        .set_error(Some(api_status::internal_error("boom")));
    let key = format!("{NS}/foo");
    let err = fx.controller.sync(&key).await.expect_err("create fails");
    assert!(matches!(err, Error::Create { .. }), "{err}");
    assert_eq!(fx.recorder.reasons(), ["FailedToCreateEndpoint"]);
    let event = &fx.recorder.events()[0];
    assert!(
        event
            .message
            .starts_with(&format!("Failed to create endpoint for service {NS}/foo: ")),
        "{}",
        event.message
    );

    let mut terminating = api_status::namespace_terminating("endpoints", "foo", NS);
    terminating.code = 403;
    terminating.reason = "Forbidden".to_owned();
    fx.client.set_error(Some(terminating));
    fx.controller.sync(&key).await.expect("dropped");
    assert_eq!(
        fx.recorder.reasons().len(),
        1,
        "no event for a terminating namespace"
    );
}

/// The startup sweep queues every Endpoints but leader-election locks (upstream's
/// `TestCheckLeftoverEndpoints`).
#[tokio::test]
async fn leftover_endpoints_are_queued_at_startup() {
    let fx = fixture();
    fx.add_endpoints(
        endpoints("orphan")
            .namespace(NS)
            .resource_version("1")
            .build(),
    );
    fx.add_endpoints(
        endpoints("lock")
            .namespace(NS)
            .resource_version("1")
            .annotation(LEADER_ELECTION_RECORD_ANNOTATION, "{}")
            .build(),
    );
    fx.controller.check_leftover_endpoints();
    assert_eq!(fx.controller.queue().len(), 1);
    let key = fx.controller.queue().get().await.expect("key");
    assert_eq!(key, format!("{NS}/orphan"));
}

/// Pod events queue the Services selecting the pod, after the batch period; a pod update that
/// changes nothing endpoints show queues nothing.
#[tokio::test(start_paused = true)]
async fn pod_events_queue_selecting_services_after_the_batch_period() {
    let fx = fixture_with(EndpointControllerOptions {
        endpoint_updates_batch_period: Duration::from_secs(1),
        ..EndpointControllerOptions::default()
    });
    fx.add_service(svc("foo").port(80, 8080).build());
    fx.add_service(
        service("other")
            .namespace(NS)
            .selector(&[("x", "y")])
            .build(),
    );
    let handlers = fx.controller.event_handlers();
    let p = pod("p")
        .namespace(NS)
        .resource_version("1")
        .labels(&[("foo", "bar")])
        .pod_ips(&["1.2.3.4"])
        .arc();
    ResourceEventHandler::<Pod>::on_add(handlers, Arc::clone(&p), false);
    assert_eq!(fx.controller.queue().len(), 0, "batched");
    tokio::time::advance(Duration::from_millis(1100)).await;
    tokio::task::yield_now().await;
    assert_eq!(fx.controller.queue().len(), 1);
    let key = fx.controller.queue().get().await.expect("key");
    assert_eq!(key, format!("{NS}/foo"));
    fx.controller.queue().done(&key);

    let annotated = pod("p")
        .namespace(NS)
        .resource_version("2")
        .labels(&[("foo", "bar")])
        .annotation("a", "b")
        .pod_ips(&["1.2.3.4"])
        .arc();
    ResourceEventHandler::<Pod>::on_update(handlers, p, annotated);
    tokio::time::advance(Duration::from_secs(2)).await;
    tokio::task::yield_now().await;
    assert_eq!(
        fx.controller.queue().len(),
        0,
        "nothing endpoints show changed"
    );
}

/// Service and Endpoints events queue the Service's key.
#[tokio::test]
async fn service_and_endpoints_events_queue_the_key() {
    let fx = fixture();
    let handlers = fx.controller.event_handlers();
    ResourceEventHandler::<Service>::on_add(handlers, svc("a").arc(), false);
    ResourceEventHandler::<Endpoints>::on_delete(
        handlers,
        kcm_machinery::informer::DeletedObject::Object(endpoints("b").namespace(NS).arc()),
    );
    let mut keys = vec![
        fx.controller.queue().get().await.expect("key"),
        fx.controller.queue().get().await.expect("key"),
    ];
    keys.sort();
    assert_eq!(keys, [format!("{NS}/a"), format!("{NS}/b")]);
}

/// A panic in the sync is recovered, counted and retried by the shared worker.
#[tokio::test(start_paused = true)]
async fn panicking_sync_is_recovered_counted_and_retried() {
    let metrics = Arc::new(WorkqueueMetrics::new());
    let fx = fixture_with(EndpointControllerOptions {
        metrics: Some(metrics.clone()),
        ..EndpointControllerOptions::default()
    });
    fx.add_service(svc("foo").port(80, 8080).build());
    fx.client.panic_on_next_call();
    let key = format!("{NS}/foo");
    fx.controller.queue().add(key.clone());
    assert!(fx.controller.process_next_work_item().await, "recovered");
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1);
    assert_eq!(fx.controller.queue().num_requeues(&key), 1);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(fx.controller.process_next_work_item().await);
    assert_eq!(fx.client.actions(), [EndpointsAction::Create(key)]);
}

/// Labels follow the Service: a label change alone rewrites the Endpoints.
#[tokio::test]
async fn service_label_changes_are_copied() {
    let fx = fixture();
    fx.add_service(svc("foo").port(80, 8080).labels(&[("v", "2")]).build());
    fx.add_endpoints(
        endpoints("foo")
            .namespace(NS)
            .resource_version("1")
            .labels(&[("v", "1")])
            .with(|e| e.subsets = Some(Vec::new()))
            .build(),
    );
    fx.controller
        .sync(&format!("{NS}/foo"))
        .await
        .expect("sync");
    let labels: BTreeMap<String, String> = fx.stored("foo").metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("v").map(String::as_str), Some("2"));
}
