//! `ControllerManager`: serve health and metrics, elect a leader, start the enabled controllers
//! with one informer factory, and stop everything in order.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use kcm_machinery::events::WallClock;
use kcm_machinery::informer::SharedInformerFactory;
use kcm_machinery::leaderelection::{
    KubeLeaseLock, LeaderCallbacks, LeaderElectionRecord, LeaderElectionStatus, LeaderElector,
    LeaseLock, RunOutcome, new_identity,
};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::client_builder::{ClientFactory, ControllerClients, ServiceAccountClients};
use super::client_config::load_client_config;
use super::context::ControllerContext;
use super::delegated_auth::{DelegatedAuth, DelegationConfig, KubeReviewer, Reviewer};
use super::error::{Error, Result};
use super::events::EventPipeline;
use super::health::{CheckFn, HealthEndpoints};
use super::metrics::{MANAGER_NAME, ManagerMetrics};
use super::options::ManagerOptions;
use super::registry::{ControllerRegistry, StartedController};
use super::selection::ControllerSelection;
use super::server::{self, HttpsServer};
use super::tls::{ServingCert, self_signed_hosts};
use crate::cloud::CloudProvider;

/// How long stopping controllers may take before the manager abandons them: workers finish
/// the item they hold, which is one sync, a handful of API calls.
pub const CONTROLLER_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How long past its lease duration a leader may go without renewing before its health
/// checks fail, as kube-controller-manager's `NewLeaderHealthzAdaptor(20s)`.
pub const LEADER_ELECTION_HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

/// Where the controllers are in their life; read by the `informer-sync` readiness check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Leader election is on and this process does not lead: nothing to sync, ready.
    Standby = 0,
    /// Controllers are being built or their caches are syncing: not ready.
    Starting = 1,
    /// Caches synced, controllers running: ready.
    Running = 2,
    /// Shutting down: not ready.
    Stopping = 3,
}

impl Phase {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => Phase::Standby,
            1 => Phase::Starting,
            2 => Phase::Running,
            _ => Phase::Stopping,
        }
    }
}

/// A lease lock chosen at run time (the real one, or one injected for tests).
struct BoxedLock(Box<dyn LeaseLock>);

#[async_trait]
impl LeaseLock for BoxedLock {
    async fn get(&mut self) -> kcm_machinery::leaderelection::Result<LeaderElectionRecord> {
        self.0.get().await
    }
    async fn create(
        &mut self,
        record: &LeaderElectionRecord,
    ) -> kcm_machinery::leaderelection::Result<()> {
        self.0.create(record).await
    }
    async fn update(
        &mut self,
        record: &LeaderElectionRecord,
    ) -> kcm_machinery::leaderelection::Result<()> {
        self.0.update(record).await
    }
    fn describe(&self) -> String {
        self.0.describe()
    }
}

/// The controller manager, as kube-controller-manager's `Run`: build it from the flags and a
/// registry, then [`run`](Self::run) it (or [`start`](Self::start) it to get a handle).
///
/// Order of events:
/// 1. the client is built (`--kubeconfig`/`--master`/in-cluster, QPS limiter, metrics) and
///    the HTTPS endpoint starts serving `/healthz`, `/livez`, `/readyz`, `/metrics`;
/// 2. with `--leader-elect`, the process competes for the Lease and continues only as leader;
/// 3. one informer factory is created, every enabled controller's init function runs (each
///    requests its informers), the factory starts, and once its caches have synced every
///    controller's run future is spawned;
/// 4. on cancellation the controllers stop (workers finish their items), informers stop, the
///    lease is released, events are flushed, and the endpoint stops last.
///
/// Losing the lease ends [`RunningManager::wait`] with [`Error::LeadershipLost`]: the process
/// must exit non-zero, as upstream.
pub struct ControllerManager {
    /// The flags.
    options: Arc<ManagerOptions>,
    /// Every controller that can run.
    registry: Arc<ControllerRegistry>,
    /// `--controllers`, resolved against `registry`.
    selection: ControllerSelection,
    /// Overrides `--kubeconfig`/`--master` (tests, embedders).
    kube_config: Option<kube::Config>,
    /// Where the endpoint's TokenReviews and SubjectAccessReviews go when
    /// `--authentication-kubeconfig`/`--authorization-kubeconfig` are not given (tests,
    /// embedders; otherwise the in-cluster configuration, if any).
    delegation_config: Option<kube::Config>,
    /// Overrides `--bind-address`/`--secure-port` with a bound socket (tests: port 0).
    listener: Option<std::net::TcpListener>,
    /// Overrides the Lease lock (tests: an in-memory lock).
    lease_lock: Option<Box<dyn LeaseLock>>,
    /// Overrides the `hostname_uuid` identity.
    identity: Option<String>,
    /// Wall clock for the timestamps written into the Lease.
    wall_clock: Option<Arc<dyn WallClock>>,
    /// Where events go; `None`: a broadcaster writing Events to the API server.
    events: Option<Arc<dyn EventPipeline>>,
    /// The cloud of the cloud controllers; `None` skips them.
    cloud: Option<Arc<dyn CloudProvider>>,
    /// `/metrics`.
    metrics: ManagerMetrics,
    /// `/healthz`, `/livez`, `/readyz`.
    health: HealthEndpoints,
}

impl std::fmt::Debug for ControllerManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerManager")
            .field("selection", &self.selection)
            .finish_non_exhaustive()
    }
}

impl ControllerManager {
    /// A manager for `options` over `registry`; fails when `--controllers` names a controller
    /// `registry` does not know or the options are invalid (see [`ManagerOptions::validate`]).
    pub fn new(options: ManagerOptions, registry: ControllerRegistry) -> Result<Self> {
        let selection = registry.select(&options.generic.controllers)?;
        options.validate()?;
        Ok(Self {
            options: Arc::new(options),
            registry: Arc::new(registry),
            selection,
            kube_config: None,
            delegation_config: None,
            listener: None,
            lease_lock: None,
            identity: None,
            wall_clock: None,
            events: None,
            cloud: None,
            metrics: ManagerMetrics::new(),
            health: HealthEndpoints::new(),
        })
    }

    /// Uses `config` instead of loading one from the flags.
    pub fn with_kube_config(mut self, config: kube::Config) -> Self {
        self.kube_config = Some(config);
        self
    }

    /// Reviews the endpoint's tokens and requests on the API server of `config` when the
    /// delegation kubeconfig flags are not given.
    pub fn with_delegation_config(mut self, config: kube::Config) -> Self {
        self.delegation_config = Some(config);
        self
    }

    /// Serves on `listener` instead of binding `--bind-address:--secure-port`.
    pub fn with_listener(mut self, listener: std::net::TcpListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Competes on `lock` instead of the Lease named by the flags.
    pub fn with_lease_lock(mut self, lock: impl LeaseLock + 'static) -> Self {
        self.lease_lock = Some(Box::new(lock));
        self
    }

    /// Uses `identity` as the lease holder identity instead of `hostname_<uuid>`.
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// Uses `clock` for the wall-clock timestamps written into the Lease.
    pub fn with_wall_clock(mut self, clock: Arc<dyn WallClock>) -> Self {
        self.wall_clock = Some(clock);
        self
    }

    /// Sends events through `events` instead of a broadcaster writing them to the API server
    /// (e.g. [`LoggingEvents`](super::LoggingEvents)).
    pub fn with_events(mut self, events: Arc<dyn EventPipeline>) -> Self {
        self.events = Some(events);
        self
    }

    /// Runs the cloud controllers (`service-lb-controller`) against `cloud`. Without one they
    /// are skipped, as kube-controller-manager's with no `--cloud-provider`.
    pub fn with_cloud(mut self, cloud: Arc<dyn CloudProvider>) -> Self {
        self.cloud = Some(cloud);
        self
    }

    /// The metrics the manager will serve.
    pub fn metrics(&self) -> &ManagerMetrics {
        &self.metrics
    }

    /// The controllers that will be started, in start order.
    pub fn enabled_controllers(&self) -> Vec<String> {
        let gates = self.options.feature_gates();
        self.registry
            .enabled(&self.selection)
            .filter(|d| gates.missing(d.required_feature_gates()).is_empty())
            .map(|d| d.name().to_owned())
            .collect()
    }

    /// Runs until `cancel` fires (`Ok`) or leadership is lost or a controller fails to start
    /// (`Err`).
    pub async fn run(self, cancel: CancellationToken) -> Result<()> {
        self.start(cancel).await?.wait().await
    }

    /// Builds the client, starts serving, and spawns the rest; returns once the endpoint
    /// listens. Errors here are configuration errors (client, certificate, socket, lease).
    pub async fn start(self, cancel: CancellationToken) -> Result<RunningManager> {
        tracing::info!(version = env!("CARGO_PKG_VERSION"), "Starting");
        let options = Arc::clone(&self.options);
        if !options
            .generic
            .kube_api_content_type
            .eq_ignore_ascii_case("application/json")
        {
            tracing::info!(
                requested = %options.generic.kube_api_content_type,
                "--kube-api-content-type: kcm always sends JSON"
            );
        }
        let config = match self.kube_config {
            Some(config) => config,
            None => {
                load_client_config(
                    options.misc.kubeconfig.as_deref(),
                    options.misc.master.as_deref(),
                )
                .await?
            }
        };
        let client_ca = config
            .root_cert
            .as_ref()
            .filter(|certs| !certs.is_empty())
            .map(|certs| Arc::new(crate::rootcacertpublisher::ca::der_to_pem(certs)));
        // The manager's client (informers, events, leader election's reads): one bucket; each
        // controller's client gets its own (`ControllerClients`), as upstream.
        let limiter = kcm_machinery::client::rate_limit_layer(
            options.generic.kube_api_qps,
            options.generic.kube_api_burst,
        );
        let client = kcm_machinery::client::build_client_with(
            config.clone(),
            &limiter,
            Some(self.metrics.client()),
            None,
        )?;

        let events: Arc<dyn EventPipeline> = match self.events {
            Some(events) => events,
            None => Arc::new(super::events::KubeEvents::new(client.clone())),
        };

        let identity = self.identity.unwrap_or_else(new_identity);
        let hard_stop = CancellationToken::new();
        let stop = cancel.child_token();
        let leader_elect = options.leader_election.leader_elect;
        let shared = Arc::new(Shared {
            client: client.clone(),
            client_config: config,
            client_ca,
            cloud: self.cloud,
            options: Arc::clone(&options),
            registry: self.registry,
            selection: self.selection,
            events: Arc::clone(&events),
            metrics: self.metrics.clone(),
            health: self.health.clone(),
            phase: AtomicU8::new(if leader_elect {
                Phase::Standby as u8
            } else {
                Phase::Starting as u8
            }),
            fatal: Mutex::new(None),
            stop: stop.clone(),
            factory: tokio::sync::watch::Sender::new(None),
        });
        let factory = shared.factory.subscribe();
        self.health
            .readyz
            .add("informer-sync", readiness_check(&shared));

        let mut status = None;
        let main: futures::future::BoxFuture<'static, Result<()>> = if leader_elect {
            let config = options.leader_election_config(&identity);
            let lease = format!("{}/{}", config.namespace, config.name);
            let lock = match self.lease_lock {
                Some(lock) => BoxedLock(lock),
                None => BoxedLock(Box::new(KubeLeaseLock::new(
                    leader_election_client(
                        shared.client_config.clone(),
                        &options,
                        config.renew_deadline,
                        &self.metrics,
                    )?,
                    &config.namespace,
                    &config.name,
                ))),
            };
            let mut elector = LeaderElector::new(config, lock)
                .map_err(|source| Error::LeaderElection {
                    lease: lease.clone(),
                    source: Box::new(source),
                })?
                .with_metrics(self.metrics.leader_election())
                .with_event_recorder(events.recorder(MANAGER_NAME));
            if let Some(clock) = self.wall_clock {
                elector = elector.with_clock(clock);
            }
            let elector_status = elector.status();
            self.health
                .add_to_all("leader-election", leader_check(elector_status.clone()));
            status = Some(elector_status);
            let shared = Arc::clone(&shared);
            Box::pin(async move {
                let callbacks = LeaderCallbacks::new({
                    let shared = Arc::clone(&shared);
                    move |token| run_controllers(shared, token)
                })
                .on_new_leader(|leader| {
                    if !leader.is_empty() {
                        tracing::info!(leader, "New leader elected");
                    }
                });
                match elector.run(stop, callbacks).await {
                    RunOutcome::Cancelled => Ok(()),
                    RunOutcome::LeadershipLost => Err(Error::LeadershipLost { lease }),
                }
            })
        } else {
            let shared = Arc::clone(&shared);
            Box::pin(async move {
                run_controllers(shared, stop).await;
                Ok(())
            })
        };

        // Serve last: nothing above can fail once the endpoint listens.
        let server_cancel = CancellationToken::new();
        let (server, serving_cert_pem) = start_server(
            &options,
            self.delegation_config,
            self.listener,
            &self.health,
            &self.metrics,
            &server_cancel,
        )
        .await?;

        let task = tokio::spawn({
            let hard_stop = hard_stop.clone();
            async move {
                let result = tokio::select! {
                    _ = hard_stop.cancelled() => {
                        // Killed: no release, no flush, as after SIGKILL.
                        server_cancel.cancel();
                        return Ok(());
                    }
                    result = main => result,
                };
                shared.set_phase(Phase::Stopping);
                let result = match shared.take_fatal() {
                    Some(fatal) => Err(fatal),
                    None => result,
                };
                events.shutdown().await;
                server_cancel.cancel();
                if let Some(server) = server {
                    server.stopped().await;
                }
                match &result {
                    Ok(()) => tracing::info!("Controller manager stopped"),
                    Err(err) => tracing::error!(%err, "Controller manager stopped"),
                }
                result
            }
        });

        Ok(RunningManager {
            identity,
            local_addr: serving_cert_pem.as_ref().map(|(addr, _)| *addr),
            serving_cert_pem: serving_cert_pem.map(|(_, pem)| pem),
            status,
            metrics: self.metrics,
            health: self.health,
            hard_stop,
            task,
            factory,
        })
    }
}

/// Binds (or takes) the listener and serves; `None` when `--secure-port=0` and no listener.
async fn start_server(
    options: &ManagerOptions,
    delegation_config: Option<kube::Config>,
    listener: Option<std::net::TcpListener>,
    health: &HealthEndpoints,
    metrics: &ManagerMetrics,
    cancel: &CancellationToken,
) -> Result<(Option<HttpsServer>, Option<(SocketAddr, String)>)> {
    let serving = &options.secure_serving;
    let address = SocketAddr::new(serving.bind_address, serving.secure_port);
    let listen_error = |source| Error::Listen {
        address: address.to_string(),
        source,
    };
    let listener = match listener {
        Some(listener) => {
            listener.set_nonblocking(true).map_err(listen_error)?;
            TcpListener::from_std(listener).map_err(listen_error)?
        }
        None if serving.secure_port == 0 => return Ok((None, None)),
        None => TcpListener::bind(address).await.map_err(listen_error)?,
    };
    let cert = match (&serving.tls_cert_file, &serving.tls_private_key_file) {
        (Some(cert), Some(key)) => ServingCert::from_files(cert, key)?,
        _ => ServingCert::self_signed(self_signed_hosts(serving.bind_address))?,
    };
    let tls = cert.server_config()?;
    let auth = delegated_auth(options, delegation_config).await?;
    let router = server::router(health.clone(), metrics.clone()).layer(
        axum::middleware::from_fn_with_state(Arc::new(auth), super::delegated_auth::gate),
    );
    let server = server::serve(listener, tls, router, cancel.clone()).map_err(listen_error)?;
    let local = server.local_addr();
    tracing::info!(address = %local, "Serving securely");
    Ok((Some(server), Some((local, cert.chain_pem().to_owned()))))
}

/// The endpoint's gate from the delegation flags (upstream's `DelegatingAuthenticationOptions`
/// and `DelegatingAuthorizationOptions` `ApplyTo`): each review client comes from its
/// kubeconfig flag, else from `fallback`, else from the in-cluster configuration; without one,
/// tokens are not looked at (authentication) or only the always-allowed paths and
/// `system:masters` pass (authorization), as upstream warns.
async fn delegated_auth(
    options: &ManagerOptions,
    fallback: Option<kube::Config>,
) -> Result<DelegatedAuth> {
    let flags = &options.delegated_auth;
    let authentication =
        review_client(flags.authentication_kubeconfig.as_deref(), fallback.clone()).await?;
    if authentication.is_none() {
        tracing::warn!(
            "No authentication-kubeconfig provided in order to lookup client-ca-file in \
             configmap/extension-apiserver-authentication in kube-system, so client certificate \
             authentication won't work."
        );
    }
    // One kubeconfig for both (the usual case, or neither flag): one client.
    let authorization = if flags.authorization_kubeconfig == flags.authentication_kubeconfig {
        authentication.clone()
    } else {
        review_client(flags.authorization_kubeconfig.as_deref(), fallback).await?
    };
    if authorization.is_none() {
        tracing::warn!(
            "No authorization-kubeconfig provided, so SubjectAccessReview of authorization \
             tokens won't work."
        );
    }
    let config = DelegationConfig {
        always_allow_paths: flags.authorization_always_allow_paths.clone(),
        token_ttl: flags.authentication_token_webhook_cache_ttl.get(),
        allow_ttl: flags.authorization_webhook_cache_authorized_ttl.get(),
        deny_ttl: flags.authorization_webhook_cache_unauthorized_ttl.get(),
        ..DelegationConfig::default()
    };
    Ok(DelegatedAuth::new(config, authentication, authorization))
}

/// The reviews' client: from `path`, else `fallback`, else in-cluster; `None` without any.
async fn review_client(
    path: Option<&std::path::Path>,
    fallback: Option<kube::Config>,
) -> Result<Option<Arc<dyn Reviewer>>> {
    let config = match path {
        Some(path) => Some(load_client_config(Some(path), None).await?),
        None => fallback.or_else(|| kube::Config::incluster().ok()),
    };
    let Some(config) = config else {
        return Ok(None);
    };
    // Reviews gate every scrape: high limits, as upstream's delegating clients.
    let client = kcm_machinery::client::build_client(config, 200.0, 400, None)?;
    Ok(Some(Arc::new(KubeReviewer(client))))
}

/// What the manager's tasks share.
struct Shared {
    client: kube::Client,
    /// What `client` was built from: the server and CA for the controllers' own clients.
    client_config: kube::Config,
    /// The client configuration's CA (PEM), for [`ControllerContext::client_ca`].
    client_ca: Option<Arc<Vec<u8>>>,
    /// For [`ControllerContext::cloud`].
    cloud: Option<Arc<dyn CloudProvider>>,
    options: Arc<ManagerOptions>,
    registry: Arc<ControllerRegistry>,
    selection: ControllerSelection,
    events: Arc<dyn EventPipeline>,
    metrics: ManagerMetrics,
    health: HealthEndpoints,
    /// A [`Phase`].
    phase: AtomicU8,
    /// The first fatal error (a controller failed to start); the run ends with it.
    fatal: Mutex<Option<Error>>,
    /// Cancelled on shutdown or on a fatal error.
    stop: CancellationToken,
    /// The controllers' informer factory, once built (see [`RunningManager::informer_factory`]).
    factory: tokio::sync::watch::Sender<Option<ManagerInformers>>,
}

/// The controller manager's informer factory and the token its informers run under, for
/// components embedded in the same process (see [`RunningManager::informer_factory`]).
#[derive(Clone, Debug)]
pub struct ManagerInformers {
    /// The factory every controller takes its informers from.
    pub factory: SharedInformerFactory,
    /// Start informers added to `factory` under this token: it is cancelled when the
    /// controllers stop, before the manager shuts the factory down and waits for them.
    pub cancel: CancellationToken,
}

impl Shared {
    fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::SeqCst);
    }

    fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::SeqCst))
    }

    /// Records `err` (the first one wins) and stops the manager.
    fn fail(&self, err: Error) {
        tracing::error!(%err, "Error starting controllers");
        let mut fatal = self.fatal.lock().unwrap_or_else(PoisonError::into_inner);
        fatal.get_or_insert(err);
        drop(fatal);
        self.stop.cancel();
    }

    fn take_fatal(&self) -> Option<Error> {
        self.fatal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// The client the Lease lock renews through, as client-go's `resourcelock.NewFromKubeconfig`:
/// its own `--kube-api-qps`/`--kube-api-burst` bucket, so that renewals never queue behind
/// the controllers' requests (a leader busy creating pods would otherwise miss its renew
/// deadline and lose the lease), and requests bounded by half the renew deadline (at least
/// a second), so that one stuck renewal cannot use up the whole deadline.
fn leader_election_client(
    mut config: kube::Config,
    options: &ManagerOptions,
    renew_deadline: Duration,
    metrics: &ManagerMetrics,
) -> Result<kube::Client> {
    let timeout = (renew_deadline / 2).max(Duration::from_secs(1));
    config.read_timeout = Some(timeout);
    config.write_timeout = Some(timeout);
    let limiter = kcm_machinery::client::rate_limit_layer(
        options.generic.kube_api_qps,
        options.generic.kube_api_burst,
    );
    Ok(kcm_machinery::client::build_client_with(
        config,
        &limiter,
        Some(metrics.client()),
        None,
    )?)
}

/// `informer-sync`: ready on standby and once caches synced; not while starting or stopping.
fn readiness_check(shared: &Arc<Shared>) -> CheckFn {
    let shared = Arc::downgrade(shared);
    Arc::new(move || match shared.upgrade().map(|s| s.phase()) {
        Some(Phase::Standby) => Ok(Some("not leading, no caches to sync".to_owned())),
        Some(Phase::Running) => Ok(None),
        Some(Phase::Starting) => Err("informer caches have not synced yet".to_owned()),
        Some(Phase::Stopping) | None => Err("shutting down".to_owned()),
    })
}

/// `leader-election`: fails when we lead but have not renewed in time (client-go's
/// `HealthzAdaptor`); reports who leads.
fn leader_check(status: LeaderElectionStatus) -> CheckFn {
    Arc::new(move || {
        status.check(LEADER_ELECTION_HEALTH_TOLERANCE)?;
        if status.is_leader() {
            return Ok(Some("leading".to_owned()));
        }
        let leader = status.leader();
        Ok(Some(if leader.is_empty() {
            "standby, no leader observed".to_owned()
        } else {
            format!("standby, leader is {leader}")
        }))
    })
}

/// One controller's health: fails if its run future ended before shutdown.
fn controller_check(
    exited: Arc<AtomicBool>,
    token: CancellationToken,
    own: Option<super::registry::HealthCheckFn>,
) -> CheckFn {
    Arc::new(move || {
        if exited.load(Ordering::SeqCst) && !token.is_cancelled() {
            return Err("controller stopped running".to_owned());
        }
        match &own {
            Some(check) => check().map(|()| None),
            None => Ok(None),
        }
    })
}

/// Builds the enabled controllers, starts the informers, waits for their caches, runs the
/// controllers until `parent` is cancelled, then stops them and the informers (upstream's
/// `run` closure: `CreateControllerContext`, `StartControllers`, `InformerFactory.Start`).
async fn run_controllers(shared: Arc<Shared>, parent: CancellationToken) {
    // A child token, cancelled if this future is dropped, so nothing outlives it.
    let token = parent.child_token();
    let _guard = token.clone().drop_guard();
    shared.set_phase(Phase::Starting);

    let options = &shared.options;
    let factory = SharedInformerFactory::new(
        shared.client.clone(),
        options.resync_period(1.0 + rand::random::<f64>()),
    );
    shared.factory.send_replace(Some(ManagerInformers {
        factory: factory.clone(),
        cancel: token.clone(),
    }));
    let ctx = ControllerContext {
        client: shared.client.clone(),
        factory: factory.clone(),
        events: Arc::clone(&shared.events),
        metrics: shared.metrics.clone(),
        options: Arc::clone(options),
        client_ca: shared.client_ca.clone(),
        cloud: shared.cloud.clone(),
        cancel: token.clone(),
    };

    let factory_of_clients = ClientFactory::new(
        shared.client_config.clone(),
        options.generic.kube_api_qps,
        options.generic.kube_api_burst,
        shared.metrics.client(),
    );
    let clients = if options.kube_cloud_shared.use_service_account_credentials {
        ControllerClients::ServiceAccounts(Arc::new(ServiceAccountClients::new(
            shared.client.clone(),
            factory_of_clients,
            token.clone(),
        )))
    } else {
        ControllerClients::Root(Arc::new(factory_of_clients))
    };

    let feature_gates = options.feature_gates();
    let mut started: Vec<(String, StartedController)> = Vec::new();
    for descriptor in shared.registry.iter() {
        let name = descriptor.name().to_owned();
        if !shared
            .selection
            .is_enabled(&name, descriptor.is_disabled_by_default())
        {
            tracing::info!(controller = %name, "Warning: controller is disabled");
            continue;
        }
        let missing = feature_gates.missing(descriptor.required_feature_gates());
        if !missing.is_empty() {
            tracing::info!(
                controller = %name,
                required_feature_gates = ?descriptor.required_feature_gates(),
                disabled = ?missing,
                "Controller is disabled by a feature gate"
            );
            continue;
        }
        tracing::debug!(controller = %name, "Starting controller");
        let span = tracing::info_span!("controller", controller = %name);
        let client = match clients
            .client_for(descriptor.service_account())
            .instrument(span.clone())
            .await
        {
            Ok(client) => client,
            Err(err) => {
                shared.fail(Error::ControllerInit {
                    controller: name,
                    source: Box::new(err),
                });
                factory.shutdown().await;
                return;
            }
        };
        let events = shared
            .events
            .for_controller(&client)
            .unwrap_or_else(|| Arc::clone(&shared.events));
        let ctx = ControllerContext {
            client,
            events,
            ..ctx.clone()
        };
        match descriptor.init(ctx).instrument(span).await {
            Ok(Some(controller)) => started.push((name, controller)),
            Ok(None) => tracing::info!(controller = %name, "Warning: skipping controller"),
            Err(source) => {
                shared.fail(Error::ControllerInit {
                    controller: name,
                    source,
                });
                factory.shutdown().await;
                return;
            }
        }
    }

    factory.start(&token);
    tracing::info!("Waiting for caches to sync");
    if !factory.wait_for_cache_sync(&token).await {
        tracing::info!("Stopped before caches synced");
        factory.shutdown().await;
        return;
    }
    tracing::info!("Caches are synced");
    shared.set_phase(Phase::Running);

    let mut tasks = JoinSet::new();
    for (name, controller) in started {
        let exited = Arc::new(AtomicBool::new(false));
        shared.health.add_controller(
            &name,
            controller_check(Arc::clone(&exited), token.clone(), controller.check),
        );
        shared.metrics.controller_started(&name);
        let span = tracing::info_span!("controller", controller = %name);
        tracing::info!(controller = %name, "Started controller");
        let run = controller.run;
        tasks.spawn(
            async move {
                run.await;
                exited.store(true, Ordering::SeqCst);
                name
            }
            .instrument(span),
        );
    }

    token.cancelled().await;
    shared.set_phase(Phase::Stopping);
    tracing::info!("Stopping controllers");
    let joined = tokio::time::timeout(CONTROLLER_SHUTDOWN_GRACE, async {
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(name) => {
                    shared.metrics.controller_stopped(&name);
                    tracing::info!(controller = %name, "Stopped controller");
                }
                Err(err) => tracing::error!(%err, "controller task ended abnormally"),
            }
        }
    })
    .await;
    if joined.is_err() {
        tracing::warn!(
            grace = ?CONTROLLER_SHUTDOWN_GRACE,
            remaining = tasks.len(),
            "Controllers did not stop in time; abandoning them"
        );
        tasks.abort_all();
    }
    factory.shutdown().await;
}

/// A started manager.
pub struct RunningManager {
    /// The lease holder identity.
    identity: String,
    /// Where the HTTPS endpoint listens, if serving.
    local_addr: Option<SocketAddr>,
    /// The serving certificate chain (PEM), if serving.
    serving_cert_pem: Option<String>,
    /// Leader election status, with `--leader-elect`.
    status: Option<LeaderElectionStatus>,
    /// `/metrics`.
    metrics: ManagerMetrics,
    /// The health endpoints.
    health: HealthEndpoints,
    /// Abandons everything at once (see [`Self::kill`]).
    hard_stop: CancellationToken,
    /// The manager's main task.
    task: JoinHandle<Result<()>>,
    /// The controllers' informer factory once built; closed when the manager ends.
    factory: tokio::sync::watch::Receiver<Option<ManagerInformers>>,
}

impl std::fmt::Debug for RunningManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningManager")
            .field("identity", &self.identity)
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl RunningManager {
    /// The lease holder identity (`hostname_<uuid>` unless overridden).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The HTTPS endpoint's address, when serving.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// The serving certificate chain as PEM, when serving (trust it to verify the endpoint).
    pub fn serving_cert_pem(&self) -> Option<&str> {
        self.serving_cert_pem.as_deref()
    }

    /// Whether this manager currently runs controllers as leader (always true without
    /// leader election once started).
    pub fn is_leader(&self) -> bool {
        self.status
            .as_ref()
            .is_none_or(LeaderElectionStatus::is_leader)
    }

    /// The leader election status, with `--leader-elect`.
    pub fn leader_status(&self) -> Option<LeaderElectionStatus> {
        self.status.clone()
    }

    /// The metrics served on `/metrics`.
    pub fn metrics(&self) -> &ManagerMetrics {
        &self.metrics
    }

    /// The health endpoints.
    pub fn health(&self) -> &HealthEndpoints {
        &self.health
    }

    /// The informer factory the controllers take their informers from, once built (as
    /// leader, before the controllers' init functions run); `None` if the manager ended first.
    ///
    /// Components embedded in the same process (`kcm up`'s scheduler and simulated nodes) take
    /// their informers from it, so that each object is watched and cached once per process
    /// instead of once per component. Informers they ask for after the factory started must be
    /// started with [`SharedInformerFactory::start`] under [`ManagerInformers::cancel`]: the
    /// manager shuts the factory down (waiting for those informers too) when it stops.
    pub async fn informer_factory(&self) -> Option<ManagerInformers> {
        let mut factory = self.factory.clone();
        let built = factory.wait_for(Option::is_some).await.ok()?;
        built.clone()
    }

    /// Abandons the manager as a crash would: the lease is neither renewed nor released,
    /// buffered events are dropped, the endpoint closes; controllers and informers are told to
    /// stop. Await [`Self::wait`] afterwards.
    pub fn kill(&self) {
        self.hard_stop.cancel();
    }

    /// Waits for the manager to end: `Ok` after a graceful stop, [`Error::LeadershipLost`]
    /// when the lease was lost, [`Error::ControllerInit`] when a controller failed to start.
    pub async fn wait(self) -> Result<()> {
        match self.task.await {
            Ok(result) => result,
            Err(err) => Err(Error::Task(err.to_string())),
        }
    }
}

#[cfg(test)]
#[path = "controller_manager_tests.rs"]
mod tests;
