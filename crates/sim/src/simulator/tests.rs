//! Simulator tests against the in-memory cluster, on paused time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    AttachedVolume, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodSpec, PodStatus,
};
use kcm_machinery::events::{EventType, FakeRecorder};
use kcm_machinery::informer::{NeverListerWatcher, SharedIndexInformer};
use kcm_testing::{MetaBuilder, PodSpecBuilder, container};
use tokio_util::sync::CancellationToken;

use super::{Shared, Simulator, SimulatorConfig, lock};
use crate::client::ClusterClient;
use crate::fake::{Action, FakeCluster, spawn_informer};
use crate::kubelet::{ANNOTATION_DURATION, ANNOTATION_PHASE, ANNOTATION_READY};
use crate::node::{ANNOTATION_HEARTBEAT, NODE_LEASE_NAMESPACE, NodeTemplate, build_node};

struct Harness {
    fake: FakeCluster,
    /// Every node's kubelet events.
    recorder: FakeRecorder,
    /// The running simulator's state, to look at what it keeps per pod.
    shared: Arc<Shared>,
    cancel: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Nodes that pick their own pod CIDR (no node IPAM controller in these tests).
fn config(nodes: usize) -> SimulatorConfig {
    SimulatorConfig {
        nodes,
        pod_ready_delay: Duration::from_secs(2),
        assign_pod_cidrs: true,
        ..SimulatorConfig::default()
    }
}

/// Claim and volume informers the tests fill by hand (never started).
type VolumeInformers = (
    SharedIndexInformer<PersistentVolumeClaim>,
    SharedIndexInformer<PersistentVolume>,
);

impl Harness {
    async fn start(fake: FakeCluster, config: SimulatorConfig) -> Self {
        Self::start_with_volumes(fake, config, None).await
    }

    async fn start_with_volumes(
        fake: FakeCluster,
        config: SimulatorConfig,
        volumes: Option<&VolumeInformers>,
    ) -> Self {
        Self::start_with(fake, config, |sim| {
            if let Some((claims, pvs)) = volumes {
                sim.watch_volumes(claims, pvs);
            }
        })
        .await
    }

    /// Starts the simulator after `setup` gave it more informers.
    async fn start_with(
        fake: FakeCluster,
        config: SimulatorConfig,
        setup: impl FnOnce(&Simulator),
    ) -> Self {
        let cancel = CancellationToken::new();
        let pods = fake.pod_informer();
        let nodes = fake.node_informer();
        let recorder = FakeRecorder::new();
        let sim = Simulator::with_client(
            Arc::new(fake.clone()),
            pods.clone(),
            nodes.clone(),
            &|_| Arc::new(recorder.clone()),
            config,
            fake.clock(),
        )
        .expect("simulator");
        setup(&sim);
        let shared = Arc::clone(&sim.shared);
        spawn_informer(pods, cancel.clone());
        spawn_informer(nodes, cancel.clone());
        tokio::spawn({
            let cancel = cancel.clone();
            async move { sim.run(cancel).await }
        });
        let h = Self {
            fake,
            recorder,
            shared,
            cancel,
        };
        eventually("leases", || {
            h.fake.lease(NODE_LEASE_NAMESPACE, "kcm-node-0").is_some()
        })
        .await;
        h
    }

    fn count(&self, f: impl Fn(&Action) -> bool) -> usize {
        self.fake.actions().iter().filter(|a| f(a)).count()
    }

    fn lease_updates(&self, node: &str) -> usize {
        let lease = format!("{NODE_LEASE_NAMESPACE}/{node}");
        self.count(|a| matches!(a, Action::UpdateLease { lease: l } if *l == lease))
    }

    fn status_posts(&self, node: &str) -> usize {
        self.count(|a| matches!(a, Action::PatchNodeStatus { node: n } if n == node))
    }

    fn annotate_node(&self, node: &str, value: Option<&str>) {
        self.fake.update_node(node, |n| {
            let annotations = n.metadata.annotations.get_or_insert_with(BTreeMap::new);
            match value {
                Some(v) => annotations.insert(ANNOTATION_HEARTBEAT.into(), v.into()),
                None => annotations.remove(ANNOTATION_HEARTBEAT),
            };
        });
    }

    /// Creates a pod and binds it to `node`, as the scheduler would.
    async fn run_pod(&self, pod: Pod, node: &str) -> Pod {
        let created = self.fake.create_pod(pod);
        self.fake.bind(&created, node).await.expect("bind");
        created
    }

    fn pod(&self, name: &str) -> Option<Pod> {
        self.fake.pod("default", name)
    }

    /// What the simulator keeps per pod: `(first-seen times, pod IPs in use on `node`, pods
    /// with a recorded prepare failure)`.
    fn per_pod_state(&self, node: &str) -> (usize, usize, usize) {
        let ips = self
            .shared
            .slots
            .get(node)
            .and_then(|slot| lock(slot).ipam.as_ref().map(|ipam| ipam.in_use()))
            .unwrap_or_default();
        (
            lock(&self.shared.first_seen).len(),
            ips,
            lock(&self.shared.prepare_failures).len(),
        )
    }
}

async fn eventually(what: &str, f: impl Fn() -> bool) {
    for _ in 0..6000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

fn pod(name: &str, annotations: &[(&str, &str)]) -> Pod {
    kcm_testing::pod(name)
        .annotations(annotations)
        .container(container("app").image("nginx"))
        .build()
}

fn phase(p: &Pod) -> Option<String> {
    p.status.as_ref().and_then(|s| s.phase.clone())
}

fn condition(p: &Pod, type_: &str) -> Option<String> {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .map(|c| c.status.clone())
}

fn pod_ip(p: &Pod) -> Option<String> {
    p.status.as_ref().and_then(|s| s.pod_ip.clone())
}

fn ready_condition(n: &Node) -> Option<String> {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone())
}

#[tokio::test(start_paused = true)]
async fn nodes_register_with_leases_and_renew_every_ten_seconds() {
    let h = Harness::start(FakeCluster::new(), config(3)).await;
    assert!(h.fake.has_namespace(NODE_LEASE_NAMESPACE));
    for i in 0..3 {
        let name = format!("kcm-node-{i}");
        let node = h.fake.node(&name).expect("node");
        assert_eq!(ready_condition(&node).as_deref(), Some("True"));
        let lease = h.fake.lease(NODE_LEASE_NAMESPACE, &name).expect("lease");
        let spec = lease.spec.expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some(name.as_str()));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        let owner = lease.metadata.owner_references.expect("owned");
        assert_eq!(owner[0].uid, node.metadata.uid.clone().expect("uid"));
    }
    let start = tokio::time::Instant::now();
    let renewed_at = |h: &Harness| {
        h.fake
            .lease(NODE_LEASE_NAMESPACE, "kcm-node-0")
            .and_then(|l| l.spec)
            .and_then(|s| s.renew_time)
            .map(|t| t.0)
    };
    let first = renewed_at(&h).expect("renew time");
    assert_eq!(h.lease_updates("kcm-node-0"), 0, "created, not yet renewed");
    assert_eq!(h.status_posts("kcm-node-0"), 1);
    tokio::time::sleep_until(start + Duration::from_millis(35_100)).await;
    assert_eq!(h.lease_updates("kcm-node-0"), 3);
    assert_eq!(
        renewed_at(&h),
        Some(first + jiff::SignedDuration::from_secs(30))
    );
    // Status heartbeats: one at registration, then every 60 s.
    assert_eq!(h.status_posts("kcm-node-0"), 1);
    tokio::time::sleep_until(start + Duration::from_millis(60_100)).await;
    assert_eq!(h.status_posts("kcm-node-0"), 2);
    let node = h.fake.node("kcm-node-0").expect("node");
    let heartbeat = node
        .status
        .and_then(|s| s.conditions)
        .and_then(|cs| cs.into_iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_heartbeat_time)
        .map(|t| t.0);
    assert_eq!(heartbeat, Some(first + jiff::SignedDuration::from_secs(60)));
}

#[tokio::test(start_paused = true)]
async fn heartbeat_annotation_stops_and_resumes_renewals_and_status() {
    let h = Harness::start(FakeCluster::new(), config(2)).await;
    h.annotate_node("kcm-node-0", Some("stopped"));
    let stopped_at = tokio::time::Instant::now();
    let (leases0, leases1) = (h.lease_updates("kcm-node-0"), h.lease_updates("kcm-node-1"));
    let posts0 = h.status_posts("kcm-node-0");
    // The node lifecycle controller notices and marks the node Unknown; a silent kubelet
    // does not answer.
    tokio::time::sleep(Duration::from_secs(45)).await;
    h.fake.update_node("kcm-node-0", |n| {
        if let Some(ready) = n
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|cs| cs.iter_mut().find(|c| c.type_ == "Ready"))
        {
            ready.status = "Unknown".into();
        }
    });
    tokio::time::sleep_until(stopped_at + Duration::from_secs(95)).await;
    assert_eq!(
        h.lease_updates("kcm-node-0"),
        leases0,
        "no renewals while stopped"
    );
    assert_eq!(
        h.status_posts("kcm-node-0"),
        posts0,
        "no status while stopped"
    );
    assert!(
        h.lease_updates("kcm-node-1") >= leases1 + 9,
        "other nodes go on"
    );
    let node = h.fake.node("kcm-node-0").expect("node");
    assert_eq!(ready_condition(&node).as_deref(), Some("Unknown"));

    // Removing the annotation brings the node back at once, not at its next tick.
    h.annotate_node("kcm-node-0", None);
    let resumed_at = tokio::time::Instant::now();
    let resumed_wall = h.fake.clock().now();
    eventually("renewal and ready status", || {
        h.lease_updates("kcm-node-0") > leases0
            && h.fake
                .node("kcm-node-0")
                .is_some_and(|n| ready_condition(&n).as_deref() == Some("True"))
    })
    .await;
    assert!(resumed_at.elapsed() < Duration::from_millis(200));
    let renewed = h
        .fake
        .lease(NODE_LEASE_NAMESPACE, "kcm-node-0")
        .and_then(|l| l.spec)
        .and_then(|s| s.renew_time)
        .map(|t| t.0);
    let late = renewed.map(|t| t.duration_since(resumed_wall));
    assert!(
        late.is_some_and(|d| d < jiff::SignedDuration::from_millis(200)),
        "{late:?}"
    );
    tokio::time::sleep(Duration::from_millis(10_100)).await;
    assert_eq!(
        h.lease_updates("kcm-node-0"),
        leases0 + 2,
        "renewing every 10 s again"
    );
}

#[tokio::test(start_paused = true)]
async fn status_changed_by_others_is_corrected_at_once() {
    let h = Harness::start(FakeCluster::new(), config(1)).await;
    let posts = h.status_posts("kcm-node-0");
    tokio::time::sleep(Duration::from_secs(5)).await;
    h.fake.update_node("kcm-node-0", |n| {
        if let Some(ready) = n
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|cs| cs.iter_mut().find(|c| c.type_ == "Ready"))
        {
            ready.status = "Unknown".into();
        }
    });
    eventually("ready again", || {
        h.fake
            .node("kcm-node-0")
            .is_some_and(|n| ready_condition(&n).as_deref() == Some("True"))
    })
    .await;
    assert_eq!(h.status_posts("kcm-node-0"), posts + 1);
}

#[tokio::test(start_paused = true)]
async fn bound_pod_runs_after_the_ready_delay_with_an_ip_from_the_node_cidr() {
    let h = Harness::start(FakeCluster::new(), config(2)).await;
    h.run_pod(pod("web", &[]), "kcm-node-1").await;
    let bound_at = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let pending = h.pod("web").expect("pod");
    assert_eq!(phase(&pending).as_deref(), Some("Pending"));
    eventually("running", || {
        h.pod("web").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
    let waited = bound_at.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_millis(2_100),
        "{waited:?}"
    );
    let p = h.pod("web").expect("pod");
    assert_eq!(pod_ip(&p).as_deref(), Some("10.244.1.2"));
    let status = p.status.clone().expect("status");
    assert_eq!(status.host_ip.as_deref(), Some("10.0.0.11"));
    assert!(status.start_time.is_some());
    for c in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert_eq!(condition(&p, c).as_deref(), Some("True"), "{c}");
    }
    let container = &status.container_statuses.expect("containers")[0];
    assert!(container.ready);
    assert!(
        container
            .state
            .as_ref()
            .and_then(|s| s.running.as_ref())
            .is_some()
    );
    // Nothing more to post once running.
    let updates = h.count(|a| matches!(a, Action::UpdatePodStatus { .. }));
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(
        h.count(|a| matches!(a, Action::UpdatePodStatus { .. })),
        updates
    );
}

#[tokio::test(start_paused = true)]
async fn a_started_container_gets_the_kubelets_events_and_a_deleted_one_killing() {
    let h = Harness::start(FakeCluster::new(), config(1)).await;
    h.run_pod(pod("web", &[]), "kcm-node-0").await;
    eventually("started", || {
        h.recorder.reasons() == ["Pulled", "Created", "Started"]
    })
    .await;
    let events = h.recorder.events();
    let started = &events[2];
    assert_eq!(started.type_, EventType::Normal);
    assert_eq!(started.message, "Container started");
    assert_eq!(started.regarding.kind.as_deref(), Some("Pod"));
    assert_eq!(started.regarding.name.as_deref(), Some("web"));
    assert_eq!(
        started.regarding.field_path.as_deref(),
        Some("spec.containers{app}")
    );
    assert!(h.fake.delete_pod_gracefully("default", "web", Some(30)));
    eventually("killed", || {
        h.recorder.reasons().last().map(String::as_str) == Some("Killing")
    })
    .await;
    assert_eq!(
        h.recorder
            .events()
            .last()
            .map(|e| e.message.clone())
            .as_deref(),
        Some("Stopping container app")
    );
}

#[tokio::test(start_paused = true)]
async fn fault_annotations_keep_pods_unready_or_end_them() {
    let h = Harness::start(FakeCluster::new(), config(1)).await;
    h.run_pod(pod("unready", &[(ANNOTATION_READY, "false")]), "kcm-node-0")
        .await;
    h.run_pod(pod("broken", &[(ANNOTATION_PHASE, "Failed")]), "kcm-node-0")
        .await;
    eventually("both posted", || {
        h.pod("unready").and_then(|p| phase(&p)).as_deref() == Some("Running")
            && h.pod("broken").and_then(|p| phase(&p)).as_deref() == Some("Failed")
    })
    .await;
    let unready = h.pod("unready").expect("pod");
    assert_eq!(condition(&unready, "Ready").as_deref(), Some("False"));
    // Removing the annotation makes it ready.
    h.fake.update_pod("default", "unready", |p| {
        if let Some(a) = p.metadata.annotations.as_mut() {
            a.remove(ANNOTATION_READY);
        }
    });
    eventually("ready", || {
        h.pod("unready")
            .is_some_and(|p| condition(&p, "Ready").as_deref() == Some("True"))
    })
    .await;
    // The failed pod's IP went back to the pool: the next pod gets it.
    let broken_ip = h.pod("broken").and_then(|p| pod_ip(&p));
    h.run_pod(pod("next", &[]), "kcm-node-0").await;
    eventually("next running", || {
        h.pod("next").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
    assert_eq!(h.pod("next").and_then(|p| pod_ip(&p)), broken_ip);
}

#[tokio::test(start_paused = true)]
async fn run_to_completion_pods_succeed_after_their_duration() {
    let h = Harness::start(FakeCluster::new(), config(1)).await;
    let mut job = pod("job", &[(ANNOTATION_DURATION, "30s")]);
    if let Some(spec) = job.spec.as_mut() {
        spec.restart_policy = Some("Never".into());
    }
    h.run_pod(job, "kcm-node-0").await;
    let start = tokio::time::Instant::now();
    eventually("running", || {
        h.pod("job").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
    eventually("succeeded", || {
        h.pod("job").and_then(|p| phase(&p)).as_deref() == Some("Succeeded")
    })
    .await;
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(32) && took < Duration::from_millis(32_100),
        "{took:?}"
    );
    let p = h.pod("job").expect("pod");
    let terminated = p
        .status
        .and_then(|s| s.container_statuses)
        .expect("containers")[0]
        .state
        .clone()
        .and_then(|s| s.terminated)
        .expect("terminated");
    assert_eq!(terminated.exit_code, 0);
    assert_eq!(terminated.reason.as_deref(), Some("Completed"));
}

#[tokio::test(start_paused = true)]
async fn deleting_a_pod_with_grace_is_finalized_and_its_ip_recycled() {
    let h = Harness::start(FakeCluster::new(), config(1)).await;
    h.run_pod(pod("web", &[]), "kcm-node-0").await;
    eventually("running", || {
        h.pod("web").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
    let ip = h.pod("web").and_then(|p| pod_ip(&p));
    assert!(h.fake.delete_pod_gracefully("default", "web", Some(30)));
    eventually("finalized", || h.pod("web").is_none()).await;
    assert_eq!(
        h.count(|a| matches!(a, Action::DeletePod { pod } if pod == "default/web")),
        1
    );
    h.run_pod(pod("web2", &[]), "kcm-node-0").await;
    eventually("web2 running", || {
        h.pod("web2").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
    assert_eq!(h.pod("web2").and_then(|p| pod_ip(&p)), ip);
}

/// Pods come and go on a node for days: whatever the simulator keeps for a pod (its IP, when
/// it was first seen bound) goes with it, whether the kubelet finalized a graceful deletion or
/// the pod was removed at once.
#[tokio::test(start_paused = true)]
async fn a_deleted_pod_leaves_no_per_pod_state() {
    let h = Harness::start(FakeCluster::new(), config(1)).await;
    // Created bound, with no PodScheduled condition: the simulator remembers when it saw it.
    let mut pinned = pod("pinned", &[]);
    pinned.spec.get_or_insert_with(PodSpec::default).node_name = Some("kcm-node-0".into());
    h.fake.create_pod(pinned);
    h.run_pod(pod("bound", &[]), "kcm-node-0").await;
    eventually("both running", || {
        ["pinned", "bound"]
            .iter()
            .all(|n| h.pod(n).and_then(|p| phase(&p)).as_deref() == Some("Running"))
    })
    .await;
    assert_eq!(h.per_pod_state("kcm-node-0"), (1, 2, 0));

    assert!(h.fake.delete_pod_gracefully("default", "pinned", Some(30)));
    assert!(h.fake.delete_pod_gracefully("default", "bound", Some(0)));
    eventually("both gone", || {
        h.pod("pinned").is_none() && h.pod("bound").is_none()
    })
    .await;
    eventually("per-pod state released", || {
        h.per_pod_state("kcm-node-0") == (0, 0, 0)
    })
    .await;
    for key in ["default/pinned", "default/bound"] {
        assert_eq!(
            h.shared.pod_queue.num_requeues(&key.to_owned()),
            0,
            "{key}: no failure count left in the rate limiter"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn pods_of_a_silent_node_are_left_alone_until_it_resumes() {
    let h = Harness::start(FakeCluster::new(), config(1)).await;
    h.annotate_node("kcm-node-0", Some("stopped"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.run_pod(pod("web", &[]), "kcm-node-0").await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        h.pod("web").and_then(|p| phase(&p)).as_deref(),
        Some("Pending")
    );
    h.annotate_node("kcm-node-0", None);
    eventually("running", || {
        h.pod("web").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
}

/// By default a node registers without a pod CIDR, as a kubelet does, and its pods wait
/// until the node IPAM controller sets one; then they run with IPs from it.
#[tokio::test(start_paused = true)]
async fn pods_wait_for_the_pod_cidr_the_node_ipam_controller_sets() {
    let h = Harness::start(
        FakeCluster::new(),
        SimulatorConfig {
            assign_pod_cidrs: false,
            ..config(1)
        },
    )
    .await;
    let registered = h.fake.nodes();
    assert_eq!(
        registered[0].spec.as_ref().and_then(|s| s.pod_cidr.clone()),
        None,
        "a kubelet does not pick its pod CIDR"
    );
    h.run_pod(pod("web", &[]), "kcm-node-0").await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let waiting = h.pod("web").expect("pod");
    assert_eq!(pod_ip(&waiting), None, "no pod CIDR, no pod IP");
    assert_ne!(phase(&waiting).as_deref(), Some("Running"));

    h.fake.update_node("kcm-node-0", |n| {
        let spec = n.spec.get_or_insert_default();
        spec.pod_cidr = Some("10.244.7.0/24".into());
        spec.pod_cidrs = Some(vec!["10.244.7.0/24".into()]);
    });
    eventually("running", || {
        h.pod("web").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
    assert_eq!(
        h.pod("web").and_then(|p| pod_ip(&p)).as_deref(),
        Some("10.244.7.2")
    );
}

#[tokio::test(start_paused = true)]
async fn restart_adopts_nodes_and_keeps_pod_ips() {
    let fake = FakeCluster::new();
    // A previous run left a node and a running pod holding .2.
    let node = build_node(0, &NodeTemplate::default(), fake.clock().now());
    fake.create_node(&node).await.expect("node");
    let mut old = pod("old", &[]);
    old.spec.get_or_insert_with(PodSpec::default).node_name = Some("kcm-node-0".into());
    old.status = Some(PodStatus {
        phase: Some("Running".into()),
        pod_ip: Some("10.244.0.2".into()),
        ..PodStatus::default()
    });
    fake.create_pod(old);
    let h = Harness::start(fake, config(1)).await;
    assert!(h.fake.actions().contains(&Action::GetNode {
        node: "kcm-node-0".into()
    }));
    assert_eq!(h.fake.nodes().len(), 1);
    h.run_pod(pod("new", &[]), "kcm-node-0").await;
    eventually("new running", || {
        h.pod("new").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
    assert_eq!(
        h.pod("new").and_then(|p| pod_ip(&p)).as_deref(),
        Some("10.244.0.3")
    );
    assert_eq!(
        h.pod("old").and_then(|p| pod_ip(&p)).as_deref(),
        Some("10.244.0.2")
    );
}

#[tokio::test(start_paused = true)]
async fn pods_on_other_nodes_are_not_touched() {
    let h = Harness::start(FakeCluster::new(), config(1)).await;
    h.run_pod(pod("elsewhere", &[]), "real-node").await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        h.pod("elsewhere").and_then(|p| phase(&p)).as_deref(),
        Some("Pending")
    );
    assert_eq!(h.count(|a| matches!(a, Action::UpdatePodStatus { .. })), 0);
}

fn with_host_port(mut p: Pod, port: i32) -> Pod {
    if let Some(spec) = p.spec.as_mut() {
        for c in &mut spec.containers {
            c.ports = Some(vec![k8s_openapi::api::core::v1::ContainerPort {
                container_port: 80,
                host_port: Some(port),
                ..Default::default()
            }]);
        }
    }
    p
}

#[tokio::test(start_paused = true)]
async fn a_pod_whose_host_port_the_node_already_gives_out_is_rejected() {
    let h = Harness::start(FakeCluster::new(), config(2)).await;
    h.run_pod(with_host_port(pod("holder", &[]), 21017), "kcm-node-0")
        .await;
    eventually("the holder running", || {
        h.pod("holder").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
    h.run_pod(with_host_port(pod("second", &[]), 21017), "kcm-node-0")
        .await;
    h.run_pod(with_host_port(pod("elsewhere", &[]), 21017), "kcm-node-1")
        .await;
    eventually("the second pod rejected", || {
        h.pod("second").and_then(|p| phase(&p)).as_deref() == Some("Failed")
    })
    .await;
    let status = h.pod("second").and_then(|p| p.status).expect("status");
    assert_eq!(status.reason.as_deref(), Some("NodePorts"));
    assert!(status.start_time.is_none(), "never started");
    let rejection = h
        .recorder
        .events()
        .into_iter()
        .find(|e| e.reason == "NodePorts")
        .expect("a NodePorts event");
    assert_eq!(rejection.type_, EventType::Warning);
    assert_eq!(rejection.regarding.name.as_deref(), Some("second"));
    assert_eq!(rejection.regarding.field_path, None);
    eventually("the pod on the other node running", || {
        h.pod("elsewhere").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
    assert_eq!(
        h.pod("holder").and_then(|p| phase(&p)).as_deref(),
        Some("Running"),
        "the holder keeps its port"
    );
}

/// A pod whose claim is bound to a volume of the simulated CSI driver stays `Pending` until its
/// node lists the volume in `status.volumesAttached`; the node reports the volume in
/// `status.volumesInUse` while the pod exists, and drops it once the pod is gone.
#[tokio::test(start_paused = true)]
async fn a_pod_with_an_attachable_volume_waits_for_the_attach_and_its_node_reports_it_in_use() {
    let informers: VolumeInformers = (
        SharedIndexInformer::new(NeverListerWatcher, Duration::ZERO),
        SharedIndexInformer::new(NeverListerWatcher, Duration::ZERO),
    );
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"volumeName": "pv-1"},
    }))
    .expect("claim");
    let volume: PersistentVolume = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "pv-1"},
        "spec": {"csi": {"driver": crate::storage::CSI_DRIVER, "volumeHandle": "pv-1"}},
    }))
    .expect("volume");
    informers.0.indexer().add(Arc::new(claim)).expect("claim");
    informers.1.indexer().add(Arc::new(volume)).expect("volume");
    let h = Harness::start_with_volumes(FakeCluster::new(), config(1), Some(&informers)).await;
    let unique = "kubernetes.io/csi/hostpath.sim.kcm.io^pv-1".to_owned();
    let mut web = pod("web", &[]);
    if let Some(spec) = web.spec.as_mut() {
        spec.volumes = Some(vec![
            serde_json::from_value(serde_json::json!(
                {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}
            ))
            .expect("volume"),
        ]);
    }
    h.run_pod(web, "kcm-node-0").await;
    let in_use = |h: &Harness| {
        h.fake
            .node("kcm-node-0")
            .and_then(|n| n.status)
            .and_then(|s| s.volumes_in_use)
            .unwrap_or_default()
    };
    eventually("the volume in use", || in_use(&h) == vec![unique.clone()]).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let waiting = h.pod("web").expect("pod");
    assert_eq!(phase(&waiting).as_deref(), Some("Pending"));
    assert!(
        waiting
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .is_none(),
        "not started before the attach"
    );
    h.fake.update_node("kcm-node-0", |n| {
        if let Some(status) = n.status.as_mut() {
            status.volumes_attached = Some(vec![AttachedVolume {
                name: unique.clone(),
                device_path: String::new(),
            }]);
        }
    });
    eventually("running once attached", || {
        h.pod("web").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
    assert!(h.fake.delete_pod_gracefully("default", "web", Some(0)));
    eventually("the volume no longer in use", || in_use(&h).is_empty()).await;
}

/// Claim `default/data` bound to `pv-1` with 1Gi; `resizing` leaves it as the resizer does
/// (2Gi allocated, `NodeResizePending`, `Resizing` and `FileSystemResizePending`).
fn resized_claim(resizing: bool) -> PersistentVolumeClaim {
    let mut claim = serde_json::json!({
        "metadata": {"name": "data", "namespace": "default", "uid": "c-1", "resourceVersion": "3"},
        "spec": {"volumeName": "pv-1", "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}},
    });
    if resizing {
        claim["spec"]["resources"]["requests"]["storage"] = "2Gi".into();
        claim["status"]["allocatedResources"] = serde_json::json!({"storage": "2Gi"});
        claim["status"]["allocatedResourceStatuses"] =
            serde_json::json!({"storage": "NodeResizePending"});
        claim["status"]["conditions"] = serde_json::json!([
            {"type": "Ready", "status": "True"},
            {"type": "Resizing", "status": "True"},
            {"type": "FileSystemResizePending", "status": "True",
             "message": "Waiting for user to (re-)start a pod to finish file system resize of volume on node."},
        ]);
    }
    serde_json::from_value(claim).expect("claim")
}

/// Volume `pv-1` of the simulated driver with `size`.
fn sized_volume(size: &str) -> PersistentVolume {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "pv-1"},
        "spec": {
            "capacity": {"storage": size},
            "csi": {"driver": crate::storage::CSI_DRIVER, "volumeHandle": "pv-1"},
        },
    }))
    .expect("volume")
}

/// A pod `name` mounting claim `data`.
fn pod_with_claim(name: &str) -> Pod {
    let mut p = pod(name, &[]);
    if let Some(spec) = p.spec.as_mut() {
        spec.volumes = Some(vec![
            serde_json::from_value(serde_json::json!(
                {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}
            ))
            .expect("volume"),
        ]);
    }
    p
}

/// The harness with claim and volume in the caches (and the claim in the fake), the volume
/// attached to `kcm-node-0`.
async fn start_with_claim(
    claim: PersistentVolumeClaim,
    volume: PersistentVolume,
) -> (Harness, VolumeInformers) {
    let informers: VolumeInformers = (
        SharedIndexInformer::new(NeverListerWatcher, Duration::ZERO),
        SharedIndexInformer::new(NeverListerWatcher, Duration::ZERO),
    );
    let fake = FakeCluster::new();
    fake.put_claim(claim.clone());
    informers.0.indexer().add(Arc::new(claim)).expect("claim");
    informers.1.indexer().add(Arc::new(volume)).expect("volume");
    let h = Harness::start_with_volumes(fake, config(1), Some(&informers)).await;
    h.fake.update_node("kcm-node-0", |n| {
        if let Some(status) = n.status.as_mut() {
            status.volumes_attached = Some(vec![AttachedVolume {
                name: "kubernetes.io/csi/hostpath.sim.kcm.io^pv-1".into(),
                device_path: String::new(),
            }]);
        }
    });
    (h, informers)
}

fn claim_patches(h: &Harness) -> Vec<serde_json::Value> {
    h.fake
        .actions()
        .into_iter()
        .filter_map(|a| match a {
            Action::PatchClaimStatus { patch, .. } => Some(patch),
            _ => None,
        })
        .collect()
}

/// The node side of a resize, as the kubelet's `NodeExpander`: a claim left `NodeResizePending`
/// stays so while no pod uses it; a pod starting with it marks it `NodeResizeInProgress`, then
/// sets its capacity to the volume's size and drops the status entry and the resize conditions
/// (other conditions stay), with `FileSystemResizeSuccessful` on the pod and the claim.
#[tokio::test(start_paused = true)]
async fn a_pod_starting_with_a_claim_pending_node_expansion_finishes_the_resize() {
    let (h, _informers) = start_with_claim(resized_claim(true), sized_volume("2Gi")).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(claim_patches(&h).is_empty(), "no pod uses the claim yet");

    h.run_pod(pod_with_claim("web"), "kcm-node-0").await;
    eventually("the claim's capacity grown", || {
        h.fake
            .claim("default", "data")
            .and_then(|c| c.status)
            .and_then(|s| s.capacity)
            .and_then(|c| c.get("storage").map(|q| q.0.clone()))
            .as_deref()
            == Some("2Gi")
    })
    .await;
    let patches = claim_patches(&h);
    assert_eq!(
        patches,
        vec![
            serde_json::json!({
                "metadata": {"resourceVersion": "3"},
                "status": {"allocatedResourceStatuses": {"storage": "NodeResizeInProgress"}},
            }),
            serde_json::json!({
                "metadata": {"resourceVersion": patches[1]["metadata"]["resourceVersion"].clone()},
                "status": {
                    "capacity": {"storage": "2Gi"},
                    "allocatedResourceStatuses": null,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }),
        ]
    );
    assert_ne!(
        patches[1]["metadata"]["resourceVersion"], "3",
        "pinned to the first write"
    );
    let status = h
        .fake
        .claim("default", "data")
        .and_then(|c| c.status)
        .expect("status");
    assert_eq!(status.allocated_resource_statuses, None);
    let types: Vec<String> = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.type_)
        .collect();
    assert_eq!(types, vec!["Ready"]);
    let events: Vec<_> = h
        .recorder
        .events()
        .into_iter()
        .filter(|e| e.reason == "FileSystemResizeSuccessful")
        .collect();
    let about: Vec<_> = events
        .iter()
        .map(|e| {
            (
                e.regarding.kind.clone().unwrap_or_default(),
                e.regarding.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        about,
        vec![
            ("Pod".to_owned(), "web".to_owned()),
            ("PersistentVolumeClaim".to_owned(), "data".to_owned()),
        ]
    );
    for event in &events {
        assert_eq!(event.type_, EventType::Normal);
        assert_eq!(
            event.message,
            "MountVolume.NodeExpandVolume succeeded for volume \"pv-1\" kcm-node-0"
        );
    }
    eventually("running", || {
        h.pod("web").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
    // Later syncs of the pod (the claim cache still shows the old status) expand nothing again.
    h.fake.update_pod("default", "web", |p| {
        p.metadata.labels = Some([("touched".to_owned(), "yes".to_owned())].into());
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(claim_patches(&h).len(), 2);
}

/// A running pod's mounted volume is expanded online once the resizer leaves its claim
/// `NodeResizePending`.
#[tokio::test(start_paused = true)]
async fn a_running_pods_claim_is_expanded_once_the_resizer_is_done() {
    let (h, informers) = start_with_claim(resized_claim(false), sized_volume("1Gi")).await;
    h.run_pod(pod_with_claim("web"), "kcm-node-0").await;
    eventually("running", || {
        h.pod("web").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
    assert!(claim_patches(&h).is_empty(), "nothing to expand");

    let resized = resized_claim(true);
    h.fake.put_claim(resized.clone());
    informers
        .0
        .indexer()
        .update(Arc::new(resized))
        .expect("claim");
    informers
        .1
        .indexer()
        .update(Arc::new(sized_volume("2Gi")))
        .expect("volume");
    // The claim informer's update would queue the pod; the hand-filled cache does not.
    h.fake.update_pod("default", "web", |p| {
        p.metadata.labels = Some([("touched".to_owned(), "yes".to_owned())].into());
    });
    eventually("the claim's capacity grown", || {
        h.fake
            .claim("default", "data")
            .and_then(|c| c.status)
            .and_then(|s| s.capacity)
            .and_then(|c| c.get("storage").map(|q| q.0.clone()))
            .as_deref()
            == Some("2Gi")
    })
    .await;
    assert_eq!(claim_patches(&h).len(), 2);
}

/// A pod naming a ResourceClaim stays `Pending` with its containers `ContainerCreating` and a
/// `FailedPrepareDynamicResources` event until the claim is allocated and reserved for it
/// (the kubelet's `PrepareDynamicResources`), then runs.
#[tokio::test(start_paused = true)]
async fn a_pod_with_a_resource_claim_starts_once_the_claim_is_reserved_for_it() {
    use k8s_openapi::api::resource::v1::ResourceClaim;
    let claims: SharedIndexInformer<ResourceClaim> =
        SharedIndexInformer::new(NeverListerWatcher, Duration::ZERO);
    let h = Harness::start_with(FakeCluster::new(), config(1), |sim| {
        sim.watch_resource_claims(&claims)
    })
    .await;
    let mut web = pod("web", &[]);
    if let Some(spec) = web.spec.as_mut() {
        spec.resource_claims = Some(vec![
            serde_json::from_value(
                serde_json::json!({"name": "gpu", "resourceClaimName": "gpu-claim"}),
            )
            .expect("entry"),
        ]);
    }
    let created = h.run_pod(web, "kcm-node-0").await;
    let waiting_reason = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.first())
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone())
    };
    eventually("container creating", || {
        h.pod("web").and_then(|p| waiting_reason(&p)).as_deref() == Some("ContainerCreating")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let p = h.pod("web").expect("pod");
    assert_eq!(phase(&p).as_deref(), Some("Pending"));
    let events: Vec<_> = h
        .recorder
        .events()
        .into_iter()
        .filter(|e| e.reason == "FailedPrepareDynamicResources")
        .collect();
    assert_eq!(events.len(), 1, "one event per reason: {events:?}");
    assert_eq!(events[0].type_, EventType::Warning);
    assert_eq!(
        events[0].message,
        "Failed to prepare dynamic resources: prepare dynamic resources: failed to fetch ResourceClaim gpu-claim referenced by pod web: resourceclaims.resource.k8s.io \"gpu-claim\" not found"
    );
    // Allocated and reserved for the pod (as the scheduler writes it): the pod runs.
    let uid = created.metadata.uid.clone().unwrap_or_default();
    let claim: ResourceClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gpu-claim", "namespace": "default", "uid": "claim-uid"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.sim.kcm.io"}}]}},
        "status": {
            "allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.sim.kcm.io", "pool": "kcm-node-0", "device": "gpu-0"}
            ]}},
            "reservedFor": [{"resource": "pods", "name": "web", "uid": uid}],
        },
    }))
    .expect("claim");
    claims.indexer().add(Arc::new(claim)).expect("claim");
    // The informer is filled by hand, so no claim event: a pod change wakes the kubelet.
    h.fake.update_pod("default", "web", |p| {
        p.metadata
            .labels
            .get_or_insert_default()
            .insert("poke".into(), "1".into());
    });
    eventually("running once reserved", || {
        h.pod("web").and_then(|p| phase(&p)).as_deref() == Some("Running")
    })
    .await;
}
