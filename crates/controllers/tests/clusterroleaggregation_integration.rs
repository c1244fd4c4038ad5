//! The ClusterRole aggregation controller against the embedded API server: a CRD's rules labelled `aggregate-to-view` reach `view`, `edit` and `admin` (through the bootstrap roles' selectors), and leave them when the labelled role is deleted.

mod manager_support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::ClusterRole;
use kcm_apiserver::testing::TestServer;
use kcm_controllers::clusterroleaggregation::{ClusterRoleAggregationController, WORKERS};
use kcm_machinery::informer::SharedInformerFactory;
use kube::api::{Api, DeleteParams, PostParams};
use manager_support::{timed, wait_until};
use tokio_util::sync::CancellationToken;

const TEST_LIMIT: Duration = Duration::from_secs(60);

fn has_foos(role: &ClusterRole) -> bool {
    role.rules
        .iter()
        .flatten()
        .any(|r| r.resources.as_deref() == Some(&["foos".to_owned()][..]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labelled_rules_reach_the_aggregated_bootstrap_roles() {
    timed(TEST_LIMIT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let cancel = CancellationToken::new();
        let controller = Arc::new(ClusterRoleAggregationController::new(
            &factory,
            client.clone(),
            None,
        ));
        factory.start(&cancel);
        tokio::spawn(controller.run(WORKERS, cancel.clone()));

        let roles: Api<ClusterRole> = Api::all(client.clone());
        let foo_viewer: ClusterRole = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "foo-viewer", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"apiGroups": ["example.com"], "resources": ["foos"], "verbs": ["get", "list", "watch"]}],
        }))
        .expect("role");
        roles
            .create(&PostParams::default(), &foo_viewer)
            .await
            .expect("create");
        for name in ["view", "edit", "admin"] {
            wait_until(&format!("{name} aggregates foos"), || {
                let roles = roles.clone();
                async move { roles.get(name).await.is_ok_and(|r| has_foos(&r)) }
            })
            .await;
        }
        let view = roles.get("view").await.expect("view");
        assert!(
            view.rules.iter().flatten().any(|r| r.resources.as_deref().is_some_and(|rs| rs.contains(&"pods".to_owned()))),
            "view keeps system:aggregate-to-view's rules"
        );

        roles
            .delete("foo-viewer", &DeleteParams::default())
            .await
            .expect("delete");
        for name in ["view", "edit", "admin"] {
            wait_until(&format!("{name} drops foos"), || {
                let roles = roles.clone();
                async move { roles.get(name).await.is_ok_and(|r| !has_foos(&r)) }
            })
            .await;
        }
        cancel.cancel();
        server.shutdown().await;
    })
    .await;
}
