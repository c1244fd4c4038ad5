//! `build_client`: a `kube::Client` whose every request goes through the limiter and metrics.

use std::sync::Arc;

use kube::client::ClientBuilder;

use super::bearer::{BearerToken, BearerTokenLayer};
use super::metrics::{ClientMetrics, MetricsLayer};
use super::rate_limit::RateLimitLayer;
use super::token_bucket::TokenBucket;

/// Default `--kube-api-qps` of kube-controller-manager.
pub const DEFAULT_KUBE_API_QPS: f32 = 20.0;
/// Default `--kube-api-burst` of kube-controller-manager.
pub const DEFAULT_KUBE_API_BURST: u32 = 30;
/// client-go's `rest.DefaultQPS`, used when the QPS is 0.
pub const CLIENT_GO_DEFAULT_QPS: f32 = 5.0;
/// client-go's `rest.DefaultBurst`, used when the burst is 0.
pub const CLIENT_GO_DEFAULT_BURST: u32 = 10;

/// Errors building a client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// kube could not build the HTTP stack (TLS, auth, proxy) from the config.
    #[error("build client for {host}: {source}")]
    Build {
        /// The API server `host:port` from the config.
        host: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The limiter layer for `qps`/`burst` with client-go's rules (`rest.RESTClientFor`):
/// QPS 0 means 5, burst 0 means 10, a negative QPS disables limiting.
pub fn rate_limit_layer(qps: f32, burst: u32) -> RateLimitLayer {
    if qps < 0.0 || qps.is_nan() {
        return RateLimitLayer::disabled();
    }
    let qps = if qps == 0.0 {
        CLIENT_GO_DEFAULT_QPS
    } else {
        qps
    };
    let burst = if burst == 0 {
        CLIENT_GO_DEFAULT_BURST
    } else {
        burst
    };
    RateLimitLayer::new(Arc::new(TokenBucket::new(qps, burst)))
}

/// Builds a `kube::Client` from `config` whose every API call first takes a token from a
/// `qps`/`burst` bucket (FIFO; watches take one token when they open) and, with `metrics`, is
/// counted in client-go's `rest_client_*` metrics labelled with the server's `host:port`.
pub fn build_client(
    config: kube::Config,
    qps: f32,
    burst: u32,
    metrics: Option<Arc<ClientMetrics>>,
) -> Result<kube::Client> {
    build_client_with(config, &rate_limit_layer(qps, burst), metrics, None)
}

/// [`build_client`] with a given limiter, which several clients may share (one bucket for the
/// whole process), and optionally a [`BearerToken`]: then every request authenticates with that
/// token alone — the config's own credentials (token, client certificate, exec plugin) are
/// dropped, as client-go's `AnonymousClientConfig` under a service-account token source.
pub fn build_client_with(
    mut config: kube::Config,
    limiter: &RateLimitLayer,
    metrics: Option<Arc<ClientMetrics>>,
    token: Option<Arc<BearerToken>>,
) -> Result<kube::Client> {
    let host = config
        .cluster_url
        .authority()
        .map(|a| a.as_str().to_owned())
        .unwrap_or_default();
    if token.is_some() {
        config.auth_info = kube::config::AuthInfo::default();
    }
    let builder = ClientBuilder::try_from(config).map_err(|source| Error::Build {
        host: host.clone(),
        source,
    })?;
    Ok(builder
        .with_layer(&tower::util::option_layer(token.map(BearerTokenLayer::new)))
        .with_layer(&MetricsLayer::new(metrics, &host))
        .with_layer(limiter)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn builds_a_client_for_a_plain_http_config() {
        let config = kube::Config::new("http://127.0.0.1:6443".parse().expect("url"));
        let client =
            build_client(config, 20.0, 30, Some(Arc::new(ClientMetrics::new()))).expect("client");
        assert_eq!(client.default_namespace(), "default");
    }
}
