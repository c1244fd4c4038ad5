//! Service account issuer discovery: `/.well-known/openid-configuration` and `/openid/v1/jwks`, as upstream's `serviceaccount.OpenIDMetadataServer`.

use axum::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use http::{Method, StatusCode};

use crate::error::ApiError;
use crate::http::AppState;

/// The discovery document's path.
pub const OPENID_CONFIGURATION_PATH: &str = "/.well-known/openid-configuration";
/// The key set's path.
pub const JWKS_PATH: &str = "/openid/v1/jwks";

/// The answer for `path` if it is one of the discovery paths; `None` for other paths.
pub fn serve(state: &AppState, path: &str, method: &Method) -> Option<Result<Response, ApiError>> {
    let (doc, content_type) = match path {
        OPENID_CONFIGURATION_PATH | JWKS_PATH => {
            let issuer = state.registry.token_issuer()?;
            if path == JWKS_PATH {
                (issuer.jwks(), "application/jwk-set+json")
            } else {
                let jwks_uri = format!("https://{}{JWKS_PATH}", state.server_address);
                (issuer.openid_configuration(&jwks_uri), "application/json")
            }
        }
        _ => return None,
    };
    if method != Method::GET && method != Method::HEAD {
        return Some(Err(ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: "the server does not allow this method on the requested resource".to_owned(),
            details: None,
            continue_token: None,
        }));
    }
    let mut response = (StatusCode::OK, doc.to_string()).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Upstream lets clients cache the documents for an hour.
    response.headers_mut().insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    Some(Ok(response))
}
