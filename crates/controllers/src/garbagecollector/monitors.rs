//! Resource monitors: one informer per deletable resource feeding the graph builder (upstream `syncMonitors`, `startMonitors`).
//!
//! Resources some kcm controller already watches (pods, ReplicaSets, Deployments, ...) are
//! monitored through the process's [`SharedInformerFactory`], so each is listed, watched and
//! cached once, as upstream's `informerfactory` prefers the typed shared informers. Every other
//! resource gets an informer of its own over the metadata-only representation
//! (`PartialObjectMeta`, as upstream's metadata informers): the collector reads nothing else,
//! and caching whole Secrets or ConfigMaps for it would waste memory.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use kcm_machinery::informer::{
    ApiListerWatcher, ResourceEventHandlerRegistration, SharedIndexInformer, SharedInformerFactory,
    SharedInformerOptions,
};
use kube::Api;
use kube::Resource;
use kube::core::{DynamicObject, PartialObjectMeta};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::discovery::{DiscoveredResource, GroupVersionResource};
use super::graph_builder::{GraphBuilder, GraphEventHandler};

/// A metadata-only object, as the collector's own informers cache it.
pub type MetadataObject = PartialObjectMeta<DynamicObject>;

/// One monitored resource.
trait Monitor: Send + Sync {
    /// True once the graph builder's handler has received the informer's initial list.
    fn has_synced(&self) -> bool;
    /// Starts the informer if this monitor owns it (shared ones are started by the factory).
    fn start(&mut self, cancel: &CancellationToken);
    /// Stops receiving events; returns the informer's task to await, if it owned one.
    fn stop(self: Box<Self>) -> Option<JoinHandle<()>>;
}

/// A handler on a shared typed informer.
struct SharedMonitor<K: Resource + Clone + Send + Sync + 'static> {
    informer: SharedIndexInformer<K>,
    registration: ResourceEventHandlerRegistration<K>,
}

impl<K: Resource + Clone + Send + Sync + 'static> Monitor for SharedMonitor<K> {
    fn has_synced(&self) -> bool {
        self.registration.has_synced()
    }

    fn start(&mut self, _cancel: &CancellationToken) {}

    fn stop(self: Box<Self>) -> Option<JoinHandle<()>> {
        self.informer.remove_event_handler(&self.registration);
        None
    }
}

/// A metadata-only informer owned by the collector.
struct OwnedMonitor {
    informer: SharedIndexInformer<MetadataObject>,
    registration: ResourceEventHandlerRegistration<MetadataObject>,
    /// Stops the informer; a child of the token `start` was given.
    cancel: Option<CancellationToken>,
    task: Option<JoinHandle<()>>,
}

impl Monitor for OwnedMonitor {
    fn has_synced(&self) -> bool {
        self.registration.has_synced()
    }

    fn start(&mut self, cancel: &CancellationToken) {
        if self.task.is_some() {
            return;
        }
        let cancel = cancel.child_token();
        let informer = self.informer.clone();
        let token = cancel.clone();
        self.task = Some(tokio::spawn(async move { informer.run(token).await }));
        self.cancel = Some(cancel);
    }

    fn stop(self: Box<Self>) -> Option<JoinHandle<()>> {
        if let Some(cancel) = &self.cancel {
            cancel.cancel();
        }
        self.task
    }
}

fn shared<K>(
    informer: SharedIndexInformer<K>,
    handler: GraphEventHandler,
) -> Result<Box<dyn Monitor>, String>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    // No resync for the collector's handler, as upstream.
    let registration = informer
        .add_event_handler_with_resync_period(handler, Duration::ZERO)
        .map_err(|e| e.to_string())?;
    Ok(Box::new(SharedMonitor {
        informer,
        registration,
    }))
}

struct State {
    /// The monitors by resource. Invariant: each was built for its key's resource.
    monitors: BTreeMap<GroupVersionResource, Box<dyn Monitor>>,
    /// Set by `start`: the token monitors run under; monitors added later start with it.
    running: Option<CancellationToken>,
}

/// The collector's resource monitors, as the monitor half of upstream's `GraphBuilder`.
pub struct Monitors {
    client: kube::Client,
    /// Shared typed informers, when the process has a factory.
    factory: Option<SharedInformerFactory>,
    builder: Arc<GraphBuilder>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Monitors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitors")
            .field("resources", &self.resources())
            .finish_non_exhaustive()
    }
}

impl Monitors {
    /// Monitors feeding `builder`, sharing `factory`'s typed informers where possible.
    pub fn new(
        client: kube::Client,
        factory: Option<SharedInformerFactory>,
        builder: Arc<GraphBuilder>,
    ) -> Self {
        Self {
            client,
            factory,
            builder,
            state: Mutex::new(State {
                monitors: BTreeMap::new(),
                running: None,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The factory's shared typed informer for `resource`, for the resources kcm's
    /// controllers watch anyway.
    fn shared_monitor(
        &self,
        resource: &DiscoveredResource,
        handler: GraphEventHandler,
    ) -> Option<Result<Box<dyn Monitor>, String>> {
        let factory = self.factory.as_ref()?;
        let r = &resource.api_resource;
        let monitor = match (r.group.as_str(), r.version.as_str(), r.plural.as_str()) {
            ("", "v1", "pods") => shared(factory.informer_for::<Pod>(), handler),
            ("", "v1", "nodes") => shared(factory.informer_for::<Node>(), handler),
            ("", "v1", "namespaces") => shared(factory.informer_for::<Namespace>(), handler),
            ("", "v1", "services") => shared(factory.informer_for::<Service>(), handler),
            ("apps", "v1", "replicasets") => shared(factory.informer_for::<ReplicaSet>(), handler),
            ("apps", "v1", "deployments") => shared(factory.informer_for::<Deployment>(), handler),
            ("apps", "v1", "daemonsets") => shared(factory.informer_for::<DaemonSet>(), handler),
            ("apps", "v1", "statefulsets") => {
                shared(factory.informer_for::<StatefulSet>(), handler)
            }
            ("batch", "v1", "jobs") => shared(factory.informer_for::<Job>(), handler),
            _ => return None,
        };
        Some(monitor)
    }

    /// A metadata-only informer of the collector's own for `resource`.
    fn owned_monitor(
        &self,
        resource: &DiscoveredResource,
        handler: GraphEventHandler,
    ) -> Result<Box<dyn Monitor>, String> {
        let api: Api<MetadataObject> = Api::all_with(self.client.clone(), &resource.api_resource);
        let informer = SharedIndexInformer::with_options(
            Arc::new(ApiListerWatcher::new(api)),
            SharedInformerOptions {
                name: format!(
                    "{}/{} (metadata)",
                    resource.api_resource.api_version, resource.api_resource.kind
                ),
                ..SharedInformerOptions::default()
            },
        );
        let registration = informer
            .add_event_handler_with_resync_period(handler, Duration::ZERO)
            .map_err(|e| e.to_string())?;
        Ok(Box::new(OwnedMonitor {
            informer,
            registration,
            cancel: None,
            task: None,
        }))
    }

    /// Makes the monitored set exactly `resources`: keeps existing monitors, builds missing
    /// ones (not started: see [`Self::start`]), stops the others, as upstream's
    /// `syncMonitors`. Returns the resources that could not be monitored, with why.
    pub fn sync(
        &self,
        resources: &BTreeMap<GroupVersionResource, DiscoveredResource>,
    ) -> Vec<(GroupVersionResource, String)> {
        let mut errors = Vec::new();
        let mut built = Vec::new();
        let (to_build, to_stop) = {
            let state = self.state();
            let to_build: Vec<&DiscoveredResource> = resources
                .iter()
                .filter(|(gvr, _)| !state.monitors.contains_key(*gvr))
                .map(|(_, r)| r)
                .collect();
            let to_stop: Vec<GroupVersionResource> = state
                .monitors
                .keys()
                .filter(|gvr| !resources.contains_key(*gvr))
                .cloned()
                .collect();
            (to_build, to_stop)
        };
        for resource in to_build {
            let handler = self.builder.handler(
                &resource.api_resource.api_version,
                &resource.api_resource.kind,
            );
            let monitor = match self.shared_monitor(resource, handler.clone()) {
                Some(m) => m,
                None => self.owned_monitor(resource, handler),
            };
            match monitor {
                Ok(m) => built.push((resource.gvr(), m)),
                Err(e) => errors.push((resource.gvr(), e)),
            }
        }
        let (stopped, kept, added) = {
            let mut state = self.state();
            let kept = state.monitors.len() - to_stop.len();
            let stopped: Vec<Box<dyn Monitor>> = to_stop
                .iter()
                .filter_map(|gvr| state.monitors.remove(gvr))
                .collect();
            let added = built.len();
            for (gvr, monitor) in built {
                state.monitors.insert(gvr, monitor);
            }
            (stopped, kept, added)
        };
        let removed = stopped.len();
        for monitor in stopped {
            // The task winds down on its own once cancelled.
            drop(monitor.stop());
        }
        tracing::debug!(added, kept, removed, "synced monitors");
        errors
    }

    /// Starts every monitor not running yet (and the factory's new informers), under
    /// `cancel`, as upstream's `startMonitors`. Monitors added by later `sync` calls need
    /// another `start`.
    pub fn start(&self, cancel: &CancellationToken) {
        if let Some(factory) = &self.factory {
            factory.start(cancel);
        }
        let mut state = self.state();
        state.running = Some(cancel.clone());
        let total = state.monitors.len();
        for monitor in state.monitors.values_mut() {
            monitor.start(cancel);
        }
        tracing::debug!(current = total, "started monitors");
    }

    /// True when there is at least one monitor and every monitor has synced, as upstream's
    /// `IsSynced`.
    pub fn is_synced(&self) -> bool {
        let state = self.state();
        !state.monitors.is_empty() && state.monitors.values().all(|m| m.has_synced())
    }

    /// Whether `resource` is monitored and synced, as upstream's `IsResourceSynced`.
    pub fn is_resource_synced(&self, resource: &GroupVersionResource) -> bool {
        self.state()
            .monitors
            .get(resource)
            .is_some_and(|m| m.has_synced())
    }

    /// The monitored resources.
    pub fn resources(&self) -> Vec<GroupVersionResource> {
        self.state().monitors.keys().cloned().collect()
    }

    /// Stops every monitor and waits for the collector's own informers to return.
    pub async fn stop(&self) {
        let monitors = std::mem::take(&mut self.state().monitors);
        let total = monitors.len();
        let tasks: Vec<JoinHandle<()>> = monitors.into_values().filter_map(|m| m.stop()).collect();
        let stopped = tasks.len();
        for task in tasks {
            if let Err(err) = task.await {
                tracing::error!(%err, "monitor task failed");
            }
        }
        tracing::info!(stopped, total, "stopped monitors");
    }
}
