//! `pod_keeper`: a whole controller on kcm-machinery, leader-elected, with `/metrics`.
//!
//! Every ConfigMap annotated `example.kcm.io/pods: "N"` keeps N pods, labelled
//! `example.kcm.io/keeper=<configmap>` and controlled by the ConfigMap: the smallest ReplicaSet.
//! It uses each everyday piece of the crate:
//! - shared informers for ConfigMaps and Pods, whose handlers enqueue the owning ConfigMap;
//! - a rate-limited work queue with client-go's `workqueue_*` metrics, and the shared worker
//!   loop with its error policy;
//! - expectations, so a sync does not create again before the informer has seen its creates;
//! - an event on the ConfigMap for each pod created or deleted;
//! - a client with client-go's QPS/burst limiter and `rest_client_*` metrics;
//! - leader election on the Lease `pod-keeper`, so of two replicas only one acts;
//! - `/metrics` in Prometheus' text format.
//!
//! Against any cluster (`kcm up` gives one; `KUBECONFIG` says which):
//!
//! ```sh
//! cargo run -p kcm-machinery --example pod_keeper
//! kubectl create configmap web
//! kubectl annotate configmap web example.kcm.io/pods=3
//! kubectl get pods -l example.kcm.io/keeper=web
//! curl -s localhost:8080/metrics | grep -E 'workqueue_adds|leader_election_master_status'
//! ```
//!
//! `METRICS_ADDR` sets the listen address (`127.0.0.1:8080`), `POD_NAMESPACE` the Lease's
//! namespace (`default`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Container, ObjectReference, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_machinery::prelude::*;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::GroupVersionKind;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

/// The controller's name: its Lease, its queue's `name` label and its events' source.
const NAME: &str = "pod-keeper";
/// How many pods a ConfigMap wants.
const PODS_ANNOTATION: &str = "example.kcm.io/pods";
/// The label on each kept pod: its ConfigMap's name.
const KEEPER_LABEL: &str = "example.kcm.io/keeper";
/// Workers syncing ConfigMaps at once.
const WORKERS: usize = 2;
/// How often the informers hand every cached object to the handlers again.
const RESYNC: Duration = Duration::from_secs(10 * 60);

/// A failed sync is retried with the queue's back-off, forever, and logged with its key.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("error syncing configmap");

/// What a sync can fail with.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// A create or delete was refused.
    #[error("{op} pod for {key}: {source}")]
    Api {
        op: &'static str,
        key: String,
        #[source]
        source: kube::Error,
    },
    /// A queue key that is not `namespace/name`.
    #[error("invalid key {0:?}")]
    Key(String),
}

/// Keeps each annotated ConfigMap's pods at its count.
struct Keeper {
    client: kube::Client,
    config_maps: Lister<ConfigMap>,
    pods: Lister<Pod>,
    queue: RateLimitingQueue<String>,
    /// Creates and deletes made and not yet seen by the pod informer, per ConfigMap key.
    expectations: Arc<ControllerExpectations>,
    recorder: Arc<dyn EventRecorder>,
}

impl Keeper {
    /// The controller over the two informers; registers their handlers.
    fn new(
        client: kube::Client,
        config_maps: &SharedIndexInformer<ConfigMap>,
        pods: &SharedIndexInformer<Pod>,
        metrics: Arc<WorkqueueMetrics>,
        recorder: Arc<dyn EventRecorder>,
    ) -> Self {
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig::named(NAME, metrics),
        );
        let expectations = Arc::new(ControllerExpectations::new());

        let (on_add, on_update) = (queue.clone(), queue.clone());
        let config_map_handlers = ResourceEventHandlerFuncs::new()
            .add_func(move |cm: Arc<ConfigMap>, _| enqueue(&on_add, cm.as_ref()))
            .update_func(move |_, cm: Arc<ConfigMap>| enqueue(&on_update, cm.as_ref()));

        let (added, deleted, updated) = (queue.clone(), queue.clone(), queue.clone());
        let (seen_create, seen_delete) = (expectations.clone(), expectations.clone());
        let pod_handlers = ResourceEventHandlerFuncs::new()
            .add_func(move |pod: Arc<Pod>, _| {
                if let Some(key) = owner_key(&pod) {
                    seen_create.creation_observed(&key);
                    added.add(key);
                }
            })
            .update_func(move |_, pod: Arc<Pod>| {
                if let Some(key) = owner_key(&pod) {
                    updated.add(key);
                }
            })
            .delete_func(move |pod: DeletedObject<Pod>| {
                if let Some(key) = owner_key(pod.object()) {
                    seen_delete.deletion_observed(&key);
                    deleted.add(key);
                }
            });
        for result in [
            config_maps.add_event_handler(config_map_handlers).map(drop),
            pods.add_event_handler(pod_handlers).map(drop),
        ] {
            if let Err(err) = result {
                tracing::error!(%err, "adding an event handler");
            }
        }
        Self {
            client,
            config_maps: config_maps.lister(),
            pods: pods.lister(),
            queue,
            expectations,
            recorder,
        }
    }

    /// Brings the ConfigMap `key`'s pods to its count, as a ReplicaSet's `syncReplicaSet`.
    async fn sync(&self, key: String) -> Result<(), Error> {
        let Ok((Some(namespace), name)) = split_meta_namespace_key(&key) else {
            return Err(Error::Key(key.clone()));
        };
        let Some(cm) = self.config_maps.get(namespace, name) else {
            // Gone: its pods go with it (the garbage collector follows their owner reference).
            self.expectations.delete_expectations(&key);
            return Ok(());
        };
        // Until the informer has seen the last creates and deletes, the cache undercounts or
        // overcounts, and acting on it would create or delete twice.
        if !self.expectations.satisfied_expectations(&key) {
            return Ok(());
        }
        let wanted: usize = cm
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PODS_ANNOTATION))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let uid = cm.metadata.uid.as_deref().unwrap_or_default();
        let selector = Selector::from_map(&BTreeMap::from([(
            KEEPER_LABEL.to_owned(),
            name.to_owned(),
        )]))
        .unwrap_or_else(|_| Selector::nothing());
        let mut pods: Vec<Arc<Pod>> = self
            .pods
            .list(namespace, &selector)
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| get_controller_of(&p.metadata).is_some_and(|r| r.uid == uid))
            .collect();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);

        if pods.len() < wanted {
            let missing = wanted - pods.len();
            self.expectations.expect_creations(&key, missing as i64);
            for made in 0..missing {
                if let Err(source) = api.create(&PostParams::default(), &pod_for(&cm)).await {
                    // The informer will never see the creates that were not made.
                    self.expectations
                        .lower_expectations(&key, (missing - made) as i64, 0);
                    return Err(Error::Api {
                        op: "create",
                        key,
                        source,
                    });
                }
            }
            let message = format!("Created {missing} pods");
            self.recorder.event(
                &reference(&cm),
                EventType::Normal,
                "SuccessfulCreate",
                message,
            );
        } else if pods.len() > wanted {
            pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            let extra = pods.len() - wanted;
            self.expectations.expect_deletions(&key, extra as i64);
            for (done, pod) in pods.iter().take(extra).enumerate() {
                let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
                if let Err(source) = api.delete(pod_name, &DeleteParams::default()).await {
                    self.expectations
                        .lower_expectations(&key, 0, (extra - done) as i64);
                    return Err(Error::Api {
                        op: "delete",
                        key,
                        source,
                    });
                }
            }
            let message = format!("Deleted {extra} pods");
            self.recorder.event(
                &reference(&cm),
                EventType::Normal,
                "SuccessfulDelete",
                message,
            );
        }
        Ok(())
    }
}

/// Adds an annotated ConfigMap's key to the queue.
fn enqueue(queue: &RateLimitingQueue<String>, cm: &ConfigMap) {
    let annotated = cm
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(PODS_ANNOTATION));
    if !annotated {
        return;
    }
    match meta_namespace_key(cm) {
        Ok(key) => queue.add(key),
        Err(err) => tracing::error!(%err, "a ConfigMap without a key"),
    }
}

/// The key of the ConfigMap that controls `pod`, if one does.
fn owner_key(pod: &Pod) -> Option<String> {
    let owner = get_controller_of(&pod.metadata)?;
    (owner.kind == "ConfigMap" && owner.api_version == "v1").then(|| {
        object_key(
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            &owner.name,
        )
    })
}

/// A pod for `cm`: labelled with its name and controlled by it.
fn pod_for(cm: &ConfigMap) -> Pod {
    let name = cm.metadata.name.clone().unwrap_or_default();
    let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            labels: Some(BTreeMap::from([(KEEPER_LABEL.to_owned(), name)])),
            owner_references: Some(vec![new_controller_ref(&cm.metadata, &gvk)]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".to_owned(),
                image: Some("busybox".to_owned()),
                command: Some(vec!["sleep".to_owned(), "3600".to_owned()]),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// The reference an event on `cm` is about.
fn reference(cm: &ConfigMap) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("ConfigMap".to_owned()),
        namespace: cm.metadata.namespace.clone(),
        name: cm.metadata.name.clone(),
        uid: cm.metadata.uid.clone(),
        resource_version: cm.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// What runs while this process leads: informers, events and workers, until `leading` fires.
async fn lead(client: kube::Client, metrics: Arc<WorkqueueMetrics>, leading: CancellationToken) {
    let factory = SharedInformerFactory::new(client.clone(), RESYNC);
    let broadcaster = EventBroadcaster::new(Arc::new(KubeEventSink::new(client.clone())));
    let (config_maps, pods) = (factory.config_maps(), factory.pods());
    let keeper = Arc::new(Keeper::new(
        client,
        &config_maps,
        &pods,
        metrics,
        broadcaster.recorder(NAME, None),
    ));
    factory.start(&leading);
    let queue = keeper.queue.clone();
    run_controller(
        NAME,
        "pod keeper",
        &queue,
        ERROR_POLICY,
        WORKERS,
        &leading,
        move || config_maps.has_synced() && pods.has_synced(),
        move |key| {
            let keeper = Arc::clone(&keeper);
            async move { keeper.sync(key).await }
        },
    )
    .await;
    factory.shutdown().await;
    broadcaster.shutdown().await;
}

/// Serves `registry` as `/metrics` on `addr` until `cancel` fires.
async fn serve_metrics(addr: String, registry: Arc<Registry>, cancel: CancellationToken) {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = Arc::clone(&registry);
            async move {
                let mut body = String::new();
                match prometheus_client::encoding::text::encode(&mut body, &registry) {
                    Ok(()) => (axum::http::StatusCode::OK, body),
                    Err(err) => (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        err.to_string(),
                    ),
                }
            }
        }),
    );
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(listener) => listener,
        Err(err) => {
            tracing::error!(%addr, %err, "cannot serve /metrics");
            return;
        }
    };
    tracing::info!(%addr, "serving /metrics");
    let shutdown = async move { cancel.cancelled().await };
    if let Err(err) = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
    {
        tracing::error!(%err, "/metrics server failed");
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let metrics_addr = std::env::var("METRICS_ADDR").unwrap_or_else(|_| "127.0.0.1:8080".into());
    let namespace = std::env::var("POD_NAMESPACE").unwrap_or_else(|_| "default".into());

    // One registry for the client's, the queue's and the election's metrics.
    let mut registry = Registry::default();
    let client_metrics = Arc::new(ClientMetrics::new());
    let queue_metrics = Arc::new(WorkqueueMetrics::new());
    let election_metrics = Arc::new(LeaderElectionMetrics::new());
    client_metrics.register(&mut registry);
    queue_metrics.register(&mut registry);
    election_metrics.register(&mut registry);

    // kube-controller-manager's --kube-api-qps and --kube-api-burst defaults: 20 and 30.
    let config = kube::Config::infer().await?;
    let client = build_client(
        config,
        DEFAULT_KUBE_API_QPS,
        DEFAULT_KUBE_API_BURST,
        Some(client_metrics),
    )?;

    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            tracing::info!("interrupted, shutting down");
        }
        on_signal.cancel();
    });
    let server = tokio::spawn(serve_metrics(
        metrics_addr,
        Arc::new(registry),
        cancel.clone(),
    ));

    // Release the Lease on the way out, so a standby takes over at once: `run` waits for
    // `lead` to return before it releases.
    let election = LeaderElectionConfig {
        release_on_cancel: true,
        ..LeaderElectionConfig::new(namespace.clone(), NAME, new_identity())
    };
    let lock = KubeLeaseLock::new(client.clone(), &namespace, NAME);
    let elector = LeaderElector::new(election, lock)?.with_metrics(election_metrics);
    let callbacks = LeaderCallbacks::new(move |leading| lead(client, queue_metrics, leading))
        .on_new_leader(|leader| tracing::info!(leader, "new leader"));
    let outcome = elector.run(cancel.clone(), callbacks).await;
    tracing::info!(?outcome, "stopped");
    cancel.cancel();
    let _ = server.await;
    Ok(())
}
