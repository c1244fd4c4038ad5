//! The attach/detach controller: constants, construction, `Run`, the event handlers, the desired state populator, the reconciler loop with its operations and the node status updater (upstream `attach_detach_controller.go`, `populator/`, `reconciler/`, `statusupdater/`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::{
    AttachedVolume, Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::{
    CSIDriver, VolumeAttachment, VolumeAttachmentSource, VolumeAttachmentSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_machinery::controller::api_status::{ApiStatus, error_message};
use kcm_machinery::controller::{ErrorPolicy, run_controller};
use kcm_machinery::events::{EventRecorder, EventType};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::keys::{meta_namespace_key, object_key};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer,
    SharedInformerFactory, all_synced, wait_until_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use super::cache::{ActualStateOfWorld, DesiredStateOfWorld, VolumeToAttach};
use super::client::{ApiAttachDetachClient, AttachDetachClient};
use super::metrics::{
    ACTUAL_STATE_OF_WORLD, AttachDetachMetrics, DESIRED_STATE_OF_WORLD, VolumeCount,
};
use super::multi_attach::{MultiAttachError, is_multi_attach_allowed};
use super::naming::{CSI_PLUGIN_NAME, attachment_name, unique_volume_name};
use super::reconciler::{
    DEFAULT_RECONCILE_SYNC_PERIOD, NodeView, Operation, OperationState, reconcile,
};
use super::{CONTROLLER_MANAGED_ATTACH_DETACH_ANNOTATION, CONTROLLER_NAME};
use crate::volume::common::{
    POD_PVC_INDEX, add_pod_pvc_indexer, is_pod_terminated, is_scheduled, pod_volumes,
    volume_claim_name,
};

/// The source component of its events, as upstream's recorder.
pub const EVENT_COMPONENT: &str = "attachdetach-controller";

/// The PVC work queue's name in the `workqueue_*` metrics, as upstream's `pvcs`.
pub const QUEUE_NAME: &str = "pvcs";

/// How often the reconciler runs, upstream's `reconcilerLoopPeriod`.
pub const RECONCILER_LOOP_PERIOD: Duration = Duration::from_millis(100);

/// How often the populator drops pods that are gone, upstream's
/// `desiredStateOfWorldPopulatorLoopSleepPeriod`.
pub const POPULATOR_LOOP_PERIOD: Duration = Duration::from_secs(60);

/// How often the populator re-adds every active pod, upstream's
/// `desiredStateOfWorldPopulatorListPodsRetryDuration`.
pub const POPULATOR_LIST_PODS_PERIOD: Duration = Duration::from_secs(3 * 60);

/// How long an attach waits for the external attacher to report `status.attached` (and a
/// detach for the VolumeAttachment to go), as the CSI plugin's `csiTimeout`.
pub const CSI_TIMEOUT: Duration = Duration::from_secs(2 * 60);

/// The first back-off after a failed operation, upstream's `initialDurationBeforeRetry`.
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(500);

/// The longest back-off, upstream's `maxDurationBeforeRetry`.
pub const MAX_BACKOFF: Duration = Duration::from_secs(2 * 60 + 2);

/// How often a running operation looks at the VolumeAttachment cache.
const WAIT_POLL: Duration = Duration::from_millis(100);

/// The node taint that lets a mounted volume be detached at once.
const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// Upstream's event reasons.
pub const FAILED_ATTACH_VOLUME: &str = "FailedAttachVolume";
/// Upstream's event reasons.
pub const SUCCESSFUL_ATTACH_VOLUME: &str = "SuccessfulAttachVolume";

/// A failed PVC sync is retried rate-limited, as upstream's `processNextItem`.
const ERROR_POLICY: ErrorPolicy<String, std::convert::Infallible> = ErrorPolicy::new("PVC failed");

/// Wiring of an [`AttachDetachController`].
#[derive(Clone)]
pub struct AttachDetachControllerOptions {
    /// `--attach-detach-reconcile-sync-period`: how often attached volumes are re-checked.
    pub reconcile_sync_period: Duration,
    /// `--disable-attach-detach-reconcile-sync`: never re-check them.
    pub disable_reconcile_sync: bool,
    /// Where the PVC queue records its `workqueue_*` metrics; `None` records nothing.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// Where forced detaches are counted; `None` counts nothing.
    pub controller_metrics: Option<Arc<AttachDetachMetrics>>,
}

impl Default for AttachDetachControllerOptions {
    fn default() -> Self {
        Self {
            reconcile_sync_period: DEFAULT_RECONCILE_SYNC_PERIOD,
            disable_reconcile_sync: false,
            metrics: None,
            controller_metrics: None,
        }
    }
}

impl std::fmt::Debug for AttachDetachControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachDetachControllerOptions")
            .field("reconcile_sync_period", &self.reconcile_sync_period)
            .field("disable_reconcile_sync", &self.disable_reconcile_sync)
            .finish_non_exhaustive()
    }
}

/// The caches the controller reads (read only).
#[derive(Clone, Default)]
pub struct AttachDetachCaches {
    /// Pods, with [`POD_PVC_INDEX`].
    pub pods: Indexer<Pod>,
    /// Nodes.
    pub nodes: Indexer<Node>,
    /// PersistentVolumeClaims.
    pub claims: Indexer<PersistentVolumeClaim>,
    /// PersistentVolumes.
    pub volumes: Indexer<PersistentVolume>,
    /// VolumeAttachments.
    pub attachments: Indexer<VolumeAttachment>,
    /// CSIDrivers (whether a driver needs attaching).
    pub drivers: Indexer<CSIDriver>,
}

/// An operation's bookkeeping, as upstream's `nestedpendingoperations`.
#[derive(Clone, Copy, Debug, Default)]
struct PendingOperation {
    /// An attach or detach of this (volume, node) is running.
    running: bool,
    /// After a failure: no new operation before this instant.
    retry_at: Option<Instant>,
    /// The last back-off, doubled on the next failure.
    backoff: Duration,
}

/// What the handlers, the reconciler and the operations share, under one lock.
#[derive(Debug, Default)]
struct State {
    /// Volumes pods need.
    dsw: DesiredStateOfWorld,
    /// Volumes attached.
    asw: ActualStateOfWorld,
    /// Nodes whose annotation leaves attach and detach to this controller.
    managed_nodes: BTreeSet<String>,
    /// (unique volume name, node) → operation state; entries idle and not backing off go.
    operations: BTreeMap<(String, String), PendingOperation>,
    /// Nodes whose `status.volumesAttached` must be written (upstream's
    /// `nodesToUpdateStatusFor`).
    nodes_to_update: BTreeSet<String>,
    /// When attached volumes were last re-checked.
    last_sync: Option<Instant>,
}

impl State {
    /// Whether an operation for (volume, node) runs or backs off at `now`.
    fn pending(&self, volume: &str, node: &str, now: Instant) -> bool {
        operation_state(&self.operations, volume, Some(node), now) != OperationState::Idle
    }

    /// Records that an operation finished: `Ok` forgets it, `Err` backs it off exponentially.
    fn finish(&mut self, volume: &str, node: &str, ok: bool, now: Instant) {
        let key = (volume.to_owned(), node.to_owned());
        if ok {
            self.operations.remove(&key);
            return;
        }
        let op = self.operations.entry(key).or_default();
        op.running = false;
        op.backoff = if op.backoff.is_zero() {
            INITIAL_BACKOFF
        } else {
            (op.backoff * 2).min(MAX_BACKOFF)
        };
        op.retry_at = Some(now + op.backoff);
    }
}

/// What runs for `volume` on `node`, or (`None`) on any node, at `now`: running wins over
/// backing off.
fn operation_state(
    operations: &BTreeMap<(String, String), PendingOperation>,
    volume: &str,
    node: Option<&str>,
    now: Instant,
) -> OperationState {
    let of = |op: &PendingOperation| {
        if op.running {
            OperationState::Running
        } else if op.retry_at.is_some_and(|at| now < at) {
            OperationState::BackingOff
        } else {
            OperationState::Idle
        }
    };
    match node {
        Some(node) => operations
            .get(&(volume.to_owned(), node.to_owned()))
            .map_or(OperationState::Idle, of),
        None => operations
            .range((volume.to_owned(), String::new())..)
            .take_while(|((v, _), _)| v == volume)
            .map(|(_, op)| of(op))
            .fold(OperationState::Idle, |acc, s| match (acc, s) {
                (OperationState::Running, _) | (_, OperationState::Running) => {
                    OperationState::Running
                }
                (OperationState::BackingOff, _) | (_, OperationState::BackingOff) => {
                    OperationState::BackingOff
                }
                _ => OperationState::Idle,
            }),
    }
}

/// Attaches the CSI volumes pods scheduled to controller-managed nodes need and detaches those
/// no pod needs any more, through VolumeAttachments, as upstream's `attachDetachController`.
pub struct AttachDetachController {
    /// VolumeAttachment writes and node status patches. Test seam:
    /// [`super::client::FakeAttachDetachClient`].
    client: Arc<dyn AttachDetachClient>,
    /// `FailedAttachVolume` / `SuccessfulAttachVolume` on the pods.
    recorder: Arc<dyn EventRecorder>,
    /// The informers' caches.
    caches: AttachDetachCaches,
    /// Whether the informers have synced.
    caches_synced: Vec<InformerSynced>,
    /// Keys (`namespace/name`) of claims whose pods to look at again (upstream `pvcQueue`).
    queue: RateLimitingQueue<String>,
    /// The worlds and operations. Never held across an `.await`.
    state: Arc<Mutex<State>>,
    /// The flags.
    options: AttachDetachControllerOptions,
    /// The informer-facing handlers.
    handlers: AttachDetachEventHandlers,
}

impl std::fmt::Debug for AttachDetachController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachDetachController")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AttachDetachController {
    /// The controller kube-controller-manager runs, over the factory's pod, node, claim,
    /// volume, VolumeAttachment and CSIDriver informers, as upstream's
    /// `NewAttachDetachController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        recorder: Arc<dyn EventRecorder>,
        options: AttachDetachControllerOptions,
    ) -> Self {
        let pods = factory.pods();
        let nodes = factory.nodes();
        let claims = factory.informer_for::<PersistentVolumeClaim>();
        let volumes = factory.informer_for::<PersistentVolume>();
        let attachments = factory.informer_for::<VolumeAttachment>();
        let drivers = factory.informer_for::<CSIDriver>();
        Self::with_informers(
            (&pods, &nodes, &claims, &volumes, &attachments, &drivers),
            Arc::new(ApiAttachDetachClient::new(client)),
            recorder,
            options,
        )
    }

    /// A controller over the given informers, registering its handlers and waiting for them.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    #[allow(clippy::type_complexity)]
    pub fn with_informers(
        (pods, nodes, claims, volumes, attachments, drivers): (
            &SharedIndexInformer<Pod>,
            &SharedIndexInformer<Node>,
            &SharedIndexInformer<PersistentVolumeClaim>,
            &SharedIndexInformer<PersistentVolume>,
            &SharedIndexInformer<VolumeAttachment>,
            &SharedIndexInformer<CSIDriver>,
        ),
        client: Arc<dyn AttachDetachClient>,
        recorder: Arc<dyn EventRecorder>,
        options: AttachDetachControllerOptions,
    ) -> Self {
        let caches = AttachDetachCaches {
            pods: pods.indexer().clone(),
            nodes: nodes.indexer().clone(),
            claims: claims.indexer().clone(),
            volumes: volumes.indexer().clone(),
            attachments: attachments.indexer().clone(),
            drivers: drivers.indexer().clone(),
        };
        let mut controller = Self::with_caches(caches, client, recorder, options);
        let handlers = controller.handlers.clone();
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(pods, handlers.clone())
            .register(nodes, handlers.clone())
            .register(claims, handlers)
            .wait_for(volumes)
            .wait_for(attachments)
            .wait_for(drivers)
            .finish();
        controller
    }

    /// A controller over bare caches (unit tests fill them and call the handlers,
    /// [`Self::reconcile_once`] and [`Self::sync_claim`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        caches: AttachDetachCaches,
        client: Arc<dyn AttachDetachClient>,
        recorder: Arc<dyn EventRecorder>,
        options: AttachDetachControllerOptions,
    ) -> Self {
        if let Err(err) = add_pod_pvc_indexer(&caches.pods) {
            tracing::error!(%err, "adding the pod-to-claim index");
        }
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics: options.metrics.clone(),
            },
        );
        let state = Arc::new(Mutex::new(State::default()));
        let handlers = AttachDetachEventHandlers {
            caches: caches.clone(),
            queue: queue.clone(),
            state: Arc::clone(&state),
        };
        Self {
            client,
            recorder,
            caches,
            caches_synced: Vec::new(),
            queue,
            state,
            options,
            handlers,
        }
    }

    /// The handlers registered with the pod, node and claim informers.
    pub fn event_handlers(&self) -> &AttachDetachEventHandlers {
        &self.handlers
    }

    /// Registers the collector of `attachdetach_controller_total_volumes` and
    /// `storage_count_attachable_volumes_in_use` over this controller, as upstream's
    /// `metrics.Register` in `Run`.
    pub fn register_state_metrics(
        self: &Arc<Self>,
        registry: &mut prometheus_client::registry::Registry,
    ) {
        registry.register_collector(Box::new(super::metrics::AttachDetachStateCollector::new(
            Arc::downgrade(self),
        )));
    }

    /// Waits for the caches, fills the actual and desired states from them, then runs the
    /// reconciler, the populator and the claim worker until `cancel` fires, as upstream's
    /// `Run`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let loops = {
            let this = Arc::clone(&self);
            let cancel = cancel.clone();
            async move {
                if !wait_until_synced(CONTROLLER_NAME, &cancel, || all_synced(&this.caches_synced))
                    .await
                {
                    return;
                }
                this.populate_actual_state_of_world();
                this.populate_desired_state_of_world();
                tokio::join!(
                    Arc::clone(&this).reconciler_loop(cancel.clone()),
                    this.populator_loop(cancel.clone())
                );
            }
        };
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move {
                this.sync_claim(&key);
                Ok::<(), std::convert::Infallible>(())
            }
        };
        let workers = run_controller(
            CONTROLLER_NAME,
            "attach detach",
            &self.queue,
            ERROR_POLICY,
            1,
            &cancel,
            || all_synced(&self.caches_synced),
            sync,
        );
        tokio::join!(workers, loops);
    }

    /// Runs [`Self::reconcile_once`] every [`RECONCILER_LOOP_PERIOD`], as upstream's
    /// `reconciler.Run`.
    async fn reconciler_loop(self: Arc<Self>, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(RECONCILER_LOOP_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => self.reconcile_once().await,
            }
        }
    }

    /// Drops deleted pods every [`POPULATOR_LOOP_PERIOD`] and re-adds active ones every
    /// [`POPULATOR_LIST_PODS_PERIOD`], as upstream's `desiredStateOfWorldPopulator.Run`.
    async fn populator_loop(&self, cancel: CancellationToken) {
        let mut last_list = Instant::now();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(POPULATOR_LOOP_PERIOD) => {}
            }
            self.find_and_remove_deleted_pods();
            if last_list.elapsed() >= POPULATOR_LIST_PODS_PERIOD {
                self.populate_desired_state_of_world();
                last_list = Instant::now();
            }
        }
    }

    /// Marks what the nodes report attached, and what VolumeAttachments say is attached, as
    /// attached, as upstream's `populateActualStateOfWorld` and `processVolumeAttachments`.
    pub fn populate_actual_state_of_world(&self) {
        let mut state = lock(&self.state);
        for node in self.caches.nodes.list() {
            let Some(node_name) = node.metadata.name.clone() else {
                continue;
            };
            self.handlers.node_added_locked(&mut state, &node);
            let reported = node
                .status
                .as_ref()
                .and_then(|s| s.volumes_attached.as_ref());
            for attached in reported.into_iter().flatten() {
                let Some((driver, handle)) = parse_unique_volume_name(&attached.name) else {
                    continue;
                };
                state.asw.mark_attached(&VolumeToAttach {
                    volume_name: attached.name.clone(),
                    driver: driver.to_owned(),
                    volume_handle: handle.to_owned(),
                    pv_name: String::new(),
                    node_name: node_name.clone(),
                    pods: BTreeSet::new(),
                    multi_attach_allowed: true,
                    multi_attach_error_reported: false,
                });
            }
        }
        for va in self.caches.attachments.list() {
            let attached = va.status.as_ref().is_some_and(|s| s.attached);
            let Some(pv_name) = va.spec.source.persistent_volume_name.as_deref() else {
                continue;
            };
            let Some(pv) = self.caches.volumes.get_by_key(pv_name) else {
                continue;
            };
            let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.clone()) else {
                continue;
            };
            if !attached || self.caches.nodes.get_by_key(&va.spec.node_name).is_none() {
                continue;
            }
            let volume_name = unique_volume_name(&csi.driver, &csi.volume_handle);
            state.asw.mark_attached(&VolumeToAttach {
                volume_name,
                driver: csi.driver.clone(),
                volume_handle: csi.volume_handle.clone(),
                pv_name: pv_name.to_owned(),
                node_name: va.spec.node_name.clone(),
                pods: BTreeSet::new(),
                multi_attach_allowed: is_multi_attach_allowed(&pv),
                multi_attach_error_reported: false,
            });
            state.nodes_to_update.insert(va.spec.node_name.clone());
        }
    }

    /// Adds every active pod's volumes, as upstream's `populateDesiredStateOfWorld` (and the
    /// populator's `findAndAddActivePods`).
    pub fn populate_desired_state_of_world(&self) {
        let mut state = lock(&self.state);
        for pod in self.caches.pods.list() {
            self.handlers.process_pod_volumes_locked(&mut state, &pod);
        }
        // Volumes found attached in node statuses learn their spec from the pods using them.
        let state = &mut *state;
        for volume in state.dsw.volumes_to_attach() {
            state.asw.update_spec(volume);
        }
    }

    /// Drops pods that are gone from the cache, or terminated, from the desired state, as
    /// upstream's `findAndRemoveDeletedPods`.
    pub fn find_and_remove_deleted_pods(&self) {
        let mut state = lock(&self.state);
        for (pod, node) in state.dsw.pods() {
            let keep = self
                .caches
                .pods
                .get_by_key(&pod)
                .is_some_and(|p| !is_pod_terminated(&p) && pod_node(&p) == Some(node.as_str()));
            if !keep {
                tracing::debug!(
                    pod,
                    node,
                    "removing pod from the desired state of the world"
                );
                state.dsw.delete_pod(&pod, &node);
            }
        }
    }

    /// Re-processes the pods that use claim `key`, as upstream's `syncPVCByKey`: a claim not
    /// bound yet is left for its next update.
    pub fn sync_claim(&self, key: &str) {
        let Some(claim) = self.caches.claims.get_by_key(key) else {
            return;
        };
        if claim.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
            return;
        }
        let pods = self
            .caches
            .pods
            .by_index(POD_PVC_INDEX, key)
            .unwrap_or_default();
        let mut state = lock(&self.state);
        for pod in pods {
            self.handlers.process_pod_volumes_locked(&mut state, &pod);
        }
    }

    /// One reconciler pass, as upstream's `reconciler.reconcile` followed by `syncStates` when
    /// due and the node status updater: decide operations, write node statuses (a detach
    /// starts only once its node no longer lists the volume), then start the operations.
    pub async fn reconcile_once(self: &Arc<Self>) {
        let now = Instant::now();
        let (ops, multi_attach_errors) = {
            let mut state = lock(&self.state);
            self.sync_states_locked(&mut state, now);
            let state = &mut *state;
            let nodes = &self.caches.nodes;
            let operations = &state.operations;
            let pass = reconcile(
                &mut state.dsw,
                &mut state.asw,
                |name| nodes.get_by_key(name).map(|n| node_view(&n)),
                |volume, node| operation_state(operations, volume, node, now),
                now,
            );
            let ops = pass.operations;
            for op in &ops {
                let (volume, node) = match op {
                    Operation::Attach(v) => (&v.volume_name, &v.node_name),
                    Operation::Detach {
                        volume_name,
                        node_name,
                        ..
                    } => {
                        state.nodes_to_update.insert(node_name.clone());
                        (volume_name, node_name)
                    }
                };
                debug_assert!(!state.pending(volume, node, now));
                state
                    .operations
                    .entry((volume.clone(), node.clone()))
                    .or_default()
                    .running = true;
            }
            (ops, pass.multi_attach_errors)
        };
        for report in &multi_attach_errors {
            self.report_multi_attach_error(report);
        }
        let failed_nodes = self.update_node_statuses().await;
        for op in ops {
            match op {
                Operation::Attach(volume) => {
                    let this = Arc::clone(self);
                    tokio::spawn(async move { this.attach(volume).await });
                }
                Operation::Detach {
                    volume_name,
                    driver,
                    volume_handle,
                    node_name,
                    forced,
                } => {
                    if failed_nodes.contains(&node_name) {
                        // Upstream: no detach while the node may still list the volume.
                        let mut state = lock(&self.state);
                        state.finish(&volume_name, &node_name, false, Instant::now());
                        continue;
                    }
                    if let Some(reason) = forced {
                        tracing::info!(
                            volume = volume_name,
                            node = node_name,
                            reason = reason.as_str(),
                            "attacherDetacher.DetachVolume started: force detaching"
                        );
                        if let Some(metrics) = &self.options.controller_metrics {
                            metrics.forced_detach(reason);
                        }
                    }
                    let this = Arc::clone(self);
                    tokio::spawn(async move {
                        this.detach(volume_name, driver, volume_handle, node_name)
                            .await
                    });
                }
            }
        }
    }

    /// Re-checks every attached volume against its VolumeAttachment when the sync period has
    /// passed, as upstream's `syncStates` with the CSI attacher's `VolumesAreAttached`: one
    /// whose attachment is gone or not attached is marked detached, so it is attached again
    /// if still needed.
    fn sync_states_locked(&self, state: &mut State, now: Instant) {
        if self.options.disable_reconcile_sync {
            return;
        }
        match state.last_sync {
            None => {
                state.last_sync = Some(now);
                return;
            }
            Some(last)
                if now.saturating_duration_since(last) < self.options.reconcile_sync_period =>
            {
                return;
            }
            Some(_) => state.last_sync = Some(now),
        }
        let attached: Vec<_> = state.asw.attached_volumes().cloned().collect();
        for v in attached {
            if state.pending(&v.volume_name, &v.node_name, now) {
                continue;
            }
            let name = attachment_name(&v.volume_handle, &v.driver, &v.node_name);
            let ok = self
                .caches
                .attachments
                .get_by_key(&name)
                .is_some_and(|va| va.status.as_ref().is_some_and(|s| s.attached));
            if !ok && self.attach_required(&v.driver) {
                tracing::info!(
                    volume = v.volume_name,
                    node = v.node_name,
                    "volume is not attached any more, marking it detached"
                );
                state.asw.mark_detached(&v.volume_name, &v.node_name);
                state.nodes_to_update.insert(v.node_name.clone());
            }
        }
    }

    /// Writes `status.volumesAttached` of each node waiting for it, as upstream's
    /// `nodeStatusUpdater.UpdateNodeStatuses`; a node gone from the cache is skipped. Returns
    /// the nodes whose update failed (kept for the next pass).
    async fn update_node_statuses(&self) -> BTreeSet<String> {
        let updates: Vec<(String, Vec<AttachedVolume>)> = {
            let mut state = lock(&self.state);
            let nodes = std::mem::take(&mut state.nodes_to_update);
            nodes
                .into_iter()
                .filter(|n| self.caches.nodes.get_by_key(n).is_some())
                .map(|n| {
                    let volumes = state
                        .asw
                        .volumes_to_report(&n)
                        .into_iter()
                        .map(|name| AttachedVolume {
                            name,
                            device_path: String::new(),
                        })
                        .collect();
                    (n, volumes)
                })
                .collect()
        };
        let mut failed = BTreeSet::new();
        for (node, volumes) in updates {
            if let Err(err) = self
                .client
                .patch_node_volumes_attached(&node, &volumes)
                .await
            {
                tracing::warn!(
                    node,
                    err = error_message(&err),
                    "could not update node status, retrying"
                );
                failed.insert(node.clone());
                lock(&self.state).nodes_to_update.insert(node);
            } else {
                tracing::debug!(
                    node,
                    volumes = volumes.len(),
                    "updated node status volumesAttached"
                );
            }
        }
        failed
    }

    /// Attaches `volume` as the CSI attacher does: creates its VolumeAttachment (one that
    /// exists is fine) and waits for the external attacher to set `status.attached`; then
    /// records it attached and tells the pods, or tells them why not and backs off.
    async fn attach(&self, volume: VolumeToAttach) {
        let result = self.attach_volume(&volume).await;
        let now = Instant::now();
        let pods: Vec<String> = {
            let mut state = lock(&self.state);
            let ok = result.is_ok();
            if ok {
                state.asw.mark_attached(&volume);
                state.nodes_to_update.insert(volume.node_name.clone());
            }
            state.finish(&volume.volume_name, &volume.node_name, ok, now);
            state
                .dsw
                .volume(&volume.volume_name, &volume.node_name)
                .map(|v| v.pods.iter().cloned().collect())
                .unwrap_or_default()
        };
        let (type_, reason, message) = match &result {
            Ok(()) => {
                tracing::info!(
                    volume = volume.volume_name,
                    node = volume.node_name,
                    "AttachVolume.Attach succeeded"
                );
                (
                    EventType::Normal,
                    SUCCESSFUL_ATTACH_VOLUME,
                    format!(
                        "AttachVolume.Attach succeeded for volume {:?} ",
                        volume.pv_name
                    ),
                )
            }
            Err(err) => {
                tracing::warn!(
                    volume = volume.volume_name,
                    node = volume.node_name,
                    err,
                    "AttachVolume.Attach failed"
                );
                (
                    EventType::Warning,
                    FAILED_ATTACH_VOLUME,
                    format!(
                        "AttachVolume.Attach failed for volume {:?} : {err}",
                        volume.pv_name
                    ),
                )
            }
        };
        for key in pods {
            if let Some(pod) = self.caches.pods.get_by_key(&key) {
                self.recorder
                    .event(&pod_reference(&pod), type_, reason, message.clone());
            }
        }
    }

    /// The CSI attacher's `Attach` and `waitForVolumeAttachment`.
    async fn attach_volume(&self, volume: &VolumeToAttach) -> Result<(), String> {
        let name = attachment_name(&volume.volume_handle, &volume.driver, &volume.node_name);
        let attachment = VolumeAttachment {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            spec: VolumeAttachmentSpec {
                attacher: volume.driver.clone(),
                node_name: volume.node_name.clone(),
                source: VolumeAttachmentSource {
                    persistent_volume_name: Some(volume.pv_name.clone()),
                    ..VolumeAttachmentSource::default()
                },
            },
            status: None,
        };
        match self.client.create_volume_attachment(&attachment).await {
            Ok(_) => tracing::debug!(attachment = name, "VolumeAttachment created"),
            Err(err) if err.is_already_exists() => {
                tracing::debug!(attachment = name, "VolumeAttachment exists (not recreated)")
            }
            Err(err) => return Err(error_message(&err)),
        }
        let deadline = Instant::now() + CSI_TIMEOUT;
        loop {
            if let Some(va) = self.caches.attachments.get_by_key(&name) {
                if va.metadata.deletion_timestamp.is_some() {
                    return Err("volume attachment is being deleted".to_owned());
                }
                let status = va.status.as_ref();
                if status.is_some_and(|s| s.attached) {
                    return Ok(());
                }
                if let Some(message) = status
                    .and_then(|s| s.attach_error.as_ref())
                    .and_then(|e| e.message.clone())
                {
                    return Err(message);
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "timed out waiting for external-attacher of {} CSI driver to attach volume {}",
                    volume.driver, volume.volume_handle
                ));
            }
            tokio::time::sleep(WAIT_POLL).await;
        }
    }

    /// Detaches as the CSI attacher's `Detach`: deletes the VolumeAttachment (gone already is
    /// fine) and waits for it to disappear; then records the volume detached, or lists it in
    /// the node's status again and backs off.
    async fn detach(&self, volume_name: String, driver: String, handle: String, node: String) {
        let name = attachment_name(&handle, &driver, &node);
        let result = async {
            match self.client.delete_volume_attachment(&name).await {
                Ok(()) => {}
                Err(err) if err.is_not_found() => {}
                Err(err) => return Err(error_message(&err)),
            }
            let deadline = Instant::now() + CSI_TIMEOUT;
            while self.caches.attachments.get_by_key(&name).is_some() {
                if Instant::now() >= deadline {
                    return Err(format!(
                        "timed out waiting for external-attacher of {driver} CSI driver to detach volume {handle}"
                    ));
                }
                tokio::time::sleep(WAIT_POLL).await;
            }
            Ok(())
        }
        .await;
        let mut state = lock(&self.state);
        match &result {
            Ok(()) => {
                tracing::info!(volume = volume_name, node, "DetachVolume.Detach succeeded");
                state.asw.mark_detached(&volume_name, &node);
            }
            Err(err) => {
                tracing::warn!(
                    volume = volume_name,
                    node,
                    err,
                    "DetachVolume.Detach failed"
                );
                state.asw.add_to_report(&volume_name, &node);
                state.nodes_to_update.insert(node.clone());
            }
        }
        state.finish(&volume_name, &node, result.is_ok(), Instant::now());
    }

    /// Tells the pods waiting for a volume another node holds exclusively why it is not
    /// attached, with a `FailedAttachVolume` warning each, and logs the details, as upstream's
    /// `reportMultiAttachError`.
    fn report_multi_attach_error(&self, report: &MultiAttachError) {
        report.log();
        for (key, message) in report.events() {
            if let Some(pod) = self.caches.pods.get_by_key(&key) {
                self.recorder.event(
                    &pod_reference(&pod),
                    EventType::Warning,
                    FAILED_ATTACH_VOLUME,
                    message,
                );
            }
        }
    }

    /// The volumes of each `state` (desired, actual) by plugin, as upstream's
    /// `getTotalVolumesCount`; attached volumes whose spec is unknown are not counted, as
    /// upstream cannot find their plugin.
    pub fn total_volumes_count(&self) -> VolumeCount {
        let state = lock(&self.state);
        let mut counts = VolumeCount::new();
        for v in state.dsw.volumes_to_attach() {
            *counts
                .entry((
                    DESIRED_STATE_OF_WORLD.to_owned(),
                    csi_plugin_name(&v.driver),
                ))
                .or_default() += 1;
        }
        for v in state
            .asw
            .attached_volumes()
            .filter(|v| !v.pv_name.is_empty())
        {
            *counts
                .entry((ACTUAL_STATE_OF_WORLD.to_owned(), csi_plugin_name(&v.driver)))
                .or_default() += 1;
        }
        counts
    }

    /// The volumes scheduled pods use on each node by plugin, as upstream's
    /// `getVolumeInUseCount`: every volume of a pod with a node whose spec the attachable
    /// plugins (here CSI) know, a bound claim's CSI PersistentVolume, whether or not its driver
    /// needs attaching.
    pub fn volumes_in_use_count(&self) -> VolumeCount {
        let mut counts = VolumeCount::new();
        for pod in self.caches.pods.list() {
            let Some(node) = pod_node(&pod).filter(|n| !n.is_empty()) else {
                continue;
            };
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            for volume in pod_volumes(&pod) {
                let Some(pv) = self.claim_volume(namespace, &pod, volume) else {
                    continue;
                };
                let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) else {
                    continue;
                };
                *counts
                    .entry((node.to_owned(), csi_plugin_name(&csi.driver)))
                    .or_default() += 1;
            }
        }
        counts
    }

    /// The PersistentVolume a pod volume's bound claim names, if any (upstream's
    /// `CreateVolumeSpec` for claims).
    fn claim_volume(
        &self,
        namespace: &str,
        pod: &Pod,
        volume: &k8s_openapi::api::core::v1::Volume,
    ) -> Option<Arc<PersistentVolume>> {
        claim_volume(&self.caches, namespace, pod, volume)
    }

    /// Whether `driver` needs attaching: no CSIDriver object, or one whose `attachRequired`
    /// is not false, as the CSI plugin's `skipAttach`.
    fn attach_required(&self, driver: &str) -> bool {
        attach_required(&self.caches.drivers, driver)
    }

    /// The volumes `node` should report, for tests.
    pub fn volumes_to_report(&self, node: &str) -> Vec<String> {
        lock(&self.state).asw.volumes_to_report(node)
    }

    /// Whether the desired state wants `volume_name` on `node`, for tests.
    pub fn desired(&self, volume_name: &str, node: &str) -> bool {
        lock(&self.state).dsw.volume_exists(volume_name, node)
    }
}

/// Whether `driver` needs attaching, as the CSI plugin's `skipAttach` inverted.
fn attach_required(drivers: &Indexer<CSIDriver>, driver: &str) -> bool {
    drivers
        .get_by_key(driver)
        .is_none_or(|d| d.spec.attach_required != Some(false))
}

/// The CSI plugin's fully qualified name for a driver's volumes in metrics,
/// `kubernetes.io/csi:<driver>`, as upstream's `GetFullQualifiedPluginNameForVolume`.
pub(crate) fn csi_plugin_name(driver: &str) -> String {
    format!("{CSI_PLUGIN_NAME}:{driver}")
}

/// The PersistentVolume bound to the claim a pod volume uses (a `persistentVolumeClaim` or a
/// generic ephemeral volume's), if the claim is bound and the volume cached.
fn claim_volume(
    caches: &AttachDetachCaches,
    namespace: &str,
    pod: &Pod,
    volume: &k8s_openapi::api::core::v1::Volume,
) -> Option<Arc<PersistentVolume>> {
    let claim_name = match (&volume.persistent_volume_claim, &volume.ephemeral) {
        (Some(source), _) => source.claim_name.clone(),
        (None, Some(_)) => volume_claim_name(pod, volume),
        (None, None) => return None,
    };
    let claim = caches
        .claims
        .get_by_key(&object_key(namespace, &claim_name))?;
    let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    let pv_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .filter(|n| bound && !n.is_empty())?;
    caches.volumes.get_by_key(&pv_name)
}

/// `kubernetes.io/csi/<driver>^<handle>` split into driver and handle.
fn parse_unique_volume_name(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix(CSI_PLUGIN_NAME)?
        .strip_prefix('/')?
        .split_once('^')
}

/// The node `pod` is scheduled to.
fn pod_node(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

/// What the reconciler reads from a node.
fn node_view(node: &Node) -> NodeView {
    let status = node.status.as_ref();
    NodeView {
        volumes_in_use: status
            .and_then(|s| s.volumes_in_use.clone())
            .unwrap_or_default()
            .into_iter()
            .collect(),
        healthy: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        out_of_service: node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| ts.iter().any(|t| t.key == OUT_OF_SERVICE_TAINT)),
    }
}

/// Whether the node leaves attach and detach to this controller.
fn is_managed(node: &Node) -> bool {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONTROLLER_MANAGED_ATTACH_DETACH_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// The reference an event about `pod` carries.
fn pod_reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// The pod, node and claim event handlers, as upstream's `podAdd`/`podUpdate`/`podDelete`,
/// `nodeAdd`/`nodeUpdate`/`nodeDelete` and `enqueuePVC`.
#[derive(Clone)]
pub struct AttachDetachEventHandlers {
    /// The caches the handlers read.
    caches: AttachDetachCaches,
    /// The claim queue.
    queue: RateLimitingQueue<String>,
    /// The controller's state.
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for AttachDetachEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachDetachEventHandlers")
            .finish_non_exhaustive()
    }
}

impl AttachDetachEventHandlers {
    /// Adds or removes `pod`'s attachable volumes, as upstream's `util.ProcessPodVolumes` with
    /// `DetermineVolumeAction`: a pod not scheduled, or on a node this controller does not
    /// manage, is skipped; a terminated pod's volumes are removed.
    fn process_pod_volumes_locked(&self, state: &mut State, pod: &Pod) {
        let Ok(key) = meta_namespace_key(pod) else {
            return;
        };
        if !is_scheduled(pod) {
            return;
        }
        let Some(node) = pod_node(pod) else {
            return;
        };
        if is_pod_terminated(pod) {
            state.dsw.delete_pod(&key, node);
            return;
        }
        if !state.managed_nodes.contains(node) {
            tracing::trace!(
                pod = key,
                node,
                "node is not managed by the attach/detach controller"
            );
            return;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        for volume in pod_volumes(pod) {
            let Some(pv) = claim_volume(&self.caches, namespace, pod, volume) else {
                continue;
            };
            let pv_name = pv.metadata.name.clone().unwrap_or_default();
            let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) else {
                continue;
            };
            if !attach_required(&self.caches.drivers, &csi.driver) {
                continue;
            }
            state.dsw.add_pod(
                &key,
                node,
                &csi.driver,
                &csi.volume_handle,
                &pv_name,
                is_multi_attach_allowed(&pv),
            );
        }
    }

    /// A node appeared or changed, as upstream's `nodeAdd`: a managed node joins the desired
    /// state (and its pods are looked at again when it just became managed).
    fn node_added_locked(&self, state: &mut State, node: &Node) -> bool {
        let Some(name) = node.metadata.name.as_deref() else {
            return false;
        };
        if is_managed(node) {
            state.managed_nodes.insert(name.to_owned())
        } else {
            false
        }
    }

    /// Handles a pod added or updated.
    pub fn pod_changed(&self, pod: &Pod) {
        let mut state = lock(&self.state);
        self.process_pod_volumes_locked(&mut state, pod);
    }

    /// Handles a pod deleted: its volumes are no longer wanted on its node.
    pub fn pod_deleted(&self, pod: &Pod) {
        let (Ok(key), Some(node)) = (meta_namespace_key(pod), pod_node(pod)) else {
            return;
        };
        lock(&self.state).dsw.delete_pod(&key, node);
    }

    /// Handles a node added or updated.
    pub fn node_changed(&self, node: &Node) {
        let mut state = lock(&self.state);
        if self.node_added_locked(&mut state, node) {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            for pod in self.caches.pods.list() {
                if pod_node(&pod) == Some(name) {
                    self.process_pod_volumes_locked(&mut state, &pod);
                }
            }
        }
    }

    /// Handles a node deleted, as upstream's `nodeDelete`.
    pub fn node_deleted(&self, node: &Node) {
        let Some(name) = node.metadata.name.as_deref() else {
            return;
        };
        let mut state = lock(&self.state);
        state.managed_nodes.remove(name);
        state.dsw.delete_node(name);
    }

    /// Queues a claim, as upstream's `enqueuePVC`.
    pub fn enqueue_claim(&self, claim: &PersistentVolumeClaim) {
        if let Ok(key) = meta_namespace_key(claim) {
            self.queue.add(key);
        }
    }
}

impl ResourceEventHandler<Pod> for AttachDetachEventHandlers {
    fn on_add(&self, pod: Arc<Pod>, _is_in_initial_list: bool) {
        self.pod_changed(&pod);
    }

    fn on_update(&self, _old: Arc<Pod>, new: Arc<Pod>) {
        self.pod_changed(&new);
    }

    fn on_delete(&self, obj: DeletedObject<Pod>) {
        self.pod_deleted(obj.object());
    }
}

impl ResourceEventHandler<Node> for AttachDetachEventHandlers {
    fn on_add(&self, node: Arc<Node>, _is_in_initial_list: bool) {
        self.node_changed(&node);
    }

    fn on_update(&self, _old: Arc<Node>, new: Arc<Node>) {
        self.node_changed(&new);
    }

    fn on_delete(&self, obj: DeletedObject<Node>) {
        self.node_deleted(obj.object());
    }
}

impl ResourceEventHandler<PersistentVolumeClaim> for AttachDetachEventHandlers {
    fn on_add(&self, claim: Arc<PersistentVolumeClaim>, _is_in_initial_list: bool) {
        self.enqueue_claim(&claim);
    }

    fn on_update(&self, _old: Arc<PersistentVolumeClaim>, new: Arc<PersistentVolumeClaim>) {
        self.enqueue_claim(&new);
    }

    fn on_delete(&self, _obj: DeletedObject<PersistentVolumeClaim>) {}
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
