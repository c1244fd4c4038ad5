//! The node lifecycle and taint eviction controllers against the embedded API server.
//!
//! Nodes and their Leases are created by the test, which renews them ("heartbeats") from a
//! task and stops renewing chosen nodes, as a kubelet that died. Grace periods are short;
//! waits are bounded polls of the API and assertions are on API state.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Namespace, Node, NodeCondition, NodeStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kcm_apiserver::testing::TestServer;
use kcm_controllers::nodelifecycle::zone::EvictionRates;
use kcm_controllers::nodelifecycle::{
    ApiLifecycleClient, NodeLifecycleController, NodeLifecycleOptions,
};
use kcm_controllers::tainteviction::TaintEvictionController;
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::SharedInformerFactory;
use kcm_testing::{
    MetaBuilder, PodSpecBuilder, container, node_condition, pod_condition, toleration,
};
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);
const NODES: [&str; 3] = ["n1", "n2", "n3"];

async fn poll<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn ready_condition(status: &str) -> NodeCondition {
    let now = jiff::Timestamp::now();
    node_condition("Ready", status)
        .reason("KubeletReady")
        .heartbeat(now)
        .transitioned_at(now)
        .build()
}

/// Posts a fresh Ready=True status, as a kubelet does.
async fn post_ready(nodes: &Api<Node>, name: &str) {
    for _ in 0..5 {
        let Ok(mut node) = nodes.get(name).await else {
            continue;
        };
        node.status = Some(NodeStatus {
            conditions: Some(vec![ready_condition("True")]),
            ..NodeStatus::default()
        });
        if nodes
            .replace_status(name, &PostParams::default(), &node)
            .await
            .is_ok()
        {
            return;
        }
    }
    panic!("posting node status of {name}");
}

async fn renew_lease(leases: &Api<Lease>, name: &str) {
    let spec = LeaseSpec {
        holder_identity: Some(name.into()),
        lease_duration_seconds: Some(40),
        renew_time: Some(MicroTime(jiff::Timestamp::now())),
        ..LeaseSpec::default()
    };
    match leases.get(name).await {
        Ok(mut lease) => {
            lease.spec = Some(spec);
            let _ = leases.replace(name, &PostParams::default(), &lease).await;
        }
        Err(_) => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("kube-node-lease".into()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            let _ = leases.create(&PostParams::default(), &lease).await;
        }
    }
}

fn pod(name: &str, node: &str) -> Pod {
    let tolerate = |key: &str| toleration(key).exists().effect("NoExecute").seconds(5);
    kcm_testing::pod(name)
        .namespace("default")
        .node(node)
        .container(container("c").image("busybox"))
        .toleration(tolerate("node.kubernetes.io/unreachable"))
        .toleration(tolerate("node.kubernetes.io/not-ready"))
        .build()
}

fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn taints(node: &Node) -> Vec<String> {
    let mut t: Vec<String> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    t.sort();
    t
}

fn pod_ready(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

/// Gone, or being deleted.
fn evicted(pod: Option<&Pod>) -> bool {
    pod.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_node_is_tainted_and_its_pods_evicted_and_all_down_evicts_nothing() {
    let server = TestServer::start().await;
    let client = server.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in ["default", "kube-node-lease"] {
        let _ = namespaces
            .create(&PostParams::default(), &kcm_testing::namespace(ns).build())
            .await;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in NODES {
        let node = kcm_testing::node(name).build();
        nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("node");
        post_ready(&nodes, name).await;
        renew_lease(&leases, name).await;
        let p = pods
            .create(&PostParams::default(), &pod(&format!("p-{name}"), name))
            .await
            .expect("pod");
        let mut p = p;
        p.status.get_or_insert_with(Default::default).conditions =
            Some(vec![pod_condition("Ready", "True").build()]);
        pods.replace_status(&format!("p-{name}"), &PostParams::default(), &p)
            .await
            .expect("pod status");
    }

    // Heartbeats: Lease renewals every 500ms for every node not stopped.
    let stopped: Arc<Mutex<HashSet<String>>> = Arc::default();
    let cancel = CancellationToken::new();
    let heartbeat = {
        let (stopped, leases, cancel) = (stopped.clone(), leases.clone(), cancel.clone());
        tokio::spawn(async move {
            while !cancel.is_cancelled() {
                let live: Vec<&str> = {
                    let s = stopped.lock().expect("lock");
                    NODES.iter().copied().filter(|n| !s.contains(*n)).collect()
                };
                for n in live {
                    renew_lease(&leases, n).await;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };

    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let lifecycle_client = Arc::new(ApiLifecycleClient::new(client.clone()));
    let options = NodeLifecycleOptions {
        node_monitor_period: Duration::from_secs(1),
        node_startup_grace_period: Duration::from_secs(10),
        node_monitor_grace_period: Duration::from_secs(4),
        rates: EvictionRates {
            eviction_qps: 10.0,
            secondary_eviction_qps: 1.0,
            large_cluster_threshold: 50,
            unhealthy_zone_threshold: 0.55,
        },
        queue_metrics: None,
    };
    let recorder = FakeRecorder::new();
    let lifecycle = NodeLifecycleController::new(
        &factory,
        lifecycle_client.clone(),
        Arc::new(recorder.clone()),
        options,
    );
    let eviction_recorder = FakeRecorder::new();
    let eviction = TaintEvictionController::new(
        &factory,
        lifecycle_client,
        Arc::new(eviction_recorder.clone()),
        None,
    );
    factory.start(&cancel);
    let runs = [
        tokio::spawn(lifecycle.run(cancel.clone())),
        tokio::spawn(eviction.run(cancel.clone())),
    ];

    // Stop n1's heartbeats.
    stopped.lock().expect("lock").insert("n1".into());
    poll("n1 Ready=Unknown", || async {
        nodes.get("n1").await.ok().is_some_and(|n| {
            condition(&n, "Ready").is_some_and(|c| {
                c.status == "Unknown"
                    && c.reason.as_deref() == Some("NodeStatusUnknown")
                    && c.message.as_deref() == Some("Kubelet stopped posting node status.")
            })
        })
    })
    .await;
    poll("n1 pod marked not ready or evicted", || async {
        pods.get_opt("p-n1")
            .await
            .ok()
            .flatten()
            .is_none_or(|p| pod_ready(&p).as_deref() == Some("False") || evicted(Some(&p)))
    })
    .await;
    poll(
        "unreachable NoSchedule and NoExecute taints on n1",
        || async {
            nodes.get("n1").await.ok().is_some_and(|n| {
                let t = taints(&n);
                t.contains(&"node.kubernetes.io/unreachable:NoExecute".to_owned())
                    && t.contains(&"node.kubernetes.io/unreachable:NoSchedule".to_owned())
            })
        },
    )
    .await;
    poll("n1's pod evicted after tolerating 5s", || async {
        evicted(pods.get_opt("p-n1").await.ok().flatten().as_ref())
    })
    .await;
    assert!(
        eviction_recorder
            .events()
            .iter()
            .any(|e| e.reason == "TaintManagerEviction"
                && e.message == "Marking for deletion Pod default/p-n1")
    );
    for name in ["n2", "n3"] {
        let n = nodes.get(name).await.expect("node");
        assert!(taints(&n).is_empty(), "{name}: {:?}", taints(&n));
        assert!(!evicted(
            pods.get_opt(&format!("p-{name}"))
                .await
                .expect("get")
                .as_ref()
        ));
    }

    // Resume n1: kubelet posts Ready=True again; taints go.
    stopped.lock().expect("lock").remove("n1");
    post_ready(&nodes, "n1").await;
    poll("n1 taints removed", || async {
        nodes
            .get("n1")
            .await
            .ok()
            .is_some_and(|n| taints(&n).is_empty())
    })
    .await;

    // Every node goes silent: the control plane is presumed cut off; nothing is evicted.
    stopped
        .lock()
        .expect("lock")
        .extend(NODES.iter().map(|n| (*n).to_owned()));
    poll("all nodes Unknown", || async {
        let mut all = true;
        for name in NODES {
            all &= nodes
                .get(name)
                .await
                .ok()
                .is_some_and(|n| condition(&n, "Ready").is_some_and(|c| c.status == "Unknown"));
        }
        all
    })
    .await;
    // Longer than the tolerations (5s) plus several monitor periods.
    tokio::time::sleep(Duration::from_secs(8)).await;
    for name in NODES {
        let n = nodes.get(name).await.expect("node");
        assert!(
            !taints(&n).iter().any(|t| t.ends_with(":NoExecute")),
            "{name}: {:?}",
            taints(&n)
        );
    }
    for name in ["n2", "n3"] {
        assert!(
            !evicted(
                pods.get_opt(&format!("p-{name}"))
                    .await
                    .expect("get")
                    .as_ref()
            ),
            "p-{name} must not be evicted when every node is down"
        );
    }

    cancel.cancel();
    let _ = heartbeat.await;
    for run in runs {
        let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    }
}
