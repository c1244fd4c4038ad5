//! Per-controller clients: each controller gets a client of its own, with its own `--kube-api-qps`/`--kube-api-burst` token bucket, and with `--use-service-account-credentials` talks to the API server as its own service account in `kube-system` (upstream's `SimpleControllerClientBuilder` and `DynamicControllerClientBuilder`).
//!
//! As upstream's `ClientOrDie(name)`, which builds a new clientset (and so a new client-side
//! rate limiter) on every call, no controller's requests queue behind another's: the
//! ReplicaSet controller's creates do not wait for the node controller's status writes. The
//! manager's informers and event sinks keep the manager's own client and bucket (upstream's
//! `shared-informers` client).
//!
//! The manager's informers keep the manager's own credentials (upstream's root client builder);
//! what a controller writes or reads directly goes out as
//! `system:serviceaccount:kube-system:<controller>`, so the `system:controller:*` ClusterRoles
//! are what it may do. The service account is created when missing; its token comes from the
//! TokenRequest API (one hour, renewed when 20 % of its life is left, or at once after a 401).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm_machinery::client::{BearerToken, ClientMetrics, build_client_with, rate_limit_layer};
use kube::api::{Api, PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Where the controllers' service accounts live (upstream's `metav1.NamespaceSystem`).
pub const SERVICE_ACCOUNT_NAMESPACE: &str = "kube-system";

/// How long a requested token lives (upstream's `defaultExpirationSeconds`).
const EXPIRATION_SECONDS: i64 = 3600;
/// The share of a token's life left when it is renewed (upstream's `defaultLeewayPercent`).
const LEEWAY_PERCENT: u32 = 20;
/// A shorter lifetime than this is taken as clock skew and pinned to it (as upstream).
const MIN_LIFETIME: Duration = Duration::from_secs(600);
/// First wait between attempts to get a token; doubles, four attempts (upstream's back-off).
const FIRST_RETRY: Duration = Duration::from_millis(500);
const ATTEMPTS: u32 = 4;
/// After a failed renewal the old token is kept and renewal retried this much later.
const RENEW_RETRY: Duration = Duration::from_secs(10);

/// Errors building a controller's client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The service account could not be read or created, or no token issued, after retries.
    #[error("failed to get token for {namespace}/{name}: {source}")]
    Token {
        /// `kube-system`.
        namespace: String,
        /// The service account.
        name: String,
        /// The last error.
        #[source]
        source: kube::Error,
    },
    /// The API server answered a TokenRequest without a usable token.
    #[error("token request for {namespace}/{name}: {reason}")]
    BadToken {
        /// `kube-system`.
        namespace: String,
        /// The service account.
        name: String,
        /// What was wrong.
        reason: &'static str,
    },
    /// The client could not be built.
    #[error(transparent)]
    Build(#[from] kcm_machinery::client::Error),
}

/// Hands each controller its client.
#[derive(Clone)]
pub enum ControllerClients {
    /// Every controller uses the manager's credentials (upstream's
    /// `SimpleControllerClientBuilder`), on a client and bucket of its own.
    Root(Arc<ClientFactory>),
    /// Each controller uses its own service account's credentials.
    ServiceAccounts(Arc<ServiceAccountClients>),
}

/// Builds clients for one API server, each with a fresh QPS/burst bucket (upstream's
/// `rest.RESTClientFor` with no shared `RateLimiter`).
pub struct ClientFactory {
    /// The manager's client configuration (server, CA, credentials).
    config: kube::Config,
    /// `--kube-api-qps`.
    qps: f32,
    /// `--kube-api-burst`.
    burst: u32,
    /// `rest_client_*` metrics, shared by every client.
    metrics: Arc<ClientMetrics>,
}

impl ClientFactory {
    /// Clients for `config` limited to `qps`/`burst` each.
    pub fn new(config: kube::Config, qps: f32, burst: u32, metrics: Arc<ClientMetrics>) -> Self {
        Self {
            config,
            qps,
            burst,
            metrics,
        }
    }

    /// A new client with its own bucket; with `token`, authenticating with it instead of the
    /// configuration's credentials.
    pub fn build(&self, token: Option<Arc<BearerToken>>) -> Result<kube::Client, Error> {
        Ok(build_client_with(
            self.config.clone(),
            &rate_limit_layer(self.qps, self.burst),
            Some(Arc::clone(&self.metrics)),
            token,
        )?)
    }
}

impl std::fmt::Debug for ControllerClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Root(_) => f.write_str("ControllerClients::Root"),
            Self::ServiceAccounts(clients) => clients.fmt(f),
        }
    }
}

impl ControllerClients {
    /// The client for a controller whose service account is `service_account` (`None`: one
    /// that names none, e.g. registered by a library user; it gets the manager's client).
    pub async fn client_for(&self, service_account: Option<&str>) -> Result<kube::Client, Error> {
        match (self, service_account) {
            (Self::ServiceAccounts(clients), Some(name)) => clients.client(name).await,
            (Self::ServiceAccounts(clients), None) => clients.factory.build(None),
            (Self::Root(factory), _) => factory.build(None),
        }
    }
}

/// Builds service-account clients: one token per service account (three controllers share
/// `node-controller`), each with a task keeping it fresh until `cancel` fires, and one client
/// (and bucket) per call.
pub struct ServiceAccountClients {
    /// The manager's client: creates the service accounts and requests their tokens.
    root: kube::Client,
    /// Builds the clients; their credentials are replaced by the token.
    factory: ClientFactory,
    /// The tokens fetched so far, by service account.
    tokens: Mutex<HashMap<String, Arc<BearerToken>>>,
    /// Stops the token renewals.
    cancel: CancellationToken,
}

impl std::fmt::Debug for ServiceAccountClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountClients")
            .field("server", &self.factory.config.cluster_url)
            .finish_non_exhaustive()
    }
}

impl ServiceAccountClients {
    /// Clients for the API server of `config`, created through `root`; renewals stop when
    /// `cancel` fires.
    pub fn new(root: kube::Client, factory: ClientFactory, cancel: CancellationToken) -> Self {
        Self {
            root,
            factory,
            tokens: Mutex::new(HashMap::new()),
            cancel,
        }
    }

    /// A new client authenticating as `kube-system/<name>`, creating the service account if
    /// missing (upstream's `getOrCreateServiceAccount`); controllers sharing the account share
    /// its token, not their buckets.
    pub async fn client(&self, name: &str) -> Result<kube::Client, Error> {
        let known = self.lock().get(name).cloned();
        let slot = match known {
            Some(slot) => slot,
            None => self.fetch_token(name).await?,
        };
        self.factory.build(Some(slot))
    }

    /// Fetches `name`'s first token and starts keeping it fresh.
    async fn fetch_token(&self, name: &str) -> Result<Arc<BearerToken>, Error> {
        let (token, renew_at) = fetch_with_retries(&self.root, name).await?;
        let slot = BearerToken::new(&token).map_err(|_| Error::BadToken {
            namespace: SERVICE_ACCOUNT_NAMESPACE.to_owned(),
            name: name.to_owned(),
            reason: "the token is not a valid header value",
        })?;
        // Two controllers sharing an account may race here: keep the first token.
        let mut tokens = self.lock();
        if let Some(slot) = tokens.get(name) {
            return Ok(Arc::clone(slot));
        }
        tokens.insert(name.to_owned(), Arc::clone(&slot));
        drop(tokens);
        tokio::spawn(renew(
            self.root.clone(),
            name.to_owned(),
            Arc::clone(&slot),
            renew_at,
            self.cancel.clone(),
        ));
        Ok(slot)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<BearerToken>>> {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Keeps `slot` holding a valid token for `name` until `cancel` fires: renews at `renew_at`,
/// or at once when a request was refused with 401.
async fn renew(
    root: kube::Client,
    name: String,
    slot: Arc<BearerToken>,
    mut renew_at: Instant,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep_until(renew_at) => {}
            _ = slot.refresh_requested() => {}
        }
        match fetch_with_retries(&root, &name).await {
            Ok((token, next)) => {
                if slot.set(&token).is_err() {
                    tracing::warn!(service_account = %name, "token refused: not a header value");
                }
                renew_at = next;
            }
            Err(err) => {
                tracing::warn!(service_account = %name, %err, "renewing the controller's token failed; retrying");
                renew_at = Instant::now() + RENEW_RETRY;
            }
        }
    }
}

/// Ensures the service account exists and requests a token, retrying with back-off
/// (upstream's `tokenSourceImpl.Token`). Returns the token and when to renew it.
async fn fetch_with_retries(root: &kube::Client, name: &str) -> Result<(String, Instant), Error> {
    let mut wait = FIRST_RETRY;
    let mut attempt = 1;
    loop {
        match fetch(root, name).await {
            Ok(Ok(fetched)) => return Ok(fetched),
            Ok(Err(reason)) => {
                return Err(Error::BadToken {
                    namespace: SERVICE_ACCOUNT_NAMESPACE.to_owned(),
                    name: name.to_owned(),
                    reason,
                });
            }
            Err(source) if attempt >= ATTEMPTS => {
                return Err(Error::Token {
                    namespace: SERVICE_ACCOUNT_NAMESPACE.to_owned(),
                    name: name.to_owned(),
                    source,
                });
            }
            Err(err) => {
                tracing::info!(service_account = %name, %err, "get token failed");
                tokio::time::sleep(wait).await;
                wait *= 2;
                attempt += 1;
            }
        }
    }
}

/// One attempt: the outer error is retried, the inner one is not.
async fn fetch(
    root: &kube::Client,
    name: &str,
) -> Result<Result<(String, Instant), &'static str>, kube::Error> {
    get_or_create_service_account(root, name).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(root.clone(), SERVICE_ACCOUNT_NAMESPACE);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(EXPIRATION_SECONDS),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?;
    let Some(status) = issued.status else {
        return Ok(Err("no status in the answer"));
    };
    let Some(token) = status.token.filter(|t| !t.is_empty()) else {
        return Ok(Err("empty token"));
    };
    let Some(expiration) = status.expiration_timestamp else {
        return Ok(Err("no expirationTimestamp in the answer"));
    };
    let left = expiration.0.duration_since(jiff::Timestamp::now());
    let lifetime = Duration::try_from(left)
        .unwrap_or_default()
        .max(MIN_LIFETIME);
    Ok(Ok((token, Instant::now() + renewal_delay(lifetime))))
}

/// When to renew a token living `lifetime`: with [`LEEWAY_PERCENT`] of it left.
fn renewal_delay(lifetime: Duration) -> Duration {
    lifetime.mul_f64(f64::from(100 - LEEWAY_PERCENT) / 100.0)
}

/// Reads `kube-system/<name>`, creating it (and the namespace, tolerating failure) when
/// missing; a concurrent create is fine.
async fn get_or_create_service_account(root: &kube::Client, name: &str) -> Result<(), kube::Error> {
    let accounts: Api<ServiceAccount> = Api::namespaced(root.clone(), SERVICE_ACCOUNT_NAMESPACE);
    if accounts.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let namespaces: Api<Namespace> = Api::all(root.clone());
    if matches!(
        namespaces.get_opt(SERVICE_ACCOUNT_NAMESPACE).await,
        Ok(None)
    ) {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(SERVICE_ACCOUNT_NAMESPACE.to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        if let Err(err) = namespaces.create(&PostParams::default(), &namespace).await {
            tracing::info!(namespace = SERVICE_ACCOUNT_NAMESPACE, %err, "create non-exist namespace");
        }
    }
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(SERVICE_ACCOUNT_NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two controllers' clients at a burst of 1 and a near-zero QPS: the first controller's
    /// second request waits for its bucket, the second controller's first request does not
    /// (with one shared bucket it would wait behind it, about 1,000 s).
    #[tokio::test]
    async fn each_controller_client_has_its_own_bucket() {
        use k8s_openapi::api::core::v1::Pod;

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = axum::Router::new().route(
            "/api/v1/namespaces/default/pods/{name}",
            axum::routing::get(|| async {
                axum::Json(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "default"}}))
            }),
        );
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let config = kube::Config::new(format!("http://{addr}").parse().expect("url"));
        let factory = ClientFactory::new(config, 0.001, 1, Arc::new(ClientMetrics::new()));
        let clients = ControllerClients::Root(Arc::new(factory));

        let first: Api<Pod> = Api::default_namespaced(
            clients
                .client_for(Some("replicaset-controller"))
                .await
                .expect("client"),
        );
        first.get("p").await.expect("the first controller's burst");
        let waiting = tokio::spawn({
            let first = first.clone();
            async move { first.get("p").await }
        });

        let second: Api<Pod> = Api::default_namespaced(
            clients
                .client_for(Some("deployment-controller"))
                .await
                .expect("client"),
        );
        // A guard against a hang, not a timing assertion: the request needs no token wait.
        tokio::time::timeout(Duration::from_secs(60), second.get("p"))
            .await
            .expect("the second controller does not queue behind the first")
            .expect("get");
        assert!(
            !waiting.is_finished(),
            "the first controller's bucket is empty"
        );
        waiting.abort();
        server.abort();
    }

    #[test]
    fn tokens_are_renewed_with_a_fifth_of_their_life_left() {
        assert_eq!(
            renewal_delay(Duration::from_secs(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(renewal_delay(MIN_LIFETIME), Duration::from_secs(480));
    }
}
