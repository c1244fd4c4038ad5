//! The root CA publisher against the embedded API server: every namespace gets `kube-root-ca.crt`, repaired when edited and recreated when deleted.

mod manager_support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kcm_apiserver::testing::TestServer;
use kcm_controllers::rootcacertpublisher::{
    DESCRIPTION, DESCRIPTION_ANNOTATION, PUBLISHER_WORKERS, Publisher, PublisherOptions,
    ROOT_CA_CERT_CONFIG_MAP_NAME, ROOT_CA_KEY,
};
use kcm_machinery::informer::SharedInformerFactory;
use kube::api::{Api, DeleteParams, PostParams};
use manager_support::{timed, wait_until};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TEST_TIMEOUT: Duration = Duration::from_secs(90);
const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n";

async fn published(client: &kube::Client, namespace: &str) -> bool {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    maps.get_opt(ROOT_CA_CERT_CONFIG_MAP_NAME)
        .await
        .ok()
        .flatten()
        .is_some_and(|cm| {
            cm.data
                .unwrap_or_default()
                .get(ROOT_CA_KEY)
                .map(String::as_str)
                == Some(CA)
                && cm
                    .metadata
                    .annotations
                    .unwrap_or_default()
                    .get(DESCRIPTION_ANNOTATION)
                    .map(String::as_str)
                    == Some(DESCRIPTION)
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_gets_the_root_ca_and_keeps_it() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let publisher = Arc::new(Publisher::new(
            &factory,
            client.clone(),
            CA.as_bytes(),
            PublisherOptions::default(),
        ));
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        let task = tokio::spawn(publisher.run(PUBLISHER_WORKERS, cancel.clone()));

        for ns in ["default", "kube-system"] {
            wait_until(&format!("{ns} has kube-root-ca.crt"), || {
                published(&client, ns)
            })
            .await;
        }
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "team"}})).expect("ns"),
            )
            .await
            .expect("namespace");
        wait_until("team has kube-root-ca.crt", || published(&client, "team")).await;

        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
        let mut edited = maps.get(ROOT_CA_CERT_CONFIG_MAP_NAME).await.expect("get");
        edited.data = Some([(ROOT_CA_KEY.to_owned(), "tampered".to_owned())].into());
        maps.replace(
            ROOT_CA_CERT_CONFIG_MAP_NAME,
            &PostParams::default(),
            &edited,
        )
        .await
        .expect("edit");
        wait_until("the edit is undone", || published(&client, "team")).await;

        maps.delete(ROOT_CA_CERT_CONFIG_MAP_NAME, &DeleteParams::default())
            .await
            .expect("delete");
        wait_until("recreated", || published(&client, "team")).await;

        cancel.cancel();
        task.await.expect("publisher task");
    })
    .await;
}
