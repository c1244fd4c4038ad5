//! The HTTPS endpoint: `/healthz`, `/livez`, `/readyz` (and `/<endpoint>/<check>`), `/metrics`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, RawQuery};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::health::{HealthEndpoints, HealthResponse};
use super::metrics::ManagerMetrics;

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The content type of `/metrics` (what the OpenMetrics text encoder writes).
const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn text(response: HealthResponse) -> Response {
    let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (status, response.body).into_response();
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// The routes of the endpoint.
pub fn router(health: HealthEndpoints, metrics: ManagerMetrics) -> Router {
    let mut router = Router::new();
    for endpoint in ["healthz", "livez", "readyz"] {
        let root = health.clone();
        let single = health.clone();
        router = router
            .route(
                &format!("/{endpoint}"),
                get(move |RawQuery(query): RawQuery| async move {
                    match root.endpoint(endpoint) {
                        Some(checks) => text(checks.respond(endpoint, query.as_deref())),
                        None => StatusCode::NOT_FOUND.into_response(),
                    }
                }),
            )
            .route(
                &format!("/{endpoint}/{{check}}"),
                get(move |Path(check): Path<String>| async move {
                    match single
                        .endpoint(endpoint)
                        .and_then(|c| c.respond_single(&check))
                    {
                        Some(response) => text(response),
                        None => StatusCode::NOT_FOUND.into_response(),
                    }
                }),
            );
    }
    router.route(
        "/metrics",
        get(move || async move {
            match metrics.encode() {
                Ok(body) => {
                    let mut resp = body.into_response();
                    resp.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static(METRICS_CONTENT_TYPE),
                    );
                    resp
                }
                Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
            }
        }),
    )
}

/// A running HTTPS endpoint.
#[derive(Debug)]
pub struct HttpsServer {
    /// Where it listens.
    local_addr: SocketAddr,
    /// The accept loop; ends when the token given to [`serve`] fires.
    task: JoinHandle<()>,
}

impl HttpsServer {
    /// The bound address (the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Waits for the accept loop to end (after its token fired); open connections are closed.
    pub async fn stopped(self) {
        if let Err(err) = self.task.await {
            tracing::error!(%err, "HTTPS server task failed");
        }
    }
}

/// Serves `router` over TLS on `listener` until `cancel` fires. Each connection gets its own
/// task (a slow handshake cannot stall others) and speaks HTTP/1.1 or HTTP/2.
pub fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    cancel: CancellationToken,
) -> std::io::Result<HttpsServer> {
    let local_addr = listener.local_addr()?;
    let acceptor = TlsAcceptor::from(tls);
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            let accepted = tokio::select! {
                _ = cancel.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            while connections.try_join_next().is_some() {}
            let (tcp, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let acceptor = acceptor.clone();
            let router = router.clone();
            connections.spawn(async move {
                let stream =
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(err)) => {
                            tracing::debug!(%peer, %err, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    };
                let service = hyper::service::service_fn(move |req| router.clone().oneshot(req));
                if let Err(err) = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(%peer, %err, "connection ended with an error");
                }
            });
        }
        // Dropping the set aborts the connections still open.
        drop(connections);
    });
    Ok(HttpsServer { local_addr, task })
}
