//! The ValidatingAdmissionPolicy status controller: constants, the controller and its construction, `Run`, the policy event handlers and `reconcile` (upstream `validatingadmissionpolicystatus/controller.go`).

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::lister::Lister;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use tokio_util::sync::CancellationToken;

use super::client::{ApiSchemaSource, ApiStatusClient, StatusClient};
use super::typecheck::{SchemaSource, TypeChecker};
use super::{Error, Result};

/// The controller's name in logs, `--controllers` and as its field manager.
pub const CONTROLLER_NAME: &str = "validatingadmissionpolicy-status-controller";

/// The work queue's name in the `workqueue_*` metrics, upstream's.
pub const QUEUE_NAME: &str = "validatingadmissionpolicy-status";

/// Upstream's default of `--concurrent-validating-admission-policy-status-syncs`.
pub const DEFAULT_WORKERS: usize = 5;

/// As upstream's `processNextWorkItem`: every error requeued rate-limited.
const ERROR_POLICY: ErrorPolicy<String, Error> =
    ErrorPolicy::new("error syncing ValidatingAdmissionPolicy status");

/// Writes `status.typeChecking` and `status.observedGeneration` of every
/// ValidatingAdmissionPolicy whose generation it has not checked, as upstream's `Controller`.
pub struct ValidatingAdmissionPolicyStatusController {
    /// The status write. Test seam: [`super::FakeStatusClient`].
    pub(super) client: Arc<dyn StatusClient>,
    /// The type checker over discovery and OpenAPI (test seam: a
    /// [`super::FakeSchemaSource`]).
    pub(super) checker: TypeChecker,
    /// The policy cache (read only).
    pub(super) lister: Lister<ValidatingAdmissionPolicy>,
    /// Whether the policy informer has synced; empty over a bare cache.
    pub(super) caches_synced: Vec<InformerSynced>,
    /// Names of policies to check.
    pub(super) queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    pub(super) handlers: PolicyEventHandlers,
}

impl std::fmt::Debug for ValidatingAdmissionPolicyStatusController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValidatingAdmissionPolicyStatusController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl ValidatingAdmissionPolicyStatusController {
    /// The controller kube-controller-manager runs, over the factory's policy informer.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let informer = factory.informer_for::<ValidatingAdmissionPolicy>();
        let mut controller = Self::with_cache(
            informer.indexer().clone(),
            Arc::new(ApiStatusClient::new(client.clone())),
            Arc::new(ApiSchemaSource::new(client)),
            metrics,
        );
        controller.caches_synced = InformerRegistrar::new(CONTROLLER_NAME)
            .register(&informer, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over a bare cache (unit tests fill it and call the handlers and
    /// [`Self::sync`] themselves).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_cache(
        cache: Indexer<ValidatingAdmissionPolicy>,
        client: Arc<dyn StatusClient>,
        schemas: Arc<dyn SchemaSource>,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics,
            },
        );
        Self {
            client,
            checker: TypeChecker::new(schemas),
            lister: Lister::new(cache),
            caches_synced: Vec::new(),
            handlers: PolicyEventHandlers {
                queue: queue.clone(),
            },
            queue,
        }
    }

    /// The handlers to register with the policy informer.
    pub fn event_handlers(&self) -> &PolicyEventHandlers {
        &self.handlers
    }

    /// The work queue of policy names.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the policy cache, then checks policies with `workers` workers until
    /// `cancel` fires, as upstream's `Run`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        run_controller(
            CONTROLLER_NAME,
            "ValidatingAdmissionPolicy status controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            || all_synced(&self.caches_synced),
            sync,
        )
        .await;
    }

    /// Takes one key and syncs it through the shared worker, as upstream's
    /// `processNextWorkItem`. False once the queue has shut down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(
            CONTROLLER_NAME,
            &self.queue,
            &ERROR_POLICY,
            |key| async move { self.sync(&key).await },
        )
        .await
    }

    /// Type-checks policy `name` and applies the result, unless its generation was already
    /// checked (upstream's `reconcile`); a policy gone from the cache is being deleted.
    pub async fn sync(&self, name: &str) -> Result<()> {
        let Some(policy) = self.lister.get_cluster(name) else {
            return Ok(());
        };
        let generation = policy.metadata.generation.unwrap_or_default();
        let observed = policy
            .status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .unwrap_or_default();
        if generation <= observed {
            return Ok(());
        }
        let warnings = self.checker.check(&policy).await;
        self.client
            .apply_status(name, generation, &warnings)
            .await
            .map_err(|source| Error::Apply {
                policy: name.to_owned(),
                source,
            })
    }
}

/// The policy event handlers: an added or updated policy is enqueued by name, as upstream's
/// `enqueuePolicy` (a deleted one needs nothing).
#[derive(Clone)]
pub struct PolicyEventHandlers {
    /// The controller's work queue.
    queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for PolicyEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyEventHandlers")
            .finish_non_exhaustive()
    }
}

impl PolicyEventHandlers {
    fn enqueue(&self, policy: &ValidatingAdmissionPolicy) {
        match &policy.metadata.name {
            Some(name) if !name.is_empty() => self.queue.add(name.clone()),
            _ => tracing::error!(controller = CONTROLLER_NAME, "cannot get name of policy"),
        }
    }
}

impl ResourceEventHandler<ValidatingAdmissionPolicy> for PolicyEventHandlers {
    fn on_add(&self, policy: Arc<ValidatingAdmissionPolicy>, _is_in_initial_list: bool) {
        self.enqueue(&policy);
    }

    fn on_update(&self, _old: Arc<ValidatingAdmissionPolicy>, new: Arc<ValidatingAdmissionPolicy>) {
        self.enqueue(&new);
    }

    fn on_delete(&self, _obj: DeletedObject<ValidatingAdmissionPolicy>) {}
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
