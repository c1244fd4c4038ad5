//! The service account token controller: fills in `kubernetes.io/service-account-token` Secrets (a legacy token, `ca.crt`, `namespace`) and deletes those whose account is gone (upstream `tokens_controller.go`).
//!
//! Two queues, as upstream's. A ServiceAccount added, updated or deleted queues its
//! namespace, name and uid; a worker finding it gone from the cache deletes every cached token
//! Secret naming it (uid precondition). A token Secret added, updated or deleted queues its
//! namespace, name, uid and the account it names; a worker then syncs it, as upstream's
//! `syncSecret`: gone from the cache, the reference to it is dropped from its account's
//! `secrets`; its account missing (from the cache and then the API) or of another uid, the
//! Secret is deleted; otherwise missing `token` or `namespace` data, or a `ca.crt` other than
//! the root CA, are written by an update of the live Secret. API calls are behind
//! [`TokensClient`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::controller::{ApiStatus, ErrorPolicy, run_controller};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    DeletedObject, InformerRegistrar, InformerSynced, NAMESPACE_INDEX, ResourceEventHandler,
    SharedInformerFactory, all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::core::Status;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::tokens_client::{ApiTokensClient, TokensClient};

/// kube-controller-manager's name of this controller.
pub const TOKENS_CONTROLLER_NAME: &str = "serviceaccount-token-controller";
/// The older name `--controllers` also accepts.
pub const TOKENS_CONTROLLER_ALIAS: &str = "serviceaccount-token";
/// The ServiceAccount queue's name (upstream's `serviceaccount_tokens_service`).
pub const TOKENS_SERVICE_ACCOUNT_QUEUE: &str = "serviceaccount_tokens_service";
/// The Secret queue's name. (Upstream's `NewTokensController` gives this queue the
/// ServiceAccount queue's name too; kcm keeps the two queues' metrics apart.)
pub const TOKENS_SECRET_QUEUE: &str = "serviceaccount_tokens_secret";
/// The Secret type this controller fills in.
pub const SERVICE_ACCOUNT_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation naming the Secret's account.
pub const SERVICE_ACCOUNT_NAME_KEY: &str = "kubernetes.io/service-account.name";
/// The annotation holding the account's uid.
pub const SERVICE_ACCOUNT_UID_KEY: &str = "kubernetes.io/service-account.uid";
/// The data key of the token.
pub const TOKEN_KEY: &str = "token";
/// The data key of the root CA bundle.
pub const CA_CERT_KEY: &str = "ca.crt";
/// The data key of the namespace.
pub const NAMESPACE_KEY: &str = "namespace";
/// The legacy tokens' issuer (upstream's `LegacyIssuer`).
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// kube-controller-manager's worker count: `--concurrent-serviceaccount-token-syncs` (5).
pub const TOKENS_WORKERS: usize = 5;
/// A Secret is retried this many times before it is dropped (upstream's `maxRetries`).
pub const MAX_RETRIES: usize = 10;

const SECRET_ERROR_POLICY: ErrorPolicy<SecretQueueKey, TokenError> =
    ErrorPolicy::new("error syncing token secret")
        .with_max_retries(MAX_RETRIES, "retried too often");
const ACCOUNT_ERROR_POLICY: ErrorPolicy<ServiceAccountQueueKey, TokenError> =
    ErrorPolicy::new("error syncing service account tokens")
        .with_max_retries(MAX_RETRIES, "retried too often");

/// Why a Secret sync (or the signing key) failed.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// An API call failed.
    #[error("{what} secret {key}: {message}", message = error_message(.source))]
    Api {
        /// What was attempted.
        what: &'static str,
        /// The Secret's key.
        key: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The key file is unreadable or holds no usable key.
    #[error("error reading key for service account token controller: {0}")]
    Key(String),
    /// Signing failed.
    #[error("generating token: {0}")]
    Sign(String),
}

impl ApiStatus for TokenError {
    fn api_status(&self) -> Option<&Status> {
        match self {
            TokenError::Api { source, .. } => source.api_status(),
            _ => None,
        }
    }
}

/// The claims of a legacy token (upstream's `LegacyClaims`: `iss`, `sub` and the
/// `kubernetes.io/serviceaccount/*` private claims).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct LegacyClaims {
    /// [`LEGACY_ISSUER`].
    pub iss: String,
    /// `system:serviceaccount:NS:NAME`.
    pub sub: String,
    /// The namespace.
    #[serde(rename = "kubernetes.io/serviceaccount/namespace")]
    pub namespace: String,
    /// The Secret's name.
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name")]
    pub secret_name: String,
    /// The account's name.
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name")]
    pub service_account_name: String,
    /// The account's uid.
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid")]
    pub service_account_uid: String,
}

impl LegacyClaims {
    /// The claims of `secret`'s token for `account`.
    pub fn new(namespace: &str, name: &str, uid: &str, secret_name: &str) -> Self {
        Self {
            iss: LEGACY_ISSUER.to_owned(),
            sub: format!("system:serviceaccount:{namespace}:{name}"),
            namespace: namespace.to_owned(),
            secret_name: secret_name.to_owned(),
            service_account_name: name.to_owned(),
            service_account_uid: uid.to_owned(),
        }
    }
}

/// Signs legacy tokens with the `--service-account-private-key-file` key: ES256 for a P-256
/// EC key, RS256 for an RSA key (upstream's `JWTTokenGenerator` picks by key type; other
/// curves are refused).
pub struct TokenGenerator {
    algorithm: jsonwebtoken::Algorithm,
    key: jsonwebtoken::EncodingKey,
}

impl std::fmt::Debug for TokenGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenGenerator")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl TokenGenerator {
    /// The generator for the PEM private key in `path`.
    pub fn from_file(path: &Path) -> Result<Self, TokenError> {
        let pem =
            std::fs::read(path).map_err(|e| TokenError::Key(format!("{}: {e}", path.display())))?;
        Self::from_pem(&pem)
    }

    /// The generator for a PEM private key: PKCS#8 or SEC1 P-256, or PKCS#1 RSA.
    pub fn from_pem(pem: &[u8]) -> Result<Self, TokenError> {
        use rustls::pki_types::PrivateKeyDer;
        let mut reader = pem;
        let der = rustls_pemfile::private_key(&mut reader)
            .map_err(|e| TokenError::Key(e.to_string()))?
            .ok_or_else(|| TokenError::Key("no private key found".to_owned()))?;
        match der {
            PrivateKeyDer::Pkcs1(rsa) => Ok(Self {
                algorithm: jsonwebtoken::Algorithm::RS256,
                key: jsonwebtoken::EncodingKey::from_rsa_der(rsa.secret_pkcs1_der()),
            }),
            other => {
                let pair =
                    rcgen::KeyPair::try_from(&other).map_err(|e| TokenError::Key(e.to_string()))?;
                if pair.is_compatible(&rcgen::PKCS_ECDSA_P256_SHA256) {
                    Ok(Self {
                        algorithm: jsonwebtoken::Algorithm::ES256,
                        key: jsonwebtoken::EncodingKey::from_ec_der(&pair.serialize_der()),
                    })
                } else {
                    Err(TokenError::Key(
                        "unsupported key type: only P-256 EC and PKCS#1 RSA keys".to_owned(),
                    ))
                }
            }
        }
    }

    /// The signing algorithm.
    pub fn algorithm(&self) -> jsonwebtoken::Algorithm {
        self.algorithm
    }

    /// Signs `claims` (no `kid`, as upstream's legacy tokens).
    pub fn generate(&self, claims: &LegacyClaims) -> Result<String, TokenError> {
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(self.algorithm),
            claims,
            &self.key,
        )
        .map_err(|e| TokenError::Sign(e.to_string()))
    }
}

/// The data a token Secret lacks, as upstream's `secretUpdateNeeded`: `(needs ca.crt, needs
/// namespace, needs token)`. A `ca.crt` other than `root_ca` is replaced; a custom
/// `namespace` is kept. (A missing uid annotation alone is no reason to update, as upstream.)
pub fn secret_needs(secret: &Secret, root_ca: &[u8]) -> (bool, bool, bool) {
    let data = secret.data.as_ref();
    let get = |k: &str| data.and_then(|d| d.get(k)).map(|b| b.0.as_slice());
    let needs_ca = !root_ca.is_empty() && get(CA_CERT_KEY) != Some(root_ca);
    let needs_namespace = get(NAMESPACE_KEY).is_none_or(<[u8]>::is_empty);
    let needs_token = get(TOKEN_KEY).is_none_or(<[u8]>::is_empty);
    (needs_ca, needs_namespace, needs_token)
}

fn annotation<'a>(secret: &'a Secret, key: &str) -> &'a str {
    secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map_or("", String::as_str)
}

/// Whether `secret` is a token Secret naming `account` (and its uid, when it records one),
/// as upstream's `serviceaccount.IsServiceAccountToken`.
pub fn is_service_account_token(secret: &Secret, account: &ServiceAccount) -> bool {
    if secret.type_.as_deref() != Some(SERVICE_ACCOUNT_TOKEN_TYPE) {
        return false;
    }
    let name = annotation(secret, SERVICE_ACCOUNT_NAME_KEY);
    let uid = annotation(secret, SERVICE_ACCOUNT_UID_KEY);
    if Some(name) != account.metadata.name.as_deref() {
        return false;
    }
    uid.is_empty() || Some(uid) == account.metadata.uid.as_deref()
}

/// Signs the claims of a legacy token (upstream's `serviceaccount.TokenGenerator`): the
/// seam that lets tests write a fixed token.
pub trait GenerateToken: Send + Sync {
    /// The signed token for `claims`.
    fn generate_token(&self, claims: &LegacyClaims) -> Result<String, TokenError>;
}

impl GenerateToken for TokenGenerator {
    fn generate_token(&self, claims: &LegacyClaims) -> Result<String, TokenError> {
        self.generate(claims)
    }
}

/// A ServiceAccount queue item (upstream's `serviceAccountQueueKey`): the account as it was
/// when queued, so a deleted one can still be matched to its tokens.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServiceAccountQueueKey {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The uid.
    pub uid: String,
}

impl ServiceAccountQueueKey {
    /// The key of `account` (upstream's `makeServiceAccountKey`).
    pub fn of(account: &ServiceAccount) -> Self {
        Self {
            namespace: account.metadata.namespace.clone().unwrap_or_default(),
            name: account.metadata.name.clone().unwrap_or_default(),
            uid: account.metadata.uid.clone().unwrap_or_default(),
        }
    }
}

/// A Secret queue item (upstream's `secretQueueKey`): the Secret and the account it named
/// when queued, so a deleted Secret's reference can still be removed from its account.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SecretQueueKey {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The Secret's uid.
    pub uid: String,
    /// The account's name (the [`SERVICE_ACCOUNT_NAME_KEY`] annotation).
    pub sa_name: String,
    /// The account's uid (the [`SERVICE_ACCOUNT_UID_KEY`] annotation; may be empty).
    pub sa_uid: String,
}

impl SecretQueueKey {
    /// The key of `secret` (upstream's `makeSecretQueueKey`).
    pub fn of(secret: &Secret) -> Self {
        Self {
            namespace: secret.metadata.namespace.clone().unwrap_or_default(),
            name: secret.metadata.name.clone().unwrap_or_default(),
            uid: secret.metadata.uid.clone().unwrap_or_default(),
            sa_name: annotation(secret, SERVICE_ACCOUNT_NAME_KEY).to_owned(),
            sa_uid: annotation(secret, SERVICE_ACCOUNT_UID_KEY).to_owned(),
        }
    }
}

impl std::fmt::Display for SecretQueueKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Upstream's `RemoveTokenBackoff` (10 steps of 100ms; upstream adds up to 100% jitter,
/// kcm waits the plain step): how a deleted Secret's reference removal retries conflicts.
pub const REMOVE_TOKEN_BACKOFF: (usize, Duration) = (10, Duration::from_millis(100));

/// Fills in and garbage-collects token Secrets, as upstream's `TokensController`.
pub struct TokensController {
    /// The Secret cache (read only; token Secrets are the ones that matter).
    secrets: Indexer<Secret>,
    /// The ServiceAccount cache (read only).
    accounts: Indexer<ServiceAccount>,
    /// Whether both informers have synced (empty for bare caches).
    caches_synced: Vec<InformerSynced>,
    /// Accounts added, updated or deleted (upstream's `syncServiceAccountQueue`): a deleted
    /// account's token Secrets are deleted.
    account_queue: RateLimitingQueue<ServiceAccountQueueKey>,
    /// Token Secrets added, updated or deleted (upstream's `syncSecretQueue`).
    secret_queue: RateLimitingQueue<SecretQueueKey>,
    /// The API calls. Test seam: [`super::tokens_client::FakeTokensClient`].
    client: Arc<dyn TokensClient>,
    /// Signs missing tokens. Test seam.
    generator: Arc<dyn GenerateToken>,
    /// The `ca.crt` every token Secret should carry (empty: none is written).
    root_ca: Vec<u8>,
}

impl std::fmt::Debug for TokensController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokensController")
            .field("account_queue_len", &self.account_queue.len())
            .field("secret_queue_len", &self.secret_queue.len())
            .finish_non_exhaustive()
    }
}

/// The informer handlers: they only queue keys.
#[derive(Clone)]
struct Handlers {
    account_queue: RateLimitingQueue<ServiceAccountQueueKey>,
    secret_queue: RateLimitingQueue<SecretQueueKey>,
}

impl Handlers {
    /// Upstream's `queueServiceAccountSync`.
    fn enqueue_account(&self, account: &ServiceAccount) {
        self.account_queue.add(ServiceAccountQueueKey::of(account));
    }

    /// Upstream's `queueSecretSync`, behind the handler's filter on the token type.
    fn enqueue_secret(&self, secret: &Secret) {
        if secret.type_.as_deref() == Some(SERVICE_ACCOUNT_TOKEN_TYPE) {
            self.secret_queue.add(SecretQueueKey::of(secret));
        }
    }
}

impl ResourceEventHandler<Secret> for Handlers {
    fn on_add(&self, secret: Arc<Secret>, _is_in_initial_list: bool) {
        self.enqueue_secret(&secret);
    }
    fn on_update(&self, _old: Arc<Secret>, new: Arc<Secret>) {
        self.enqueue_secret(&new);
    }
    fn on_delete(&self, secret: DeletedObject<Secret>) {
        self.enqueue_secret(secret.object());
    }
}

impl ResourceEventHandler<ServiceAccount> for Handlers {
    fn on_add(&self, account: Arc<ServiceAccount>, _is_in_initial_list: bool) {
        self.enqueue_account(&account);
    }
    fn on_update(&self, _old: Arc<ServiceAccount>, new: Arc<ServiceAccount>) {
        self.enqueue_account(&new);
    }
    fn on_delete(&self, account: DeletedObject<ServiceAccount>) {
        self.enqueue_account(account.object());
    }
}

impl TokensController {
    /// The controller kube-controller-manager runs, over the factory's Secret and
    /// ServiceAccount informers, as upstream's `NewTokensController`.
    ///
    /// # Panics
    ///
    /// Builds the work queues, which spawn timer tasks: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        generator: TokenGenerator,
        root_ca: Vec<u8>,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let secrets = factory.informer_for::<Secret>();
        let accounts = factory.informer_for::<ServiceAccount>();
        let mut controller = Self::with_caches(
            secrets.indexer().clone(),
            accounts.indexer().clone(),
            Arc::new(ApiTokensClient::new(client)),
            Arc::new(generator),
            root_ca,
            metrics,
        );
        let handlers = controller.handlers();
        controller.caches_synced = InformerRegistrar::new(TOKENS_CONTROLLER_NAME)
            .register(&secrets, handlers.clone())
            .register(&accounts, handlers)
            .finish();
        controller
    }

    /// A controller over bare caches with no handlers registered (unit tests fill the
    /// caches, queue keys with [`Self::queue_secret_sync`] and
    /// [`Self::queue_service_account_sync`], and drain the queues).
    ///
    /// # Panics
    ///
    /// Builds the work queues, which spawn timer tasks: call inside a Tokio runtime.
    pub fn with_caches(
        secrets: Indexer<Secret>,
        accounts: Indexer<ServiceAccount>,
        client: Arc<dyn TokensClient>,
        generator: Arc<dyn GenerateToken>,
        root_ca: Vec<u8>,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let account_queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: TOKENS_SERVICE_ACCOUNT_QUEUE.to_owned(),
                metrics: metrics.clone(),
            },
        );
        let secret_queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: TOKENS_SECRET_QUEUE.to_owned(),
                metrics,
            },
        );
        Self {
            secrets,
            accounts,
            caches_synced: Vec::new(),
            account_queue,
            secret_queue,
            client,
            generator,
            root_ca,
        }
    }

    fn handlers(&self) -> Handlers {
        Handlers {
            account_queue: self.account_queue.clone(),
            secret_queue: self.secret_queue.clone(),
        }
    }

    /// Queues `account` as its informer events do (upstream's `queueServiceAccountSync`).
    pub fn queue_service_account_sync(&self, account: &ServiceAccount) {
        self.handlers().enqueue_account(account);
    }

    /// Queues `secret` as its informer events do (upstream's `queueSecretSync`); Secrets of
    /// another type are ignored.
    pub fn queue_secret_sync(&self, secret: &Secret) {
        self.handlers().enqueue_secret(secret);
    }

    /// The ServiceAccount queue.
    pub fn account_queue(&self) -> &RateLimitingQueue<ServiceAccountQueueKey> {
        &self.account_queue
    }

    /// The Secret queue.
    pub fn secret_queue(&self) -> &RateLimitingQueue<SecretQueueKey> {
        &self.secret_queue
    }

    /// Waits for the caches, then runs `workers` workers on each queue until `cancel` fires.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync_account = move |key: ServiceAccountQueueKey| {
            let this = Arc::clone(&this);
            async move { this.sync_service_account(&key).await }
        };
        let this = Arc::clone(&self);
        let sync_secret = move |key: SecretQueueKey| {
            let this = Arc::clone(&this);
            async move { this.sync_secret(&key).await }
        };
        let accounts = run_controller(
            TOKENS_CONTROLLER_NAME,
            "tokens controller service account workers",
            &self.account_queue,
            ACCOUNT_ERROR_POLICY,
            workers,
            &cancel,
            || all_synced(&self.caches_synced),
            sync_account,
        );
        let secrets = run_controller(
            TOKENS_CONTROLLER_NAME,
            "tokens controller secret workers",
            &self.secret_queue,
            SECRET_ERROR_POLICY,
            workers,
            &cancel,
            || all_synced(&self.caches_synced),
            sync_secret,
        );
        tokio::join!(accounts, secrets);
    }

    /// Syncs one account key, as upstream's `syncServiceAccount`: an account gone from the
    /// cache (or replaced by one of another uid) has its token Secrets deleted. An `Err`
    /// asks for a retry.
    pub async fn sync_service_account(
        &self,
        key: &ServiceAccountQueueKey,
    ) -> Result<(), TokenError> {
        if self
            .cached_account(&key.namespace, &key.name, &key.uid)
            .is_some()
        {
            return Ok(());
        }
        tracing::debug!(
            namespace = %key.namespace,
            serviceaccount = %key.name,
            "Service account deleted, removing tokens"
        );
        // Upstream's deleteTokens: every cached token Secret of the account, with a uid
        // precondition.
        let account = ServiceAccount {
            metadata: kube::api::ObjectMeta {
                namespace: Some(key.namespace.clone()),
                name: Some(key.name.clone()),
                uid: Some(key.uid.clone()).filter(|u| !u.is_empty()),
                ..kube::api::ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        let mut retry = None;
        // The namespace's secrets, by the cache's namespace index (upstream's
        // `listTokenSecrets`), not every secret of the cluster.
        let secrets = self
            .secrets
            .by_index(NAMESPACE_INDEX, &key.namespace)
            .unwrap_or_else(|_| self.secrets.list());
        for secret in secrets {
            if secret.metadata.namespace.as_deref() != Some(&key.namespace)
                || !is_service_account_token(&secret, &account)
            {
                continue;
            }
            let secret_key = SecretQueueKey::of(&secret);
            if let Err(err) = self.delete_token(&secret_key).await {
                tracing::error!(
                    namespace = %key.namespace,
                    serviceaccount = %key.name,
                    error = %err,
                    "Error deleting serviceaccount tokens"
                );
                retry.get_or_insert(err);
            }
        }
        retry.map_or(Ok(()), Err)
    }

    /// Syncs one token Secret key, as upstream's `syncSecret`. Gone from the cache (or
    /// replaced by one of another uid): the reference to it is removed from its account, if
    /// the cache still holds the account. Present: deleted when its account is gone (from the
    /// cache and then the API), otherwise missing `token`, `namespace` or `ca.crt` data are
    /// written. An `Err` asks for a retry; other failures are logged and dropped, as upstream.
    pub async fn sync_secret(&self, key: &SecretQueueKey) -> Result<(), TokenError> {
        let Some(secret) = self.cached_secret(key) else {
            if self
                .cached_account(&key.namespace, &key.sa_name, &key.sa_uid)
                .is_some()
                && let Err(err) = self.remove_secret_reference(key).await
            {
                tracing::error!(secret = %key, error = %err, "Removing secret reference");
            }
            return Ok(());
        };
        let account = self
            .get_account(key)
            .await
            .map_err(|source| TokenError::Api {
                what: "get serviceaccount for",
                key: key.to_string(),
                source,
            })?;
        match account {
            None => {
                tracing::debug!(secret = %key, "Service account does not exist, deleting token");
                self.delete_token(key).await
            }
            Some(account) => self.generate_token_if_needed(key, &account, &secret).await,
        }
    }

    /// The cached Secret of `key`, if it still has the key's uid (upstream's `getSecret`
    /// without `fetchOnCacheMiss`).
    fn cached_secret(&self, key: &SecretQueueKey) -> Option<Arc<Secret>> {
        let secret = self
            .secrets
            .get_by_key(&format!("{}/{}", key.namespace, key.name))?;
        (key.uid.is_empty() || secret.metadata.uid.as_deref() == Some(&key.uid)).then_some(secret)
    }

    /// The cached account `namespace/name`, if it has `uid` (when one is given).
    fn cached_account(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Option<Arc<ServiceAccount>> {
        let account = self.accounts.get_by_key(&format!("{namespace}/{name}"))?;
        (uid.is_empty() || account.metadata.uid.as_deref() == Some(uid)).then_some(account)
    }

    /// The account `key` names, from the cache and then the API (upstream's
    /// `getServiceAccount` with `fetchOnCacheMiss`); `None` when it is gone or its uid
    /// differs from the one the Secret recorded.
    async fn get_account(
        &self,
        key: &SecretQueueKey,
    ) -> Result<Option<ServiceAccount>, kube::Error> {
        if let Some(account) = self.cached_account(&key.namespace, &key.sa_name, &key.sa_uid) {
            return Ok(Some((*account).clone()));
        }
        match self
            .client
            .get_service_account(&key.namespace, &key.sa_name)
            .await
        {
            Ok(account)
                if key.sa_uid.is_empty()
                    || account.metadata.uid.as_deref() == Some(&key.sa_uid) =>
            {
                Ok(Some(account))
            }
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Deletes token Secret `key` with a uid precondition (upstream's `deleteToken`): gone
    /// already or replaced is no failure; any other error is retried.
    async fn delete_token(&self, key: &SecretQueueKey) -> Result<(), TokenError> {
        let uid = Some(key.uid.as_str()).filter(|u| !u.is_empty());
        match self
            .client
            .delete_secret(&key.namespace, &key.name, uid)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
            Err(source) => Err(TokenError::Api {
                what: "delete",
                key: key.to_string(),
                source,
            }),
        }
    }

    /// Writes the data `cached` lacks into the live Secret (upstream's
    /// `generateTokenIfNeeded`). A live Secret at another resourceVersion than the cache's is
    /// left to its coming update event; a conflicting or vanished update is no failure.
    async fn generate_token_if_needed(
        &self,
        key: &SecretQueueKey,
        account: &ServiceAccount,
        cached: &Secret,
    ) -> Result<(), TokenError> {
        let (ca, namespace, token) = secret_needs(cached, &self.root_ca);
        if !(ca || namespace || token) {
            return Ok(());
        }
        let api_err = |what, source| TokenError::Api {
            what,
            key: key.to_string(),
            source,
        };
        let mut live = match self.client.get_secret(&key.namespace, &key.name).await {
            Ok(live) => live,
            Err(e) if e.is_not_found() => {
                tracing::error!(secret = %key, error = %error_message(&e), "Populating serviceaccount token");
                return Ok(());
            }
            Err(e) => return Err(api_err("get", e)),
        };
        if live.metadata.resource_version != cached.metadata.resource_version {
            tracing::debug!(secret = %key, "Secret is not up to date, skipping token population");
            return Ok(());
        }
        let (ca, namespace, token) = secret_needs(&live, &self.root_ca);
        if !(ca || namespace || token) {
            return Ok(());
        }
        let data = live.data.get_or_insert_with(Default::default);
        if ca {
            data.insert(CA_CERT_KEY.to_owned(), ByteString(self.root_ca.clone()));
        }
        if namespace {
            data.insert(
                NAMESPACE_KEY.to_owned(),
                ByteString(key.namespace.clone().into_bytes()),
            );
        }
        if token {
            let claims = LegacyClaims::new(
                &key.namespace,
                account.metadata.name.as_deref().unwrap_or_default(),
                account.metadata.uid.as_deref().unwrap_or_default(),
                &key.name,
            );
            match self.generator.generate_token(&claims) {
                Ok(jwt) => {
                    data.insert(TOKEN_KEY.to_owned(), ByteString(jwt.into_bytes()));
                }
                Err(err) => {
                    // Not retried, as upstream: the next event of the Secret tries again.
                    tracing::error!(secret = %key, error = %err, "Populating serviceaccount token");
                    return Ok(());
                }
            }
        }
        let annotations = live
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert(
            SERVICE_ACCOUNT_NAME_KEY.to_owned(),
            account.metadata.name.clone().unwrap_or_default(),
        );
        annotations.insert(
            SERVICE_ACCOUNT_UID_KEY.to_owned(),
            account.metadata.uid.clone().unwrap_or_default(),
        );
        match self.client.update_secret(&live).await {
            Ok(_) => Ok(()),
            // A conflict: someone else updated it, and its update event brings it back; not
            // found: it is gone and needs no token.
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
            Err(e) => Err(api_err("update", e)),
        }
    }

    /// Removes the reference to deleted Secret `key` from its account, retrying conflicts
    /// along [`REMOVE_TOKEN_BACKOFF`] (upstream's `RetryOnConflict` around
    /// `removeSecretReference`).
    async fn remove_secret_reference(&self, key: &SecretQueueKey) -> Result<(), kube::Error> {
        let (steps, step) = REMOVE_TOKEN_BACKOFF;
        let mut attempt = 1;
        loop {
            match self.remove_secret_reference_once(key).await {
                Err(e) if e.is_conflict() && attempt < steps => {
                    attempt += 1;
                    tokio::time::sleep(step).await;
                }
                other => return other,
            }
        }
    }

    /// One attempt of upstream's `removeSecretReference`, on a freshly read account.
    async fn remove_secret_reference_once(&self, key: &SecretQueueKey) -> Result<(), kube::Error> {
        let mut account = match self
            .client
            .get_service_account(&key.namespace, &key.sa_name)
            .await
        {
            Ok(account) => account,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        if !key.sa_uid.is_empty() && account.metadata.uid.as_deref() != Some(&key.sa_uid) {
            return Ok(());
        }
        let Some(refs) = account.secrets.as_mut() else {
            return Ok(());
        };
        let before = refs.len();
        refs.retain(|r| r.name.as_deref() != Some(key.name.as_str()));
        if refs.len() == before {
            return Ok(());
        }
        match self.client.update_service_account(&account).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Decodes a token's claims without verifying it (tests).
pub fn decode_unverified(token: &str) -> Option<serde_json::Value> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
#[path = "tokens_tests.rs"]
mod table_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn secret(data: &[(&str, &str)], uid: Option<&str>) -> Secret {
        let mut annotations = std::collections::BTreeMap::from([(
            SERVICE_ACCOUNT_NAME_KEY.to_owned(),
            "default".to_owned(),
        )]);
        if let Some(uid) = uid {
            annotations.insert(SERVICE_ACCOUNT_UID_KEY.to_owned(), uid.to_owned());
        }
        Secret {
            metadata: ObjectMeta {
                name: Some("token-secret-1".into()),
                namespace: Some("default".into()),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            type_: Some(SERVICE_ACCOUNT_TOKEN_TYPE.into()),
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    fn account(uid: &str) -> ServiceAccount {
        ServiceAccount {
            metadata: ObjectMeta {
                name: Some("default".into()),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        }
    }

    #[test]
    fn a_complete_secret_needs_nothing_and_an_empty_one_needs_everything() {
        let full = secret(
            &[("token", "t"), ("ca.crt", "CA"), ("namespace", "default")],
            Some("12345"),
        );
        assert_eq!(secret_needs(&full, b"CA"), (false, false, false));
        assert_eq!(secret_needs(&full, b"OTHER"), (true, false, false));
        // A missing uid annotation alone is no reason to update.
        let no_uid = secret(
            &[("token", "t"), ("ca.crt", "CA"), ("namespace", "default")],
            None,
        );
        assert_eq!(secret_needs(&no_uid, b"CA"), (false, false, false));
        let empty = secret(&[], None);
        assert_eq!(secret_needs(&empty, b"CA"), (true, true, true));
        // No root CA configured: ca.crt is never wanted.
        assert!(!secret_needs(&empty, b"").0);
    }

    #[test]
    fn a_secret_belongs_to_its_named_account_unless_the_uid_differs() {
        assert!(is_service_account_token(
            &secret(&[], None),
            &account("12345")
        ));
        assert!(is_service_account_token(
            &secret(&[], Some("12345")),
            &account("12345")
        ));
        assert!(!is_service_account_token(
            &secret(&[], Some("67890")),
            &account("12345")
        ));
        let mut opaque = secret(&[], None);
        opaque.type_ = Some("Opaque".into());
        assert!(!is_service_account_token(&opaque, &account("12345")));
    }

    #[test]
    fn legacy_tokens_carry_upstreams_claims_and_sign_with_es256_for_ec_keys() {
        let key = rcgen::KeyPair::generate().expect("key");
        let generator = TokenGenerator::from_pem(key.serialize_pem().as_bytes()).expect("gen");
        assert_eq!(generator.algorithm(), jsonwebtoken::Algorithm::ES256);
        let claims = LegacyClaims::new("default", "default", "12345", "token-secret-1");
        let token = generator.generate(&claims).expect("sign");
        let decoded = decode_unverified(&token).expect("claims");
        assert_eq!(decoded["iss"], "kubernetes/serviceaccount");
        assert_eq!(decoded["sub"], "system:serviceaccount:default:default");
        assert_eq!(decoded["kubernetes.io/serviceaccount/namespace"], "default");
        assert_eq!(
            decoded["kubernetes.io/serviceaccount/secret.name"],
            "token-secret-1"
        );
        assert_eq!(
            decoded["kubernetes.io/serviceaccount/service-account.name"],
            "default"
        );
        assert_eq!(
            decoded["kubernetes.io/serviceaccount/service-account.uid"],
            "12345"
        );
        let header = jsonwebtoken::decode_header(&token).expect("header");
        assert_eq!(header.alg, jsonwebtoken::Algorithm::ES256);
        assert!(header.kid.is_none());
    }

    #[test]
    fn a_file_without_a_private_key_is_refused() {
        assert!(matches!(
            TokenGenerator::from_pem(b"not a key"),
            Err(TokenError::Key(_))
        ));
    }
}
