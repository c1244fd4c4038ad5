//! The work queue: fair, de-duplicating, delaying and rate-limited (client-go `util/workqueue`).
//!
//! Controllers' event handlers add keys; workers take them out, reconcile, and either
//! [`forget`](RateLimitingQueue::forget) them on success or
//! [`add_rate_limited`](RateLimitingQueue::add_rate_limited) them on failure, and always call
//! [`done`](Queue::done). Three layers, each wrapping the one before (and dereferencing to it,
//! as client-go's interfaces embed each other):
//! - [`Queue`]: the basic queue.
//! - [`DelayingQueue`]: adds [`add_after`](DelayingQueue::add_after), a timer heap.
//! - [`RateLimitingQueue`]: adds per-item back-off from a [`RateLimiter`] ([`limiters`]).
//!
//! The queue promises, as client-go's:
//! - **Fair**: items are handed out in the order they were added (became dirty).
//! - **Stingy**: an item is never processed by two workers at once, and an item added many
//!   times before a worker takes it is processed once. An item added while it is being
//!   processed is queued again when its worker calls `done`, so the change is not lost.
//! - **Many producers and consumers**: every handle is a cheap clone of one shared queue;
//!   `add` never blocks on consumers and `get` waits without spinning.
//! - **Shutdown**: after [`shut_down`](Queue::shut_down) adds are ignored and `get` returns
//!   `None` once the queued items are handed out;
//!   [`shut_down_with_drain`](Queue::shut_down_with_drain) also waits for the items being
//!   processed to be `done`.
//!
//! Time comes from `tokio::time`, so tests pause and advance it. Metrics are recorded per
//! named queue into a shared [`WorkqueueMetrics`].
//!
//! ```
//! # use std::time::Duration;
//! # use kcm_machinery::workqueue::{RateLimitingQueue, default_controller_rate_limiter};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let queue = RateLimitingQueue::new(default_controller_rate_limiter());
//! queue.add("default/web".to_string());
//! while let Some(key) = queue.get().await {
//!     let synced: Result<(), ()> = Ok(()); // sync(&key)
//!     match synced {
//!         Ok(()) => queue.forget(&key),
//!         Err(()) => queue.add_rate_limited(key.clone()),
//!     }
//!     queue.done(&key);
//!     # queue.shut_down();
//! }
//! # }
//! ```

mod delaying;
pub mod limiters;
mod metrics;
mod queue;
mod rate_limiting;

pub use delaying::DelayingQueue;
pub use limiters::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, RateLimiter, WithMaxWaitRateLimiter, default_controller_rate_limiter,
    default_item_based_rate_limiter,
};
pub use metrics::{DURATION_BUCKETS, UNFINISHED_WORK_UPDATE_PERIOD, WorkqueueMetrics};
pub use queue::{Queue, QueueConfig};
pub use rate_limiting::RateLimitingQueue;
