//! The HTTP layer: routing, authentication, discovery, and the verb handlers over the registry.
//!
//! One fallback handler parses every path itself ([`request_info`]) instead of registering a
//! route per resource: the registry decides what exists.

pub mod auth;
pub mod authorization;
pub mod body;
pub mod connection;
pub mod discovery;
pub mod handlers;
pub mod health;
pub mod impersonation;
pub mod limits;
pub mod metrics;
pub mod negotiate;
pub mod oidc;
pub mod openapi;
pub mod query;
pub mod request_info;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Method, StatusCode};
use serde_json::Value;

use crate::error::ApiError;
use crate::registry::Registry;
use crate::registry::watch::WatchSettings;
use request_info::Route;

/// What every request handler shares.
#[derive(Debug)]
pub struct AppState {
    /// The registry serving every resource.
    pub registry: Arc<Registry>,
    /// The admin bearer token.
    pub token: String,
    /// Request bodies above this size are refused with 413.
    pub max_body_bytes: usize,
    /// Bookmark cadence and the shutdown signal of watches.
    pub watch: WatchSettings,
    /// `host:port` clients reach the server at (for `/api`).
    pub server_address: String,
    /// Verifies client certificates against the cluster CA; `None` accepts none.
    pub client_certs: Option<crate::auth::client_cert::ClientCertAuthenticator>,
    /// The in-flight caps and the request timeout.
    pub limits: limits::RequestLimits,
    /// `apiserver_request_total` and `apiserver_request_duration_seconds`, served at `/metrics`.
    pub metrics: Arc<metrics::ApiServerMetrics>,
}

/// The router: authentication in front of one dispatching handler.
pub fn router(state: Arc<AppState>) -> Router {
    // Layers run outside-in from the last added: the request timeout, authentication,
    // impersonation, the in-flight limit, authorization (upstream's handler chain order), then
    // the request metrics around the handlers.
    Router::new()
        .fallback(dispatch)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            metrics::instrument,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            authorization::authorize,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            limits::max_in_flight,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            impersonation::impersonate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            auth::require_token,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            limits::timeout,
        ))
        .with_state(state)
}

async fn dispatch(State(state): State<Arc<AppState>>, mut req: Request) -> Response {
    if let Some(answer) = oidc::serve(&state, req.uri().path(), req.method()) {
        return answer.unwrap_or_else(IntoResponse::into_response);
    }
    // Parsed once by the metrics layer in front of this handler.
    let route = req
        .extensions_mut()
        .remove::<Route>()
        .unwrap_or_else(|| request_info::parse(req.uri().path()));
    let response = match route {
        Route::Resource(r) => handlers::handle(&state, r, req).await,
        Route::Health => Ok(health::serve(&state, req.uri().path(), req.uri().query()).await),
        Route::OpenApiV3Index => openapi::serve(
            &state.registry.openapi(),
            None,
            req.method(),
            req.headers(),
            req.uri().query(),
        ),
        Route::OpenApiV3(path) => openapi::serve(
            &state.registry.openapi(),
            Some(&path),
            req.method(),
            req.headers(),
            req.uri().query(),
        ),
        Route::OpenApiV2 => {
            openapi::serve_v2(&state.registry.openapi(), req.method(), req.headers())
        }
        other => discovery_route(&state, other, req.method(), req.headers()),
    };
    response.unwrap_or_else(IntoResponse::into_response)
}

fn discovery_route(
    state: &AppState,
    route: Route,
    method: &Method,
    headers: &http::HeaderMap,
) -> Result<Response, ApiError> {
    if method != Method::GET && method != Method::HEAD {
        return Err(ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: "the server does not allow this method on the requested resource".to_owned(),
            details: None,
            continue_token: None,
        });
    }
    let doc = match route {
        // `dispatch` serves the health paths itself.
        Route::Health => return Ok(health::not_found()),
        Route::Metrics => return Ok(metrics::serve(&state.metrics)),
        Route::Version => crate::version::version(),
        Route::CoreVersions | Route::Groups => {
            let core = route == Route::CoreVersions;
            let accept = headers
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if let Some(version) = discovery::aggregated_version(accept) {
                let doc = discovery::aggregated(&state.registry, core, version);
                let mut response = json_response(StatusCode::OK, &doc);
                if let Ok(ct) = HeaderValue::from_str(&discovery::aggregated_content_type(version))
                {
                    response.headers_mut().insert(CONTENT_TYPE, ct);
                }
                response
                    .headers_mut()
                    .insert(http::header::VARY, HeaderValue::from_static("Accept"));
                return Ok(response);
            }
            if core {
                discovery::core_versions(&state.server_address)
            } else {
                discovery::groups(&state.registry)
            }
        }
        Route::Group(g) => {
            discovery::group(&state.registry, &g).ok_or_else(ApiError::path_not_found)?
        }
        Route::Resources { group, version } => {
            discovery::resources(&state.registry, &group, &version)
                .ok_or_else(ApiError::path_not_found)?
        }
        Route::Resource(_)
        | Route::OpenApiV3Index
        | Route::OpenApiV3(_)
        | Route::OpenApiV2
        | Route::Unknown => {
            return Err(ApiError::path_not_found());
        }
    };
    Ok(json_response(StatusCode::OK, &doc))
}

/// A JSON response.
pub fn json_response(code: StatusCode, value: &Value) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = code;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
