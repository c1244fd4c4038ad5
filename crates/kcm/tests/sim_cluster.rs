//! The scheduler and the simulated nodes against the embedded API server, over real HTTPS.
//!
//! Each test starts a `TestServer` on 127.0.0.1:0, then the scheduler and the simulator with
//! their own informer factories, exactly as `kcm sim` wires them, and watches the cluster
//! through the API. Time is real (the server is), so intervals are shortened and every wait
//! has a deadline.

mod support;

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kcm_apiserver::testing::TestServer;
use kcm_sim::SimulatorConfig;
use kcm_sim::node::{ANNOTATION_HEARTBEAT, NODE_LEASE_NAMESPACE};
use kcm_testing::{PodSpecBuilder, container};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{init_logging, start_scheduler, start_simulator};
use tokio_util::sync::CancellationToken;

/// How long any single wait may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `f` every 50 ms until it yields a value; panics naming `what` after [`DEADLINE`].
async fn wait_for<T, F, Fut>(what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    support::poll(what, DEADLINE, Duration::from_millis(50), f).await
}

fn sim_config(nodes: usize) -> SimulatorConfig {
    SimulatorConfig {
        nodes,
        pod_ready_delay: Duration::from_millis(200),
        // No node IPAM controller here: nodes pick their own pod CIDRs.
        assign_pod_cidrs: true,
        ..SimulatorConfig::default()
    }
}

fn pod(name: &str, cpu: &str) -> Pod {
    kcm_testing::pod(name)
        .container(container("nginx").image("nginx:1.27").request("cpu", cpu))
        .build()
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn condition<'a>(p: &'a Pod, type_: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
}

fn node_of(p: &Pod) -> Option<&str> {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

/// Waits until pod `name` is Running and Ready, and returns it.
async fn running(pods: &Api<Pod>, name: &str) -> Pod {
    wait_for(&format!("pod {name} running and ready"), || async {
        let p = pods.get_opt(name).await.ok().flatten()?;
        let ready = condition(&p, "Ready").is_some_and(|c| c.status == "True");
        (phase(&p) == Some("Running") && ready).then_some(p)
    })
    .await
}

fn renew_time(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_nodes_register_schedule_run_and_finalize_pods() {
    init_logging();
    let server = TestServer::start().await;
    let client = server.client();
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    start_scheduler(client.clone(), &cancel);
    start_simulator(client.clone(), sim_config(3), &cancel);

    // N nodes register, Ready, each with a Lease it holds.
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let registered = wait_for("3 ready nodes with leases", || async {
        let list = nodes.list(&ListParams::default()).await.ok()?;
        let ready = list
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        (ready == 3).then_some(list.items)
    })
    .await;
    for node in &registered {
        let name = node.metadata.name.clone().expect("name");
        let lease = wait_for(&format!("lease of {name}"), || async {
            leases.get_opt(&name).await.ok().flatten()
        })
        .await;
        assert_eq!(
            lease.spec.and_then(|s| s.holder_identity).as_deref(),
            Some(name.as_str())
        );
    }

    // A pod gets scheduled, runs and becomes ready with an IP from its node's CIDR.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("web", "100m"))
        .await
        .expect("create web");
    let web = running(&pods, "web").await;
    let node_name = node_of(&web).expect("bound").to_owned();
    let node = nodes.get(&node_name).await.expect("node");
    let cidr = node
        .spec
        .as_ref()
        .and_then(|s| s.pod_cidr.clone())
        .expect("pod CIDR");
    let prefix = cidr.trim_end_matches("0/24");
    let status = web.status.clone().expect("status");
    let ip = status.pod_ip.clone().expect("pod IP");
    assert!(ip.starts_with(prefix), "{ip} outside {cidr}");
    let internal_ip = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.clone());
    assert_eq!(status.host_ip, internal_ip);
    for c in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert_eq!(
            condition(&web, c).map(|c| c.status.as_str()),
            Some("True"),
            "{c}"
        );
    }
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let scheduled = wait_for("Scheduled event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("Scheduled")
                && e.involved_object.name.as_deref() == Some("web")
        })
    })
    .await;
    assert_eq!(
        scheduled.message.as_deref(),
        Some(format!("Successfully assigned default/web to {node_name}").as_str())
    );

    // A cordoned node gets no new pods.
    nodes
        .patch(
            "kcm-node-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .expect("cordon");
    // A probe pinned to the cordoned node proves the scheduler has seen the cordon (its
    // node and pod watches are not ordered with each other).
    let mut probe = pod("probe", "100m");
    if let Some(spec) = probe.spec.as_mut() {
        spec.node_selector = Some(
            [(
                "kubernetes.io/hostname".to_string(),
                "kcm-node-0".to_string(),
            )]
            .into(),
        );
    }
    pods.create(&PostParams::default(), &probe)
        .await
        .expect("create probe");
    let message = wait_for("probe refused by the cordon", || async {
        let p = pods.get_opt("probe").await.ok().flatten()?;
        let c = condition(&p, "PodScheduled")?;
        let message = c.message.clone()?;
        (c.status == "False" && message.contains("were unschedulable")).then_some(message)
    })
    .await;
    assert_eq!(
        message,
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    pods.delete("probe", &DeleteParams::default())
        .await
        .expect("delete probe");
    for i in 0..6 {
        pods.create(
            &PostParams::default(),
            &pod(&format!("after-cordon-{i}"), "100m"),
        )
        .await
        .expect("create");
    }
    for i in 0..6 {
        let p = running(&pods, &format!("after-cordon-{i}")).await;
        assert_ne!(
            node_of(&p),
            Some("kcm-node-0"),
            "pod {i} on the cordoned node"
        );
    }

    // A pod that fits nowhere is marked Unschedulable and gets a FailedScheduling event.
    pods.create(&PostParams::default(), &pod("huge", "1000"))
        .await
        .expect("create huge");
    let huge = wait_for("huge unschedulable", || async {
        let p = pods.get_opt("huge").await.ok().flatten()?;
        condition(&p, "PodScheduled")
            .is_some_and(|c| c.status == "False")
            .then_some(p)
    })
    .await;
    let c = condition(&huge, "PodScheduled").expect("condition");
    assert_eq!(c.reason.as_deref(), Some("Unschedulable"));
    let message = c.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("0/3 nodes are available: ")
            && message.contains("1 node(s) were unschedulable")
            && message.contains("2 Insufficient cpu"),
        "{message}"
    );
    assert_eq!(node_of(&huge), None);
    wait_for("FailedScheduling event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.type_.as_deref() == Some("Warning")
                && e.involved_object.name.as_deref() == Some("huge")
        })
    })
    .await;

    // Deleting a pod with a grace period: the simulated kubelet finalizes it.
    pods.delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for("web finalized", || async {
        match pods.get_opt("web").await {
            Ok(None) => Some(()),
            _ => None,
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_annotation_stops_and_resumes_lease_renewals() {
    init_logging();
    let server = TestServer::start().await;
    let client = server.client();
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    let config = SimulatorConfig {
        lease_renew_interval: Duration::from_millis(300),
        ..sim_config(1)
    };
    start_simulator(client.clone(), config, &cancel);
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let nodes: Api<Node> = Api::all(client.clone());
    let first = wait_for("lease", || async {
        leases
            .get_opt("kcm-node-0")
            .await
            .ok()
            .flatten()
            .and_then(|l| renew_time(&l))
    })
    .await;
    wait_for("a renewal", || async {
        let now = renew_time(&leases.get("kcm-node-0").await.ok()?)?;
        (now != first).then_some(())
    })
    .await;

    nodes
        .patch(
            "kcm-node-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION_HEARTBEAT: "stopped"}}})),
        )
        .await
        .expect("stop heartbeat");
    // Once the simulator has seen the annotation, renewals stop: two reads more than two
    // renew intervals apart agree. Then they stay stopped.
    let stopped = wait_for("renewals to stop", || async {
        let before = renew_time(&leases.get("kcm-node-0").await.ok()?);
        tokio::time::sleep(Duration::from_millis(700)).await;
        let after = renew_time(&leases.get("kcm-node-0").await.ok()?);
        (before == after).then_some(after)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        renew_time(&leases.get("kcm-node-0").await.expect("lease")),
        stopped,
        "no renewals while the heartbeat is stopped"
    );

    nodes
        .patch(
            "kcm-node-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION_HEARTBEAT: null}}})),
        )
        .await
        .expect("resume heartbeat");
    wait_for("renewals again", || async {
        let now = renew_time(&leases.get("kcm-node-0").await.ok()?);
        (now != stopped).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_simulator_adopts_its_nodes_and_keeps_pod_ips() {
    init_logging();
    let server = TestServer::start().await;
    let client = server.client();
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    start_scheduler(client.clone(), &cancel);
    let first_run = CancellationToken::new();
    let first = start_simulator(client.clone(), sim_config(1), &first_run);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("before", "100m"))
        .await
        .expect("create");
    let before = running(&pods, "before").await;
    let before_ip = before.status.and_then(|s| s.pod_ip).expect("ip");
    let nodes: Api<Node> = Api::all(client.clone());
    let uid = nodes.get("kcm-node-0").await.expect("node").metadata.uid;
    first_run.cancel();
    first.await.expect("first run stops");

    let second_run = cancel.child_token();
    start_simulator(client.clone(), sim_config(1), &second_run);
    pods.create(&PostParams::default(), &pod("after", "100m"))
        .await
        .expect("create");
    let after = running(&pods, "after").await;
    let after_ip = after.status.and_then(|s| s.pod_ip).expect("ip");
    assert_ne!(after_ip, before_ip, "the running pod keeps its IP");
    assert_eq!(
        nodes.get("kcm-node-0").await.expect("node").metadata.uid,
        uid,
        "the node was adopted, not recreated"
    );
    let still = running(&pods, "before").await;
    assert_eq!(still.status.and_then(|s| s.pod_ip), Some(before_ip));
}

/// A claim of the simulated DRA driver's class asking for `count` devices.
fn gpu_claim(name: &str, count: i64) -> k8s_openapi::api::resource::v1::ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{
            "name": "gpu",
            "exactly": {"deviceClassName": kcm_sim::dra::DRIVER, "count": count},
        }]}},
    }))
    .expect("claim")
}

/// `pod(name)` naming the ResourceClaim `claim` directly.
fn pod_with_claim(name: &str, claim: &str) -> Pod {
    let mut p = pod(name, "100m");
    if let Some(spec) = p.spec.as_mut() {
        spec.resource_claims = Some(vec![
            serde_json::from_value(json!({"name": "gpu", "resourceClaimName": claim}))
                .expect("entry"),
        ]);
        spec.containers[0].resources.get_or_insert_default().claims = Some(vec![
            serde_json::from_value(json!({"name": "gpu"})).expect("claim ref"),
        ]);
    }
    p
}

/// The PodScheduled=False message of pod `name`, once there is one containing `part`.
async fn unschedulable_message(pods: &Api<Pod>, name: &str, part: &str) -> String {
    wait_for(&format!("pod {name} unschedulable ({part})"), || async {
        let p = pods.get_opt(name).await.ok().flatten()?;
        let c = condition(&p, "PodScheduled")?;
        let message = c.message.clone()?;
        (c.status == "False" && message.contains(part)).then_some(message)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_with_resource_claims_get_simulated_devices_allocated_before_they_run() {
    use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
    init_logging();
    let server = TestServer::start().await;
    let client = server.client();
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    start_scheduler(client.clone(), &cancel);
    start_simulator(client.clone(), sim_config(2), &cancel);

    // The driver publishes its class and one slice (2 devices) per node, owned by the node.
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let published = wait_for("2 resource slices", || async {
        let list = slices.list(&ListParams::default()).await.ok()?;
        (list.items.len() == 2).then_some(list.items)
    })
    .await;
    for slice in &published {
        let node = slice.spec.node_name.clone().expect("node name");
        assert_eq!(slice.spec.driver, kcm_sim::dra::DRIVER);
        assert_eq!(slice.spec.pool.name, node);
        assert_eq!(slice.spec.devices.as_ref().map(Vec::len), Some(2));
        let owner = &slice.metadata.owner_references.clone().unwrap_or_default()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Node", node.as_str())
        );
    }
    let classes: Api<DeviceClass> = Api::all(client.clone());
    wait_for("the device class", || async {
        classes.get_opt(kcm_sim::dra::DRIVER).await.ok().flatten()
    })
    .await;

    // A pod naming a claim that does not exist yet waits for it, then runs once it exists.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod_with_claim("trainer", "gpu"))
        .await
        .expect("create trainer");
    let message = unschedulable_message(&pods, "trainer", "could not find").await;
    assert_eq!(
        message,
        "0/2 nodes are available: could not find ResourceClaim \"default/gpu\". preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    claims
        .create(&PostParams::default(), &gpu_claim("gpu", 1))
        .await
        .expect("create claim");
    let trainer = running(&pods, "trainer").await;
    let node = node_of(&trainer).expect("bound").to_owned();

    // The claim was allocated on the pod's node and reserved for it.
    let claim = claims.get("gpu").await.expect("claim");
    assert_eq!(
        claim.metadata.finalizers,
        Some(vec![kcm_sim::dra::DELETE_PROTECTION_FINALIZER.to_owned()])
    );
    let status = claim.status.expect("status");
    let results = status
        .allocation
        .as_ref()
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.clone())
        .unwrap_or_default();
    assert_eq!(results.len(), 1);
    assert_eq!(
        (
            results[0].request.as_str(),
            results[0].driver.as_str(),
            results[0].pool.as_str()
        ),
        ("gpu", kcm_sim::dra::DRIVER, node.as_str())
    );
    let reserved = status.reserved_for.unwrap_or_default();
    assert_eq!(reserved.len(), 1);
    assert_eq!(
        reserved[0].uid,
        trainer.metadata.uid.clone().unwrap_or_default()
    );

    // Three more devices fit nowhere (one node has 1 free, the other 2): unschedulable.
    claims
        .create(&PostParams::default(), &gpu_claim("three", 3))
        .await
        .expect("create claim");
    pods.create(&PostParams::default(), &pod_with_claim("greedy", "three"))
        .await
        .expect("create greedy");
    let message = unschedulable_message(&pods, "greedy", "cannot allocate").await;
    assert_eq!(
        message,
        "0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    // Two devices fit the other node only.
    claims
        .create(&PostParams::default(), &gpu_claim("two", 2))
        .await
        .expect("create claim");
    pods.create(&PostParams::default(), &pod_with_claim("pair", "two"))
        .await
        .expect("create pair");
    let pair = running(&pods, "pair").await;
    assert_ne!(node_of(&pair), Some(node.as_str()));
}
