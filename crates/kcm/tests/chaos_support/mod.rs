//! The chaos tests' cluster: an API server on a data dir that can be restarted on its port, the controllers and the simulated nodes, Deployments and their rollout, the seed.

#![allow(dead_code)] // each scenario uses its own subset

pub mod census;
pub mod proxy;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kcm_apiserver::admission::AdmissionConfig;
use kcm_apiserver::admission::plugins::{SERVICE_ACCOUNT, TAINT_NODES_BY_CONDITION};
use kcm_apiserver::{RunningServer, Server, ServerConfig, StorageBackend};
use kcm_controllers::manager::{
    ControllerManager, ControllerRegistry, ManagerOptions, RunningManager,
};
use kcm_sim::SimulatorConfig;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support;

/// The namespace every chaos Deployment lives in.
pub const NS: &str = "default";
/// How long one convergence may take before the scenario fails (debug build, shared machine).
pub const CONVERGE: Duration = Duration::from_secs(90);

/// The scenario's seed: `CHAOS_SEED` if set, else fresh; printed so a failure can be replayed.
pub fn seed(scenario: &str) -> u64 {
    let seed = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("{scenario}: CHAOS_SEED={seed}");
    seed
}

/// Polls `f` every 100 ms until it yields a value; panics naming `what` after `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    support::poll(what, limit, Duration::from_millis(100), f).await
}

/// An API server configuration for the chaos tests: `storage` in `data_dir`, TLS on or off,
/// 200 ms bookmarks, and the admission plugins that wait for controllers this cluster does
/// not run (service accounts, node taints) off, as in `TestServer`.
pub fn server_config(data_dir: &Path, storage: StorageBackend, tls: bool) -> ServerConfig {
    let mut config = ServerConfig::new(data_dir);
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.storage = storage;
    config.tls = tls;
    config.bookmark_interval = Duration::from_millis(200);
    config.compaction_interval = None;
    config.admission =
        AdmissionConfig::default().disabling(&[SERVICE_ACCOUNT, TAINT_NODES_BY_CONDITION]);
    config
}

/// Starts the server, retrying while its fixed port is still held by the previous instance.
pub async fn start_server(config: &ServerConfig) -> RunningServer {
    let mut last = None;
    for _ in 0..100 {
        match Server::start(config.clone()).await {
            Ok(server) => return server,
            Err(e) => {
                last = Some(e.to_string());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    panic!("starting the API server: {last:?}");
}

/// A `kube` config for `url` as the admin of `server` (for a proxy in front of it).
pub fn kube_config_via(server: &RunningServer, url: &str) -> kube::Config {
    let mut config = server.kube_config();
    config.cluster_url = url.parse().expect("proxy URL");
    config
}

/// A client for `config` that, like the controllers', rides over the server's absence.
pub fn client(config: kube::Config) -> kube::Client {
    kube::Client::try_from(config).expect("client")
}

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    options: ManagerOptions,
}

/// The Deployment and ReplicaSet controllers, no leader election, no endpoint, client
/// limits as `kcm up`'s, plus `extra` flags.
pub fn manager_options(extra: &[&str]) -> ManagerOptions {
    let base = [
        "kcm-run",
        "--leader-elect=false",
        "--secure-port=0",
        "--controllers=deployment-controller,replicaset-controller",
        "--kube-api-qps=1000",
        "--kube-api-burst=2000",
    ];
    Flags::try_parse_from(base.iter().chain(extra))
        .expect("manager flags")
        .options
}

/// Starts the controllers against `config`.
pub async fn start_manager(config: kube::Config, cancel: &CancellationToken) -> RunningManager {
    ControllerManager::new(manager_options(&[]), ControllerRegistry::builtin())
        .expect("manager")
        .with_kube_config(config)
        .start(cancel.child_token())
        .await
        .expect("start the manager")
}

/// Starts the scheduler and `nodes` simulated nodes (pods Ready 200 ms after they run); with
/// `CHAOS_DEPLOYMENTS` set, enough nodes for that many Deployments of up to 30 pods each.
pub fn start_nodes(client: kube::Client, nodes: usize, cancel: &CancellationToken) {
    let nodes = std::env::var("CHAOS_DEPLOYMENTS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .map_or(nodes, |deployments| nodes.max(deployments * 30 / 110 + 1));
    support::start_scheduler(client.clone(), cancel);
    support::start_simulator(
        client,
        SimulatorConfig {
            nodes,
            pod_ready_delay: Duration::from_millis(200),
            assign_pod_cidrs: true,
            ..SimulatorConfig::default()
        },
        cancel,
    );
}

/// A Deployment `name` of `replicas` pods labelled `app=name`, rolling with `max_surge` and
/// `max_unavailable`.
pub fn deployment(name: &str, replicas: i32, max_surge: i32, max_unavailable: i32) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable},
            },
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }))
    .expect("deployment")
}

/// Retries `f` until it succeeds (the server may be restarting); panics after [`CONVERGE`].
pub async fn retrying<T, E: std::fmt::Display, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let last = match f().await {
            Ok(v) => return v,
            Err(e) => e.to_string(),
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} kept failing: {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates `d`, retrying while the server is away (an AlreadyExists after a lost answer is
/// success).
pub async fn create_deployment(client: &kube::Client, d: &Deployment) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NS);
    retrying("creating a Deployment", || async {
        match api.create(&PostParams::default(), d).await {
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            other => other.map(|_| ()),
        }
    })
    .await;
}

/// Sets the container image of Deployment `name` (a rolling update).
pub async fn set_image(client: &kube::Client, name: &str, image: &str) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
    let params = PatchParams::default();
    let patch = Patch::Strategic(&patch);
    retrying("patching a Deployment's image", || {
        api.patch(name, &params, &patch)
    })
    .await;
}

/// Whether Deployment `d` has completed its rollout to `image`: upstream's
/// `DeploymentComplete` (every replica updated and available, none old) for the current
/// generation.
pub fn complete(d: &Deployment, image: &str) -> bool {
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let template_image = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref());
    let Some(status) = &d.status else {
        return false;
    };
    template_image == Some(image)
        && status.observed_generation >= d.metadata.generation
        && status.updated_replicas == Some(want)
        && status.replicas == Some(want)
        && status.available_replicas == Some(want)
}

/// Waits until every Deployment in `names` completed its rollout to `image` and has exactly
/// its replicas as live pods; reads are retried while the server is away. On timeout, panics
/// with what the Deployments, ReplicaSets and pods looked like last.
pub async fn wait_rolled_out(
    client: &kube::Client,
    names: &[String],
    image: &str,
    replicas: usize,
) {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    let mut last = String::from("(nothing read)");
    loop {
        match rollout_state(client, names, image, replicas).await {
            Ok(None) => return,
            Ok(Some(state)) => last = state,
            Err(e) => last = format!("{e} after {last}"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {CONVERGE:?} waiting for {} Deployments rolled out to {image}; last seen:\n{last}",
            names.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `None` when the rollout is done, else what is not.
async fn rollout_state(
    client: &kube::Client,
    names: &[String],
    image: &str,
    replicas: usize,
) -> Result<Option<String>, kube::Error> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let list = deployments.list(&ListParams::default()).await?;
    let mut pending = String::new();
    for d in list
        .items
        .iter()
        .filter(|d| names.iter().any(|n| d.metadata.name.as_deref() == Some(n)))
        .filter(|d| !complete(d, image))
    {
        let status = d.status.clone().unwrap_or_default();
        pending += &format!(
            "deployment {}: generation {:?} observed {:?} replicas {:?} updated {:?} ready {:?} available {:?}\n",
            d.metadata.name.as_deref().unwrap_or_default(),
            d.metadata.generation,
            status.observed_generation,
            status.replicas,
            status.updated_replicas,
            status.ready_replicas,
            status.available_replicas,
        );
    }
    let live: Vec<Pod> = pods
        .list(&ListParams::default().labels(census::APP_LABEL))
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if pending.is_empty() && live.len() == names.len() * replicas {
        return Ok(None);
    }
    for rs in sets
        .list(&ListParams::default().labels(census::APP_LABEL))
        .await?
        .items
    {
        let name = rs.metadata.name.clone().unwrap_or_default();
        let owned = live
            .iter()
            .filter(|p| {
                p.metadata
                    .owner_references
                    .as_ref()
                    .is_some_and(|o| o.iter().any(|r| r.name == name))
            })
            .collect::<Vec<_>>();
        let ready = owned
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        let status = rs.status.clone().unwrap_or_default();
        pending += &format!(
            "replicaset {name}: spec {:?} generation {:?} observed {:?} status replicas {} ready {:?} available {:?}; live pods {} ready {ready}\n",
            rs.spec.as_ref().and_then(|s| s.replicas),
            rs.metadata.generation,
            status.observed_generation,
            status.replicas,
            status.ready_replicas,
            status.available_replicas,
            owned.len(),
        );
    }
    pending += &format!("live pods {} of {}\n", live.len(), names.len() * replicas);
    Ok(Some(pending))
}

/// The ReplicaSets of app `name`.
pub async fn replica_sets_of(client: &kube::Client, name: &str) -> Vec<ReplicaSet> {
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    let params = ListParams::default().labels(&format!("app={name}"));
    retrying("listing ReplicaSets", || api.list(&params))
        .await
        .items
}
