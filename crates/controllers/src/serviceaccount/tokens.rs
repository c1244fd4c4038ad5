//! The service account token controller: fills in `kubernetes.io/service-account-token` Secrets (a legacy token, `ca.crt`, `namespace`, the account's uid) and deletes those whose account is gone (upstream `tokens_controller.go`).
//!
//! A Secret of that type added or updated queues its key; a ServiceAccount deleted queues
//! every such Secret in its namespace that names it. A worker then syncs the Secret, as
//! upstream's `syncSecret`: gone or of another type, nothing; its account missing (from the
//! cache and then the API) or of another uid, the Secret is deleted (with a uid precondition);
//! otherwise missing `token`, `ca.crt` or `namespace` data, or a missing uid annotation, are
//! written by an update of the live Secret.

use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kcm_machinery::controller::api_status::error_message;
use kcm_machinery::controller::{ApiStatus, ErrorPolicy, run_controller};
use kcm_machinery::informer::store::Indexer;
use kcm_machinery::informer::{
    DeletedObject, InformerRegistrar, InformerSynced, ResourceEventHandler, SharedInformerFactory,
    all_synced,
};
use kcm_machinery::workqueue::{
    QueueConfig, RateLimitingQueue, WorkqueueMetrics, default_controller_rate_limiter,
};
use kube::Api;
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::core::Status;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// kube-controller-manager's name of this controller.
pub const TOKENS_CONTROLLER_NAME: &str = "serviceaccount-token-controller";
/// The older name `--controllers` also accepts.
pub const TOKENS_CONTROLLER_ALIAS: &str = "serviceaccount-token";
/// The Secret queue's name (upstream's `serviceaccount_tokens_secret`).
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

const ERROR_POLICY: ErrorPolicy<String, TokenError> =
    ErrorPolicy::new("error syncing token secret")
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

/// The data and annotation a token Secret lacks, as upstream's `generateTokenIfNeeded`'s
/// checks: `(needs ca.crt, needs namespace, needs token, needs uid annotation)`.
pub fn secret_needs(secret: &Secret, root_ca: &[u8]) -> (bool, bool, bool, bool) {
    let data = secret.data.as_ref();
    let get = |k: &str| data.and_then(|d| d.get(k)).map(|b| b.0.as_slice());
    let needs_ca = !root_ca.is_empty() && get(CA_CERT_KEY) != Some(root_ca);
    let needs_namespace = get(NAMESPACE_KEY).is_none_or(<[u8]>::is_empty);
    let needs_token = get(TOKEN_KEY).is_none_or(<[u8]>::is_empty);
    let needs_uid = annotation(secret, SERVICE_ACCOUNT_UID_KEY).is_empty();
    (needs_ca, needs_namespace, needs_token, needs_uid)
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

/// Fills in and garbage-collects token Secrets, as upstream's `TokensController`.
pub struct TokensController {
    secrets: Indexer<Secret>,
    accounts: Indexer<ServiceAccount>,
    caches_synced: Vec<InformerSynced>,
    queue: RateLimitingQueue<String>,
    client: kube::Client,
    generator: TokenGenerator,
    root_ca: Vec<u8>,
}

impl std::fmt::Debug for TokensController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokensController")
            .field("queue_len", &self.queue.len())
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
struct Handlers {
    queue: RateLimitingQueue<String>,
    secrets: Indexer<Secret>,
}

impl Handlers {
    fn enqueue_secret(&self, secret: &Secret) {
        if secret.type_.as_deref() != Some(SERVICE_ACCOUNT_TOKEN_TYPE) {
            return;
        }
        if let (Some(ns), Some(name)) = (&secret.metadata.namespace, &secret.metadata.name) {
            self.queue.add(format!("{ns}/{name}"));
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
}

impl ResourceEventHandler<ServiceAccount> for Handlers {
    /// Upstream's `queueServiceAccountSync` on delete: the account's token Secrets go.
    fn on_delete(&self, account: DeletedObject<ServiceAccount>) {
        let account = account.object();
        let ns = account.metadata.namespace.as_deref().unwrap_or_default();
        for secret in self.secrets.list() {
            if secret.metadata.namespace.as_deref() == Some(ns)
                && is_service_account_token(&secret, account)
            {
                self.enqueue_secret(&secret);
            }
        }
    }
}

impl TokensController {
    /// The controller over the factory's Secret and ServiceAccount informers.
    ///
    /// # Panics
    ///
    /// Builds the work queue, which spawns a timer task: call inside a Tokio runtime.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
        generator: TokenGenerator,
        root_ca: Vec<u8>,
        metrics: Option<Arc<WorkqueueMetrics>>,
    ) -> Self {
        let secrets = factory.informer_for::<Secret>();
        let accounts = factory.informer_for::<ServiceAccount>();
        let queue = RateLimitingQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig {
                name: TOKENS_SECRET_QUEUE.to_owned(),
                metrics,
            },
        );
        let handlers = Handlers {
            queue: queue.clone(),
            secrets: secrets.indexer().clone(),
        };
        let caches_synced = InformerRegistrar::new(TOKENS_CONTROLLER_NAME)
            .register(&secrets, handlers.clone())
            .register(&accounts, handlers)
            .finish();
        Self {
            secrets: secrets.indexer().clone(),
            accounts: accounts.indexer().clone(),
            caches_synced,
            queue,
            client,
            generator,
            root_ca,
        }
    }

    /// Waits for the caches, then runs `workers` workers until `cancel` fires.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let this = Arc::clone(&self);
        let sync = move |key: String| {
            let this = Arc::clone(&this);
            async move { this.sync_secret(&key).await }
        };
        run_controller(
            TOKENS_CONTROLLER_NAME,
            "tokens controller",
            &self.queue,
            ERROR_POLICY,
            workers,
            &cancel,
            || all_synced(&self.caches_synced),
            sync,
        )
        .await;
    }

    /// Syncs Secret `key` (`namespace/name`), as upstream's `syncSecret`.
    pub async fn sync_secret(&self, key: &str) -> Result<(), TokenError> {
        let Some(secret) = self.secrets.get_by_key(key) else {
            return Ok(());
        };
        if secret.type_.as_deref() != Some(SERVICE_ACCOUNT_TOKEN_TYPE) {
            return Ok(());
        }
        let ns = secret.metadata.namespace.clone().unwrap_or_default();
        let name = secret.metadata.name.clone().unwrap_or_default();
        let api_err = |what, source| TokenError::Api {
            what,
            key: key.to_owned(),
            source,
        };
        let account = self
            .get_account(&secret)
            .await
            .map_err(|e| api_err("get serviceaccount for", e))?;
        let Some(account) = account else {
            // Upstream's deleteToken: the account is gone (or is another one).
            let api: Api<Secret> = Api::namespaced(self.client.clone(), &ns);
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: secret.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            return match api.delete(&name, &params).await {
                Ok(_) => Ok(()),
                Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
                Err(e) => Err(api_err("delete", e)),
            };
        };
        let (ca, namespace, token, uid) = secret_needs(&secret, &self.root_ca);
        if !(ca || namespace || token || uid) {
            return Ok(());
        }
        // Upstream's generateTokenIfNeeded: works on the live Secret.
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &ns);
        let mut live = match api.get(&name).await {
            Ok(live) => live,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(api_err("get", e)),
        };
        if !is_service_account_token(&live, &account) {
            return Ok(());
        }
        let (ca, namespace, token, uid) = secret_needs(&live, &self.root_ca);
        if !(ca || namespace || token || uid) {
            return Ok(());
        }
        let data = live.data.get_or_insert_with(Default::default);
        if ca {
            data.insert(CA_CERT_KEY.to_owned(), ByteString(self.root_ca.clone()));
        }
        if namespace {
            data.insert(
                NAMESPACE_KEY.to_owned(),
                ByteString(ns.clone().into_bytes()),
            );
        }
        if token {
            let claims = LegacyClaims::new(
                &ns,
                account.metadata.name.as_deref().unwrap_or_default(),
                account.metadata.uid.as_deref().unwrap_or_default(),
                &name,
            );
            let jwt = self.generator.generate(&claims)?;
            data.insert(TOKEN_KEY.to_owned(), ByteString(jwt.into_bytes()));
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
        match api.replace(&name, &PostParams::default(), &live).await {
            Ok(_) => Ok(()),
            // A conflict or a vanished Secret: the next event brings it back.
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(api_err("update", e)),
        }
    }

    /// The account `secret` names, from the cache and then the API (upstream's
    /// `getServiceAccount` with `fetchOnCacheMiss`); `None` when it is gone or its uid
    /// differs from the Secret's annotation.
    async fn get_account(&self, secret: &Secret) -> Result<Option<ServiceAccount>, kube::Error> {
        let ns = secret.metadata.namespace.as_deref().unwrap_or_default();
        let name = annotation(secret, SERVICE_ACCOUNT_NAME_KEY);
        if name.is_empty() {
            return Ok(None);
        }
        if let Some(sa) = self.accounts.get_by_key(&format!("{ns}/{name}"))
            && is_service_account_token(secret, &sa)
        {
            return Ok(Some((*sa).clone()));
        }
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), ns);
        match api.get(name).await {
            Ok(sa) if is_service_account_token(secret, &sa) => Ok(Some(sa)),
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
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
        assert_eq!(secret_needs(&full, b"CA"), (false, false, false, false));
        assert_eq!(secret_needs(&full, b"OTHER"), (true, false, false, false));
        let empty = secret(&[], None);
        assert_eq!(secret_needs(&empty, b"CA"), (true, true, true, true));
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
