//! The garbage collector against the embedded API server: background, foreground and orphan cascades, shared ownership, restarts, scale.
//!
//! No Deployment or ReplicaSet controller runs here: each test builds its object trees with
//! owner references itself, then deletes owners through the API as `kubectl delete` would.
//! Waiting for the collector is polling with a deadline (the collector works in real time
//! against a real HTTP server); the deadline only bounds a failure.

mod manager_support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::Metadata;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kcm_apiserver::testing::TestServer;
use kcm_controllers::garbagecollector::{
    GarbageCollector, GarbageCollectorOptions, GroupVersionResource,
};
use kcm_machinery::events::FakeRecorder;
use kcm_machinery::informer::SharedInformerFactory;
use kcm_testing::{MetaBuilder, PodSpecBuilder, WorkloadBuilder, container, owner_ref_of};
use kube::Resource;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use manager_support::{timed, wait_until};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Bounds every test, so a stuck cascade fails instead of hanging CI.
const TEST_TIMEOUT: Duration = Duration::from_secs(180);

// ----- the collector --------------------------------------------------------------------------

/// A running collector and what stops it.
struct RunningGc {
    gc: Arc<GarbageCollector>,
    recorder: FakeRecorder,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl RunningGc {
    /// Starts a collector with its own informer factory and waits for its monitors to sync.
    async fn start(client: kube::Client) -> Self {
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let recorder = FakeRecorder::new();
        let gc = Arc::new(GarbageCollector::new(
            client,
            &factory,
            Arc::new(recorder.clone()),
            GarbageCollectorOptions {
                sync_period: Duration::from_secs(2),
                ..GarbageCollectorOptions::default()
            },
        ));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(gc.clone().run(5, cancel.clone()));
        let synced = gc.clone();
        wait_until("the collector's monitors have synced", move || {
            let gc = synced.clone();
            async move { gc.is_synced() }
        })
        .await;
        Self {
            gc,
            recorder,
            cancel,
            task,
        }
    }

    /// Stops the collector and waits for every task of it to end.
    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.expect("collector task");
    }
}

// ----- object builders ------------------------------------------------------------------------

fn owner_ref<K: Metadata<Ty = ObjectMeta>>(obj: &K, block: bool) -> OwnerReference {
    let r = owner_ref_of(obj).block_owner_deletion(block);
    if block {
        r.controller(true).build()
    } else {
        r.build()
    }
}

fn deployment(name: &str) -> Deployment {
    kcm_testing::deployment(name)
        .replicas(1)
        .selecting(&[("app", name)])
        .container(container("c").image("nginx:1.27"))
        .build()
}

fn replica_set(name: &str, owners: Vec<OwnerReference>) -> ReplicaSet {
    (owners.into_iter())
        .fold(kcm_testing::replica_set(name), |rs, o| rs.owner(o))
        .replicas(1)
        .selecting(&[("app", name)])
        .container(container("c").image("nginx:1.27"))
        .build()
}

fn pod(name: &str, owners: Vec<OwnerReference>, finalizers: &[&str]) -> Pod {
    (owners.into_iter())
        .fold(kcm_testing::pod(name), |p, o| p.owner(o))
        .finalizers(finalizers)
        .container(container("c").image("nginx:1.27"))
        .build()
}

/// A Deployment owning `replica_sets` ReplicaSets of `pods` pods each (blocking references,
/// as the controllers set them), in `namespace`. Pods are named `{rs}-{i}`.
async fn deployment_tree(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    replica_sets: usize,
    pods: usize,
    held: Option<&str>,
) -> (Deployment, Vec<ReplicaSet>) {
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let d = deploys
        .create(&PostParams::default(), &deployment(name))
        .await
        .expect("create deployment");
    let mut created = Vec::new();
    for r in 0..replica_sets {
        let rs_name = format!("{name}-rs{r}");
        let rs = rss
            .create(
                &PostParams::default(),
                &replica_set(&rs_name, vec![owner_ref(&d, true)]),
            )
            .await
            .expect("create replicaset");
        for i in 0..pods {
            let pod_name = format!("{rs_name}-{i}");
            let finalizers: Vec<&str> = held
                .filter(|h| *h == pod_name)
                .map(|_| HOLD)
                .into_iter()
                .collect();
            pod_api
                .create(
                    &PostParams::default(),
                    &pod(&pod_name, vec![owner_ref(&rs, true)], &finalizers),
                )
                .await
                .expect("create pod");
        }
        created.push(rs);
    }
    (d, created)
}

/// A finalizer nobody but the test removes: holds a pod in deletion.
const HOLD: &str = "example.com/hold";

async fn release_hold(pods: &Api<Pod>, name: &str) {
    pods.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("remove the hold finalizer");
}

async fn names<K>(api: &Api<K>) -> Vec<String>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|o| o.meta().name.clone())
        .collect();
    names.sort();
    names
}

async fn gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    matches!(api.get_opt(name).await, Ok(None))
}

async fn create_namespace(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = kcm_testing::namespace(name).build();
    api.create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

/// How many dependents the graph records for `uid`.
fn dependents(gc: &GarbageCollector, uid: &str) -> usize {
    gc.graph()
        .read()
        .get(uid)
        .map_or(0, |n| n.dependents().len())
}

/// How many graph nodes have one of `kinds`.
fn nodes_of_kinds(gc: &GarbageCollector, kinds: &[&str]) -> usize {
    gc.graph()
        .read()
        .iter()
        .filter(|n| kinds.contains(&n.identity().kind.as_str()))
        .count()
}

fn owner_uids(refs: Option<Vec<OwnerReference>>) -> Vec<String> {
    refs.unwrap_or_default()
        .into_iter()
        .map(|r| r.uid)
        .collect()
}

// ----- tests ----------------------------------------------------------------------------------

#[tokio::test]
async fn background_deletion_of_a_deployment_removes_its_replica_sets_and_pods() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let gc = RunningGc::start(client.clone()).await;
        let monitored = gc.gc.monitored_resources();
        assert!(monitored.contains(&GroupVersionResource::new("", "v1", "pods")));
        assert!(monitored.contains(&GroupVersionResource::new("apps", "v1", "replicasets")));
        assert!(
            !monitored.iter().any(|r| r.resource == "events"),
            "events are never monitored: {monitored:?}"
        );

        let (d, created) = deployment_tree(&client, "default", "web", 2, 3, None).await;
        let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
        let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        // The graph links the tree; nothing is collected while the owners exist.
        let d_uid = d.metadata.uid.clone().unwrap_or_default();
        wait_until("the graph has the whole tree", || async {
            dependents(&gc.gc, &d_uid) == 2
                && created.iter().all(|rs| {
                    dependents(&gc.gc, rs.metadata.uid.as_deref().unwrap_or_default()) == 3
                })
        })
        .await;
        assert_eq!(names(&pods).await.len(), 6);

        deploys
            .delete("web", &DeleteParams::background())
            .await
            .expect("delete deployment");
        wait_until("the replica sets and pods are gone", || async {
            names(&rss).await.is_empty() && names(&pods).await.is_empty()
        })
        .await;
        assert!(gone(&deploys, "web").await);
        wait_until(
            "the graph has no pod, ReplicaSet or Deployment left",
            || async { nodes_of_kinds(&gc.gc, &["Pod", "ReplicaSet", "Deployment"]) == 0 },
        )
        .await;
        gc.stop().await;
    })
    .await;
}

#[tokio::test]
async fn foreground_deletion_keeps_the_owner_until_its_blocking_dependents_are_gone() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let gc = RunningGc::start(client.clone()).await;
        // One pod carries a finalizer of the test's: it stays, being deleted, until released.
        deployment_tree(&client, "default", "fg", 2, 2, Some("fg-rs0-1")).await;
        let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
        let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

        deploys
            .delete("fg", &DeleteParams::foreground())
            .await
            .expect("delete deployment");
        // Everything not held goes; the held pod's ReplicaSet and the Deployment wait, each
        // with a deletionTimestamp and the foregroundDeletion finalizer.
        wait_until("only the held branch is left", || async {
            names(&pods).await == ["fg-rs0-1"] && names(&rss).await == ["fg-rs0"]
        })
        .await;
        let d = deploys.get("fg").await.expect("the deployment waits");
        assert!(d.metadata.deletion_timestamp.is_some());
        assert_eq!(
            d.metadata.finalizers,
            Some(vec!["foregroundDeletion".to_owned()])
        );
        let rs = rss.get("fg-rs0").await.expect("the replica set waits");
        assert!(rs.metadata.deletion_timestamp.is_some());
        assert_eq!(
            rs.metadata.finalizers,
            Some(vec!["foregroundDeletion".to_owned()])
        );
        let held = pods.get("fg-rs0-1").await.expect("held pod");
        assert!(
            held.metadata.deletion_timestamp.is_some(),
            "the held pod is being deleted"
        );

        release_hold(&pods, "fg-rs0-1").await;
        wait_until("the deployment disappears after its dependents", || async {
            gone(&deploys, "fg").await
        })
        .await;
        assert!(names(&rss).await.is_empty());
        assert!(names(&pods).await.is_empty());
        gc.stop().await;
    })
    .await;
}

#[tokio::test]
async fn orphan_deletion_leaves_the_dependents_without_the_owner_reference() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let gc = RunningGc::start(client.clone()).await;
        let (_, created) = deployment_tree(&client, "default", "orph", 2, 2, None).await;
        let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
        let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

        deploys
            .delete("orph", &DeleteParams::orphan())
            .await
            .expect("delete deployment");
        wait_until("the deployment is gone", || async {
            gone(&deploys, "orph").await
        })
        .await;
        // The ReplicaSets stay, without their reference to the Deployment; their pods stay,
        // still owned by their (living) ReplicaSets.
        assert_eq!(names(&rss).await, ["orph-rs0", "orph-rs1"]);
        for rs in &created {
            let live = rss
                .get(&rs.metadata.name.clone().unwrap_or_default())
                .await
                .expect("rs");
            assert!(owner_uids(live.metadata.owner_references).is_empty());
        }
        for p in ["orph-rs0-0", "orph-rs0-1", "orph-rs1-0", "orph-rs1-1"] {
            let live = pods.get(p).await.expect("pod kept");
            assert_eq!(owner_uids(live.metadata.owner_references).len(), 1);
        }
        gc.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_pod_with_two_owners_survives_the_deletion_of_one() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let gc = RunningGc::start(client.clone()).await;
        let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let a = rss
            .create(&PostParams::default(), &replica_set("a", vec![]))
            .await
            .expect("a");
        let b = rss
            .create(&PostParams::default(), &replica_set("b", vec![]))
            .await
            .expect("b");
        pods.create(
            &PostParams::default(),
            &pod(
                "shared",
                vec![owner_ref(&a, false), owner_ref(&b, false)],
                &[],
            ),
        )
        .await
        .expect("shared pod");
        pods.create(
            &PostParams::default(),
            &pod("only-a", vec![owner_ref(&a, true)], &[]),
        )
        .await
        .expect("pod of a");

        rss.delete("a", &DeleteParams::background())
            .await
            .expect("delete a");
        wait_until("a's own pod is gone", || async {
            gone(&pods, "only-a").await
        })
        .await;
        let b_uid = b.metadata.uid.clone().unwrap_or_default();
        wait_until("the dangling reference is removed", || async {
            pods.get("shared")
                .await
                .is_ok_and(|p| owner_uids(p.metadata.owner_references) == [b_uid.clone()])
        })
        .await;
        assert_eq!(names(&pods).await, ["shared"]);
        gc.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_restarted_collector_finishes_a_cascade_started_before() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
        let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

        let first = RunningGc::start(client.clone()).await;
        deployment_tree(&client, "default", "r", 2, 3, Some("r-rs1-2")).await;
        deploys
            .delete("r", &DeleteParams::foreground())
            .await
            .expect("delete deployment");
        wait_until("the cascade is under way, held by one pod", || async {
            names(&pods).await == ["r-rs1-2"] && names(&rss).await == ["r-rs1"]
        })
        .await;
        first.stop().await;

        // While no collector runs: the held pod is released, and another tree loses its
        // owner in the background.
        release_hold(&pods, "r-rs1-2").await;
        deployment_tree(&client, "default", "bg", 1, 4, None).await;
        deploys
            .delete("bg", &DeleteParams::background())
            .await
            .expect("delete deployment");
        assert_eq!(names(&rss).await, ["bg-rs0", "r-rs1"]);

        let second = RunningGc::start(client.clone()).await;
        wait_until("every cascade is finished", || async {
            names(&deploys).await.is_empty()
                && names(&rss).await.is_empty()
                && names(&pods).await.is_empty()
        })
        .await;
        second.stop().await;
    })
    .await;
}

#[tokio::test]
async fn owner_references_across_namespaces_or_to_unknown_kinds() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        create_namespace(&client, "ns1").await;
        create_namespace(&client, "ns2").await;
        let gc = RunningGc::start(client.clone()).await;
        let rs1: Api<ReplicaSet> = Api::namespaced(client.clone(), "ns1");
        let pods2: Api<Pod> = Api::namespaced(client.clone(), "ns2");
        let owner = rs1
            .create(&PostParams::default(), &replica_set("rs", vec![]))
            .await
            .expect("rs in ns1");
        wait_until("the owner is in the graph", || async {
            gc.gc
                .graph()
                .contains(owner.metadata.uid.as_deref().unwrap_or_default())
        })
        .await;
        // A pod of ns2 naming the ReplicaSet of ns1: the owner does not exist in ns2.
        pods2
            .create(&PostParams::default(), &pod("cross", vec![owner_ref(&owner, false)], &[]))
            .await
            .expect("cross-namespace pod");
        // A pod owned by a kind nobody serves.
        let widget = kcm_testing::owner_ref("example.com/v1", "Widget", "w", "widget-uid").build();
        pods2
            .create(&PostParams::default(), &pod("widget-owned", vec![widget], &[]))
            .await
            .expect("pod of an unknown kind");
        // A sentinel the collector must delete (its owner never existed).
        let ghost = kcm_testing::owner_ref("v1", "ConfigMap", "ghost", "ghost-uid").build();
        pods2
            .create(&PostParams::default(), &pod("sentinel", vec![ghost], &[]))
            .await
            .expect("sentinel");

        wait_until("the cross-namespace reference is reported", || async {
            gc.recorder
                .reasons()
                .iter()
                .any(|r| r == "OwnerRefInvalidNamespace")
        })
        .await;
        let event = gc
            .recorder
            .events()
            .into_iter()
            .find(|e| e.reason == "OwnerRefInvalidNamespace")
            .expect("event");
        assert_eq!(event.regarding.name.as_deref(), Some("cross"));
        assert_eq!(event.regarding.namespace.as_deref(), Some("ns2"));
        assert_eq!(
            event.message,
            format!(
                "ownerRef [apps/v1/ReplicaSet, namespace: ns2, name: rs, uid: {}] does not exist in namespace \"ns2\"",
                owner.metadata.uid.clone().unwrap_or_default()
            )
        );
        wait_until("the sentinel and the cross-namespace pod are collected", || async {
            gone(&pods2, "sentinel").await && gone(&pods2, "cross").await
        })
        .await;
        // The owner in ns1 is untouched; the unknown kind deletes nothing.
        assert!(rs1.get("rs").await.is_ok());
        assert!(pods2.get("widget-owned").await.is_ok());
        gc.stop().await;
    })
    .await;
}

#[tokio::test]
async fn deleting_a_hundred_replica_sets_of_twenty_pods_at_once_leaves_no_pod() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let gc = RunningGc::start(client.clone()).await;
        let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let owners: Vec<ReplicaSet> = futures::stream::iter(0..100)
            .map(|i| {
                let rss = rss.clone();
                async move {
                    rss.create(
                        &PostParams::default(),
                        &replica_set(&format!("rs{i}"), vec![]),
                    )
                    .await
                    .expect("create replicaset")
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        let creates = owners.iter().flat_map(|rs| {
            let name = rs.metadata.name.clone().unwrap_or_default();
            let reference = owner_ref(rs, true);
            (0..20).map(move |i| (format!("{name}-{i}"), reference.clone()))
        });
        futures::stream::iter(creates)
            .map(|(name, reference)| {
                let pods = pods.clone();
                async move {
                    pods.create(&PostParams::default(), &pod(&name, vec![reference], &[]))
                        .await
                        .expect("create pod")
                }
            })
            .buffer_unordered(32)
            .for_each(|_| async {})
            .await;
        assert_eq!(names(&pods).await.len(), 2000);

        futures::stream::iter(0..100)
            .map(|i| {
                let rss = rss.clone();
                async move {
                    rss.delete(&format!("rs{i}"), &DeleteParams::background())
                        .await
                        .expect("delete replicaset")
                }
            })
            .buffer_unordered(100)
            .for_each(|_| async {})
            .await;
        wait_until("no pod is left", || async { names(&pods).await.is_empty() }).await;
        wait_until("the graph has no pod left", || async {
            nodes_of_kinds(&gc.gc, &["Pod"]) == 0
        })
        .await;
        gc.stop().await;
    })
    .await;
}

#[tokio::test]
async fn owners_of_kinds_no_controller_watches_are_followed_through_metadata_informers() {
    timed(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let client = server.client();
        let gc = RunningGc::start(client.clone()).await;
        // ConfigMaps are not among the shared typed informers: the collector watches them
        // with a metadata-only informer of its own, and learns of the deletion from it.
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": "config"}})).expect("cm");
        let cm = cms.create(&PostParams::default(), &cm).await.expect("cm");
        pods.create(
            &PostParams::default(),
            &pod("uses-config", vec![owner_ref(&cm, false)], &[]),
        )
        .await
        .expect("pod");
        let cm_uid = cm.metadata.uid.clone().unwrap_or_default();
        wait_until("the configmap is observed with its dependent", || async {
            dependents(&gc.gc, &cm_uid) == 1
                && gc
                    .gc
                    .graph()
                    .snapshot(&cm_uid)
                    .is_some_and(|n| !n.is_virtual)
        })
        .await;
        cms.delete("config", &DeleteParams::background())
            .await
            .expect("delete configmap");
        wait_until("the configmap's pod is collected", || async {
            gone(&pods, "uses-config").await
        })
        .await;
        gc.stop().await;
    })
    .await;
}
