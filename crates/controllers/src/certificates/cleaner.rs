//! `certificatesigningrequest-cleaner-controller` (`csrcleaner`): every hour, deletes the CSRs that are done with — issued, denied or failed over an hour ago, pending over a day, or whose certificate expired (upstream `cleaner/cleaner.go`).

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{InformerSynced, SharedIndexInformer, synced_of, wait_for_synced};
use tokio_util::sync::CancellationToken;

use super::client::CsrClient;
use super::request::is_issued;
use super::{Clock, Error, Result};

/// kube-controller-manager's name of this controller.
pub const CONTROLLER_NAME: &str = "certificatesigningrequest-cleaner-controller";
/// The older name `--controllers` also accepts.
pub const CONTROLLER_ALIAS: &str = "csrcleaner";

/// How often every CSR is checked (upstream's `pollingInterval`).
pub const POLLING_INTERVAL: Duration = Duration::from_secs(60 * 60);
/// How long an issued CSR is kept after its approval (upstream's `approvedExpiration`).
pub const APPROVED_EXPIRATION: SignedDuration = SignedDuration::from_hours(1);
/// How long a denied or failed CSR is kept (upstream's `deniedExpiration`).
pub const DENIED_EXPIRATION: SignedDuration = SignedDuration::from_hours(1);
/// How long a CSR nobody handled is kept after its creation (upstream's `pendingExpiration`).
pub const PENDING_EXPIRATION: SignedDuration = SignedDuration::from_hours(24);

/// Deletes old CSRs, as upstream's `CSRCleanerController`.
pub struct CsrCleaner {
    /// The deletes. Test seam: [`super::FakeCsrClient`].
    client: Arc<dyn CsrClient>,
    /// The CSR informer's cache (read only).
    csrs: Indexer<CertificateSigningRequest>,
    /// The informers `run` waits for before the first pass.
    caches_synced: Vec<InformerSynced>,
    /// The wall clock (test seam).
    clock: Clock,
}

impl std::fmt::Debug for CsrCleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsrCleaner").finish_non_exhaustive()
    }
}

impl CsrCleaner {
    /// A cleaner over the CSR informer, as upstream's `NewCSRCleanerController`.
    pub fn new(
        csrs: &SharedIndexInformer<CertificateSigningRequest>,
        client: Arc<dyn CsrClient>,
    ) -> Self {
        let mut cleaner = Self::with_cache(csrs.indexer().clone(), client);
        cleaner.caches_synced = vec![synced_of(csrs.clone())];
        cleaner
    }

    /// A cleaner over a bare cache (unit tests).
    pub fn with_cache(
        csrs: Indexer<CertificateSigningRequest>,
        client: Arc<dyn CsrClient>,
    ) -> Self {
        Self {
            client,
            csrs,
            caches_synced: Vec::new(),
            clock: Arc::new(Timestamp::now),
        }
    }

    /// Replaces the wall clock (test seam).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Waits for the cache, then checks every CSR each [`POLLING_INTERVAL`] until `cancel`
    /// fires, as upstream's `Run` with one worker.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        tracing::info!("Starting CSR cleaner controller");
        if wait_for_synced(CONTROLLER_NAME, &cancel, &self.caches_synced).await {
            loop {
                self.clean_all().await;
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(POLLING_INTERVAL) => {}
                }
            }
        }
        tracing::info!("Shutting down CSR cleaner controller");
    }

    /// One pass over every cached CSR (upstream's `worker`); a failed delete is logged and
    /// retried next pass.
    pub async fn clean_all(&self) {
        for csr in self.csrs.list() {
            if let Err(err) = self.handle(&csr).await {
                tracing::error!(%err, "Error while attempting to clean CSR");
            }
        }
    }

    /// Deletes `csr` when one of upstream's criteria holds (`handle`).
    pub async fn handle(&self, csr: &CertificateSigningRequest) -> Result<()> {
        let now = (self.clock)();
        let name = csr.metadata.name.as_deref().unwrap_or_default();
        let Some(why) = cleanup_reason(csr, now) else {
            return Ok(());
        };
        tracing::info!(csr = name, why, "Cleaning CSR");
        self.client
            .delete(name)
            .await
            .map_err(|source| Error::Delete {
                csr: name.to_owned(),
                source,
            })
    }
}

/// Why `csr` is due for deletion at `now`, if it is: upstream's `isIssuedPastDeadline`,
/// `isDeniedPastDeadline`, `isFailedPastDeadline`, `isPendingPastDeadline` and
/// `isIssuedExpired`, in that order.
pub fn cleanup_reason(csr: &CertificateSigningRequest, now: Timestamp) -> Option<&'static str> {
    let conditions = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let older = |t: Option<&Time>, d: SignedDuration| is_older_than(t, d, now);
    let issued = is_issued(csr);
    if conditions.iter().any(|c| {
        c.type_ == "Approved" && issued && older(c.last_update_time.as_ref(), APPROVED_EXPIRATION)
    }) {
        return Some("more than approvedExpiration duration old and approved");
    }
    if conditions
        .iter()
        .any(|c| c.type_ == "Denied" && older(c.last_update_time.as_ref(), DENIED_EXPIRATION))
    {
        return Some("more than deniedExpiration duration old and denied");
    }
    if conditions
        .iter()
        .any(|c| c.type_ == "Failed" && older(c.last_update_time.as_ref(), DENIED_EXPIRATION))
    {
        return Some("more than deniedExpiration duration old and failed");
    }
    if conditions.is_empty() && older(csr.metadata.creation_timestamp.as_ref(), PENDING_EXPIRATION)
    {
        return Some("more than pendingExpiration duration old and unhandled");
    }
    if issued && conditions.iter().any(|c| c.type_ == "Approved") && certificate_expired(csr, now) {
        return Some("the associated certificate is expired");
    }
    None
}

/// A set time more than `d` before `now` (upstream's `isOlderThan`).
fn is_older_than(t: Option<&Time>, d: SignedDuration, now: Timestamp) -> bool {
    t.is_some_and(|t| now.duration_since(t.0) > d)
}

/// Whether the first certificate of `status.certificate` is past its NotAfter; one that does
/// not parse is not expired (upstream's `isExpired`).
fn certificate_expired(csr: &CertificateSigningRequest, now: Timestamp) -> bool {
    let Some(pem) = csr.status.as_ref().and_then(|s| s.certificate.as_ref()) else {
        return false;
    };
    let Ok((_, block)) = x509_parser::pem::parse_x509_pem(&pem.0) else {
        return false;
    };
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(&block.contents) else {
        return false;
    };
    now.as_second() > cert.validity().not_after.timestamp()
}

#[cfg(test)]
#[path = "cleaner_tests.rs"]
mod tests;
