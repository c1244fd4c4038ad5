//! The API server's request metrics and its `/metrics` endpoint: `apiserver_request_total` and
//! `apiserver_request_duration_seconds` with kube-apiserver's names, labels and buckets
//! (`k8s.io/apiserver/pkg/endpoints/metrics`, `MonitorRequest`, `CleanScope`, `CanonicalVerb`,
//! `CleanVerb`, `cleanDryRun`).
//!
//! A request is recorded once it has passed authentication and authorization and its handler
//! answered, as upstream's route instrumentation does: resource requests, and the root health
//! paths (verb `GET`, the path as `subresource`, no component). A watch is recorded when its
//! response starts, not when it ends.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Method, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::AppState;
use super::query::Query;
use super::request_info::{Route, parse};

/// `apiserver_request_duration_seconds`' buckets, upstream's (tuned for the latency SLOs).
const DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// `metrics.APIServerComponent`.
const COMPONENT: &str = "apiserver";

/// Subresources upstream reports as `CONNECT`.
const CONNECT_SUBRESOURCES: [&str; 5] = ["log", "exec", "portforward", "attach", "proxy"];

/// The labels both metrics share (the counter adds `code`).
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `APPLY`, `DELETE`, `CONNECT`, `other`.
    pub verb: String,
    /// The sorted, de-duplicated `dryRun` values (`All`), `invalid`, or empty.
    pub dry_run: String,
    /// API group (empty for core and non-resource paths).
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource; for a non-resource path, the path.
    pub subresource: String,
    /// `resource`, `namespace`, `cluster`, or empty for a non-resource path.
    pub scope: String,
    /// `apiserver`, or empty for a non-resource path.
    pub component: String,
}

/// [`RequestLabels`] and the response code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CountLabels {
    #[prometheus(flatten)]
    request: RequestLabels,
    code: String,
}

type HistogramFamily = Family<RequestLabels, Histogram, fn() -> Histogram>;

/// The API server's request metrics and the registry `/metrics` serves.
#[derive(Debug)]
pub struct ApiServerMetrics {
    requests: Family<CountLabels, Counter>,
    durations: HistogramFamily,
    registry: Registry,
}

impl Default for ApiServerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ApiServerMetrics {
    /// Empty metrics, registered under upstream's names.
    pub fn new() -> Self {
        let requests = Family::<CountLabels, Counter>::default();
        let durations: HistogramFamily =
            Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS));
        let mut registry = Registry::default();
        let sub = registry.sub_registry_with_prefix("apiserver");
        sub.register(
            "request",
            "Counter of apiserver requests broken out for each verb, dry run value, group, \
             version, resource, scope, component, and HTTP response code.",
            requests.clone(),
        );
        sub.register(
            "request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, \
             version, resource, subresource, scope and component.",
            durations.clone(),
        );
        ApiServerMetrics {
            requests,
            durations,
            registry,
        }
    }

    /// Records one answered request.
    pub fn record(&self, labels: RequestLabels, code: StatusCode, seconds: f64) {
        self.durations.get_or_create(&labels).observe(seconds);
        self.requests
            .get_or_create(&CountLabels {
                request: labels,
                code: code.as_u16().to_string(),
            })
            .inc();
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The labels of a request `MonitorRequest` would record; `None` for paths it does not.
pub fn labels_of(
    method: &Method,
    path: &str,
    query: Option<&str>,
    content_type: Option<&str>,
) -> Option<RequestLabels> {
    labels_of_route(method, &parse(path), path, query, content_type)
}

/// [`labels_of`] for a path already parsed into `route`.
fn labels_of_route(
    method: &Method,
    route: &Route,
    path: &str,
    query: Option<&str>,
    content_type: Option<&str>,
) -> Option<RequestLabels> {
    let r = match route {
        Route::Resource(r) => r,
        Route::Health if matches!(path, "/healthz" | "/livez" | "/readyz") => {
            return Some(RequestLabels {
                verb: "GET".to_owned(),
                subresource: path.to_owned(),
                ..RequestLabels::default()
            });
        }
        _ => return None,
    };
    let query = Query::parse(query).unwrap_or_default();
    // CleanScope: a named object or a create is `resource`.
    let scope = if r.name.is_some() || (*method == Method::POST && r.subresource.is_none()) {
        "resource"
    } else if r.namespace.is_some() {
        "namespace"
    } else {
        "cluster"
    };
    let watch = r.watch_prefix
        || query
            .all("watch")
            .next()
            .is_some_and(|v| !v.eq_ignore_ascii_case("0") && !v.eq_ignore_ascii_case("false"));
    let subresource = r.subresource.clone().unwrap_or_default();
    let verb = match *method {
        Method::GET | Method::HEAD if watch => "WATCH",
        Method::GET | Method::HEAD if scope == "resource" => "GET",
        Method::GET | Method::HEAD => "LIST",
        Method::PATCH if content_type == Some("application/apply-patch+yaml") => "APPLY",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        _ => "other",
    };
    let verb = if CONNECT_SUBRESOURCES.contains(&subresource.as_str()) {
        "CONNECT"
    } else {
        verb
    };
    Some(RequestLabels {
        verb: verb.to_owned(),
        dry_run: dry_run(&query),
        group: r.group.clone(),
        version: r.version.clone(),
        resource: r.resource.clone(),
        subresource,
        scope: scope.to_owned(),
        component: COMPONENT.to_owned(),
    })
}

/// `cleanDryRun`: empty without `dryRun`, `invalid` for a value other than `All`, else the
/// sorted distinct values joined by commas.
fn dry_run(query: &Query) -> String {
    let mut values: Vec<&str> = query.all("dryRun").collect();
    if values.is_empty() {
        return String::new();
    }
    if values.iter().any(|v| *v != "All") {
        return "invalid".to_owned();
    }
    values.sort_unstable();
    values.dedup();
    values.join(",")
}

/// The middleware that records every request reaching the handlers.
/// The parsed route travels on to the handlers in the request's extensions, so the path is
/// parsed once here.
pub async fn instrument(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let route = parse(req.uri().path());
    let labels = labels_of_route(
        req.method(),
        &route,
        req.uri().path(),
        req.uri().query(),
        req.headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    );
    req.extensions_mut().insert(route);
    let started = Instant::now();
    let response = next.run(req).await;
    if let Some(labels) = labels {
        state
            .metrics
            .record(labels, response.status(), started.elapsed().as_secs_f64());
    }
    response
}

/// `GET /metrics`: the text exposition.
pub fn serve(metrics: &ApiServerMetrics) -> Response {
    let mut response = metrics.encode().into_response();
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(method: Method, path: &str, query: Option<&str>) -> Option<(String, String)> {
        labels_of(&method, path, query, None).map(|l| (l.verb, l.scope))
    }

    /// Verbs and scopes as upstream's `CanonicalVerb`, `CleanVerb` and `CleanScope` report them.
    #[test]
    fn verbs_and_scopes_as_upstream() {
        let pods = "/api/v1/namespaces/default/pods";
        let cases = [
            (Method::GET, pods.to_owned(), None, "LIST", "namespace"),
            (
                Method::GET,
                "/api/v1/pods".to_owned(),
                None,
                "LIST",
                "cluster",
            ),
            (Method::GET, format!("{pods}/web"), None, "GET", "resource"),
            (
                Method::GET,
                pods.to_owned(),
                Some("watch=true"),
                "WATCH",
                "namespace",
            ),
            (
                Method::GET,
                pods.to_owned(),
                Some("watch=1"),
                "WATCH",
                "namespace",
            ),
            (
                Method::GET,
                pods.to_owned(),
                Some("watch=false"),
                "LIST",
                "namespace",
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/default/pods".to_owned(),
                None,
                "WATCH",
                "namespace",
            ),
            (Method::POST, pods.to_owned(), None, "POST", "resource"),
            (Method::PUT, format!("{pods}/web"), None, "PUT", "resource"),
            (
                Method::DELETE,
                format!("{pods}/web"),
                None,
                "DELETE",
                "resource",
            ),
            // DELETECOLLECTION is reported as DELETE, as upstream's CanonicalVerb leaves it.
            (Method::DELETE, pods.to_owned(), None, "DELETE", "namespace"),
            (
                Method::GET,
                format!("{pods}/web/log"),
                None,
                "CONNECT",
                "resource",
            ),
            (
                Method::PUT,
                format!("{pods}/web/status"),
                None,
                "PUT",
                "resource",
            ),
            (
                Method::GET,
                "/apis/apps/v1/deployments".to_owned(),
                None,
                "LIST",
                "cluster",
            ),
        ];
        for (method, path, query, verb, scope) in cases {
            assert_eq!(
                labels(method.clone(), &path, query),
                Some((verb.to_owned(), scope.to_owned())),
                "{method} {path} {query:?}"
            );
        }
        let apply = labels_of(
            &Method::PATCH,
            "/apis/apps/v1/namespaces/default/deployments/web",
            None,
            Some("application/apply-patch+yaml"),
        )
        .expect("a resource");
        assert_eq!(
            (
                apply.verb.as_str(),
                apply.group.as_str(),
                apply.version.as_str()
            ),
            ("APPLY", "apps", "v1")
        );
        assert_eq!(labels(Method::GET, "/apis", None), None);
        assert_eq!(labels(Method::GET, "/readyz/etcd", None), None);
        let health = labels_of(&Method::GET, "/readyz", None, None).expect("recorded");
        assert_eq!(
            (
                health.verb.as_str(),
                health.subresource.as_str(),
                health.component.as_str()
            ),
            ("GET", "/readyz", "")
        );
    }

    #[test]
    fn dry_run_values_are_cleaned() {
        let pods = "/api/v1/namespaces/default/pods";
        let dry = |q: &str| labels_of(&Method::POST, pods, Some(q), None).map(|l| l.dry_run);
        assert_eq!(dry(""), Some(String::new()));
        assert_eq!(dry("dryRun=All&dryRun=All"), Some("All".to_owned()));
        assert_eq!(dry("dryRun=Some"), Some("invalid".to_owned()));
    }

    #[test]
    fn recorded_requests_are_exposed_under_upstreams_names() {
        let metrics = ApiServerMetrics::new();
        let create = labels_of(&Method::POST, "/api/v1/namespaces/default/pods", None, None)
            .expect("a resource");
        metrics.record(create.clone(), StatusCode::CREATED, 0.003);
        metrics.record(create, StatusCode::CREATED, 0.03);
        let text = metrics.encode();
        let counter = "apiserver_request_total{verb=\"POST\",dry_run=\"\",group=\"\",\
                       version=\"v1\",resource=\"pods\",subresource=\"\",scope=\"resource\",\
                       component=\"apiserver\",code=\"201\"} 2";
        assert!(text.contains(counter), "{text}");
        let bucket = "apiserver_request_duration_seconds_bucket{le=\"0.005\",verb=\"POST\"";
        let fast = text
            .lines()
            .find(|l| l.starts_with(bucket))
            .unwrap_or_else(|| panic!("no 5 ms bucket in {text}"));
        assert!(fast.ends_with(" 1"), "one request within 5 ms: {fast}");
        assert!(
            text.contains("# TYPE apiserver_request_duration_seconds histogram"),
            "{text}"
        );
    }
}
