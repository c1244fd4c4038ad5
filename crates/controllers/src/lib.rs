//! kube-controller-manager's controllers, built on `kcm-machinery`.

pub mod deployment;
pub mod replicaset;
