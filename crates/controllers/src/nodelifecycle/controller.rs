//! The node lifecycle controller: node health, conditions, NoSchedule and NoExecute taints
//! (upstream's `pkg/controller/nodelifecycle/node_lifecycle_controller.go`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_workers};
use kcm_machinery::events::{EventRecorder, EventType, SystemClock, WallClock};
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, Lister, ResourceEventHandlerFuncs, SharedIndexInformer,
    SharedInformerFactory, wait_for_synced,
};
use kcm_machinery::labels::Selector;
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::LifecycleClient;
use super::health::{GracePeriods, NodeHealth, after_status_written, observe_node_health};
use super::labels::labels_to_reconcile;
use super::metrics::NodeLifecycleMetrics;
use super::node_ops::{
    mark_pods_not_ready, record_node_event, record_node_status_change, swap_node_taints,
};
use super::taints::{
    CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN, NODE_READY, desired_no_schedule_taints,
    node_condition, node_taints, not_ready_taint, owned_no_schedule_taints, taint_exists,
    taint_set_diff, unreachable_taint,
};
use super::timed_queue::{NODE_EVICTION_PERIOD, RateLimitedTimedQueue};
use super::zone::{
    EvictionRates, MasterDisruption, ZoneState, is_excluded_from_disruption_checks, zone_key,
};
use super::{add_pod_node_name_index, pods_on_node};

/// kube-controller-manager's name of this controller.
pub const CONTROLLER_NAME: &str = "node-lifecycle-controller";
/// The event source component, as upstream's recorder (`node-controller`).
pub const EVENT_COMPONENT: &str = "node-controller";
/// The namespace of node heartbeat Leases.
pub const NAMESPACE_NODE_LEASE: &str = "kube-node-lease";
/// The node work queue's name (its metrics' `name` label), as upstream.
pub const NODE_QUEUE: &str = "node_lifecycle_controller";
/// The pod work queue's name, as upstream.
pub const POD_QUEUE: &str = "node_lifecycle_controller_pods";
/// How the node workers treat a failed node: never retried (the node's sync logs its own
/// failures and returns Ok); only a panic requeues the node rate-limited.
const NODE_ERROR_POLICY: ErrorPolicy<String, Infallible> =
    ErrorPolicy::new("Failed to process node");
/// How the pod workers treat a failed pod, as upstream's `processPod`: requeued rate-limited.
const POD_ERROR_POLICY: ErrorPolicy<PodKey, PodError> =
    ErrorPolicy::new("Failed to process pod").with_requeue_level(tracing::Level::INFO);

/// Why a pod bound to a not-ready node could not be marked; the pod is requeued rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum PodError {
    /// The pod's node is not in the node cache.
    #[error("Failed to read node {node}")]
    NodeNotFound {
        /// The node the pod is bound to.
        node: String,
    },
    /// Writing the pod's Ready condition failed.
    #[error("Unable to mark pod NotReady on node {node}: {source}")]
    MarkNotReady {
        /// The node the pod is bound to.
        node: String,
        /// The write's error.
        #[source]
        source: super::node_ops::Error,
    },
}

/// Workers of the NoSchedule tainting pass and of a monitor pass (`nodeUpdateWorkerSize`).
pub const NODE_UPDATE_WORKER_SIZE: usize = 8;
/// Workers marking late-bound pods not ready (`podUpdateWorkerSize`).
pub const POD_UPDATE_WORKER_SIZE: usize = 4;
/// Attempts to write a node's health before skipping it this pass (`NodeHealthUpdateRetry`).
pub const NODE_HEALTH_UPDATE_RETRY: usize = 5;
/// Pause between those attempts (`retrySleepTime`).
pub const RETRY_SLEEP_TIME: Duration = Duration::from_millis(20);

/// The controller's settings, with kube-controller-manager 1.33's defaults.
#[derive(Clone)]
pub struct NodeLifecycleOptions {
    /// `--node-monitor-period` (5s).
    pub node_monitor_period: Duration,
    /// `--node-startup-grace-period` (1m).
    pub node_startup_grace_period: Duration,
    /// `--node-monitor-grace-period` (50s).
    pub node_monitor_grace_period: Duration,
    /// Eviction rates and thresholds.
    pub rates: EvictionRates,
    /// Where the work queues (`node_lifecycle_controller`, `node_lifecycle_controller_pods`)
    /// record their metrics; `None` records nothing.
    pub queue_metrics: Option<Arc<WorkqueueMetrics>>,
}

impl std::fmt::Debug for NodeLifecycleOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeLifecycleOptions")
            .field("node_monitor_period", &self.node_monitor_period)
            .field("node_startup_grace_period", &self.node_startup_grace_period)
            .field("node_monitor_grace_period", &self.node_monitor_grace_period)
            .field("rates", &self.rates)
            .field("queue_metrics", &self.queue_metrics.is_some())
            .finish()
    }
}

impl Default for NodeLifecycleOptions {
    fn default() -> Self {
        Self {
            node_monitor_period: Duration::from_secs(5),
            node_startup_grace_period: Duration::from_secs(60),
            node_monitor_grace_period: Duration::from_secs(50),
            rates: EvictionRates {
                eviction_qps: 0.1,
                secondary_eviction_qps: 0.01,
                large_cluster_threshold: 50,
                unhealthy_zone_threshold: 0.55,
            },
            queue_metrics: None,
        }
    }
}

/// A pod to re-check, by namespace and name.
type PodKey = (String, String);

/// State shared by the monitor pass, the tainting pass and the workers. One lock; never held
/// across an await.
#[derive(Default)]
struct State {
    /// Nodes seen by earlier monitor passes, by name.
    known_nodes: HashMap<String, Arc<Node>>,
    /// Health per node name (upstream's `nodeHealthMap`).
    health: HashMap<String, NodeHealth>,
    /// State per zone; every zone here has a tainter.
    zone_states: HashMap<String, ZoneState>,
    /// The NoExecute tainting queue per zone (zones are never removed, as upstream).
    tainters: HashMap<String, Arc<RateLimitedTimedQueue>>,
    /// Nodes whose pods must be marked not ready again (an earlier attempt failed).
    nodes_to_retry: HashSet<String>,
}

/// Watches node heartbeats and taints nodes as upstream's node lifecycle controller.
pub struct NodeLifecycleController {
    /// Settings.
    options: NodeLifecycleOptions,
    /// Writes.
    client: Arc<dyn LifecycleClient>,
    /// Node and pod events (component `node-controller`).
    recorder: Arc<dyn EventRecorder>,
    /// Wall clock for timestamps written into conditions and taints (test seam).
    clock: Arc<dyn WallClock>,
    /// Node cache.
    nodes: Lister<Node>,
    /// Pod cache, indexed by [`super::POD_NODE_NAME_INDEX`].
    pods: Lister<Pod>,
    /// Lease cache (all namespaces; only `kube-node-lease` is read).
    leases: Lister<Lease>,
    /// The informers to wait for.
    caches_synced: Vec<InformerSynced>,
    /// Mutable state.
    state: Mutex<State>,
    /// Node names for the NoSchedule pass.
    node_queue: RateLimitingQueue<String>,
    /// Pods bound after their node was judged.
    pod_queue: RateLimitingQueue<PodKey>,
    /// `node_collector_*`.
    metrics: NodeLifecycleMetrics,
}

impl std::fmt::Debug for NodeLifecycleController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeLifecycleController")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl NodeLifecycleController {
    /// A controller on the factory's Node, Pod, Lease and DaemonSet informers, writing
    /// through `client`. Registers its handlers and the pod index; call inside a runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: Arc<dyn LifecycleClient>,
        recorder: Arc<dyn EventRecorder>,
        options: NodeLifecycleOptions,
    ) -> Arc<Self> {
        Self::with_informers(
            factory.nodes(),
            factory.pods(),
            factory.leases(),
            factory.daemon_sets(),
            client,
            recorder,
            Arc::new(SystemClock),
            options,
        )
    }

    /// As [`Self::new`], from the informers themselves, with an injected wall clock.
    #[allow(clippy::too_many_arguments)]
    pub fn with_informers(
        nodes: SharedIndexInformer<Node>,
        pods: SharedIndexInformer<Pod>,
        leases: SharedIndexInformer<Lease>,
        daemon_sets: SharedIndexInformer<DaemonSet>,
        client: Arc<dyn LifecycleClient>,
        recorder: Arc<dyn EventRecorder>,
        clock: Arc<dyn WallClock>,
        options: NodeLifecycleOptions,
    ) -> Arc<Self> {
        add_pod_node_name_index(&pods);
        let queue_config = |name: &str| QueueConfig {
            name: name.to_owned(),
            metrics: options.queue_metrics.clone(),
        };
        // Upstream's node queue is a plain one: nothing in it is ever rate limited, the
        // limiter only backs a panic's retry.
        let node_queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            queue_config(NODE_QUEUE),
        );
        let pod_queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            queue_config(POD_QUEUE),
        );
        // The node handler's delete reaches the controller's state through a weak
        // reference, so the controller is built around its own handle.
        Arc::new_cyclic(|weak: &Weak<Self>| {
            let weak = weak.clone();
            let (q1, q2) = (node_queue.clone(), node_queue.clone());
            let node_handler = ResourceEventHandlerFuncs::<Node>::new()
                .add_func(move |node, _| q1.add(node.metadata.name.clone().unwrap_or_default()))
                .update_func(move |_, node| q2.add(node.metadata.name.clone().unwrap_or_default()))
                .delete_func(move |deleted| {
                    if let Some(this) = weak.upgrade() {
                        let name = deleted.object().metadata.name.clone().unwrap_or_default();
                        this.state().nodes_to_retry.remove(&name);
                    }
                });
            let (q1, q2) = (pod_queue.clone(), pod_queue.clone());
            let pod_handler = ResourceEventHandlerFuncs::<Pod>::new()
                .add_func(move |pod, _| pod_updated(&q1, None, &pod))
                .update_func(move |old, pod| pod_updated(&q2, Some(&old), &pod));
            let caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
                .wait_for(&leases)
                .register(&nodes, node_handler)
                .register(&pods, pod_handler)
                .wait_for(&daemon_sets)
                .finish();
            Self {
                options,
                client,
                recorder,
                clock,
                nodes: nodes.lister(),
                pods: pods.lister(),
                leases: leases.lister(),
                caches_synced,
                state: Mutex::new(State::default()),
                node_queue,
                pod_queue,
                metrics: NodeLifecycleMetrics::new(),
            }
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    // -----------------------------------------------------------------------------------------
    // Run
    // -----------------------------------------------------------------------------------------

    /// Waits for the caches, then runs the NoSchedule workers, the pod workers, the NoExecute
    /// tainting pass every 100ms and the monitor pass every `--node-monitor-period` until
    /// `cancel` fires.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        tracing::info!(controller = CONTROLLER_NAME, "Starting controller");
        if !wait_for_synced(CONTROLLER_NAME, &cancel, &self.caches_synced).await {
            self.node_queue.shut_down();
            self.pod_queue.shut_down();
            return;
        }
        let mut tasks = JoinSet::new();
        let this = Arc::clone(&self);
        let c = cancel.clone();
        tasks.spawn(async move {
            every(NODE_EVICTION_PERIOD, &c, || {
                this.do_no_execute_tainting_pass()
            })
            .await;
        });
        let this = Arc::clone(&self);
        let c = cancel.clone();
        let period = self.options.node_monitor_period;
        tasks.spawn(async move {
            every(period, &c, || this.monitor_node_health()).await;
        });
        let this = Arc::clone(&self);
        let node_sync = move |name: String| {
            let this = Arc::clone(&this);
            async move { this.sync_node(&name).await }
        };
        let this = Arc::clone(&self);
        let pod_sync = move |key: PodKey| {
            let this = Arc::clone(&this);
            async move { this.process_pod(&key).await }
        };
        // Each returns once `cancel` has fired, its queue has shut down and its workers stopped.
        tokio::join!(
            run_workers(
                CONTROLLER_NAME,
                &self.node_queue,
                NODE_ERROR_POLICY,
                NODE_UPDATE_WORKER_SIZE,
                &cancel,
                node_sync,
            ),
            run_workers(
                CONTROLLER_NAME,
                &self.pod_queue,
                POD_ERROR_POLICY,
                POD_UPDATE_WORKER_SIZE,
                &cancel,
                pod_sync,
            ),
        );
        while tasks.join_next().await.is_some() {}
        tracing::info!(controller = CONTROLLER_NAME, "Shutting down controller");
    }

    /// One node of the node queue, as upstream's `doNodeProcessingPassWorker`: the NoSchedule
    /// taints, then the beta labels. Failures are logged and not retried (upstream does not
    /// requeue either: the next node update brings the node back).
    async fn sync_node(&self, name: &str) -> Result<(), Infallible> {
        if let Err(err) = self.do_no_schedule_tainting_pass(name).await {
            tracing::error!(node = %name, %err, "Failed to taint NoSchedule on node");
        }
        if let Err(err) = self.reconcile_node_labels(name).await {
            tracing::error!(node = %name, %err, "Failed to reconcile labels for node");
        }
        Ok(())
    }

    /// The queue of node names (tests).
    pub fn node_queue(&self) -> &RateLimitingQueue<String> {
        &self.node_queue
    }

    /// Takes one node off the node queue and runs `Self::sync_node` through the shared
    /// worker. False once the queue has shut down (tests).
    pub async fn process_next_node(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.node_queue,
            &NODE_ERROR_POLICY,
            |name| async move { self.sync_node(&name).await },
        )
        .await
    }

    /// Takes one pod off the pod queue and runs [`Self::process_pod`] through the shared
    /// worker (requeued rate-limited on failure). False once the queue has shut down (tests).
    pub async fn process_next_pod(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.pod_queue,
            &POD_ERROR_POLICY,
            |key| async move { self.process_pod(&key).await },
        )
        .await
    }

    // -----------------------------------------------------------------------------------------
    // NoSchedule taints
    // -----------------------------------------------------------------------------------------

    /// Brings the node's condition taints (NoSchedule) in line with its conditions, as
    /// upstream's `doNoScheduleTaintingPass`.
    pub async fn do_no_schedule_tainting_pass(&self, name: &str) -> super::node_ops::Result<()> {
        let Some(node) = self.nodes.get_cluster(name) else {
            return Ok(());
        };
        let (add, remove) = taint_set_diff(
            &desired_no_schedule_taints(&node),
            &owned_no_schedule_taints(&node),
        );
        if add.is_empty() && remove.is_empty() {
            return Ok(());
        }
        swap_node_taints(
            self.client.as_ref(),
            self.clock.as_ref(),
            &node,
            &add,
            &remove,
        )
        .await
    }

    /// Sets the beta OS/arch labels from the stable ones where they differ or are missing, as
    /// upstream's `reconcileNodeLabels`.
    pub async fn reconcile_node_labels(&self, name: &str) -> Result<(), kube::Error> {
        let Some(node) = self.nodes.get_cluster(name) else {
            return Ok(());
        };
        let labels = labels_to_reconcile(&node);
        if labels.is_empty() {
            return Ok(());
        }
        self.client
            .patch_node_labels(name, &labels)
            .await
            .map(|_| ())
    }

    // -----------------------------------------------------------------------------------------
    // NoExecute taints
    // -----------------------------------------------------------------------------------------

    /// Drains each zone's tainting queue at its rate: a node still not ready gets the
    /// NoExecute taint matching its Ready condition (the opposite one removed in the same
    /// update), as upstream's `doNoExecuteTaintingPass`.
    pub async fn do_no_execute_tainting_pass(&self) {
        let tainters: Vec<Arc<RateLimitedTimedQueue>> =
            self.state().tainters.values().cloned().collect();
        for tainter in tainters {
            tainter
                .try_process(|value| async move {
                    let Some(node) = self.nodes.get_cluster(&value.value) else {
                        return (true, Duration::ZERO);
                    };
                    let Some(ready) = node_condition(&node, NODE_READY) else {
                        return (false, Duration::from_millis(50));
                    };
                    let (add, opposite) = match ready.status.as_str() {
                        CONDITION_FALSE => (not_ready_taint(), unreachable_taint()),
                        CONDITION_UNKNOWN => (unreachable_taint(), not_ready_taint()),
                        _ => return (true, Duration::ZERO),
                    };
                    match swap_node_taints(
                        self.client.as_ref(),
                        self.clock.as_ref(),
                        &node,
                        &[add],
                        &[opposite],
                    )
                    .await
                    {
                        Ok(()) => {
                            self.metrics.eviction(&zone_key(&node));
                            (true, Duration::ZERO)
                        }
                        Err(err) => {
                            tracing::warn!(%err, "NoExecute tainting failed");
                            (false, Duration::ZERO)
                        }
                    }
                })
                .await;
        }
    }

    // -----------------------------------------------------------------------------------------
    // Monitor pass
    // -----------------------------------------------------------------------------------------

    /// One health pass over every node, as upstream's `monitorNodeHealth`: registers new
    /// nodes and zones, sets silent nodes' conditions Unknown, queues not-ready nodes for
    /// NoExecute tainting, marks their pods not ready, then updates zone states and rates.
    pub async fn monitor_node_health(&self) {
        let started = Instant::now();
        self.monitor_node_health_pass().await;
        self.metrics
            .observe_update_all_nodes_health(started.elapsed().as_secs_f64());
    }

    async fn monitor_node_health_pass(&self) {
        let nodes = self.nodes.list_all(&Selector::everything());
        let (added, deleted, new_zone_nodes) = self.classify_nodes(&nodes);
        for node in &new_zone_nodes {
            self.add_tainter_for_new_zone(node);
        }
        for node in &added {
            let name = node.metadata.name.clone().unwrap_or_default();
            tracing::info!(node = %name, "Controller observed a new Node");
            record_node_event(
                self.recorder.as_ref(),
                &name,
                node.metadata.uid.as_deref().unwrap_or_default(),
                EventType::Normal,
                "RegisteredNode",
                &format!("Registered Node {name} in Controller"),
            );
            self.state().known_nodes.insert(name, Arc::clone(node));
            self.add_tainter_for_new_zone(node);
            if let Err(err) = self.mark_node_as_reachable(node).await {
                tracing::error!(%err, "Failed to remove taints from node");
            }
        }
        for node in &deleted {
            let name = node.metadata.name.clone().unwrap_or_default();
            tracing::info!(node = %name, "Controller observed a Node deletion");
            record_node_event(
                self.recorder.as_ref(),
                &name,
                node.metadata.uid.as_deref().unwrap_or_default(),
                EventType::Normal,
                "RemovingNode",
                &format!("Removing Node {name} from Controller"),
            );
            // Upstream keeps a deleted node's `nodeHealthMap` entry for good; with nodes coming
            // and going for days that map only grows. A namesake created later is health-checked
            // as new either way (its conditions' heartbeats differ from the saved ones).
            let mut state = self.state();
            state.known_nodes.remove(&name);
            state.health.remove(&name);
        }

        let results: Vec<Option<(String, Option<bool>)>> =
            futures::stream::iter(nodes.iter().cloned())
                .map(|node| async move {
                    let started = Instant::now();
                    let result = self.update_node(&node).await;
                    self.metrics
                        .observe_update_node_health(started.elapsed().as_secs_f64());
                    result
                })
                .buffer_unordered(NODE_UPDATE_WORKER_SIZE)
                .collect()
                .await;
        let mut zones: BTreeMap<String, Vec<Option<bool>>> = BTreeMap::new();
        for (zone, ready) in results.into_iter().flatten() {
            zones.entry(zone).or_default().push(ready);
        }
        self.handle_disruption(&zones, &nodes).await;
    }

    /// One node of a monitor pass; returns its zone and readiness unless it is excluded from
    /// disruption checks or its health could not be written.
    async fn update_node(&self, cached: &Arc<Node>) -> Option<(String, Option<bool>)> {
        let name = cached.metadata.name.clone().unwrap_or_default();
        // The cached object, shared; copied only to write a new status.
        let mut node: Arc<Node> = Arc::clone(cached);
        let grace = GracePeriods {
            startup: self.options.node_startup_grace_period,
            monitor: self.options.node_monitor_grace_period,
        };
        let mut outcome = None;
        for attempt in 0..NODE_HEALTH_UPDATE_RETRY {
            if attempt > 0 {
                tokio::time::sleep(RETRY_SLEEP_TIME).await;
            }
            let lease = self.leases.get(NAMESPACE_NODE_LEASE, &name);
            let renew = lease
                .as_ref()
                .and_then(|l| l.spec.as_ref())
                .and_then(|s| s.renew_time.as_ref());
            let saved = self.state().health.get(&name).cloned();
            let obs = observe_node_health(
                &node,
                renew,
                saved.as_ref(),
                grace,
                Instant::now(),
                self.clock.now(),
            );
            self.state().health.insert(name.clone(), obs.health.clone());
            let Some(status) = obs.new_status.clone() else {
                outcome = Some(obs);
                break;
            };
            let mut updated = (*node).clone();
            updated.status = Some(status);
            match self.client.update_node_status(&updated).await {
                Ok(_) => {
                    self.state()
                        .health
                        .insert(name.clone(), after_status_written(&obs, Instant::now()));
                    node = Arc::new(updated);
                    outcome = Some(obs);
                    break;
                }
                Err(err) => {
                    tracing::error!(node = %name, %err, "Error updating node");
                    match self.client.get_node(&name).await {
                        Ok(fresh) => node = Arc::new(fresh),
                        Err(err) => {
                            tracing::error!(node = %name, %err,
                                "Failed while getting a Node to retry updating node health");
                            return None;
                        }
                    }
                }
            }
        }
        let Some(obs) = outcome else {
            tracing::error!(node = %name,
                "Update health of Node from Controller error, Skipping - no pods will be evicted");
            return None;
        };
        let current_ready = obs
            .current_ready
            .as_ref()
            .map(|c| c.status == CONDITION_TRUE);
        let zone =
            (!is_excluded_from_disruption_checks(&node)).then(|| (zone_key(&node), current_ready));
        let Some(current) = &obs.current_ready else {
            self.state().nodes_to_retry.remove(&name);
            return zone;
        };
        let pods = pods_on_node(&self.pods, &name);
        self.process_taint_base_eviction(&node, &obs.observed_ready.status)
            .await;
        let needs_retry = self.state().nodes_to_retry.contains(&name);
        let became_not_ready =
            current.status != CONDITION_TRUE && obs.observed_ready.status == CONDITION_TRUE;
        if became_not_ready {
            record_node_status_change(self.recorder.as_ref(), &node, "NodeNotReady");
        }
        if (became_not_ready || (needs_retry && obs.observed_ready.status != CONDITION_TRUE))
            && let Err(err) = mark_pods_not_ready(
                self.client.as_ref(),
                self.recorder.as_ref(),
                self.clock.as_ref(),
                &pods,
                &name,
            )
            .await
        {
            tracing::error!(node = %name, %err, "unable to mark all pods NotReady; queuing for retry");
            self.state().nodes_to_retry.insert(name);
            return zone;
        }
        self.state().nodes_to_retry.remove(&name);
        zone
    }

    /// Queues or swaps the node's NoExecute taint from its observed Ready status, as
    /// upstream's `processTaintBaseEviction`.
    async fn process_taint_base_eviction(&self, node: &Node, observed: &str) {
        let taints = node_taints(node);
        let result = match observed {
            CONDITION_FALSE if taint_exists(taints, &unreachable_taint()) => {
                self.swap(node, not_ready_taint(), unreachable_taint())
                    .await
            }
            CONDITION_UNKNOWN if taint_exists(taints, &not_ready_taint()) => {
                self.swap(node, unreachable_taint(), not_ready_taint())
                    .await
            }
            CONDITION_FALSE | CONDITION_UNKNOWN => {
                self.mark_node_for_tainting(node, observed);
                Ok(())
            }
            CONDITION_TRUE => self.mark_node_as_reachable(node).await.map(|_| ()),
            _ => Ok(()),
        };
        if let Err(err) = result {
            tracing::error!(%err, "Failed to update NoExecute taints; will retry next pass");
        }
    }

    async fn swap(
        &self,
        node: &Node,
        add: k8s_openapi::api::core::v1::Taint,
        remove: k8s_openapi::api::core::v1::Taint,
    ) -> super::node_ops::Result<()> {
        swap_node_taints(
            self.client.as_ref(),
            self.clock.as_ref(),
            node,
            &[add],
            &[remove],
        )
        .await
    }

    /// Queues the node in its zone's tainter (re-queued when its taint is missing), as
    /// upstream's `markNodeForTainting`.
    fn mark_node_for_tainting(&self, node: &Node, status: &str) -> bool {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let tainter = self.tainter_for(node);
        let wanted = if status == CONDITION_FALSE {
            not_ready_taint()
        } else {
            unreachable_taint()
        };
        if !taint_exists(node_taints(node), &wanted) {
            tainter.remove(name);
        }
        tainter.add(name, node.metadata.uid.as_deref().unwrap_or_default())
    }

    /// Removes both NoExecute taints (in one update) and forgets the node in its tainter;
    /// true if it was queued or tainted (upstream's `markNodeAsReachable`).
    async fn mark_node_as_reachable(&self, node: &Node) -> super::node_ops::Result<bool> {
        swap_node_taints(
            self.client.as_ref(),
            self.clock.as_ref(),
            node,
            &[],
            &[unreachable_taint(), not_ready_taint()],
        )
        .await?;
        let name = node.metadata.name.as_deref().unwrap_or_default();
        Ok(self.tainter_for(node).remove(name))
    }

    fn tainter_for(&self, node: &Node) -> Arc<RateLimitedTimedQueue> {
        let zone = zone_key(node);
        let qps = self.options.rates.eviction_qps;
        let mut state = self.state();
        state
            .zone_states
            .entry(zone.clone())
            .or_insert(ZoneState::Initial);
        Arc::clone(
            state
                .tainters
                .entry(zone)
                .or_insert_with(|| Arc::new(RateLimitedTimedQueue::new(qps))),
        )
    }

    fn add_tainter_for_new_zone(&self, node: &Node) {
        let zone = zone_key(node);
        let is_new = !self.state().zone_states.contains_key(&zone);
        if is_new {
            tracing::info!(zone = %zone, "Initializing eviction metric for zone");
            self.tainter_for(node);
            self.metrics.init_zone_evictions(&zone);
        }
    }

    /// `(added, deleted, new zone representatives)` against the known node set (upstream's
    /// `classifyNodes`).
    fn classify_nodes(
        &self,
        all: &[Arc<Node>],
    ) -> (Vec<Arc<Node>>, Vec<Arc<Node>>, Vec<Arc<Node>>) {
        let state = self.state();
        let mut added = Vec::new();
        let mut new_zone = Vec::new();
        let mut seen = HashSet::with_capacity(all.len());
        for node in all {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            seen.insert(name);
            if !state.known_nodes.contains_key(name) {
                added.push(Arc::clone(node));
            } else if !state.zone_states.contains_key(&zone_key(node)) {
                new_zone.push(Arc::clone(node));
            }
        }
        let deleted = state
            .known_nodes
            .iter()
            .filter(|(name, _)| !seen.contains(name.as_str()))
            .map(|(_, n)| Arc::clone(n))
            .collect();
        (added, deleted, new_zone)
    }

    /// Applies [`EvictionRates::plan_disruption`], as upstream's `handleDisruption`.
    async fn handle_disruption(
        &self,
        zones: &BTreeMap<String, Vec<Option<bool>>>,
        nodes: &[Arc<Node>],
    ) {
        for (zone, ready) in zones {
            let (unhealthy, _) = self.options.rates.compute_zone_state(ready);
            self.metrics.set_zone(zone, ready.len(), unhealthy);
        }
        let plan = {
            let state = self.state();
            self.options
                .rates
                .plan_disruption(&state.zone_states, zones)
        };
        for zone in &plan.removed_zones {
            self.metrics.clear_zone(zone);
        }
        match plan.transition {
            MasterDisruption::Entering => {
                tracing::info!(
                    "Controller detected that all Nodes are not-Ready. Entering master disruption mode"
                );
                for node in nodes {
                    if let Err(err) = self.mark_node_as_reachable(node).await {
                        tracing::error!(%err, "Failed to remove taints from Node");
                    }
                }
            }
            MasterDisruption::Exiting => {
                tracing::info!(
                    "Controller detected that some Nodes are Ready. Exiting master disruption mode"
                );
                let now = Instant::now();
                let mut state = self.state();
                for node in nodes {
                    let name = node.metadata.name.as_deref().unwrap_or_default();
                    if let Some(h) = state.health.get_mut(name) {
                        h.probe_timestamp = now;
                        h.ready_transition_timestamp = now;
                    }
                }
            }
            MasterDisruption::None => {}
        }
        let mut state = self.state();
        for (zone, qps) in &plan.limiters {
            if let Some(t) = state.tainters.get(zone) {
                t.swap_limiter(*qps);
            }
        }
        for (zone, new) in &plan.states {
            if state.zone_states.get(zone) != Some(new) && plan.transition == MasterDisruption::None
            {
                tracing::info!(zone = %zone, new_state = new.as_str(), "Controller detected that zone is now in new state");
            }
        }
        state.zone_states = plan.states;
    }

    /// The controller's `node_collector_*` metrics, to register in the process registry.
    pub fn metrics(&self) -> &NodeLifecycleMetrics {
        &self.metrics
    }

    /// How many nodes the controller keeps state for: `(known nodes, health records)`.
    #[cfg(test)]
    pub(super) fn tracked_nodes(&self) -> (usize, usize) {
        let state = self.state();
        (state.known_nodes.len(), state.health.len())
    }

    /// The state of a zone, for tests and diagnostics.
    pub fn zone_state(&self, zone: &str) -> Option<ZoneState> {
        self.state().zone_states.get(zone).copied()
    }

    /// The tainting rate of a zone.
    pub fn zone_qps(&self, zone: &str) -> Option<f32> {
        self.state().tainters.get(zone).map(|t| t.qps())
    }

    // -----------------------------------------------------------------------------------------
    // Pods bound to not-ready nodes
    // -----------------------------------------------------------------------------------------

    /// Marks a newly bound pod not ready if its node is not ready, as upstream's
    /// `processPod`. An error requeues the pod rate-limited (`POD_ERROR_POLICY`).
    pub async fn process_pod(&self, key: &PodKey) -> Result<(), PodError> {
        let Some(pod) = self.pods.get(&key.0, &key.1) else {
            return Ok(());
        };
        let node_name = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let ready = {
            let state = self.state();
            match state.health.get(&node_name) {
                None => return Ok(()),
                Some(h) => h.ready.clone(),
            }
        };
        if self.nodes.get_cluster(&node_name).is_none() {
            return Err(PodError::NodeNotFound { node: node_name });
        }
        let Some(ready) = ready else { return Ok(()) };
        if ready.status != CONDITION_TRUE {
            mark_pods_not_ready(
                self.client.as_ref(),
                self.recorder.as_ref(),
                self.clock.as_ref(),
                &[pod],
                &node_name,
            )
            .await
            .map_err(|source| PodError::MarkNotReady {
                node: node_name,
                source,
            })?;
        }
        Ok(())
    }
}

/// Queues a pod newly bound to a node (upstream's `podUpdated`).
fn pod_updated(queue: &RateLimitingQueue<PodKey>, old: Option<&Pod>, new: &Pod) {
    let node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
    let Some(node_name) = node(new).filter(|n| !n.is_empty()) else {
        return;
    };
    if old.is_none_or(|o| node(o).as_deref() != Some(node_name.as_str())) {
        queue.add((
            new.metadata.namespace.clone().unwrap_or_default(),
            new.metadata.name.clone().unwrap_or_default(),
        ));
    }
}

/// Runs `f` now and then `period` after each run ends, until `cancel` (upstream's
/// `wait.UntilWithContext`).
async fn every<F, Fut>(period: Duration, cancel: &CancellationToken, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = f() => {}
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
    }
}
