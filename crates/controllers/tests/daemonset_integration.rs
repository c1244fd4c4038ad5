//! The DaemonSet controller against the embedded API server: real HTTP, real informers, real pod and ControllerRevision writes.
//!
//! There is no scheduler and no kubelet: daemon pods stay unscheduled, pinned to their node by
//! node affinity (so deleting one removes it at once), and tests mark pods ready through
//! `pods/status`. Waits are bounded polls of the API; every assertion is on API state.

mod manager_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcm_apiserver::testing::TestServer;
use kcm_controllers::daemon::util::get_target_node_name;
use kcm_controllers::daemon::{DaemonSetsController, DaemonSetsControllerOptions};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::SharedInformerFactory;
use kcm_testing::{MetaBuilder, container, daemon_set, node, node_condition};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use manager_support::{timed, wait_until};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Bounds each test, so a stuck controller fails instead of hanging CI.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);

struct Cluster {
    _server: TestServer,
    client: kube::Client,
    cancel: CancellationToken,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// A server with `nodes` ready nodes and the DaemonSet controller running.
async fn cluster(nodes: usize) -> Cluster {
    let server = TestServer::start().await;
    let client = server.client();
    let api: Api<Node> = Api::all(client.clone());
    for i in 0..nodes {
        let n = node(&format!("node-{i}"))
            .labels(&[("kubernetes.io/hostname", &format!("node-{i}"))])
            .default_spec()
            .condition(node_condition("Ready", "True"))
            .build();
        api.create(&PostParams::default(), &n)
            .await
            .expect("create node");
    }
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let controller = Arc::new(DaemonSetsController::new(
        &factory,
        client.clone(),
        Arc::new(FakeRecorder::new()),
        DaemonSetsControllerOptions::default(),
    ));
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    tokio::spawn(Arc::clone(&controller).run(2, cancel.clone()));
    Cluster {
        _server: server,
        client,
        cancel,
    }
}

fn ds(name: &str, image: &str) -> DaemonSet {
    daemon_set(name)
        .selecting(&[("app", name)])
        .container(container("agent").image(image))
        .max_unavailable(IntOrString::Int(1))
        .build()
}

async fn pods(client: &kube::Client, app: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

fn nodes_of(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .filter_map(|p| get_target_node_name(p).ok())
        .collect()
}

async fn mark_ready(client: &kube::Client, name: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let now = jiff::Timestamp::now().to_string();
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}});
    let _ = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await;
}

/// One pod per node, pinned by node affinity; status and a first revision recorded.
#[tokio::test]
async fn one_pod_per_node_status_and_history() {
    timed(TEST_TIMEOUT, async {
        let c = cluster(3).await;
        let api: Api<DaemonSet> = Api::namespaced(c.client.clone(), "default");
        api.create(&PostParams::default(), &ds("agent", "pause:1"))
            .await
            .expect("create ds");
        wait_until("one pod on each of the three nodes", || async {
            let p = pods(&c.client, "agent").await;
            p.len() == 3 && nodes_of(&p).len() == 3
        })
        .await;
        for p in pods(&c.client, "agent").await {
            let labels = p.metadata.labels.clone().unwrap_or_default();
            assert!(labels.contains_key("controller-revision-hash"));
            assert_eq!(
                labels.get("pod-template-generation").map(String::as_str),
                Some("1")
            );
            mark_ready(&c.client, p.metadata.name.as_deref().unwrap_or_default()).await;
        }
        wait_until("status counts three ready pods", || async {
            let d = api.get("agent").await.expect("get ds");
            d.status.is_some_and(|s| {
                s.desired_number_scheduled == 3
                    && s.number_ready == 3
                    && s.number_available == Some(3)
                    && s.updated_number_scheduled == Some(3)
                    && s.observed_generation == Some(1)
            })
        })
        .await;
        let revisions: Api<ControllerRevision> = Api::namespaced(c.client.clone(), "default");
        let list = revisions
            .list(&ListParams::default())
            .await
            .expect("list revisions");
        assert_eq!(list.items.len(), 1);
        assert_eq!(list.items[0].revision, 1);
    })
    .await;
}

/// A nodeSelector change moves the pods; a template change rolls them to a new revision,
/// keeping the old one as history.
#[tokio::test]
async fn node_selector_and_template_changes() {
    timed(TEST_TIMEOUT, async {
        let c = cluster(3).await;
        let nodes: Api<Node> = Api::all(c.client.clone());
        nodes
            .patch(
                "node-0",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"role": "edge"}}})),
            )
            .await
            .expect("label node");
        let api: Api<DaemonSet> = Api::namespaced(c.client.clone(), "default");
        api.create(&PostParams::default(), &ds("agent", "pause:1"))
            .await
            .expect("create ds");
        wait_until("three pods", || async {
            pods(&c.client, "agent").await.len() == 3
        })
        .await;

        let only_edge = json!({"spec": {"template": {"spec": {"nodeSelector": {"role": "edge"}}}}});
        api.patch("agent", &PatchParams::default(), &Patch::Merge(only_edge))
            .await
            .expect("patch");
        wait_until("only node-0 keeps a pod", || async {
            let p = pods(&c.client, "agent").await;
            nodes_of(&p) == BTreeSet::from(["node-0".to_owned()]) && p.len() == 1
        })
        .await;
        let p = pods(&c.client, "agent").await;
        assert_eq!(
            p[0].metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("pod-template-generation"))
                .map(String::as_str),
            Some("2")
        );
        let revisions: Api<ControllerRevision> = Api::namespaced(c.client.clone(), "default");
        wait_until("two revisions", || async {
            revisions
                .list(&ListParams::default())
                .await
                .is_ok_and(|l| l.items.len() == 2)
        })
        .await;
    })
    .await;
}
