//! What the EndpointSlice and EndpointSlice mirroring controllers share about the slices they write: the slice cache's index by Service, the slices' `generateName`, and the queue's slow rate limiter (upstream's `endpointslice` util package and the two controllers' identical `workqueue` set-ups).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kcm_machinery::informer::index::{IndexFunc, Indexers};
use kcm_machinery::labels::is_dns1123_subdomain;
use kcm_machinery::workqueue::RateLimiter;
use kcm_machinery::workqueue::limiters::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter,
};

use super::service_controller_key;

/// The slice cache's index by `namespace/<kubernetes.io/service-name>`: a sync finds its
/// Service's slices without scanning the namespace.
pub const SERVICE_NAME_INDEX: &str = "serviceName";

/// The first retry delay of a failed sync: much slower than the default 5ms, because a
/// sync may write many slices.
pub const SYNC_BACKOFF_BASE: Duration = Duration::from_secs(1);

/// The queue's rate limiter, as upstream's: per-item exponential from 1s to `max_backoff`,
/// with an overall 10 qps / 100 burst bucket.
pub fn slow_rate_limiter(max_backoff: Duration) -> impl RateLimiter<String> {
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            SYNC_BACKOFF_BASE,
            max_backoff,
        )),
        Box::new(BucketRateLimiter::new(10.0, 100)),
    ])
}

/// The slice cache's [`SERVICE_NAME_INDEX`] function.
pub fn service_name_index() -> Indexers<EndpointSlice> {
    let mut indexers: Indexers<EndpointSlice> = Indexers::new();
    let by_service: IndexFunc<EndpointSlice> =
        Arc::new(|slice: &EndpointSlice| service_controller_key(slice).into_iter().collect());
    indexers.insert(SERVICE_NAME_INDEX.to_owned(), by_service);
    indexers
}

/// The `generateName` of a Service's slices: `<name>-`, or `<name>` when the dash would make
/// an invalid name, as upstream's `getEndpointSlicePrefix`.
pub fn endpoint_slice_prefix(service_name: &str) -> String {
    let prefix = format!("{service_name}-");
    // Upstream validates the prefix as a generateName (a trailing dash is fine, length is not).
    let candidate = format!("{service_name}-a");
    if candidate.len() <= 253 && is_dns1123_subdomain(&candidate) {
        prefix
    } else {
        service_name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_is_the_name_and_a_dash_unless_too_long() {
        assert_eq!(endpoint_slice_prefix("web"), "web-");
        let long = "a".repeat(253);
        assert_eq!(endpoint_slice_prefix(&long), long);
    }
}
