//! A scheduler and simulated nodes for kcm's embedded cluster.
//!
//! Where to start: [`scheduler::select_node`] is the scheduling decision (filters and
//! scoring over a snapshot); [`quantity`] parses resource quantities exactly.

pub mod quantity;
pub mod scheduler;
