//! The bootstrap token controllers, disabled by default as upstream's `pkg/controller/bootstrap`: the signer of `kube-public/cluster-info` and the cleaner of expired token Secrets, which together serve a kubelet's `kubeadm join`-style TLS bootstrap.
//!
//! Where to start: [`BootstrapSigner`] (`bootstrap-signer-controller`, alias
//! `bootstrapsigner`, upstream `bootstrapsigner.go`) and [`TokenCleaner`]
//! (`token-cleaner-controller`, alias `tokencleaner`, upstream `tokencleaner.go`).
//!
//! - `signer`, `tokencleaner`: the controllers, laid out as the others in this crate.
//! - [`token`]: the token Secret's format (name, fields, usages, expiration) and the detached
//!   JWS, upstream's `cluster-bootstrap` helpers.
//! - [`client`]: the two writes, with a recording fake.

pub mod client;
mod signer;
pub mod token;
mod tokencleaner;

pub use client::{ApiBootstrapClient, BootstrapClient, FakeBootstrapClient};
pub use signer::{
    BootstrapSigner, CONTROLLER_ALIAS as SIGNER_CONTROLLER_ALIAS,
    CONTROLLER_NAME as SIGNER_CONTROLLER_NAME, QUEUE_NAME as SIGNER_QUEUE_NAME, SignerHandlers,
};
pub use tokencleaner::{
    CONTROLLER_ALIAS as CLEANER_CONTROLLER_ALIAS, CONTROLLER_NAME as CLEANER_CONTROLLER_NAME,
    QUEUE_NAME as CLEANER_QUEUE_NAME, TokenCleaner, TokenSecretHandlers,
};

use kcm_machinery::controller::api_status::error_message;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a bootstrap controller's sync failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Updating `cluster-info` failed; the key is requeued rate-limited.
    #[error("updating ConfigMap kube-public/cluster-info: {message}", message = error_message(.source))]
    Update {
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Deleting an expired token Secret failed (logged, as upstream, not retried).
    #[error("deleting Secret {secret}: {message}", message = error_message(.source))]
    Delete {
        /// The Secret's key.
        secret: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}
