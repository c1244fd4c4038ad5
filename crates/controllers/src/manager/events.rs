//! The manager's event pipeline: hands each component a recorder, flushed on shutdown.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ObjectReference;
use kcm_machinery::events::{EventBroadcaster, EventRecorder, EventType};

/// Where controllers' events go, as upstream's `EventBroadcaster` seen from the manager: one
/// pipeline per process, one recorder per component (`replicaset-controller`, ...), and a
/// shutdown that flushes what is buffered before the process exits.
#[async_trait]
pub trait EventPipeline: Send + Sync {
    /// A recorder stamping events with `component` as their source.
    fn recorder(&self, component: &str) -> Arc<dyn EventRecorder>;

    /// Delivers buffered events and stops; recorders handed out earlier drop what they get
    /// afterwards.
    async fn shutdown(&self);
}

/// The real pipeline: client-go's broadcaster (correlator, spam filter, structured logging)
/// writing core/v1 Events to the API server. The manager builds one over its own client unless
/// another pipeline is given.
#[async_trait]
impl EventPipeline for EventBroadcaster {
    fn recorder(&self, component: &str) -> Arc<dyn EventRecorder> {
        EventBroadcaster::recorder(self, component, None)
    }

    async fn shutdown(&self) {
        EventBroadcaster::shutdown(self).await;
    }
}

/// A pipeline that writes every event to the log, as upstream's `StartStructuredLogging`
/// (what the broadcaster does besides sending events to the API server).
#[derive(Clone, Copy, Debug, Default)]
pub struct LoggingEvents;

#[async_trait]
impl EventPipeline for LoggingEvents {
    fn recorder(&self, component: &str) -> Arc<dyn EventRecorder> {
        Arc::new(LoggingRecorder {
            component: component.to_owned(),
        })
    }

    async fn shutdown(&self) {}
}

/// Logs events of one component.
#[derive(Debug)]
struct LoggingRecorder {
    component: String,
}

impl EventRecorder for LoggingRecorder {
    fn event(&self, regarding: &ObjectReference, type_: EventType, reason: &str, message: String) {
        let kind = regarding.kind.as_deref().unwrap_or_default();
        let namespace = regarding.namespace.as_deref().unwrap_or_default();
        let name = regarding.name.as_deref().unwrap_or_default();
        tracing::info!(
            component = %self.component,
            object = %format_args!("{kind} {namespace}/{name}"),
            r#type = type_.as_str(),
            reason,
            message = %message,
            "Event occurred"
        );
    }
}
