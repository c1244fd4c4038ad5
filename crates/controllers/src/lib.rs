//! kube-controller-manager's controllers, built on `kcm-machinery`.

pub mod manager;
pub mod replicaset;
