//! Serving `/openapi/v3` and its per-group-version documents, with upstream's caching headers (ETag, immutable hashed URLs, redirect on a stale hash), and `/openapi/v2` with its ETag.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::header::{
    ACCEPT, CACHE_CONTROL, CONTENT_TYPE, ETAG, HeaderMap, HeaderValue, IF_NONE_MATCH, LOCATION,
};
use http::{Method, StatusCode};

use crate::error::{ApiError, Result};
use crate::http::query::Query;
use crate::openapi::OpenApi;

/// Answers `GET /openapi/v2`: JSON only (upstream also serves protobuf, which clients ask
/// for with `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`; they get 406),
/// with an ETag that changes with the document, so pollers can ask `If-None-Match`.
pub fn serve_v2(openapi: &OpenApi, method: &Method, headers: &HeaderMap) -> Result<Response> {
    only_get(method)?;
    check_accept(headers)?;
    let document = openapi.v2();
    let etag = format!("\"{}\"", document.hash);
    Ok(answer(
        document.body.clone(),
        &etag,
        "no-cache, private",
        headers,
    ))
}

/// Answers `GET /openapi/v3` (`doc` is `None`) or `GET /openapi/v3/{doc}`.
pub fn serve(
    openapi: &OpenApi,
    doc: Option<&str>,
    method: &Method,
    headers: &HeaderMap,
    raw_query: Option<&str>,
) -> Result<Response> {
    only_get(method)?;
    check_accept(headers)?;
    let Some(path) = doc else {
        let etag = format!("\"{}\"", crate::openapi::content_hash(openapi.index()));
        return Ok(answer(
            openapi.index().clone(),
            &etag,
            "no-cache, private",
            headers,
        ));
    };
    let document = openapi
        .document(path)
        .ok_or_else(ApiError::path_not_found)?;
    let query = Query::parse(raw_query)?;
    let cache_control = match query.get("hash") {
        // A URL with the current hash never changes: clients may cache it for good.
        Some(hash) if hash == document.hash => "public, immutable",
        // A stale hash: send the client to the current document, as upstream does.
        Some(_) => {
            let location = format!("/openapi/v3/{path}?hash={}", document.hash);
            let mut response = StatusCode::MOVED_PERMANENTLY.into_response();
            if let Ok(v) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(LOCATION, v);
            }
            return Ok(response);
        }
        None => "no-cache, private",
    };
    let etag = format!("\"{}\"", document.hash);
    Ok(answer(document.body.clone(), &etag, cache_control, headers))
}

/// OpenAPI documents are read, never written.
fn only_get(method: &Method) -> Result<()> {
    if method != Method::GET && method != Method::HEAD {
        return Err(ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: "the server does not allow this method on the requested resource".to_owned(),
            details: None,
            continue_token: None,
        });
    }
    Ok(())
}

/// The documents are JSON only; an `Accept` that rules JSON out (kubectl's protobuf-only
/// requests) gets 406 so the client falls back.
fn check_accept(headers: &HeaderMap) -> Result<()> {
    let accept = headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if accept.trim().is_empty() {
        return Ok(());
    }
    let json = accept.split(',').any(|range| {
        let media = range.split(';').next().unwrap_or("").trim();
        matches!(media, "application/json" | "application/*" | "*/*")
    });
    if json {
        Ok(())
    } else {
        Err(ApiError::not_acceptable(format!(
            "only application/json is served for OpenAPI documents (asked for {accept:?})"
        )))
    }
}

fn answer(body: Bytes, etag: &str, cache_control: &'static str, headers: &HeaderMap) -> Response {
    let not_modified = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut response = if not_modified {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = Response::new(Body::from(body));
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        r
    };
    if let Ok(v) = HeaderValue::from_str(etag) {
        response.headers_mut().insert(ETAG, v);
    }
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static(cache_control));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> OpenApi {
        OpenApi::build(crate::resources::ALL)
    }

    #[test]
    fn documents_with_hashes_etags_and_redirects() {
        let api = api();
        let hash = api.document("apis/apps/v1").expect("doc").hash.clone();
        let headers = HeaderMap::new();
        let ok = serve(
            &api,
            Some("apis/apps/v1"),
            &Method::GET,
            &headers,
            Some(&format!("hash={hash}")),
        )
        .expect("served");
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(ok.headers()[CACHE_CONTROL], "public, immutable");
        assert_eq!(ok.headers()[ETAG], format!("\"{hash}\"").as_str());

        let stale = serve(
            &api,
            Some("apis/apps/v1"),
            &Method::GET,
            &headers,
            Some("hash=0"),
        )
        .expect("redirect");
        assert_eq!(stale.status(), StatusCode::MOVED_PERMANENTLY);
        assert_eq!(
            stale.headers()[LOCATION],
            format!("/openapi/v3/apis/apps/v1?hash={hash}").as_str()
        );

        let mut cached = HeaderMap::new();
        cached.insert(
            IF_NONE_MATCH,
            HeaderValue::from_str(&format!("\"{hash}\"")).expect("header"),
        );
        let not_modified =
            serve(&api, Some("apis/apps/v1"), &Method::GET, &cached, None).expect("304");
        assert_eq!(not_modified.status(), StatusCode::NOT_MODIFIED);

        let missing = serve(&api, Some("apis/nope/v1"), &Method::GET, &headers, None)
            .expect_err("unknown group");
        assert_eq!(missing.code, 404);
        let index = serve(&api, None, &Method::GET, &headers, None).expect("index");
        assert_eq!(index.status(), StatusCode::OK);
    }

    #[test]
    fn protobuf_only_is_not_acceptable() {
        let api = api();
        let mut headers = HeaderMap::new();
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/com.github.proto-openapi.spec.v3@v1.0+protobuf"),
        );
        let err = serve(&api, Some("api/v1"), &Method::GET, &headers, None).expect_err("406");
        assert_eq!(err.code, 406);
        let err = serve(&api, None, &Method::POST, &HeaderMap::new(), None).expect_err("405");
        assert_eq!(err.code, 405);
    }
}
