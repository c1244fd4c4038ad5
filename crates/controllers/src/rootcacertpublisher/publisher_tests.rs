//! Unit tests of the root CA publisher (upstream `publisher_test.go`).

use std::sync::Arc;

use kcm_machinery::controller::api_status;
use kcm_testing::prelude::*;

use super::*;
use crate::rootcacertpublisher::{ConfigMapAction, FakeConfigMapClient};

const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

struct Fixture {
    client: Arc<FakeConfigMapClient>,
    config_maps: Indexer<ConfigMap>,
    publisher: Publisher,
}

fn fixture() -> Fixture {
    let client = Arc::new(FakeConfigMapClient::new());
    let config_maps = Indexer::new();
    let publisher = Publisher::with_caches(
        config_maps.clone(),
        client.clone(),
        CA.as_bytes(),
        PublisherOptions::default(),
    );
    Fixture {
        client,
        config_maps,
        publisher,
    }
}

fn config_map(
    namespace: &str,
    data: Option<(&str, &str)>,
    annotations: &[(&str, &str)],
) -> ConfigMap {
    ConfigMap {
        metadata: meta(ROOT_CA_CERT_CONFIG_MAP_NAME)
            .namespace(namespace)
            .resource_version("1")
            .annotations(annotations)
            .build(),
        data: data.map(|(k, v)| BTreeMap::from([(k.to_owned(), v.to_owned())])),
        ..ConfigMap::default()
    }
}

/// Upstream's `TestConfigMapCreation` table, as syncs.
#[tokio::test]
async fn sync_creates_or_repairs_the_config_map() {
    struct Case {
        name: &'static str,
        existing: Option<ConfigMap>,
        want: Vec<ConfigMapAction>,
    }
    let key = "ns/kube-root-ca.crt".to_owned();
    let cases = [
        Case {
            name: "missing: created",
            existing: None,
            want: vec![ConfigMapAction::Create(key.clone())],
        },
        Case {
            name: "as published: nothing",
            existing: Some(config_map(
                "ns",
                Some((ROOT_CA_KEY, CA)),
                &[(DESCRIPTION_ANNOTATION, DESCRIPTION)],
            )),
            want: vec![],
        },
        Case {
            name: "edited data: rewritten",
            existing: Some(config_map(
                "ns",
                Some((ROOT_CA_KEY, "evil")),
                &[(DESCRIPTION_ANNOTATION, DESCRIPTION)],
            )),
            want: vec![ConfigMapAction::Update(key.clone())],
        },
        Case {
            name: "extra key: rewritten",
            existing: Some(ConfigMap {
                data: Some(BTreeMap::from([
                    (ROOT_CA_KEY.to_owned(), CA.to_owned()),
                    ("x".to_owned(), "y".to_owned()),
                ])),
                ..config_map("ns", None, &[(DESCRIPTION_ANNOTATION, DESCRIPTION)])
            }),
            want: vec![ConfigMapAction::Update(key.clone())],
        },
        Case {
            name: "annotation missing: rewritten",
            existing: Some(config_map("ns", Some((ROOT_CA_KEY, CA)), &[])),
            want: vec![ConfigMapAction::Update(key.clone())],
        },
        Case {
            name: "any description will do",
            existing: Some(config_map(
                "ns",
                Some((ROOT_CA_KEY, CA)),
                &[(DESCRIPTION_ANNOTATION, "mine")],
            )),
            want: vec![],
        },
    ];
    for case in cases {
        let fx = fixture();
        if let Some(existing) = case.existing {
            fx.client.insert(existing.clone());
            fx.config_maps.add(Arc::new(existing)).expect("cache");
        }
        fx.publisher.sync("ns").await.expect(case.name);
        assert_eq!(fx.client.actions(), case.want, "{}", case.name);
        if !case.want.is_empty() {
            let stored = fx
                .client
                .get("ns", ROOT_CA_CERT_CONFIG_MAP_NAME)
                .expect("written");
            assert_eq!(
                stored.data,
                Some(BTreeMap::from([(ROOT_CA_KEY.to_owned(), CA.to_owned())])),
                "{}",
                case.name
            );
            let annotations = stored.metadata.annotations.unwrap_or_default();
            assert!(
                annotations
                    .get(DESCRIPTION_ANNOTATION)
                    .is_some_and(|d| !d.is_empty()),
                "{}",
                case.name
            );
        }
    }
}

/// A namespace being deleted (or gone) refuses the creation: not an error; other failures
/// are, and are counted by code.
#[tokio::test]
async fn terminating_namespaces_are_not_errors() {
    let fx = fixture();
    fx.client.set_error(Some(api_status::namespace_terminating(
        "configmaps",
        ROOT_CA_CERT_CONFIG_MAP_NAME,
        "ns",
    )));
    fx.publisher.sync("ns").await.expect("dropped");
    fx.client
        .set_error(Some(api_status::not_found("namespaces", "ns")));
    fx.publisher.sync("ns").await.expect("dropped");
    fx.client
        .set_error(Some(api_status::internal_error("boom")));
    assert!(fx.publisher.sync("ns").await.is_err());
    assert_eq!(fx.publisher.metrics().syncs(200), 2);
    assert_eq!(fx.publisher.metrics().syncs(500), 1);
}

/// Handlers: new namespaces, active namespace updates, and changes to the published
/// ConfigMap queue the namespace; other ConfigMaps and terminating namespaces do not.
#[tokio::test]
async fn handlers_queue_namespaces() {
    let fx = fixture();
    let h = fx.publisher.event_handlers();
    ResourceEventHandler::<Namespace>::on_add(h, namespace("a").arc(), false);
    ResourceEventHandler::<Namespace>::on_update(
        h,
        namespace("b").arc(),
        namespace("b").phase("Terminating").arc(),
    );
    ResourceEventHandler::<Namespace>::on_update(
        h,
        namespace("c").arc(),
        namespace("c").phase("Active").arc(),
    );
    let other = Arc::new(ConfigMap {
        metadata: meta("other").namespace("d").build(),
        ..ConfigMap::default()
    });
    ResourceEventHandler::<ConfigMap>::on_update(h, Arc::clone(&other), other);
    ResourceEventHandler::<ConfigMap>::on_delete(
        h,
        DeletedObject::Object(Arc::new(config_map("e", None, &[]))),
    );
    let mut queued = Vec::new();
    while !fx.publisher.queue().is_empty() {
        let key = fx.publisher.queue().get().await.expect("key");
        fx.publisher.queue().done(&key);
        queued.push(key);
    }
    queued.sort();
    assert_eq!(queued, ["a", "c", "e"]);
}

/// A panic in the sync is recovered, counted and retried.
#[tokio::test(start_paused = true)]
async fn panicking_sync_is_recovered_counted_and_retried() {
    let metrics = Arc::new(kcm_machinery::workqueue::WorkqueueMetrics::new());
    let client = Arc::new(FakeConfigMapClient::new());
    let publisher = Publisher::with_caches(
        Indexer::new(),
        client.clone(),
        CA.as_bytes(),
        PublisherOptions {
            metrics: Some(metrics.clone()),
            ..PublisherOptions::default()
        },
    );
    client.panic_on_next_call();
    publisher.queue().add("ns".to_owned());
    assert!(publisher.process_next_work_item().await);
    assert_eq!(metrics.sync_panics_total(QUEUE_NAME), 1);
    tokio::time::advance(std::time::Duration::from_secs(1)).await;
    assert!(publisher.process_next_work_item().await);
    assert_eq!(
        client.actions(),
        [ConfigMapAction::Create("ns/kube-root-ca.crt".into())]
    );
}
