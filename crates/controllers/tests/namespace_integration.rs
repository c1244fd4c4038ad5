//! The namespace controller against the embedded API server: a deleted namespace goes Terminating, is emptied, and disappears.
//!
//! Only the namespace controller runs: it deletes the ConfigMap, Service, ReplicaSet and pods
//! itself, as kube-controller-manager's would. Time is real (the controller waits its 5 s
//! grace period before starting), so waiting is polling with a deadline that only bounds a
//! failure.

mod manager_support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service};
use kcm_apiserver::testing::TestServer;
use kcm_controllers::namespace::{NamespaceController, NamespaceControllerOptions};
use kcm_machinery::informer::SharedInformerFactory;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use manager_support::{timed, wait_until};
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Bounds the test, so a stuck deletion fails instead of hanging CI.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);

fn object<K: DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).expect("valid object")
}

async fn count<K>(api: &Api<K>) -> usize
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .map(|l| l.items.len())
        .unwrap_or(usize::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_namespace_is_emptied_then_removed() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();

        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let controller = Arc::new(NamespaceController::new(
            &factory,
            client.clone(),
            NamespaceControllerOptions::default(),
        ));
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        let task = tokio::spawn(controller.clone().run(2, cancel.clone()));

        let pp = PostParams::default();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(&pp, &object(json!({"metadata": {"name": "demo"}})))
            .await
            .expect("create namespace");
        let (cms, services, rss, pods): (Api<ConfigMap>, Api<Service>, Api<ReplicaSet>, Api<Pod>) = (
            Api::namespaced(client.clone(), "demo"),
            Api::namespaced(client.clone(), "demo"),
            Api::namespaced(client.clone(), "demo"),
            Api::namespaced(client.clone(), "demo"),
        );
        cms.create(&pp, &object(json!({"metadata": {"name": "settings"}, "data": {"a": "1"}})))
            .await
            .expect("configmap");
        services
            .create(&pp, &object(json!({"metadata": {"name": "web"},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})))
            .await
            .expect("service");
        rss.create(&pp, &object(json!({"metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})))
            .await
            .expect("replicaset");
        for name in ["web-a", "web-b"] {
            pods.create(&pp, &object(json!({"metadata": {"name": name, "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}})))
                .await
                .expect("pod");
        }

        // A live namespace is left alone.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(count(&cms).await, 1);

        namespaces
            .delete("demo", &DeleteParams::default())
            .await
            .expect("delete namespace");
        let terminating = namespaces.get("demo").await.expect("still there");
        assert_eq!(
            terminating.status.and_then(|s| s.phase).as_deref(),
            Some("Terminating")
        );

        // New content is refused while it terminates.
        let refused = cms
            .create(&pp, &object(json!({"metadata": {"name": "late"}})))
            .await
            .expect_err("terminating namespace");
        match refused {
            kube::Error::Api(status) => {
                assert_eq!(status.code, 403);
                assert!(status.message.contains("because it is being terminated"), "{}", status.message);
            }
            other => panic!("unexpected error {other}"),
        }

        // The controller empties the namespace and releases it; the server then removes it.
        wait_until("the namespace is gone", || {
            let namespaces = namespaces.clone();
            async move { matches!(namespaces.get_opt("demo").await, Ok(None)) }
        })
        .await;
        assert_eq!(count(&cms).await, 0);
        assert_eq!(count(&services).await, 0);
        assert_eq!(count(&rss).await, 0);
        assert_eq!(count(&pods).await, 0);

        // The name is free again.
        namespaces
            .create(&pp, &object(json!({"metadata": {"name": "demo"}})))
            .await
            .expect("recreate namespace");
        assert_eq!(count(&cms).await, 0);

        cancel.cancel();
        task.await.expect("controller task");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_held_by_another_finalizer_stays_terminating_with_its_conditions() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let controller = Arc::new(NamespaceController::new(
            &factory,
            client.clone(),
            NamespaceControllerOptions::default(),
        ));
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        let task = tokio::spawn(controller.clone().run(1, cancel.clone()));

        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &object(json!({"metadata": {"name": "held",
                "finalizers": ["example.com/hold"]}})),
            )
            .await
            .expect("create namespace");
        namespaces
            .delete("held", &DeleteParams::default())
            .await
            .expect("delete namespace");

        // Our finalizer goes and the conditions say the content is gone, but the metadata
        // finalizer keeps the namespace.
        wait_until("the kubernetes finalizer is released", || {
            let namespaces = namespaces.clone();
            async move {
                namespaces.get("held").await.is_ok_and(|ns| {
                    ns.spec
                        .and_then(|s| s.finalizers)
                        .unwrap_or_default()
                        .is_empty()
                })
            }
        })
        .await;
        let ns = namespaces.get("held").await.expect("held");
        let conditions = ns.status.and_then(|s| s.conditions).unwrap_or_default();
        let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(
            types,
            [
                "NamespaceDeletionDiscoveryFailure",
                "NamespaceDeletionGroupVersionParsingFailure",
                "NamespaceDeletionContentFailure",
                "NamespaceContentRemaining",
                "NamespaceFinalizersRemaining"
            ]
        );
        assert!(
            conditions.iter().all(|c| c.status == "False"),
            "{conditions:?}"
        );

        cancel.cancel();
        task.await.expect("controller task");
    })
    .await;
}
