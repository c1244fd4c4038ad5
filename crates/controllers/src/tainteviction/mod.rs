//! The taint eviction controller (`taint-eviction-controller`), as kube-controller-manager's.
//!
//! Where to start: [`TaintEvictionController`] watches NoExecute taints on nodes and pods'
//! tolerations ([`tolerations`]), and schedules each pod's deletion in a
//! [`timed_workers::TimedWorkerQueue`] — now when a taint is not tolerated, after the
//! shortest `tolerationSeconds` otherwise, cancelled when the taint goes first.

pub mod controller;
pub mod metrics;
pub mod timed_workers;
pub mod tolerations;

#[cfg(test)]
mod controller_tests;

pub use controller::{CONTROLLER_NAME, TaintEvictionController};
pub use metrics::TaintEvictionMetrics;
