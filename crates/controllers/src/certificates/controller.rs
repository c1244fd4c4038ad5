//! The queue and workers the approver and the signers share: CSR events queue names, a sync hands a copy of an unissued CSR to a [`CsrHandler`] (upstream `certificate_controller.go`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kcm_machinery::controller::{ErrorPolicy, process_next_work_item, run_controller};
use kcm_machinery::informer::delta::DeletedObject;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    InformerRegistrar, InformerSynced, ResourceEventHandler, SharedIndexInformer, all_synced,
};
use kcm_machinery::workqueue::limiters::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter,
};
use kcm_machinery::workqueue::{QueueConfig, RateLimitingQueue, WorkqueueMetrics};
use tokio_util::sync::CancellationToken;

use super::request::is_issued;
use super::{Error, Result};

/// The work queue's name in the `workqueue_*` metrics (the same for every instance, as
/// upstream's).
pub const QUEUE_NAME: &str = "certificate";

/// How the workers treat a failed handling: requeue rate-limited, forever (upstream's
/// `processNextWorkItem`). Upstream logs an ignorable error only at V(4); here the shared
/// worker logs every requeue alike, and [`CertificateController::sync`] adds a debug line.
const ERROR_POLICY: ErrorPolicy<String, Error> = ErrorPolicy::new("Sync failed");

/// What one certificate controller does with a CSR that has no certificate yet.
#[async_trait]
pub trait CsrHandler: Send + Sync {
    /// Handles `csr`, a copy the handler may change and write back.
    async fn handle(&self, csr: CertificateSigningRequest) -> Result<()>;
}

/// One CSR controller: the approver or one signer, as upstream's `CertificateController`.
pub struct CertificateController {
    /// The instance's name (`csrapproving`, `csrsigning-kubelet-serving`, ...), in logs.
    name: &'static str,
    /// The CSR informer's cache (read only).
    csrs: Indexer<CertificateSigningRequest>,
    /// The informers `run` waits for.
    caches_synced: Vec<InformerSynced>,
    /// CSR names to handle.
    queue: RateLimitingQueue<String>,
    /// The informer-facing handlers.
    handlers: CsrEventHandlers,
    /// What this instance does with a CSR.
    handler: Arc<dyn CsrHandler>,
}

impl std::fmt::Debug for CertificateController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateController")
            .field("name", &self.name)
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl CertificateController {
    /// A controller named `name` over `csrs`, handing CSRs to `handler`, as upstream's
    /// `NewCertificateController`.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        name: &'static str,
        csrs: &SharedIndexInformer<CertificateSigningRequest>,
        handler: Arc<dyn CsrHandler>,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let mut controller = Self::with_cache(name, csrs.indexer().clone(), handler, metrics);
        controller.caches_synced = InformerRegistrar::new(name)
            .register(csrs, controller.handlers.clone())
            .finish();
        controller
    }

    /// A controller over a bare cache (unit tests fill it and call [`Self::sync`]).
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn with_cache(
        name: &'static str,
        csrs: Indexer<CertificateSigningRequest>,
        handler: Arc<dyn CsrHandler>,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        // Upstream's limiter: per item 200 ms doubling to 1000 s, overall 10 qps, burst 100.
        let limiter = MaxOfRateLimiter::new(vec![
            Box::new(ItemExponentialFailureRateLimiter::new(
                Duration::from_millis(200),
                Duration::from_secs(1000),
            )),
            Box::new(BucketRateLimiter::new(10.0, 100)),
        ]);
        let queue = RateLimitingQueue::with_config(
            limiter,
            QueueConfig {
                name: QUEUE_NAME.to_owned(),
                metrics,
            },
        );
        Self {
            name,
            csrs,
            caches_synced: Vec::new(),
            handlers: CsrEventHandlers {
                queue: queue.clone(),
            },
            queue,
            handler,
        }
    }

    /// The handlers registered with the CSR informer.
    pub fn event_handlers(&self) -> &CsrEventHandlers {
        &self.handlers
    }

    /// The work queue of CSR names.
    pub fn queue(&self) -> &RateLimitingQueue<String> {
        &self.queue
    }

    /// Waits for the CSR cache, then runs `workers` workers until `cancel` fires.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        };
        let synced = || all_synced(&self.caches_synced);
        run_controller(
            self.name,
            "certificate controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            synced,
            sync,
        )
        .await;
    }

    /// Takes one CSR and handles it through the shared worker. False once the queue has shut
    /// down.
    pub async fn process_next_work_item(&self) -> bool {
        process_next_work_item(self.name, &self.queue, &ERROR_POLICY, |key| async move {
            self.sync(&key).await
        })
        .await
    }

    /// Handles CSR `name`, as upstream's `syncFunc`: gone or already issued is done with;
    /// anything else goes to the handler as a copy (the cache's object is shared).
    pub async fn sync(&self, name: &str) -> Result<()> {
        let start = tokio::time::Instant::now();
        let result = match self.csrs.get_by_key(name) {
            None => {
                tracing::trace!(csr = name, "csr has been deleted");
                Ok(())
            }
            Some(csr) if is_issued(&csr) => Ok(()),
            Some(csr) => self.handler.handle((*csr).clone()).await,
        };
        if let Err(Error::Ignorable(message)) = &result {
            tracing::debug!(
                controller = self.name,
                csr = name,
                message,
                "Sync certificate request failed"
            );
        }
        tracing::trace!(csr = name, elapsed = ?start.elapsed(), "Finished syncing certificate request");
        result
    }
}

/// The CSR handlers: every add, update and delete queues the CSR's name. Cheap to clone.
#[derive(Clone)]
pub struct CsrEventHandlers {
    queue: RateLimitingQueue<String>,
}

impl std::fmt::Debug for CsrEventHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsrEventHandlers").finish_non_exhaustive()
    }
}

impl CsrEventHandlers {
    fn enqueue(&self, csr: &CertificateSigningRequest) {
        if let Some(name) = csr.metadata.name.as_deref().filter(|n| !n.is_empty()) {
            self.queue.add(name.to_owned());
        }
    }
}

impl ResourceEventHandler<CertificateSigningRequest> for CsrEventHandlers {
    fn on_add(&self, csr: Arc<CertificateSigningRequest>, _is_in_initial_list: bool) {
        self.enqueue(&csr);
    }

    fn on_update(&self, _old: Arc<CertificateSigningRequest>, new: Arc<CertificateSigningRequest>) {
        self.enqueue(&new);
    }

    fn on_delete(&self, csr: DeletedObject<CertificateSigningRequest>) {
        self.enqueue(csr.object());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use k8s_openapi::ByteString;

    use super::*;
    use crate::certificates::testing::{csr, csr_pem};

    /// Records the names of the CSRs it is handed.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    #[async_trait]
    impl CsrHandler for Recorder {
        async fn handle(&self, csr: CertificateSigningRequest) -> Result<()> {
            let mut seen = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            seen.push(csr.metadata.name.unwrap_or_default());
            Ok(())
        }
    }

    #[tokio::test]
    async fn only_cached_unissued_csrs_reach_the_handler() {
        let cache = Indexer::new();
        let pending = csr("pending", "s", &[], "u", &csr_pem("a", &[], &[]));
        let mut issued = csr("issued", "s", &[], "u", &csr_pem("a", &[], &[]));
        issued.status.get_or_insert_default().certificate = Some(ByteString(b"cert".to_vec()));
        cache.add(Arc::new(pending.clone())).expect("add");
        cache.add(Arc::new(issued.clone())).expect("add");
        let recorder = Arc::new(Recorder::default());
        let controller = CertificateController::with_cache("test", cache, recorder.clone(), None);
        for name in ["pending", "issued", "gone"] {
            controller.sync(name).await.expect(name);
        }
        assert_eq!(*recorder.0.lock().expect("lock"), ["pending"]);

        let handlers = controller.event_handlers();
        handlers.on_add(Arc::new(pending.clone()), false);
        handlers.on_update(Arc::new(pending), Arc::new(issued.clone()));
        assert_eq!(controller.queue().len(), 2, "both names queued");
    }
}
