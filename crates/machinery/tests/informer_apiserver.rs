#![allow(clippy::unwrap_used)]
//! A shared informer against kcm's embedded API server over real HTTPS: initial list, live
//! adds/updates/deletes with old objects, freshness after our own write, late-joining
//! handlers and listers with selectors.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kcm_apiserver::testing::TestServer;
use kcm_machinery::informer::{ResourceEventHandlerFuncs, SharedInformerFactory};
use kcm_machinery::labels::Selector;
use kcm_testing::{MetaBuilder, PodSpecBuilder, container};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn pod(name: &str, app: &str) -> Pod {
    kcm_testing::pod(name)
        .label("app", app)
        .container(container("c").image("nginx"))
        .build()
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

fn app(p: &Pod) -> String {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app").cloned())
        .unwrap_or_default()
}

/// A handler that reports every callback as a line on a channel.
fn recording_handler(tx: mpsc::UnboundedSender<String>) -> ResourceEventHandlerFuncs<Pod> {
    let (add, update, delete) = (tx.clone(), tx.clone(), tx);
    ResourceEventHandlerFuncs::new()
        .add_func(move |p: Arc<Pod>, initial| {
            let _ = add.send(format!("add {} initial={initial}", name(&p)));
        })
        .update_func(move |old: Arc<Pod>, new: Arc<Pod>| {
            let _ = update.send(format!(
                "update {} {}->{}",
                name(&new),
                app(&old),
                app(&new)
            ));
        })
        .delete_func(move |obj| {
            let _ = delete.send(format!("delete {}", name(obj.object())));
        })
}

async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("an informer callback within 10s")
        .expect("channel open")
}

#[tokio::test]
async fn informer_follows_the_embedded_api_server() {
    let server = TestServer::start().await;
    let client = server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("a", "web"))
        .await
        .unwrap();

    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.pods();
    let (tx, mut rx) = mpsc::unbounded_channel();
    informer.add_event_handler(recording_handler(tx)).unwrap();
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    assert!(factory.wait_for_cache_sync(&cancel).await);
    assert_eq!(next(&mut rx).await, "add a initial=true");

    pods.create(&PostParams::default(), &pod("b", "web"))
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await, "add b initial=false");

    let patched = pods
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "api"}}})),
        )
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await, "update b web->api");

    // Freshness: once the cache has reached our write's resourceVersion, listers see it.
    let rv = patched.metadata.resource_version.clone().unwrap();
    informer.wait_for_resource_version(&rv).await.unwrap();
    let lister = informer.lister();
    assert_eq!(
        lister.get("default", "b").map(|p| app(&p)),
        Some("api".into())
    );
    let web = Selector::parse("app=web").unwrap();
    let names: Vec<String> = lister
        .list("default", &web)
        .iter()
        .map(|p| name(p))
        .collect();
    assert_eq!(names, vec!["a"]);

    // Pods delete gracefully: as upstream's store, even a grace-0 delete of an unscheduled
    // pod first writes its deletionTimestamp (an update), then removes it.
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(next(&mut rx).await, "update a web->web");
    assert_eq!(next(&mut rx).await, "delete a");
    assert!(lister.get("default", "a").is_none());

    // A handler added after start first gets an add for every cached object.
    let (late_tx, mut late_rx) = mpsc::unbounded_channel();
    informer
        .add_event_handler(recording_handler(late_tx))
        .unwrap();
    assert_eq!(next(&mut late_rx).await, "add b initial=true");

    cancel.cancel();
    server.shutdown().await;
}
