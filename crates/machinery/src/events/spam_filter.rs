//! Per source+object spam filter, as client-go's `EventSourceObjectSpamFilter`.

use k8s_openapi::api::core::v1::Event;

use super::keys::{KeyDigest, spam_digest, spam_key};
use crate::client::TokenBucket;
use crate::lru::Lru;

/// Throttles how many events one source may emit about one object: a token bucket per spam key
/// (default: source + involved object), `burst` events at once, refilled at `qps`.
#[derive(Debug)]
pub(crate) struct SpamFilter {
    /// One bucket per spam key's digest, least recently used evicted first.
    buckets: Lru<KeyDigest, TokenBucket>,
    /// Bucket capacity.
    burst: u32,
    /// Bucket refill rate, tokens per second.
    qps: f32,
    /// Builds the key events are throttled by.
    key: fn(&Event) -> String,
}

impl SpamFilter {
    pub(crate) fn new(cache_size: usize, burst: u32, qps: f32, key: fn(&Event) -> String) -> Self {
        Self {
            buckets: Lru::new(cache_size),
            burst,
            qps,
            key,
        }
    }

    /// Buckets remembered.
    #[cfg(test)]
    pub(crate) fn cache_len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether `event` must be dropped (its source+object has no token left).
    pub(crate) fn filter(&mut self, event: &Event) -> bool {
        // The default key's digest comes from its parts, without building the string. Function
        // addresses are not unique, but either branch gives the digest of the same key.
        let key = if std::ptr::fn_addr_eq(self.key, spam_key as fn(&Event) -> String) {
            spam_digest(event)
        } else {
            KeyDigest::of_str(&(self.key)(event))
        };
        let (burst, qps) = (self.burst, self.qps);
        let bucket = self
            .buckets
            .get_or_insert_with(key, || TokenBucket::new(qps, burst));
        !bucket.try_accept()
    }
}
