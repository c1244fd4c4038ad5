//! Per-controller clients: with `--use-service-account-credentials` each controller talks to the API server as its own service account in `kube-system`, as upstream's `DynamicControllerClientBuilder`.
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
use kcm_machinery::client::{BearerToken, ClientMetrics, RateLimitLayer, build_client_with};
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
    /// Every controller uses the manager's client (upstream's `SimpleControllerClientBuilder`).
    Root(kube::Client),
    /// Each controller uses its own service account's credentials.
    ServiceAccounts(Arc<ServiceAccountClients>),
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
            (Self::ServiceAccounts(clients), None) => Ok(clients.root.clone()),
            (Self::Root(root), _) => Ok(root.clone()),
        }
    }
}

/// Builds service-account clients, one per service account (three controllers share
/// `node-controller`), each with a task keeping its token fresh until `cancel` fires.
pub struct ServiceAccountClients {
    /// The manager's client: creates the service accounts and requests their tokens.
    root: kube::Client,
    /// The manager's client configuration (server, CA); its credentials are replaced.
    config: kube::Config,
    /// The process-wide QPS/burst limiter, shared with the manager's client.
    limiter: RateLimitLayer,
    /// `rest_client_*` metrics.
    metrics: Arc<ClientMetrics>,
    /// Clients built so far, by service account.
    built: Mutex<HashMap<String, kube::Client>>,
    /// Stops the token renewals.
    cancel: CancellationToken,
}

impl std::fmt::Debug for ServiceAccountClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountClients")
            .field("server", &self.config.cluster_url)
            .finish_non_exhaustive()
    }
}

impl ServiceAccountClients {
    /// Clients for the API server of `config`, created through `root`; renewals stop when
    /// `cancel` fires.
    pub fn new(
        root: kube::Client,
        config: kube::Config,
        limiter: RateLimitLayer,
        metrics: Arc<ClientMetrics>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            root,
            config,
            limiter,
            metrics,
            built: Mutex::new(HashMap::new()),
            cancel,
        }
    }

    /// The client authenticating as `kube-system/<name>`, creating the service account if
    /// missing (upstream's `getOrCreateServiceAccount`).
    pub async fn client(&self, name: &str) -> Result<kube::Client, Error> {
        if let Some(client) = self.lock().get(name) {
            return Ok(client.clone());
        }
        let (token, renew_at) = fetch_with_retries(&self.root, name).await?;
        let slot = BearerToken::new(&token).map_err(|_| Error::BadToken {
            namespace: SERVICE_ACCOUNT_NAMESPACE.to_owned(),
            name: name.to_owned(),
            reason: "the token is not a valid header value",
        })?;
        let client = build_client_with(
            self.config.clone(),
            &self.limiter,
            Some(Arc::clone(&self.metrics)),
            Some(Arc::clone(&slot)),
        )?;
        // Two controllers sharing an account may race here: keep the first client.
        let mut built = self.lock();
        if let Some(client) = built.get(name) {
            return Ok(client.clone());
        }
        built.insert(name.to_owned(), client.clone());
        drop(built);
        tokio::spawn(renew(
            self.root.clone(),
            name.to_owned(),
            slot,
            renew_at,
            self.cancel.clone(),
        ));
        Ok(client)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, kube::Client>> {
        self.built.lock().unwrap_or_else(|e| e.into_inner())
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

    #[test]
    fn tokens_are_renewed_with_a_fifth_of_their_life_left() {
        assert_eq!(
            renewal_delay(Duration::from_secs(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(renewal_delay(MIN_LIFETIME), Duration::from_secs(480));
    }
}
