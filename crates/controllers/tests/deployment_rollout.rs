//! The Deployment controller against the embedded API server, with the ReplicaSet controller running and a stand-in kubelet marking pods ready; driven with `kube` and the installed `kubectl`.
//!
//! Every test starts its own server on `127.0.0.1:0` and is wrapped in a timeout. Pods are
//! never scheduled (there are no nodes), so the API server deletes them at once; the
//! stand-in kubelet makes each pod Running and Ready a little after it appears, except pods
//! annotated `sim.kcm.io/ready=false` (the simulated nodes' convention), which run but never
//! become ready.

use std::collections::BTreeMap;
use std::future::Future;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcm_apiserver::testing::TestServer;
use kcm_controllers::deployment::DeploymentController;
use kcm_controllers::deployment::util::annotations::{
    CHANGE_CAUSE_ANNOTATION, REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION,
};
use kcm_controllers::deployment::util::conditions::{
    DEPLOYMENT_PROGRESSING, NEW_RS_AVAILABLE_REASON, PAUSED_DEPLOY_REASON, TIMED_OUT_REASON,
};
use kcm_controllers::replicaset::{BURST_REPLICAS, ReplicaSetController};
use kcm_machinery::controller::{get_controller_of, is_pod_ready};
use kcm_machinery::events::{EventBroadcaster, KubeEventSink};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::{ResourceEventHandler, SharedInformerFactory};
use kcm_machinery::labels::Selector;
use kcm_testing::{WorkloadBuilder, container};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The simulated nodes' annotation for a pod that runs but never becomes ready.
const NEVER_READY: &str = "sim.kcm.io/ready";

/// How long after it appears the stand-in kubelet makes a pod ready.
const READY_DELAY: Duration = Duration::from_millis(150);

/// Every test gives up after this long.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------------
// The cluster
// ---------------------------------------------------------------------------------------------

/// An API server with the Deployment and ReplicaSet controllers and a stand-in kubelet.
struct Cluster {
    server: TestServer,
    client: kube::Client,
    factory: SharedInformerFactory,
    cancel: CancellationToken,
}

impl Cluster {
    async fn start() -> Self {
        let server = TestServer::start().await;
        let client = server.client();
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let cancel = CancellationToken::new();

        let broadcaster = EventBroadcaster::new(Arc::new(KubeEventSink::new(client.clone())));
        let rs_controller = Arc::new(ReplicaSetController::new(
            &factory,
            client.clone(),
            broadcaster.recorder("replicaset-controller", None),
            BURST_REPLICAS,
        ));
        let d_controller = Arc::new(DeploymentController::new(
            &factory,
            client.clone(),
            broadcaster.recorder("deployment-controller", None),
        ));

        let (tx, rx) = mpsc::unbounded_channel();
        if let Err(err) = factory.pods().add_event_handler(PodFeed(tx)) {
            panic!("registering the kubelet's handler: {err}");
        }
        tokio::spawn(kubelet(client.clone(), rx, cancel.clone()));

        factory.start(&cancel);
        assert!(factory.wait_for_cache_sync(&cancel).await, "caches sync");
        tokio::spawn(Arc::clone(&rs_controller).run(5, cancel.clone()));
        tokio::spawn(Arc::clone(&d_controller).run(5, cancel.clone()));
        Self {
            server,
            client,
            factory,
            cancel,
        }
    }

    fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), "default")
    }

    fn replica_sets(&self) -> Api<ReplicaSet> {
        Api::namespaced(self.client.clone(), "default")
    }

    async fn create(&self, d: &Deployment) -> Deployment {
        self.deployments()
            .create(&PostParams::default(), d)
            .await
            .expect("create deployment")
    }

    async fn patch(&self, name: &str, patch: serde_json::Value) {
        self.deployments()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch deployment");
    }

    async fn set_image(&self, name: &str, image: &str) {
        self.patch(
            name,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}),
        )
        .await;
    }

    async fn get(&self, name: &str) -> Deployment {
        self.deployments().get(name).await.expect("get deployment")
    }

    /// The Deployment's ReplicaSets, by revision.
    async fn replica_sets_of(&self, name: &str) -> Vec<ReplicaSet> {
        let d = self.get(name).await;
        let mut rss: Vec<ReplicaSet> = self
            .replica_sets()
            .list(&ListParams::default())
            .await
            .expect("list replicasets")
            .items
            .into_iter()
            .filter(|rs| {
                get_controller_of(&rs.metadata).map(|r| r.uid.as_str()) == d.metadata.uid.as_deref()
            })
            .collect();
        rss.sort_by_key(|rs| revision(rs).parse::<i64>().unwrap_or(0));
        rss
    }

    /// Polls until `check` holds for the Deployment, or panics after a minute.
    async fn wait_for<F: Fn(&Deployment) -> bool>(
        &self,
        name: &str,
        what: &str,
        check: F,
    ) -> Deployment {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let d = self.get(name).await;
            if check(&d) {
                return d;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("timed out waiting for {what}: {:#?}", d.status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the rollout of the current generation is complete.
    async fn wait_complete(&self, name: &str) -> Deployment {
        self.wait_for(name, "the rollout to complete", |d| {
            let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let s = d.status.clone().unwrap_or_default();
            s.observed_generation >= d.metadata.generation
                && s.updated_replicas.unwrap_or(0) == replicas
                && s.replicas.unwrap_or(0) == replicas
                && s.available_replicas.unwrap_or(0) == replicas
                && progressing_reason(d).as_deref() == Some(NEW_RS_AVAILABLE_REASON)
        })
        .await
    }

    /// Runs the installed kubectl against this server; `(success, stdout + stderr)`.
    async fn kubectl(&self, args: &[&str]) -> (bool, String) {
        let kubeconfig = self.server.kubeconfig_path().to_path_buf();
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        tokio::task::spawn_blocking(move || {
            let out = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(&args)
                .output()
                .expect("run kubectl");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            (out.status.success(), text)
        })
        .await
        .expect("kubectl task")
    }

    /// Records, for the pods labelled `app=<app>`, the most that ever existed at once and
    /// the fewest ever ready once `floor_from` pods first were, checked on every pod event.
    fn watch_pods(&self, app: &str, floor_from: usize) -> Arc<Mutex<PodWatch>> {
        let state = Arc::new(Mutex::new(PodWatch::default()));
        let handler = PodCounter {
            app: app.to_owned(),
            floor_from,
            lister: self.factory.pods().lister(),
            state: Arc::clone(&state),
        };
        if let Err(err) = self.factory.pods().add_event_handler(handler) {
            panic!("registering the pod watch: {err}");
        }
        state
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Runs a test body under [`TEST_TIMEOUT`].
async fn within_timeout(body: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_TIMEOUT, body)
        .await
        .expect("test timed out");
}

// ---------------------------------------------------------------------------------------------
// The stand-in kubelet
// ---------------------------------------------------------------------------------------------

/// Forwards pod notifications to the kubelet task.
struct PodFeed(mpsc::UnboundedSender<Arc<Pod>>);

impl ResourceEventHandler<Pod> for PodFeed {
    fn on_add(&self, pod: Arc<Pod>, _is_in_initial_list: bool) {
        let _ = self.0.send(pod);
    }
}

/// Makes every new pod Running and Ready after [`READY_DELAY`] (Running only when annotated
/// never-ready).
async fn kubelet(
    client: kube::Client,
    mut pods: mpsc::UnboundedReceiver<Arc<Pod>>,
    cancel: CancellationToken,
) {
    loop {
        let pod = tokio::select! {
            _ = cancel.cancelled() => return,
            pod = pods.recv() => match pod { Some(p) => p, None => return },
        };
        if pod.metadata.deletion_timestamp.is_some() || is_pod_ready(&pod) {
            continue;
        }
        let client = client.clone();
        tokio::spawn(async move {
            tokio::time::sleep(READY_DELAY).await;
            let never_ready = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(NEVER_READY))
                .is_some_and(|v| v == "false");
            let now = jiff::Timestamp::now().to_string();
            let ready = if never_ready { "False" } else { "True" };
            let status = json!({"status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": now}],
            }});
            let api: Api<Pod> = Api::namespaced(
                client,
                pod.metadata.namespace.as_deref().unwrap_or("default"),
            );
            // The pod may be gone already.
            let _ = api
                .patch_status(
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    &PatchParams::default(),
                    &Patch::Merge(status),
                )
                .await;
        });
    }
}

// ---------------------------------------------------------------------------------------------
// The pod watch
// ---------------------------------------------------------------------------------------------

/// What [`Cluster::watch_pods`] saw.
#[derive(Debug, Default)]
struct PodWatch {
    /// The most pods that existed at once.
    max_pods: usize,
    /// The fewest ready pods once the floor was first reached.
    min_ready: Option<usize>,
    /// The pods of two different ReplicaSets existing at once, if ever (names).
    mixed: Option<Vec<String>>,
}

struct PodCounter {
    app: String,
    floor_from: usize,
    lister: kcm_machinery::informer::Lister<Pod>,
    state: Arc<Mutex<PodWatch>>,
}

impl PodCounter {
    fn observe(&self) {
        let selector = Selector::from_map(&BTreeMap::from([("app".to_owned(), self.app.clone())]))
            .expect("selector");
        let pods: Vec<Arc<Pod>> = self
            .lister
            .list("default", &selector)
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let ready = pods.iter().filter(|p| is_pod_ready(p)).count();
        let mut owners: Vec<String> = pods
            .iter()
            .filter_map(|p| get_controller_of(&p.metadata).map(|r| r.name.clone()))
            .collect();
        owners.sort();
        owners.dedup();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.max_pods = state.max_pods.max(pods.len());
        if ready >= self.floor_from || state.min_ready.is_some() {
            state.min_ready = Some(state.min_ready.map_or(ready, |m| m.min(ready)));
        }
        if owners.len() > 1 && state.mixed.is_none() {
            state.mixed = Some(owners);
        }
    }
}

impl ResourceEventHandler<Pod> for PodCounter {
    fn on_add(&self, _pod: Arc<Pod>, _is_in_initial_list: bool) {
        self.observe();
    }
    fn on_update(&self, _old: Arc<Pod>, _new: Arc<Pod>) {
        self.observe();
    }
    fn on_delete(&self, _obj: DeletedObject<Pod>) {
        self.observe();
    }
}

// ---------------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------------

/// A Deployment `default/<name>` of `replicas` pods running `image`, rolling with the given
/// surge and unavailability.
fn deployment(name: &str, replicas: i32, image: &str, surge: i32, unavailable: i32) -> Deployment {
    kcm_testing::deployment(name)
        .replicas(replicas)
        .selecting(&[("app", name)])
        .container(container("app").image(image))
        .rolling_update(IntOrString::Int(surge), IntOrString::Int(unavailable))
        .build()
}

fn revision(rs: &ReplicaSet) -> String {
    annotation(&rs.metadata, REVISION_ANNOTATION).unwrap_or_default()
}

fn annotation(meta: &ObjectMeta, key: &str) -> Option<String> {
    meta.annotations.as_ref().and_then(|a| a.get(key).cloned())
}

fn image_of(rs: &ReplicaSet) -> String {
    rs.spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

fn replicas_of(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn progressing_reason(d: &Deployment) -> Option<String> {
    d.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == DEPLOYMENT_PROGRESSING))
        .and_then(|c| c.reason.clone())
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_stays_within_surge_and_availability() {
    within_timeout(async {
        let cluster = Cluster::start().await;
        cluster
            .create(&deployment("web", 10, "image:v1", 2, 1))
            .await;
        cluster.wait_complete("web").await;

        let watch = cluster.watch_pods("web", 10);
        cluster.set_image("web", "image:v2").await;
        let (ok, out) = cluster
            .kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"])
            .await;
        assert!(ok, "kubectl rollout status: {out}");
        assert!(out.contains("successfully rolled out"), "{out}");
        cluster.wait_complete("web").await;

        {
            let seen = watch.lock().unwrap_or_else(|e| e.into_inner());
            assert!(seen.max_pods <= 12, "at most 10 + maxSurge pods: {seen:?}");
            assert!(
                seen.min_ready.is_some_and(|m| m >= 9),
                "at least 10 - maxUnavailable ready: {seen:?}"
            );
        }
        let rss = cluster.replica_sets_of("web").await;
        let summary: Vec<(String, String, i32)> = rss
            .iter()
            .map(|rs| (revision(rs), image_of(rs), replicas_of(rs)))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("1".to_owned(), "image:v1".to_owned(), 0),
                ("2".to_owned(), "image:v2".to_owned(), 10)
            ]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_never_runs_old_and_new_pods_together() {
    within_timeout(async {
        let cluster = Cluster::start().await;
        let mut d = deployment("db", 3, "image:v1", 0, 0);
        if let Some(s) = d.spec.as_mut() {
            s.strategy = Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                rolling_update: None,
            });
        }
        cluster.create(&d).await;
        cluster.wait_complete("db").await;
        let watch = cluster.watch_pods("db", 3);
        cluster.set_image("db", "image:v2").await;
        cluster
            .wait_for("db", "the v2 rollout", |d| {
                d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation
                    && progressing_reason(d).as_deref() == Some(NEW_RS_AVAILABLE_REASON)
                    && d.status.as_ref().and_then(|s| s.updated_replicas) == Some(3)
            })
            .await;
        cluster.wait_complete("db").await;
        let seen = watch.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(seen.mixed, None, "old and new pods at once: {seen:?}");
        assert!(seen.max_pods <= 3, "{seen:?}");
        assert_eq!(
            seen.min_ready,
            Some(0),
            "Recreate goes through zero: {seen:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_a_stuck_rollout_is_proportional() {
    // Upstream's e2e "proportional scaling": 10 replicas, maxSurge 3, maxUnavailable 2, a
    // new template whose pods never become ready.
    within_timeout(async {
        let cluster = Cluster::start().await;
        cluster
            .create(&deployment("web", 10, "image:v1", 3, 2))
            .await;
        cluster.wait_complete("web").await;
        cluster
            .patch(
                "web",
                json!({"spec": {"template": {
                    "metadata": {"annotations": {NEVER_READY: "false"}},
                    "spec": {"containers": [{"name": "app", "image": "image:broken"}]},
                }}}),
            )
            .await;
        let sizes = |rss: &[ReplicaSet]| rss.iter().map(replicas_of).collect::<Vec<_>>();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let rss = cluster.replica_sets_of("web").await;
            if sizes(&rss) == vec![8, 5] {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "stuck at {:?}",
                sizes(&rss)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Stays stuck there: no available new pod, no old pod may go.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(sizes(&cluster.replica_sets_of("web").await), vec![8, 5]);

        cluster
            .patch("web", json!({"spec": {"replicas": 30}}))
            .await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let rss = cluster.replica_sets_of("web").await;
            // 33 allowed, 13 now: the old ReplicaSet keeps 8/13 of it, the new one 5/13.
            if sizes(&rss) == vec![20, 13] {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "scaled to {:?}",
                sizes(&rss)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rollout_undo_restores_the_previous_template() {
    within_timeout(async {
        let cluster = Cluster::start().await;
        // kubectl's undo patch replaces `/metadata/annotations`, which must exist. Upstream it
        // always does (the controller's revision annotation); here the change cause provides
        // it, see `deployment_carries_its_revision_annotation`.
        let mut d = deployment("web", 2, "image:v1", 1, 0);
        d.metadata.annotations = Some(BTreeMap::from([(
            CHANGE_CAUSE_ANNOTATION.to_owned(),
            "create v1".to_owned(),
        )]));
        cluster.create(&d).await;
        cluster.wait_complete("web").await;
        // One write, as `kubectl set image --record` does.
        cluster
            .patch(
                "web",
                json!({
                    "metadata": {"annotations": {CHANGE_CAUSE_ANNOTATION: "set image v2"}},
                    "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "image:v2"}]}}},
                }),
            )
            .await;
        cluster.wait_complete("web").await;

        let (ok, out) = cluster.kubectl(&["rollout", "undo", "deployment/web"]).await;
        assert!(ok, "kubectl rollout undo: {out}");
        let d = cluster.wait_complete("web").await;
        let image = d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone());
        assert_eq!(image.as_deref(), Some("image:v1"));

        // As upstream: the v1 ReplicaSet is reused under revision 3, remembering revision 1.
        let rss = cluster.replica_sets_of("web").await;
        let summary: Vec<(String, String, i32, Option<String>)> = rss
            .iter()
            .map(|rs| {
                (
                    revision(rs),
                    image_of(rs),
                    replicas_of(rs),
                    annotation(&rs.metadata, REVISION_HISTORY_ANNOTATION),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("2".to_owned(), "image:v2".to_owned(), 0, None),
                ("3".to_owned(), "image:v1".to_owned(), 2, Some("1".to_owned())),
            ]
        );
        let (ok, out) = cluster.kubectl(&["rollout", "history", "deployment/web"]).await;
        assert!(ok, "kubectl rollout history: {out}");
        let rows: Vec<&str> = out.lines().skip(2).filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(rows.len(), 2, "{out}");
        assert!(rows[0].starts_with('2') && rows[0].contains("set image v2"), "{out}");
        assert!(rows[1].starts_with('3') && rows[1].contains("create v1"), "{out}");
    })
    .await;
}

/// The controller writes `deployment.kubernetes.io/revision` onto the Deployment through
/// `/status` (upstream's Deployment status strategy keeps annotation changes), and the
/// embedded API server lets it through as upstream does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_carries_its_revision_annotation() {
    within_timeout(async {
        let cluster = Cluster::start().await;
        cluster
            .create(&deployment("web", 1, "image:v1", 1, 0))
            .await;
        cluster.wait_complete("web").await;
        cluster.set_image("web", "image:v2").await;
        let d = cluster.wait_complete("web").await;
        assert_eq!(
            annotation(&d.metadata, REVISION_ANNOTATION).as_deref(),
            Some("2")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rollout_pause_holds_the_rollout_until_resume() {
    within_timeout(async {
        let cluster = Cluster::start().await;
        cluster
            .create(&deployment("web", 2, "image:v1", 1, 0))
            .await;
        cluster.wait_complete("web").await;

        let (ok, out) = cluster
            .kubectl(&["rollout", "pause", "deployment/web"])
            .await;
        assert!(ok, "kubectl rollout pause: {out}");
        cluster
            .wait_for("web", "the paused condition", |d| {
                progressing_reason(d).as_deref() == Some(PAUSED_DEPLOY_REASON)
            })
            .await;
        cluster.set_image("web", "image:v2").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            cluster.replica_sets_of("web").await.len(),
            1,
            "no rollout while paused"
        );

        let (ok, out) = cluster
            .kubectl(&["rollout", "resume", "deployment/web"])
            .await;
        assert!(ok, "kubectl rollout resume: {out}");
        let (ok, out) = cluster
            .kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"])
            .await;
        assert!(ok, "kubectl rollout status: {out}");
        let rss = cluster.replica_sets_of("web").await;
        assert_eq!(rss.len(), 2);
        assert_eq!(image_of(&rss[1]), "image:v2");
        assert_eq!(replicas_of(&rss[1]), 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_ready_pods_exceed_the_progress_deadline() {
    within_timeout(async {
        let cluster = Cluster::start().await;
        let mut d = deployment("web", 2, "image:broken", 1, 0);
        if let Some(s) = d.spec.as_mut() {
            s.progress_deadline_seconds = Some(2);
            if let Some(m) = s.template.metadata.as_mut() {
                m.annotations = Some(BTreeMap::from([(
                    NEVER_READY.to_owned(),
                    "false".to_owned(),
                )]));
            }
        }
        cluster.create(&d).await;
        let d = cluster
            .wait_for("web", "ProgressDeadlineExceeded", |d| {
                progressing_reason(d).as_deref() == Some(TIMED_OUT_REASON)
            })
            .await;
        let condition = d
            .status
            .and_then(|s| s.conditions)
            .and_then(|c| c.into_iter().find(|c| c.type_ == DEPLOYMENT_PROGRESSING))
            .expect("condition");
        assert_eq!(condition.status, "False");
        assert!(
            condition
                .message
                .as_deref()
                .is_some_and(|m| m.ends_with("has timed out progressing.")),
            "{condition:?}"
        );
        let (ok, out) = cluster
            .kubectl(&["rollout", "status", "deployment/web", "--timeout=30s"])
            .await;
        assert!(!ok, "rollout status fails: {out}");
        assert!(out.contains("exceeded its progress deadline"), "{out}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_is_trimmed_to_the_revision_history_limit() {
    within_timeout(async {
        let cluster = Cluster::start().await;
        let mut d = deployment("web", 1, "image:v1", 1, 0);
        if let Some(s) = d.spec.as_mut() {
            s.revision_history_limit = Some(2);
        }
        cluster.create(&d).await;
        cluster.wait_complete("web").await;
        for v in 2..=5 {
            cluster.set_image("web", &format!("image:v{v}")).await;
            cluster.wait_complete("web").await;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let rss = cluster.replica_sets_of("web").await;
            let revisions: Vec<String> = rss.iter().map(revision).collect();
            if revisions == ["3", "4", "5"] {
                assert_eq!(image_of(&rss[2]), "image:v5");
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "revisions {revisions:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}
