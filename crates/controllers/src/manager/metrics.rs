//! The manager's Prometheus registry: work queues, leader election, REST client, controllers.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kcm_machinery::client::ClientMetrics;
use kcm_machinery::leaderelection::LeaderElectionMetrics;
use kcm_machinery::workqueue::WorkqueueMetrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry};

/// The `manager` label value, as kube-controller-manager's `ControllerManagerMetrics`.
pub const MANAGER_NAME: &str = "kube-controller-manager";

/// Labels of `running_managed_controllers`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    /// The controller's canonical name.
    name: String,
    /// Always [`MANAGER_NAME`].
    manager: String,
}

/// Every metric the manager serves on `/metrics`. Cheap to clone: clones share the registry
/// and the families.
///
/// Families registered here:
/// - `workqueue_*{name}` of every controller's queue (give [`Self::workqueue`] to queues);
/// - `leader_election_master_status{name}` and `leader_election_slowpath_total{name}`;
/// - `rest_client_requests_total{code,method,host}`, `rest_client_request_duration_seconds`,
///   `rest_client_rate_limiter_duration_seconds`;
/// - `running_managed_controllers{name,manager}`: 1 while a controller runs.
///
/// Per-controller sync durations are the `workqueue_work_duration_seconds{name}` histograms:
/// a worker holds an item from `get` to `done` exactly for the time of one sync.
#[derive(Clone)]
pub struct ManagerMetrics {
    /// The registry `/metrics` encodes; controllers may register more families into it.
    registry: Arc<Mutex<Registry>>,
    /// Work-queue families shared by every controller's queue.
    workqueue: Arc<WorkqueueMetrics>,
    /// REST client families shared by every client of the process.
    client: Arc<ClientMetrics>,
    /// Leader election families.
    leader_election: Arc<LeaderElectionMetrics>,
    /// `running_managed_controllers`.
    running: Family<ControllerLabels, Gauge>,
}

impl std::fmt::Debug for ManagerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagerMetrics").finish_non_exhaustive()
    }
}

impl Default for ManagerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ManagerMetrics {
    /// A registry with every family above registered.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let workqueue = Arc::new(WorkqueueMetrics::new());
        workqueue.register(&mut registry);
        let client = Arc::new(ClientMetrics::new());
        client.register(&mut registry);
        let leader_election = Arc::new(LeaderElectionMetrics::new());
        leader_election.register(&mut registry);
        let running = Family::<ControllerLabels, Gauge>::default();
        registry.register(
            "running_managed_controllers",
            "Indicates where instances of a controller are currently running",
            running.clone(),
        );
        Self {
            registry: Arc::new(Mutex::new(registry)),
            workqueue,
            client,
            leader_election,
            running,
        }
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The work-queue families, for `QueueConfig::named(name, metrics)`.
    pub fn workqueue(&self) -> Arc<WorkqueueMetrics> {
        Arc::clone(&self.workqueue)
    }

    /// The REST client families, for `kcm_machinery::client::build_client`.
    pub fn client(&self) -> Arc<ClientMetrics> {
        Arc::clone(&self.client)
    }

    /// The leader election families, for `LeaderElector::with_metrics`.
    pub fn leader_election(&self) -> Arc<LeaderElectionMetrics> {
        Arc::clone(&self.leader_election)
    }

    /// Registers a controller's own metric family under `name`.
    pub fn register(&self, name: &str, help: &str, metric: impl Metric) {
        self.registry().register(name, help, metric);
    }

    /// Gives `f` the registry, for metric structs that register several families at once.
    pub fn with_registry(&self, f: impl FnOnce(&mut Registry)) {
        f(&mut self.registry());
    }

    /// Marks `controller` as running (`running_managed_controllers` = 1), as upstream's
    /// `ControllerStarted`.
    pub fn controller_started(&self, controller: &str) {
        self.running_gauge(controller).set(1);
    }

    /// Marks `controller` as stopped, as upstream's `ControllerStopped`.
    pub fn controller_stopped(&self, controller: &str) {
        self.running_gauge(controller).set(0);
    }

    fn running_gauge(&self, controller: &str) -> Gauge {
        self.running
            .get_or_create(&ControllerLabels {
                name: controller.to_owned(),
                manager: MANAGER_NAME.to_owned(),
            })
            .clone()
    }

    /// The text exposition of every family (OpenMetrics text, which Prometheus scrapes).
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry())?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use kcm_machinery::client::ResultCode;
    use kcm_machinery::workqueue::{
        QueueConfig, RateLimitingQueue, default_controller_rate_limiter,
    };
    use prometheus_client::metrics::counter::Counter;

    use super::*;

    #[tokio::test]
    async fn exposes_every_family_with_upstream_names() {
        let metrics = ManagerMetrics::new();
        let queue: RateLimitingQueue<String> = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig::named("replicaset", metrics.workqueue()),
        );
        queue.add("default/web".to_owned());
        queue.add("default/api".to_owned());
        metrics
            .leader_election()
            .set_leader("kube-controller-manager", true);
        metrics.controller_started("replicaset-controller");
        metrics.client().requests_total(
            ResultCode::Status(200),
            &http::Method::GET,
            "10.0.0.1:6443",
        );
        let extra = Counter::<u64>::default();
        extra.inc();
        metrics.register("replicaset_controller_extra", "test family", extra);

        let text = metrics.encode().expect("encode");
        for line in [
            "workqueue_depth{name=\"replicaset\"} 2",
            "workqueue_adds_total{name=\"replicaset\"} 2",
            "leader_election_master_status{name=\"kube-controller-manager\"} 1",
            "running_managed_controllers{name=\"replicaset-controller\",manager=\"kube-controller-manager\"} 1",
            "replicaset_controller_extra_total 1",
            "rest_client_requests_total{code=\"200\",method=\"GET\",host=\"10.0.0.1:6443\"} 0",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        metrics.controller_stopped("replicaset-controller");
        let text = metrics.encode().expect("encode");
        assert!(text.contains(
            "running_managed_controllers{name=\"replicaset-controller\",manager=\"kube-controller-manager\"} 0"
        ));
        queue.shut_down();
    }
}
