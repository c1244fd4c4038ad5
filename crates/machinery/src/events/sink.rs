//! Where events are written: the `EventSink` trait and its `kube` implementation.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::Value;

/// Errors writing events. Each names the Event (`namespace/name`) and the operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Event to patch no longer exists; it will be created instead.
    #[error("{op} event {event}: not found")]
    NotFound {
        /// `namespace/name` of the Event.
        event: String,
        /// `create` or `patch`.
        op: &'static str,
    },
    /// The API server refused the Event (validation, already exists, namespace terminating...):
    /// retrying would not help.
    #[error("{op} event {event}: rejected by the server ({reason}): {source}")]
    Rejected {
        /// `namespace/name` of the Event.
        event: String,
        /// `create` or `patch`.
        op: &'static str,
        /// The Status reason, e.g. `AlreadyExists`.
        reason: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The server could not be reached or answered unexpectedly: worth retrying.
    #[error("{op} event {event}: {source}")]
    Transport {
        /// `namespace/name` of the Event.
        event: String,
        /// `create` or `patch`.
        op: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Whether the Event did not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// Whether the server refused the Event for good (no retry).
    pub fn is_rejected(&self) -> bool {
        matches!(self, Error::Rejected { .. })
    }

    /// Classifies a client error: API statuses are final, anything else may be retried.
    pub fn from_kube(event: String, op: &'static str, err: kube::Error) -> Self {
        match &err {
            kube::Error::Api(status) if status.is_not_found() => Error::NotFound { event, op },
            kube::Error::Api(status) => Error::Rejected {
                event,
                op,
                reason: status.reason.clone(),
                source: err,
            },
            _ => Error::Transport {
                event,
                op,
                source: err,
            },
        }
    }
}

/// Result of event writes.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Stores events, as client-go's `record.EventSink`. Implementations must write into the
/// namespace embedded in the event.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// Creates `event`; returns the server's copy.
    async fn create(&self, event: &Event) -> Result<Event>;

    /// Applies the merge `patch` to the already-recorded `event`; returns the server's copy.
    async fn patch(&self, event: &Event, patch: &Value) -> Result<Event>;
}

/// Writes core/v1 Events through a `kube::Client` (create; strategic-merge patch for repeats).
#[derive(Clone)]
pub struct KubeEventSink {
    client: kube::Client,
}

impl KubeEventSink {
    /// A sink writing with `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, event: &Event) -> (Api<Event>, String) {
        let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
        let name = event.metadata.name.as_deref().unwrap_or_default();
        (
            Api::namespaced(self.client.clone(), namespace),
            format!("{namespace}/{name}"),
        )
    }
}

#[async_trait]
impl EventSink for KubeEventSink {
    async fn create(&self, event: &Event) -> Result<Event> {
        let (api, key) = self.api(event);
        api.create(&PostParams::default(), event)
            .await
            .map_err(|e| Error::from_kube(key, "create", e))
    }

    async fn patch(&self, event: &Event, patch: &Value) -> Result<Event> {
        let (api, key) = self.api(event);
        let name = event.metadata.name.as_deref().unwrap_or_default();
        api.patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map_err(|e| Error::from_kube(key, "patch", e))
    }
}
