//! `/healthz`, `/livez`, `/readyz` and one path per check under each: kube-apiserver's health
//! endpoints (`k8s.io/apiserver/pkg/server/healthz`, `handleRootHealth` and
//! `adaptCheckToHandler`).
//!
//! The root path runs every check of its endpoint: `ok` when all pass (`?verbose` lists them,
//! `[+]etcd ok`, ending `readyz check passed`), 500 listing them with the reason withheld when
//! one fails (`[-]etcd failed: reason withheld` … `readyz check failed`); `?exclude=NAME` skips a
//! check. `/readyz/etcd` runs one check and answers `ok` or 500 `internal server error: …`.
//! `etcd` names the store check on every backend, as clients and load balancers probe it by
//! that name.

use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::header::{CONTENT_TYPE, HeaderValue, X_CONTENT_TYPE_OPTIONS};

use tokio_util::sync::CancellationToken;

use super::AppState;
use super::query::Query;
use crate::storage::Storage;

/// How long the store check waits (kube-apiserver's `--etcd-healthcheck-timeout` and
/// `--etcd-readycheck-timeout`, both 2 s).
const STORE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The checks that probe the store.
const STORE_CHECKS: &[&str] = &["etcd", "etcd-readiness"];
/// The checks of `/healthz` and `/livez`, in upstream's order.
const LIVE_CHECKS: &[&str] = &["ping", "log", "etcd"];
/// The checks of `/readyz`: liveness plus the store's readiness and the shutdown gate.
const READY_CHECKS: &[&str] = &["ping", "log", "etcd", "etcd-readiness", "shutdown"];

/// Serves a health path: `/readyz`, `/readyz/etcd`, … (404 for any other path).
pub async fn serve(state: &AppState, path: &str, query: Option<&str>) -> Response {
    serve_checks(
        &**state.registry.storage(),
        &state.watch.shutdown,
        path,
        query,
    )
    .await
    .unwrap_or_else(not_found)
}

/// [`serve`] over the store and the shutdown signal it checks; `None` when `path` names no
/// health check.
async fn serve_checks(
    store: &dyn Storage,
    shutdown: &CancellationToken,
    path: &str,
    query: Option<&str>,
) -> Option<Response> {
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let endpoint = parts.next()?;
    let checks = match endpoint {
        "healthz" | "livez" => LIVE_CHECKS,
        "readyz" => READY_CHECKS,
        _ => return None,
    };
    let Some(sub) = parts.next() else {
        let query = HealthQuery::parse(query);
        let mut results = Vec::with_capacity(checks.len());
        // `etcd` and `etcd-readiness` ask the store the same question: one probe answers both.
        let mut store_probe: Option<Result<(), String>> = None;
        for &name in checks {
            let outcome = if query.excluded.iter().any(|e| e == name) {
                None
            } else if STORE_CHECKS.contains(&name) {
                if store_probe.is_none() {
                    store_probe = Some(run_check(store, shutdown, name).await);
                }
                store_probe.clone()
            } else {
                Some(run_check(store, shutdown, name).await)
            };
            let result = match outcome {
                None => Outcome::Excluded,
                Some(Ok(())) => Outcome::Passed,
                Some(Err(reason)) => Outcome::Failed(reason),
            };
            results.push((name, result));
        }
        return Some(render_root(endpoint, &results, &query));
    };
    if !checks.contains(&sub) {
        return None;
    }
    Some(match run_check(store, shutdown, sub).await {
        Ok(()) => text(StatusCode::OK, "ok".to_owned()),
        Err(reason) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
    })
}

/// One check's result.
async fn run_check(
    store: &dyn Storage,
    shutdown: &CancellationToken,
    name: &str,
) -> Result<(), String> {
    match name {
        name if STORE_CHECKS.contains(&name) => {
            let probe = store.current_revision();
            match tokio::time::timeout(STORE_CHECK_TIMEOUT, probe).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!(
                    "the {} store did not answer within {STORE_CHECK_TIMEOUT:?}",
                    store.backend()
                )),
            }
        }
        "shutdown" if shutdown.is_cancelled() => Err("process is shutting down".to_owned()),
        _ => Ok(()),
    }
}

/// What the root path was asked.
#[derive(Debug, Default)]
struct HealthQuery {
    verbose: bool,
    excluded: Vec<String>,
}

impl HealthQuery {
    /// Reads `verbose` and `exclude`; a query that does not decode asks for neither.
    fn parse(query: Option<&str>) -> Self {
        let query = Query::parse(query).unwrap_or_default();
        HealthQuery {
            verbose: query.get("verbose").is_some(),
            excluded: query.all("exclude").map(str::to_owned).collect(),
        }
    }
}

/// How one check went.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Passed,
    Excluded,
    Failed(String),
}

/// `handleRootHealth`'s answer for the checks' results.
fn render_root(endpoint: &str, results: &[(&str, Outcome)], query: &HealthQuery) -> Response {
    let mut lines = String::new();
    let mut failed = Vec::new();
    for (name, outcome) in results {
        match outcome {
            Outcome::Passed => lines.push_str(&format!("[+]{name} ok\n")),
            Outcome::Excluded => lines.push_str(&format!("[+]{name} excluded: ok\n")),
            Outcome::Failed(reason) => {
                // The reason is withheld from this public endpoint; the log has it.
                lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
                failed.push(format!("[-]{name} failed: {reason}"));
            }
        }
    }
    let unknown: Vec<String> = query
        .excluded
        .iter()
        .filter(|e| !results.iter().any(|(name, _)| name == e))
        .map(|e| format!("{e:?}"))
        .collect();
    if !unknown.is_empty() {
        lines.push_str(&format!(
            "warn: some health checks cannot be excluded: no matches for {}\n",
            unknown.join(",")
        ));
    }
    if !failed.is_empty() {
        tracing::info!(endpoint, failed = %failed.join("; "), "health check failed");
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{lines}{endpoint} check failed\n"),
        );
    }
    if !query.verbose {
        return text(StatusCode::OK, "ok".to_owned());
    }
    text(StatusCode::OK, format!("{lines}{endpoint} check passed\n"))
}

/// Go's `http.NotFound`.
pub(super) fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "404 page not found\n".to_owned())
}

fn text(code: StatusCode, body: String) -> Response {
    let mut response = (code, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(response: Response) -> (u16, String) {
        let code = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        (code, String::from_utf8(bytes.to_vec()).expect("utf-8"))
    }

    #[tokio::test]
    async fn root_answers_as_upstream() {
        let all_pass = [
            ("ping", Outcome::Passed),
            ("etcd", Outcome::Passed),
            ("shutdown", Outcome::Excluded),
        ];
        let quiet = HealthQuery::parse(Some("exclude=shutdown"));
        assert_eq!(
            body(render_root("readyz", &all_pass, &quiet)).await,
            (200, "ok".to_owned())
        );
        let verbose = HealthQuery::parse(Some("verbose&exclude=shutdown&exclude=nope"));
        assert_eq!(
            body(render_root("readyz", &all_pass, &verbose)).await,
            (
                200,
                "[+]ping ok\n[+]etcd ok\n[+]shutdown excluded: ok\n\
                 warn: some health checks cannot be excluded: no matches for \"nope\"\n\
                 readyz check passed\n"
                    .to_owned()
            )
        );
        // A failure is always listed, reason withheld, whether or not `verbose` was asked.
        let failing = [
            ("ping", Outcome::Passed),
            (
                "etcd",
                Outcome::Failed("context deadline exceeded".to_owned()),
            ),
        ];
        assert_eq!(
            body(render_root("livez", &failing, &HealthQuery::default())).await,
            (
                500,
                "[+]ping ok\n[-]etcd failed: reason withheld\nlivez check failed\n".to_owned()
            )
        );
    }

    #[tokio::test]
    async fn paths_and_checks() {
        let store = crate::storage::memory::MemoryStorage::new();
        let shutdown = CancellationToken::new();
        let get = |path: &'static str, query: Option<&'static str>| {
            let (store, shutdown) = (&store, &shutdown);
            async move {
                body(
                    serve_checks(store, shutdown, path, query)
                        .await
                        .expect("a health path"),
                )
                .await
            }
        };
        assert_eq!(
            get("/readyz", Some("verbose")).await,
            (
                200,
                "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]etcd-readiness ok\n[+]shutdown ok\n\
                 readyz check passed\n"
                    .to_owned()
            )
        );
        assert_eq!(get("/livez/etcd", None).await, (200, "ok".to_owned()));
        assert_eq!(get("/healthz", None).await, (200, "ok".to_owned()));
        assert!(
            serve_checks(&store, &shutdown, "/livez/shutdown", None)
                .await
                .is_none(),
            "shutdown is a readiness check only"
        );
        assert!(
            serve_checks(&store, &shutdown, "/readyz/", None)
                .await
                .is_none()
        );

        shutdown.cancel();
        let (code, text) = get("/readyz", None).await;
        assert_eq!(code, 500);
        assert!(
            text.contains("[-]shutdown failed: reason withheld\n"),
            "{text}"
        );
        assert!(text.ends_with("readyz check failed\n"), "{text}");
        assert_eq!(
            get("/readyz/shutdown", None).await,
            (
                500,
                "internal server error: process is shutting down\n".to_owned()
            )
        );
        assert_eq!(
            get("/livez", None).await.0,
            200,
            "a server shutting down is still alive"
        );
    }
}
