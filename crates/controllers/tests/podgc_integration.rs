//! The pod garbage collector against the embedded API server: real HTTP, real informers, short periods (a pass every 200 ms, a 500 ms quarantine) so that the passes are seen quickly.

mod manager_support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kcm_apiserver::testing::TestServer;
use kcm_controllers::podgc::{PodGcController, PodGcControllerOptions};
use kcm_machinery::informer::SharedInformerFactory;
use kcm_testing::{PodSpecBuilder, container, pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use manager_support::{timed, wait_until};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TEST_LIMIT: Duration = Duration::from_secs(60);

fn start(client: &kube::Client, threshold: i32) -> (SharedInformerFactory, CancellationToken) {
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let cancel = CancellationToken::new();
    let controller = Arc::new(PodGcController::new(
        &factory,
        client.clone(),
        PodGcControllerOptions {
            terminated_pod_threshold: threshold,
            gc_check_period: Duration::from_millis(200),
            quarantine_time: Duration::from_millis(500),
            ..PodGcControllerOptions::default()
        },
    ));
    factory.start(&cancel);
    tokio::spawn(controller.run(cancel.clone()));
    (factory, cancel)
}

async fn names(pods: &Api<Pod>) -> Vec<String> {
    let mut names: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

/// Pods bound to a node that does not exist are force-deleted once the quarantine has passed
/// (the unit tests check the `Failed`/`DisruptionTarget` patch before it); pods on a node that
/// exists are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_a_deleted_node_are_collected() {
    timed(TEST_LIMIT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let nodes: Api<Node> = Api::all(client.clone());
        nodes
            .create(&PostParams::default(), &kcm_testing::node("alive").build())
            .await
            .expect("node");
        for (name, node) in [("on-ghost", "ghost"), ("on-alive", "alive")] {
            pods.create(
                &PostParams::default(),
                &pod(name)
                    .node(node)
                    .container(container("c").image("busybox"))
                    .build(),
            )
            .await
            .expect("pod");
        }
        let (factory, cancel) = start(&client, 12_500);
        wait_until("the orphan collected", || async {
            names(&pods).await == ["on-alive"]
        })
        .await;
        cancel.cancel();
        factory.shutdown().await;
    })
    .await;
}

/// Beyond `--terminated-pod-gc-threshold` the oldest terminated pods go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_pods_beyond_the_threshold_are_collected() {
    timed(TEST_LIMIT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        for name in ["first", "second", "third"] {
            pods.create(
                &PostParams::default(),
                &pod(name).container(container("c").image("busybox")).build(),
            )
            .await
            .expect("pod");
            pods.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": { "phase": "Succeeded" } })),
            )
            .await
            .expect("status");
            // Creation timestamps have a one-second resolution: keep them apart.
            tokio::time::sleep(Duration::from_millis(1_100)).await;
        }
        let (factory, cancel) = start(&client, 2);
        wait_until("the oldest terminated pod collected", || async {
            names(&pods).await == ["second", "third"]
        })
        .await;
        cancel.cancel();
        factory.shutdown().await;
    })
    .await;
}
