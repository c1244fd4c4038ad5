//! The pod garbage collector: constants, the controller and its construction, and `Run` (upstream `gc_controller.go` up to `gc`).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, SharedIndexInformer, SharedInformerFactory, wait_for_synced,
};
use kcm_machinery::workqueue::{DelayingQueue, QueueConfig, WorkqueueMetrics};
use tokio_util::sync::CancellationToken;

use super::client::{ApiPodGcClient, PodGcClient};
use super::metrics::PodGcMetrics;

/// The controller's name in logs and `--controllers` (kube-controller-manager's
/// `pod-garbage-collector-controller`).
pub const CONTROLLER_NAME: &str = "pod-garbage-collector-controller";

/// How often the collector runs, as upstream's `gcCheckPeriod`.
pub const GC_CHECK_PERIOD: Duration = Duration::from_secs(20);

/// How long a node missing from the cache is given to show up before the API server is asked
/// whether it is really gone, as upstream's `quarantineTime`.
pub const QUARANTINE_TIME: Duration = Duration::from_secs(40);

/// `--terminated-pod-gc-threshold`' default.
pub const DEFAULT_TERMINATED_POD_GC_THRESHOLD: i32 = 12_500;

/// The quarantine queue's name in the `workqueue_*` metrics.
pub const ORPHANED_NODES_QUEUE_NAME: &str = "orphaned_pods_nodes";

/// The wall clock (for condition times); injectable so tests are deterministic.
pub use kcm_machinery::controller::clock::Clock;

/// Tuning and wiring of a [`PodGcController`].
#[derive(Clone)]
pub struct PodGcControllerOptions {
    /// Terminated pods kept before the oldest are deleted (`--terminated-pod-gc-threshold`);
    /// 0 or less keeps them all.
    pub terminated_pod_threshold: i32,
    /// How often the passes run (upstream's `gcCheckPeriod`, 20 s).
    pub gc_check_period: Duration,
    /// How long a missing node is quarantined (upstream's `quarantineTime`, 40 s).
    pub quarantine_time: Duration,
    /// Where the quarantine queue records its `workqueue_*` metrics.
    pub metrics: Option<Arc<WorkqueueMetrics>>,
    /// Where the collector records `pod_gc_collector_*`.
    pub controller_metrics: Option<Arc<PodGcMetrics>>,
}

impl Default for PodGcControllerOptions {
    fn default() -> Self {
        Self {
            terminated_pod_threshold: DEFAULT_TERMINATED_POD_GC_THRESHOLD,
            gc_check_period: GC_CHECK_PERIOD,
            quarantine_time: QUARANTINE_TIME,
            metrics: None,
            controller_metrics: None,
        }
    }
}

impl std::fmt::Debug for PodGcControllerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodGcControllerOptions")
            .field("terminated_pod_threshold", &self.terminated_pod_threshold)
            .field("gc_check_period", &self.gc_check_period)
            .field("quarantine_time", &self.quarantine_time)
            .finish_non_exhaustive()
    }
}

/// Force-deletes pods nobody else will, as upstream's `PodGCController`.
pub struct PodGcController {
    /// The node GET, status patch and force delete. Test seam: [`super::FakePodGcClient`].
    pub(super) client: Arc<dyn PodGcClient>,
    /// The pod informer's cache (read only).
    pub(super) pod_cache: Indexer<Pod>,
    /// The node informer's cache (read only).
    pub(super) node_cache: Indexer<Node>,
    /// Whether both informers have synced.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Names of nodes pods are bound to but the cache lacks, each ready once its quarantine
    /// is over.
    pub(super) node_queue: DelayingQueue<String>,
    /// See [`PodGcControllerOptions::terminated_pod_threshold`].
    pub(super) terminated_pod_threshold: i32,
    /// See [`PodGcControllerOptions::gc_check_period`].
    pub(super) gc_check_period: Duration,
    /// See [`PodGcControllerOptions::quarantine_time`].
    pub(super) quarantine_time: Duration,
    /// Wall-clock time (test seam).
    pub(super) clock: Clock,
    /// The `pod_gc_collector_*` counters, if recorded.
    pub(super) metrics: Option<Arc<PodGcMetrics>>,
}

impl std::fmt::Debug for PodGcController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodGcController")
            .field("terminated_pod_threshold", &self.terminated_pod_threshold)
            .finish_non_exhaustive()
    }
}

impl PodGcController {
    /// The collector kube-controller-manager runs, over the factory's pod and node informers,
    /// as upstream's `NewPodGC`.
    ///
    /// # Panics
    ///
    /// Builds the quarantine queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        options: PodGcControllerOptions,
    ) -> Self {
        Self::with_informers(
            &factory.pods(),
            &factory.nodes(),
            Arc::new(ApiPodGcClient::new(client)),
            options,
        )
    }

    /// A collector over the given informers, waiting for both in [`Self::run`] (it registers
    /// no handlers: it reads the caches on each pass).
    ///
    /// # Panics
    ///
    /// Builds the quarantine queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_informers(
        pod_informer: &SharedIndexInformer<Pod>,
        node_informer: &SharedIndexInformer<Node>,
        client: Arc<dyn PodGcClient>,
        options: PodGcControllerOptions,
    ) -> Self {
        let mut controller = Self::with_caches(
            pod_informer.indexer().clone(),
            node_informer.indexer().clone(),
            client,
            options,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .wait_for(pod_informer)
            .wait_for(node_informer)
            .finish();
        controller
    }

    /// A collector over bare caches (unit tests fill them and call [`Self::gc`]).
    ///
    /// # Panics
    ///
    /// Builds the quarantine queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_caches(
        pod_cache: Indexer<Pod>,
        node_cache: Indexer<Node>,
        client: Arc<dyn PodGcClient>,
        options: PodGcControllerOptions,
    ) -> Self {
        let node_queue = DelayingQueue::with_config(QueueConfig {
            name: ORPHANED_NODES_QUEUE_NAME.to_owned(),
            metrics: options.metrics,
        });
        Self {
            client,
            pod_cache,
            node_cache,
            caches_synced: Vec::new(),
            node_queue,
            terminated_pod_threshold: options.terminated_pod_threshold,
            gc_check_period: options.gc_check_period,
            quarantine_time: options.quarantine_time,
            clock: Arc::new(Timestamp::now),
            metrics: options.controller_metrics,
        }
    }

    /// Replaces the wall clock (test seam).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Waits for the caches, then runs [`Self::gc`] every `gc_check_period` until `cancel`
    /// fires, as upstream's `Run` (`wait.UntilWithContext`: the period counts from the end of
    /// a pass). A pass that panics is logged and the next one runs as usual.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        tracing::info!(controller = CONTROLLER_NAME, "Starting GC controller");
        let synced = wait_for_synced(CONTROLLER_NAME, &cancel, &self.caches_synced).await;
        if synced {
            loop {
                if let Err(panic) = AssertUnwindSafe(self.gc()).catch_unwind().await {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    tracing::error!(controller = CONTROLLER_NAME, panic = %message, "GC pass panicked");
                }
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(self.gc_check_period) => {}
                }
            }
        }
        self.node_queue.shut_down();
        tracing::info!(controller = CONTROLLER_NAME, "Shutting down GC controller");
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
