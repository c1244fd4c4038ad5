//! Client plumbing: a client-side QPS/burst limiter and request metrics for `kube::Client`.
//!
//! Start with [`build_client`]: it wraps kube's default HTTP stack in a [`RateLimitLayer`]
//! (a shared [`TokenBucket`], as client-go's `flowcontrol` token bucket behind
//! `--kube-api-qps`/`--kube-api-burst`) and a [`MetricsLayer`] recording client-go's
//! `rest_client_*` metrics into [`ClientMetrics`]. The layers also compose with any other
//! tower stack given to `kube::Client::new`.
//!
//! [`backoff::Backoff`] is client-go's other `flowcontrol` piece: per-key exponential back-off.

pub mod backoff;
mod bearer;
mod build;
mod metrics;
mod rate_limit;
mod token_bucket;

pub use backoff::Backoff;
pub use bearer::{
    BearerToken, BearerTokenFuture, BearerTokenLayer, BearerTokenService, InvalidToken,
};
pub use build::{
    CLIENT_GO_DEFAULT_BURST, CLIENT_GO_DEFAULT_QPS, DEFAULT_KUBE_API_BURST, DEFAULT_KUBE_API_QPS,
    Error, Result, build_client, build_client_with, rate_limit_layer,
};
pub use metrics::{
    ClientMetrics, LATENCY_BUCKETS, LatencyLabels, MetricsFuture, MetricsLayer, RequestMetrics,
    RequestResultLabels, ResultCode, Verb,
};
pub use rate_limit::{RateLimit, RateLimitLayer, RateLimiterWait};
pub use token_bucket::TokenBucket;
