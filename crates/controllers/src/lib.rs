//! kube-controller-manager's controllers, built on `kcm-machinery`.
//!
//! Where to start: [`manager`] is the controller manager (`kcm run`): flags, the controller
//! registry, leader election, health and metrics. Each controller lives in its own module
//! ([`replicaset`], [`deployment`], [`garbagecollector`], [`namespace`], [`nodelifecycle`],
//! [`serviceaccount`], [`tainteviction`]) with `new(...)` and `run(workers, cancel)`. [`job`] and
//! [`cronjob`] hold the decision layer (pure functions) of the Job and CronJob controllers.

pub mod cronjob;
pub mod deployment;
pub mod endpoint;
pub mod endpointslice;
pub mod endpointslicemirroring;
pub mod endpointsliceutil;
pub mod garbagecollector;
pub mod job;
pub mod manager;
pub mod namespace;
pub mod nodeipam;
pub mod nodelifecycle;
pub mod replicaset;
pub mod rootcacertpublisher;
pub mod serviceaccount;
pub mod tainteviction;
