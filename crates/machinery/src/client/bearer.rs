//! A tower layer that authenticates every request with a bearer token someone else refreshes.
//!
//! client-go's `transport.ResettableTokenSourceWrapTransport` over a cached token source: the
//! token lives in a [`BearerToken`] slot; whoever owns the slot (the controller manager's
//! service-account client builder) replaces it before it expires, and a `401 Unauthorized`
//! answer asks the owner for a new one at once ([`BearerToken::refresh_requested`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll, ready};

use http::header::AUTHORIZATION;
use http::{HeaderValue, Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tokio::sync::Notify;
use tower::{Layer, Service};

/// A bearer token shared by every request of a client, replaceable at any time.
#[derive(Debug)]
pub struct BearerToken {
    /// `Bearer <token>`, marked sensitive so it never shows in debug output.
    header: RwLock<HeaderValue>,
    /// Woken when a request was refused with 401: the token is no longer accepted.
    refresh: Notify,
}

/// A token that cannot go in a header (control characters).
#[derive(Debug, thiserror::Error)]
#[error("the token is not a valid HTTP header value")]
pub struct InvalidToken;

fn header_for(token: &str) -> Result<HeaderValue, InvalidToken> {
    let mut value = HeaderValue::try_from(format!("Bearer {token}")).map_err(|_| InvalidToken)?;
    value.set_sensitive(true);
    Ok(value)
}

impl BearerToken {
    /// A slot holding `token`.
    pub fn new(token: &str) -> Result<Arc<Self>, InvalidToken> {
        Ok(Arc::new(Self {
            header: RwLock::new(header_for(token)?),
            refresh: Notify::new(),
        }))
    }

    /// Replaces the token; requests sent from now on carry the new one.
    pub fn set(&self, token: &str) -> Result<(), InvalidToken> {
        let header = header_for(token)?;
        *self.header.write().unwrap_or_else(|e| e.into_inner()) = header;
        Ok(())
    }

    /// The `Authorization` header value requests carry now.
    pub fn header(&self) -> HeaderValue {
        self.header
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Resolves once a request was refused with 401 since the last call (one wake-up is kept
    /// if nobody was waiting), so the owner can fetch a new token before the old one expires.
    pub async fn refresh_requested(&self) {
        self.refresh.notified().await;
    }
}

/// Sets `Authorization: Bearer <token>` from a [`BearerToken`] on every request, replacing
/// any the request had.
#[derive(Clone, Debug)]
pub struct BearerTokenLayer {
    token: Arc<BearerToken>,
}

impl BearerTokenLayer {
    /// Authenticates with `token`.
    pub fn new(token: Arc<BearerToken>) -> Self {
        Self { token }
    }
}

impl<S> Layer<S> for BearerTokenLayer {
    type Service = BearerTokenService<S>;

    fn layer(&self, inner: S) -> BearerTokenService<S> {
        BearerTokenService {
            inner,
            token: Arc::clone(&self.token),
        }
    }
}

/// The service made by [`BearerTokenLayer`].
#[derive(Clone, Debug)]
pub struct BearerTokenService<S> {
    inner: S,
    token: Arc<BearerToken>,
}

impl<S, B, RB> Service<Request<B>> for BearerTokenService<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BearerTokenFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        req.headers_mut().insert(AUTHORIZATION, self.token.header());
        BearerTokenFuture {
            inner: self.inner.call(req),
            token: Arc::clone(&self.token),
        }
    }
}

pin_project! {
    /// Response future of [`BearerTokenService`]: asks for a new token on a 401.
    #[derive(Debug)]
    pub struct BearerTokenFuture<F> {
        #[pin]
        inner: F,
        token: Arc<BearerToken>,
    }
}

impl<F, RB, E> Future for BearerTokenFuture<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        if matches!(&result, Ok(response) if response.status() == StatusCode::UNAUTHORIZED) {
            this.token.refresh.notify_one();
        }
        Poll::Ready(result)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use tower::ServiceExt;

    use super::*;

    /// A server accepting only `Bearer good`.
    fn server() -> impl Service<
        Request<()>,
        Response = Response<String>,
        Error = Infallible,
        Future = impl Future<Output = Result<Response<String>, Infallible>>,
    > + Clone {
        tower::service_fn(|req: Request<()>| async move {
            let auth = req
                .headers()
                .get(AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let status = if auth == "Bearer good" {
                StatusCode::OK
            } else {
                StatusCode::UNAUTHORIZED
            };
            let mut response = Response::new(auth);
            *response.status_mut() = status;
            Ok::<_, Infallible>(response)
        })
    }

    #[tokio::test]
    async fn every_request_carries_the_current_token_replacing_its_own() {
        let token = BearerToken::new("good").expect("token");
        let svc = BearerTokenLayer::new(Arc::clone(&token)).layer(server());
        let mut req = Request::new(());
        req.headers_mut()
            .insert(AUTHORIZATION, HeaderValue::from_static("Bearer admin"));
        let response = svc.clone().oneshot(req).await.expect("response");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.body(), "Bearer good");

        token.set("rotated").expect("set");
        let response = svc.oneshot(Request::new(())).await.expect("response");
        assert_eq!(response.body(), "Bearer rotated");
    }

    #[tokio::test(start_paused = true)]
    async fn a_401_asks_the_owner_for_a_new_token_and_a_200_does_not() {
        let token = BearerToken::new("good").expect("token");
        let svc = BearerTokenLayer::new(Arc::clone(&token)).layer(server());
        svc.clone()
            .oneshot(Request::new(()))
            .await
            .expect("response");
        let waited = tokio::time::timeout(Duration::from_secs(1), token.refresh_requested()).await;
        assert!(waited.is_err(), "a 200 must not ask for a refresh");

        token.set("expired").expect("set");
        let response = svc.oneshot(Request::new(())).await.expect("response");
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        tokio::time::timeout(Duration::from_secs(1), token.refresh_requested())
            .await
            .expect("a 401 asks for a refresh");
    }

    #[test]
    fn tokens_that_cannot_be_headers_are_refused_and_the_header_is_sensitive() {
        assert!(BearerToken::new("bad\ntoken").is_err());
        let token = BearerToken::new("t").expect("token");
        assert!(token.header().is_sensitive());
        assert!(token.set("x\r").is_err());
        assert_eq!(token.header(), "Bearer t");
    }
}
