//! The ReplicaSet controller against the embedded API server: real HTTP, real informers, real pod writes.
//!
//! Every test starts its own in-memory API server and a controller wired as
//! kube-controller-manager wires it (shared informer factory, `RealPodControl`, event
//! broadcaster). There are no nodes: pods stay unscheduled (so deleting one removes it at once)
//! and tests that need ready pods mark them Ready themselves through `pods/status`.
//!
//! Waits are bounded polls of the API (an integration test cannot pause a real server's
//! clock); every assertion is on API state, never on timing.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Namespace, ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcm_apiserver::testing::TestServer;
use kcm_controllers::replicaset::{
    ApiReplicaSetClient, BURST_REPLICAS, ReplicaSetController, ReplicaSetControllerOptions,
};
use kcm_machinery::controller::pod_control;
use kcm_machinery::controller::{PodControl, RealPodControl, get_controller_of};
use kcm_machinery::events::{EventBroadcaster, EventRecorder, KubeEventSink};
use kcm_machinery::informer::SharedInformerFactory;
use kcm_testing::{MetaBuilder, WorkloadBuilder, container, pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The bound on every wait of these tests; generous, as CI machines are shared.
const WAIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// A running controller: its informers, workers and event broadcaster.
struct Running {
    controller: Arc<ReplicaSetController>,
    factory: SharedInformerFactory,
    broadcaster: EventBroadcaster,
    cancel: CancellationToken,
    run: JoinHandle<()>,
}

impl Running {
    /// Starts the controller as `kcm run` does, optionally writing pods through `pod_control`
    /// instead of a `RealPodControl`.
    fn start(client: &kube::Client, pod_control: Option<Arc<dyn PodControl>>) -> Self {
        let broadcaster = EventBroadcaster::new(Arc::new(KubeEventSink::new(client.clone())));
        let recorder: Arc<dyn EventRecorder> = broadcaster.recorder("replicaset-controller", None);
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let pod_control = pod_control
            .unwrap_or_else(|| Arc::new(RealPodControl::new(client.clone(), recorder.clone())));
        let controller = Arc::new(ReplicaSetController::with_informers(
            &factory.replica_sets(),
            &factory.pods(),
            Arc::new(ApiReplicaSetClient::new(client.clone())),
            pod_control,
            ReplicaSetControllerOptions {
                burst_replicas: BURST_REPLICAS,
                metrics: None,
                controller_metrics: None,
                ..ReplicaSetControllerOptions::default()
            },
        ));
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        let run = tokio::spawn(Arc::clone(&controller).run(5, cancel.clone()));
        Self {
            controller,
            factory,
            broadcaster,
            cancel,
            run,
        }
    }

    /// Stops it the way a shutdown does: cancel, wait for workers and informers.
    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(WAIT, self.run)
            .await
            .expect("controller stops")
            .expect("controller task");
        self.factory.shutdown().await;
        self.broadcaster.shutdown().await;
    }

    /// Kills it mid-flight, as a crash: workers are aborted wherever they are.
    async fn kill(self) {
        self.run.abort();
        let _ = self.run.await;
        self.cancel.cancel();
        self.factory.shutdown().await;
    }
}

/// A pod control that counts creations and, past `allowed` of them, blocks them forever
/// (the request is never sent), to stop a controller at a known point.
struct GatedPodControl {
    inner: Arc<dyn PodControl>,
    allowed: usize,
    creates: AtomicUsize,
}

impl GatedPodControl {
    fn new(client: &kube::Client, allowed: usize) -> Arc<Self> {
        let recorder: Arc<dyn EventRecorder> = Arc::new(kcm_machinery::events::FakeRecorder::new());
        Arc::new(Self {
            inner: Arc::new(RealPodControl::new(client.clone(), recorder)),
            allowed,
            creates: AtomicUsize::new(0),
        })
    }

    fn creates(&self) -> usize {
        self.creates.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl PodControl for GatedPodControl {
    async fn create_pods(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        controller: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> pod_control::Result<()> {
        if self.creates.fetch_add(1, Ordering::SeqCst) >= self.allowed {
            std::future::pending::<()>().await;
        }
        self.inner
            .create_pods(namespace, template, controller, controller_ref)
            .await
    }

    async fn create_pods_with_generate_name(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        controller: &ObjectReference,
        controller_ref: &OwnerReference,
        generate_name: &str,
    ) -> pod_control::Result<()> {
        self.inner
            .create_pods_with_generate_name(
                namespace,
                template,
                controller,
                controller_ref,
                generate_name,
            )
            .await
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        controller: &ObjectReference,
    ) -> pod_control::Result<()> {
        self.inner.delete_pod(namespace, name, controller).await
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<serde_json::Value>,
    ) -> pod_control::Result<()> {
        self.inner.patch_pod(namespace, name, patch).await
    }
}

/// Counts the pods of a namespace through a watch and remembers the most there ever were,
/// and every change of a pod's controller.
struct PodWatch {
    current: Arc<AtomicI64>,
    max: Arc<AtomicI64>,
    /// Pod name → controller UIDs it had, in order (an owner change appends).
    controllers: Arc<Mutex<HashMap<String, Vec<Option<String>>>>>,
    task: JoinHandle<()>,
}

impl PodWatch {
    async fn start(client: &kube::Client, namespace: &str) -> Self {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let list = api.list(&ListParams::default()).await.expect("list pods");
        let current = Arc::new(AtomicI64::new(
            i64::try_from(list.items.len()).expect("small"),
        ));
        let max = Arc::new(AtomicI64::new(current.load(Ordering::SeqCst)));
        let controllers: Arc<Mutex<HashMap<String, Vec<Option<String>>>>> = Arc::default();
        let mut rv = list.metadata.resource_version.unwrap_or_default();
        let task = tokio::spawn({
            let (current, max, controllers) = (current.clone(), max.clone(), controllers.clone());
            async move {
                loop {
                    let Ok(stream) = api.watch(&WatchParams::default(), &rv).await else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    };
                    let mut stream = stream.boxed();
                    while let Some(Ok(event)) = stream.next().await {
                        let (pod, delta) = match event {
                            WatchEvent::Added(pod) => (pod, 1),
                            WatchEvent::Modified(pod) => (pod, 0),
                            WatchEvent::Deleted(pod) => (pod, -1),
                            WatchEvent::Bookmark(b) => {
                                rv = b.metadata.resource_version;
                                continue;
                            }
                            WatchEvent::Error(e) => panic!("pod watch failed: {e:?}"),
                        };
                        rv = pod.metadata.resource_version.clone().unwrap_or_default();
                        let now = current.fetch_add(delta, Ordering::SeqCst) + delta;
                        max.fetch_max(now, Ordering::SeqCst);
                        let owner = get_controller_of(&pod.metadata).map(|r| r.uid.clone());
                        let name = pod.metadata.name.clone().unwrap_or_default();
                        let mut seen = controllers.lock().expect("lock");
                        let history = seen.entry(name).or_default();
                        if history.last() != Some(&owner) {
                            history.push(owner);
                        }
                    }
                }
            }
        });
        Self {
            current,
            max,
            controllers,
            task,
        }
    }

    fn max(&self) -> i64 {
        self.max.load(Ordering::SeqCst)
    }

    fn current(&self) -> i64 {
        self.current.load(Ordering::SeqCst)
    }

    /// Pods whose controller changed from one ReplicaSet to another (not orphan → owner).
    fn stolen(&self) -> Vec<String> {
        self.controllers
            .lock()
            .expect("lock")
            .iter()
            .filter(|(_, history)| history.iter().flatten().count() > 1)
            .map(|(name, _)| name.clone())
            .collect()
    }
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Marks every pod of a namespace Running and Ready as it appears, as a kubelet would.
fn start_readiness_marker(client: &kube::Client, namespace: &str) -> JoinHandle<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    tokio::spawn(async move {
        let limit = Arc::new(tokio::sync::Semaphore::new(16));
        let mut rv = String::from("0");
        loop {
            let Ok(stream) = api.watch(&WatchParams::default(), &rv).await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let mut stream = stream.boxed();
            while let Some(Ok(event)) = stream.next().await {
                let pod = match event {
                    WatchEvent::Added(pod) | WatchEvent::Modified(pod) => pod,
                    WatchEvent::Bookmark(b) => {
                        rv = b.metadata.resource_version;
                        continue;
                    }
                    WatchEvent::Deleted(_) | WatchEvent::Error(_) => continue,
                };
                rv = pod.metadata.resource_version.clone().unwrap_or_default();
                if is_ready(&pod) || pod.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let (api, limit) = (api.clone(), limit.clone());
                tokio::spawn(async move {
                    let _permit = limit.acquire().await;
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let _ = mark_ready(&api, &name).await;
                });
            }
        }
    })
}

async fn mark_ready(api: &Api<Pod>, name: &str) -> kube::Result<Pod> {
    let now = jiff::Timestamp::now().to_string();
    let status = json!({
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        }
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
}

fn is_ready(pod: &Pod) -> bool {
    kcm_machinery::controller::is_pod_ready(pod)
}

/// A ReplicaSet `name` selecting `app=<app>`.
fn replica_set(name: &str, app: &str, replicas: i32) -> ReplicaSet {
    kcm_testing::replica_set(name)
        .replicas(replicas)
        .selecting(&[("app", app)])
        .container(container("app").image("registry.k8s.io/pause:3.10"))
        .build()
}

async fn create_namespace(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = kcm_testing::namespace(name).build();
    api.create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

/// Polls `check` until it returns `Some`, failing the test after [`WAIT`].
async fn wait_for<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    wait_for_within(what, WAIT, check).await
}

/// Polls `check` until it returns `Some`, failing the test after `bound`.
async fn wait_for_within<T, F, Fut>(what: &str, bound: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The live pods of `namespace` controlled by `rs` (by UID).
async fn owned_pods(client: &kube::Client, namespace: &str, rs: &ReplicaSet) -> Vec<Pod> {
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| get_controller_of(&p.metadata).is_some_and(|r| r.uid == uid))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Waits until `rs` owns exactly `n` pods and its status, for its current generation, says so.
async fn wait_for_replicas(client: &kube::Client, namespace: &str, name: &str, n: usize) {
    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    wait_for(&format!("{namespace}/{name} to have {n} pods"), || async {
        let rs = rs_api.get(name).await.ok()?;
        let status = rs.status.clone()?;
        let observed = status.observed_generation == rs.metadata.generation;
        let want = i32::try_from(n).ok()?;
        (observed && status.replicas == want && owned_pods(client, namespace, &rs).await.len() == n)
            .then_some(())
    })
    .await;
}

async fn scale(client: &kube::Client, namespace: &str, name: &str, replicas: i32) {
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .expect("scale");
}

async fn create_rs(client: &kube::Client, namespace: &str, rs: &ReplicaSet) -> ReplicaSet {
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    api.create(&PostParams::default(), rs)
        .await
        .expect("create ReplicaSet")
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scales_zero_to_ten_to_three_to_zero() {
    let server = TestServer::start().await;
    let client = server.client();
    let watch = PodWatch::start(&client, "default").await;
    let running = Running::start(&client, None);

    create_rs(&client, "default", &replica_set("web", "web", 0)).await;
    wait_for_replicas(&client, "default", "web", 0).await;
    scale(&client, "default", "web", 10).await;
    wait_for_replicas(&client, "default", "web", 10).await;
    assert_eq!(watch.max(), 10, "never more than 10 pods");
    scale(&client, "default", "web", 3).await;
    wait_for_replicas(&client, "default", "web", 3).await;
    scale(&client, "default", "web", 0).await;
    wait_for_replicas(&client, "default", "web", 0).await;
    assert_eq!(watch.max(), 10);

    // The controller's events, with upstream's reasons, on the ReplicaSet.
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    wait_for("SuccessfulCreate and SuccessfulDelete events", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let reasons: Vec<String> = list
            .items
            .iter()
            .filter(|e| e.involved_object.kind.as_deref() == Some("ReplicaSet"))
            .filter(|e| e.involved_object.name.as_deref() == Some("web"))
            .filter_map(|e| e.reason.clone())
            .collect();
        (reasons.iter().any(|r| r == "SuccessfulCreate")
            && reasons.iter().any(|r| r == "SuccessfulDelete"))
        .then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_pod_is_replaced() {
    let server = TestServer::start().await;
    let client = server.client();
    let running = Running::start(&client, None);
    let rs = create_rs(&client, "default", &replica_set("web", "web", 3)).await;
    wait_for_replicas(&client, "default", "web", 3).await;

    let victim = owned_pods(&client, "default", &rs).await[0]
        .metadata
        .name
        .clone()
        .expect("name");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.delete(&victim, &DeleteParams::default())
        .await
        .expect("delete pod");
    wait_for("a replacement", || async {
        let owned = owned_pods(&client, "default", &rs).await;
        (owned.len() == 3
            && owned
                .iter()
                .all(|p| p.metadata.name.as_deref() != Some(victim.as_str())))
        .then_some(())
    })
    .await;
    wait_for_replicas(&client, "default", "web", 3).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_with_matching_labels_is_adopted() {
    let server = TestServer::start().await;
    let client = server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let template = replica_set("adopter", "orphan", 1)
        .spec
        .and_then(|s| s.template)
        .expect("template");
    let orphan = pod("orphan")
        .label("app", "orphan")
        .with(|p| p.spec = template.spec)
        .build();
    pods.create(&PostParams::default(), &orphan)
        .await
        .expect("create orphan");
    let rs = create_rs(&client, "default", &replica_set("adopter", "orphan", 1)).await;
    let watch = PodWatch::start(&client, "default").await;
    let running = Running::start(&client, None);

    wait_for_replicas(&client, "default", "adopter", 1).await;
    let adopted = pods.get("orphan").await.expect("orphan still there");
    let owner = get_controller_of(&adopted.metadata).expect("adopted");
    assert_eq!(Some(&owner.uid), rs.metadata.uid.as_ref());
    assert_eq!(owner.kind, "ReplicaSet");
    assert_eq!(owner.api_version, "apps/v1");
    assert_eq!(owner.name, "adopter");
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(true));
    assert_eq!(watch.max(), 1, "the orphan was adopted, nothing created");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relabelled_pod_is_released_and_replaced() {
    let server = TestServer::start().await;
    let client = server.client();
    let running = Running::start(&client, None);
    let rs = create_rs(&client, "default", &replica_set("web", "web", 2)).await;
    wait_for_replicas(&client, "default", "web", 2).await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let name = owned_pods(&client, "default", &rs).await[0]
        .metadata
        .name
        .clone()
        .expect("name");
    pods.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "debug"}}})),
    )
    .await
    .expect("relabel");

    wait_for("the relabelled pod to be released", || async {
        let pod = pods.get(&name).await.ok()?;
        get_controller_of(&pod.metadata).is_none().then_some(())
    })
    .await;
    wait_for_replicas(&client, "default", "web", 2).await;
    let owned = owned_pods(&client, "default", &rs).await;
    assert!(
        owned
            .iter()
            .all(|p| p.metadata.name.as_deref() != Some(name.as_str())),
        "replaced, not kept"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_selectors_never_fight() {
    let server = TestServer::start().await;
    let client = server.client();
    let watch = PodWatch::start(&client, "default").await;
    let running = Running::start(&client, None);
    let a = create_rs(&client, "default", &replica_set("a", "shared", 3)).await;
    let b = create_rs(&client, "default", &replica_set("b", "shared", 3)).await;
    wait_for_replicas(&client, "default", "a", 3).await;
    wait_for_replicas(&client, "default", "b", 3).await;

    // Churn: both resync as pods change; ownership must not move.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for pod in owned_pods(&client, "default", &a).await {
        let name = pod.metadata.name.clone().expect("name");
        mark_ready(&pods, &name).await.expect("mark ready");
    }
    let victim = owned_pods(&client, "default", &b).await[0]
        .metadata
        .name
        .clone()
        .expect("name");
    pods.delete(&victim, &DeleteParams::default())
        .await
        .expect("delete");
    wait_for_replicas(&client, "default", "b", 3).await;
    wait_for_replicas(&client, "default", "a", 3).await;

    assert_eq!(watch.current(), 6);
    assert_eq!(watch.max(), 6, "never more than 3 + 3 pods");
    assert!(
        watch.stolen().is_empty(),
        "pods changed owner: {:?}",
        watch.stolen()
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_namespace_rejections_do_not_hot_loop() {
    let server = TestServer::start().await;
    let client = server.client();
    create_namespace(&client, "doomed").await;
    create_rs(&client, "doomed", &replica_set("web", "web", 0)).await;
    let counting = GatedPodControl::new(&client, usize::MAX);
    let running = Running::start(&client, Some(counting.clone()));
    wait_for_replicas(&client, "doomed", "web", 0).await;

    // No namespace controller runs: the namespace stays Terminating.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("delete namespace");
    let ns = namespaces.get("doomed").await.expect("still there");
    assert_eq!(
        ns.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );

    scale(&client, "doomed", "web", 5).await;
    wait_for("the creations to be attempted", || async {
        (counting.creates() >= 5).then_some(())
    })
    .await;
    // Give a hot loop every chance to show: the rate limiter's retries start at 5ms.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        counting.creates(),
        5,
        "one attempt per missing pod, no retries"
    );
    assert_eq!(
        running
            .controller
            .queue()
            .num_requeues(&"doomed/web".to_owned()),
        0,
        "not an error: no rate-limited requeue"
    );
    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), "doomed");
    let rs = rs_api.get("web").await.expect("rs");
    assert!(
        rs.status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .all(|c| c.type_ != "ReplicaFailure"),
        "a terminating namespace is no replica failure"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_mid_scale_never_over_creates() {
    let server = TestServer::start().await;
    let client = server.client();
    let watch = PodWatch::start(&client, "default").await;
    create_rs(&client, "default", &replica_set("web", "web", 60)).await;

    // The first controller gets 20 creations through, then stalls mid-batch and dies.
    let gated = GatedPodControl::new(&client, 20);
    let first = Running::start(&client, Some(gated.clone()));
    wait_for("20 pods", || async {
        (watch.current() == 20).then_some(())
    })
    .await;
    wait_for("the stalled batch", || async {
        (gated.creates() > 20).then_some(())
    })
    .await;
    first.kill().await;

    // A fresh controller (empty expectations, fresh caches) finishes the job.
    let second = Running::start(&client, None);
    wait_for_replicas(&client, "default", "web", 60).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(watch.current(), 60);
    assert_eq!(watch.max(), 60, "never more than spec.replicas pods");
    second.stop().await;
}

/// 200 ReplicaSets × 20 replicas created at once converge to exactly 4000 pods, never more
/// at any moment, with every status fully correct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_200_replica_sets_of_20_make_exactly_4000_pods() {
    const SETS: usize = 200;
    const REPLICAS: i32 = 20;
    let server = TestServer::start().await;
    let client = server.client();
    create_namespace(&client, "stress").await;
    let watch = PodWatch::start(&client, "stress").await;
    let marker = start_readiness_marker(&client, "stress");
    let running = Running::start(&client, None);

    let created: Vec<ReplicaSet> = futures::stream::iter(0..SETS)
        .map(|i| {
            let client = client.clone();
            async move {
                let rs = replica_set(&format!("rs-{i}"), &format!("app-{i}"), REPLICAS);
                Ok::<_, kube::Error>(create_rs(&client, "stress", &rs).await)
            }
        })
        .buffer_unordered(32)
        .try_collect()
        .await
        .expect("create ReplicaSets");
    assert_eq!(created.len(), SETS);

    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), "stress");
    wait_for_within(
        "every status fully correct",
        Duration::from_secs(600),
        || {
            let rs_api = rs_api.clone();
            async move {
                let list = rs_api.list(&ListParams::default()).await.ok()?;
                let all_correct = list.items.len() == SETS
                    && list.items.iter().all(|rs| {
                        rs.status.as_ref().is_some_and(|s| {
                            s.observed_generation == rs.metadata.generation
                                && s.replicas == REPLICAS
                                && s.fully_labeled_replicas == Some(REPLICAS)
                                && s.ready_replicas == Some(REPLICAS)
                                && s.available_replicas == Some(REPLICAS)
                                && s.conditions.as_ref().is_none_or(Vec::is_empty)
                        })
                    });
                all_correct.then_some(())
            }
        },
    )
    .await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), "stress");
    let all = pods.list(&ListParams::default()).await.expect("list").items;
    assert_eq!(all.len(), SETS * 20, "exactly 4000 pods");
    let mut per_owner: HashMap<String, usize> = HashMap::new();
    for pod in &all {
        let owner = get_controller_of(&pod.metadata).expect("every pod is owned");
        *per_owner.entry(owner.uid.clone()).or_default() += 1;
    }
    assert_eq!(per_owner.len(), SETS);
    assert!(
        per_owner.values().all(|n| *n == 20),
        "20 pods per ReplicaSet"
    );
    assert_eq!(watch.max(), 4000, "never more than 4000 pods at any moment");
    marker.abort();
    running.stop().await;
}
