//! A scheduler and simulated nodes for kcm's embedded cluster.
//!
//! Where to start: [`scheduler::select_node`] is the scheduling decision (filters and
//! scoring over a snapshot); [`kubelet::decide`] is the simulated kubelet's pod lifecycle;
//! [`node`] builds the Node and Lease objects simulated nodes register; [`ipam`] hands out
//! pod IPs; [`quantity`] parses resource quantities exactly.
//!
//! The running parts: [`Scheduler`] binds pending pods (informers, an incremental cache with
//! assumed pods, a work queue with back-off); [`Simulator`] registers simulated nodes, keeps
//! their Leases and statuses fresh and drives the pods bound to them. Both talk to the API
//! through [`client::ClusterClient`]; [`fake::FakeCluster`] is an in-memory cluster for tests.

pub mod client;
pub mod dra;
pub mod fake;
pub mod ipam;
pub mod kubelet;
pub mod logs;
pub mod node;
pub mod quantity;
pub mod scheduler;
pub mod simulator;
pub mod storage;
pub mod usage;

pub use scheduler::{Scheduler, SchedulerConfig};
pub use simulator::{Simulator, SimulatorConfig};

/// The resync period of every handler the scheduler, the nodes and the provisioner register:
/// none. They react to changes only, whatever the default of the factory they are given (in
/// `kcm up` that is the controller manager's, which resyncs its own handlers every 12-24 h).
pub(crate) const NO_RESYNC: std::time::Duration = std::time::Duration::ZERO;
