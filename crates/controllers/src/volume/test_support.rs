//! Drives a storage controller's queue in unit tests, as upstream's tests do: process what is queued, and while fewer calls than expected were made, let paused time run on so rate-limited retries come back.

use std::future::Future;
use std::time::Duration;

use super::client::FakeStorageClient;

/// Calls `turn` until it reports nothing left to process; repeats, advancing paused time by
/// 100 ms between rounds, until `client` has received `want` calls (or 200 rounds passed, the
/// upstream loop's timeout). `turn` returns whether it processed an item.
pub(crate) async fn run_until<F, Fut>(client: &FakeStorageClient, want: usize, mut turn: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..200 {
        while turn().await {}
        if client.actions().len() >= want {
            return;
        }
        tokio::time::advance(Duration::from_millis(100)).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }
}
