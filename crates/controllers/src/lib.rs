//! kube-controller-manager's controllers, built on `kcm-machinery`.
//!
//! Where to start: [`manager`] is the controller manager (`kcm run`): flags, the controller
//! registry, leader election, health and metrics. Each controller lives in its own module
//! ([`replicaset`], [`replication`], [`deployment`], [`daemon`], [`statefulset`],
//! [`garbagecollector`], [`namespace`], [`nodelifecycle`], [`serviceaccount`],
//! [`tainteviction`], [`job`], [`cronjob`], [`ttl`], [`ttlafterfinished`], [`podgc`], [`resourcequota`], [`resourceclaim`], [`devicetainteviction`], [`disruption`], the storage controllers under [`volume`]) with `new(...)`
//! and `run(...)`. The [`job`] and [`cronjob`] modules also hold their decision layers as pure
//! functions beside the controllers.

pub mod bootstrap;
pub mod certificates;
pub mod cloud;
pub mod cloudnodelifecycle;
pub mod clusterroleaggregation;
pub mod cronjob;
pub mod daemon;
pub mod deployment;
pub mod devicetainteviction;
pub mod disruption;
pub mod endpoint;
pub mod endpointslice;
pub mod endpointslicemirroring;
pub mod endpointsliceutil;
pub mod evictionmetrics;
pub mod garbagecollector;
pub mod job;
pub mod jobutil;
pub mod manager;
pub mod namespace;
pub mod nodeipam;
pub mod nodelifecycle;
pub mod podautoscaler;
pub mod podgc;
pub mod replicaset;
pub mod replication;
pub mod resourceclaim;
pub mod resourcequota;
pub mod rootcacertpublisher;
pub mod serviceaccount;
pub mod servicecidrs;
pub mod servicelb;
pub mod statefulset;
pub mod tainteviction;
pub mod ttl;
pub mod ttlafterfinished;
pub mod validatingadmissionpolicystatus;
pub mod volume;
