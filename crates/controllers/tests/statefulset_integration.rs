//! The StatefulSet controller against the embedded API server: ordered creation with claims, scale-down in reverse, revisions.
//!
//! There is no kubelet: tests mark pods Running and Ready through `pods/status`, and pods
//! (unscheduled) are deleted at once. Waits are bounded polls of the API.

mod manager_support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kcm_apiserver::testing::TestServer;
use kcm_controllers::statefulset::{StatefulSetController, StatefulSetControllerOptions};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::SharedInformerFactory;
use kcm_testing::{WorkloadBuilder, container, pvc, stateful_set};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use manager_support::{timed, wait_until};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TEST_TIMEOUT: Duration = Duration::from_secs(120);

async fn pod_names(client: &kube::Client) -> Vec<String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut names: Vec<String> = api
        .list(&ListParams::default().labels("app=web"))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

async fn mark_ready(client: &kube::Client, name: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let now = jiff::Timestamp::now().to_string();
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}});
    let _ = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await;
}

/// OrderedReady: web-1 only after web-0 is Ready, claims `www-web-N` first; scale to 1
/// deletes web-2 then web-1; the revision is recorded.
#[tokio::test]
async fn ordered_ready_scale_up_and_down() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let controller = Arc::new(StatefulSetController::new(
            &factory,
            client.clone(),
            Arc::new(FakeRecorder::new()),
            StatefulSetControllerOptions::default(),
        ));
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        tokio::spawn(Arc::clone(&controller).run(2, cancel.clone()));

        let set = stateful_set("web")
            .replicas(3)
            .selecting(&[("app", "web")])
            .container(container("nginx").image("nginx:1"))
            .service_name("nginx")
            .volume_claim_template(pvc("www").storage("1Gi"))
            .build();
        let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
        sets.create(&PostParams::default(), &set)
            .await
            .expect("create set");
        wait_until("web-0 exists", || async {
            pod_names(&client).await == ["web-0"]
        })
        .await;
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
        assert!(
            claims
                .get_opt("www-web-0")
                .await
                .expect("get claim")
                .is_some()
        );
        // A pass that saw web-0 created (status replicas 1) stopped there: it is not Ready.
        wait_until("status counts web-0", || async {
            sets.get("web")
                .await
                .is_ok_and(|s| s.status.is_some_and(|st| st.replicas == 1))
        })
        .await;
        assert_eq!(pod_names(&client).await, ["web-0"], "web-1 waits for web-0");

        for (ready, next) in [("web-0", "web-1"), ("web-1", "web-2")] {
            mark_ready(&client, ready).await;
            wait_until(&format!("{next} exists"), || async {
                pod_names(&client).await.contains(&next.to_owned())
            })
            .await;
        }
        mark_ready(&client, "web-2").await;
        wait_until("status shows three ready replicas", || async {
            sets.get("web").await.is_ok_and(|s| {
                s.status.is_some_and(|st| {
                    st.ready_replicas == Some(3) && st.current_revision == st.update_revision
                })
            })
        })
        .await;

        sets.patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale");
        wait_until("scaled to web-0", || async {
            pod_names(&client).await == ["web-0"]
        })
        .await;
        let claim_names: Vec<String> = claims
            .list(&ListParams::default())
            .await
            .expect("claims")
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        assert_eq!(claim_names.len(), 3, "claims are retained");
        let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), "default");
        assert_eq!(
            revisions
                .list(&ListParams::default())
                .await
                .expect("revisions")
                .items
                .len(),
            1
        );
        cancel.cancel();
    })
    .await;
}
