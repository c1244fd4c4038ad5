//! The pure decision layer of the Deployment controller, as upstream
//! `pkg/controller/deployment/util` plus the arithmetic of `sync.go`, `rolling.go`,
//! `recreate.go` and `progress.go`.
//!
//! Nothing here talks to the API server or reads the clock: functions take the Deployment,
//! its ReplicaSets (and `now` where time matters) and return the numbers, names, annotations,
//! conditions and statuses the controller should write.

pub mod accessors;
pub mod annotations;
pub mod cleanup;
pub mod conditions;
pub mod counts;
pub mod find;
pub mod hash;
pub mod new_replica_set;
pub mod progress;
pub mod recreate;
pub mod rollback;
pub mod rolling;
pub mod scale;
pub mod sort;
pub mod status;
pub mod strategy;
pub mod template;

#[cfg(test)]
mod test_support;
