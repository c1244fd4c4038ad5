//! The root CA certificate publisher: a `kube-root-ca.crt` ConfigMap holding the cluster CA in every namespace, as kube-controller-manager's.
//!
//! Where to start: [`Publisher`] (kubernetes `pkg/controller/certificates/rootcacertpublisher`).
//! Namespaces added or updated (while active), and the ConfigMap changed or deleted, queue the
//! namespace; a sync creates the ConfigMap when missing, or rewrites it when its `ca.crt` or
//! its `kubernetes.io/description` annotation is not as published.
//!
//! - `publisher`: constants, [`Publisher`], construction, handlers, worker wiring and sync
//!   (upstream `publisher.go`).
//! - [`client`]: the seam for the ConfigMap writes, with a recording fake.
//! - [`metrics`]: `root_ca_cert_publisher_sync_total` and `..._sync_duration_seconds`.
//! - [`ca`]: reading `--root-ca-file` and turning a client configuration's CA into PEM.

pub mod ca;
pub mod client;
pub mod metrics;
mod publisher;

pub use client::{ApiConfigMapClient, ConfigMapAction, ConfigMapClient, FakeConfigMapClient};
pub use metrics::PublisherMetrics;
pub use publisher::{
    CONTROLLER_ALIAS, CONTROLLER_NAME, DESCRIPTION, DESCRIPTION_ANNOTATION, PUBLISHER_WORKERS,
    Publisher, PublisherEventHandlers, PublisherOptions, QUEUE_NAME, ROOT_CA_CERT_CONFIG_MAP_NAME,
    ROOT_CA_KEY,
};

use kcm_machinery::controller::ApiStatus;
use kcm_machinery::controller::api_status::error_message;
use kube::core::Status;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why publishing into a namespace failed; the worker requeues it rate-limited.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating the ConfigMap failed.
    #[error("creating configmap {namespace}/kube-root-ca.crt: {message}", message = error_message(.source))]
    Create {
        /// The namespace.
        namespace: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Updating the ConfigMap failed.
    #[error("updating configmap {namespace}/kube-root-ca.crt: {message}", message = error_message(.source))]
    Update {
        /// The namespace.
        namespace: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&Status> {
        match self {
            Error::Create { source, .. } | Error::Update { source, .. } => source.api_status(),
        }
    }
}
