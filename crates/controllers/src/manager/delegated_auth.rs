//! Delegated authentication and authorization of the HTTPS endpoint: bearer tokens checked with a TokenReview, requests with a SubjectAccessReview, as kube-controller-manager's `DelegatingAuthenticationOptions`/`DelegatingAuthorizationOptions`.
//!
//! - Authentication: a bearer token is sent to the API server in a TokenReview; a request
//!   without one is `system:anonymous` (group `system:unauthenticated`). A token the review
//!   rejects with an error is answered 401; without an authentication client (no
//!   `--authentication-kubeconfig` and not in a cluster) every request is anonymous.
//! - Authorization: `--authorization-always-allow-paths` (default `/healthz,/readyz,/livez`;
//!   a trailing `*` matches a prefix) and the group `system:masters` pass without asking;
//!   anything else is a SubjectAccessReview with the request's path and lower-cased method as
//!   non-resource attributes. Without an authorization client everything else is forbidden.
//! - Answers are cached (`--authentication-token-webhook-cache-ttl`,
//!   `--authorization-webhook-cache-{authorized,unauthorized}-ttl`, 10 s each) so a scrape
//!   every few seconds costs the API server nothing.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use tokio::time::Instant;

/// The group that is always authorized (upstream's `AlwaysAllowGroups` default).
pub const SYSTEM_MASTERS: &str = "system:masters";
/// Who a request without credentials is.
pub const ANONYMOUS: &str = "system:anonymous";
/// The group of requests without credentials.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The group of every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";
/// At most this many answers are cached per cache; beyond it expired entries are dropped,
/// and if none expired, all (a flood of distinct tokens cannot grow memory).
const CACHE_CAPACITY: usize = 4096;

/// Who made a request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct User {
    /// The user name.
    pub name: String,
    /// The UID, if the authenticator gave one.
    pub uid: String,
    /// Its groups.
    pub groups: Vec<String>,
    /// Extra attributes (scopes, bound objects).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    fn anonymous() -> Self {
        Self {
            name: ANONYMOUS.to_owned(),
            uid: String::new(),
            groups: vec![UNAUTHENTICATED.to_owned()],
            extra: BTreeMap::new(),
        }
    }
}

/// What a TokenReview said of a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenVerdict {
    /// The token names this user.
    Authenticated(User),
    /// Not authenticated, with the reviewer's error (`status.error`): answered 401.
    Rejected(String),
    /// Not authenticated and no error: the request goes on as anonymous (upstream's union
    /// falls through to the anonymous authenticator).
    Unknown,
}

/// What a SubjectAccessReview said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessVerdict {
    /// Allowed.
    pub allowed: bool,
    /// Why (shown after the forbidden message).
    pub reason: String,
}

/// The API calls delegation makes; [`KubeReviewer`] makes them for real.
#[async_trait]
pub trait Reviewer: Send + Sync {
    /// A TokenReview of `token`.
    async fn review_token(&self, token: &str) -> Result<TokenVerdict, kube::Error>;
    /// A SubjectAccessReview of `user` doing `verb` on the non-resource `path`.
    async fn review_access(
        &self,
        user: &User,
        verb: &str,
        path: &str,
    ) -> Result<AccessVerdict, kube::Error>;
}

/// [`Reviewer`] over a `kube::Client`.
#[derive(Clone)]
pub struct KubeReviewer(pub kube::Client);

#[async_trait]
impl Reviewer for KubeReviewer {
    async fn review_token(&self, token: &str) -> Result<TokenVerdict, kube::Error> {
        let reviews: Api<TokenReview> = Api::all(self.0.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let answered = reviews.create(&PostParams::default(), &review).await?;
        let status = answered.status.unwrap_or_default();
        if status.authenticated == Some(true) {
            let info = status.user.unwrap_or_default();
            return Ok(TokenVerdict::Authenticated(User {
                name: info.username.unwrap_or_default(),
                uid: info.uid.unwrap_or_default(),
                groups: info.groups.unwrap_or_default(),
                extra: info.extra.unwrap_or_default(),
            }));
        }
        Ok(match status.error.filter(|e| !e.is_empty()) {
            Some(error) => TokenVerdict::Rejected(error),
            None => TokenVerdict::Unknown,
        })
    }

    async fn review_access(
        &self,
        user: &User,
        verb: &str,
        path: &str,
    ) -> Result<AccessVerdict, kube::Error> {
        let reviews: Api<SubjectAccessReview> = Api::all(self.0.clone());
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some(verb.to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answered = reviews.create(&PostParams::default(), &review).await?;
        let status = answered.status.unwrap_or_default();
        Ok(AccessVerdict {
            allowed: status.allowed,
            reason: status.reason.unwrap_or_default(),
        })
    }
}

/// How delegation is configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelegationConfig {
    /// Paths authorized without asking (`*` at the end matches a prefix).
    pub always_allow_paths: Vec<String>,
    /// Groups authorized without asking.
    pub always_allow_groups: Vec<String>,
    /// How long a TokenReview answer is reused.
    pub token_ttl: Duration,
    /// How long an allowing SubjectAccessReview answer is reused.
    pub allow_ttl: Duration,
    /// How long a denying one is reused.
    pub deny_ttl: Duration,
}

impl Default for DelegationConfig {
    fn default() -> Self {
        Self {
            always_allow_paths: ["/healthz", "/readyz", "/livez"]
                .map(str::to_owned)
                .to_vec(),
            always_allow_groups: vec![SYSTEM_MASTERS.to_owned()],
            token_ttl: Duration::from_secs(10),
            allow_ttl: Duration::from_secs(10),
            deny_ttl: Duration::from_secs(10),
        }
    }
}

/// Why a request is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 401: the credentials were rejected.
    Unauthorized,
    /// 403 with upstream's message.
    Forbidden(String),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (code, reason, message) = match self {
            Self::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                "Unauthorized".to_owned(),
            ),
            Self::Forbidden(message) => (StatusCode::FORBIDDEN, "Forbidden", message),
        };
        let body = serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "details": {},
            "code": code.as_u16(),
        });
        let mut response = (code, body.to_string()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// A bounded map whose entries expire.
struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    fn new() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(expires, _)| *expires > Instant::now())
            .map(|(_, v)| v.clone())
    }

    fn put(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CACHE_CAPACITY {
            entries.retain(|_, (expires, _)| *expires > now);
            if entries.len() >= CACHE_CAPACITY {
                entries.clear();
            }
        }
        entries.insert(key, (now + ttl, value));
    }
}

/// The endpoint's gate: authenticate, then authorize.
pub struct DelegatedAuth {
    config: DelegationConfig,
    /// TokenReviews; `None`: tokens are not looked at (every request is anonymous).
    authentication: Option<Arc<dyn Reviewer>>,
    /// SubjectAccessReviews; `None`: only the always-allowed paths and groups pass.
    authorization: Option<Arc<dyn Reviewer>>,
    tokens: TtlCache<String, TokenVerdict>,
    decisions: TtlCache<(User, String, String), AccessVerdict>,
}

impl std::fmt::Debug for DelegatedAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedAuth")
            .field("config", &self.config)
            .field("authentication", &self.authentication.is_some())
            .field("authorization", &self.authorization.is_some())
            .finish_non_exhaustive()
    }
}

impl DelegatedAuth {
    /// A gate reviewing tokens with `authentication` and requests with `authorization`.
    pub fn new(
        config: DelegationConfig,
        authentication: Option<Arc<dyn Reviewer>>,
        authorization: Option<Arc<dyn Reviewer>>,
    ) -> Self {
        Self {
            config,
            authentication,
            authorization,
            tokens: TtlCache::new(),
            decisions: TtlCache::new(),
        }
    }

    /// Who sent a request with these headers.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<User, Refusal> {
        let Some(token) = bearer_token(headers) else {
            return Ok(User::anonymous());
        };
        let Some(reviewer) = &self.authentication else {
            return Ok(User::anonymous());
        };
        let verdict = match self.tokens.get(&token.to_owned()) {
            Some(verdict) => verdict,
            None => match reviewer.review_token(token).await {
                Ok(verdict) => {
                    self.tokens
                        .put(token.to_owned(), verdict.clone(), self.config.token_ttl);
                    verdict
                }
                Err(err) => {
                    tracing::error!(%err, "Unable to authenticate the request");
                    return Err(Refusal::Unauthorized);
                }
            },
        };
        match verdict {
            TokenVerdict::Authenticated(user) => Ok(user),
            TokenVerdict::Rejected(error) => {
                tracing::debug!(%error, "Unable to authenticate the request");
                Err(Refusal::Unauthorized)
            }
            TokenVerdict::Unknown => Ok(User::anonymous()),
        }
    }

    /// Whether `user` may `method` `path`.
    pub async fn authorize(&self, user: &User, method: &str, path: &str) -> Result<(), Refusal> {
        if self
            .config
            .always_allow_paths
            .iter()
            .any(|p| path_matches(p, path))
            || user
                .groups
                .iter()
                .any(|g| self.config.always_allow_groups.contains(g))
        {
            return Ok(());
        }
        let verb = method.to_ascii_lowercase();
        let forbidden = |reason: &str| {
            let mut message = format!(
                "forbidden: User \"{}\" cannot {verb} path \"{path}\"",
                user.name
            );
            if !reason.is_empty() {
                message.push_str(": ");
                message.push_str(reason);
            }
            Refusal::Forbidden(message)
        };
        let Some(reviewer) = &self.authorization else {
            return Err(forbidden(""));
        };
        let key = (user.clone(), verb.clone(), path.to_owned());
        let verdict = match self.decisions.get(&key) {
            Some(verdict) => verdict,
            None => match reviewer.review_access(user, &verb, path).await {
                Ok(verdict) => {
                    let ttl = if verdict.allowed {
                        self.config.allow_ttl
                    } else {
                        self.config.deny_ttl
                    };
                    self.decisions.put(key, verdict.clone(), ttl);
                    verdict
                }
                Err(err) => {
                    tracing::error!(%err, "Authorization error");
                    return Err(forbidden(&err.to_string()));
                }
            },
        };
        if verdict.allowed {
            Ok(())
        } else {
            Err(forbidden(&verdict.reason))
        }
    }
}

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive), if any.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let mut parts = value.split_whitespace();
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && parts.next().is_none()).then_some(token)
}

/// `pattern` is a path, or a prefix ending in `*`.
fn path_matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    }
}

/// axum middleware: refuses what [`DelegatedAuth`] refuses.
pub async fn gate(State(auth): State<Arc<DelegatedAuth>>, req: Request, next: Next) -> Response {
    let user = match auth.authenticate(req.headers()).await {
        Ok(user) => user,
        Err(refusal) => return refusal.into_response(),
    };
    if let Err(refusal) = auth
        .authorize(&user, req.method().as_str(), req.uri().path())
        .await
    {
        return refusal.into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Knows tokens `admin` (system:masters), `watcher` (may get /metrics), `nobody`;
    /// rejects `expired` with an error; counts its calls.
    #[derive(Default)]
    struct Fake {
        token_calls: AtomicUsize,
        access_calls: AtomicUsize,
    }

    fn user(name: &str, groups: &[&str]) -> User {
        User {
            name: name.to_owned(),
            uid: String::new(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            extra: BTreeMap::new(),
        }
    }

    #[async_trait]
    impl Reviewer for Fake {
        async fn review_token(&self, token: &str) -> Result<TokenVerdict, kube::Error> {
            self.token_calls.fetch_add(1, Ordering::SeqCst);
            Ok(match token {
                "admin" => {
                    TokenVerdict::Authenticated(user("admin", &[SYSTEM_MASTERS, AUTHENTICATED]))
                }
                "watcher" => TokenVerdict::Authenticated(user("watcher", &[AUTHENTICATED])),
                "nobody" => TokenVerdict::Authenticated(user("nobody", &[AUTHENTICATED])),
                "expired" => TokenVerdict::Rejected("token has expired".to_owned()),
                _ => TokenVerdict::Unknown,
            })
        }

        async fn review_access(
            &self,
            user: &User,
            verb: &str,
            path: &str,
        ) -> Result<AccessVerdict, kube::Error> {
            self.access_calls.fetch_add(1, Ordering::SeqCst);
            Ok(AccessVerdict {
                allowed: user.name == "watcher" && verb == "get" && path == "/metrics",
                reason: String::new(),
            })
        }
    }

    fn headers(token: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(token) = token {
            headers.insert(
                header::AUTHORIZATION,
                HeaderValue::try_from(format!("Bearer {token}")).expect("header"),
            );
        }
        headers
    }

    fn gate_with(fake: &Arc<Fake>, delegate: bool) -> DelegatedAuth {
        let reviewer: Option<Arc<dyn Reviewer>> = delegate.then(|| Arc::clone(fake) as _);
        DelegatedAuth::new(DelegationConfig::default(), reviewer.clone(), reviewer)
    }

    async fn check(
        auth: &DelegatedAuth,
        token: Option<&str>,
        method: &str,
        path: &str,
    ) -> Result<(), Refusal> {
        let user = auth.authenticate(&headers(token)).await?;
        auth.authorize(&user, method, path).await
    }

    #[tokio::test(start_paused = true)]
    async fn table_of_users_paths_and_answers() {
        let fake = Arc::new(Fake::default());
        let auth = gate_with(&fake, true);
        let forbidden = |who: &str, verb: &str, path: &str| {
            Err(Refusal::Forbidden(format!(
                "forbidden: User \"{who}\" cannot {verb} path \"{path}\""
            )))
        };
        let cases: [(Option<&str>, &str, &str, Result<(), Refusal>); 9] = [
            (None, "GET", "/healthz", Ok(())),
            (None, "GET", "/readyz", Ok(())),
            (None, "GET", "/livez", Ok(())),
            (
                None,
                "GET",
                "/metrics",
                forbidden(ANONYMOUS, "get", "/metrics"),
            ),
            (Some("admin"), "GET", "/metrics", Ok(())),
            (Some("watcher"), "GET", "/metrics", Ok(())),
            (
                Some("watcher"),
                "POST",
                "/metrics",
                forbidden("watcher", "post", "/metrics"),
            ),
            (
                Some("nobody"),
                "GET",
                "/metrics",
                forbidden("nobody", "get", "/metrics"),
            ),
            (
                Some("expired"),
                "GET",
                "/healthz",
                Err(Refusal::Unauthorized),
            ),
        ];
        for (token, method, path, want) in cases {
            assert_eq!(
                check(&auth, token, method, path).await,
                want,
                "{token:?} {method} {path}"
            );
        }
        // An unknown token without an error is anonymous, not refused outright.
        assert_eq!(
            check(&auth, Some("stranger"), "GET", "/metrics").await,
            forbidden(ANONYMOUS, "get", "/metrics")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn answers_are_cached_for_their_ttl() {
        let fake = Arc::new(Fake::default());
        let auth = gate_with(&fake, true);
        for _ in 0..5 {
            check(&auth, Some("watcher"), "GET", "/metrics")
                .await
                .expect("allowed");
            assert!(
                check(&auth, Some("nobody"), "GET", "/metrics")
                    .await
                    .is_err()
            );
        }
        assert_eq!(fake.token_calls.load(Ordering::SeqCst), 2);
        assert_eq!(fake.access_calls.load(Ordering::SeqCst), 2);
        tokio::time::advance(Duration::from_secs(11)).await;
        check(&auth, Some("watcher"), "GET", "/metrics")
            .await
            .expect("allowed");
        assert_eq!(fake.token_calls.load(Ordering::SeqCst), 3);
        assert_eq!(fake.access_calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn without_delegation_only_the_always_allowed_pass_and_tokens_are_ignored() {
        let fake = Arc::new(Fake::default());
        let auth = gate_with(&fake, false);
        assert_eq!(check(&auth, Some("admin"), "GET", "/healthz").await, Ok(()));
        assert_eq!(
            check(&auth, Some("admin"), "GET", "/metrics").await,
            Err(Refusal::Forbidden(
                "forbidden: User \"system:anonymous\" cannot get path \"/metrics\"".to_owned()
            ))
        );
        assert_eq!(fake.token_calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn bearer_tokens_and_path_patterns() {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer abc"),
        );
        assert_eq!(bearer_token(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer"));
        assert_eq!(bearer_token(&h), None);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer a b"),
        );
        assert_eq!(bearer_token(&h), None);
        assert!(path_matches("/healthz", "/healthz"));
        assert!(!path_matches("/healthz", "/healthz/ping"));
        assert!(path_matches("/healthz*", "/healthz/ping"));
        assert!(path_matches("*", "/metrics"));
    }

    #[test]
    fn refusals_are_kubernetes_statuses() {
        let response = Refusal::Forbidden("forbidden: x".to_owned()).into_response();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        assert_eq!(
            response
                .headers()
                .get(header::CONTENT_TYPE)
                .map(|v| v.as_bytes()),
            Some(&b"application/json"[..])
        );
        assert_eq!(
            Refusal::Unauthorized.into_response().status(),
            StatusCode::UNAUTHORIZED
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_caches_stay_bounded_under_a_flood_of_tokens() {
        let cache: TtlCache<String, u8> = TtlCache::new();
        for i in 0..(CACHE_CAPACITY * 3) {
            cache.put(i.to_string(), 0, Duration::from_secs(10));
        }
        let len = cache.entries.lock().expect("lock").len();
        assert!(len <= CACHE_CAPACITY, "{len}");
    }
}
