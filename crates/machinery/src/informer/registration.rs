//! A controller's informers wired in one place: its handlers registered on each, and their sync checks collected (the `AddEventHandler` calls and `cacheSynced` list every upstream constructor writes).
//!
//! Every kube-controller-manager controller's constructor does the same three things per
//! informer: add the controller's event handler, log if that fails, and remember the
//! informer's `HasSynced` so `Run` can wait for the caches. [`InformerRegistrar`] does them
//! once, for any number of informers of any kinds:
//!
//! ```ignore
//! controller.caches_synced = InformerRegistrar::new("replicaset")
//!     .register(&rs_informer, controller.handlers.clone())
//!     .register(&pod_informer, controller.handlers.clone())
//!     .finish();
//! // in run():
//! if !wait_for_synced("replicaset", &cancel, &self.caches_synced).await { return; }
//! ```
//!
//! The sync checks are plain closures ([`InformerSynced`]) so unit tests can replace them
//! (`vec![Arc::new(|| true)]`) without building informers.

use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use tokio_util::sync::CancellationToken;

use super::handler::ResourceEventHandler;
use super::shared_informer::{
    HasSynced, ResourceEventHandlerRegistration, SharedIndexInformer, wait_until_synced,
};

/// Whether one cache has synced, as client-go's `cache.InformerSynced`.
pub type InformerSynced = Arc<dyn Fn() -> bool + Send + Sync>;

/// The sync check of anything that knows it (an informer, a handler registration).
pub fn synced_of<S: HasSynced + 'static>(source: S) -> InformerSynced {
    Arc::new(move || source.has_synced())
}

/// True once every check reports synced (an empty list is synced).
pub fn all_synced(synced: &[InformerSynced]) -> bool {
    synced.iter().all(|check| check())
}

/// Waits until every check in `synced` reports synced (true) or `cancel` fires (false), as
/// client-go's `WaitForNamedCacheSync`; `controller` names the waiter in logs.
pub async fn wait_for_synced(
    controller: &str,
    cancel: &CancellationToken,
    synced: &[InformerSynced],
) -> bool {
    wait_until_synced(controller, cancel, || all_synced(synced)).await
}

/// Registers a controller's handlers on its informers and collects their sync checks.
#[must_use = "finish() returns the sync checks the controller must wait for"]
pub struct InformerRegistrar {
    controller: &'static str,
    synced: Vec<InformerSynced>,
    failed: usize,
}

impl InformerRegistrar {
    /// Starts an empty set for `controller` (the name its log lines carry).
    pub fn new(controller: &'static str) -> Self {
        Self {
            controller,
            synced: Vec::new(),
            failed: 0,
        }
    }

    /// Adds `handler` to `informer` with the informer's default resync period and waits for
    /// the informer. A refusal (the informer already stopped) is logged and the informer is
    /// still waited for, as upstream ignores `AddEventHandler`'s error in its constructors.
    pub fn register<K, H>(self, informer: &SharedIndexInformer<K>, handler: H) -> Self
    where
        K: Resource + Clone + Send + Sync + 'static,
        H: ResourceEventHandler<K>,
    {
        let registered = informer.add_event_handler(handler);
        self.registered(informer, registered)
    }

    /// As [`Self::register`], with the handler's own resync period (client-go's
    /// `AddEventHandlerWithResyncPeriod`: zero never resyncs, and the informer adjusts
    /// periods below its own check period).
    pub fn register_with_resync<K, H>(
        self,
        informer: &SharedIndexInformer<K>,
        handler: H,
        resync_period: Duration,
    ) -> Self
    where
        K: Resource + Clone + Send + Sync + 'static,
        H: ResourceEventHandler<K>,
    {
        let registered = informer.add_event_handler_with_resync_period(handler, resync_period);
        self.registered(informer, registered)
    }

    /// Logs and counts a refused registration, then waits for `informer` either way.
    fn registered<K>(
        mut self,
        informer: &SharedIndexInformer<K>,
        registered: super::shared_informer::Result<ResourceEventHandlerRegistration<K>>,
    ) -> Self
    where
        K: Resource + Clone + Send + Sync + 'static,
    {
        if let Err(err) = registered {
            self.failed += 1;
            tracing::error!(
                controller = self.controller,
                informer = std::any::type_name::<K>(),
                %err,
                "registering an event handler"
            );
        }
        self.wait_for(informer)
    }

    /// Waits for `informer` without handling its events (a cache read through a lister only).
    pub fn wait_for<K>(mut self, informer: &SharedIndexInformer<K>) -> Self
    where
        K: Resource + Clone + Send + Sync + 'static,
    {
        self.synced.push(synced_of(informer.clone()));
        self
    }

    /// Waits for a further check (e.g. a handler registration's own sync state).
    pub fn wait_for_check(mut self, synced: InformerSynced) -> Self {
        self.synced.push(synced);
        self
    }

    /// How many registrations the informers refused.
    pub fn failed(&self) -> usize {
        self.failed
    }

    /// The sync checks, in registration order.
    pub fn finish(self) -> Vec<InformerSynced> {
        self.synced
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use k8s_openapi::api::core::v1::{ConfigMap, Pod};

    use super::*;
    use crate::informer::lister_watcher::NeverListerWatcher;
    use crate::informer::shared_informer::SharedInformerOptions;
    use crate::informer::testing::{FakeLw, list, pod};

    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl<K> ResourceEventHandler<K> for Counting
    where
        K: Send + Sync + 'static,
    {
        fn on_add(&self, _obj: Arc<K>, _initial: bool) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn informer<K>() -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    {
        SharedIndexInformer::new(NeverListerWatcher, Duration::ZERO)
    }

    #[tokio::test]
    async fn one_check_per_informer_in_order_and_none_synced_before_start() {
        let pods = informer::<Pod>();
        let config_maps = informer::<ConfigMap>();
        let handler = Arc::new(Counting::default());
        let registrar = InformerRegistrar::new("test")
            .register(&pods, handler.clone())
            .wait_for(&config_maps);
        assert_eq!(registrar.failed(), 0);
        let synced = registrar.finish();
        assert_eq!(synced.len(), 2);
        assert!(!all_synced(&synced), "nothing started, nothing synced");
    }

    #[tokio::test]
    async fn a_stopped_informer_is_counted_and_still_waited_for() {
        let pods = informer::<Pod>();
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        pods.run(cancelled).await;
        let registrar =
            InformerRegistrar::new("test").register(&pods, Arc::new(Counting::default()));
        assert_eq!(registrar.failed(), 1);
        assert_eq!(registrar.finish().len(), 1);
    }

    /// Counts resyncs (updates); the informer under test delivers nothing else as an update.
    #[derive(Default)]
    struct Resyncs(AtomicUsize);

    impl ResourceEventHandler<Pod> for Resyncs {
        fn on_update(&self, _old: Arc<Pod>, _new: Arc<Pod>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_registration_keeps_its_resync_period() {
        let lw = FakeLw::new(vec![Ok(list("10", None, vec![pod("a", "5")]))], vec![]);
        let pods = SharedIndexInformer::with_options(
            lw,
            SharedInformerOptions {
                resync_period: Duration::from_secs(60),
                ..SharedInformerOptions::default()
            },
        );
        let every_30s = Arc::new(Resyncs::default());
        let default_60s = Arc::new(Resyncs::default());
        let never = Arc::new(Resyncs::default());
        let registrar = InformerRegistrar::new("test")
            .register_with_resync(&pods, every_30s.clone(), Duration::from_secs(30))
            .register(&pods, default_60s.clone())
            .register_with_resync(&pods, never.clone(), Duration::ZERO);
        assert_eq!(registrar.failed(), 0);
        let synced = registrar.finish();
        assert_eq!(synced.len(), 3, "one check per registration");

        let cancel = CancellationToken::new();
        let running = tokio::spawn({
            let (pods, cancel) = (pods.clone(), cancel.clone());
            async move { pods.run(cancel).await }
        });
        assert!(wait_for_synced("test", &cancel, &synced).await);
        tokio::time::sleep(Duration::from_secs(95)).await;
        let count = |r: &Resyncs| r.0.load(Ordering::Relaxed);
        assert_eq!(
            (count(&every_30s), count(&default_60s), count(&never)),
            (3, 1, 0)
        );
        cancel.cancel();
        running.await.expect("informer task");
    }

    #[tokio::test]
    async fn a_refused_registration_with_resync_is_counted_and_still_waited_for() {
        let pods = informer::<Pod>();
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        pods.run(cancelled).await;
        let registrar = InformerRegistrar::new("test").register_with_resync(
            &pods,
            Arc::new(Counting::default()),
            Duration::from_secs(30),
        );
        assert_eq!(registrar.failed(), 1);
        assert_eq!(registrar.finish().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_synced_returns_true_once_every_check_passes_and_false_on_cancel() {
        let flag = Arc::new(AtomicBool::new(false));
        let seen = flag.clone();
        let synced: Vec<InformerSynced> = vec![
            Arc::new(|| true),
            Arc::new(move || seen.load(Ordering::Relaxed)),
        ];
        let cancel = CancellationToken::new();
        let setter = flag.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(250)).await;
            setter.store(true, Ordering::Relaxed);
        });
        assert!(wait_for_synced("test", &cancel, &synced).await);

        let never: Vec<InformerSynced> = vec![Arc::new(|| false)];
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        assert!(!wait_for_synced("test", &cancelled, &never).await);
        assert!(all_synced(&[]));
    }
}
