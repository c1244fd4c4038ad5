//! `certificatesigningrequest-signing-controller` (`csrsigning`): one handler per `kubernetes.io/*` signer, issuing the approved CSRs addressed to it that pass its checks and failing the others (upstream `signer/signer.go`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::authority::SigningPolicy;
use super::ca_provider::CaProvider;
use super::client::CsrClient;
use super::request::{
    CertificateRequest, KUBE_APISERVER_CLIENT_KUBELET_SIGNER, KUBE_APISERVER_CLIENT_SIGNER,
    KUBELET_SERVING_SIGNER, LEGACY_UNKNOWN_SIGNER, has_true_condition, is_approved, parse_csr,
    usages_of, validate_kubelet_client_csr, validate_kubelet_serving_csr,
};
use super::{Clock, CsrHandler, Error, Result};

/// kube-controller-manager's name of this controller.
pub const CONTROLLER_NAME: &str = "certificatesigningrequest-signing-controller";
/// The older name `--controllers` also accepts.
pub const CONTROLLER_ALIAS: &str = "csrsigning";
/// Workers per signer: five, as kube-controller-manager starts each.
pub const WORKERS: usize = 5;
/// `--cluster-signing-duration`'s default: a year.
pub const DEFAULT_CLUSTER_SIGNING_DURATION: Duration = Duration::from_secs(365 * 24 * 60 * 60);
/// The reason of the `Failed` condition of a CSR its signer refuses.
pub const SIGNER_VALIDATION_FAILURE: &str = "SignerValidationFailure";

/// The shortest certificate a CSR's `spec.expirationSeconds` gets: twice the backdate.
const MIN_DURATION: SignedDuration = SignedDuration::from_mins(10);
/// How far NotBefore is set back; always under [`MIN_DURATION`].
const BACKDATE: SignedDuration = SignedDuration::from_mins(5);
/// Lifetimes under this are not shortened by the backdate (5 minutes is about 1% of it).
const SHORT: SignedDuration = SignedDuration::from_hours(8);

/// The four signers, each with its certificate controller instance name (upstream's).
pub const SIGNERS: [(&str, &str); 4] = [
    (KUBELET_SERVING_SIGNER, "csrsigning-kubelet-serving"),
    (
        KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
        "csrsigning-kubelet-client",
    ),
    (
        KUBE_APISERVER_CLIENT_SIGNER,
        "csrsigning-kube-apiserver-client",
    ),
    (LEGACY_UNKNOWN_SIGNER, "csrsigning-legacy-unknown"),
];

/// One signer's handler, as upstream's `signer`.
pub struct Signer {
    /// The signer name it issues for.
    signer_name: &'static str,
    /// The CA it signs with, reloaded when its files change.
    ca: Arc<CaProvider>,
    /// The status writes. Test seam: [`super::FakeCsrClient`].
    client: Arc<dyn CsrClient>,
    /// The longest certificate it issues (`--cluster-signing-duration`).
    cert_ttl: SignedDuration,
    /// The wall clock (test seam).
    clock: Clock,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("signer_name", &self.signer_name)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// A handler for `signer_name` (one of [`SIGNERS`]) signing with `ca`, certificates at
    /// most `cert_ttl` long.
    pub fn new(
        signer_name: &'static str,
        ca: Arc<CaProvider>,
        client: Arc<dyn CsrClient>,
        cert_ttl: Duration,
    ) -> Self {
        Self {
            signer_name,
            ca,
            client,
            cert_ttl: SignedDuration::try_from(cert_ttl).unwrap_or(SignedDuration::MAX),
            clock: Arc::new(Timestamp::now),
        }
    }

    /// Replaces the wall clock (test seam).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The lifetime of a certificate for a CSR asking for `expiration_seconds`, as upstream's
    /// `duration`: the flag's unless the CSR asks for less, never under ten minutes.
    pub fn duration(&self, expiration_seconds: Option<i32>) -> SignedDuration {
        let Some(seconds) = expiration_seconds else {
            return self.cert_ttl;
        };
        let requested = SignedDuration::from_secs(i64::from(seconds));
        if requested > self.cert_ttl {
            self.cert_ttl
        } else if requested < MIN_DURATION {
            MIN_DURATION
        } else {
            requested
        }
    }
}

/// Whether `req` may be issued by `signer`: `Ok(false)` when it is another signer's CSR, an
/// error (upstream's message) when it breaks the signer's rules (upstream's
/// `getCSRVerificationFuncForSignerName` functions).
pub fn check_request_for_signer(
    signer: &str,
    csr: &CertificateSigningRequest,
    req: &CertificateRequest,
) -> Result<bool, String> {
    if csr.spec.signer_name != signer {
        return Ok(false);
    }
    match signer {
        KUBELET_SERVING_SIGNER => validate_kubelet_serving_csr(req, &usages_of(csr)).map(|()| true),
        KUBE_APISERVER_CLIENT_KUBELET_SIGNER => {
            validate_kubelet_client_csr(req, &usages_of(csr)).map(|()| true)
        }
        KUBE_APISERVER_CLIENT_SIGNER => valid_api_server_client_usages(csr).map(|()| true),
        // No restrictions, for backward compatibility.
        LEGACY_UNKNOWN_SIGNER => Ok(true),
        _ => Ok(false),
    }
}

/// Upstream's `validAPIServerClientUsages`: client auth, and only digital signature or key
/// encipherment besides.
fn valid_api_server_client_usages(csr: &CertificateSigningRequest) -> Result<(), String> {
    let mut client_auth = false;
    for usage in csr.spec.usages.iter().flatten() {
        match usage.as_str() {
            "digital signature" | "key encipherment" => {}
            "client auth" => client_auth = true,
            other => return Err(format!("invalid usage for client certificate: {other}")),
        }
    }
    if !client_auth {
        return Err("missing required usage for client certificate: client auth".to_owned());
    }
    Ok(())
}

#[async_trait]
impl CsrHandler for Signer {
    /// Upstream's `handle`: an unapproved or failed CSR, or one for another signer, is left
    /// alone; one breaking this signer's rules gets a `Failed` condition (reason
    /// `SignerValidationFailure`); the rest get their certificate.
    async fn handle(&self, mut csr: CertificateSigningRequest) -> Result<()> {
        if !is_approved(&csr) || has_true_condition(&csr, "Failed") {
            return Ok(());
        }
        if csr.spec.signer_name != self.signer_name {
            return Ok(());
        }
        let name = csr.metadata.name.clone().unwrap_or_default();
        let req = parse_csr(&csr.spec.request.0).map_err(|message| Error::Parse {
            csr: name.clone(),
            message,
        })?;
        let now = (self.clock)();
        match check_request_for_signer(self.signer_name, &csr, &req) {
            Err(message) => {
                csr.status
                    .get_or_insert_default()
                    .conditions
                    .get_or_insert_default()
                    .push(CertificateSigningRequestCondition {
                        type_: "Failed".to_owned(),
                        status: "True".to_owned(),
                        reason: Some(SIGNER_VALIDATION_FAILURE.to_owned()),
                        message: Some(message),
                        last_update_time: Some(Time(now)),
                        ..CertificateSigningRequestCondition::default()
                    });
                return self
                    .client
                    .update_status(&csr)
                    .await
                    .map(|_| ())
                    .map_err(|source| Error::AddFailure { source });
            }
            Ok(false) => return Ok(()),
            Ok(true) => {}
        }
        let policy = SigningPolicy {
            ttl: self.duration(csr.spec.expiration_seconds),
            backdate: BACKDATE,
            short: SHORT,
        };
        let usages = csr.spec.usages.clone().unwrap_or_default();
        let certificate = self
            .ca
            .current()
            .sign(&req, &usages, policy, now)
            .map_err(Error::Sign)?;
        csr.status.get_or_insert_default().certificate = Some(ByteString(certificate.into_bytes()));
        self.client
            .update_status(&csr)
            .await
            .map(|_| ())
            .map_err(|source| Error::UpdateSignature { source })
    }
}

#[cfg(test)]
#[path = "signer_tests.rs"]
mod tests;
