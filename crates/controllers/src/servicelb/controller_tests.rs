//! Unit tests of the service-lb controller: bare caches, a recording fake cloud and the recording fake client, with the cases of upstream's service `controller_test.go` (`TestSyncLoadBalancerIfNeeded`, `TestProcessServiceCreateOrUpdate`, `TestProcessServiceDeletion`, the node sync tests).

use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, NodeCondition, NodeStatus, ServicePort, ServiceSpec, ServiceStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kcm_machinery::controller::api_status;
use kcm_machinery::events::FakeRecorder;

use super::*;
use crate::servicelb::client::FakeServiceLbClient;

/// One call to [`FakeBalancer`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Get(String),
    Ensure(String, Vec<String>),
    Update(String, Vec<String>),
    Delete(String),
}

/// A cloud that records its calls, has the load balancers it was asked for, and fails the
/// calls it is told to.
#[derive(Debug, Default)]
struct FakeBalancer {
    calls: Mutex<Vec<Call>>,
    existing: Mutex<BTreeSet<String>>,
    fail_ensure: Mutex<Option<CloudError>>,
    fail_update: Mutex<Option<CloudError>>,
}

impl FakeBalancer {
    fn calls(&self) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn record(&self, call: Call) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call);
    }

    fn exists(&self, key: &str) -> bool {
        self.existing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(key)
    }
}

fn names(nodes: &[Arc<Node>]) -> Vec<String> {
    nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect()
}

#[async_trait]
impl LoadBalancer for FakeBalancer {
    async fn get_load_balancer(
        &self,
        _cluster: &str,
        service: &Service,
    ) -> std::result::Result<Option<LoadBalancerStatus>, CloudError> {
        let key = key_of(service);
        self.record(Call::Get(key.clone()));
        Ok(self.exists(&key).then(status))
    }

    async fn ensure_load_balancer(
        &self,
        _cluster: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> std::result::Result<LoadBalancerStatus, CloudError> {
        let key = key_of(service);
        self.record(Call::Ensure(key.clone(), names(nodes)));
        if let Some(err) = self
            .fail_ensure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return Err(err);
        }
        self.existing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key);
        Ok(status())
    }

    async fn update_load_balancer(
        &self,
        _cluster: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> std::result::Result<(), CloudError> {
        self.record(Call::Update(key_of(service), names(nodes)));
        match self
            .fail_update
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster: &str,
        service: &Service,
    ) -> std::result::Result<(), CloudError> {
        let key = key_of(service);
        self.record(Call::Delete(key.clone()));
        self.existing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        Ok(())
    }
}

fn status() -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some("8.8.8.8".to_owned()),
            ..LoadBalancerIngress::default()
        }]),
    }
}

fn service(name: &str, type_: &str, protocol: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("7".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some(type_.to_owned()),
            ports: Some(vec![ServicePort {
                port: 80,
                protocol: Some(protocol.to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

fn with_finalizer(mut s: Service) -> Service {
    s.metadata.finalizers = Some(vec![LOAD_BALANCER_CLEANUP_FINALIZER.to_owned()]);
    s
}

fn deleted(mut s: Service) -> Service {
    s.metadata.deletion_timestamp = Some(Time("2026-01-01T00:00:00Z".parse().expect("time")));
    s
}

fn with_status(mut s: Service) -> Service {
    s.status = Some(ServiceStatus {
        load_balancer: Some(status()),
        ..ServiceStatus::default()
    });
    s
}

fn node(name: &str, ready: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".to_owned(),
                status: ready.to_owned(),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        }),
    }
}

struct Fixture {
    controller: ServiceLbController,
    services: Indexer<Service>,
    nodes: Indexer<Node>,
    client: Arc<FakeServiceLbClient>,
    cloud: Arc<FakeBalancer>,
    recorder: FakeRecorder,
}

fn fixture() -> Fixture {
    let services = Indexer::new();
    let nodes = Indexer::new();
    let client = Arc::new(FakeServiceLbClient::new());
    let cloud = Arc::new(FakeBalancer::default());
    let recorder = FakeRecorder::new();
    let controller = ServiceLbController::with_cache(
        services.clone(),
        nodes.clone(),
        client.clone(),
        cloud.clone(),
        Arc::new(recorder.clone()),
        ServiceLbControllerOptions::default(),
    );
    nodes.add(Arc::new(node("node0", "True"))).expect("node");
    Fixture {
        controller,
        services,
        nodes,
        client,
        cloud,
        recorder,
    }
}

fn finalizer_patch(finalizers: serde_json::Value) -> serde_json::Value {
    json!({"metadata": {"resourceVersion": "7", "finalizers": finalizers}})
}

fn status_patch(ingress: serde_json::Value) -> serde_json::Value {
    json!({"status": {"loadBalancer": {"ingress": ingress}}})
}

/// Upstream's `TestSyncLoadBalancerIfNeeded` cases: which cloud calls, patches and events
/// each kind of Service leads to.
#[tokio::test]
async fn sync_load_balancer_if_needed_as_upstream() {
    struct Case {
        name: &'static str,
        service: Service,
        want_op: Operation,
        want_calls: Vec<Call>,
        want_patches: Vec<serde_json::Value>,
        want_events: Vec<&'static str>,
    }
    let ensure = |name: &str| Call::Ensure(format!("default/{name}"), vec!["node0".to_owned()]);
    let added = finalizer_patch(json!([LOAD_BALANCER_CLEANUP_FINALIZER]));
    let ingress = status_patch(json!([{"ip": "8.8.8.8"}]));
    let cases = [
        Case {
            name: "service doesn't want LB",
            service: service("no-lb", "ClusterIP", "TCP"),
            want_op: Operation::Delete,
            want_calls: vec![Call::Get("default/no-lb".to_owned())],
            want_patches: vec![],
            want_events: vec!["DeletedLoadBalancer"],
        },
        Case {
            name: "udp service that wants LB",
            service: service("udp", "LoadBalancer", "UDP"),
            want_op: Operation::Ensure,
            want_calls: vec![ensure("udp")],
            want_patches: vec![added.clone(), ingress.clone()],
            want_events: vec!["EnsuringLoadBalancer", "EnsuredLoadBalancer"],
        },
        Case {
            name: "tcp service that wants LB",
            service: service("tcp", "LoadBalancer", "TCP"),
            want_op: Operation::Ensure,
            want_calls: vec![ensure("tcp")],
            want_patches: vec![added.clone(), ingress.clone()],
            want_events: vec!["EnsuringLoadBalancer", "EnsuredLoadBalancer"],
        },
        Case {
            name: "sctp service that wants LB",
            service: service("sctp", "LoadBalancer", "SCTP"),
            want_op: Operation::Ensure,
            want_calls: vec![ensure("sctp")],
            want_patches: vec![added.clone(), ingress.clone()],
            want_events: vec!["EnsuringLoadBalancer", "EnsuredLoadBalancer"],
        },
        Case {
            name: "service with finalizer that wants LB",
            service: with_finalizer(service("fin", "LoadBalancer", "TCP")),
            want_op: Operation::Ensure,
            want_calls: vec![ensure("fin")],
            want_patches: vec![ingress.clone()],
            want_events: vec!["EnsuringLoadBalancer", "EnsuredLoadBalancer"],
        },
        Case {
            name: "service with an up-to-date status writes nothing",
            service: with_status(with_finalizer(service("same", "LoadBalancer", "TCP"))),
            want_op: Operation::Ensure,
            want_calls: vec![ensure("same")],
            want_patches: vec![],
            want_events: vec!["EnsuringLoadBalancer", "EnsuredLoadBalancer"],
        },
        Case {
            name: "service that needs cleanup",
            service: with_status(deleted(with_finalizer(service(
                "gone",
                "LoadBalancer",
                "TCP",
            )))),
            want_op: Operation::Delete,
            want_calls: vec![Call::Get("default/gone".to_owned())],
            want_patches: vec![finalizer_patch(json!(null)), status_patch(json!(null))],
            want_events: vec!["DeletedLoadBalancer"],
        },
        Case {
            name: "service switched from LoadBalancer to ClusterIP",
            service: with_status(with_finalizer(service("switched", "ClusterIP", "TCP"))),
            want_op: Operation::Delete,
            want_calls: vec![Call::Get("default/switched".to_owned())],
            want_patches: vec![finalizer_patch(json!(null)), status_patch(json!(null))],
            want_events: vec!["DeletedLoadBalancer"],
        },
    ];
    for case in cases {
        let f = fixture();
        let op = f
            .controller
            .sync_load_balancer_if_needed(&case.service)
            .await
            .unwrap_or_else(|err| panic!("{}: {err}", case.name));
        assert_eq!(op, case.want_op, "{}", case.name);
        assert_eq!(f.cloud.calls(), case.want_calls, "{}", case.name);
        let patches: Vec<_> = f.client.patches().into_iter().map(|(_, p)| p).collect();
        assert_eq!(patches, case.want_patches, "{}", case.name);
        assert_eq!(f.recorder.reasons(), case.want_events, "{}", case.name);
    }
}

/// A load balancer that exists is deleted before the finalizer goes, with both events.
#[tokio::test]
async fn an_existing_load_balancer_is_deleted_before_its_finalizer() {
    let f = fixture();
    let lb = with_finalizer(service("lb", "LoadBalancer", "TCP"));
    f.services.add(Arc::new(lb.clone())).expect("add");
    f.controller.sync("default/lb").await.expect("ensure");
    let gone = deleted(lb);
    f.services.update(Arc::new(gone)).expect("update");
    f.controller.sync("default/lb").await.expect("delete");
    let calls = f.cloud.calls();
    assert_eq!(
        calls[1..],
        [
            Call::Get("default/lb".to_owned()),
            Call::Delete("default/lb".to_owned())
        ]
    );
    assert_eq!(
        f.recorder.reasons()[2..],
        ["DeletingLoadBalancer", "DeletedLoadBalancer"]
    );
    let (_, last_finalizers) = f.client.patches()[1].clone();
    assert_eq!(last_finalizers, finalizer_patch(json!(null)));
}

/// A failing cloud leads to `SyncLoadBalancerFailed` and an error (the key is retried), and
/// no status is written.
#[tokio::test]
async fn a_failing_ensure_is_an_event_and_a_retry() {
    let f = fixture();
    *f.cloud.fail_ensure.lock().expect("lock") = Some(CloudError::Failed("no quota".to_owned()));
    f.services
        .add(Arc::new(service("lb", "LoadBalancer", "TCP")))
        .expect("add");
    let err = f.controller.sync("default/lb").await.expect_err("fails");
    assert_eq!(err.to_string(), "failed to ensure load balancer: no quota");
    let events = f.recorder.events();
    let last = events.last().expect("event");
    assert_eq!(last.reason, "SyncLoadBalancerFailed");
    assert_eq!(last.type_, EventType::Warning);
    assert_eq!(
        last.message,
        "Error syncing load balancer: failed to ensure load balancer: no quota"
    );
    // Only the finalizer was written.
    assert_eq!(f.client.patches().len(), 1);
}

/// `ImplementedElsewhere` is not an error and writes no status.
#[tokio::test]
async fn implemented_elsewhere_is_a_quiet_success() {
    let f = fixture();
    *f.cloud.fail_ensure.lock().expect("lock") = Some(CloudError::ImplementedElsewhere);
    let lb = with_finalizer(service("lb", "LoadBalancer", "TCP"));
    let op = f
        .controller
        .sync_load_balancer_if_needed(&lb)
        .await
        .expect("ok");
    assert_eq!(op, Operation::Ensure);
    assert!(f.client.patches().is_empty());
    assert_eq!(f.recorder.reasons(), ["EnsuringLoadBalancer"]);
}

/// A status patch that finds the Service gone is not an error (upstream's NotFound case).
#[tokio::test]
async fn a_service_gone_before_its_status_patch_is_not_an_error() {
    let f = fixture();
    f.client
        .fail_next(api_status::not_found("services", "gone"));
    let gone = with_status(deleted(with_finalizer(service(
        "gone",
        "LoadBalancer",
        "TCP",
    ))));
    // The finalizer patch fails with NotFound: that one is an error...
    assert!(
        f.controller
            .sync_load_balancer_if_needed(&gone)
            .await
            .is_err()
    );
    // ...but a NotFound on the status patch is not.
    let f = fixture();
    let lb = with_finalizer(service("lb", "LoadBalancer", "TCP"));
    f.client.fail_next(api_status::not_found("services", "lb"));
    assert_eq!(
        f.controller
            .sync_load_balancer_if_needed(&lb)
            .await
            .expect("ok"),
        Operation::Ensure
    );
}

/// Upstream's `TestProcessServiceDeletion`: a Service that left the cache without the
/// finalizer has its cached load balancer deleted; one never seen needs nothing.
#[tokio::test]
async fn a_deleted_service_without_finalizer_is_cleaned_up_from_the_cache() {
    let f = fixture();
    f.controller
        .sync("default/never-seen")
        .await
        .expect("nothing");
    assert!(f.cloud.calls().is_empty());

    let lb = service("lb", "LoadBalancer", "TCP");
    f.services.add(Arc::new(lb.clone())).expect("add");
    f.controller.sync("default/lb").await.expect("ensure");
    f.services.delete(&lb).expect("delete");
    f.controller.sync("default/lb").await.expect("cleanup");
    assert_eq!(
        f.cloud.calls().last(),
        Some(&Call::Delete("default/lb".to_owned()))
    );
    assert_eq!(
        f.recorder.reasons()[2..],
        ["DeletingLoadBalancer", "DeletedLoadBalancer"]
    );
    // Forgotten: a second pass does nothing.
    let before = f.cloud.calls().len();
    f.controller.sync("default/lb").await.expect("nothing");
    assert_eq!(f.cloud.calls().len(), before);
}

/// Upstream's `TestProcessServiceCreateOrUpdate` "service re-created": a new UID under the
/// same key deletes the old load balancer first.
#[tokio::test]
async fn a_recreated_service_replaces_its_old_load_balancer() {
    let f = fixture();
    let first = service("lb", "LoadBalancer", "TCP");
    f.services.add(Arc::new(first)).expect("add");
    f.controller.sync("default/lb").await.expect("ensure");
    let mut second = service("lb", "LoadBalancer", "TCP");
    second.metadata.uid = Some("uid-new".to_owned());
    f.services.update(Arc::new(second)).expect("update");
    f.controller.sync("default/lb").await.expect("ensure");
    let calls = f.cloud.calls();
    assert_eq!(
        calls,
        [
            Call::Ensure("default/lb".to_owned(), vec!["node0".to_owned()]),
            Call::Delete("default/lb".to_owned()),
            Call::Ensure("default/lb".to_owned(), vec!["node0".to_owned()]),
        ]
    );
}

/// Only Services that want a load balancer (or have one to clean up) are queued, and a
/// relevant change records upstream's event.
#[tokio::test]
async fn the_handlers_queue_what_matters() {
    let f = fixture();
    let handlers = f.controller.event_handlers();
    handlers.service_added(&service("cip", "ClusterIP", "TCP"));
    assert!(f.controller.queue().is_empty());
    let mut classed = service("classed", "LoadBalancer", "TCP");
    classed.spec.as_mut().expect("spec").load_balancer_class = Some("x.io/lb".to_owned());
    handlers.service_added(&classed);
    assert!(f.controller.queue().is_empty());
    handlers.service_added(&service("lb", "LoadBalancer", "TCP"));
    assert_eq!(f.controller.queue().len(), 1);

    let old = service("lb2", "LoadBalancer", "TCP");
    handlers.service_updated(&old, &old.clone());
    assert_eq!(f.controller.queue().len(), 1, "no change, not queued");
    handlers.service_updated(&old, &service("lb2", "NodePort", "TCP"));
    assert_eq!(f.controller.queue().len(), 2);
    let events = f.recorder.events();
    assert_eq!(events[0].reason, "Type");
    assert_eq!(events[0].message, "LoadBalancer -> NodePort");
    // A resync of a Service left with the finalizer queues it for cleanup.
    let stuck = with_finalizer(service("stuck", "ClusterIP", "TCP"));
    handlers.service_updated(&stuck, &stuck.clone());
    assert_eq!(f.controller.queue().len(), 3);
}

/// Upstream's node sync tests: the backends follow the ready nodes, a failed update is
/// retried at the next pass, and nothing is called while the node set is unchanged.
#[tokio::test]
async fn node_sync_updates_backends_when_the_ready_set_changes() {
    let f = fixture();
    let lb = service("lb", "LoadBalancer", "TCP");
    f.services.add(Arc::new(lb.clone())).expect("add");
    f.controller.sync("default/lb").await.expect("ensure");
    // The first pass learns the hosts: a full sync.
    f.controller.node_sync().await;
    assert_eq!(
        f.cloud.calls().last(),
        Some(&Call::Update(
            "default/lb".to_owned(),
            vec!["node0".to_owned()]
        ))
    );
    let before = f.cloud.calls().len();
    f.controller.node_sync().await;
    assert_eq!(f.cloud.calls().len(), before, "unchanged hosts: no call");

    // A new ready node, and one not ready (left out).
    f.nodes.add(Arc::new(node("node1", "True"))).expect("node");
    f.nodes.add(Arc::new(node("node2", "False"))).expect("node");
    *f.cloud.fail_update.lock().expect("lock") = Some(CloudError::Failed("busy".to_owned()));
    f.controller.node_sync().await;
    let want = Call::Update(
        "default/lb".to_owned(),
        vec!["node0".to_owned(), "node1".to_owned()],
    );
    assert_eq!(
        f.cloud.calls().last(),
        Some(&Call::Get("default/lb".to_owned()))
    );
    let events = f.recorder.events();
    let failed = events.last().expect("event");
    assert_eq!(failed.reason, "UpdateLoadBalancerFailed");
    assert_eq!(
        failed.message,
        "Error updating load balancer with new hosts map[node0:{} node1:{}]: busy"
    );
    // Retried at the next pass although the hosts did not change again.
    *f.cloud.fail_update.lock().expect("lock") = None;
    f.controller.node_sync().await;
    assert_eq!(f.cloud.calls().last(), Some(&want));
    assert_eq!(
        f.recorder.reasons().last().map(String::as_str),
        Some("UpdatedLoadBalancer")
    );
    // And not again after it succeeded.
    let before = f.cloud.calls().len();
    f.controller.node_sync().await;
    assert_eq!(f.cloud.calls().len(), before);
}

/// The worker loop retries a failed Service with backoff until it succeeds.
#[tokio::test(start_paused = true)]
async fn a_failed_service_is_retried_through_the_queue() {
    let f = fixture();
    f.client
        .fail_next(api_status::internal_error("etcd is down"));
    let lb = service("lb", "LoadBalancer", "TCP");
    f.services.add(Arc::new(lb.clone())).expect("add");
    f.controller.event_handlers().service_added(&lb);
    assert!(f.controller.process_next_work_item().await);
    assert_eq!(f.cloud.calls().len(), 0, "the finalizer patch failed first");
    assert_eq!(f.controller.queue().len(), 0, "waiting for its backoff");
    tokio::time::sleep(MIN_RETRY_DELAY + Duration::from_millis(10)).await;
    assert_eq!(f.controller.queue().len(), 1);
    assert!(f.controller.process_next_work_item().await);
    assert_eq!(f.cloud.calls().len(), 1);
}

/// Upstream's `nodeSyncLatency` is observed once per node sync pass;
/// `updateLoadBalancerHostLatency` and `loadBalancerSyncCount` once per load balancer whose
/// hosts were updated, `nodeSyncErrorCount` once per failed update.
#[tokio::test]
async fn node_sync_records_its_metrics() {
    use crate::servicelb::ServiceLbMetrics;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    let services = Indexer::new();
    let nodes = Indexer::new();
    let cloud = Arc::new(FakeBalancer::default());
    let metrics = Arc::new(ServiceLbMetrics::new());
    let controller = ServiceLbController::with_cache(
        services.clone(),
        nodes.clone(),
        Arc::new(FakeServiceLbClient::new()),
        cloud.clone(),
        Arc::new(FakeRecorder::new()),
        ServiceLbControllerOptions {
            controller_metrics: Some(Arc::clone(&metrics)),
            ..ServiceLbControllerOptions::default()
        },
    );
    nodes.add(Arc::new(node("node0", "True"))).expect("node");
    services
        .add(Arc::new(service("lb", "LoadBalancer", "TCP")))
        .expect("add");
    controller.sync("default/lb").await.expect("ensure");
    controller.node_sync().await; // full sync: one host update
    controller.node_sync().await; // unchanged: no host update

    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    encode(&mut text, &registry).expect("encode");
    assert!(
        text.contains("service_controller_nodesync_latency_seconds_count 2"),
        "{text}"
    );
    assert!(
        text.contains("service_controller_update_loadbalancer_host_latency_seconds_count 1"),
        "{text}"
    );
    assert!(
        text.contains("service_controller_loadbalancer_sync_total 1"),
        "{text}"
    );
    assert!(
        text.contains("service_controller_nodesync_error_total 0"),
        "{text}"
    );

    // A failed host update counts as a node sync error.
    nodes.add(Arc::new(node("node1", "True"))).expect("node");
    *cloud.fail_update.lock().expect("lock") = Some(CloudError::Failed("busy".to_owned()));
    controller.node_sync().await;
    let mut text = String::new();
    encode(&mut text, &registry).expect("encode");
    assert!(
        text.contains("service_controller_loadbalancer_sync_total 2"),
        "{text}"
    );
    assert!(
        text.contains("service_controller_nodesync_error_total 1"),
        "{text}"
    );
}
