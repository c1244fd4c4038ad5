//! A scheduler and simulated nodes for kcm's embedded cluster.
//!
//! Where to start: [`scheduler::select_node`] is the scheduling decision (filters and
//! scoring over a snapshot); [`kubelet::decide`] is the simulated kubelet's pod lifecycle;
//! [`node`] builds the Node and Lease objects simulated nodes register; [`ipam`] hands out
//! pod IPs; [`quantity`] parses resource quantities exactly. [`client::ClusterClient`] is the
//! seam every API call goes through.

pub mod client;
pub mod fake;
pub mod ipam;
pub mod kubelet;
pub mod node;
pub mod quantity;
pub mod scheduler;

pub use scheduler::{Scheduler, SchedulerConfig};
