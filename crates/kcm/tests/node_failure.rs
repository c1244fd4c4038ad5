//! A node dies in the embedded cluster: the node lifecycle and taint eviction controllers, the
//! ReplicaSet controller, the scheduler and the simulated kubelets together, as `kcm up` runs
//! them.
//!
//! The controller manager is the real one (built-in registry, flags parsed as `kcm run` parses
//! them) with short node-monitor periods; nodes are `kcm-sim`'s, whose heartbeats stop when a
//! Node carries `sim.kcm.io/heartbeat=stopped`, as a kubelet that died. Time is real (the
//! server is), so every wait is a bounded poll of API state.

mod support;

use std::future::Future;
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, Taint};
use kcm_apiserver::testing::TestServer;
use kcm_controllers::manager::{ControllerManager, ControllerRegistry, ManagerOptions};
use kcm_sim::SimulatorConfig;
use kcm_sim::node::{ANNOTATION_HEARTBEAT, NODE_LEASE_NAMESPACE};
use kcm_testing::{
    PodSpecBuilder, WorkloadBuilder, container, pod_template, replica_set, toleration,
};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// `--node-monitor-grace-period` of these tests.
const GRACE: Duration = Duration::from_secs(3);
/// `--node-monitor-period` of these tests.
const MONITOR_PERIOD: Duration = Duration::from_millis(500);
/// How long the test pods tolerate `unreachable` / `not-ready` NoExecute taints.
const TOLERATION_SECONDS: i64 = 5;
/// How long any single wait may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(60);

/// Polls `f` every 100 ms until it yields a value; panics naming `what` after [`DEADLINE`].
async fn wait_for<T, F, Fut>(what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    support::poll(what, DEADLINE, Duration::from_millis(100), f).await
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    options: ManagerOptions,
}

/// The embedded cluster: API server, controller manager, scheduler, simulated nodes.
struct Cluster {
    server: TestServer,
    manager_metrics: kcm_controllers::manager::ManagerMetrics,
    cancel: CancellationToken,
}

impl Cluster {
    async fn start(nodes: usize) -> Self {
        support::init_logging();
        let server = TestServer::start().await;
        let cancel = CancellationToken::new();
        let grace = format!("--node-monitor-grace-period={}s", GRACE.as_secs());
        let period = format!("--node-monitor-period={}ms", MONITOR_PERIOD.as_millis());
        let options = Cli::try_parse_from([
            "kcm-run",
            "--leader-elect=false",
            "--secure-port=0",
            &grace,
            &period,
        ])
        .expect("flags")
        .options;
        let manager = ControllerManager::new(options, ControllerRegistry::builtin())
            .expect("manager")
            .with_kube_config(server.server().kube_config());
        let manager_metrics = manager.metrics().clone();
        let running = manager
            .start(cancel.child_token())
            .await
            .expect("manager starts");
        tokio::spawn(async move {
            let _ = running.wait().await;
        });

        let client = server.client();
        support::start_scheduler(client.clone(), &cancel);
        support::start_simulator(
            client,
            SimulatorConfig {
                nodes,
                pod_ready_delay: Duration::from_millis(200),
                lease_renew_interval: Duration::from_millis(500),
                node_status_update_period: Duration::from_secs(2),
                // No node IPAM controller here: nodes pick their own pod CIDRs.
                assign_pod_cidrs: true,
                ..SimulatorConfig::default()
            },
            &cancel,
        );
        Self {
            server,
            manager_metrics,
            cancel,
        }
    }

    fn client(&self) -> kube::Client {
        self.server.client()
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client())
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client(), "default")
    }

    /// Waits for `n` Ready nodes and returns their names.
    async fn ready_nodes(&self, n: usize) -> Vec<String> {
        let nodes = self.nodes();
        wait_for(&format!("{n} ready nodes"), || async {
            let list = nodes.list(&ListParams::default()).await.ok()?;
            let ready: Vec<String> = list
                .items
                .iter()
                .filter(|node| ready_condition(node).is_some_and(|c| c.status == "True"))
                .filter_map(|node| node.metadata.name.clone())
                .collect();
            (ready.len() == n).then_some(ready)
        })
        .await
    }

    /// Stops (`true`) or resumes the heartbeats of `node`.
    async fn set_heartbeat_stopped(&self, node: &str, stopped: bool) {
        let value = if stopped {
            json!("stopped")
        } else {
            json!(null)
        };
        let patch = json!({ "metadata": { "annotations": { ANNOTATION_HEARTBEAT: value } } });
        self.nodes()
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("annotate node");
    }

    /// Creates ReplicaSet `web` with `replicas` pods tolerating the node-health NoExecute
    /// taints for [`TOLERATION_SECONDS`], and waits until they all run and are ready.
    async fn replica_set(&self, replicas: i32) -> Vec<Pod> {
        let tolerate = |key: &str| {
            toleration(key)
                .exists()
                .effect("NoExecute")
                .seconds(TOLERATION_SECONDS)
        };
        let rs = replica_set("web")
            .replicas(replicas)
            .selecting(&[("app", "web")])
            .template(
                pod_template()
                    .container(container("nginx").image("nginx:1.27"))
                    .toleration(tolerate("node.kubernetes.io/unreachable"))
                    .toleration(tolerate("node.kubernetes.io/not-ready")),
            )
            .build();
        Api::<ReplicaSet>::namespaced(self.client(), "default")
            .create(&PostParams::default(), &rs)
            .await
            .expect("create replica set");
        let pods = self.pods();
        let want = usize::try_from(replicas).expect("replicas");
        wait_for(&format!("{replicas} ready pods"), || async {
            let list = pods.list(&ListParams::default()).await.ok()?;
            let ready: Vec<Pod> = list.items.into_iter().filter(is_ready).collect();
            (ready.len() == want).then_some(ready)
        })
        .await
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
}

fn pod_condition<'a>(
    pod: &'a Pod,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod_condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

fn has_taint(node: &Node, key: &str, effect: &str) -> bool {
    taints(node)
        .iter()
        .any(|t| t.key == key && t.effect == effect)
}

const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_node_is_tainted_and_its_pods_move_to_other_nodes() {
    let cluster = Cluster::start(3).await;
    let nodes = cluster.nodes();
    let pods = cluster.pods();
    cluster.ready_nodes(3).await;
    let before = cluster.replica_set(6).await;
    let victim = node_of(&before[0]).to_owned();
    let victims: Vec<String> = before
        .iter()
        .filter(|p| node_of(p) == victim)
        .filter_map(|p| p.metadata.name.clone())
        .collect();

    cluster.set_heartbeat_stopped(&victim, true).await;

    // Ready=Unknown, written by the controller after the grace period of silence, judged
    // against the last Lease renewal it saw.
    let unknown = wait_for("the silent node's Ready=Unknown", || async {
        let node = nodes.get(&victim).await.ok()?;
        let ready = ready_condition(&node)?;
        (ready.status == "Unknown").then(|| ready.clone())
    })
    .await;
    assert_eq!(unknown.reason.as_deref(), Some("NodeStatusUnknown"));
    assert_eq!(
        unknown.message.as_deref(),
        Some("Kubelet stopped posting node status.")
    );
    let lease = Api::<Lease>::namespaced(cluster.client(), NODE_LEASE_NAMESPACE)
        .get(&victim)
        .await
        .expect("lease");
    let last_renewal = lease.spec.and_then(|s| s.renew_time).expect("renewed").0;
    let went_unknown = unknown.last_transition_time.expect("transition time").0;
    let silent_for = last_renewal.duration_until(went_unknown);
    // Whole-second resolution of lastTransitionTime: up to 1s either way.
    let limit = GRACE + MONITOR_PERIOD + Duration::from_secs(1);
    assert!(
        silent_for.as_secs_f64() <= limit.as_secs_f64(),
        "Unknown after {silent_for:?} of silence (grace + monitor period = {limit:?})"
    );
    assert!(
        silent_for.as_secs_f64() >= GRACE.as_secs_f64() - 1.0,
        "Unknown after only {silent_for:?} of silence"
    );

    // Both unreachable taints.
    let tainted = wait_for("unreachable NoSchedule + NoExecute taints", || async {
        let node = nodes.get(&victim).await.ok()?;
        (has_taint(&node, UNREACHABLE, "NoSchedule") && has_taint(&node, UNREACHABLE, "NoExecute"))
            .then_some(node)
    })
    .await;
    let no_execute_added = taints(&tainted)
        .into_iter()
        .find(|t| t.key == UNREACHABLE && t.effect == "NoExecute")
        .and_then(|t| t.time_added)
        .expect("NoExecute taint carries timeAdded")
        .0;

    // Its pods: marked not ready, then — after their 5 s toleration — deleted (they stay
    // Terminating: the dead kubelet cannot confirm) with DisruptionTarget set.
    for name in &victims {
        let pod = wait_for(&format!("{name} deleted by taint eviction"), || async {
            let pod = pods.get(name).await.ok()?;
            pod.metadata.deletion_timestamp.is_some().then_some(pod)
        })
        .await;
        let ready = pod_condition(&pod, "Ready").expect("Ready condition");
        assert_eq!(ready.status, "False", "{name} marked not ready");
        let target = pod_condition(&pod, "DisruptionTarget").expect("DisruptionTarget");
        assert_eq!(target.status, "True");
        assert_eq!(target.reason.as_deref(), Some("DeletionByTaintManager"));
        let evicted_at = target.last_transition_time.clone().expect("time").0;
        let waited = no_execute_added.duration_until(evicted_at);
        assert!(
            waited.as_secs_f64() >= (TOLERATION_SECONDS - 1) as f64,
            "{name} evicted {waited:?} after the taint, before its {TOLERATION_SECONDS}s toleration"
        );
    }

    // The ReplicaSet replaces them on the other nodes.
    let after = wait_for("6 ready pods off the dead node", || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        let ready: Vec<Pod> = list.items.into_iter().filter(is_ready).collect();
        (ready.len() == 6 && ready.iter().all(|p| node_of(p) != victim)).then_some(ready)
    })
    .await;
    for pod in &after {
        assert!(
            !victims.contains(pod.metadata.name.as_ref().expect("name")),
            "replacements are new pods"
        );
    }

    // The controller manager's metrics saw it.
    let metrics = cluster.manager_metrics.encode().expect("metrics");
    for needle in [
        "node_collector_evictions_total{zone=\"kcm:\0:zone-",
        "taint_eviction_controller_pod_deletions_total",
        "node_collector_unhealthy_nodes_in_zone",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from metrics");
    }

    // Heartbeats resume: Ready again, taints gone, the Terminating pods finalized.
    cluster.set_heartbeat_stopped(&victim, false).await;
    wait_for("the node Ready and untainted", || async {
        let node = nodes.get(&victim).await.ok()?;
        let ready = ready_condition(&node).is_some_and(|c| c.status == "True");
        (ready && !taints(&node).iter().any(|t| t.key == UNREACHABLE)).then_some(())
    })
    .await;
    wait_for("the evicted pods finalized", || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        (list.items.len() == 6).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_dead_evicts_nothing() {
    let cluster = Cluster::start(3).await;
    let nodes = cluster.nodes();
    let pods = cluster.pods();
    let names = cluster.ready_nodes(3).await;
    let before = cluster.replica_set(3).await;

    for name in &names {
        cluster.set_heartbeat_stopped(name, true).await;
    }
    wait_for("every node Ready=Unknown", || async {
        let list = nodes.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .all(|n| ready_condition(n).is_some_and(|c| c.status == "Unknown"))
            .then_some(())
    })
    .await;

    // Every zone is fully disrupted: the control plane is presumed cut off, so no NoExecute
    // taint stays and no pod is evicted. A node that went Unknown a monitor pass before the
    // others may be tainted for a moment (its zone was only partially down then); the pass
    // that sees the whole zone down lifts it. Wait for that pass instead of guessing its time,
    // then check for longer than the pods' toleration that no taint comes back.
    wait_for("the NoExecute taints lifted", || async {
        let list = nodes.list(&ListParams::default()).await.ok()?;
        (!list
            .items
            .iter()
            .any(|n| taints(n).iter().any(|t| t.effect == "NoExecute")))
        .then_some(())
    })
    .await;
    let watch_for = Duration::from_secs(u64::try_from(TOLERATION_SECONDS).expect("secs") + 3);
    let until = tokio::time::Instant::now() + watch_for;
    let mut no_execute_seen_after_settling = false;
    while tokio::time::Instant::now() < until {
        let list = nodes.list(&ListParams::default()).await.expect("nodes");
        if list
            .items
            .iter()
            .any(|n| taints(n).iter().any(|t| t.effect == "NoExecute"))
        {
            no_execute_seen_after_settling = true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        !no_execute_seen_after_settling,
        "NoExecute taints while every zone is down"
    );
    for pod in &before {
        let name = pod.metadata.name.as_deref().expect("name");
        let now = pods.get(name).await.expect("pod still there");
        assert!(
            now.metadata.deletion_timestamp.is_none(),
            "{name} was evicted although every node is down"
        );
    }
    // Their nodes are still tainted NoSchedule (nothing new lands there).
    for name in &names {
        let node = nodes.get(name).await.expect("node");
        assert!(has_taint(&node, UNREACHABLE, "NoSchedule"), "{name}");
    }
}
