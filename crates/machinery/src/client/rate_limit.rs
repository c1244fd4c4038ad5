//! A tower layer that makes every request take a token from a shared [`TokenBucket`] first.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::Request;
use tokio::time::{Instant, Sleep, sleep_until};
use tower::{Layer, Service};

use super::token_bucket::TokenBucket;

/// How long a request waited for its token; put in the request's extensions by [`RateLimit`]
/// so [`MetricsLayer`](super::MetricsLayer) can report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimiterWait(pub Duration);

/// Applies a client-side QPS/burst limit to every request, as client-go's `Request.tryThrottle`.
///
/// The limit applies to the *start* of a request: a watch takes one token when it opens, however
/// long it then streams. Services made from one layer share its bucket.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    /// The shared bucket; `None` disables limiting.
    bucket: Option<Arc<TokenBucket>>,
}

impl RateLimitLayer {
    /// Limits requests with `bucket`.
    pub fn new(bucket: Arc<TokenBucket>) -> Self {
        Self {
            bucket: Some(bucket),
        }
    }

    /// Lets every request through (client-go with a negative QPS).
    pub fn disabled() -> Self {
        Self { bucket: None }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            state: State::Idle,
        }
    }
}

/// Where a [`RateLimit`] service is between `poll_ready` and `call`.
#[derive(Debug)]
enum State {
    /// No token reserved.
    Idle,
    /// A token is reserved from `reserved_at`; waiting until it may be used.
    Waiting {
        sleep: Pin<Box<Sleep>>,
        reserved_at: Instant,
    },
    /// The token may be used; the request waited this long for it.
    Ready(Duration),
}

/// The service made by [`RateLimitLayer`].
///
/// `poll_ready` reserves a token (reservations are FIFO) and stays pending until it may be
/// used, then polls the inner service. Inside `kube::Client`'s buffer, requests are
/// dispatched one at a time in arrival order, so they leave in FIFO order at the bucket's pace.
#[derive(Debug)]
pub struct RateLimit<S> {
    /// The wrapped service.
    inner: S,
    /// The shared bucket; `None` disables limiting.
    bucket: Option<Arc<TokenBucket>>,
    /// The token reservation for the next `call`.
    state: State,
}

impl<S: Clone> Clone for RateLimit<S> {
    /// A clone shares the bucket but not a pending reservation.
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            bucket: self.bucket.clone(),
            state: State::Idle,
        }
    }
}

impl<S, B> Service<Request<B>> for RateLimit<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            match &mut self.state {
                State::Idle => {
                    let Some(bucket) = &self.bucket else {
                        self.state = State::Ready(Duration::ZERO);
                        continue;
                    };
                    let reserved_at = Instant::now();
                    let at = bucket.reserve();
                    self.state = if at <= reserved_at {
                        State::Ready(Duration::ZERO)
                    } else {
                        State::Waiting {
                            sleep: Box::pin(sleep_until(at)),
                            reserved_at,
                        }
                    };
                }
                State::Waiting { sleep, reserved_at } => {
                    ready!(sleep.as_mut().poll(cx));
                    self.state = State::Ready(reserved_at.elapsed());
                }
                State::Ready(_) => return self.inner.poll_ready(cx),
            }
        }
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let waited = match std::mem::replace(&mut self.state, State::Idle) {
            State::Ready(waited) => waited,
            // `call` without a ready `poll_ready` breaks tower's contract; still charge the
            // request a token rather than letting it bypass the limit silently.
            _ => {
                tracing::warn!("rate-limited service called before it was ready");
                if let Some(bucket) = &self.bucket {
                    bucket.reserve();
                }
                Duration::ZERO
            }
        };
        req.extensions_mut().insert(RateLimiterWait(waited));
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Mutex;

    use http::Response;
    use tower::ServiceExt;

    use super::*;

    /// A fake inner service recording when each request arrived and how long it had waited.
    fn recording_service(
        start: Instant,
    ) -> (
        Arc<Mutex<Vec<(Duration, Duration)>>>,
        impl Service<Request<()>, Response = Response<()>, Error = Infallible, Future: Send>
        + Clone
        + Send
        + 'static,
    ) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let service = tower::service_fn(move |req: Request<()>| {
            let waited = req
                .extensions()
                .get::<RateLimiterWait>()
                .map(|w| w.0)
                .unwrap_or(Duration::MAX);
            log.lock().expect("log").push((start.elapsed(), waited));
            std::future::ready(Ok::<_, Infallible>(Response::new(())))
        });
        (seen, service)
    }

    #[tokio::test(start_paused = true)]
    async fn burst_passes_immediately_then_requests_are_spaced_by_one_over_qps() {
        let start = Instant::now();
        let (seen, inner) = recording_service(start);
        let mut service = RateLimitLayer::new(Arc::new(TokenBucket::new(10.0, 3))).layer(inner);
        for _ in 0..6 {
            service
                .ready()
                .await
                .expect("ready")
                .call(Request::new(()))
                .await
                .expect("response");
        }
        let ms = |n| Duration::from_millis(n);
        assert_eq!(
            *seen.lock().expect("log"),
            vec![
                (ms(0), ms(0)),
                (ms(0), ms(0)),
                (ms(0), ms(0)),
                (ms(100), ms(100)),
                (ms(200), ms(100)),
                (ms(300), ms(100)),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn clones_share_one_bucket() {
        let start = Instant::now();
        let (seen, inner) = recording_service(start);
        let layer = RateLimitLayer::new(Arc::new(TokenBucket::new(2.0, 1)));
        let mut a = layer.layer(inner.clone());
        let mut b = layer.layer(inner);
        a.ready()
            .await
            .expect("ready")
            .call(Request::new(()))
            .await
            .expect("a");
        b.ready()
            .await
            .expect("ready")
            .call(Request::new(()))
            .await
            .expect("b");
        let arrivals: Vec<Duration> = seen.lock().expect("log").iter().map(|s| s.0).collect();
        assert_eq!(arrivals, vec![Duration::ZERO, Duration::from_millis(500)]);
    }

    #[tokio::test(start_paused = true)]
    async fn disabled_layer_never_waits() {
        let start = Instant::now();
        let (seen, inner) = recording_service(start);
        let mut service = RateLimitLayer::disabled().layer(inner);
        for _ in 0..100 {
            service
                .ready()
                .await
                .expect("ready")
                .call(Request::new(()))
                .await
                .expect("ok");
        }
        assert!(
            seen.lock()
                .expect("log")
                .iter()
                .all(|s| s.0 == Duration::ZERO)
        );
    }
}
