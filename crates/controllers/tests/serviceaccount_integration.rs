//! The service account controller against the embedded API server: every active namespace gets a `default` ServiceAccount, and keeps it.
//!
//! Only the service account controller runs. Time is real, so waiting is polling with a
//! deadline that only bounds a failure.

mod manager_support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kcm_apiserver::testing::TestServer;
use kcm_controllers::serviceaccount::{
    SERVICE_ACCOUNT_WORKERS, ServiceAccountsController, ServiceAccountsControllerOptions,
};
use kcm_machinery::informer::SharedInformerFactory;
use kube::api::{Api, DeleteParams, PostParams};
use manager_support::{timed, wait_until};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Bounds the test, so a stuck controller fails instead of hanging CI.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Waits until `namespace` holds a `default` ServiceAccount and returns its uid.
async fn default_account(client: &kube::Client, namespace: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    wait_until(&format!("{namespace}/default exists"), || {
        let accounts = accounts.clone();
        async move { matches!(accounts.get_opt("default").await, Ok(Some(_))) }
    })
    .await;
    accounts
        .get("default")
        .await
        .expect("default account")
        .metadata
        .uid
        .expect("uid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_gets_a_default_account_that_comes_back_when_deleted() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();

        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let controller = Arc::new(ServiceAccountsController::new(
            &factory,
            client.clone(),
            ServiceAccountsControllerOptions::default(),
        ));
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        let task = tokio::spawn(
            controller
                .clone()
                .run(SERVICE_ACCOUNT_WORKERS, cancel.clone()),
        );

        // The namespaces the server starts with.
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            default_account(&client, ns).await;
        }

        // A new namespace.
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "team"}})).expect("ns"),
            )
            .await
            .expect("create namespace");
        let first = default_account(&client, "team").await;

        // Deleted, it is created again (a new object).
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "team");
        accounts
            .delete("default", &DeleteParams::default())
            .await
            .expect("delete default");
        wait_until("team/default is recreated", || {
            let accounts = accounts.clone();
            let first = first.clone();
            async move {
                accounts
                    .get_opt("default")
                    .await
                    .ok()
                    .flatten()
                    .and_then(|sa| sa.metadata.uid)
                    .is_some_and(|uid| uid != first)
            }
        })
        .await;

        // Other accounts are left alone: only `default` is wanted.
        let listed = accounts
            .list(&Default::default())
            .await
            .expect("list accounts");
        let names: Vec<_> = listed
            .items
            .iter()
            .filter_map(|sa| sa.metadata.name.as_deref())
            .collect();
        assert_eq!(names, ["default"]);

        cancel.cancel();
        task.await.expect("controller task");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminating_namespace_gets_no_account() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "going"}})).expect("ns"),
            )
            .await
            .expect("create namespace");
        // No namespace controller runs, so it stays Terminating.
        namespaces
            .delete("going", &DeleteParams::default())
            .await
            .expect("delete namespace");

        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let controller = Arc::new(ServiceAccountsController::new(
            &factory,
            client.clone(),
            ServiceAccountsControllerOptions::default(),
        ));
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        let task = tokio::spawn(
            controller
                .clone()
                .run(SERVICE_ACCOUNT_WORKERS, cancel.clone()),
        );

        // The controller has worked through the initial namespaces once `default` has its
        // account; `going` was queued with them and was skipped.
        default_account(&client, "default").await;
        wait_until("the queue is drained", || {
            let controller = controller.clone();
            async move { controller.queue().is_empty() }
        })
        .await;
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "going");
        assert!(matches!(accounts.get_opt("default").await, Ok(None)));
        assert_eq!(controller.queue().num_requeues(&"going".to_owned()), 0);

        cancel.cancel();
        task.await.expect("controller task");
    })
    .await;
}
