//! The authentication filter (apiserver's `WithAuthentication` with an anonymous authenticator limited to the public paths): a client certificate, the admin token or a ServiceAccount token; 401 otherwise; the request carries its [`UserInfo`].

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header::AUTHORIZATION;

use crate::auth::authenticator::constant_time_eq;
use crate::auth::client_cert::PeerCertificate;
use crate::auth::user::UserInfo;
use crate::error::ApiError;
use crate::http::AppState;

/// The paths an unauthenticated request may reach: upstream's `system:public-info-viewer`
/// paths, to which kube-apiserver limits anonymous access when configured with
/// `anonymous.conditions` (kcm's default). Everything else wants credentials (401).
pub fn is_public_path(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    matches!(path, "/healthz" | "/livez" | "/readyz" | "/version")
        || ["/healthz/", "/livez/", "/readyz/"]
            .iter()
            .any(|p| path.starts_with(p))
}

/// The outcome of authenticating a request's credentials.
#[derive(Debug, PartialEq, Eq)]
pub enum Authenticated {
    /// Valid credentials.
    User(UserInfo),
    /// No credentials at all.
    Anonymous,
    /// Credentials that authenticate nobody (401 on any path).
    Rejected,
}

/// Who the request's credentials name: a valid client certificate wins, then a bearer token
/// (as upstream's union: x509 first, then tokens; a failure of one is forgiven when another
/// succeeds).
pub async fn authenticate_request(
    state: &AppState,
    peer_cert: Option<&PeerCertificate>,
    authorization: Option<&http::HeaderValue>,
) -> Authenticated {
    if let Some(PeerCertificate(der)) = peer_cert
        && let Some(verifier) = &state.client_certs
    {
        match verifier.authenticate(der, jiff::Timestamp::now().as_second()) {
            Ok(user) => return Authenticated::User(user),
            Err(why) => tracing::debug!(%why, "client certificate rejected"),
        }
    }
    let bearer = authorization
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if let Some(token) = bearer {
        if !token.is_empty() && constant_time_eq(token.as_bytes(), state.token.as_bytes()) {
            return Authenticated::User(UserInfo::admin());
        }
        if let Some(user) = state
            .registry
            .authenticator()
            .authenticate_token(token)
            .await
        {
            return Authenticated::User(user);
        }
        return Authenticated::Rejected;
    }
    if peer_cert.is_some() || authorization.is_some() {
        Authenticated::Rejected
    } else {
        Authenticated::Anonymous
    }
}

/// Authenticates every request; anonymous requests reach only [`is_public_path`]s. The user
/// goes into the request's extensions for authorization and the handlers (a
/// CertificateSigningRequest records it, a self review answers with it).
pub async fn require_token(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let peer_cert = req.extensions().get::<PeerCertificate>().cloned();
    let authorization = req.headers().get(AUTHORIZATION).cloned();
    let user = match authenticate_request(&state, peer_cert.as_ref(), authorization.as_ref()).await
    {
        Authenticated::User(user) => user,
        Authenticated::Anonymous if is_public_path(req.uri().path()) => UserInfo::anonymous(),
        Authenticated::Anonymous | Authenticated::Rejected => {
            return ApiError::unauthorized().into_response();
        }
    };
    req.extensions_mut().insert(Arc::new(user));
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_paths_are_upstreams_public_info() {
        for path in [
            "/healthz",
            "/livez",
            "/readyz",
            "/version",
            "/version/",
            "/readyz/etcd",
        ] {
            assert!(is_public_path(path), "{path}");
        }
        for path in [
            "/api",
            "/apis",
            "/openapi/v3",
            "/api/v1/pods",
            "/healthzz",
            "/metrics",
        ] {
            assert!(!is_public_path(path), "{path}");
        }
    }
}
