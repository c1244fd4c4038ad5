//! The service account controller: makes sure every active namespace holds a `default` ServiceAccount, as kube-controller-manager's.
//!
//! Where to start: [`ServiceAccountsController`] (kubernetes
//! `pkg/controller/serviceaccount/serviceaccounts_controller.go`). A namespace added or updated,
//! or a ServiceAccount deleted, queues the namespace's name; a worker then creates each wanted
//! account ([`DEFAULT_SERVICE_ACCOUNT`] by default) the ServiceAccount cache lacks. Namespaces
//! that are gone or not `Active` are left alone; an AlreadyExists answer, or a refusal because
//! the namespace is being terminated, is not a failure.
//!
//! - [`controller`](ServiceAccountsController): handlers, the `serviceaccount` work queue, the
//!   worker and the sync.
//! - [`tokens`]: the service account token controller (`serviceaccount-token-controller`),
//!   which fills in and garbage-collects legacy token Secrets.
//! - [`legacy_token_cleaner`]: the legacy token cleaner
//!   (`legacy-serviceaccount-token-cleaner-controller`), which marks auto-generated legacy
//!   tokens unused for a clean-up period invalid and later deletes them; its API calls are
//!   behind [`legacy_token_cleaner_client`].
//! - [`tokens_client`]: the token controller's API calls, with a recording fake.
//! - [`client`]: the seam for the create call, with a recording fake for unit tests.

pub mod client;
mod controller;
pub mod legacy_token_cleaner;
pub mod legacy_token_cleaner_client;
pub mod tokens;
pub mod tokens_client;

pub use client::{ApiServiceAccountClient, FakeServiceAccountClient, ServiceAccountClient};
pub use controller::{
    CONTROLLER_ALIAS, CONTROLLER_NAME, DEFAULT_SERVICE_ACCOUNT, QUEUE_NAME,
    SERVICE_ACCOUNT_WORKERS, ServiceAccountEventHandlers, ServiceAccountsController,
    ServiceAccountsControllerOptions,
};
pub use legacy_token_cleaner::{LegacyTokenCleaner, LegacyTokenCleanerOptions};
pub use legacy_token_cleaner_client::{
    ApiLegacyTokenCleanerClient, FakeLegacyTokenCleanerClient, LegacyTokenCleanerClient,
};

use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;
use kube::core::Status;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a namespace sync failed; the worker requeues the namespace with rate limiting.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating one wanted account failed.
    #[error("create serviceaccount {namespace}/{name}: {message}", message = error_message(.source))]
    Create {
        /// The namespace.
        namespace: String,
        /// The account's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Several creations failed in one sync (upstream's flattened `NewAggregate`).
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Aggregate(Vec<Error>),
}

impl Error {
    /// `errors` as one error: none, the only one, or an [`Error::Aggregate`].
    pub fn aggregate(mut errors: Vec<Error>) -> Option<Error> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(Error::Aggregate(errors)),
        }
    }
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::Create { source, .. } => source.api_status(),
            Error::Aggregate(_) => None,
        }
    }
}
