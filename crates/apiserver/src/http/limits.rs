//! Server-wide request limits: the in-flight caps (429 with `Retry-After`) and the per-request timeout (504), with long-running requests exempt.
//!
//! As kube-apiserver's `WithMaxInFlightLimit` and `WithTimeoutForNonLongRunningRequests`
//! (`--max-requests-inflight` 400, `--max-mutating-requests-inflight` 200, `--request-timeout`
//! 60 s). A request is long-running, and exempt from both, when it is a watch or it reaches the
//! `attach`, `exec`, `log`, `portforward` or `proxy` subresource (upstream's
//! `BasicLongRunningRequestCheck`). The timeout sits outside authentication; the in-flight
//! limit sits after authentication and impersonation, because members of `system:masters` are
//! never refused (upstream: "a system:master is so powerful that they should always get an
//! answer").

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::Method;
use tokio::sync::Semaphore;

use crate::auth::user::{SYSTEM_MASTERS, UserInfo};
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::query::Query;
use crate::http::request_info::{self, Route};

/// kube-apiserver's `--max-requests-inflight` default.
pub const DEFAULT_MAX_REQUESTS_INFLIGHT: usize = 400;
/// kube-apiserver's `--max-mutating-requests-inflight` default.
pub const DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT: usize = 200;
/// kube-apiserver's `--request-timeout` default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The `Retry-After` a refused request is told (upstream's constant `retryAfter = "1"`).
const RETRY_AFTER_SECONDS: i32 = 1;

/// Subresources whose requests are long-running (upstream's `longRunningSubresources`).
const LONG_RUNNING_SUBRESOURCES: [&str; 5] = ["attach", "exec", "log", "portforward", "proxy"];

/// The limits every request passes through.
#[derive(Clone, Debug)]
pub struct RequestLimits {
    /// Permits for reads (`get`, `list`); `None` when unlimited.
    readonly: Option<Arc<Semaphore>>,
    /// Permits for everything else; `None` when unlimited.
    mutating: Option<Arc<Semaphore>>,
    /// How long a request that is not long-running may take; `None` never times out.
    request_timeout: Option<Duration>,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self::new(
            DEFAULT_MAX_REQUESTS_INFLIGHT,
            DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
            DEFAULT_REQUEST_TIMEOUT,
        )
    }
}

impl RequestLimits {
    /// Limits with these caps (0 is unlimited, as upstream) and this timeout (zero never times
    /// out).
    pub fn new(max_inflight: usize, max_mutating_inflight: usize, timeout: Duration) -> Self {
        let permits = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        Self {
            readonly: permits(max_inflight),
            mutating: permits(max_mutating_inflight),
            request_timeout: (!timeout.is_zero()).then_some(timeout),
        }
    }

    /// No limits at all (unit tests of the handlers).
    pub fn unlimited() -> Self {
        Self::new(0, 0, Duration::ZERO)
    }
}

/// Whether a request is long-running: a watch (`?watch=true` or the legacy `/watch/` prefix)
/// or a request to a streaming subresource. Mirrors upstream's `BasicLongRunningRequestCheck`
/// with kube-apiserver's verbs and subresources.
pub fn is_long_running(method: &Method, path: &str, query: Option<&str>) -> bool {
    let Route::Resource(r) = request_info::parse(path) else {
        return false;
    };
    if r.subresource
        .as_deref()
        .is_some_and(|s| LONG_RUNNING_SUBRESOURCES.contains(&s))
    {
        return true;
    }
    if *method != Method::GET || r.name.is_some() {
        return false;
    }
    // A malformed `watch` value is answered 400 by the handler; it is not a watch here.
    r.watch_prefix
        || Query::parse(query)
            .ok()
            .and_then(|q| q.bool("watch").ok().flatten())
            .unwrap_or(false)
}

/// Whether a request counts against the mutating limit: everything but reads (upstream's
/// `nonMutatingRequestVerbs` are `get`, `list` and `watch`, which come from GET and HEAD).
fn is_mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD)
}

/// The timeout filter: a request that is not long-running and has not answered within the
/// request timeout gets 504 `Timeout: request did not complete within the allotted timeout`
/// (upstream's `NewTimeoutError` with no retry delay). Reading the request body happens inside
/// the handler, so a body that trickles in (slowloris) is cut off by this too.
pub async fn timeout(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let Some(limit) = state.limits.request_timeout else {
        return next.run(req).await;
    };
    if is_long_running(req.method(), req.uri().path(), req.uri().query()) {
        return next.run(req).await;
    }
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::timeout("request did not complete within the allotted timeout")
            .into_response(),
    }
}

/// The in-flight filter: holds one permit of the read or mutating limit while the request is
/// served; when none is free the request gets 429 with `Retry-After: 1`, unless it is
/// long-running or its user is in `system:masters`.
pub async fn max_in_flight(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let permits = if is_mutating(req.method()) {
        &state.limits.mutating
    } else {
        &state.limits.readonly
    };
    let Some(permits) = permits else {
        return next.run(req).await;
    };
    if is_long_running(req.method(), req.uri().path(), req.uri().query()) {
        return next.run(req).await;
    }
    match Arc::clone(permits).try_acquire_owned() {
        Ok(permit) => {
            let response = next.run(req).await;
            drop(permit);
            response
        }
        Err(_) if is_privileged(req.extensions().get::<Arc<UserInfo>>()) => next.run(req).await,
        Err(_) => ApiError::too_many_requests(
            "Too many requests, please try again later.",
            RETRY_AFTER_SECONDS,
        )
        .into_response(),
    }
}

fn is_privileged(user: Option<&Arc<UserInfo>>) -> bool {
    user.is_some_and(|u| u.groups.iter().any(|g| g == SYSTEM_MASTERS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_running_requests() {
        let cases = [
            (
                "watch query",
                Method::GET,
                "/api/v1/pods",
                Some("watch=true"),
                true,
            ),
            (
                "watch=1",
                Method::GET,
                "/api/v1/namespaces/a/pods",
                Some("watch=1"),
                true,
            ),
            (
                "watch=false",
                Method::GET,
                "/api/v1/pods",
                Some("watch=false"),
                false,
            ),
            (
                "malformed watch",
                Method::GET,
                "/api/v1/pods",
                Some("watch=maybe"),
                false,
            ),
            (
                "legacy prefix",
                Method::GET,
                "/api/v1/watch/pods",
                None,
                true,
            ),
            ("list", Method::GET, "/api/v1/pods", None, false),
            (
                "get",
                Method::GET,
                "/api/v1/namespaces/a/pods/p",
                None,
                false,
            ),
            (
                "logs",
                Method::GET,
                "/api/v1/namespaces/a/pods/p/log",
                None,
                true,
            ),
            (
                "exec",
                Method::POST,
                "/api/v1/namespaces/a/pods/p/exec",
                None,
                true,
            ),
            (
                "attach",
                Method::GET,
                "/api/v1/namespaces/a/pods/p/attach",
                None,
                true,
            ),
            (
                "port-forward",
                Method::POST,
                "/api/v1/namespaces/a/pods/p/portforward",
                None,
                true,
            ),
            (
                "proxy",
                Method::GET,
                "/api/v1/nodes/n/proxy/metrics",
                None,
                true,
            ),
            (
                "status",
                Method::PUT,
                "/api/v1/namespaces/a/pods/p/status",
                None,
                false,
            ),
            (
                "create with watch query",
                Method::POST,
                "/api/v1/namespaces/a/pods",
                Some("watch=true"),
                false,
            ),
            ("healthz", Method::GET, "/healthz", None, false),
        ];
        for (name, method, path, query, want) in cases {
            assert_eq!(is_long_running(&method, path, query), want, "case {name}");
        }
    }

    #[test]
    fn reads_and_writes() {
        assert!(!is_mutating(&Method::GET));
        assert!(!is_mutating(&Method::HEAD));
        for m in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert!(is_mutating(&m), "{m}");
        }
    }

    fn state(limits: RequestLimits) -> Arc<AppState> {
        Arc::new(AppState {
            registry: Arc::new(crate::registry::Registry::new(Arc::new(
                crate::storage::MemoryStorage::new(),
            ))),
            token: "t".to_owned(),
            client_certs: None,
            metrics: Default::default(),
            limits,
            max_body_bytes: 1 << 20,
            watch: crate::registry::watch::WatchSettings {
                bookmark_interval: Duration::from_secs(60),
                shutdown: tokio_util::sync::CancellationToken::new(),
            },
            server_address: "127.0.0.1:6443".to_owned(),
        })
    }

    async fn code(
        state: &Arc<AppState>,
        method: Method,
        uri: &str,
        user: Option<&str>,
    ) -> (u16, Option<String>) {
        use tower::ServiceExt;
        let mut req = axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .header(http::header::AUTHORIZATION, "Bearer t");
        if let Some(user) = user {
            req = req.header("Impersonate-User", user);
        }
        let req = req.body(axum::body::Body::empty()).expect("request");
        let response = crate::http::router(Arc::clone(state))
            .oneshot(req)
            .await
            .expect("answer");
        let retry = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        (response.status().as_u16(), retry)
    }

    #[tokio::test]
    async fn full_limits_refuse_all_but_long_running_requests_and_masters() {
        let state = state(RequestLimits::new(1, 1, Duration::ZERO));
        let held = [&state.limits.readonly, &state.limits.mutating].map(|s| {
            s.as_ref()
                .map(|s| Arc::clone(s).try_acquire_owned().expect("free"))
        });
        let pods = "/api/v1/namespaces/default/pods";
        let cases = [
            ("read", Method::GET, pods.to_owned(), Some("bob"), 429),
            (
                "write",
                Method::DELETE,
                format!("{pods}/p"),
                Some("bob"),
                429,
            ),
            (
                "watch",
                Method::GET,
                format!("{pods}?watch=1"),
                Some("bob"),
                403,
            ),
            ("master read", Method::GET, pods.to_owned(), None, 200),
            (
                "master write",
                Method::DELETE,
                format!("{pods}/p"),
                None,
                404,
            ),
        ];
        for (name, method, uri, user, want) in cases {
            let (got, retry) = code(&state, method, &uri, user).await;
            assert_eq!(got, want, "case {name}");
            if want == 429 {
                assert_eq!(retry.as_deref(), Some("1"), "case {name}");
            }
        }
        drop(held);
        assert_eq!(code(&state, Method::GET, pods, Some("bob")).await.0, 403);
    }

    #[test]
    fn zero_means_unlimited() {
        let limits = RequestLimits::new(0, 3, Duration::ZERO);
        assert!(limits.readonly.is_none());
        assert_eq!(
            limits.mutating.as_ref().map(|s| s.available_permits()),
            Some(3)
        );
        assert!(limits.request_timeout.is_none());
    }
}
