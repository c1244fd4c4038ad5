//! The ReplicationController manager against the embedded API server: RCs keep their replicas through the ReplicaSet logic, adopt orphans, and report status.

mod manager_support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kcm_apiserver::testing::TestServer;
use kcm_controllers::replication::ReplicationManager;
use kcm_machinery::controller::get_controller_of;
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::SharedInformerFactory;
use kcm_testing::{MetaBuilder, PodSpecBuilder, container, pod, replication_controller};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use manager_support::{timed, wait_until};
use serde_json::json;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const TEST_TIMEOUT: Duration = Duration::from_secs(120);

async fn pods(client: &kube::Client) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.list(&ListParams::default().labels("app=frontend"))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

#[tokio::test]
async fn rc_scales_adopts_and_reports() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        // An orphan that matches, made before the RC.
        let orphan = pod("stray")
            .labels(&[("app", "frontend")])
            .container(container("c").image("pause"))
            .build();
        let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");
        pod_api
            .create(&PostParams::default(), &orphan)
            .await
            .expect("create orphan");

        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let manager = ReplicationManager::new(
            &factory,
            client.clone(),
            Arc::new(FakeRecorder::new()),
            None,
        );
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        tokio::spawn(manager.run(2, cancel.clone()));

        let rc = replication_controller("frontend")
            .replicas(3)
            .selecting(&[("app", "frontend")])
            .container(container("c").image("pause"))
            .build();
        let rcs: Api<ReplicationController> = Api::namespaced(client.clone(), "default");
        let created = rcs
            .create(&PostParams::default(), &rc)
            .await
            .expect("create rc");
        let uid = created.metadata.uid.clone().unwrap_or_default();
        wait_until("three pods owned by the RC, the orphan adopted", || async {
            let p = pods(&client).await;
            p.len() == 3
                && p.iter().all(|p| {
                    get_controller_of(&p.metadata)
                        .is_some_and(|r| r.kind == "ReplicationController" && r.uid == uid)
                })
                && p.iter()
                    .any(|p| p.metadata.name.as_deref() == Some("stray"))
        })
        .await;
        wait_until("status replicas 3", || async {
            rcs.get("frontend").await.is_ok_and(|r| {
                r.status
                    .is_some_and(|s| s.replicas == 3 && s.observed_generation == Some(1))
            })
        })
        .await;
        rcs.patch(
            "frontend",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale down");
        wait_until("one pod left", || async { pods(&client).await.len() == 1 }).await;
        cancel.cancel();
    })
    .await;
}
