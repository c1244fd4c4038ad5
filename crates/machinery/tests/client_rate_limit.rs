//! The QPS/burst limiter and request metrics inside a real `kube::Client`: with a fake inner
//! service under paused time (exact spacing, FIFO across concurrent callers), and through
//! `build_client` against a local HTTP server.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use k8s_openapi::api::core::v1::Pod;
use kcm_machinery::client::RateLimitLayer;
use kcm_machinery::client::{
    ClientMetrics, MetricsLayer, ResultCode, TokenBucket, build_client, rate_limit_layer,
};
use kube::Api;
use tokio::time::Instant;
use tower::ServiceBuilder;

fn not_found(name: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("pods \"{name}\" not found"), "reason": "NotFound", "code": 404,
    });
    Response::builder()
        .status(StatusCode::NOT_FOUND)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("response")
}

fn pod(name: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("response")
}

/// A kube client over a fake API recording when (since `start`) each request path arrived.
fn fake_client(
    start: Instant,
    qps: f32,
    burst: u32,
    metrics: Arc<ClientMetrics>,
) -> (kube::Client, Arc<Mutex<Vec<(Duration, String)>>>) {
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let log = arrivals.clone();
    let inner = tower::service_fn(move |req: Request<kube::client::Body>| {
        let path = req.uri().path().to_owned();
        log.lock()
            .expect("log")
            .push((start.elapsed(), path.clone()));
        let name = path.rsplit('/').next().unwrap_or_default().to_owned();
        let response = if name.starts_with("missing") {
            not_found(&name)
        } else {
            pod(&name)
        };
        std::future::ready(Ok::<_, Infallible>(response))
    });
    let service = ServiceBuilder::new()
        .layer(RateLimitLayer::new(Arc::new(TokenBucket::new(qps, burst))))
        .layer(MetricsLayer::new(Some(metrics), "apiserver:6443"))
        .service(inner);
    (kube::Client::new(service, "default"), arrivals)
}

#[tokio::test(start_paused = true)]
async fn every_api_call_waits_for_a_token_burst_first_then_one_per_interval() {
    let start = Instant::now();
    let metrics = Arc::new(ClientMetrics::new());
    let (client, arrivals) = fake_client(start, 5.0, 3, metrics.clone());
    let pods: Api<Pod> = Api::default_namespaced(client);

    for i in 0..5 {
        pods.get(&format!("p{i}")).await.expect("get");
    }
    pods.get("missing-1").await.expect_err("404");

    let times: Vec<Duration> = arrivals.lock().expect("log").iter().map(|a| a.0).collect();
    let ms = Duration::from_millis;
    assert_eq!(times, vec![ms(0), ms(0), ms(0), ms(200), ms(400), ms(600)]);
    let host = "apiserver:6443";
    assert_eq!(
        metrics.requests_total(ResultCode::Status(200), &Method::GET, host),
        5
    );
    assert_eq!(
        metrics.requests_total(ResultCode::Status(404), &Method::GET, host),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn concurrent_callers_are_served_in_arrival_order_at_the_bucket_pace() {
    let start = Instant::now();
    let (client, arrivals) = fake_client(start, 10.0, 2, Arc::new(ClientMetrics::new()));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        tasks.push(tokio::spawn(async move {
            pods.get(&format!("p{i}")).await.expect("get");
        }));
        // Callers arrive one after the other (but long before their tokens).
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
    }
    for task in tasks {
        task.await.expect("task");
    }
    let seen = arrivals.lock().expect("log").clone();
    let times: Vec<u64> = seen.iter().map(|a| a.0.as_millis() as u64).collect();
    assert_eq!(times, vec![0, 0, 100, 200, 300, 400, 500, 600]);
    let order: Vec<String> = seen
        .iter()
        .map(|a| a.1.rsplit('/').next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(order, (0..8).map(|i| format!("p{i}")).collect::<Vec<_>>());
}

#[test]
fn client_go_defaults_apply_to_zero_and_negative_settings() {
    // Built on a runtime because the layer reads tokio's clock.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let start = Instant::now();
        let inner =
            tower::service_fn(|_req: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
        // qps 0 → 5/s, burst 0 → 10: the 11th request waits 200ms.
        let mut service = ServiceBuilder::new()
            .layer(rate_limit_layer(0.0, 0))
            .service(inner);
        for _ in 0..11 {
            tower::ServiceExt::ready(&mut service).await.expect("ready");
            tower::Service::call(&mut service, Request::new(()))
                .await
                .expect("call");
        }
        assert_eq!(start.elapsed(), Duration::from_millis(200));
        // A negative QPS disables limiting.
        let inner =
            tower::service_fn(|_req: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
        let mut service = ServiceBuilder::new()
            .layer(rate_limit_layer(-1.0, 1))
            .service(inner);
        let before = Instant::now();
        for _ in 0..100 {
            tower::ServiceExt::ready(&mut service).await.expect("ready");
            tower::Service::call(&mut service, Request::new(()))
                .await
                .expect("call");
        }
        assert_eq!(before.elapsed(), Duration::ZERO);
    });
}

/// End to end over real HTTP: `build_client` limits and counts requests to a local server.
/// Only lower bounds on elapsed time are asserted, which the limiter guarantees.
#[tokio::test]
async fn build_client_limits_and_counts_real_requests() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().route(
        "/api/v1/namespaces/default/pods/{name}",
        axum::routing::get(
            |axum::extract::Path(name): axum::extract::Path<String>| async move {
                if name.starts_with("missing") {
                    not_found(&name)
                } else {
                    pod(&name)
                }
            },
        ),
    );
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });

    let config = kube::Config::new(format!("http://{addr}").parse().expect("url"));
    let metrics = Arc::new(ClientMetrics::new());
    let client = build_client(config, 20.0, 2, Some(metrics.clone())).expect("client");
    let pods: Api<Pod> = Api::default_namespaced(client);

    let started = std::time::Instant::now();
    for i in 0..6 {
        pods.get(&format!("p{i}")).await.expect("get");
    }
    pods.get("missing").await.expect_err("404");
    // 7 requests, 2 free, 5 more at 20/s: at least 250ms.
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "took {:?}",
        started.elapsed()
    );
    let host = addr.to_string();
    assert_eq!(
        metrics.requests_total(ResultCode::Status(200), &Method::GET, &host),
        6
    );
    assert_eq!(
        metrics.requests_total(ResultCode::Status(404), &Method::GET, &host),
        1
    );
    server.abort();
}
