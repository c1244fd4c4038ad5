//! Unit tests of the EndpointSlice reconciler (upstream `reconciler_test.go`): which slices are created, updated and deleted, and what they hold.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::{EndpointHints, EndpointSlice, ForZone};
use kcm_testing::prelude::*;

use super::*;
use crate::endpointslice::controller::MANAGED_BY;
use crate::endpointslice::utils;
use crate::endpointsliceutil::{
    ENDPOINTS_LAST_CHANGE_TRIGGER_TIME, FakeEndpointSliceClient, IS_HEADLESS_SERVICE,
    LABEL_MANAGED_BY, LABEL_SERVICE_NAME, SliceAction,
};

const NS: &str = "ns";

struct Fixture {
    client: Arc<FakeEndpointSliceClient>,
    nodes: Indexer<Node>,
    tracker: Arc<EndpointSliceTracker>,
    metrics: Arc<EndpointSliceMetrics>,
    reconciler: Reconciler,
}

fn fixture_with_max(max: usize) -> Fixture {
    let client = Arc::new(FakeEndpointSliceClient::new());
    let nodes = Indexer::new();
    nodes
        .add(
            node("node-1")
                .labels(&[("topology.kubernetes.io/zone", "zone-a")])
                .arc(),
        )
        .expect("cache");
    let tracker = Arc::new(EndpointSliceTracker::new());
    let metrics = Arc::new(EndpointSliceMetrics::new());
    let reconciler = Reconciler::new(
        client.clone(),
        nodes.clone(),
        max,
        Arc::clone(&tracker),
        Arc::clone(&metrics),
        MANAGED_BY,
    );
    Fixture {
        client,
        nodes,
        tracker,
        metrics,
        reconciler,
    }
}

fn fixture() -> Fixture {
    fixture_with_max(100)
}

impl Fixture {
    /// The stored slices, as the informer would hand them to the next sync.
    fn slices(&self) -> Vec<Arc<EndpointSlice>> {
        self.client.slices().into_iter().map(Arc::new).collect()
    }

    async fn reconcile(&self, svc: &Service, pods: &[Arc<Pod>]) -> Result<()> {
        let existing = self.slices();
        self.client.clear_actions();
        self.reconciler.reconcile(svc, pods, &existing, None).await
    }

    fn sizes(&self) -> Vec<usize> {
        self.client
            .slices()
            .iter()
            .map(|s| s.endpoints.as_ref().map_or(0, Vec::len))
            .collect()
    }

    fn kinds(&self) -> Vec<&'static str> {
        self.client
            .actions()
            .iter()
            .map(|a| match a {
                SliceAction::Create(_) => "create",
                SliceAction::Update(_) => "update",
                SliceAction::Delete(_) => "delete",
            })
            .collect()
    }
}

fn svc() -> Service {
    service("foo")
        .namespace(NS)
        .uid("svc-uid")
        .selector(&[("foo", "bar")])
        .cluster_ip("10.96.0.10")
        .ip_families(&["IPv4"])
        .named_port("http", 80, "http")
        .build()
}

fn test_pod(i: usize) -> PodBuilder {
    pod(&format!("pod{i}"))
        .namespace(NS)
        .uid(format!("pod-uid-{i}"))
        .labels(&[("foo", "bar")])
        .node("node-1")
        .container(container("c").named_port("http", 8080, "TCP"))
        .phase("Running")
        .ready()
        .pod_ips(&[&format!("10.0.{}.{}", i / 250, i % 250 + 1)])
}

fn pods(range: std::ops::Range<usize>) -> Vec<Arc<Pod>> {
    range.map(|i| test_pod(i).arc()).collect()
}

/// A slice written directly to the fake server: owned by [`svc`], `n` endpoints for pods
/// `start..start+n`.
fn existing_slice(name: &str, start: usize, n: usize) -> EndpointSlice {
    let service = svc();
    let mut slice = utils::new_endpoint_slice(
        &service,
        &utils::EndpointMeta {
            ports: utils::endpoint_ports(&service, &test_pod(0).build()),
            address_type: "IPv4".to_owned(),
        },
        MANAGED_BY,
    );
    slice.metadata.name = Some(name.to_owned());
    slice.metadata.generate_name = None;
    slice.metadata.uid = Some(format!("{name}-uid"));
    slice.metadata.generation = Some(1);
    slice.metadata.resource_version = Some("1".to_owned());
    let node = node("node-1")
        .labels(&[("topology.kubernetes.io/zone", "zone-a")])
        .build();
    for i in start..start + n {
        slice
            .endpoints
            .get_or_insert_default()
            .push(utils::pod_to_endpoint(
                &test_pod(i).build(),
                Some(&node),
                &service,
                "IPv4",
            ));
    }
    slice
}

/// No pods: one placeholder slice, created once and kept (upstream's `TestReconcileEmpty`).
#[tokio::test]
async fn no_pods_gives_one_placeholder_slice() {
    let fx = fixture();
    fx.reconcile(&svc(), &[]).await.expect("reconcile");
    assert_eq!(fx.kinds(), ["create"]);
    let slice = &fx.client.slices()[0];
    assert!(slice.endpoints.as_ref().is_none_or(Vec::is_empty));
    assert_eq!(slice.ports, Some(Vec::new()));
    assert_eq!(slice.metadata.generate_name.as_deref(), Some("foo-"));
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(LABEL_SERVICE_NAME).map(String::as_str),
        Some("foo")
    );
    assert_eq!(
        labels.get(LABEL_MANAGED_BY).map(String::as_str),
        Some(MANAGED_BY)
    );
    let owner = &slice.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Service", "svc-uid", Some(true))
    );

    fx.reconcile(&svc(), &[]).await.expect("reconcile");
    assert!(
        fx.kinds().is_empty(),
        "the placeholder is kept, not recreated"
    );
}

/// One pod: one slice with one endpoint, its conditions, node, zone, target and port
/// (upstream's `TestReconcile1Pod`).
#[tokio::test]
async fn one_pod_one_slice() {
    let fx = fixture();
    fx.reconcile(&svc(), &pods(0..1)).await.expect("reconcile");
    assert_eq!(fx.kinds(), ["create"]);
    let slice = &fx.client.slices()[0];
    assert_eq!(slice.address_type, "IPv4");
    let port = &slice.ports.clone().unwrap_or_default()[0];
    assert_eq!(
        (port.name.as_deref(), port.port, port.protocol.as_deref()),
        (Some("http"), Some(8080), Some("TCP"))
    );
    let ep = &slice.endpoints.as_deref().unwrap_or_default()[0];
    assert_eq!(ep.addresses, ["10.0.0.1"]);
    assert_eq!(ep.node_name.as_deref(), Some("node-1"));
    assert_eq!(ep.zone.as_deref(), Some("zone-a"));
    let conditions = ep.conditions.clone().unwrap_or_default();
    assert_eq!(
        (conditions.ready, conditions.serving, conditions.terminating),
        (Some(true), Some(true), Some(false))
    );
    let target = ep.target_ref.clone().unwrap_or_default();
    assert_eq!(
        (
            target.kind.as_deref(),
            target.name.as_deref(),
            target.uid.as_deref()
        ),
        (Some("Pod"), Some("pod0"), Some("pod-uid-0"))
    );
    assert!(fx.tracker.has(slice), "own write tracked");
}

/// 250 pods: 100 + 100 + 50 (upstream's `TestReconcileManyPods`).
#[tokio::test]
async fn many_pods_fill_slices_of_max_size() {
    let fx = fixture();
    fx.reconcile(&svc(), &pods(0..250))
        .await
        .expect("reconcile");
    assert_eq!(fx.kinds(), ["create", "create", "create"]);
    let mut sizes = fx.sizes();
    sizes.sort_unstable();
    assert_eq!(sizes, [50, 100, 100]);
    assert_eq!(fx.metrics.changes("create"), 3);
    assert_eq!(fx.metrics.gauges(), (250, 3, 3));
}

/// Preexisting slices of 62 and 61 desired endpoints, 250 pods: the 127 left make one new
/// slice of 100, and the 27 after it go into the slice they fill best — one update and one
/// create instead of two updates and a create (upstream's
/// `TestReconcileEndpointSlicesSomePreexisting`).
#[tokio::test]
async fn leftovers_go_to_the_slice_they_fill_best() {
    let fx = fixture();
    fx.client.insert(existing_slice("foo-a", 0, 62));
    fx.client.insert(existing_slice("foo-b", 62, 61));
    fx.reconcile(&svc(), &pods(0..250))
        .await
        .expect("reconcile");
    assert_eq!(fx.kinds(), ["create", "update"]);
    assert_eq!(fx.client.actions()[1], SliceAction::Update("foo-a".into()));
    let mut sizes = fx.sizes();
    sizes.sort_unstable();
    assert_eq!(sizes, [61, 89, 100]);
}

/// Endpoints no longer desired are removed from their slice, and new ones fill that slice
/// first, since it is written anyway (upstream's
/// `TestReconcileEndpointSlicesSomePreexistingWorseAllocation` in spirit).
#[tokio::test]
async fn slices_being_written_are_filled_first() {
    let fx = fixture();
    fx.client.insert(existing_slice("foo-a", 0, 100));
    fx.client.insert(existing_slice("foo-b", 100, 100));
    // Pods 0..10 are gone, 200..205 are new.
    let mut wanted = pods(10..200);
    wanted.extend(pods(200..205));
    fx.reconcile(&svc(), &wanted).await.expect("reconcile");
    assert_eq!(
        fx.client.actions(),
        [SliceAction::Update("foo-a".into())],
        "only the slice that lost endpoints"
    );
    let mut sizes = fx.sizes();
    sizes.sort_unstable();
    assert_eq!(sizes, [95, 100]);
}

/// One pod turning unready rewrites its slice only (the minimal churn the acceptance
/// counts), and nothing at all when nothing changed.
#[tokio::test]
async fn one_pod_change_rewrites_only_its_slice() {
    let fx = fixture();
    let mut all = pods(0..250);
    fx.reconcile(&svc(), &all).await.expect("reconcile");
    fx.reconcile(&svc(), &all).await.expect("reconcile");
    assert!(fx.kinds().is_empty(), "steady state writes nothing");

    all[137] = test_pod(137)
        .with(|p| p.status.get_or_insert_default().conditions = None)
        .arc();
    fx.reconcile(&svc(), &all).await.expect("reconcile");
    assert_eq!(fx.kinds(), ["update"]);
    let written = fx.client.actions()[0].name().to_owned();
    let slice = fx
        .client
        .slices()
        .into_iter()
        .find(|s| s.metadata.name.as_deref() == Some(written.as_str()))
        .expect("slice");
    let ep = slice
        .endpoints
        .iter()
        .flatten()
        .find(|e| e.target_ref.as_ref().and_then(|t| t.name.as_deref()) == Some("pod137"))
        .expect("the pod's endpoint is in the updated slice");
    let conditions = ep.conditions.clone().unwrap_or_default();
    assert_eq!(
        (conditions.ready, conditions.serving),
        (Some(false), Some(false))
    );
}

/// Service label changes are copied onto every slice; the reserved labels stay the
/// controller's (upstream's `TestReconcileEndpointSlicesUpdating` with labels).
#[tokio::test]
async fn service_labels_are_copied_to_slices() {
    let fx = fixture();
    fx.reconcile(&svc(), &pods(0..150))
        .await
        .expect("reconcile");
    let mut relabelled = svc();
    relabelled.metadata.labels = Some(labels(&[("app", "web"), (LABEL_SERVICE_NAME, "evil")]));
    fx.reconcile(&relabelled, &pods(0..150))
        .await
        .expect("reconcile");
    assert_eq!(fx.kinds(), ["update", "update"]);
    for slice in fx.client.slices() {
        let labels = slice.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(
            labels.get(LABEL_SERVICE_NAME).map(String::as_str),
            Some("foo")
        );
        assert!(!labels.contains_key(IS_HEADLESS_SERVICE));
    }
}

/// Slices owned by an older Service of the same name are replaced: the creation becomes an
/// update only for slices this Service owns, so the old one is deleted.
#[tokio::test]
async fn slices_of_another_owner_are_deleted() {
    let fx = fixture();
    let mut foreign = existing_slice("foo-old", 0, 1);
    if let Some(owner) = foreign
        .metadata
        .owner_references
        .as_mut()
        .and_then(|o| o.first_mut())
    {
        owner.uid = "old-uid".to_owned();
    }
    fx.client.insert(foreign);
    fx.reconcile(&svc(), &pods(0..1)).await.expect("reconcile");
    assert_eq!(fx.kinds(), ["create", "delete"]);
}

/// A slice this Service owns but whose port list is no longer wanted is recycled: the new
/// slice takes its name (one update instead of a create and a delete).
#[tokio::test]
async fn creations_recycle_deleted_slices() {
    let fx = fixture();
    fx.client.insert(existing_slice("foo-a", 0, 3));
    let mut renamed = svc();
    if let Some(port) = renamed
        .spec
        .as_mut()
        .and_then(|s| s.ports.as_mut())
        .and_then(|p| p.first_mut())
    {
        port.name = Some("web".to_owned());
    }
    fx.reconcile(&renamed, &pods(0..3))
        .await
        .expect("reconcile");
    assert_eq!(fx.client.actions(), [SliceAction::Update("foo-a".into())]);
    let slice = &fx.client.slices()[0];
    assert_eq!(
        slice.ports.clone().unwrap_or_default()[0].name.as_deref(),
        Some("web")
    );
}

/// A Service that switched to IPv6 loses its IPv4 slices.
#[tokio::test]
async fn unsupported_address_types_are_deleted() {
    let fx = fixture();
    fx.client.insert(existing_slice("foo-a", 0, 2));
    let mut v6 = svc();
    if let Some(spec) = v6.spec.as_mut() {
        spec.ip_families = Some(vec!["IPv6".to_owned()]);
    }
    fx.reconcile(&v6, &pods(0..2)).await.expect("reconcile");
    assert_eq!(
        fx.kinds(),
        ["create", "delete"],
        "an IPv6 placeholder, the IPv4 slice gone"
    );
    let remaining = fx.client.slices();
    assert_eq!(remaining.len(), 1);
    assert_eq!(remaining[0].address_type, "IPv6");
}

/// A pod on a node the cache lacks is left out and the sync fails (to be retried), unless
/// the Service publishes not-ready addresses.
#[tokio::test]
async fn pods_on_missing_nodes() {
    let fx = fixture();
    let mut all = pods(0..2);
    all.push(test_pod(2).node("ghost").arc());
    let err = fx.reconcile(&svc(), &all).await.expect_err("node missing");
    assert!(
        matches!(&err, Error::NodeNotFound { node, .. } if node == "ghost"),
        "{err}"
    );
    assert_eq!(fx.sizes(), [2], "written without the pod");

    let mut publishing = svc();
    if let Some(spec) = publishing.spec.as_mut() {
        spec.publish_not_ready_addresses = Some(true);
    }
    fx.reconcile(&publishing, &all).await.expect("included");
    assert_eq!(fx.sizes(), [3]);
    drop(fx.nodes);
}

/// Named target ports resolve per pod: pods with different container ports go to different
/// slices.
#[tokio::test]
async fn named_ports_split_slices_by_port_list() {
    let fx = fixture();
    let mut all = pods(0..2);
    all.push(
        test_pod(2)
            .with(|p| {
                if let Some(spec) = p.spec.as_mut() {
                    spec.containers = vec![container("c").named_port("http", 9090, "TCP").build()];
                }
            })
            .arc(),
    );
    fx.reconcile(&svc(), &all).await.expect("reconcile");
    let mut by_port: Vec<(Option<i32>, usize)> = fx
        .client
        .slices()
        .iter()
        .map(|s| {
            (
                s.ports.clone().unwrap_or_default()[0].port,
                s.endpoints.as_ref().map_or(0, Vec::len),
            )
        })
        .collect();
    by_port.sort_unstable();
    assert_eq!(by_port, [(Some(8080), 2), (Some(9090), 1)]);
}

/// No slice is created for a Service being deleted.
#[tokio::test]
async fn no_creations_for_a_service_being_deleted() {
    let fx = fixture();
    let mut deleting = svc();
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
    );
    fx.reconcile(&deleting, &pods(0..3))
        .await
        .expect("reconcile");
    assert!(fx.client.actions().is_empty());
}

/// Created and updated slices carry the trigger time; hints left by someone are removed.
#[tokio::test]
async fn trigger_time_and_hints() {
    let fx = fixture();
    let mut hinted = existing_slice("foo-a", 0, 2);
    hinted.endpoints.get_or_insert_default()[0].hints = Some(EndpointHints {
        for_zones: Some(vec![ForZone {
            name: "zone-a".to_owned(),
        }]),
        for_nodes: None,
    });
    fx.client.insert(hinted);
    let when = jiff::Timestamp::from_second(1_700_000_000).expect("ts");
    let existing = fx.slices();
    fx.reconciler
        .reconcile(&svc(), &pods(0..2), &existing, Some(when))
        .await
        .expect("reconcile");
    assert_eq!(fx.kinds(), ["update"], "the hinted slice is rewritten");
    let slice = &fx.client.slices()[0];
    assert!(slice.endpoints.iter().flatten().all(|e| e.hints.is_none()));
    assert_eq!(
        slice
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .get(ENDPOINTS_LAST_CHANGE_TRIGGER_TIME)
            .map(String::as_str),
        Some("2023-11-14T22:13:20Z")
    );
}

/// `--max-endpoints-per-slice` is honoured.
#[tokio::test]
async fn max_endpoints_per_slice_is_honoured() {
    let fx = fixture_with_max(10);
    fx.reconcile(&svc(), &pods(0..25)).await.expect("reconcile");
    let mut sizes = fx.sizes();
    sizes.sort_unstable();
    assert_eq!(sizes, [5, 10, 10]);
}

/// Terminating pods stay, as serving but not ready; pods that are gone leave their slice.
#[tokio::test]
async fn terminating_pods_stay_not_ready() {
    let fx = fixture();
    let mut all = pods(0..2);
    fx.reconcile(&svc(), &all).await.expect("reconcile");
    all[1] = test_pod(1).deleted_at(jiff::Timestamp::UNIX_EPOCH).arc();
    fx.reconcile(&svc(), &all).await.expect("reconcile");
    let slice = &fx.client.slices()[0];
    let ep = slice
        .endpoints
        .iter()
        .flatten()
        .find(|e| e.target_ref.as_ref().and_then(|t| t.name.as_deref()) == Some("pod1"))
        .expect("still there");
    let c = ep.conditions.clone().unwrap_or_default();
    assert_eq!(
        (c.ready, c.serving, c.terminating),
        (Some(false), Some(true), Some(true))
    );
    fx.reconcile(&svc(), &all[..1]).await.expect("reconcile");
    assert_eq!(fx.sizes(), [1]);
}
