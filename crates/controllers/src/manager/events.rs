//! The manager's event pipeline: hands each component a recorder, flushed on shutdown.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ObjectReference;
use kcm_machinery::events::{EventBroadcaster, EventRecorder, EventType, KubeEventSink};

/// Where controllers' events go, as upstream's `EventBroadcaster` seen from the manager: one
/// recorder per component (`replicaset-controller`, ...), and a shutdown that flushes what is
/// buffered before the process exits.
#[async_trait]
pub trait EventPipeline: Send + Sync {
    /// A recorder stamping events with `component` as their source.
    fn recorder(&self, component: &str) -> Arc<dyn EventRecorder>;

    /// The pipeline of one controller whose requests go through `client`, when this pipeline
    /// makes one per controller (upstream: each controller starts a broadcaster of its own
    /// over its own clientset); `None`: the controller uses this one.
    fn for_controller(&self, _client: &kube::Client) -> Option<Arc<dyn EventPipeline>> {
        None
    }

    /// Delivers buffered events and stops; recorders handed out earlier drop what they get
    /// afterwards.
    async fn shutdown(&self);
}

/// Events written to the API server as kube-controller-manager writes them: the manager's
/// own (leader election's) through a broadcaster over the manager's client, and each
/// controller's through a broadcaster of its own over the controller's client, so that its
/// events take tokens from the controller's `--kube-api-qps` bucket, queue in its own
/// 1,000-event buffer and are correlated apart from other controllers' (upstream's
/// `record.NewBroadcaster()` + `StartRecordingToSink` in each controller's constructor).
pub struct KubeEvents {
    /// The manager's own broadcaster.
    manager: EventBroadcaster,
    /// Every controller broadcaster handed out, shut down with the manager's.
    controllers: Mutex<Vec<Arc<EventBroadcaster>>>,
}

impl KubeEvents {
    /// Events of the manager itself through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            manager: EventBroadcaster::new(Arc::new(KubeEventSink::new(client))),
            controllers: Mutex::new(Vec::new()),
        }
    }

    /// How many controller broadcasters were handed out (tests, diagnostics).
    pub fn controller_broadcasters(&self) -> usize {
        self.controllers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[async_trait]
impl EventPipeline for KubeEvents {
    fn recorder(&self, component: &str) -> Arc<dyn EventRecorder> {
        self.manager.recorder(component, None)
    }

    fn for_controller(&self, client: &kube::Client) -> Option<Arc<dyn EventPipeline>> {
        let broadcaster = Arc::new(EventBroadcaster::new(Arc::new(KubeEventSink::new(
            client.clone(),
        ))));
        self.controllers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&broadcaster));
        Some(broadcaster)
    }

    async fn shutdown(&self) {
        let controllers = std::mem::take(
            &mut *self
                .controllers
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        futures::future::join_all(controllers.iter().map(|b| b.shutdown())).await;
        self.manager.shutdown().await;
    }
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
