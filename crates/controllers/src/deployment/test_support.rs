//! Builders and a fixture for the controller's unit tests: caches seeded directly, a fake API and event recorder, `sync(key)` called, actions counted (as upstream's `deployment_controller_test.go`).

use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::store::Indexer;
pub use kcm_testing::labels;
use kcm_testing::{
    MetaBuilder, PodSpecBuilder, WorkloadBuilder, container, controller_ref_of, pod_template,
    selector,
};

use super::client::{DeploymentAction, FakeDeploymentClient, Verb};
use super::controller::{DeploymentController, DeploymentControllerOptions};
use super::util::accessors::{name, rs_replicas};
use super::util::annotations::REVISION_ANNOTATION;
use super::util::new_replica_set::new_replica_set;

/// The fixed "now" tests start at.
pub fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().expect("timestamp")
}

/// `now` moved by `secs` seconds.
pub fn at(secs: i64) -> Timestamp {
    now() + SignedDuration::from_secs(secs)
}

/// A pod template labelled `app=<app>` running `image`.
pub fn template(app: &str, image: &str) -> PodTemplateSpec {
    pod_template()
        .label("app", app)
        .container(container("app").image(image))
        .build()
}

/// A rolling-update Deployment `default/<name>` selecting `app=<name>`, running `image:v2`,
/// with the API server's defaults (10 revisions of history, a 600 s progress deadline) and
/// its status observed.
pub fn deployment(name: &str, replicas: i32, max_surge: i32, max_unavailable: i32) -> Deployment {
    kcm_testing::deployment(name)
        .namespace("default")
        .uid(format!("uid-{name}"))
        .generation(1)
        .resource_version("1")
        .replicas(replicas)
        .selector(selector(&[("app", name)]))
        .template(template(name, "image:v2"))
        .rolling_update(
            IntOrString::Int(max_surge),
            IntOrString::Int(max_unavailable),
        )
        .revision_history_limit(10)
        .progress_deadline_seconds(600)
        .default_status()
        .build()
}

/// `d` running `image` instead.
pub fn with_image(mut d: Deployment, image: &str) -> Deployment {
    if let Some(spec) = d.spec.as_mut() {
        let app = d.metadata.name.clone().unwrap_or_default();
        spec.template = template(&app, image);
    }
    d
}

/// `d` with the Recreate strategy.
pub fn recreate(mut d: Deployment) -> Deployment {
    if let Some(spec) = d.spec.as_mut() {
        spec.strategy = Some(DeploymentStrategy {
            type_: Some("Recreate".into()),
            rolling_update: None,
        });
    }
    d
}

/// The ReplicaSet `d` would create for its current template (hash name, labels, owner,
/// annotations), with `replicas`, revision `revision`, created `created_secs` after `now`,
/// and a status of `replicas` pods of which `available` are available (observed).
pub fn rs_for(
    d: &Deployment,
    replicas: i32,
    available: i32,
    revision: &str,
    created_secs: i64,
) -> ReplicaSet {
    let mut rs = new_replica_set(d, &[], revision).expect("builds");
    rs.metadata.uid = Some(format!("uid-{}", name(&rs.metadata)));
    rs.metadata.resource_version = Some("1".into());
    rs.metadata.creation_timestamp = Some(Time(at(created_secs)));
    rs.metadata.generation = Some(1);
    if let Some(spec) = rs.spec.as_mut() {
        spec.replicas = Some(replicas);
    }
    rs.status = Some(ReplicaSetStatus {
        replicas,
        ready_replicas: Some(available),
        available_replicas: Some(available),
        observed_generation: Some(1),
        ..Default::default()
    });
    rs
}

/// The ReplicaSet of an older template of `d` (running `image`).
pub fn old_rs_for(
    d: &Deployment,
    image: &str,
    replicas: i32,
    available: i32,
    revision: &str,
    created_secs: i64,
) -> ReplicaSet {
    rs_for(
        &with_image(d.clone(), image),
        replicas,
        available,
        revision,
        created_secs,
    )
}

/// A running pod `name` of `rs` (its template's labels, controlled by it).
pub fn pod_of(rs: &ReplicaSet, pod_name: &str, phase: &str) -> Pod {
    let mut pod = kcm_testing::pod(pod_name)
        .uid(format!("uid-{pod_name}"))
        .owner(controller_ref_of(rs))
        .default_spec()
        .phase(phase)
        .build();
    pod.metadata.namespace = rs.metadata.namespace.clone();
    pod.metadata.labels = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone());
    pod
}

/// The `namespace/name` key of a Deployment.
pub fn key(d: &Deployment) -> String {
    format!("default/{}", name(&d.metadata))
}

/// A controller over caches the test fills, with a fake API, a fake recorder and a settable
/// clock.
pub struct Fixture {
    /// The controller under test.
    pub controller: DeploymentController,
    /// The fake API server.
    pub client: Arc<FakeDeploymentClient>,
    /// The fake event recorder.
    pub recorder: Arc<FakeRecorder>,
    /// The Deployment cache.
    pub d_cache: Indexer<Deployment>,
    /// The ReplicaSet cache.
    pub rs_cache: Indexer<ReplicaSet>,
    /// The pod cache.
    pub pod_cache: Indexer<Pod>,
    /// What the controller's clock reads.
    pub time: Arc<Mutex<Timestamp>>,
}

/// A fixture with empty caches, the clock at [`now`].
pub fn fixture() -> Fixture {
    let d_cache = Indexer::new();
    let rs_cache = Indexer::new();
    let pod_cache = Indexer::new();
    let client = Arc::new(FakeDeploymentClient::new());
    let recorder = Arc::new(FakeRecorder::new());
    let time = Arc::new(Mutex::new(now()));
    let clock_time = Arc::clone(&time);
    let controller = DeploymentController::with_caches(
        d_cache.clone(),
        rs_cache.clone(),
        pod_cache.clone(),
        client.clone(),
        recorder.clone(),
        DeploymentControllerOptions::default(),
    )
    .with_clock(Arc::new(move || {
        *clock_time.lock().unwrap_or_else(|e| e.into_inner())
    }));
    Fixture {
        controller,
        client,
        recorder,
        d_cache,
        rs_cache,
        pod_cache,
        time,
    }
}

impl Fixture {
    /// Puts `d` in the cache and on the fake server.
    pub fn add_deployment(&self, d: &Deployment) {
        self.d_cache
            .add(Arc::new(d.clone()))
            .expect("add deployment");
        self.client.insert_deployment(d.clone());
    }

    /// Puts `rs` in the cache and on the fake server.
    pub fn add_rs(&self, rs: &ReplicaSet) {
        self.rs_cache.add(Arc::new(rs.clone())).expect("add rs");
        self.client.insert_replica_set(rs.clone());
    }

    /// Puts `pod` in the cache.
    pub fn add_pod(&self, pod: &Pod) {
        self.pod_cache.add(Arc::new(pod.clone())).expect("add pod");
    }

    /// Sets the controller's clock.
    pub fn set_time(&self, t: Timestamp) {
        *self.time.lock().unwrap_or_else(|e| e.into_inner()) = t;
    }

    /// Syncs `d`'s key.
    pub async fn sync(&self, d: &Deployment) -> super::Result<()> {
        self.controller.sync(&key(d)).await
    }

    /// Lets the caches catch up with the fake server (as the informers would), and, when
    /// `ready`, plays the ReplicaSet controller: every ReplicaSet reports `spec.replicas`
    /// pods, all available.
    pub fn settle(&self, ready: bool) {
        let mut server_rss = self.client.replica_sets();
        if ready {
            for rs in &mut server_rss {
                let n = rs_replicas(rs);
                rs.status = Some(ReplicaSetStatus {
                    replicas: n,
                    ready_replicas: Some(n),
                    available_replicas: Some(n),
                    observed_generation: rs.metadata.generation,
                    ..Default::default()
                });
                self.client.insert_replica_set(rs.clone());
            }
        }
        self.rs_cache
            .replace(server_rss.into_iter().map(Arc::new))
            .expect("replace rs cache");
        for d in self.d_cache.list() {
            let ns = d.metadata.namespace.as_deref().unwrap_or_default();
            if let Some(stored) = self.client.deployment(ns, name(&d.metadata)) {
                self.d_cache.update(Arc::new(stored)).expect("update d");
            }
        }
    }

    /// The server's copy of `d`.
    pub fn stored(&self, d: &Deployment) -> Deployment {
        self.client
            .deployment("default", name(&d.metadata))
            .expect("stored deployment")
    }

    /// The messages of every event so far.
    pub fn event_messages(&self) -> Vec<String> {
        self.recorder
            .events()
            .into_iter()
            .map(|e| e.message)
            .collect()
    }

    /// The ReplicaSets created so far.
    pub fn created(&self) -> Vec<ReplicaSet> {
        self.client
            .actions_of(Verb::CreateReplicaSet)
            .into_iter()
            .filter_map(|a| match a {
                DeploymentAction::CreateReplicaSet(rs) => Some(rs),
                _ => None,
            })
            .collect()
    }

    /// `(name, spec.replicas)` of every ReplicaSet update so far.
    pub fn rs_updates(&self) -> Vec<(String, i32)> {
        self.client
            .actions_of(Verb::UpdateReplicaSet)
            .into_iter()
            .filter_map(|a| match a {
                DeploymentAction::UpdateReplicaSet(rs) => {
                    Some((name(&rs.metadata).to_owned(), rs_replicas(&rs)))
                }
                _ => None,
            })
            .collect()
    }

    /// The objects of every status update so far.
    pub fn status_updates(&self) -> Vec<Deployment> {
        self.client
            .actions_of(Verb::UpdateDeploymentStatus)
            .into_iter()
            .filter_map(|a| match a {
                DeploymentAction::UpdateDeploymentStatus(d) => Some(d),
                _ => None,
            })
            .collect()
    }

    /// The revision annotation of the server's ReplicaSet `rs_name`.
    pub fn revision_of(&self, rs_name: &str) -> Option<String> {
        self.client
            .replica_set("default", rs_name)
            .and_then(|rs| rs.metadata.annotations)
            .and_then(|a| a.get(REVISION_ANNOTATION).cloned())
    }
}
