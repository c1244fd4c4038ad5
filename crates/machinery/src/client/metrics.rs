//! Request metrics with client-go's names: `rest_client_requests_total`,
//! `rest_client_request_duration_seconds`, `rest_client_rate_limiter_duration_seconds`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{Method, Request, Response};
use pin_project_lite::pin_project;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::time::Instant;
use tower::{Layer, Service};

use super::rate_limit::RateLimiterWait;

/// client-go's latency buckets (`rest_client_request_duration_seconds`,
/// `rest_client_rate_limiter_duration_seconds`).
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// The HTTP method as a label value (`GET`, `POST`, ...), as client-go's `verb`/`method`.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Verb(pub Method);

impl EncodeLabelValue for Verb {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.0.as_str(), encoder)
    }
}

/// The `code` label: the HTTP status, or `<error>` when no response arrived.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ResultCode {
    /// An HTTP status code.
    Status(u16),
    /// A transport error (client-go reports these as `<error>`).
    Error,
}

impl EncodeLabelValue for ResultCode {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        match self {
            ResultCode::Status(code) => EncodeLabelValue::encode(code, encoder),
            ResultCode::Error => EncodeLabelValue::encode(&"<error>", encoder),
        }
    }
}

/// Labels of `rest_client_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestResultLabels {
    /// HTTP status or `<error>`.
    pub code: ResultCode,
    /// HTTP method.
    pub method: Verb,
    /// API server `host:port`.
    pub host: Arc<str>,
}

/// Labels of the latency histograms.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    /// HTTP method.
    pub verb: Verb,
    /// API server `host:port`.
    pub host: Arc<str>,
}

type HistogramFamily = Family<LatencyLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// REST client metrics, shared by every client of a process; register once.
#[derive(Clone, Debug)]
pub struct ClientMetrics {
    /// `rest_client_requests_total{code,method,host}`.
    requests: Family<RequestResultLabels, Counter>,
    /// `rest_client_request_duration_seconds{verb,host}`: from asking for a token to the
    /// response headers (client-go also counts the throttling wait).
    request_duration: HistogramFamily,
    /// `rest_client_rate_limiter_duration_seconds{verb,host}`: time spent waiting for a token.
    rate_limiter_duration: HistogramFamily,
}

impl Default for ClientMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientMetrics {
    /// New, unregistered metrics.
    pub fn new() -> Self {
        Self {
            requests: Family::default(),
            request_duration: Family::new_with_constructor(latency_histogram),
            rate_limiter_duration: Family::new_with_constructor(latency_histogram),
        }
    }

    /// Registers the metrics in `registry` under client-go's names.
    pub fn register(&self, registry: &mut Registry) {
        // prometheus-client appends `_total` to counters.
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            self.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            self.request_duration.clone(),
        );
        registry.register(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            self.rate_limiter_duration.clone(),
        );
    }

    /// Current `rest_client_requests_total{code,method,host}`.
    pub fn requests_total(&self, code: ResultCode, method: &Method, host: &str) -> u64 {
        self.requests
            .get_or_create(&RequestResultLabels {
                code,
                method: Verb(method.clone()),
                host: Arc::from(host),
            })
            .get()
    }

    fn observe(&self, verb: &Method, host: &Arc<str>, code: ResultCode, latency: Duration) {
        self.requests
            .get_or_create(&RequestResultLabels {
                code,
                method: Verb(verb.clone()),
                host: host.clone(),
            })
            .inc();
        self.request_duration
            .get_or_create(&LatencyLabels {
                verb: Verb(verb.clone()),
                host: host.clone(),
            })
            .observe(latency.as_secs_f64());
    }

    fn observe_rate_limiter(&self, verb: &Method, host: &Arc<str>, waited: Duration) {
        self.rate_limiter_duration
            .get_or_create(&LatencyLabels {
                verb: Verb(verb.clone()),
                host: host.clone(),
            })
            .observe(waited.as_secs_f64());
    }
}

/// Records [`ClientMetrics`] for every request passing through.
///
/// Placed inside [`RateLimitLayer`](super::RateLimitLayer), it reads the token wait from the
/// request's [`RateLimiterWait`] extension and counts it in the request's latency, as client-go.
#[derive(Clone, Debug)]
pub struct MetricsLayer {
    /// Where to record; `None` records nothing.
    metrics: Option<Arc<ClientMetrics>>,
    /// The API server's `host:port`, the `host` label (requests here carry only a path).
    host: Arc<str>,
}

impl MetricsLayer {
    /// Records into `metrics` (nothing when `None`), labelling with `host`.
    pub fn new(metrics: Option<Arc<ClientMetrics>>, host: &str) -> Self {
        Self {
            metrics,
            host: Arc::from(host),
        }
    }
}

impl<S> Layer<S> for MetricsLayer {
    type Service = RequestMetrics<S>;

    fn layer(&self, inner: S) -> RequestMetrics<S> {
        RequestMetrics {
            inner,
            metrics: self.metrics.clone(),
            host: self.host.clone(),
        }
    }
}

/// The service made by [`MetricsLayer`].
#[derive(Clone, Debug)]
pub struct RequestMetrics<S> {
    inner: S,
    metrics: Option<Arc<ClientMetrics>>,
    host: Arc<str>,
}

impl<S, B, RB> Service<Request<B>> for RequestMetrics<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = MetricsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let Some(metrics) = self.metrics.clone() else {
            return MetricsFuture {
                inner: self.inner.call(req),
                record: None,
            };
        };
        let verb = req.method().clone();
        let now = Instant::now();
        let waited = req.extensions().get::<RateLimiterWait>().map(|w| w.0);
        if let Some(waited) = waited {
            metrics.observe_rate_limiter(&verb, &self.host, waited);
        }
        let started = now.checked_sub(waited.unwrap_or_default()).unwrap_or(now);
        MetricsFuture {
            inner: self.inner.call(req),
            record: Some(Record {
                metrics,
                verb,
                host: self.host.clone(),
                started,
            }),
        }
    }
}

/// What to record when a response (or error) arrives.
#[derive(Debug)]
struct Record {
    metrics: Arc<ClientMetrics>,
    verb: Method,
    host: Arc<str>,
    started: Instant,
}

pin_project! {
    /// Response future of [`RequestMetrics`]: records the result when the inner future resolves.
    #[derive(Debug)]
    pub struct MetricsFuture<F> {
        #[pin]
        inner: F,
        record: Option<Record>,
    }
}

impl<F, RB, E> Future for MetricsFuture<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        if let Some(record) = this.record.take() {
            let code = match &result {
                Ok(response) => ResultCode::Status(response.status().as_u16()),
                Err(_) => ResultCode::Error,
            };
            record
                .metrics
                .observe(&record.verb, &record.host, code, record.started.elapsed());
        }
        Poll::Ready(result)
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use prometheus_client::encoding::text::encode;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn requests_are_counted_by_code_method_and_host() {
        let metrics = Arc::new(ClientMetrics::new());
        let inner = tower::service_fn(|req: Request<()>| async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            match req.uri().path() {
                "/missing" => Ok(Response::builder().status(404).body(()).expect("response")),
                "/broken" => Err(io::Error::other("connection reset")),
                _ => Ok(Response::new(())),
            }
        });
        let mut service = MetricsLayer::new(Some(metrics.clone()), "10.0.0.1:6443").layer(inner);
        for (method, path) in [
            (Method::GET, "/ok"),
            (Method::GET, "/ok"),
            (Method::GET, "/missing"),
            (Method::POST, "/broken"),
        ] {
            let mut req = Request::builder()
                .method(method)
                .uri(path)
                .body(())
                .expect("request");
            req.extensions_mut()
                .insert(RateLimiterWait(Duration::from_millis(200)));
            let _ = service.ready().await.expect("ready").call(req).await;
        }
        let host = "10.0.0.1:6443";
        assert_eq!(
            metrics.requests_total(ResultCode::Status(200), &Method::GET, host),
            2
        );
        assert_eq!(
            metrics.requests_total(ResultCode::Status(404), &Method::GET, host),
            1
        );
        assert_eq!(
            metrics.requests_total(ResultCode::Error, &Method::POST, host),
            1
        );

        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encode");
        for line in [
            "rest_client_requests_total{code=\"200\",method=\"GET\",host=\"10.0.0.1:6443\"} 2",
            "rest_client_requests_total{code=\"<error>\",method=\"POST\",host=\"10.0.0.1:6443\"} 1",
            // Latency counts the 200ms token wait plus 30ms in flight: in the 0.25 bucket.
            "rest_client_request_duration_seconds_bucket{le=\"0.1\",verb=\"GET\",host=\"10.0.0.1:6443\"} 0",
            "rest_client_request_duration_seconds_bucket{le=\"0.25\",verb=\"GET\",host=\"10.0.0.1:6443\"} 3",
            "rest_client_request_duration_seconds_count{verb=\"GET\",host=\"10.0.0.1:6443\"} 3",
            "rest_client_rate_limiter_duration_seconds_bucket{le=\"0.25\",verb=\"POST\",host=\"10.0.0.1:6443\"} 1",
            "rest_client_rate_limiter_duration_seconds_bucket{le=\"60.0\",verb=\"GET\",host=\"10.0.0.1:6443\"} 3",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }

    #[tokio::test]
    async fn without_metrics_nothing_is_recorded() {
        let inner =
            tower::service_fn(|_req: Request<()>| async { Ok::<_, io::Error>(Response::new(())) });
        let mut service = MetricsLayer::new(None, "h").layer(inner);
        let resp = service
            .ready()
            .await
            .expect("ready")
            .call(Request::new(()))
            .await
            .expect("response");
        assert_eq!(resp.status(), 200);
    }
}
