//! Integration tests of the API server over real HTTPS with `kube` clients: one binary, one module per area.

mod apply;
mod autoscaling;
mod batch;
mod common;
mod components;
mod crud;
mod deletion;
mod discovery;
mod eviction;
mod list;
mod namespaces;
mod openapi;
mod pods;
mod quotas;
mod replication;
mod robustness;
mod scheduling;
mod security;
mod services;
mod sqlite;
mod volumes;
mod watch;
mod workloads;
