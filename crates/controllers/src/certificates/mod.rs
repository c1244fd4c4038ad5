//! The CertificateSigningRequest controllers of kube-controller-manager: the approver, the signers and the cleaner (upstream `pkg/controller/certificates`).
//!
//! Where to start: [`CertificateController`] (upstream `certificate_controller.go`) is the
//! queue and worker loop the approver and each signer share: CSR events queue the CSR's
//! name, and a sync hands a copy of a not-yet-issued CSR to a [`CsrHandler`].
//!
//! - [`approver`]: `certificatesigningrequest-approving-controller` (`csrapproving`), upstream
//!   `approver/sarapprove.go`: approves kubelet client CSRs after a SubjectAccessReview.
//! - [`signer`]: `certificatesigningrequest-signing-controller` (`csrsigning`), upstream
//!   `signer/signer.go`: one controller per `kubernetes.io/*` signer issuing approved CSRs.
//! - [`authority`]: the CA the signers sign with, and the certificate it issues (upstream
//!   `authority/`); [`ca_provider`] reloads it when its files change.
//! - [`cleaner`]: `certificatesigningrequest-cleaner-controller` (`csrcleaner`), upstream
//!   `cleaner/cleaner.go`: deletes old CSRs every hour.
//! - [`request`]: the PKCS#10 request, the conditions, the kubelet request shapes.
//! - [`client`]: the requests, with a recording fake.

pub mod approver;
pub mod authority;
pub mod ca_provider;
pub mod cleaner;
pub mod client;
mod controller;
pub mod request;
pub mod signer;
#[cfg(test)]
mod testing;

pub use client::{ApiCsrClient, CsrAction, CsrClient, FakeCsrClient};
pub use controller::{CertificateController, CsrEventHandlers, CsrHandler, QUEUE_NAME};

use kcm_machinery::controller::api_status::error_message;

/// The wall clock (upstream's `time.Now`); injectable so tests are deterministic.
pub use kcm_machinery::controller::clock::Clock;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why handling a CSR failed; the worker requeues it rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `spec.request` is not a PKCS#10 request.
    #[error("unable to parse csr {csr:?}: {message}")]
    Parse {
        /// The CSR's name.
        csr: String,
        /// Why.
        message: String,
    },
    /// Expected to resolve later (a SubjectAccessReview that was not allowed): requeued, but
    /// not worth an error log (upstream's `IgnorableError`).
    #[error("{0}")]
    Ignorable(String),
    /// The SubjectAccessReview could not be made.
    #[error("while authorizing csr {csr:?}: {message}", message = error_message(.source))]
    Authorize {
        /// The CSR's name.
        csr: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Writing the approval failed.
    #[error("error updating approval for csr: {message}", message = error_message(.source))]
    UpdateApproval {
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Writing the `Failed` condition failed.
    #[error("error adding failure condition for csr: {message}", message = error_message(.source))]
    AddFailure {
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Writing the certificate failed.
    #[error("error updating signature for csr: {message}", message = error_message(.source))]
    UpdateSignature {
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The CA refused or failed to sign.
    #[error("error auto signing csr: {0}")]
    Sign(String),
    /// Deleting an old CSR failed.
    #[error("unable to delete CSR {csr:?}: {message}", message = error_message(.source))]
    Delete {
        /// The CSR's name.
        csr: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A signing certificate or key file could not be used.
    #[error("{0}")]
    SigningFiles(String),
}
