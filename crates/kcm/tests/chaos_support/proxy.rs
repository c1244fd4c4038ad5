//! A fault-injecting HTTP proxy between the controllers' clients and the API server: failed writes, expired watches, request counts.
//!
//! Faults are decided before a request reaches the server, so an injected failure never hides
//! a write that happened (a 500 after commit is a different fault, one where upstream's
//! controllers may over-create for a moment too). Every answer is a kube-apiserver `Status`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Body = BoxBody<Bytes, BoxError>;

/// Which faults the proxy injects; the zero value injects none.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// The share of writes (POST, PUT, PATCH, DELETE) answered 409 Conflict, 500 or 429 with
    /// `Retry-After` (a third each) without reaching the server.
    pub write_fault_rate: f64,
    /// The share of watch requests answered `410 Gone` at once.
    pub watch_gone_rate: f64,
    /// Watches that pass are ended after a random time up to this with an `ERROR` event
    /// carrying a 410 Expired Status, as kube-apiserver ends a watch whose resourceVersion was
    /// compacted away.
    pub watch_expire_after: Option<Duration>,
    /// At most this many watch faults per resource until [`FaultProxy::rearm_watch_faults`]
    /// (client-go's Reflector backs off before every relist, 800 ms doubling to 30 s and
    /// reset only after two quiet minutes: a watch that expires every second keeps an informer
    /// asleep for most of a minute, upstream as here).
    pub watch_fault_budget: usize,
}

/// What the proxy saw of one verb on one resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Requests received.
    pub requests: u64,
    /// Requests answered with an injected fault.
    pub faulted: u64,
    /// Requests the server answered 2xx.
    pub succeeded: u64,
}

/// Counts by `(verb, resource)`, e.g. `("create", "pods")`, `("update", "replicasets/status")`.
type Counts = BTreeMap<(&'static str, String), Tally>;

struct State {
    upstream: String,
    client: Client<HttpConnector, Incoming>,
    faults: Faults,
    rng: Mutex<StdRng>,
    counts: Mutex<Counts>,
    /// Watch faults injected per resource since the last rearm.
    watch_faults: Mutex<BTreeMap<String, usize>>,
    shutdown: CancellationToken,
}

/// A running proxy on `127.0.0.1:PORT`; stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<State>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (`http://127.0.0.1:PORT`), drawing faults from `seed`.
    pub async fn start(upstream: &str, faults: Faults, seed: u64) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let state = Arc::new(State {
            upstream: upstream.trim_end_matches('/').to_owned(),
            client: Client::builder(TokioExecutor::new()).build(HttpConnector::new()),
            faults,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            counts: Mutex::new(Counts::new()),
            watch_faults: Mutex::new(BTreeMap::new()),
            shutdown: CancellationToken::new(),
        });
        tokio::spawn(accept_loop(listener, Arc::clone(&state)));
        Self { addr, state }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What the proxy saw of `verb` on `resource`.
    pub fn tally(&self, verb: &str, resource: &str) -> Tally {
        let counts = self.state.counts.lock().expect("counts");
        counts
            .iter()
            .find(|((v, r), _)| *v == verb && r == resource)
            .map(|(_, t)| *t)
            .unwrap_or_default()
    }

    /// Grants every resource a fresh [`Faults::watch_fault_budget`].
    pub fn rearm_watch_faults(&self) {
        self.state
            .watch_faults
            .lock()
            .expect("watch faults")
            .clear();
    }

    /// The sum over every write verb and resource.
    pub fn writes(&self) -> Tally {
        let counts = self.state.counts.lock().expect("counts");
        counts
            .iter()
            .filter(|((verb, _), _)| is_write_verb(verb))
            .fold(Tally::default(), |acc, (_, t)| Tally {
                requests: acc.requests + t.requests,
                faulted: acc.faulted + t.faulted,
                succeeded: acc.succeeded + t.succeeded,
            })
    }

    /// One line per `(verb, resource)`, for the test's output.
    pub fn summary(&self) -> String {
        let counts = self.state.counts.lock().expect("counts");
        counts
            .iter()
            .map(|((verb, resource), t)| {
                format!(
                    "  {verb:>16} {resource:<28} requests {:>6} faulted {:>5} succeeded {:>6}\n",
                    t.requests, t.faulted, t.succeeded
                )
            })
            .collect()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
    }
}

fn is_write_verb(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    loop {
        let stream = tokio::select! {
            () = state.shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let shutdown = state.shutdown.clone();
            let service = hyper::service::service_fn(move |req| handle(Arc::clone(&state), req));
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = conn => {}
                () = shutdown.cancelled() => {}
            }
        });
    }
}

/// The verb and resource of a request, as kube-apiserver's RequestInfo names them.
fn classify(method: &Method, path: &str, query: &str) -> (&'static str, String) {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest: &[&str] = match segments.first() {
        Some(&"api") => segments.get(2..).unwrap_or_default(),
        Some(&"apis") => segments.get(3..).unwrap_or_default(),
        _ => &[],
    };
    let rest = match rest {
        ["namespaces", _ns, resource, tail @ ..] => {
            let mut v = vec![*resource];
            v.extend_from_slice(tail);
            v
        }
        other => other.to_vec(),
    };
    let resource = match rest.as_slice() {
        [resource, _name, sub, ..] => format!("{resource}/{sub}"),
        [resource, ..] => (*resource).to_owned(),
        [] => path.to_owned(),
    };
    let named = rest.len() >= 2;
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match *method {
        Method::GET if watch => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    };
    (verb, resource)
}

/// What to do with one request.
enum Decision {
    Forward { expire_after: Option<Duration> },
    Fail(StatusCode),
}

impl State {
    fn decide(&self, verb: &str, resource: &str) -> Decision {
        let mut rng = self.rng.lock().expect("rng");
        if is_write_verb(verb) && rng.random_bool(self.faults.write_fault_rate.clamp(0.0, 1.0)) {
            let code = [
                StatusCode::CONFLICT,
                StatusCode::INTERNAL_SERVER_ERROR,
                StatusCode::TOO_MANY_REQUESTS,
            ][rng.random_range(0..3)];
            return Decision::Fail(code);
        }
        if verb == "watch" {
            let mut used = self.watch_faults.lock().expect("watch faults");
            let used = used.entry(resource.to_owned()).or_default();
            if *used >= self.faults.watch_fault_budget {
                return Decision::Forward { expire_after: None };
            }
            if rng.random_bool(self.faults.watch_gone_rate.clamp(0.0, 1.0)) {
                *used += 1;
                return Decision::Fail(StatusCode::GONE);
            }
            let expire_after = self.faults.watch_expire_after.map(|max| {
                let millis = max.as_millis().max(1) as u64;
                Duration::from_millis(rng.random_range(millis / 4..=millis))
            });
            if expire_after.is_some() {
                *used += 1;
            }
            return Decision::Forward { expire_after };
        }
        Decision::Forward { expire_after: None }
    }

    fn record(&self, verb: &'static str, resource: &str, update: impl FnOnce(&mut Tally)) {
        let mut counts = self.counts.lock().expect("counts");
        update(counts.entry((verb, resource.to_owned())).or_default());
    }
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or_default().to_owned();
    let (verb, resource) = classify(req.method(), &path, &query);
    state.record(verb, &resource, |t| t.requests += 1);
    let expire_after = match state.decide(verb, &resource) {
        Decision::Fail(code) => {
            state.record(verb, &resource, |t| t.faulted += 1);
            return Ok(injected(code, &resource, &path));
        }
        Decision::Forward { expire_after } => expire_after,
    };

    let path_and_query = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| path.clone());
    let (mut parts, body) = req.into_parts();
    parts.uri = match format!("{}{path_and_query}", state.upstream).parse() {
        Ok(uri) => uri,
        Err(_) => {
            return Ok(status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "bad URI",
                None,
            ));
        }
    };
    parts.headers.remove(header::HOST);
    let response = match state.client.request(Request::from_parts(parts, body)).await {
        Ok(response) => response,
        Err(e) => {
            return Ok(status(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                &format!("the chaos proxy could not reach the API server: {e}"),
                None,
            ));
        }
    };
    if response.status().is_success() {
        state.record(verb, &resource, |t| t.succeeded += 1);
    }
    let (parts, body) = response.into_parts();
    let body = match expire_after {
        Some(after) if parts.status.is_success() => expiring(body, after),
        _ => body.map_err(|e| Box::new(e) as BoxError).boxed(),
    };
    Ok(Response::from_parts(parts, body))
}

/// The Status kube-apiserver would answer for the injected `code`.
fn injected(code: StatusCode, resource: &str, path: &str) -> Response<Body> {
    let name = path.rsplit('/').next().unwrap_or_default();
    match code {
        StatusCode::CONFLICT => status(
            code,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been \
                 modified; please apply your changes to the latest version and try again"
            ),
            Some(json!({"name": name, "kind": resource})),
        ),
        StatusCode::TOO_MANY_REQUESTS => {
            let mut response = status(
                code,
                "TooManyRequests",
                "Too many requests, please try again later.",
                Some(json!({"retryAfterSeconds": 1})),
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
        StatusCode::GONE => status(
            code,
            "Expired",
            "too old resource version: injected by the chaos proxy",
            None,
        ),
        _ => status(
            code,
            "InternalError",
            "Internal error occurred: injected by the chaos proxy",
            Some(json!({"causes": [{"message": "injected by the chaos proxy"}]})),
        ),
    }
}

fn status_json(
    code: u16,
    reason: &str,
    message: &str,
    details: Option<serde_json::Value>,
) -> String {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(details) = details {
        body["details"] = details;
    }
    body.to_string()
}

fn status(
    code: StatusCode,
    reason: &str,
    message: &str,
    details: Option<serde_json::Value>,
) -> Response<Body> {
    let body = status_json(code.as_u16(), reason, message, details);
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Passes a watch's events through whole lines at a time, then after `after` ends it with
/// an `ERROR` event carrying 410 Expired (and drops the upstream watch).
fn expiring(mut body: Incoming, after: Duration) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, BoxError>>(16);
    tokio::spawn(async move {
        let mut partial: Vec<u8> = Vec::new();
        let deadline = tokio::time::sleep(after);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = &mut deadline => break,
                frame = body.frame() => match frame {
                    Some(Ok(frame)) => {
                        let Ok(data) = frame.into_data() else { continue };
                        partial.extend_from_slice(&data);
                        if let Some(end) = partial.iter().rposition(|b| *b == b'\n') {
                            let lines: Vec<u8> = partial.drain(..=end).collect();
                            if tx.send(Ok(Frame::data(Bytes::from(lines)))).await.is_err() {
                                return;
                            }
                        }
                    }
                    Some(Err(e)) => {
                        let _ = tx.send(Err(Box::new(e))).await;
                        return;
                    }
                    None => return,
                },
            }
        }
        let status = status_json(
            410,
            "Expired",
            "too old resource version: injected by the chaos proxy",
            None,
        );
        let event = format!("{{\"type\":\"ERROR\",\"object\":{status}}}\n");
        let _ = tx.send(Ok(Frame::data(Bytes::from(event)))).await;
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|frame| (frame, rx))
    });
    StreamBody::new(frames).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_named_as_kube_apiserver_names_them() {
        let cases = [
            ("GET", "/api/v1/namespaces/default/pods", "", "list", "pods"),
            (
                "GET",
                "/api/v1/namespaces/default/pods",
                "watch=true&resourceVersion=5",
                "watch",
                "pods",
            ),
            (
                "GET",
                "/api/v1/namespaces/default/pods/p",
                "",
                "get",
                "pods",
            ),
            (
                "POST",
                "/api/v1/namespaces/default/pods",
                "",
                "create",
                "pods",
            ),
            (
                "PUT",
                "/apis/apps/v1/namespaces/d/replicasets/r/status",
                "",
                "update",
                "replicasets/status",
            ),
            (
                "PATCH",
                "/apis/apps/v1/namespaces/d/deployments/x",
                "",
                "patch",
                "deployments",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/default/pods/p",
                "",
                "delete",
                "pods",
            ),
            ("GET", "/api/v1/nodes", "watch=1", "watch", "nodes"),
            ("DELETE", "/api/v1/namespaces/n", "", "delete", "namespaces"),
        ];
        for (method, path, query, verb, resource) in cases {
            let method: Method = method.parse().expect("method");
            assert_eq!(
                classify(&method, path, query),
                (verb, resource.to_owned()),
                "{method} {path}?{query}"
            );
        }
    }
}
