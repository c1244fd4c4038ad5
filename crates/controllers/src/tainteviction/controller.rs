//! The taint eviction controller: deletes pods from nodes with NoExecute taints they do not
//! tolerate (upstream's `pkg/controller/tainteviction/taint_eviction.go`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, PodCondition, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_workers};
use kcm_machinery::events::{EventRecorder, EventType, SystemClock, WallClock};
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, Lister, ResourceEventHandlerFuncs, SharedIndexInformer,
    SharedInformerFactory, wait_for_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::metrics::TaintEvictionMetrics;
use super::timed_workers::{TimedWorkerQueue, WorkArgs};
use super::tolerations::{matching_tolerations, min_toleration_time};
use crate::nodelifecycle::client::{LifecycleClient, is_not_found};
use crate::nodelifecycle::taints::{EFFECT_NO_EXECUTE, node_taints};
use crate::nodelifecycle::{add_pod_node_name_index, pods_on_node};

/// kube-controller-manager's name of this controller.
pub const CONTROLLER_NAME: &str = "taint-eviction-controller";
/// Workers (upstream's `UpdateWorkerSize`).
pub const UPDATE_WORKER_SIZE: usize = 8;
/// Attempts to delete a pod (upstream's `retries`).
pub const RETRIES: usize = 5;
/// The pod condition set before deletion.
pub use kcm_machinery::controller::ranking::DISRUPTION_TARGET;
/// Its reason.
pub const REASON_DELETION_BY_TAINT_MANAGER: &str = "DeletionByTaintManager";
/// Its message.
pub const MESSAGE_DELETION_BY_TAINT_MANAGER: &str =
    "Taint manager: deleting due to NoExecute taint";
/// The node work queue's name (its metrics' `name` label), as upstream.
pub const NODE_QUEUE: &str = "noexec_taint_node";
/// The pod work queue's name, as upstream.
pub const POD_QUEUE: &str = "noexec_taint_pod";
/// How the node workers treat a failure: the handlers never fail, so only a panic requeues
/// the node, rate-limited.
const NODE_ERROR_POLICY: ErrorPolicy<String, Infallible> =
    ErrorPolicy::new("Failed to handle node update");
/// As [`NODE_ERROR_POLICY`], for pod updates.
const POD_ERROR_POLICY: ErrorPolicy<PodUpdate, Infallible> =
    ErrorPolicy::new("Failed to handle pod update");
/// The event reason for scheduling and cancelling deletions.
pub const REASON_TAINT_MANAGER_EVICTION: &str = "TaintManagerEviction";

/// A pod to look at: namespace, name, and the node it was bound to when queued.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodUpdate {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Node name at the time of the event.
    pub node_name: String,
}

/// Deletes pods that do not tolerate their node's NoExecute taints, after the shortest
/// `tolerationSeconds` of the tolerations they use.
pub struct TaintEvictionController {
    /// Writes.
    client: Arc<dyn LifecycleClient>,
    /// Pod events.
    recorder: Arc<dyn EventRecorder>,
    /// Node cache.
    nodes: Lister<Node>,
    /// Pod cache, indexed by node name.
    pods: Lister<Pod>,
    /// The informers to wait for.
    caches_synced: Vec<InformerSynced>,
    /// NoExecute taints per node that has some.
    tainted_nodes: Mutex<HashMap<String, Vec<Taint>>>,
    /// Scheduled deletions by `namespace/name`.
    evictions: Arc<TimedWorkerQueue>,
    /// Nodes whose NoExecute taints changed.
    /// Upstream's are plain queues: the handlers never fail, so the rate limiter only backs a
    /// panic's retry.
    node_queue: RateLimitingQueue<String>,
    /// Pods whose node or tolerations changed.
    pod_queue: RateLimitingQueue<PodUpdate>,
    /// `taint_eviction_controller_*`.
    metrics: TaintEvictionMetrics,
}

impl std::fmt::Debug for TaintEvictionController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaintEvictionController")
            .finish_non_exhaustive()
    }
}

fn no_execute_taints(node: &Node) -> Vec<Taint> {
    node_taints(node)
        .iter()
        .filter(|t| t.effect == EFFECT_NO_EXECUTE)
        .cloned()
        .collect()
}

fn pod_event_ref(args: &WorkArgs) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        name: Some(args.name.clone()),
        namespace: Some(args.namespace.clone()),
        ..ObjectReference::default()
    }
}

impl TaintEvictionController {
    /// A controller on the factory's Pod and Node informers; its work queues record into
    /// `queue_metrics` when given.
    pub fn new(
        factory: &SharedInformerFactory,
        client: Arc<dyn LifecycleClient>,
        recorder: Arc<dyn EventRecorder>,
        queue_metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Arc<Self> {
        Self::with_informers(
            factory.nodes(),
            factory.pods(),
            client,
            recorder,
            Arc::new(SystemClock),
            queue_metrics,
        )
    }

    /// As [`Self::new`], from the informers, with an injected wall clock.
    pub fn with_informers(
        nodes: SharedIndexInformer<Node>,
        pods: SharedIndexInformer<Pod>,
        client: Arc<dyn LifecycleClient>,
        recorder: Arc<dyn EventRecorder>,
        clock: Arc<dyn WallClock>,
        queue_metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Arc<Self> {
        add_pod_node_name_index(&pods);
        let metrics = TaintEvictionMetrics::new(&super::metrics::NAMES);
        let (c, r, m) = (client.clone(), recorder.clone(), metrics.clone());
        let evictions = TimedWorkerQueue::new(Arc::new(move |args: WorkArgs, due: Instant| {
            let (client, recorder, clock) = (c.clone(), r.clone(), clock.clone());
            let metrics = m.clone();
            Box::pin(async move {
                let deleted = delete_pod(client, recorder, clock, args).await?;
                if deleted {
                    metrics.pod_deleted(due.elapsed().as_secs_f64());
                }
                Ok(())
            })
        }));
        let queue_config = |name: &str| QueueConfig {
            name: name.to_owned(),
            metrics: queue_metrics.clone(),
        };
        let node_queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            queue_config(NODE_QUEUE),
        );
        let pod_queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            queue_config(POD_QUEUE),
        );
        let (q1, q2, q3) = (pod_queue.clone(), pod_queue.clone(), pod_queue.clone());
        let pod_handler = ResourceEventHandlerFuncs::<Pod>::new()
            .add_func(move |pod, _| pod_updated(&q1, None, Some(&pod)))
            .update_func(move |old, pod| pod_updated(&q2, Some(&old), Some(&pod)))
            .delete_func(move |deleted| pod_updated(&q3, Some(deleted.object()), None));
        let (q1, q2, q3) = (node_queue.clone(), node_queue.clone(), node_queue.clone());
        let node_handler = ResourceEventHandlerFuncs::<Node>::new()
            .add_func(move |node, _| node_updated(&q1, None, Some(&node)))
            .update_func(move |old, node| node_updated(&q2, Some(&old), Some(&node)))
            .delete_func(move |deleted| node_updated(&q3, Some(deleted.object()), None));
        // The handlers only touch the queues, so they can be registered before the
        // controller exists.
        let caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(&pods, pod_handler)
            .register(&nodes, node_handler)
            .finish();
        Arc::new(Self {
            client,
            recorder,
            nodes: nodes.lister(),
            pods: pods.lister(),
            caches_synced,
            tainted_nodes: Mutex::new(HashMap::new()),
            evictions,
            node_queue,
            pod_queue,
            metrics,
        })
    }

    fn tainted(&self) -> MutexGuard<'_, HashMap<String, Vec<Taint>>> {
        self.tainted_nodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for the caches, then handles node and pod updates until `cancel` fires.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        tracing::info!(controller = CONTROLLER_NAME, "Starting controller");
        if !wait_for_synced(CONTROLLER_NAME, &cancel, &self.caches_synced).await {
            self.node_queue.shut_down();
            self.pod_queue.shut_down();
            return;
        }
        let this = Arc::clone(&self);
        let node_sync = move |name: String| {
            let this = Arc::clone(&this);
            async move {
                this.handle_node_update(&name);
                Ok::<(), Infallible>(())
            }
        };
        let this = Arc::clone(&self);
        let pod_sync = move |update: PodUpdate| {
            let this = Arc::clone(&this);
            async move {
                this.handle_pod_update(&update);
                Ok::<(), Infallible>(())
            }
        };
        // Each returns once `cancel` has fired, its queue has shut down and its workers stopped.
        tokio::join!(
            run_workers(
                CONTROLLER_NAME,
                &self.node_queue,
                NODE_ERROR_POLICY,
                UPDATE_WORKER_SIZE,
                &cancel,
                node_sync,
            ),
            run_workers(
                CONTROLLER_NAME,
                &self.pod_queue,
                POD_ERROR_POLICY,
                UPDATE_WORKER_SIZE,
                &cancel,
                pod_sync,
            ),
        );
        tracing::info!(controller = CONTROLLER_NAME, "Shutting down controller");
    }

    /// The queue of node names (tests).
    pub fn node_queue(&self) -> &RateLimitingQueue<String> {
        &self.node_queue
    }

    /// Takes one node off the node queue and handles it through the shared worker. False once
    /// the queue has shut down (tests).
    pub async fn process_next_node(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.node_queue,
            &NODE_ERROR_POLICY,
            |name| async move {
                self.handle_node_update(&name);
                Ok::<(), Infallible>(())
            },
        )
        .await
    }

    fn cancel_work_with_event(&self, args: &WorkArgs) {
        if self.evictions.cancel_work(&args.key()) {
            self.recorder.event(
                &pod_event_ref(args),
                EventType::Normal,
                REASON_TAINT_MANAGER_EVICTION,
                format!("Cancelling deletion of Pod {}", args.key()),
            );
        }
    }

    /// Schedules, keeps, or cancels the deletion of one pod given its node's NoExecute
    /// taints, as upstream's `processPodOnNode`.
    pub fn process_pod_on_node(
        &self,
        args: WorkArgs,
        tolerations: &[Toleration],
        taints: &[Taint],
        now: Instant,
    ) {
        if taints.is_empty() {
            self.cancel_work_with_event(&args);
        }
        let Some(used) = matching_tolerations(taints, tolerations) else {
            tracing::info!(pod = %args.key(), "Not all taints are tolerated after update for pod on node");
            self.cancel_work_with_event(&args);
            self.evictions.add_work(args, now, now);
            return;
        };
        let Some(min) = min_toleration_time(&used) else {
            self.cancel_work_with_event(&args);
            return;
        };
        let mut start = now;
        let trigger = now + min;
        if let Some(scheduled) = self.evictions.worker(&args.key()) {
            start = scheduled.created_at;
            if start + min < trigger {
                return;
            }
            self.cancel_work_with_event(&args);
        }
        self.evictions.add_work(args, start, trigger);
    }

    /// A pod changed: (re)judge it against its node's taints (upstream's `handlePodUpdate`).
    pub fn handle_pod_update(&self, update: &PodUpdate) {
        let args = WorkArgs {
            namespace: update.namespace.clone(),
            name: update.name.clone(),
        };
        let Some(pod) = self.pods.get(&update.namespace, &update.name) else {
            self.cancel_work_with_event(&args);
            return;
        };
        let node_name = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        if node_name != update.node_name || node_name.is_empty() {
            return;
        }
        let Some(taints) = self.tainted().get(&node_name).cloned() else {
            return;
        };
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default();
        self.process_pod_on_node(args, tolerations, &taints, Instant::now());
    }

    /// A node's NoExecute taints changed: judge every pod on it (upstream's
    /// `handleNodeUpdate`).
    pub fn handle_node_update(&self, name: &str) {
        let Some(node) = self.nodes.get_cluster(name) else {
            self.tainted().remove(name);
            return;
        };
        let taints = no_execute_taints(&node);
        {
            let mut tainted = self.tainted();
            if taints.is_empty() {
                tainted.remove(name);
            } else {
                tainted.insert(name.to_owned(), taints.clone());
            }
        }
        let pods = pods_on_node(&self.pods, name);
        let now = Instant::now();
        for pod in pods {
            let args = WorkArgs {
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                name: pod.metadata.name.clone().unwrap_or_default(),
            };
            if taints.is_empty() {
                self.cancel_work_with_event(&args);
                continue;
            }
            let tolerations = pod
                .spec
                .as_ref()
                .and_then(|s| s.tolerations.as_deref())
                .unwrap_or_default();
            self.process_pod_on_node(args, tolerations, &taints, now);
        }
    }

    /// Whether a deletion is pending for `namespace/name`.
    pub fn is_scheduled(&self, key: &str) -> bool {
        self.evictions.worker(key).is_some()
    }

    /// The client (for tests of the fake).
    pub fn client(&self) -> &Arc<dyn LifecycleClient> {
        &self.client
    }

    /// The controller's `taint_eviction_controller_*` metrics, to register.
    pub fn metrics(&self) -> &TaintEvictionMetrics {
        &self.metrics
    }
}

/// Emits `TaintManagerEviction`, sets `DisruptionTarget` and deletes the pod, retrying, as
/// upstream's `deletePodHandler` + `addConditionAndDeletePod`. `Ok(true)` when this call
/// deleted the pod, `Ok(false)` when it was gone already.
async fn delete_pod(
    client: Arc<dyn LifecycleClient>,
    recorder: Arc<dyn EventRecorder>,
    clock: Arc<dyn WallClock>,
    args: WorkArgs,
) -> Result<bool, String> {
    tracing::info!(controller = CONTROLLER_NAME, pod = %args.key(), "Deleting pod");
    recorder.event(
        &pod_event_ref(&args),
        EventType::Normal,
        REASON_TAINT_MANAGER_EVICTION,
        format!("Marking for deletion Pod {}", args.key()),
    );
    let mut last = String::new();
    for attempt in 0..RETRIES {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        match add_condition_and_delete(client.as_ref(), clock.as_ref(), &args).await {
            Ok(()) => return Ok(true),
            Err(e) if is_not_found(&e) => return Ok(false),
            Err(e) => last = e.to_string(),
        }
    }
    tracing::error!(pod = %args.key(), error = %last, "deleting pod failed");
    Err(format!("deleting pod {}: {last}", args.key()))
}

async fn add_condition_and_delete(
    client: &dyn LifecycleClient,
    clock: &dyn WallClock,
    args: &WorkArgs,
) -> Result<(), kube::Error> {
    let mut pod = client.get_pod(&args.namespace, &args.name).await?;
    if set_disruption_target(&mut pod, clock.now()) {
        client.update_pod_status(&pod).await?;
    }
    client.delete_pod(&args.namespace, &args.name).await
}

/// Sets the `DisruptionTarget` condition (upstream's `UpdatePodCondition`); true if changed.
pub fn set_disruption_target(pod: &mut Pod, now: jiff::Timestamp) -> bool {
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    let wanted = PodCondition {
        type_: DISRUPTION_TARGET.to_owned(),
        status: "True".to_owned(),
        reason: Some(REASON_DELETION_BY_TAINT_MANAGER.to_owned()),
        message: Some(MESSAGE_DELETION_BY_TAINT_MANAGER.to_owned()),
        last_transition_time: Some(Time(now)),
        ..PodCondition::default()
    };
    match conditions.iter_mut().find(|c| c.type_ == DISRUPTION_TARGET) {
        Some(c)
            if c.status == wanted.status
                && c.reason == wanted.reason
                && c.message == wanted.message =>
        {
            false
        }
        Some(c) => {
            if c.status == wanted.status {
                let keep = c.last_transition_time.clone();
                *c = wanted;
                c.last_transition_time = keep;
            } else {
                *c = wanted;
            }
            true
        }
        None => {
            conditions.push(wanted);
            true
        }
    }
}

/// Queues a pod whose node or tolerations changed (upstream's `PodUpdated`).
fn pod_updated(queue: &RateLimitingQueue<PodUpdate>, old: Option<&Pod>, new: Option<&Pod>) {
    let node = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default()
    };
    let tolerations = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.tolerations.clone())
            .unwrap_or_default()
    };
    if let (Some(o), Some(n)) = (old, new)
        && node(o) == node(n)
        && tolerations(o) == tolerations(n)
    {
        return;
    }
    let Some(pod) = new.or(old) else { return };
    queue.add(PodUpdate {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        node_name: node(pod),
    });
}

/// Queues a node whose NoExecute taints changed (upstream's `NodeUpdated`).
fn node_updated(queue: &RateLimitingQueue<String>, old: Option<&Node>, new: Option<&Node>) {
    if let (Some(o), Some(n)) = (old, new)
        && no_execute_taints(o) == no_execute_taints(n)
    {
        return;
    }
    if let Some(node) = new.or(old) {
        queue.add(node.metadata.name.clone().unwrap_or_default());
    }
}
