//! kubernetes/sample-controller on kcm-machinery: a `Foo` custom resource that owns a Deployment — the worked example of a controller built on this workspace's client-go.
//!
//! Where to start: [`foo`] (the typed custom resource, made a resource with
//! `kcm_machinery::custom_resource!`), [`controller`] (informers and handlers, the work queue,
//! `sync`), [`client`] (the writes, behind a trait tests fake), `main.rs` (flags, signals,
//! the event broadcaster). The README walks from `kcm up` to a Foo's Deployment.

// The example's resource is upstream's `Foo`; a variable holding one is a `foo`.
#![allow(clippy::disallowed_names)]

pub mod client;
pub mod controller;
pub mod foo;

use std::sync::Arc;
use std::time::Duration;

use kcm_machinery::events::{EventBroadcaster, KubeEventSink};
use kcm_machinery::informer::SharedInformerFactory;
use tokio_util::sync::CancellationToken;

pub use controller::Controller;
pub use foo::Foo;

/// How often the informers resync their handlers (upstream's `main.go`: 30 s).
pub const RESYNC_PERIOD: Duration = Duration::from_secs(30);

/// Runs the sample controller against `client` with `workers` workers until `cancel` fires,
/// as upstream's `main`: informers for Foos and Deployments, events to the cluster as
/// `sample-controller`, then the controller.
pub async fn run(client: kube::Client, workers: usize, cancel: CancellationToken) {
    let factory = SharedInformerFactory::new(client.clone(), RESYNC_PERIOD);
    let broadcaster = EventBroadcaster::new(Arc::new(KubeEventSink::new(client.clone())));
    let recorder = broadcaster.recorder(controller::CONTROLLER_AGENT_NAME, None);
    let controller = Arc::new(Controller::new(
        &factory,
        Arc::new(client::KubeSampleClient::new(client)),
        recorder,
    ));
    factory.start(&cancel);
    controller.run(workers, cancel.clone()).await;
    factory.shutdown().await;
}
