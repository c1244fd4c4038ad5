//! SharedInformerFactory: one shared informer per resource type, started together, as
//! client-go's `informers.sharedInformerFactory`.

use std::any::TypeId;
use std::collections::{HashMap, HashSet};
use std::fmt::{self, Debug};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Service};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::core::{ApiResource, DynamicObject};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::lister_watcher::ApiListerWatcher;
use super::shared_informer::{
    AnyInformer, HasSynced, SYNCED_POLL_PERIOD, SharedIndexInformer, SharedInformerOptions,
};

/// Builds the `Api` for a resource scope: namespaced resources honour the factory's
/// namespace, cluster-scoped ones ignore it. Implemented for k8s-openapi's two scopes, so
/// [`SharedInformerFactory::informer_for`] works for every built-in type.
pub trait ApiScope {
    /// An `Api<K>` restricted to `namespace` when the scope allows it.
    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self>,
        K::DynamicType: Default;
}

impl ApiScope for NamespaceResourceScope {
    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self>,
        K::DynamicType: Default,
    {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }
}

impl ApiScope for ClusterResourceScope {
    fn api<K>(client: Client, _namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self>,
        K::DynamicType: Default,
    {
        Api::all(client)
    }
}

/// Identifies one informer of a factory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum InformerKey {
    Typed(TypeId),
    Dynamic {
        group: String,
        version: String,
        plural: String,
    },
}

struct State {
    /// Every informer handed out, by resource.
    informers: HashMap<InformerKey, Arc<dyn AnyInformer>>,
    /// The informers `start` has launched (client-go's `startedInformers`).
    started: HashSet<InformerKey>,
    /// Their tasks, awaited by `shutdown`.
    tasks: Vec<JoinHandle<()>>,
    /// Set by `shutdown`: `start` does nothing more.
    shutting_down: bool,
    /// Resync periods overriding the default for some types.
    custom_resync: HashMap<TypeId, Duration>,
}

/// Hands out one [`SharedIndexInformer`] per resource type (within an optional namespace),
/// so every controller of a process shares one watch and one cache per type, as client-go's
/// `SharedInformerFactory`. Cheap to clone: clones share the informers.
///
/// ```no_run
/// # async fn example(client: kube::Client) {
/// use std::time::Duration;
/// use kcm_machinery::informer::SharedInformerFactory;
/// use tokio_util::sync::CancellationToken;
///
/// let factory = SharedInformerFactory::new(client, Duration::from_secs(12 * 3600));
/// let pods = factory.pods();
/// let rs = factory.replica_sets();
/// // ... add handlers ...
/// let cancel = CancellationToken::new();
/// factory.start(&cancel);
/// assert!(factory.wait_for_cache_sync(&cancel).await);
/// let pod = pods.lister().get("default", "web-0");
/// # let _ = (rs, pod);
/// # }
/// ```
#[derive(Clone)]
pub struct SharedInformerFactory {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    /// `None`: all namespaces.
    namespace: Option<String>,
    default_resync: Duration,
    state: Mutex<State>,
}

impl fmt::Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedInformerFactory")
            .field("namespace", &self.inner.namespace)
            .field("default_resync", &self.inner.default_resync)
            .finish()
    }
}

impl SharedInformerFactory {
    /// A factory over every namespace whose informers resync handlers every
    /// `default_resync` (zero: never), as client-go's `NewSharedInformerFactory`.
    pub fn new(client: Client, default_resync: Duration) -> Self {
        Self::build(client, default_resync, None)
    }

    /// A factory whose namespaced informers only see `namespace`, as client-go's
    /// `WithNamespace` option. Cluster-scoped resources are not affected.
    pub fn with_namespace(
        client: Client,
        default_resync: Duration,
        namespace: impl Into<String>,
    ) -> Self {
        Self::build(client, default_resync, Some(namespace.into()))
    }

    fn build(client: Client, default_resync: Duration, namespace: Option<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                namespace,
                default_resync,
                state: Mutex::new(State {
                    informers: HashMap::new(),
                    started: HashSet::new(),
                    tasks: Vec::new(),
                    shutting_down: false,
                    custom_resync: HashMap::new(),
                }),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The namespace this factory is restricted to, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.inner.namespace.as_deref()
    }

    /// Overrides the resync period for informers of `K` created after this call, as
    /// client-go's `WithCustomResyncConfig`.
    pub fn set_custom_resync<K: 'static>(&self, resync: Duration) {
        self.state().custom_resync.insert(TypeId::of::<K>(), resync);
    }

    /// The shared informer for `K`, created on first use, as client-go's `InformerFor`.
    pub fn informer_for<K>(&self) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::Scope: ApiScope,
    {
        let type_id = TypeId::of::<K>();
        let key = InformerKey::Typed(type_id);
        let mut state = self.state();
        if let Some(existing) = state.informers.get(&key)
            && let Some(informer) = existing.as_any().downcast_ref::<SharedIndexInformer<K>>()
        {
            return informer.clone();
        }
        let resync = state
            .custom_resync
            .get(&type_id)
            .copied()
            .unwrap_or(self.inner.default_resync);
        let api = <K::Scope as ApiScope>::api::<K>(
            self.inner.client.clone(),
            self.inner.namespace.as_deref(),
        );
        let informer = SharedIndexInformer::with_options(
            Arc::new(ApiListerWatcher::new(api)),
            SharedInformerOptions {
                name: format!("{}/{}", K::api_version(&()), K::kind(&())),
                resync_period: resync,
                ..SharedInformerOptions::default()
            },
        );
        state.informers.insert(key, Arc::new(informer.clone()));
        informer
    }

    /// The shared informer for a resource known only at runtime (custom resources), as
    /// client-go's dynamic informer factory. Namespaced per the factory; for a cluster-scoped
    /// resource in a namespaced factory use [`Self::dynamic_with_scope`].
    pub fn dynamic(&self, resource: ApiResource) -> SharedIndexInformer<DynamicObject> {
        self.dynamic_with_scope(resource, true)
    }

    /// As [`Self::dynamic`], saying whether the resource is namespaced (cluster-scoped
    /// resources always list every object).
    pub fn dynamic_with_scope(
        &self,
        resource: ApiResource,
        namespaced: bool,
    ) -> SharedIndexInformer<DynamicObject> {
        let key = InformerKey::Dynamic {
            group: resource.group.clone(),
            version: resource.version.clone(),
            plural: resource.plural.clone(),
        };
        let mut state = self.state();
        if let Some(existing) = state.informers.get(&key)
            && let Some(informer) = existing
                .as_any()
                .downcast_ref::<SharedIndexInformer<DynamicObject>>()
        {
            return informer.clone();
        }
        let namespace = self.inner.namespace.as_deref().filter(|_| namespaced);
        let lister_watcher =
            ApiListerWatcher::dynamic(self.inner.client.clone(), &resource, namespace);
        let informer = SharedIndexInformer::with_options(
            Arc::new(lister_watcher),
            SharedInformerOptions {
                name: format!("{}/{}", resource.api_version, resource.kind),
                resync_period: self.inner.default_resync,
                ..SharedInformerOptions::default()
            },
        );
        state.informers.insert(key, Arc::new(informer.clone()));
        informer
    }

    /// Pods (`core/v1`).
    pub fn pods(&self) -> SharedIndexInformer<Pod> {
        self.informer_for()
    }

    /// Nodes (`core/v1`, cluster-scoped).
    pub fn nodes(&self) -> SharedIndexInformer<Node> {
        self.informer_for()
    }

    /// Namespaces (`core/v1`, cluster-scoped).
    pub fn namespaces(&self) -> SharedIndexInformer<Namespace> {
        self.informer_for()
    }

    /// Services (`core/v1`).
    pub fn services(&self) -> SharedIndexInformer<Service> {
        self.informer_for()
    }

    /// ConfigMaps (`core/v1`).
    pub fn config_maps(&self) -> SharedIndexInformer<ConfigMap> {
        self.informer_for()
    }

    /// ReplicaSets (`apps/v1`).
    pub fn replica_sets(&self) -> SharedIndexInformer<ReplicaSet> {
        self.informer_for()
    }

    /// Deployments (`apps/v1`).
    pub fn deployments(&self) -> SharedIndexInformer<Deployment> {
        self.informer_for()
    }

    /// DaemonSets (`apps/v1`).
    pub fn daemon_sets(&self) -> SharedIndexInformer<DaemonSet> {
        self.informer_for()
    }

    /// StatefulSets (`apps/v1`).
    pub fn stateful_sets(&self) -> SharedIndexInformer<StatefulSet> {
        self.informer_for()
    }

    /// Jobs (`batch/v1`).
    pub fn jobs(&self) -> SharedIndexInformer<Job> {
        self.informer_for()
    }

    /// Leases (`coordination.k8s.io/v1`).
    pub fn leases(&self) -> SharedIndexInformer<Lease> {
        self.informer_for()
    }

    /// Starts every informer requested so far that is not running yet, each in its own task,
    /// until `cancel` fires, as client-go's `Start`. Idempotent; call again to start
    /// informers requested later. Must be called within a tokio runtime.
    pub fn start(&self, cancel: &CancellationToken) {
        let mut state = self.state();
        if state.shutting_down {
            return;
        }
        let to_start: Vec<(InformerKey, Arc<dyn AnyInformer>)> = state
            .informers
            .iter()
            .filter(|(key, _)| !state.started.contains(*key))
            .map(|(key, informer)| (key.clone(), informer.clone()))
            .collect();
        for (key, informer) in to_start {
            let task = tokio::spawn(informer.run_boxed(cancel.clone()));
            state.tasks.push(task);
            state.started.insert(key);
        }
    }

    /// Waits until every started informer has synced (true) or `cancel` fires (false), as
    /// client-go's `WaitForCacheSync`.
    pub async fn wait_for_cache_sync(&self, cancel: &CancellationToken) -> bool {
        let started: Vec<Arc<dyn AnyInformer>> = {
            let state = self.state();
            state
                .informers
                .iter()
                .filter(|(key, _)| state.started.contains(*key))
                .map(|(_, informer)| informer.clone())
                .collect()
        };
        loop {
            if started.iter().all(|i| i.synced()) {
                return true;
            }
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tokio::time::sleep(SYNCED_POLL_PERIOD) => {}
            }
        }
    }

    /// Stops starting informers and waits for the running ones to return (cancel their
    /// token first), as client-go's `Shutdown`.
    pub async fn shutdown(&self) {
        let tasks = {
            let mut state = self.state();
            state.shutting_down = true;
            std::mem::take(&mut state.tasks)
        };
        for task in tasks {
            if let Err(err) = task.await {
                tracing::error!(%err, "informer task failed");
            }
        }
    }
}

impl HasSynced for SharedInformerFactory {
    /// True when every started informer has synced.
    fn has_synced(&self) -> bool {
        let state = self.state();
        state
            .informers
            .iter()
            .filter(|(key, _)| state.started.contains(*key))
            .all(|(_, informer)| informer.synced())
    }
}

#[cfg(test)]
mod tests {
    use kcm_testing::MetaBuilder;

    use super::*;

    fn client() -> Client {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("uri"));
        Client::try_from(config).expect("client")
    }

    #[tokio::test]
    async fn one_informer_per_type() {
        let factory = SharedInformerFactory::new(client(), Duration::ZERO);
        let a = factory.pods();
        let b = factory.informer_for::<Pod>();
        assert_eq!(a.name(), "v1/Pod");
        a.add_event_handler(super::super::ResourceEventHandlerFuncs::new())
            .expect("add");
        // Same informer: what `a` caches, `b` sees.
        a.indexer()
            .add(kcm_testing::pod("x").namespace("ns").arc())
            .expect("add");
        assert!(b.lister().get("ns", "x").is_some());
        assert_eq!(factory.nodes().name(), "v1/Node");
        assert_eq!(factory.leases().name(), "coordination.k8s.io/v1/Lease");

        let ar = ApiResource {
            group: "samplecontroller.k8s.io".into(),
            version: "v1alpha1".into(),
            api_version: "samplecontroller.k8s.io/v1alpha1".into(),
            kind: "Foo".into(),
            plural: "foos".into(),
        };
        let foos = factory.dynamic(ar.clone());
        foos.indexer()
            .add(Arc::new(DynamicObject::new("f", &ar).within("ns")))
            .expect("add");
        assert!(factory.dynamic(ar).lister().get("ns", "f").is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn start_is_idempotent_and_starts_late_informers() {
        let factory = SharedInformerFactory::new(client(), Duration::ZERO);
        let pods = factory.pods();
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        factory.start(&cancel);
        tokio::task::yield_now().await;
        assert!(pods.has_started());
        let nodes = factory.nodes();
        assert!(!nodes.has_started());
        factory.start(&cancel);
        tokio::task::yield_now().await;
        assert!(nodes.has_started());
        assert_eq!(factory.state().tasks.len(), 2);
        // Nothing answers on 127.0.0.1:1: the caches never sync and cancel ends the wait.
        let waiter = tokio::spawn({
            let factory = factory.clone();
            let cancel = cancel.clone();
            async move { factory.wait_for_cache_sync(&cancel).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        cancel.cancel();
        assert!(!waiter.await.expect("join"));
        factory.shutdown().await;
        assert!(pods.is_stopped() && nodes.is_stopped());
        // After shutdown, start does nothing.
        let leases = factory.leases();
        factory.start(&cancel);
        tokio::task::yield_now().await;
        assert!(!leases.has_started());
    }
}
