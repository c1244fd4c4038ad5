//! Cache freshness: the resourceVersion an informer's cache has reached, and waiting for one.
//!
//! client-go (before 1.36) gives a controller no way to tell whether its cache already
//! reflects a write it just made; controllers work around it with expectations. Here every
//! informer records the resourceVersion up to which its cache has *processed* events (popped
//! from the DeltaFIFO into the indexer and handed to the handlers), and a controller can wait
//! for the resourceVersion its own write returned.
//!
//! resourceVersions are opaque strings in the Kubernetes API, but every real store (etcd, and
//! kcm's SQLite store) issues them as increasing decimal integers; this module compares them
//! as such. A resourceVersion that is not a decimal integer is rejected by
//! [`Freshness::wait_for_resource_version`] and never advances the reached version.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why waiting for a resourceVersion failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The resourceVersion is not a decimal integer.
    #[error("resourceVersion {resource_version:?} is not a decimal integer")]
    InvalidResourceVersion {
        /// The offending value.
        resource_version: String,
    },
    /// The informer stopped before its cache reached the resourceVersion.
    #[error("informer stopped before its cache reached resourceVersion {resource_version}")]
    Stopped {
        /// The resourceVersion waited for.
        resource_version: u64,
    },
}

/// Parses a resourceVersion as the decimal integer every Kubernetes store issues.
pub fn parse_resource_version(resource_version: &str) -> Result<u64> {
    let invalid = || Error::InvalidResourceVersion {
        resource_version: resource_version.to_owned(),
    };
    if resource_version.is_empty() || !resource_version.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    resource_version.parse().map_err(|_| invalid())
}

/// State shared by a tracker's clones. `advance` runs once per processed delta on the
/// informer's hot path, so it is a few atomics; waiters park on `notify`.
#[derive(Debug, Default)]
struct Shared {
    /// The highest resourceVersion processed, plus one; 0 while nothing is. Only grows.
    reached: AtomicU64,
    /// Set when the informer stops: nothing will advance any more.
    closed: AtomicBool,
    /// How many `wait_for` calls are parked or about to park; `advance` skips the wake-up
    /// when there are none.
    waiters: AtomicUsize,
    notify: Notify,
}

/// The resourceVersion an informer's cache has reached. Cheap to clone; clones share state.
#[derive(Clone, Debug, Default)]
pub struct Freshness {
    shared: Arc<Shared>,
}

/// Decrements the waiter count when a wait ends (or is dropped).
struct WaiterGuard<'a>(&'a AtomicUsize);

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Freshness {
    /// A tracker that has reached nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The highest resourceVersion the cache has processed, if any.
    pub fn resource_version(&self) -> Option<u64> {
        self.shared.reached.load(Ordering::SeqCst).checked_sub(1)
    }

    /// Records that the cache has processed everything up to `resource_version`. Never goes
    /// back: a smaller value (a relist served from a lagging cache) is ignored.
    pub(crate) fn advance(&self, resource_version: u64) {
        let new = resource_version.saturating_add(1);
        let previous = self.shared.reached.fetch_max(new, Ordering::SeqCst);
        // SeqCst pairs with `wait_for`: a waiter that read the old value had already
        // registered itself, so it is counted here and woken.
        if new > previous && self.shared.waiters.load(Ordering::SeqCst) > 0 {
            self.shared.notify.notify_waiters();
        }
    }

    /// Marks the informer stopped: pending and future waits that are not already satisfied
    /// fail with [`Error::Stopped`].
    pub(crate) fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.notify.notify_waiters();
    }

    /// Returns once the cache has processed an event (or bookmark) at or past
    /// `resource_version`, compared as decimal integers.
    pub async fn wait_for_resource_version(&self, resource_version: &str) -> Result<()> {
        let target = parse_resource_version(resource_version)?;
        self.wait_for(target).await
    }

    /// As [`Self::wait_for_resource_version`] with an already parsed resourceVersion.
    pub async fn wait_for(&self, target: u64) -> Result<()> {
        let shared = &*self.shared;
        shared.waiters.fetch_add(1, Ordering::SeqCst);
        let _guard = WaiterGuard(&shared.waiters);
        loop {
            let mut notified = pin!(shared.notify.notified());
            notified.as_mut().enable();
            if self.resource_version().is_some_and(|rv| rv >= target) {
                return Ok(());
            }
            if shared.closed.load(Ordering::SeqCst) {
                return Err(Error::Stopped {
                    resource_version: target,
                });
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn parse_accepts_only_decimal_integers() {
        assert_eq!(parse_resource_version("42"), Ok(42));
        for bad in ["", "-1", "1a", " 1", "99999999999999999999999"] {
            assert!(parse_resource_version(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn advance_never_goes_back() {
        let f = Freshness::new();
        assert_eq!(f.resource_version(), None);
        f.advance(10);
        f.advance(9);
        assert_eq!(f.resource_version(), Some(10));
    }

    #[tokio::test(start_paused = true)]
    async fn wait_returns_once_reached_and_compares_numerically() {
        let f = Freshness::new();
        f.advance(9);
        // "10" > "9" numerically though not lexically.
        let waiter = tokio::spawn({
            let f = f.clone();
            async move { f.wait_for_resource_version("10").await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiter.is_finished());
        f.advance(11);
        assert_eq!(waiter.await.expect("join"), Ok(()));
        // Already reached: immediate.
        assert_eq!(f.wait_for_resource_version("11").await, Ok(()));
        assert!(matches!(
            f.wait_for_resource_version("abc").await,
            Err(Error::InvalidResourceVersion { .. })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn close_fails_pending_waits() {
        let f = Freshness::new();
        f.advance(5);
        let waiter = tokio::spawn({
            let f = f.clone();
            async move { f.wait_for(6).await }
        });
        tokio::task::yield_now().await;
        f.close();
        assert_eq!(
            waiter.await.expect("join"),
            Err(Error::Stopped {
                resource_version: 6
            })
        );
        assert_eq!(f.wait_for(5).await, Ok(()));
    }
}
