//! Starting and stopping the API server: configuration, storage, TLS, the accept loop, the kubeconfig.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rand::RngCore;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::apiextensions::controller::{self as crd_controller, CrdController};
use tokio_util::task::TaskTracker;

use crate::auth::authenticator::{StaticToken, Union};
use crate::auth::client_cert::{ClientCertAuthenticator, PeerCertificate, RequestClientCert};
use crate::auth::rbac::RbacAuthorizer;
use crate::auth::service_account_authenticator::{ServiceAccountAuthenticator, system_clock};
use crate::auth::service_account_token::{DEFAULT_ISSUER, TokenIssuer};
use crate::auth::user::UserInfo;
use crate::http::body::DEFAULT_MAX_BODY_BYTES;
use crate::http::connection::{ConnectionLimits, GuardedStream};
use crate::http::limits::{
    DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT, DEFAULT_MAX_REQUESTS_INFLIGHT, DEFAULT_REQUEST_TIMEOUT,
    RequestLimits,
};
use crate::http::{AppState, router};
use crate::kubeconfig;
use crate::pki::{self, Pki};
use crate::registry::Registry;
use crate::registry::watch::WatchSettings;
use crate::storage::size_limit::{DEFAULT_MAX_VALUE_BYTES, SizeLimited};
use crate::storage::{
    DEFAULT_WATCH_CACHE_CAPACITY, MemoryStorage, SqliteOptions, SqliteStorage, Storage, WatchCache,
};

/// How long a client may take to send a request's headers, and to send anything at all after
/// connecting (kube-apiserver's `ReadHeaderTimeout`: 32 s, just under its 34 s bound).
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Preparing the data dir, token or kubeconfig failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS identity could not be loaded or created.
    #[error("TLS identity in {dir}: {source}")]
    Pki {
        /// The PKI directory.
        dir: PathBuf,
        /// The cause.
        #[source]
        source: pki::Error,
    },
    /// Opening the store failed.
    #[error("opening the {backend} store: {source}")]
    Storage {
        /// Which backend.
        backend: &'static str,
        /// The cause.
        #[source]
        source: crate::storage::Error,
    },
    /// Creating the default namespaces or the other bootstrap objects failed.
    #[error("creating the bootstrap objects: {0}")]
    Bootstrap(#[source] crate::error::ApiError),
    /// Binding the listen address failed.
    #[error("listening on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `--enable-admission-plugins` / `--disable-admission-plugins` name a bad set.
    #[error("admission plugins: {0}")]
    Admission(#[source] crate::admission::Error),
    /// Building a client for the running server failed.
    #[error("building a client for {url}: {source}")]
    Client {
        /// The server URL.
        url: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

/// Which store the server keeps objects in.
#[derive(Clone, Default)]
pub enum StorageBackend {
    /// kine-style SQLite log in `DATA_DIR/state.db`, with a watch cache in front (the default).
    #[default]
    Sqlite,
    /// In memory: fast, lost on exit (tests, demos).
    Memory,
    /// An etcd v3 cluster (`--etcd-servers`), with a watch cache in front; several API servers
    /// may share it.
    Etcd(crate::storage::EtcdOptions),
    /// A store supplied by the caller.
    Custom(Arc<dyn Storage>),
}

impl std::fmt::Debug for StorageBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StorageBackend::Sqlite => "Sqlite",
            StorageBackend::Memory => "Memory",
            StorageBackend::Etcd(_) => "Etcd",
            StorageBackend::Custom(_) => "Custom",
        })
    }
}

/// How to run the API server. [`ServerConfig::new`] gives upstream-like, secure defaults.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Where the store, the TLS identity, the token and the kubeconfig live.
    pub data_dir: PathBuf,
    /// The listen address (`127.0.0.1:6443` by default; port 0 picks a free port).
    pub listen: SocketAddr,
    /// The store.
    pub storage: StorageBackend,
    /// Serve HTTPS with the generated CA (default); `false` serves plain HTTP.
    pub tls: bool,
    /// The admin bearer token; `None` reads `DATA_DIR/token` or generates it there.
    pub token: Option<String>,
    /// Request bodies above this many bytes get 413 (3 MiB, as upstream).
    pub max_request_body_bytes: usize,
    /// Objects whose stored form (key and value) exceeds this many bytes get 413 (etcd's
    /// 1.5 MiB request limit, which kube-apiserver inherits).
    pub max_object_bytes: usize,
    /// Read requests served at once before the rest get 429 (`--max-requests-inflight`, 400;
    /// 0 is unlimited). Watches and other long-running requests do not count.
    pub max_requests_inflight: usize,
    /// Writes served at once before the rest get 429 (`--max-mutating-requests-inflight`,
    /// 200; 0 is unlimited).
    pub max_mutating_requests_inflight: usize,
    /// A request that is not long-running and has not answered in this long gets 504
    /// (`--request-timeout`, 60 s; zero never times out).
    pub request_timeout: Duration,
    /// A client must send its first byte, and each request's headers, within this long.
    pub header_read_timeout: Duration,
    /// A connection whose peer does not read for this long while the server has something to
    /// write (a stuck watcher) is closed.
    pub write_stall_timeout: Duration,
    /// How often watches that asked for bookmarks get one (upstream: about a minute).
    pub bookmark_interval: Duration,
    /// The in-memory and SQLite stores compact every this often, each time to the revision
    /// current one interval earlier (kube-apiserver's `--etcd-compaction-interval`, 5 minutes);
    /// `None` never.
    pub compaction_interval: Option<Duration>,
    /// Revisions of history compaction keeps besides the last interval's (kine's
    /// `compactMinRetain`, 1000). 0, as kube-apiserver compacting etcd: with kine's floor an
    /// idle cluster (a few dozen writes a minute) would keep a `continue` token valid for
    /// hours instead of the two intervals clients expect.
    pub compact_retain: i64,
    /// The admission plugins enabled and disabled beyond upstream's defaults.
    pub admission: crate::admission::AdmissionConfig,
    /// Where Service cluster IPs come from (`--service-cluster-ip-range`, `10.96.0.0/12`).
    pub service_ip_range: crate::registry::service_ip::ServiceIpRange,
    /// Events are deleted this long after their last write (kube-apiserver's `--event-ttl`,
    /// 1h); `None` keeps them.
    pub event_ttl: Option<Duration>,
    /// Bootstrap tokens authenticate (`--enable-bootstrap-token-auth`, off by default).
    pub enable_bootstrap_token_auth: bool,
    /// The address the `default/kubernetes` Endpoints and EndpointSlice advertise
    /// (`--advertise-address`); `None`: the listen address, or for a loopback or wildcard
    /// listener the default route's interface address, as kube-apiserver
    /// ([`crate::advertise::resolve_advertise_address`]).
    pub advertise_address: Option<IpAddr>,
}

impl ServerConfig {
    /// The defaults: `127.0.0.1:6443`, SQLite, TLS, generated token.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 6443),
            storage: StorageBackend::Sqlite,
            tls: true,
            token: None,
            max_request_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_object_bytes: DEFAULT_MAX_VALUE_BYTES,
            max_requests_inflight: DEFAULT_MAX_REQUESTS_INFLIGHT,
            max_mutating_requests_inflight: DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            write_stall_timeout: DEFAULT_REQUEST_TIMEOUT,
            bookmark_interval: Duration::from_secs(60),
            compaction_interval: Some(Duration::from_secs(5 * 60)),
            compact_retain: 0,
            admission: crate::admission::AdmissionConfig::default(),
            service_ip_range: crate::registry::service_ip::ServiceIpRange::default(),
            event_ttl: Some(crate::registry::event_ttl::DEFAULT_EVENT_TTL),
            enable_bootstrap_token_auth: false,
            advertise_address: None,
        }
    }
}

/// The API server.
#[derive(Debug)]
pub struct Server;

impl Server {
    /// Starts serving per `config`: prepares the data dir (token, TLS identity), opens the
    /// store, creates the default namespaces, binds, spawns the accept loop, and writes
    /// `DATA_DIR/kubeconfig` (atomically, with the real port).
    pub async fn start(config: ServerConfig) -> Result<RunningServer> {
        let data_dir = config.data_dir.clone();
        pki::create_dir(&data_dir).map_err(|source| Error::Pki {
            dir: data_dir.clone(),
            source,
        })?;
        let token = match config.token.clone() {
            Some(t) => t,
            None => load_or_create_token(&data_dir.join("token"))?,
        };
        let pki = if config.tls {
            let dir = data_dir.join("pki");
            let listen_ip = [config.listen.ip()];
            Some(
                pki::load_or_create(&dir, &listen_ip)
                    .map_err(|source| Error::Pki { dir, source })?,
            )
        } else {
            None
        };
        let admission =
            crate::admission::Chain::from_config(&config.admission).map_err(Error::Admission)?;
        let storage = open_storage(&config).await?;
        let pki_dir = data_dir.join("pki");
        let issuer = Arc::new(
            TokenIssuer::load_or_create(&pki_dir, DEFAULT_ISSUER).map_err(|e| Error::Pki {
                dir: pki_dir.clone(),
                source: pki::Error::Parse {
                    path: pki_dir.join(crate::auth::service_account_token::SIGNING_KEY_FILE),
                    why: e.to_string(),
                },
            })?,
        );
        let mut authenticators: Vec<Arc<dyn crate::auth::authenticator::Authenticator>> = vec![
            Arc::new(StaticToken::new(token.clone(), UserInfo::admin())),
            Arc::new(ServiceAccountAuthenticator::new(
                Arc::clone(&issuer),
                Arc::clone(&storage),
                system_clock(),
            )),
        ];
        if config.enable_bootstrap_token_auth {
            authenticators.push(Arc::new(
                crate::auth::bootstrap_token_authenticator::BootstrapTokenAuthenticator::new(
                    Arc::clone(&storage),
                    system_clock(),
                ),
            ));
        }
        let authenticator = Union(authenticators);
        let rbac = RbacAuthorizer::new();
        let registry = Arc::new(
            Registry::new(Arc::clone(&storage))
                .with_service_ip_range(config.service_ip_range.clone())
                .with_authenticator(Arc::new(authenticator))
                .with_authorizer(Arc::new(rbac.clone()))
                .with_token_issuer(issuer)
                .with_admission(admission),
        );
        registry
            .ensure_default_namespaces()
            .await
            .map_err(Error::Bootstrap)?;
        registry
            .ensure_bootstrap_objects()
            .await
            .map_err(Error::Bootstrap)?;
        // Custom resources are served before the first request: a restart finds its CRDs
        // in the store and serves their resources at once.
        let mut crds = CrdController::default();
        crds.sync_all(&registry).await.map_err(Error::Bootstrap)?;
        registry
            .ensure_local_api_services()
            .await
            .map_err(Error::Bootstrap)?;
        // Authorization reads the RBAC objects from a watch-fed cache; it is filled (the
        // bootstrap policy included) before the first request is served.
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let rbac_task = rbac
            .sync_from(Arc::clone(&storage), shutdown.clone())
            .await
            .map_err(|source| Error::Storage {
                backend: "rbac cache",
                source,
            })?;
        tracker.spawn(async move {
            let _ = rbac_task.await;
        });

        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Listen {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Listen {
            addr: config.listen,
            source,
        })?;
        let client_host = match addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let client_addr = SocketAddr::new(client_host, addr.port());
        // The advertise address, as kube-apiserver's default: the listen IP, or for a loopback
        // or wildcard listener the default route's interface address. A failure to write the
        // Endpoints is logged and retried by the periodic repair, as upstream's bootstrap
        // controller: it never stops the server.
        let advertise = config
            .advertise_address
            .unwrap_or_else(|| crate::advertise::resolve_advertise_address(addr.ip()));
        // The Service IP and node port bitmaps are repaired from the stored Services before
        // anything allocates (as kube-apiserver's repair controllers run at start).
        if let Err(e) = registry.repair_service_allocations().await {
            tracing::warn!(error = %e, "unable to repair the service allocations; retried on first use");
        }
        if let Err(e) = registry
            .reconcile_kubernetes_endpoints(advertise, addr.port(), system_clock()())
            .await
        {
            tracing::warn!(error = %e, "unable to sync the default/kubernetes service");
        }
        let scheme = if pki.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{client_addr}");

        let state = Arc::new(AppState {
            registry: Arc::clone(&registry),
            token: token.clone(),
            max_body_bytes: config.max_request_body_bytes,
            watch: WatchSettings {
                bookmark_interval: config.bookmark_interval,
                shutdown: shutdown.clone(),
            },
            server_address: client_addr.to_string(),
            client_certs: pki
                .as_ref()
                .and_then(|p| ClientCertAuthenticator::new(&p.ca_pem)),
            metrics: Default::default(),
            limits: RequestLimits::new(
                config.max_requests_inflight,
                config.max_mutating_requests_inflight,
                config.request_timeout,
            ),
        });
        let connection_limits = ConnectionLimits {
            first_byte_timeout: config.header_read_timeout,
            write_stall_timeout: config.write_stall_timeout,
        };
        let acceptor = match &pki {
            Some(p) => Some(TlsAcceptor::from(Arc::new(
                pki::server_config_with(p, Arc::new(RequestClientCert::new())).map_err(
                    |source| Error::Pki {
                        dir: data_dir.join("pki"),
                        source,
                    },
                )?,
            ))),
            None => None,
        };
        tracker.spawn(accept_loop(
            listener,
            acceptor,
            router(state),
            connection_limits,
            shutdown.clone(),
            tracker.clone(),
        ));
        tracker.spawn(crd_controller::run(
            Arc::clone(&registry),
            crds,
            shutdown.clone(),
        ));
        tracker.spawn(repair_kubernetes_service(
            Arc::clone(&registry),
            advertise,
            addr.port(),
            shutdown.clone(),
        ));
        tracker.spawn(track_legacy_tokens(Arc::clone(&registry), shutdown.clone()));
        tracker.spawn(repair_service_allocations(
            Arc::clone(&registry),
            crate::registry::service_alloc::SERVICE_REPAIR_INTERVAL,
            shutdown.clone(),
        ));
        if let Some(ttl) = config.event_ttl {
            tracker.spawn(crate::registry::event_ttl::expire_events(
                Arc::clone(&storage),
                ttl,
                shutdown.clone(),
            ));
        }
        if let (StorageBackend::Memory, Some(every)) = (&config.storage, config.compaction_interval)
        {
            tracker.spawn(compact_periodically(
                Arc::clone(&storage),
                every,
                config.compact_retain,
                shutdown.clone(),
            ));
        }

        let kubeconfig_path = data_dir.join("kubeconfig");
        let ca_pem = pki.as_ref().map(|p: &Pki| p.ca_pem.clone());
        // The admin's client certificate (kubernetes-admin in system:masters), issued once
        // and kept beside the CA.
        let admin_cert = if pki.is_some() {
            Some(load_or_issue_admin_cert(&pki_dir)?)
        } else {
            None
        };
        let rendered = kubeconfig::render_with_client_cert(
            &url,
            &token,
            ca_pem.as_deref(),
            admin_cert.as_ref().map(|(c, k)| (c.as_str(), k.as_str())),
        );
        pki::write_file(&kubeconfig_path, rendered.as_bytes(), 0o600).map_err(|source| {
            Error::Pki {
                dir: data_dir.clone(),
                source,
            }
        })?;
        tracing::info!(%url, kubeconfig = %kubeconfig_path.display(), "kcm apiserver serving");
        let signing_files = config.tls.then(|| {
            let dir = data_dir.join("pki");
            (dir.join(pki::CA_CERT_FILE), dir.join(pki::CA_KEY_FILE))
        });
        Ok(RunningServer {
            addr: client_addr,
            url,
            kubeconfig_path,
            signing_files,
            service_account_key_file: data_dir
                .join("pki")
                .join(crate::auth::service_account_token::SIGNING_KEY_FILE),
            token,
            ca_pem,
            storage,
            registry,
            shutdown,
            tracker,
        })
    }
}

/// Re-creates the `default/kubernetes` Service and repairs its Endpoints every 10 s, as
/// kube-apiserver's bootstrap controller, until shutdown.
async fn repair_kubernetes_service(
    registry: Arc<Registry>,
    advertise: IpAddr,
    port: u16,
    shutdown: CancellationToken,
) {
    let mut tick =
        tokio::time::interval(crate::registry::kubernetes_service::KUBERNETES_SERVICE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let clock = system_clock();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => {
                // Leave the Endpoints at once rather than after the lease's TTL.
                if let Err(e) = registry.remove_apiserver_lease(advertise, port).await {
                    tracing::debug!(error = %e, "unable to remove this server's endpoint lease");
                }
                return;
            }
            _ = tick.tick() => {}
        }
        if let Err(e) = registry
            .reconcile_kubernetes_endpoints(advertise, port, clock())
            .await
        {
            tracing::warn!(error = %e, "unable to sync the default/kubernetes service");
        }
    }
}

/// Keeps `kube-system/kube-apiserver-legacy-service-account-token-tracking` (the day legacy
/// token use began to be tracked) in place: at once, then every
/// [`TRACKING_RESYNC_INTERVAL`](crate::registry::legacy_token_tracking::TRACKING_RESYNC_INTERVAL),
/// as kube-apiserver's `legacytokentracking` controller, until shutdown.
async fn track_legacy_tokens(registry: Arc<Registry>, shutdown: CancellationToken) {
    let mut tick =
        tokio::time::interval(crate::registry::legacy_token_tracking::TRACKING_RESYNC_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let clock = system_clock();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let today = jiff::Timestamp::from_second(clock())
            .map(|t| t.strftime("%Y-%m-%d").to_string())
            .unwrap_or_default();
        if let Err(e) = registry.ensure_legacy_token_tracking(&today).await {
            tracing::warn!(error = %e, "unable to sync the legacy token tracking ConfigMap");
        }
    }
}

/// Repairs the Service cluster IP and node port allocations from the stored Services every
/// `every` (the first repair ran before serving), as kube-apiserver's repair controllers:
/// allocations left behind by writes of unknown outcome, here or on another API server
/// sharing the store, are freed once they are clearly leaked.
async fn repair_service_allocations(
    registry: Arc<Registry>,
    every: Duration,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = registry.repair_service_allocations().await {
            tracing::warn!(error = %e, "unable to repair the service allocations");
        }
    }
}

/// A started server. Dropping it does not stop it; call [`RunningServer::shutdown`].
pub struct RunningServer {
    addr: SocketAddr,
    url: String,
    kubeconfig_path: PathBuf,
    /// The cluster CA's certificate and key files, with TLS.
    signing_files: Option<(PathBuf, PathBuf)>,
    /// The service account signing key (`pki/sa.key`).
    service_account_key_file: PathBuf,
    token: String,
    ca_pem: Option<String>,
    storage: Arc<dyn Storage>,
    registry: Arc<Registry>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("url", &self.url)
            .field("kubeconfig_path", &self.kubeconfig_path)
            .finish_non_exhaustive()
    }
}

impl RunningServer {
    /// The address clients connect to (the real port; loopback for a wildcard listen).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server URL, e.g. `https://127.0.0.1:6443`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `DATA_DIR/kubeconfig`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The cluster CA's certificate and key files (`DATA_DIR/pki/ca.{crt,key}`), whose
    /// certificates the server accepts as client certificates; `None` without TLS. The CSR
    /// signing controller signs with them (`--cluster-signing-{cert,key}-file`).
    pub fn cluster_signing_files(&self) -> Option<(&Path, &Path)> {
        self.signing_files
            .as_ref()
            .map(|(cert, key)| (cert.as_path(), key.as_path()))
    }

    /// The file of the key service account tokens are signed with (PEM, P-256): what
    /// kube-controller-manager's `--service-account-private-key-file` names in kubeadm.
    pub fn service_account_key_file(&self) -> &Path {
        &self.service_account_key_file
    }

    /// The admin bearer token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The CA certificate (PEM) clients must trust; `None` without TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The store (tests use it to compact or inspect revisions).
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The registry (in-process access without HTTP).
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// A `kube` configuration for this server as the admin user, default namespace `default`.
    pub fn kube_config(&self) -> kube::Config {
        let uri = self
            .url
            .parse::<http::Uri>()
            .unwrap_or_else(|_| http::Uri::from_static("https://127.0.0.1"));
        let mut config = kube::Config::new(uri);
        config.default_namespace = "default".to_owned();
        config.root_cert = self
            .ca_pem
            .as_deref()
            .and_then(pki::first_cert_der)
            .map(|der| vec![der]);
        config.auth_info =
            serde_json::from_value(serde_json::json!({"token": self.token})).unwrap_or_default();
        config
    }

    /// A `kube` client for this server as the admin user. Must be called within a tokio runtime.
    pub fn client(&self) -> Result<kube::Client> {
        kube::Client::try_from(self.kube_config()).map_err(|source| Error::Client {
            url: self.url.clone(),
            source,
        })
    }

    /// A token that is cancelled when the server shuts down.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops accepting, ends watches, lets in-flight requests finish (up to 5 s), and returns.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        self.tracker.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.tracker.wait()).await;
    }
}

/// Opens the configured store.
async fn open_storage(config: &ServerConfig) -> Result<Arc<dyn Storage>> {
    let store = open_backend(config).await?;
    Ok(Arc::new(SizeLimited::new(store, config.max_object_bytes)))
}

/// Opens the configured backend, without the object size limit.
async fn open_backend(config: &ServerConfig) -> Result<Arc<dyn Storage>> {
    match &config.storage {
        StorageBackend::Memory => Ok(Arc::new(MemoryStorage::new())),
        StorageBackend::Custom(s) => Ok(Arc::clone(s)),
        StorageBackend::Etcd(options) => {
            let fail = |source| Error::Storage {
                backend: "etcd",
                source,
            };
            let etcd = crate::storage::EtcdStorage::connect(options.clone())
                .await
                .map_err(fail)?;
            let cache = WatchCache::new(Arc::new(etcd), DEFAULT_WATCH_CACHE_CAPACITY)
                .await
                .map_err(fail)?;
            Ok(Arc::new(cache))
        }
        StorageBackend::Sqlite => {
            let options = SqliteOptions {
                compact_retain: config.compact_retain,
                compact_interval: config.compaction_interval,
                ..SqliteOptions::default()
            };
            let sqlite = SqliteStorage::open(config.data_dir.join("state.db"), options)
                .await
                .map_err(|source| Error::Storage {
                    backend: "sqlite",
                    source,
                })?;
            let cache = WatchCache::new(Arc::new(sqlite), DEFAULT_WATCH_CACHE_CAPACITY)
                .await
                .map_err(|source| Error::Storage {
                    backend: "sqlite",
                    source,
                })?;
            Ok(Arc::new(cache))
        }
    }
}

/// The admin client certificate and key in `pki_dir` (`admin.crt`, `admin.key`), issued
/// by the CA on first use.
fn load_or_issue_admin_cert(pki_dir: &Path) -> Result<(String, String)> {
    let (cert_path, key_path) = (pki_dir.join("admin.crt"), pki_dir.join("admin.key"));
    if let (Ok(cert), Ok(key)) = (
        std::fs::read_to_string(&cert_path),
        std::fs::read_to_string(&key_path),
    ) {
        return Ok((cert, key));
    }
    let pki_err = |why: String| Error::Pki {
        dir: pki_dir.to_path_buf(),
        source: pki::Error::Parse {
            path: pki_dir.join(pki::CA_KEY_FILE),
            why,
        },
    };
    let ca_key = std::fs::read_to_string(pki_dir.join(pki::CA_KEY_FILE))
        .map_err(|e| pki_err(e.to_string()))?;
    let (cert, key) = crate::auth::client_cert::issue(
        &ca_key,
        crate::auth::user::ADMIN_USER,
        &[crate::auth::user::SYSTEM_MASTERS],
    )
    .map_err(pki_err)?;
    let write = |path: &Path, contents: &str, mode| {
        pki::write_file(path, contents.as_bytes(), mode).map_err(|source| Error::Pki {
            dir: pki_dir.to_path_buf(),
            source,
        })
    };
    write(&key_path, &key, 0o600)?;
    write(&cert_path, &cert, 0o644)?;
    Ok((cert, key))
}

/// Reads the token file, or writes a fresh random token (32 bytes, hex) to it.
fn load_or_create_token(path: &Path) -> Result<String> {
    match std::fs::read_to_string(path) {
        Ok(t) if !t.trim().is_empty() => return Ok(t.trim().to_owned()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(Error::Io {
                op: "reading",
                path: path.to_path_buf(),
                source,
            });
        }
    }
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    pki::write_file(path, token.as_bytes(), 0o600).map_err(|e| Error::Io {
        op: "writing",
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(token)
}

/// Accepts connections until shutdown; each is served on its own task.
async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<TlsAcceptor>,
    app: axum::Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let stream = GuardedStream::new(stream, limits);
        let header_read_timeout = limits.first_byte_timeout;
        let app = app.clone();
        let acceptor = acceptor.clone();
        let shutdown = shutdown.clone();
        tracker.spawn(async move {
            let service = TowerToHyperService::new(app.clone());
            match acceptor {
                Some(acceptor) => {
                    let tls = match tokio::time::timeout(
                        Duration::from_secs(10),
                        acceptor.accept(stream),
                    )
                    .await
                    {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    };
                    // The client certificate (if any) goes with every request of the
                    // connection; the authentication filter verifies it.
                    let peer_cert = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .map(|c| PeerCertificate(Arc::new(c.as_ref().to_vec())));
                    let service = match peer_cert {
                        Some(cert) => TowerToHyperService::new(app.layer(axum::Extension(cert))),
                        None => service,
                    };
                    serve_connection(TokioIo::new(tls), service, header_read_timeout, shutdown)
                        .await;
                }
                None => {
                    serve_connection(TokioIo::new(stream), service, header_read_timeout, shutdown)
                        .await;
                }
            }
        });
    }
}

/// Serves one connection (HTTP/1.1 or HTTP/2), shutting it down gracefully on shutdown.
async fn serve_connection<I>(
    io: I,
    service: TowerToHyperService<axum::Router>,
    header_read_timeout: Duration,
    shutdown: CancellationToken,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // A slowloris client trickling header bytes is cut off (HTTP/1; HTTP/2 frames its
    // headers and bounds them by its own settings).
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    tokio::select! {
        res = conn.as_mut() => {
            if let Err(e) = res {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        }
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Compacts an in-memory store periodically, as the SQLite store compacts itself (and as
/// kube-apiserver's `compact.go` compacts etcd): each tick compacts to the revision current at
/// the previous tick, keeping at least `retain` revisions.
async fn compact_periodically(
    storage: Arc<dyn Storage>,
    every: Duration,
    retain: i64,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(every);
    ticker.tick().await;
    let mut observed = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let Ok(current) = storage.current_revision().await else {
            continue;
        };
        let Some(previous) = observed.replace(current) else {
            continue;
        };
        let Ok(compacted) = storage.compacted_revision().await else {
            continue;
        };
        let target = previous.min(current - retain.max(0));
        if target > compacted
            && let Err(e) = storage.compact(target).await
        {
            tracing::warn!(error = %e, "compaction failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStorage;

    /// Lets the spawned tasks run what became ready (paused time never advances meanwhile).
    async fn settle() {
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
    }

    /// Each tick compacts to the revision of the tick before, so a superseded revision (a
    /// `continue` token's) is unreadable within two intervals while the last interval's
    /// history stays; the first tick only observes.
    #[tokio::test(start_paused = true)]
    async fn memory_compaction_trails_the_store_by_one_interval() {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let every = Duration::from_secs(300);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(compact_periodically(
            Arc::clone(&storage),
            every,
            0,
            shutdown.clone(),
        ));
        settle().await;
        let value = || bytes::Bytes::from_static(b"v");
        let r1 = storage.create("/k/1", value()).await.expect("create");
        tokio::time::advance(every).await;
        settle().await;
        let r2 = storage.create("/k/2", value()).await.expect("create");
        assert_eq!(storage.compacted_revision().await.expect("compacted"), 0);
        tokio::time::advance(every).await;
        settle().await;
        assert_eq!(storage.compacted_revision().await.expect("compacted"), r1);
        tokio::time::advance(every).await;
        settle().await;
        assert_eq!(storage.compacted_revision().await.expect("compacted"), r2);
        shutdown.cancel();
        task.await.expect("compactor");
    }
}
