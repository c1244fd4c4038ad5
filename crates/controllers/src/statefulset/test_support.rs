//! A fixture for the StatefulSet unit tests: caches seeded directly, fake clients writing into them, a fixed clock, and the helpers upstream's tests use to move pods along (`setPodRunning`, `setPodReady`, `scaleUpStatefulSetControl`).

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::controller::history::FakeRevisionClient;
use kcm_machinery::controller::pod_control::FakePodControl;
use kcm_machinery::events::FakeRecorder;
use kcm_testing::{MetaBuilder, WorkloadBuilder, container, pvc, stateful_set};

use super::client::{FakeObjectManager, FakeStatefulSetClient};
use super::controller::{StatefulSetCaches, StatefulSetController, StatefulSetControllerOptions};
use super::utils::ordinal;

/// The fixed "now" of every test.
pub fn now() -> Timestamp {
    "2024-05-01T12:00:00Z"
        .parse()
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A StatefulSet `default/web` of `replicas` selecting `app=nginx`, one claim template `www`,
/// service `nginx`, generation 1, as upstream's `newStatefulSet`.
pub fn new_set(replicas: i32) -> kcm_testing::StatefulSetBuilder {
    stateful_set("web")
        .namespace("default")
        .uid("web-uid")
        .generation(1)
        .replicas(replicas)
        .selecting(&[("app", "nginx")])
        .container(container("nginx").image("nginx:1"))
        .service_name("nginx")
        .volume_claim_template(pvc("www").storage("1Gi"))
        .rolling_update()
}

/// Everything a test drives.
pub struct Fixture {
    pub controller: StatefulSetController,
    pub caches: StatefulSetCaches,
    pub set_client: Arc<FakeStatefulSetClient>,
    pub objects: Arc<FakeObjectManager>,
    pub revisions: Arc<FakeRevisionClient>,
    pub pod_control: Arc<FakePodControl>,
    pub recorder: Arc<FakeRecorder>,
}

/// A fixture with empty caches.
pub fn fixture() -> Fixture {
    fixture_with(StatefulSetControllerOptions::default())
}

/// [`fixture`] with other controller options (feature gates).
pub fn fixture_with(options: StatefulSetControllerOptions) -> Fixture {
    let caches = StatefulSetCaches::default();
    let set_client = Arc::new(FakeStatefulSetClient::with_cache(caches.sets.clone()));
    let objects = Arc::new(FakeObjectManager::new(
        caches.pods.clone(),
        caches.claims.clone(),
    ));
    let revisions = Arc::new(FakeRevisionClient::with_cache(caches.revisions.clone()));
    let pod_control = Arc::new(FakePodControl::new());
    let recorder = Arc::new(FakeRecorder::new());
    let controller = StatefulSetController::with_caches(
        caches.clone(),
        set_client.clone(),
        objects.clone(),
        revisions.clone(),
        pod_control.clone(),
        recorder.clone(),
        Arc::new(now),
        options,
    );
    Fixture {
        controller,
        caches,
        set_client,
        objects,
        revisions,
        pod_control,
        recorder,
    }
}

impl Fixture {
    /// Puts `set` in the cache and on the fake server.
    pub fn add_set(&self, set: &StatefulSet) {
        let _ = self.caches.sets.update(Arc::new(set.clone()));
        self.set_client.insert(set.clone());
    }

    /// The cached (latest) copy of the set.
    pub fn set(&self) -> StatefulSet {
        self.caches
            .sets
            .get_by_key("default/web")
            .map(|s| (*s).clone())
            .unwrap_or_default()
    }

    /// Replaces the cached set's spec with `set`'s (a user edit: generation bumped), keeping
    /// the status the controller wrote.
    pub fn edit(&self, f: impl FnOnce(&mut StatefulSet)) -> StatefulSet {
        let mut set = self.set();
        f(&mut set);
        set.metadata.generation = Some(set.metadata.generation.unwrap_or(1) + 1);
        self.add_set(&set);
        set
    }

    /// One sync of `default/web`.
    pub async fn sync(&self) -> super::Result<()> {
        self.controller.sync("default/web").await
    }

    /// The cached pods of the set, by ascending ordinal.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        let mut pods: Vec<Arc<Pod>> = self
            .caches
            .pods
            .list()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some("default"))
            .collect();
        pods.sort_by_key(|p| ordinal(p));
        pods
    }

    /// The names of the cached pods, by ascending ordinal.
    pub fn pod_names(&self) -> Vec<String> {
        self.pods()
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    }

    /// The cached claims' names, sorted.
    pub fn claim_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .caches
            .claims
            .list()
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        names.sort();
        names
    }

    /// A cached claim.
    pub fn claim(&self, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.caches.claims.get_by_key(&format!("default/{name}"))
    }

    fn modify_pod(&self, name: &str, f: impl FnOnce(&mut Pod)) {
        let Some(pod) = self.caches.pods.get_by_key(&format!("default/{name}")) else {
            panic!("no pod {name}");
        };
        let mut pod = (*pod).clone();
        f(&mut pod);
        let rv = pod
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        pod.metadata.resource_version = Some((rv + 1).to_string());
        let _ = self.caches.pods.update(Arc::new(pod));
    }

    /// Phase Running, as upstream's `setPodRunning`.
    pub fn set_running(&self, name: &str) {
        self.modify_pod(name, |p| {
            p.status.get_or_insert_default().phase = Some("Running".into());
        });
    }

    /// Running with `Ready=True` since a minute ago, as upstream's `setPodReady`.
    pub fn set_ready(&self, name: &str) {
        self.modify_pod(name, |p| {
            let status = p.status.get_or_insert_default();
            status.phase = Some("Running".into());
            let conditions = status.conditions.get_or_insert_default();
            conditions.retain(|c| c.type_ != "Ready");
            conditions.push(PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(Time(now() - SignedDuration::from_secs(60))),
                ..PodCondition::default()
            });
        });
    }

    /// Phase `phase` (`Failed`, `Succeeded`, ...).
    pub fn set_phase(&self, name: &str, phase: &str) {
        self.modify_pod(name, |p| {
            p.status.get_or_insert_default().phase = Some(phase.into());
        });
    }

    /// Marks the pod as being deleted (graceful deletion in progress).
    pub fn set_terminating(&self, name: &str) {
        self.modify_pod(name, |p| {
            p.metadata.deletion_timestamp = Some(Time(now()));
        });
    }

    /// Makes every cached pod Running and Ready.
    pub fn set_all_ready(&self) {
        for name in self.pod_names() {
            self.set_ready(&name);
        }
    }

    /// Syncs and readies the newest pods until the set has `want` Running and Ready pods (at
    /// most `limit` passes), as upstream's `scaleUpStatefulSetControl`; returns the order in
    /// which pods were created.
    pub async fn scale_up(&self, want: usize, limit: usize) -> Vec<String> {
        for _ in 0..limit {
            let _ = self.sync().await;
            self.set_all_ready();
            if self.pods().len() >= want
                && self
                    .pods()
                    .iter()
                    .all(|p| super::utils::is_running_and_ready(p))
            {
                let _ = self.sync().await;
                break;
            }
        }
        self.objects.of("create_pod")
    }

    /// Syncs until `want` pods remain (the fake deletes at once), at most `limit` passes;
    /// returns the deletions in order.
    pub async fn scale_down(&self, want: usize, limit: usize) -> Vec<String> {
        for _ in 0..limit {
            let _ = self.sync().await;
            if self.pods().len() <= want {
                let _ = self.sync().await;
                break;
            }
        }
        self.objects.of("delete_pod")
    }

    /// The last status written.
    pub fn status(&self) -> k8s_openapi::api::apps::v1::StatefulSetStatus {
        self.set().status.unwrap_or_default()
    }
}
