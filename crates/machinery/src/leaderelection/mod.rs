//! Lease-based leader election with client-go's algorithm.
//!
//! Start with [`LeaderElector`]: build a [`LeaderElectionConfig`] (kube-controller-manager's
//! defaults: lease 15s, renew deadline 10s, retry 2s) with an identity from [`new_identity`],
//! pick a [`LeaseLock`] ([`KubeLeaseLock`] for a real cluster, [`MemoryLeaseLock`] in tests),
//! and call [`LeaderElector::run`] with [`LeaderCallbacks`]. The elector is a state machine whose
//! only transition function is [`LeaderElector::step`], timed by `tokio::time`.

mod config;
mod elector;
mod error;
mod lease_lock;
mod lock;
mod memory_lock;
mod metrics;
mod record;

pub use config::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, JITTER_FACTOR,
    LeaderElectionConfig, identity_for_host, new_identity,
};
pub use elector::{
    ElectorState, LeaderCallbacks, LeaderElectionStatus, LeaderElector, RunOutcome, Step,
    Transition,
};
pub use error::{Error, Result};
pub use lease_lock::KubeLeaseLock;
pub use lock::LeaseLock;
pub use memory_lock::{Calls, Disconnect, MemoryLeaseLock, MemoryLeaseStore};
pub use metrics::{LeaderElectionMetrics, LeaseNameLabel};
pub use record::LeaderElectionRecord;
