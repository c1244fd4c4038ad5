//! Bearer-token authentication: every request but health and version checks must carry the admin token (401 otherwise); an authenticated request carries its [`UserInfo`].

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header::AUTHORIZATION;

use crate::auth::authenticator::constant_time_eq;
use crate::auth::user::UserInfo;
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::request_info::{Route, parse};

/// Rejects requests without `Authorization: Bearer <token>`. Health checks and `/version` are
/// open, as upstream grants them to unauthenticated users (`system:public-info-viewer`). The
/// admin token authenticates as [`UserInfo::admin`], put in the request's extensions for the
/// handlers (a CertificateSigningRequest records it, a self review answers with it).
pub async fn require_token(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    if matches!(parse(req.uri().path()), Route::Health | Route::Version) {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        Some(token) if constant_time_eq(token.as_bytes(), state.token.as_bytes()) => {
            req.extensions_mut().insert(Arc::new(UserInfo::admin()));
            next.run(req).await
        }
        _ => ApiError::unauthorized().into_response(),
    }
}
