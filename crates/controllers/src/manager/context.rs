//! `ControllerContext`: what every controller's init function is given.

use std::sync::Arc;

use kcm_machinery::events::EventRecorder;
use kcm_machinery::informer::SharedInformerFactory;
use kcm_machinery::workqueue::WorkqueueMetrics;
use tokio_util::sync::CancellationToken;

use super::events::EventPipeline;
use super::metrics::ManagerMetrics;
use super::options::ManagerOptions;

/// Everything a controller needs from the manager, as upstream's `ControllerContext`. Cheap to
/// clone; every controller of one leadership term gets a clone of the same context.
#[derive(Clone)]
pub struct ControllerContext {
    /// The controller's API client: its requests go through a `--kube-api-qps`/
    /// `--kube-api-burst` bucket of its own (as upstream's per-controller clientsets) and are
    /// counted in `rest_client_*` metrics.
    pub client: kube::Client,
    /// The manager's one informer factory. Init functions request their informers from it;
    /// the manager starts it once every controller is built and waits for its caches before
    /// running any controller.
    pub factory: SharedInformerFactory,
    /// Where events go; see [`Self::recorder`].
    pub events: Arc<dyn EventPipeline>,
    /// The registry served on `/metrics`; see [`Self::workqueue_metrics`].
    pub metrics: ManagerMetrics,
    /// The flags, for each controller's own group (e.g. `options.replicaset`).
    pub options: Arc<ManagerOptions>,
    /// The certificate authority of the API server as the client configuration trusts it
    /// (PEM), if it names one: what the root CA publisher publishes without `--root-ca-file`
    /// (upstream's `ClientBuilder.ConfigOrDie(...).CAData`).
    pub client_ca: Option<Arc<Vec<u8>>>,
    /// The cloud provider (upstream's `ControllerContext.Cloud`); `None` without one, and then
    /// the cloud controllers are skipped.
    pub cloud: Option<Arc<dyn crate::cloud::CloudProvider>>,
    /// Cancelled when controllers must stop: shutdown, or the end of leadership. Run futures
    /// return once their workers have finished the items they hold.
    pub cancel: CancellationToken,
}

impl std::fmt::Debug for ControllerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerContext")
            .field("factory", &self.factory)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl ControllerContext {
    /// An event recorder with `component` (the controller's name) as the event source.
    pub fn recorder(&self, component: &str) -> Arc<dyn EventRecorder> {
        self.events.recorder(component)
    }

    /// The work-queue metric families; name the queue after the controller (`replicaset`,
    /// `deployment`, ...) as upstream does.
    pub fn workqueue_metrics(&self) -> Arc<WorkqueueMetrics> {
        self.metrics.workqueue()
    }
}
